/*
 * attn_avx2.c - the AVX2 + FMA + F16C helpers of the cpu backend's blocked
 * attention (cpu.h: f16_to_f32, attn_qk, attn_pv, attn_softmax, the f16
 * cache forms) and silu_mul, for the avx2 and avx2-vnni tables; the AVX-512
 * ones are in attn_avx512.c. x86-64 only; the tables check the CPU first.
 * Target attributes only, never -mavx2.
 */
#include "kernels/cpu/cpu.h"

#if defined(__x86_64__)
#include <immintrin.h>
#include <math.h>

#include "kernels/cpu/x86/x86.h"

#define TGT __attribute__((target("avx2,fma,f16c")))
#define INL static inline __attribute__((always_inline, target("avx2,fma,f16c")))

TGT void r1_x86_f16_to_f32_avx2(const uint16_t *x, float *y, int n) {
    int i = 0;
    for (; i + 8 <= n; i += 8) _mm256_storeu_ps(y + i, _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(x + i))));
    for (; i < n; i++) y[i] = _cvtsh_ss(x[i]);
}

/* n values (n % 32 == 0) of consecutive q8_0 blocks: d * q, the product
 * rounded once as the reference's. */
TGT void r1_x86_q8_0_to_f32_avx2(const uint8_t *x, float *y, int n) {
    for (int b = 0; b < n / 32; b++, x += 34, y += 32) {
        uint16_t h;
        __builtin_memcpy(&h, x, 2);
        const __m256 d = _mm256_set1_ps(_cvtsh_ss(h));
        _Pragma("GCC unroll 4") for (int j = 0; j < 4; j++) {
            __m256i q = _mm256_cvtepi8_epi32(_mm_loadl_epi64((const __m128i *)(x + 2 + 8 * j)));
            _mm256_storeu_ps(y + 8 * j, _mm256_mul_ps(d, _mm256_cvtepi32_ps(q)));
        }
    }
}

/* Rows [0, M) of a helper in passes of up to 6: ROWS(NR, m, ...) does rows
 * m .. m + NR - 1, NR a constant, so each count is its own unrolled body. */
#define BY_SIX(M, ROWS, ...)                                                                                           \
    do {                                                                                                               \
        int m_ = 0;                                                                                                    \
        for (; m_ + 6 <= (M); m_ += 6) ROWS(6, m_, __VA_ARGS__);                                                       \
        switch ((M)-m_) {                                                                                              \
        case 5:                                                                                                        \
            ROWS(5, m_, __VA_ARGS__);                                                                                  \
            break;                                                                                                     \
        case 4:                                                                                                        \
            ROWS(4, m_, __VA_ARGS__);                                                                                  \
            break;                                                                                                     \
        case 3:                                                                                                        \
            ROWS(3, m_, __VA_ARGS__);                                                                                  \
            break;                                                                                                     \
        case 2:                                                                                                        \
            ROWS(2, m_, __VA_ARGS__);                                                                                  \
            break;                                                                                                     \
        case 1:                                                                                                        \
            ROWS(1, m_, __VA_ARGS__);                                                                                  \
            break;                                                                                                     \
        default:                                                                                                       \
            break;                                                                                                     \
        }                                                                                                              \
    } while (0)

/* Scores of up to 6 query rows (NQ) against 2 cache rows at a time: 12
 * accumulators, the 2 cache vectors and one query vector in the 16 ymm
 * registers, so each cache vector converted feeds NQ FMAs (a group of
 * 6 heads, as the 1.5B's, reads its cache once). Each score's lanes are
 * summed as ((0+1)+(2+3))+((4+5)+(6+7)) whatever rows share the pass, so a
 * score does not depend on M. The f16 and q8_0 forms (the cache converted in
 * registers; q8_0 rows of head_dim / 32 blocks) take the true P and never
 * read a row past it: an odd P's last pair repeats row P-1, whose extra
 * score the caller ignores. */
