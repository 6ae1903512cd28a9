/*
 * attn_avx512.c - the AVX-512 helpers of the cpu backend's blocked attention
 * (cpu.h: f16_to_f32, q8_0_to_f32, attn_qk, attn_pv, attn_softmax), apart from the matmul
 * tiles in avx512.c. x86-64 only; the avx512 table checks the CPU first.
 */
#include "kernels/cpu/cpu.h"

#if defined(__x86_64__)
#include <immintrin.h>
#include <math.h>

#include "kernels/cpu/x86/x86.h"

#define TGT_S "avx512f,avx512bw,avx512vl,avx512dq,avx512vnni,avx2,fma,f16c"
#define TGT __attribute__((target(TGT_S)))
#define INL static inline __attribute__((always_inline, target(TGT_S)))

/* ---- blocked attention helpers (cpu.h) ---- */
TGT void r1_x86_f16_to_f32_avx512(const uint16_t *x, float *y, int n) {
    int i = 0;
    for (; i + 16 <= n; i += 16) _mm512_storeu_ps(y + i, _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(x + i))));
    if (i < n) {
        __mmask16 k = (__mmask16)((1u << (n - i)) - 1);
        _mm512_mask_storeu_ps(y + i, k, _mm512_cvtph_ps(_mm256_maskz_loadu_epi16(k, x + i)));
    }
}

/* n values (n % 32 == 0) of consecutive q8_0 blocks: d * q, the product
 * rounded once as the reference's. */
TGT void r1_x86_q8_0_to_f32_avx512(const uint8_t *x, float *y, int n) {
    for (int b = 0; b < n / 32; b++, x += 34, y += 32) {
        uint16_t h;
        __builtin_memcpy(&h, x, 2);
        const __m512 d = _mm512_set1_ps(_cvtsh_ss(h));
        __m512i q0 = _mm512_cvtepi8_epi32(_mm_loadu_si128((const __m128i *)(x + 2)));
        __m512i q1 = _mm512_cvtepi8_epi32(_mm_loadu_si128((const __m128i *)(x + 18)));
        _mm512_storeu_ps(y, _mm512_mul_ps(d, _mm512_cvtepi32_ps(q0)));
        _mm512_storeu_ps(y + 16, _mm512_mul_ps(d, _mm512_cvtepi32_ps(q1)));
    }
}

/* Lane j of the result = the sum of the lanes of v[j]. */
INL __m512 hsum16(const __m512 *v) {
    __m512 t[8], u[4], w0, w1, a, b;
    _Pragma("GCC unroll 16") for (int i = 0; i < 8; i++) t[i] =
        _mm512_add_ps(_mm512_unpacklo_ps(v[2 * i], v[2 * i + 1]), _mm512_unpackhi_ps(v[2 * i], v[2 * i + 1]));
    _Pragma("GCC unroll 16") for (int i = 0; i < 4; i++) {
        __m512d c = _mm512_castps_pd(t[2 * i]), d = _mm512_castps_pd(t[2 * i + 1]);
        u[i] = _mm512_add_ps(_mm512_castpd_ps(_mm512_unpacklo_pd(c, d)), _mm512_castpd_ps(_mm512_unpackhi_pd(c, d)));
    }
    w0 = _mm512_add_ps(_mm512_shuffle_f32x4(u[0], u[1], 0x88), _mm512_shuffle_f32x4(u[0], u[1], 0xdd));
    w1 = _mm512_add_ps(_mm512_shuffle_f32x4(u[2], u[3], 0x88), _mm512_shuffle_f32x4(u[2], u[3], 0xdd));
    a = _mm512_shuffle_f32x4(w0, w1, 0x88);
    b = _mm512_shuffle_f32x4(w0, w1, 0xdd);
    return _mm512_add_ps(a, b);
}

/* Lanes 0-7 = the sums of the lanes of v[0..7], by hsum16's tree (its
 * first eight inputs alone): the same bits as hsum16 gives them. */
