/*
 * q32_avx2.c - AVX2 tiles for the 32-weight block formats: q8_0, q4_0, q4_1,
 * q5_0, q5_1 in GGUF's layout, and q4_0x8 and q4_Kx8 (q4_0 and q4_K
 * regrouped by the loader, dtype.h), for the avx2 and avx2-vnni tables
 * (avx2_dot.h: V selects the dot product encoding). Target attributes only,
 * never -mavx2.
 *
 * GGUF layout: a block's 32 quants become one ymm of unsigned bytes in column
 * order (q8_0: signed, with the sign trick), so the activations are read as
 * they are. The f16 scales of 8 blocks of a row are gathered through general
 * registers into one vcvtph2ps, multiplied by each token's activation scales
 * and kept on the stack: per block and token one dot product, one conversion
 * and one FMA with a broadcast from memory. Offsets and mins cost one FMA per
 * 8 blocks with the q8s sums (w = d q + m: + m fs; w = d (q - o): - o d fs).
 *
 * q4_0x8: a 32-byte load is 4 quant bytes of each of 8 blocks, so a 32-bit
 * lane stays with one block through the whole 256 columns; on AVX2 the 8
 * vpmaddubsw of a row add up in int16 (at most 8 x 2 x 15 x 127 = 30480) and
 * one vpmaddwd, one conversion and one FMA with the 8 scales (one vcvtph2ps)
 * finish 256 weights. The activations are in the q8x8 form (cpu.h).
 * q4_Kx8 (q4_K regrouped, dtype.h) keeps q4_0x8's quant layout, lane b
 * sub-block b, so the same loop serves it and only the end of a superblock
 * differs: d sc per lane for d, and the mins, dmin m times the activations'
 * lane sums, one more FMA. Against the plain q4_K tile (kquants_avx2.c) a
 * super-block costs two conversions and two FMAs instead of 8 and 9, and
 * its products add in int16 before a single vpmaddwd.
 *
 * Two-part activations (cpu.h) run the pair tiles (PAIR, lp): both parts'
 * dots folded in int32, (dot(q, x_hi) << 8) + dot(q, x_lo), then that one
 * conversion and FMA with d d_lo (d_lo = d_hi / 256); the q8s sums and the
 * q8x8 lane sums folded alike.
 *
 * Decode (one token, or its two activation parts) runs 4 rows at a time and
 * fetches the next rows ahead (q8_0 and q4_0x8 on plain AVX2: a row at a
 * time); batches run one row against up to 4 tokens, so a row's quants are
 * unpacked once for all of them.
 *
 * q8_0 on plain AVX2 (no VNNI) has its own tile instead (q8w_run): int16
 * activations, the two parts folded into one row, and vpmaddwd.
 */
#include "kernels/cpu/kquants.h"

#if defined(__x86_64__)
#include <string.h>

#include "kernels/cpu/x86/avx2_dot.h"
#include "kernels/cpu/x86/x86.h"
#include "kernels/dtype.h"

#define TGT __attribute__((target(R1_AVX2_TGT)))
#define INL R1_AVX2_INL

/* the regrouped formats (x8_run, x8_row): q4_0x8, and q4_Kx8 whose
 * quants sit where q4_0x8's do (dtype.h) */
enum { F_Q4KX8 = -2, F_Q40X8 = -1, F_Q80, F_Q40, F_Q41, F_Q50, F_Q51 };

#define BS(DT) ((DT) == F_Q80 ? 34 : (DT) == F_Q40 ? 18 : (DT) == F_Q41 ? 20 : (DT) == F_Q50 ? 22 : 24)
#define HAS_M(DT) ((DT) == F_Q41 || (DT) == F_Q51) /* w = d q + m */
#define OFFS(DT) ((DT) == F_Q40 ? 8.0f : 16.0f)    /* else w = d (q - o), but q8_0 */

INL uint32_t u32(const uint8_t *p) {
    uint32_t v;
    memcpy(&v, p, 4);
    return v;
}
INL uint16_t u16(const uint8_t *p) {
    uint16_t v;
    memcpy(&v, p, 2);
    return v;
}

/* The f16 scales d (and mins m, where the format has them) of blocks
 * p, p + bs, ..., n <= 8 of them (zero past n), as floats. */
INL void q32_scales(const int DT, const uint8_t *p, size_t bs, int n, __m256 *d, __m256 *m) {
    if (!HAS_M(DT)) {
        uint16_t h[8];
        if (n == 8) {
            _Pragma("GCC unroll 8") for (int i = 0; i < 8; i++) h[i] = u16(p + i * bs);
        } else {
            for (int i = 0; i < 8; i++) h[i] = i < n ? u16(p + i * bs) : 0;
        }
        uint64_t lo = h[0] | (uint64_t)h[1] << 16 | (uint64_t)h[2] << 32 | (uint64_t)h[3] << 48;
        uint64_t hi = h[4] | (uint64_t)h[5] << 16 | (uint64_t)h[6] << 32 | (uint64_t)h[7] << 48;
        *d = _mm256_cvtph_ps(_mm_set_epi64x((long long)hi, (long long)lo));
        return;
    }
    uint32_t v[8]; /* d | m << 16 per block */
    if (n == 8) {
        _Pragma("GCC unroll 8") for (int i = 0; i < 8; i++) v[i] = u32(p + i * bs);
    } else {
        for (int i = 0; i < 8; i++) v[i] = i < n ? u32(p + i * bs) : 0;
    }
    /* blocks (0,1,4,5) in the low half, (2,3,6,7) in the high half: the
     * in-lane shuffles below then give d and m in block order */
    __m256i g = _mm256_setr_epi64x((long long)(v[0] | (uint64_t)v[1] << 32), (long long)(v[4] | (uint64_t)v[5] << 32),
                                   (long long)(v[2] | (uint64_t)v[3] << 32), (long long)(v[6] | (uint64_t)v[7] << 32));
    __m256 a = _mm256_cvtph_ps(_mm256_castsi256_si128(g)), b = _mm256_cvtph_ps(_mm256_extracti128_si256(g, 1));
    *d = _mm256_shuffle_ps(a, b, 0x88);
    *m = _mm256_shuffle_ps(a, b, 0xdd);
}

