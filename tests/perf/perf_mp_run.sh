#!/bin/sh
# One real fold_perf run under mpirun: allreduce and reduce with two algorithm choices,
# checked, with the MPI library beside fold when built with MPI, writing CSV, JSON
# and (with gnuplot) a PNG; then a sparse in-place run, a pair type with maxloc and a
# complex product, and the missing-gnuplot error.
# Usage: perf_mp_run.sh path/to/fold_perf mpirun [mpirun options...]
set -u
PERF=$1
shift
. "$(dirname "$0")/test_lib.sh"

compare=""
if "$PERF" --version | grep -q "with MPI"; then
    compare="--compare mpi"
fi
plot=""
if command -v gnuplot >/dev/null 2>&1; then
    plot="--plot $TMP/r.png"
fi

# shellcheck disable=SC2086 # $compare and $plot are lists of words on purpose
"$@" "$PERF" -c allreduce,reduce -b 8 -e 256k -f 16 -n 40 -w 2 -A auto,ring --check \
    --probe-size 8M $compare --csv "$TMP/r.csv" --json "$TMP/r.json" $plot \
    >"$TMP/out" 2>"$TMP/err"
status=$?
cat "$TMP/out"
[ "$status" -eq 0 ] || fail "the checked run exited $status: $(cat "$TMP/err")"
expect_in out "2 ranks on 1 node"
expect_in out "median_us"
expect_in out "auto:"
grep -q "FAIL" "$TMP/out" && fail "a row failed its check"
# 4 sizes (8, 128, 2k, 32k) x 2 collectives x 2 algorithm choices
rows=$(grep -c " ok" "$TMP/out")
[ "$rows" -eq 16 ] || fail "expected 16 checked rows, got $rows"

columns="collective,algorithm,requested,bytes,count,iterations,avg_us,min_us,max_us"
columns="$columns,median_us,p99_us,algbw_gbs,busbw_gbs,bound_us,check"
expect_in r.csv "$columns"
expect_in r.csv ",first_us,worst2-10_us,first_calls"
expect_in out "first_us worst2-10_us"
csv_rows=$(($(wc -l <"$TMP/r.csv") - 1))
[ "$csv_rows" -eq 16 ] || fail "expected 16 CSV rows, got $csv_rows"
if [ -n "$compare" ]; then
    expect_in r.csv ",mpi_median_us,speedup,mpi_first_us,mpi_worst2-10_us"
    expect_in out "mpi_median_us mpi_first_us mpi_worst2-10_us"
fi
if command -v python3 >/dev/null 2>&1; then
    python3 - "$TMP/r.json" "$compare" <<'PY' || fail "the JSON output is not what it should be"
import json, sys
doc = json.load(open(sys.argv[1]))
rows = doc["results"]
assert len(rows) == 16, len(rows)
assert doc["settle"] is False and doc["buffers"] is False
need = ["collective", "algorithm", "bytes", "count", "iterations", "avg_us", "min_us",
        "max_us", "median_us", "p99_us", "algbw_gbs", "busbw_gbs", "bound_us", "check",
        "first_us", "worst2-10_us", "first_calls"]
if sys.argv[2]:
    need += ["mpi_median_us", "mpi_first_us", "mpi_worst2-10_us"]
for row in rows:
    missing = [k for k in need if k not in row]
    assert not missing, missing
    assert row["check"] == "ok"
    assert row["min_us"] <= row["median_us"] <= row["max_us"]
    # Without --settle nothing runs untimed: the first call is timed.
    assert row["first_calls"] == 0, row["first_calls"]
    assert row["first_us"] > 0 and row["worst2-10_us"] > 0, row
    if sys.argv[2]:
        assert row["mpi_first_us"] > 0 and row["mpi_worst2-10_us"] > 0, row
PY
else
    expect_in r.json "\"results\": ["
fi
if [ -n "$plot" ]; then
    head -c 4 "$TMP/r.png" | grep -q "PNG" || fail "--plot wrote no PNG"
fi

# Sparse, imbalanced, integer max, in place, reduce to rank 1, three rotating buffers.
"$@" "$PERF" -c allreduce,reduce -b 4 -e 64k -f 64 -n 20 -d int32 -o max -r 1 -i \
    --rotate 3 --sparsity 0.9 --distribution imbalanced --check --probe-size 0 \
    >"$TMP/out2" 2>"$TMP/err2"
status=$?
[ "$status" -eq 0 ] || fail "the sparse in-place run exited $status: $(cat "$TMP/err2")"
expect_in out2 "sparse, 0.9 of each input zero, imbalanced distribution"

