#!/usr/bin/env bash
# sim_validate.sh: fold_sim against measured runs on the namespaced harness. For each
# shape and link cap it runs fold_perf across the harness's nodes (mnrun.sh, UCX over
# TCP), every timed call after a barrier (--barrier: a call's latency, as the replay of
# one call gives it, not a loop's period), and replays each measured row (collective,
# algorithm and segment, size) in fold_sim on a platform built from the network
# fold_init measures on 2 nodes x 1 rank at that cap (harness_platform and probe_link
# below). Prints one table row per measured row: measured median, simulated time,
# fold's model of the same schedules, and simulated / measured.
#
#   tests/multinode/sim_validate.sh [options]
#     --shapes "2x1 2x2 4x1"     NODESxPPN shapes (default: these three)
#     --rates "none 1gbit"       link caps, mnrun.sh --rate syntax; none: uncapped
#     --collectives "allreduce reduce"
#     --algorithms "allreduce:A,B reduce:C,D"  (default: every flat and dpml algorithm)
#     -b BYTES -e BYTES -f N     sizes, as fold_perf's (default 64K, 16M, 4)
#     --build DIR                the build directory (default: build)
#     --out DIR                  where the CSVs and logs go (default: a temporary one)
#
# Exit status: 0, 77 where this machine cannot make namespaces (mnrun.sh check), 1 when
# a run or a replay fails. It times nothing itself: the figures are fold_perf's medians.
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
repo=$(cd "$here/../.." && pwd)
shapes="2x1 2x2 4x1"
rates="none 1gbit"
collectives="allreduce reduce"
algorithms="allreduce:recursive_doubling,rabenseifner,ring,dpml,dpml_pipelined"
algorithms+=" reduce:binomial,rabenseifner,ring,chain,bintree,greedy,dpml,dpml_pipelined"
begin=64K end=16M factor=4
build="$repo/build"
out=""
readonly PROBES=3

while [ $# -gt 0 ]; do
    case "$1" in
    --shapes)      shapes=$2; shift 2 ;;
    --rates)       rates=$2; shift 2 ;;
    --collectives) collectives=$2; shift 2 ;;
    --algorithms)  algorithms=$2; shift 2 ;;
    -b)            begin=$2; shift 2 ;;
    -e)            end=$2; shift 2 ;;
    -f)            factor=$2; shift 2 ;;
    --build)       build=$(cd "$2" && pwd); shift 2 ;;
    --out)         mkdir -p "$2"; out=$(cd "$2" && pwd); shift 2 ;;
    -h|--help)     sed -n '2,20p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *)             echo "sim_validate.sh: unknown option $1" >&2; exit 2 ;;
    esac
done

perf="$build/perf/fold_perf"
sim="$build/sim/fold_sim"
for prog in "$perf" "$sim"; do
    if [ ! -x "$prog" ]; then
        echo "sim_validate.sh: $prog is not built" >&2
        exit 1
    fi
done
status=0
"$here/mnrun.sh" check || status=$?
if [ "$status" -ne 0 ]; then
    echo "sim_validate.sh: this machine cannot make the harness's namespaces" >&2
    exit 77
fi
if [ -z "$out" ]; then
    out=$(mktemp -d)
    trap 'rm -rf "$out"' EXIT
fi

algorithms_of() {   # algorithms_of COLL: the comma-separated list for COLL
    local entry
    for entry in $algorithms; do
        if [ "${entry%%:*}" = "$1" ]; then
            echo "${entry#*:}"
            return
        fi
    done
}

# network LOG: "LAT_US GBS" from fold_init's "network measured" line.
network() {
    sed -n 's/.*network measured: \([0-9.]*\) us a small message, \([0-9.e+-]*\) GB\/s.*/\1 \2/p' \
        "$1" | head -n 1
}

