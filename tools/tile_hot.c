/*
 * tile_hot.c - one decode tile alone, on one thread, with its weights in L2:
 * the pair tile (cpu.h r1_cpu_mm.pair_tile, both activation parts; for the
 * q8w and q8ws forms, which fold both parts into one row, the tile) of an ISA
 * table at T = 1 over ROWS x K weights, ITERS times. It answers whether a
 * kernel is compute- or memory-bound: its GB/s here is what one core can
 * compute at most, to set beside mm_bench's streaming figure (if one thread
 * streams at about this rate, the core, not memory, is the limit). Run it
 * under valgrind --tool=callgrind twice with different ITERS for
 * instructions per block (the difference / (ITERS difference x ROWS x
 * K / 32)). It also prints a hash of the first pass's outputs (the float
 * bits), so that two builds of a tile can be checked bit for bit.
 *
 *   build/tools/tile_hot ISA DTYPE K ROWS ITERS [NT]
 *   e.g. build/tools/tile_hot avx2 q4_K 1536 128 400
 *
 * TILE_HOT_PLAIN=1 (NT = 1): the table's plain tile on the token's two
 * parts (as cpu.c runs it with the cpu tuning pairs 0) instead of its pair
 * tile, to compare the two forms (the outputs differ by rounding, so the
 * hash does too).
 *
 * NT > 1 (default 1): a small batch of NT tokens as cpu.c's whole-K path
 * runs it: per 4 rows, the tile on pair_nt tokens at a time, the rows'
 * prefetch only on the first call (r1_cpu_tile_prefetch); the hash covers
 * every token's outputs and figures are per row and token.
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
    if (argc != 6 && argc != 7) {
        fprintf(stderr, "usage: tile_hot ISA DTYPE K ROWS ITERS [NT]\n");
        return 2;
    }
    const int dt = r1_dtype_parse_any(argv[2]), K = atoi(argv[3]), rows = atoi(argv[4]) / 4 * 4, iters = atoi(argv[5]),
              nt = argc > 6 ? atoi(argv[6]) : 1;
    if (r1_backend_cpu.init() || r1_cpu_select(argv[1])) {
        fprintf(stderr, "tile_hot: %s\n", r1_last_error());
        return 1;
    }
    const struct r1_cpu_isa *isa = r1_cpu_current();
    if (dt < 0 || !r1_dtype_traits[dt].from_f32 || K <= 0 || K % 256 || rows < 4 || iters < 1 || nt < 1) {
        fprintf(stderr, "tile_hot: want a dtype it can make, K a multiple of 256, ROWS >= 4, ITERS >= 1\n");
        return 2;
    }
    const struct r1_cpu_mm *mm = &isa->mm[dt];
    /* q8w / q8ws: one activation row a token holds both parts, and the
     * table's tile is the two-part one */
    const int folded = mm->act == R1_CPU_ACT_Q8W || mm->act == R1_CPU_ACT_Q8WS;
    if (!mm->pair_tile && !folded) {
        fprintf(stderr, "tile_hot: the %s table has no pair tile for %s\n", isa->name, argv[2]);
        return 1;
    }
    const size_t rb = r1_dtype_row_bytes(dt, K);
    const size_t s = folded                       ? r1_cpu_q8ws_stride(K) / 2 /* tokens 2 s apart */
                     : mm->act == R1_CPU_ACT_Q8X8 ? r1_cpu_q8x8_stride(K)
                     : mm->act == R1_CPU_ACT_Q8S  ? r1_cpu_q8s_stride(K)
                                                  : r1_cpu_q8_stride(K);
    uint8_t *parts = r1_alloc(2 * r1_cpu_q8_stride(K), "activation parts");
    uint8_t *w = r1_alloc(rb * (size_t)rows, "weights"), *x = r1_alloc(2 * s * (size_t)nt, "activations");
    float *xf = malloc((size_t)K * sizeof *xf);
    if (!w || !x || !xf || !parts) {
        fprintf(stderr, "tile_hot: %s\n", r1_last_error());
        return 1;
    }
    for (int r = 0; r < rows; r++) {
        for (int c = 0; c < K; c++) xf[c] = frand() * 0.04f;
        r1_dtype_traits[dt].from_f32(xf, w + (size_t)r * rb, K);
    }
    for (int t = 0; t < nt; t++) {
        uint8_t *xt = x + 2 * s * (size_t)t;
        for (int c = 0; c < K; c++) xf[c] = frand();
        if (mm->act == R1_CPU_ACT_Q8X8) {
            if (isa->quant_q8x8_2) isa->quant_q8x8_2(xf, xt, xt + s, K);
            else {
                fprintf(stderr, "tile_hot: the %s table has no two-part q8x8 quantizer\n", isa->name);
                return 1;
            }
        } else {
            if (!isa->quant_q8_2) {
                fprintf(stderr, "tile_hot: the %s table has no two-part q8 quantizer\n", isa->name);
                return 1;
            }
            if (folded) { /* both parts, then folded into one q8ws row (a q8w row and more) */
                isa->quant_q8_2(xf, parts, parts + r1_cpu_q8_stride(K), K);
                r1_cpu_q8w_fold_c(parts, parts + r1_cpu_q8_stride(K), xt, K, 1);
                continue;
            }
            isa->quant_q8_2(xf, xt, xt + s, K);
            if (mm->act == R1_CPU_ACT_Q8S) {
                r1_cpu_q8s_sums(xt, K);
                r1_cpu_q8s_sums(xt + s, K);
            }
        }
    }
    /* TILE_HOT_PLAIN=1 (NT = 1 only): the plain tile on the two parts, as
     * cpu.c runs it with pairs off, its two rows of outputs summed */
    const char *pe = getenv("TILE_HOT_PLAIN");
    const int plain = !folded && pe && *pe == '1' && nt == 1;
    const int tstep = folded ? isa->nt : plain ? 1 : mm->pair_nt;
    const r1_cpu_tile_fn fn = folded || plain ? mm->tile : mm->pair_tile;
    float out[R1_CPU_NT * R1_CPU_MR];
    uint64_t h = 1469598103934665603ull; /* FNV-1a over the first pass's output bits */
    double t0 = r1_now();
    for (int it = 0; it < iters; it++)
        for (int r = 0; r < rows; r += 4)
            for (int t = 0; t < nt; t += tstep) {
                const int n = nt - t < tstep ? nt - t : tstep;
                r1_cpu_tile_prefetch = t == 0;
                if (plain) {
                    fn(K, 0, K, w + (size_t)r * rb, rb, 4, x, s, 2, out);
                    for (int i = 0; i < 4; i++) out[i] += out[R1_CPU_MR + i];
                } else {
                    fn(K, 0, K, w + (size_t)r * rb, rb, 4, x + 2 * s * (size_t)t, 2 * s, n, out);
                }
                if (it == 0)
                    for (int i = 0; i < 4 * n; i++) {
                        uint32_t b;
                        memcpy(&b, &out[i / 4 * R1_CPU_MR + i % 4], 4);
                        h = (h ^ b) * 1099511628211ull;
                    }
            }
    r1_cpu_tile_prefetch = 1;
    double t = (r1_now() - t0) / nt; /* per token */
    printf("%-10s %-7s K=%d rows=%d nt=%d: %.2f GB/s, %.2f ns/row, %.3f ns per 32 weights, hash %016llx\n", isa->name,
           argv[2], K, rows, nt, (double)rb * rows * iters / t / 1e9, t / ((double)rows * iters) * 1e9,
           t / ((double)rows * iters * K / 32) * 1e9, (unsigned long long)h);
    return 0;
}
