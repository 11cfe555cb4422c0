#!/usr/bin/env bash
# Memory per watcher: RSS of a gateway (release build, against a private redis-server) before
# and with N clients watching one name (GET /locks/{name}/events, SSE), and with N clients
# watching N different names. Prints MiB and KiB per watcher.
#
# Usage: bench/watchers.sh [watchers, default 1000]
# Needs: redis-server, python3, curl; builds target/release/lockgate.
set -euo pipefail
cd "$(dirname "$0")/.."
N="${1:-1000}"
ulimit -n "$(( N * 2 + 1024 ))"
cargo build --release --quiet --bin lockgate
# shellcheck source=bench/lib.sh
. bench/lib.sh
start_work
start_redis
GPORT=$(free_port)
target/release/lockgate --redis-url "redis://127.0.0.1:$REDIS_PORT" --listen "127.0.0.1:$GPORT" \
    --max-watchers $(( N * 2 )) 2>/dev/null &
GATEWAY=$!
PIDS+=("$GATEWAY")
for _ in $(seq 50); do curl -fs "http://127.0.0.1:$GPORT/readyz" >/dev/null && break; sleep 0.1; done
rss() { awk '/VmRSS/ {print $2}' "/proc/$GATEWAY/status"; }
python3 - "$GPORT" "$N" "$GATEWAY" <<'PY'
import asyncio, sys
port, n, pid = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3]

def rss():
    for line in open(f"/proc/{pid}/status"):
        if line.startswith("VmRSS"):
            return int(line.split()[1])

async def watch(name):
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    writer.write(f"GET /locks/{name}/events HTTP/1.1\r\nHost: localhost\r\n\r\n".encode())
    await writer.drain()
    head = await reader.readuntil(b"event: state")
    assert b" 200 " in head.split(b"\r\n")[0], head
    return reader, writer

async def main():
    base = rss()
    for label, names in (("one name", lambda i: "popular"), ("one name each", lambda i: f"w{i}")):
        streams = [await watch(names(i)) for i in range(n)]
        await asyncio.sleep(1)
        now = rss()
        print(f"{n} watchers of {label}: RSS {now / 1024:.1f} MiB (idle {base / 1024:.1f} MiB), "
              f"{(now - base) / n:.1f} KiB per watcher")
        for _, writer in streams:
            writer.close()
        await asyncio.sleep(1)
        base = rss()

asyncio.run(main())
PY
