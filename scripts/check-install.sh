#!/usr/bin/env bash
# Installs fold from a build tree into a scratch prefix, then builds and runs a small
# consumer twice: once found with CMake's find_package(fold), once with pkg-config;
# then imports the fold Python package from the prefix, where it was built.
set -euo pipefail
build=${1:?usage: check-install.sh BUILD_DIR}
root=$(cd "$(dirname "$0")/.." && pwd)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

cmake --install "$build" --prefix "$work/prefix" >/dev/null

. "$(dirname "$0")/consumer.sh"
build_consumer "$work/consumer" "$work/prefix"
test -x "$work/prefix/bin/fold_info"
echo "check-install: find_package(fold) and pkg-config both work"

cached() { sed -n "s/^$1:[A-Z]*=//p" "$build/CMakeCache.txt"; }
python=$(cached FOLD_PYTHON_EXECUTABLE)
if [ -n "$python" ] && [ "$(cached FOLD_PYTHON)" != OFF ]; then
    # The installed package must find the installed fold_info and libfold (its RPATH).
    PYTHONPATH="$work/prefix/$(cached FOLD_PYTHON_INSTALL_DIR)" "$python" - "$work/prefix" <<'PY'
import sys
import fold
prefix = sys.argv[1]
assert fold.config()["FOLD_TIMEOUT"].default == "120"
if fold.backend_available:
    maps = open("/proc/self/maps").read()
    assert prefix + "/lib" in maps and "libfold.so" in maps, "libfold not from the prefix"
    print(f"check-install: python3 -c 'import fold' works from the prefix (fold "
          f"{fold.library_version()}, torch backend registered)")
else:
    print("check-install: python3 -c 'import fold' works from the prefix (no torch backend)")
PY
fi