/* The 32 quants of the block at p as bytes in column order: unsigned (the
 * 4- and 5-bit formats) or signed (q8_0). */
INL __m256i q32_quants(const int DT, const uint8_t *p) {
    if (DT == F_Q80) return _mm256_loadu_si256((const __m256i *)(p + 2));
    const int qso = DT == F_Q40 ? 2 : DT == F_Q41 ? 4 : DT == F_Q50 ? 6 : 8;
    __m128i v = _mm_loadu_si128((const __m128i *)(p + qso));
    __m256i q = _mm256_and_si256(_mm256_set_m128i(_mm_srli_epi16(v, 4), v), _mm256_set1_epi8(0x0f));
    if (DT == F_Q50 || DT == F_Q51) { /* bit k of qh -> 16 in byte k */
        const __m256i spread = _mm256_setr_epi8(0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1, /**/
                                                2, 2, 2, 2, 2, 2, 2, 2, 3, 3, 3, 3, 3, 3, 3, 3);
        const __m256i bit = _mm256_set1_epi64x((long long)0x8040201008040201ull);
        __m256i h = _mm256_shuffle_epi8(_mm256_set1_epi32((int)u32(p + (DT == F_Q50 ? 2 : 4))), spread);
        h = _mm256_cmpeq_epi8(_mm256_and_si256(h, bit), bit);
        q = _mm256_or_si256(q, _mm256_and_si256(h, _mm256_set1_epi8(0x10)));
    }
    return q;
}

/* Decode: the same block of the next 4 rows into L1, of the 4 after those
 * into L2 (4-row streams are too short for the hardware prefetcher). */
INL void q32_prefetch(const uint8_t *p, size_t ws) {
    _mm_prefetch((const char *)(p + 4 * ws), _MM_HINT_T0);
    _mm_prefetch((const char *)(p + 8 * ws), _MM_HINT_T1);
}

/* R rows (wr) x NT tokens (xt) over blocks [k0/32, k1/32): res[r * NT + t].
 * PAIR: two-part activations (cpu.h r1_cpu_mm.pair_tile), token t's lo part
 * one token of its form (q8, q8s) after its hi part at xt[t], scale d_lo =
 * d_hi / 256: each block's dot is (w·hi << 8) + w·lo in int32 (avx2_dot.h),
 * converted and multiplied by d d_lo once; offsets and mins take fs_hi +
 * fs_lo. */
