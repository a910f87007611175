#!/usr/bin/env bash
# Predicted vs measured: runs fold_perf over every algorithm on the ranks given (the
# launcher command), asks the cost model (fold_info -S SHAPE -p) for the same cases
# with the parameters in effect (FOLD_TUNE_FILE, FOLD_MODEL; unless either is set,
# what the measured run's rank 0 calibrated and probed, which fold_info alone cannot
# probe: the rates between two cores), and prints a markdown
# table: collective, algorithm, bytes, measured median, predicted, predicted/measured,
# plus the median over all rows of |log2(predicted/measured)| per algorithm.
#
# Usage: perf/model_check.sh SHAPE LAUNCHER... -- [fold_perf options]
#   perf/model_check.sh 1x2 mpirun --allow-run-as-root --bind-to core -n 2 -- -b 8 -e 64M -f 8
set -euo pipefail
build=${FOLD_BUILD_DIR:-build}
shape=$1
shift
launcher=()
while [ $# -gt 0 ] && [ "$1" != "--" ]; do
    launcher+=("$1")
    shift
done
[ $# -gt 0 ] && shift
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
algs=$("$build/tools/fold_info" -S "$shape" -p | awk -F, 'NR > 1 {print $2}' | sort -u |
       paste -sd, -)
FOLD_LOG_LEVEL=debug "${launcher[@]}" "$build/perf/fold_perf" -c allreduce,reduce -A "$algs" \
    --csv "$tmp/measured.csv" "$@" >/dev/null 2>"$tmp/log"
if [ -z "${FOLD_MODEL:-}" ] && [ "${FOLD_TUNE_FILE:-auto}" = auto ]; then
    # "... node cores probed: a flag's trip 0.052 us; copy_gbs=77.33,shm_gbs=68.23,..."
    probed=$(grep -m1 'rank 0 .*node cores probed' "$tmp/log" | sed 's/.* us; //' || true)
    [ -n "$probed" ] || probed=$(grep -m1 'rank 0 .*node calibrated: ' "$tmp/log" |
                                 sed 's/.*node calibrated: //; s/ (.*//' || true)
    export FOLD_MODEL=$probed
    echo "parameters of the measured run: ${FOLD_MODEL:-none}" >&2
fi
"$build/tools/fold_info" -S "$shape" -p >"$tmp/predicted.csv"
# The measured CSV names its columns in the first line.
awk -F, -v pfile="$tmp/predicted.csv" '
    BEGIN {
        while ((getline line < pfile) > 0) {
            if (line ~ /^#/) continue
            split(line, f, ",")
            pred[f[1] "," f[2] "," f[3]] = f[5]
        }
        print "| collective | algorithm | bytes | measured_us | predicted_us | predicted/measured |"
        print "|---|---|---|---|---|---|"
    }
    NR == 1 { for (i = 1; i <= NF; i++) col[$i] = i; next }
    {
        key = $col["collective"] "," $col["algorithm"] "," $col["bytes"]
        if (!(key in pred)) next
        m = $col["median_us"]; p = pred[key]
        r = p / m
        printf "| %s | %s | %s | %.2f | %.2f | %.2f |\n", $col["collective"], $col["algorithm"], $col["bytes"], m, p, r
        e = log(r) / log(2); if (e < 0) e = -e
        err[$col["collective"] " " $col["algorithm"]] = err[$col["collective"] " " $col["algorithm"]] " " e
    }
    END {
        print ""
        print "| collective algorithm | median abs(log2(predicted/measured)) |"
        print "|---|---|"
        for (k in err) {
            n = split(err[k], v, " ")
            for (i = 1; i <= n; i++) for (j = i + 1; j <= n; j++) if (v[j] < v[i]) { t = v[i]; v[i] = v[j]; v[j] = t }
            printf "| %s | %.2f |\n", k, v[int((n + 1) / 2)]
        }
    }' "$tmp/measured.csv"
