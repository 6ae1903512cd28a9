/*
 * avx512.c - the AVX-512 table of the cpu backend (F, BW, VL, DQ and VNNI:
 * Ice Lake, Sapphire Rapids, Zen 4 and later). Tiles of 4 weight rows x up
 * to 4 tokens in zmm registers: f32/f16 weights against f32 activations
 * with masked tails, bf16 ones against f32 activations in f32eo32 order
 * (cpu.h; one shift or AND per 16 weights), q8_0/q4_0 weights against q8 activations
 * two blocks per zmm with vpdpbusd (sign trick; with AVX512-VBMI, one masked
 * load and byte/word permutes per block pair, q4_0 on unsigned nibbles).
 * Batches (prefill) take the same tiles over column slices, and the
 * K-quant x8 layouts an f32 panel GEMM (gemm_avx512.c); the AMX sets
 * (amx_blocks.h) are this table with AMX blocks for batches. VBMI and GFNI
 * are checked at run time (r1_cpu_set_features turns them off for tests).
 * CPUs with AVX-512 but no VNNI use the AVX2 table. Target
 * attributes only, never -mavx512f.
 */
#include "kernels/cpu/cpu.h"
#include "kernels/cpu/kquants.h"

#if defined(__x86_64__)
#include <immintrin.h>

#include "kernels/cpu/x86/x86.h"
#include <cpuid.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "util/util.h"

#define TGT_S "avx512f,avx512bw,avx512vl,avx512dq,avx512vnni,avx2,fma,f16c"
#define TGT __attribute__((target(TGT_S)))
#define INL static inline __attribute__((always_inline, target(TGT_S)))

static int has_vbmi; /* set by avx512_available: the VBMI quant tiles */
static int has_gfni; /* with VBMI: q4_0 high nibbles by one vgf2p8affineqb */
static int has_vbmi_cpu(void);

static int avx512_available(void) {
    __builtin_cpu_init();
    has_vbmi = has_vbmi_cpu();
    has_gfni = __builtin_cpu_supports("gfni") && r1_cpu_tuning.gfni;
    return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
           __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512dq") &&
           __builtin_cpu_supports("avx512vnni") && __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") &&
           r1_x86_has_f16c();
}
static int has_vbmi_cpu(void) { return __builtin_cpu_supports("avx512vbmi") && r1_cpu_tuning.vbmi; }

/* ---- float weights: 16 weights of row p from column k (lanes outside m are 0) ---- */
INL __m512 ld_f32(const uint8_t *p, int k, __mmask16 m) { return _mm512_maskz_loadu_ps(m, (const float *)p + k); }
INL __m512 ld_f16(const uint8_t *p, int k, __mmask16 m) {
    return _mm512_cvtph_ps(_mm256_maskz_loadu_epi16(m, (const uint16_t *)p + k));
}
INL __m512 ld_bf16(const uint8_t *p, int k, __mmask16 m) {
    __m512i v = _mm512_cvtepu16_epi32(_mm256_maskz_loadu_epi16(m, (const uint16_t *)p + k));
    return _mm512_castsi512_ps(_mm512_slli_epi32(v, 16));
}

/* Decode (and a small batch, rows outer) streams 4 rows at a time, too
 * short for the hardware prefetcher to ramp up: fetch the same bytes of the
 * next 4 rows ahead, except on rows a call has just brought in. */
#define PF_NEXT(PF, OFF)                                                                                               \
    do {                                                                                                               \
        if (PF) { /* 0 when the rows are in cache (r1_cpu_tile_prefetch) */                                            \
            _mm_prefetch((const char *)(w0 + 4 * ws + (OFF)), _MM_HINT_T0);                                            \
            _mm_prefetch((const char *)(w1 + 4 * ws + (OFF)), _MM_HINT_T0);                                            \
            _mm_prefetch((const char *)(w2 + 4 * ws + (OFF)), _MM_HINT_T0);                                            \
            _mm_prefetch((const char *)(w3 + 4 * ws + (OFF)), _MM_HINT_T0);                                            \
        }                                                                                                              \
    } while (0)

#define SETUP_PTRS(NT, XT_TYPE)                                                                                        \
    const uint8_t *w0 = w, *w1 = w + (nr > 1 ? ws : 0), *w2 = w + (nr > 2 ? 2 * ws : 0),                               \
                  *w3 = w + (nr > 3 ? 3 * ws : 0);                                                                     \
    XT_TYPE xt[NT];                                                                                                    \
    for (int t = 0; t < NT; t++) xt[t] = (XT_TYPE)(x + (size_t)(t < nt ? t : 0) * xs);

#define FSTEP(NR, NT, LD, M, PF)                                                                                       \
    do {                                                                                                               \
        if (NR == 1) { /* one row (cpu.h r1_cpu_tuning.row1): pfa bytes on in its stream */                            \
            if (PF) _mm_prefetch((const char *)(w0 + pfa + (size_t)k * es), _MM_HINT_T0);                              \
        } else {                                                                                                       \
            PF_NEXT(PF, (size_t)k *es);                                                                                \
        }                                                                                                              \
        __m512 a[4];                                                                                                   \
        _Pragma("GCC unroll 4") for (int r = 0; r < NR; r++) a[r] = LD(wr_[r], k, M);                                  \
        _Pragma("GCC unroll 4") for (int t = 0; t < NT; t++) {                                                         \
            __m512 xv = _mm512_maskz_loadu_ps(M, xt[t] + k);                                                           \
            _Pragma("GCC unroll 4") for (int r = 0; r < NR; r++) acc[r][t] = _mm512_fmadd_ps(a[r], xv, acc[r][t]);     \
        }                                                                                                              \
    } while (0)

