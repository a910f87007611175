# Sourced by check-install.sh and check-packages.sh: a small program using fold, built
# twice from a separate project, once found with CMake's find_package(fold) and once
# with pkg-config, then run.
#   build_consumer DIR [PREFIX]   builds DIR/build/consumer and DIR/pc (PREFIX: where
#                                 fold is installed, if not on the default paths)

build_consumer() {
    local dir=$1 prefix=${2:-}
    mkdir -p "$dir"
    cat > "$dir/main.c" <<'C'
#include <fold/fold.h>
#include <stdio.h>
int main(void)
{
    printf("fold %s: %s\n", fold_version_string(), fold_status_string(FOLD_ERR_TIMEOUT));
    return fold_dtype_size(FOLD_BFLOAT16) == 2 ? 0 : 1;
}
C
    cat > "$dir/CMakeLists.txt" <<'CM'
cmake_minimum_required(VERSION 3.18)
project(consumer C)
find_package(fold REQUIRED)
add_executable(consumer main.c)
target_link_libraries(consumer PRIVATE fold::fold)
CM
    cmake -S "$dir" -B "$dir/build" ${prefix:+-DCMAKE_PREFIX_PATH="$prefix"} >/dev/null
    cmake --build "$dir/build" >/dev/null
    local pc_path=${prefix:+$prefix/lib/pkgconfig} lib_path=${prefix:+$prefix/lib}
    # shellcheck disable=SC2046 # pkg-config's flags are words
    cc "$dir/main.c" $(PKG_CONFIG_PATH=$pc_path pkg-config --cflags --libs fold) -o "$dir/pc"
    LD_LIBRARY_PATH=$lib_path "$dir/build/consumer"
    LD_LIBRARY_PATH=$lib_path "$dir/pc"
}