INL void q32_run(const int DT, const int V, const int PAIR, const int R, const int NT, int K, int k0, int k1,
                 const uint8_t *const *wr, size_t ws, const uint8_t *const *xt, float *res) {
    const size_t bs = BS(DT), qoff = r1_cpu_q8_qoff(K), foff = r1_cpu_q8s_foff(K);
    const size_t lp = !PAIR ? 0 : DT == F_Q80 ? r1_cpu_q8_stride(K) : r1_cpu_q8s_stride(K);
    __m256 acc[4][4];
    _Alignas(32) float scm[4][4][8];
    _Pragma("GCC unroll 4") for (int r = 0; r < R; r++) _Pragma("GCC unroll 4") for (int t = 0; t < NT; t++) acc[r][t] =
        _mm256_setzero_ps();
    const int b1 = k1 / 32;
    for (int b0 = k0 / 32; b0 < b1; b0 += 8) {
        const int n = b1 - b0 < 8 ? b1 - b0 : 8;
        const __m256i lm = _mm256_cmpgt_epi32(_mm256_set1_epi32(n), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
        __m256 dx[4], fs[4];
        _Pragma("GCC unroll 4") for (int t = 0; t < NT; t++) {
            dx[t] = _mm256_maskload_ps((const float *)(xt[t] + lp) + b0, lm); /* PAIR: d_lo */
            fs[t] = DT == F_Q80 ? dx[t] : _mm256_maskload_ps((const float *)(xt[t] + foff) + b0, lm);
            if (PAIR && DT != F_Q80)
                fs[t] = _mm256_add_ps(fs[t], _mm256_maskload_ps((const float *)(xt[t] + lp + foff) + b0, lm));
        }
        _Pragma("GCC unroll 4") for (int r = 0; r < R; r++) {
            const uint8_t *p = wr[r] + (size_t)b0 * bs;
            __m256 d, m = _mm256_setzero_ps();
            q32_scales(DT, p, bs, n, &d, &m);
            _Pragma("GCC unroll 4") for (int t = 0; t < NT; t++) {
                _mm256_store_ps(scm[r][t], _mm256_mul_ps(d, dx[t]));
                if (HAS_M(DT)) acc[r][t] = _mm256_fmadd_ps(m, fs[t], acc[r][t]);
                else if (DT != F_Q80)
                    acc[r][t] = _mm256_fnmadd_ps(_mm256_mul_ps(d, _mm256_set1_ps(OFFS(DT))), fs[t], acc[r][t]);
            }
        }
        for (int i = 0; i < n; i++) {
            __m256i xq[4], ax[4], xl[4], al[4]; /* xl, al: PAIR's lo parts */
            _Pragma("GCC unroll 4") for (int t = 0; t < NT; t++) {
                xq[t] = _mm256_loadu_si256((const __m256i *)(xt[t] + qoff + (size_t)(b0 + i) * 32));
                ax[t] = DT == F_Q80 ? _mm256_sign_epi8(xq[t], xq[t]) : xq[t];
                xl[t] = PAIR ? _mm256_loadu_si256((const __m256i *)(xt[t] + lp + qoff + (size_t)(b0 + i) * 32)) : xq[t];
                al[t] = DT == F_Q80 ? _mm256_sign_epi8(xl[t], xl[t]) : xl[t];
            }
            _Pragma("GCC unroll 4") for (int r = 0; r < R; r++) {
                const uint8_t *p = wr[r] + (size_t)(b0 + i) * bs;
                if (R == 4 || NT <= 2) q32_prefetch(p, ws); /* decode (NT <= 2: a row at a time) */
                __m256i q = q32_quants(DT, p);
                _Pragma("GCC unroll 4") for (int t = 0; t < NT; t++) {
                    __m256i dp;
                    if (PAIR)
                        dp = DT == F_Q80 ? r1_avx2_dotz_pair(V, ax[t], _mm256_sign_epi8(q, xq[t]), al[t],
                                                             _mm256_sign_epi8(q, xl[t]))
                                         : r1_avx2_dotz_pair(V, q, xq[t], q, xl[t]);
                    else
                        dp = DT == F_Q80 ? r1_avx2_dotz(V, ax[t], _mm256_sign_epi8(q, xq[t]))
                                         : r1_avx2_dotz(V, q, xq[t]);
                    acc[r][t] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(dp), _mm256_broadcast_ss(&scm[r][t][i]), acc[r][t]);
                }
            }
        }
    }
    _Pragma("GCC unroll 4") for (int r = 0; r < R; r++) _Pragma("GCC unroll 4") for (int t = 0; t < NT; t++)
        res[r * NT + t] = r1_avx2_hsum(acc[r][t]);
}

/* q4_0x8 weights, q8x8 activations (cpu.h), superblocks [k0/256, k1/256).
 * lp > 0: two-part pairs (cpu.h r1_cpu_mm.pair_tile), token t's lo part lp
 * bytes after its hi part: per 32-bit lane (w·hi << 8) + w·lo in int32, the
 * lane sums nx alike (|w·hi + nx| <= 32 x 8 x 127 < 2^15, << 8 < 2^23),
 * one conversion and one FMA with d d_lo. */
/* A q4_0x8 superblock (144 bytes) of the rows 4 and 8 on, into L2 */
INL void prefetch_x8_rows(const uint8_t *bp, size_t ws) {
    for (int r = 4; r <= 8; r += 4) {
        _mm_prefetch((const char *)(bp + r * ws), _MM_HINT_T1);
        _mm_prefetch((const char *)(bp + r * ws + 64), _MM_HINT_T1);
        _mm_prefetch((const char *)(bp + r * ws + 143), _MM_HINT_T1);
    }
}

/* A regrouped superblock's scales, lane b for block (q4_Kx8: sub-block) b:
 * q4_0x8 *dw = d; q4_Kx8 *dw = d sc, *mn8 = dmin m / 8 */
INL void x8_scales(const int DT, const uint8_t *bp, __m256 *dw, __m256 *mn8) {
    if (DT == F_Q40X8) {
        *dw = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)bp));
        *mn8 = _mm256_setzero_ps();
        return;
    }
    r1_avx2_kq_scales(bp, dw, mn8);
    *mn8 = _mm256_mul_ps(*mn8, _mm256_set1_ps(0.125f));
}
/* acc + a superblock's lanes: d the quants' dots, nx -8 x the activations'
 * lane sums (both folded alike), dx the activation scales (PAIR: d_lo).
 * q4_0x8: w = d (q - 8), so (d + nx) d dx; q4_Kx8: w = d sc q - dmin m, so
 * d (d sc dx) + nx (dmin m / 8) dx. */
INL __m256 x8_fma(const int DT, __m256 acc, __m256i d, __m256i nx, __m256 dw, __m256 mn8, const float *dx) {
    __m256 x = _mm256_loadu_ps(dx);
    if (DT == F_Q40X8) return _mm256_fmadd_ps(_mm256_cvtepi32_ps(_mm256_add_epi32(d, nx)), _mm256_mul_ps(dw, x), acc);
    acc = _mm256_fmadd_ps(_mm256_cvtepi32_ps(d), _mm256_mul_ps(dw, x), acc);
    return _mm256_fmadd_ps(_mm256_cvtepi32_ps(nx), _mm256_mul_ps(mn8, x), acc);
}

