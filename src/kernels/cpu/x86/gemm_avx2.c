/*
 * gemm_avx2.c - batches (prefill, more than R1_CPU_PANEL_MIN_T tokens) on
 * AVX2 + FMA for every weight format through one f32 GEMM (cpu.h
 * r1_cpu_panel_fn). Per block of up to 64 weight rows and slice of KP = 512
 * columns, the weights are dequantized once to f32 into a panel (128 KiB,
 * in L2) that stores each group of 16 rows column by column (16 floats per
 * column: two ymm); then a register-blocked FMA kernel multiplies it with the
 * tokens' f32 activations, 16 rows x 6 tokens per pass in 12 ymm
 * accumulators, each activation one broadcast from memory. The activations
 * stay f32 (no per-token quantization, no horizontal sums), so integer
 * formats get f32-exact products of their dequantized weights.
 *
 * Dequantization: a row's slice goes to f32 in a 16-row staging buffer (in
 * L1), each format with its own AVX2 loop, then 8x8 transposes move it into
 * the panel. Must not: allocate (thread scratch slot 2), or read activations
 * past column K of a token. x86-64 only; target attributes, never -mavx2.
 */
#include "kernels/cpu/cpu.h"

#if defined(__x86_64__)
#include <string.h>

#include "kernels/cpu/x86/avx2_dot.h"
#include "kernels/cpu/x86/x86.h"
#include "kernels/dtype.h"

#define TGT __attribute__((target(R1_AVX2_TGT)))
#define INL R1_AVX2_INL

#define KP 512    /* columns per panel slice */
#define GR 16     /* rows per group (two ymm) */
#define NTP 6     /* tokens per pass */
#define PF_ROWS 2 /* rows fetched ahead while dequantizing */

/* A row's columns [k0, k1) as f32 into dst (k0 a multiple of 512, k1 of the
 * format's block or K). */
typedef void (*deq_fn)(const uint8_t *row, int k0, int k1, float *dst);

INL uint16_t u16(const uint8_t *p) {
    uint16_t v;
    memcpy(&v, p, 2);
    return v;
}
INL uint32_t u32(const uint8_t *p) {
    uint32_t v;
    memcpy(&v, p, 4);
    return v;
}
INL float f16(const uint8_t *p) { return _cvtsh_ss(u16(p)); }

/* 8 unsigned bytes (the low 8 of b) as d q + m */
INL void put8(float *dst, __m128i b, __m256 d, __m256 m) {
    _mm256_storeu_ps(dst, _mm256_fmadd_ps(_mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(b)), d, m));
}
INL void put16(float *dst, __m128i b, __m256 d, __m256 m) {
    put8(dst, b, d, m);
    put8(dst + 8, _mm_srli_si128(b, 8), d, m);
}
INL void put32(float *dst, __m256i b, __m256 d, __m256 m) {
    put16(dst, _mm256_castsi256_si128(b), d, m);
    put16(dst + 16, _mm256_extracti128_si256(b, 1), d, m);
}

/* ---- float formats (also the AVX-512 panel's: x86.h) ---- */
TGT void r1_x86_row_f32_f32(const uint8_t *row, int k0, int k1, float *dst) {
    memcpy(dst, (const float *)row + k0, (size_t)(k1 - k0) * sizeof(float));
}
TGT void r1_x86_row_f16_f32(const uint8_t *row, int k0, int k1, float *dst) {
    const uint16_t *p = (const uint16_t *)row;
    int k = k0;
    for (; k + 8 <= k1; k += 8)
        _mm256_storeu_ps(dst + k - k0, _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(p + k))));
    for (; k < k1; k++) dst[k - k0] = _cvtsh_ss(p[k]);
}
TGT void r1_x86_row_bf16_f32(const uint8_t *row, int k0, int k1, float *dst) {
    const uint16_t *p = (const uint16_t *)row;
    int k = k0;
    for (; k + 8 <= k1; k += 8) {
        __m256i v = _mm256_cvtepu16_epi32(_mm_loadu_si128((const __m128i *)(p + k)));
        _mm256_storeu_si256((__m256i *)(dst + k - k0), _mm256_slli_epi32(v, 16));
    }
    for (; k < k1; k++) {
        uint32_t b = (uint32_t)p[k] << 16;
        memcpy(dst + k - k0, &b, 4);
    }
}

