/*
 * kquants_avx512.c - AVX-512 VNNI tiles for q4_K, q5_K, q6_K, q4_1, q5_0,
 * q5_1 weights against q8 activations (kquants.h), for the avx512 table.
 * Target attributes only, never -mavx512f.
 *
 * A row is walked in chunks of 64 columns: the chunk's quants are unpacked
 * into one zmm of unsigned bytes (4, 5 or 6 bits) and vpdpbusd multiplies
 * them by the 64 signed int8 activations, 16 int32 lanes of 4 columns each.
 * Lane i thus belongs to 32-column group i/8 (one activation scale dx) and
 * to 16-column group i/4 (one q6_K scale), so every per-group factor is a
 * per-lane float vector:
 *   acc += cvt(dot) * (a * dx)           a = d*sc per lane
 *   acc -= b * (dx * cvt(sum of xq))     the mins (q4_K, q5_K, q4_1, q5_1)
 * or, where the weight is a*(q - o) (q6_K o = 32, q5_0 o = 16), the dot
 * starts at -o * (sum of xq) of its lane (one vpdpbusd per token, shared by
 * the rows). Scales of a K-quant super-block are unpacked once per row into
 * one zmm (lanes 0-7 d*sc, 8-15 dmin*m; q6_K: 16 lanes d*sc) and each chunk
 * picks its lanes with a permute. Lanes are summed once, at the end.
 */
#include "kernels/cpu/kquants.h"

#if defined(__x86_64__)
#include <immintrin.h>

#include "kernels/cpu/x86/avx2_dot.h"
#include "kernels/cpu/x86/x86.h"
#include <string.h>

#include "kernels/dtype.h"

#define TGT_S "avx512f,avx512bw,avx512vl,avx512dq,avx512vnni,avx2,fma,f16c"
#define TGT __attribute__((target(TGT_S)))
#define INL static inline __attribute__((always_inline, target(TGT_S)))

enum { F_Q4K, F_Q5K, F_Q6K, F_Q41, F_Q50, F_Q51 };

INL float h2f(const uint8_t *p) {
    uint16_t h;
    memcpy(&h, p, 2);
    return _cvtsh_ss(h);
}
INL uint32_t u32(const uint8_t *p) {
    uint32_t v;
    memcpy(&v, p, 4);
    return v;
}
/* lanes 0-7 a, lanes 8-15 b */
INL __m512 pair_ps(float a, float b) { return _mm512_insertf32x8(_mm512_set1_ps(a), _mm256_set1_ps(b), 1); }

/* q4_K/q5_K super-block scales: lanes 0-7 d*sc[s], lanes 8-15 dmin*m[s]
 * (avx2_dot.h's vector unpacking) */
INL __m512 kq_scales(const uint8_t *blk) {
    __m256 sc, mn;
    r1_avx2_kq_scales(blk, &sc, &mn);
    return _mm512_insertf32x8(_mm512_castps256_ps512(sc), mn, 1);
}
/* q6_K super-block scales: 16 lanes d*sc[g] */
INL __m512 q6_scales(const uint8_t *blk) {
    __m512 f = _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(_mm_loadu_si128((const __m128i *)(blk + 192))));
    return _mm512_mul_ps(f, _mm512_set1_ps(h2f(blk + 208)));
}

/* 32 bytes v -> [v & 15 | v >> 4] */
INL __m512i nibbles(__m256i v) {
    __m512i z = _mm512_inserti64x4(_mm512_castsi256_si512(v), _mm256_srli_epi16(v, 4), 1);
    return _mm512_and_si512(z, _mm512_set1_epi8(0x0f));
}
/* [v >> s0 | v >> s1] per 16-bit lane */
INL __m512i shr2(__m256i v, int s0, int s1) {
    return _mm512_inserti64x4(_mm512_castsi256_si512(_mm256_srl_epi16(v, _mm_cvtsi32_si128(s0))),
                              _mm256_srl_epi16(v, _mm_cvtsi32_si128(s1)), 1);
}

/* The 64 quants of chunk j of a K-quant super-block, as unsigned bytes. */
INL __m512i kq_quants(const int DT, const uint8_t *blk, int j) {
    if (DT == F_Q4K) return nibbles(_mm256_loadu_si256((const __m256i *)(blk + 16 + 32 * j)));
    if (DT == F_Q5K) {
        __m512i q = nibbles(_mm256_loadu_si256((const __m256i *)(blk + 48 + 32 * j)));
        __m512i h = shr2(_mm256_loadu_si256((const __m256i *)(blk + 16)), 2 * j, 2 * j + 1);
        h = _mm512_slli_epi16(_mm512_and_si512(h, _mm512_set1_epi8(1)), 4);
        return _mm512_or_si512(q, h);
    }
    /* q6_K: ql bytes 64h.., nibble j%2; qh bytes 32h.., bit pairs 4(j%2) and 4(j%2)+2 */
    const int hh = j / 2, sh = 4 * (j % 2);
    __m512i l = _mm512_loadu_si512(blk + 64 * hh);
    l = _mm512_and_si512(_mm512_srl_epi16(l, _mm_cvtsi32_si128(sh)), _mm512_set1_epi8(0x0f));
    __m512i h = shr2(_mm256_loadu_si256((const __m256i *)(blk + 128 + 32 * hh)), sh, sh + 2);
    h = _mm512_slli_epi16(_mm512_and_si512(h, _mm512_set1_epi8(3)), 4);
    return _mm512_or_si512(l, h);
}