#define LD_F32(p, d) _mm256_loadu_ps((p) + (d))
#define LD_F16(p, d) _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)((p) + (d))))
/* values d..d+7 (d % 8 == 0) of a q8_0 row: d * q, as the reference's */
INL __m256 ld_q8(const uint8_t *row, int d) {
    const uint8_t *b = row + (size_t)(d >> 5) * 34;
    uint16_t h;
    __builtin_memcpy(&h, b, 2);
    __m256 q = _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_loadl_epi64((const __m128i *)(b + 2 + (d & 31)))));
    return _mm256_mul_ps(_mm256_set1_ps(_cvtsh_ss(h)), q);
}
#define LD_Q8(p, d) ld_q8(p, d)
#define RB_F(hd) ((size_t)(hd))            /* a row, in elements of the cache type */
#define RB_Q8(hd) ((size_t)(hd) / 32 * 34) /* a q8_0 row, in bytes */
#define ATTN_QK(NAME, KT, LD, CLAMP, RB)                                                                               \
    INL void NAME##_rows(const int NQ, int m, const float *q, const KT *k, int P, int hd, float *s, int ss) {          \
        q += (size_t)m * hd, s += (size_t)m * ss;                                                                      \
        for (int p = 0; p < P; p += 2) {                                                                               \
            const KT *k0 = k + (size_t)p * RB(hd);                                                                     \
            const KT *k1 = k + (size_t)(CLAMP && p + 1 >= P ? P - 1 : p + 1) * RB(hd);                                 \
            __m256 a[6][2];                                                                                            \
            _Pragma("GCC unroll 6") for (int i = 0; i < NQ; i++) a[i][0] = a[i][1] = _mm256_setzero_ps();              \
            for (int d = 0; d < hd; d += 8) {                                                                          \
                __m256 x0 = LD(k0, d), x1 = LD(k1, d);                                                                 \
                _Pragma("GCC unroll 6") for (int i = 0; i < NQ; i++) {                                                 \
                    __m256 qv = _mm256_loadu_ps(q + (size_t)i * hd + d);                                               \
                    __asm__("" : "+x"(qv)); /* one load, not one folded into each FMA */                               \
                    a[i][0] = _mm256_fmadd_ps(qv, x0, a[i][0]);                                                        \
                    a[i][1] = _mm256_fmadd_ps(qv, x1, a[i][1]);                                                        \
                }                                                                                                      \
            }                                                                                                          \
            /* rows i, i + 1: [s(i, p), s(i, p + 1), s(i + 1, p), s(i + 1, p + 1)] */                                  \
            _Pragma("GCC unroll 3") for (int i = 0; i < NQ; i += 2) {                                                  \
                __m256 h0 = _mm256_hadd_ps(a[i][0], a[i][1]);                                                          \
                __m256 h1 = i + 1 < NQ ? _mm256_hadd_ps(a[i + 1][0], a[i + 1][1]) : h0;                                \
                __m256 g = _mm256_hadd_ps(h0, h1);                                                                     \
                __m128 r = _mm_add_ps(_mm256_castps256_ps128(g), _mm256_extractf128_ps(g, 1));                         \
                _mm_storel_pi((__m64 *)(s + (size_t)i * ss + p), r);                                                   \
                if (i + 1 < NQ) _mm_storeh_pi((__m64 *)(s + (size_t)(i + 1) * ss + p), r);                             \
            }                                                                                                          \
        }                                                                                                              \
    }                                                                                                                  \
    TGT void NAME(const float *q, int M, const KT *k, int P, int hd, float *s, int ss) {                               \
        BY_SIX(M, NAME##_rows, q, k, P, hd, s, ss);                                                                    \
    }
ATTN_QK(r1_x86_attn_qk_avx2, float, LD_F32, 0, RB_F)
ATTN_QK(r1_x86_attn_qk_f16_avx2, uint16_t, LD_F16, 1, RB_F)
ATTN_QK(r1_x86_attn_qk_q8_avx2, uint8_t, LD_Q8, 1, RB_Q8)

/* o rows += the score-weighted cache rows: up to 6 query rows (NR) x 16
 * columns at a time (12 accumulators), each cache vector feeding NR FMAs. */
#define ATTN_PV(NAME, VT, LD, RB)                                                                                      \
    INL void NAME##_rows(const int NR, int m, const float *s, int ss, const VT *v, int P, int hd, float *o) {          \
        s += (size_t)m * ss, o += (size_t)m * hd;                                                                      \
        for (int d = 0; d < hd; d += 16) {                                                                             \
            __m256 acc[6][2];                                                                                          \
            _Pragma("GCC unroll 6") for (int i = 0; i < NR; i++) {                                                     \
                acc[i][0] = _mm256_loadu_ps(o + (size_t)i * hd + d);                                                   \
                acc[i][1] = _mm256_loadu_ps(o + (size_t)i * hd + d + 8);                                               \
            }                                                                                                          \
            for (int p = 0; p < P; p++) {                                                                              \
                const VT *vr = v + (size_t)p * RB(hd);                                                                 \
                __m256 v0 = LD(vr, d), v1 = LD(vr, d + 8);                                                             \
                _Pragma("GCC unroll 6") for (int i = 0; i < NR; i++) {                                                 \
                    __m256 a = _mm256_broadcast_ss(s + (size_t)i * ss + p);                                            \
                    acc[i][0] = _mm256_fmadd_ps(a, v0, acc[i][0]);                                                     \
                    acc[i][1] = _mm256_fmadd_ps(a, v1, acc[i][1]);                                                     \
                }                                                                                                      \
            }                                                                                                          \
            _Pragma("GCC unroll 6") for (int i = 0; i < NR; i++) {                                                     \
                _mm256_storeu_ps(o + (size_t)i * hd + d, acc[i][0]);                                                   \
                _mm256_storeu_ps(o + (size_t)i * hd + d + 8, acc[i][1]);                                               \
            }                                                                                                          \
        }                                                                                                              \
    }                                                                                                                  \
    TGT void NAME(const float *s, int ss, int M, const VT *v, int P, int hd, float *o) {                               \
        BY_SIX(M, NAME##_rows, s, ss, v, P, hd, o);                                                                    \
    }
ATTN_PV(r1_x86_attn_pv_avx2, float, LD_F32, RB_F)
ATTN_PV(r1_x86_attn_pv_f16_avx2, uint16_t, LD_F16, RB_F)
ATTN_PV(r1_x86_attn_pv_q8_avx2, uint8_t, LD_Q8, RB_Q8)

/* e^x for x <= 88.7 (Cephes' polynomial, as exp512); x is clamped at -87, so
 * 2^n stays a normal float (the true values below, under 1.7e-38, do not
 * matter to a softmax or to silu). */
INL __m256 exp256(__m256 x) {
    x = _mm256_max_ps(x, _mm256_set1_ps(-87.0f));
    __m256 n = _mm256_round_ps(_mm256_mul_ps(x, _mm256_set1_ps(1.44269504088896341f)),
                               _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    __m256 r = _mm256_fnmadd_ps(n, _mm256_set1_ps(0.693359375f), x);
    r = _mm256_fnmadd_ps(n, _mm256_set1_ps(-2.12194440e-4f), r);
    __m256 p = _mm256_set1_ps(1.9875691500e-4f);
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.3981999507e-3f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(8.3334519073e-3f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(4.1665795894e-2f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.6666665459e-1f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(5.0000001201e-1f));
    p = _mm256_fmadd_ps(p, _mm256_mul_ps(r, r), r);
    p = _mm256_add_ps(p, _mm256_set1_ps(1.0f));
    __m256i e = _mm256_slli_epi32(_mm256_add_epi32(_mm256_cvtps_epi32(n), _mm256_set1_epi32(127)), 23);
    return _mm256_mul_ps(p, _mm256_castsi256_ps(e));
}

INL float hmax(__m256 v) {
    __m128 m = _mm_max_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    m = _mm_max_ps(m, _mm_movehl_ps(m, m));
    m = _mm_max_ss(m, _mm_movehdup_ps(m));
    return _mm_cvtss_f32(m);
}
INL float hsum(__m256 v) {
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    s = _mm_add_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
}

TGT float r1_x86_attn_softmax_avx2(float *s, int n, float scale, float *m) {
    const __m256 vs = _mm256_set1_ps(scale);
    __m256 mx = _mm256_set1_ps(*m);
    int i = 0;
    for (; i + 8 <= n; i += 8) mx = _mm256_max_ps(mx, _mm256_mul_ps(_mm256_loadu_ps(s + i), vs));
    float mv = hmax(mx);
    for (; i < n; i++) mv = s[i] * scale > mv ? s[i] * scale : mv;
    *m = mv;
    const __m256 vm = _mm256_set1_ps(mv);
    __m256 sum = _mm256_setzero_ps();
    for (i = 0; i + 8 <= n; i += 8) {
        __m256 e = exp256(_mm256_sub_ps(_mm256_mul_ps(_mm256_loadu_ps(s + i), vs), vm));
        _mm256_storeu_ps(s + i, e);
        sum = _mm256_add_ps(sum, e);
    }
    float tail = 0.0f;
    if (i < n) { /* the last n - i scores through a padded copy */
        float buf[8];
        int k = 0;
        for (; k < n - i; k++) buf[k] = s[i + k];
        for (; k < 8; k++) buf[k] = -INFINITY;
        __m256 e = exp256(_mm256_sub_ps(_mm256_mul_ps(_mm256_loadu_ps(buf), vs), vm));
        _mm256_storeu_ps(buf, e);
        for (k = 0; k < n - i; k++) s[i + k] = buf[k], tail += buf[k];
    }
    return hsum(sum) + tail;
}

/* o[i] = silu(g[i]) * u[i] = g / (1 + e^-g) * u, e^-g at most e^88. */
TGT void r1_x86_silu_mul_avx2(const float *g, const float *u, float *o, int n) {
    const __m256 one = _mm256_set1_ps(1.0f);
    int i = 0;
    for (; i + 8 <= n; i += 8) {
        __m256 gv = _mm256_loadu_ps(g + i);
        __m256 e = exp256(_mm256_min_ps(_mm256_sub_ps(_mm256_setzero_ps(), gv), _mm256_set1_ps(88.0f)));
        _mm256_storeu_ps(o + i, _mm256_mul_ps(_mm256_div_ps(gv, _mm256_add_ps(one, e)), _mm256_loadu_ps(u + i)));
    }
    if (i < n) { /* the tail through a padded copy: the same arithmetic as the body, so an
                    output does not depend on where a thread's rows start (cpu.c batches
                    of <= 16 tokens must equal decode steps bit for bit) */
        float gb[8] = {0}, ub[8] = {0}, ob[8];
        for (int k = 0; k < n - i; k++) gb[k] = g[i + k], ub[k] = u[i + k];
        __m256 gv = _mm256_loadu_ps(gb);
        __m256 e = exp256(_mm256_min_ps(_mm256_sub_ps(_mm256_setzero_ps(), gv), _mm256_set1_ps(88.0f)));
        _mm256_storeu_ps(ob, _mm256_mul_ps(_mm256_div_ps(gv, _mm256_add_ps(one, e)), _mm256_loadu_ps(ub)));
        for (int k = 0; k < n - i; k++) o[i + k] = ob[k];
    }
}

#endif /* __x86_64__ */
