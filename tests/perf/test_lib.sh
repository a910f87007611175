# Shared by the tools' shell tests (sourced): a scratch directory $TMP removed on exit,
# a failure count, and the checks. Set PROG (the binary) before expect_status.

TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
failures=0

fail() {
    echo "FAIL: $*"
    failures=$((failures + 1))
}

# expect_status STATUS ARGS...: runs $PROG, keeps stdout/stderr in $TMP/out, $TMP/err.
expect_status() {
    want=$1
    shift
    "$PROG" "$@" >"$TMP/out" 2>"$TMP/err"
    got=$?
    [ "$got" -eq "$want" ] ||
        fail "$(basename "$PROG") $* exited $got, expected $want: $(cat "$TMP/err")"
}

# expect_in FILE TEXT: $TMP/FILE contains TEXT.
expect_in() {
    grep -qF -- "$2" "$TMP/$1" || fail "$1 lacks '$2'"
}

# expect_match FILE REGEX: $TMP/FILE has a line matching the extended REGEX.
expect_match() {
    grep -qE -- "$2" "$TMP/$1" || fail "$1 lacks /$2/"
}
