#!/usr/bin/env bash
# What Redis executes for lockgate's acquire script, counted in instructions (callgrind), for
# several versions of the script side by side: repeatable to a fraction of a per cent where
# timings here move by 10-25 % between rounds.
#
# For each run and each SCRIPT in turn: a private redis-server under
# `valgrind --tool=callgrind`, the script loaded, CALLS `EVALSHA` of it on fresh keys
# (redis-benchmark, pipelined by 32, random names), the server shut down; prints the whole
# run's instructions (callgrind's `summary:`). A server with no call executes about 147
# million; subtract that and divide by CALLS for one acquire.
#
# Each script is called with 3 keys (the lock, the slot counter, a third per name: the fair
# queue today, the old per-name counter in 2e0d1bb's) and 2 arguments (stem, ttl), as a plain
# acquire without a claim or holder. A script is a file; a version's whole script is what
# src/backend/redis/scripts.rs concatenates for ACQUIRE, e.g.:
#   git show 2e0d1bb:src/backend/scripts/acquire.lua > /tmp/acquire-2e0d1bb.lua
#   bench/acquire-instructions.sh /tmp/acquire-2e0d1bb.lua src/backend/scripts/acquire.lua
#
# With --fair, the scripts are fair acquires (FAIR_ACQUIRE: grant.lua, fair_head.lua, fair.lua,
# fair_acquire.lua), called with 4 keys (the lock, the slot counter, the queue, its liveness
# hash) and 7 arguments (stem, ttl, member, priority 0, no old score, liveness 2000, owner
# `pod-a`) on fresh keys: each takes a place in an empty queue, heads it, leaves it and is
# granted, the whole of a fair waiter's path in Redis but the waiting. A script that takes no
# owner ignores the seventh argument.
#
# With --queued, the scripts are fair acquires too, on one name whose lock is free and whose
# queue is headed by another waiter of the same gateway: each call is a second waiter asking
# again from its kept place and told it is second (the path that names the head to its gateway,
# see fair_lines.rs). Before the calls, the lock is set, both waiters take their places and the
# lock is deleted.
#
# With --held, the scripts are plain acquires refused: one name held by another client's token
# (set before the calls, with no expiry), each call a plain acquire of it, answered
# `{0, pttl}`, the contention path.
#
# Usage: bench/acquire-instructions.sh [--calls N] [--runs R] [--fair | --queued | --held] SCRIPT...
# Needs: valgrind, redis-server, redis-cli, redis-benchmark.
set -euo pipefail
cd "$(dirname "$0")/.."
CALLS=20000
RUNS=3
FAIR=0
SCRIPTS=()
while [ $# -gt 0 ]; do
    case "$1" in
    --calls) CALLS=$2; shift ;;
    --runs) RUNS=$2; shift ;;
    --fair) FAIR=1 ;;
    --queued) FAIR=queued ;;
    --held) FAIR=held ;;
    *) SCRIPTS+=("$(realpath "$1")") ;;
    esac
    shift
done
[ ${#SCRIPTS[@]} -gt 0 ] || { echo "usage: bench/acquire-instructions.sh [--calls N] [--runs R] [--fair | --queued | --held] SCRIPT..." >&2; exit 1; }
QUEUED_KEYS=(4 'lockgate:{q}' lockgate:fences 'lockgate:{q}:queue' 'lockgate:{q}:queue:live')
if [ "$FAIR" = queued ]; then
    # A liveness window longer than the run, so the head's gateway stays alive throughout.
    CALL=("${QUEUED_KEYS[@]}" AAAAAAAAAAAAAAAAAAAAAA 30000 0123456789abcdef:8 0 '' 3600000 pod-a)
elif [ "$FAIR" = held ]; then
    CALL=(3 'lockgate:{h}' lockgate:fences 'lockgate:{h}:queue' AAAAAAAAAAAAAAAAAAAAAA 30000)
elif [ "$FAIR" = 1 ]; then
    CALL=(4 'lockgate:{__rand_int__}' lockgate:fences 'lockgate:{__rand_int__}:queue'
        'lockgate:{__rand_int__}:queue:live' AAAAAAAAAAAAAAAAAAAAAA 30000 0123456789abcdef:7 0 ''
        2000 pod-a)
else
    CALL=(3 'lockgate:{__rand_int__}' lockgate:fences 'lockgate:{__rand_int__}:queue'
        AAAAAAAAAAAAAAAAAAAAAA 30000)
fi
for tool in valgrind redis-server redis-cli redis-benchmark; do
    command -v "$tool" >/dev/null || { echo "error: $tool is not installed" >&2; exit 1; }
done

# shellcheck source=bench/lib.sh
. bench/lib.sh
start_work
printf "%-4s %-60s %20s\n" run script "instructions"
for run in $(seq "$RUNS"); do
    for script in "${SCRIPTS[@]}"; do
        port=$(free_port)
        out="$WORK/callgrind.out"
        rm -f "$out"
        valgrind --tool=callgrind --callgrind-out-file="$out" redis-server --port "$port" \
            --bind 127.0.0.1 --save "" --appendonly no --dir "$WORK" --logfile "$WORK/redis.log" \
            >/dev/null 2>&1 &
        server=$!
        until redis-cli -p "$port" ping >/dev/null 2>&1; do sleep 0.2; done
        sha=$(redis-cli -p "$port" script load "$(cat "$script")")
        if [ "$FAIR" = queued ]; then
            redis-cli -p "$port" set 'lockgate:{q}' other.1 >/dev/null
            for waiter in 7 8; do
                redis-cli -p "$port" evalsha "$sha" "${QUEUED_KEYS[@]}" AAAAAAAAAAAAAAAAAAAAAA \
                    30000 "0123456789abcdef:$waiter" 0 '' 3600000 pod-a >/dev/null
            done
            redis-cli -p "$port" del 'lockgate:{q}' >/dev/null
        elif [ "$FAIR" = held ]; then
            redis-cli -p "$port" set 'lockgate:{h}' BBBBBBBBBBBBBBBBBBBBBB.1 >/dev/null
        fi
        redis-benchmark -p "$port" -n "$CALLS" -P 32 -r 100000000 -q EVALSHA "$sha" "${CALL[@]}" \
            >/dev/null
        redis-cli -p "$port" shutdown nosave >/dev/null 2>&1 || true
        wait "$server" || true
        printf "%-4s %-60s %20s\n" "$run" "$script" "$(sed -n 's/^summary: //p' "$out")"
    done
done
