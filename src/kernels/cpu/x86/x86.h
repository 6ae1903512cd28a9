/*
 * x86.h - helpers shared by the x86 ISA tables (avx2.c, avx512.c): the CPUID
 * check for F16C and the AVX2 vector helpers the AVX-512 table reuses.
 * x86-64 only; callers must have checked the CPU first.
 */
#ifndef R1_CPU_X86_H
#define R1_CPU_X86_H

#include <immintrin.h>
#include <stddef.h>
#include <stdint.h>

int r1_x86_has_f16c(void);
/* How the avx2-vnni table multiplies bytes (set by its availability check):
 * 1 AVX-VNNI, 2 AVX512-VNNI on ymm (AVX512VL), 0 neither (avx2_dot.h) */
extern int r1_x86_avx2_vnni;
/* The parameters of a tile (cpu.h r1_cpu_tile_fn) and of a panel GEMM
 * (cpu.h r1_cpu_panel_fn), for the declarations below */
#define R1_X86_TILE_ARGS                                                                                               \
    int K, int k0, int k1, const uint8_t *w, size_t ws, int nr, const uint8_t *x, size_t xs, int nt, float *out
#define R1_X86_PANEL_ARGS                                                                                              \
    int K, const uint8_t *w, size_t ws, int mc, const float *x, size_t xs, int tn, float *C, int ldc

/* AVX2 tiles of the 32-weight block formats (q32_avx2.c): q8_0 on q8
 * activations, q4_0x8 and q4_Kx8 on q8x8, the others on q8s. The _avx2vnni
 * forms need r1_x86_avx2_vnni != 0. _pair: the same on two-part pairs,
 * folded in int32 (cpu.h r1_cpu_mm.pair_tile), nt <= 2. q8_0 has only the
 * VNNI forms: plain AVX2 multiplies it on q8w (r1_x86_tile_q8_0_q8w_avx2). */
void r1_x86_tile_q8_0_avx2vnni(R1_X86_TILE_ARGS);
void r1_x86_tile_q8_0_pair_avx2vnni(R1_X86_TILE_ARGS);
void r1_x86_tile_q4_0_avx2(R1_X86_TILE_ARGS);
void r1_x86_tile_q4_0_pair_avx2(R1_X86_TILE_ARGS);
void r1_x86_tile_q4_0_avx2vnni(R1_X86_TILE_ARGS);
void r1_x86_tile_q4_0_pair_avx2vnni(R1_X86_TILE_ARGS);
void r1_x86_tile_q4_1_avx2(R1_X86_TILE_ARGS);
void r1_x86_tile_q4_1_pair_avx2(R1_X86_TILE_ARGS);
void r1_x86_tile_q4_1_avx2vnni(R1_X86_TILE_ARGS);
void r1_x86_tile_q4_1_pair_avx2vnni(R1_X86_TILE_ARGS);
void r1_x86_tile_q5_0_avx2(R1_X86_TILE_ARGS);
void r1_x86_tile_q5_0_pair_avx2(R1_X86_TILE_ARGS);
void r1_x86_tile_q5_0_avx2vnni(R1_X86_TILE_ARGS);
void r1_x86_tile_q5_0_pair_avx2vnni(R1_X86_TILE_ARGS);
void r1_x86_tile_q5_1_avx2(R1_X86_TILE_ARGS);
void r1_x86_tile_q5_1_pair_avx2(R1_X86_TILE_ARGS);
void r1_x86_tile_q5_1_avx2vnni(R1_X86_TILE_ARGS);
void r1_x86_tile_q5_1_pair_avx2vnni(R1_X86_TILE_ARGS);
void r1_x86_tile_q4_0x8_avx2(R1_X86_TILE_ARGS);
void r1_x86_tile_q4_0x8_pair_avx2(R1_X86_TILE_ARGS);
void r1_x86_tile_q4_0x8_avx2vnni(R1_X86_TILE_ARGS);
void r1_x86_tile_q4_0x8_pair_avx2vnni(R1_X86_TILE_ARGS);
void r1_x86_tile_q4_Kx8_avx2(R1_X86_TILE_ARGS);
void r1_x86_tile_q4_Kx8_pair_avx2(R1_X86_TILE_ARGS);
void r1_x86_tile_q4_Kx8_avx2vnni(R1_X86_TILE_ARGS);
void r1_x86_tile_q4_Kx8_pair_avx2vnni(R1_X86_TILE_ARGS);
void r1_x86_quant_q8x8_avx2(const float *x, uint8_t *dst, int K);
/* Two-part activations (cpu.h quant_q8_2, quant_q8x8_2), plain AVX2 */
void r1_x86_quant_q8_2_avx2(const float *x, uint8_t *hi, uint8_t *lo, int K);
/* cpu.h q8w_fold, plain AVX2 */
void r1_x86_q8w_fold_avx2(const uint8_t *h, const uint8_t *l, uint8_t *dst, int K, int sums);
void r1_x86_quant_q8x8_2_avx2(const float *x, uint8_t *hi, uint8_t *lo, int K);
/* q8_0 weights against q8w activations (plain AVX2: decode and batches) */
void r1_x86_tile_q8_0_q8w_avx2(R1_X86_TILE_ARGS);
/* The integer panel GEMM of batches (gemm_q16_avx2.c; cpu.h r1_cpu_panel_fn
 * with panel_act R1_CPU_ACT_Q16) and its activation quantizer */
