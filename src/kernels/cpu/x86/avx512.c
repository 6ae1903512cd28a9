/*
 * avx512.c - the AVX-512 table of the cpu backend (F, BW, VL, DQ and VNNI:
 * Ice Lake, Sapphire Rapids, Zen 4 and later). Tiles of 4 weight rows x up
 * to 4 tokens in zmm registers: f32/f16/bf16 weights against f32
 * activations with masked tails, q8_0/q4_0 weights against q8 activations
 * two blocks per zmm with vpdpbusd (sign trick). CPUs with AVX-512 but no
 * VNNI use the AVX2 table. Target attributes only, never -mavx512f.
 */
#include "kernels/cpu/cpu.h"

#if defined(__x86_64__)
#include <immintrin.h>

#include "kernels/cpu/x86/x86.h"
#include "util/util.h"

#define TGT_S "avx512f,avx512bw,avx512vl,avx512dq,avx512vnni,avx2,fma,f16c"
#define TGT __attribute__((target(TGT_S)))
#define INL static inline __attribute__((always_inline, target(TGT_S)))

static int avx512_available(void) {
    __builtin_cpu_init();
    return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
           __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512dq") &&
           __builtin_cpu_supports("avx512vnni") && __builtin_cpu_supports("avx2") &&
           __builtin_cpu_supports("fma") && r1_x86_has_f16c();
}

/* ---- float weights: 16 weights of row p from column k (lanes outside m are 0) ---- */
INL __m512 ld_f32(const uint8_t *p, int k, __mmask16 m) {
    return _mm512_maskz_loadu_ps(m, (const float *)p + k);
}
INL __m512 ld_f16(const uint8_t *p, int k, __mmask16 m) {
    return _mm512_cvtph_ps(_mm256_maskz_loadu_epi16(m, (const uint16_t *)p + k));
}
INL __m512 ld_bf16(const uint8_t *p, int k, __mmask16 m) {
    __m512i v = _mm512_cvtepu16_epi32(_mm256_maskz_loadu_epi16(m, (const uint16_t *)p + k));
    return _mm512_castsi512_ps(_mm512_slli_epi32(v, 16));
}

/* Decode (one token) streams 4 rows at a time, too short for the hardware
 * prefetcher to ramp up: fetch the same bytes of the next 4 rows ahead. */
#define PF_NEXT(NT, OFF)                                                                           \
    do {                                                                                           \
        if (NT == 1) {                                                                             \
            _mm_prefetch((const char *)(w0 + 4 * ws + (OFF)), _MM_HINT_T0);                        \
            _mm_prefetch((const char *)(w1 + 4 * ws + (OFF)), _MM_HINT_T0);                        \
            _mm_prefetch((const char *)(w2 + 4 * ws + (OFF)), _MM_HINT_T0);                        \
            _mm_prefetch((const char *)(w3 + 4 * ws + (OFF)), _MM_HINT_T0);                        \
        }                                                                                          \
    } while (0)

#define SETUP_PTRS(NT, XT_TYPE)                                                                    \
    const uint8_t *w0 = w, *w1 = w + (nr > 1 ? ws : 0), *w2 = w + (nr > 2 ? 2 * ws : 0),           \
                  *w3 = w + (nr > 3 ? 3 * ws : 0);                                                 \
    XT_TYPE xt[NT];                                                                                \
    for (int t = 0; t < NT; t++) xt[t] = (XT_TYPE)(x + (size_t)(t < nt ? t : 0) * xs);

#define FSTEP(NT, LD, M)                                                                           \
    do {                                                                                           \
        PF_NEXT(NT, (size_t)k * es);                                                               \
        __m512 a0 = LD(w0, k, M), a1 = LD(w1, k, M), a2 = LD(w2, k, M), a3 = LD(w3, k, M);         \
        _Pragma("GCC unroll 4") for (int t = 0; t < NT; t++) {                                     \
            __m512 xv = _mm512_maskz_loadu_ps(M, xt[t] + k);                                       \
            acc[0][t] = _mm512_fmadd_ps(a0, xv, acc[0][t]);                                        \
            acc[1][t] = _mm512_fmadd_ps(a1, xv, acc[1][t]);                                        \
            acc[2][t] = _mm512_fmadd_ps(a2, xv, acc[2][t]);                                        \
            acc[3][t] = _mm512_fmadd_ps(a3, xv, acc[3][t]);                                        \
        }                                                                                          \
    } while (0)

