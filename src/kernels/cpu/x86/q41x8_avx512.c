/*
 * q41x8_avx512.c - q4_1x8 weights (dtype.h: q4_1 regrouped 8 blocks at a
 * time, the row's last K % 256 columns left as q4_1) against q8x8
 * activations (cpu.h) with AVX-512 VNNI, for the avx512 table.
 *
 * A group is q4_0x8's (q4x8_avx512.c) plus 8 mins: per row and 256 weights,
 * 2 loads of nibbles, the nibble split, 4 vpdpbusd per token (unsigned
 * nibbles 0..15 times signed activations, from zero), one vcvtph2ps of the
 * 8 scales and 8 mins (spread to the 16 lanes by two vpermps), then
 *   acc += cvt(dot) * (d * dx) + m * sx
 * where lane i belongs to block i % 8 and sx[i] = dx[i % 8] * (the sum of
 * the lane's 16 activations), made once per token from the q8x8 form's nx
 * (-8 x that sum) and shared by the rows. Exact integer dot products per
 * block; only the float summation order differs from plain q4_1.
 * The row's tail (fewer than 8 blocks) runs two blocks a step against the
 * tail of the activations in q8 form. Target attributes only.
 */
#include "kernels/cpu/cpu.h"

#if defined(__x86_64__)
#include <immintrin.h>
#include <string.h>

#include "kernels/cpu/x86/x86.h"

#define TGT_S "avx512f,avx512bw,avx512vl,avx512dq,avx512vnni,avx2,fma,f16c"
#define TGT __attribute__((target(TGT_S)))
#define INL static inline __attribute__((always_inline, target(TGT_S)))

#define GROUP 160 /* bytes of 8 q4_1 blocks: d[8], m[8], qs[128] */
#define BLK 20    /* a plain q4_1 block: d, m, qs[16] */

INL float h2f(const uint8_t *p) {
    uint16_t h;
    memcpy(&h, p, 2);
    return _cvtsh_ss(h);
}
/* lanes 0-7 a, lanes 8-15 b */
INL __m512 pair_ps(float a, float b) {
    return _mm512_insertf32x8(_mm512_set1_ps(a), _mm256_set1_ps(b), 1);
}

/* Decode streams 4 rows at a time, too short for the hardware prefetcher:
 * the same bytes of the next 4 rows into L1, of the 4 after those into L2
 * (as the q4_0x8 tile does). */
INL void prefetch_rows(const uint8_t *p, size_t ws, int len) {
    _mm_prefetch((const char *)(p + 4 * ws), _MM_HINT_T0);
    _mm_prefetch((const char *)(p + 4 * ws + 64), _MM_HINT_T0);
    _mm_prefetch((const char *)(p + 4 * ws + len - 1), _MM_HINT_T0);
    _mm_prefetch((const char *)(p + 8 * ws), _MM_HINT_T1);
    _mm_prefetch((const char *)(p + 8 * ws + 64), _MM_HINT_T1);
    _mm_prefetch((const char *)(p + 8 * ws + len - 1), _MM_HINT_T1);
}

/* Two plain q4_1 blocks at p (only the first when !two): the 64 quants as
 * unsigned bytes [qa lo, qa hi, qb lo, qb hi], scales *fa and mins *fb as
 * 8 lanes each (zero for a missing second block). */
INL __m512i q41_pair(const uint8_t *p, int two, __m512 *fa, __m512 *fb) {
    __m128i qa = _mm_loadu_si128((const __m128i *)(p + 4));
    __m128i qb = two ? _mm_loadu_si128((const __m128i *)(p + BLK + 4)) : _mm_setzero_si128();
    __m256i v = _mm256_set_m128i(qb, qa);
    __m512i z = _mm512_inserti64x4(_mm512_castsi256_si512(v), _mm256_srli_epi16(v, 4), 1);
    z = _mm512_shuffle_i64x2(z, z, _MM_SHUFFLE(3, 1, 2, 0)); /* qa, qa>>4, qb, qb>>4 */
    *fa = pair_ps(h2f(p), two ? h2f(p + BLK) : 0.0f);
    *fb = pair_ps(h2f(p + 2), two ? h2f(p + BLK + 2) : 0.0f);
    return _mm512_and_si512(z, _mm512_set1_epi8(0x0f));
}

