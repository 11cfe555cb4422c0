#!/usr/bin/env bash
# What clients that only hold or wait make a gateway send Redis (issue 49): a release build
# against a private redis-server (without keyspace notifications, lockgate's default case),
# Redis commands processed per second (`INFO stats` total_commands_processed, over 5 s) while
#   1. one hold stream with ttl_ms 100 is open;
#   2. N waiters (wait_ms 60000) wait on N distinct names held by a client that does nothing.
#
# Usage: bench/idle-cost.sh [N, default 2000]
# LOCKGATE_BIN=path runs that binary instead of building target/release/lockgate.
# Needs: redis-server, redis-cli, python3, curl.
set -euo pipefail
cd "$(dirname "$0")/.."
N="${1:-2000}"
ulimit -n "$(ulimit -Hn)"
# shellcheck source=bench/lib.sh
. bench/lib.sh
lockgate_bin
start_work
start_redis
GPORT=$(free_port)
"$BIN" --redis-url "redis://127.0.0.1:$REDIS_PORT" --listen "127.0.0.1:$GPORT" \
    --max-waiters $(( N * 2 )) --max-concurrent-requests $(( N * 4 )) 2>"$WORK/gateway.log" &
PIDS+=($!)
for _ in $(seq 100); do curl -fs "http://127.0.0.1:$GPORT/readyz" >/dev/null && break; sleep 0.1; done
python3 - "$GPORT" "$N" "$REDIS_PORT" <<'PY'
import asyncio, json, subprocess, sys, time
port, n, redis_port = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3]

def commands():
    out = subprocess.run(["redis-cli", "-p", redis_port, "info", "stats"], capture_output=True,
                         text=True, check=True).stdout
    return int(next(l.split(":")[1] for l in out.splitlines()
                    if l.startswith("total_commands_processed")))

async def rate(label, seconds=5):
    before, t = commands(), time.monotonic()
    await asyncio.sleep(seconds)
    after, elapsed = commands(), time.monotonic() - t
    # The second INFO itself is counted: take it off.
    print(f"{label}: {(after - before - 1) / elapsed:.1f} Redis commands per second", flush=True)

async def request(method, path, body, read_head=True):
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    data = json.dumps(body).encode()
    writer.write(f"{method} {path} HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\n"
                 f"Content-Length: {len(data)}\r\n\r\n".encode() + data)
    await writer.drain()
    return reader, writer

async def main():
    await rate("idle gateway", 3)
    reader, writer = await request("POST", "/locks/idle:hold/hold", {"ttl_ms": 100})
    await reader.readuntil(b'"acquired"')
    await rate("one hold stream, ttl_ms 100")
    writer.close()
    await asyncio.sleep(1)
    held = []
    for i in range(0, n, 200):
        held += await asyncio.gather(*(request("POST", f"/locks/idle:{j}", {"ttl_ms": 600000})
                                       for j in range(i, min(n, i + 200))))
    for reader, _ in held:
        await reader.readuntil(b"\r\n\r\n")
    waiters = []
    for i in range(0, n, 200):
        waiters += await asyncio.gather(*(request("POST", f"/locks/idle:{j}", {"wait_ms": 60000})
                                          for j in range(i, min(n, i + 200))))
    await asyncio.sleep(2)
    await rate(f"{n} waiters on {n} held names")

asyncio.run(main())
PY