/* Columns [k0, k1) in steps of W (STEP sees its mask as M_ and whether to
 * prefetch as PF_): whole steps with the rows ahead prefetched unless they
 * are in cache (r1_cpu_tile_prefetch), then the K % W tail under a mask. */
#define K_STEPS(W, MT, STEP)                                                                                           \
    int k = k0;                                                                                                        \
    if (r1_cpu_tile_prefetch) {                                                                                        \
        const int PF_ = 1;                                                                                             \
        const MT M_ = (MT)-1;                                                                                          \
        for (; k + (W) <= k1; k += (W)) STEP;                                                                          \
    } else {                                                                                                           \
        const int PF_ = 0;                                                                                             \
        const MT M_ = (MT)-1;                                                                                          \
        for (; k + (W) <= k1; k += (W)) STEP;                                                                          \
    }                                                                                                                  \
    if (k < k1) {                                                                                                      \
        const int PF_ = 1;                                                                                             \
        const MT M_ = (MT)((1u << (k1 - k)) - 1);                                                                      \
        STEP;                                                                                                          \
    }

/* NR rows (4, or 1 for cpu.h r1_cpu_tuning.row1: each row's sums are its
 * own, so the same bits) x NT tokens */
#define FTILE(NAME, NR, NT, LD)                                                                                        \
    static TGT void NAME(int K, int k0, int k1, const uint8_t *w, size_t ws, int nr, const uint8_t *x, size_t xs,      \
                         int nt, float *out) {                                                                         \
        SETUP_PTRS(NT, const float *)                                                                                  \
        const uint8_t *wr_[4] = {w0, w1, w2, w3};                                                                      \
        const size_t pfa = r1_cpu_tuning.row_pf > 0 ? (size_t)r1_cpu_tuning.row_pf : 4 * ws; /* cpu.h */               \
        const size_t es = ws / (size_t)K;                                                    /* bytes per weight */    \
        __m512 acc[4][NT];                                                                                             \
        _Pragma("GCC unroll 4") for (int r = 0; r < 4; r++) _Pragma("GCC unroll 4") for (int t = 0; t < NT; t++)       \
            acc[r][t] = _mm512_setzero_ps();                                                                           \
        K_STEPS(16, __mmask16, FSTEP(NR, NT, LD, M_, PF_));                                                            \
        R1_X86_TILE_OUT(NT);                                                                                           \
    }

