#!/usr/bin/env bash
# Checks that mnrun leaves nothing behind: a run stopped by SIGTERM removes its own
# namespaces and state; a run killed by SIGKILL leaves them, and `mnrun.sh cleanup`
# removes them while keeping a run still in progress.
# Usage: mn_cleanup_test.sh    Exit status: 0 pass, 1 fail, 77 skipped.
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
mnrun=$here/mnrun.sh
readonly STATE_ROOT=/run/fold-mnrun

work=$(mktemp -d)
harness_pids=()
run_pid="" run_id=""
failures=0

# Whatever happens, stop the harnesses this test started, then sweep their runs.
finish() {
    local pid
    for pid in "${harness_pids[@]}"; do
        kill -TERM "$pid" 2>/dev/null || true
    done
    for pid in "${harness_pids[@]}"; do
        wait "$pid" 2>/dev/null || true
    done
    "$mnrun" cleanup 2>/dev/null || true
    rm -rf "$work"
}
trap finish EXIT

fail() {
    echo "mn_cleanup_test: FAILED: $*"
    failures=$((failures + 1))
}

run_namespaces() {
    ip netns list | awk '{print $1}' | grep -E "^fmn-$1-" || true
}

# Starts a 2-node run of `sleep` in the background and sets run_pid (the harness) and
# run_id once its ranks run. Not in a subshell: the harness must be this shell's child.
start_run() {
    local log=$work/run$1.log tries
    # Made here: the background job opens it only once it is scheduled.
    : >"$log"
    "$mnrun" --nodes 2 --ppn 1 -- sleep 300 2>"$log" &
    run_pid=$!
    harness_pids+=("$run_pid")
    for ((tries = 0; tries < 150; tries++)); do
        run_id=$(sed -n 's/^mnrun: run \([0-9a-f]*\):.*/\1/p' "$log")
        if [ -n "$run_id" ] && [ -n "$(ip netns pids "fmn-$run_id-node1" 2>/dev/null)" ]; then
            return 0
        fi
        sleep 0.2
    done
    echo "mn_cleanup_test: run $1 did not start:" >&2
    cat "$log" >&2
    return 1
}

is_gone() {
    [ -z "$(run_namespaces "$1")" ] && [ ! -e "$STATE_ROOT/$1" ]
}

"$mnrun" check || exit $?

# 1. SIGTERM: the harness's trap removes everything.
start_run 1
kill -TERM "$run_pid"
wait "$run_pid" || true
is_gone "$run_id" || fail "run $run_id left $(run_namespaces "$run_id" | tr '\n' ' ')after SIGTERM"

# 2. SIGKILL: leftovers stay, until cleanup; a live run survives the cleanup.
start_run 2
dead_pid=$run_pid dead_id=$run_id
kill -KILL "$dead_pid"
wait "$dead_pid" 2>/dev/null || true
[ "$(run_namespaces "$dead_id" | wc -l)" -eq 3 ] ||
    fail "a SIGKILLed run should leave its 3 namespaces for cleanup to find"
start_run 3
live_pid=$run_pid live_id=$run_id
"$mnrun" cleanup
is_gone "$dead_id" || fail "cleanup left $(run_namespaces "$dead_id" | tr '\n' ' ')of the killed run"
[ "$(run_namespaces "$live_id" | wc -l)" -eq 3 ] || fail "cleanup removed the live run $live_id"
kill -TERM "$live_pid"
wait "$live_pid" || true
is_gone "$live_id" || fail "run $live_id left leftovers after SIGTERM"

[ "$failures" -eq 0 ] || exit 1
echo "mn_cleanup_test: SIGTERM and cleanup leave no namespaces or state behind"
