#!/bin/sh
# The tools' man pages (cmake/man.cmake): each renders without a warning, has the
# sections a reader looks for, and lists every long option the tool's --help has, so
# that a --help help2man cannot parse into entries fails here.
# Usage: man_pages.sh MAN_DIR TOOL_PATH...
set -eu
dir=$1
shift
fail=0
for tool in "$@"; do
    name=$(basename "$tool")
    page=$dir/$name.1
    if [ ! -f "$page" ]; then
        echo "man_pages: $page is missing"; fail=1; continue
    fi
    warnings=$(groff -man -Tutf8 -ww -z "$page" 2>&1 || true)
    if [ -n "$warnings" ]; then
        echo "man_pages: $name.1 renders with warnings:"; echo "$warnings"; fail=1
    fi
    text=$(groff -man -Tascii -P-cbou -rLL=100n "$page" 2>/dev/null)
    for section in NAME SYNOPSIS DESCRIPTION OPTIONS "SEE ALSO"; do
        if ! printf '%s\n' "$text" | grep -q "^$section\$"; then
            echo "man_pages: $name.1 has no $section section"; fail=1
        fi
    done
    # Every long option of --help, as an entry of the page (at the start of a line).
    for opt in $(ASAN_OPTIONS=detect_leaks=0 "$tool" --help 2>/dev/null |
                 grep -oE '^ {1,6}(-[A-Za-z], )?--[a-z][a-z0-9-]*' | grep -oE -- '--[a-z0-9-]+'); do
        if ! printf '%s\n' "$text" | grep -qE -- "^ +(-[A-Za-z], )?$opt\\b"; then
            echo "man_pages: $name.1 does not list $opt"; fail=1
        fi
    done
done
[ "$fail" -eq 0 ] && echo "man_pages: $# pages checked"
exit "$fail"
