#!/usr/bin/env bash
# Checks that traffic between namespaced nodes really crosses the capped veth links:
# fold_perf runs a checked allreduce between 2 nodes x 1 rank over UCX's TCP transport
# with every link capped by tbf, and then
#   - each node's eth0 received, and its tbf qdisc sent, at least the bytes the
#     allreduces must move (a message that took shared memory would not count there);
#   - the median allreduce is no faster than the cap allows (so the cap is in the path);
#   - fold_perf saw 2 nodes;
#   - fold_init measured the link (net_probe.c) within 0.8-1.3x of the cap, the same
#     on both ranks.
# Usage: mn_link_test.sh FOLD_PERF    Exit status: 0 pass, 1 fail, 77 skipped.
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
perf=${1:?usage: mn_link_test.sh FOLD_PERF}

# A slow cap makes the link, not this machine's 2 cores, the bottleneck, and keeps the
# run short: each allreduce of 4 MiB between 2 ranks moves 4 MiB each way (~168 ms).
readonly RATE=200mbit RATE_BPS=200000000
readonly BYTES=$((4 << 20)) ITERS=5 WARMUP=1

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
failures=0

fail() {
    echo "mn_link_test: FAILED: $*"
    failures=$((failures + 1))
}

# Prints the value of column NAME in the first data row of the CSV file.
csv_field() {
    awk -F, -v name="$2" 'NR == 1 { for (i = 1; i <= NF; i++) col[$i] = i; next }
                          NR == 2 { print $col[name]; exit }' "$1"
}

# Each node's "KEY=VALUE" from mnrun's --stats lines, one value per node.
link_stat() {
    sed -n "s/^mnrun: link node[0-9]* eth0 .*$1=\([0-9]*\).*/\1/p" "$work/out"
}

status=0
"$here/mnrun.sh" --nodes 2 --ppn 1 --rate "$RATE" --timeout 150 --stats \
    -x UCX_TLS=tcp,self -x FOLD_LOG_LEVEL=info --mca btl tcp,self --mca pml ob1 -- \
    "$perf" -c allreduce -b "$BYTES" -e "$BYTES" -n "$ITERS" -w "$WARMUP" --iter-bytes 0 \
    --time-per-size 0 --probe-size 0 --check --csv "$work/r.csv" >"$work/out" 2>&1 ||
    status=$?
cat "$work/out"
[ "$status" -ne 77 ] || exit 77
[ "$status" -eq 0 ] || fail "fold_perf under mnrun exited $status"

grep -q "2 ranks on 2 nodes" "$work/out" || fail "fold_perf did not see 2 nodes"

min_bytes=$(((ITERS + WARMUP) * BYTES))
for key in rx_bytes qdisc_sent_bytes; do
    values=$(link_stat "$key")
    [ "$(wc -w <<<"$values")" -eq 2 ] || fail "no $key for both nodes"
    for v in $values; do
        [ "$v" -ge "$min_bytes" ] || fail "$key=$v on a node link, expected at least $min_bytes"
    done
done

# "network measured: 10.7 us a small message, 0.0269 GB/s a link", once per rank.
measured=$(sed -n 's/.*network measured: .* us a small message, \([0-9.e+-]*\) GB\/s a link.*/\1/p' \
    "$work/out" | sort -u)
if [ "$(grep -c 'network measured:' "$work/out")" -ne 2 ] || [ "$(wc -w <<<"$measured")" -ne 1 ]; then
    fail "the ranks did not measure the network alike: '$measured'"
elif awk -v g="$measured" -v r="$RATE_BPS" 'BEGIN { c = r / 8e9; exit !(g >= 0.8 * c && g <= 1.3 * c) }'; then
    echo "mn_link_test: fold_init measured ${measured} GB/s on the $RATE link"
else
    fail "fold_init measured ${measured} GB/s on a $RATE link"
fi

if [ -s "$work/r.csv" ]; then
    median=$(csv_field "$work/r.csv" median_us)
    check=$(csv_field "$work/r.csv" check)
    [ "$check" = ok ] || fail "result check says '$check'"
    # The cap's floor, minus 10% for tbf's burst and timer granularity.
    floor_us=$((BYTES * 8 * 1000000 * 9 / 10 / RATE_BPS))
    if awk -v m="$median" -v f="$floor_us" 'BEGIN { exit !(m >= f) }'; then
        echo "mn_link_test: median ${median} us >= ${floor_us} us, the $RATE cap's floor (-10%)"
    else
        fail "median ${median} us beats the $RATE cap's floor ${floor_us} us: the cap is not in the path"
    fi
else
    fail "no CSV written"
fi

[ "$failures" -eq 0 ] || exit 1
echo "mn_link_test: traffic between the nodes crossed the capped veth links"
