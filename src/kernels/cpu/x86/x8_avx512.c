/*
 * x8_avx512.c - the regrouped layouts q4_1x8 and q8_0x8 (dtype.h: 8 blocks
 * at a time, the row's last K % 256 columns left plain) against q8x8
 * activations (cpu.h) with AVX-512 VNNI, for the avx512 table. q4_0x8 has
 * its own file (q4x8_avx512.c).
 *
 * A group is 256 weights of a row: its quants come in 64-byte loads whose
 * 32-bit lane i holds 4 quants of block i % 8, matching lane i of the
 * activations' parts, so 4 vpdpbusd per token sum each block in two lanes:
 *   q4_1x8: 2 loads, the nibble split (unsigned 0..15), dot from zero;
 *           acc += cvt(dot) * (d * dx) + m * sx, where the 8 scales and 8
 *           mins come from one vcvtph2ps (spread by two vpermps) and sx[i]
 *           = dx[i % 8] * (the sum of the lane's 16 activations), made once
 *           per token from the q8x8 form's nx (-8 x that sum);
 *   q8_0x8: 4 loads of quants stored as q + 128 (unsigned), dot from
 *           16 nx = -128 x the lane sums; acc += cvt(dot) * (d * dx).
 * Exact integer dot products per block; only the float summation order
 * differs from the plain formats. The row's tail (fewer than 8 blocks) runs
 * two blocks a step against the tail of the activations in q8 form.
 * Target attributes only.
 */
#include "kernels/cpu/cpu.h"

#if defined(__x86_64__)
#include <immintrin.h>
#include <string.h>

#include "kernels/cpu/x86/x86.h"

#define TGT_S "avx512f,avx512bw,avx512vl,avx512dq,avx512vnni,avx2,fma,f16c"
#define TGT __attribute__((target(TGT_S)))
#define INL static inline __attribute__((always_inline, target(TGT_S)))

enum { F_Q41, F_Q80 };
#define GROUP(DT) ((DT) == F_Q41 ? 160 : 272) /* bytes of 8 blocks */
#define BLK(DT) ((DT) == F_Q41 ? 20 : 34)     /* a plain block */

/* lanes 0-7 a, lanes 8-15 b */
INL __m512 pair_ps(float a, float b) { return _mm512_insertf32x8(_mm512_set1_ps(a), _mm256_set1_ps(b), 1); }

/* Decode streams 4 rows at a time, too short for the hardware prefetcher:
 * the same bytes of the next 4 rows into L1, of the 4 after those into L2
 * (as the q4_0x8 tile does). A line every 64 bytes from p: the line of the
 * span's last byte, when not among them, also holds the first byte after
 * the span, which the next step prefetches (the row's next group, its plain
 * tail, or the next row), so it is not asked for twice. */
INL void prefetch_rows(const uint8_t *p, size_t ws, int len) {
    for (int o = 0; o < len; o += 64) {
        _mm_prefetch((const char *)(p + 4 * ws + o), _MM_HINT_T0);
        _mm_prefetch((const char *)(p + 8 * ws + o), _MM_HINT_T1);
    }
}
/* Two plain blocks at p (only the first when !two): the 64 quants as
 * unsigned bytes (q4_1: [qa lo, qa hi, qb lo, qb hi]; q8_0: q + 128), scales
 * *fa and (q4_1) mins *fb as 8 lanes each, zero for a missing second block.
 * One masked load (the missing block reads as zeros, and nothing past the
 * row is touched) and word permutes instead of four scalar half -> float
 * conversions and inserts: at K = 576 the tail is 2 of a row's 4 steps, so
 * it has to be as fast per byte as a whole step. */
