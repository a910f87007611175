#!/usr/bin/env bash
# Builds fold and passes every test: the release build (unit tests, multi-process tests
# under mpirun, install check), then the unit tests and a short soak again under
# AddressSanitizer and UndefinedBehaviorSanitizer (any report fails).
# Usage: scripts/test.sh [build-dir-prefix]
set -euo pipefail
cd "$(dirname "$0")/.."
prefix=${1:-build}
jobs=$(nproc)

# Each stage's seconds, printed at the end: what CI's time goes to.
stage_times=""
stage_start=$SECONDS
stage_done() {   # stage_done NAME: the time since the previous stage ended
    stage_times="$stage_times $1 $((SECONDS - stage_start)) s,"
    stage_start=$SECONDS
}

scripts/install-deps.sh
stage_done "install"

echo "== release build"
cmake -S . -B "$prefix" -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build "$prefix" -j"$jobs"
stage_done "release build"
# Tests labelled pure run no ranks of their own (cmake/test_labels.cmake): nproc at a
# time. The other unit tests run their ranks as threads of one process and assert
# nothing about time: nproc at a time too (under the sanitizers, where sharing the
# cores makes them slower, alone). Every other test starts processes that spin, so it
# runs alone.
(cd "$prefix" && ctest --output-on-failure -j"$jobs" -L '^(pure|unit)$' && \
     ctest --output-on-failure -j1 -LE '^(pure|unit)$')
stage_done "release tests"

# The install and package checks wait on cpack, dpkg and mpirun more than on the CPU:
# they run beside the sanitizer build, their output shown once both are done.
packaging_log="$PWD/$prefix/packaging-checks.log"
(
    echo "== install check: find_package(fold) and pkg-config from a separate project"
    scripts/check-install.sh "$prefix"
    echo "== Debian packages: built, installed with dpkg, used, removed"
    scripts/check-packages.sh "$prefix"
) >"$packaging_log" 2>&1 &
packaging=$!

echo "== AddressSanitizer + UndefinedBehaviorSanitizer build (unit tests)"
cmake -S . -B "$prefix-asan" -DCMAKE_BUILD_TYPE=Debug -DFOLD_SANITIZE=ON >/dev/null
build_status=0
cmake --build "$prefix-asan" -j"$jobs" || build_status=$?
packaging_status=0
wait "$packaging" || packaging_status=$?
cat "$packaging_log"
if [ "$packaging_status" -ne 0 ]; then
    echo "test.sh: the install or package check failed" >&2
    exit "$packaging_status"
fi
[ "$build_status" -eq 0 ] || exit "$build_status"
stage_done "sanitizer build and packaging"
# libgomp and UCX keep some memory until exit on purpose; fold's own leaks still fail.
# Reports go to files: Criterion counts a test whose worker reports a leak at exit as
# passed, so a leak only fails the stage through the check below.
reports="$PWD/$prefix-asan/sanitizer-reports"
rm -rf "$reports"
mkdir -p "$reports"
export ASAN_OPTIONS=detect_leaks=1:abort_on_error=1:log_path=$reports/asan
export LSAN_OPTIONS=suppressions=$PWD/tests/lsan.supp
export UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1:log_path=$reports/ubsan
export FOLD_TEST_REDUCED=1   # the release stage ran the full algorithm matrix
status=0
# The unit tests, and randomly mixed calls on 3 processes (fold_soak), single copy on
# and forced off.
(cd "$prefix-asan" && ctest --output-on-failure -j"$jobs" -L '^pure$' && \
     ctest --output-on-failure -j1 -L unit -LE '^pure$' && \
     ctest --output-on-failure -j1 -R '^soak_short_') || status=$?
# (LeakSanitizer also writes a file listing the suppressions it used.)
found=$(grep -lE 'ERROR: [A-Za-z]+Sanitizer|runtime error:' "$reports"/* 2>/dev/null || true)
if [ -n "$found" ]; then
    echo "test.sh: AddressSanitizer/UndefinedBehaviorSanitizer reports:" >&2
    cat $found >&2
    status=1
fi
[ "$status" -eq 0 ] || exit "$status"
stage_done "sanitizer tests"

if ls /dev/shm 2>/dev/null | grep -qi fold; then
    echo "test.sh: shared-memory segments left in /dev/shm:" >&2
    ls /dev/shm | grep -i fold >&2
    exit 1
fi
echo "test.sh: all tests passed (${stage_times%,})"
