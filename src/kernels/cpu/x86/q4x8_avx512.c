/*
 * q4x8_avx512.c - q4_0x8 weights (dtype.h: q4_0 regrouped 8 blocks at a
 * time) against q8x8 activations (cpu.h) with AVX-512 VNNI.
 *
 * Why the regrouping: in GGUF's q4_0 layout a block is 18 bytes, so every
 * 64-byte load of quants needs a byte permute, and the 32-bit lanes that
 * vpdpbusd fills hold pieces of 4 different blocks, which costs a scale
 * permute, a conversion and an FMA per 4 blocks and row. Here a 64-byte load
 * is 4 bytes of each of 8 blocks, each 32-bit lane stays with one block, and
 * per row and 256 weights the work is 2 loads, the nibble split, 4 vpdpbusd
 * (the accumulator starts at -8 x the activations' lane sums, so the
 * unsigned nibbles need no offset), one vcvtph2ps of the 8 scales, one
 * conversion and one FMA. The activations are rearranged to match once per
 * token. Exact integer dot products per block; only the float summation
 * order differs from the q4_0 tiles.
 */
#include "kernels/cpu/cpu.h"

#if defined(__x86_64__)
#include <immintrin.h>
#include <string.h>

#include "kernels/cpu/x86/x86.h"
#include "util/util.h"

#define TGT_S "avx512f,avx512bw,avx512vl,avx512dq,avx512vnni,avx2,fma,f16c"
#define TGT __attribute__((target(TGT_S)))

/* 256 columns in q8 form (d[8] at 0, qs at 64) -> one q8x8 group at o */
static TGT void group_to_x8(const uint8_t *q8, uint8_t *o) {
    const __m512i lane = _mm512_set_epi32(15, 14, 13, 12, 11, 10, 9, 8, 7, 6, 5, 4, 3, 2, 1, 0);
    /* dword (of the 64 in qs) for lane i of part r (xl0, xl1, xh0, xh1): 8 (i % 8) + 2r + i / 8 */
    const __m512i base = _mm512_add_epi32(_mm512_slli_epi32(_mm512_and_si512(lane, _mm512_set1_epi32(7)), 3),
                                          _mm512_srli_epi32(lane, 3));
    const __m512i eight = _mm512_set1_epi8(8);
    __m512i nx = _mm512_setzero_si512();
    for (int r = 0; r < 4; r++) {
        __m512i v =
            _mm512_i32gather_epi32(_mm512_add_epi32(base, _mm512_set1_epi32(2 * r)), (const void *)(q8 + 64), 4);
        _mm512_storeu_si512(o + 64 * r, v);
        nx = _mm512_dpbusd_epi32(nx, eight, v);
    }
    _mm512_storeu_si512(o + 256, _mm512_sub_epi32(_mm512_setzero_si512(), nx));
    __m256 d = _mm256_loadu_ps((const float *)q8);
    _mm512_storeu_ps(o + 320, _mm512_insertf32x8(_mm512_castps256_ps512(d), d, 1));
}

TGT void r1_x86_quant_q8x8_avx512(const float *x, uint8_t *dst, int K) {
    _Alignas(64) uint8_t q8[64 + 256]; /* r1_cpu_q8 form of 256 columns: d[8], then qs at 64 */
    for (int s = 0; s < K / 256; s++) {
        r1_x86_quant_q8_avx2(x + (size_t)s * 256, q8, 256);
        group_to_x8(q8, dst + (size_t)s * R1_CPU_Q8X8_BYTES);
    }
    if (K % 256) /* the tail in q8 form */
        r1_x86_quant_q8_avx2(x + (size_t)K / 256 * 256, dst + (size_t)K / 256 * R1_CPU_Q8X8_BYTES, K % 256);
}

/* r = x - d q for n columns (n % 32 == 0) of a token in q8 form q8 (scales
 * at 0, quants at qoff): a multiply and a subtraction, each rounded, as the
 * plain C of cpu.c, so both give the same second part */