INL void x8_run(const int DT, const int V, const int R, const int NT, const int PAIR, int K, int k0, int k1,
                const uint8_t *const *wr, size_t ws, const uint8_t *const *xt, float *res) {
    const size_t lp = PAIR ? r1_cpu_q8x8_stride(K) : 0;
    const __m256i m4 = _mm256_set1_epi8(0x0f);
    __m256 acc[4][4];
    _Pragma("GCC unroll 4") for (int r = 0; r < R; r++) _Pragma("GCC unroll 4") for (int t = 0; t < NT; t++) acc[r][t] =
        _mm256_setzero_ps();
    for (int s = k0 / 256; s < k1 / 256; s++) {
        const uint8_t *xp[4];
        __m256i nx[4];
        _Pragma("GCC unroll 4") for (int t = 0; t < NT; t++) {
            xp[t] = xt[t] + (size_t)s * R1_CPU_Q8X8_BYTES;
            nx[t] = r1_avx2_q8x8_nx(xp[t]);
            if (PAIR) nx[t] = _mm256_add_epi32(_mm256_slli_epi32(nx[t], 8), r1_avx2_q8x8_nx(xp[t] + lp));
        }
        _Pragma("GCC unroll 4") for (int r = 0; r < R; r++) {
            const uint8_t *bp = wr[r] + (size_t)s * 144;
            if (R == 4) { /* decode: the next 4 rows and the 4 after, into L2 (faster
                           * than the next 4 into L1) */
                prefetch_x8_rows(bp, ws);
            }
            __m256i di[4], dl[4]; /* dl: the lo parts' */
            _Pragma("GCC unroll 4") for (int t = 0; t < NT; t++) di[t] = dl[t] = _mm256_setzero_si256();
            _Pragma("GCC unroll 4") for (int part = 0; part < 4; part++) {
                __m256i q = _mm256_loadu_si256((const __m256i *)(bp + 16 + 32 * part));
                __m256i lo = _mm256_and_si256(q, m4), hi = _mm256_and_si256(_mm256_srli_epi16(q, 4), m4);
                _Pragma("GCC unroll 4") for (int t = 0; t < NT; t++) {
                    __m256i xl = _mm256_loadu_si256((const __m256i *)(xp[t] + 32 * part));
                    __m256i xh = _mm256_loadu_si256((const __m256i *)(xp[t] + 128 + 32 * part));
                    if (V == 0) /* int16 sums, widened once per superblock */
                        di[t] = _mm256_add_epi16(
                            di[t], _mm256_add_epi16(_mm256_maddubs_epi16(lo, xl), _mm256_maddubs_epi16(hi, xh)));
                    else di[t] = r1_avx2_dot4(V, r1_avx2_dot4(V, di[t], lo, xl), hi, xh);
                    if (PAIR) {
                        __m256i ll = _mm256_loadu_si256((const __m256i *)(xp[t] + lp + 32 * part));
                        __m256i lh = _mm256_loadu_si256((const __m256i *)(xp[t] + lp + 128 + 32 * part));
                        if (V == 0)
                            dl[t] = _mm256_add_epi16(
                                dl[t], _mm256_add_epi16(_mm256_maddubs_epi16(lo, ll), _mm256_maddubs_epi16(hi, lh)));
                        else dl[t] = r1_avx2_dot4(V, r1_avx2_dot4(V, dl[t], lo, ll), hi, lh);
                    }
                }
            }
            __m256 dw, mn8;
            x8_scales(DT, bp, &dw, &mn8);
            _Pragma("GCC unroll 4") for (int t = 0; t < NT; t++) {
                __m256i d = V == 0 ? _mm256_madd_epi16(di[t], _mm256_set1_epi16(PAIR ? 256 : 1)) : di[t];
                if (PAIR)
                    d = V == 0 ? _mm256_add_epi32(d, _mm256_madd_epi16(dl[t], _mm256_set1_epi16(1)))
                               : _mm256_add_epi32(_mm256_slli_epi32(d, 8), dl[t]);
                acc[r][t] = x8_fma(DT, acc[r][t], d, nx[t], dw, mn8, (const float *)(xp[t] + lp + 320));
            }
        }
    }
    _Pragma("GCC unroll 4") for (int r = 0; r < R; r++) _Pragma("GCC unroll 4") for (int t = 0; t < NT; t++)
        res[r * NT + t] = r1_avx2_hsum(acc[r][t]);
}

/* Decode of NT <= 2 tokens on q4_0x8 (PAIR: each one's two parts) on plain
 * AVX2, one row over superblocks [k0/256, k1/256): res[t], x8_run's
 * arithmetic for R = 1 lane by lane (the same bits). x8_run with 4 rows
 * unrolled has gcc keep the activations for all of them in registers and
 * spill a third of the loop; a row at a time needs fewer instructions per
 * block and reads the matrix as one sequential stream. The VNNI forms keep
 * x8_run: there the 4 rows' independent vpdpbusd chains are faster.
 * The same block of the rows 4 and 8 on is fetched ahead into L2, as
 * x8_run does. */
