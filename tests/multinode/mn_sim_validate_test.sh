#!/usr/bin/env bash
# sim_validate.sh end to end on the smallest case: 2 nodes x 1 rank, uncapped, reduce
# binomial at 64 KiB and 256 KiB. Checks that both rows came out with numbers (a run
# or a replay that failed fails the script), that the platform it built carries the
# network fold_init measured in the run, and that fold_sim replayed on it. Nothing is
# timed against a bound: the figures are the script's output, not this test's.
# Usage: mn_sim_validate_test.sh BUILD_DIR    Exit status: 0 pass, 1 fail, 77 skipped.
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
build=${1:?usage: mn_sim_validate_test.sh BUILD_DIR}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

status=0
"$here/sim_validate.sh" --build "$build" --shapes 2x1 --rates none --collectives reduce \
    --algorithms reduce:binomial -b 64K -e 256K -f 4 --out "$work" >"$work/table.md" ||
    status=$?
if [ "$status" -ne 0 ]; then
    exit "$status"   # 77: no namespaces here
fi
cat "$work/table.md"
number='[0-9.]+'
head="^\\| 2x1 \\| none \\($number us, [0-9.e+-]+ GB/s\\) \\| reduce \\| binomial \\| (65536|262144)"
rows=$(grep -cE "$head( \\| $number){4} \\|\$" "$work/table.md" || true)
if [ "$rows" -ne 2 ]; then
    echo "mn_sim_validate_test: FAILED: $rows well-formed rows of 2"
    exit 1
fi
read -r lat gbs < <(sed -n 's/.*none (\([0-9.]*\) us, \([0-9.e+-]*\) GB\/s).*/\1 \2/p' \
                    "$work/table.md" | head -n 1)
if ! grep -q "inter_gbs=$gbs,inter_lat_us=$lat" "$work/2x1-none-reduce.xml" ||
   ! grep -q "<link id=\"tcp\" bandwidth=\"${gbs}GBps\"" "$work/2x1-none-reduce.xml"; then
    echo "mn_sim_validate_test: FAILED: the platform does not carry the measured $lat us," \
         "$gbs GB/s"
    exit 1
fi
echo "mn_sim_validate_test: passed"
