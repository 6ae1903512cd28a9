/*
 * gemm_q16_avx2.c - batches (prefill, more than R1_CPU_PANEL_MIN_T tokens)
 * of q4_0, q4_0x8 and q8_0 weights on AVX2 through an integer GEMM: a
 * r1_cpu_panel_fn (cpu.h) whose panel_act is R1_CPU_ACT_Q16. The activations
 * are quantized once per matmul to int16 per block of 32 (15 bits, as fine as
 * the tiles' two-part int8), the weights' quants widened to int16 once per
 * 256 tokens into a panel that holds 8 rows in the lanes of a ymm, two
 * columns per 32-bit lane (per block of 32 columns: 16 ymm, then the 8 rows'
 * scales). vpmaddwd of a panel vector with one broadcast column pair of a
 * token gives 8 rows x 2 columns; vpaddd sums a block in int32 (at most 32 x
 * 128 x 32767 < 2^31), then one conversion, one multiply and one FMA apply
 * both scales. 8 rows x 6 tokens per pass (6 int32 sums, 6 f32 accumulators).
 * vpmaddwd + vpaddd do 16 multiply-adds per multiply-port instruction, the f32
 * panel's FMA (gemm_avx2.c) 8, so this panel is the faster one (int8
 * activations would need two parts, as many multiplies). Each token's int32
 * sum is kept one chain (an empty asm): otherwise gcc reassociates the
 * integer adds into a tree over all 96 products of a block and spills them.
 *
 * Must not: allocate (thread scratch slot 2), read activations past column K.
 * x86-64 only; target attributes, never -mavx2.
 */
#include "kernels/cpu/cpu.h"

#if defined(__x86_64__)
#include <string.h>

#include "kernels/cpu/x86/avx2_dot.h"
#include "kernels/cpu/x86/x86.h"
#include "kernels/dtype.h"

#define TGT __attribute__((target(R1_AVX2_TGT)))
#define INL R1_AVX2_INL

#define KP 512       /* columns per panel slice */
#define NB (KP / 32) /* blocks per slice */
#define GR 8         /* rows per group (one ymm of int32 lanes) */
#define NTP 6        /* tokens per pass */
#define PF_ROWS 2    /* rows fetched ahead while widening */
/* a group's panel: KP / 2 column pairs x GR rows of int32, then NB x GR scales */
#define GROUP_BYTES ((size_t)KP * GR * 2 + (size_t)NB * GR * 4)

/* A row's columns [k0, k1) (multiples of the format's block) as int16
 * quants into q, the blocks' scales into d (w = d q). */
typedef void (*deq16_fn)(const uint8_t *row, int k0, int k1, int16_t *q, float *d);

INL float f16(const uint8_t *p) {
    uint16_t v;
    memcpy(&v, p, 2);
    return _cvtsh_ss(v);
}

static TGT void deq16_q8_0(const uint8_t *row, int k0, int k1, int16_t *q, float *d) {
    for (int b = k0 / 32; b < k1 / 32; b++, q += 32) {
        const uint8_t *p = row + (size_t)b * 34;
        *d++ = f16(p);
        _mm256_storeu_si256((__m256i *)q, _mm256_cvtepi8_epi16(_mm_loadu_si128((const __m128i *)(p + 2))));
        _mm256_storeu_si256((__m256i *)(q + 16), _mm256_cvtepi8_epi16(_mm_loadu_si128((const __m128i *)(p + 18))));
    }
}

/* 16 nibble bytes v: low nibbles columns 0..15, high ones 16..31, minus 8 */
INL void put_q4(__m128i v, int16_t *q) {
    const __m128i m4 = _mm_set1_epi8(0x0f), e8 = _mm_set1_epi8(8);
    __m128i lo = _mm_sub_epi8(_mm_and_si128(v, m4), e8), hi = _mm_sub_epi8(_mm_and_si128(_mm_srli_epi16(v, 4), m4), e8);
    _mm256_storeu_si256((__m256i *)q, _mm256_cvtepi8_epi16(lo));
    _mm256_storeu_si256((__m256i *)(q + 16), _mm256_cvtepi8_epi16(hi));
}

