/*
 * avx2.c - the AVX2 + FMA + F16C tables of the cpu backend (x86-64 from
 * Haswell / Zen on): "avx2", and "avx2-vnni" where the CPU also has AVX-VNNI
 * (or AVX512-VNNI with VL: then the same tiles run with EVEX vpdpbusd). Here:
 * the float tiles (f32/f16 weights against f32 activations, bf16 against
 * f32eo32 ones; a row at a time, four where a token's activations outgrow
 * L1), the q8 activation quantizer, the vector
 * helpers, and the tables; the quantized tiles are in q32_avx2.c and
 * kquants_avx2.c. Compiled on every architecture; the code exists only on
 * x86-64 and is reached only after the CPU check. Never compiled with
 * -mavx2: target attributes only.
 */
#include "kernels/cpu/cpu.h"
#include "kernels/cpu/kquants.h"

#if defined(__x86_64__)
#include <cpuid.h>
#include <immintrin.h>
#include <string.h>

#include "kernels/cpu/x86/x86.h"
#include "util/util.h"

#define TGT __attribute__((target("avx2,fma,f16c")))
#define INL static inline __attribute__((always_inline, target("avx2,fma,f16c")))

int r1_x86_has_f16c(void) {
    unsigned a, b, c, d;
    if (!__get_cpuid(1, &a, &b, &c, &d)) return 0;
    return (c >> 29) & 1;
}

static int avx2_available(void) {
    __builtin_cpu_init();
    return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") && r1_x86_has_f16c();
}

/* The avx2-vnni table: AVX2 with vpdpbusd on ymm, VEX-encoded (AVX-VNNI) or
 * EVEX-encoded (AVX512-VNNI with AVX512VL: this table can then be tested on
 * AVX-512 machines, and is what R1_CPU_ISA=avx2-vnni runs there). */
int r1_x86_avx2_vnni;
static int avx2_vnni_available(void) {
    if (!avx2_available()) return 0;
    /* AVX-VNNI is CPUID.(EAX=7,ECX=1):EAX[4]; clang 14 lacks "avxvnni" in
     * __builtin_cpu_supports, so read it directly. */
    unsigned a, b, c, d;
    if (__get_cpuid_count(7, 1, &a, &b, &c, &d) && (a & (1u << 4))) r1_x86_avx2_vnni = 1;
    else if (__builtin_cpu_supports("avx512vnni") && __builtin_cpu_supports("avx512vl")) r1_x86_avx2_vnni = 2;
    else return 0;
    return 1;
}

INL float hsum(__m256 v) {
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    s = _mm_add_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
}

/* 8 f16 values of p from index k, as f32 */
INL __m256 ld_f16(const uint8_t *p, int k) {
    return _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)((const uint16_t *)p + k)));
}

/* ---- float weights (f32, f16, bf16), decode and small batches, one row at
 * a time (one linear stream a row reads faster than 4 rows in lockstep).
 * Each 32 weights of a row are four vectors of 8 f32 (GRP_*), and every
 * (row, token) keeps four sums, one per vector, so a row alone has four
 * independent FMA chains (one chain a row could not keep up with the
 * memory), reduced in one order: a row in a batch is bit for bit the
 * decode step's. bf16 reads f32eo32 activations
 * (cpu.h R1_CPU_ACT_F32EO32): a 32-byte load of 16 weights splits into the
 * even columns by a shift and the odd ones by a mask, one in-lane op per 8
 * weights where vpmovzxwd + shift took two. The K % 32 tail runs the same
 * step on copies padded with zeros. ---- */
#define GRP_F32(P, V)                                                                                                  \
    _Pragma("GCC unroll 4") for (int j_ = 0; j_ < 4; j_++) V[j_] = _mm256_loadu_ps((const float *)(P) + 8 * j_)
#define GRP_F16(P, V)                                                                                                  \
    _Pragma("GCC unroll 4") for (int j_ = 0; j_ < 4; j_++) V[j_] = ld_f16((const uint8_t *)(P), 8 * j_)
#define GRP_BF16(P, V)                                                                                                 \
    do {                                                                                                               \
        const __m256i hi_ = _mm256_set1_epi32((int)0xffff0000u);                                                       \
        __m256i d0_ = _mm256_loadu_si256((const __m256i *)(P));                                                        \
        __m256i d1_ = _mm256_loadu_si256((const __m256i *)(P) + 1);                                                    \
        V[0] = _mm256_castsi256_ps(_mm256_slli_epi32(d0_, 16));                                                        \
        V[1] = _mm256_castsi256_ps(_mm256_and_si256(d0_, hi_));                                                        \
        V[2] = _mm256_castsi256_ps(_mm256_slli_epi32(d1_, 16));                                                        \
        V[3] = _mm256_castsi256_ps(_mm256_and_si256(d1_, hi_));                                                        \
    } while (0)

