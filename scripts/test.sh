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
# cores makes them slower, alone).
(cd "$prefix" && ctest --output-on-failure -j"$jobs" -L '^(pure|unit)$')
stage_done "release unit tests"

# The sanitizers' environment, for their stage only. Reports go to files: Criterion
# counts a test whose worker reports a leak at exit as passed, so a leak only fails the
# stage through the check at its end. libgomp and UCX keep some memory until exit on
# purpose; fold's own leaks still fail.
reports="$PWD/$prefix-asan/sanitizer-reports"
sanitizer_env=(ASAN_OPTIONS=detect_leaks=1:abort_on_error=1:log_path=$reports/asan
               LSAN_OPTIONS=suppressions=$PWD/tests/lsan.supp
               UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1:log_path=$reports/ubsan
               FOLD_TEST_REDUCED=1)   # the release stage runs the full algorithm matrix

# Every other release test but the fuzzers starts processes that spin, so it runs
# alone; they leave about a core idle between and inside launches (mpirun's start and
# end), which the sanitizer build, its pure tests and the fuzzers (one thread each,
# nothing timed) take at the lowest priority beside them.
background_log="$PWD/$prefix/sanitizer-build.log"
(
    set -e
    echo "== AddressSanitizer + UndefinedBehaviorSanitizer build (unit tests)"
    nice -n 19 cmake -S . -B "$prefix-asan" -DCMAKE_BUILD_TYPE=Debug -DFOLD_SANITIZE=ON \
        >/dev/null
    nice -n 19 cmake --build "$prefix-asan" -j"$jobs"
    rm -rf "$reports"
    mkdir -p "$reports"
    echo "== sanitizers: the pure tests"
    cd "$prefix-asan"
    env "${sanitizer_env[@]}" nice -n 19 ctest --output-on-failure -j"$jobs" -L '^pure$'
    echo "== the fuzzers (release build)"
    cd - >/dev/null
    cd "$prefix"
    nice -n 19 ctest --output-on-failure -j1 -L '^fuzz$'
) >"$background_log" 2>&1 &
background=$!
trap 'pkill -P "$background" 2>/dev/null; kill "$background" 2>/dev/null || true' EXIT
(cd "$prefix" && ctest --output-on-failure -j1 -LE '^(pure|unit|fuzz)$')
stage_done "release multi-process tests (the sanitizer build beside)"

# The install and package checks wait on cpack, dpkg and mpirun more than on the CPU:
# they run while the sanitizer build and pure tests finish, if they have not.
echo "== install check: find_package(fold) and pkg-config from a separate project"
scripts/check-install.sh "$prefix"
echo "== Debian packages: built, installed with dpkg, used, removed"
scripts/check-packages.sh "$prefix"
background_status=0
wait "$background" || background_status=$?
trap - EXIT
cat "$background_log"
if [ "$background_status" -ne 0 ]; then
    echo "test.sh: the sanitizer build, its pure tests or the fuzzers failed" >&2
    exit "$background_status"
fi
stage_done "packaging, the sanitizer build and pure tests, the fuzzers"

export "${sanitizer_env[@]}"
status=0
# The other unit tests, and randomly mixed calls on 3 processes (fold_soak), single copy
# on and forced off. The decision tests' runs as other machines (foreign_machine) test
# decisions, which the sanitizers do not change: the release stage ran them.
(cd "$prefix-asan" && ctest --output-on-failure -j1 -L unit -LE '^(pure|foreign_machine)$' && \
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