INL __m512i tail_pair(const int DT, const uint8_t *p, int two, __m512 *fa, __m512 *fb) {
    const int bs = BLK(DT);
    /* word w of the block pair: block 1's scale at word bs / 2 */
    const __m512i idx_d = _mm512_set_epi16(0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, bs / 2, bs / 2, bs / 2,
                                           bs / 2, bs / 2, bs / 2, bs / 2, bs / 2, 0, 0, 0, 0, 0, 0, 0, 0);
    if (DT == F_Q80) {
        __m512i raw = _mm512_maskz_loadu_epi8(two ? ~0ull : (1ull << bs) - 1, p);
        *fa = _mm512_cvtph_ps(_mm512_castsi512_si256(_mm512_permutexvar_epi16(idx_d, raw)));
        __m256i qa = _mm256_loadu_si256((const __m256i *)(p + 2));
        __m256i qb = two ? _mm256_loadu_si256((const __m256i *)(p + bs + 2)) : _mm256_setzero_si256();
        __m512i q = _mm512_inserti64x4(_mm512_castsi256_si512(qa), qb, 1);
        return _mm512_xor_si512(q, _mm512_set1_epi8((char)0x80));
    }
    /* q4_1: d at word 0, m at 1, quants at words 2-9 (block 0), 12-19 (block 1) */
    const __m512i idx_q = _mm512_set_epi16(19, 18, 17, 16, 15, 14, 13, 12, 19, 18, 17, 16, 15, 14, 13, 12, 9, 8, 7, 6,
                                           5, 4, 3, 2, 9, 8, 7, 6, 5, 4, 3, 2);
    const __m512i sh = _mm512_set_epi16(4, 4, 4, 4, 4, 4, 4, 4, 0, 0, 0, 0, 0, 0, 0, 0, 4, 4, 4, 4, 4, 4, 4, 4, 0, 0, 0,
                                        0, 0, 0, 0, 0);
    __m512i raw = _mm512_maskz_loadu_epi8(two ? (1ull << (2 * bs)) - 1 : (1ull << bs) - 1, p);
    *fa = _mm512_cvtph_ps(_mm512_castsi512_si256(_mm512_permutexvar_epi16(idx_d, raw)));
    *fb = _mm512_cvtph_ps(
        _mm512_castsi512_si256(_mm512_permutexvar_epi16(_mm512_add_epi16(idx_d, _mm512_set1_epi16(1)), raw)));
    __m512i z = _mm512_srlv_epi16(_mm512_permutexvar_epi16(idx_q, raw), sh);
    return _mm512_and_si512(z, _mm512_set1_epi8(0x0f));
}

/* PAIR: two-part activations (cpu.h), token t's hi part at x + t xs and its
 * lo part (scale d_lo = d_hi / 256) lo bytes further; the parts are folded
 * in int32, (w·hi << 8) + w·lo, then converted once and scaled by d_w d_lo.
 * Bounds per 32-bit lane (16 products): q8_0 |w·hi| <= 16 x 255 x 127 before
 * its offset, << 8 < 2^27, the offset -128 x (the lanes' sums, hi << 8 plus
 * lo) < 2^26; q4_1 smaller. No int32 overflow. */