#define ROW_STEP(GRP, NR, P, XP, NT)                                                                                   \
    do {                                                                                                               \
        _Pragma("GCC unroll 2") for (int r = 0; r < NR; r++) {                                                         \
            __m256 v_[4];                                                                                              \
            GRP(P[r], v_);                                                                                             \
            _Pragma("GCC unroll 2") for (int t = 0; t < NT; t++) _Pragma("GCC unroll 4") for (int j = 0; j < 4; j++)   \
                acc[r * NT + t][j] = _mm256_fmadd_ps(v_[j], _mm256_loadu_ps(XP[t] + xo[j]), acc[r * NT + t][j]);       \
        }                                                                                                              \
    } while (0)

/* NR rows (wr) against NT tokens (xt) over [k0, k1): res[r NT + t]. ES: bytes a
 * weight; EO: the activations are f32eo32 (vector 0 of GRP_BF16 the even
 * columns of the first 16, at positions 0-7 of the group of 32; 1 their odd
 * ones, 16-23; 2 and 3 those of the next 16, 8-15 and 24-31; padded, so the
 * tail reads 32 of them), else plain f32 (vector j at 8j; the tail copies
 * k1 - k). Each (row, token) has the same four chains whatever NR and NT,
 * so the same bits. pf: prefetch each row FLOAT_PF_AHEAD bytes on (rows lie
 * one after another, so past a row's end that is the next row's start; a
 * predictable branch: the rows a small batch has just read skip it).
 * A fixed 2 KiB ahead, not the same bytes 4 rows on (the other tiles'
 * form): 4 rows on is 12 KiB ahead at K = 1536 and 70 KiB at K = 8960,
 * past the 32 KiB L1 it prefetches into, and decoded slower. */
#define FLOAT_PF_AHEAD 2048
#define ROW_TILE(NAME, NR, NT, GRP, ES, EO)                                                                            \
    static TGT void NAME(const uint8_t *const *wr, const float *const *xt, int k0, int k1, int pf, float *res) {       \
        static const int xo[4] = {0, EO ? 16 : 8, EO ? 8 : 16, 24};                                                    \
        __m256 acc[NR * NT][4];                                                                                        \
        _Pragma("GCC unroll 2") for (int i = 0; i < NR * NT; i++) _Pragma("GCC unroll 4") for (int j = 0; j < 4; j++)  \
            acc[i][j] = _mm256_setzero_ps();                                                                           \
        const float *xk[NT];                                                                                           \
        const uint8_t *wk[NR];                                                                                         \
        int k = k0;                                                                                                    \
        for (; k + 32 <= k1; k += 32) {                                                                                \
            _Pragma("GCC unroll 2") for (int r = 0; r < NR; r++) {                                                     \
                wk[r] = wr[r] + (size_t)k * ES;                                                                        \
                if (pf)                                                                                                \
                    _Pragma("GCC unroll 2") for (int i = 0; i < 32 * ES; i += 64)                                      \
                        _mm_prefetch((const char *)wk[r] + FLOAT_PF_AHEAD + i, _MM_HINT_T0);                           \
            }                                                                                                          \
            _Pragma("GCC unroll 2") for (int t = 0; t < NT; t++) xk[t] = xt[t] + k;                                    \
            ROW_STEP(GRP, NR, wk, xk, NT);                                                                             \
        }                                                                                                              \
        if (k < k1) {                                                                                                  \
            _Alignas(32) uint8_t wt[NR][32 * ES] = {{0}};                                                              \
            _Alignas(32) float xtl[NT][32] = {{0}};                                                                    \
            for (int r = 0; r < NR; r++) {                                                                             \
                memcpy(wt[r], wr[r] + (size_t)k * ES, (size_t)(k1 - k) * ES);                                          \
                wk[r] = wt[r];                                                                                         \
            }                                                                                                          \
            for (int t = 0; t < NT; t++) {                                                                             \
                memcpy(xtl[t], xt[t] + k, (size_t)(EO ? 32 : k1 - k) * sizeof(float));                                 \
                xk[t] = xtl[t];                                                                                        \
            }                                                                                                          \
            ROW_STEP(GRP, NR, wk, xk, NT);                                                                             \
        }                                                                                                              \
        _Pragma("GCC unroll 2") for (int i = 0; i < NR * NT; i++) res[i] =                                             \
            hsum(_mm256_add_ps(_mm256_add_ps(acc[i][0], acc[i][1]), _mm256_add_ps(acc[i][2], acc[i][3])));             \
    }