INL void x8_row(const int DT, const int PAIR, const int NT, size_t lp, int k0, int k1, const uint8_t *w, size_t ws,
                const uint8_t *const *xt, float *res) {
    const __m256i m4 = _mm256_set1_epi8(0x0f);
    __m256 acc[2];
    _Pragma("GCC unroll 2") for (int t = 0; t < NT; t++) acc[t] = _mm256_setzero_ps();
    for (int s = k0 / 256; s < k1 / 256; s++) {
        const uint8_t *bp = w + (size_t)s * 144, *xp[2];
        prefetch_x8_rows(bp, ws);
        __m256i di[2], dl[2]; /* int16 sums of the hi and lo parts */
        _Pragma("GCC unroll 2") for (int t = 0; t < NT; t++) {
            xp[t] = xt[t] + (size_t)s * R1_CPU_Q8X8_BYTES;
            di[t] = dl[t] = _mm256_setzero_si256();
        }
        _Pragma("GCC unroll 4") for (int part = 0; part < 4; part++) {
            __m256i q = _mm256_loadu_si256((const __m256i *)(bp + 16 + 32 * part));
            __m256i lo = _mm256_and_si256(q, m4), hi = _mm256_and_si256(_mm256_srli_epi16(q, 4), m4);
            _Pragma("GCC unroll 2") for (int t = 0; t < NT; t++) {
                const uint8_t *xl = xp[t] + 32 * part, *xh = xp[t] + 128 + 32 * part;
                di[t] = _mm256_add_epi16(
                    di[t], _mm256_add_epi16(_mm256_maddubs_epi16(lo, _mm256_loadu_si256((const __m256i *)xl)),
                                            _mm256_maddubs_epi16(hi, _mm256_loadu_si256((const __m256i *)xh))));
                if (PAIR)
                    dl[t] = _mm256_add_epi16(
                        dl[t],
                        _mm256_add_epi16(_mm256_maddubs_epi16(lo, _mm256_loadu_si256((const __m256i *)(xl + lp))),
                                         _mm256_maddubs_epi16(hi, _mm256_loadu_si256((const __m256i *)(xh + lp)))));
            }
        }
        __m256 dw, mn8;
        x8_scales(DT, bp, &dw, &mn8);
        _Pragma("GCC unroll 2") for (int t = 0; t < NT; t++) {
            __m256i nx = r1_avx2_q8x8_nx(xp[t]);
            if (PAIR) nx = _mm256_add_epi32(_mm256_slli_epi32(nx, 8), r1_avx2_q8x8_nx(xp[t] + lp));
            __m256i d = _mm256_madd_epi16(di[t], _mm256_set1_epi16(PAIR ? 256 : 1));
            if (PAIR) d = _mm256_add_epi32(d, _mm256_madd_epi16(dl[t], _mm256_set1_epi16(1)));
            acc[t] = x8_fma(DT, acc[t], d, nx, dw, mn8, (const float *)(xp[t] + lp + 320));
        }
    }
    _Pragma("GCC unroll 2") for (int t = 0; t < NT; t++) res[t] = r1_avx2_hsum(acc[t]);
}

/* q8_0 weights against q8w activations (cpu.h: int16 quants; with two-part
 * activations a token's parts folded, 256 hi + lo at d_lo, the very
 * integers the pair tiles fold), plain AVX2 only: each block's 32 weights
 * widened to int16 once for all tokens, then two vpmaddwd per token and
 * block, without the sign trick's vpsignb and with one activation row where
 * the pair tiles took two: per block and token 2 vpmaddwd, an add, a
 * conversion and an FMA against 2 vpsignb, 2 vpmaddubsw, 2 vpmaddwd and
 * the same three (with VNNI the sign trick and vpdpbusd are cheaper). R rows
 * x NT tokens over blocks [k0/32, k1/32): res[r * NT + t]; a (row, token)'s
 * sum is the same bits whatever R and NT. PF: fetch the same block of the
 * rows 4 and 8 on ahead (decode, and a batch's first pass over its rows). */
INL void q8w_run(const int R, const int NT, int PF, int K, int k0, int k1, const uint8_t *const *wr, size_t ws,
                 const uint8_t *const *xt, float *res) {
    const size_t qoff = r1_cpu_q8_qoff(K);
    __m256 acc[4][4];
    _Alignas(32) float scm[4][4][8];
    _Pragma("GCC unroll 4") for (int r = 0; r < R; r++) _Pragma("GCC unroll 4") for (int t = 0; t < NT; t++) acc[r][t] =
        _mm256_setzero_ps();
    const int b1 = k1 / 32;
    for (int b0 = k0 / 32; b0 < b1; b0 += 8) {
        const int n = b1 - b0 < 8 ? b1 - b0 : 8;
        const __m256i lm = _mm256_cmpgt_epi32(_mm256_set1_epi32(n), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
        __m256 dx[4];
        _Pragma("GCC unroll 4") for (int t = 0; t < NT; t++) dx[t] = _mm256_maskload_ps((const float *)xt[t] + b0, lm);
        _Pragma("GCC unroll 4") for (int r = 0; r < R; r++) {
            __m256 d, m;
            q32_scales(F_Q80, wr[r] + (size_t)b0 * 34, 34, n, &d, &m);
            _Pragma("GCC unroll 4") for (int t = 0; t < NT; t++) _mm256_store_ps(scm[r][t], _mm256_mul_ps(d, dx[t]));
        }
        for (int i = 0; i < n; i++) {
            const size_t b = (size_t)(b0 + i);
            __m256i w0[4], w1[4];
            _Pragma("GCC unroll 4") for (int r = 0; r < R; r++) {
                const uint8_t *p = wr[r] + b * 34;
                if (PF) q32_prefetch(p, ws);
                w0[r] = _mm256_cvtepi8_epi16(_mm_loadu_si128((const __m128i *)(p + 2)));
                w1[r] = _mm256_cvtepi8_epi16(_mm_loadu_si128((const __m128i *)(p + 18)));
            }
            _Pragma("GCC unroll 4") for (int t = 0; t < NT; t++) {
                const __m256i *xq = (const __m256i *)(xt[t] + qoff + b * 64);
                const __m256i x0 = _mm256_loadu_si256(xq), x1 = _mm256_loadu_si256(xq + 1);
                _Pragma("GCC unroll 4") for (int r = 0; r < R; r++) {
                    const __m256i p0 = _mm256_madd_epi16(w0[r], x0);
                    const __m256i s = _mm256_add_epi32(p0, _mm256_madd_epi16(w1[r], x1));
                    acc[r][t] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(s), _mm256_broadcast_ss(&scm[r][t][i]), acc[r][t]);
                }
            }
        }
    }
    _Pragma("GCC unroll 4") for (int r = 0; r < R; r++) _Pragma("GCC unroll 4") for (int t = 0; t < NT; t++)
        res[r * NT + t] = r1_avx2_hsum(acc[r][t]);
}

