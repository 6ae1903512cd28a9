/*
 * kquants_avx2.c - AVX2 tiles for q4_K, q5_K and q6_K weights (256-weight
 * super-blocks) against q8s activations (cpu.h: q8 blocks plus their sums),
 * for the avx2 and avx2-vnni tables (avx2_dot.h: V selects the dot product
 * encoding). Target attributes only, never -mavx2.
 *
 * Per super-block and row the scales are unpacked once into 8 (q6_K: 16)
 * floats, multiplied by each token's activation scales and kept on the stack,
 * so each 32-column block costs its quants, one dot product, one conversion
 * and one FMA with a broadcast from memory:
 *   acc += cvt(dot(q, xq)) * (d sc dx)             per 32 columns
 *   acc -= (dmin m) * fs                          the mins (q4_K, q5_K): one
 *                                                 FMA per super-block, fs from
 *                                                 the q8s sums
 *   acc -= 32 (d sc dx) * s16                     q6_K's offset (w = d sc (q - 32))
 * Two-part activations (cpu.h) run the pair tiles: both parts' dots folded
 * in int32, (dot(q, x_hi) << 8) + dot(q, x_lo), then that one conversion
 * and FMA with d sc d_lo (d_lo = d_hi / 256), the sums folded alike.
 * Lanes are summed once, at the end; each token has two FMA chains (even and
 * odd 32-column blocks). Rows run one at a time, each a linear stream fetched
 * KQ_PF_AHEAD bytes ahead; batches run a row against 4 tokens, so a row's
 * quants are unpacked once for all of them.
 * Column ranges start and end on 64-column chunks (kquants.h): a super-block
 * cut by the range has the sums of its missing sub-blocks masked out.
 * Without VNNI the avx2 table runs q4_K and q5_K on q8ws activations
 * instead (cpu.h: both parts in int16 quants, kqw_run below): one vpmaddwd
 * per 16 weights where a q8s pair takes two vpmaddubsw and two vpmaddwd.
 */
#include "kernels/cpu/kquants.h"

#if defined(__x86_64__)

#include "kernels/cpu/x86/avx2_dot.h"
#include "kernels/cpu/x86/x86.h"
#include "kernels/dtype.h"

#define TGT __attribute__((target(R1_AVX2_TGT)))
#define INL R1_AVX2_INL

enum { F_Q4K, F_Q5K, F_Q6K };

INL __m256i ld(const uint8_t *p) { return _mm256_loadu_si256((const __m256i *)p); }

/* A row is read as one linear stream, and the super-block KQ_PF_AHEAD
 * bytes on is fetched ahead into L1 (the lines p, p + 64, p + 128 (p +
 * 192) cover a block but for its last line, which is the next block's first
 * and fetched with it). At K = 1536 this reads faster than 4 rows in
 * lockstep (each stream 864 bytes, the next rows fetched ahead); 4 KiB
 * ahead is far enough, 1 KiB too short. */
#define KQ_PF_AHEAD 4096
INL void kq_prefetch(const uint8_t *blk, size_t bs) {
    const char *p = (const char *)blk + KQ_PF_AHEAD;
    _mm_prefetch(p, _MM_HINT_T0);
    _mm_prefetch(p + 64, _MM_HINT_T0);
    _mm_prefetch(p + 128, _MM_HINT_T0);
    if (bs > 192) _mm_prefetch(p + 192, _MM_HINT_T0);
}

/* 1.0 bits in lanes [lo, hi) of 8, else 0 */
INL __m256 lane_mask(int lo, int hi) {
    const __m256i i = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
    __m256i m = _mm256_and_si256(_mm256_cmpgt_epi32(_mm256_set1_epi32(hi), i),
                                 _mm256_cmpgt_epi32(_mm256_add_epi32(i, _mm256_set1_epi32(1)), _mm256_set1_epi32(lo)));
    return _mm256_castsi256_ps(m);
}

/* element i of each 128-bit lane of v in all 4 of its places (vpermilps;
 * a switch, so that unoptimized builds see constant immediates too) */
INL __m256 kq_elem(__m256 v, const int i) {
    switch (i) {
    case 0:
        return _mm256_permute_ps(v, 0x00);
    case 1:
        return _mm256_permute_ps(v, 0x55);
    case 2:
        return _mm256_permute_ps(v, 0xaa);
    default:
        return _mm256_permute_ps(v, 0xff);
    }
}

/* q5_K: the fifth bit of sub-block s (bit s of each qh byte) as 0 or 16 */
INL __m256i q5_hi(__m256i qh, const int s) {
    __m256i v = s < 4 ? _mm256_slli_epi16(qh, 4 - s) : _mm256_srli_epi16(qh, s - 4);
    return _mm256_and_si256(v, _mm256_set1_epi8(0x10));
}

/* A chunk's two sub-block dots into a token's two chains: *a += p0 s[0],
 * *a2 += p1 s[1] */