void r1_x86_panel_q16_avx2_q8_0(R1_X86_PANEL_ARGS);
void r1_x86_panel_q16_avx2_q4_0(R1_X86_PANEL_ARGS);
void r1_x86_panel_q16_avx2_q4_0x8(R1_X86_PANEL_ARGS);
void r1_x86_quant_q16_avx2(const float *x, uint8_t *dst, int K);
/* The panel GEMM of batches (gemm_avx2.c; cpu.h r1_cpu_panel_fn), per format */
void r1_x86_panel_avx2_f32(R1_X86_PANEL_ARGS);
void r1_x86_panel_avx2_f16(R1_X86_PANEL_ARGS);
void r1_x86_panel_avx2_bf16(R1_X86_PANEL_ARGS);
void r1_x86_panel_avx2_q8_0(R1_X86_PANEL_ARGS);
void r1_x86_panel_avx2_q4_0(R1_X86_PANEL_ARGS);
void r1_x86_panel_avx2_q4_1(R1_X86_PANEL_ARGS);
void r1_x86_panel_avx2_q5_0(R1_X86_PANEL_ARGS);
void r1_x86_panel_avx2_q5_1(R1_X86_PANEL_ARGS);
void r1_x86_panel_avx2_q4_K(R1_X86_PANEL_ARGS);
void r1_x86_panel_avx2_q5_K(R1_X86_PANEL_ARGS);
void r1_x86_panel_avx2_q6_K(R1_X86_PANEL_ARGS);
void r1_x86_panel_avx2_q4_0x8(R1_X86_PANEL_ARGS);
void r1_x86_panel_avx2_q4_Kx8(R1_X86_PANEL_ARGS);
void r1_x86_panel_avx2_q6_Kx8(R1_X86_PANEL_ARGS);
void r1_x86_quant_q8_avx2(const float *x, uint8_t *dst, int K);
float r1_x86_dot_f32_avx2(const float *a, const float *b, int n);
float r1_x86_dot_f16_avx2(const float *a, const uint16_t *b, int n);
void r1_x86_axpy_f32_avx2(float a, const float *x, float *y, int n);
void r1_x86_axpy_f16_avx2(float a, const uint16_t *x, float *y, int n);
void r1_x86_f32_to_f16_avx2(const float *x, uint16_t *y, int n);

/* AVX2 helpers of the blocked attention (attn_avx2.c); see cpu.h. */
void r1_x86_f16_to_f32_avx2(const uint16_t *x, float *y, int n);
void r1_x86_attn_qk_avx2(const float *q, int M, const float *k, int P, int hd, float *s, int ss);
void r1_x86_attn_pv_avx2(const float *s, int ss, int M, const float *v, int P, int hd, float *o);
void r1_x86_attn_qk_f16_avx2(const float *q, int M, const uint16_t *k, int P, int hd, float *s, int ss);
void r1_x86_attn_pv_f16_avx2(const float *s, int ss, int M, const uint16_t *v, int P, int hd, float *o);
float r1_x86_attn_softmax_avx2(float *s, int n, float scale, float *m);
void r1_x86_q8_0_to_f32_avx2(const uint8_t *x, float *y, int n);
void r1_x86_attn_qk_q8_avx2(const float *q, int M, const uint8_t *k, int P, int hd, float *s, int ss);
void r1_x86_attn_pv_q8_avx2(const float *s, int ss, int M, const uint8_t *v, int P, int hd, float *o);
void r1_x86_silu_mul_avx2(const float *g, const float *u, float *o, int n);