INL void x8_body(const int NT, int K, int k0, int k1, const uint8_t *w, size_t ws, int nr,
                 const uint8_t *x, size_t xs, int nt, float *out) {
    const uint8_t *wr[4] = {w, w + (nr > 1 ? ws : 0), w + (nr > 2 ? 2 * ws : 0),
                            w + (nr > 3 ? 3 * ws : 0)};
    const uint8_t *xt[NT];
    for (int t = 0; t < NT; t++) xt[t] = x + (size_t)(t < nt ? t : 0) * xs;
    const __m512i lo4 = _mm512_set1_epi8(0x0f), zero = _mm512_setzero_si512();
    const __m512i idx_d = _mm512_set_epi32(7, 6, 5, 4, 3, 2, 1, 0, 7, 6, 5, 4, 3, 2, 1, 0);
    const __m512i idx_m = _mm512_add_epi32(idx_d, _mm512_set1_epi32(8));
    __m512 acc[4][NT];
    _Pragma("GCC unroll 4") for (int r = 0; r < 4; r++)
        _Pragma("GCC unroll 4") for (int t = 0; t < NT; t++) acc[r][t] = _mm512_setzero_ps();
    const int G = K / 256, s1 = k1 / 256 < G ? k1 / 256 : G;
    for (int s = k0 / 256; s < s1; s++) {
        __m512 dx[NT], sx[NT];
        _Pragma("GCC unroll 4") for (int t = 0; t < NT; t++) {
            const uint8_t *xp = xt[t] + (size_t)s * R1_CPU_Q8X8_BYTES;
            dx[t] = _mm512_loadu_ps((const float *)(xp + 320));
            sx[t] = _mm512_mul_ps(_mm512_mul_ps(dx[t], _mm512_set1_ps(-0.125f)),
                                  _mm512_cvtepi32_ps(_mm512_loadu_si512(xp + 256)));
        }
        _Pragma("GCC unroll 4") for (int r = 0; r < 4; r++) {
            const uint8_t *bp = wr[r] + (size_t)s * GROUP;
            if (NT == 1) prefetch_rows(bp, ws, GROUP);
            __m512 dm = _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)bp));
            __m512 dd = _mm512_permutexvar_ps(idx_d, dm), mm = _mm512_permutexvar_ps(idx_m, dm);
            __m512i q0 = _mm512_loadu_si512(bp + 32), q1 = _mm512_loadu_si512(bp + 96);
            __m512i l0 = _mm512_and_si512(q0, lo4), h0 = _mm512_and_si512(_mm512_srli_epi16(q0, 4), lo4);
            __m512i l1 = _mm512_and_si512(q1, lo4), h1 = _mm512_and_si512(_mm512_srli_epi16(q1, 4), lo4);
            _Pragma("GCC unroll 4") for (int t = 0; t < NT; t++) {
                const uint8_t *xp = xt[t] + (size_t)s * R1_CPU_Q8X8_BYTES;
                __m512i di = _mm512_dpbusd_epi32(zero, l0, _mm512_loadu_si512(xp));
                di = _mm512_dpbusd_epi32(di, l1, _mm512_loadu_si512(xp + 64));
                di = _mm512_dpbusd_epi32(di, h0, _mm512_loadu_si512(xp + 128));
                di = _mm512_dpbusd_epi32(di, h1, _mm512_loadu_si512(xp + 192));
                acc[r][t] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(di), _mm512_mul_ps(dd, dx[t]), acc[r][t]);
                acc[r][t] = _mm512_fmadd_ps(mm, sx[t], acc[r][t]);
            }
        }
    }
    const int tb = (K % 256) / 32; /* the plain q4_1 tail, in the last slice */
    if (k1 == K && tb) {
        const size_t qoff = r1_cpu_q8_qoff(K % 256);
        for (int j = 0; j < tb; j += 2) {
            const int two = j + 1 < tb;
            __m512i xq[NT];
            __m512 dxp[NT], gs[NT];
            _Pragma("GCC unroll 4") for (int t = 0; t < NT; t++) {
                const uint8_t *xp = xt[t] + (size_t)G * R1_CPU_Q8X8_BYTES;
                const float *d = (const float *)xp;
                xq[t] = _mm512_maskz_loadu_epi8(two ? ~0ull : 0xFFFFFFFFull, xp + qoff + 32 * j);
                dxp[t] = pair_ps(d[j], two ? d[j + 1] : 0.0f);
                __m512i sum = _mm512_dpbusd_epi32(zero, _mm512_set1_epi8(1), xq[t]);
                gs[t] = _mm512_mul_ps(_mm512_cvtepi32_ps(sum), dxp[t]);
            }
            _Pragma("GCC unroll 4") for (int r = 0; r < 4; r++) {
                const uint8_t *bp = wr[r] + (size_t)G * GROUP + (size_t)j * BLK;
                if (NT == 1) prefetch_rows(bp, ws, two ? 2 * BLK : BLK);
                __m512 fa, fb;
                __m512i q = q41_pair(bp, two, &fa, &fb);
                _Pragma("GCC unroll 4") for (int t = 0; t < NT; t++) {
                    __m512i p = _mm512_dpbusd_epi32(zero, q, xq[t]);
                    acc[r][t] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(p), _mm512_mul_ps(fa, dxp[t]), acc[r][t]);
                    acc[r][t] = _mm512_fmadd_ps(fb, gs[t], acc[r][t]);
                }
            }
        }
    }
    R1_X86_TILE_OUT(NT);
}

static TGT void tile_1(int K, int k0, int k1, const uint8_t *w, size_t ws, int nr,
                       const uint8_t *x, size_t xs, int nt, float *out) {
    x8_body(1, K, k0, k1, w, ws, nr, x, xs, nt, out);
}
static TGT void tile_4(int K, int k0, int k1, const uint8_t *w, size_t ws, int nr,
                       const uint8_t *x, size_t xs, int nt, float *out) {
    x8_body(4, K, k0, k1, w, ws, nr, x, xs, nt, out);
}

void r1_x86_tile_q4_1x8_avx512(int K, int k0, int k1, const uint8_t *w, size_t ws, int nr,
                               const uint8_t *x, size_t xs, int nt, float *out) {
    if (nt == 1) tile_1(K, k0, k1, w, ws, nr, x, xs, nt, out);
    else tile_4(K, k0, k1, w, ws, nr, x, xs, nt, out);
}

#endif /* __x86_64__ */
