#!/usr/bin/env bash
# What a lock cycle through the gateway costs Redis, for several builds side by side in one run.
#
# Starts one private redis-server pinned to CPU 0 and, for each round and each build in turn
# (pinned to the other CPU), a gateway on it and a wrk lock-cycle load (bench/lock_cycle.lua:
# POST a unique name, then DELETE it with its token) for SECONDS; prints the load's requests/s,
# Redis's `EVALSHA` time per call (`INFO commandstats`, usec_per_call) and Redis's CPU time
# (`INFO cpu`, user + sys) per lock cycle. Builds alternate within each round, so that drift
# of the machine falls on all of them alike.
#
# Usage: bench/redis-cycle.sh [--rounds N] [--seconds S] BINARY...
# Example, the build of 2e0d1bb next to this tree's:
#   git worktree add /tmp/before 2e0d1bb && (cd /tmp/before && cargo build --release --bin lockgate)
#   cargo build --release --bin lockgate
#   bench/redis-cycle.sh /tmp/before/target/release/lockgate target/release/lockgate
# Needs: redis-server, redis-cli, wrk, curl, taskset (util-linux).
set -euo pipefail
cd "$(dirname "$0")/.."
ROUNDS=3
SECONDS_PER_RUN=5
BUILDS=()
while [ $# -gt 0 ]; do
    case "$1" in
    --rounds) ROUNDS=$2; shift ;;
    --seconds) SECONDS_PER_RUN=$2; shift ;;
    *) BUILDS+=("$(realpath "$1")") ;;
    esac
    shift
done
[ ${#BUILDS[@]} -gt 0 ] || { echo "usage: bench/redis-cycle.sh [--rounds N] [--seconds S] BINARY..." >&2; exit 1; }
for tool in redis-server redis-cli wrk curl taskset; do
    command -v "$tool" >/dev/null || { echo "error: $tool is not installed" >&2; exit 1; }
done

# shellcheck source=bench/lib.sh
. bench/lib.sh
start_work
REDIS_PORT=$(free_port)
cpus=$(nproc)
taskset -c 0 redis-server --port "$REDIS_PORT" --bind 127.0.0.1 --save "" --appendonly no \
    --dir "$WORK" --logfile "$WORK/redis.log" &
PIDS+=($!)
until redis-cli -p "$REDIS_PORT" ping >/dev/null 2>&1; do sleep 0.05; done
redis_cpu() { redis-cli -p "$REDIS_PORT" info cpu | awk -F: '/^used_cpu_(user|sys):/ {s += $2} END {printf "%.6f", s}'; }

printf "%-6s %-40s %12s %18s %22s\n" round build "requests/s" "EVALSHA µs/call" "Redis CPU µs/cycle"
for round in $(seq "$ROUNDS"); do
    for build in "${BUILDS[@]}"; do
        redis-cli -p "$REDIS_PORT" flushall >/dev/null
        port=$(free_port)
        taskset -c "$((cpus > 1 ? 1 : 0))" "$build" --redis-url "redis://127.0.0.1:$REDIS_PORT" \
            --listen "127.0.0.1:$port" 2>"$WORK/gateway.log" &
        gateway=$!
        until curl -fs "http://127.0.0.1:$port/readyz" >/dev/null 2>&1; do sleep 0.05; done
        redis-cli -p "$REDIS_PORT" config resetstat >/dev/null
        before=$(redis_cpu)
        wrk -t1 -c32 -d"${SECONDS_PER_RUN}s" -s bench/lock_cycle.lua "http://127.0.0.1:$port" >"$WORK/wrk.txt"
        after=$(redis_cpu)
        rps=$(awk '/Requests\/sec/ {print $2}' "$WORK/wrk.txt")
        evalsha=$(redis-cli -p "$REDIS_PORT" info commandstats | sed -n 's/^cmdstat_evalsha:.*usec_per_call=\([0-9.]*\).*/\1/p')
        cycle=$(awk -v a="$before" -v b="$after" -v r="$rps" -v d="$SECONDS_PER_RUN" 'BEGIN { printf "%.2f", (b - a) * 1e6 / (r * d / 2) }')
        printf "%-6s %-40s %12s %18s %22s\n" "$round" "$build" "$rps" "$evalsha" "$cycle"
        kill "$gateway"
        wait "$gateway" 2>/dev/null || true
    done
done
