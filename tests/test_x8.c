/*
 * test_x8.c - the regrouped weight layouts (dtype.h: q4_1x8, ...) and their
 * tiles, beside test_matmul.c's whole-kernel conformance (which runs them
 * through every matmul kernel): the layouts are lossless (same numbers as
 * the GGUF format they come from, rows with and without a tail of plain
 * blocks), the q8x8 activation form's tail is the q8 form of the last
 * columns, and each tile over every column range cpu.c may ask for
 * (superblock slices, the row's tail) against dequantized rows and
 * dequantized activations in double, for every ISA table this CPU runs.
 * For prefill on the AMX sets (x86; "avx512-amx-emu" runs wherever AVX-512
 * and AVX512_BF16 do): the two-part bf16 panels the blocks multiply, against
 * to_f32, and the blocks themselves against double sums; on a CPU with AMX,
 * the software model's block outputs equal the hardware's bit for bit.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/cpu/cpu.h"
#include "kernels/dtype.h"
#include "test.h"
#include "util/util.h"
#if defined(__x86_64__)
#include "kernels/cpu/x86/x86.h"
#endif

/* error over the sum of |products| of each output: only float summation
 * order may differ (test_matmul.c's NMSE_TILE_RANGE, the same measure) */
#define ERR_TILE_RANGE 1e-9
/* |x - (hi + lo)| in units of the lo part's scale d_lo = d_hi / 256: half
 * a step from rounding, up to a whole one where the clamp to 127 cuts
 * (|r| / d_lo in (127.5, 128]), plus the rounding of r = x - d_hi q_hi */
#define ERR_LO_PART 1.01

static uint64_t rng = 0x9E3779B97F4A7C15ull;
static float frand(void) { return r1_frand_normal(&rng); }
static void fill(float *x, int n, float scale) {
    for (int i = 0; i < n; i++) x[i] = frand() * scale;
}

/* every width a row may have: groups only, a tail only, both */
static const int widths[] = {32, 96, 256, 576, 1536, 2240, 1024 + 224, 768};

/* (regrouped dtype, the GGUF dtype it comes from) */
static const enum r1_dtype grouped[][2] = {{R1_DTYPE_Q4_1X8, R1_DTYPE_Q4_1},
                                           {R1_DTYPE_Q8_0X8, R1_DTYPE_Q8_0},
                                           {R1_DTYPE_Q4_KX8, R1_DTYPE_Q4_K},
                                           {R1_DTYPE_Q5_KX8, R1_DTYPE_Q5_K},
                                           {R1_DTYPE_Q6_KX8, R1_DTYPE_Q6_K}};
#define N_GROUPED (sizeof grouped / sizeof grouped[0])

/* Regrouping changes no number: to_f32 of the regrouped row (whole, and in
 * the 256-weight pieces the reference kernels ask for) equals the plain
 * row's, and from_f32 equals regrouping the plain quantization. */
static void test_lossless(void) {
    for (size_t gi = 0; gi < N_GROUPED; gi++) {
        enum r1_dtype gx = grouped[gi][0], gp = grouped[gi][1];
        int bad = 0, cases = 0;
        for (size_t wi = 0; wi < sizeof widths / sizeof widths[0]; wi++) {
            int K = widths[wi];
            if (K % r1_dtype_traits[gx].block) continue;
            size_t rb = r1_dtype_row_bytes(gp, K);
            CHECK(rb == r1_dtype_row_bytes(gx, K), "%s row of %d: %zu bytes, %s %zu", r1_dtype_name(gx), K,
                  r1_dtype_row_bytes(gx, K), r1_dtype_name(gp), rb);
            float *x = malloc((size_t)K * 4), *a = malloc((size_t)K * 4), *b = malloc((size_t)K * 4);
            uint8_t *p = malloc(rb), *g = malloc(rb), *g2 = malloc(rb);
            fill(x, K, 0.05f);
            x[K / 3] = 0.0f, x[K - 1] = 1.5f, x[K / 2] = -1.0f;
            r1_dtype_traits[gp].from_f32(x, p, K);
            CHECK(r1_dtype_regroup(gp, gx, p, g, K) == 0, "regroup %s -> %s", r1_dtype_name(gp), r1_dtype_name(gx));
            r1_dtype_traits[gx].from_f32(x, g2, K);
            bad += memcmp(g, g2, rb) != 0;
            r1_dtype_traits[gp].to_f32(p, a, K);
            r1_dtype_traits[gx].to_f32(g, b, K);
            bad += memcmp(a, b, (size_t)K * 4) != 0;
            for (int c = 0; c < K; c += 256) { /* the reference kernels' pieces */
                int n = K - c < 256 ? K - c : 256;
                r1_dtype_traits[gx].to_f32(g + (size_t)(c / r1_dtype_traits[gx].block) * r1_dtype_traits[gx].block_size,
                                           b + c, n);
            }
            bad += memcmp(a, b, (size_t)K * 4) != 0;
            cases++;
            free(x), free(a), free(b), free(p), free(g), free(g2);
        }
        CHECK(r1_dtype_regroup(gp, gx, NULL, NULL, 33) == -1, "33 columns are no %s row", r1_dtype_name(gx));
        CHECK(bad == 0, "%s: %d of %d rows differ from %s", r1_dtype_name(gx), bad, cases, r1_dtype_name(gp));
        printf("%-8s lossless from %s: %d widths, %s\n", r1_dtype_name(gx), r1_dtype_name(gp), cases,
               bad ? "DIFFERS" : "same numbers");
    }
}