static TGT void residual(const float *x, const uint8_t *q8, size_t qoff, int n, float *r) {
    const float *d = (const float *)q8;
    const int8_t *q = (const int8_t *)(q8 + qoff);
    for (int k = 0; k < n; k += 16) {
        __m512 qf = _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(_mm_loadu_si128((const __m128i *)(q + k))));
        _mm512_storeu_ps(r + k, _mm512_sub_ps(_mm512_loadu_ps(x + k), _mm512_mul_ps(_mm512_set1_ps(d[k / 32]), qf)));
    }
}

/* The lo part (cpu.h r1_cpu_quant_q8_lo_c): n columns (n % 32 == 0) of the
 * residual r in q8 form (scales at dst, quants at dst + qoff), block b's
 * scale dh[b] / 256; the same bits as the plain C */
static TGT void quant_lo(const float *r, const float *dh, uint8_t *dst, size_t qoff, int n) {
    float *d = (float *)dst;
    int8_t *qs = (int8_t *)(dst + qoff);
    const __m128i m127 = _mm_set1_epi8(-127);
    for (int b = 0; b < n / 32; b++) {
        const float dl = dh[b] * (1.0f / 256.0f), id = dl ? 1.0f / dl : 0.0f;
        d[b] = dl;
        const __m512 s = _mm512_set1_ps(id);
        __m512i i0 = _mm512_cvtps_epi32(_mm512_mul_ps(_mm512_loadu_ps(r + 32 * b), s));
        __m512i i1 = _mm512_cvtps_epi32(_mm512_mul_ps(_mm512_loadu_ps(r + 32 * b + 16), s));
        _mm_storeu_si128((__m128i *)(qs + 32 * b), _mm_max_epi8(_mm512_cvtsepi32_epi8(i0), m127));
        _mm_storeu_si128((__m128i *)(qs + 32 * b + 16), _mm_max_epi8(_mm512_cvtsepi32_epi8(i1), m127));
    }
}

/* Two-part activations (cpu.h): hi = q8x8 of x, lo = q8x8 of x - hi, 256
 * columns at a time (the tail as q8 form, as quant_q8x8) */
TGT void r1_x86_quant_q8x8_2_avx512(const float *x, uint8_t *hi, uint8_t *lo, int K) {
    _Alignas(64) uint8_t qh[64 + 256], ql[64 + 256];
    _Alignas(64) float r[256];
    const int G = K / 256, Kt = K % 256;
    for (int s = 0; s < G; s++) {
        const float *xs = x + (size_t)s * 256;
        r1_x86_quant_q8_avx2(xs, qh, 256);
        residual(xs, qh, 64, 256, r);
        quant_lo(r, (const float *)qh, ql, 64, 256);
        group_to_x8(qh, hi + (size_t)s * R1_CPU_Q8X8_BYTES);
        group_to_x8(ql, lo + (size_t)s * R1_CPU_Q8X8_BYTES);
    }
    if (Kt) {
        uint8_t *th = hi + (size_t)G * R1_CPU_Q8X8_BYTES, *tl = lo + (size_t)G * R1_CPU_Q8X8_BYTES;
        r1_x86_quant_q8_avx2(x + (size_t)G * 256, th, Kt);
        residual(x + (size_t)G * 256, th, r1_cpu_q8_qoff(Kt), Kt, r);
        quant_lo(r, (const float *)th, tl, r1_cpu_q8_qoff(Kt), Kt);
    }
}

/* the same in q8 form (R1_CPU_ACT_Q8) */
TGT void r1_x86_quant_q8_2_avx512(const float *x, uint8_t *hi, uint8_t *lo, int K) {
    _Alignas(64) uint8_t qh[64 + 256], ql[64 + 256];
    _Alignas(64) float r[256];
    const size_t qoff = r1_cpu_q8_qoff(K);
    for (int c = 0; c < K; c += 256) {
        const int n = K - c < 256 ? K - c : 256;
        const size_t off = (size_t)r1_cpu_q8_qoff(n);
        r1_x86_quant_q8_avx2(x + c, qh, n);
        residual(x + c, qh, off, n, r);
        quant_lo(r, (const float *)qh, ql, off, n);
        memcpy((float *)hi + c / 32, qh, (size_t)n / 32 * sizeof(float));
        memcpy((float *)lo + c / 32, ql, (size_t)n / 32 * sizeof(float));
        memcpy(hi + qoff + c, qh + off, (size_t)n);
        memcpy(lo + qoff + c, ql + off, (size_t)n);
    }
}