#define FTILE(NAME, NT, LD)                                                                        \
    static TGT void NAME(int K, int k0, int k1, const uint8_t *w, size_t ws, int nr, const uint8_t *x, size_t xs,  \
                         int nt, float *out) {                                                     \
        SETUP_PTRS(NT, const float *)                                                              \
        const size_t es = ws / (size_t)K; /* bytes per weight */                                    \
        __m512 acc[4][NT];                                                                         \
        _Pragma("GCC unroll 4") for (int r = 0; r < 4; r++) _Pragma("GCC unroll 4") for (int t = 0; \
                                                                                     t < NT; t++)  \
            acc[r][t] = _mm512_setzero_ps();                                                       \
        int k = k0;                                                                                \
        for (; k + 16 <= k1; k += 16) FSTEP(NT, LD, (__mmask16)0xffff);                             \
        if (k < k1) {                                                                               \
            __mmask16 m = (__mmask16)((1u << (k1 - k)) - 1);                                        \
            FSTEP(NT, LD, m);                                                                      \
        }                                                                                          \
        float res[4][NT]; /* constant indices only: acc stays in registers */                      \
        _Pragma("GCC unroll 4") for (int r = 0; r < 4; r++)                                        \
            _Pragma("GCC unroll 4") for (int t = 0; t < NT; t++)                                   \
                res[r][t] = _mm512_reduce_add_ps(acc[r][t]);                                       \
        for (int t = 0; t < nt; t++)                                                               \
            for (int r = 0; r < nr; r++) out[t * R1_CPU_MR + r] = res[r][t];                       \
    }

#define DISPATCH(NAME)                                                                             \
    static void NAME(int K, int k0, int k1, const uint8_t *w, size_t ws, int nr, const uint8_t *x, size_t xs,      \
                     int nt, float *out) {                                                         \
        if (nt == 1) NAME##_1(K, k0, k1, w, ws, nr, x, xs, nt, out);                                       \
        else NAME##_4(K, k0, k1, w, ws, nr, x, xs, nt, out);                                               \
    }

FTILE(tile_f32_1, 1, ld_f32)
FTILE(tile_f32_4, 4, ld_f32)
DISPATCH(tile_f32)
FTILE(tile_f16_1, 1, ld_f16)
FTILE(tile_f16_4, 4, ld_f16)
DISPATCH(tile_f16)
FTILE(tile_bf16_1, 1, ld_bf16)
FTILE(tile_bf16_4, 4, ld_bf16)
DISPATCH(tile_bf16)

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
    return _mm512_inserti64x4(_mm512_castsi256_si512(lo),
                              _mm256_loadu_si256((const __m256i *)(nb + 2)), 1);
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

#define QSTEP(NT, LQ, TWO)                                                                         \
    do {                                                                                           \
        __m512 d0, d1, d2, d3;                                                                     \
        PF_NEXT(NT, (size_t)b * bs);                                                               \
        PF_NEXT(NT, (size_t)b * bs + 64);                                                          \
        __m512i q0 = LQ(w0, b, TWO, &d0), q1 = LQ(w1, b, TWO, &d1), q2 = LQ(w2, b, TWO, &d2),      \
                q3 = LQ(w3, b, TWO, &d3);                                                          \
        _Pragma("GCC unroll 4") for (int t = 0; t < NT; t++) {                                     \
            __m512 dx;                                                                             \
            __m512i xq = lx(xt[t], qoff, b, TWO, &dx);                                             \
            __mmask64 neg = _mm512_movepi8_mask(xq);                                               \
            __m512i ax = _mm512_abs_epi8(xq), z = _mm512_setzero_si512();                          \
            acc[0][t] = _mm512_fmadd_ps(                                                           \
                _mm512_cvtepi32_ps(_mm512_dpbusd_epi32(z, ax, _mm512_mask_sub_epi8(q0, neg, z, q0))), \
                _mm512_mul_ps(d0, dx), acc[0][t]);                                                 \
            acc[1][t] = _mm512_fmadd_ps(                                                           \
                _mm512_cvtepi32_ps(_mm512_dpbusd_epi32(z, ax, _mm512_mask_sub_epi8(q1, neg, z, q1))), \
                _mm512_mul_ps(d1, dx), acc[1][t]);                                                 \
            acc[2][t] = _mm512_fmadd_ps(                                                           \
                _mm512_cvtepi32_ps(_mm512_dpbusd_epi32(z, ax, _mm512_mask_sub_epi8(q2, neg, z, q2))), \
                _mm512_mul_ps(d2, dx), acc[2][t]);                                                 \
            acc[3][t] = _mm512_fmadd_ps(                                                           \
                _mm512_cvtepi32_ps(_mm512_dpbusd_epi32(z, ax, _mm512_mask_sub_epi8(q3, neg, z, q3))), \
                _mm512_mul_ps(d3, dx), acc[3][t]);                                                 \
        }                                                                                          \
    } while (0)