/* The q8x8 form's tail (K % 256 columns) is the q8 form of those columns;
 * the groups before it are what the form was before tails existed (K a
 * multiple of 256), for the C quantizer and each ISA's. */
static void test_q8x8_tail(const struct r1_cpu_isa *isa) {
    void (*q8x8)(const float *, uint8_t *, int) = isa->quant_q8x8 ? isa->quant_q8x8 : r1_cpu_quant_q8x8_c;
    int bad = 0;
    for (size_t wi = 0; wi < sizeof widths / sizeof widths[0]; wi++) {
        int K = widths[wi], G = K / 256, Kt = K % 256;
        size_t xs = r1_cpu_q8x8_stride(K);
        CHECK(xs == (size_t)G * R1_CPU_Q8X8_BYTES + (Kt ? r1_cpu_q8_stride(Kt) : 0), "q8x8 stride of %d columns: %zu",
              K, xs);
        float *x = malloc((size_t)K * 4);
        fill(x, K, 1.0f);
        uint8_t *o = aligned_alloc(64, xs + 64), *c = aligned_alloc(64, xs + 64);
        uint8_t *gr = aligned_alloc(64, (size_t)G * R1_CPU_Q8X8_BYTES + 64);
        uint8_t *t = aligned_alloc(64, r1_cpu_q8_stride(256));
        memset(o, 0, xs), memset(c, 0, xs);
        q8x8(x, o, K);
        r1_cpu_quant_q8x8_c(x, c, K);
        if (G) {
            r1_cpu_quant_q8x8_c(x, gr, G * 256);
            bad += memcmp(o, gr, (size_t)G * R1_CPU_Q8X8_BYTES) != 0;
        }
        bad += memcmp(o, c, (size_t)G * R1_CPU_Q8X8_BYTES) != 0;
        if (Kt) {
            isa->quant_q8(x + G * 256, t, Kt);
            const uint8_t *ot = o + (size_t)G * R1_CPU_Q8X8_BYTES;
            size_t qo = r1_cpu_q8_qoff(Kt);
            bad += memcmp(ot, t, (size_t)Kt / 32 * 4) != 0 || memcmp(ot + qo, t + qo, (size_t)Kt) != 0;
        }
        free(x), free(o), free(c), free(gr), free(t);
    }
    CHECK(bad == 0, "%s q8x8 form with tails: %d parts differ", isa->name, bad);
    printf("%-8s q8x8 tails: %s\n", isa->name, bad ? "DIFFER" : "the q8 form of the last columns");
}

/* Each regrouped tile over the column ranges cpu.c asks for: whole rows,
 * KC = 512-column slices, single superblocks, the tail alone. */