/* Two 32-weight blocks (b0 at p, b1 right after): quants as unsigned bytes,
 * the scale pair in *fa and the offset pair (w = a*q - b) in *fb. */
INL __m512i q32_quants(const int DT, const uint8_t *p, __m512 *fa, __m512 *fb) {
    const int bs = DT == F_Q41 ? 20 : DT == F_Q50 ? 22 : 24;
    const int qso = DT == F_Q41 ? 4 : DT == F_Q50 ? 6 : 8;
    const uint8_t *p1 = p + bs;
    __m256i v =
        _mm256_set_m128i(_mm_loadu_si128((const __m128i *)(p1 + qso)), _mm_loadu_si128((const __m128i *)(p + qso)));
    __m512i z = _mm512_inserti64x4(_mm512_castsi256_si512(v), _mm256_srli_epi16(v, 4), 1);
    z = _mm512_shuffle_i64x2(z, z, _MM_SHUFFLE(3, 1, 2, 0)); /* qa, qa>>4, qb, qb>>4 */
    z = _mm512_and_si512(z, _mm512_set1_epi8(0x0f));
    float d0 = h2f(p), d1 = h2f(p1);
    *fa = pair_ps(d0, d1);
    if (DT == F_Q41) *fb = pair_ps(-h2f(p + 2), -h2f(p1 + 2));
    if (DT == F_Q51) *fb = pair_ps(-h2f(p + 2), -h2f(p1 + 2));
    if (DT != F_Q41) {
        const int qho = DT == F_Q50 ? 2 : 4;
        __mmask64 hm = (__mmask64)u32(p + qho) | (__mmask64)u32(p1 + qho) << 32;
        z = _mm512_or_si512(z, _mm512_and_si512(_mm512_movm_epi8(hm), _mm512_set1_epi8(0x10)));
    }
    return z;
}

#define MINS(DT) ((DT) != F_Q6K && (DT) != F_Q50) /* w = a*q - b, else w = a*(q - o) */
#define OFFS(DT) ((DT) == F_Q6K ? 32 : 16)

/* Per token of a chunk at column c: quants, dx pair, and the mins' sums or
 * the offset's start value. */
#define TOKEN_PREP(DT, NT)                                                                                             \
    __m512i xq[R1_CPU_NT], xo[R1_CPU_NT];                                                                              \
    __m512 dx[R1_CPU_NT], gs[R1_CPU_NT];                                                                               \
    _Pragma("GCC unroll 4") for (int t = 0; t < NT; t++) {                                                             \
        xq[t] = _mm512_loadu_si512(xt[t] + qoff + c);                                                                  \
        const float *d = (const float *)xt[t] + c / 32;                                                                \
        dx[t] = pair_ps(d[0], d[1]);                                                                                   \
        if (MINS(DT)) {                                                                                                \
            __m512i s = _mm512_dpbusd_epi32(_mm512_setzero_si512(), _mm512_set1_epi8(1), xq[t]);                       \
            gs[t] = _mm512_mul_ps(_mm512_cvtepi32_ps(s), dx[t]);                                                       \
            xo[t] = _mm512_setzero_si512();                                                                            \
        } else {                                                                                                       \
            xo[t] = _mm512_sub_epi32(_mm512_setzero_si512(),                                                           \
                                     _mm512_dpbusd_epi32(_mm512_setzero_si512(), _mm512_set1_epi8(OFFS(DT)), xq[t]));  \
            gs[t] = _mm512_setzero_ps();                                                                               \
        }                                                                                                              \
    }

#define ROW_ACC(DT, NT, R, Q, FA, FB)                                                                                  \
    _Pragma("GCC unroll 4") for (int t = 0; t < NT; t++) {                                                             \
        __m512i p = _mm512_dpbusd_epi32(xo[t], Q, xq[t]);                                                              \
        acc[R][t] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(p), _mm512_mul_ps(FA, dx[t]), acc[R][t]);                       \
        if (MINS(DT)) acc[R][t] = _mm512_fnmadd_ps(FB, gs[t], acc[R][t]);                                              \
    }