/* ---- 32-weight blocks ---- */
static TGT void deq_q8_0(const uint8_t *row, int k0, int k1, float *dst) {
    const __m256 z = _mm256_setzero_ps();
    for (int b = k0 / 32; b < k1 / 32; b++, dst += 32) {
        const uint8_t *p = row + (size_t)b * 34;
        __m256 d = _mm256_set1_ps(f16(p));
        _Pragma("GCC unroll 4") for (int i = 0; i < 4; i++) {
            __m256i q = _mm256_cvtepi8_epi32(_mm_loadl_epi64((const __m128i *)(p + 2 + 8 * i)));
            _mm256_storeu_ps(dst + 8 * i, _mm256_fmadd_ps(_mm256_cvtepi32_ps(q), d, z));
        }
    }
}
/* q4_0, q4_1, q5_0, q5_1 (DT: bytes per block): 16 bytes of nibbles at qs
 * (low: weights 0..15, high: 16..31), q5's fifth bits from qh */
#define Q40 18
#define Q41 20
#define Q50 22
#define Q51 24
INL void deq_q32(const int DT, const uint8_t *row, int k0, int k1, float *dst) {
    const __m128i m4 = _mm_set1_epi8(0x0f);
    for (int b = k0 / 32; b < k1 / 32; b++, dst += 32) {
        const uint8_t *p = row + (size_t)b * DT;
        const int qso = DT == Q40 ? 2 : DT == Q41 ? 4 : DT == Q50 ? 6 : 8;
        __m128i v = _mm_loadu_si128((const __m128i *)(p + qso));
        __m128i lo = _mm_and_si128(v, m4), hi = _mm_and_si128(_mm_srli_epi16(v, 4), m4);
        if (DT == Q50 || DT == Q51) { /* bit j of qh -> 16 in weight j */
            uint32_t qh = u32(p + (DT == Q50 ? 2 : 4));
            const __m128i bit = _mm_set1_epi64x((long long)0x8040201008040201ull);
            const __m128i sp0 = _mm_setr_epi8(0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1);
            const __m128i sp1 = _mm_setr_epi8(2, 2, 2, 2, 2, 2, 2, 2, 3, 3, 3, 3, 3, 3, 3, 3);
            __m128i h = _mm_set1_epi32((int)qh);
            __m128i h0 = _mm_cmpeq_epi8(_mm_and_si128(_mm_shuffle_epi8(h, sp0), bit), bit);
            __m128i h1 = _mm_cmpeq_epi8(_mm_and_si128(_mm_shuffle_epi8(h, sp1), bit), bit);
            lo = _mm_or_si128(lo, _mm_and_si128(h0, _mm_set1_epi8(0x10)));
            hi = _mm_or_si128(hi, _mm_and_si128(h1, _mm_set1_epi8(0x10)));
        }
        float d = f16(p);
        float m = DT == Q40 ? -8.0f * d : DT == Q50 ? -16.0f * d : f16(p + 2);
        __m256 dv = _mm256_set1_ps(d), mv = _mm256_set1_ps(m);
        put16(dst, lo, dv, mv);
        put16(dst + 16, hi, dv, mv);
    }
}
static TGT void deq_q4_0(const uint8_t *r, int k0, int k1, float *d) { deq_q32(Q40, r, k0, k1, d); }
static TGT void deq_q4_1(const uint8_t *r, int k0, int k1, float *d) { deq_q32(Q41, r, k0, k1, d); }
static TGT void deq_q5_0(const uint8_t *r, int k0, int k1, float *d) { deq_q32(Q50, r, k0, k1, d); }
static TGT void deq_q5_1(const uint8_t *r, int k0, int k1, float *d) { deq_q32(Q51, r, k0, k1, d); }

/* q4_K's 6-bit scales and mins of sub-blocks 0..7 (quants.c has the layout):
 * w = sc[s] q + mn[s] */