INL void kq_fma2(__m256 *a, __m256 *a2, __m256i p0, __m256i p1, const float *s) {
    *a = _mm256_fmadd_ps(_mm256_cvtepi32_ps(p0), _mm256_broadcast_ss(s), *a);
    *a2 = _mm256_fmadd_ps(_mm256_cvtepi32_ps(p1), _mm256_broadcast_ss(s + 1), *a2);
}

/* Chunk J (columns 64J..64J+63 of the super-block at blk) of a q4_K/q5_K row:
 * its two sub-blocks' quants, then into each token's two sums: the even
 * sub-block into acc[t], the odd one into acc2[t] (two FMA chains). */
#define KQ45_CHUNK(J)                                                                                                  \
    do {                                                                                                               \
        __m256i q = ld(blk + (DT == F_Q4K ? 16 : 48) + 32 * (J));                                                      \
        __m256i lo = _mm256_and_si256(q, m4), hi = _mm256_and_si256(_mm256_srli_epi16(q, 4), m4);                      \
        if (DT == F_Q5K) {                                                                                             \
            __m256i qh = ld(blk + 16);                                                                                 \
            lo = _mm256_or_si256(lo, q5_hi(qh, 2 * (J)));                                                              \
            hi = _mm256_or_si256(hi, q5_hi(qh, 2 * (J) + 1));                                                          \
        }                                                                                                              \
        _Pragma("GCC unroll 4") for (int t = 0; t < NT; t++) {                                                         \
            const uint8_t *xb = xq[t] + 64 * (J);                                                                      \
            __m256i p0 = PAIR ? r1_avx2_dotz_pair(V, lo, ld(xb), lo, ld(xb + lp)) : r1_avx2_dotz(V, lo, ld(xb));       \
            __m256i p1 =                                                                                               \
                PAIR ? r1_avx2_dotz_pair(V, hi, ld(xb + 32), hi, ld(xb + lp + 32)) : r1_avx2_dotz(V, hi, ld(xb + 32)); \
            kq_fma2(&acc[t], &acc2[t], p0, p1, &scm[t][2 * (J)]);                                                      \
        }                                                                                                              \
    } while (0)

/* Chunk J of a q6_K row: quants from ql (64 bytes per half h = J / 2, nibble
 * J % 2) and qh (bit pairs), then the two 32-column blocks, each the groups
 * 4J + 2i and 4J + 2i + 1 (16 columns each) with their own scales; the
 * first block into acc[t], the second into acc2[t]. */
#define Q6_BLOCK(QV, XB, A)                                                                                            \
    _Pragma("GCC unroll 4") for (int t = 0; t < NT; t++) {                                                             \
        const uint8_t *xb = xq[t] + 32 * (XB);                                                                         \
        __m256i p = PAIR ? r1_avx2_dotz_pair(V, QV, ld(xb), QV, ld(xb + lp)) : r1_avx2_dotz(V, QV, ld(xb));            \
        __m256 f = kq_elem(_mm256_load_ps(&scm[t][8 * ((XB) / 4)]), (XB) % 4);                                         \
        A[t] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(p), f, A[t]);                                                        \
    }
#define Q6_CHUNK(J)                                                                                                    \
    do {                                                                                                               \
        const uint8_t *ql = blk + 64 * ((J) / 2);                                                                      \
        __m256i a = ld(ql), b = ld(ql + 32), h = ld(blk + 128 + 32 * ((J) / 2));                                       \
        __m256i q0, q1;                                                                                                \
        if ((J) % 2 == 0) {                                                                                            \
            q0 = _mm256_or_si256(_mm256_and_si256(a, m4), _mm256_and_si256(_mm256_slli_epi16(h, 4), m30));             \
            q1 = _mm256_or_si256(_mm256_and_si256(b, m4), _mm256_and_si256(_mm256_slli_epi16(h, 2), m30));             \
        } else {                                                                                                       \
            q0 = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(a, 4), m4), _mm256_and_si256(h, m30));             \
            q1 = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(b, 4), m4),                                        \
                                 _mm256_and_si256(_mm256_srli_epi16(h, 2), m30));                                      \
        }                                                                                                              \
        Q6_BLOCK(q0, 2 * (J), acc)                                                                                     \
        Q6_BLOCK(q1, 2 * (J) + 1, acc2)                                                                                \
    } while (0)

/* Super-block sb of sb0 .. sb1 - 1 (columns [k0, k1)): its chunks j0 .. j1 -
 * 1; 1 if that is not all 4 (only the first and the last may be cut). */
INL int kq_span(unsigned sb, unsigned sb0, unsigned sb1, int k0, int k1, int *j0, int *j1) {
    *j0 = sb == sb0 ? (int)((unsigned)k0 % R1_QK_K / 64) : 0;
    *j1 = sb + 1 == sb1 ? (int)(((unsigned)k1 - sb * R1_QK_K + 63) / 64) : 4;
    return *j0 != 0 || *j1 != 4;
}
/* CHUNK(j) for the chunks of the span: whole super-blocks (decode: all of
 * them) without range tests */
