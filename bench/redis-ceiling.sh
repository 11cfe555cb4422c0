#!/usr/bin/env bash
# What a lock operation costs Redis, next to a raw `SET key token NX PX`, in one run.
#
# Starts a private server (redis-server, or valkey-server with --valkey) pinned to one CPU and
# runs examples/redis_ceiling.rs pinned to another: pipelined over one connection from 256
# tasks, the raw SET NX PX, then lockgate's acquire, renew and release exactly as lockgate sends
# them (scripts, or native commands where the server has them; --lua forces scripts). Prints
# ops/s and Redis CPU µs per operation for each, and their ratios to SET NX PX. Three rounds.
#
# With --against BINARY (the examples/redis_ceiling of another build), each round runs that
# build and this one on the same server, alternating which goes first: the side-by-side
# figures of a script change. Build the other one with, e.g.:
#   git worktree add /tmp/before 2e0d1bb
#   (cd /tmp/before && cargo build --release --locked --example redis_ceiling)
#   bench/redis-ceiling.sh --against /tmp/before/target/release/examples/redis_ceiling
#
# Usage: bench/redis-ceiling.sh [--valkey] [--lua] [--against BINARY] [operations per phase,
#        default 300000]
# Needs: redis-server (or valkey-server on PATH, e.g. from scripts/test.sh's target/tools/bin),
# taskset (util-linux).
set -euo pipefail
cd "$(dirname "$0")/.."
server=redis-server
native=auto
count=300000
against=
while [ $# -gt 0 ]; do
    case "$1" in
    --valkey) server=valkey-server ;;
    --lua) native=off ;;
    --against) against=$(realpath "$2"); shift ;;
    *) count=$1 ;;
    esac
    shift
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

this=./target/release/examples/redis_ceiling
builds=("$this")
[ -n "$against" ] && builds=("$against" "$this")
for round in 1 2 3; do
    # Alternate which build goes first, so that neither always meets a warmer server.
    [ $((round % 2)) = 0 ] && [ -n "$against" ] && builds=("$this" "$against")
    [ $((round % 2)) = 1 ] && [ -n "$against" ] && builds=("$against" "$this")
    for build in "${builds[@]}"; do
        redis-cli -p "$PORT" flushall >/dev/null
        label=this
        [ "$build" = "$against" ] && label="against $against"
        echo "== round $round: $label"
        "${pin_client[@]}" "$build" "redis://127.0.0.1:$PORT" "$count" --native "$native"
    done
done
