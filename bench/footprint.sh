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
# shellcheck source=bench/lib.sh
. bench/lib.sh
start_work

cargo build --release --locked --quiet --bin lockgate
BIN=target/release/lockgate

size=$(stat -c %s "$BIN")
if nm "$BIN" 2>/dev/null | grep -q .; then stripped=no; else stripped=yes; fi
echo "binary: $size bytes ($(awk -v b="$size" 'BEGIN { printf "%.1f MB", b/1e6 }')), stripped: $stripped"

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
    echo "idle RSS, $what: $(rss_mib "$pid") MiB"
}

idle_rss "--dev" --dev
start_redis
idle_rss "redis" --redis-url "redis://127.0.0.1:$REDIS_PORT"