#define KQ_CHUNKS(CHUNK)                                                                                               \
    do {                                                                                                               \
        if (!part) {                                                                                                   \
            _Pragma("GCC unroll 4") for (int j = 0; j < 4; j++) CHUNK(j);                                              \
        } else {                                                                                                       \
            _Pragma("GCC unroll 4") for (int j = 0; j < 4; j++) {                                                      \
                if (j < j0 || j >= j1) continue;                                                                       \
                CHUNK(j);                                                                                              \
            }                                                                                                          \
        }                                                                                                              \
    } while (0)
#define KQ_RUN_CHUNK(J)                                                                                                \
    do {                                                                                                               \
        if (DT == F_Q6K) Q6_CHUNK(J);                                                                                  \
        else KQ45_CHUNK(J);                                                                                            \
    } while (0)

/* One row w x NT tokens (xt) over columns [k0, k1): res[t]. pf: fetch the
 * row ahead (r1_cpu_tile_prefetch).
 * PAIR: two-part activations (cpu.h r1_cpu_mm.pair_tile), token t's lo part
 * lp = r1_cpu_q8s_stride(K) bytes after its hi part at xt[t], scale d_lo =
 * d_hi / 256: each 32-column block's dot is (w·hi << 8) + w·lo in int32
 * (avx2_dot.h), converted and multiplied by d sc d_lo once; the sums fold
 * the same way (q6_K: s16_hi << 8 + s16_lo; the mins: fs_hi + fs_lo). */
INL void kq_run(const int DT, const int V, const int PAIR, const int NT, int K, int k0, int k1, const uint8_t *w,
                const uint8_t *const *xt, int pf, float *res) {
    const size_t bs = DT == F_Q4K ? 144 : DT == F_Q5K ? 176 : 210;
    const size_t lp = PAIR ? r1_cpu_q8s_stride(K) : 0;
    (void)lp;
    const size_t qoff = r1_cpu_q8_qoff(K), soff = r1_cpu_q8_stride(K), foff = r1_cpu_q8s_foff(K);
    const __m256i m4 = _mm256_set1_epi8(0x0f), m30 = _mm256_set1_epi8(0x30);
    (void)m30;
    __m256 acc[4], acc2[4];
    _Alignas(32) float scm[4][16]; /* fixed sizes: a VLA would keep acc in memory */
    _Pragma("GCC unroll 4") for (int t = 0; t < NT; t++) acc[t] = acc2[t] = _mm256_setzero_ps();
    /* super-blocks sb0 .. sb1 - 1; only the first and the last may be cut
     * (chunks j0 .. j1 - 1), the rest run without range tests */
    const unsigned sb0 = (unsigned)k0 / R1_QK_K, sb1 = ((unsigned)k1 + R1_QK_K - 1) / R1_QK_K;
    for (unsigned sb = sb0; sb < sb1; sb++) {
        int j0, j1;
        const int part = kq_span(sb, sb0, sb1, k0, k1, &j0, &j1);
        const uint8_t *xq[4];
        __m256 dx[4], dx2[4], sx[4], sx2[4]; /* dx: act scales; sx(, sx2): the sums, masked to the range */
        _Pragma("GCC unroll 4") for (int t = 0; t < NT; t++) {
            xq[t] = xt[t] + qoff + (size_t)sb * R1_QK_K;
            dx[t] = _mm256_loadu_ps((const float *)(xt[t] + lp) + sb * 8); /* PAIR: d_lo */
            if (DT != F_Q6K) {
                dx2[t] = dx[t];
                sx[t] = _mm256_loadu_ps((const float *)(xt[t] + foff) + sb * 8);
                if (PAIR) sx[t] = _mm256_add_ps(sx[t], _mm256_loadu_ps((const float *)(xt[t] + lp + foff) + sb * 8));
                if (part) sx[t] = _mm256_and_ps(sx[t], lane_mask(2 * j0, 2 * j1));
                sx2[t] = sx[t];
            } else { /* 32 x the sums of the 16 groups, as floats */
                const __m128i *s = (const __m128i *)(xt[t] + soff + (size_t)sb * 32);
                const __m256 k32 = _mm256_set1_ps(32.0f);
                /* q6_K: dx per 16-column group (dx2: groups 8..15) */
                dx2[t] = _mm256_permutevar8x32_ps(dx[t], _mm256_setr_epi32(4, 4, 5, 5, 6, 6, 7, 7));
                dx[t] = _mm256_permutevar8x32_ps(dx[t], _mm256_setr_epi32(0, 0, 1, 1, 2, 2, 3, 3));
                __m256i s0 = _mm256_cvtepi16_epi32(_mm_loadu_si128(s)),
                        s1 = _mm256_cvtepi16_epi32(_mm_loadu_si128(s + 1));
                if (PAIR) { /* hi x 256 + lo, at d_lo (|s16| <= 16 x 127) */
                    const __m128i *l = (const __m128i *)((const uint8_t *)s + lp);
                    s0 = _mm256_add_epi32(_mm256_slli_epi32(s0, 8), _mm256_cvtepi16_epi32(_mm_loadu_si128(l)));
                    s1 = _mm256_add_epi32(_mm256_slli_epi32(s1, 8), _mm256_cvtepi16_epi32(_mm_loadu_si128(l + 1)));
                }
                sx[t] = _mm256_mul_ps(_mm256_cvtepi32_ps(s0), k32);
                sx2[t] = _mm256_mul_ps(_mm256_cvtepi32_ps(s1), k32);
                if (part) {
                    sx[t] = _mm256_and_ps(sx[t], lane_mask(4 * j0, 4 * j1));
                    sx2[t] = _mm256_and_ps(sx2[t], lane_mask(4 * j0 - 8, 4 * j1 - 8));
                }
            }
        }
        const uint8_t *blk = w + (size_t)sb * bs; /* scales, offsets and mins */
        if (pf) kq_prefetch(blk, bs);
        if (DT == F_Q6K) {
            __m128i s8 = _mm_loadu_si128((const __m128i *)(blk + 192));
            __m256 d = _mm256_set1_ps(_cvtsh_ss((unsigned short)(blk[208] | blk[209] << 8)));
            __m256 sa = _mm256_mul_ps(_mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(s8)), d);
            __m256 sb2 = _mm256_mul_ps(_mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_srli_si128(s8, 8))), d);
            _Pragma("GCC unroll 4") for (int t = 0; t < NT; t++) {
                __m256 ca = _mm256_mul_ps(sa, dx[t]), cb = _mm256_mul_ps(sb2, dx2[t]);
                /* groups 0, 2, 4, 6 in the low lane, 1, 3, 5, 7 in the high one
                 * (8..15 alike): one vpermilps makes block b's multiplier,
                 * groups 2b and 2b + 1 (Q6_BLOCK) */
                const __m256i oe = _mm256_setr_epi32(0, 2, 4, 6, 1, 3, 5, 7);
                _mm256_store_ps(scm[t], _mm256_permutevar8x32_ps(ca, oe));
                _mm256_store_ps(scm[t] + 8, _mm256_permutevar8x32_ps(cb, oe));
                acc[t] = _mm256_fnmadd_ps(ca, sx[t], acc[t]);
                acc2[t] = _mm256_fnmadd_ps(cb, sx2[t], acc2[t]);
            }
        } else {
            __m256 sc, mn;
            r1_avx2_kq_scales(blk, &sc, &mn);
            _Pragma("GCC unroll 4") for (int t = 0; t < NT; t++) {
                _mm256_store_ps(scm[t], _mm256_mul_ps(sc, dx[t]));
                acc[t] = _mm256_fnmadd_ps(mn, sx[t], acc[t]);
            }
        }
        KQ_CHUNKS(KQ_RUN_CHUNK);
    }
    _Pragma("GCC unroll 4") for (int t = 0; t < NT; t++) res[t] = r1_avx2_hsum(_mm256_add_ps(acc[t], acc2[t]));
}