/* Decode (one token): a row at a time (cpu.h r1_cpu_tuning.row1; else 2
 * rows a pass). Batches: 2 rows against 2 or 4 tokens a pass (tokens past
 * nt repeat token 0). */
TGT void r1_x86_tile_q8_0_q8w_avx2(R1_KQ_TILE_ARGS) {
    const uint8_t *xt[4];
    for (int t = 0; t < 4; t++) xt[t] = x + (size_t)(t < nt ? t : 0) * xs;
    const int pf = r1_cpu_tile_prefetch;
    if (nt == 1 && r1_cpu_tuning.row1) {
        for (int r = 0; r < nr; r++) {
            const uint8_t *wr = w + (size_t)r * ws;
            q8w_run(1, 1, pf, K, k0, k1, &wr, ws, xt, &out[r]);
        }
        return;
    }
    for (int r = 0; r < nr; r += 2) {
        const uint8_t *wr[2] = {w + (size_t)r * ws, w + (size_t)(r + 1 < nr ? r + 1 : r) * ws};
        float res[8];
        if (nt == 1) q8w_run(2, 1, pf, K, k0, k1, wr, ws, xt, res);
        else if (nt == 2) q8w_run(2, 2, pf, K, k0, k1, wr, ws, xt, res);
        else q8w_run(2, 4, pf, K, k0, k1, wr, ws, xt, res);
        const int tn = nt == 1 ? 1 : nt == 2 ? 2 : 4;
        for (int i = 0; i < 2 && r + i < nr; i++)
            for (int t = 0; t < nt; t++) out[t * R1_CPU_MR + r + i] = res[i * tn + t];
    }
}

/* Activations in the q8x8 form (cpu.h): per 256 columns the 8 q8 blocks
 * (32 bytes = 8 dwords each) transposed, so that the 32 bytes at 32 p hold
 * dword p of every block (p < 4: xl, p >= 4: xh), then the -8 x lane sums
 * and the scales. The q8 form of 256 columns (aligned: d[8], qs at 64) in
 * q8x8 form at o. */
static TGT void group_to_x8(const uint8_t *q8, uint8_t *o) {
    const __m256i eight = _mm256_set1_epi8(8), one = _mm256_set1_epi16(1);
    __m256i r[8], a[8], b[8], t[8];
    _Pragma("GCC unroll 8") for (int i = 0; i < 8; i++) r[i] = _mm256_load_si256((const __m256i *)(q8 + 64 + 32 * i));
    _Pragma("GCC unroll 4") for (int i = 0; i < 8; i += 2) {
        a[i] = _mm256_unpacklo_epi32(r[i], r[i + 1]);
        a[i + 1] = _mm256_unpackhi_epi32(r[i], r[i + 1]);
    }
    _Pragma("GCC unroll 2") for (int i = 0; i < 8; i += 4) {
        b[i] = _mm256_unpacklo_epi64(a[i], a[i + 2]);
        b[i + 1] = _mm256_unpackhi_epi64(a[i], a[i + 2]);
        b[i + 2] = _mm256_unpacklo_epi64(a[i + 1], a[i + 3]);
        b[i + 3] = _mm256_unpackhi_epi64(a[i + 1], a[i + 3]);
    }
    _Pragma("GCC unroll 4") for (int i = 0; i < 4; i++) {
        t[i] = _mm256_permute2x128_si256(b[i], b[i + 4], 0x20);
        t[i + 4] = _mm256_permute2x128_si256(b[i], b[i + 4], 0x31);
    }
    _Pragma("GCC unroll 8") for (int i = 0; i < 8; i++) _mm256_storeu_si256((__m256i *)(o + 32 * i), t[i]);
    /* lanes 0-7 of the 512-bit form: dwords 0, 2 (xl) and 4, 6 (xh); 8-15: 1, 3, 5, 7 */
    __m256i n0 = _mm256_setzero_si256(), n1 = _mm256_setzero_si256();
    _Pragma("GCC unroll 4") for (int i = 0; i < 8; i += 2) {
        n0 = _mm256_add_epi32(n0, _mm256_madd_epi16(_mm256_maddubs_epi16(eight, t[i]), one));
        n1 = _mm256_add_epi32(n1, _mm256_madd_epi16(_mm256_maddubs_epi16(eight, t[i + 1]), one));
    }
    _mm256_storeu_si256((__m256i *)(o + 256), _mm256_sub_epi32(_mm256_setzero_si256(), n0));
    _mm256_storeu_si256((__m256i *)(o + 288), _mm256_sub_epi32(_mm256_setzero_si256(), n1));
    __m256 d = _mm256_load_ps((const float *)q8);
    _mm256_storeu_ps((float *)(o + 320), d);
    _mm256_storeu_ps((float *)(o + 352), d);
}
/* The q8x8 form of x (K columns) at dst */
TGT void r1_x86_quant_q8x8_avx2(const float *x, uint8_t *dst, int K) {
    _Alignas(64) uint8_t q8[64 + 256]; /* the q8 form of 256 columns: d[8], qs at 64 */
    for (int s = 0; s < K / 256; s++) {
        r1_x86_quant_q8_avx2(x + (size_t)s * 256, q8, 256);
        group_to_x8(q8, dst + (size_t)s * R1_CPU_Q8X8_BYTES);
    }
    if (K % 256) /* the last K % 256 columns in q8 form (cpu.h) */
        r1_x86_quant_q8_avx2(x + (size_t)K / 256 * 256, dst + (size_t)K / 256 * R1_CPU_Q8X8_BYTES, K % 256);
}