INL __m256 hsum8(const __m512 *v) {
    __m512 t[4], u[2];
    _Pragma("GCC unroll 4") for (int i = 0; i < 4; i++) t[i] =
        _mm512_add_ps(_mm512_unpacklo_ps(v[2 * i], v[2 * i + 1]), _mm512_unpackhi_ps(v[2 * i], v[2 * i + 1]));
    _Pragma("GCC unroll 2") for (int i = 0; i < 2; i++) {
        __m512d c = _mm512_castps_pd(t[2 * i]), d = _mm512_castps_pd(t[2 * i + 1]);
        u[i] = _mm512_add_ps(_mm512_castpd_ps(_mm512_unpacklo_pd(c, d)), _mm512_castpd_ps(_mm512_unpackhi_pd(c, d)));
    }
    const __m512 w0 = _mm512_add_ps(_mm512_shuffle_f32x4(u[0], u[1], 0x88), _mm512_shuffle_f32x4(u[0], u[1], 0xdd));
    const __m512 z = _mm512_setzero_ps();
    return _mm512_castps512_ps256(_mm512_add_ps(_mm512_shuffle_f32x4(w0, z, 0x88), _mm512_shuffle_f32x4(w0, z, 0xdd)));
}

/* Scores and weighted sums of a block of queries against a chunk of cache
 * rows, for f32 rows (the cache converted) or straight from an f16 cache
 * (converted in registers: no f32 copy written and read back), or from a
 * q8_0 cache (head_dim / 32 blocks a row, each value d * q as the
 * reference's). The f16 and q8_0 forms take the true P and never read a row
 * past it: the last block of 4 repeats row P-1, whose extra scores the
 * caller ignores. */
#define LD_F32(p, d) _mm512_loadu_ps((p) + (d))
#define LD_F16(p, d) _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)((p) + (d))))
/* values d..d+15 (d % 16 == 0) of a q8_0 row: d * q, as the reference's */
INL __m512 ld_q8(const uint8_t *row, int d) {
    const uint8_t *b = row + (size_t)(d >> 5) * 34;
    uint16_t h;
    __builtin_memcpy(&h, b, 2);
    __m512 q = _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(_mm_loadu_si128((const __m128i *)(b + 2 + (d & 31)))));
    return _mm512_mul_ps(_mm512_set1_ps(_cvtsh_ss(h)), q);
}
#define LD_Q8(p, d) ld_q8(p, d)
/* values d..d+31 (d % 32 == 0) of a row in two vectors: a q8_0 block's
 * scale converted once for both (the same products as ld_q8) */
INL void ld2_q8(const uint8_t *row, int d, __m512 *a, __m512 *b) {
    const uint8_t *blk = row + (size_t)(d >> 5) * 34;
    uint16_t h;
    __builtin_memcpy(&h, blk, 2);
    const __m512 sc = _mm512_set1_ps(_cvtsh_ss(h));
    *a = _mm512_mul_ps(sc, _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(_mm_loadu_si128((const __m128i *)(blk + 2)))));
    *b = _mm512_mul_ps(sc, _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(_mm_loadu_si128((const __m128i *)(blk + 18)))));
}
#define LD2_Q8(p, d, a, b) ld2_q8(p, d, a, b)
#define LD2_F32(p, d, a, b) (*(a) = LD_F32(p, d), *(b) = LD_F32(p, (d) + 16))
#define LD2_F16(p, d, a, b) (*(a) = LD_F16(p, d), *(b) = LD_F16(p, (d) + 16))
#define RB_F(hd) ((size_t)(hd))            /* a row, in elements of the cache type */
#define RB_Q8(hd) ((size_t)(hd) / 32 * 34) /* a q8_0 row, in bytes */
/* NQ queries x NR rows at a time, NQ x NR = 24 accumulators (acc[NR i + j]:
 * query i, row j): a GQA group of 5-6 (the 1.5B's 6) as 6 x 4, of 7-8 (the
 * 7B's 7, the 70B's 8) as 8 x 3; each query is loaded once per NR rows,
 * the scores summed by hsum16 and hsum8 (the same tree), so the same bits
 * as the other forms. Queries up to NQ are computed and written. A last
 * group of rows past P starts at P - NR instead (rows computed twice give
 * the same bits); P >= NR. */