/* AVX-512 helpers of the blocked attention (attn_avx512.c); see cpu.h. */
void r1_x86_f16_to_f32_avx512(const uint16_t *x, float *y, int n);
void r1_x86_attn_qk_avx512(const float *q, int M, const float *k, int P, int hd, float *s, int ss);
void r1_x86_attn_pv_avx512(const float *s, int ss, int M, const float *v, int P, int hd, float *o);
float r1_x86_attn_softmax_avx512(float *s, int n, float scale, float *m);
void r1_x86_q8_0_to_f32_avx512(const uint8_t *x, float *y, int n);
void r1_x86_attn_qk_q8_avx512(const float *q, int M, const uint8_t *k, int P, int hd, float *s, int ss);
void r1_x86_attn_pv_q8_avx512(const float *s, int ss, int M, const uint8_t *v, int P, int hd, float *o);

/* Weight rows [0, nr) of w (ws bytes apart, K columns) as bf16 panels
 * (amx_panel.c): hi = bf16(w), and for every dtype but bf16 lo = bf16(w -
 * hi), K values a row each, rows ps >= K values apart. Returns -1, writing
 * nothing, for a dtype, K or ps it has no panel for. */
int r1_x86_amx_panel(enum r1_dtype dt, const uint8_t *w, size_t ws, int nr, int K, int ps, uint16_t *hi, uint16_t *lo);
/* cpu.h quant_bf16 and vnni_parts on AVX512_BF16 (amx_panel.c) */
void r1_x86_quant_bf16(const float *x, uint16_t *dst, int K);
void r1_x86_vnni_parts(const float *x, int T, int K, uint8_t *v, size_t plane);
/* q4_0x8 weights (q4x8_avx512.c): the VNNI tile on q8x8 activations and its
 * quantizer */
void r1_x86_tile_q4_0x8_avx512(R1_X86_TILE_ARGS);
void r1_x86_quant_q8x8_avx512(const float *x, uint8_t *dst, int K);
void r1_x86_quant_q8x8_2_avx512(const float *x, uint8_t *hi, uint8_t *lo, int K);
void r1_x86_quant_q8_2_avx512(const float *x, uint8_t *hi, uint8_t *lo, int K);
/* Columns [k0, k1) (multiples of 256) of a q4_Kx8, q5_Kx8 or q6_Kx8 row,
 * or [0, 256) of one q8_0x8 or q4_1x8 group, as f32 (amx_panel.c; the avx512 table's features, no BF16) */
void r1_x86_x8_row_f32(enum r1_dtype dt, const uint8_t *row, int k0, int k1, float *dst);
/* Columns [k0, k1) of an f32, f16 or bf16 row as f32 (gemm_avx2.c; AVX2) */
void r1_x86_row_f32_f32(const uint8_t *row, int k0, int k1, float *dst);
void r1_x86_row_f16_f32(const uint8_t *row, int k0, int k1, float *dst);
void r1_x86_row_bf16_f32(const uint8_t *row, int k0, int k1, float *dst);
/* The f32 panel GEMM of batches where AMX is off (gemm_avx512.c): the
 * regrouped K-quants and the float formats */
void r1_x86_panel_avx512_f32(R1_X86_PANEL_ARGS);
void r1_x86_panel_avx512_f16(R1_X86_PANEL_ARGS);
void r1_x86_panel_avx512_bf16(R1_X86_PANEL_ARGS);
void r1_x86_panel_avx512_q8_0x8(R1_X86_PANEL_ARGS);
void r1_x86_panel_avx512_q4_Kx8(R1_X86_PANEL_ARGS);
void r1_x86_panel_avx512_q5_Kx8(R1_X86_PANEL_ARGS);
void r1_x86_panel_avx512_q6_Kx8(R1_X86_PANEL_ARGS);

