#!/usr/bin/env bash
# Two builds of lockgate side by side in one run, against one private redis-server:
#   * lock-cycle throughput (wrk, bench/lock_cycle.lua, 64 connections), the builds alternating
#     for ROUNDS rounds, with the floor (examples/floor, the HTTP stack alone) in each round so
#     the ratio to the floor is read from the same minutes;
#   * idle RSS of each, just started and after one request;
#   * RSS with WAITERS clients waiting for one held lock, arriving 10, 100 and 500 at a time
#     (examples/waiters), each figure from a fresh process, the builds alternating.
#
# Usage: bench/compare.sh BEFORE_BINARY AFTER_BINARY [rounds, default 3] [seconds per wrk run,
#        default 8] [waiting clients, default 10000; 0 skips the waiting part]
# Example, a build of an older commit against this tree's:
#   git worktree add /tmp/before <commit> && (cd /tmp/before && cargo build --release --bin lockgate)
#   cargo build --release --bin lockgate && bench/compare.sh /tmp/before/target/release/lockgate target/release/lockgate
# Needs: redis-server, redis-cli, wrk, python3, curl.
set -euo pipefail
cd "$(dirname "$0")/.."
BEFORE="$(realpath "$1")"
AFTER="$(realpath "$2")"
ROUNDS="${3:-3}"
DURATION="${4:-8}"
WAITERS="${5:-10000}"

for tool in redis-server redis-cli wrk python3 curl; do
    command -v "$tool" >/dev/null || { echo "error: $tool is not installed" >&2; exit 1; }
done
ulimit -n "$(( WAITERS * 2 > 4096 ? WAITERS * 2 : 4096 ))" 2>/dev/null || {
    echo "error: need $((WAITERS * 2)) file descriptors per process (ulimit -n)" >&2; exit 1; }

# shellcheck source=bench/lib.sh
. bench/lib.sh
start_work

cargo build --release --locked --quiet --example floor --example waiters

start_redis

# Starts build $1 on a free port; sets GW_PID and GW_PORT.
start_gateway() {
    GW_PORT=$(free_port)
    "$1" --redis-url "redis://127.0.0.1:$REDIS_PORT" --listen "127.0.0.1:$GW_PORT" \
        --max-waiters "$WAITERS" --max-wait 10m 2>>"$WORK/lockgate.log" &
    GW_PID=$!
    PIDS+=("$GW_PID")
    until curl -fs "http://127.0.0.1:$GW_PORT/readyz" >/dev/null 2>&1; do sleep 0.05; done
}
stop() { kill "$1"; wait "$1" 2>/dev/null || true; }

# wrk's lock cycles against port $1, served by process $2: "<requests/s> <µs of the process's
# CPU time (user + system, all threads) per request>"; fails on any unexpected status.
lock_cycles() {
    local out="$WORK/wrk.txt" before after
    before=$(cpu_ticks "$2")
    wrk -t2 -c64 -d"${DURATION}s" -s bench/lock_cycle.lua "http://127.0.0.1:$1" >"$out"
    after=$(cpu_ticks "$2")
    if [ "$(awk '/^unexpected_statuses/ {print $2}' "$out")" != 0 ] || grep -q 'Non-2xx\|Socket errors' "$out"; then
        echo "error: unexpected statuses:" >&2; cat "$out" >&2; exit 1
    fi
    awk -v ticks=$((after - before)) -v hz="$(getconf CLK_TCK)" '
        /^Requests\/sec/ {rps = $2}
        /requests in/ {requests = $1}
        END {printf "%.0f %.2f", rps, ticks / hz * 1e6 / requests}' "$out"
}

FLOOR_PORT=$(free_port)
./target/release/examples/floor "127.0.0.1:$FLOOR_PORT" 1000000 &
FLOOR_PID=$!
PIDS+=("$FLOOR_PID")
until curl -s -o /dev/null "http://127.0.0.1:$FLOOR_PORT/"; do sleep 0.05; done