#define QTILE(NAME, NT, LQ)                                                                        \
    static TGT void NAME(int K, int k0, int k1, const uint8_t *w, size_t ws, int nr, const uint8_t *x, size_t xs,  \
                         int nt, float *out) {                                                     \
        SETUP_PTRS(NT, const uint8_t *)                                                            \
        const size_t qoff = r1_cpu_q8_qoff(K);                                                     \
        const size_t bs = ws / (size_t)(K / 32); /* bytes per weight block */                      \
        const int nb = k1 / 32;                                                                     \
        __m512 acc[4][NT];                                                                         \
        _Pragma("GCC unroll 4") for (int r = 0; r < 4; r++) _Pragma("GCC unroll 4") for (int t = 0; \
                                                                                     t < NT; t++)  \
            acc[r][t] = _mm512_setzero_ps();                                                       \
        int b = k0 / 32;                                                                           \
        for (; b + 2 <= nb; b += 2) QSTEP(NT, LQ, 1);                                              \
        if (b < nb) QSTEP(NT, LQ, 0);                                                              \
        float res[4][NT]; /* constant indices only: acc stays in registers */                      \
        _Pragma("GCC unroll 4") for (int r = 0; r < 4; r++)                                        \
            _Pragma("GCC unroll 4") for (int t = 0; t < NT; t++)                                   \
                res[r][t] = _mm512_reduce_add_ps(acc[r][t]);                                       \
        for (int t = 0; t < nt; t++)                                                               \
            for (int r = 0; r < nr; r++) out[t * R1_CPU_MR + r] = res[r][t];                       \
    }

QTILE(tile_q8_0_1, 1, lq_q8_0)
QTILE(tile_q8_0_4, 4, lq_q8_0)
DISPATCH(tile_q8_0)
QTILE(tile_q4_0_1, 1, lq_q4_0)
QTILE(tile_q4_0_4, 4, lq_q4_0)
DISPATCH(tile_q4_0)

const struct r1_cpu_isa r1_cpu_avx512 = {
    .name = "avx512",
    .available = avx512_available,
    .mr = 4,
    .nt = 4,
    .mm =
        {
            [R1_DTYPE_F32] = {R1_CPU_ACT_F32, tile_f32},
            [R1_DTYPE_F16] = {R1_CPU_ACT_F32, tile_f16},
            [R1_DTYPE_BF16] = {R1_CPU_ACT_F32, tile_bf16},
            [R1_DTYPE_Q8_0] = {R1_CPU_ACT_Q8, tile_q8_0},
            [R1_DTYPE_Q4_0] = {R1_CPU_ACT_Q8, tile_q4_0},
        },
    .quant_q8 = r1_x86_quant_q8_avx2,
    .dot_f32 = r1_x86_dot_f32_avx2,
    .dot_f16 = r1_x86_dot_f16_avx2,
    .axpy_f32 = r1_x86_axpy_f32_avx2,
    .axpy_f16 = r1_x86_axpy_f16_avx2,
    .f32_to_f16 = r1_x86_f32_to_f16_avx2,
};

#endif /* __x86_64__ */
