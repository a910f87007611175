#!/usr/bin/env bash
# Issue 24's matrix for one /dev/shm size: in a private mount namespace with a tmpfs
# of SIZE on /dev/shm (as a container has), NP ranks run
#   hold    mp_shm_budget hold 16: sixteen communicators kept, 1 MiB reduced on each
#   churn   mp_shm_budget churn N: communicators created and freed (10000 on 64m x 2)
#   perf    fold_perf -c allreduce,reduce, every size from 8 B to 16 MiB, --check
#   perf_tcp the same with UCX_TLS=tcp,self
#   shim    (with SHIM and PROGRAM) mpi_comm_churn through LD_PRELOAD=libfold-mpi.so:
#           MPI_COMM_WORLD duplicated 16 times, 1 MiB reduced on each, then 300
#           MPI_Comm_dup / MPI_Comm_free
# over UCX's default transports (but perf_tcp), with Open MPI's own shared memory
# kept out (btl self,tcp). Every run must exit 0 without a signal and with correct results; fold's
# warning that a communicator runs without node shared memory must appear at most
# once per job (exactly once where communicators are kept beyond what /dev/shm can
# hold: hold, shim), its warning that UCX runs without shared memory at most once
# (exactly once where UCX's own pools cannot fit, SIZE <= 4 MiB, and never when
# UCX_TLS leaves shared memory out); nothing may be left
# in /dev/shm after a run.
#
# Needs root and unshare(1); exits 77 (ctest: skipped) saying why otherwise.
# Usage: shm_ns_test.sh SIZE NP MPIRUN MP_SHM_BUDGET FOLD_PERF [SHIM PROGRAM]
set -u
if [ $# -ne 5 ] && [ $# -ne 7 ]; then
    echo "usage: $0 SIZE NP MPIRUN MP_SHM_BUDGET FOLD_PERF [SHIM PROGRAM]" >&2
    exit 2
fi
SIZE=$1 NP=$2 MPIRUN=$3 BUDGET=$4 PERF=$5 SHIM=${6:-} PROGRAM=${7:-}

if [ "${FOLD_SHM_NS_INSIDE:-}" != 1 ]; then
    [ "$(id -u)" -eq 0 ] || { echo "SKIP: needs root (a tmpfs mounted on /dev/shm)"; exit 77; }
    command -v unshare >/dev/null || { echo "SKIP: no unshare(1) here"; exit 77; }
    if ! unshare -m --propagation private true 2>/dev/null; then
        echo "SKIP: this machine allows no private mount namespace (unshare -m failed)"
        exit 77
    fi
    FOLD_SHM_NS_INSIDE=1 exec unshare -m --propagation private bash "$0" "$@"
fi

if ! mount -t tmpfs -o size="$SIZE",mode=1777 tmpfs /dev/shm; then
    echo "SKIP: cannot mount a tmpfs of $SIZE on /dev/shm in the mount namespace"
    exit 77
fi
bytes=$(df -B1 --output=size /dev/shm | tail -1 | tr -d ' ')
tiny=0
[ "$bytes" -le $((4 << 20)) ] && tiny=1   # UCX 1.13's posix pool: ~4.1 MiB per process

churn=300
[ "$SIZE" = 64m ] && [ "$NP" -eq 2 ] && churn=10000
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
failures=0
MPI=("$MPIRUN" --allow-run-as-root --oversubscribe --bind-to none --mca pml ob1
     --mca btl self,tcp -n "$NP")

fail() {
    echo "FAIL: /dev/shm $SIZE, $NP ranks, $1: $2"
    sed 's/^/    /' "$TMP/$1.out"
    failures=$((failures + 1))
}

# run NAME NODE_WARNINGS UCX_WARNINGS COMMAND...: each an exact count, or "le1"
# (at most one); UCX_WARNINGS "auto" is 1 on a tmpfs of at most 4 MiB, else le1.
run() {
    local name=$1 want=$2 want_ucx=$3 start=$SECONDS
    shift 3
    [ "$want_ucx" = auto ] && { [ "$tiny" -eq 1 ] && want_ucx=1 || want_ucx=le1; }
    "$@" >"$TMP/$name.out" 2>&1
    local status=$? out="$TMP/$name.out"
    local budget transport left
    budget=$(grep -c 'warn .*runs the node-unaware algorithms' "$out")
    transport=$(grep -c "warn .*transport: UCX's shared-memory transports could not start" "$out")
    left=$(ls -A /dev/shm)
    if [ "$status" -ne 0 ]; then
        fail "$name" "exit status $status"
    elif grep -Eiq 'signal|bus error|segmentation fault|core dumped' "$out"; then
        fail "$name" "a process died of a signal"
    elif [ "$want" = le1 ] && [ "$budget" -gt 1 ]; then
        fail "$name" "the warning about node shared memory appeared $budget times"
    elif [ "$want" != le1 ] && [ "$budget" -ne "$want" ]; then
        fail "$name" "the warning about node shared memory appeared $budget times, not $want"
    elif [ "$transport" -gt 1 ] || { [ "$want_ucx" != le1 ] && [ "$transport" -ne "$want_ucx" ]; }; then
        fail "$name" "the warning about UCX without shared memory appeared $transport times"
    elif [ -n "$left" ]; then
        fail "$name" "left in /dev/shm: $left"
        rm -rf /dev/shm/*
    else
        echo "ok: /dev/shm $SIZE, $NP ranks, $name: $(grep -Eh '^(hold|churn):' "$out" | head -1)" \
             "[$budget node warning(s), $transport UCX warning(s), $((SECONDS - start)) s]"
        return 0
    fi
    return 1
}

run hold 1 auto "${MPI[@]}" "$BUDGET" hold 16
run churn le1 auto "${MPI[@]}" "$BUDGET" churn "$churn"
for tls in default tcp; do
    name=perf ucx=auto env=()
    [ "$tls" = tcp ] && name=perf_tcp ucx=0 env=(-x UCX_TLS=tcp,self)
    if run "$name" le1 "$ucx" "${MPI[@]}" "${env[@]}" "$PERF" -c allreduce,reduce -b 8 -e 16M \
           -f 2 --check -n 3 -w 1 --probe-size 0; then
        rows=$(grep -Ec '^  (allreduce|reduce) .* ok$' "$TMP/$name.out")
        [ "$rows" -eq 44 ] || fail "$name" "$rows rows checked ok, not 44 (22 sizes x 2)"
    fi
done
if [ -n "$SHIM" ]; then
    if run shim 1 auto "${MPI[@]}" -x LD_PRELOAD="$SHIM" -x FOLD_MPI_VERBOSE=1 \
           -x FOLD_MPI_ALLREDUCE_MIN=0 -x FOLD_MPI_ALLREDUCE_MAX=inf \
           -x FOLD_MPI_REDUCE_MIN=0 -x FOLD_MPI_REDUCE_MAX=inf "$PROGRAM" 16 300; then
        grep -q '^fold-mpi: calls over .* pmpi=0' "$TMP/shim.out" ||
            fail shim "not every call went through fold"
    fi
fi
[ "$failures" -eq 0 ] || exit 1
echo "shm_ns_test: /dev/shm $SIZE, $NP ranks: all passed"