/* ---- q4_K and q5_K against q8ws activations (cpu.h: int16 quants that hold
 * both parts, 256 q_hi + q_lo, and the blocks' fs): the avx2 table's decode
 * and small batches. A 32-column block is one vpmaddwd per 16 weights (the
 * quants widened to int16) where q8s pairs took two vpmaddubsw and two
 * vpmaddwd; the rest is as kq_run: per block one conversion and one FMA
 * with d sc d_x, the mins per super-block, two FMA chains a token. The
 * int32 lane i of a block holds columns 2i, 2i + 1, 2i + 16 and 2i + 17
 * (kq_run's: 4i .. 4i + 3), so a sum is rounded in another order than the
 * q8s tiles' (the avx2-vnni table, the AVX-512 ones), by float rounding
 * only: the integers are the same. Bounds: |q| <= 32639, quants <= 31: a
 * lane's 4 products stay below 2^22. */
#define KQW_CHUNK(J)                                                                                                   \
    do {                                                                                                               \
        const uint8_t *qb = blk + (DT == F_Q4K ? 16 : 48) + 32 * (J);                                                  \
        __m256i a = _mm256_cvtepu8_epi16(_mm_loadu_si128((const __m128i *)qb));                                        \
        __m256i b = _mm256_cvtepu8_epi16(_mm_loadu_si128((const __m128i *)(qb + 16)));                                 \
        __m256i a0 = _mm256_and_si256(a, m4), a1 = _mm256_and_si256(_mm256_srli_epi16(a, 4), m4);                      \
        __m256i b0 = _mm256_and_si256(b, m4), b1 = _mm256_and_si256(_mm256_srli_epi16(b, 4), m4);                      \
        if (DT == F_Q5K) { /* bit s of each qh byte: sub-block s's fifth bit, as 16 */                                 \
            a0 = _mm256_or_si256(a0, q5_hi16(ha, 2 * (J)));                                                            \
            b0 = _mm256_or_si256(b0, q5_hi16(hb, 2 * (J)));                                                            \
            a1 = _mm256_or_si256(a1, q5_hi16(ha, 2 * (J) + 1));                                                        \
            b1 = _mm256_or_si256(b1, q5_hi16(hb, 2 * (J) + 1));                                                        \
        }                                                                                                              \
        _Pragma("GCC unroll 4") for (int t = 0; t < NT; t++) {                                                         \
            const __m256i *xb = (const __m256i *)(xq[t] + 64 * (J));                                                   \
            __m256i p0 = _mm256_add_epi32(_mm256_madd_epi16(a0, _mm256_loadu_si256(xb)),                               \
                                          _mm256_madd_epi16(b0, _mm256_loadu_si256(xb + 1)));                          \
            __m256i p1 = _mm256_add_epi32(_mm256_madd_epi16(a1, _mm256_loadu_si256(xb + 2)),                           \
                                          _mm256_madd_epi16(b1, _mm256_loadu_si256(xb + 3)));                          \
            kq_fma2(&acc[t], &acc2[t], p0, p1, &scm[t][2 * (J)]);                                                      \
        }                                                                                                              \
    } while (0)

