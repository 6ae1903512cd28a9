/*
 * test_pair_avx2.c - the pair tiles (cpu.h r1_cpu_mm.pair_tile: two-part
 * activations folded in int32 inside the tile) that read the q8 and q8s
 * activation forms, and q4_0x8's on q8x8 (the AVX2 tables' decode tiles;
 * test_x8.c checks the AVX-512 x8 ones), for every ISA table this CPU runs:
 * each over every column range cpu.c may ask for, against dequantized rows
 * times hi + lo dequantized, in double; and each token's result bit for bit
 * the same whatever else the call computes (nt tokens at once vs that token
 * alone), which "a batch <= 16 == single decode steps" rests on
 * (test_matmul.c checks that through cpu.c).
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "kernel_test.h" /* frand */
#include "kernels/dtype.h"

/* error over the sum of |products| of each output: only float summation
 * order may differ (test_matmul.c's NMSE_TILE_RANGE, the same measure) */
#define ERR_TILE_RANGE 1e-9

static void fill(float *x, int n, float scale) {
    for (int i = 0; i < n; i++) x[i] = frand() * scale;
}

/* bytes of a token in the form act */
static size_t form_stride(enum r1_cpu_act act, int K) {
    return act == R1_CPU_ACT_Q8S    ? r1_cpu_q8s_stride(K)
           : act == R1_CPU_ACT_Q8X8 ? r1_cpu_q8x8_stride(K)
                                    : r1_cpu_q8_stride(K);
}

/* A token already in q8 form (stride r1_cpu_q8_stride(K)) in the form act at dst. */
static void to_form(enum r1_cpu_act act, const uint8_t *q8, uint8_t *dst, int K) {
    if (act == R1_CPU_ACT_Q8X8) {
        r1_cpu_q8_to_q8x8(q8, dst, K);
        return;
    }
    memcpy(dst, q8, r1_cpu_q8_stride(K));
    if (act == R1_CPU_ACT_Q8S) r1_cpu_q8s_sums(dst, K);
}

