#!/bin/sh
# --check catches a wrong result: rank 1 corrupts one element of what it checks
# (--inject-error), and the run must name the rank and index, mark the row FAIL and
# exit with status 1 - for allreduce, and for reduce at the root and at a non-root.
# Usage: perf_mp_check_catches.sh path/to/fold_perf mpirun [mpirun options...]
set -u
PERF=$1
shift
. "$(dirname "$0")/test_lib.sh"

# run_injected NAME ARGS...: expects exit status 1 and a FAIL row.
run_injected() {
    name=$1
    shift
    "$@" >"$TMP/$name.out" 2>"$TMP/$name.err"
    status=$?
    cat "$TMP/$name.out" "$TMP/$name.err"
    [ "$status" -eq 1 ] || fail "$name: exit status $status, expected 1"
    grep -q "FAIL" "$TMP/$name.out" || fail "$name: no FAIL row"
    grep -q "row(s) FAILED the check" "$TMP/$name.err" || fail "$name: no summary"
}

run_injected allreduce "$@" "$PERF" -c allreduce -b 64 -e 64 -n 5 --probe-size 0 --check \
    --inject-error 1:3
grep -q "CHECK FAILED on rank 1, allreduce .*, 64 bytes (count 16): index 3: expected" \
    "$TMP/allreduce.err" || fail "allreduce: the mismatch is not named"

run_injected reduce_root "$@" "$PERF" -c reduce -r 1 -b 64 -e 64 -n 5 --probe-size 0 \
    --check --inject-error 1:5
grep -q "CHECK FAILED on rank 1, reduce .*index 5" "$TMP/reduce_root.err" ||
    fail "reduce at the root: the mismatch is not named"

run_injected reduce_input "$@" "$PERF" -c reduce -r 0 -b 64 -e 64 -n 5 --probe-size 0 \
    --check --inject-error 1
grep -q "CHECK FAILED on rank 1, reduce .*input of a non-root rank: index 0" \
    "$TMP/reduce_input.err" || fail "reduce at a non-root: the changed input is not named"

if [ "$failures" -ne 0 ]; then
    echo "$failures check(s) failed"
    exit 1
fi
echo "perf_mp_check_catches: all checks passed"
