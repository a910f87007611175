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

cflags="-g -O1 -fno-omit-frame-pointer -std=gnu11 -I$root/include -I$root/runtime"
san="-fsanitize=address,undefined -fno-sanitize-recover=undefined"

# The codec library once, instrumented for the fuzzer, then one link per target.
objs=""
for src in "$root"/runtime/codec/codec*.c; do
    obj="$out/obj/$(basename "$src" .c).o"
    "$clang" $cflags $san -fsanitize=fuzzer-no-link -c "$src" -o "$obj"
    objs="$objs $obj"
done
for t in bits:1 idx:2 rle:3 any:; do
    name=${t%%:*}
    codec=${t#*:}
    def=""
    [ -n "$codec" ] && def="-DFUZZ_CODEC=$codec"
    [ -n "${FUZZ_MAX_N:-}" ] && def="$def -DFUZZ_MAX_N=$FUZZ_MAX_N"
    "$clang" $cflags $san -fsanitize=fuzzer $def "$here/fuzz_codec.c" $objs -o "$out/fuzz_$name"
done
"$clang" $cflags $san "$here/fuzz_seed.c" $objs -o "$out/fuzz_seed"
"$out/fuzz_seed" "$out/seeds" >/dev/null

# The other targets need the rest of the runtime: all of it in one archive, which
# the linker takes only what each target calls from. Rebuilt only when it changed.
pkgs="ucx pmix hwloc libfabric"
rtflags="$cflags $(pkg-config --cflags $pkgs) -fopenmp -DFOLD_VERSION_STRING=\"fuzz\" \
    -DFOLD_TUNE_DEFAULT_FILE=\"/nonexistent/fold/tune\""
lib="$out/obj/libfold_fuzz.a"
if [ ! -f "$lib" ] || [ -n "$(find "$root/runtime" "$root/include" -newer "$lib" \( -name '*.[ch]' \) | head -n 1)" ]; then
    rm -f "$lib"
    mkdir -p "$out/obj/rt"
    for src in $(find "$root/runtime" -name '*.c' | sort); do
        obj="$out/obj/rt/$(echo "${src#$root/runtime/}" | tr / _ | sed 's/\.c$/.o/')"
        "$clang" $rtflags $san -fsanitize=fuzzer-no-link -c "$src" -o "$obj"
    done
    ar rcs "$lib" "$out"/obj/rt/*.o
fi
for name in tune tune_file size model shm; do
    "$clang" $rtflags $san -fsanitize=fuzzer "$here/fuzz_$name.c" "$lib" \
        $(pkg-config --libs $pkgs) -fopenmp -lm -o "$out/fuzz_$name"
done

status=0
for name in $targets; do
    mkdir -p "$out/corpus/$name"
    case $name in
        bits|idx|rle|any) seeds=seeds; max_len=300000
                          [ -d "$here/corpus/$name" ] && seeds="seeds $here/corpus/$name" ;;
        shm)              seeds="$here/corpus/$name"; max_len=40000 ;;
        *)                seeds="$here/corpus/$name"; max_len=4096 ;;
    esac
    echo "== fuzz_$name: $secs s"
    if ! (cd "$out" && ./"fuzz_$name" -max_total_time="$secs" -timeout=20 -rss_limit_mb=2048 \
            -max_len=$max_len -print_final_stats=1 "corpus/$name" $seeds 2>"fuzz_$name.log"); then
        status=1
        echo "fuzz_$name FAILED: see $out/fuzz_$name.log" >&2
        tail -n 40 "$out/fuzz_$name.log" >&2
    else
        grep -E "^stat::number_of_executed_units|^stat::new_units_added|Done [0-9]+ runs" \
            "$out/fuzz_$name.log" || true
    fi
done
exit $status
