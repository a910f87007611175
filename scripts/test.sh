#!/usr/bin/env bash
# Builds fold and passes every test: the release build (unit tests, multi-process tests
# under mpirun, install check), then the unit tests again under AddressSanitizer and
# UndefinedBehaviorSanitizer. Usage: scripts/test.sh [build-dir-prefix]
set -euo pipefail
cd "$(dirname "$0")/.."
prefix=${1:-build}
jobs=$(nproc)

scripts/install-deps.sh

echo "== release build"
cmake -S . -B "$prefix" -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build "$prefix" -j"$jobs"
(cd "$prefix" && ctest --output-on-failure -j1)

echo "== install check: find_package(fold) and pkg-config from a separate project"
scripts/check-install.sh "$prefix"

echo "== AddressSanitizer + UndefinedBehaviorSanitizer build (unit tests)"
cmake -S . -B "$prefix-asan" -DCMAKE_BUILD_TYPE=Debug -DFOLD_SANITIZE=ON >/dev/null
cmake --build "$prefix-asan" -j"$jobs"
# libgomp and UCX keep some memory until exit on purpose; fold's own leaks still fail.
export ASAN_OPTIONS=detect_leaks=1:abort_on_error=1
export LSAN_OPTIONS=suppressions=$PWD/tests/lsan.supp
export UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1
export FOLD_TEST_REDUCED=1   # the release stage ran the full algorithm matrix
(cd "$prefix-asan" && ctest --output-on-failure -j1 -L unit)

if ls /dev/shm 2>/dev/null | grep -qi fold; then
    echo "test.sh: shared-memory segments left in /dev/shm:" >&2
    ls /dev/shm | grep -i fold >&2
    exit 1
fi
echo "test.sh: all tests passed"
