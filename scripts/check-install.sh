#!/usr/bin/env bash
# Installs fold from a build tree into a scratch prefix, then builds and runs a small
# consumer twice: once found with CMake's find_package(fold), once with pkg-config.
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
