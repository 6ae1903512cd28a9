/*
 * amx_avx512.c - prefill blocks on AMX for the avx512 table: bf16 (and f16,
 * q8_0, q4_0 and the regrouped layouts through bf16 panels) weights x bf16
 * activations in 16x16 f32 tiles. The matmul tiles and the ISA table stay in avx512.c. x86-64 only;
 * r1_x86_amx_probe must have returned 1 before a block is used.
 */
#include "kernels/cpu/cpu.h"

#if defined(__x86_64__)
#include <cpuid.h>
#include <immintrin.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "kernels/cpu/x86/x86.h"
#include "util/util.h"

#define TGT_S "avx512f,avx512bw,avx512vl,avx512dq,avx512vnni,avx2,fma,f16c"
#define TGT_B TGT_S ",avx512bf16"
#define TGTB __attribute__((target(TGT_B)))

static int amx_ok; /* set by r1_x86_amx_probe */

/* rows [0, nr) of w into bf16 panels dst (and dlo, the remainders, if the
 * dtype needs them) of K columns a row */
typedef void (*panel_fn)(const uint8_t *w, size_t ws, int nr, int K, uint16_t *dst, uint16_t *dlo);

/* ---- AMX (Sapphire Rapids on): bf16 weights x bf16 activations in 16x16
 * f32 tiles, a 32-row x 32-token block per pass over K. Linux grants the
 * tile state per process on request (arch_prctl ARCH_REQ_XCOMP_PERM); each
 * thread loads the tile configuration once. ---- */
#define TGT_A TGT_S ",amx-tile,amx-bf16"
#define TGTA __attribute__((target(TGT_A)))

int r1_x86_amx_probe(void) {
    amx_ok = 0;
    const char *off = getenv("R1_CPU_NO_AMX"); /* tests, or to compare */
    if (off && *off && *off != '0') return 0;
    unsigned a, b, c, d;
    if (!__get_cpuid_count(7, 0, &a, &b, &c, &d)) return 0;
    if (!((d >> 22) & 1) || !((d >> 24) & 1)) return 0; /* AMX-BF16, AMX-TILE */
#if defined(__linux__)
    /* ARCH_REQ_XCOMP_PERM, XFEATURE_XTILEDATA */
    if (syscall(SYS_arch_prctl, 0x1023, 18) != 0) return 0;
    amx_ok = 1;
    return 1;
#else
    return 0;
#endif
}

struct amx_cfg {
    uint8_t palette, start_row, reserved[14];
    uint16_t colsb[16];
    uint8_t rows[16];
};
static _Thread_local int amx_ready;

/* C = sum over the np pairs p of A[pa[p][0]] · B[pa[p][1]]: A are bf16 weight
 * rows (stride ws), B bf16 activation parts in VNNI layout; pairs that share
 * an A are consecutive */
static TGTA int amx_core(int K, const uint8_t *const *A, size_t ws, int mc,
                         const uint8_t *const *B, const int (*pa)[2], int np, int t0, int tn,
                         float *C, int ldc) {
    if (!amx_ready) {
        struct amx_cfg cfg;
        memset(&cfg, 0, sizeof cfg);
        cfg.palette = 1;
        for (int i = 0; i < 8; i++) cfg.rows[i] = 16, cfg.colsb[i] = 64;
        _tile_loadconfig(&cfg);
        amx_ready = 1;
    }
    const int nc = K / 32;
    const size_t gb = (size_t)nc * 1024;
    const int g0 = t0 / 16, g1 = (t0 + tn + 15) / 16;
    float tmp[16 * 16];
    for (int r = 0; r < mc; r += 32) {
        const int two_r = r + 32 <= mc;
        const size_t ro = (size_t)r * ws, ro1 = two_r ? ro + 16 * ws : ro;
        for (int g = g0; g < g1; g += 2) {
            const int two_g = g + 1 < g1;
            const size_t go = (size_t)g * gb, go1 = two_g ? go + gb : go;
            _tile_zero(0);
            _tile_zero(1);
            _tile_zero(2);
            _tile_zero(3);
            for (int c = 0; c < nc; c++) {
                int cur = -1;
                for (int p = 0; p < np; p++) {
                    if (pa[p][0] != cur) {
                        cur = pa[p][0];
                        _tile_loadd(4, A[cur] + ro + (size_t)c * 64, (long)ws);
                        _tile_loadd(5, A[cur] + ro1 + (size_t)c * 64, (long)ws);
                    }
                    const uint8_t *b = B[pa[p][1]] + (size_t)c * 1024;
                    _tile_loadd(6, b + go, 64);
                    _tile_dpbf16ps(0, 4, 6);
                    _tile_dpbf16ps(2, 5, 6);
                    _tile_loadd(7, b + go1, 64);
                    _tile_dpbf16ps(1, 4, 7);
                    _tile_dpbf16ps(3, 5, 7);
                }
            }
            /* tile (i, j): weight row i, token j -> C[token * ldc + row] */
#define AMX_OUT(TILE, RO, GG)                                                                      \
    do {                                                                                           \
        _tile_stored(TILE, tmp, 64);                                                               \
        for (int j = 0; j < 16; j++) {                                                             \
            int t = (GG) * 16 + j - t0;                                                            \
            if (t >= tn) break;                                                                    \
            float *o = C + (size_t)t * ldc + (RO);                                                 \
            for (int i = 0; i < 16; i++) o[i] = tmp[i * 16 + j];                                   \
        }                                                                                          \
    } while (0)
            AMX_OUT(0, r, g);
            if (two_g) AMX_OUT(1, r, g + 1);
            if (two_r) {
                AMX_OUT(2, r + 16, g);
                if (two_g) AMX_OUT(3, r + 16, g + 1);
            }
#undef AMX_OUT
        }
    }
    return 0;
}

