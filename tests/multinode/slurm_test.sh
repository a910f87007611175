#!/usr/bin/env bash
# fold under a real Slurm on 2 namespaced nodes x 2 ranks (slurm_run.sh), and nothing
# left behind afterwards:
#   slurm_test.sh perf FOLD_PERF     fold_perf under srun --mpi=pmix, fold bootstrapping
#                                    through Slurm's PMIx server (--bootstrap pmix), every
#                                    result checked (--check), inter-node traffic over the
#                                    veth links (UCX_TLS=tcp,self)
#   slurm_test.sh shim SHIM PROGRAM  an Open MPI program under srun --mpi=pmix with the
#                                    shim preloaded, serving every call
# Exit status: 0 passed, 1 failed, 77 skipped (no namespaces or no Slurm).
set -uo pipefail
here=$(dirname "$(readlink -f "$0")")
mode=${1:?usage: slurm_test.sh perf FOLD_PERF | shim SHIM PROGRAM}
shift
out=$(mktemp)
trap 'rm -f "$out"' EXIT

fail() {
    echo "FAIL: $*"
    cat "$out"
    exit 1
}

srun_args=(--mpi=pmix -N 2 -n 4 --ntasks-per-node=2)
# Open MPI's own traffic over TCP alone: its shared-memory BTL (vader) here failed now
# and then to open a node peer's segment ("A system call failed during shared memory
# initialization ... open(2) ... No such file or directory"), and its TCP BTL then called
# a NULL active-message handler (SIGSEGV at PC 0, return address in mca_btl_tcp.so):
# 3 runs of the shim test in about 340 crashed so (once in a CI run), none of 100 with
# TCP alone. fold's own paths are not affected by this choice.
export OMPI_MCA_btl=self,tcp
case $mode in
perf)
    # srun passes its environment on: UCX_TLS reaches every rank.
    UCX_TLS=tcp,self bash "$here/slurm_run.sh" --timeout 150 -- "${srun_args[@]}" \
        "$1" --bootstrap pmix --check -c allreduce,reduce -b 8 -e 1M -f 8 >"$out" 2>&1
    ;;
shim)
    # Slurm does not hand LD_PRELOAD from srun's --export to the tasks; env(1) sets it
    # for the program alone.
    bash "$here/slurm_run.sh" --timeout 150 -- "${srun_args[@]}" env LD_PRELOAD="$1" \
        FOLD_MPI_VERBOSE=1 FOLD_MPI_ALLREDUCE_MIN=0 FOLD_MPI_ALLREDUCE_MAX=inf \
        FOLD_MPI_REDUCE_MIN=0 FOLD_MPI_REDUCE_MAX=inf "$2" >"$out" 2>&1
    ;;
*)
    echo "slurm_test.sh: unknown mode $mode" >&2
    exit 2
    ;;
esac
status=$?
[ "$status" -eq 77 ] && { cat "$out"; exit 77; }
[ "$status" -eq 0 ] || fail "slurm_run.sh exited with $status"

if [ "$mode" = perf ]; then
    grep -q '4 ranks on 2 nodes (at most 2 per node)' "$out" ||
        fail "fold did not see 4 ranks on 2 nodes"
    grep -q '^# bootstrap pmix' "$out" || fail "fold did not bootstrap through PMIx"
    rows=$(grep -cE '^  (allreduce|reduce) ' "$out")
    good=$(grep -cE '^  (allreduce|reduce) .* ok$' "$out")
    [ "$rows" -ge 12 ] || fail "expected 12 or more result rows, got $rows"
    [ "$good" -eq "$rows" ] || fail "$((rows - good)) of $rows rows not checked ok"
else
    grep -q '^passed$' "$out" || fail "the program did not pass"
    expect=$(sed -n 's/^expect: //p' "$out")
    totals=$(sed -n 's/^fold-mpi: calls over 4 ranks: //p' "$out")
    [ -n "$expect" ] && [ "$totals" = "$expect" ] ||
        fail "shim totals '$totals', expected '$expect'"
fi

# Everything the run started is gone: its namespaces (and with them every process in
# them: munged, slurmctld, the slurmds, the ranks), its state directory.
id=$(sed -n 's/^mnrun: run \([0-9a-f]*\): Slurm.*/\1/p' "$out")
[ -n "$id" ] || fail "no run id in the output"
if ip netns list | grep -q "^fmn-$id-"; then
    fail "namespaces of run $id are left: $(ip netns list | grep "^fmn-$id-" | tr '\n' ' ')"
fi
[ ! -e "/run/fold-mnrun/$id" ] || fail "/run/fold-mnrun/$id is left"
if pgrep -f "/run/fold-mnrun/$id/" >/dev/null; then
    fail "processes of run $id are left: $(pgrep -af "/run/fold-mnrun/$id/")"
fi
cat "$out"
echo "slurm_test $mode: passed"
