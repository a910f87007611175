#!/bin/sh
# fold_perf's command line without a launcher: --help, --version, and that a bad option
# or value prints a clear message and the usage and exits with status 2.
# Usage: perf_cli.sh path/to/fold_perf
set -u
PERF=$1
PROG=$PERF
. "$(dirname "$0")/test_lib.sh"

expect_status 0 --help
for text in "Usage: mpirun -n N fold_perf" "--sparsity F" "--compare KIND" \
    "busbw = algbw * 2 * (n - 1) / n" "2 * bytes * p_local" "slowest rank decides" \
    "Exit status"; do
    expect_in out "$text"
done

expect_status 0 --version
expect_in out "fold_perf (fold "

expect_status 2 --nope
expect_in err "fold_perf: unknown option '--nope'"
expect_in err "Usage: mpirun -n N fold_perf"
expect_in err "-e, --end SIZE"

expect_status 2 -e 12q
expect_in err "bad value '12q' for -e/--end: expected bytes with an optional k, M or G suffix"

expect_status 2 -b
expect_in err "option -b/--begin needs a value (SIZE)"

expect_status 2 -b 1M -e 1k
expect_in err "--begin (1048576 bytes) is larger than --end (1024 bytes)"

expect_status 2 --sparsity 1.5
expect_in err "bad value '1.5' for --sparsity"

expect_status 2 --buffers 0
expect_in err "bad value '0' for --buffers: expected a number of buffer pairs from 1 to 1024"
expect_in err "Usage: mpirun -n N fold_perf"

expect_status 2 --buffers x
expect_in err "bad value 'x' for --buffers: expected a number of buffer pairs from 1 to 1024"

expect_status 2 --buffers 2 --rotate 3
expect_in err "--buffers and --rotate both give the number of buffer pairs: give one"

expect_status 0 --help
for text in "--buffers K" "--settle" "untimed calls until fold's online trials settle" \
    "first_us" "worst2-10_us"; do
    expect_in out "$text"
done

expect_status 2 -o band -d float32
expect_in err "--op band takes integer datatypes only"

if [ "$failures" -ne 0 ]; then
    echo "$failures check(s) failed"
    exit 1
fi
echo "perf_cli: all checks passed"