/* q5_K on int16 lanes: the fifth bit of sub-block s (bit s of each qh
 * byte, zero-extended) as 0 or 16 */
INL __m256i q5_hi16(__m256i qh, const int s) {
    __m256i v = s < 4 ? _mm256_slli_epi16(qh, 4 - s) : _mm256_srli_epi16(qh, s - 4);
    return _mm256_and_si256(v, _mm256_set1_epi16(0x10));
}

/* One row w x NT tokens (q8ws at xt[t]) over columns [k0, k1): res[t]; pf:
 * fetch the row ahead (r1_cpu_tile_prefetch). */
INL void kqw_run(const int DT, const int NT, int K, int k0, int k1, const uint8_t *w, const uint8_t *const *xt, int pf,
                 float *res) {
    const size_t bs = DT == F_Q4K ? 144 : 176;
    const size_t qoff = r1_cpu_q8_qoff(K), foff = r1_cpu_q8ws_foff(K);
    const __m256i m4 = _mm256_set1_epi16(0x0f);
    __m256 acc[4], acc2[4];
    _Alignas(32) float scm[4][8];
    _Pragma("GCC unroll 4") for (int t = 0; t < NT; t++) acc[t] = acc2[t] = _mm256_setzero_ps();
    const unsigned sb0 = (unsigned)k0 / R1_QK_K, sb1 = ((unsigned)k1 + R1_QK_K - 1) / R1_QK_K;
    for (unsigned sb = sb0; sb < sb1; sb++) {
        int j0, j1;
        const int part = kq_span(sb, sb0, sb1, k0, k1, &j0, &j1);
        const int16_t *xq[4];
        const uint8_t *blk = w + (size_t)sb * bs;
        if (pf) kq_prefetch(blk, bs);
        __m256 sc, mn;
        r1_avx2_kq_scales(blk, &sc, &mn);
        _Pragma("GCC unroll 4") for (int t = 0; t < NT; t++) {
            xq[t] = (const int16_t *)(xt[t] + qoff) + (size_t)sb * R1_QK_K;
            __m256 sx = _mm256_loadu_ps((const float *)(xt[t] + foff) + sb * 8);
            if (part) sx = _mm256_and_ps(sx, lane_mask(2 * j0, 2 * j1));
            _mm256_store_ps(scm[t], _mm256_mul_ps(sc, _mm256_loadu_ps((const float *)xt[t] + sb * 8)));
            acc[t] = _mm256_fnmadd_ps(mn, sx, acc[t]);
        }
        __m256i ha = _mm256_setzero_si256(), hb = ha;
        if (DT == F_Q5K) {
            ha = _mm256_cvtepu8_epi16(_mm_loadu_si128((const __m128i *)(blk + 16)));
            hb = _mm256_cvtepu8_epi16(_mm_loadu_si128((const __m128i *)(blk + 32)));
        }
        (void)ha, (void)hb;
        KQ_CHUNKS(KQW_CHUNK);
    }
    _Pragma("GCC unroll 4") for (int t = 0; t < NT; t++) res[t] = r1_avx2_hsum(_mm256_add_ps(acc[t], acc2[t]));
}

/* ---- q6_Kx8 (q6_K regrouped, dtype.h) against q8x8 activations (cpu.h).
 * The 32-byte vector m (0..7) of a super-block's activations holds, in lane
 * b, quants 4m .. 4m + 3 of block b; the weights are rebuilt into the same
 * vectors (nibble from qs, two high bits from h6), so each lane stays with
 * one 32-weight group for the whole super-block and the two halves of a
 * group (m < 4 and m >= 4: q6_K's two 16-weight scales) add up in int32:
 *   acc += (cvt(dot_0 + st_0) d sc_even + cvt(dot_1 + st_1) d sc_odd) dx
 * with st_h = -32 x the lane's activation sum over half h (q6_K's offset:
 * w = d sc (q - 32)), from vpmaddubsw by 32 for half 0 and the q8x8 lane
 * sums (nx = -8 x the whole sum) for half 1. On AVX2 two vpmaddubsw of 6-bit
 * quants add in int16 before one vpmaddwd (avx2_dot.h r1_avx2_dotz2).
 * PAIR: both activation parts folded in int32, (hi << 8) + lo at d_lo, the
 * start values alike (|dot| <= 16 x 63 x 127 per half, << 8 < 2^25). R
 * rows (q6x8_tile: 4 for decode, else 1, a linear stream fetched ahead by
 * kq_prefetch) x NT tokens (PAIR: NT <= 2), res[r * NT + t]. */