static void test_tiles(const struct r1_cpu_isa *isa) {
    static const int rng_k[][3] = {/* K, k0, k1 */
                                   {576, 0, 576},   {576, 0, 512},      {576, 512, 576},    {1536, 512, 1024},
                                   {1536, 0, 1536}, {2240, 2048, 2240}, {2240, 1024, 1536}, {96, 0, 96},
                                   {256, 0, 256},   {1248, 1024, 1248}, {32, 0, 32},        {768, 256, 768},
                                   {1024, 0, 512}};
    for (size_t gi = 0; gi < N_GROUPED; gi++) {
        enum r1_dtype gx = grouped[gi][0];
        const struct r1_cpu_mm *mm = &isa->mm[gx];
        if (!mm->tile || mm->act != R1_CPU_ACT_Q8X8) continue;
        double worst = 0;
        int cases = 0;
        for (size_t ci = 0; ci < sizeof rng_k / sizeof rng_k[0]; ci++) {
            int K = rng_k[ci][0], k0 = rng_k[ci][1], k1 = rng_k[ci][2];
            if (K % r1_dtype_traits[gx].block) continue;
            size_t rb = r1_dtype_row_bytes(gx, K), xs = r1_cpu_q8x8_stride(K), qs = r1_cpu_q8_stride(K);
            uint8_t *w = malloc(rb * R1_CPU_MR);
            float *wf = malloc((size_t)K * 4 * R1_CPU_MR), *xr = malloc((size_t)K * 4);
            for (int r = 0; r < R1_CPU_MR; r++) {
                fill(xr, K, 0.05f);
                if (r == 1) memset(xr, 0, 32 * 4); /* a block of zeros: scale 0 */
                r1_dtype_traits[gx].from_f32(xr, w + r * rb, K);
                r1_dtype_traits[gx].to_f32(w + r * rb, wf + (size_t)r * K, K);
            }
            uint8_t *xq = aligned_alloc(64, xs * R1_CPU_NT), *q8 = aligned_alloc(64, qs * R1_CPU_NT);
            for (int t = 0; t < R1_CPU_NT; t++) {
                fill(xr, K, t == 2 ? 30.0f : 1.0f);
                if (t == 3) memset(xr, 0, (size_t)(K < 64 ? K : 64) * 4); /* zero activation blocks */
                (isa->quant_q8x8 ? isa->quant_q8x8 : r1_cpu_quant_q8x8_c)(xr, xq + t * xs, K);
                isa->quant_q8(xr, q8 + t * qs, K);
            }
            for (int nt = 1; nt <= isa->nt; nt++)
                for (int nr = 1; nr <= isa->mr; nr++) {
                    float out[R1_CPU_MR * R1_CPU_NT];
                    mm->tile(K, k0, k1, w, rb, nr, xq, xs, nt, out);
                    double err = 0, mag = 0;
                    for (int r = 0; r < nr; r++)
                        for (int t = 0; t < nt; t++) {
                            const float *d = (const float *)(q8 + t * qs);
                            const int8_t *q = (const int8_t *)(q8 + t * qs + r1_cpu_q8_qoff(K));
                            double s = 0, sa = 0;
                            for (int k = k0; k < k1; k++) {
                                double p = (double)wf[(size_t)r * K + k] * d[k / 32] * q[k];
                                s += p, sa += fabs(p);
                            }
                            double e = out[t * R1_CPU_MR + r] - s;
                            err += e * e, mag += sa * sa;
                        }
                    double e = mag > 0 ? err / mag : err;
                    CHECK(e <= ERR_TILE_RANGE, "%s %s K=%d [%d,%d) nr=%d nt=%d: error %.3g > %.0e", isa->name,
                          r1_dtype_name(gx), K, k0, k1, nr, nt, e, ERR_TILE_RANGE);
                    if (e > worst) worst = e;
                    cases++;
                }
            free(w), free(wf), free(xr), free(xq), free(q8);
        }
        printf("%-8s tile ranges/%-10s %4d cases  worst error %9.3g (limit %.0e)\n", isa->name, r1_dtype_name(gx),
               cases, worst, ERR_TILE_RANGE);
    }
}

/* The pair tiles (cpu.h r1_cpu_mm.pair_tile): two-part activations folded
 * in int32, over the same column ranges as test_tiles, against dequantized
 * rows times hi + lo dequantized, in double; and each token's result bit
 * for bit the same whatever else the call computes (nt tokens at once vs
 * that token alone), which batch == single decode rests on. */