/* Rows outer, tokens in pairs inner (8 sums and 4 weight vectors fill the
 * 16 registers): the row is read from memory once, for the first pair. A
 * lone token whose activations do not fit (cpu.h r1_cpu_tuning.row1_act) takes
 * its rows four at a time instead (the rest one by one), so they come from
 * L2 once per four rows; 16 sums spill some to the stack, which a decode
 * bound by memory affords (at K = 8960 four rows a pass read faster than
 * one or two). */
#define ROW_TILES(NAME, GRP, ES, EO)                                                                                   \
    ROW_TILE(NAME##_r1, 1, 1, GRP, ES, EO)                                                                             \
    ROW_TILE(NAME##_r2, 1, 2, GRP, ES, EO)                                                                             \
    ROW_TILE(NAME##_r4, 4, 1, GRP, ES, EO)                                                                             \
    static TGT void NAME(int K, int k0, int k1, const uint8_t *w, size_t ws, int nr, const uint8_t *x, size_t xs,      \
                         int nt, float *out) {                                                                         \
        (void)K;                                                                                                       \
        const int pf = r1_cpu_tile_prefetch;                                                                           \
        int r = 0;                                                                                                     \
        if (nt == 1 && !r1_cpu_row1_fits(xs))                                                                          \
            for (; r + 4 <= nr; r += 4) {                                                                              \
                const uint8_t *wr[4] = {w + (size_t)r * ws, w + (size_t)(r + 1) * ws, w + (size_t)(r + 2) * ws,        \
                                        w + (size_t)(r + 3) * ws};                                                     \
                const float *xt[1] = {(const float *)x};                                                               \
                NAME##_r4(wr, xt, k0, k1, pf, out + r);                                                                \
            }                                                                                                          \
        for (; r < nr; r++) {                                                                                          \
            const uint8_t *wr[1] = {w + (size_t)r * ws};                                                               \
            int t = 0;                                                                                                 \
            for (; t + 2 <= nt; t += 2) {                                                                              \
                const float *xt[2] = {(const float *)(x + (size_t)t * xs), (const float *)(x + (size_t)(t + 1) * xs)}; \
                float res[2];                                                                                          \
                NAME##_r2(wr, xt, k0, k1, pf &&t == 0, res);                                                           \
                out[t * R1_CPU_MR + r] = res[0];                                                                       \
                out[(t + 1) * R1_CPU_MR + r] = res[1];                                                                 \
            }                                                                                                          \
            if (t < nt) {                                                                                              \
                const float *xt[1] = {(const float *)(x + (size_t)t * xs)};                                            \
                NAME##_r1(wr, xt, k0, k1, pf &&t == 0, &out[t * R1_CPU_MR + r]);                                       \
            }                                                                                                          \
        }                                                                                                              \
    }

ROW_TILES(tile_f32, GRP_F32, 4, 0)
ROW_TILES(tile_f16, GRP_F16, 2, 0)
ROW_TILES(tile_bf16, GRP_BF16, 2, 1)

/* bf16 weights in a batch, against f32eo activations (cpu.h): a 32-byte load
 * of 16 bf16 weights gives the even ones by a shift and the odd ones by a
 * mask, one integer op per 8 weights; two rows x 4 tokens a pass. */
static TGT void tile_bf16_eo(int K, int k0, int k1, const uint8_t *w, size_t ws, int nr, const uint8_t *x, size_t xs,
                             int nt, float *out) {
    (void)K;
    const __m256i hi = _mm256_set1_epi32((int)0xffff0000u);
    const float *xt[4];
    for (int t = 0; t < 4; t++) xt[t] = (const float *)(x + (size_t)(t < nt ? t : 0) * xs);
    for (int r0 = 0; r0 < nr; r0 += 2) {
        const uint16_t *wr[2] = {(const uint16_t *)(w + (size_t)r0 * ws),
                                 (const uint16_t *)(w + (size_t)(r0 + 1 < nr ? r0 + 1 : r0) * ws)};
        __m256 acc[2][4];
        _Pragma("GCC unroll 2") for (int r = 0; r < 2; r++) _Pragma("GCC unroll 4") for (int t = 0; t < 4; t++)
            acc[r][t] = _mm256_setzero_ps();
        for (int k = k0; k < k1; k += 16) {
            __m256i d0 = _mm256_loadu_si256((const __m256i *)(wr[0] + k));
            __m256i d1 = _mm256_loadu_si256((const __m256i *)(wr[1] + k));
            __m256 e0 = _mm256_castsi256_ps(_mm256_slli_epi32(d0, 16));
            __m256 o0 = _mm256_castsi256_ps(_mm256_and_si256(d0, hi));
            __m256 e1 = _mm256_castsi256_ps(_mm256_slli_epi32(d1, 16));
            __m256 o1 = _mm256_castsi256_ps(_mm256_and_si256(d1, hi));
            _Pragma("GCC unroll 4") for (int t = 0; t < 4; t++) {
                __m256 xe = _mm256_loadu_ps(xt[t] + k), xo = _mm256_loadu_ps(xt[t] + k + 8);
                acc[0][t] = _mm256_fmadd_ps(o0, xo, _mm256_fmadd_ps(e0, xe, acc[0][t]));
                acc[1][t] = _mm256_fmadd_ps(o1, xo, _mm256_fmadd_ps(e1, xe, acc[1][t]));
            }
        }
        float res[2][4];
        _Pragma("GCC unroll 2") for (int r = 0; r < 2; r++) _Pragma("GCC unroll 4") for (int t = 0; t < 4; t++)
            res[r][t] = hsum(acc[r][t]);
        for (int r = 0; r < 2 && r0 + r < nr; r++)
            for (int t = 0; t < nt; t++) out[t * R1_CPU_MR + r0 + r] = res[r][t];
    }
}

/* ---- activations to q8 blocks (round to nearest even) ---- */
TGT void r1_x86_quant_q8_avx2(const float *x, uint8_t *dst, int K) {
    float *d = (float *)dst;
    int8_t *qs = (int8_t *)(dst + r1_cpu_q8_qoff(K));
    const __m256 sign = _mm256_set1_ps(-0.0f);
    const __m256i perm = _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7);
    for (int b = 0; b < K / 32; b++) {
        const float *xb = x + b * 32;
        __m256 v0 = _mm256_loadu_ps(xb), v1 = _mm256_loadu_ps(xb + 8);
        __m256 v2 = _mm256_loadu_ps(xb + 16), v3 = _mm256_loadu_ps(xb + 24);
        __m256 m = _mm256_max_ps(_mm256_max_ps(_mm256_andnot_ps(sign, v0), _mm256_andnot_ps(sign, v1)),
                                 _mm256_max_ps(_mm256_andnot_ps(sign, v2), _mm256_andnot_ps(sign, v3)));
        __m128 m4 = _mm_max_ps(_mm256_castps256_ps128(m), _mm256_extractf128_ps(m, 1));
        m4 = _mm_max_ps(m4, _mm_movehl_ps(m4, m4));
        m4 = _mm_max_ss(m4, _mm_movehdup_ps(m4));
        float amax = _mm_cvtss_f32(m4);
        float db = amax / 127.0f, id = db ? 1.0f / db : 0.0f;
        d[b] = db;
        __m256 s = _mm256_set1_ps(id);
        __m256i i0 = _mm256_cvtps_epi32(_mm256_mul_ps(v0, s));
        __m256i i1 = _mm256_cvtps_epi32(_mm256_mul_ps(v1, s));
        __m256i i2 = _mm256_cvtps_epi32(_mm256_mul_ps(v2, s));
        __m256i i3 = _mm256_cvtps_epi32(_mm256_mul_ps(v3, s));
        __m256i p = _mm256_packs_epi16(_mm256_packs_epi32(i0, i1), _mm256_packs_epi32(i2, i3));
        _mm256_storeu_si256((__m256i *)(qs + b * 32), _mm256_permutevar8x32_epi32(p, perm));
    }
}

/* Two-part activations (cpu.h r1_cpu_set_act_parts) in q8 form: hi = q8(x)
 * as above, lo = the residual r = x - d_hi q_hi (a multiply and a
 * subtraction, each rounded, as cpu.c's plain C) at the fixed scale d_hi /
 * 256, rounded to nearest even and clamped to [-127, 127]: the bits of
 * r1_cpu_quant_q8_lo_c, without the pass through memory. */
TGT void r1_x86_quant_q8_2_avx2(const float *x, uint8_t *hi, uint8_t *lo, int K) {
    r1_x86_quant_q8_avx2(x, hi, K);
    const size_t qoff = r1_cpu_q8_qoff(K);
    const float *dh = (const float *)hi;
    const int8_t *qh = (const int8_t *)(hi + qoff);
    float *dl = (float *)lo;
    int8_t *ql = (int8_t *)(lo + qoff);
    const __m256i perm = _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7), m127 = _mm256_set1_epi8(-127);
    for (int b = 0; b < K / 32; b++) {
        const float d = dh[b] * (1.0f / 256.0f), id = d ? 1.0f / d : 0.0f;
        dl[b] = d;
        const __m256 dv = _mm256_set1_ps(dh[b]), s = _mm256_set1_ps(id);
        __m256i i[4];
        _Pragma("GCC unroll 4") for (int j = 0; j < 4; j++) {
            const int k = 32 * b + 8 * j;
            __m256 q = _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_loadl_epi64((const __m128i *)(qh + k))));
            __m256 r = _mm256_sub_ps(_mm256_loadu_ps(x + k), _mm256_mul_ps(dv, q));
            i[j] = _mm256_cvtps_epi32(_mm256_mul_ps(r, s));
        }
        __m256i p = _mm256_packs_epi16(_mm256_packs_epi32(i[0], i[1]), _mm256_packs_epi32(i[2], i[3]));
        p = _mm256_max_epi8(_mm256_permutevar8x32_epi32(p, perm), m127);
        _mm256_storeu_si256((__m256i *)(ql + 32 * b), p);
    }
}

