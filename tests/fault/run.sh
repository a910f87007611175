#!/bin/sh
# Fault-injection matrix (issue 16): runs fold_fault over transports x algorithms x
# faults x runs (seed, victim, variant) and prints one table.
#
#   tests/fault/run.sh            the short slice on 3 ranks (CI: ctest -R fault_slice, at --timeout 1):
#                                 ring, dpml, binomial, cma x {ucp, ofi tcp;ofi_rxm} x
#                                 {kill, stop}, the victim rotating over the ranks
#   tests/fault/run.sh --full     every algorithm x {ucp, ucp over tcp, ofi tcp;ofi_rxm,
#                                 ofi shm} x {kill, stop} x three runs on 4 ranks:
#                                 seed 1 victim 0 (reduce root, first DPML leader,
#                                 blocking calls), seed 2 victim 1 (non-blocking calls
#                                 completed by fold_test or fold_wait), seed 3 victim 3
#                                 (a new communicator every third call: split, call, free)
#   tests/fault/run.sh --two-nodes  4 ranks over two network namespaces joined by a veth
#                                 pair (made and removed here; root only, else exit 77),
#                                 ofi tcp;ofi_rxm, faults kill, stop and link (the veth
#                                 taken down mid-collective: every rank must fail)
#
# Options: --bin PATH (fold_fault; default build/tests/fault/fold_fault), --ranks N,
# --runs "SEED:VICTIM:VARIANT ..." (VICTIM a rank or "rotate"; VARIANT plain, nb or
# split), --faults "kill stop", --timeout S (FOLD_TIMEOUT, default 2),
# --transports "ucp ucp:tcp ucp+errnone ofi:tcp;ofi_rxm ofi:shm" (ucp:tcp is
# UCX_TLS=tcp,self, where UCX itself notices a dead peer; ucp+errnone is
# FOLD_UCX_ERR_MODE=none, where nothing is promised: a survivor times out, or UCX
# aborts it when its cma transport finds the peer's process gone), --algs "allreduce:ring reduce:chain ...",
# --max-count N (largest call, int32 elements), --netns A,B (ranks blocked over two
# network namespaces).
# Exits 1 when any case failed: a survivor without FOLD_ERR_PEER_FAILED or
# FOLD_ERR_TIMEOUT within 2 x FOLD_TIMEOUT, a message naming no peer and step, a hang
# in fold_finalize, a resumed victim that hangs, a wrong result before the fault, or a
# segment left in /dev/shm.
set -u

here=$(cd "$(dirname "$0")" && pwd)
bin=${FOLD_FAULT:-$here/../../build/tests/fault/fold_fault}
full=0
ranks=3
runs="1:rotate:plain"
faults="kill stop"
timeout=2
transports="ucp ofi:tcp;ofi_rxm"
algs=""
netns=""
link=""
two=0
max_count=262144

all_algs="allreduce:recursive_doubling allreduce:rabenseifner allreduce:ring allreduce:dpml
allreduce:dpml_pipelined allreduce:shm_flat allreduce:cma allreduce:auto
reduce:binomial reduce:rabenseifner reduce:ring reduce:chain reduce:bintree reduce:greedy
reduce:dpml reduce:dpml_pipelined reduce:shm_flat reduce:cma"
slice_algs="allreduce:ring allreduce:dpml reduce:binomial reduce:cma"

while [ $# -gt 0 ]; do
    case $1 in
    --full) full=1; ranks=4; runs="1:0:plain 2:1:nb 3:last:split"
            transports="ucp ucp:tcp ofi:tcp;ofi_rxm ofi:shm" ;;
    --two-nodes) two=1; ranks=4; transports="ofi:tcp;ofi_rxm"; faults="kill stop link" ;;
    --bin) bin=$2; shift ;;
    --ranks) ranks=$2; shift ;;
    --runs) runs=$2; shift ;;
    --faults) faults=$2; shift ;;
    --timeout) timeout=$2; shift ;;
    --transports) transports=$2; shift ;;
    --algs) algs=$2; shift ;;
    --netns) netns=$2; shift ;;
    --max-count) max_count=$2; shift ;;
    -h|--help) sed -n '2,29p' "$0"; exit 0 ;;
    *) echo "run.sh: unknown option $1" >&2; exit 2 ;;
    esac
    shift
done
[ -x "$bin" ] || { echo "run.sh: no fold_fault at $bin (build first, or --bin)" >&2; exit 2; }
if [ -z "$algs" ]; then
    if [ $full = 1 ]; then algs=$all_algs; else algs=$slice_algs; fi
fi