/* One superblock s of row R against token t: the int32 lane sums with the
 * -8 offset, times the weight and activation scales, into acc[R][t]. The
 * rows of a decode tile are 4 short streams (864 bytes at K = 1536), too
 * short for the hardware prefetcher: the same bytes of the next 4 rows are
 * fetched ahead into L1 and of the 4 after those into L2 (both make decode
 * faster). */
#define X8_ROW(NT, R, WP)                                                                                              \
    do {                                                                                                               \
        const uint8_t *bp = (WP) + (size_t)s * 144;                                                                    \
        _mm_prefetch((const char *)(bp + 4 * ws), _MM_HINT_T0);                                                        \
        _mm_prefetch((const char *)(bp + 4 * ws + 64), _MM_HINT_T0);                                                   \
        _mm_prefetch((const char *)(bp + 4 * ws + 143), _MM_HINT_T0);                                                  \
        _mm_prefetch((const char *)(bp + 8 * ws), _MM_HINT_T1);                                                        \
        _mm_prefetch((const char *)(bp + 8 * ws + 64), _MM_HINT_T1);                                                   \
        _mm_prefetch((const char *)(bp + 8 * ws + 143), _MM_HINT_T1);                                                  \
        __m512i q0 = _mm512_loadu_si512(bp + 16), q1 = _mm512_loadu_si512(bp + 80);                                    \
        __m512 dw = _mm512_cvtph_ps(_mm256_broadcastsi128_si256(_mm_loadu_si128((const __m128i *)bp)));                \
        __m512i l0 = _mm512_and_si512(q0, lo4), h0 = _mm512_and_si512(_mm512_srli_epi16(q0, 4), lo4);                  \
        __m512i l1 = _mm512_and_si512(q1, lo4), h1 = _mm512_and_si512(_mm512_srli_epi16(q1, 4), lo4);                  \
        _Pragma("GCC unroll 4") for (int t = 0; t < NT; t++) {                                                         \
            const uint8_t *xp = xt[t] + (size_t)s * R1_CPU_Q8X8_BYTES;                                                 \
            __m512i di = _mm512_loadu_si512(xp + 256);                                                                 \
            di = _mm512_dpbusd_epi32(di, l0, _mm512_loadu_si512(xp));                                                  \
            di = _mm512_dpbusd_epi32(di, l1, _mm512_loadu_si512(xp + 64));                                             \
            di = _mm512_dpbusd_epi32(di, h0, _mm512_loadu_si512(xp + 128));                                            \
            di = _mm512_dpbusd_epi32(di, h1, _mm512_loadu_si512(xp + 192));                                            \
            acc[R][t] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(di),                                                        \
                                        _mm512_mul_ps(dw, _mm512_loadu_ps((const float *)(xp + 320))), acc[R][t]);     \
        }                                                                                                              \
    } while (0)

#define X8_TILE(NAME, NT)                                                                                              \
    static TGT void NAME(int K, int k0, int k1, const uint8_t *w, size_t ws, int nr, const uint8_t *x, size_t xs,      \
                         int nt, float *out) {                                                                         \
        (void)K;                                                                                                       \
        const uint8_t *w0 = w, *w1 = w + (nr > 1 ? ws : 0), *w2 = w + (nr > 2 ? 2 * ws : 0),                           \
                      *w3 = w + (nr > 3 ? 3 * ws : 0);                                                                 \
        const uint8_t *xt[NT];                                                                                         \
        for (int t = 0; t < NT; t++) xt[t] = x + (size_t)(t < nt ? t : 0) * xs;                                        \
        const __m512i lo4 = _mm512_set1_epi8(0x0f);                                                                    \
        __m512 acc[4][NT];                                                                                             \
        _Pragma("GCC unroll 4") for (int r = 0; r < 4; r++) _Pragma("GCC unroll 4") for (int t = 0; t < NT; t++)       \
            acc[r][t] = _mm512_setzero_ps();                                                                           \
        for (int s = k0 / 256; s < k1 / 256; s++) {                                                                    \
            X8_ROW(NT, 0, w0);                                                                                         \
            X8_ROW(NT, 1, w1);                                                                                         \
            X8_ROW(NT, 2, w2);                                                                                         \
            X8_ROW(NT, 3, w3);                                                                                         \
        }                                                                                                              \
        R1_X86_TILE_OUT(NT);                                                                                           \
    }