static void test_pair_tiles(const struct r1_cpu_isa *isa) {
    static const int rng_k[][3] = {/* K, k0, k1 */
                                   {576, 0, 576},
                                   {576, 0, 512},
                                   {576, 512, 576},
                                   {1536, 0, 1536},
                                   {1536, 512, 1024},
                                   {2240, 0, 2240},
                                   {2240, 2048, 2240},
                                   {96, 0, 96},
                                   {256, 0, 256},
                                   {1248, 0, 1248},
                                   {32, 0, 32},
                                   {768, 256, 768},
                                   /* K >= 3072: the q8_0x8 4-token tile's 4-row form */
                                   {3328, 0, 3328},
                                   {3136, 0, 3136},
                                   {3584, 1024, 3584},
                                   {9024, 0, 9024}};
    static const enum r1_dtype dts[] = {R1_DTYPE_Q4_1X8, R1_DTYPE_Q8_0X8, R1_DTYPE_Q4_0X8,
                                        R1_DTYPE_Q4_KX8, R1_DTYPE_Q5_KX8, R1_DTYPE_Q6_KX8};
    for (size_t gi = 0; gi < sizeof dts / sizeof dts[0]; gi++) {
        enum r1_dtype gx = dts[gi];
        const struct r1_cpu_mm *mm = &isa->mm[gx];
        if (!mm->pair_tile) continue;
        CHECK(mm->act == R1_CPU_ACT_Q8X8 && mm->pair_nt >= 1 && mm->pair_nt <= R1_CPU_NT,
              "%s %s pair tile: act %d, pair_nt %d", isa->name, r1_dtype_name(gx), mm->act, mm->pair_nt);
        double worst = 0;
        int cases = 0, differ = 0;
        for (size_t ci = 0; ci < sizeof rng_k / sizeof rng_k[0]; ci++) {
            int K = rng_k[ci][0], k0 = rng_k[ci][1], k1 = rng_k[ci][2];
            if (K % r1_dtype_traits[gx].block) continue;
            size_t rb = r1_dtype_row_bytes(gx, K), xs = r1_cpu_q8x8_stride(K), qs = r1_cpu_q8_stride(K);
            uint8_t *w = malloc(rb * R1_CPU_MR);
            float *wf = malloc((size_t)K * 4 * R1_CPU_MR), *xr = malloc((size_t)K * 4), *res = malloc((size_t)K * 4);
            for (int r = 0; r < R1_CPU_MR; r++) {
                fill(xr, K, 0.05f);
                if (r == 1) memset(xr, 0, 32 * 4); /* a block of zeros: scale 0 */
                r1_dtype_traits[gx].from_f32(xr, w + r * rb, K);
                r1_dtype_traits[gx].to_f32(w + r * rb, wf + (size_t)r * K, K);
            }
            /* token t: hi at xq + 2t xs, lo xs further (cpu.c's layout);
             * the q8 forms of both parts in q8 for the reference */
            uint8_t *xq = aligned_alloc(64, 2 * xs * R1_CPU_NT), *q8 = aligned_alloc(64, 2 * qs * R1_CPU_NT);
            for (int t = 0; t < R1_CPU_NT; t++) {
                fill(xr, K, t == 2 ? 30.0f : 1.0f);
                if (t == 1) xr[K / 2] = 60.0f;                            /* an outlier block */
                if (t == 3) memset(xr, 0, (size_t)(K < 64 ? K : 64) * 4); /* zero activation blocks */
                uint8_t *h = q8 + 2 * t * qs, *l = h + qs;
                isa->quant_q8(xr, h, K);
                const float *d = (const float *)h;
                const int8_t *q = (const int8_t *)(h + r1_cpu_q8_qoff(K));
                for (int k = 0; k < K; k++) res[k] = xr[k] - d[k / 32] * (float)q[k];
                r1_cpu_quant_q8_lo_c(res, d, l, K);
                r1_cpu_q8_to_q8x8(h, xq + 2 * t * xs, K);
                r1_cpu_q8_to_q8x8(l, xq + (2 * t + 1) * xs, K);
            }
            float one[R1_CPU_MR * R1_CPU_NT]; /* token t alone */
            for (int t = 0; t < R1_CPU_NT; t++)
                mm->pair_tile(K, k0, k1, w, rb, R1_CPU_MR, xq + 2 * t * xs, 2 * xs, 1, one + t * R1_CPU_MR);
            for (int nt = 1; nt <= mm->pair_nt; nt++)
                for (int nr = 1; nr <= isa->mr; nr++) {
                    float out[R1_CPU_MR * R1_CPU_NT];
                    mm->pair_tile(K, k0, k1, w, rb, nr, xq, 2 * xs, nt, out);
                    double err = 0, mag = 0;
                    for (int r = 0; r < nr; r++)
                        for (int t = 0; t < nt; t++) {
                            double s = 0, sa = 0;
                            for (int part = 0; part < 2; part++) {
                                const uint8_t *p = q8 + (2 * t + part) * qs;
                                const float *d = (const float *)p;
                                const int8_t *q = (const int8_t *)(p + r1_cpu_q8_qoff(K));
                                for (int k = k0; k < k1; k++) {
                                    double v = (double)wf[(size_t)r * K + k] * d[k / 32] * q[k];
                                    s += v, sa += fabs(v);
                                }
                            }
                            double e = out[t * R1_CPU_MR + r] - s;
                            err += e * e, mag += sa * sa;
                            differ += memcmp(&out[t * R1_CPU_MR + r], &one[t * R1_CPU_MR + r], 4) != 0;
                        }
                    double e = mag > 0 ? err / mag : err;
                    CHECK(e <= ERR_TILE_RANGE, "%s %s pairs K=%d [%d,%d) nr=%d nt=%d: error %.3g > %.0e", isa->name,
                          r1_dtype_name(gx), K, k0, k1, nr, nt, e, ERR_TILE_RANGE);
                    if (e > worst) worst = e;
                    cases++;
                }
            free(w), free(wf), free(xr), free(res), free(xq), free(q8);
        }
        CHECK(differ == 0, "%s %s pair tile: %d results differ from the token alone", isa->name, r1_dtype_name(gx),
              differ);
        printf("%-8s pair tile/%-10s %4d cases  worst error %9.3g (limit %.0e), %s\n", isa->name, r1_dtype_name(gx),
               cases, worst, ERR_TILE_RANGE, differ ? "DIFFERS from one token alone" : "each token as alone");
    }
}