/* The sum of v's 32 signed bytes: vpsadbw on them biased by 128. */
INL int sum_i8(__m256i v) {
    __m256i s = _mm256_sad_epu8(_mm256_xor_si256(v, _mm256_set1_epi8(-128)), _mm256_setzero_si256());
    __m128i t = _mm_add_epi64(_mm256_castsi256_si128(s), _mm256_extracti128_si256(s, 1));
    return _mm_cvtsi128_si32(_mm_add_epi64(t, _mm_unpackhi_epi64(t, t))) - 32 * 128;
}
/* cpu.h r1_cpu_q8w_fold_c, the same bytes: each 32 quants widened to int16,
 * q_h x 256 + q_l, and (sums) fs = d_h s_h + d_l s_l, rounded as there. */
TGT void r1_x86_q8w_fold_avx2(const uint8_t *h, const uint8_t *l, uint8_t *dst, int K, int sums) {
    const size_t qoff = r1_cpu_q8_qoff(K);
    memcpy(dst, l ? l : h, (size_t)K / 32 * sizeof(float));
    const uint8_t *qh = h + qoff, *ql = l ? l + qoff : NULL;
    __m256i *q = (__m256i *)(dst + qoff);
    float *fs = (float *)(dst + r1_cpu_q8ws_foff(K));
    for (int b = 0; b < K / 32; b++) {
        const __m256i vh = _mm256_loadu_si256((const __m256i *)(qh + 32 * b));
        __m256i q0 = _mm256_cvtepi8_epi16(_mm256_castsi256_si128(vh));
        __m256i q1 = _mm256_cvtepi8_epi16(_mm256_extracti128_si256(vh, 1));
        __m256i vl = _mm256_setzero_si256();
        if (ql) {
            vl = _mm256_loadu_si256((const __m256i *)(ql + 32 * b));
            q0 = _mm256_add_epi16(_mm256_slli_epi16(q0, 8), _mm256_cvtepi8_epi16(_mm256_castsi256_si128(vl)));
            q1 = _mm256_add_epi16(_mm256_slli_epi16(q1, 8), _mm256_cvtepi8_epi16(_mm256_extracti128_si256(vl, 1)));
        }
        _mm256_storeu_si256(q + 2 * b, q0);
        _mm256_storeu_si256(q + 2 * b + 1, q1);
        if (sums) {
            fs[b] = ((const float *)h)[b] * (float)sum_i8(vh);
            if (ql) fs[b] += ((const float *)l)[b] * (float)sum_i8(vl);
        }
    }
}

