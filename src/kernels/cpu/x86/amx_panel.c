/*
 * amx_panel.c - weight rows as bf16 panels for the AMX prefill blocks
 * (amx_blocks.h): K bf16 values a row in the natural column order the
 * activations have, in two parts hi + lo where one bf16 cannot hold the
 * weight (every format but bf16): hi = bf16(w), lo = bf16(w - hi), 16 of w's
 * significant bits, so a block's result keeps f32 precision (an f16 weight
 * is exactly hi + lo; a q8_0 one, d x q, has up to 19 bits and stays within
 * 2^-17 of w). Needs AVX512_BF16 (every AMX machine has it); runs on any CPU
 * with it, so it is tested where AMX is missing too. Also the regrouped
 * rows as f32 for the f32 panel GEMM (gemm_avx512.c).
 *
 * The regrouped layouts (dtype.h: q4_1x8, q8_0x8, q4_Kx8, q5_Kx8, q6_Kx8),
 * per 256-weight group: the quants as 4 vectors of unsigned bytes in lane
 * order (as the decode tiles load them), a scale a and offset b per 16
 * weights (w = a q + b), then per two blocks two vpermt2d and a blend put
 * the 64 quants in natural order, and per 16 weights one widening, a
 * conversion, an FMA. The row's plain tail (q4_1x8, q8_0x8) goes block by
 * block. A q4_K/q5_K/q6_K weight may differ from to_f32's by one f32
 * rounding.
 */
#include "kernels/cpu/cpu.h"

#if defined(__x86_64__)
#include <immintrin.h>
#include <string.h>

#include "kernels/cpu/x86/x86.h"
#include "util/util.h"

#define TGT_S "avx512f,avx512bw,avx512vl,avx512dq,avx512vnni,avx2,fma,f16c" /* the avx512 table's */
#define TGT_B TGT_S ",avx512bf16"
#define TGTS __attribute__((target(TGT_S)))
#define TGTB __attribute__((target(TGT_B)))
#define INL static inline __attribute__((always_inline, target(TGT_B)))
#define INLS static inline __attribute__((always_inline, target(TGT_S))) /* no bf16 needed */

static float h2f(const uint8_t *p) { return r1_f16_to_f32((uint16_t)(p[0] | p[1] << 8)); }

/* q4_K / q5_K 6-bit scale and min of sub-block s (quants.c's kq_scale_min) */
static void kq_scale_min(const uint8_t *sc12, int s, int *sc, int *m) {
    if (s < 4) {
        *sc = sc12[s] & 63;
        *m = sc12[s + 4] & 63;
    } else {
        *sc = (sc12[s + 4] & 0x0f) | ((sc12[s - 4] >> 6) << 4);
        *m = (sc12[s + 4] >> 4) | ((sc12[s] >> 6) << 4);
    }
}

/* One group of 256 weights at g: quants in lane order (q[p], unsigned
 * bytes) and a[c], b[c] for the 16 chunks c = 2 * block + half. */