INL void kq_scale_min(const uint8_t *s12, float d, float dmin, float *sc, float *mn) {
    for (int s = 0; s < 8; s++) {
        int a, m;
        if (s < 4) a = s12[s] & 63, m = s12[s + 4] & 63;
        else a = (s12[s + 4] & 0x0f) | ((s12[s - 4] >> 6) << 4), m = (s12[s + 4] >> 4) | ((s12[s] >> 6) << 4);
        sc[s] = d * (float)a;
        mn[s] = -dmin * (float)m;
    }
}
/* q4_0x8 and q4_Kx8 (dtype.h): per 256 columns 16 bytes of scales, then
 * 32-byte groups j = 0..3 whose lane b is dword j of block (sub-block) b's
 * 16 nibble bytes; a 4x4 dword transpose per 128-bit half gives blocks b
 * and b + 4 whole. KQ: q4_Kx8 (w = d sc q - dmin m), else q4_0x8 (w = d (q - 8)). */
INL void deq_x8(const int KQ, const uint8_t *row, int k0, int k1, float *dst) {
    const __m128i m4 = _mm_set1_epi8(0x0f);
    for (int s = k0 / 256; s < k1 / 256; s++, dst += 256) {
        const uint8_t *p = row + (size_t)s * 144;
        __m256i q0 = _mm256_loadu_si256((const __m256i *)(p + 16)), q1 = _mm256_loadu_si256((const __m256i *)(p + 48)),
                q2 = _mm256_loadu_si256((const __m256i *)(p + 80)), q3 = _mm256_loadu_si256((const __m256i *)(p + 112));
        __m256i a = _mm256_unpacklo_epi32(q0, q1), b = _mm256_unpacklo_epi32(q2, q3);
        __m256i c = _mm256_unpackhi_epi32(q0, q1), e = _mm256_unpackhi_epi32(q2, q3);
        __m256i blk[4] = {_mm256_unpacklo_epi64(a, b), _mm256_unpackhi_epi64(a, b), _mm256_unpacklo_epi64(c, e),
                          _mm256_unpackhi_epi64(c, e)};
        _Alignas(32) float dv[8], mv[8];
        if (KQ) {
            kq_scale_min(p + 4, f16(p), f16(p + 2), dv, mv);
        } else {
            _mm256_store_ps(dv, _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)p)));
            _mm256_store_ps(mv, _mm256_mul_ps(_mm256_load_ps(dv), _mm256_set1_ps(-8.0f)));
        }
        _Pragma("GCC unroll 4") for (int i = 0; i < 4; i++) {
            _Pragma("GCC unroll 2") for (int h = 0; h < 2; h++) {
                const int bi = i + 4 * h; /* block */
                __m128i v = h ? _mm256_extracti128_si256(blk[i], 1) : _mm256_castsi256_si128(blk[i]);
                __m256 d = _mm256_set1_ps(dv[bi]), m = _mm256_set1_ps(mv[bi]);
                put16(dst + 32 * bi, _mm_and_si128(v, m4), d, m);
                put16(dst + 32 * bi + 16, _mm_and_si128(_mm_srli_epi16(v, 4), m4), d, m);
            }
        }
    }
}
static TGT void deq_q4_0x8(const uint8_t *r, int k0, int k1, float *d) { deq_x8(0, r, k0, k1, d); }
static TGT void deq_q4_Kx8(const uint8_t *r, int k0, int k1, float *d) { deq_x8(1, r, k0, k1, d); }