/* q4_1x8 and q8_0x8 weights (x8_avx512.c) on q8x8 activations */
void r1_x86_tile_q4_1x8_avx512(R1_X86_TILE_ARGS);
void r1_x86_tile_q8_0x8_avx512(R1_X86_TILE_ARGS);
/* the same on two-part pairs, folded in int32 (cpu.h r1_cpu_mm.pair_tile) */
void r1_x86_tile_q4_1x8_avx512_pair(R1_X86_TILE_ARGS);
void r1_x86_tile_q4_0x8_avx512_pair(R1_X86_TILE_ARGS);
void r1_x86_tile_q8_0x8_avx512_pair(R1_X86_TILE_ARGS);
void r1_x86_silu_mul_avx512(const float *g, const float *u, float *o, int n);
void r1_x86_attn_qk_f16_avx512(const float *q, int M, const uint16_t *k, int P, int hd, float *s, int ss);
void r1_x86_attn_pv_f16_avx512(const float *s, int ss, int M, const uint16_t *v, int P, int hd, float *o);
/* 8 rows of 8 floats (src, row stride ss floats) transposed: column j of
 * them to dst + j * ds (32-byte aligned), the panel GEMMs' fill (gemm_*.c) */
static inline __attribute__((always_inline, target("avx,avx2"))) void r1_x86_tr8(const float *src, size_t ss,
                                                                                 float *dst, size_t ds) {
    __m256 r0 = _mm256_loadu_ps(src), r1 = _mm256_loadu_ps(src + ss), r2 = _mm256_loadu_ps(src + 2 * ss),
           r3 = _mm256_loadu_ps(src + 3 * ss), r4 = _mm256_loadu_ps(src + 4 * ss), r5 = _mm256_loadu_ps(src + 5 * ss),
           r6 = _mm256_loadu_ps(src + 6 * ss), r7 = _mm256_loadu_ps(src + 7 * ss);
    __m256 t0 = _mm256_unpacklo_ps(r0, r1), t1 = _mm256_unpackhi_ps(r0, r1), t2 = _mm256_unpacklo_ps(r2, r3),
           t3 = _mm256_unpackhi_ps(r2, r3), t4 = _mm256_unpacklo_ps(r4, r5), t5 = _mm256_unpackhi_ps(r4, r5),
           t6 = _mm256_unpacklo_ps(r6, r7), t7 = _mm256_unpackhi_ps(r6, r7);
    __m256 u0 = _mm256_shuffle_ps(t0, t2, 0x44), u1 = _mm256_shuffle_ps(t0, t2, 0xee),
           u2 = _mm256_shuffle_ps(t1, t3, 0x44), u3 = _mm256_shuffle_ps(t1, t3, 0xee),
           u4 = _mm256_shuffle_ps(t4, t6, 0x44), u5 = _mm256_shuffle_ps(t4, t6, 0xee),
           u6 = _mm256_shuffle_ps(t5, t7, 0x44), u7 = _mm256_shuffle_ps(t5, t7, 0xee);
    _mm256_store_ps(dst + 0 * ds, _mm256_permute2f128_ps(u0, u4, 0x20));
    _mm256_store_ps(dst + 1 * ds, _mm256_permute2f128_ps(u1, u5, 0x20));
    _mm256_store_ps(dst + 2 * ds, _mm256_permute2f128_ps(u2, u6, 0x20));
    _mm256_store_ps(dst + 3 * ds, _mm256_permute2f128_ps(u3, u7, 0x20));
    _mm256_store_ps(dst + 4 * ds, _mm256_permute2f128_ps(u0, u4, 0x31));
    _mm256_store_ps(dst + 5 * ds, _mm256_permute2f128_ps(u1, u5, 0x31));
    _mm256_store_ps(dst + 6 * ds, _mm256_permute2f128_ps(u2, u6, 0x31));
    _mm256_store_ps(dst + 7 * ds, _mm256_permute2f128_ps(u3, u7, 0x31));
}
/* col[j] element i = row[i] element j: a 16 x 16 transpose of 32-bit
 * values in registers (unpacks within 128-bit lanes, then lane shuffles) */
