/*
 * kquants.h - cpu matmul tiles (r1_cpu_tile_fn) for the GGUF formats beyond
 * q8_0/q4_0: the K-quants q4_K, q5_K, q6_K (256-weight super-blocks) and the
 * 32-weight q4_1, q5_0, q5_1. All take q8 activations (R1_CPU_ACT_Q8) and are
 * checked against the reference kernels by tests/test_matmul.c.
 *
 * Column ranges: every tile works in chunks of 64 columns (two 32-weight
 * groups: a pair of K-quant sub-blocks, or two 32-blocks), so any [k0, k1)
 * with k0 % 64 == 0 and k1 % 64 == 0 or k1 == K is fine, including ranges
 * that start or end inside a 256-weight super-block. The 32-block formats
 * also take a last half chunk (k1 == K, K % 64 == 32).
 *
 *   kquants_generic.c       plain C (every arch; generic, avx2 and NEON tables)
 *   x86/kquants_avx2.c      AVX2, with or without VNNI (q8s activations), x86-64 only
 *   x86/kquants_avx512.c    AVX-512 VNNI (vpdpbusd), x86-64 only
 */
#ifndef R1_CPU_KQUANTS_H
#define R1_CPU_KQUANTS_H

#include "kernels/cpu/cpu.h"

#define R1_KQ_TILE_ARGS                                                                                                \
    int K, int k0, int k1, const uint8_t *w, size_t ws, int nr, const uint8_t *x, size_t xs, int nt, float *out

/* plain C, any nr <= R1_CPU_MR, nt <= R1_CPU_NT */
void r1_kq_tile_q4_K_c(R1_KQ_TILE_ARGS);
void r1_kq_tile_q5_K_c(R1_KQ_TILE_ARGS);
void r1_kq_tile_q6_K_c(R1_KQ_TILE_ARGS);
void r1_kq_tile_q4_1_c(R1_KQ_TILE_ARGS);
void r1_kq_tile_q5_0_c(R1_KQ_TILE_ARGS);
void r1_kq_tile_q5_1_c(R1_KQ_TILE_ARGS);

#if defined(__x86_64__)
/* AVX2 + FMA + F16C (x86/kquants_avx2.c), against R1_CPU_ACT_Q8S activations;
 * the _avx2vnni forms need r1_x86_avx2_vnni != 0. nr <= 4, nt <= 4 */
void r1_kq_tile_q6_K_avx2(R1_KQ_TILE_ARGS);
void r1_kq_tile_q4_K_avx2vnni(R1_KQ_TILE_ARGS);
void r1_kq_tile_q5_K_avx2vnni(R1_KQ_TILE_ARGS);
void r1_kq_tile_q6_K_avx2vnni(R1_KQ_TILE_ARGS);
/* the same on two-part pairs, folded in int32 (cpu.h r1_cpu_mm.pair_tile), nt <= 2 */
void r1_kq_tile_q6_K_pair_avx2(R1_KQ_TILE_ARGS);
void r1_kq_tile_q4_K_pair_avx2vnni(R1_KQ_TILE_ARGS);
void r1_kq_tile_q5_K_pair_avx2vnni(R1_KQ_TILE_ARGS);
void r1_kq_tile_q6_K_pair_avx2vnni(R1_KQ_TILE_ARGS);
/* q6_Kx8 against R1_CPU_ACT_Q8X8 activations (one and two parts) */
void r1_kq_tile_q6_Kx8_avx2(R1_KQ_TILE_ARGS);
void r1_kq_tile_q6_Kx8_pair_avx2(R1_KQ_TILE_ARGS);
void r1_kq_tile_q6_Kx8_avx2vnni(R1_KQ_TILE_ARGS);
void r1_kq_tile_q6_Kx8_pair_avx2vnni(R1_KQ_TILE_ARGS);

/* q4_K, q5_K against R1_CPU_ACT_Q8WS activations (both parts in int16),
 * vpmaddwd: the avx2 table's; nr <= 4, nt <= 4 */
void r1_kq_tile_q4_K_q8ws_avx2(R1_KQ_TILE_ARGS);
void r1_kq_tile_q5_K_q8ws_avx2(R1_KQ_TILE_ARGS);

/* AVX-512 F/BW/VL/DQ + VNNI (the avx512 table's CPUs), nr <= 4, nt <= 4 */
void r1_kq_tile_q4_K_avx512(R1_KQ_TILE_ARGS);
void r1_kq_tile_q5_K_avx512(R1_KQ_TILE_ARGS);
void r1_kq_tile_q6_K_avx512(R1_KQ_TILE_ARGS);
void r1_kq_tile_q4_1_avx512(R1_KQ_TILE_ARGS);
void r1_kq_tile_q5_0_avx512(R1_KQ_TILE_ARGS);
void r1_kq_tile_q5_1_avx512(R1_KQ_TILE_ARGS);
/* the regrouped K-quants (dtype.h) on q8x8 activations, k0 and k1 multiples of 256 */
void r1_kq_tile_q4_Kx8_avx512(R1_KQ_TILE_ARGS);
void r1_kq_tile_q5_Kx8_avx512(R1_KQ_TILE_ARGS);
void r1_kq_tile_q6_Kx8_avx512(R1_KQ_TILE_ARGS);
/* the same on two-part pairs (cpu.h r1_cpu_mm.pair_tile), nt <= 2 */
void r1_kq_tile_q4_Kx8_avx512_pair(R1_KQ_TILE_ARGS);
void r1_kq_tile_q5_Kx8_avx512_pair(R1_KQ_TILE_ARGS);
void r1_kq_tile_q6_Kx8_avx512_pair(R1_KQ_TILE_ARGS);
/* the regrouped K-quants' GEMM (r1_cpu_panel_fn, cpu.h r1_cpu_mm.gemm) on
 * one-part q8x8 activations, K % 256 == 0, any tn: token t's sums are bit for
 * bit the one-part tile's; the reference is the tile (tests/test_matmul.c) */
void r1_gemm_q4_Kx8_q8x8_avx512(int K, const uint8_t *w, size_t ws, int mc, const float *x, size_t xs, int tn, float *C,
                                int ldc);
void r1_gemm_q5_Kx8_q8x8_avx512(int K, const uint8_t *w, size_t ws, int mc, const float *x, size_t xs, int tn, float *C,
                                int ldc);
void r1_gemm_q6_Kx8_q8x8_avx512(int K, const uint8_t *w, size_t ws, int mc, const float *x, size_t xs, int tn, float *C,
                                int ldc);
#endif

#endif