INLS void group_unpack(enum r1_dtype dt, const uint8_t *g, __m512i *q, float *a, float *b) {
    const __m512i lo4 = _mm512_set1_epi8(0x0f);
    if (dt == R1_DTYPE_Q8_0X8) {
        for (int p = 0; p < 4; p++) q[p] = _mm512_loadu_si512(g + 16 + 64 * p);
        for (int k = 0; k < 8; k++) {
            float d = h2f(g + 2 * k);
            a[2 * k] = a[2 * k + 1] = d, b[2 * k] = b[2 * k + 1] = -128.0f * d;
        }
        return;
    }
    const uint8_t *qs = g + (dt == R1_DTYPE_Q4_1X8 ? 32 : dt == R1_DTYPE_Q4_KX8 ? 16 : dt == R1_DTYPE_Q5_KX8 ? 48 : 0);
    __m512i q0 = _mm512_loadu_si512(qs), q1 = _mm512_loadu_si512(qs + 64);
    q[0] = _mm512_and_si512(q0, lo4), q[2] = _mm512_and_si512(_mm512_srli_epi16(q0, 4), lo4);
    q[1] = _mm512_and_si512(q1, lo4), q[3] = _mm512_and_si512(_mm512_srli_epi16(q1, 4), lo4);
    if (dt == R1_DTYPE_Q4_1X8) {
        for (int k = 0; k < 8; k++) {
            a[2 * k] = a[2 * k + 1] = h2f(g + 2 * k);
            b[2 * k] = b[2 * k + 1] = h2f(g + 16 + 2 * k);
        }
        return;
    }
    if (dt == R1_DTYPE_Q6_KX8) {
        const __m512i c30 = _mm512_set1_epi8(0x30);
        __m512i h = _mm512_loadu_si512(g + 128);
        q[0] = _mm512_ternarylogic_epi32(q[0], _mm512_slli_epi16(h, 4), c30, 0xF8);
        q[1] = _mm512_ternarylogic_epi32(q[1], _mm512_slli_epi16(h, 2), c30, 0xF8);
        q[2] = _mm512_ternarylogic_epi32(q[2], h, c30, 0xF8);
        q[3] = _mm512_ternarylogic_epi32(q[3], _mm512_srli_epi16(h, 2), c30, 0xF8);
        float d = h2f(g + 208);
        for (int c = 0; c < 16; c++) {
            a[c] = d * (float)(int8_t)g[192 + c];
            b[c] = -32.0f * a[c];
        }
        return;
    }
    if (dt == R1_DTYPE_Q5_KX8) {
        const __m512i c16 = _mm512_set1_epi8(16);
        for (int p = 0; p < 4; p++) {
            uint64_t mk;
            memcpy(&mk, g + 16 + 8 * p, 8);
            q[p] = _mm512_mask_add_epi8(q[p], (__mmask64)mk, q[p], c16);
        }
    }
    float d = h2f(g), dmin = h2f(g + 2);
    for (int s = 0; s < 8; s++) {
        int sc, m;
        kq_scale_min(g + 4, s, &sc, &m);
        a[2 * s] = a[2 * s + 1] = d * (float)sc;
        b[2 * s] = b[2 * s + 1] = -(dmin * (float)m);
    }
}

/* 32 weights a q + b (16 chunk c, c + 1) of the natural-order bytes in the
 * 128-bit halves h of v, in two bf16 parts into o and olo */
INL void deq32(__m512i v, int h, const float *a, const float *b, int c, uint16_t *o, uint16_t *olo) {
    __m512 f0, f1;
    if (h == 0) { /* extract's index must be a constant */
        f0 = _mm512_cvtepi32_ps(_mm512_cvtepu8_epi32(_mm512_extracti32x4_epi32(v, 0)));
        f1 = _mm512_cvtepi32_ps(_mm512_cvtepu8_epi32(_mm512_extracti32x4_epi32(v, 1)));
    } else {
        f0 = _mm512_cvtepi32_ps(_mm512_cvtepu8_epi32(_mm512_extracti32x4_epi32(v, 2)));
        f1 = _mm512_cvtepi32_ps(_mm512_cvtepu8_epi32(_mm512_extracti32x4_epi32(v, 3)));
    }
    f0 = _mm512_fmadd_ps(f0, _mm512_set1_ps(a[c]), _mm512_set1_ps(b[c]));
    f1 = _mm512_fmadd_ps(f1, _mm512_set1_ps(a[c + 1]), _mm512_set1_ps(b[c + 1]));
    r1_x86_bf16_split_store(f0, f1, o, olo);
}