/* The two-part quantizers of an ISA (cpu.h quant_q8_2, quant_q8x8_2) give
 * the bytes cpu.c's plain path makes from the ISA's quant_q8: hi = q8(x),
 * lo = q8(x - d q), the x8 form rearranged from those; its q8w_fold the
 * bytes of r1_cpu_q8w_fold_c, from one part or two, with sums or without. */
static void test_two_parts(const struct r1_cpu_isa *isa) {
    if (!isa->quant_q8_2 && !isa->quant_q8x8_2 && !isa->q8w_fold) return;
    int bad = 0, cases = 0;
    for (size_t wi = 0; wi < sizeof widths / sizeof widths[0]; wi++) {
        const int K = widths[wi];
        size_t s8 = r1_cpu_q8_stride(K), sx = r1_cpu_q8x8_stride(K), mx = s8 > sx ? s8 : sx;
        float *x = malloc((size_t)K * 4), *r = malloc((size_t)K * 4);
        uint8_t *h = aligned_alloc(64, mx), *l = aligned_alloc(64, mx), *a = aligned_alloc(64, mx),
                *b = aligned_alloc(64, mx);
        fill(x, K, 1.0f);
        x[K / 2] = 40.0f;                   /* an outlier block */
        memset(h, 0, mx), memset(l, 0, mx); /* padding compares equal */
        isa->quant_q8(x, h, K);
        const float *d = (const float *)h;
        const int8_t *q = (const int8_t *)(h + r1_cpu_q8_qoff(K));
        for (int k = 0; k < K; k++) r[k] = x[k] - d[k / 32] * (float)q[k];
        r1_cpu_quant_q8_lo_c(r, d, l, K);
        /* the lo part's fixed scale: d_lo = d_hi / 256, |q_lo| <= 127, and
         * hi + lo within d_lo / 2 of x (plus the rounding of r) */
        const int8_t *ql = (const int8_t *)(l + r1_cpu_q8_qoff(K));
        float lerr = 0.0f;
        for (int k = 0; k < K; k++) {
            const float dl = ((const float *)l)[k / 32];
            bad += dl != d[k / 32] / 256.0f || ql[k] < -127;
            float e = fabsf(x[k] - (d[k / 32] * (float)q[k] + dl * (float)ql[k]));
            if (dl > 0.0f && e / dl > lerr) lerr = e / dl;
        }
        CHECK(lerr <= ERR_LO_PART, "K=%d: hi + lo is %.3g d_lo from x (limit %.2g)", K, lerr, ERR_LO_PART);
        if (isa->quant_q8_2) {
            memset(a, 0, mx), memset(b, 0, mx);
            isa->quant_q8_2(x, a, b, K);
            bad += memcmp(a, h, s8) != 0 || memcmp(b, l, s8) != 0;
            cases++;
        }
        if (isa->quant_q8x8_2) {
            uint8_t *hx = aligned_alloc(64, sx), *lx = aligned_alloc(64, sx);
            memset(hx, 0, sx), memset(lx, 0, sx), memset(a, 0, sx), memset(b, 0, sx);
            r1_cpu_q8_to_q8x8(h, hx, K);
            r1_cpu_q8_to_q8x8(l, lx, K);
            isa->quant_q8x8_2(x, a, b, K);
            bad += memcmp(a, hx, sx) != 0 || memcmp(b, lx, sx) != 0;
            cases++;
            free(hx), free(lx);
        }
        if (isa->q8w_fold) {
            const size_t sw = r1_cpu_q8ws_stride(K);
            uint8_t *c = aligned_alloc(64, sw), *e = aligned_alloc(64, sw);
            for (int two = 0; two < 2; two++)
                for (int sums = 0; sums < 2; sums++) {
                    memset(c, 0, sw), memset(e, 0xa5, sw);
                    r1_cpu_q8w_fold_c(h, two ? l : NULL, c, K, sums);
                    isa->q8w_fold(h, two ? l : NULL, e, K, sums);
                    const size_t qo = r1_cpu_q8_qoff(K), fo = r1_cpu_q8ws_foff(K), nb = (size_t)K / 32 * 4;
                    bad += memcmp(c, e, nb) != 0 || memcmp(c + qo, e + qo, (size_t)K * 2) != 0 ||
                           (sums && memcmp(c + fo, e + fo, nb) != 0); /* d, q, fs: not the padding */
                    cases++;
                }
            free(c), free(e);
        }
        free(x), free(r), free(h), free(l), free(a), free(b);
    }
    CHECK(bad == 0, "%s two-part quantizers: %d of %d rows differ from the plain path", isa->name, bad, cases);
    printf("%-8s two-part q8 / q8x8 / q8w(s) activations: %d rows, %s\n", isa->name, cases,
           bad ? "DIFFER" : "the plain path's bytes");
}

