#!/usr/bin/env bash
# What a lock operation costs Redis, next to a raw `SET key token NX PX`, in one run.
#
# Starts a private server (redis-server, or valkey-server with --valkey) pinned to one CPU and
# runs examples/redis_ceiling.rs pinned to another: pipelined over one connection from 256
# tasks, the raw SET NX PX, then lockgate's acquire, renew and release exactly as lockgate sends
# them (scripts, or native commands where the server has them; --lua forces scripts). Prints
# ops/s and Redis CPU µs per operation for each, and their ratios to SET NX PX. Three rounds.
#
# Usage: bench/redis-ceiling.sh [--valkey] [--lua] [operations per phase, default 300000]
# Needs: redis-server (or valkey-server on PATH, e.g. from scripts/test.sh's target/tools/bin),
# taskset (util-linux).
set -euo pipefail
cd "$(dirname "$0")/.."
server=redis-server
native=auto
count=300000
for arg in "$@"; do
    case "$arg" in
    --valkey) server=valkey-server ;;
    --lua) native=off ;;
    *) count=$arg ;;
    esac
done
[ -d target/tools/bin ] && PATH="$PWD/target/tools/bin:$PATH"
command -v "$server" >/dev/null || { echo "error: $server is not installed (scripts/test.sh fetches valkey-server into target/tools/bin)" >&2; exit 1; }

# shellcheck source=bench/lib.sh
. bench/lib.sh
start_work
PORT=$(free_port)

cargo build --release --locked --quiet --example redis_ceiling
cpus=$(nproc)
pin_server=(taskset -c 0)
pin_client=(taskset -c "$((cpus > 1 ? 1 : 0))")
"${pin_server[@]}" "$server" --port "$PORT" --bind 127.0.0.1 --save "" --appendonly no \
    --dir "$WORK" --logfile "$WORK/server.log" &
PIDS+=($!)
until redis-cli -p "$PORT" ping >/dev/null 2>&1; do sleep 0.05; done

for round in 1 2 3; do
    redis-cli -p "$PORT" flushall >/dev/null
    echo "== round $round"
    "${pin_client[@]}" ./target/release/examples/redis_ceiling "redis://127.0.0.1:$PORT" "$count" --native "$native"
done