INL __m256i q6x8_dot2(const int V, const int SH, __m256i u1, const uint8_t *x1, __m256i u2) {
    const __m256i s1 = _mm256_loadu_si256((const __m256i *)x1), s2 = _mm256_loadu_si256((const __m256i *)(x1 + 32));
    if (V == 0) /* SH: the hi part's << 8 as vpmaddwd by 256 */
        return _mm256_madd_epi16(_mm256_add_epi16(_mm256_maddubs_epi16(u1, s1), _mm256_maddubs_epi16(u2, s2)),
                                 _mm256_set1_epi16(SH ? 256 : 1));
    __m256i d = r1_avx2_dotz2(V, u1, s1, u2, s2);
    return SH ? _mm256_slli_epi32(d, 8) : d;
}
/* -32 x each lane's sum over the first half (vectors 0..3) of one part at
 * xp, times 256 for the hi part of a pair (SH) */
INL __m256i q6x8_start(const int SH, const uint8_t *xp) {
    const __m256i c32 = _mm256_set1_epi8(32);
    __m256i a = _mm256_add_epi16(_mm256_maddubs_epi16(c32, _mm256_loadu_si256((const __m256i *)xp)),
                                 _mm256_maddubs_epi16(c32, _mm256_loadu_si256((const __m256i *)(xp + 32))));
    __m256i b = _mm256_add_epi16(_mm256_maddubs_epi16(c32, _mm256_loadu_si256((const __m256i *)(xp + 64))),
                                 _mm256_maddubs_epi16(c32, _mm256_loadu_si256((const __m256i *)(xp + 96))));
    return _mm256_madd_epi16(_mm256_add_epi16(a, b), _mm256_set1_epi16(SH ? -256 : -1)); /* |sum| <= 4 x 2 x 32 x 127 */
}
INL void q6x8_run(const int V, const int PAIR, const int R, const int NT, int K, int k0, int k1,
                  const uint8_t *const *wr, size_t ws, const uint8_t *const *xt, int pf, float *res) {
    const size_t lp = PAIR ? r1_cpu_q8x8_stride(K) : 0;
    /* the 16 int8 scales, even ones (a group's first 16 weights) then odd */
    const __m128i eo = _mm_setr_epi8(0, 2, 4, 6, 8, 10, 12, 14, 1, 3, 5, 7, 9, 11, 13, 15);
    __m256 acc[4][4];
    _Pragma("GCC unroll 4") for (int r = 0; r < R; r++) _Pragma("GCC unroll 4") for (int t = 0; t < NT; t++) acc[r][t] =
        _mm256_setzero_ps();
    for (int s = k0 / 256; s < k1 / 256; s++) {
        _Alignas(32) int32_t st[4][2][8]; /* per token: the two halves' start values */
        _Pragma("GCC unroll 4") for (int t = 0; t < NT; t++) {
            const uint8_t *xp = xt[t] + (size_t)s * R1_CPU_Q8X8_BYTES;
            __m256i st0 = q6x8_start(PAIR, xp), nx = r1_avx2_q8x8_nx(xp);
            if (PAIR) {
                st0 = _mm256_add_epi32(st0, q6x8_start(0, xp + lp));
                nx = _mm256_add_epi32(_mm256_slli_epi32(nx, 8), r1_avx2_q8x8_nx(xp + lp));
            }
            _mm256_store_si256((__m256i *)st[t][0], st0);
            /* -32 x the second half's sum */
            _mm256_store_si256((__m256i *)st[t][1], _mm256_sub_epi32(_mm256_slli_epi32(nx, 2), st0));
        }
        _Pragma("GCC unroll 4") for (int r = 0; r < R; r++) {
            const uint8_t *bp = wr[r] + (size_t)s * 210;
            if (R == 4) { /* the same super-block of the next 4 rows into L1, of the 4 after into L2 */
                for (int o = 0; o < 210; o += 64) {
                    _mm_prefetch((const char *)(bp + 4 * ws + o), _MM_HINT_T0);
                    _mm_prefetch((const char *)(bp + 8 * ws + o), _MM_HINT_T1);
                }
            } else if (pf) kq_prefetch(bp, 210);
            __m256i di[4][2];
            _Pragma("GCC unroll 2") for (int h = 0; h < 2; h++) {
                __m256i v[4]; /* vectors m = 4h .. 4h + 3 */
                _Pragma("GCC unroll 4") for (int i = 0; i < 4; i++) v[i] = r1_avx2_q6x8_quants(bp, 4 * h + i);
                _Pragma("GCC unroll 4") for (int t = 0; t < NT; t++) {
                    const uint8_t *xp = xt[t] + (size_t)s * R1_CPU_Q8X8_BYTES + 128 * h;
                    __m256i d =
                        _mm256_add_epi32(q6x8_dot2(V, PAIR, v[0], xp, v[1]), q6x8_dot2(V, PAIR, v[2], xp + 64, v[3]));
                    if (PAIR)
                        d = _mm256_add_epi32(d, _mm256_add_epi32(q6x8_dot2(V, 0, v[0], xp + lp, v[1]),
                                                                 q6x8_dot2(V, 0, v[2], xp + lp + 64, v[3])));
                    di[t][h] = _mm256_add_epi32(_mm256_load_si256((const __m256i *)st[t][h]), d);
                }
            }
            __m128i s8 = _mm_shuffle_epi8(_mm_loadu_si128((const __m128i *)(bp + 192)), eo);
            __m256 d = _mm256_set1_ps(_cvtsh_ss((unsigned short)(bp[208] | bp[209] << 8)));
            __m256 se = _mm256_mul_ps(_mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(s8)), d);
            __m256 so = _mm256_mul_ps(_mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_unpackhi_epi64(s8, s8))), d);
            _Pragma("GCC unroll 4") for (int t = 0; t < NT; t++) {
                const float *dx = (const float *)(xt[t] + (size_t)s * R1_CPU_Q8X8_BYTES + lp + 320);
                __m256 f =
                    _mm256_fmadd_ps(_mm256_cvtepi32_ps(di[t][1]), so, _mm256_mul_ps(_mm256_cvtepi32_ps(di[t][0]), se));
                acc[r][t] = _mm256_fmadd_ps(f, _mm256_loadu_ps(dx), acc[r][t]);
            }
        }
    }
    _Pragma("GCC unroll 4") for (int r = 0; r < R; r++) _Pragma("GCC unroll 4") for (int t = 0; t < NT; t++)
        res[r * NT + t] = r1_avx2_hsum(acc[r][t]);
}
/* Decode (nt == 1: a token, or PAIR's one token): 4 rows a pass, each
 * super-block's activations and start values shared by them while in L1
 * (a row at a time, a K = 8960 token's pair of activation parts, 27 KiB,
 * would be pushed out of L1 by each row's stream); else rows one at a time
 * against nt tokens (<= 4; PAIR: nt <= 2, both parts each). */