# expect_checked N ROWS WHAT STATUS: the run writing $TMP/outN and $TMP/errN exited 0
# (STATUS) and printed ROWS rows, every one checked ok.
expect_checked() {
    [ "$4" -eq 0 ] || fail "the $3 run exited $4: $(cat "$TMP/err$1")"
    grep -q "FAIL" "$TMP/out$1" && fail "a $3 row failed its check"
    rows=$(grep -c " ok" "$TMP/out$1")
    [ "$rows" -eq "$2" ] || fail "expected $2 checked $3 rows, got $rows"
}

# Inputs rewritten before every call (--fresh), in place and not: still checked right.
for inplace in "" -i; do
    # shellcheck disable=SC2086 # $inplace is one word or none
    "$@" "$PERF" -c allreduce,reduce -b 8 -e 256k -f 32 -n 20 --fresh $inplace --check \
        --probe-size 0 --json "$TMP/fresh.json" >"$TMP/out7" 2>"$TMP/err7"
    expect_checked 7 8 "--fresh ($inplace)" $?
    expect_in out7 "inputs rewritten before every call"
    grep -q '"fresh": true' "$TMP/fresh.json" || fail "--json does not say the inputs were fresh"
done

# Every timed call after a barrier (--barrier): checked right, said in the header and
# the JSON; --batch refuses it.
"$@" "$PERF" -c allreduce,reduce -b 8 -e 256k -f 32 -n 20 --barrier --check \
    --probe-size 0 --json "$TMP/barrier.json" >"$TMP/out7" 2>"$TMP/err7"
expect_checked 7 8 "--barrier" $?
expect_in out7 "every timed call after a barrier of its own library"
grep -q '"barrier": true' "$TMP/barrier.json" || fail "--json does not say --barrier"
"$PERF" --batch --barrier >"$TMP/out7" 2>&1 && fail "--batch --barrier was accepted"
expect_in out7 "cannot put a barrier between them"

# K buffer pairs in turn, every call's input written with new data (--buffers), beside
# the MPI library where there is one, in place and not: each row's check runs on the pair
# and the data set of its call, and the JSON says so.
for inplace in "" -i; do
    # shellcheck disable=SC2086 # $inplace is one word or none; $compare a list
    "$@" "$PERF" -c allreduce,reduce -b 8 -e 256k -f 32 -n 30 --buffers 4 $inplace --check \
        $compare --probe-size 0 --json "$TMP/buffers.json" >"$TMP/out10" 2>"$TMP/err10"
    expect_checked 10 8 "--buffers 4 ($inplace)" $?
    expect_in out10 "4 buffers in rotation"
    expect_in out10 "every call's input written with new data before it"
    grep -q '"buffers": true' "$TMP/buffers.json" || fail "--json does not say --buffers"
    grep -q '"rotate": 4' "$TMP/buffers.json" || fail "--json does not give the 4 pairs"
done

# Calls timed in runs (--batch), beside the MPI library where there is one: checked,
# every size timed, and the header says how.
# shellcheck disable=SC2086 # $compare is a list of words on purpose
"$@" "$PERF" -c allreduce,reduce -b 8 -e 64k -f 64 -n 250 --batch --check --probe-size 0 \
    $compare --json "$TMP/batch.json" >"$TMP/out_batch" 2>"$TMP/err_batch"
expect_checked _batch 6 "--batch" $?
if [ -n "$compare" ]; then
    expect_in out_batch "mpi_median_us"
fi
expect_in out_batch "calls timed in runs of back-to-back calls"
grep -q '"batch": true' "$TMP/batch.json" || fail "--json does not say the calls were batched"

# Buffers in fold memory (fold_mem_alloc): single copy through mappings of the peer's
# allocations, checked, in place and not.
for inplace in "" -i; do
    # shellcheck disable=SC2086 # $inplace is one word or none
    "$@" "$PERF" -c allreduce,reduce -b 64k -e 1M -f 4 -n 20 -A cma,auto --memory fold \
        --rotate 2 $inplace --check --probe-size 0 >"$TMP/out6" 2>"$TMP/err6"
    expect_checked 6 12 "fold-memory ($inplace)" $?
    expect_in out6 "buffers in fold memory"
done