static TGT void deq16_q4_0(const uint8_t *row, int k0, int k1, int16_t *q, float *d) {
    for (int b = k0 / 32; b < k1 / 32; b++, q += 32) {
        const uint8_t *p = row + (size_t)b * 18;
        *d++ = f16(p);
        put_q4(_mm_loadu_si128((const __m128i *)(p + 2)), q);
    }
}

/* q4_0x8 (dtype.h): per 256 columns d[8], then 32-byte groups j = 0..3 whose
 * lane b is dword j of block b's 16 nibble bytes; a 4x4 dword transpose per
 * 128-bit half gives blocks b and b + 4 whole (as gemm_avx2.c's deq_q4_0x8). */
static TGT void deq16_q4_0x8(const uint8_t *row, int k0, int k1, int16_t *q, float *d) {
    for (int s = k0 / 256; s < k1 / 256; s++, q += 256, d += 8) {
        const uint8_t *p = row + (size_t)s * 144;
        __m256i q0 = _mm256_loadu_si256((const __m256i *)(p + 16)), q1 = _mm256_loadu_si256((const __m256i *)(p + 48)),
                q2 = _mm256_loadu_si256((const __m256i *)(p + 80)), q3 = _mm256_loadu_si256((const __m256i *)(p + 112));
        __m256i a = _mm256_unpacklo_epi32(q0, q1), b = _mm256_unpacklo_epi32(q2, q3);
        __m256i c = _mm256_unpackhi_epi32(q0, q1), e = _mm256_unpackhi_epi32(q2, q3);
        __m256i blk[4] = {_mm256_unpacklo_epi64(a, b), _mm256_unpackhi_epi64(a, b), _mm256_unpacklo_epi64(c, e),
                          _mm256_unpackhi_epi64(c, e)};
        _mm256_storeu_ps(d, _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)p)));
        _Pragma("GCC unroll 4") for (int i = 0; i < 4; i++) {
            put_q4(_mm256_castsi256_si128(blk[i]), q + 32 * i);
            put_q4(_mm256_extracti128_si256(blk[i], 1), q + 32 * (i + 4));
        }
    }
}

/* 8 rows of 8 floats (src, row stride ss) transposed: column j to dst + j * GR */
#define tr8(src, ss, dst) r1_x86_tr8((src), (ss), (dst), GR)

/* Rows [0, nr) of w, columns [k0, k1), into the group at pg: column pair j
 * of row i at dword j * GR + i, block b's scales at ps[b * GR + i]; rows past
 * nr zero. stage: GR x KP int16 and GR x NB floats (in L1). */
static TGT void fill_group(deq16_fn deq, int K, const uint8_t *w, size_t ws, int nr, int k0, int k1, int16_t *stage,
                           float *sst, int32_t *pg, float *ps) {
    const int kn = k1 - k0, nb = kn / 32;
    const size_t b0 = (size_t)((double)ws * k0 / K), b1 = (size_t)((double)ws * k1 / K);
    for (int i = 0; i < GR; i++) {
        if (i + PF_ROWS < nr)
            for (size_t o = b0; o < b1; o += 64)
                _mm_prefetch((const char *)(w + (size_t)(i + PF_ROWS) * ws + o), _MM_HINT_T0);
        if (i < nr) deq(w + (size_t)i * ws, k0, k1, stage + (size_t)i * KP, sst + i * NB);
        else {
            memset(stage + (size_t)i * KP, 0, (size_t)kn * sizeof(int16_t));
            for (int b = 0; b < nb; b++) sst[i * NB + b] = 0.0f;
        }
    }
    for (int j = 0; j < kn / 2; j += 8) tr8((const float *)stage + j, KP / 2, (float *)pg + (size_t)j * GR);
    for (int b = 0; b < nb; b++)
        for (int i = 0; i < GR; i++) ps[b * GR + i] = sst[i * NB + b];
}

/* C[t * ldc + i] (= or +=) sum over the nb blocks from block bb of the
 * group's rows i < 8 times token t < NT (q16 form at xt[t]). */
