#!/usr/bin/env bash
# What prefix streams cost the shared Redis and the gateway (issue 49): for each count N, a
# gateway (release build, against a private redis-server pinned to one CPU) with N clients
# watching N *distinct* prefixes (`GET /locks/events?prefix=deploy:<i>`, SSE, each having read
# its stream's head), then 4,000 acquires of other names through the gateway. Prints the
# gateway's RSS, its growth per stream, the Redis pattern subscriptions open (`PUBSUB
# NUMPAT`) and Redis's CPU per acquire script (`INFO commandstats`, usec_per_call of EVALSHA).
#
# Usage: bench/prefix-watchers.sh [counts, default "0 100 10000"]
# LOCKGATE_BIN=path runs that binary instead of building target/release/lockgate (to measure
# a build before a change next to the one after).
# Needs: redis-server, redis-cli, python3, curl, taskset.
set -euo pipefail
cd "$(dirname "$0")/.."
COUNTS="${*:-0 100 10000}"
ulimit -n "$(ulimit -Hn)"
# shellcheck source=bench/lib.sh
. bench/lib.sh
lockgate_bin
start_work
for n in $COUNTS; do
    REDIS_PORT=$(free_port)
    taskset -c 0 redis-server --port "$REDIS_PORT" --bind 127.0.0.1 --save "" --appendonly no \
        --dir "$WORK" --logfile "$WORK/redis.log" &
    REDIS=$!
    until redis-cli -p "$REDIS_PORT" ping >/dev/null 2>&1; do sleep 0.05; done
    GPORT=$(free_port)
    taskset -c 1 "$BIN" --redis-url "redis://127.0.0.1:$REDIS_PORT" --listen "127.0.0.1:$GPORT" \
        --max-watchers 20000 2>"$WORK/gateway.log" &
    GATEWAY=$!
    for _ in $(seq 100); do curl -fs "http://127.0.0.1:$GPORT/readyz" >/dev/null && break; sleep 0.1; done
    python3 - "$GPORT" "$n" "$GATEWAY" "$REDIS_PORT" <<'PY'
import asyncio, subprocess, sys
port, n, pid, redis_port = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3], sys.argv[4]

def rss():
    for line in open(f"/proc/{pid}/status"):
        if line.startswith("VmRSS"):
            return int(line.split()[1])

def redis(*args):
    return subprocess.run(["redis-cli", "-p", redis_port, *args], capture_output=True,
                          text=True, check=True).stdout

async def watch(prefix):
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    writer.write(f"GET /locks/events?prefix={prefix} HTTP/1.1\r\nHost: localhost\r\n\r\n".encode())
    await writer.drain()
    head = await reader.readuntil(b"\r\n\r\n")
    assert b" 200 " in head.split(b"\r\n")[0], head
    return reader, writer

async def acquire_load(total, connections=8):
    async def worker(k):
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        for i in range(k, total, connections):
            body = b'{"ttl_ms":2000}'
            writer.write(f"POST /locks/load:{i} HTTP/1.1\r\nHost: localhost\r\n"
                         f"Content-Type: application/json\r\nContent-Length: {len(body)}\r\n\r\n"
                         .encode() + body)
            await writer.drain()
            head = await reader.readuntil(b"\r\n\r\n")
            assert b" 201 " in head.split(b"\r\n")[0], head
            length = next(int(l.split(b":")[1]) for l in head.split(b"\r\n")
                          if l.lower().startswith(b"content-length"))
            await reader.readexactly(length)
        writer.close()
    await asyncio.gather(*(worker(k) for k in range(connections)))

async def main():
    base = rss()
    streams = []
    for i in range(0, n, 200):
        streams += await asyncio.gather(*(watch(f"deploy:{j}") for j in range(i, min(n, i + 200))))
    await asyncio.sleep(2)
    now = rss()
    numpat = redis("pubsub", "numpat").strip()
    redis("config", "resetstat")
    await acquire_load(4000)
    stats = redis("info", "commandstats")
    line = next(l for l in stats.splitlines() if l.startswith("cmdstat_evalsha:"))
    per_call = dict(kv.split("=") for kv in line.split(":", 1)[1].split(","))["usec_per_call"]
    growth = f"{(now - base) / n:.1f} KiB per stream" if n else "-"
    print(f"| {n} | {now / 1024:.1f} MiB | {growth} | {numpat} | {per_call} µs |", flush=True)
    for _, writer in streams:
        writer.close()

asyncio.run(main())
PY
    kill "$GATEWAY" "$REDIS"
    wait "$GATEWAY" "$REDIS" 2>/dev/null || true
done