# With --settle the calls in which fold tries rivals (FOLD_ONLINE) run untimed before
# anything is timed, until the ranks agree, and the JSON counts them: with the generic
# machine's rates
# (rivals within reach at 64 KiB, as in test_select_online) and 3 trials a candidate,
# a decision means at least 2 candidates x 3 calls; without one, only the first call.
rates="copy_gbs=40,copy_mem_gbs=15,reduce_gbs=30,reduce_mem_gbs=12,l2_bytes=0"
rates="$rates,copy_l2_gbs=40,reduce_l2_gbs=30,shm_gbs=10,shm_reduce_gbs=10,shm_write_gbs=10"
rates="$rates,shm_fold_gbs=10,shm_fold_far_gbs=10,cma_gbs=8,cma_mem_gbs=3,cma_us=1"
FOLD_MODEL=$rates FOLD_ONLINE=3 FOLD_LOG_LEVEL=debug "$@" -x FOLD_MODEL="$rates" \
    -x FOLD_ONLINE=3 -x FOLD_LOG_LEVEL=debug "$PERF" -c allreduce -b 64k -e 64k -n 10 -w 1 \
    -A auto,ring --settle --check --probe-size 0 --json "$TMP/settle.json" >"$TMP/out8" \
    2>"$TMP/err8"
expect_checked 8 2 "online trials" $?
expect_in out8 "iters untimed"
expect_in out8 "untimed before anything is timed (--settle)"
decided=$(grep -c "allreduce of 16384 float32 (sum, root 0): tried" "$TMP/err8")
if command -v python3 >/dev/null 2>&1; then
    python3 - "$TMP/settle.json" "$decided" <<'PY' || fail "first_calls is not what it should be"
import json, sys
rows = json.load(open(sys.argv[1]))["results"]
decided = int(sys.argv[2]) > 0
for row in rows:
    calls = row["first_calls"]
    if row["requested"] == "ring" or not decided:
        assert calls == 1, (row["requested"], calls)
    else:
        assert 6 <= calls <= 12, calls
PY
fi

# --probe-size each: a probe per size from 4 KiB over its own footprint, a bound in
# every such row and none below.
"$@" "$PERF" -c allreduce,reduce -b 2k -e 64k -f 32 -n 10 -w 1 --check --probe-size each \
    --json "$TMP/each.json" >"$TMP/out9" 2>"$TMP/err9"
expect_checked 9 4 "--probe-size each" $?
expect_in out9 "over each size's own footprint"
if command -v python3 >/dev/null 2>&1; then
    python3 - "$TMP/each.json" <<'PY' || fail "--probe-size each: the bounds are not right"
import json, sys
doc = json.load(open(sys.argv[1]))
assert doc["probe"] == "each size", doc["probe"]
for row in doc["results"]:
    if row["bytes"] < 4096:
        assert row["bound_us"] is None and row["probe_gbs"] is None, row
    else:
        assert row["bound_us"] > 0 and row["probe_gbs"] > 0, row
PY
fi

# MPI's iterations in blocks of their own (--compare mpi-apart): every row has MPI's time.
if [ -n "$compare" ]; then
    "$@" "$PERF" -c allreduce,reduce -b 8 -e 64k -f 64 -n 20 -w 2 --check \
        --compare mpi-apart --probe-size 0 >"$TMP/out5" 2>"$TMP/err5"
    status=$?
    [ "$status" -eq 0 ] || fail "the mpi-apart run exited $status: $(cat "$TMP/err5")"
    expect_in out5 "each size's iterations after fold's"
    rows=$(grep " ok " "$TMP/out5" | awk 'NF >= 20 && $17 > 0 && $18 > 0' | wc -l)
    [ "$rows" -eq 6 ] || fail "mpi-apart: expected 6 rows with MPI's time, got $rows"
fi

# A pair type with maxloc and a complex product, checked, with the MPI library beside.
for dtype_op in "double_int maxloc" "complex_float32 prod"; do
    # shellcheck disable=SC2086 # $dtype_op is two words; $compare a list
    "$@" "$PERF" -c allreduce,reduce -b 16 -e 64k -f 64 -n 10 -w 1 \
        -d ${dtype_op% *} -o ${dtype_op#* } --check $compare --probe-size 0 \
        >"$TMP/out4" 2>"$TMP/err4"
    status=$?
    [ "$status" -eq 0 ] || fail "the $dtype_op run exited $status: $(cat "$TMP/err4")"
    rows=$(grep -c " ok" "$TMP/out4")
    [ "$rows" -eq 6 ] || fail "$dtype_op: expected 6 checked rows, got $rows"
done

# --plot without gnuplot fails before the sweep, with a clear message.
"$@" -x FOLD_PERF_GNUPLOT="$TMP/no-gnuplot" "$PERF" --plot "$TMP/x.png" -e 64 \
    --probe-size 0 >"$TMP/out3" 2>"$TMP/err3"
status=$?
[ "$status" -eq 2 ] || fail "--plot without gnuplot exited $status, expected 2"
expect_in err3 "--plot needs gnuplot, and FOLD_PERF_GNUPLOT=$TMP/no-gnuplot is not"

if [ "$failures" -ne 0 ]; then
    echo "$failures check(s) failed"
    exit 1
fi
echo "perf_mp_run: all checks passed"
