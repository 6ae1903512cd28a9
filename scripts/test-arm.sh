#!/usr/bin/env bash
# Cross-builds r1infer for aarch64 with a static gcc (the project's Makefile
# with CC=aarch64-linux-gnu-gcc, in $BUILD/aarch64) and runs under qemu-user:
#   - test_matmul, test_kernels and test_kv_paged (R1_TEST_QUICK: a small set of shapes)
#     built with ASan + UBSan on -cpu max (NEON + dotprod: the "neon-dot"
#     and "neon" tables are both tested), test_kernels optimized there too,
#     and both optimized on -cpu cortex-a53 (ARMv8.0, no dotprod: the
#     dispatch must pick "neon");
#   - test_fixtures (the whole model against its oracles) with
#     R1_CPU_ISA=neon-dot and R1_CPU_ISA=neon, test_gguf with neon-dot.
# Needs gcc-aarch64-linux-gnu, qemu-user and arm64 builds of the static
# libraries the model links, unpacked in R1_ARM_ROOT (scripts/install-deps.sh
# provides all of them).
# Speed under qemu means nothing; this checks correctness only.
set -euo pipefail
CC=${ARM_CC:-aarch64-linux-gnu-gcc}
QEMU=${QEMU:-qemu-aarch64}
BUILD=${BUILD:-build}
LIBDIR=${R1_ARM_ROOT:-/usr/local/lib/r1infer-arm64}/usr/lib/aarch64-linux-gnu
for tool in "$CC" "$QEMU"; do
    if ! command -v "$tool" >/dev/null; then
        echo "test-arm: '$tool' not found: apt-get install -y gcc-aarch64-linux-gnu qemu-user" >&2
        exit 1
    fi
done
for lib in libjansson.a libpcre2-8.a libutf8proc.a; do
    if [ ! -f "$LIBDIR/$lib" ]; then
        echo "test-arm: $LIBDIR/$lib not found: run scripts/install-deps.sh (it unpacks" \
             "libjansson-dev:arm64 libpcre2-dev:arm64 libutf8proc-dev:arm64 there)" >&2
        exit 1
    fi
done
out="$BUILD/aarch64"
t0=$SECONDS
# OPENCL=0, MPI=0: no arm64 OpenCL loader or MPI library here.
# static: qemu-user then needs no arm64 loader or libraries (the Makefile's
# test rule links with CFLAGS and LDLIBS, so -static goes into LDLIBS)
make --no-print-directory -j2 CC="$CC" BUILD="$out" OPT=-O2 OPENCL=0 MPI=0 \
    LDLIBS="-static -L$LIBDIR -lpcre2-8 -lutf8proc -ljansson -lm" \
    "$out/tests/test_matmul" "$out/tests/test_kernels" "$out/tests/test_kv_paged" "$out/tests/test_gguf" "$out/tests/test_fixtures"
SYSROOT=${ARM_SYSROOT:-/usr/aarch64-linux-gnu}
status=0
took() { echo "   ($((SECONDS - t0)) s)"; t0=$SECONDS; }
echo "== cross-build: $((SECONDS - t0)) s"; t0=$SECONDS
# the kernels under ASan + UBSan as well (dynamic: qemu finds the arm64
# loader and libasan in the cross toolchain's root, /usr/aarch64-linux-gnu):
# each source compiled once, one job per core, and linked into both tests
SANFLAGS="-std=c11 -Wall -Wextra -Werror -O1 -g -fsanitize=address,undefined -fno-sanitize-recover=undefined \
-fno-omit-frame-pointer -pthread -Iinclude -Isrc -Itests -D_GNU_SOURCE"
. scripts/objs.sh
# shellcheck disable=SC2046
plan_objs "$out/san" $(find src/kernels -name '*.c' ! -path 'src/kernels/opencl/*' | sort) src/util/util.c src/util/env.c
if [ ${#stale[@]} -gt 0 ]; then
    export CC SANFLAGS
    # shellcheck disable=SC2016
    printf '%s\n' "${stale[@]}" | xargs -P "$(nproc)" -n 2 sh -c '$CC $SANFLAGS -c -o "$2" "$1"' _
fi
echo "== ASan + UBSan objects: $((SECONDS - t0)) s"; t0=$SECONDS
for t in test_matmul test_kernels test_kv_paged; do
    san="$out/tests/${t}_san"
    # shellcheck disable=SC2086
    "$CC" $SANFLAGS -o "$san" "${objs[@]}" tests/$t.c -lm
    echo "== $t under ASan + UBSan, qemu-aarch64 -cpu max =="
    # the NEON sets (plain C is the same source as on x86-64, tested there
    # under the sanitizers)
    R1_TEST_QUICK=1 R1_TEST_SETS="neon-dot neon" ASAN_OPTIONS=detect_leaks=0 "$QEMU" -L "$SYSROOT" -cpu max "$san" 2>&1 |
        grep -E "FAIL|ERROR|runtime error|passed, [0-9]+ failed$" || status=1
    took
    # the optimized build on -cpu max: test_kernels here; test_matmul's
    # cases are the sanitized run's, and its -O2 code runs below on
    # cortex-a53 (neon) and in test_fixtures (neon-dot and neon)
    if [ "$t" != test_matmul ]; then
        echo "== $t, qemu-aarch64 -cpu max (dotprod) =="
        R1_TEST_QUICK=1 "$QEMU" -cpu max "$out/tests/$t" || status=1
        took
    fi
    echo "== $t, qemu-aarch64 -cpu cortex-a53 (no dotprod) =="
    R1_TEST_QUICK=1 "$QEMU" -cpu cortex-a53 "$out/tests/$t" 2>&1 |
        grep -E "FAIL|best ISA|not available|passed" || status=1
    took
done
# test_gguf (the parser, a model or two through the kernels) on one set;
# test_fixtures (every model against its oracles) on both
for isa in neon-dot neon; do
    tests=(test_fixtures)
    [ "$isa" = neon-dot ] && tests+=(test_gguf)
    for t in "${tests[@]}"; do
        echo "== $t, R1_CPU_ISA=$isa, qemu-aarch64 -cpu max =="
        R1_CPU_ISA=$isa "$QEMU" -cpu max "$out/tests/$t" 2>&1 |
            grep -E "FAIL|passed, [0-9]+ failed$" || status=1
        took
    done
done
exit $status