/* ---- K-quants (quants.c has the layouts) ---- */
INL void deq_kq45(const int Q5, const uint8_t *row, int k0, int k1, float *dst) {
    const size_t bs = Q5 ? 176 : 144;
    const __m256i m4 = _mm256_set1_epi8(0x0f), b4 = _mm256_set1_epi8(0x10);
    for (int s = k0 / 256; s < k1 / 256; s++, dst += 256) {
        const uint8_t *p = row + (size_t)s * bs, *qs = p + (Q5 ? 48 : 16);
        float sc[8], mn[8];
        kq_scale_min(p + 4, f16(p), f16(p + 2), sc, mn);
        __m256i qh = Q5 ? _mm256_loadu_si256((const __m256i *)(p + 16)) : _mm256_setzero_si256();
        _Pragma("GCC unroll 4") for (int j = 0; j < 4; j++) {
            __m256i q = _mm256_loadu_si256((const __m256i *)(qs + 32 * j));
            __m256i lo = _mm256_and_si256(q, m4), hi = _mm256_and_si256(_mm256_srli_epi16(q, 4), m4);
            if (Q5) { /* bit s of qh[l] -> 16 in weight l of sub-block s */
                lo = _mm256_or_si256(lo, _mm256_and_si256(_mm256_slli_epi16(qh, 4), b4));
                hi = _mm256_or_si256(hi, _mm256_and_si256(_mm256_slli_epi16(qh, 3), b4));
                qh = _mm256_srli_epi16(qh, 2);
            }
            put32(dst + 64 * j, lo, _mm256_set1_ps(sc[2 * j]), _mm256_set1_ps(mn[2 * j]));
            put32(dst + 64 * j + 32, hi, _mm256_set1_ps(sc[2 * j + 1]), _mm256_set1_ps(mn[2 * j + 1]));
        }
    }
}
static TGT void deq_q4_K(const uint8_t *r, int k0, int k1, float *d) { deq_kq45(0, r, k0, k1, d); }
static TGT void deq_q5_K(const uint8_t *r, int k0, int k1, float *d) { deq_kq45(1, r, k0, k1, d); }

/* q6_K: columns 32g..32g+31 (h = g / 4, r = g % 4) take the nibble r / 2 of
 * ql[64h + 32(r % 2) ..] and bits 2r of qh[32h ..]; scales per 16 columns */
static TGT void deq_q6_K(const uint8_t *row, int k0, int k1, float *dst) {
    const __m256i m4 = _mm256_set1_epi8(0x0f), m3 = _mm256_set1_epi8(0x03);
    for (int s = k0 / 256; s < k1 / 256; s++, dst += 256) {
        const uint8_t *p = row + (size_t)s * 210;
        const int8_t *sc8 = (const int8_t *)(p + 192);
        const float d = f16(p + 208);
        _Pragma("GCC unroll 2") for (int h = 0; h < 2; h++) {
            __m256i qh = _mm256_loadu_si256((const __m256i *)(p + 128 + 32 * h));
            _Pragma("GCC unroll 4") for (int r = 0; r < 4; r++) {
                const int g = 4 * h + r;
                __m256i ql = _mm256_loadu_si256((const __m256i *)(p + 64 * h + 32 * (r % 2)));
                if (r >= 2) ql = _mm256_srli_epi16(ql, 4);
                __m256i q = _mm256_or_si256(_mm256_and_si256(ql, m4),
                                            _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(qh, 2 * r), m3), 4));
                float s0 = d * (float)sc8[2 * g], s1 = d * (float)sc8[2 * g + 1];
                put16(dst + 32 * g, _mm256_castsi256_si128(q), _mm256_set1_ps(s0), _mm256_set1_ps(-32.0f * s0));
                put16(dst + 32 * g + 16, _mm256_extracti128_si256(q, 1), _mm256_set1_ps(s1),
                      _mm256_set1_ps(-32.0f * s1));
            }
        }
    }
}

/* ---- the panel ---- */
/* 8 rows of 8 floats (src, row stride ss) transposed: column j to dst + j * GR */
#define tr8(src, ss, dst) r1_x86_tr8((src), (ss), (dst), GR)

/* q6_Kx8 (dtype.h): the quants rebuilt into the q8x8 activation vectors m
 * = 0..7 (avx2_dot.h r1_avx2_q6x8_quants; lane b: quants 4m .. 4m + 3 of group b),
 * then an 8x8 dword transpose (tr8) gives each group's 32 quants in order;
 * scales per 16 columns, w = d sc (q - 32) */
