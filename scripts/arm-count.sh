#!/usr/bin/env bash
# Executed instructions of the AArch64 tiles, per row and 256 weights, for
# 1, 2 and 4 tokens, counted under qemu-user with tools/qemu_insn_count.c:
# (ITERS=40 calls) - (8 calls) of a 4-row tile over K = 4096. Speed cannot be
# measured under qemu; this is a proxy for the work per weight, to compare
# versions of a tile. Usage: scripts/arm-count.sh [ISA...] (default: neon-dot
# neon); DTYPES="q4_0x8 q4_K" to choose the formats. Needs what test-arm needs.
set -euo pipefail
CC=${ARM_CC:-aarch64-linux-gnu-gcc}
QEMU=${QEMU:-qemu-aarch64}
out=${BUILD:-build}/arm-count
mkdir -p "$out"
cc -shared -fPIC -O2 -Wall -Wextra -Werror -o "$out/insn_count.so" tools/qemu_insn_count.c
# shellcheck disable=SC2046
"$CC" -static -std=c11 -Wall -Wextra -Werror -O2 -pthread -Iinclude -Isrc -D_GNU_SOURCE \
    -o "$out/tile_count" $(find src/kernels -name '*.c' | sort) src/util/util.c src/util/env.c \
    tools/arm_tile_count.c -lm
count() { # isa dtype nt iters
    "$QEMU" -cpu max -plugin "$out/insn_count.so" "$out/tile_count" "$@" 2>&1 >/dev/null |
        awk '/^insns/ {print $2}'
}
ISAS=${*:-neon-dot neon}
DTYPES=${DTYPES:-f32 f16 bf16 q8_0 q4_0 q4_0x8 q4_1 q5_0 q5_1 q4_K q5_K q6_K}
printf '%-9s %-7s %8s %8s %8s\n' isa dtype "1 token" "2 tokens" "4 tokens"
for isa in $ISAS; do
    for dt in $DTYPES; do
        row=$(printf '%-9s %-7s' "$isa" "$dt")
        for nt in 1 2 4; do
            a=$(count "$isa" "$dt" "$nt" 8) b=$(count "$isa" "$dt" "$nt" 40)
            row="$row $(awk -v a="$a" -v b="$b" 'BEGIN {printf "%8.1f", (b - a) / 32 / 4 / 16}')"
        done
        echo "$row"
    done
done
