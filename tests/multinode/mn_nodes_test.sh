#!/usr/bin/env bash
# Runs a fold program (mp_coll) on namespaced nodes over TCP, so that every message
# between nodes crosses a veth link, then checks from fold's own debug log that fold saw
# the nodes mnrun made: one "context up" line per rank, as many nodes as asked for, the
# ranks of each node grouped together, and local sizes matching --ppn.
# Usage: mn_nodes_test.sh [--transport ucp|ofi-tcp] [--env NAME=VALUE]... PPN TIMEOUT_SEC
#        PROGRAM [ARGS...]   (PPN as mnrun's --ppn list)
#   --transport ucp      fold over UCX with UCX_TLS=tcp,self (default)
#   --transport ofi-tcp  fold over libfabric, FOLD_TRANSPORT=ofi and
#                        FOLD_OFI_PROVIDER="tcp;ofi_rxm" (exported here and passed with
#                        mpirun -x NAME, so that the semicolon never crosses a command line)
#   --env NAME=VALUE     one more variable every rank gets (FOLD_SINGLE_COPY=off)
# Exit status: the program's, 77 when mnrun skipped, 1 when the node check fails, 2 on a
# usage error.
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
usage="usage: mn_nodes_test.sh [--transport ucp|ofi-tcp] [--env NAME=VALUE]... PPN TIMEOUT_SEC PROGRAM [ARGS...]"
transport=ucp
extra_env=()
while [ $# -gt 0 ]; do
    case $1 in
        --env)
            [ $# -ge 2 ] && [[ $2 == *=* ]] || { echo "$usage" >&2; exit 2; }
            extra_env+=(-x "$2"); shift 2 ;;
        --transport)
            [ $# -ge 2 ] || { echo "$usage" >&2; exit 2; }
            transport=$2; shift 2 ;;
        --transport=*) transport=${1#--transport=}; shift ;;
        *) break ;;
    esac
done
[ $# -ge 3 ] || { echo "$usage" >&2; exit 2; }
ppn=$1
timeout_s=$2
shift 2

# What every rank gets besides FOLD_LOG_LEVEL=debug. UCX_TLS=tcp,self keeps UCX off the
# shared memory the namespaces share; for ofi it is harmless (fold opens no UCX then).
transport_args=(-x "UCX_TLS=tcp,self")
case $transport in
    ucp) ;;
    ofi-tcp)
        export FOLD_TRANSPORT=ofi
        export FOLD_OFI_PROVIDER="tcp;ofi_rxm"
        transport_args+=(-x FOLD_TRANSPORT -x FOLD_OFI_PROVIDER)
        ;;
    *) echo "mn_nodes_test: unknown transport: $transport" >&2; echo "$usage" >&2; exit 2 ;;
esac
transport_args+=("${extra_env[@]}")

log=$(mktemp)
trap 'rm -f "$log"' EXIT

# "rank R of N, node X of Y (local rank L of S)" -> "R X Y S", one line per rank.
context_lines() {
    sed -n 's/.*context up: rank \([0-9]*\) of [0-9]*, node \([0-9]*\) of \([0-9]*\) (local rank [0-9]* of \([0-9]*\)).*/\1 \2 \3 \4/p' "$log"
}