/* a plain q4_1 / q8_0 block of the row's tail as 32 bf16 in two parts */
INL void tail_block(enum r1_dtype dt, const uint8_t *p, uint16_t *o, uint16_t *olo) {
    __m512 lo, hi;
    if (dt == R1_DTYPE_Q8_0X8) {
        __m512 d = _mm512_set1_ps(h2f(p));
        __m256i q = _mm256_loadu_si256((const __m256i *)(p + 2));
        lo = _mm512_mul_ps(d, _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(_mm256_castsi256_si128(q))));
        hi = _mm512_mul_ps(d, _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(_mm256_extracti128_si256(q, 1))));
    } else {
        __m512 d = _mm512_set1_ps(h2f(p)), m = _mm512_set1_ps(h2f(p + 2));
        __m128i q = _mm_loadu_si128((const __m128i *)(p + 4)), m4 = _mm_set1_epi8(0x0f);
        __m128i ql = _mm_and_si128(q, m4), qh = _mm_and_si128(_mm_srli_epi16(q, 4), m4);
        lo = _mm512_fmadd_ps(d, _mm512_cvtepi32_ps(_mm512_cvtepu8_epi32(ql)), m);
        hi = _mm512_fmadd_ps(d, _mm512_cvtepi32_ps(_mm512_cvtepu8_epi32(qh)), m);
    }
    r1_x86_bf16_split_store(lo, hi, o, olo);
}

/* natural dword n of block 2j + L / 8 at output lane L sits in vector
 * 2 (n / 4) + (n % 4) / 2, lane 2j + L / 8 + 8 (n % 2); vpermt2d over the
 * vector pair (0,1) or (2,3): index 16 ((n % 4) / 2) + that lane */
INLS __m512i natural_idx(void) {
    int base[16];
    for (int L = 0; L < 16; L++) {
        int n = L % 8 % 4;
        base[L] = 16 * (n / 2) + L / 8 + 8 * (n % 2);
    }
    return _mm512_loadu_si512(base);
}
/* blocks 2j and 2j + 1 of a group unpacked by group_unpack, 64 bytes in
 * natural order (natural_idx() as idx0) */
INLS __m512i blocks_natural(const __m512i *q, __m512i idx0, int j) {
    __m512i idx = _mm512_add_epi32(idx0, _mm512_set1_epi32(2 * j));
    __m512i v01 = _mm512_permutex2var_epi32(q[0], idx, q[1]);
    __m512i v23 = _mm512_permutex2var_epi32(q[2], idx, q[3]);
    return _mm512_mask_blend_epi32(0xF0F0, v01, v23);
}

/* 16 weights a q + b of the 16 bytes in x, as f32 (x: a 128-bit quarter of
 * blocks_natural's vector; the quarter index must be a constant for clang) */
INLS void deq16f(__m128i x, float a, float b, float *o) {
    __m512 f = _mm512_cvtepi32_ps(_mm512_cvtepu8_epi32(x));
    _mm512_storeu_ps(o, _mm512_fmadd_ps(f, _mm512_set1_ps(a), _mm512_set1_ps(b)));
}

TGTS void r1_x86_x8_row_f32(enum r1_dtype dt, const uint8_t *row, int k0, int k1, float *dst) {
    const size_t gb = r1_dtype_traits[dt].block_size;
    const __m512i idx0 = natural_idx();
    for (int k = k0; k < k1; k += 256, dst += 256) {
        __m512i q[4];
        float a[16], b[16];
        group_unpack(dt, row + (size_t)(k / 256) * gb, q, a, b);
        for (int j = 0; j < 4; j++) { /* blocks 2j, 2j + 1: chunks 4j .. 4j + 3 */
            __m512i v = blocks_natural(q, idx0, j);
            deq16f(_mm512_extracti32x4_epi32(v, 0), a[4 * j], b[4 * j], dst + 64 * j);
            deq16f(_mm512_extracti32x4_epi32(v, 1), a[4 * j + 1], b[4 * j + 1], dst + 64 * j + 16);
            deq16f(_mm512_extracti32x4_epi32(v, 2), a[4 * j + 2], b[4 * j + 2], dst + 64 * j + 32);
            deq16f(_mm512_extracti32x4_epi32(v, 3), a[4 * j + 3], b[4 * j + 3], dst + 64 * j + 48);
        }
    }
}