INL void ipass(const int NT, const int32_t *pg, const float *ps, int nb, int bb, size_t qoff, const uint8_t *const *xt,
               float *C, int ldc, int add) {
    __m256 acc[NTP];
    const int32_t *q[NTP];
    const float *d[NTP];
    _Pragma("GCC unroll 6") for (int t = 0; t < NT; t++) {
        acc[t] = _mm256_setzero_ps();
        q[t] = (const int32_t *)(xt[t] + qoff) + 16 * bb; /* column pairs */
        d[t] = (const float *)xt[t] + bb;
    }
    for (int b = 0; b < nb; b++) {
        __m256i s[NTP], w = _mm256_load_si256((const __m256i *)pg);
        _Pragma("GCC unroll 6") for (int t = 0; t < NT; t++) s[t] = _mm256_madd_epi16(w, _mm256_set1_epi32(q[t][0]));
        _Pragma("GCC unroll 15") for (int j = 1; j < 16; j++) {
            w = _mm256_load_si256((const __m256i *)(pg + j * GR));
            _Pragma("GCC unroll 6") for (int t = 0; t < NT; t++) {
                s[t] = _mm256_add_epi32(s[t], _mm256_madd_epi16(w, _mm256_set1_epi32(q[t][j])));
                /* keep the chain: integer adds reassociate, and gcc then
                 * computed all 96 products first and spilled them */
                __asm__("" : "+x"(s[t]));
            }
        }
        const __m256 dw = _mm256_load_ps(ps + b * GR);
        _Pragma("GCC unroll 6") for (int t = 0; t < NT; t++) {
            acc[t] =
                _mm256_fmadd_ps(_mm256_cvtepi32_ps(s[t]), _mm256_mul_ps(dw, _mm256_broadcast_ss(d[t] + b)), acc[t]);
            q[t] += 16;
        }
        pg += 16 * GR;
    }
    _Pragma("GCC unroll 6") for (int t = 0; t < NT; t++) {
        float *c = C + (size_t)t * ldc;
        if (add) acc[t] = _mm256_add_ps(acc[t], _mm256_loadu_ps(c));
        _mm256_storeu_ps(c, acc[t]);
    }
}

static TGT void ipass_n(int nt, const int32_t *pg, const float *ps, int nb, int bb, size_t qoff,
                        const uint8_t *const *xt, float *C, int ldc, int add) {
    switch (nt) {
    case 6:
        ipass(6, pg, ps, nb, bb, qoff, xt, C, ldc, add);
        break;
    case 5:
        ipass(5, pg, ps, nb, bb, qoff, xt, C, ldc, add);
        break;
    case 4:
        ipass(4, pg, ps, nb, bb, qoff, xt, C, ldc, add);
        break;
    case 3:
        ipass(3, pg, ps, nb, bb, qoff, xt, C, ldc, add);
        break;
    case 2:
        ipass(2, pg, ps, nb, bb, qoff, xt, C, ldc, add);
        break;
    default:
        ipass(1, pg, ps, nb, bb, qoff, xt, C, ldc, add);
        break;
    }
}

