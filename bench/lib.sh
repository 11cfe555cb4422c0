# Helpers shared by the benchmark scripts (sourced, not run).

free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }

rss_mib() { awk '/^VmRSS/ {printf "%.1f", $2 / 1024}' "/proc/$1/status"; }

# RSS of process $1 (listening on port $2) once $WAITERS clients wait, arriving $3 at a time
# (examples/waiters; the process needs --max-waiters $WAITERS). Uses $WORK for its fifo.
rss_with_waiters() {
    local pid=$1 port=$2 batch=$3 hold="$WORK/hold.$RANDOM" out="$WORK/waiters.$RANDOM"
    mkfifo "$hold"
    ./target/release/examples/waiters "127.0.0.1:$port" "$WAITERS" "$batch" <"$hold" >"$out" &
    local load=$!
    exec 3>"$hold"
    until grep -q ready "$out" 2>/dev/null; do
        kill -0 "$load" 2>/dev/null || { echo "error: the waiting clients failed: $(cat "$out")" >&2; exit 1; }
        sleep 0.2
    done
    rss_mib "$pid"
    exec 3>&-
    wait "$load" || true
}

# CPU time process $1 has used so far, user + system, all threads, in clock ticks.
cpu_ticks() { awk '{print $14 + $15}' "/proc/$1/stat"; }

# A private working directory ($WORK) and the processes started in it ($PIDS): killed, reaped
# and removed when the script exits.
start_work() {
    WORK=$(mktemp -d)
    PIDS=()
    trap stop_work EXIT
}
stop_work() {
    for pid in "${PIDS[@]}"; do kill "$pid" 2>/dev/null || true; done
    wait 2>/dev/null || true
    rm -rf "$WORK"
}

# A private redis-server on a free port ($REDIS_PORT), its files in $WORK; returns once it
# answers.
start_redis() {
    REDIS_PORT=$(free_port)
    redis-server --port "$REDIS_PORT" --bind 127.0.0.1 --save "" --appendonly no --dir "$WORK" \
        --logfile "$WORK/redis.log" &
    PIDS+=($!)
    until redis-cli -p "$REDIS_PORT" ping >/dev/null 2>&1; do sleep 0.05; done
}

# The gateway binary to measure ($BIN): $LOCKGATE_BIN when set (a build before a change, to
# measure it next to the one after), else target/release/lockgate, built now.
lockgate_bin() {
    BIN="${LOCKGATE_BIN:-}"
    if [ -z "$BIN" ]; then
        cargo build --release --locked --quiet --bin lockgate
        BIN=target/release/lockgate
    fi
}
