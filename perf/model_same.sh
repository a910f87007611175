#!/bin/sh
# Checks that two builds of fold_info make the same selection decisions: runs
# `fold_info -S SHAPE` (and `-S SHAPE -p` on the small shapes: every algorithm's
# prediction) with each over a list of shapes and diffs the outputs byte for byte.
#
#   perf/model_same.sh OLD_FOLD_INFO NEW_FOLD_INFO [OUTDIR] [SHAPE...]
#
# The machine's calibration is replaced by fixed parameters (FOLD_MODEL, unless set),
# so the two runs see the same cost model. Each run's wall time is printed: the
# second column of a line is OLD's, the third NEW's. OLD's outputs are kept in
# OUTDIR (default /tmp/model_same) and reused when present, so a slow reference
# runs once. NEW_MODEL_EXTRA (",name=value...") is added to NEW's FOLD_MODEL: the
# values of parameters OLD does not know that reproduce its costs. Exit status 1 if
# any output differs. test_model_fast checks the same
# property on small shapes inside the unit tests; this is the check at scale.
set -u
old=$1
new=$2
out=${3:-/tmp/model_same}
shift 2
[ $# -gt 0 ] && shift
shapes="$*"
[ -n "$shapes" ] || shapes="1x1 1x2 1x3 2x1 2x2 3x1 1x8 2x3 3,1,2 5,3 2,2,3 1x64 1x128 \
4x16 7x9 100x4 8x64 16x128 64x64 1000x1"
small="1x2 1x3 2x2 3x1 1x8 2x3 3,1,2 5,3 4x16"
: "${FOLD_MODEL:=copy_gbs=66.56,shm_gbs=66.56,reduce_gbs=37.72,shm_reduce_gbs=37.72,copy_mem_gbs=21.65,reduce_mem_gbs=14.9,cma_gbs=16.76,cma_us=0.8995}"
export FOLD_MODEL
mkdir -p "$out"
now() { date +%s.%N; }
status=0
run() {   # run NAME FLAGS SHAPE
    tag=$(printf '%s' "$3$2" | tr ',' '_' | tr -d ' ')
    ref="$out/old_$tag.txt"
    t_old=cached
    if [ ! -s "$ref" ]; then
        t0=$(now)
        "$old" $2 -S "$3" > "$ref" 2>&1
        t_old=$(echo "$(now) - $t0" | bc)
    fi
    t0=$(now)
    FOLD_MODEL="$FOLD_MODEL${NEW_MODEL_EXTRA:-}" "$new" $2 -S "$3" > "$out/new_$tag.txt" 2>&1
    t_new=$(echo "$(now) - $t0" | bc)
    if cmp -s "$ref" "$out/new_$tag.txt"; then
        same=same
    else
        same=DIFFERENT
        status=1
    fi
    printf '%-10s %3s %10s %10s %s\n' "$3" "$2" "$t_old" "$t_new" "$same"
}
printf '%-10s %3s %10s %10s %s\n' shape flags old_s new_s output
for s in $shapes; do
    run x "" "$s"
    case " $small " in *" $s "*) run x -p "$s" ;; esac
done
exit $status