static TGTB void x8_rows(enum r1_dtype dt, const uint8_t *w, size_t ws, int nr, int K, int ps, uint16_t *dst,
                         uint16_t *dlo) {
    const size_t gb = dt == R1_DTYPE_Q4_1X8 ? 160 : dt == R1_DTYPE_Q8_0X8 ? 272 : r1_dtype_traits[dt].block_size;
    const size_t tbs = dt == R1_DTYPE_Q4_1X8 ? 20 : 34; /* a plain tail block */
    const __m512i idx0 = natural_idx();
    for (int r = 0; r < nr; r++) {
        const uint8_t *row = w + (size_t)r * ws;
        uint16_t *o = dst + (size_t)r * ps, *ol = dlo + (size_t)r * ps;
        int k = 0;
        for (; k + 256 <= K; k += 256) {
            __m512i q[4];
            float a[16], b[16];
            group_unpack(dt, row + (size_t)(k / 256) * gb, q, a, b);
            for (int j = 0; j < 4; j++) { /* blocks 2j, 2j + 1 */
                __m512i v = blocks_natural(q, idx0, j);
                deq32(v, 0, a, b, 4 * j, o + k + 64 * j, ol + k + 64 * j);
                deq32(v, 1, a, b, 4 * j + 2, o + k + 64 * j + 32, ol + k + 64 * j + 32);
            }
        }
        for (const uint8_t *p = row + (size_t)(k / 256) * gb; k < K; k += 32, p += tbs)
            tail_block(dt, p, o + k, ol + k);
    }
}

/* GGUF's q8_0 and q4_0 blocks (q4_0 also regrouped eight blocks at a time:
 * dwords j = 0..3 of block b at 32-bit offsets 16 (j / 2) + 8 (j % 2) + b) */
static TGTB void q32_rows(enum r1_dtype dt, const uint8_t *w, size_t ws, int nr, int K, int ps, uint16_t *dst,
                          uint16_t *dlo) {
    const __m128i m4 = _mm_set1_epi8(0x0f), e8 = _mm_set1_epi8(8), idx = _mm_set_epi32(24, 16, 8, 0);
    for (int r = 0; r < nr; r++) {
        const uint8_t *row = w + (size_t)r * ws;
        for (int k = 0; k < K; k += 32) {
            float d;
            __m128i ql, qh;
            if (dt == R1_DTYPE_Q8_0) {
                const struct r1_block_q8_0 *b = (const struct r1_block_q8_0 *)row + k / 32;
                __m256i q = _mm256_loadu_si256((const __m256i *)b->qs);
                d = r1_f16_to_f32(b->d), ql = _mm256_castsi256_si128(q), qh = _mm256_extracti128_si256(q, 1);
            } else {
                __m128i q;
                if (dt == R1_DTYPE_Q4_0) {
                    const struct r1_block_q4_0 *b = (const struct r1_block_q4_0 *)row + k / 32;
                    d = r1_f16_to_f32(b->d), q = _mm_loadu_si128((const __m128i *)b->qs);
                } else {
                    const struct r1_block_q4_0x8 *x = (const struct r1_block_q4_0x8 *)row + k / 256;
                    const int b = k / 32 % 8;
                    d = r1_f16_to_f32(x->d[b]), q = _mm_i32gather_epi32((const int *)x->qs + b, idx, 4);
                }
                ql = _mm_sub_epi8(_mm_and_si128(q, m4), e8);
                qh = _mm_sub_epi8(_mm_and_si128(_mm_srli_epi16(q, 4), m4), e8);
            }
            __m512 dv = _mm512_set1_ps(d); /* d q is exact in f32: 11 x 8 bits */
            r1_x86_bf16_split_store(_mm512_mul_ps(dv, _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(ql))),
                                    _mm512_mul_ps(dv, _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(qh))),
                                    dst + (size_t)r * ps + k, dlo + (size_t)r * ps + k);
        }
    }
}

/* f16 weights: an f16 (11 significant bits) is exactly hi + lo in bf16 */
static TGTB void f16_rows(const uint8_t *w, size_t ws, int nr, int K, int ps, uint16_t *dst, uint16_t *dlo) {
    for (int r = 0; r < nr; r++) {
        const uint16_t *src = (const uint16_t *)(w + (size_t)r * ws);
        for (int k = 0; k < K; k += 32)
            r1_x86_bf16_split_store(_mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(src + k))),
                                    _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(src + k + 16))),
                                    dst + (size_t)r * ps + k, dlo + (size_t)r * ps + k);
    }
}

