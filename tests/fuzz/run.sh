#!/bin/sh
# Builds the fuzzers with clang's libFuzzer (whatever compiler builds fold) and runs
# each for a while on its seed corpus.
#
#   tests/fuzz/run.sh [SECONDS [OUTDIR]]     SECONDS per target (default 20),
#                                            OUTDIR default build-fuzz/ at the top
#   CLANG=clang-14 tests/fuzz/run.sh 60      another clang
#
#   tests/fuzz/run.sh 20 OUTDIR tune size   only these targets
#   FUZZ_MAX_N=4096 tests/fuzz/run.sh ...  codec messages of at most 4096 elements
#                                            (default 65536): ~10x more executions
#                                            per second, for long campaigns
#   FUZZ_OPT=-O0 tests/fuzz/run.sh 3 ...    compiled without optimisation (default
#                                            -O1): builds the runtime in 2/3 of the
#                                            time and runs 2/3 as fast, for short
#                                            smoke runs (ctest's)
#
# The targets run nproc at a time.
#
# Targets: the codec decoders fuzz_bits, fuzz_idx, fuzz_rle (the codec byte pinned)
# and fuzz_any (seeds written by fuzz_seed); the parsers fuzz_tune (FOLD_TUNE rules),
# fuzz_tune_file (the tuning file's text), fuzz_size (byte counts and the
# configuration table's values), fuzz_model (FOLD_MODEL); fuzz_shm (what fold reads
# from the node segment a local peer writes). Seeds: tests/fuzz/corpus/TARGET (for the
# codec targets, beside fuzz_seed's: what the 10^7-execution campaigns kept, merged).
# The corpus grows in OUTDIR/corpus/TARGET across runs; a crash leaves
# OUTDIR/crash-* (rerun: OUTDIR/fuzz_any OUTDIR/crash-...). Exit status 77: no
# clang with libFuzzer here (ctest counts it as skipped).
set -eu