#define ATTN_QK24(NAME, TAG, NQ, NR, KT, LD, RB)                                                                       \
    INL void NAME##TAG(const float *q, const KT *k, int P, int hd, float *s, int ss) {                                 \
        for (int p1 = 0; p1 < P; p1 += NR) {                                                                           \
            const int p = p1 + NR <= P ? p1 : P - NR;                                                                  \
            const KT *kr[NR];                                                                                          \
            _Pragma("GCC unroll 4") for (int j = 0; j < NR; j++) kr[j] = k + (size_t)(p + j) * RB(hd);                 \
            __m512 acc[24];                                                                                            \
            _Pragma("GCC unroll 24") for (int i = 0; i < 24; i++) acc[i] = _mm512_setzero_ps();                        \
            for (int d = 0; d < hd; d += 16) {                                                                         \
                __m512 kv[NR];                                                                                         \
                _Pragma("GCC unroll 4") for (int j = 0; j < NR; j++) kv[j] = LD(kr[j], d);                             \
                _Pragma("GCC unroll 8") for (int i = 0; i < NQ; i++) {                                                 \
                    __m512 qv = _mm512_loadu_ps(q + (size_t)i * hd + d);                                               \
                    _Pragma("GCC unroll 4") for (int j = 0; j < NR; j++) acc[i * NR + j] =                             \
                        _mm512_fmadd_ps(qv, kv[j], acc[i * NR + j]);                                                   \
                }                                                                                                      \
            }                                                                                                          \
            const __m512 r16 = hsum16(acc);                                                                            \
            const __m256 r8 = hsum8(acc + 16);                                                                         \
            if (NR == 4) { /* a query's 4 scores are 4 lanes in a row */                                               \
                _mm_storeu_ps(s + p, _mm512_extractf32x4_ps(r16, 0));                                                  \
                _mm_storeu_ps(s + (size_t)ss + p, _mm512_extractf32x4_ps(r16, 1));                                     \
                _mm_storeu_ps(s + (size_t)2 * ss + p, _mm512_extractf32x4_ps(r16, 2));                                 \
                _mm_storeu_ps(s + (size_t)3 * ss + p, _mm512_extractf32x4_ps(r16, 3));                                 \
                _mm_storeu_ps(s + (size_t)4 * ss + p, _mm256_castps256_ps128(r8));                                     \
                _mm_storeu_ps(s + (size_t)5 * ss + p, _mm256_extractf128_ps(r8, 1));                                   \
            } else {                                                                                                   \
                float r[24];                                                                                           \
                _mm512_storeu_ps(r, r16);                                                                              \
                _mm256_storeu_ps(r + 16, r8);                                                                          \
                _Pragma("GCC unroll 8") for (int i = 0; i < NQ; i++)                                                   \
                    _Pragma("GCC unroll 4") for (int j = 0; j < NR; j++) s[(size_t)i * ss + p + j] = r[i * NR + j];    \
            }                                                                                                          \
        }                                                                                                              \
    }
#define ATTN_QK(NAME, KT, LD, CLAMP, RB)                                                                               \
    ATTN_QK24(NAME, _6x4, 6, 4, KT, LD, RB)                                                                            \
    ATTN_QK24(NAME, _8x3, 8, 3, KT, LD, RB)                                                                            \
    TGT void NAME(const float *q, int M, const KT *k, int P, int hd, float *s, int ss) {                               \
        if (M > 4 && M <= 6 && P >= 4) {                                                                               \
            NAME##_6x4(q, k, P, hd, s, ss);                                                                            \
            return;                                                                                                    \
        }                                                                                                              \
        if (M > 6 && M <= 8 && P >= 3) {                                                                               \
            NAME##_8x3(q, k, P, hd, s, ss);                                                                            \
            return;                                                                                                    \
        }                                                                                                              \
        for (int m = 0; m < M; m += 4) {                                                                               \
            const float *q0 = q + (size_t)m * hd;                                                                      \
            for (int p = 0; p < P; p += 4) {                                                                           \
                const KT *kr[4];                                                                                       \
                _Pragma("GCC unroll 4") for (int j = 0; j < 4; j++) kr[j] =                                            \
                    k + (size_t)(CLAMP && p + j >= P ? P - 1 : p + j) * RB(hd);                                        \
                __m512 acc[16];                                                                                        \
                _Pragma("GCC unroll 16") for (int i = 0; i < 16; i++) acc[i] = _mm512_setzero_ps();                    \
                for (int d = 0; d < hd; d += 16) {                                                                     \
                    __m512 kv[4];                                                                                      \
                    _Pragma("GCC unroll 16") for (int j = 0; j < 4; j++) kv[j] = LD(kr[j], d);                         \
                    _Pragma("GCC unroll 16") for (int i = 0; i < 4; i++) {                                             \
                        __m512 qv = _mm512_loadu_ps(q0 + (size_t)i * hd + d);                                          \
                        _Pragma("GCC unroll 16") for (int j = 0; j < 4; j++) acc[i * 4 + j] =                          \
                            _mm512_fmadd_ps(qv, kv[j], acc[i * 4 + j]);                                                \
                    }                                                                                                  \
                }                                                                                                      \
                __m512 r = hsum16(acc);                                                                                \
                _mm_storeu_ps(s + (size_t)(m + 0) * ss + p, _mm512_extractf32x4_ps(r, 0));                             \
                _mm_storeu_ps(s + (size_t)(m + 1) * ss + p, _mm512_extractf32x4_ps(r, 1));                             \
                _mm_storeu_ps(s + (size_t)(m + 2) * ss + p, _mm512_extractf32x4_ps(r, 2));                             \
                _mm_storeu_ps(s + (size_t)(m + 3) * ss + p, _mm512_extractf32x4_ps(r, 3));                             \
            }                                                                                                          \
        }                                                                                                              \
    }