/* the products a block sums: (weight part, activation part). Activations
 * come in three bf16 parts x = x0 + x1 + x2 (exact to ~2^-24); bf16 weights
 * are exact, f16 ones are w0 + w1 exactly; terms below 2^-24 relative are
 * left out. Quantized weights: one pass, their bf16 rounding dominates. */
static const int pairs_bf16[][2] = {{0, 0}, {0, 1}, {0, 2}};
static const int pairs_f16[][2] = {{0, 0}, {0, 1}, {0, 2}, {1, 0}, {1, 1}};
static const int pairs_q[][2] = {{0, 0}};

static int block_panel_amx(panel_fn fill, const int (*pa)[2], int np, int K, const uint8_t *w,
                           size_t ws, int mc, const uint8_t *xv, size_t xplane, int t0, int tn,
                           float *C, int ldc);
static void bf16_rows_copy(const uint8_t *w, size_t ws, int nr, int K, uint16_t *dst,
                           uint16_t *dlo) {
    (void)dlo;
    for (int r = 0; r < nr; r++) memcpy(dst + (size_t)r * K, w + (size_t)r * ws, (size_t)K * 2);
}

/* bf16 weights are exact in bf16: w · (x0 + x1 + x2), three passes */
int r1_x86_block_bf16_amx(int K, const uint8_t *w, size_t ws, int mc, const uint8_t *xv,
                          size_t xplane, int t0, int tn, float *C, int ldc) {
    if (!amx_ok || K % 32 || t0 % 16) return -1;
    if (mc % 16) /* through a zero-padded panel */
        return block_panel_amx(bf16_rows_copy, pairs_bf16, 3, K, w, ws, mc, xv, xplane, t0, tn, C,
                               ldc);
    const uint8_t *A[1] = {w}, *B[3] = {xv, xv + xplane, xv + 2 * xplane};
    return amx_core(K, A, ws, mc, B, pairs_bf16, 3, t0, tn, C, ldc);
}


/* f16 weights on AMX: each group of 32 rows is rounded to bf16 once into a
 * thread-local panel (a per-weight relative error <= 2^-9, like the
 * activations') and then used for every token of the block. */

static TGTB void f16_rows_to_bf16(const uint8_t *w, size_t ws, int nr, int K, uint16_t *dst,
                                  uint16_t *dlo) {
    /* K % 32 == 0; an f16 (11 significant bits) is exactly hi + lo in bf16 */
    for (int r = 0; r < nr; r++) {
        const uint16_t *src = (const uint16_t *)(w + (size_t)r * ws);
        for (int k = 0; k < K; k += 32) { /* K % 32 == 0 */
            __m512 lo = _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(src + k)));
            __m512 hi = _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(src + k + 16)));
            __m512bh h = _mm512_cvtne2ps_pbh(hi, lo);
            _mm512_storeu_si512(dst + (size_t)r * K + k, (__m512i)h);
            __m512i hv = (__m512i)h; /* back to f32: bf16 << 16 */
            __m512 hl = _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(_mm512_castsi512_si256(hv)), 16));
            __m512 hh = _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(_mm512_extracti64x4_epi64(hv, 1)), 16));
            __m512bh l = _mm512_cvtne2ps_pbh(_mm512_sub_ps(hi, hh), _mm512_sub_ps(lo, hl));
            _mm512_storeu_si512(dlo + (size_t)r * K + k, (__m512i)l);
        }
    }
}