static void test_pairs(const struct r1_cpu_isa *isa) {
    static const int rng_k[][3] = {/* K, k0, k1: whole rows, KC slices, a row's tail, 64-column cuts */
                                   {576, 0, 576},     {576, 0, 512},    {576, 512, 576}, {1536, 0, 1536},
                                   {1536, 512, 1024}, {1536, 64, 1216}, {2240, 0, 2240}, {2240, 2048, 2240},
                                   {96, 0, 96},       {256, 0, 256},    {32, 0, 32},     {768, 256, 768}};
    for (int dt = 0; dt < R1_DTYPE_ALL; dt++) {
        const struct r1_cpu_mm *mm = &isa->mm[dt];
        if (!mm->pair_tile) continue;
        if (mm->act == R1_CPU_ACT_Q8X8 && dt != R1_DTYPE_Q4_0X8) continue; /* test_x8.c's */
        CHECK((r1_cpu_act_q8(mm->act) || mm->act == R1_CPU_ACT_Q8X8) && mm->pair_nt >= 1 && mm->pair_nt <= R1_CPU_NT,
              "%s %s pair tile: act %d, pair_nt %d", isa->name, r1_dtype_name(dt), mm->act, mm->pair_nt);
        const int blk = r1_dtype_traits[dt].block, x8 = mm->act == R1_CPU_ACT_Q8X8;
        double worst = 0;
        int cases = 0, differ = 0;
        for (size_t ci = 0; ci < sizeof rng_k / sizeof rng_k[0]; ci++) {
            int K = rng_k[ci][0], k0 = rng_k[ci][1], k1 = rng_k[ci][2];
            if (K % blk) continue;
            if (x8 && (k0 % 256 || (k1 % 256 && k1 != K))) continue; /* cpu.h r1_cpu_tile_fn */
            size_t rb = r1_dtype_row_bytes(dt, K), xs = form_stride(mm->act, K), qs = r1_cpu_q8_stride(K);
            uint8_t *w = malloc(rb * R1_CPU_MR);
            float *wf = malloc((size_t)K * 4 * R1_CPU_MR), *xr = malloc((size_t)K * 4), *res = malloc((size_t)K * 4);
            for (int r = 0; r < R1_CPU_MR; r++) {
                fill(xr, K, 0.05f);
                if (r == 1) memset(xr, 0, 32 * 4); /* a block of zeros: scale 0 */
                if (r == 2) xr[K - 1] = 0.5f;      /* an outlier weight */
                r1_dtype_traits[dt].from_f32(xr, w + r * rb, K);
                r1_dtype_traits[dt].to_f32(w + r * rb, wf + (size_t)r * K, K);
            }
            /* token t: hi at xq + 2t xs, lo xs further (cpu.c's layout);
             * both parts in q8 form for the reference */
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
                to_form(mm->act, h, xq + 2 * t * xs, K);
                to_form(mm->act, l, xq + (2 * t + 1) * xs, K);
            }
            float one[R1_CPU_MR * R1_CPU_NT]; /* token t alone */
            for (int t = 0; t < R1_CPU_NT; t++)
                mm->pair_tile(K, k0, k1, w, rb, R1_CPU_MR, xq + 2 * t * xs, 2 * xs, 1, one + t * R1_CPU_MR);
            for (int t0 = 0; t0 < R1_CPU_NT; t0 += mm->pair_nt) /* cpu.c's token groups */
                for (int nt = 1; nt <= mm->pair_nt && t0 + nt <= R1_CPU_NT; nt++)
                    for (int nr = 1; nr <= isa->mr; nr++) {
                        float out[R1_CPU_MR * R1_CPU_NT];
                        mm->pair_tile(K, k0, k1, w, rb, nr, xq + 2 * t0 * xs, 2 * xs, nt, out);
                        double err = 0, mag = 0;
                        for (int r = 0; r < nr; r++)
                            for (int j = 0; j < nt; j++) {
                                const int t = t0 + j;
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
                                double e = out[j * R1_CPU_MR + r] - s;
                                err += e * e, mag += sa * sa;
                                differ += memcmp(&out[j * R1_CPU_MR + r], &one[t * R1_CPU_MR + r], 4) != 0;
                            }
                        double e = mag > 0 ? err / mag : err;
                        CHECK(e <= ERR_TILE_RANGE, "%s %s pairs K=%d [%d,%d) nr=%d t=%d+%d: error %.3g > %.0e",
                              isa->name, r1_dtype_name(dt), K, k0, k1, nr, t0, nt, e, ERR_TILE_RANGE);
                        if (e > worst) worst = e;
                        cases++;
                    }
            free(w), free(wf), free(xr), free(res), free(xq), free(q8);
        }
        CHECK(cases > 0, "%s %s pair tile: no case ran", isa->name, r1_dtype_name(dt));
        CHECK(differ == 0, "%s %s pair tile: %d results differ from the token alone", isa->name, r1_dtype_name(dt),
              differ);
        printf("%-9s pair tile/%-7s %4d cases  worst error %9.3g (limit %.0e), %s\n", isa->name, r1_dtype_name(dt),
               cases, worst, ERR_TILE_RANGE, differ ? "DIFFERS from one token alone" : "each token as alone");
    }
}

int main(void) {
    int tables = 0;
    for (int i = 0; r1_cpu_isas[i]; i++) {
        const struct r1_cpu_isa *isa = r1_cpu_isas[i];
        if (!isa->available()) {
            printf("%-9s not available on this CPU: skipped\n", isa->name);
            continue;
        }
        CHECK(r1_cpu_select(isa->name) == 0, "select %s", isa->name);
        test_pairs(isa);
        tables++;
    }
    CHECK(tables > 0, "no cpu kernel set runs here");
    r1_cpu_select(NULL);
    return TEST_DONE("test_pair_avx2");
}