ATTN_QK(r1_x86_attn_qk_avx512, float, LD_F32, 0, RB_F)
ATTN_QK(r1_x86_attn_qk_f16_avx512, uint16_t, LD_F16, 1, RB_F)
ATTN_QK(r1_x86_attn_qk_q8_avx512, uint8_t, LD_Q8, 1, RB_Q8)

/* 5 to 8 queries in one pass: 32 columns of all of them (6 or 8) at a
 * time, so each row's values are loaded (and converted) once instead of
 * once per 4 queries; the same FMAs over p in order as the 4-query form, so
 * the same bits. */
#define ATTN_PV8(NAME, VT, LD2, RB)                                                                                    \
    INL void NAME##_8(const int MR, const float *s, int ss, const VT *v, int P, int hd, float *o) {                    \
        for (int d = 0; d < hd; d += 32) {                                                                             \
            __m512 acc[16];                                                                                            \
            _Pragma("GCC unroll 16") for (int i = 0; i < MR; i++) {                                                    \
                acc[2 * i] = _mm512_loadu_ps(o + (size_t)i * hd + d);                                                  \
                acc[2 * i + 1] = _mm512_loadu_ps(o + (size_t)i * hd + d + 16);                                         \
            }                                                                                                          \
            for (int p = 0; p < P; p++) {                                                                              \
                const VT *vr = v + (size_t)p * RB(hd);                                                                 \
                __m512 va, vb;                                                                                         \
                LD2(vr, d, &va, &vb);                                                                                  \
                _Pragma("GCC unroll 16") for (int i = 0; i < MR; i++) {                                                \
                    __m512 a = _mm512_set1_ps(s[(size_t)i * ss + p]);                                                  \
                    acc[2 * i] = _mm512_fmadd_ps(a, va, acc[2 * i]);                                                   \
                    acc[2 * i + 1] = _mm512_fmadd_ps(a, vb, acc[2 * i + 1]);                                           \
                }                                                                                                      \
            }                                                                                                          \
            _Pragma("GCC unroll 16") for (int i = 0; i < MR; i++) {                                                    \
                _mm512_storeu_ps(o + (size_t)i * hd + d, acc[2 * i]);                                                  \
                _mm512_storeu_ps(o + (size_t)i * hd + d + 16, acc[2 * i + 1]);                                         \
            }                                                                                                          \
        }                                                                                                              \
    }
/* 5 or 6 queries, 64 columns of all of them at a time (24 accumulators:
 * each weight broadcast once per 64 columns, not 32); the same FMAs over
 * p in order, so the same bits. */