INL void q6x8_tile(const int V, const int PAIR, R1_KQ_TILE_ARGS) {
    const uint8_t *xt[4];
    for (int t = 0; t < 4; t++) xt[t] = x + (size_t)(t < nt ? t : 0) * xs;
    const int pf = r1_cpu_tile_prefetch;
    if (nt == 1) {
        const uint8_t *wr[4] = {w, w + (nr > 1 ? ws : 0), w + (nr > 2 ? 2 * ws : 0), w + (nr > 3 ? 3 * ws : 0)};
        float res[4];
        q6x8_run(V, PAIR, 4, 1, K, k0, k1, wr, ws, xt, pf, res);
        for (int r = 0; r < nr; r++) out[r] = res[r];
        return;
    }
    for (int r = 0; r < nr; r++) {
        const uint8_t *wr = w + (size_t)r * ws;
        float res[4];
        if (nt == 2 || PAIR) q6x8_run(V, PAIR, 1, 2, K, k0, k1, &wr, ws, xt, pf, res);
        else q6x8_run(V, 0, 1, 4, K, k0, k1, &wr, ws, xt, pf, res);
        for (int t = 0; t < nt; t++) out[t * R1_CPU_MR + r] = res[t];
    }
}

/* One row at a time, each row one linear stream (decode, cpu.h
 * r1_cpu_tuning.row1; these tiles have no 4-row form, so the flag does
 * not change them). Decode: one token, or its two activation parts (nt <= 2;
 * PAIR: one or two tokens, both parts each). Batches: each row against 4
 * activation rows (past nt: row 0 again), so a row's quants are unpacked
 * once for all of them. W: q8ws activations (kqw_run; PAIR and V unused). */
INL void kq_tile(const int DT, const int V, const int PAIR, const int W, R1_KQ_TILE_ARGS) {
    const uint8_t *xt[4];
    for (int t = 0; t < 4; t++) xt[t] = x + (size_t)(t < nt ? t : 0) * xs;
    const int pf = r1_cpu_tile_prefetch;
    for (int r = 0; r < nr; r++) {
        const uint8_t *wr = w + (size_t)r * ws;
        float res[4];
        if (nt == 1)
            W ? kqw_run(DT, 1, K, k0, k1, wr, xt, pf, res) : kq_run(DT, V, PAIR, 1, K, k0, k1, wr, xt, pf, res);
        else if (nt == 2)
            W ? kqw_run(DT, 2, K, k0, k1, wr, xt, pf, res) : kq_run(DT, V, PAIR, 2, K, k0, k1, wr, xt, pf, res);
        else W ? kqw_run(DT, 4, K, k0, k1, wr, xt, pf, res) : kq_run(DT, V, 0, 4, K, k0, k1, wr, xt, pf, res);
        for (int t = 0; t < nt; t++) out[t * R1_CPU_MR + r] = res[t];
    }
}

TGT void r1_kq_tile_q4_K_q8ws_avx2(R1_KQ_TILE_ARGS) { kq_tile(F_Q4K, 0, 0, 1, K, k0, k1, w, ws, nr, x, xs, nt, out); }
TGT void r1_kq_tile_q5_K_q8ws_avx2(R1_KQ_TILE_ARGS) { kq_tile(F_Q5K, 0, 0, 1, K, k0, k1, w, ws, nr, x, xs, nt, out); }