INL void kq_body(const int DT, const int NT, R1_KQ_TILE_ARGS) {
    const uint8_t *wr[4] = {w, w + (nr > 1 ? ws : 0), w + (nr > 2 ? 2 * ws : 0), w + (nr > 3 ? 3 * ws : 0)};
    const uint8_t *xt[R1_CPU_NT];
    for (int t = 0; t < NT; t++) xt[t] = x + (size_t)(t < nt ? t : 0) * xs;
    const size_t qoff = r1_cpu_q8_qoff(K);
    __m512 acc[4][R1_CPU_NT];
    _Pragma("GCC unroll 4") for (int r = 0; r < 4; r++) _Pragma("GCC unroll 4") for (int t = 0; t < NT; t++) acc[r][t] =
        _mm512_setzero_ps();
    const int base2[16] = {0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1};
    const int base4[16] = {0, 0, 0, 0, 1, 1, 1, 1, 2, 2, 2, 2, 3, 3, 3, 3};
    const __m512i i2 = _mm512_loadu_si512(base2), i4 = _mm512_loadu_si512(base4);

    if (DT == F_Q4K || DT == F_Q5K || DT == F_Q6K) {
        const size_t bs = DT == F_Q4K ? 144 : DT == F_Q5K ? 176 : 210;
        int c = k0;
        while (c < k1) {
            const int sb = c / R1_QK_K, cend = k1 < (sb + 1) * R1_QK_K ? k1 : (sb + 1) * R1_QK_K;
            const uint8_t *blk[4];
            __m512 sf[4];
            _Pragma("GCC unroll 4") for (int r = 0; r < 4; r++) {
                blk[r] = wr[r] + (size_t)sb * bs;
                if (NT <= 2) { /* decode (1 or 2 activation parts): the next 4 rows' super-block */
                    const char *pf = (const char *)(blk[r] + 4 * ws);
                    _mm_prefetch(pf, _MM_HINT_T0);
                    _mm_prefetch(pf + 64, _MM_HINT_T0);
                    _mm_prefetch(pf + 128, _MM_HINT_T0);
                    if (bs > 192) _mm_prefetch(pf + bs - 1, _MM_HINT_T0);
                }
                sf[r] = DT == F_Q6K ? q6_scales(blk[r]) : kq_scales(blk[r]);
            }
            for (; c < cend; c += 64) {
                const int j = (c % R1_QK_K) / 64;
                TOKEN_PREP(DT, NT)
                const __m512i ia = DT == F_Q6K ? _mm512_add_epi32(i4, _mm512_set1_epi32(4 * j))
                                               : _mm512_add_epi32(i2, _mm512_set1_epi32(2 * j));
                const __m512i ib = _mm512_add_epi32(ia, _mm512_set1_epi32(8));
                _Pragma("GCC unroll 4") for (int r = 0; r < 4; r++) {
                    __m512i q = kq_quants(DT, blk[r], j);
                    __m512 fa = _mm512_permutexvar_ps(ia, sf[r]);
                    __m512 fb = MINS(DT) ? _mm512_permutexvar_ps(ib, sf[r]) : fa;
                    ROW_ACC(DT, NT, r, q, fa, fb)
                }
            }
        }
    } else {
        const size_t bs = DT == F_Q41 ? 20 : DT == F_Q50 ? 22 : 24;
        for (int c = k0; c + 64 <= k1; c += 64) {
            TOKEN_PREP(DT, NT)
            if (NT <= 2) {
                _Pragma("GCC unroll 4") for (int r = 0; r < 4; r++)
                    _mm_prefetch((const char *)(wr[r] + 4 * ws + (size_t)(c / 32) * bs), _MM_HINT_T0);
            }
            _Pragma("GCC unroll 4") for (int r = 0; r < 4; r++) {
                __m512 fa, fb = _mm512_setzero_ps();
                __m512i q = q32_quants(DT, wr[r] + (size_t)(c / 32) * bs, &fa, &fb);
                ROW_ACC(DT, NT, r, q, fa, fb)
            }
        }
    }
    R1_X86_TILE_OUT(NT);
}

/* The 32-block formats: a last half chunk (K % 64 == 32) goes to plain C. */
static void q32_tail(void (*c_tile)(R1_KQ_TILE_ARGS), R1_KQ_TILE_ARGS) {
    if (!c_tile || (k1 - k0) % 64 == 0) return;
    float o2[R1_CPU_MR * R1_CPU_NT];
    c_tile(K, k1 - 32, k1, w, ws, nr, x, xs, nt, o2);
    for (int t = 0; t < nt; t++)
        for (int r = 0; r < nr; r++) out[t * R1_CPU_MR + r] += o2[t * R1_CPU_MR + r];
}