/* Two-part activations in q8x8 form (cpu.h quant_q8x8_2): both parts of
 * each 256 columns in q8 form (r1_x86_quant_q8_2_avx2), then rearranged; the
 * tail as q8 form, as r1_x86_quant_q8x8_avx2 */
TGT void r1_x86_quant_q8x8_2_avx2(const float *x, uint8_t *hi, uint8_t *lo, int K) {
    _Alignas(64) uint8_t qh[64 + 256], ql[64 + 256];
    const int G = K / 256;
    for (int s = 0; s < G; s++) {
        r1_x86_quant_q8_2_avx2(x + (size_t)s * 256, qh, ql, 256);
        group_to_x8(qh, hi + (size_t)s * R1_CPU_Q8X8_BYTES);
        group_to_x8(ql, lo + (size_t)s * R1_CPU_Q8X8_BYTES);
    }
    if (K % 256)
        r1_x86_quant_q8_2_avx2(x + (size_t)G * 256, hi + (size_t)G * R1_CPU_Q8X8_BYTES,
                               lo + (size_t)G * R1_CPU_Q8X8_BYTES, K % 256);
}

/* Decode (nt <= 2: a token or its two parts; PAIR: one or two tokens,
 * both parts each): 4 rows (past nr: row 0 again). Batches: each row
 * against 2 or 4 tokens (tokens past nt repeat token 0), one row at a time. */
INL void q_tile(const int DT, const int V, const int PAIR, int K, int k0, int k1, const uint8_t *w, size_t ws, int nr,
                const uint8_t *x, size_t xs, int nt, float *out) {
    const uint8_t *xt[4];
    for (int t = 0; t < 4; t++) xt[t] = x + (size_t)(t < nt ? t : 0) * xs;
    if (nt <= 2) { /* decode: one token, or its two activation parts */
        const uint8_t *wr[4] = {w, w + (nr > 1 ? ws : 0), w + (nr > 2 ? 2 * ws : 0), w + (nr > 3 ? 3 * ws : 0)};
        float res[8];
        if (DT < 0 && V == 0) { /* plain AVX2: a row at a time, both tokens */
            const size_t lp = PAIR ? r1_cpu_q8x8_stride(K) : 0;
            for (int r = 0; r < nr; r++) {
                float res2[2];
                if (nt == 1) x8_row(DT, PAIR, 1, lp, k0, k1, w + (size_t)r * ws, ws, xt, res2);
                else x8_row(DT, PAIR, 2, lp, k0, k1, w + (size_t)r * ws, ws, xt, res2);
                for (int t = 0; t < nt; t++) out[t * R1_CPU_MR + r] = res2[t];
            }
            return;
        }
        if (DT == F_Q80 && r1_cpu_tuning.row1) { /* cpu.h: a row at a time (q8_0 only) */
            for (int r = 0; r < nr; r++) {
                if (nt == 1) q32_run(DT, V, PAIR, 1, 1, K, k0, k1, &wr[r], ws, xt, res);
                else q32_run(DT, V, PAIR, 1, 2, K, k0, k1, &wr[r], ws, xt, res);
                for (int t = 0; t < nt; t++) out[t * R1_CPU_MR + r] = res[t];
            }
            return;
        }
        if (nt == 1) {
            if (DT < 0) x8_run(DT, V, 4, 1, PAIR, K, k0, k1, wr, ws, xt, res);
            else q32_run(DT, V, PAIR, 4, 1, K, k0, k1, wr, ws, xt, res);
        } else {
            if (DT < 0) x8_run(DT, V, 4, 2, PAIR, K, k0, k1, wr, ws, xt, res);
            else q32_run(DT, V, PAIR, 4, 2, K, k0, k1, wr, ws, xt, res);
        }
        for (int t = 0; t < nt; t++)
            for (int r = 0; r < nr; r++) out[t * R1_CPU_MR + r] = res[r * nt + t];
        return;
    }
    if (DT == F_Q80) { /* two rows a pass: |x| and x's signs shared by both */
        for (int r = 0; r < nr; r += 2) {
            const uint8_t *wr[2] = {w + (size_t)r * ws, w + (size_t)(r + 1 < nr ? r + 1 : r) * ws};
            float res[8];
            q32_run(DT, V, 0, 2, 4, K, k0, k1, wr, ws, xt, res);
            for (int i = 0; i < 2 && r + i < nr; i++)
                for (int t = 0; t < nt; t++) out[t * R1_CPU_MR + r + i] = res[i * 4 + t];
        }
        return;
    }
    for (int r = 0; r < nr; r++) {
        const uint8_t *wr = w + (size_t)r * ws;
        float res[4];
        if (DT < 0) x8_run(DT, V, 1, 4, 0, K, k0, k1, &wr, ws, xt, res);
        else q32_run(DT, V, 0, 1, 4, K, k0, k1, &wr, ws, xt, res);
        for (int t = 0; t < nt; t++) out[t * R1_CPU_MR + r] = res[t];
    }
}