#if defined(__x86_64__)
/* |w - (hi + lo)| over |w| of a two-part bf16 panel: bf16 keeps 8
 * significant bits, so |w - hi| <= 2^-8 |w| and lo = bf16(w - hi) is off by
 * at most 2^-8 of that: 2^-16 |w| (measured: 2^-17); a q*_K weight may
 * differ from to_f32's by an f32 rounding (2^-24) more */
#define ERR_PANEL2 0x1p-16
/* an AMX block against the dequantized weights times the f32 activations in
 * double, over the sum of |products| (the measure of ERR_TILE_RANGE): each
 * product is within ~2^-17 of w x (the panel's and the activations' parts
 * left out), the sums in f32 */
#define ERR_AMX_BLOCK 1e-9
/* A block in two column slices (the second added to the first's results)
 * against one over all columns: the same products, only the f32 sums
 * rounded at the slice boundary (normalized squared error) */
#define ERR_AMX_SLICES 1e-12

/* The blocks' outputs on the hardware ("avx512-amx", first in the list of
 * sets), which the software model ("avx512-amx-emu", last) must equal bit
 * for bit where both run: the model is what tests the AMX source on CPUs
 * without AMX, so it must round as the tiles do. */
static float *amx_hw_out;
static size_t amx_hw_n, amx_hw_cap, amx_emu_at, amx_emu_diff, amx_emu_cmp;

/* The AMX side of every dtype an AMX set has blocks for: the two-part bf16
 * panels (amx_panel.c) against to_f32, and the blocks themselves on three-part
 * bf16 activations against double sums, on odd row counts (a zero-padded
 * panel) and token counts past one 16-token group. The inputs come from a
 * fixed seed, so every AMX set multiplies the same numbers. */
