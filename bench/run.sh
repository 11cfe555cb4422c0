#!/usr/bin/env bash
# Benchmarks lockgate's lock cycle against raw Redis and against its own HTTP stack, side by
# side in one run.
#
# Starts a private redis-server, a release build of lockgate and examples/floor (lockgate's
# HTTP stack with no Redis behind it: the "hello ceiling") on free ports, then measures
#   * lockgate: wrk running lock cycles (POST unique name -> DELETE with its token),
#   * the floor: the same wrk load,
#   * redis-benchmark: the raw `SET key token NX PX 30000` on the same Redis,
# at 16 and 64 connections, and prints requests/s, p50 and p99 for each, lockgate's
# requests/s against the floor's, and the Redis CPU time (INFO cpu, user + sys) one lock cycle
# costs against one SET NX PX.
#
# Usage: bench/run.sh [seconds per wrk run, default 10]
# Needs: redis-server, redis-benchmark, wrk (Debian: redis-server redis-tools wrk).
set -euo pipefail
cd "$(dirname "$0")/.."
DURATION="${1:-10}"
OUT=bench/out
mkdir -p "$OUT"

for tool in redis-server redis-benchmark wrk; do
    command -v "$tool" >/dev/null || { echo "error: $tool is not installed (Debian: apt-get install redis-server redis-tools wrk)" >&2; exit 1; }
done

# shellcheck source=bench/lib.sh
. bench/lib.sh
start_work
GW_PORT=$(free_port)
FLOOR_PORT=$(free_port)

cargo build --release --locked --quiet --bin lockgate --example floor

start_redis

./target/release/lockgate --redis-url "redis://127.0.0.1:$REDIS_PORT" \
    --listen "127.0.0.1:$GW_PORT" 2>"$WORK/lockgate.log" &
PIDS+=($!)
until curl -fs "http://127.0.0.1:$GW_PORT/readyz" >/dev/null 2>&1; do sleep 0.05; done
./target/release/examples/floor "127.0.0.1:$FLOOR_PORT" 1000000 &
PIDS+=($!)
until curl -fs -o /dev/null -X DELETE "http://127.0.0.1:$FLOOR_PORT/locks/x" 2>/dev/null; do sleep 0.05; done

# Redis CPU seconds so far (user + sys).
redis_cpu() { redis-cli -p "$REDIS_PORT" info cpu | awk -F: '/^used_cpu_(user|sys):/ {s += $2} END {printf "%.6f", s}'; }

echo "machine: $(nproc) cores, $(uname -r); $(redis-server --version | cut -d' ' -f3); lockgate $(./target/release/lockgate --version | cut -d' ' -f2)"
echo
printf "%-44s %12s %10s %10s\n" "what" "requests/s" "p50 ms" "p99 ms"

# wrk's latency lines look like "     50%  312.00us"; convert to ms.
to_ms() { awk '{ v=$1; if (v ~ /us$/) { sub(/us$/,"",v); v/=1000 } else if (v ~ /ms$/) { sub(/ms$/,"",v) } else if (v ~ /s$/) { sub(/s$/,"",v); v*=1000 }; printf "%.3f", v }'; }

# Runs wrk's lock cycles against the server on port $1 with $2 connections into $3; prints
# requests/s, p50 and p99; fails on any unexpected status.
lock_cycles() {
    wrk -t2 -c"$2" -d"${DURATION}s" --latency -s bench/lock_cycle.lua "http://127.0.0.1:$1" -- "${4:-locks}" >"$3"
    local bad errors
    bad=$(awk '/^unexpected_statuses/ {print $2}' "$3")
    errors=$(awk '/Non-2xx|Socket errors/' "$3")
    if [ "$bad" != 0 ] || [ -n "$errors" ]; then
        echo "error: unexpected statuses at $2 connections:" >&2
        cat "$3" >&2
        exit 1
    fi
    echo "$(awk '/^Requests\/sec/ {print $2}' "$3") $(awk '$1=="50%" {print $2}' "$3" | to_ms) $(awk '$1=="99%" {print $2}' "$3" | to_ms)"
}

