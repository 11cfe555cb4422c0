#!/usr/bin/env bash
# Benchmarks waiting (issue 3) against a private redis-server and a release build of lockgate:
#   * hand-off latency: 32 clients contend for one name with wait_ms; time from one holder's
#     204 on release to the next holder's 201 (examples/handoff.rs), p50 and p99;
#   * Redis commands per contended acquisition, from INFO commandstats around that run;
#   * memory (RSS) with 10,000 clients waiting at once (examples/waiters.rs), for the gateway
#     and, side by side, for examples/floor.rs: the same HTTP stack holding requests open and
#     doing nothing else. Clients arrive 10, 100 and 500 at a time; each figure is a fresh
#     process.
#
#   * the same on three gateways over one Redis, first come first served per gateway, then in
#     fair mode (`"fair": true`: one queue in Redis for every gateway).
#
# Usage: bench/waiting.sh [seconds of contention, default 10] [waiting clients, default 10000]
# Needs: redis-server, redis-cli, python3, curl.
set -euo pipefail
cd "$(dirname "$0")/.."
SECONDS_RUN="${1:-10}"
WAITERS="${2:-10000}"
OUT=bench/out
mkdir -p "$OUT"

for tool in redis-server redis-cli python3 curl; do
    command -v "$tool" >/dev/null || { echo "error: $tool is not installed" >&2; exit 1; }
done
# Each waiting client is one socket in the server and one in the load generator.
ulimit -n "$(( WAITERS * 2 > 4096 ? WAITERS * 2 : 4096 ))" 2>/dev/null || {
    echo "error: need $((WAITERS * 2)) file descriptors per process (ulimit -n)" >&2; exit 1; }

# shellcheck source=bench/lib.sh
. bench/lib.sh
start_work

cargo build --release --locked --quiet --bin lockgate --example handoff --example waiters --example floor

start_redis

# Starts a gateway on a free port; sets GW_PID and GW_PORT.
start_gateway() {
    GW_PORT=$(free_port)
    ./target/release/lockgate --redis-url "redis://127.0.0.1:$REDIS_PORT" --listen "127.0.0.1:$GW_PORT" \
        --max-waiters "$WAITERS" --max-wait 10m 2>>"$WORK/lockgate.log" &
    GW_PID=$!
    PIDS+=("$GW_PID")
    until curl -fs "http://127.0.0.1:$GW_PORT/readyz" >/dev/null 2>&1; do sleep 0.05; done
}


echo "machine: $(nproc) cores, $(uname -r); $(redis-server --version | cut -d' ' -f3); lockgate $(./target/release/lockgate --version | cut -d' ' -f2)"

# --- hand-off and commands per acquisition ---------------------------------------------
# Runs examples/handoff against the gateways (comma-separated URLs) with its extra arguments,
# and prints its figures and the Redis commands per acquisition around it.
handoff() {
    local label=$1 urls=$2
    shift 2
    redis-cli -p "$REDIS_PORT" config resetstat >/dev/null
    ./target/release/examples/handoff "$urls" 32 "$SECONDS_RUN" "$@" | tee "$OUT/handoff.txt"
    redis-cli -p "$REDIS_PORT" info commandstats >"$OUT/commandstats.txt"
    python3 - "$OUT/handoff.txt" "$OUT/commandstats.txt" "$label" <<'PY'
import re, sys
figures = dict(kv.split("=") for kv in open(sys.argv[1]).read().split())
acquisitions = int(figures["acquisitions"])
calls = {m[0]: int(m[1]) for m in re.findall(r"cmdstat_([^:]+):calls=(\d+)", open(sys.argv[2]).read())}
calls.pop("config|resetstat", None)
# Commands the scripts run inside Redis (counted by commandstats too) versus commands the
# gateway sends: EVALSHA for every operation, (UN)SUBSCRIBE, PING, connection setup.
inside = {"get", "set", "pttl", "pexpire", "del", "time", "publish", "zscore", "zadd", "zrank",
          "zrange", "zrem", "zcard", "hset", "hget", "hincrby", "exists", "hdel", "hmget"}
sent = {k: v for k, v in calls.items() if k not in inside}
label = sys.argv[3]
print(f"{label}: commands per acquisition, sent by the gateway: {sum(sent.values()) / acquisitions:.2f} {sent}")
print(f"{label}: commands per acquisition, including those run inside scripts: {sum(calls.values()) / acquisitions:.2f} "
      f"{ {k: v for k, v in calls.items() if k in inside} }")
PY
}

start_gateway
handoff "one gateway" "http://127.0.0.1:$GW_PORT"
echo "gateway RSS idle: $(rss_mib "$GW_PID") MiB"
URLS="http://127.0.0.1:$GW_PORT"
for _ in 2 3; do
    start_gateway
    URLS="$URLS,http://127.0.0.1:$GW_PORT"
done
handoff "three gateways, first come first served per gateway" "$URLS"
handoff "three gateways, fair" "$URLS" fair
# Stops the three gateways (every process started so far but Redis, the first).
for pid in "${PIDS[@]:1}"; do
    kill "$pid" 2>/dev/null || true
    wait "$pid" 2>/dev/null || true
done
PIDS=("${PIDS[0]}")

# --- memory with many waiting clients --------------------------------------------------
for batch in 10 100 500; do
    redis-cli -p "$REDIS_PORT" flushall >/dev/null
    start_gateway
    gateway=$(rss_with_waiters "$GW_PID" "$GW_PORT" "$batch")
    kill "$GW_PID"; wait "$GW_PID" 2>/dev/null || true

    FLOOR_PORT=$(free_port)
    ./target/release/examples/floor "127.0.0.1:$FLOOR_PORT" "$WAITERS" &
    FLOOR_PID=$!
    PIDS+=("$FLOOR_PID")
    until curl -s -o /dev/null "http://127.0.0.1:$FLOOR_PORT/"; do sleep 0.05; done
    floor=$(rss_with_waiters "$FLOOR_PID" "$FLOOR_PORT" "$batch")
    kill "$FLOOR_PID"; wait "$FLOOR_PID" 2>/dev/null || true

    echo "RSS with $WAITERS waiting clients arriving $batch at a time: gateway $gateway MiB; HTTP stack alone (examples/floor) $floor MiB"
done
