#!/bin/sh
# MPICH's own reduction tests against the shim: the programs of MPICH's test suite
# (test/mpi/coll of a release, v4.0.2 here) whose names match PATTERN, built against
# the MPI that MPIRUN starts (Open MPI's mpicc by default), each run as its testlist
# line says (rank count, arguments) without the shim and with it preloaded, fold
# serving every size. A run passes when it exits 0 and prints MPICH's " No Errors".
#
# Prints one row per testlist line (both verdicts and the shim's call totals), then
# the calls fold served out of all MPI_Allreduce / MPI_Reduce calls, and the tests
# that pass without the shim but not with it. Exits 1 if there are any.
#
# Usage: mpich_coll.sh MPIRUN SHIM MPICH_TEST_DIR [BUILD_DIR]
#   MPICH_TEST_DIR is MPICH's test/mpi, e.g. from a clone of pmodels/mpich:
#     git --git-dir=mpich/.git archive v4.0.2 test/mpi | tar x -C /tmp
#   BUILD_DIR (default: a temporary directory) keeps the programs between runs.
# Environment: MPICC (default mpicc), PATTERN (default the issue's set:
#   '^(allred|reduce|op|uop|icallreduce)'), TIMEOUT per run in seconds (default 120),
#   SHIM_ENV more VAR=VALUE words for the shim's runs.
set -u
MPIRUN=${1:?usage: mpich_coll.sh MPIRUN SHIM MPICH_TEST_DIR [BUILD_DIR]}
SHIM=${2:?}
SRC=${3:?}
OUT=${4:-}
MPICC=${MPICC:-mpicc}
PATTERN=${PATTERN:-'^(allred|reduce|op|uop|icallreduce)'}
TIMEOUT=${TIMEOUT:-120}
HERE=$(cd "$(dirname "$0")" && pwd)
[ -f "$SRC/coll/testlist.in" ] || { echo "no $SRC/coll/testlist.in"; exit 2; }
[ -f "$SHIM" ] || { echo "no shim at $SHIM"; exit 2; }
if [ -z "$OUT" ]; then
    OUT=$(mktemp -d)
    trap 'rm -rf "$OUT"' EXIT
fi
mkdir -p "$OUT"

# What MPICH's configure would find on Linux with glibc, for the headers the
# programs include; Open MPI has no MPIX routines.
cat >"$OUT/mpitestconf.h" <<'EOF'
#define HAVE_STDINT_H 1
#define HAVE_STDARG_H 1
#define HAVE_UNISTD_H 1
#define HAVE_SYS_TIME_H 1
#define HAVE_SYS_RESOURCE_H 1
#define HAVE_STRING_H 1
#define HAVE_GETRUSAGE 1
#define HAVE_LONG_LONG 1
#define HAVE_LONG_LONG_INT 1
#define HAVE_LONG_DOUBLE 1
#define HAVE__BOOL 1
#define HAVE_FLOAT__COMPLEX 1
#define HAVE_DOUBLE__COMPLEX 1
#define HAVE_LONG_DOUBLE__COMPLEX 1
#define HAVE_MPI_INIT_THREAD 1
#define HAVE_MPI_WIN_CREATE 1
#define HAVE_MIN_MPI_VERSION 1
#define THREAD_PACKAGE_NAME THREAD_PACKAGE_POSIX
EOF
: >"$OUT/mtest_mpix.h"
cflags="-O1 -w -I$OUT -I$SRC/include -I$SRC/dtpools/include"
for u in mtest mtest_common mtest_thread; do
    [ -f "$OUT/$u.o" ] && continue
    # shellcheck disable=SC2086 # $cflags is a list of words
    "$MPICC" $cflags -c "$SRC/util/$u.c" -o "$OUT/$u.o" || { echo "cannot build $u.c"; exit 2; }
done

# The testlist lines: name, rank count, then key=value words (arg=... are arguments).
lines=$(grep -E "$PATTERN" "$SRC/coll/testlist.in" | grep -v '^#')
fold_total=0
pmpi_total=0
passing=0
regressed=""
printf '%-36s %-6s %-6s %s\n' "test" "plain" "shim" "shim's calls"
echo "$lines" | {
while read -r name np rest; do
    [ -n "$name" ] || continue
    args=""
    for word in $rest; do
        case $word in arg=*) args="$args ${word#arg=}" ;; esac
    done
    if [ ! -x "$OUT/$name" ]; then
        # shellcheck disable=SC2086
        "$MPICC" $cflags "$SRC/coll/$name.c" "$OUT/mtest.o" "$OUT/mtest_common.o" \
            "$OUT/mtest_thread.o" -lpthread -lm -o "$OUT/$name" 2>"$OUT/$name.build" ||
            { printf '%-36s build failed\n' "$name"; continue; }
    fi
    verdict() {
        if [ "$1" -eq 0 ] && grep -q '^ No Errors' "$2"; then echo pass; else echo FAIL; fi
    }
    # shellcheck disable=SC2086 # $args, $SHIM_ENV are lists of words
    timeout "$TIMEOUT" sh "$HERE/mpi_launch.sh" "$MPIRUN" "$np" -- "$OUT/$name" $args \
        </dev/null >"$OUT/$name.plain" 2>&1
    plain=$(verdict $? "$OUT/$name.plain")
    # shellcheck disable=SC2086
    timeout "$TIMEOUT" sh "$HERE/mpi_launch.sh" "$MPIRUN" "$np" LD_PRELOAD="$SHIM" \
        FOLD_MPI_VERBOSE=1 FOLD_MPI_ALLREDUCE_MIN=0 FOLD_MPI_ALLREDUCE_MAX=inf \
        FOLD_MPI_REDUCE_MIN=0 FOLD_MPI_REDUCE_MAX=inf ${SHIM_ENV:-} -- "$OUT/$name" $args \
        </dev/null >"$OUT/$name.shim" 2>&1
    shim=$(verdict $? "$OUT/$name.shim")
    totals=$(sed -n 's/^fold-mpi: calls over [0-9]* ranks: //p' "$OUT/$name.shim" | head -1)
    fold=$(printf '%s\n' "$totals" | sed -n 's/^fold=\([0-9]*\).*/\1/p')
    pmpi=$(printf '%s\n' "$totals" | sed -n 's/.* pmpi=\([0-9]*\).*/\1/p')
    fold_total=$((fold_total + ${fold:-0}))
    pmpi_total=$((pmpi_total + ${pmpi:-0}))
    printf '%-36s %-6s %-6s %s\n' "$name $np$args" "$plain" "$shim" "${totals:-no totals}"
    if [ "$plain" = pass ]; then
        passing=$((passing + 1))
        [ "$shim" = pass ] || regressed="$regressed $name/$np"
    fi
done
all=$((fold_total + pmpi_total))
[ "$all" -gt 0 ] || { echo "no calls counted"; exit 1; }
echo "served by fold: $fold_total of $all calls" \
     "($(awk "BEGIN { printf \"%.1f\", 100 * $fold_total / $all }")%), to MPI: $pmpi_total"
echo "tests passing without the shim: $passing; failing with it:${regressed:- none}"
[ -z "$regressed" ]
}