static inline __attribute__((always_inline, target("avx512f"))) void r1_x86_transpose16(const __m512 *row,
                                                                                        __m512 *col) {
    __m512 t[16], u[16];
    for (int k = 0; k < 8; k++) {
        t[2 * k] = _mm512_unpacklo_ps(row[2 * k], row[2 * k + 1]);     /* per 128-bit lane: a0 b0 a1 b1 */
        t[2 * k + 1] = _mm512_unpackhi_ps(row[2 * k], row[2 * k + 1]); /* a2 b2 a3 b3 */
    }
    for (int g = 0; g < 4; g++) { /* rows 4g..4g+3: u[4g + c] holds their element c of each lane */
        u[4 * g + 0] = _mm512_shuffle_ps(t[4 * g], t[4 * g + 2], 0x44);
        u[4 * g + 1] = _mm512_shuffle_ps(t[4 * g], t[4 * g + 2], 0xEE);
        u[4 * g + 2] = _mm512_shuffle_ps(t[4 * g + 1], t[4 * g + 3], 0x44);
        u[4 * g + 3] = _mm512_shuffle_ps(t[4 * g + 1], t[4 * g + 3], 0xEE);
    }
    for (int c = 0; c < 4; c++) { /* columns c, 4 + c, 8 + c, 12 + c */
        const __m512 v = _mm512_shuffle_f32x4(u[c], u[4 + c], 0x88), w = _mm512_shuffle_f32x4(u[c], u[4 + c], 0xDD);
        const __m512 x = _mm512_shuffle_f32x4(u[8 + c], u[12 + c], 0x88),
                     y = _mm512_shuffle_f32x4(u[8 + c], u[12 + c], 0xDD);
        col[c] = _mm512_shuffle_f32x4(v, x, 0x88);
        col[8 + c] = _mm512_shuffle_f32x4(v, x, 0xDD);
        col[4 + c] = _mm512_shuffle_f32x4(w, y, 0x88);
        col[12 + c] = _mm512_shuffle_f32x4(w, y, 0xDD);
    }
}

/* the 32 bf16 of h as f32: *lo16 the first 16, *hi16 the last 16 */
static inline __attribute__((always_inline, target("avx512f,avx512bw"))) void r1_x86_bf16_widen(__m512i h, __m512 *lo16,
                                                                                                __m512 *hi16) {
    *lo16 = _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(_mm512_castsi512_si256(h)), 16));
    *hi16 = _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(_mm512_extracti64x4_epi64(h, 1)), 16));
}

/* f32 weights lo16 (columns 0..15) and hi16 (16..31) as 32 bf16 in two
 * parts: o = bf16(w) (round to nearest even), olo = bf16(w - that) */
static inline __attribute__((always_inline, target("avx512f,avx512bw,avx512bf16"))) void
r1_x86_bf16_split_store(__m512 lo16, __m512 hi16, uint16_t *o, uint16_t *olo) {
    __m512i h = (__m512i)_mm512_cvtne2ps_pbh(hi16, lo16);
    _mm512_storeu_si512(o, h);
    __m512 h0, h1;
    r1_x86_bf16_widen(h, &h0, &h1);
    _mm512_storeu_si512(olo, (__m512i)_mm512_cvtne2ps_pbh(_mm512_sub_ps(hi16, h1), _mm512_sub_ps(lo16, h0)));
}

/* The end of an AVX-512 tile: the 4 x NT zmm accumulators acc[r][t] summed
 * across lanes into out[t * R1_CPU_MR + r] for the nr rows and nt tokens
 * asked for (constant indices only, so acc stays in registers). The sums
 * share their shuffles: per token, unpack/shuffle adds leave each 128-bit
 * chunk holding the 4 rows' partial sums, then the chunks of the tokens are
 * transposed and added (about 10 ops per token instead of 4 full
 * reductions), one zmm of 16 sums in the order out wants. */
static inline __attribute__((always_inline, target("avx512f"))) __m512 r1_x86_sum4(__m512 a0, __m512 a1, __m512 a2,
                                                                                   __m512 a3) {
    __m512 t0 = _mm512_add_ps(_mm512_unpacklo_ps(a0, a1), _mm512_unpackhi_ps(a0, a1));
    __m512 t1 = _mm512_add_ps(_mm512_unpacklo_ps(a2, a3), _mm512_unpackhi_ps(a2, a3));
    return _mm512_add_ps(_mm512_shuffle_ps(t0, t1, _MM_SHUFFLE(1, 0, 1, 0)),
                         _mm512_shuffle_ps(t0, t1, _MM_SHUFFLE(3, 2, 3, 2)));
}
/* u[t]: chunk c lane r = a part of row r's sum of token t -> one zmm, lane
 * 4t + r = row r's sum of token t */