/* ---- vector helpers for attention and the KV cache ---- */
TGT float r1_x86_dot_f32_avx2(const float *a, const float *b, int n) {
    __m256 s0 = _mm256_setzero_ps(), s1 = _mm256_setzero_ps();
    int i = 0;
    for (; i + 16 <= n; i += 16) {
        s0 = _mm256_fmadd_ps(_mm256_loadu_ps(a + i), _mm256_loadu_ps(b + i), s0);
        s1 = _mm256_fmadd_ps(_mm256_loadu_ps(a + i + 8), _mm256_loadu_ps(b + i + 8), s1);
    }
    for (; i + 8 <= n; i += 8) s0 = _mm256_fmadd_ps(_mm256_loadu_ps(a + i), _mm256_loadu_ps(b + i), s0);
    float s = hsum(_mm256_add_ps(s0, s1));
    for (; i < n; i++) s += a[i] * b[i];
    return s;
}
TGT float r1_x86_dot_f16_avx2(const float *a, const uint16_t *b, int n) {
    __m256 s0 = _mm256_setzero_ps(), s1 = _mm256_setzero_ps();
    int i = 0;
    for (; i + 16 <= n; i += 16) {
        s0 = _mm256_fmadd_ps(_mm256_loadu_ps(a + i), ld_f16((const uint8_t *)b, i), s0);
        s1 = _mm256_fmadd_ps(_mm256_loadu_ps(a + i + 8), ld_f16((const uint8_t *)b, i + 8), s1);
    }
    for (; i + 8 <= n; i += 8) s0 = _mm256_fmadd_ps(_mm256_loadu_ps(a + i), ld_f16((const uint8_t *)b, i), s0);
    float s = hsum(_mm256_add_ps(s0, s1));
    for (; i < n; i++) s += a[i] * _cvtsh_ss(b[i]);
    return s;
}
TGT void r1_x86_axpy_f32_avx2(float a, const float *x, float *y, int n) {
    __m256 av = _mm256_set1_ps(a);
    int i = 0;
    for (; i + 8 <= n; i += 8)
        _mm256_storeu_ps(y + i, _mm256_fmadd_ps(av, _mm256_loadu_ps(x + i), _mm256_loadu_ps(y + i)));
    for (; i < n; i++) y[i] += a * x[i];
}
TGT void r1_x86_axpy_f16_avx2(float a, const uint16_t *x, float *y, int n) {
    __m256 av = _mm256_set1_ps(a);
    int i = 0;
    for (; i + 8 <= n; i += 8)
        _mm256_storeu_ps(y + i, _mm256_fmadd_ps(av, ld_f16((const uint8_t *)x, i), _mm256_loadu_ps(y + i)));
    for (; i < n; i++) y[i] += a * _cvtsh_ss(x[i]);
}
TGT void r1_x86_f32_to_f16_avx2(const float *x, uint16_t *y, int n) {
    int i = 0;
    for (; i + 8 <= n; i += 8)
        _mm_storeu_si128((__m128i *)(y + i), _mm256_cvtps_ph(_mm256_loadu_ps(x + i), _MM_FROUND_TO_NEAREST_INT));
    for (; i < n; i++) y[i] = r1_f32_to_f16(x[i]);
}