/* r1_cpu_panel_fn for one format; x: tn tokens in q16 form, xs bytes apart */
static TGT void ipanel_run(deq16_fn deq, int K, const uint8_t *w, size_t ws, int mc, const uint8_t *x, size_t xs,
                           int tn, float *C, int ldc) {
    const int ng = (mc + GR - 1) / GR;
    uint8_t *buf = r1_cpu_scratch(2, (size_t)ng * GROUP_BYTES + (size_t)GR * KP * 2 + (size_t)GR * NB * 4);
    int16_t *stage = (int16_t *)(buf + (size_t)ng * GROUP_BYTES);
    float *sst = (float *)(stage + (size_t)GR * KP);
    const size_t qoff = r1_cpu_q8_qoff(K);
    for (int k0 = 0; k0 < K; k0 += KP) {
        const int k1 = K - k0 < KP ? K : k0 + KP, nb = (k1 - k0) / 32;
        for (int g = 0; g < ng; g++) {
            int32_t *pg = (int32_t *)(buf + (size_t)g * GROUP_BYTES);
            fill_group(deq, K, w + (size_t)g * GR * ws, ws, mc - g * GR < GR ? mc - g * GR : GR, k0, k1, stage, sst, pg,
                       (float *)(pg + KP / 2 * GR));
        }
        /* a group's panel (8 KiB) stays in L1 while the tokens pass */
        for (int g = 0; g < ng; g++) {
            const int32_t *pg = (const int32_t *)(buf + (size_t)g * GROUP_BYTES);
            for (int t = 0; t < tn; t += NTP) {
                const int nt = tn - t < NTP ? tn - t : NTP;
                const uint8_t *xt[NTP];
                for (int j = 0; j < NTP; j++) xt[j] = x + (size_t)(t + (j < nt ? j : 0)) * xs;
                ipass_n(nt, pg, (const float *)(pg + KP / 2 * GR), nb, k0 / 32, qoff, xt, C + (size_t)t * ldc + g * GR,
                        ldc, k0 > 0);
            }
        }
    }
}

/* FN: the integer panel GEMM on the weights DEQ unpacks */
#define IPANEL(FN, DEQ)                                                                                                \
    TGT void FN(int K, const uint8_t *w, size_t ws, int mc, const float *x, size_t xs, int tn, float *C, int ldc) {    \
        ipanel_run(DEQ, K, w, ws, mc, (const uint8_t *)x, xs, tn, C, ldc);                                             \
    }
IPANEL(r1_x86_panel_q16_avx2_q8_0, deq16_q8_0)
IPANEL(r1_x86_panel_q16_avx2_q4_0, deq16_q4_0)
IPANEL(r1_x86_panel_q16_avx2_q4_0x8, deq16_q4_0x8)

/* One token in q16 form (cpu.h R1_CPU_ACT_Q16): per block of 32, d = max|x|
 * / 32767 and q = x * (32767 / max|x|) rounded to nearest (0 for a zero block). */
TGT void r1_x86_quant_q16_avx2(const float *x, uint8_t *dst, int K) {
    float *d = (float *)dst;
    int16_t *q = (int16_t *)(dst + r1_cpu_q8_qoff(K));
    const __m256 abs = _mm256_castsi256_ps(_mm256_set1_epi32(0x7fffffff));
    for (int b = 0; b < K / 32; b++, x += 32, q += 32) {
        __m256 v0 = _mm256_loadu_ps(x), v1 = _mm256_loadu_ps(x + 8), v2 = _mm256_loadu_ps(x + 16),
               v3 = _mm256_loadu_ps(x + 24);
        __m256 m = _mm256_max_ps(_mm256_max_ps(_mm256_and_ps(v0, abs), _mm256_and_ps(v1, abs)),
                                 _mm256_max_ps(_mm256_and_ps(v2, abs), _mm256_and_ps(v3, abs)));
        __m128 h = _mm_max_ps(_mm256_castps256_ps128(m), _mm256_extractf128_ps(m, 1));
        h = _mm_max_ps(h, _mm_movehl_ps(h, h));
        h = _mm_max_ss(h, _mm_movehdup_ps(h));
        const float amax = _mm_cvtss_f32(h);
        d[b] = amax / 32767.0f;
        const __m256 id = _mm256_set1_ps(amax > 0.0f ? 32767.0f / amax : 0.0f);
        __m256i a =
            _mm256_packs_epi32(_mm256_cvtps_epi32(_mm256_mul_ps(v0, id)), _mm256_cvtps_epi32(_mm256_mul_ps(v1, id)));
        __m256i c =
            _mm256_packs_epi32(_mm256_cvtps_epi32(_mm256_mul_ps(v2, id)), _mm256_cvtps_epi32(_mm256_mul_ps(v3, id)));
        _mm256_storeu_si256((__m256i *)q, _mm256_permute4x64_epi64(a, 0xd8));
        _mm256_storeu_si256((__m256i *)(q + 16), _mm256_permute4x64_epi64(c, 0xd8));
    }
}

#endif /* __x86_64__ */
