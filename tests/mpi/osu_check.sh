#!/bin/sh
# The held-out check: the OSU micro-benchmarks' own validation (-c) of MPI_Allreduce and
# MPI_Reduce, unmodified and built against the MPI the shim is for, with the shim
# preloaded and serving every size. Passes when every size of every run says "Pass"
# and the shim's totals show fold served every call (pmpi=0).
#
# Usage: osu_check.sh MPIRUN SHIM OSU_BLOCKING_DIR [NP]
#   OSU_BLOCKING_DIR holds osu_allreduce and osu_reduce (c/mpi/collective/blocking of a
#   built OSU 7.x; see the README's "MPI applications").
set -u
MPIRUN=${1:?usage: osu_check.sh MPIRUN SHIM OSU_BLOCKING_DIR [NP]}
SHIM=${2:?}
DIR=${3:?}
NP=${4:-2}
HERE=$(dirname "$0")
for b in osu_allreduce osu_reduce; do
    [ -x "$DIR/$b" ] || { echo "skipped: no $DIR/$b"; exit 77; }
done
failed=0
for bench in osu_allreduce osu_reduce; do
    for type in mpi_char mpi_int mpi_float; do
        out=$(sh "$HERE/mpi_launch.sh" "$MPIRUN" "$NP" LD_PRELOAD="$SHIM" FOLD_MPI_VERBOSE=1 \
              FOLD_MPI_ALLREDUCE_MIN=0 FOLD_MPI_ALLREDUCE_MAX=inf FOLD_MPI_REDUCE_MIN=0 \
              FOLD_MPI_REDUCE_MAX=inf -- "$DIR/$bench" -c -T "$type" -m 4:1048576 -i 50 -x 5 \
              2>&1)
        # Size rows: a byte count, a time and the validation.
        rows=$(printf '%s\n' "$out" | awk '$1 ~ /^[0-9]+$/ && NF == 3' | wc -l)
        passed=$(printf '%s\n' "$out" | awk '$1 ~ /^[0-9]+$/ && $3 == "Pass"' | wc -l)
        totals=$(printf '%s\n' "$out" | sed -n 's/^fold-mpi: calls over [0-9]* ranks: //p')
        echo "$bench -T $type: $passed of $rows sizes pass; shim: $totals"
        case $totals in
            fold=*" pmpi=0 ()") served=1 ;;
            *) served=0 ;;
        esac
        if [ "$rows" -eq 0 ] || [ "$passed" -ne "$rows" ] || [ "$served" -eq 0 ]; then
            printf '%s\n' "$out"
            failed=1
        fi
    done
done
[ "$failed" -eq 0 ] && echo "osu_check: passed" || echo "osu_check: FAILED"
exit "$failed"