static int block_panel_amx(panel_fn fill, const int (*pa)[2], int np, int K, const uint8_t *w,
                           size_t ws, int mc, const uint8_t *xv, size_t xplane, int t0, int tn,
                           float *C, int ldc) {
    const int lo = pa[np - 1][0] == 1;
    if (!amx_ok || K % 32 || t0 % 16 || mc > 64) return -1;
    /* 32 rows, hi and lo */
    uint16_t *f16_panel = (uint16_t *)r1_cpu_scratch(2, (size_t)64 * K * 2);
    uint16_t *plo = f16_panel + (size_t)32 * K;
    for (int r = 0; r < mc; r += 32) {
        int nr = mc - r < 32 ? mc - r : 32, nr16 = (nr + 15) & ~15;
        fill(w + (size_t)r * ws, ws, nr, K, f16_panel, plo);
        if (nr16 > nr) {
            memset(f16_panel + (size_t)nr * K, 0, (size_t)(nr16 - nr) * K * 2);
            if (lo) memset(plo + (size_t)nr * K, 0, (size_t)(nr16 - nr) * K * 2);
        }
        /* rows past mc land in C's unused rows (mc <= ldc's ROW_BLOCK) */
        const uint8_t *A[2] = {(const uint8_t *)f16_panel, (const uint8_t *)plo};
        const uint8_t *B[3] = {xv, xv + xplane, xv + 2 * xplane};
        amx_core(K, A, (size_t)K * 2, nr16, B, pa, np, t0, tn, C + r, ldc);
    }
    return 0;
}

/* f16 = w0 + w1 exactly: five passes (pairs_f16) */
int r1_x86_block_f16_amx(int K, const uint8_t *w, size_t ws, int mc, const uint8_t *xv,
                         size_t xplane, int t0, int tn, float *C, int ldc) {
    return block_panel_amx(f16_rows_to_bf16, pairs_f16, 5, K, w, ws, mc, xv, xplane, t0, tn, C,
                           ldc);
}

/* q8_0 / q4_0 weights on AMX: dequantized to bf16 (|error| <= 2^-9 relative
 * per weight) once per block of rows, against bf16 activations: no q8
 * rounding of the activations, so closer to ref than the VNNI tiles. */
