#!/usr/bin/env bash
# User-space instructions per request, counted by valgrind (callgrind), for two builds of
# lockgate and for the floor (examples/floor). A count, not a time: it does not move with
# the machine's load, so it shows changes of a few percent that bench/compare.sh's CPU times
# (rounds that move by ±10 %) cannot. It leaves out the kernel (system time) and what the
# instructions cost (cache misses): compare.sh stays the measure of CPU time.
#
# Load: CLIENTS clients (bench/cycles.py), each a keep-alive connection doing acquire and
# release cycles on names of its own; counted after a warm-up of 100 cycles each. Under
# valgrind the gateway runs one thread at a time and slowly, so its Redis batches hold fewer
# scripts than under wrk's 64 connections: per-batch costs weigh more here.
#
# Usage: bench/instructions.sh BEFORE_BINARY AFTER_BINARY [cycles per client, default 500]
#        [clients, default 4]
# Needs: valgrind (callgrind_control), redis-server, redis-cli, python3, curl.
set -euo pipefail
cd "$(dirname "$0")/.."
BEFORE="$(realpath "$1")"
AFTER="$(realpath "$2")"
CYCLES="${3:-500}"
CLIENTS="${4:-4}"

for tool in valgrind callgrind_control redis-server redis-cli python3 curl; do
    command -v "$tool" >/dev/null || { echo "error: $tool is not installed" >&2; exit 1; }
done

# shellcheck source=bench/lib.sh
. bench/lib.sh
start_work

cargo build --release --locked --quiet --example floor

start_redis

# Runs $CLIENTS clients of $1 cycles each against port $2, named after $3; fails if one does.
clients() {
    local loads=() i
    for i in $(seq "$CLIENTS"); do
        python3 bench/cycles.py "$2" "$1" "$3$i" &
        loads+=($!)
    done
    for i in "${loads[@]}"; do wait "$i"; done
}

# Instructions per request of the process started by the command "$@", listening on $PORT:
# up once `curl $READY …/readyz` succeeds (READY=-f for the gateway's readiness; empty for the
# floor, whose any answer will do). Counted from after the warm-up to after the load.
count() {
    local out="$WORK/callgrind.out" pid
    rm -f "$out"*
    valgrind --tool=callgrind --callgrind-out-file="$out" "$@" 2>>"$WORK/valgrind.log" &
    pid=$!
    PIDS+=("$pid")
    until curl $READY -s -o /dev/null "http://127.0.0.1:$PORT/readyz" 2>/dev/null; do
        kill -0 "$pid" 2>/dev/null || { echo "error: it did not start: $(tail -3 "$WORK/valgrind.log")" >&2; exit 1; }
        sleep 0.2
    done
    clients 100 "$PORT" warm
    callgrind_control --zero "$pid" >/dev/null 2>&1
    clients "$CYCLES" "$PORT" load
    callgrind_control --dump "$pid" >/dev/null 2>&1
    kill "$pid"
    wait "$pid" 2>/dev/null || true
    local dump
    dump=$(ls -t "$out".* | head -1)
    awk -v requests=$((CLIENTS * CYCLES * 2)) '/^summary:/ {printf "%.0f", $2 / requests}' "$dump"
}

gateway() {
    PORT=$(free_port) READY=-f
    count "$1" --redis-url "redis://127.0.0.1:$REDIS_PORT" --listen "127.0.0.1:$PORT" --worker-threads 1
}

echo "machine: $(nproc) cores, $(uname -r); $(redis-server --version | grep -o 'v=[^ ]*'); $(valgrind --version)"
echo "before: $BEFORE ($("$BEFORE" --version))"
echo "after:  $AFTER ($("$AFTER" --version))"
echo
echo "user-space instructions per request, $CLIENTS clients x $CYCLES lock cycles:"
before=$(gateway "$BEFORE")
after=$(gateway "$AFTER")
# The floor answers any request (404 here) once it listens.
PORT=$(free_port) READY=
floor=$(TOKIO_WORKER_THREADS=1 count ./target/release/examples/floor "127.0.0.1:$PORT" 1000000)
awk -v b="$before" -v a="$after" -v f="$floor" 'BEGIN {
    printf "before %d (%.2f x the floor)\nafter  %d (%.2f x the floor), %+.1f %%\nfloor  %d\n",
        b, b / f, a, a / f, (a - b) * 100 / b, f }'