/* The activations of the AMX sets (cpu.h quant_bf16, vnni_parts) */
TGTB void r1_x86_quant_bf16(const float *x, uint16_t *dst, int K) {
    for (int k = 0; k < K; k += 16) {
        __mmask16 m = K - k >= 16 ? (__mmask16)0xffff : (__mmask16)((1u << (K - k)) - 1);
        __m256bh v = _mm512_cvtneps_pbh(_mm512_maskz_loadu_ps(m, x + k));
        _mm256_mask_storeu_epi16(dst + k, m, (__m256i)v);
    }
}
/* Per 16 tokens and 32 columns: each token's three parts as 16 column
 * pairs in a vector, then a transpose per part puts pair kk of the 16
 * tokens in row kk. */
TGTB void r1_x86_vnni_parts(const float *x, int T, int K, uint8_t *v, size_t plane) {
    const int nc = K / 32;
    for (int g = 0; g < (T + 15) / 16; g++)
        for (int c = 0; c < nc; c++) {
            __m512 p[3][16], col[16];
            for (int j = 0; j < 16; j++) {
                if (g * 16 + j >= T) {
                    p[0][j] = p[1][j] = p[2][j] = _mm512_setzero_ps();
                    continue;
                }
                const float *xr = x + (size_t)(g * 16 + j) * K + c * 32;
                const __m512 a = _mm512_loadu_ps(xr), b = _mm512_loadu_ps(xr + 16);
                __m512 a0, b0, a1, b1;
                const __m512i h0 = (__m512i)_mm512_cvtne2ps_pbh(b, a);
                r1_x86_bf16_widen(h0, &a0, &b0);
                const __m512 ra = _mm512_sub_ps(a, a0), rb = _mm512_sub_ps(b, b0);
                const __m512i h1 = (__m512i)_mm512_cvtne2ps_pbh(rb, ra);
                r1_x86_bf16_widen(h1, &a1, &b1);
                const __m512i h2 = (__m512i)_mm512_cvtne2ps_pbh(_mm512_sub_ps(rb, b1), _mm512_sub_ps(ra, a1));
                p[0][j] = _mm512_castsi512_ps(h0), p[1][j] = _mm512_castsi512_ps(h1);
                p[2][j] = _mm512_castsi512_ps(h2);
            }
            for (int q = 0; q < 3; q++) {
                float *d = (float *)(v + (size_t)q * plane + ((size_t)g * nc + c) * 1024);
                r1_x86_transpose16(p[q], col);
                for (int kk = 0; kk < 16; kk++) _mm512_storeu_ps(d + 16 * kk, col[kk]);
            }
        }
}

int r1_x86_amx_panel(enum r1_dtype dt, const uint8_t *w, size_t ws, int nr, int K, int ps, uint16_t *hi, uint16_t *lo) {
    if (ps < K) return -1;
    if (K % 32) return -1;
    switch ((int)dt) { /* int: the x8 layouts lie past the public enum */
    case R1_DTYPE_BF16:
        for (int r = 0; r < nr; r++) memcpy(hi + (size_t)r * ps, w + (size_t)r * ws, (size_t)K * 2);
        return 0;
    case R1_DTYPE_F16:
        f16_rows(w, ws, nr, K, ps, hi, lo);
        return 0;
    case R1_DTYPE_Q8_0:
    case R1_DTYPE_Q4_0:
    case R1_DTYPE_Q4_0X8:
        if (dt == R1_DTYPE_Q4_0X8 && K % 256) return -1;
        q32_rows(dt, w, ws, nr, K, ps, hi, lo);
        return 0;
    case R1_DTYPE_Q4_1X8:
    case R1_DTYPE_Q8_0X8:
    case R1_DTYPE_Q4_KX8:
    case R1_DTYPE_Q5_KX8:
    case R1_DTYPE_Q6_KX8:
        if (K % r1_dtype_traits[dt].block) return -1;
        x8_rows(dt, w, ws, nr, K, ps, hi, lo);
        return 0;
    default:
        return -1;
    }
}

#endif /* __x86_64__ */