static TGT void deq_q6_Kx8(const uint8_t *row, int k0, int k1, float *dst) {
    _Alignas(32) float vm[8 * 8], gq[8 * GR];
    for (int s = k0 / 256; s < k1 / 256; s++, dst += 256) {
        const uint8_t *p = row + (size_t)s * 210;
        _Pragma("GCC unroll 8") for (int m = 0; m < 8; m++)
            _mm256_store_si256((__m256i *)(vm + 8 * m), r1_avx2_q6x8_quants(p, m));
        tr8(vm, 8, gq); /* group b's quants at gq + GR b */
        const int8_t *sc8 = (const int8_t *)(p + 192);
        const float d = f16(p + 208);
        for (int b = 0; b < 8; b++) {
            __m128i lo = _mm_load_si128((const __m128i *)(gq + GR * b)),
                    hi = _mm_load_si128((const __m128i *)(gq + GR * b + 4));
            float s0 = d * (float)sc8[2 * b], s1 = d * (float)sc8[2 * b + 1];
            put16(dst + 32 * b, lo, _mm256_set1_ps(s0), _mm256_set1_ps(-32.0f * s0));
            put16(dst + 32 * b + 16, hi, _mm256_set1_ps(s1), _mm256_set1_ps(-32.0f * s1));
        }
    }
}

/* Rows [0, nr) of w, columns [k0, k1), into the panel group pg (pg[k * GR +
 * i] = row i, column k0 + k), rows past nr and columns past k1 (up to a
 * multiple of 8) zero. stage: GR x KP floats. */
static TGT void fill_group(deq_fn deq, int K, const uint8_t *w, size_t ws, int nr, int k0, int k1, float *stage,
                           float *pg) {
    const int kn = k1 - k0, kn8 = (kn + 7) & ~7;
    /* the slice's bytes in a row (k0 and k1 on block boundaries or K) */
    const size_t b0 = (size_t)((double)ws * k0 / K), b1 = (size_t)((double)ws * k1 / K);
    for (int i = 0; i < GR; i++) {
        float *s = stage + (size_t)i * KP;
        if (i + PF_ROWS < nr) /* rows are short streams: fetch ahead of the loads */
            for (size_t o = b0; o < b1; o += 64)
                _mm_prefetch((const char *)(w + (size_t)(i + PF_ROWS) * ws + o), _MM_HINT_T0);
        if (i < nr) deq(w + (size_t)i * ws, k0, k1, s);
        else memset(s, 0, (size_t)kn * sizeof(float));
        for (int k = kn; k < kn8; k++) s[k] = 0.0f;
    }
    for (int k = 0; k < kn8; k += 8) {
        tr8(stage + k, KP, pg + (size_t)k * GR);
        tr8(stage + (size_t)8 * KP + k, KP, pg + (size_t)k * GR + 8);
    }
}

/* C[t * ldc + i] (= or +=) sum over k < kn of pg[k * GR + i] xt[t][k], i <
 * 16, t < NT: the 12-accumulator kernel. The token pointers advance with k
 * (an index off 6 bases made the compiler keep unrolled copies of them on
 * the stack). */
INL void gemm_pass(const int NT, const float *pg, int kn, const float *const *xt, float *C, int ldc, int add) {
    __m256 acc[NTP][2];
    _Pragma("GCC unroll 6") for (int t = 0; t < NT; t++) acc[t][0] = acc[t][1] = _mm256_setzero_ps();
    const float *x0 = xt[0], *x1 = xt[1], *x2 = xt[2], *x3 = xt[3], *x4 = xt[4], *x5 = xt[5];
    _Pragma("GCC unroll 4") for (int k = 0; k < kn; k++) {
        __m256 a0 = _mm256_load_ps(pg), a1 = _mm256_load_ps(pg + 8), b;
#define GEMM_TOK(T_, X_)                                                                                               \
    if (NT > T_) {                                                                                                     \
        b = _mm256_broadcast_ss(X_++);                                                                                 \
        acc[T_][0] = _mm256_fmadd_ps(a0, b, acc[T_][0]);                                                               \
        acc[T_][1] = _mm256_fmadd_ps(a1, b, acc[T_][1]);                                                               \
    }
        GEMM_TOK(0, x0)
        GEMM_TOK(1, x1)
        GEMM_TOK(2, x2)
        GEMM_TOK(3, x3)
        GEMM_TOK(4, x4)
        GEMM_TOK(5, x5)
#undef GEMM_TOK
        pg += GR;
    }
    _Pragma("GCC unroll 6") for (int t = 0; t < NT; t++) {
        float *c = C + (size_t)t * ldc;
        if (add) {
            acc[t][0] = _mm256_add_ps(acc[t][0], _mm256_loadu_ps(c));
            acc[t][1] = _mm256_add_ps(acc[t][1], _mm256_loadu_ps(c + 8));
        }
        _mm256_storeu_ps(c, acc[t][0]);
        _mm256_storeu_ps(c + 8, acc[t][1]);
    }
}