X8_TILE(tile_x8_1, 1)
X8_TILE(tile_x8_2, 2)
X8_TILE(tile_x8_4, 4)

/* Two-part pairs (cpu.h r1_cpu_mm.pair_tile): token t's hi part at x + t xs,
 * its lo part (scale d_lo = d_hi / 256) r1_cpu_q8x8_stride(K) bytes further,
 * folded in int32: (w·hi << 8) + w·lo + the combined offset -8 x (hi << 8
 * plus lo lane sums), then one conversion and one FMA with d_w d_lo. Bounds
 * per lane: |w·hi| <= 16 x 15 x 127 (< 2^15, << 8 < 2^23), the offset
 * < 2^24: no int32 overflow. Prefetch as X8_ROW. */
static inline __attribute__((always_inline, target(TGT_S))) void pair_body(const int NR, const int NT, int K, int k0,
                                                                           int k1, const uint8_t *w, size_t ws, int nr,
                                                                           const uint8_t *x, size_t xs, int nt,
                                                                           float *out) {
    const size_t lo = r1_cpu_q8x8_stride(K);
    const uint8_t *wr[4] = {w, w + (nr > 1 ? ws : 0), w + (nr > 2 ? 2 * ws : 0), w + (nr > 3 ? 3 * ws : 0)};
    const uint8_t *xt[R1_CPU_NT];
    for (int t = 0; t < NT; t++) xt[t] = x + (size_t)(t < nt ? t : 0) * xs;
    const __m512i lo4 = _mm512_set1_epi8(0x0f), zero = _mm512_setzero_si512();
    __m512 acc[4][R1_CPU_NT];
    _Pragma("GCC unroll 4") for (int r = 0; r < 4; r++) _Pragma("GCC unroll 4") for (int t = 0; t < NT; t++) acc[r][t] =
        _mm512_setzero_ps();
    for (int s = k0 / 256; s < k1 / 256; s++) {
        __m512i off[R1_CPU_NT];
        __m512 dx[R1_CPU_NT];
        _Pragma("GCC unroll 4") for (int t = 0; t < NT; t++) {
            const uint8_t *xp = xt[t] + (size_t)s * R1_CPU_Q8X8_BYTES;
            off[t] =
                _mm512_add_epi32(_mm512_slli_epi32(_mm512_loadu_si512(xp + 256), 8), _mm512_loadu_si512(xp + lo + 256));
            dx[t] = _mm512_loadu_ps((const float *)(xp + lo + 320));
        }
        _Pragma("GCC unroll 4") for (int r = 0; r < NR; r++) {
            const uint8_t *bp = wr[r] + (size_t)s * 144;
            _mm_prefetch((const char *)(bp + 4 * ws), _MM_HINT_T0);
            _mm_prefetch((const char *)(bp + 4 * ws + 64), _MM_HINT_T0);
            _mm_prefetch((const char *)(bp + 4 * ws + 143), _MM_HINT_T0);
            _mm_prefetch((const char *)(bp + 8 * ws), _MM_HINT_T1);
            _mm_prefetch((const char *)(bp + 8 * ws + 64), _MM_HINT_T1);
            _mm_prefetch((const char *)(bp + 8 * ws + 143), _MM_HINT_T1);
            __m512i q0 = _mm512_loadu_si512(bp + 16), q1 = _mm512_loadu_si512(bp + 80);
            __m512 dw = _mm512_cvtph_ps(_mm256_broadcastsi128_si256(_mm_loadu_si128((const __m128i *)bp)));
            __m512i l0 = _mm512_and_si512(q0, lo4), h0 = _mm512_and_si512(_mm512_srli_epi16(q0, 4), lo4);
            __m512i l1 = _mm512_and_si512(q1, lo4), h1 = _mm512_and_si512(_mm512_srli_epi16(q1, 4), lo4);
            _Pragma("GCC unroll 4") for (int t = 0; t < NT; t++) {
                const uint8_t *xp = xt[t] + (size_t)s * R1_CPU_Q8X8_BYTES;
                __m512i a = _mm512_dpbusd_epi32(zero, l0, _mm512_loadu_si512(xp));
                a = _mm512_dpbusd_epi32(a, l1, _mm512_loadu_si512(xp + 64));
                a = _mm512_dpbusd_epi32(a, h0, _mm512_loadu_si512(xp + 128));
                a = _mm512_dpbusd_epi32(a, h1, _mm512_loadu_si512(xp + 192));
                __m512i b = _mm512_dpbusd_epi32(off[t], l0, _mm512_loadu_si512(xp + lo));
                b = _mm512_dpbusd_epi32(b, l1, _mm512_loadu_si512(xp + lo + 64));
                b = _mm512_dpbusd_epi32(b, h0, _mm512_loadu_si512(xp + lo + 128));
                b = _mm512_dpbusd_epi32(b, h1, _mm512_loadu_si512(xp + lo + 192));
                __m512i di = _mm512_add_epi32(_mm512_slli_epi32(a, 8), b);
                acc[r][t] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(di), _mm512_mul_ps(dw, dx[t]), acc[r][t]);
            }
        }
    }
    R1_X86_TILE_OUT(NT);
}
#define PAIR_VARIANT(NAME, NR, NT)                                                                                     \
    static TGT void NAME(int K, int k0, int k1, const uint8_t *w, size_t ws, int nr, const uint8_t *x, size_t xs,      \
                         int nt, float *out) {                                                                         \
        pair_body(NR, NT, K, k0, k1, w, ws, nr, x, xs, nt, out);                                                       \
    }
