#!/bin/sh
# fold_info's what-if options: -S SHAPE prints a decision per size on shapes this
# machine cannot run, -p every algorithm's prediction as CSV, -m the model's
# parameters (FOLD_MODEL applies); bad shapes exit 2; -c prints every configuration
# table. Usage: fold_info_cli.sh FOLD_INFO
set -u
INFO=$1
fail() { echo "FAIL: $*"; exit 1; }

out=$("$INFO" -S 2,1,1) || fail "-S 2,1,1 exited $?"
echo "$out" | grep -q "4 ranks over 3 nodes (1-2 per node)" || fail "-S 2,1,1: no shape line"
# The choice is the model's best: never predicted slower than the best flat algorithm.
echo "$out" | awk '$1 == "allreduce" || $1 == "reduce" { if ($6 + 0 > $7 + 0) bad = 1 }
                   END { exit bad }' || fail "-S 2,1,1: a choice predicted slower than flat"
[ "$(echo "$out" | grep -c '^  \(allreduce\|reduce\) ')" -eq 24 ] || fail "-S: not 24 rows"

out=$("$INFO" -S 4x1) || fail "-S 4x1 exited $?"
echo "$out" | grep -Eq "^  allreduce .*(dpml|shm_flat)" && fail "-S 4x1: node-aware on one rank per node"

csv=$("$INFO" -S 2x2 -p) || fail "-p exited $?"
echo "$csv" | head -1 | grep -q "^# collective,algorithm,bytes,leaders,predicted_us" || fail "-p header"
echo "$csv" | grep -q "^allreduce,dpml_pipelined,1048576,[12]," || fail "-p: no dpml_pipelined row"
echo "$csv" | grep -q "^reduce,shm_flat," && fail "-p: shm_flat across nodes"

FOLD_MODEL=flag_us=0.75 "$INFO" -m | grep -q "^flag_us 0.75$" || fail "-m: FOLD_MODEL not applied"
FOLD_HUGE_PAGES=off "$INFO" -m | grep -Eq "^# Huge pages under the kernel's copies \(FOLD_HUGE_PAGES=off\): (off;|no single|the kernel makes none)" ||
    fail "-m: no line on huge pages"

# -c: every table (runtime, MPI shim, tools), each variable with its default and the
# environment's value, checked by the variable's parser.
cfg=$(FOLD_SEGMENT_SIZE=12q FOLD_MPI_REDUCE_MIN=64k "$INFO" -c) || fail "-c exited $?"
for line in "FOLD_TRANSPORT=ucp" "FOLD_MPI_ENABLE=1" "FOLD_PERF_GNUPLOT=" \
            "FOLD_MPI_REDUCE_MIN=64k  # from the environment"; do
    echo "$cfg" | grep -qxF "$line" || fail "-c: no line '$line'"
done
echo "$cfg" | grep -q "^FOLD_SEGMENT_SIZE=12q  # from the environment, not valid: expected" ||
    fail "-c: a bad value is not flagged"
[ "$(echo "$cfg" | grep -c '^# default: ')" -eq "$(echo "$cfg" | grep -c '^FOLD_')" ] ||
    fail "-c: a variable without its default"

# -L outside a launcher: no PMIx server, so fold_init needs an out-of-band allgather.
lau=$(env -u PMIX_NAMESPACE -u OMPI_COMM_WORLD_SIZE -u SLURM_JOB_ID "$INFO" -L) ||
    fail "-L exited $?"
echo "$lau" | grep -q "PMIx server:  not found" || fail "-L: a PMIx server outside a launcher"
echo "$lau" | grep -q "fold_init:    fails unless given an out-of-band allgather" ||
    fail "-L: no bootstrap line"
echo "$lau" | grep -Eq "MPI shim: +(libfold-mpi.so, built for|not built)" || fail "-L: no shim line"
echo "$lau" | grep -Eq "socket\(s\), [0-9]+ core\(s\)" || fail "-L: no hwloc line"

"$INFO" -S 0x4 >/dev/null 2>&1; [ $? -eq 2 ] || fail "-S 0x4 should exit 2"
"$INFO" -S 2,x >/dev/null 2>&1; [ $? -eq 2 ] || fail "-S 2,x should exit 2"
echo "fold_info_cli: ok"
