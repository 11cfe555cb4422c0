#!/usr/bin/env bash
# The release binary's footprint: its size on disk (stripped, as built) and the resident
# memory of an idle gateway, with the in-process store and connected to Redis.
#
# "Idle" means: started, one lock cycle and a readiness check served (so the Redis
# connection, the runtime's worker threads and the allocator's arenas exist), then nothing
# for 2 s. RSS is VmRSS from /proc.
#
# Usage: bench/footprint.sh
# Needs: redis-server, curl.
set -euo pipefail
cd "$(dirname "$0")/.."

command -v redis-server >/dev/null || { echo "error: redis-server is not installed" >&2; exit 1; }
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
WORK=$(mktemp -d)
PIDS=()
cleanup() {
    for pid in "${PIDS[@]}"; do kill "$pid" 2>/dev/null; wait "$pid" 2>/dev/null || true; done
    rm -rf "$WORK"
}
trap cleanup EXIT

cargo build --release --locked --quiet --bin lockgate
BIN=target/release/lockgate

size=$(stat -c %s "$BIN")
if nm "$BIN" 2>/dev/null | grep -q .; then stripped=no; else stripped=yes; fi
echo "binary: $size bytes ($(awk -v b="$size" 'BEGIN { printf "%.1f MB", b/1e6 }')), stripped: $stripped"

rss_of() { awk '/^VmRSS/ { printf "%.1f MiB", $2/1024 }' "/proc/$1/status"; }

idle_rss() {
    local what=$1; shift
    local port; port=$(free_port)
    "$BIN" "$@" --listen "127.0.0.1:$port" 2>"$WORK/$what.log" &
    local pid=$!
    PIDS+=("$pid")
    until curl -fs "http://127.0.0.1:$port/readyz" >/dev/null 2>&1; do sleep 0.05; done
    token=$(curl -fs -X POST "http://127.0.0.1:$port/locks/footprint" | python3 -c 'import json,sys; print(json.load(sys.stdin)["token"])')
    curl -fs -X DELETE "http://127.0.0.1:$port/locks/footprint" -H "Lock-Token: $token"
    sleep 2
    echo "idle RSS, $what: $(rss_of "$pid")"
}

idle_rss "--dev" --dev
REDIS_PORT=$(free_port)
redis-server --port "$REDIS_PORT" --bind 127.0.0.1 --save "" --appendonly no --dir "$WORK" \
    --logfile "$WORK/redis.log" &
PIDS+=("$!")
until redis-cli -p "$REDIS_PORT" ping >/dev/null 2>&1; do sleep 0.05; done
idle_rss "redis" --redis-url "redis://127.0.0.1:$REDIS_PORT"
