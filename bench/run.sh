#!/usr/bin/env bash
# Benchmarks lockgate's lock cycle against raw Redis, side by side in one run.
#
# Starts a private redis-server and a release build of lockgate on free ports, then measures
#   * lockgate: wrk running lock cycles (POST unique name -> DELETE with its token), and
#   * redis-benchmark: the raw `SET key token NX PX 30000` on the same Redis,
# at 16 and 64 connections, and prints requests/s, p50 and p99 for each.
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

free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
REDIS_PORT=$(free_port)
GW_PORT=$(free_port)
WORK=$(mktemp -d)
cleanup() {
    [ -n "${GW_PID:-}" ] && kill "$GW_PID" 2>/dev/null && wait "$GW_PID" 2>/dev/null
    [ -n "${REDIS_PID:-}" ] && kill "$REDIS_PID" 2>/dev/null && wait "$REDIS_PID" 2>/dev/null
    rm -rf "$WORK"
}
trap cleanup EXIT

cargo build --release --locked --quiet

redis-server --port "$REDIS_PORT" --bind 127.0.0.1 --save "" --appendonly no --dir "$WORK" \
    --logfile "$WORK/redis.log" &
REDIS_PID=$!
until redis-cli -p "$REDIS_PORT" ping >/dev/null 2>&1; do sleep 0.05; done

./target/release/lockgate --redis-url "redis://127.0.0.1:$REDIS_PORT" \
    --listen "127.0.0.1:$GW_PORT" 2>"$WORK/lockgate.log" &
GW_PID=$!
until curl -fs "http://127.0.0.1:$GW_PORT/readyz" >/dev/null 2>&1; do sleep 0.05; done

echo "machine: $(nproc) cores, $(uname -r); $(redis-server --version | cut -d' ' -f3); lockgate $(./target/release/lockgate --version | cut -d' ' -f2)"
echo
printf "%-44s %12s %10s %10s\n" "what" "requests/s" "p50 ms" "p99 ms"

# wrk's latency lines look like "     50%  312.00us"; convert to ms.
to_ms() { awk '{ v=$1; if (v ~ /us$/) { sub(/us$/,"",v); v/=1000 } else if (v ~ /ms$/) { sub(/ms$/,"",v) } else if (v ~ /s$/) { sub(/s$/,"",v); v*=1000 }; printf "%.3f", v }'; }

declare -A LG_RPS RB_RPS
for conns in 16 64; do
    redis-cli -p "$REDIS_PORT" flushall >/dev/null
    wrk -t2 -c"$conns" -d"${DURATION}s" --latency -s bench/lock_cycle.lua "http://127.0.0.1:$GW_PORT" >"$OUT/wrk-$conns.txt"
    rps=$(awk '/^Requests\/sec/ {print $2}' "$OUT/wrk-$conns.txt")
    p50=$(awk '$1=="50%" {print $2}' "$OUT/wrk-$conns.txt" | to_ms)
    p99=$(awk '$1=="99%" {print $2}' "$OUT/wrk-$conns.txt" | to_ms)
    bad=$(awk '/^unexpected_statuses/ {print $2}' "$OUT/wrk-$conns.txt")
    errors=$(awk '/Non-2xx|Socket errors/' "$OUT/wrk-$conns.txt")
    if [ "$bad" != 0 ] || [ -n "$errors" ]; then
        echo "error: lockgate answered unexpected statuses at $conns connections:" >&2
        cat "$OUT/wrk-$conns.txt" >&2
        exit 1
    fi
    LG_RPS[$conns]=$rps
    printf "%-44s %12.0f %10s %10s\n" "lockgate lock cycle, $conns conns (HTTP req)" "$rps" "$p50" "$p99"

    redis-cli -p "$REDIS_PORT" flushall >/dev/null
    # As many operations as about $DURATION seconds take at ~100k ops/s.
    redis-benchmark -p "$REDIS_PORT" -c "$conns" -n $((DURATION * 100000)) -r 100000000 --csv \
        SET "lock:__rand_int__" tok NX PX 30000 >"$OUT/redis-benchmark-$conns.csv"
    read -r rb_rps rb_p50 rb_p99 < <(tail -1 "$OUT/redis-benchmark-$conns.csv" | tr -d '"' | awk -F, '{print $2, $5, $7}')
    RB_RPS[$conns]=$rb_rps
    printf "%-44s %12.0f %10s %10s\n" "redis-benchmark SET NX PX, $conns conns" "$rb_rps" "$rb_p50" "$rb_p99"
done

echo
for conns in 16 64; do
    awk -v lg="${LG_RPS[$conns]}" -v rb="${RB_RPS[$conns]}" -v c="$conns" 'BEGIN {
        printf "ratio at %d conns: lockgate requests/s / redis SET NX PX ops/s = %.2f (lock cycles/s: %.0f, ratio %.2f)\n", c, lg/rb, lg/2, lg/2/rb }'
done