echo "machine: $(nproc) cores, $(uname -r); $(redis-server --version | cut -d' ' -f3)"
echo "before: $BEFORE ($("$BEFORE" --version))"
echo "after:  $AFTER ($("$AFTER" --version))"
echo
echo "lock cycles, 64 connections, ${DURATION}s per run: requests/s (ratio to the floor of the"
echo "same round), and µs of the process's CPU time per request (ratio to the floor's)"
ROUND_FIGURES=()   # "build rps cpu floor_rps floor_cpu", one per build per round
for round in $(seq "$ROUNDS"); do
    # Alternate which build goes first, so neither always runs on a warmer machine.
    if [ $((round % 2)) = 1 ]; then order="before after"; else order="after before"; fi
    line="round $round:"
    read -r floor floor_cpu <<<"$(lock_cycles "$FLOOR_PORT" "$FLOOR_PID")"
    for which in $order; do
        if [ "$which" = before ]; then bin="$BEFORE"; else bin="$AFTER"; fi
        redis-cli -p "$REDIS_PORT" flushall >/dev/null
        start_gateway "$bin"
        read -r rps cpu <<<"$(lock_cycles "$GW_PORT" "$GW_PID")"
        stop "$GW_PID"
        ROUND_FIGURES+=("$which $rps $cpu $floor $floor_cpu")
        line="$line $which $rps ($(awk -v a="$rps" -v b="$floor" 'BEGIN {printf "%.2f", a / b}')), $cpu µs ($(awk -v a="$cpu" -v b="$floor_cpu" 'BEGIN {printf "%.2f", a / b}'));"
    done
    echo "$line floor $floor, $floor_cpu µs"
done
# The means over the rounds: the ratio is the mean of each round's (each against its own floor).
if [ "$ROUNDS" -gt 0 ]; then
    printf '%s\n' "${ROUND_FIGURES[@]}" | awk -v rounds="$ROUNDS" '
        { rps[$1] += $2; cpu[$1] += $3; ratio[$1] += $3 / $5; floor += $5 / 2 }
        END {
            printf "mean of %d rounds: before %.0f req/s, %.2f µs (%.2f); after %.0f req/s, %.2f µs (%.2f); floor %.2f µs\n",
                rounds, rps["before"] / rounds, cpu["before"] / rounds, ratio["before"] / rounds,
                rps["after"] / rounds, cpu["after"] / rounds, ratio["after"] / rounds, floor / rounds
        }'
fi
stop "$FLOOR_PID"

echo
echo "idle RSS (MiB): just started / after one lock cycle"
for which in before after; do
    if [ "$which" = before ]; then bin="$BEFORE"; else bin="$AFTER"; fi
    start_gateway "$bin"
    started=$(rss_mib "$GW_PID")
    token=$(curl -fs -X POST "http://127.0.0.1:$GW_PORT/locks/idle" | python3 -c 'import json,sys; print(json.load(sys.stdin)["token"])')
    curl -fs -X DELETE -H "lock-token: $token" "http://127.0.0.1:$GW_PORT/locks/idle"
    echo "$which: $started / $(rss_mib "$GW_PID")"
    stop "$GW_PID"
done


[ "$WAITERS" = 0 ] && exit 0
echo
echo "RSS (MiB) with $WAITERS clients waiting, arriving 10 / 100 / 500 at a time"
declare -A RSS
for batch in 10 100 500; do
    for which in before after; do
        if [ "$which" = before ]; then bin="$BEFORE"; else bin="$AFTER"; fi
        redis-cli -p "$REDIS_PORT" flushall >/dev/null
        start_gateway "$bin"
        RSS[$which]="${RSS[$which]:-}$(rss_with_waiters "$GW_PID" "$GW_PORT" "$batch") "
        stop "$GW_PID"
    done
done
echo "before: ${RSS[before]}"
echo "after:  ${RSS[after]}"
