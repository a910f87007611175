#!/bin/sh
# Every public header (include/fold/*.h) compiles as strict C99 and as C++11, and a
# C++ program links a call to fold_status_string against libfold: the headers carry
# extern "C" guards and nothing C-only. Usage: headers_compile.sh CC CXX INCLUDE_DIR
# LIBFOLD_SO [LINK_FLAGS...] (the sanitizer build's libfold needs its sanitizers)
set -u
cc=$1
cxx=$2
inc=$3
lib=$4
shift 4
dir=$(mktemp -d) || exit 1
trap 'rm -rf "$dir"' EXIT
headers=$(cd "$inc" && ls fold/*.h)
[ -n "$headers" ] || { echo "FAIL: no headers in $inc/fold"; exit 1; }
for h in $headers; do
    echo "#include <$h>"
done > "$dir/all.h"
# Each header alone first (it must include what it needs), then all of them.
status=0
for h in $headers all; do
    if [ "$h" = all ]; then src="#include \"$dir/all.h\""; else src="#include <$h>"; fi
    printf '%s\nint fold_headers_c99_check;\n' "$src" > "$dir/c.c"
    if ! "$cc" -std=c99 -pedantic -Wall -Wextra -Werror -I"$inc" -c "$dir/c.c" \
            -o "$dir/c.o"; then
        echo "FAIL: $h does not compile as C99 (cc -std=c99 -pedantic)"; status=1
    fi
done
cat > "$dir/cxx.cc" <<CXX
#include "$dir/all.h"
#include <cstdio>
#include <cstring>
int main()
{
    const char *s = fold_status_string(FOLD_ERR_INVALID_ARG);
    std::printf("fold_status_string from C++: %s\n", s);
    return s != 0 && std::strcmp(s, "unknown status") != 0 ? 0 : 1;
}
CXX
if ! "$cxx" -std=c++11 -Wall -Wextra -Werror -I"$inc" "$dir/cxx.cc" -o "$dir/cxx" "$lib" \
        -Wl,-rpath,"$(dirname "$lib")" "$@"; then
    echo "FAIL: the headers do not compile or link as C++11"; status=1
elif ! "$dir/cxx"; then
    echo "FAIL: the C++ program's call to fold_status_string failed"; status=1
fi
[ $status -eq 0 ] && echo "headers_compile: $(echo $headers | wc -w) headers as C99 and C++11"
exit $status
