#!/usr/bin/env bash
# Builds every libFuzzer target tests/fuzz/fuzz_*.c with clang (ASan + UBSan)
# into build-fuzz/ and runs each for a bounded time.
#   scripts/fuzz.sh [SECONDS] [NAME...]   default 60 s each, all targets
# The library sources (src/**/*.c but src/cli/) are compiled once into
# build-fuzz/obj/, archived as build-fuzz/libfuzz.a and linked into each target.
# The SIMD kernels (src/kernels/cpu/x86, arm) are compiled without the
# sanitizers and coverage: no fuzz target's input reaches them but through
# a model's weights, clang takes ~20x longer on them instrumented (minutes
# of CI), and the SAN=1 tests run them under ASan + UBSan. Run from the repository root;
# corpora grow in build-fuzz/corpus/NAME (seeded from tests/fuzz/corpus/NAME).
set -eu
cd "$(dirname "$0")/.."
SECS=${1:-60}
[ $# -gt 0 ] && shift
CC=${FUZZ_CC:-clang}
OUT=build-fuzz
PLAIN="-std=c11 -O1 -g -Iinclude -Isrc -D_GNU_SOURCE -pthread -fno-omit-frame-pointer"
FLAGS="$PLAIN -fsanitize=address,undefined -fno-sanitize-recover=undefined"
LIBS="-lpcre2-8 -lutf8proc -ljansson -lmicrohttpd -lm"
# compile what changed, one job per core
. scripts/objs.sh
# shellcheck disable=SC2046
plan_objs "$OUT/obj" $(find src -name '*.c' ! -path 'src/cli/*' ! -path 'src/kernels/opencl/*' | sort)
if [ ${#stale[@]} -gt 0 ]; then
    export CC FLAGS PLAIN
    # shellcheck disable=SC2016
    printf '%s\n' "${stale[@]}" | xargs -P "$(nproc)" -n 2 sh -c \
        'case "$1" in src/kernels/cpu/x86/* | src/kernels/cpu/arm/*) f=$PLAIN ;; *) f="$FLAGS -fsanitize=fuzzer-no-link" ;; esac
         $CC $f -c -o "$2" "$1" ||
             { echo "fuzz: $1 does not compile with $CC" >&2; rm -f "$2"; exit 255; }' _ ||
        exit 1
fi
echo "== fuzz: library compiled ($((SECONDS)) s)"
# an archive, so each target pulls in only the objects it needs
rm -f "$OUT/libfuzz.a"
ar rcs "$OUT/libfuzz.a" "${objs[@]}"
targets=("$@")
if [ ${#targets[@]} -eq 0 ]; then
    for f in tests/fuzz/fuzz_*.c; do targets+=("$(basename "$f" .c)"); done
fi
# one libFuzzer process per core at a time (each is single-threaded); a
# target's summary line (or its crash) is printed once it ends
run_one() { # name
    local name=$1 seeds=()
    mkdir -p "$OUT/corpus/$name"
    [ -d "tests/fuzz/corpus/$name" ] && seeds+=("tests/fuzz/corpus/$name")
    if "$OUT/$name" -max_total_time="$SECS" -rss_limit_mb=4096 -max_len=4096 \
            -artifact_prefix="$OUT/$name-" "$OUT/corpus/$name" "${seeds[@]}" >"$OUT/$name.log" 2>&1; then
        echo "== $name: ${SECS} s, $(grep -E '^Done [0-9]+ runs' "$OUT/$name.log" | tail -n 1), corpus $(ls "$OUT/corpus/$name" | wc -l) inputs"
    else
        tail -n 40 "$OUT/$name.log"
        echo "!! $name found a crash (see $OUT/$name-* and $OUT/$name.log)"
        return 1
    fi
}
for name in "${targets[@]}"; do
    $CC $FLAGS -fsanitize=fuzzer -o "$OUT/$name" "tests/fuzz/$name.c" "$OUT/libfuzz.a" $LIBS
done
status=0 jobs_n=$(nproc) pids=()
for name in "${targets[@]}"; do
    run_one "$name" > "$OUT/$name.out" 2>&1 &
    pids+=("$!")
    if [ ${#pids[@]} -ge "$jobs_n" ]; then
        wait "${pids[0]}" || status=1
        pids=("${pids[@]:1}")
    fi
done
for pid in "${pids[@]}"; do wait "$pid" || status=1; done
for name in "${targets[@]}"; do cat "$OUT/$name.out"; done
exit $status
