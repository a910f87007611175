#!/bin/sh
# libfold.so exports exactly fold's API: the functions declared in include/fold/, no
# internal fold_ function and nothing without the prefix. Usage: libfold_exports.sh
# LIBFOLD_SO INCLUDE_DIR
set -u
lib=$1
inc=$2
want=$(grep -ohE '\bfold_[a-z0-9_]+[[:space:]]*\(' "$inc"/fold/*.h | sed 's/[[:space:]]*($//' | sort -u)
have=$(nm -D --defined-only "$lib" | awk '{print $3}' | sort -u)
[ -n "$want" ] || { echo "FAIL: no functions found in $inc/fold"; exit 1; }
extra=$(printf '%s\n' "$have" | grep -vxF "$want")
missing=$(printf '%s\n' "$want" | grep -vxF "$have")
status=0
if [ -n "$extra" ]; then
    echo "FAIL: $lib exports what include/fold/ does not declare:"; echo "$extra"; status=1
fi
if [ -n "$missing" ]; then
    echo "FAIL: $lib does not export these API functions:"; echo "$missing"; status=1
fi
[ $status -eq 0 ] && echo "libfold_exports: $(printf '%s\n' "$have" | wc -l) symbols, the API exactly"
exit $status