#define KQ_AVX512(NAME, DT, CT)                                                                                        \
    static TGT void NAME##_1(R1_KQ_TILE_ARGS) { kq_body(DT, 1, K, k0, k1, w, ws, nr, x, xs, nt, out); }                \
    static TGT void NAME##_2(R1_KQ_TILE_ARGS) { kq_body(DT, 2, K, k0, k1, w, ws, nr, x, xs, nt, out); }                \
    static TGT void NAME##_4(R1_KQ_TILE_ARGS) { kq_body(DT, 4, K, k0, k1, w, ws, nr, x, xs, nt, out); }                \
    void NAME(R1_KQ_TILE_ARGS) {                                                                                       \
        r1_cpu_tile_nt(NAME##_1, NAME##_2, NAME##_4, K, k0, k1, w, ws, nr, x, xs, nt, out);                            \
        q32_tail(CT, K, k0, k1, w, ws, nr, x, xs, nt, out);                                                            \
    }

KQ_AVX512(r1_kq_tile_q4_K_avx512, F_Q4K, NULL)
KQ_AVX512(r1_kq_tile_q5_K_avx512, F_Q5K, NULL)
KQ_AVX512(r1_kq_tile_q6_K_avx512, F_Q6K, NULL)
KQ_AVX512(r1_kq_tile_q4_1_avx512, F_Q41, r1_kq_tile_q4_1_c)
KQ_AVX512(r1_kq_tile_q5_0_avx512, F_Q50, r1_kq_tile_q5_0_c)
KQ_AVX512(r1_kq_tile_q5_1_avx512, F_Q51, r1_kq_tile_q5_1_c)

/* ---- the regrouped K-quants (dtype.h: q4_Kx8, q5_Kx8, q6_Kx8) against q8x8
 * activations (cpu.h). A super-block's quants come in 64-byte vectors whose
 * 32-bit lane i holds 4 quants of 32-weight group i % 8, the lanes of the
 * activations' parts, so per row and super-block: 2 loads and the nibble
 * split (+ q5_K: 4 mask loads and masked adds of 16; q6_K: one load of the
 * 2-bit fields, 3 shifts and 4 ternary-logic merges), the scales unpacked
 * once (q4_K/q5_K: lanes 0-7 d*sc, 8-15 dmin*m, spread to the 16 lanes by
 * two vpermps; q6_K: the 16 int8 scales, even and odd ones spread to the
 * lanes of the first and second 16 weights of each group), then per token
 * 4 vpdpbusd, and
 *   q4_K/q5_K: acc += cvt(dot) * d*sc * dx - dmin*m * sx
 *   q6_K:      acc += (cvt(dot lo) * sc_lo + cvt(dot hi) * sc_hi) * dx
 * where sx[i] = dx[i % 8] * (the sum of lane i's 16 activations), from the
 * q8x8 form's nx, and the q6_K dots start at -32 x the lane sums of their
 * two parts (offset 32 of the 6-bit quants).
 * PAIR (the pair tiles, cpu.h r1_cpu_mm.pair_tile): a token's two
 * activation parts fold in int32, (w·hi << 8) + w·lo (the lo part's scale
 * is the hi part's / 256), so the conversion, the scale multiplies and the
 * FMAs run once per token instead of once per part; nx and the q6_K start
 * values fold the same way. Per 32-bit lane and part: 16 products of
 * quants <= 31 (q4_K, q5_K) or 8 of <= 63 (q6_K, with its start value)
 * with |x| <= 128, < 2^17, << 8 < 2^25: no overflow. ---- */
enum { X_Q4K, X_Q5K, X_Q6K };

/* s + qa · (the 64 activations at p) + qb · (the 64 after them) */
INL __m512i dp2(__m512i s, __m512i qa, __m512i qb, const uint8_t *p) {
    s = _mm512_dpbusd_epi32(s, qa, _mm512_loadu_si512(p));
    return _mm512_dpbusd_epi32(s, qb, _mm512_loadu_si512(p + 64));
}
/* q6_K: the start values of one activation part's (xp) dots, -32 x the lane
 * sums of each group's first 16 columns (*nlo) and of its second 16 (*nhi) */
INL void q6_starts(const uint8_t *xp, __m512i *nlo, __m512i *nhi) {
    const __m512i c32 = _mm512_set1_epi8(32), zero = _mm512_setzero_si512();
    __m512i l = dp2(zero, c32, c32, xp);
    *nlo = _mm512_sub_epi32(zero, l);
    /* nx = -8 x the lane sums: -32 (lo + hi) + 32 lo */
    *nhi = _mm512_add_epi32(_mm512_slli_epi32(_mm512_loadu_si512(xp + 256), 2), l);
}

/* A super-block of a regrouped K-quant row (blk) unpacked: its quants as
 * four vectors of unsigned bytes in the q8x8 lanes, and the per-lane scale
 * factors fa, fb (q4_K/q5_K: d*sc and dmin*m; q6_K: d*sc of each group's
 * first and second 16 weights). Shared by the tiles and the GEMM, so both
 * compute the same bits. */
INL void kx8_unpack(const int DT, const uint8_t *blk, __m512i *q, __m512 *fa, __m512 *fb) {
    const __m512i lo4 = _mm512_set1_epi8(0x0f);
    /* q6_K: lane i takes scale 2 (i % 8) (idx_e) or 2 (i % 8) + 1 (idx_o) */
    const __m512i idx_e = _mm512_set_epi32(14, 12, 10, 8, 6, 4, 2, 0, 14, 12, 10, 8, 6, 4, 2, 0);
    const __m512i idx_o = _mm512_add_epi32(idx_e, _mm512_set1_epi32(1));
    const uint8_t *qp = blk + (DT == X_Q4K ? 16 : DT == X_Q5K ? 48 : 0);
    __m512i q0 = _mm512_loadu_si512(qp), q1 = _mm512_loadu_si512(qp + 64);
    q[0] = _mm512_and_si512(q0, lo4), q[2] = _mm512_and_si512(_mm512_srli_epi16(q0, 4), lo4);
    q[1] = _mm512_and_si512(q1, lo4), q[3] = _mm512_and_si512(_mm512_srli_epi16(q1, 4), lo4);
    if (DT == X_Q5K) {
        const __m512i c16 = _mm512_set1_epi8(16);
        _Pragma("GCC unroll 4") for (int p = 0; p < 4; p++) {
            uint64_t mk;
            memcpy(&mk, blk + 16 + 8 * p, 8);
            q[p] = _mm512_mask_add_epi8(q[p], (__mmask64)mk, q[p], c16);
        }
    }
    if (DT == X_Q6K) {
        const __m512i c30 = _mm512_set1_epi8(0x30);
        __m512i h = _mm512_loadu_si512(blk + 128);
        q[0] = _mm512_ternarylogic_epi32(q[0], _mm512_slli_epi16(h, 4), c30, 0xF8);
        q[1] = _mm512_ternarylogic_epi32(q[1], _mm512_slli_epi16(h, 2), c30, 0xF8);
        q[2] = _mm512_ternarylogic_epi32(q[2], h, c30, 0xF8);
        q[3] = _mm512_ternarylogic_epi32(q[3], _mm512_srli_epi16(h, 2), c30, 0xF8);
        __m512 sc = q6_scales(blk); /* d * sc[16] */
        *fa = _mm512_permutexvar_ps(idx_e, sc), *fb = _mm512_permutexvar_ps(idx_o, sc);
    } else {
        __m256 sc, mn; /* vector unpacking (avx2_dot.h), each spread to both halves */
        r1_avx2_kq_scales(blk, &sc, &mn);
        *fa = _mm512_broadcast_f32x8(sc), *fb = _mm512_broadcast_f32x8(mn);
    }
}

INL void kx8_body(const int DT, const int NR, const int NT, const int PAIR, R1_KQ_TILE_ARGS) {
    const size_t lo = PAIR ? r1_cpu_q8x8_stride(K) : 0;
    const uint8_t *wr[4] = {w, w + (nr > 1 ? ws : 0), w + (nr > 2 ? 2 * ws : 0), w + (nr > 3 ? 3 * ws : 0)};
    const uint8_t *xt[R1_CPU_NT];
    for (int t = 0; t < NT; t++) xt[t] = x + (size_t)(t < nt ? t : 0) * xs;
    const __m512i zero = _mm512_setzero_si512();
    const size_t bs = DT == X_Q4K ? 144 : DT == X_Q5K ? 176 : 210;
    __m512 acc[4][R1_CPU_NT];
    _Pragma("GCC unroll 4") for (int r = 0; r < 4; r++) _Pragma("GCC unroll 4") for (int t = 0; t < NT; t++) acc[r][t] =
        _mm512_setzero_ps();
    for (int s = k0 / 256; s < k1 / 256; s++) {
        __m512 dx[R1_CPU_NT], sx[R1_CPU_NT];
        __m512i nlo[R1_CPU_NT], nhi[R1_CPU_NT];
        _Pragma("GCC unroll 4") for (int t = 0; t < NT; t++) {
            const uint8_t *xp = xt[t] + (size_t)s * R1_CPU_Q8X8_BYTES;
            __m512i nx = _mm512_loadu_si512(xp + 256);               /* -8 x the lane sums */
            dx[t] = _mm512_loadu_ps((const float *)(xp + lo + 320)); /* PAIR: the lo part's */
            if (DT == X_Q6K) {
                q6_starts(xp, &nlo[t], &nhi[t]);
                if (PAIR) { /* both parts' start values, hi << 8 + lo */
                    __m512i l2, h2;
                    q6_starts(xp + lo, &l2, &h2);
                    nlo[t] = _mm512_add_epi32(_mm512_slli_epi32(nlo[t], 8), l2);
                    nhi[t] = _mm512_add_epi32(_mm512_slli_epi32(nhi[t], 8), h2);
                }
            } else {
                if (PAIR) /* hi x 256 + lo, at the lo part's scale */
                    nx = _mm512_add_epi32(_mm512_slli_epi32(nx, 8), _mm512_loadu_si512(xp + lo + 256));
                sx[t] = _mm512_mul_ps(_mm512_mul_ps(dx[t], _mm512_set1_ps(-0.125f)), _mm512_cvtepi32_ps(nx));
            }
        }
        _Pragma("GCC unroll 4") for (int r = 0; r < NR; r++) {
            const uint8_t *blk = wr[r] + (size_t)s * bs;
            /* decode: the next 4 rows' super-block into L1, the 4 after into L2 */
            if (PAIR ? NT == 1 : NT <= 2) {
                for (size_t o = 0; o < bs; o += 64) {
                    _mm_prefetch((const char *)(blk + 4 * ws + o), _MM_HINT_T0);
                    _mm_prefetch((const char *)(blk + 8 * ws + o), _MM_HINT_T1);
                }
                _mm_prefetch((const char *)(blk + 4 * ws + bs - 1), _MM_HINT_T0);
                _mm_prefetch((const char *)(blk + 8 * ws + bs - 1), _MM_HINT_T1);
            }
            __m512i q[4];
            __m512 fa, fb;
            kx8_unpack(DT, blk, q, &fa, &fb);
            _Pragma("GCC unroll 4") for (int t = 0; t < NT; t++) {
                const uint8_t *xp = xt[t] + (size_t)s * R1_CPU_Q8X8_BYTES;
                if (DT == X_Q6K) { /* a and b: each group's first and second 16 weights */
                    __m512i a = dp2(PAIR ? zero : nlo[t], q[0], q[1], xp);
                    __m512i b = dp2(PAIR ? zero : nhi[t], q[2], q[3], xp + 128);
                    if (PAIR) { /* the lo part's dots start at the folded start values */
                        const uint8_t *xl = xp + lo;
                        a = _mm512_add_epi32(_mm512_slli_epi32(a, 8), dp2(nlo[t], q[0], q[1], xl));
                        b = _mm512_add_epi32(_mm512_slli_epi32(b, 8), dp2(nhi[t], q[2], q[3], xl + 128));
                    }
                    __m512 v = _mm512_mul_ps(_mm512_cvtepi32_ps(a), fa);
                    v = _mm512_fmadd_ps(_mm512_cvtepi32_ps(b), fb, v);
                    acc[r][t] = _mm512_fmadd_ps(v, dx[t], acc[r][t]);
                } else {
                    __m512i di = dp2(dp2(zero, q[0], q[1], xp), q[2], q[3], xp + 128);
                    if (PAIR) { /* (w·hi << 8) + w·lo, at the lo part's scale */
                        const uint8_t *xl = xp + lo;
                        di = dp2(dp2(_mm512_slli_epi32(di, 8), q[0], q[1], xl), q[2], q[3], xl + 128);
                    }
                    acc[r][t] = _mm512_fmadd_ps(_mm512_mul_ps(_mm512_cvtepi32_ps(di), fa), dx[t], acc[r][t]);
                    acc[r][t] = _mm512_fnmadd_ps(fb, sx[t], acc[r][t]);
                }
            }
        }
    }
    R1_X86_TILE_OUT(NT);
}

/* NAME: kx8_body with NR rows, NT tokens, PAIR */
#define KX8_V(NAME, DT, NR, NT, PAIR)                                                                                  \
    static TGT void NAME(R1_KQ_TILE_ARGS) { kx8_body(DT, NR, NT, PAIR, K, k0, k1, w, ws, nr, x, xs, nt, out); }
/* TILE: one activation row per token; PAIR: two-part pairs (cpu.h
 * r1_cpu_mm.pair_tile), 1 or 2 tokens a call. One token runs 4 rows in
 * lockstep, a row at a time only where r1_cpu_tuning.row1 is 1 (cpu.h). */
#define KX8_AVX512(DT, TILE, PAIR)                                                                                     \
    KX8_V(TILE##_1, DT, 4, 1, 0)                                                                                       \
    KX8_V(TILE##_2, DT, 4, 2, 0)                                                                                       \
    KX8_V(TILE##_4, DT, 4, 4, 0)                                                                                       \
    KX8_V(TILE##_1r, DT, 1, 1, 0)                                                                                      \
    KX8_V(TILE##_2r, DT, 1, 2, 0)                                                                                      \
    KX8_V(PAIR##_1, DT, 4, 1, 1)                                                                                       \
    KX8_V(PAIR##_2, DT, 4, 2, 1)                                                                                       \
    KX8_V(PAIR##_1r, DT, 1, 1, 1)                                                                                      \
    void PAIR(R1_KQ_TILE_ARGS) {                                                                                       \
        if (nt == 1 && r1_cpu_tuning.row1 == 1) r1_cpu_tile_by_row(PAIR##_1r, K, k0, k1, w, ws, nr, x, xs, nt, out);   \
        else if (nt == 1) PAIR##_1(K, k0, k1, w, ws, nr, x, xs, nt, out);                                              \
        else PAIR##_2(K, k0, k1, w, ws, nr, x, xs, nt, out);                                                           \
    }                                                                                                                  \
    /* a token (its two parts: nt == 2) as the pairs, cpu.h r1_cpu_tuning.row1 */                                      \
    void TILE(R1_KQ_TILE_ARGS) {                                                                                       \
        if (nt <= 2 && r1_cpu_tuning.row1 == 1)                                                                        \
            r1_cpu_tile_by_row(nt == 1 ? TILE##_1r : TILE##_2r, K, k0, k1, w, ws, nr, x, xs, nt, out);                 \
        else r1_cpu_tile_nt(TILE##_1, TILE##_2, TILE##_4, K, k0, k1, w, ws, nr, x, xs, nt, out);                       \
    }
KX8_AVX512(X_Q4K, r1_kq_tile_q4_Kx8_avx512, r1_kq_tile_q4_Kx8_avx512_pair)
KX8_AVX512(X_Q5K, r1_kq_tile_q5_Kx8_avx512, r1_kq_tile_q5_Kx8_avx512_pair)
KX8_AVX512(X_Q6K, r1_kq_tile_q6_Kx8_avx512, r1_kq_tile_q6_Kx8_avx512_pair)

/* ---- the regrouped K-quants' GEMM on one-part q8x8 activations (kquants.h
 * r1_gemm_*x8_q8x8_avx512): 2 to any number of tokens. The per-lane
 * arithmetic of kx8_body's one-part tile (the same unpacking, the same
 * vpdpbusd, cvt, multiplies and FMAs in the same order, the lanes summed by
 * the same tree at the end), so each token's sums are bit for bit its
 * decode step's; only the loops differ. A register tile is one row x KG_NT
 * tokens: the row's super-block is unpacked once for KG_NT tokens (the
 * decode tile: once for 4). K is walked in slices of KG_SL super-blocks,
 * whose KG_NT tokens' activations (KG_SL x 6 KB) stay in L1 while every
 * row of the block passes over them; the lane sums wait in scratch between
 * slices. ---- */
#define KG_NT 16
#define KG_SL 4

/* The per-token terms of super-block s (tile: before its rows): sx (q4_K,
 * q5_K) or the two q6_K start values. */
INL void kg_prep(const int DT, const uint8_t *xp, __m512 *sx, __m512i *nlo, __m512i *nhi) {
    if (DT == X_Q6K) {
        q6_starts(xp, nlo, nhi);
    } else {
        __m512 dx = _mm512_loadu_ps((const float *)(xp + 320));
        *sx =
            _mm512_mul_ps(_mm512_mul_ps(dx, _mm512_set1_ps(-0.125f)), _mm512_cvtepi32_ps(_mm512_loadu_si512(xp + 256)));
    }
}

/* acc[t] += row blk's super-block · token t's (xp[t]), t < NT */
INL void kg_row(const int DT, const int NT, const uint8_t *blk, const uint8_t *const *xp, const __m512 *sx,
                const __m512i *nlo, const __m512i *nhi, __m512 *acc) {
    const __m512i zero = _mm512_setzero_si512();
    __m512i q[4];
    __m512 fa, fb;
    kx8_unpack(DT, blk, q, &fa, &fb);
    _Pragma("GCC unroll 16") for (int t = 0; t < NT; t++) {
        const __m512 dx = _mm512_loadu_ps((const float *)(xp[t] + 320));
        if (DT == X_Q6K) {
            __m512i a = dp2(nlo[t], q[0], q[1], xp[t]);
            __m512i b = dp2(nhi[t], q[2], q[3], xp[t] + 128);
            __m512 v = _mm512_mul_ps(_mm512_cvtepi32_ps(a), fa);
            v = _mm512_fmadd_ps(_mm512_cvtepi32_ps(b), fb, v);
            acc[t] = _mm512_fmadd_ps(v, dx, acc[t]);
        } else {
            __m512i di = dp2(dp2(zero, q[0], q[1], xp[t]), q[2], q[3], xp[t] + 128);
            acc[t] = _mm512_fmadd_ps(_mm512_mul_ps(_mm512_cvtepi32_ps(di), fa), dx, acc[t]);
            acc[t] = _mm512_fnmadd_ps(fb, sx[t], acc[t]);
        }
    }
}

/* Tokens [0, nt) (nt <= NT) of x against rows [0, mc) of w: the lane sums
 * of row r, token t in sums[(r * KG_NT + t) * 16 ..] */
INL void kg_tokens(const int DT, const int NT, int K, const uint8_t *w, size_t ws, int mc, const uint8_t *x, size_t xs,
                   int nt, float *sums) {
    const size_t bs = DT == X_Q4K ? 144 : DT == X_Q5K ? 176 : 210;
    const int S = K / 256;
    for (int s0 = 0; s0 < S; s0 += KG_SL) {
        const int s1 = S - s0 < KG_SL ? S : s0 + KG_SL;
        __m512 sx[KG_SL][NT];
        __m512i nlo[KG_SL][NT], nhi[KG_SL][NT];
        const uint8_t *xp[KG_SL][NT];
        for (int s = s0; s < s1; s++) _Pragma("GCC unroll 16") for (int t = 0; t < NT; t++) {
                xp[s - s0][t] = x + (size_t)(t < nt ? t : 0) * xs + (size_t)s * R1_CPU_Q8X8_BYTES;
                kg_prep(DT, xp[s - s0][t], &sx[s - s0][t], &nlo[s - s0][t], &nhi[s - s0][t]);
            }
        for (int r = 0; r < mc; r++) {
            const uint8_t *row = w + (size_t)r * ws;
            float *sr = sums + (size_t)r * KG_NT * 16;
            /* the row after next's slice on its way while this one runs */
            if (r + 2 < mc)
                for (size_t o = (size_t)s0 * bs; o < (size_t)s1 * bs; o += 64)
                    _mm_prefetch((const char *)(row + 2 * ws + o), _MM_HINT_T0);
            __m512 acc[NT];
            _Pragma("GCC unroll 16") for (int t = 0; t < NT; t++) acc[t] =
                s0 ? _mm512_load_ps(sr + 16 * t) : _mm512_setzero_ps();
            for (int s = s0; s < s1; s++)
                kg_row(DT, NT, row + (size_t)s * bs, xp[s - s0], sx[s - s0], nlo[s - s0], nhi[s - s0], acc);
            _Pragma("GCC unroll 16") for (int t = 0; t < NT; t++) _mm512_store_ps(sr + 16 * t, acc[t]);
        }
    }
}

INL void kg_gemm(const int DT, int K, const uint8_t *w, size_t ws, int mc, const float *xf, size_t xs, int tn, float *C,
                 int ldc) {
    const uint8_t *x = (const uint8_t *)xf;
    float *sums = (float *)r1_cpu_scratch(2, (size_t)(mc + 3) * KG_NT * 16 * sizeof(float));
    for (int t0 = 0; t0 < tn; t0 += KG_NT) {
        const int nt = tn - t0 < KG_NT ? tn - t0 : KG_NT;
        const uint8_t *xt = x + (size_t)t0 * xs;
        if (nt > 8) kg_tokens(DT, 16, K, w, ws, mc, xt, xs, nt, sums);
        else if (nt > 4) kg_tokens(DT, 8, K, w, ws, mc, xt, xs, nt, sums);
        else if (nt > 2) kg_tokens(DT, 4, K, w, ws, mc, xt, xs, nt, sums);
        else kg_tokens(DT, 2, K, w, ws, mc, xt, xs, nt, sums);
        /* the decode tile's lane sums (R1_X86_TILE_OUT), 4 rows at a time */
        for (int r = 0; r < mc; r += 4) {
            const int nr = mc - r < 4 ? mc - r : 4;
            for (int t = 0; t < nt; t++) {
                __m512 a[4];
                for (int i = 0; i < 4; i++)
                    a[i] = _mm512_load_ps(sums + ((size_t)(r + (i < nr ? i : 0)) * KG_NT + t) * 16);
                __m512 u = r1_x86_sum4(a[0], a[1], a[2], a[3]);
                __m256 hi = _mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(u), 1));
                __m256 h = _mm256_add_ps(_mm512_castps512_ps256(u), hi);
                __m128 qs = _mm_add_ps(_mm256_castps256_ps128(h), _mm256_extractf128_ps(h, 1));
                float v[4];
                _mm_storeu_ps(v, qs);
                float *c = C + (size_t)(t0 + t) * ldc + r;
                for (int i = 0; i < nr; i++) c[i] = v[i];
            }
        }
    }
}

TGT void r1_gemm_q4_Kx8_q8x8_avx512(int K, const uint8_t *w, size_t ws, int mc, const float *x, size_t xs, int tn,
                                    float *C, int ldc) {
    kg_gemm(X_Q4K, K, w, ws, mc, x, xs, tn, C, ldc);
}
TGT void r1_gemm_q5_Kx8_q8x8_avx512(int K, const uint8_t *w, size_t ws, int mc, const float *x, size_t xs, int tn,
                                    float *C, int ldc) {
    kg_gemm(X_Q5K, K, w, ws, mc, x, xs, tn, C, ldc);
}
TGT void r1_gemm_q6_Kx8_q8x8_avx512(int K, const uint8_t *w, size_t ws, int mc, const float *x, size_t xs, int tn,
                                    float *C, int ldc) {
    kg_gemm(X_Q6K, K, w, ws, mc, x, xs, tn, C, ldc);
}

#endif /* __x86_64__ */