static void test_amx_side(const struct r1_cpu_isa *isa) {
    const int hw = !strcmp(isa->name, "avx512-amx"), emu = !strcmp(isa->name, "avx512-amx-emu");
    const uint64_t rng_saved = rng;
    rng = 0x2545F4914F6CDD1Dull;
    static const enum r1_dtype dts[] = {R1_DTYPE_BF16,   R1_DTYPE_F16,    R1_DTYPE_Q8_0,   R1_DTYPE_Q4_0,
                                        R1_DTYPE_Q4_0X8, R1_DTYPE_Q4_1X8, R1_DTYPE_Q8_0X8, R1_DTYPE_Q4_KX8,
                                        R1_DTYPE_Q5_KX8, R1_DTYPE_Q6_KX8};
    static const int Ks[] = {256, 576, 1536};
    int blocks = 0;
    for (size_t i = 0; i < sizeof dts / sizeof dts[0]; i++) {
        const enum r1_dtype dt = dts[i];
        const struct r1_cpu_mm *mm = &isa->mm[dt];
        if (!mm->batch_block) continue;
        double worst_panel = 0, worst_block = 0, worst_slices = 0;
        for (size_t ki = 0; ki < sizeof Ks / sizeof Ks[0]; ki++) {
            const int K = Ks[ki], R = 37, T = 21;
            if (K % r1_dtype_traits[dt].block) continue;
            const size_t rb = r1_dtype_row_bytes(dt, K);
            uint8_t *w = malloc(rb * R);
            float *wf = malloc((size_t)R * K * 4), *x = malloc((size_t)T * K * 4);
            uint16_t *hi = malloc((size_t)R * K * 2), *lo = malloc((size_t)R * K * 2);
            fill(x, K, 0.05f);
            for (int r = 0; r < R; r++) {
                fill(x, K, 0.05f);
                r1_dtype_traits[dt].from_f32(x, w + r * rb, K);
                r1_dtype_traits[dt].to_f32(w + r * rb, wf + (size_t)r * K, K);
            }
            fill(x, T * K, 1.0f);
            CHECK(r1_x86_amx_panel(dt, w, rb, R, K, K, hi, lo) == 0, "%s panel K=%d", r1_dtype_name(dt), K);
            for (size_t j = 0; j < (size_t)R * K; j++) {
                const double v = (double)r1_bf16_to_f32(hi[j]) + (dt == R1_DTYPE_BF16 ? 0 : r1_bf16_to_f32(lo[j]));
                if (wf[j] != 0) worst_panel = fmax(worst_panel, fabs(v - wf[j]) / fabs(wf[j]));
            }
            /* the activations as cpu_act.c hands them to a block (the set's
             * conversion, which must give plain C's bytes), with a denormal,
             * a zero and a value whose remainders are denormal among them */
            x[5] = 1e-39f, x[6] = 0.0f, x[K + 7] = -3e-38f;
            const size_t plane = r1_cpu_vnni_bytes(K, T);
            uint8_t *xv = aligned_alloc(64, 3 * plane), *xc = aligned_alloc(64, 3 * plane);
            isa->vnni_parts(x, T, K, xv, plane);
            r1_cpu_vnni_parts_c(x, T, K, xc, plane);
            CHECK(!memcmp(xv, xc, 3 * plane), "%s three bf16 parts in VNNI layout K=%d T=%d differ from plain C",
                  isa->name, K, T);
            free(xc);
            float *C = malloc((size_t)T * 64 * 4);
            for (int rows = R; rows > 0; rows -= 21) { /* 37 rows, 16 */
                CHECK(mm->batch_block(dt, K, 0, K, w, rb, rows, xv, plane, 0, T, C, 64, 0) == 0,
                      "%s %s block K=%d rows=%d declined", isa->name, r1_dtype_name(dt), K, rows);
                blocks++;
                double err = 0, mag = 0;
                for (int r = 0; r < rows; r++)
                    for (int t = 0; t < T; t++) {
                        double sum = 0, sa = 0;
                        for (int k = 0; k < K; k++) {
                            const double pr = (double)wf[(size_t)r * K + k] * x[(size_t)t * K + k];
                            sum += pr, sa += fabs(pr);
                        }
                        const double e = C[(size_t)t * 64 + r] - sum;
                        err += e * e, mag += sa * sa;
                    }
                worst_block = fmax(worst_block, err / mag);
                /* the same block in two column slices, the second added
                 * (as cpu.c walks long rows); rows past `rows` untouched */
                if (K > 256) {
                    float *C2 = malloc((size_t)T * 64 * 4);
                    for (size_t j = 0; j < (size_t)T * 64; j++) C2[j] = -7.0f;
                    CHECK(mm->batch_block(dt, K, 0, 256, w, rb, rows, xv, plane, 0, T, C2, 64, 0) == 0 &&
                              mm->batch_block(dt, K, 256, K, w, rb, rows, xv, plane, 0, T, C2, 64, 1) == 0,
                          "%s %s block in slices K=%d declined", isa->name, r1_dtype_name(dt), K);
                    double e2 = 0, m2 = 0;
                    int kept = 1;
                    for (int t = 0; t < T; t++)
                        for (int r = 0; r < 64; r++) {
                            const float a = C2[(size_t)t * 64 + r], b = C[(size_t)t * 64 + r];
                            if (r >= rows) kept &= a == -7.0f;
                            else e2 += ((double)a - b) * ((double)a - b), m2 += (double)b * b;
                        }
                    CHECK(kept, "%s %s block K=%d rows=%d wrote past its rows", isa->name, r1_dtype_name(dt), K, rows);
                    worst_slices = fmax(worst_slices, m2 > 0 ? e2 / m2 : e2);
                    free(C2);
                }
                for (int t = 0; t < T && (hw || emu); t++)
                    for (int r = 0; r < rows; r++) {
                        const float c = C[(size_t)t * 64 + r];
                        if (hw) {
                            if (amx_hw_n == amx_hw_cap) {
                                amx_hw_cap = amx_hw_cap ? 2 * amx_hw_cap : 1 << 16;
                                amx_hw_out = realloc(amx_hw_out, amx_hw_cap * sizeof(float));
                            }
                            amx_hw_out[amx_hw_n++] = c;
                        } else if (amx_emu_at < amx_hw_n) {
                            amx_emu_diff += memcmp(&c, &amx_hw_out[amx_emu_at++], sizeof c) != 0;
                            amx_emu_cmp++;
                        }
                    }
            }
            free(w), free(wf), free(x), free(hi), free(lo), free(xv), free(C);
        }
        CHECK(worst_panel <= ERR_PANEL2, "%s %s two-part bf16 panel: error %.3g > %.3g", isa->name, r1_dtype_name(dt),
              worst_panel, ERR_PANEL2);
        CHECK(worst_block <= ERR_AMX_BLOCK, "%s %s AMX block: error %.3g > %.0e", isa->name, r1_dtype_name(dt),
              worst_block, ERR_AMX_BLOCK);
        CHECK(worst_slices <= ERR_AMX_SLICES, "%s %s AMX block in two slices against one: %.3g > %.0e", isa->name,
              r1_dtype_name(dt), worst_slices, ERR_AMX_SLICES);
        printf("%-8s %-8s AMX: two-part panel error %.3g (limit %.3g), block error %.3g (limit %.0e), "
               "two slices against one %.3g (limit %.0e)\n",
               isa->name, r1_dtype_name(dt), worst_panel, ERR_PANEL2, worst_block, ERR_AMX_BLOCK, worst_slices,
               ERR_AMX_SLICES);
    }
    if (!strncmp(isa->name, "avx512-amx", 10)) CHECK(blocks > 0, "%s: no AMX block ran", isa->name);
    if (emu && amx_hw_n) {
        CHECK(amx_emu_cmp == amx_hw_n && amx_emu_diff == 0,
              "the software model of the AMX tiles differs from the hardware in %zu of %zu outputs "
              "(%zu compared)",
              amx_emu_diff, amx_hw_n, amx_emu_cmp);
        printf("avx512-amx-emu equals avx512-amx bit for bit: %zu of %zu block outputs differ\n", amx_emu_diff,
               amx_emu_cmp);
    }
    rng = rng_saved;
}
#endif

int main(void) {
    test_lossless();
    for (int i = 0; r1_cpu_isas[i]; i++) {
        const struct r1_cpu_isa *isa = r1_cpu_isas[i];
        if (!isa->available()) {
            printf("%-8s not available on this CPU: skipped\n", isa->name);
            continue;
        }
        CHECK(r1_cpu_select(isa->name) == 0, "select %s", isa->name);
        test_q8x8_tail(isa);
        test_two_parts(isa);
        test_tiles(isa);
        test_pair_tiles(isa);
#if defined(__x86_64__)
        test_amx_side(isa);
#endif
    }
    r1_cpu_select(NULL);
#if defined(__x86_64__)
    free(amx_hw_out);
#endif
    return TEST_DONE("test_x8");
}