/* The two tables differ only in how the quantized tiles multiply bytes
 * (and q8_0: without VNNI vpmaddwd on q8w activations, the two parts folded
 * in int16, q32_avx2.c). Batches of more than R1_CPU_PANEL_MIN_T tokens
 * take a panel GEMM (.batch_panel): gemm_avx2.c for every format, and the
 * integer one of gemm_q16_avx2.c (.panel_act R1_CPU_ACT_Q16: int16
 * activations and quants with vpmaddwd) for q8_0, q4_0 and, without VNNI,
 * q4_0x8 (with vpdpbusd its tiles are at least as fast in batches, so it
 * keeps them; without, the panel is faster). .pair_tile: the tile on
 * two-part pairs (cpu.h r1_cpu_mm.pair_tile), 1 or 2 tokens a call. Without
 * VNNI q4_K and q5_K widen their quants to int16 against q8ws activations
 * (both parts in one vpmaddwd, kquants_avx2.c), with VNNI vpdpbusd on q8s
 * pairs. */
#define AVX2_COMMON                                                                                                    \
    .quant_q8 = r1_x86_quant_q8_avx2, .quant_q8x8 = r1_x86_quant_q8x8_avx2, .quant_q16 = r1_x86_quant_q16_avx2,        \
    .quant_q8_2 = r1_x86_quant_q8_2_avx2, .quant_q8x8_2 = r1_x86_quant_q8x8_2_avx2, .q8w_fold = r1_x86_q8w_fold_avx2,  \
    .dot_f32 = r1_x86_dot_f32_avx2, .dot_f16 = r1_x86_dot_f16_avx2, .axpy_f32 = r1_x86_axpy_f32_avx2,                  \
    .axpy_f16 = r1_x86_axpy_f16_avx2, .f32_to_f16 = r1_x86_f32_to_f16_avx2, .f16_to_f32 = r1_x86_f16_to_f32_avx2,      \
    .attn_qk = r1_x86_attn_qk_avx2, .attn_pv = r1_x86_attn_pv_avx2, .attn_softmax = r1_x86_attn_softmax_avx2,          \
    .attn_qk_f16 = r1_x86_attn_qk_f16_avx2, .attn_pv_f16 = r1_x86_attn_pv_f16_avx2, .silu_mul = r1_x86_silu_mul_avx2,  \
    .q8_0_to_f32 = r1_x86_q8_0_to_f32_avx2, .attn_qk_q8 = r1_x86_attn_qk_q8_avx2, .attn_pv_q8 = r1_x86_attn_pv_q8_avx2