secs=${1:-20}
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
out=${2:-$root/build-fuzz}
shift $(( $# < 2 ? $# : 2 ))
targets=${*:-bits idx rle any tune tune_file size model shm}
clang=${CLANG:-clang}
mkdir -p "$out/obj" "$out/seeds" "$out/corpus"
out=$(cd "$out" && pwd)

if ! command -v "$clang" >/dev/null 2>&1; then
    echo "run.sh: no $clang: skipped" >&2
    exit 77
fi
probe="$out/obj/probe.c"
echo 'int LLVMFuzzerTestOneInput(const unsigned char *d, unsigned long n) { return 0; }' > "$probe"
if ! "$clang" -fsanitize=fuzzer "$probe" -o "$out/obj/probe" 2>/dev/null; then
    echo "run.sh: $clang has no libFuzzer runtime (Debian: libclang-rt-14-dev): skipped" >&2
    exit 77
fi

opt=${FUZZ_OPT:--O1}
cflags="-g $opt -fno-omit-frame-pointer -std=gnu11 -I$root/include -I$root/runtime"
san="-fsanitize=address,undefined -fno-sanitize-recover=undefined"

jobs=$(nproc 2>/dev/null || echo 2)
wants() {   # whether any of the targets asked for is one of $*
    for w in "$@"; do
        case " $targets " in *" $w "*) return 0 ;; esac
    done
    return 1
}
# Compiles "SRC OBJ" pairs read from stdin, nproc at a time, with $cc_flags.
compile_all() {
    xargs -n 2 -P "$jobs" sh -c '"$0" $cc_flags -c "$1" -o "$2"' "$clang"
}
pids=""
wait_all() {   # the links started in the background; any that failed fails the run
    for pid in $pids; do
        wait "$pid" || exit 1
    done
    pids=""
}

# The codec library once, instrumented for the fuzzer, then one link per target asked for.
export cc_flags="$cflags $san -fsanitize=fuzzer-no-link"
pairs=$(for src in "$root"/runtime/codec/codec*.c; do
    echo "$src $out/obj/$(basename "$src" .c).o"
done)
echo "$pairs" | compile_all
objs=$(echo "$pairs" | cut -d' ' -f2)
if wants bits idx rle any; then
    for t in bits:1 idx:2 rle:3 any:; do
        name=${t%%:*}
        codec=${t#*:}
        wants "$name" || continue
        def=""
        [ -n "$codec" ] && def="-DFUZZ_CODEC=$codec"
        [ -n "${FUZZ_MAX_N:-}" ] && def="$def -DFUZZ_MAX_N=$FUZZ_MAX_N"
        "$clang" $cflags $san -fsanitize=fuzzer $def "$here/fuzz_codec.c" $objs \
            -o "$out/fuzz_$name" &
        pids="$pids $!"
    done
    "$clang" $cflags $san "$here/fuzz_seed.c" $objs -o "$out/fuzz_seed"
    wait_all
    "$out/fuzz_seed" "$out/seeds" >/dev/null
fi

# The other targets need the rest of the runtime: all of it in one archive, which
# the linker takes only what each target calls from. Rebuilt only when it changed.
if wants tune tune_file size model shm; then
    pkgs="ucx pmix hwloc libfabric"
    rtflags="$cflags $(pkg-config --cflags $pkgs) -fopenmp -DFOLD_VERSION_STRING=\"fuzz\" \
        -DFOLD_TUNE_DEFAULT_FILE=\"/nonexistent/fold/tune\""
    lib="$out/obj/libfold_fuzz$opt.a"
    if [ ! -f "$lib" ] || [ -n "$(find "$root/runtime" "$root/include" -newer "$lib" \( -name '*.[ch]' \) | head -n 1)" ]; then
        rm -f "$lib"
        rm -f "$out"/obj/libfold_fuzz*.a
        rm -rf "$out/obj/rt"
        mkdir -p "$out/obj/rt"
        export cc_flags="$rtflags $san -fsanitize=fuzzer-no-link"
        for src in $(find "$root/runtime" -name '*.c' | sort); do
            echo "$src $out/obj/rt/$(echo "${src#$root/runtime/}" | tr / _ | sed 's/\.c$/.o/')"
        done | compile_all
        ar rcs "$lib" "$out"/obj/rt/*.o
    fi
    for name in tune tune_file size model shm; do
        wants "$name" || continue
        "$clang" $rtflags $san -fsanitize=fuzzer "$here/fuzz_$name.c" "$lib" \
            $(pkg-config --libs $pkgs) -fopenmp -lm -o "$out/fuzz_$name" &
        pids="$pids $!"
    done
    wait_all
fi

# One target's run; its log says what it did.
run_one() {
    name=$1
    mkdir -p "$out/corpus/$name"
    case $name in
        bits|idx|rle|any) seeds=seeds; max_len=300000
                          [ -d "$here/corpus/$name" ] && seeds="seeds $here/corpus/$name" ;;
        shm)              seeds="$here/corpus/$name"; max_len=40000 ;;
        *)                seeds="$here/corpus/$name"; max_len=4096 ;;
    esac
    (cd "$out" && ./"fuzz_$name" -max_total_time="$secs" -timeout=20 -rss_limit_mb=2048 \
        -max_len=$max_len -print_final_stats=1 "corpus/$name" $seeds 2>"fuzz_$name.log")
}

status=0
set -- $targets
while [ $# -gt 0 ]; do
    batch=""
    for _ in $(seq "$jobs"); do
        [ $# -gt 0 ] || break
        echo "== fuzz_$1: $secs s"
        run_one "$1" &
        batch="$batch $1:$!"
        shift
    done
    for job in $batch; do
        name=${job%%:*}
        if ! wait "${job#*:}"; then
            status=1
            echo "fuzz_$name FAILED: see $out/fuzz_$name.log" >&2
            tail -n 40 "$out/fuzz_$name.log" >&2
        else
            echo "fuzz_$name:"
            grep -E "^stat::number_of_executed_units|^stat::new_units_added|Done [0-9]+ runs" \
                "$out/fuzz_$name.log" || true
        fi
    done
done
exit $status