/* VNNI: the _avx2vnni tile (one activation row per token, nt <= 4) and its
 * pair form on two-part tokens (cpu.h r1_cpu_mm.pair_tile, nt <= 2), each
 * choosing {vex} or {evex} vpdpbusd by r1_x86_avx2_vnni. AVX2 adds the plain
 * AVX2 forms (q6_K only: q4_K and q5_K run on q8ws there, kqw_run). */
#define KQ_VNNI(DT, TILE, PAIR)                                                                                        \
    static TGT void TILE##_vex(R1_KQ_TILE_ARGS) { kq_tile(DT, 1, 0, 0, K, k0, k1, w, ws, nr, x, xs, nt, out); }        \
    static TGT void TILE##_evex(R1_KQ_TILE_ARGS) { kq_tile(DT, 2, 0, 0, K, k0, k1, w, ws, nr, x, xs, nt, out); }       \
    void TILE(R1_KQ_TILE_ARGS) {                                                                                       \
        if (r1_x86_avx2_vnni == 1) TILE##_vex(K, k0, k1, w, ws, nr, x, xs, nt, out);                                   \
        else TILE##_evex(K, k0, k1, w, ws, nr, x, xs, nt, out);                                                        \
    }                                                                                                                  \
    static TGT void PAIR##_vex(R1_KQ_TILE_ARGS) { kq_tile(DT, 1, 1, 0, K, k0, k1, w, ws, nr, x, xs, nt, out); }        \
    static TGT void PAIR##_evex(R1_KQ_TILE_ARGS) { kq_tile(DT, 2, 1, 0, K, k0, k1, w, ws, nr, x, xs, nt, out); }       \
    void PAIR(R1_KQ_TILE_ARGS) {                                                                                       \
        if (r1_x86_avx2_vnni == 1) PAIR##_vex(K, k0, k1, w, ws, nr, x, xs, nt, out);                                   \
        else PAIR##_evex(K, k0, k1, w, ws, nr, x, xs, nt, out);                                                        \
    }
#define KQ_AVX2(DT, TILE, PAIR)                                                                                        \
    TGT void TILE(R1_KQ_TILE_ARGS) { kq_tile(DT, 0, 0, 0, K, k0, k1, w, ws, nr, x, xs, nt, out); }                     \
    TGT void PAIR(R1_KQ_TILE_ARGS) { kq_tile(DT, 0, 1, 0, K, k0, k1, w, ws, nr, x, xs, nt, out); }

/* q6_Kx8 (q6x8_tile): the same four forms */
static TGT void q6x8_vex(R1_KQ_TILE_ARGS) { q6x8_tile(1, 0, K, k0, k1, w, ws, nr, x, xs, nt, out); }
static TGT void q6x8_evex(R1_KQ_TILE_ARGS) { q6x8_tile(2, 0, K, k0, k1, w, ws, nr, x, xs, nt, out); }
static TGT void q6x8_pvex(R1_KQ_TILE_ARGS) { q6x8_tile(1, 1, K, k0, k1, w, ws, nr, x, xs, nt, out); }
static TGT void q6x8_pevex(R1_KQ_TILE_ARGS) { q6x8_tile(2, 1, K, k0, k1, w, ws, nr, x, xs, nt, out); }
void r1_kq_tile_q6_Kx8_avx2vnni(R1_KQ_TILE_ARGS) {
    (r1_x86_avx2_vnni == 1 ? q6x8_vex : q6x8_evex)(K, k0, k1, w, ws, nr, x, xs, nt, out);
}
void r1_kq_tile_q6_Kx8_pair_avx2vnni(R1_KQ_TILE_ARGS) {
    (r1_x86_avx2_vnni == 1 ? q6x8_pvex : q6x8_pevex)(K, k0, k1, w, ws, nr, x, xs, nt, out);
}
TGT void r1_kq_tile_q6_Kx8_avx2(R1_KQ_TILE_ARGS) { q6x8_tile(0, 0, K, k0, k1, w, ws, nr, x, xs, nt, out); }
TGT void r1_kq_tile_q6_Kx8_pair_avx2(R1_KQ_TILE_ARGS) { q6x8_tile(0, 1, K, k0, k1, w, ws, nr, x, xs, nt, out); }

KQ_VNNI(F_Q4K, r1_kq_tile_q4_K_avx2vnni, r1_kq_tile_q4_K_pair_avx2vnni)
KQ_VNNI(F_Q5K, r1_kq_tile_q5_K_avx2vnni, r1_kq_tile_q5_K_pair_avx2vnni)
KQ_VNNI(F_Q6K, r1_kq_tile_q6_K_avx2vnni, r1_kq_tile_q6_K_pair_avx2vnni)
KQ_AVX2(F_Q6K, r1_kq_tile_q6_K_avx2, r1_kq_tile_q6_K_pair_avx2)

#endif /* __x86_64__ */
