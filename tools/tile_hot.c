/*
 * tile_hot.c - one decode tile alone, on one thread, with its weights in L2:
 * the pair tile (cpu.h r1_cpu_mm.pair_tile, both activation parts) of an ISA
 * table at T = 1 over ROWS x K weights, ITERS times. It answers whether a
 * kernel is compute- or memory-bound: its GB/s here is what one core can
 * compute at most, to set beside mm_bench's streaming figure (if one thread
 * streams at about this rate, the core, not memory, is the limit). Run it
 * under valgrind --tool=callgrind twice with different ITERS for
 * instructions per block (the difference / (ITERS difference x ROWS x
 * K / 32)). It also prints a hash of the first pass's outputs (the float
 * bits), so that two builds of a tile can be checked bit for bit.
 *
 *   build/tools/tile_hot ISA DTYPE K ROWS ITERS
 *   e.g. build/tools/tile_hot avx2 q4_K 1536 128 400
 *
 * Weights are random (quantized from uniform values), activations too. Speed
 * is only ever measured here, never asserted. Rows go 4 to a call, as cpu.c
 * calls decode tiles; ROWS is rounded down to a multiple of 4.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/cpu/cpu.h"
#include "kernels/dtype.h"
#include "util/util.h"

static uint64_t rng = 0x2545F4914F6CDD1Dull;
static float frand(void) {
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return (float)(rng >> 40) / (float)(1 << 24) - 0.5f;
}

int main(int argc, char **argv) {
    if (argc != 6) {
        fprintf(stderr, "usage: tile_hot ISA DTYPE K ROWS ITERS\n");
        return 2;
    }
    const int dt = r1_dtype_parse(argv[2]), K = atoi(argv[3]), rows = atoi(argv[4]) / 4 * 4,
              iters = atoi(argv[5]);
    if (r1_backend_cpu.init() || r1_cpu_select(argv[1])) {
        fprintf(stderr, "tile_hot: %s\n", r1_last_error());
        return 1;
    }
    const struct r1_cpu_isa *isa = r1_cpu_current();
    if (dt < 0 || !r1_dtype_traits[dt].from_f32 || K <= 0 || K % 256 || rows < 4 || iters < 1) {
        fprintf(stderr, "tile_hot: want a dtype it can make, K a multiple of 256, ROWS >= 4, ITERS >= 1\n");
        return 2;
    }
    const struct r1_cpu_mm *mm = &isa->mm[dt];
    if (!mm->pair_tile) {
        fprintf(stderr, "tile_hot: the %s table has no pair tile for %s\n", isa->name, argv[2]);
        return 1;
    }
    const size_t rb = r1_dtype_row_bytes(dt, K);
    const size_t s = mm->act == R1_CPU_ACT_Q8X8  ? r1_cpu_q8x8_stride(K)
                     : mm->act == R1_CPU_ACT_Q8S ? r1_cpu_q8s_stride(K)
                                                 : r1_cpu_q8_stride(K);
    uint8_t *w = r1_alloc(rb * (size_t)rows, "weights"), *x = r1_alloc(2 * s, "activations");
    float *xf = malloc((size_t)K * sizeof *xf);
    if (!w || !x || !xf) {
        fprintf(stderr, "tile_hot: %s\n", r1_last_error());
        return 1;
    }
    for (int r = 0; r < rows; r++) {
        for (int c = 0; c < K; c++) xf[c] = frand() * 0.04f;
        r1_dtype_traits[dt].from_f32(xf, w + (size_t)r * rb, K);
    }
    for (int c = 0; c < K; c++) xf[c] = frand();
    if (mm->act == R1_CPU_ACT_Q8X8) {
        if (isa->quant_q8x8_2) isa->quant_q8x8_2(xf, x, x + s, K);
        else {
            fprintf(stderr, "tile_hot: the %s table has no two-part q8x8 quantizer\n", isa->name);
            return 1;
        }
    } else {
        if (!isa->quant_q8_2) {
            fprintf(stderr, "tile_hot: the %s table has no two-part q8 quantizer\n", isa->name);
            return 1;
        }
        isa->quant_q8_2(xf, x, x + s, K);
        if (mm->act == R1_CPU_ACT_Q8S) {
            r1_cpu_q8s_sums(x, K);
            r1_cpu_q8s_sums(x + s, K);
        }
    }
    float out[4 * R1_CPU_MR];
    uint64_t h = 1469598103934665603ull; /* FNV-1a over the first pass's output bits */
    double t0 = r1_now();
    for (int it = 0; it < iters; it++)
        for (int r = 0; r < rows; r += 4) {
            mm->pair_tile(K, 0, K, w + (size_t)r * rb, rb, 4, x, 2 * s, 1, out);
            if (it == 0)
                for (int i = 0; i < 4; i++) {
                    uint32_t b;
                    memcpy(&b, &out[i], 4);
                    h = (h ^ b) * 1099511628211ull;
                }
        }
    double t = r1_now() - t0;
    printf("%-10s %-7s K=%d rows=%d: %.2f GB/s, %.2f ns/row, %.3f ns per 32 weights, hash %016llx\n", isa->name,
           argv[2], K, rows, (double)rb * rows * iters / t / 1e9, t / ((double)rows * iters) * 1e9,
           t / ((double)rows * iters * K / 32) * 1e9, (unsigned long long)h);
    return 0;
}