static TGT void gemm_n(int nt, const float *pg, int kn, const float *const *xt, float *C, int ldc, int add) {
    switch (nt) {
    case 6:
        gemm_pass(6, pg, kn, xt, C, ldc, add);
        break;
    case 5:
        gemm_pass(5, pg, kn, xt, C, ldc, add);
        break;
    case 4:
        gemm_pass(4, pg, kn, xt, C, ldc, add);
        break;
    case 3:
        gemm_pass(3, pg, kn, xt, C, ldc, add);
        break;
    case 2:
        gemm_pass(2, pg, kn, xt, C, ldc, add);
        break;
    default:
        gemm_pass(1, pg, kn, xt, C, ldc, add);
        break;
    }
}

/* r1_cpu_panel_fn for one format */
static TGT void panel_run(deq_fn deq, int K, const uint8_t *w, size_t ws, int mc, const float *x, size_t xs, int tn,
                          float *C, int ldc) {
    const int ng = (mc + GR - 1) / GR;
    float *panel = (float *)r1_cpu_scratch(2, (size_t)(ng + 1) * KP * GR * sizeof(float));
    float *stage = panel + (size_t)ng * KP * GR;
    for (int k0 = 0; k0 < K; k0 += KP) {
        const int k1 = K - k0 < KP ? K : k0 + KP, kn = k1 - k0;
        for (int g = 0; g < ng; g++) {
            int nr = mc - g * GR < GR ? mc - g * GR : GR;
            fill_group(deq, K, w + (size_t)g * GR * ws, ws, nr, k0, k1, stage, panel + (size_t)g * KP * GR);
        }
        /* a row group's panel (32 KiB) stays in L1 while the tokens pass
         * (tokens outer, re-reading the panel from L2, is slower) */
        for (int g = 0; g < ng; g++)
            for (int t = 0; t < tn; t += NTP) {
                const int nt = tn - t < NTP ? tn - t : NTP;
                const float *xt[NTP];
                for (int j = 0; j < NTP; j++)
                    xt[j] = (const float *)((const uint8_t *)x + (size_t)(t + (j < nt ? j : 0)) * xs) + k0;
                gemm_n(nt, panel + (size_t)g * KP * GR, kn, xt, C + (size_t)t * ldc + g * GR, ldc, k0 > 0);
            }
    }
}

/* FN: the panel GEMM on the weights DEQ unpacks */
#define PANEL(FN, DEQ)                                                                                                 \
    TGT void FN(int K, const uint8_t *w, size_t ws, int mc, const float *x, size_t xs, int tn, float *C, int ldc) {    \
        panel_run(DEQ, K, w, ws, mc, x, xs, tn, C, ldc);                                                               \
    }
PANEL(r1_x86_panel_avx2_f32, r1_x86_row_f32_f32)
PANEL(r1_x86_panel_avx2_f16, r1_x86_row_f16_f32)
PANEL(r1_x86_panel_avx2_bf16, r1_x86_row_bf16_f32)
PANEL(r1_x86_panel_avx2_q8_0, deq_q8_0)
PANEL(r1_x86_panel_avx2_q4_0, deq_q4_0)
PANEL(r1_x86_panel_avx2_q4_1, deq_q4_1)
PANEL(r1_x86_panel_avx2_q5_0, deq_q5_0)
PANEL(r1_x86_panel_avx2_q5_1, deq_q5_1)
PANEL(r1_x86_panel_avx2_q4_K, deq_q4_K)
PANEL(r1_x86_panel_avx2_q5_K, deq_q5_K)
PANEL(r1_x86_panel_avx2_q6_K, deq_q6_K)
PANEL(r1_x86_panel_avx2_q4_0x8, deq_q4_0x8)
PANEL(r1_x86_panel_avx2_q4_Kx8, deq_q4_Kx8)
PANEL(r1_x86_panel_avx2_q6_Kx8, deq_q6_Kx8)

#endif /* __x86_64__ */