static TGTB void q8_0_rows_to_bf16(const uint8_t *w, size_t ws, int nr, int K, uint16_t *dst,
                                   uint16_t *dlo) {
    (void)dlo;
    for (int r = 0; r < nr; r++) {
        const struct r1_block_q8_0 *b = (const struct r1_block_q8_0 *)(w + (size_t)r * ws);
        uint16_t *o = dst + (size_t)r * K;
        for (int i = 0; i < K / 32; i++) {
            __m512 d = _mm512_set1_ps(_cvtsh_ss(b[i].d));
            __m256i q = _mm256_loadu_si256((const __m256i *)b[i].qs);
            __m512 lo = _mm512_mul_ps(d, _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(_mm256_castsi256_si128(q))));
            __m512 hi = _mm512_mul_ps(d, _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(_mm256_extracti128_si256(q, 1))));
            _mm512_storeu_si512(o + i * 32, (__m512i)_mm512_cvtne2ps_pbh(hi, lo));
        }
    }
}
static TGTB void q4_0_rows_to_bf16(const uint8_t *w, size_t ws, int nr, int K, uint16_t *dst,
                                   uint16_t *dlo) {
    (void)dlo;
    const __m128i m4 = _mm_set1_epi8(0x0f), e8 = _mm_set1_epi8(8);
    for (int r = 0; r < nr; r++) {
        const struct r1_block_q4_0 *b = (const struct r1_block_q4_0 *)(w + (size_t)r * ws);
        uint16_t *o = dst + (size_t)r * K;
        for (int i = 0; i < K / 32; i++) {
            __m512 d = _mm512_set1_ps(_cvtsh_ss(b[i].d));
            __m128i q = _mm_loadu_si128((const __m128i *)b[i].qs);
            __m128i ql = _mm_sub_epi8(_mm_and_si128(q, m4), e8);
            __m128i qh = _mm_sub_epi8(_mm_and_si128(_mm_srli_epi16(q, 4), m4), e8);
            __m512 lo = _mm512_mul_ps(d, _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(ql)));
            __m512 hi = _mm512_mul_ps(d, _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(qh)));
            _mm512_storeu_si512(o + i * 32, (__m512i)_mm512_cvtne2ps_pbh(hi, lo));
        }
    }
}
static TGTB void q4_0x8_rows_to_bf16(const uint8_t *w, size_t ws, int nr, int K, uint16_t *dst,
                                     uint16_t *dlo) {
    (void)dlo;
    const __m128i m4 = _mm_set1_epi8(0x0f), e8 = _mm_set1_epi8(8);
    /* dwords j = 0..3 of block b sit at 32-bit offsets 16 (j / 2) + 8 (j % 2) + b */
    const __m128i idx = _mm_set_epi32(24, 16, 8, 0);
    for (int r = 0; r < nr; r++) {
        const struct r1_block_q4_0x8 *x = (const struct r1_block_q4_0x8 *)(w + (size_t)r * ws);
        uint16_t *o = dst + (size_t)r * K;
        for (int s = 0; s < K / 256; s++)
            for (int b = 0; b < 8; b++) {
                __m512 d = _mm512_set1_ps(_cvtsh_ss(x[s].d[b]));
                __m128i q = _mm_i32gather_epi32((const int *)x[s].qs + b, idx, 4);
                __m128i ql = _mm_sub_epi8(_mm_and_si128(q, m4), e8);
                __m128i qh = _mm_sub_epi8(_mm_and_si128(_mm_srli_epi16(q, 4), m4), e8);
                __m512 lo = _mm512_mul_ps(d, _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(ql)));
                __m512 hi = _mm512_mul_ps(d, _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(qh)));
                _mm512_storeu_si512(o + s * 256 + b * 32, (__m512i)_mm512_cvtne2ps_pbh(hi, lo));
            }
    }
}
/* one pass (pairs_q): the bf16 rounding of the dequantized weights
 * dominates, and is already below the q8 activations' error */
int r1_x86_block_q8_0_amx(int K, const uint8_t *w, size_t ws, int mc, const uint8_t *xv,
                          size_t xplane, int t0, int tn, float *C, int ldc) {
    return block_panel_amx(q8_0_rows_to_bf16, pairs_q, 1, K, w, ws, mc, xv, xplane, t0, tn, C, ldc);
}
int r1_x86_block_q4_0_amx(int K, const uint8_t *w, size_t ws, int mc, const uint8_t *xv,
                          size_t xplane, int t0, int tn, float *C, int ldc) {
    return block_panel_amx(q4_0_rows_to_bf16, pairs_q, 1, K, w, ws, mc, xv, xplane, t0, tn, C, ldc);
}
int r1_x86_block_q4_0x8_amx(int K, const uint8_t *w, size_t ws, int mc, const uint8_t *xv,
                            size_t xplane, int t0, int tn, float *C, int ldc) {
    return block_panel_amx(q4_0x8_rows_to_bf16, pairs_q, 1, K, w, ws, mc, xv, xplane, t0, tn, C,
                           ldc);
}

/* the regrouped layouts (amx_x8_avx512.c's panels), one pass like q8_0 */
#define X8_BLOCK(NAME)                                                                             \
    int r1_x86_block_##NAME##_amx(int K, const uint8_t *w, size_t ws, int mc, const uint8_t *xv,  \
                                  size_t xplane, int t0, int tn, float *C, int ldc) {              \
        return block_panel_amx(r1_x86_panel_##NAME, pairs_q, 1, K, w, ws, mc, xv, xplane, t0, tn,  \
                               C, ldc);                                                            \
    }
X8_BLOCK(q4_1x8)
X8_BLOCK(q8_0x8)
X8_BLOCK(q4_Kx8)
X8_BLOCK(q5_Kx8)
X8_BLOCK(q6_Kx8)

#endif /* __x86_64__ */