INL void x8_body(const int DT, const int NR, const int NT, const int PAIR, const int ROWS4, int K, int k0, int k1,
                 const uint8_t *w, size_t ws, int nr, const uint8_t *x, size_t xs, int nt, float *out) {
    const size_t lo = PAIR ? r1_cpu_q8x8_stride(K) : 0;
    const uint8_t *wr[4] = {w, w + (nr > 1 ? ws : 0), w + (nr > 2 ? 2 * ws : 0), w + (nr > 3 ? 3 * ws : 0)};
    const uint8_t *xt[R1_CPU_NT];
    for (int t = 0; t < NT; t++) xt[t] = x + (size_t)(t < nt ? t : 0) * xs;
    const __m512i lo4 = _mm512_set1_epi8(0x0f), zero = _mm512_setzero_si512();
    const __m512i idx_d = _mm512_set_epi32(7, 6, 5, 4, 3, 2, 1, 0, 7, 6, 5, 4, 3, 2, 1, 0);
    const __m512i idx_m = _mm512_add_epi32(idx_d, _mm512_set1_epi32(8));
    const int gb = GROUP(DT), bs = BLK(DT);
    __m512 acc[4][R1_CPU_NT];
    _Pragma("GCC unroll 4") for (int r = 0; r < 4; r++) _Pragma("GCC unroll 4") for (int t = 0; t < NT; t++) acc[r][t] =
        _mm512_setzero_ps();
    R1_X86_ACC_IN(NR, NT); /* cpu.h r1_cpu_tile_acc: column ranges of whole groups */
    const int G = K / 256, s1 = k1 / 256 < G ? k1 / 256 : G, pf = r1_cpu_tile_prefetch;
    const int R4 = ROWS4 && PAIR && DT == F_Q80; /* the form below the rows' loop */
    __m512 am[R4 ? 4 : 1][R4 ? R1_CPU_NT : 1];   /* its accumulators, in memory */
    if (R4)
        _Pragma("GCC unroll 4") for (int r = 0; r < 4; r++) _Pragma("GCC unroll 4") for (int t = 0; t < NT; t++)
            am[r][t] = acc[r][t];
    for (int s = k0 / 256; s < s1; s++) {
        __m512 dx[R1_CPU_NT], sx[R1_CPU_NT];
        __m512i d0[R1_CPU_NT]; /* where each token's dot products start */
        _Pragma("GCC unroll 4") for (int t = 0; t < NT; t++) {
            const uint8_t *xp = xt[t] + (size_t)s * R1_CPU_Q8X8_BYTES;
            __m512i nx = _mm512_loadu_si512(xp + 256);
            if (PAIR) /* the combined lane sums, hi x 256 + lo, at d_lo */
                nx = _mm512_add_epi32(_mm512_slli_epi32(nx, 8), _mm512_loadu_si512(xp + lo + 256));
            dx[t] = _mm512_loadu_ps((const float *)(xp + lo + 320));
            if (DT == F_Q41) {
                sx[t] = _mm512_mul_ps(_mm512_mul_ps(dx[t], _mm512_set1_ps(-0.125f)), _mm512_cvtepi32_ps(nx));
                d0[t] = zero;
            } else {
                d0[t] = _mm512_slli_epi32(nx, 4);
            }
        }
        _Pragma("GCC unroll 4") for (int r = 0; r < NR; r++) {
            if (R4) break;
            const uint8_t *bp = wr[r] + (size_t)s * gb;
            if (pf) prefetch_rows(bp, ws, gb); /* not when the rows are in cache */
            __m512i q[4];
            __m512 dd, mm = _mm512_setzero_ps();
            if (DT == F_Q41) {
                __m512 dm = _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)bp));
                dd = _mm512_permutexvar_ps(idx_d, dm), mm = _mm512_permutexvar_ps(idx_m, dm);
                __m512i q0 = _mm512_loadu_si512(bp + 32), q1 = _mm512_loadu_si512(bp + 96);
                q[0] = _mm512_and_si512(q0, lo4), q[2] = _mm512_and_si512(_mm512_srli_epi16(q0, 4), lo4);
                q[1] = _mm512_and_si512(q1, lo4), q[3] = _mm512_and_si512(_mm512_srli_epi16(q1, 4), lo4);
            } else {
                dd = _mm512_cvtph_ps(_mm256_broadcastsi128_si256(_mm_loadu_si128((const __m128i *)bp)));
                _Pragma("GCC unroll 4") for (int p = 0; p < 4; p++) q[p] = _mm512_loadu_si512(bp + 16 + 64 * p);
            }
            _Pragma("GCC unroll 4") for (int t = 0; t < NT; t++) {
                const uint8_t *xp = xt[t] + (size_t)s * R1_CPU_Q8X8_BYTES;
                /* Past one token, GCC kept the tokens' activation vectors from the first row for
                 * the others and, short of registers, copied them to the stack along with the
                 * accumulators; an opaque pointer makes each row read them from L1 as operands
                 * of vpdpbusd instead. */
                if (NT > 1) __asm__("" : "+r"(xp));
                __m512i di = _mm512_dpbusd_epi32(PAIR ? zero : d0[t], q[0], _mm512_loadu_si512(xp));
                di = _mm512_dpbusd_epi32(di, q[1], _mm512_loadu_si512(xp + 64));
                di = _mm512_dpbusd_epi32(di, q[2], _mm512_loadu_si512(xp + 128));
                di = _mm512_dpbusd_epi32(di, q[3], _mm512_loadu_si512(xp + 192));
                if (PAIR) {
                    __m512i dl = _mm512_dpbusd_epi32(d0[t], q[0], _mm512_loadu_si512(xp + lo));
                    dl = _mm512_dpbusd_epi32(dl, q[1], _mm512_loadu_si512(xp + lo + 64));
                    dl = _mm512_dpbusd_epi32(dl, q[2], _mm512_loadu_si512(xp + lo + 128));
                    dl = _mm512_dpbusd_epi32(dl, q[3], _mm512_loadu_si512(xp + lo + 192));
                    di = _mm512_add_epi32(_mm512_slli_epi32(di, 8), dl);
                }
                acc[r][t] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(di), _mm512_mul_ps(dd, dx[t]), acc[r][t]);
                if (DT == F_Q41) acc[r][t] = _mm512_fmadd_ps(mm, sx[t], acc[r][t]);
            }
        }
        if (R4) {
            /* ROWS4 (batches, long rows): all 4 rows' weights in registers (16 vectors), then
             * token by token each activation vector loaded once for the 4 rows, their 8
             * chains interleaved. Rows outer (the loop above, 2 rows a call) read the 4
             * tokens' activations twice per 4 rows: at K = 8960 that is 2 x 107 KB from L2
             * per 4 rows for 38 KB of weights, and the tile ran at half its L1 speed. 16
             * accumulators do not fit beside the weights: they live in memory (am), one load
             * and one store per row and token a group, beside 8 vpdpbusd. The asm keeps GCC
             * from promoting them back to registers (it spilled the weights instead). */
            __asm__("" : : "r"(am) : "memory");
            __m512i q[4][4];
            __m512 dd[4];
            _Pragma("GCC unroll 4") for (int r = 0; r < 4; r++) {
                const uint8_t *bp = wr[r] + (size_t)s * gb;
                if (pf) prefetch_rows(bp, ws, gb);
                const __m128i d16 = _mm_loadu_si128((const __m128i *)bp);
                dd[r] = _mm512_cvtph_ps(_mm256_broadcastsi128_si256(d16));
                _Pragma("GCC unroll 4") for (int p = 0; p < 4; p++) q[r][p] = _mm512_loadu_si512(bp + 16 + 64 * p);
            }
            _Pragma("GCC unroll 4") for (int t = 0; t < NT; t++) {
                const uint8_t *xp = xt[t] + (size_t)s * R1_CPU_Q8X8_BYTES;
                __asm__("" : "+r"(xp)); /* as above: operands from L1, not copies on the stack */
                __m512i h[4], l[4];
                _Pragma("GCC unroll 4") for (int r = 0; r < 4; r++) h[r] = zero, l[r] = d0[t];
                _Pragma("GCC unroll 4") for (int p = 0; p < 4; p++) {
                    const __m512i a = _mm512_loadu_si512(xp + 64 * p);
                    const __m512i b = _mm512_loadu_si512(xp + lo + 64 * p);
                    _Pragma("GCC unroll 4") for (int r = 0; r < 4; r++) {
                        h[r] = _mm512_dpbusd_epi32(h[r], q[r][p], a);
                        l[r] = _mm512_dpbusd_epi32(l[r], q[r][p], b);
                    }
                }
                /* the same operations, in the same order, as the loop above: the same bits */
                _Pragma("GCC unroll 4") for (int r = 0; r < 4; r++) {
                    const __m512i di = _mm512_add_epi32(_mm512_slli_epi32(h[r], 8), l[r]);
                    am[r][t] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(di), _mm512_mul_ps(dd[r], dx[t]), am[r][t]);
                }
            }
        }
    }
    if (R4) {
        __asm__("" : : "r"(am) : "memory");
        _Pragma("GCC unroll 4") for (int r = 0; r < 4; r++) _Pragma("GCC unroll 4") for (int t = 0; t < NT; t++)
            acc[r][t] = am[r][t];
    }
    R1_X86_ACC_OUT(NR, NT);
    const int tb = (K % 256) / 32; /* the plain tail, in the last slice */
    if (k1 == K && tb) {
        const size_t qoff = r1_cpu_q8_qoff(K % 256);
        for (int j = 0; j < tb; j += 2) {
            const int two = j + 1 < tb;
            __m512i xq[R1_CPU_NT], xl[R1_CPU_NT], t0[R1_CPU_NT];
            __m512 dxp[R1_CPU_NT], gs[R1_CPU_NT];
            _Pragma("GCC unroll 4") for (int t = 0; t < NT; t++) {
                const uint8_t *xp = xt[t] + (size_t)G * R1_CPU_Q8X8_BYTES;
                const float *d = (const float *)(xp + lo);
                xq[t] = _mm512_maskz_loadu_epi8(two ? ~0ull : 0xFFFFFFFFull, xp + qoff + 32 * j);
                dxp[t] = pair_ps(d[j], two ? d[j + 1] : 0.0f);
                __m512i sum = _mm512_dpbusd_epi32(zero, _mm512_set1_epi8(1), xq[t]);
                if (PAIR) {
                    xl[t] = _mm512_maskz_loadu_epi8(two ? ~0ull : 0xFFFFFFFFull, xp + lo + qoff + 32 * j);
                    sum = _mm512_add_epi32(_mm512_slli_epi32(sum, 8),
                                           _mm512_dpbusd_epi32(zero, _mm512_set1_epi8(1), xl[t]));
                } else {
                    xl[t] = zero;
                }
                if (DT == F_Q41) {
                    gs[t] = _mm512_mul_ps(_mm512_cvtepi32_ps(sum), dxp[t]);
                    t0[t] = zero;
                } else {
                    t0[t] = _mm512_sub_epi32(zero, _mm512_slli_epi32(sum, 7)); /* the +128 */
                }
            }
            _Pragma("GCC unroll 4") for (int r = 0; r < NR; r++) {
                const uint8_t *bp = wr[r] + (size_t)G * gb + (size_t)j * bs;
                if (NT <= 2) prefetch_rows(bp, ws, two ? 2 * bs : bs);
                __m512 fa, fb = _mm512_setzero_ps();
                __m512i q = tail_pair(DT, bp, two, &fa, &fb);
                _Pragma("GCC unroll 4") for (int t = 0; t < NT; t++) {
                    __m512i p = _mm512_dpbusd_epi32(PAIR ? zero : t0[t], q, xq[t]);
                    if (PAIR) p = _mm512_add_epi32(_mm512_slli_epi32(p, 8), _mm512_dpbusd_epi32(t0[t], q, xl[t]));
                    acc[r][t] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(p), _mm512_mul_ps(fa, dxp[t]), acc[r][t]);
                    if (DT == F_Q41) acc[r][t] = _mm512_fmadd_ps(fb, gs[t], acc[r][t]);
                }
            }
        }
    }
    R1_X86_TILE_OUT(NT);
}

