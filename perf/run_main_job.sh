#!/bin/sh
# The main job: build fold and fold_perf, then run fold_perf on local ranks - allreduce and
# reduce from 8 B to 64 MiB, every result checked, with the MPI library beside fold - and
# print the table; then the same from 64 KiB to 16 MiB with 16 buffer pairs in turn. A
# few minutes on a 2-core machine.
#
#   perf/run_main_job.sh [extra fold_perf options]
#
# FOLD_PERF_NP sets the number of ranks (default 2), FOLD_BUILD_DIR the build directory
# (default build).
set -eu
cd "$(dirname "$0")/.."
np=${FOLD_PERF_NP:-2}
build=${FOLD_BUILD_DIR:-build}

# Quiet unless the build fails; fold_perf's target builds libfold with it.
log=$(mktemp)
if ! { cmake -B "$build" -S . -DCMAKE_BUILD_TYPE=Release &&
       cmake --build "$build" --target fold_perf -j "$(nproc)"; } >"$log" 2>&1; then
    cat "$log" >&2
    rm -f "$log"
    echo "run_main_job: the build failed" >&2
    exit 1
fi
rm -f "$log"

perf="$build/perf/fold_perf"
compare="--compare mpi"
if ! "$perf" --version | grep -q "with MPI"; then
    echo "run_main_job: no MPI was found when configuring; running without --compare mpi" >&2
    compare=""
fi
# One rank per core when they fit; more ranks than cores share them unbound.
if [ "$np" -le "$(nproc)" ]; then
    launcher="mpirun --bind-to core"
else
    launcher="mpirun --oversubscribe --bind-to none"
fi
if [ "$(id -u)" = 0 ]; then
    launcher="$launcher --allow-run-as-root"
fi

# The sweep on one buffer pair (each size's first call and worst of calls 2-10 beside
# its warmed median), then as a training loop's buckets run: 16 pairs in turn, each
# call's input written before it.
# shellcheck disable=SC2086 # $launcher and $compare are lists of words on purpose
$launcher -n "$np" "$perf" -c allreduce,reduce -b 8 -e 64M -f 2 --check $compare "$@"
# shellcheck disable=SC2086
exec $launcher -n "$np" "$perf" -c allreduce,reduce -b 64K -e 16M -f 4 --buffers 16 --check \
    $compare "$@"
