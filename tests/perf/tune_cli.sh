#!/bin/sh
# fold_tune's command line without a launcher: --help, --version, and that a bad option
# or value prints a clear message and the usage and exits with status 2.
# Usage: tune_cli.sh path/to/fold_tune
set -u
TUNE=$1
PROG=$TUNE
. "$(dirname "$0")/test_lib.sh"

expect_status 0 --help
for text in "Usage: mpirun -n N fold_tune" "-c, --collective LIST" "-b, --begin SIZE" \
    "-e, --end SIZE" "-f, --factor N" "-o, --output FILE" "--quick" "--time-per-size SEC" \
    "--no-mpi" "--csv FILE" "-V, --version" "export FOLD_TUNE_FILE=" "<prefix>/etc/fold/tune" \
    "step_us, flag_us" "serve <coll>" "Exit status"; do
    expect_in out "$text"
done
expect_status 0 -h
expect_in out "Usage: mpirun -n N fold_tune"

expect_status 0 --version
expect_in out "fold_tune (fold "
expect_status 0 -V
expect_in out "fold_tune (fold "

expect_status 2 --nope
expect_in err "fold_tune: unknown option '--nope'"
expect_in err "Usage: mpirun -n N fold_tune"

expect_status 2 -x
expect_in err "unknown option '-x'"

expect_status 2 -c bcast
expect_in err "bad value 'bcast' for -c/--collective: expected allreduce, reduce"

expect_status 2 -c allreduce,allreduce
expect_in err "'allreduce' is listed twice"

expect_status 2 -b 1
expect_in err "--begin must be at least 4 bytes"

expect_status 2 -b 1M -e 64k
expect_in err "--begin (1048576 bytes) is larger than --end (65536 bytes)"

expect_status 2 -e 2G
expect_in err "above 1G"

expect_status 2 -f 1
expect_in err "bad value '1' for -f/--factor"

expect_status 2 --time-per-size soon
expect_in err "bad value 'soon' for --time-per-size"

expect_status 2 -o
expect_in err "option -o/--output needs a value"

expect_status 2 --quick=yes
expect_in err "option --quick takes no value"

expect_status 2 stray
expect_in err "unexpected argument 'stray'"

if [ "$failures" -ne 0 ]; then
    echo "$failures check(s) failed"
    exit 1
fi
echo "tune_cli: all checks passed"