PAIR_VARIANT(tile_pair_1, 4, 1)
PAIR_VARIANT(tile_pair_1r, 1, 1) /* cpu.h r1_cpu_tuning.row1 */
PAIR_VARIANT(tile_pair_2, 4, 2)
PAIR_VARIANT(tile_pair_3h, 2, 3)
PAIR_VARIANT(tile_pair_4h, 2, 4)
/* 3 or 4 tokens: 2 rows at a time with all tokens. 4 rows x 4 tokens spill
 * (16 accumulators and the tokens' offsets and scales), and 2 + 2 tokens
 * unpacked every row's weights twice. */
void r1_x86_tile_q4_0x8_avx512_pair(int K, int k0, int k1, const uint8_t *w, size_t ws, int nr, const uint8_t *x,
                                    size_t xs, int nt, float *out) {
    if (nt == 1 && r1_cpu_tuning.row1) r1_cpu_tile_by_row(tile_pair_1r, K, k0, k1, w, ws, nr, x, xs, nt, out);
    else if (nt == 1) tile_pair_1(K, k0, k1, w, ws, nr, x, xs, nt, out);
    else if (nt == 2) tile_pair_2(K, k0, k1, w, ws, nr, x, xs, nt, out);
    else {
        void (*f)(int, int, int, const uint8_t *, size_t, int, const uint8_t *, size_t, int, float *) =
            nt == 3 ? tile_pair_3h : tile_pair_4h;
        f(K, k0, k1, w, ws, nr < 2 ? nr : 2, x, xs, nt, out);
        if (nr > 2) f(K, k0, k1, w + 2 * ws, ws, nr - 2, x, xs, nt, out + 2);
    }
}

void r1_x86_tile_q4_0x8_avx512(int K, int k0, int k1, const uint8_t *w, size_t ws, int nr, const uint8_t *x, size_t xs,
                               int nt, float *out) {
    r1_cpu_tile_nt(tile_x8_1, tile_x8_2, tile_x8_4, K, k0, k1, w, ws, nr, x, xs, nt, out);
}

#endif /* __x86_64__ */