out=$(mktemp /tmp/fold-fault-run.XXXXXX)
trap 'rm -f "$out"' EXIT
if [ $two = 1 ]; then
    # Two "nodes": namespaces joined by a veth pair (fold tells nodes apart by their
    # network namespace). UCX does not connect over this bare pair; ofi does.
    nsa=ffault-$$-a; nsb=ffault-$$-b; va=ffa$$; vb=ffb$$
    cleanup_ns() { ip netns del "$nsa" 2>/dev/null; ip netns del "$nsb" 2>/dev/null; rm -f "$out"; }
    if ! ip netns add "$nsa" 2>/dev/null; then
        echo "run.sh: cannot create network namespaces here (root only): skipped"
        exit 77
    fi
    trap cleanup_ns EXIT
    ip netns add "$nsb" && ip link add "$va" type veth peer name "$vb" &&
        ip link set "$va" netns "$nsa" && ip link set "$vb" netns "$nsb" &&
        ip -n "$nsa" addr add 10.79.0.1/24 dev "$va" && ip -n "$nsb" addr add 10.79.0.2/24 dev "$vb" &&
        ip -n "$nsa" link set "$va" up && ip -n "$nsb" link set "$vb" up &&
        ip -n "$nsa" link set lo up && ip -n "$nsb" link set lo up ||
        { echo "run.sh: cannot set up the namespaces: skipped"; exit 77; }
    netns="$nsa,$nsb"; link="$nsb:$vb"
fi
cases=0; failed=0; survivors=0; clean=0; leftovers=0; slowest=0.00; slowest_fin=0.00
failures=""; turn=0
row() { printf '%-20s %-32s %-5s %6s %4s %9s %5s %10s %8s %9s %s\n' "$@"; }
row transport collective fault victim seed survivors clean "detect(s)" "final(s)" \
    leftovers verdict
for tl in $transports; do
    errmode=peer
    case $tl in
    ofi:*) tname=ofi; prov=${tl#ofi:}; tls="" ;;
    ucp+errnone) tname=ucp; prov=""; tls=""; errmode=none ;;
    ucp:*) tname=ucp; prov=""; tls="${tl#ucp:},self" ;;
    *) tname=$tl; prov=""; tls="" ;;
    esac
    tlabel=$tname${prov:+/$prov}${tls:+/$tls}
    [ "$errmode" = none ] && tlabel="$tlabel/errnone"
    for ca in $algs; do
        coll=${ca%%:*}; alg=${ca#*:}
        for fault in $faults; do
            for run in $runs; do
                seed=${run%%:*}; rest=${run#*:}; victim=${rest%%:*}; variant=${rest#*:}
                case $victim in
                rotate) victim=$(( (turn + 1) % ranks )); turn=$((turn + 1)) ;;
                last) victim=$((ranks - 1)) ;;
                esac
                # Victim 0 is the reduce root and the node's first DPML leader.
                set -- -n "$ranks" -t "$tname" -c "$coll" -a "$alg" -f "$fault" \
                    -v "$victim" -s "$seed" -T "$timeout" -m "$max_count"
                [ -n "$prov" ] && set -- "$@" -p "$prov"
                [ -n "$netns" ] && set -- "$@" -N "$netns"
                [ "$fault" = link ] && set -- "$@" -L "$link"
                tag=""
                case $variant in
                nb) set -- "$@" -i; tag="(nb)" ;;
                split) set -- "$@" -S; tag="(split)" ;;
                esac
                if [ -n "$tls" ]; then
                    UCX_TLS=$tls FOLD_UCX_ERR_MODE=$errmode "$bin" "$@" >"$out" 2>&1
                else
                    FOLD_UCX_ERR_MODE=$errmode "$bin" "$@" >"$out" 2>&1
                fi
                rc=$?
                line=$(grep '^RESULT ' "$out")
                cases=$((cases + 1))
                get() { echo "$line" | tr ' ' '\n' | sed -n "s/^$1=//p"; }
                if [ -z "$line" ]; then
                    verdict="CRASH(rc=$rc)"; s=0; c=0; d=0; l=0; f=0
                else
                    verdict=$(get verdict); s=$(get survivors); c=$(get clean)
                    d=$(get slowest); l=$(get leftovers); f=$(get finalize)
                fi
                survivors=$((survivors + s)); clean=$((clean + c))
                leftovers=$((leftovers + l))
                slowest=$(awk -v a="$slowest" -v b="$d" 'BEGIN { print (b > a) ? b : a }')
                slowest_fin=$(awk -v a="$slowest_fin" -v b="$f" 'BEGIN { print (b > a) ? b : a }')
                row "$tlabel" "$coll$tag:$alg" "$fault" "$victim" "$seed" "$s" "$c" "$d" "$f" \
                    "$l" "$verdict"
                if [ "$rc" != 0 ]; then
                    failed=$((failed + 1))
                    sed 's/^/    | /' "$out"
                    failures="$failures
  $tlabel $coll$tag:$alg $fault victim $victim seed $seed: $verdict"
                fi
            done
        done
    done
done
echo
echo "cases run:                 $cases"
echo "cases failed:              $failed"
echo "survivors failed cleanly:  $clean of $survivors"
echo "slowest detection:         ${slowest} s (bound: 2 x FOLD_TIMEOUT = $(awk -v t="$timeout" 'BEGIN { print 2 * t }') s)"
echo "slowest fold_finalize:     ${slowest_fin} s"
echo "segments left in /dev/shm: $leftovers"
if [ "$failed" != 0 ]; then
    echo "failed cases:$failures"
    exit 1
fi
exit 0
