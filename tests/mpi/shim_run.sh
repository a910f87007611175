#!/bin/sh
# Runs an MPI test program twice, without and with LD_PRELOAD=libfold-mpi.so, and
# checks that:
#   - both runs pass (exit 0; 77 from the plain run means "skip" and is passed on);
#   - their "digest:" lines (hashes of every result) are identical;
#   - the shim printed its banner, and its call totals (FOLD_MPI_VERBOSE=1) match the
#     program's "expect:" line exactly, or reach its "expect-min: fold=N" with only the
#     reasons on its "allow:" line going to PMPI. A shim that forwarded everything to
#     PMPI would fail here.
# With --disabled the shim runs with FOLD_MPI_ENABLE=0 and must have handed every call
# to the MPI library (reason "off"), whatever the program expected.
#
# MPIRUN is Open MPI's mpirun or MPICH's mpiexec.mpich (mpi_launch.sh starts either).
#
# Usage: shim_run.sh [--env VAR=VALUE]... [--disabled] MPIRUN SHIM NP PROGRAM [ARGS...]
# (values without spaces)
set -u
HERE=$(dirname "$0")
launch() { sh "$HERE/mpi_launch.sh" "$@"; }
envs=""
disabled=0
while [ $# -gt 0 ]; do
    case $1 in
    --env)
        envs="$envs ${2?}"
        shift 2
        ;;
    --disabled)
        disabled=1
        shift
        ;;
    *)
        break
        ;;
    esac
done
MPIRUN=$1
SHIM=$2
NP=$3
shift 3
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
shim_envs="LD_PRELOAD=$SHIM FOLD_MPI_VERBOSE=1"
if [ "$disabled" -eq 1 ]; then
    shim_envs="$shim_envs FOLD_MPI_ENABLE=0"
fi

fail() {
    echo "FAIL: $*"
    for run in plain shim; do
        for stream in out err; do
            [ -s "$TMP/$run.$stream" ] && { echo "--- $run std$stream"; cat "$TMP/$run.$stream"; }
        done
    done
    exit 1
}

# shellcheck disable=SC2086 # $envs and $shim_envs are lists of words
launch "$MPIRUN" "$NP" $envs -- "$@" >"$TMP/plain.out" 2>"$TMP/plain.err"
status=$?
[ "$status" -eq 77 ] && { cat "$TMP/plain.out"; exit 77; }
[ "$status" -eq 0 ] || fail "without the shim: exit status $status"
# shellcheck disable=SC2086
launch "$MPIRUN" "$NP" $envs $shim_envs -- "$@" >"$TMP/shim.out" 2>"$TMP/shim.err"
status=$?
[ "$status" -eq 0 ] || fail "with the shim: exit status $status"

grep -q '^fold-mpi: fold .* ranks: ' "$TMP/shim.err" || fail "no banner from the shim"
# Lines are compared as sorted sets: a program that spawns processes has two worlds,
# each printing its own digest, expectation and shim totals.
plain_digest=$(grep '^digest:' "$TMP/plain.out" | sort)
shim_digest=$(grep '^digest:' "$TMP/shim.out" | sort)
[ "$plain_digest" = "$shim_digest" ] || fail "results differ: '$plain_digest' vs '$shim_digest'"

totals=$(sed -n 's/^fold-mpi: calls over [0-9]* ranks: //p' "$TMP/shim.err" | sort)
[ -n "$totals" ] || fail "no call totals from the shim"
expect=$(sed -n 's/^expect: //p' "$TMP/shim.out" | sort)
expect_min=$(sed -n 's/^expect-min: fold=//p' "$TMP/shim.out")
allow=$(sed -n 's/^allow: //p' "$TMP/shim.out")

count_of() {  # count_of KEY TEXT: the N of KEY=N in TEXT, 0 if absent
    echo "$2" | tr -s ' ()' '\n' | sed -n "s/^$1=//p" | head -1 | grep . || echo 0
}

if [ "$disabled" -eq 1 ]; then
    all=$(count_of pmpi "$totals")
    want="fold=0 (allreduce=0 reduce=0) pmpi=$all (off=$all)"
    if [ "$all" -eq 0 ] || [ "$totals" != "$want" ]; then
        fail "shim totals '$totals', expected every call to go to PMPI as 'off'"
    fi
elif [ -n "$expect_min" ]; then
    served=$(count_of fold "$totals")
    [ "$served" -ge "$expect_min" ] ||
        fail "fold served $served calls, expected $expect_min or more"
    reasons=$(echo "$totals" | sed 's/.*pmpi=[0-9]* (//; s/)$//' | tr ' ' '\n' | sed 's/=.*//')
    for reason in $reasons; do
        case " $allow " in
        *" $reason "*) ;;
        *) fail "calls went to PMPI for '$reason' (allowed: $allow)" ;;
        esac
    done
elif [ -n "$expect" ]; then
    [ "$totals" = "$expect" ] || fail "shim totals '$totals', expected '$expect'"
else
    fail "the program printed no expectation"
fi
cat "$TMP/shim.out"
echo "shim: $totals"
exit 0