/* The float formats, the same in both tables */
#define AVX2_FLOAT_TILES                                                                                               \
    [R1_DTYPE_F32] = {R1_CPU_ACT_F32, tile_f32, .batch_panel = r1_x86_panel_avx2_f32},                                 \
    [R1_DTYPE_F16] = {R1_CPU_ACT_F32, tile_f16, .batch_panel = r1_x86_panel_avx2_f16},                                 \
    [R1_DTYPE_BF16] = {R1_CPU_ACT_F32EO32, tile_bf16, R1_CPU_ACT_F32EO, tile_bf16_eo,                                  \
                       .batch_panel = r1_x86_panel_avx2_bf16}

const struct r1_cpu_isa r1_cpu_avx2 = {
    .name = "avx2",
    .available = avx2_available,
    .mr = 4,
    .nt = 4,
    .mm =
        {
            AVX2_FLOAT_TILES,
            [R1_DTYPE_Q8_0] = {R1_CPU_ACT_Q8W, r1_x86_tile_q8_0_q8w_avx2, .batch_panel = r1_x86_panel_q16_avx2_q8_0,
                               .panel_act = R1_CPU_ACT_Q16},
            [R1_DTYPE_Q4_0] = {R1_CPU_ACT_Q8S, r1_x86_tile_q4_0_avx2, .batch_panel = r1_x86_panel_q16_avx2_q4_0,
                               .panel_act = R1_CPU_ACT_Q16, .pair_tile = r1_x86_tile_q4_0_pair_avx2, .pair_nt = 2},
            [R1_DTYPE_Q4_1] = {R1_CPU_ACT_Q8S, r1_x86_tile_q4_1_avx2, .batch_panel = r1_x86_panel_avx2_q4_1,
                               .pair_tile = r1_x86_tile_q4_1_pair_avx2, .pair_nt = 2},
            [R1_DTYPE_Q5_0] = {R1_CPU_ACT_Q8S, r1_x86_tile_q5_0_avx2, .batch_panel = r1_x86_panel_avx2_q5_0,
                               .pair_tile = r1_x86_tile_q5_0_pair_avx2, .pair_nt = 2},
            [R1_DTYPE_Q5_1] = {R1_CPU_ACT_Q8S, r1_x86_tile_q5_1_avx2, .batch_panel = r1_x86_panel_avx2_q5_1,
                               .pair_tile = r1_x86_tile_q5_1_pair_avx2, .pair_nt = 2},
            [R1_DTYPE_Q4_K] = {R1_CPU_ACT_Q8WS, r1_kq_tile_q4_K_q8ws_avx2, .batch_panel = r1_x86_panel_avx2_q4_K},
            [R1_DTYPE_Q5_K] = {R1_CPU_ACT_Q8WS, r1_kq_tile_q5_K_q8ws_avx2, .batch_panel = r1_x86_panel_avx2_q5_K},
            [R1_DTYPE_Q6_K] = {R1_CPU_ACT_Q8S, r1_kq_tile_q6_K_avx2, .batch_panel = r1_x86_panel_avx2_q6_K,
                               .pair_tile = r1_kq_tile_q6_K_pair_avx2, .pair_nt = 2},
            [R1_DTYPE_Q4_0X8] = {R1_CPU_ACT_Q8X8, r1_x86_tile_q4_0x8_avx2, .batch_panel = r1_x86_panel_q16_avx2_q4_0x8,
                                 .panel_act = R1_CPU_ACT_Q16, .pair_tile = r1_x86_tile_q4_0x8_pair_avx2, .pair_nt = 2},
            [R1_DTYPE_Q4_KX8] = {R1_CPU_ACT_Q8X8, r1_x86_tile_q4_Kx8_avx2, .batch_panel = r1_x86_panel_avx2_q4_Kx8,
                                 .pair_tile = r1_x86_tile_q4_Kx8_pair_avx2, .pair_nt = 2},
            [R1_DTYPE_Q6_KX8] = {R1_CPU_ACT_Q8X8, r1_kq_tile_q6_Kx8_avx2, .batch_panel = r1_x86_panel_avx2_q6_Kx8,
                                 .pair_tile = r1_kq_tile_q6_Kx8_pair_avx2, .pair_nt = 2},
        },
    AVX2_COMMON,
};