/* One token: a row at a time (cpu.h r1_cpu_tuning.row1), or 4 rows */
#define DISPATCH(NAME)                                                                                                 \
    static void NAME(int K, int k0, int k1, const uint8_t *w, size_t ws, int nr, const uint8_t *x, size_t xs, int nt,  \
                     float *out) {                                                                                     \
        if (nt == 1 && r1_cpu_tuning.row1 && r1_cpu_row1_fits(xs))                                                     \
            r1_cpu_tile_by_row(NAME##_1r, K, k0, k1, w, ws, nr, x, xs, nt, out);                                       \
        else if (nt == 1) NAME##_1(K, k0, k1, w, ws, nr, x, xs, nt, out);                                              \
        else NAME##_4(K, k0, k1, w, ws, nr, x, xs, nt, out);                                                           \
    }

FTILE(tile_f32_1, 4, 1, ld_f32)
FTILE(tile_f32_1r, 1, 1, ld_f32)
FTILE(tile_f32_4, 4, 4, ld_f32)
DISPATCH(tile_f32)
FTILE(tile_f16_1, 4, 1, ld_f16)
FTILE(tile_f16_1r, 1, 1, ld_f16)
FTILE(tile_f16_4, 4, 4, ld_f16)
DISPATCH(tile_f16)
/* ---- bf16 weights against f32eo32 activations (cpu.h R1_CPU_ACT_F32EO32),
 * decode and small batches: a 64-byte load of 32 weights of a row holds the
 * even columns in the high halves of its dwords once shifted left by 16 and
 * the odd ones in place once ANDed with 0xffff0000, so each 16 weights cost
 * one in-lane op instead of a cross-lane vpmovzxwd and a shift (widening
 * would take about half of a small batch's time). Both tiles
 * (1 and 4 tokens) add the same products in the same order, so a batch row
 * is bit for bit the decode step's. The activations past K are zero and so
 * are the masked-off weights. ---- */
#define EOSTEP(NR, NT, M, PF)                                                                                          \
    do {                                                                                                               \
        if (NR == 1) { /* one row (cpu.h r1_cpu_tuning.row1): pfa bytes on in its stream */                            \
            if (PF) _mm_prefetch((const char *)(w0 + pfa + (size_t)k * 2), _MM_HINT_T0);                               \
        } else {                                                                                                       \
            PF_NEXT(PF, (size_t)k * 2);                                                                                \
        }                                                                                                              \
        __m512 e[4], o[4];                                                                                             \
        _Pragma("GCC unroll 4") for (int r = 0; r < NR; r++) {                                                         \
            __m512i d = _mm512_maskz_loadu_epi16(M, (const uint16_t *)wr_[r] + k);                                     \
            e[r] = _mm512_castsi512_ps(_mm512_slli_epi32(d, 16));                                                      \
            o[r] = _mm512_castsi512_ps(_mm512_and_si512(d, hi16));                                                     \
        }                                                                                                              \
        _Pragma("GCC unroll 4") for (int t = 0; t < NT; t++) {                                                         \
            __m512 xe = _mm512_loadu_ps(xt[t] + k), xo = _mm512_loadu_ps(xt[t] + k + 16);                              \
            _Pragma("GCC unroll 4") for (int r = 0; r < NR; r++) acc[r][t] =                                           \
                _mm512_fmadd_ps(o[r], xo, _mm512_fmadd_ps(e[r], xe, acc[r][t]));                                       \
        }                                                                                                              \
    } while (0)

/* NR rows (4, or 1 for cpu.h r1_cpu_tuning.row1) x NT tokens; each row's
 * products in the same order whatever NR, so the same bits. The one-row
 * form runs only where nothing is carried (cpu.c carries in batches). */
#define EOTILE(NAME, NR, NT)                                                                                           \
    static TGT void NAME(int K, int k0, int k1, const uint8_t *w, size_t ws, int nr, const uint8_t *x, size_t xs,      \
                         int nt, float *out) {                                                                         \
        SETUP_PTRS(NT, const float *)                                                                                  \
        const uint8_t *wr_[4] = {w0, w1, w2, w3};                                                                      \
        const size_t pfa = r1_cpu_tuning.row_pf > 0 ? (size_t)r1_cpu_tuning.row_pf : 4 * ws; /* cpu.h */               \
        const __m512i hi16 = _mm512_set1_epi32((int)0xffff0000u);                                                      \
        __m512 acc[4][NT];                                                                                             \
        _Pragma("GCC unroll 4") for (int r = 0; r < 4; r++) _Pragma("GCC unroll 4") for (int t = 0; t < NT; t++)       \
            acc[r][t] = _mm512_setzero_ps();                                                                           \
        R1_X86_ACC_IN(NR, NT);                                                                                         \
        K_STEPS(32, __mmask32, EOSTEP(NR, NT, M_, PF_));                                                               \
        R1_X86_ACC_OUT(NR, NT);                                                                                        \
        R1_X86_TILE_OUT(NT);                                                                                           \
    }

EOTILE(tile_bf16_1, 4, 1)
EOTILE(tile_bf16_4, 4, 4)
EOTILE(tile_bf16_1r, 1, 1)
static void tile_bf16(int K, int k0, int k1, const uint8_t *w, size_t ws, int nr, const uint8_t *x, size_t xs, int nt,
                      float *out) {
    if (nt == 1 && r1_cpu_tuning.row1 && !r1_cpu_tile_acc && r1_cpu_row1_fits(xs))
        r1_cpu_tile_by_row(tile_bf16_1r, K, k0, k1, w, ws, nr, x, xs, nt, out);
    else if (nt == 1) tile_bf16_1(K, k0, k1, w, ws, nr, x, xs, nt, out);
    else tile_bf16_4(K, k0, k1, w, ws, nr, x, xs, nt, out);
}

/* ---- quantized weights: blocks b and b+1 (b+1 only if two) of a row as 64
 * signed bytes, and their scales as 8 lanes each ---- */
INL __m512 scales2(float da, float db) {
    __m256 a = _mm256_set1_ps(da), b = _mm256_set1_ps(db);
    return _mm512_insertf32x8(_mm512_castps256_ps512(a), b, 1);
}
INL __m512i lq_q8_0(const uint8_t *p, int b, int two, __m512 *dv) {
    const uint8_t *blk = p + (size_t)b * sizeof(struct r1_block_q8_0);
    __m256i lo = _mm256_loadu_si256((const __m256i *)(blk + 2));
    float da = _cvtsh_ss(*(const uint16_t *)blk);
    if (!two) {
        *dv = scales2(da, 0.0f);
        return _mm512_zextsi256_si512(lo);
    }
    const uint8_t *nb = blk + sizeof(struct r1_block_q8_0);
    *dv = scales2(da, _cvtsh_ss(*(const uint16_t *)nb));
    return _mm512_inserti64x4(_mm512_castsi256_si512(lo), _mm256_loadu_si256((const __m256i *)(nb + 2)), 1);
}
INL __m512i lq_q4_0(const uint8_t *p, int b, int two, __m512 *dv) {
    const uint8_t *blk = p + (size_t)b * sizeof(struct r1_block_q4_0);
    const uint8_t *nb = blk + sizeof(struct r1_block_q4_0);
    __m128i qa = _mm_loadu_si128((const __m128i *)(blk + 2));
    __m128i qb = two ? _mm_loadu_si128((const __m128i *)(nb + 2)) : _mm_set1_epi8((char)0x88);
    float da = _cvtsh_ss(*(const uint16_t *)blk);
    *dv = scales2(da, two ? _cvtsh_ss(*(const uint16_t *)nb) : 0.0f);
    __m256i v = _mm256_set_m128i(qb, qa);
    __m512i z = _mm512_inserti64x4(_mm512_castsi256_si512(v), _mm256_srli_epi16(v, 4), 1);
    z = _mm512_shuffle_i64x2(z, z, _MM_SHUFFLE(3, 1, 2, 0)); /* qa, qa>>4, qb, qb>>4 */
    z = _mm512_and_si512(z, _mm512_set1_epi8(0x0f));
    return _mm512_sub_epi8(z, _mm512_set1_epi8(8));
}

/* Activations of blocks b, b+1 of token p: 64 bytes (upper 32 zero unless two)
 * and the two scales as 8 lanes each. */
INL __m512i lx(const uint8_t *p, size_t qoff, int b, int two, __m512 *dv) {
    const float *d = (const float *)p;
    const uint8_t *q = p + qoff + (size_t)b * 32;
    if (two) {
        *dv = scales2(d[b], d[b + 1]);
        return _mm512_loadu_si512(q);
    }
    *dv = scales2(d[b], 0.0f);
    return _mm512_zextsi256_si512(_mm256_loadu_si256((const __m256i *)q));
}

#define QSTEP(NT, LQ, TWO)                                                                                             \
    do {                                                                                                               \
        __m512 d0, d1, d2, d3;                                                                                         \
        PF_NEXT(NT, (size_t)b *bs);                                                                                    \
        PF_NEXT(NT, (size_t)b *bs + 64);                                                                               \
        __m512i q0 = LQ(w0, b, TWO, &d0), q1 = LQ(w1, b, TWO, &d1), q2 = LQ(w2, b, TWO, &d2),                          \
                q3 = LQ(w3, b, TWO, &d3);                                                                              \
        _Pragma("GCC unroll 4") for (int t = 0; t < NT; t++) {                                                         \
            __m512 dx;                                                                                                 \
            __m512i xq = lx(xt[t], qoff, b, TWO, &dx);                                                                 \
            __mmask64 neg = _mm512_movepi8_mask(xq);                                                                   \
            __m512i ax = _mm512_abs_epi8(xq), z = _mm512_setzero_si512();                                              \
            acc[0][t] =                                                                                                \
                _mm512_fmadd_ps(_mm512_cvtepi32_ps(_mm512_dpbusd_epi32(z, ax, _mm512_mask_sub_epi8(q0, neg, z, q0))),  \
                                _mm512_mul_ps(d0, dx), acc[0][t]);                                                     \
            acc[1][t] =                                                                                                \
                _mm512_fmadd_ps(_mm512_cvtepi32_ps(_mm512_dpbusd_epi32(z, ax, _mm512_mask_sub_epi8(q1, neg, z, q1))),  \
                                _mm512_mul_ps(d1, dx), acc[1][t]);                                                     \
            acc[2][t] =                                                                                                \
                _mm512_fmadd_ps(_mm512_cvtepi32_ps(_mm512_dpbusd_epi32(z, ax, _mm512_mask_sub_epi8(q2, neg, z, q2))),  \
                                _mm512_mul_ps(d2, dx), acc[2][t]);                                                     \
            acc[3][t] =                                                                                                \
                _mm512_fmadd_ps(_mm512_cvtepi32_ps(_mm512_dpbusd_epi32(z, ax, _mm512_mask_sub_epi8(q3, neg, z, q3))),  \
                                _mm512_mul_ps(d3, dx), acc[3][t]);                                                     \
        }                                                                                                              \
    } while (0)

#define QTILE(NAME, NT, LQ)                                                                                            \
    static TGT void NAME(int K, int k0, int k1, const uint8_t *w, size_t ws, int nr, const uint8_t *x, size_t xs,      \
                         int nt, float *out) {                                                                         \
        SETUP_PTRS(NT, const uint8_t *)                                                                                \
        const size_t qoff = r1_cpu_q8_qoff(K);                                                                         \
        const size_t bs = ws / (size_t)(K / 32); /* bytes per weight block */                                          \
        const int nb = k1 / 32;                                                                                        \
        __m512 acc[4][NT];                                                                                             \
        _Pragma("GCC unroll 4") for (int r = 0; r < 4; r++) _Pragma("GCC unroll 4") for (int t = 0; t < NT; t++)       \
            acc[r][t] = _mm512_setzero_ps();                                                                           \
        int b = k0 / 32;                                                                                               \
        for (; b + 2 <= nb; b += 2) QSTEP(NT, LQ, 1);                                                                  \
        if (b < nb) QSTEP(NT, LQ, 0);                                                                                  \
        R1_X86_TILE_OUT(NT);                                                                                           \
    }

QTILE(tile_q8_0_1_pre, 1, lq_q8_0)
QTILE(tile_q8_0_2_pre, 2, lq_q8_0)
QTILE(tile_q8_0_4_pre, 4, lq_q8_0)
QTILE(tile_q4_0_1_pre, 1, lq_q4_0)
QTILE(tile_q4_0_2_pre, 2, lq_q4_0)
QTILE(tile_q4_0_4_pre, 4, lq_q4_0)

/* ---- AVX512-VBMI tiles (Ice Lake, Sapphire Rapids, Zen 4): one masked load
 * of a block pair per row, then byte/word permutes put the quants in place
 * and spread the two f16 scales over 8 lanes each, instead of scalar scale
 * conversions and broadcasts. q4_0 multiplies the unsigned nibbles (0..15)
 * by the signed activations with vpdpbusd, the accumulator starting at
 * -8 * (sum of the activations of each lane), so no per-row sign work. ---- */
#define TGT_V TGT_S ",avx512vbmi"
#define TGTV __attribute__((target(TGT_V)))
#define INLV static inline __attribute__((always_inline, target(TGT_V)))

/* bytes b of a pair of q4_0 blocks (18 bytes each) -> [qa qa qb qb] */
INLV __m512i idx_q4(void) {
    return _mm512_set_epi8(35, 34, 33, 32, 31, 30, 29, 28, 27, 26, 25, 24, 23, 22, 21, 20, /**/
                           35, 34, 33, 32, 31, 30, 29, 28, 27, 26, 25, 24, 23, 22, 21, 20, /**/
                           17, 16, 15, 14, 13, 12, 11, 10, 9, 8, 7, 6, 5, 4, 3, 2,         /**/
                           17, 16, 15, 14, 13, 12, 11, 10, 9, 8, 7, 6, 5, 4, 3, 2);
}
/* bytes of a pair of q8_0 blocks (34 bytes each, 68 in two registers) -> [qa qb] */
INLV __m512i idx_q8(void) {
    return _mm512_set_epi8(67, 66, 65, 64, 63, 62, 61, 60, 59, 58, 57, 56, 55, 54, 53, 52, /**/
                           51, 50, 49, 48, 47, 46, 45, 44, 43, 42, 41, 40, 39, 38, 37, 36, /**/
                           33, 32, 31, 30, 29, 28, 27, 26, 25, 24, 23, 22, 21, 20, 19, 18, /**/
                           17, 16, 15, 14, 13, 12, 11, 10, 9, 8, 7, 6, 5, 4, 3, 2);
}
/* word w of the scales of a block pair: da x8, db x8 (word 9 for q4_0, 17 for q8_0) */
INLV __m512i idx_d(int wb) {
    return _mm512_set_epi16(0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, (short)wb, (short)wb, (short)wb, (short)wb,
                            (short)wb, (short)wb, (short)wb, (short)wb, 0, 0, 0, 0, 0, 0, 0, 0);
}

INLV __m512 dx_pair(const uint8_t *p, int b, int two) {
    const __m512i sel = _mm512_set_epi32(1, 1, 1, 1, 1, 1, 1, 1, 0, 0, 0, 0, 0, 0, 0, 0);
    __m128 d = _mm_maskz_loadu_ps(two ? 3 : 1, (const float *)p + b);
    return _mm512_permutexvar_ps(sel, _mm512_castps128_ps512(d));
}

#define VQ4ROW(NT, R, WP)                                                                                              \
    do {                                                                                                               \
        __m512i raw = _mm512_maskz_loadu_epi8(m, (WP) + (size_t)b * 18);                                               \
        __m512i q = _mm512_permutexvar_epi8(iq, raw);                                                                  \
        q = _mm512_and_si512(_mm512_mask_srli_epi16(q, 0xFF00FF00u, q, 4), lo4);                                       \
        __m512 dw = _mm512_cvtph_ps(_mm512_castsi512_si256(_mm512_permutexvar_epi16(id, raw)));                        \
        _Pragma("GCC unroll 4") for (int t = 0; t < NT; t++) acc[R][t] = _mm512_fmadd_ps(                              \
            _mm512_cvtepi32_ps(_mm512_dpbusd_epi32(nx[t], q, xq[t])), _mm512_mul_ps(dw, dx[t]), acc[R][t]);            \
    } while (0)

#define VQ4STEP(NT, TWO)                                                                                               \
    do {                                                                                                               \
        const __mmask64 m = TWO ? 0xFFFFFFFFFull : 0x3FFFFull;                                                         \
        PF_NEXT(NT, (size_t)b * 18 + 64); /* 36 bytes a step: each line about twice */                                 \
        __m512i xq[NT], nx[NT];                                                                                        \
        __m512 dx[NT];                                                                                                 \
        _Pragma("GCC unroll 4") for (int t = 0; t < NT; t++) {                                                         \
            __m512 unused;                                                                                             \
            xq[t] = lx(xt[t], qoff, b, TWO, &unused);                                                                  \
            dx[t] = dx_pair(xt[t], b, TWO);                                                                            \
            nx[t] =                                                                                                    \
                _mm512_sub_epi32(_mm512_setzero_si512(), _mm512_dpbusd_epi32(_mm512_setzero_si512(), eight, xq[t]));   \
        }                                                                                                              \
        VQ4ROW(NT, 0, w0);                                                                                             \
        VQ4ROW(NT, 1, w1);                                                                                             \
        VQ4ROW(NT, 2, w2);                                                                                             \
        VQ4ROW(NT, 3, w3);                                                                                             \
    } while (0)

#define VQ8ROW(NT, R, WP)                                                                                              \
    do {                                                                                                               \
        const uint8_t *bp = (WP) + (size_t)b * 34;                                                                     \
        __m512i raw = _mm512_maskz_loadu_epi8(m0, bp);                                                                 \
        __m512i q = _mm512_permutex2var_epi8(raw, iq, _mm512_maskz_loadu_epi8(m1, bp + 64));                           \
        __m512 dw = _mm512_cvtph_ps(_mm512_castsi512_si256(_mm512_permutexvar_epi16(id, raw)));                        \
        _Pragma("GCC unroll 4") for (int t = 0; t < NT; t++) acc[R][t] = _mm512_fmadd_ps(                              \
            _mm512_cvtepi32_ps(_mm512_dpbusd_epi32(_mm512_setzero_si512(), ax[t],                                      \
                                                   _mm512_mask_sub_epi8(q, neg[t], _mm512_setzero_si512(), q))),       \
            _mm512_mul_ps(dw, dx[t]), acc[R][t]);                                                                      \
    } while (0)

#define VQ8STEP(NT, TWO)                                                                                               \
    do {                                                                                                               \
        const __mmask64 m0 = TWO ? ~0ull : 0x3FFFFFFFFull, m1 = TWO ? 0xFull : 0;                                      \
        PF_NEXT(NT, (size_t)b * 34);                                                                                   \
        PF_NEXT(NT, (size_t)b * 34 + 64);                                                                              \
        __m512i ax[NT];                                                                                                \
        __mmask64 neg[NT];                                                                                             \
        __m512 dx[NT];                                                                                                 \
        _Pragma("GCC unroll 4") for (int t = 0; t < NT; t++) {                                                         \
            __m512 unused;                                                                                             \
            __m512i xq = lx(xt[t], qoff, b, TWO, &unused);                                                             \
            dx[t] = dx_pair(xt[t], b, TWO);                                                                            \
            neg[t] = _mm512_movepi8_mask(xq);                                                                          \
            ax[t] = _mm512_abs_epi8(xq);                                                                               \
        }                                                                                                              \
        VQ8ROW(NT, 0, w0);                                                                                             \
        VQ8ROW(NT, 1, w1);                                                                                             \
        VQ8ROW(NT, 2, w2);                                                                                             \
        VQ8ROW(NT, 3, w3);                                                                                             \
    } while (0)

#define VQTILE(NAME, NT, STEP, IDXQ, WB)                                                                               \
    static TGTV void NAME(int K, int k0, int k1, const uint8_t *w, size_t ws, int nr, const uint8_t *x, size_t xs,     \
                          int nt, float *out) {                                                                        \
        SETUP_PTRS(NT, const uint8_t *)                                                                                \
        const size_t qoff = r1_cpu_q8_qoff(K);                                                                         \
        const int nb = k1 / 32;                                                                                        \
        const __m512i iq = IDXQ(), id = idx_d(WB);                                                                     \
        const __m512i lo4 = _mm512_set1_epi8(0x0f), eight = _mm512_set1_epi8(8);                                       \
        (void)lo4, (void)eight;                                                                                        \
        __m512 acc[4][NT];                                                                                             \
        _Pragma("GCC unroll 4") for (int r = 0; r < 4; r++) _Pragma("GCC unroll 4") for (int t = 0; t < NT; t++)       \
            acc[r][t] = _mm512_setzero_ps();                                                                           \
        int b = k0 / 32;                                                                                               \
        for (; b + 2 <= nb; b += 2) STEP(NT, 1);                                                                       \
        if (b < nb) STEP(NT, 0);                                                                                       \
        R1_X86_TILE_OUT(NT);                                                                                           \
    }

VQTILE(tile_q8_0_1_vbmi, 1, VQ8STEP, idx_q8, 17)
VQTILE(tile_q8_0_2_vbmi, 2, VQ8STEP, idx_q8, 17)
VQTILE(tile_q8_0_4_vbmi, 4, VQ8STEP, idx_q8, 17)

/* q4_0, four blocks (72 bytes) of a row per step: one vpermt2b puts the 64
 * nibble bytes in place [qa qb qc qd], low nibbles meet the activations'
 * first halves [xa0..15 xb0..15 ...], high nibbles the second halves (the
 * activations are permuted once a step for all 4 rows); lane group k (4
 * lanes) holds block k. The 16 f16 scales of the 4 rows x 4 blocks take two
 * vpermt2w and one vcvtph2ps a step, then one vpermps per row spreads them.
 * Exact integers per block; the float sums differ in order from VQ4STEP. */
INLV __m512i idx_q4x4(void) {
    return _mm512_set_epi8(71, 70, 69, 68, 67, 66, 65, 64, 63, 62, 61, 60, 59, 58, 57, 56, /**/
                           53, 52, 51, 50, 49, 48, 47, 46, 45, 44, 43, 42, 41, 40, 39, 38, /**/
                           35, 34, 33, 32, 31, 30, 29, 28, 27, 26, 25, 24, 23, 22, 21, 20, /**/
                           17, 16, 15, 14, 13, 12, 11, 10, 9, 8, 7, 6, 5, 4, 3, 2);
}
/* activations of 4 blocks (128 bytes in two registers): first (H=0) or second
 * (H=16) 16 of each block */
#define IDX_X4(H)                                                                                                      \
    _mm512_set_epi8(111 + H, 110 + H, 109 + H, 108 + H, 107 + H, 106 + H, 105 + H, 104 + H, 103 + H, 102 + H, 101 + H, \
                    100 + H, 99 + H, 98 + H, 97 + H, 96 + H, 79 + H, 78 + H, 77 + H, 76 + H, 75 + H, 74 + H, 73 + H,   \
                    72 + H, 71 + H, 70 + H, 69 + H, 68 + H, 67 + H, 66 + H, 65 + H, 64 + H, 47 + H, 46 + H, 45 + H,    \
                    44 + H, 43 + H, 42 + H, 41 + H, 40 + H, 39 + H, 38 + H, 37 + H, 36 + H, 35 + H, 34 + H, 33 + H,    \
                    32 + H, 15 + H, 14 + H, 13 + H, 12 + H, 11 + H, 10 + H, 9 + H, 8 + H, 7 + H, 6 + H, 5 + H, 4 + H,  \
                    3 + H, 2 + H, 1 + H, 0 + H)
#define VQ4ROW4(NT, HI, R, WP)                                                                                         \
    const uint8_t *bp##R = (WP) + (size_t)b * 18;                                                                      \
    __m512i raw##R = _mm512_loadu_si512(bp##R), di##R[NT];                                                             \
    do {                                                                                                               \
        __m512i q = _mm512_permutex2var_epi8(raw##R, iq4, _mm512_maskz_loadu_epi8(0xFF, bp##R + 64));                  \
        __m512i lo = _mm512_and_si512(q, lo4), hi = HI(q);                                                             \
        _Pragma("GCC unroll 4") for (int t = 0; t < NT; t++) di##R[t] =                                                \
            _mm512_dpbusd_epi32(_mm512_dpbusd_epi32(nx[t], lo, xl[t]), hi, xh[t]);                                     \
    } while (0)

/* the 16 scales of 4 rows x 4 blocks with one vcvtph2ps, times the
 * activation scales, then spread to each row's 4-lane groups */
#define VQ4FMA(NT, R)                                                                                                  \
    _Pragma("GCC unroll 4") for (int t = 0; t < NT; t++) acc[R][t] =                                                   \
        _mm512_fmadd_ps(_mm512_cvtepi32_ps(di##R[t]), _mm512_permutexvar_ps(isp##R, sc[t]), acc[R][t])

#define VQ4STEP4(NT, HI)                                                                                               \
    do {                                                                                                               \
        PF_NEXT(NT, (size_t)b * 18);                                                                                   \
        PF_NEXT(NT, (size_t)b * 18 + 64);                                                                              \
        __m512i xl[NT], xh[NT], nx[NT];                                                                                \
        __m512 sc[NT];                                                                                                 \
        _Pragma("GCC unroll 4") for (int t = 0; t < NT; t++) {                                                         \
            const uint8_t *xq = xt[t] + qoff + (size_t)b * 32;                                                         \
            __m512i x0 = _mm512_loadu_si512(xq), x1 = _mm512_loadu_si512(xq + 64);                                     \
            xl[t] = _mm512_permutex2var_epi8(x0, ixl, x1);                                                             \
            xh[t] = _mm512_permutex2var_epi8(x0, ixh, x1);                                                             \
            nx[t] = _mm512_sub_epi32(                                                                                  \
                _mm512_setzero_si512(),                                                                                \
                _mm512_dpbusd_epi32(_mm512_dpbusd_epi32(_mm512_setzero_si512(), eight, xl[t]), eight, xh[t]));         \
        }                                                                                                              \
        VQ4ROW4(NT, HI, 0, w0);                                                                                        \
        VQ4ROW4(NT, HI, 1, w1);                                                                                        \
        VQ4ROW4(NT, HI, 2, w2);                                                                                        \
        VQ4ROW4(NT, HI, 3, w3);                                                                                        \
        __m512i s4 = _mm512_mask_mov_epi16(_mm512_permutex2var_epi16(raw0, is01, raw1), 0xFF00,                        \
                                           _mm512_permutex2var_epi16(raw2, is23, raw3));                               \
        __m512 dw = _mm512_cvtph_ps(_mm512_castsi512_si256(s4));                                                       \
        _Pragma("GCC unroll 4") for (int t = 0; t < NT; t++) sc[t] =                                                   \
            _mm512_mul_ps(dw, _mm512_broadcast_f32x4(_mm_loadu_ps((const float *)xt[t] + b)));                         \
        VQ4FMA(NT, 0);                                                                                                 \
        VQ4FMA(NT, 1);                                                                                                 \
        VQ4FMA(NT, 2);                                                                                                 \
        VQ4FMA(NT, 3);                                                                                                 \
    } while (0)

#define VQ4TILE(NAME, NT, HI, T)                                                                                       \
    static T void NAME(int K, int k0, int k1, const uint8_t *w, size_t ws, int nr, const uint8_t *x, size_t xs,        \
                       int nt, float *out) {                                                                           \
        SETUP_PTRS(NT, const uint8_t *)                                                                                \
        const size_t qoff = r1_cpu_q8_qoff(K);                                                                         \
        const int nb = k1 / 32;                                                                                        \
        const __m512i iq = idx_q4(), id = idx_d(9), iq4 = idx_q4x4();                                                  \
        const __m512i ixl = IDX_X4(0), ixh = IDX_X4(16);                                                               \
        const __m512i is01 = _mm512_set_epi16(0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,  \
                                              59, 50, 41, 32, 27, 18, 9, 0);                                           \
        const __m512i is23 = _mm512_set_epi16(0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 59, 50, 41, 32, 27, 18,  \
                                              9, 0, 0, 0, 0, 0, 0, 0, 0, 0);                                           \
        const __m512i isp0 = _mm512_set_epi32(3, 3, 3, 3, 2, 2, 2, 2, 1, 1, 1, 1, 0, 0, 0, 0);                         \
        const __m512i isp1 = _mm512_add_epi32(isp0, _mm512_set1_epi32(4));                                             \
        const __m512i isp2 = _mm512_add_epi32(isp0, _mm512_set1_epi32(8));                                             \
        const __m512i isp3 = _mm512_add_epi32(isp0, _mm512_set1_epi32(12));                                            \
        const __m512i lo4 = _mm512_set1_epi8(0x0f), eight = _mm512_set1_epi8(8);                                       \
        __m512 acc[4][NT];                                                                                             \
        _Pragma("GCC unroll 4") for (int r = 0; r < 4; r++) _Pragma("GCC unroll 4") for (int t = 0; t < NT; t++)       \
            acc[r][t] = _mm512_setzero_ps();                                                                           \
        int b = k0 / 32;                                                                                               \
        for (; b + 4 <= nb; b += 4) VQ4STEP4(NT, HI);                                                                  \
        for (; b + 2 <= nb; b += 2) VQ4STEP(NT, 1);                                                                    \
        if (b < nb) VQ4STEP(NT, 0);                                                                                    \
        R1_X86_TILE_OUT(NT);                                                                                           \
    }

/* high nibbles: shift and mask, or one GF(2) affine map (bit i <- bit i+4) */
#define HI_SHIFT(q) _mm512_and_si512(_mm512_srli_epi16(q, 4), lo4)
#define HI_GFNI(q) _mm512_gf2p8affine_epi64_epi8(q, _mm512_set1_epi64(0x1020408000000000ll), 0)
#define TGTG __attribute__((target(TGT_V ",gfni")))
VQ4TILE(tile_q4_0_1_vbmi, 1, HI_SHIFT, TGTV)
VQ4TILE(tile_q4_0_2_vbmi, 2, HI_SHIFT, TGTV)
VQ4TILE(tile_q4_0_4_vbmi, 4, HI_SHIFT, TGTV)
VQ4TILE(tile_q4_0_1_gfni, 1, HI_GFNI, TGTG)
VQ4TILE(tile_q4_0_2_gfni, 2, HI_GFNI, TGTG)
VQ4TILE(tile_q4_0_4_gfni, 4, HI_GFNI, TGTG)

#define QDISPATCH(NAME)                                                                                                \
    static void NAME(int K, int k0, int k1, const uint8_t *w, size_t ws, int nr, const uint8_t *x, size_t xs, int nt,  \
                     float *out) {                                                                                     \
        if (has_vbmi) {                                                                                                \
            r1_cpu_tile_nt(NAME##_1_vbmi, NAME##_2_vbmi, NAME##_4_vbmi, K, k0, k1, w, ws, nr, x, xs, nt, out);         \
        } else {                                                                                                       \
            r1_cpu_tile_nt(NAME##_1_pre, NAME##_2_pre, NAME##_4_pre, K, k0, k1, w, ws, nr, x, xs, nt, out);            \
        }                                                                                                              \
    }
QDISPATCH(tile_q8_0)

static void tile_q4_0(int K, int k0, int k1, const uint8_t *w, size_t ws, int nr, const uint8_t *x, size_t xs, int nt,
                      float *out) {
    if (has_vbmi && has_gfni) {
        r1_cpu_tile_nt(tile_q4_0_1_gfni, tile_q4_0_2_gfni, tile_q4_0_4_gfni, K, k0, k1, w, ws, nr, x, xs, nt, out);
    } else if (has_vbmi) {
        r1_cpu_tile_nt(tile_q4_0_1_vbmi, tile_q4_0_2_vbmi, tile_q4_0_4_vbmi, K, k0, k1, w, ws, nr, x, xs, nt, out);
    } else {
        r1_cpu_tile_nt(tile_q4_0_1_pre, tile_q4_0_2_pre, tile_q4_0_4_pre, K, k0, k1, w, ws, nr, x, xs, nt, out);
    }
}

const struct r1_cpu_isa r1_cpu_avx512 = {
    .name = "avx512",
    .available = avx512_available,
    .mr = 4,
    .nt = 4,
    .mm =
        {
            [R1_DTYPE_F32] = {R1_CPU_ACT_F32, tile_f32, .batch_panel = r1_x86_panel_avx512_f32},
            [R1_DTYPE_F16] = {R1_CPU_ACT_F32, tile_f16, .batch_panel = r1_x86_panel_avx512_f16},
            [R1_DTYPE_BF16] = {R1_CPU_ACT_F32EO32, tile_bf16, .carry_k = 32, .batch_panel = r1_x86_panel_avx512_bf16},
            [R1_DTYPE_Q8_0] = {R1_CPU_ACT_Q8, tile_q8_0},
            [R1_DTYPE_Q4_0] = {R1_CPU_ACT_Q8, tile_q4_0},
            [R1_DTYPE_Q4_1] = {R1_CPU_ACT_Q8, r1_kq_tile_q4_1_avx512},
            [R1_DTYPE_Q5_0] = {R1_CPU_ACT_Q8, r1_kq_tile_q5_0_avx512},
            [R1_DTYPE_Q5_1] = {R1_CPU_ACT_Q8, r1_kq_tile_q5_1_avx512},
            [R1_DTYPE_Q4_K] = {R1_CPU_ACT_Q8, r1_kq_tile_q4_K_avx512, .one_part = 1},
            [R1_DTYPE_Q5_K] = {R1_CPU_ACT_Q8, r1_kq_tile_q5_K_avx512, .one_part = 1},
            [R1_DTYPE_Q6_K] = {R1_CPU_ACT_Q8, r1_kq_tile_q6_K_avx512, .one_part = 1},
            [R1_DTYPE_Q4_0X8] = {R1_CPU_ACT_Q8X8, r1_x86_tile_q4_0x8_avx512,
                                 .pair_tile = r1_x86_tile_q4_0x8_avx512_pair, .pair_nt = 4, .one_part = 1},
            [R1_DTYPE_Q4_1X8] = {R1_CPU_ACT_Q8X8, r1_x86_tile_q4_1x8_avx512,
                                 .pair_tile = r1_x86_tile_q4_1x8_avx512_pair, .pair_nt = 4, .carry_k = 256},
            [R1_DTYPE_Q8_0X8] = {R1_CPU_ACT_Q8X8, r1_x86_tile_q8_0x8_avx512, .batch_panel = r1_x86_panel_avx512_q8_0x8,
                                 .pair_tile = r1_x86_tile_q8_0x8_avx512_pair, .pair_nt = 4, .carry_k = 256},
            [R1_DTYPE_Q4_KX8] = {R1_CPU_ACT_Q8X8, r1_kq_tile_q4_Kx8_avx512, .batch_panel = r1_x86_panel_avx512_q4_Kx8,
                                 .pair_tile = r1_kq_tile_q4_Kx8_avx512_pair, .pair_nt = 2, .one_part = 1,
                                 .gemm = r1_gemm_q4_Kx8_q8x8_avx512},
            [R1_DTYPE_Q5_KX8] = {R1_CPU_ACT_Q8X8, r1_kq_tile_q5_Kx8_avx512, .batch_panel = r1_x86_panel_avx512_q5_Kx8,
                                 .pair_tile = r1_kq_tile_q5_Kx8_avx512_pair, .pair_nt = 2, .one_part = 1,
                                 .gemm = r1_gemm_q5_Kx8_q8x8_avx512},
            [R1_DTYPE_Q6_KX8] = {R1_CPU_ACT_Q8X8, r1_kq_tile_q6_Kx8_avx512, .batch_panel = r1_x86_panel_avx512_q6_Kx8,
                                 .pair_tile = r1_kq_tile_q6_Kx8_avx512_pair, .pair_nt = 2, .one_part = 1,
                                 .gemm = r1_gemm_q6_Kx8_q8x8_avx512},
        },
    .quant_q8 = r1_x86_quant_q8_avx2,
    .quant_q8x8 = r1_x86_quant_q8x8_avx512,
    .quant_q8_2 = r1_x86_quant_q8_2_avx512,
    .quant_q8x8_2 = r1_x86_quant_q8x8_2_avx512,
    .dot_f32 = r1_x86_dot_f32_avx2,
    .dot_f16 = r1_x86_dot_f16_avx2,
    .axpy_f32 = r1_x86_axpy_f32_avx2,
    .axpy_f16 = r1_x86_axpy_f16_avx2,
    .f32_to_f16 = r1_x86_f32_to_f16_avx2,
    .f16_to_f32 = r1_x86_f16_to_f32_avx512,
    .attn_qk = r1_x86_attn_qk_avx512,
    .attn_pv = r1_x86_attn_pv_avx512,
    .attn_softmax = r1_x86_attn_softmax_avx512,
    .attn_qk_f16 = r1_x86_attn_qk_f16_avx512,
    .attn_pv_f16 = r1_x86_attn_pv_f16_avx512,
    .silu_mul = r1_x86_silu_mul_avx512,
    .q8_0_to_f32 = r1_x86_q8_0_to_f32_avx512,
    .attn_qk_q8 = r1_x86_attn_qk_q8_avx512,
    .attn_pv_q8 = r1_x86_attn_pv_q8_avx512,
};

#endif /* __x86_64__ */
