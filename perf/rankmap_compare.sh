#!/bin/sh
# Compressed against dense rank maps in fold_perf, side by side: 8 B allreduce and
# reduce on 2 local ranks, fold's own choice (the shared-memory fast path) and a flat
# algorithm whose every call translates its peers (recursive_doubling, binomial).
# Runs alternate FOLD_RANK_MAP=table with FOLD_RANK_MAP=compressed FOLD_RANK_CACHE=C
# (each of the caches given), the order rotating each round so no configuration
# always goes first; per row, the median over runs of fold_perf's median and the
# ratio to the table's. The auto rows translate nothing (the fast path never calls
# the transport), so their ratios show the noise.
#
#   perf/rankmap_compare.sh [RUNS] [BUILD_DIR] [CACHES]     (7, build, "assoc linear none")
set -eu
runs=${1:-7}
build=${2:-build}
caches=${3:-assoc linear none}
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
i=0
while [ "$i" -lt "$runs" ]; do
    # shellcheck disable=SC2086
    set -- table $caches
    shift_by=$((i % $#))
    while [ "$shift_by" -gt 0 ]; do
        first=$1
        shift
        set -- "$@" "$first"
        shift_by=$((shift_by - 1))
    done
    for cfg in "$@"; do
        if [ "$cfg" = table ]; then env="-x FOLD_RANK_MAP=table"
        else env="-x FOLD_RANK_MAP=compressed -x FOLD_RANK_CACHE=$cfg"; fi
        # shellcheck disable=SC2086
        mpirun --allow-run-as-root --bind-to core -n 2 $env "$build/perf/fold_perf" \
            -c allreduce,reduce -b 8 -e 8 -n 20000 -w 2000 --time-per-size 0 \
            --probe-size 0 -A auto,recursive_doubling,binomial --csv "$out/$cfg.$i.csv" \
            > /dev/null 2>&1
    done
    i=$((i + 1))
done
for cfg in table $caches; do
    for f in "$out"/"$cfg".*.csv; do
        tail -n +2 "$f" | awk -F, -v cfg="$cfg" '{print cfg "," $1 "," $3 "," $10}'
    done
done | awk -F, -v caches="$caches" '
    function median(list,   n, a, i, j, t) {
        n = split(list, a, " ")
        for (i = 2; i <= n; i++) { t = a[i]; for (j = i - 1; j >= 1 && a[j] > t; j--) a[j + 1] = a[j]; a[j + 1] = t }
        return n % 2 ? a[(n + 1) / 2] : (a[n / 2] + a[n / 2 + 1]) / 2
    }
    { key = $2 " " $3; v[key, $1] = v[key, $1] " " $4; keys[key] = 1; cfgs[$1] = 1 }
    END {
        nc = split(caches, cs, " ")
        printf "# %-8s %-20s %10s", "collective", "algorithm", "table_us"
        for (i = 1; i <= nc; i++) printf " %10s %8s", cs[i] "_us", "ratio"
        printf "\n"
        fflush()
        sorter = "LC_ALL=C sort"
        for (k in keys) {
            split(k, kk, " ")
            t = median(v[k, "table"])
            row = sprintf("  %-8s %-20s %10.3f", kk[1], kk[2], t)
            for (i = 1; i <= nc; i++) { m = median(v[k, cs[i]]); row = row sprintf(" %10.3f %8.3f", m, m / t) }
            print row | sorter
        }
        close(sorter)
    }'