static inline __attribute__((always_inline, target("avx512f"))) __m512 r1_x86_sum_chunks(__m512 u0, __m512 u1,
                                                                                         __m512 u2, __m512 u3) {
    __m512 v01 = _mm512_add_ps(_mm512_shuffle_f32x4(u0, u1, _MM_SHUFFLE(1, 0, 1, 0)),
                               _mm512_shuffle_f32x4(u0, u1, _MM_SHUFFLE(3, 2, 3, 2)));
    __m512 v23 = _mm512_add_ps(_mm512_shuffle_f32x4(u2, u3, _MM_SHUFFLE(1, 0, 1, 0)),
                               _mm512_shuffle_f32x4(u2, u3, _MM_SHUFFLE(3, 2, 3, 2)));
    return _mm512_add_ps(_mm512_shuffle_f32x4(v01, v23, _MM_SHUFFLE(2, 0, 2, 0)),
                         _mm512_shuffle_f32x4(v01, v23, _MM_SHUFFLE(3, 1, 3, 1)));
}
/* cpu.h r1_cpu_tile_acc for a tile with sums acc[r][t], r < NR, t < NT
 * (vector r NT + t there): ACC_IN continues from the range before, ACC_OUT
 * leaves them for the next range and returns (before the tile's output)
 * unless this range ends the row. */
#define R1_X86_ACC_IN(NR, NT)                                                                                          \
    do {                                                                                                               \
        __m512 *s_ = (__m512 *)r1_cpu_tile_acc;                                                                        \
        if (s_ && k0 > 0)                                                                                              \
            _Pragma("GCC unroll 4") for (int r_ = 0; r_ < (NR); r_++)                                                  \
                _Pragma("GCC unroll 4") for (int t_ = 0; t_ < NT; t_++) acc[r_][t_] =                                  \
                    _mm512_load_ps((const float *)(s_ + r_ * (NT) + t_));                                              \
    } while (0)
#define R1_X86_ACC_OUT(NR, NT)                                                                                         \
    do {                                                                                                               \
        __m512 *s_ = (__m512 *)r1_cpu_tile_acc;                                                                        \
        if (s_ && k1 < K) {                                                                                            \
            _Pragma("GCC unroll 4") for (int r_ = 0; r_ < (NR); r_++)                                                  \
                _Pragma("GCC unroll 4") for (int t_ = 0; t_ < NT; t_++)                                                \
                    _mm512_store_ps((float *)(s_ + r_ * (NT) + t_), acc[r_][t_]);                                      \
            return;                                                                                                    \
        }                                                                                                              \
    } while (0)
#define R1_X86_TILE_OUT(NT)                                                                                            \
    do {                                                                                                               \
        if (NT == 1) { /* the same sums as below without the other tokens' zero chunks */                              \
            __m512 u_ = r1_x86_sum4(acc[0][0], acc[1][0], acc[2][0], acc[3][0]);                                       \
            __m256 hi_ = _mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(u_), 1));                            \
            __m256 h_ = _mm256_add_ps(_mm512_castps512_ps256(u_), hi_);                                                \
            __m128 q_ = _mm_add_ps(_mm256_castps256_ps128(h_), _mm256_extractf128_ps(h_, 1));                          \
            _mm512_mask_storeu_ps(out, (__mmask16)((1u << nr) - 1), _mm512_castps128_ps512(q_));                       \
            break;                                                                                                     \
        }                                                                                                              \
        __m512 u_[4];                                                                                                  \
        _Pragma("GCC unroll 4") for (int t_ = 0; t_ < 4; t_++) u_[t_] =                                                \
            t_ < NT ? r1_x86_sum4(acc[0][t_ < NT ? t_ : 0], acc[1][t_ < NT ? t_ : 0], acc[2][t_ < NT ? t_ : 0],        \
                                  acc[3][t_ < NT ? t_ : 0])                                                            \
                    : _mm512_setzero_ps();                                                                             \
        __m512 s_ = r1_x86_sum_chunks(u_[0], u_[1], u_[2], u_[3]);                                                     \
        /* lane 4t + r is out[t * R1_CPU_MR + r]: one masked store of the nr x nt sums */                              \
        _Static_assert(R1_CPU_MR == 4, "the tile sums' lanes are out's layout");                                       \
        const unsigned m_ = ((1u << nr) - 1) * (0x1111u & ((1u << 4 * nt) - 1));                                       \
        _mm512_mask_storeu_ps(out, (__mmask16)m_, s_);                                                                 \
    } while (0)

#endif