#define ATTN_PV6(NAME, VT, LD2, RB)                                                                                    \
    INL void NAME##_6(const float *s, int ss, const VT *v, int P, int hd, float *o) {                                  \
        for (int d = 0; d < hd; d += 64) {                                                                             \
            __m512 acc[24];                                                                                            \
            _Pragma("GCC unroll 6") for (int i = 0; i < 6; i++) _Pragma("GCC unroll 4") for (int j = 0; j < 4; j++)    \
                acc[4 * i + j] = _mm512_loadu_ps(o + (size_t)i * hd + d + 16 * j);                                     \
            for (int p = 0; p < P; p++) {                                                                              \
                const VT *vr = v + (size_t)p * RB(hd);                                                                 \
                __m512 vv[4];                                                                                          \
                LD2(vr, d, &vv[0], &vv[1]);                                                                            \
                LD2(vr, d + 32, &vv[2], &vv[3]);                                                                       \
                _Pragma("GCC unroll 6") for (int i = 0; i < 6; i++) {                                                  \
                    __m512 a = _mm512_set1_ps(s[(size_t)i * ss + p]);                                                  \
                    _Pragma("GCC unroll 4") for (int j = 0; j < 4; j++) acc[4 * i + j] =                               \
                        _mm512_fmadd_ps(a, vv[j], acc[4 * i + j]);                                                     \
                }                                                                                                      \
            }                                                                                                          \
            _Pragma("GCC unroll 6") for (int i = 0; i < 6; i++) _Pragma("GCC unroll 4") for (int j = 0; j < 4; j++)    \
                _mm512_storeu_ps(o + (size_t)i * hd + d + 16 * j, acc[4 * i + j]);                                     \
        }                                                                                                              \
    }
#define ATTN_PV(NAME, VT, LD, LD2, RB)                                                                                 \
    ATTN_PV8(NAME, VT, LD2, RB)                                                                                        \
    ATTN_PV6(NAME, VT, LD2, RB)                                                                                        \
    TGT void NAME(const float *s, int ss, int M, const VT *v, int P, int hd, float *o) {                               \
        if (M > 4 && M <= 6 && hd % 64 == 0) {                                                                         \
            NAME##_6(s, ss, v, P, hd, o);                                                                              \
            return;                                                                                                    \
        }                                                                                                              \
        if (M > 4 && M <= 8 && hd % 32 == 0) {                                                                         \
            if (M <= 6) NAME##_8(6, s, ss, v, P, hd, o);                                                               \
            else NAME##_8(8, s, ss, v, P, hd, o);                                                                      \
            return;                                                                                                    \
        }                                                                                                              \
        for (int m = 0; m < M; m += 4) {                                                                               \
            const float *s0 = s + (size_t)m * ss;                                                                      \
            float *o0 = o + (size_t)m * hd;                                                                            \
            int d = 0;                                                                                                 \
            for (; d + 64 <= hd; d += 64) {                                                                            \
                __m512 acc[16];                                                                                        \
                _Pragma("GCC unroll 16") for (int i = 0; i < 4; i++)                                                   \
                    _Pragma("GCC unroll 16") for (int j = 0; j < 4; j++) acc[i * 4 + j] =                              \
                        _mm512_loadu_ps(o0 + (size_t)i * hd + d + 16 * j);                                             \
                for (int p = 0; p < P; p++) {                                                                          \
                    const VT *vr = v + (size_t)p * RB(hd);                                                             \
                    __m512 vv[4];                                                                                      \
                    _Pragma("GCC unroll 16") for (int j = 0; j < 4; j++) vv[j] = LD(vr, d + 16 * j);                   \
                    _Pragma("GCC unroll 16") for (int i = 0; i < 4; i++) {                                             \
                        __m512 a = _mm512_set1_ps(s0[(size_t)i * ss + p]);                                             \
                        _Pragma("GCC unroll 16") for (int j = 0; j < 4; j++) acc[i * 4 + j] =                          \
                            _mm512_fmadd_ps(a, vv[j], acc[i * 4 + j]);                                                 \
                    }                                                                                                  \
                }                                                                                                      \
                _Pragma("GCC unroll 16") for (int i = 0; i < 4; i++)                                                   \
                    _Pragma("GCC unroll 16") for (int j = 0; j < 4; j++)                                               \
                        _mm512_storeu_ps(o0 + (size_t)i * hd + d + 16 * j, acc[i * 4 + j]);                            \
            }                                                                                                          \
            for (; d < hd; d += 16) {                                                                                  \
                __m512 acc[4];                                                                                         \
                _Pragma("GCC unroll 16") for (int i = 0; i < 4; i++) acc[i] =                                          \
                    _mm512_loadu_ps(o0 + (size_t)i * hd + d);                                                          \
                for (int p = 0; p < P; p++) {                                                                          \
                    __m512 vv = LD(v + (size_t)p * RB(hd), d);                                                         \
                    _Pragma("GCC unroll 16") for (int i = 0; i < 4; i++) acc[i] =                                      \
                        _mm512_fmadd_ps(_mm512_set1_ps(s0[(size_t)i * ss + p]), vv, acc[i]);                           \
                }                                                                                                      \
                _Pragma("GCC unroll 16") for (int i = 0; i < 4; i++)                                                   \
                    _mm512_storeu_ps(o0 + (size_t)i * hd + d, acc[i]);                                                 \
            }                                                                                                          \
        }                                                                                                              \
    }
