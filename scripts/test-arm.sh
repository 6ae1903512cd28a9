#!/usr/bin/env bash
# Cross-builds the kernel conformance test (src/kernels, src/util,
# tests/test_kernels.c) for aarch64 with a static gcc and runs it under
# qemu-user on a small set of shapes, twice: with -cpu max (NEON + dotprod:
# both the "neon-dot" and "neon" tables are tested) and with -cpu cortex-a53
# (ARMv8.0, no dotprod: the dispatch must pick "neon"). Needs
# gcc-aarch64-linux-gnu and qemu-user (apt-get install -y gcc-aarch64-linux-gnu qemu-user).
set -eu
CC=${ARM_CC:-aarch64-linux-gnu-gcc}
QEMU=${QEMU:-qemu-aarch64}
BUILD=${BUILD:-build}
for tool in "$CC" "$QEMU"; do
    if ! command -v "$tool" >/dev/null; then
        echo "test-arm: '$tool' not found: apt-get install -y gcc-aarch64-linux-gnu qemu-user" >&2
        exit 1
    fi
done
mkdir -p "$BUILD/arm"
out="$BUILD/arm/test_kernels"
# shellcheck disable=SC2046
"$CC" -static -std=c11 -Wall -Wextra -Werror -O2 -pthread -Iinclude -Isrc -Itests -D_GNU_SOURCE \
    -o "$out" $(find src/kernels -name '*.c' | sort) src/util/util.c tests/test_kernels.c -lm
echo "built $out"
status=0
echo "== qemu-aarch64 -cpu max (dotprod) =="
R1_TEST_QUICK=1 "$QEMU" -cpu max "$out" || status=1
echo "== qemu-aarch64 -cpu cortex-a53 (no dotprod) =="
R1_TEST_QUICK=1 "$QEMU" -cpu cortex-a53 "$out" | grep -E "best ISA|not available|passed" || status=1
exit $status
