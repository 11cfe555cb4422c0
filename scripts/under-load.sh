#!/usr/bin/env bash
# Runs a command while busy loops compete for the CPU, to shake out timing assumptions.
#
#   scripts/under-load.sh BUSY NICE RUNS COMMAND...
#
# starts BUSY shell loops spinning at full speed, then runs COMMAND (under `nice -n NICE`)
# RUNS times in a row, stopping at the first failure. The loops are killed on exit. Examples:
#
#   scripts/under-load.sh 2 0 20 scripts/test.sh         # 20 passes beside two busy loops
#   scripts/under-load.sh 4 10 5 scripts/test.sh         # 5 passes under nice beside four
set -euo pipefail
if [ $# -lt 4 ]; then
    echo "usage: $0 BUSY NICE RUNS COMMAND..." >&2
    exit 2
fi
busy=$1 niceness=$2 runs=$3
shift 3

loops=()
cleanup() {
    for pid in "${loops[@]}"; do
        kill "$pid" 2>/dev/null || true
    done
}
trap cleanup EXIT
for _ in $(seq "$busy"); do
    (while :; do :; done) &
    loops+=($!)
done

for run in $(seq "$runs"); do
    started=$(date +%s)
    if ! nice -n "$niceness" "$@"; then
        echo "run $run of $runs FAILED after $(($(date +%s) - started)) s (busy=$busy nice=$niceness)" >&2
        exit 1
    fi
    echo "run $run of $runs passed in $(($(date +%s) - started)) s (busy=$busy nice=$niceness)" >&2
done
echo "all $runs runs passed (busy=$busy nice=$niceness)" >&2