# harness_platform NODES PPN LAT_US GBS RATE_GBS: the harness as SimGrid sees it. Every
# byte between two ranks, of one node or two, goes through the kernel's TCP stack on
# the machine's own cores, so all of them share one link of the rate fold_init
# measured one way (a link's both directions and every pair of nodes: one SHARED
# link); a tc cap adds each node's own link to the bridge, capped in each direction
# (SPLITDUPLEX). The hosts carry the measured figures for selection.
harness_platform() {
    local n=$1 ppn=$2 lat=$3 gbs=$4 cap=$5 i j
    local lat_s
    lat_s=$(awk -v l="$lat" 'BEGIN { printf "%.9g", l * 1e-6 }')
    printf "<?xml version='1.0'?>\n"
    printf '<!DOCTYPE platform SYSTEM "https://simgrid.org/simgrid.dtd">\n'
    printf '<platform version="4.1">\n  <zone id="harness" routing="Full">\n'
    for ((i = 0; i < n; i++)); do
        printf '    <host id="node-%d" speed="1Gf" core="%d">\n' "$i" "$ppn"
        printf '      <prop id="fold_model" value="inter_gbs=%s,inter_lat_us=%s"/>\n' \
               "$(awk -v g="$gbs" -v c="$cap" 'BEGIN { print c != "" && c < g ? c : g }')" "$lat"
        printf '    </host>\n'
    done
    printf '    <link id="tcp" bandwidth="%sGBps" latency="%ss" sharing_policy="SHARED"/>\n' \
           "$gbs" "$lat_s"
    for ((i = 0; i < n && ${#cap} > 0; i++)); do
        printf '    <link id="eth%d" bandwidth="%sGBps" latency="0s" ' "$i" "$cap"
        printf 'sharing_policy="SPLITDUPLEX"/>\n'
    done
    for ((i = 0; i < n; i++)); do
        for ((j = 0; j < n; j++)); do
            printf '    <route src="node-%d" dst="node-%d" symmetrical="NO">' "$i" "$j"
            if [ -n "$cap" ] && [ "$i" -ne "$j" ]; then
                printf '<link_ctn id="eth%d" direction="UP"/>' "$i"
                printf '<link_ctn id="eth%d" direction="DOWN"/>' "$j"
            fi
            printf '<link_ctn id="tcp"/></route>\n'
        done
    done
    printf '  </zone>\n</platform>\n'
}

# probe_link RATE: "LAT_US GBS", the medians of PROBES fold_init measurements between 2
# nodes of 1 rank at that cap. Every shape's platform takes them: with more ranks than
# the machine has cores (2x2 and 4x1 on 2 cores) the probe can time the scheduler.
probe_link() {
    local rate_args=() i lat gbs
    [ "$1" = none ] || rate_args=(--rate "$1")
    for ((i = 0; i < PROBES; i++)); do
        "$here/mnrun.sh" --nodes 2 --ppn 1 "${rate_args[@]}" -x UCX_TLS=tcp,self \
            -x FOLD_LOG_LEVEL=info --mca btl tcp,self --mca pml ob1 -- "$perf" -b 8 -e 8 \
            >"$out/probe-$1-$i.log" 2>&1 || { echo "sim_validate.sh: probe failed" >&2; exit 1; }
        network "$out/probe-$1-$i.log"
    done >"$out/probe-$1.txt"
    [ "$(wc -l <"$out/probe-$1.txt")" -eq "$PROBES" ] || return 1
    lat=$(cut -d' ' -f1 "$out/probe-$1.txt" | sort -g | sed -n "$(((PROBES + 1) / 2))p")
    gbs=$(cut -d' ' -f2 "$out/probe-$1.txt" | sort -g | sed -n "$(((PROBES + 1) / 2))p")
    echo "$lat $gbs"
}

declare -A link
link_gbs_uncapped=""
for rate in none $rates; do
    [ -z "${link[$rate]:-}" ] || continue
    link[$rate]=$(probe_link "$rate") || { echo "sim_validate.sh: no network measurement" \
                                                  "at $rate" >&2; exit 1; }
done
read -r _ link_gbs_uncapped <<<"${link[none]}"

printf '| shape | link | collective | algorithm | bytes | measured us | simulated us | '
printf 'model us | simulated / measured |\n|---|---|---|---|---|---|---|---|---|\n'
for shape in $shapes; do
    nodes=${shape%x*} ppn=${shape#*x}
    for rate in $rates; do
        rate_args=()
        if [ "$rate" != none ]; then
            rate_args=(--rate "$rate")
        fi
        for coll in $collectives; do
            list=$(algorithms_of "$coll")
            [ -n "$list" ] || continue
            tag="$shape-$rate-$coll"
            if ! "$here/mnrun.sh" --nodes "$nodes" --ppn "$ppn" "${rate_args[@]}" \
                    -x UCX_TLS=tcp,self --mca btl tcp,self \
                    --mca pml ob1 -- "$perf" -c "$coll" -A "$list" -b "$begin" -e "$end" \
                    -f "$factor" --barrier --csv "$out/$tag.csv" >"$out/$tag.log" 2>&1; then
                echo "sim_validate.sh: the run of $tag failed; its log:" >&2
                tail -n 20 "$out/$tag.log" >&2
                exit 1
            fi
            read -r lat gbs <<<"${link[$rate]}"
            # The uncapped link measures the machine's TCP rate; a capped one, its cap.
            tcp_gbs=$gbs cap=""
            if [ "$rate" != none ]; then
                tcp_gbs=${link_gbs_uncapped:-$(awk -v g="$gbs" 'BEGIN { print 10 * g }')}
                cap=$gbs
            fi
            harness_platform "$nodes" "$ppn" "$lat" "$tcp_gbs" "$cap" >"$out/$tag.xml"
            # Rows: collective,algorithm,...,bytes (4),...,median_us (10).
            tail -n +2 "$out/$tag.csv" | while IFS=, read -r c alg _ bytes _ _ _ _ _ median _; do
                row=$("$sim" -S "$shape" -c "$c" -b "$bytes" -A "$alg" --csv \
                      --platform "$out/$tag.xml" 2>>"$out/$tag.sim.log" | tail -n 1) ||
                    { echo "sim_validate.sh: fold_sim $shape $c $alg $bytes failed" >&2; exit 1; }
                simulated=$(echo "$row" | cut -d, -f10)
                model=$(echo "$row" | cut -d, -f26)
                awk -v s="$shape" -v r="$rate ($lat us, $gbs GB/s)" -v c="$c" -v a="$alg" \
                    -v b="$bytes" -v m="$median" -v x="$simulated" -v y="$model" 'BEGIN {
                    printf "| %s | %s | %s | %s | %d | %.1f | %.1f | %.1f | %.2f |\n",
                           s, r, c, a, b, m, x, y, x / m }'
            done
        done
    done
done
