#!/usr/bin/env bash
# Installs fold from a build tree into a scratch prefix, then builds and runs a small
# consumer twice: once found with CMake's find_package(fold), once with pkg-config.
set -euo pipefail
build=${1:?usage: check-install.sh BUILD_DIR}
root=$(cd "$(dirname "$0")/.." && pwd)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

cmake --install "$build" --prefix "$work/prefix" >/dev/null

mkdir -p "$work/consumer"
cat > "$work/consumer/main.c" <<'C'
#include <fold/fold.h>
#include <stdio.h>
int main(void)
{
    printf("fold %s: %s\n", fold_version_string(), fold_status_string(FOLD_ERR_TIMEOUT));
    return fold_dtype_size(FOLD_BFLOAT16) == 2 ? 0 : 1;
}
C
cat > "$work/consumer/CMakeLists.txt" <<'CM'
cmake_minimum_required(VERSION 3.18)
project(consumer C)
find_package(fold REQUIRED)
add_executable(consumer main.c)
target_link_libraries(consumer PRIVATE fold::fold)
CM
cmake -S "$work/consumer" -B "$work/consumer/build" -DCMAKE_PREFIX_PATH="$work/prefix" >/dev/null
cmake --build "$work/consumer/build" >/dev/null
LD_LIBRARY_PATH="$work/prefix/lib" "$work/consumer/build/consumer"

export PKG_CONFIG_PATH="$work/prefix/lib/pkgconfig"
cc "$work/consumer/main.c" $(pkg-config --cflags --libs fold) -o "$work/consumer/pc"
LD_LIBRARY_PATH="$work/prefix/lib" "$work/consumer/pc"
test -x "$work/prefix/bin/fold_info"
echo "check-install: find_package(fold) and pkg-config both work"