# The node placement mpirun makes for --host node0:a,node1:b,...: ranks fill node0's
# slots, then node1's. Prints "rank node ranks_on_node" lines.
expected_placement() {
    local -a counts
    local i r=0 k
    IFS=, read -r -a counts <<<"$ppn"
    for ((i = 0; i < ${#counts[@]}; i++)); do
        for ((k = 0; k < counts[i]; k++)); do
            echo "$r $i ${counts[i]}"
            r=$((r + 1))
        done
    done
}

# fold numbers nodes its own way, so compare the grouping rather than the numbers:
# ranks of one mnrun node share one fold node, ranks of different ones never do.
check_nodes() {
    local nnodes ok=1
    nnodes=$(awk -F, '{print NF}' <<<"$ppn")
    awk -v nnodes="$nnodes" '
        NR == FNR { want_node[$1] = $2; want_size[$1] = $3; nranks++; next }
        {
            seen[$1]++
            if ($3 != nnodes) { printf "rank %d sees %d nodes, expected %d\n", $1, $3, nnodes; bad = 1 }
            if ($4 != want_size[$1]) { printf "rank %d has %d local ranks, expected %d\n", $1, $4, want_size[$1]; bad = 1 }
            m = want_node[$1]
            if ((m in fold_of) && fold_of[m] != $2) { printf "node%d ranks split over fold nodes %d and %d\n", m, fold_of[m], $2; bad = 1 }
            if (($2 in mn_of) && mn_of[$2] != m) { printf "node%d and node%d merged into fold node %d\n", mn_of[$2], m, $2; bad = 1 }
            fold_of[m] = $2; mn_of[$2] = m
        }
        END {
            for (r = 0; r < nranks; r++) {
                if (seen[r] != 1) { printf "rank %d: %d context-up lines, expected 1\n", r, seen[r]; bad = 1 }
            }
            exit bad
        }' <(expected_placement) <(context_lines) || ok=0
    if [ "$ok" -eq 1 ]; then
        echo "mn_nodes_test: fold saw $nnodes nodes with ranks per node $ppn"
    fi
    [ "$ok" -eq 1 ]
}

# "..., N ranks on its machine, ... S polls before a yield" must say every rank and,
# with more ranks than cores, the oversubscribed spin count.
check_machine() {
    local nranks cores want_spin
    nranks=$(awk -F, '{for (i = 1; i <= NF; i++) s += $i; print s}' <<<"$ppn")
    cores=$(nproc --all)
    want_spin=100000
    [ "$nranks" -le "$cores" ] || want_spin=200
    grep 'context up:' "$log" | awk -v n="$nranks" -v spin="$want_spin" '
        {
            if (!match($0, /[0-9]+ ranks on its machine/)) { print "no machine count: " $0; bad = 1; next }
            m = substr($0, RSTART, RLENGTH) + 0
            if (m != n) { printf "a rank counts %d ranks on its machine, expected %d\n", m, n; bad = 1 }
            if (!match($0, /[0-9]+ polls before a yield/)) { print "no spin count: " $0; bad = 1; next }
            s = substr($0, RSTART, RLENGTH) + 0
            if (s != spin) { printf "a rank polls %d times before a yield, expected %d\n", s, spin; bad = 1 }
        }
        END { exit bad }'
}

status=0
echo "mn_nodes_test: transport $transport, ranks per node $ppn"
"$here/mnrun.sh" --ppn "$ppn" --timeout "$timeout_s" --stats \
    "${transport_args[@]}" -x FOLD_LOG_LEVEL=debug -- "$@" >"$log" 2>&1 || status=$?
cat "$log"
[ "$status" -ne 77 ] || exit 77
# Every rank must have come up on the transport asked for ("context up: ..., transport
# NAME, ..."), so that a fallback to another backend cannot pass unnoticed.
want_tl=${transport%%-*}
wrong_tl=$(grep 'context up:' "$log" | grep -cv ", transport $want_tl," || true)
if [ "$wrong_tl" -ne 0 ]; then
    echo "mn_nodes_test: FAILED: $wrong_tl context-up lines without transport $want_tl"
    exit 1
fi
if ! check_nodes; then
    echo "mn_nodes_test: FAILED: fold's node detection does not match the namespaces"
    exit 1
fi
# The namespaced nodes share one kernel and its cores: every rank must count all of
# them as on its machine, and yield early when they outnumber the cores (spinning
# there cost a whole time slice, 4-8 ms, per call).
if ! check_machine; then
    echo "mn_nodes_test: FAILED: fold did not see that the nodes share one machine"
    exit 1
fi
# Single copy forced off must reach every node's set-up ("..., single copy off").
if [[ " ${extra_env[*]} " == *" FOLD_SINGLE_COPY=off "* ]] &&
       { grep -q 'single copy on' "$log" || ! grep -q 'single copy off' "$log"; }; then
    echo "mn_nodes_test: FAILED: a node set up single copy although FOLD_SINGLE_COPY=off"
    exit 1
fi
exit "$status"
