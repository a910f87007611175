#!/bin/sh
# fold_tune --quick under mpirun: it must succeed, write a tuning file that fold loads
# (fold_info -m shows its parameters, fold_info -S follows its rules), with rules and
# serve lines keyed to the shape it ran on; --no-mpi writes no serve lines; an output
# it cannot write fails before the sweep.
# Usage: tune_mp_quick.sh path/to/fold_tune path/to/fold_info mpirun [mpirun options...]
set -u
TUNE=$1
INFO=$2
shift 2
. "$(dirname "$0")/test_lib.sh"

start=$(date +%s)
"$@" "$TUNE" --quick -o "$TMP/t.conf" --csv "$TMP/t.csv" >"$TMP/out" 2>"$TMP/err"
status=$?
took=$(($(date +%s) - start))
cat "$TMP/out"
[ "$status" -eq 0 ] || fail "fold_tune --quick exited $status: $(cat "$TMP/err")"
[ "$took" -lt 60 ] || fail "fold_tune --quick took $took s"
echo "fold_tune --quick took $took s"

expect_match t.conf "^# fold tuning file, written by fold_tune"
expect_match t.conf "^# host .*; shape: 2 ranks on 1 node"
expect_match t.conf "export FOLD_TUNE_FILE="
expect_match t.conf "^# sweep: .*, inputs rewritten before every call$"
for name in step_us flag_us intra_lat_us intra_gbs inter_lat_us inter_gbs nics eager_bytes \
    copy_gbs copy_mem_gbs reduce_gbs reduce_mem_gbs node_mem_gbs cache_bytes; do
    expect_match t.conf "^param $name [0-9]"
done
expect_match t.conf "^rule allreduce:0-[0-9a-zA-Z]+:n1-1:ppn2-2:[a-z_]+ "
expect_match t.conf "^rule reduce:0-[0-9a-zA-Z]+:n1-1:ppn2-2:[a-z_]+ "
# The last range stops after the largest size measured (--quick: 256 KiB); the model
# decides above it.
expect_match t.conf "^rule allreduce:[0-9a-zA-Z]+-262145:n1-1:ppn2-2:"
if "$TUNE" --version | grep -q "with MPI"; then
    expect_match t.conf "^# MPI library: [^n]"
    expect_match t.conf "^serve allreduce:0-[0-9a-zA-Z]+:n1-1:ppn2-2:(fold|mpi) "
    expect_match t.conf "^serve reduce:[0-9a-zA-Z]+-262145:n1-1:ppn2-2:(fold|mpi) "
fi
expect_match out "^# collective +bytes +fastest"
expect_match out "^  allreduce +8 "
expect_match out "^  reduce +262144 "
expect_match out "^# wrote $TMP/t.conf"
expect_match t.csv "^source,collective,case,algorithm,leaders,bytes,median_us,mpi_median_us,model_us"
expect_match t.csv "^intra_pair,allreduce,recursive_doubling,recursive_doubling,0,4194304,"

# fold loads it: the parameters in effect are the file's
FOLD_TUNE_FILE="$TMP/t.conf" "$INFO" -m >"$TMP/m" 2>"$TMP/merr"
status=$?
[ "$status" -eq 0 ] || fail "fold_info -m with the file exited $status: $(cat "$TMP/merr")"
expect_match m "tuning file $TMP/t.conf"
for name in step_us flag_us intra_gbs cache_bytes; do
    want=$(sed -n "s/^param $name \([^ ]*\).*/\1/p" "$TMP/t.conf")
    grep -qx "$name $want" "$TMP/m" || fail "fold_info -m does not show $name $want"
done
# ... and selection on this shape follows its rules
first=$(sed -n 's/^rule allreduce:0-[^:]*:n1-1:ppn2-2:\([a-z_]*\).*/\1/p' "$TMP/t.conf")
FOLD_TUNE_FILE="$TMP/t.conf" "$INFO" -S 1x2 >"$TMP/s" 2>"$TMP/serr"
status=$?
[ "$status" -eq 0 ] || fail "fold_info -S 1x2 with the file exited $status: $(cat "$TMP/serr")"
expect_match s "^  allreduce +8  $first "

# --no-mpi: no serve lines
"$@" "$TUNE" --quick --no-mpi -c allreduce -e 64 -o "$TMP/n.conf" >"$TMP/out2" 2>"$TMP/err2"
status=$?
[ "$status" -eq 0 ] || fail "fold_tune --no-mpi exited $status: $(cat "$TMP/err2")"
expect_match n.conf "^# no serve lines"
grep -q "^serve" "$TMP/n.conf" && fail "--no-mpi wrote serve lines"
grep -q "^rule reduce" "$TMP/n.conf" && fail "-c allreduce wrote reduce rules"

# an output it cannot write: status 2 before any measuring
"$@" "$TUNE" --quick -o "$TMP/no-such-dir/t.conf" >"$TMP/out3" 2>"$TMP/err3"
status=$?
[ "$status" -eq 2 ] || fail "an unwritable output exited $status, expected 2"
expect_match err3 "fold_tune: cannot write '$TMP/no-such-dir/t.conf.tmp'"
grep -q "calibrating" "$TMP/err3" && fail "it measured before finding the output unwritable"

if [ "$failures" -ne 0 ]; then
    echo "$failures check(s) failed"
    exit 1
fi
echo "fold_tune_quick: all checks passed"