/* VNNI: the _avx2vnni tile (one activation row per token, nt <= 4) and its
 * pair form on two-part tokens (cpu.h r1_cpu_mm.pair_tile, nt <= 2), each
 * choosing {vex} or {evex} vpdpbusd by r1_x86_avx2_vnni. AVX2 adds the plain
 * AVX2 forms. q8_0 has only the VNNI forms: plain AVX2 multiplies it on q8w
 * (r1_x86_tile_q8_0_q8w_avx2). */
#define Q_AVX2_VNNI(DT, TILE, PAIR)                                                                                    \
    static TGT void TILE##_v1(R1_KQ_TILE_ARGS) { q_tile(DT, 1, 0, K, k0, k1, w, ws, nr, x, xs, nt, out); }             \
    static TGT void TILE##_v2(R1_KQ_TILE_ARGS) { q_tile(DT, 2, 0, K, k0, k1, w, ws, nr, x, xs, nt, out); }             \
    void TILE(R1_KQ_TILE_ARGS) {                                                                                       \
        if (r1_x86_avx2_vnni == 1) TILE##_v1(K, k0, k1, w, ws, nr, x, xs, nt, out);                                    \
        else TILE##_v2(K, k0, k1, w, ws, nr, x, xs, nt, out);                                                          \
    }                                                                                                                  \
    static TGT void PAIR##_v1(R1_KQ_TILE_ARGS) { q_tile(DT, 1, 1, K, k0, k1, w, ws, nr, x, xs, nt, out); }             \
    static TGT void PAIR##_v2(R1_KQ_TILE_ARGS) { q_tile(DT, 2, 1, K, k0, k1, w, ws, nr, x, xs, nt, out); }             \
    void PAIR(R1_KQ_TILE_ARGS) {                                                                                       \
        if (r1_x86_avx2_vnni == 1) PAIR##_v1(K, k0, k1, w, ws, nr, x, xs, nt, out);                                    \
        else PAIR##_v2(K, k0, k1, w, ws, nr, x, xs, nt, out);                                                          \
    }
#define Q_AVX2(DT, TILE, PAIR, TILE_VNNI, PAIR_VNNI)                                                                   \
    static TGT void TILE##_v0(R1_KQ_TILE_ARGS) { q_tile(DT, 0, 0, K, k0, k1, w, ws, nr, x, xs, nt, out); }             \
    void TILE(R1_KQ_TILE_ARGS) { TILE##_v0(K, k0, k1, w, ws, nr, x, xs, nt, out); }                                    \
    TGT void PAIR(R1_KQ_TILE_ARGS) { q_tile(DT, 0, 1, K, k0, k1, w, ws, nr, x, xs, nt, out); }                         \
    Q_AVX2_VNNI(DT, TILE_VNNI, PAIR_VNNI)

Q_AVX2_VNNI(F_Q80, r1_x86_tile_q8_0_avx2vnni, r1_x86_tile_q8_0_pair_avx2vnni)
Q_AVX2(F_Q40, r1_x86_tile_q4_0_avx2, r1_x86_tile_q4_0_pair_avx2, r1_x86_tile_q4_0_avx2vnni,
       r1_x86_tile_q4_0_pair_avx2vnni)
Q_AVX2(F_Q41, r1_x86_tile_q4_1_avx2, r1_x86_tile_q4_1_pair_avx2, r1_x86_tile_q4_1_avx2vnni,
       r1_x86_tile_q4_1_pair_avx2vnni)
Q_AVX2(F_Q50, r1_x86_tile_q5_0_avx2, r1_x86_tile_q5_0_pair_avx2, r1_x86_tile_q5_0_avx2vnni,
       r1_x86_tile_q5_0_pair_avx2vnni)
Q_AVX2(F_Q51, r1_x86_tile_q5_1_avx2, r1_x86_tile_q5_1_pair_avx2, r1_x86_tile_q5_1_avx2vnni,
       r1_x86_tile_q5_1_pair_avx2vnni)
Q_AVX2(F_Q40X8, r1_x86_tile_q4_0x8_avx2, r1_x86_tile_q4_0x8_pair_avx2, r1_x86_tile_q4_0x8_avx2vnni,
       r1_x86_tile_q4_0x8_pair_avx2vnni)
Q_AVX2(F_Q4KX8, r1_x86_tile_q4_Kx8_avx2, r1_x86_tile_q4_Kx8_pair_avx2, r1_x86_tile_q4_Kx8_avx2vnni,
       r1_x86_tile_q4_Kx8_pair_avx2vnni)

#endif /* __x86_64__ */
