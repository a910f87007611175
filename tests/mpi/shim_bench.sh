#!/bin/sh
# Times an MPI application's MPI_Allreduce (or MPI_Reduce) with and without the shim:
# mpi_allreduce_bench runs ROUNDS times each way, alternating which goes first, and
# the table gives per size the median over rounds of each run's median time per call.
#
# Usage: shim_bench.sh BENCH SHIM [ROUNDS] [-- bench options]
# Environment: NP (2), MPIRUN (mpirun), MPIRUN_ARGS (--allow-run-as-root --bind-to core),
#   SHIM_ENV: settings for the shim runs (default: fold serves every size; pass
#   SHIM_ENV=FOLD_MPI_VERBOSE=0 to time the shim's own choice: its tuning file or cost model).
set -eu
BENCH=$1
SHIM=$2
ROUNDS=${3:-5}
shift 2
[ $# -gt 0 ] && shift
[ $# -gt 0 ] && [ "$1" = "--" ] && shift
NP=${NP:-2}
MPIRUN=${MPIRUN:-mpirun}
MPIRUN_ARGS=${MPIRUN_ARGS:---allow-run-as-root --bind-to core}
SHIM_ENV=${SHIM_ENV:-FOLD_MPI_ALLREDUCE_MIN=0 FOLD_MPI_ALLREDUCE_MAX=inf \
FOLD_MPI_REDUCE_MIN=0 FOLD_MPI_REDUCE_MAX=inf}
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT

shim_exports=""
for setting in $SHIM_ENV; do
    shim_exports="$shim_exports -x $setting"
done

run() {  # run KIND ROUND [bench options]
    out="$TMP/$1.$2"
    if [ "$1" = mpi ]; then
        shift 2
        # shellcheck disable=SC2086 # option lists
        $MPIRUN $MPIRUN_ARGS -n "$NP" "$BENCH" "$@" >"$out" 2>&1
    else
        shift 2
        # shellcheck disable=SC2086
        $MPIRUN $MPIRUN_ARGS -n "$NP" -x LD_PRELOAD="$SHIM" $shim_exports "$BENCH" "$@" \
            >"$out" 2>&1
    fi
}

round=1
while [ "$round" -le "$ROUNDS" ]; do
    if [ $((round % 2)) -eq 1 ]; then order="mpi fold"; else order="fold mpi"; fi
    for kind in $order; do
        run "$kind" "$round" "$@" || { cat "$TMP/$kind.$round"; exit 1; }
    done
    round=$((round + 1))
done

head -1 "$TMP/mpi.1"
echo "# $NP ranks, median over $ROUNDS runs each of the per-run median; shim runs: $SHIM_ENV"
cat "$TMP"/mpi.* | awk '!/^#/ {print "mpi", $1, $3}' >"$TMP/all"
cat "$TMP"/fold.* | awk '!/^#/ {print "fold", $1, $3}' >>"$TMP/all"
sort -k2,2n -k1,1 -k3,3g "$TMP/all" | awk '
    function flush() {
        if (bytes == "") return
        m = med(mpi, nm); f = med(fold, nf)
        printf "%10s %12.2f %12.2f %8.2f\n", bytes, m, f, m / f
    }
    function med(v, n) { return n % 2 ? v[(n + 1) / 2] : (v[n / 2] + v[n / 2 + 1]) / 2 }
    BEGIN { printf "%10s %12s %12s %8s\n", "bytes", "mpi_us", "shim_us", "speedup" }
    $2 != bytes { flush(); bytes = $2; nm = 0; nf = 0 }
    $1 == "mpi" { mpi[++nm] = $3 }
    $1 == "fold" { fold[++nf] = $3 }
    END { flush() }'
