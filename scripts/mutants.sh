#!/usr/bin/env bash
# Proof that the deterministic simulation finds bugs: applies each mutant of sim/mutants/ (a
# small patch that brings back a bug, said in its opening comment) in turn, runs the
# simulation's seeds until one fails, and prints a table: the mutant, whether it was caught,
# by which seed (how many seeds it took) and how long the simulation ran; then takes the
# mutant out again, also when interrupted. A patch runs the locks' world unless a line of its
# opening comment names another: `# world: semaphores`, `# world: multi-locks`,
# `# world: redlock`, `# world: holds` or `# world: failover`.
#
#   scripts/mutants.sh                         # every mutant, seeds 1..200
#   LOCKGATE_MUTANT_SEEDS=1..1000 scripts/mutants.sh sim/mutants/fence-from-the-clock.patch
#
# The seeds run one at a time (LOCKGATE_SIM_THREADS=1), so that the seed reported is the first
# of the range that catches the mutant (side by side, another thread may fail first).
# A mutant not caught within the seeds is a gap: a fault or a client the simulation lacks.
# Exits 1 if any mutant was not caught. The files the patches touch must be as committed.
set -euo pipefail
cd "$(dirname "$0")/.."

seeds=${LOCKGATE_MUTANT_SEEDS:-1..201}
first=${seeds%%..*}
patches=("$@")
if [ ${#patches[@]} -eq 0 ]; then
    patches=(sim/mutants/*.patch)
fi

applied=
cleanup() {
    if [ -n "$applied" ]; then
        git apply -R "$applied"
    fi
}
trap cleanup EXIT

printf '%-32s %-8s %-6s %-6s %s\n' mutant caught seed seeds seconds
missed=0
for patch in "${patches[@]}"; do
    name=$(basename "$patch" .patch)
    git apply --check "$patch"
    git apply "$patch"
    applied=$patch
    cargo test --quiet --locked --test it --no-run 2>/dev/null
    started=$(date +%s.%N)
    case $(sed -n 's/^# world: //p' "$patch") in
    semaphores) test=semaphores_over_a_simulated_redis_keep_their_promise ;;
    multi-locks) test=multi_locks_over_a_simulated_redis_keep_their_promise ;;
    redlock) test=redlock_over_three_simulated_nodes_keeps_the_lock_promise ;;
    holds) test=hold_streams_and_reentrant_locks_over_a_simulated_redis_keep_their_promise ;;
    failover) test=locks_over_a_sentinel_group_keep_the_promise_across_failovers ;;
    *) test=gateways_over_a_simulated_redis_keep_the_lock_promise ;;
    esac
    out=$(LOCKGATE_SIM_THREADS=${LOCKGATE_SIM_THREADS:-1} LOCKGATE_SIM_SEEDS=$seeds cargo test --quiet --locked --test it -- "simulation::$test" --exact --nocapture 2>&1 || true)
    ended=$(date +%s.%N)
    git apply -R "$patch"
    applied=
    seed=$( (grep -o 'seed [0-9]* of the [a-z-]* failed at commit' <<<"$out" || true) | head -n 1 | awk '{print $2}')
    secs=$(awk -v a="$started" -v b="$ended" 'BEGIN { printf "%.1f", b - a }')
    if [ -n "$seed" ]; then
        printf '%-32s %-8s %-6s %-6s %s\n' "$name" yes "$seed" $((seed - first + 1)) "$secs"
    else
        printf '%-32s %-8s %-6s %-6s %s\n' "$name" NO - "$seeds" "$secs"
        missed=$((missed + 1))
    fi
done
exit $((missed > 0))