const struct r1_cpu_isa r1_cpu_avx2_vnni = {
    .name = "avx2-vnni",
    .available = avx2_vnni_available,
    .mr = 4,
    .nt = 4,
    .mm =
        {
            AVX2_FLOAT_TILES,
            [R1_DTYPE_Q8_0] = {R1_CPU_ACT_Q8, r1_x86_tile_q8_0_avx2vnni, .batch_panel = r1_x86_panel_q16_avx2_q8_0,
                               .panel_act = R1_CPU_ACT_Q16, .pair_tile = r1_x86_tile_q8_0_pair_avx2vnni, .pair_nt = 2},
            [R1_DTYPE_Q4_0] = {R1_CPU_ACT_Q8S, r1_x86_tile_q4_0_avx2vnni, .batch_panel = r1_x86_panel_q16_avx2_q4_0,
                               .panel_act = R1_CPU_ACT_Q16, .pair_tile = r1_x86_tile_q4_0_pair_avx2vnni, .pair_nt = 2},
            [R1_DTYPE_Q4_1] = {R1_CPU_ACT_Q8S, r1_x86_tile_q4_1_avx2vnni, .batch_panel = r1_x86_panel_avx2_q4_1,
                               .pair_tile = r1_x86_tile_q4_1_pair_avx2vnni, .pair_nt = 2},
            [R1_DTYPE_Q5_0] = {R1_CPU_ACT_Q8S, r1_x86_tile_q5_0_avx2vnni, .batch_panel = r1_x86_panel_avx2_q5_0,
                               .pair_tile = r1_x86_tile_q5_0_pair_avx2vnni, .pair_nt = 2},
            [R1_DTYPE_Q5_1] = {R1_CPU_ACT_Q8S, r1_x86_tile_q5_1_avx2vnni, .batch_panel = r1_x86_panel_avx2_q5_1,
                               .pair_tile = r1_x86_tile_q5_1_pair_avx2vnni, .pair_nt = 2},
            [R1_DTYPE_Q4_K] = {R1_CPU_ACT_Q8S, r1_kq_tile_q4_K_avx2vnni, .batch_panel = r1_x86_panel_avx2_q4_K,
                               .pair_tile = r1_kq_tile_q4_K_pair_avx2vnni, .pair_nt = 2},
            [R1_DTYPE_Q5_K] = {R1_CPU_ACT_Q8S, r1_kq_tile_q5_K_avx2vnni, .batch_panel = r1_x86_panel_avx2_q5_K,
                               .pair_tile = r1_kq_tile_q5_K_pair_avx2vnni, .pair_nt = 2},
            [R1_DTYPE_Q6_K] = {R1_CPU_ACT_Q8S, r1_kq_tile_q6_K_avx2vnni, .batch_panel = r1_x86_panel_avx2_q6_K,
                               .pair_tile = r1_kq_tile_q6_K_pair_avx2vnni, .pair_nt = 2},
            [R1_DTYPE_Q4_0X8] = {R1_CPU_ACT_Q8X8, r1_x86_tile_q4_0x8_avx2vnni, .batch_panel = NULL,
                                 .pair_tile = r1_x86_tile_q4_0x8_pair_avx2vnni, .pair_nt = 2},
            [R1_DTYPE_Q4_KX8] = {R1_CPU_ACT_Q8X8, r1_x86_tile_q4_Kx8_avx2vnni, .batch_panel = r1_x86_panel_avx2_q4_Kx8,
                                 .pair_tile = r1_x86_tile_q4_Kx8_pair_avx2vnni, .pair_nt = 2},
            [R1_DTYPE_Q6_KX8] = {R1_CPU_ACT_Q8X8, r1_kq_tile_q6_Kx8_avx2vnni, .batch_panel = r1_x86_panel_avx2_q6_Kx8,
                                 .pair_tile = r1_kq_tile_q6_Kx8_pair_avx2vnni, .pair_nt = 2},
        },
    AVX2_COMMON,
};

#endif /* __x86_64__ */