ATTN_PV(r1_x86_attn_pv_avx512, float, LD_F32, LD2_F32, RB_F)
ATTN_PV(r1_x86_attn_pv_f16_avx512, uint16_t, LD_F16, LD2_F16, RB_F)
ATTN_PV(r1_x86_attn_pv_q8_avx512, uint8_t, LD_Q8, LD2_Q8, RB_Q8)

INL __m512 exp512(__m512 x) {
    x = _mm512_max_ps(x, _mm512_set1_ps(-104.0f));
    __m512 n = _mm512_roundscale_ps(_mm512_mul_ps(x, _mm512_set1_ps(1.44269504088896341f)),
                                    _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    __m512 r = _mm512_fnmadd_ps(n, _mm512_set1_ps(0.693359375f), x);
    r = _mm512_fnmadd_ps(n, _mm512_set1_ps(-2.12194440e-4f), r);
    __m512 p = _mm512_set1_ps(1.9875691500e-4f);
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.3981999507e-3f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(8.3334519073e-3f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(4.1665795894e-2f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.6666665459e-1f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(5.0000001201e-1f));
    p = _mm512_fmadd_ps(p, _mm512_mul_ps(r, r), r);
    p = _mm512_add_ps(p, _mm512_set1_ps(1.0f));
    return _mm512_scalef_ps(p, n);
}

TGT float r1_x86_attn_softmax_avx512(float *s, int n, float scale, float *m) {
    const __m512 vs = _mm512_set1_ps(scale);
    __m512 mx = _mm512_set1_ps(*m);
    for (int i = 0; i < n; i += 16) {
        __mmask16 k = n - i >= 16 ? 0xffff : (__mmask16)((1u << (n - i)) - 1);
        mx = _mm512_mask_max_ps(mx, k, mx, _mm512_mul_ps(_mm512_maskz_loadu_ps(k, s + i), vs));
    }
    float mv = _mm512_reduce_max_ps(mx);
    *m = mv;
    const __m512 vm = _mm512_set1_ps(mv);
    __m512 sum = _mm512_setzero_ps();
    for (int i = 0; i < n; i += 16) {
        __mmask16 k = n - i >= 16 ? 0xffff : (__mmask16)((1u << (n - i)) - 1);
        __m512 e = exp512(_mm512_sub_ps(_mm512_mul_ps(_mm512_maskz_loadu_ps(k, s + i), vs), vm));
        _mm512_mask_storeu_ps(s + i, k, e);
        sum = _mm512_mask_add_ps(sum, k, sum, e);
    }
    return _mm512_reduce_add_ps(sum);
}

/* o[i] = silu(g[i]) * u[i] = g / (1 + e^-g) * u; e^-g saturates to +inf for
 * g < -88 (exp512 clamps its argument at -104 only from below), giving -0 * u
 * like expf does. */
TGT void r1_x86_silu_mul_avx512(const float *g, const float *u, float *o, int n) {
    const __m512 one = _mm512_set1_ps(1.0f);
    for (int i = 0; i < n; i += 16) {
        __mmask16 k = n - i >= 16 ? 0xffff : (__mmask16)((1u << (n - i)) - 1);
        __m512 gv = _mm512_maskz_loadu_ps(k, g + i);
        __m512 e = exp512(_mm512_min_ps(_mm512_sub_ps(_mm512_setzero_ps(), gv), _mm512_set1_ps(88.0f)));
        __m512 r = _mm512_mul_ps(_mm512_div_ps(gv, _mm512_add_ps(one, e)), _mm512_maskz_loadu_ps(k, u + i));
        _mm512_mask_storeu_ps(o + i, k, r);
    }
}

#endif /* __x86_64__ */