#define X8_VARIANT(NAME, DT, NR, NT, PAIR, ROWS4)                                                                      \
    static TGT void NAME(int K, int k0, int k1, const uint8_t *w, size_t ws, int nr, const uint8_t *x, size_t xs,      \
                         int nt, float *out) {                                                                         \
        x8_body(DT, NR, NT, PAIR, ROWS4, K, k0, k1, w, ws, nr, x, xs, nt, out);                                        \
    }
/* TILE: one activation row per token; PAIR: two-part pairs (cpu.h
 * r1_cpu_mm.pair_tile). Pairs of 3 or 4 tokens run 2 rows at a time with
 * all tokens (8 or 6 accumulators): 4 rows x 4 tokens spill, and 2 + 2
 * tokens would unpack every row's weights twice. q8_0 pairs of 4 tokens on
 * rows of K >= X8_ROWS4_K take the ROWS4 form (4 rows, accumulators in
 * memory): there 4 tokens' activations (48 x K bytes with both parts) no
 * longer stay in L1 between the two 2-row calls; below it the 2-row form
 * is faster. */
#define X8_ROWS4_K 3072
#define X8_TILE(DT, TILE, PAIR)                                                                                        \
    X8_VARIANT(TILE##_1, DT, 4, 1, 0, 0)                                                                               \
    X8_VARIANT(TILE##_2, DT, 4, 2, 0, 0)                                                                               \
    X8_VARIANT(TILE##_4, DT, 4, 4, 0, 0)                                                                               \
    X8_VARIANT(PAIR##_p1, DT, 4, 1, 1, 0)                                                                              \
    X8_VARIANT(PAIR##_p1r, DT, 1, 1, 1, 0)                                                                             \
    X8_VARIANT(PAIR##_p2, DT, 4, 2, 1, 0)                                                                              \
    X8_VARIANT(PAIR##_p3h, DT, 2, 3, 1, 0)                                                                             \
    X8_VARIANT(PAIR##_p4h, DT, 2, 4, 1, 0)                                                                             \
    X8_VARIANT(PAIR##_p4q, DT, DT == F_Q80 ? 4 : 2, 4, 1, 1) /* q4_1: p4h, unused */                                   \
    void TILE(int K, int k0, int k1, const uint8_t *w, size_t ws, int nr, const uint8_t *x, size_t xs, int nt,         \
              float *out) {                                                                                            \
        r1_cpu_tile_nt(TILE##_1, TILE##_2, TILE##_4, K, k0, k1, w, ws, nr, x, xs, nt, out);                            \
    }                                                                                                                  \
    void PAIR(int K, int k0, int k1, const uint8_t *w, size_t ws, int nr, const uint8_t *x, size_t xs, int nt,         \
              float *out) {                                                                                            \
        if (nt == 1 && r1_cpu_tuning.row1 && !r1_cpu_tile_acc) /* cpu.h: a row at a time */                            \
            r1_cpu_tile_by_row(PAIR##_p1r, K, k0, k1, w, ws, nr, x, xs, nt, out);                                      \
        else if (nt == 1) PAIR##_p1(K, k0, k1, w, ws, nr, x, xs, nt, out);                                             \
        else if (nt == 2) PAIR##_p2(K, k0, k1, w, ws, nr, x, xs, nt, out);                                             \
        else if (nt == 4 && DT == F_Q80 && K >= X8_ROWS4_K && !r1_cpu_tile_acc)                                        \
            PAIR##_p4q(K, k0, k1, w, ws, nr, x, xs, nt, out);                                                          \
        else {                                                                                                         \
            void (*f)(int, int, int, const uint8_t *, size_t, int, const uint8_t *, size_t, int, float *) =            \
                nt == 3 ? PAIR##_p3h : PAIR##_p4h;                                                                     \
            f(K, k0, k1, w, ws, nr < 2 ? nr : 2, x, xs, nt, out);                                                      \
            if (nr > 2) { /* rows 2 and 3: their carried sums 2 nt vectors on */                                       \
                void *a = r1_cpu_tile_acc;                                                                             \
                if (a) r1_cpu_tile_acc = (uint8_t *)a + (size_t)2 * nt * 64;                                           \
                f(K, k0, k1, w + 2 * ws, ws, nr - 2, x, xs, nt, out + 2);                                              \
                r1_cpu_tile_acc = a;                                                                                   \
            }                                                                                                          \
        }                                                                                                              \
    }

X8_TILE(F_Q41, r1_x86_tile_q4_1x8_avx512, r1_x86_tile_q4_1x8_avx512_pair)
X8_TILE(F_Q80, r1_x86_tile_q8_0x8_avx512, r1_x86_tile_q8_0x8_avx512_pair)

#endif /* __x86_64__ */