declare -A LG_RPS RB_RPS FL_RPS LG_CPU RB_CPU
for conns in 16 64; do
    redis-cli -p "$REDIS_PORT" flushall >/dev/null
    before=$(redis_cpu)
    read -r rps p50 p99 < <(lock_cycles "$GW_PORT" "$conns" "$OUT/wrk-$conns.txt")
    LG_CPU[$conns]=$(awk -v a="$before" -v b="$(redis_cpu)" -v r="$rps" -v d="$DURATION" 'BEGIN { printf "%.3f", (b - a) * 1e6 / (r * d / 2) }')
    LG_RPS[$conns]=$rps
    printf "%-44s %12.0f %10s %10s\n" "lockgate lock cycle, $conns conns (HTTP req)" "$rps" "$p50" "$p99"

    read -r rps p50 p99 < <(lock_cycles "$FLOOR_PORT" "$conns" "$OUT/wrk-floor-$conns.txt")
    FL_RPS[$conns]=$rps
    printf "%-44s %12.0f %10s %10s\n" "floor (HTTP stack, no Redis), $conns conns" "$rps" "$p50" "$p99"

    redis-cli -p "$REDIS_PORT" flushall >/dev/null
    # As many operations as about $DURATION seconds take at ~100k ops/s.
    ops=$((DURATION * 100000))
    before=$(redis_cpu)
    redis-benchmark -p "$REDIS_PORT" -c "$conns" -n "$ops" -r 100000000 --csv \
        SET "lock:__rand_int__" tok NX PX 30000 >"$OUT/redis-benchmark-$conns.csv"
    RB_CPU[$conns]=$(awk -v a="$before" -v b="$(redis_cpu)" -v n="$ops" 'BEGIN { printf "%.3f", (b - a) * 1e6 / n }')
    read -r rb_rps rb_p50 rb_p99 < <(tail -1 "$OUT/redis-benchmark-$conns.csv" | tr -d '"' | awk -F, '{print $2, $5, $7}')
    RB_RPS[$conns]=$rb_rps
    printf "%-44s %12.0f %10s %10s\n" "redis-benchmark SET NX PX, $conns conns" "$rb_rps" "$rb_p50" "$rb_p99"
done

# The other primitives, on the same gateway and Redis, next to the lock's figures above.
declare -A PR_RPS PR_CPU
PRIMITIVES=(semaphores shared multi)
for primitive in "${PRIMITIVES[@]}"; do
    for conns in 16 64; do
        redis-cli -p "$REDIS_PORT" flushall >/dev/null
        before=$(redis_cpu)
        read -r rps p50 p99 < <(lock_cycles "$GW_PORT" "$conns" "$OUT/wrk-$primitive-$conns.txt" "$primitive")
        PR_CPU[$primitive$conns]=$(awk -v a="$before" -v b="$(redis_cpu)" -v r="$rps" -v d="$DURATION" 'BEGIN { printf "%.3f", (b - a) * 1e6 / (r * d / 2) }')
        PR_RPS[$primitive$conns]=$rps
        printf "%-44s %12.0f %10s %10s\n" "$primitive cycle, $conns conns (HTTP req)" "$rps" "$p50" "$p99"
    done
done

echo
for primitive in "${PRIMITIVES[@]}"; do
    for conns in 16 64; do
        awk -v s="${PR_RPS[$primitive$conns]}" -v lg="${LG_RPS[$conns]}" -v sc="${PR_CPU[$primitive$conns]}" -v lc="${LG_CPU[$conns]}" -v c="$conns" -v p="$primitive" 'BEGIN {
            printf "at %d conns: %s cycles / lock cycles = %.2f; Redis CPU per cycle %.2f us (lock cycle %.2f us)\n", c, p, s/lg, sc, lc }'
    done
done
for conns in 16 64; do
    awk -v lg="${LG_RPS[$conns]}" -v rb="${RB_RPS[$conns]}" -v fl="${FL_RPS[$conns]}" \
        -v lc="${LG_CPU[$conns]}" -v rc="${RB_CPU[$conns]}" -v c="$conns" 'BEGIN {
        printf "at %d conns: lockgate / floor requests/s = %.2f; lockgate requests/s / redis SET NX PX ops/s = %.2f (lock cycles/s %.0f); Redis CPU per lock cycle %.2f us / per SET NX PX %.2f us = %.2f\n", c, lg/fl, lg/rb, lg/2, lc, rc, lc/rc }'
done
