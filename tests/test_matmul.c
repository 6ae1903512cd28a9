/*
 * test_matmul.c - conformance of the cpu backend's matmul kernels (qkv_bias,
 * matvec_add, lm_head, gate_up_silu) against the reference kernels: every
 * weight dtype, odd shapes, T = 1 and batches, 1..3 threads (run one after
 * another, so results are deterministic), one- and two-part integer
 * activations, the panel GEMMs of batches, the tiles over column sub-ranges
 * and at the extremes of their integer sums, the q8x8 activation form, and
 * batches of up to 16 tokens bit for bit equal to single rows; for every ISA
 * table this CPU can run (so AVX2 and AVX-512, or NEON and NEON dotprod, are
 * both checked on one machine). Prints one line per (ISA, kernel, dtype)
 * group with its worst normalized error (nmse = sum((a-b)^2) / sum(b^2))
 * against a named limit. The other kernels: test_kernels.c.
 *
 *   R1_TEST_QUICK=1    a small set of shapes (for qemu)
 *   R1_TEST_SETS="neon-dot neon"  only those kernel sets
 *   R1_TEST_VERBOSE=1  one line per case
 * (Speed: tools/mm_bench.c, the same kernels at a model's shapes.)
 *
 * Depends only on src/kernels and src/util, so it cross-compiles for aarch64.
 */
#include "kernel_test.h"

/* Named limits. Float weights see f32 activations in both: only summation
 * order differs. Quantized weights on SIMD paths see q8-quantized
 * activations (one int8 per value, a scale per 32): error ~1/(127*sqrt(12))
 * of the block max, relative. */
#define NMSE_MATMUL_F32                                                                                                \
    1e-10 /* f32/f16/bf16 weights, f32 activations (on AMX: split                                                      \
             into three bf16 parts, f32-exact products) */
/* q8_0/q4_0 weights against q8 activations. Cases of 5 outputs over one
 * block make the nmse heavy-tailed (an output whose terms cancel): 400000
 * simulated 5x32 cases with the test's weights and activations gave a median
 * of 2.5e-5, a 99.99th percentile of 2.2e-3; 0.3% exceed 5e-4 (the old
 * limit; neon without dotprod hit 5.2e-4 on lm_head/q4_0 5x32). */
#define NMSE_MATMUL_Q8ACT 5e-3
/* q4_1..q6_K (the GGUF formats; random blocks where r1infer has no
 * quantizer, see rand_blocks) against q8 activations: the same noise, but cases of 5 outputs
 * make the nmse heavy-tailed (one seen at 3e-3 in gate_up); a looser named
 * limit. Their arithmetic is held to NMSE_TILE_RANGE by test_tile_ranges. */
/* 20000 random 5x32 q5_0 cases (one block, 5 outputs): worst 2.3e-3, the same
 * on avx512, avx2 and generic */
#define NMSE_MATMUL_Q8ACT_GGUF 5e-3
/* gate_up multiplies two such dots: over 20000 random 10x32 q5_0 cases (one
 * block, 5 outputs) the worst nmse was 1.4e-2, the same value on avx512, avx2
 * and generic, so it is the activations' q8 rounding, not a tile */
#define NMSE_GATE_UP_Q8ACT_GGUF 3e-2
/* a K-quant/_1/_5 tile over a sub-range of columns against dequantized rows
 * and dequantized q8 activations: only float summation order differs.
 * (test_tile_ranges divides by the sum of |w x|, which bounds f32 rounding;
 * a lone output whose terms cancel has an ill-conditioned nmse of its own:
 * 20000 random 96-column q5_1 cases reached 3e-7 on avx2, 2.4e-8 in plain C) */
#define NMSE_TILE_RANGE 1e-9
/* Two-part integer activations (the default, cpu.h r1_cpu_set_act_parts):
 * the second int8 part quantizes what the first left, with its scale fixed
 * at the first's / 256 (so tiles may fold both in int32): the error shrinks
 * ~256x, the nmse ~6e4x (measured: 1.3e4-6e4x on these cases). Each limit is
 * the one-part limit above / 1e4. */
#define NMSE_MATMUL_Q8X2 5e-8
#define NMSE_MATMUL_Q8X2_GGUF 5e-7
#define NMSE_GATE_UP_Q8X2 2e-7
#define NMSE_GATE_UP_Q8X2_GGUF 3e-6
/* silu(g)*u: two q8-activation dots multiplied. 20000 random 10x32 q8_0 and
 * q4_0 cases (one block, 5 outputs), one part: worst 2.5e-2 and 2.3e-2, the
 * same on avx512, avx2-vnni and avx2, so it is the activations' q8 rounding */
#define NMSE_GATE_UP_Q8ACT 3e-2

/* 1: test_matmul runs only the batches (T > 16) of the dtypes with a batch
 * form, for an emulated kernel set, whose decode tiles another set has */
static int only_batches;

static void test_matmul(const struct r1_cpu_isa *isa) {
    /* 11x4616: a token's f32 activations past R1_CPU_ROW1_ACT (the float
     * tiles' decode then takes rows several a pass), odd rows, a K % 32 tail */
    static const int shapes_full[][2] = {{5, 32},   {17, 7},        {33, 100}, {64, 96},  {130, 1536},
                                         {12, 257}, {40, 8960 / 4}, {9, 256},  {21, 512}, {11, 4616}};
    /* quick (qemu): also 25 blocks of 32 (steps of 128 columns and a tail, in
     * two KC slices) and 3 super-blocks */
    static const int shapes_quick[][2] = {{5, 32}, {17, 7}, {33, 160}, {6, 256}, {7, 800}, {5, 768}};
    static const int Ts_full[] = {1, 3, 17, 64}, Ts_quick[] = {1, 3, 9}, Ts_batch[] = {17, 64};
    const int(*shapes)[2] = quick ? shapes_quick : shapes_full;
    int nshapes = quick ? 6 : 10;
    const int *Ts = only_batches ? Ts_batch : quick ? Ts_quick : Ts_full;
    int nT = only_batches ? 2 : quick ? 3 : 4, ncase = 0;
    for (size_t ki = 0; ki < sizeof mm_kernels / sizeof mm_kernels[0]; ki++) {
        enum r1_kernel k = mm_kernels[ki];
        for (size_t di = 0; di < sizeof dtypes / sizeof dtypes[0]; di++) {
            enum r1_dtype dt = dtypes[di];
            if (only_batches && !isa->mm[dt].batch_block && !isa->mm[dt].batch_tile) continue;
            int q = r1_dtype_traits[dt].block > 1;
            char what[48];
            snprintf(what, sizeof what, "%s/%s", r1_kernel_names[k], r1_dtype_name(dt));
            int gu = k == R1_K_GATE_UP_SILU, one = r1_cpu_mm_parts(&isa->mm[dt]) == 1;
            int gguf = dt > R1_DTYPE_Q4_0 && dt != R1_DTYPE_Q4_0X8;
            double lim = one ? (gu ? (gguf ? NMSE_GATE_UP_Q8ACT_GGUF : NMSE_GATE_UP_Q8ACT)
                                   : (gguf ? NMSE_MATMUL_Q8ACT_GGUF : NMSE_MATMUL_Q8ACT))
                             : (gu ? (gguf ? NMSE_GATE_UP_Q8X2_GGUF : NMSE_GATE_UP_Q8X2)
                                   : (gguf ? NMSE_MATMUL_Q8X2_GGUF : NMSE_MATMUL_Q8X2));
            const double gl = r1_cpu_act_int(isa->mm[dt].act) ? lim : NMSE_MATMUL_F32;
            struct group g = {isa->name, what, gl, 0, "", 0};
            for (int si = 0; si < nshapes; si++) {
                int rows = shapes[si][0], cols = shapes[si][1];
                if (q && cols % r1_dtype_traits[dt].block) continue;
                if (k == R1_K_GATE_UP_SILU) rows *= 2;
                struct mat w = mat_new(dt, rows, cols);
                float *bias = frand_buf((size_t)rows);
                for (int ti = 0; ti < nT; ti++) {
                    int T = Ts[ti], nth = 1 + ncase++ % 3;
                    int on = k == R1_K_GATE_UP_SILU ? rows / 2 : rows;
                    float *x = frand_buf((size_t)T * cols);
                    float *o_ref = frand_buf((size_t)T * on), *o_cpu = malloc((size_t)T * on * 4);
                    memcpy(o_cpu, o_ref, (size_t)T * on * 4);
                    struct r1_op op = {.kernel = k, .T = T, .x = x, .w = &w.m, .b = bias};
                    op.out = o_ref;
                    run(r1_ref_kernels[k], &op, 1);
                    op.out = o_cpu;
                    int claim = 0, guided = ncase % 2; /* rows claimed, as in a session */
                    if (guided) op.claim = &claim;
                    run(r1_backend_cpu.fn[k], &op, nth);
                    group_add(&g, nmse(o_cpu, o_ref, (size_t)T * on), "%dx%d T=%d nth=%d%s", rows, cols, T, nth,
                              guided ? " claimed" : "");
                    free(x);
                    free(o_ref);
                    free(o_cpu);
                }
                free(bias);
                free(w.buf);
            }
            group_print(&g);
        }
    }
}

/* The panel GEMM of batches (cpu.h r1_cpu_panel_fn: more than
 * R1_CPU_PANEL_MIN_T tokens, f32 activations, weights dequantized to f32)
 * for every dtype that has one, against ref, which also multiplies the
 * dequantized weights with f32 activations: only summation order differs,
 * so every format is held to the float limit. Shapes cut it everywhere: K
 * below one 512-column slice, and past two with a tail that is not a
 * multiple of 8 (floats) or 64 (32-blocks); rows not a multiple of 16 and
 * more than one 64-row block; token counts not a multiple of 6, one more
 * than R1_CPU_PANEL_MIN_T and more than one 256-token block. The AMX
 * blocks take the same shapes and limit (f32-exact products of the
 * dequantized weights' two bf16 parts and the activations' three). */
#define NMSE_PANEL NMSE_MATMUL_F32
/* Integer panels (panel_act R1_CPU_ACT_Q16): int16 activations, a step of
 * 1/32767 of the block max where two-part int8 has 1/(127 x 254), so the
 * two-part limits. */
#define NMSE_PANEL_Q16 NMSE_MATMUL_Q8X2
#define NMSE_PANEL_Q16_GATE_UP NMSE_GATE_UP_Q8X2
static void test_panel(const struct r1_cpu_isa *isa) {
    static const int Ts[] = {R1_CPU_PANEL_MIN_T + 1, 23, 70, 263};
    static const enum r1_kernel ks[] = {R1_K_QKV_BIAS, R1_K_MATVEC_ADD, R1_K_GATE_UP_SILU};
    int ncase = 0;
    for (size_t di = 0; di < sizeof dtypes / sizeof dtypes[0]; di++) {
        enum r1_dtype dt = dtypes[di];
        const int amx = isa->mm[dt].batch_block != NULL; /* AMX blocks take these batches */
        if (!isa->mm[dt].batch_panel && !amx) continue;
        const int blk = r1_dtype_traits[dt].block;
        /* the third, AMX only: rows long enough (>= 2048) that cpu.c walks
         * them in column slices, the last one longer and not whole groups */
        const int shapes[3][2] = {{37, blk == 1    ? 7
                                       : blk == 32 ? 96
                                                   : 256},
                                  {70, blk == 1    ? 1037
                                       : blk == 32 ? 1056
                                                   : 1280},
                                  {21, blk == 1    ? 2080
                                       : blk == 32 ? 2112
                                                   : 2304}};
        char what[48];
        const int q16 = !amx && isa->mm[dt].panel_act == R1_CPU_ACT_Q16;
        snprintf(what, sizeof what, "%s%s/%s", amx ? "amx-block" : "panel", q16 ? "-q16" : "", r1_dtype_name(dt));
        struct group g = {isa->name, what, q16 ? NMSE_PANEL_Q16_GATE_UP : NMSE_PANEL, 0, "", 0};
        for (size_t ki = 0; ki < sizeof ks / sizeof ks[0]; ki++)
            for (int si = 0; si < (amx ? 3 : 2); si++) {
                const enum r1_kernel k = ks[ki];
                if (q16) g.limit = k == R1_K_GATE_UP_SILU ? NMSE_PANEL_Q16_GATE_UP : NMSE_PANEL_Q16;
                const int on = shapes[si][0], cols = shapes[si][1], rows = k == R1_K_GATE_UP_SILU ? 2 * on : on;
                struct mat w = mat_new(dt, rows, cols);
                float *bias = frand_buf((size_t)rows);
                for (int ti = 0; ti < 4; ti++) {
                    if ((quick || si == 2) && ti == 3) continue;
                    const int T = Ts[ti], nth = 1 + ncase++ % 3;
                    float *x = frand_buf((size_t)T * cols);
                    float *o_ref = frand_buf((size_t)T * on), *o_cpu = malloc((size_t)T * on * 4);
                    memcpy(o_cpu, o_ref, (size_t)T * on * 4);
                    struct r1_op op = {.kernel = k, .T = T, .x = x, .w = &w.m, .b = bias, .out = o_ref};
                    run(r1_ref_kernels[k], &op, 1);
                    op.out = o_cpu;
                    int claim = 0, guided = ncase % 2;
                    if (guided) op.claim = &claim;
                    run(r1_backend_cpu.fn[k], &op, nth);
                    group_add(&g, nmse(o_cpu, o_ref, (size_t)T * on), "%s %dx%d T=%d nth=%d%s", r1_kernel_names[k],
                              rows, cols, T, nth, guided ? " claimed" : "");
                    free(x), free(o_ref), free(o_cpu);
                }
                free(bias);
                free(w.buf);
            }
        group_print(&g);
    }
}

/* A q8 token in q8w form (cpu.h) for the tiles that read q8w: each quant
 * x 256 at the scale / 256, the same values, at the magnitudes (up to
 * 32512) that a token's two parts folded reach. */
static void q8_to_q8w(const uint8_t *q8, uint8_t *dst, int K) {
    const size_t qoff = r1_cpu_q8_qoff(K);
    const float *d = (const float *)q8;
    const int8_t *q = (const int8_t *)(q8 + qoff);
    float *dw = (float *)dst;
    int16_t *qw = (int16_t *)(dst + qoff);
    for (int b = 0; b < K / 32; b++) dw[b] = d[b] / 256;
    for (int k = 0; k < K; k++) qw[k] = (int16_t)(q[k] * 256);
}
/* The same in q8ws form (cpu.h): q8w, then each block's fs = d x the sum of
 * its q, as r1_cpu_q8w_fold_c makes it. */
static void q8_to_q8ws(const uint8_t *q8, uint8_t *dst, int K) {
    q8_to_q8w(q8, dst, K);
    const float *dw = (const float *)dst;
    const int16_t *qw = (const int16_t *)(dst + r1_cpu_q8_qoff(K));
    float *fs = (float *)(dst + r1_cpu_q8ws_foff(K));
    for (int b = 0; b < K / 32; b++) {
        int sum = 0;
        for (int i = 0; i < 32; i++) sum += qw[32 * b + i];
        fs[b] = dw[b] * (float)sum;
    }
}

/* The q8-activation tiles of the GGUF formats over column sub-ranges that
 * cpu.c does not produce today (64-aligned, inside a 256-weight super-block,
 * a last half chunk of a 32-block format), against dequantized rows and
 * dequantized q8 activations in double. */
static void test_tile_ranges(const struct r1_cpu_isa *isa) {
    static const enum r1_dtype dts[] = {R1_DTYPE_Q4_0, R1_DTYPE_Q8_0, R1_DTYPE_Q4_1, R1_DTYPE_Q5_0,
                                        R1_DTYPE_Q5_1, R1_DTYPE_Q4_K, R1_DTYPE_Q5_K, R1_DTYPE_Q6_K};
    static const int rng_k[][3] = {/* K, k0, k1 */ {512, 0, 512},
                                   {512, 64, 192},
                                   {512, 192, 448},
                                   {768, 256, 768},
                                   {480, 384, 480},
                                   {96, 0, 96}};
    for (size_t di = 0; di < sizeof dts / sizeof dts[0]; di++) {
        enum r1_dtype dt = dts[di];
        const struct r1_cpu_mm *mm = &isa->mm[dt];
        const int w16 = mm->act == R1_CPU_ACT_Q8W || mm->act == R1_CPU_ACT_Q8WS;
        const int wsums = mm->act == R1_CPU_ACT_Q8WS;
        if (!mm->tile || !(r1_cpu_act_q8(mm->act) || w16)) continue;
        char what[48];
        snprintf(what, sizeof what, "tile ranges/%s", r1_dtype_name(dt));
        struct group g = {isa->name, what, NMSE_TILE_RANGE, 0, "", 0};
        for (size_t ci = 0; ci < sizeof rng_k / sizeof rng_k[0]; ci++) {
            int K = rng_k[ci][0], k0 = rng_k[ci][1], k1 = rng_k[ci][2];
            if (K % r1_dtype_traits[dt].block) continue;
            struct mat w = mat_new(dt, isa->mr, K);
            const int sums = mm->act == R1_CPU_ACT_Q8S;
            size_t xs = sums ? r1_cpu_q8s_stride(K) : r1_cpu_q8_stride(K);
            const size_t ws16 = wsums ? r1_cpu_q8ws_stride(K) : r1_cpu_q8w_stride(K);
            uint8_t *xq = aligned_alloc(64, xs * R1_CPU_NT);
            uint8_t *xw = aligned_alloc(64, ws16 * R1_CPU_NT);
            float *wf = malloc((size_t)K * 4);
            for (int nt = 1; nt <= isa->nt; nt++) {
                for (int t = 0; t < nt; t++) {
                    float *xr = frand_buf((size_t)K);
                    isa->quant_q8(xr, xq + t * xs, K);
                    if (sums) r1_cpu_q8s_sums(xq + t * xs, K);
                    if (wsums) q8_to_q8ws(xq + t * xs, xw + t * ws16, K);
                    else q8_to_q8w(xq + t * xs, xw + t * ws16, K);
                    free(xr);
                }
                float out[R1_CPU_MR * R1_CPU_NT];
                for (int nr = 1; nr <= isa->mr; nr++) {
                    if (w16) mm->tile(K, k0, k1, w.m.data, w.m.row_bytes, nr, xw, ws16, nt, out);
                    else mm->tile(K, k0, k1, w.m.data, w.m.row_bytes, nr, xq, xs, nt, out);
                    double num = 0, den = 0;
                    for (int r = 0; r < nr; r++) {
                        r1_mat_row_f32(&w.m, r, wf);
                        for (int t = 0; t < nt; t++) {
                            const float *d = (const float *)(xq + t * xs);
                            const int8_t *q = (const int8_t *)(xq + t * xs + r1_cpu_q8_qoff(K));
                            double s = 0, sa = 0;
                            for (int k = k0; k < k1; k++) {
                                double p = (double)wf[k] * d[k / 32] * q[k];
                                s += p, sa += fabs(p);
                            }
                            double e = out[t * R1_CPU_MR + r] - s;
                            num += e * e, den += sa * sa;
                        }
                    }
                    group_add(&g,
                              num != num ? INFINITY
                              : den > 0  ? num / den
                                         : num,
                              "K=%d [%d,%d) nr=%d nt=%d", K, k0, k1, nr, nt);
                }
            }
            free(xq), free(xw), free(wf), free(w.buf);
        }
        group_print(&g);
    }
}

/* The q8-activation tiles at the extremes of their integer sums: every quant
 * byte 0x00, 0xff, 0x80 or 0x81 (the largest weights of either sign, all
 * fifth and sixth bits set or clear) against tokens whose activations all
 * quantize to +127 or -127, so that a partial sum kept in a narrow integer
 * (arm/idot.h sums products in int16 lanes) would overflow if it could. The
 * scale fields are set to 2^-8 (K-quant 6-bit scales and mins to 63, q6_K's
 * to 2) so that no output is zero; against dequantized rows in double
 * (q4_0x8: the same activations in q8x8 form). */
static void test_tile_extremes(const struct r1_cpu_isa *isa) {
    static const int f16_at[][3] = {/* dtype, offsets of f16 fields (-1: none) */
                                    {R1_DTYPE_Q8_0, 0, -1}, {R1_DTYPE_Q4_0, 0, -1},   {R1_DTYPE_Q4_1, 0, 2},
                                    {R1_DTYPE_Q5_0, 0, -1}, {R1_DTYPE_Q5_1, 0, 2},    {R1_DTYPE_Q4_K, 0, 2},
                                    {R1_DTYPE_Q5_K, 0, 2},  {R1_DTYPE_Q6_K, 208, -1}, {R1_DTYPE_Q4_0X8, 0, -1}};
    static const uint8_t fills[] = {0x00, 0xff, 0x80, 0x81};
    const int K = 512;
    const size_t xs = r1_cpu_q8_stride(K);
    const size_t x8s = r1_cpu_q8x8_stride(K), ws16 = r1_cpu_q8w_stride(K);
    uint8_t *xq = aligned_alloc(64, xs * R1_CPU_NT), *x8 = aligned_alloc(64, x8s * R1_CPU_NT);
    const size_t wss = r1_cpu_q8ws_stride(K);
    uint8_t *xw = aligned_alloc(64, ws16 * R1_CPU_NT), *xws = aligned_alloc(64, wss * R1_CPU_NT);
    float *xr = malloc((size_t)K * 4), *wf = malloc((size_t)K * 4);
    for (int t = 0; t < R1_CPU_NT; t++) { /* all +1, all -1, +-1 by halves of 16, random */
        for (int k = 0; k < K; k++)
            xr[k] = t == 0 ? 1.0f : t == 1 ? -1.0f : t == 2 ? (k / 16 % 2 ? -1.0f : 1.0f) : frand();
        isa->quant_q8(xr, xq + t * xs, K);
        r1_cpu_q8_to_q8x8(xq + t * xs, x8 + t * x8s, K); /* the same values for q4_0x8 */
        q8_to_q8w(xq + t * xs, xw + t * ws16, K);        /* and for q8w tiles */
        q8_to_q8ws(xq + t * xs, xws + t * wss, K);
    }
    for (size_t di = 0; di < sizeof f16_at / sizeof f16_at[0]; di++) {
        const enum r1_dtype dt = (enum r1_dtype)f16_at[di][0];
        const struct r1_cpu_mm *mm = &isa->mm[dt];
        const int is_x8 = mm->act == R1_CPU_ACT_Q8X8, w16 = mm->act == R1_CPU_ACT_Q8W;
        const int wsums = mm->act == R1_CPU_ACT_Q8WS;
        if (!mm->tile || (mm->act != R1_CPU_ACT_Q8 && !is_x8 && !w16 && !wsums)) continue;
        const struct r1_dtype_traits *tr = &r1_dtype_traits[dt];
        const size_t rb = r1_dtype_row_bytes(dt, K);
        uint8_t *wb = malloc(rb * R1_CPU_MR);
        struct r1_mat m = {.data = wb, .dtype = dt, .rows = R1_CPU_MR, .cols = K, .row_bytes = rb};
        char what[48];
        snprintf(what, sizeof what, "tile extremes/%s", r1_dtype_name(dt));
        struct group g = {isa->name, what, NMSE_TILE_RANGE, 0, "", 0};
        for (size_t fi = 0; fi < sizeof fills; fi++) {
            /* q8_0 quantizers (r1infer's, llama.cpp's) emit -127..127; a byte
             * of -128 reads as +128 in the x86 sign-trick tiles (maddubs) */
            if (dt == R1_DTYPE_Q8_0 && fills[fi] == 0x80 && !w16) continue;
            memset(wb, fills[fi], rb * R1_CPU_MR);
            const uint16_t h = r1_f32_to_f16(1.0f / 256);
            for (size_t b = 0; b < rb * R1_CPU_MR; b += tr->block_size) {
                for (int j = 1; j < 3; j++)
                    if (f16_at[di][j] >= 0) memcpy(wb + b + f16_at[di][j], &h, 2);
                for (int j = 1; j < 8 && is_x8; j++) memcpy(wb + b + 2 * j, &h, 2); /* d[8] */
                if (dt == R1_DTYPE_Q4_K || dt == R1_DTYPE_Q5_K) memset(wb + b + 4, 0xff, 12);
                if (dt == R1_DTYPE_Q6_K) memset(wb + b + 192, 2, 16);
            }
            for (int nt = 1; nt <= isa->nt; nt++) {
                float out[R1_CPU_MR * R1_CPU_NT], a[R1_CPU_MR * R1_CPU_NT], e[R1_CPU_MR * R1_CPU_NT];
                if (is_x8) mm->tile(K, 0, K, wb, rb, isa->mr, x8, x8s, nt, out);
                else if (w16) mm->tile(K, 0, K, wb, rb, isa->mr, xw, ws16, nt, out);
                else if (wsums) mm->tile(K, 0, K, wb, rb, isa->mr, xws, wss, nt, out);
                else mm->tile(K, 0, K, wb, rb, isa->mr, xq, xs, nt, out);
                int n = 0;
                for (int r = 0; r < isa->mr; r++) {
                    r1_mat_row_f32(&m, r, wf);
                    for (int t = 0; t < nt; t++) {
                        const float *d = (const float *)(xq + t * xs);
                        const int8_t *q = (const int8_t *)(xq + t * xs + r1_cpu_q8_qoff(K));
                        double acc = 0;
                        for (int k = 0; k < K; k++) acc += (double)wf[k] * d[k / 32] * q[k];
                        a[n] = out[t * R1_CPU_MR + r], e[n++] = (float)acc;
                    }
                }
                group_add(&g, nmse(a, e, (size_t)n), "fill 0x%02x nt=%d", fills[fi], nt);
            }
        }
        group_print(&g);
        free(wb);
    }
    free(xq), free(x8), free(xw), free(xws), free(xr), free(wf);
}

/* ---- q4_0x8: the activation form, column sub-ranges, and the loader's
 * regrouping ---- */

/* Every field of a q8x8 token checked against its definition (cpu.h) on the
 * q8 blocks the same ISA's quant_q8 makes of each 256 columns. */
static void check_q8x8(const char *who, void (*qx8)(const float *, uint8_t *, int),
                       void (*q8)(const float *, uint8_t *, int)) {
    const int K = 768;
    float *x = frand_buf(K);
    x[5] = 0.0f, x[300] = 3.5f; /* a zero and an outlier */
    uint8_t *o = aligned_alloc(64, r1_cpu_q8x8_stride(K)), ref[64 + 256];
    qx8(x, o, K);
    int bad = 0;
    for (int s = 0; s < K / 256; s++) {
        q8(x + s * 256, ref, 256);
        const uint8_t *p = o + (size_t)s * R1_CPU_Q8X8_BYTES;
        for (int i = 0; i < 16; i++) {
            int b = i % 8, sum = 0;
            for (int part = 0; part < 4; part++) {
                int j = 2 * (part % 2) + i / 8, first = 16 * (part / 2) + 4 * j;
                for (int c = 0; c < 4; c++) {
                    int8_t want = (int8_t)ref[64 + 32 * b + first + c];
                    bad += (int8_t)p[64 * part + 4 * i + c] != want;
                    sum += want;
                }
            }
            int32_t nx;
            float dx, dref;
            memcpy(&nx, p + 256 + 4 * i, 4);
            memcpy(&dx, p + 320 + 4 * i, 4);
            memcpy(&dref, ref + 4 * b, 4);
            bad += nx != -8 * sum;
            bad += dx != dref;
        }
    }
    CHECK(bad == 0, "%s q8x8 form: %d fields differ from the definition", who, bad);
    free(x), free(o);
}

static void test_q4_0x8(const struct r1_cpu_isa *isa) {
    const struct r1_cpu_mm *mm = &isa->mm[R1_DTYPE_Q4_0X8];
    if (!mm->tile) return;
    if (isa->quant_q8x8) check_q8x8(isa->name, isa->quant_q8x8, isa->quant_q8);
    check_q8x8("plain C", r1_cpu_quant_q8x8_c, r1_cpu_quant_q8_c);
    /* the tile over superblock-aligned column ranges against dequantized
     * rows and dequantized q8 activations, in double */
    static const int rng_k[][3] = {{256, 0, 256}, {768, 256, 768}, {768, 0, 512}, {1536, 512, 1024}};
    struct group g = {isa->name, "tile ranges/q4_0x8", NMSE_TILE_RANGE, 0, "", 0};
    for (size_t ci = 0; ci < sizeof rng_k / sizeof rng_k[0]; ci++) {
        int K = rng_k[ci][0], k0 = rng_k[ci][1], k1 = rng_k[ci][2];
        struct mat w = mat_new(R1_DTYPE_Q4_0X8, isa->mr, K);
        size_t xs = r1_cpu_q8x8_stride(K), qs = r1_cpu_q8_stride(K);
        uint8_t *xq = aligned_alloc(64, xs * R1_CPU_NT), *q8 = aligned_alloc(64, qs * R1_CPU_NT);
        float *wf = malloc((size_t)K * 4);
        for (int nt = 1; nt <= isa->nt; nt++) {
            for (int t = 0; t < nt; t++) {
                float *xr = frand_buf((size_t)K);
                r1_cpu_quant_q8x8_c(xr, xq + t * xs, K);
                r1_cpu_quant_q8_c(xr, q8 + t * qs, K);
                free(xr);
            }
            for (int nr = 1; nr <= isa->mr; nr++) {
                float out[R1_CPU_MR * R1_CPU_NT];
                mm->tile(K, k0, k1, w.m.data, w.m.row_bytes, nr, xq, xs, nt, out);
                /* the error against the sum of the products' magnitudes, as
                 * test_tile_ranges: a single dot product (nr = nt = 1) whose
                 * terms cancel to near zero is not held to its own size */
                double num = 0, den = 0;
                for (int r = 0; r < nr; r++) {
                    r1_mat_row_f32(&w.m, r, wf);
                    for (int t = 0; t < nt; t++) {
                        const float *d = (const float *)(q8 + t * qs);
                        const int8_t *q = (const int8_t *)(q8 + t * qs + r1_cpu_q8_qoff(K));
                        double acc = 0, sa = 0;
                        for (int k = k0; k < k1; k++) {
                            double p = (double)wf[k] * d[k / 32] * q[k];
                            acc += p, sa += fabs(p);
                        }
                        double e = out[t * R1_CPU_MR + r] - acc;
                        num += e * e, den += sa * sa;
                    }
                }
                group_add(&g,
                          num != num ? INFINITY
                          : den > 0  ? num / den
                                     : num,
                          "K=%d [%d,%d) nr=%d nt=%d", K, k0, k1, nr, nt);
            }
        }
        free(xq), free(q8), free(wf), free(w.buf);
    }
    group_print(&g);
}

/* Batches of up to 16 tokens (speculative verification) must give each row
 * bit for bit what a single-token call gives: greedy speculative decoding
 * is then exactly plain greedy decoding. Every matmul kernel and weight
 * dtype, T = 2..16, against T calls with T = 1; and causal attention over
 * a batch against one call per row. */
static void test_small_batch(const struct r1_cpu_isa *isa) {
    /* 3100: cpu.c's carried column ranges (bf16, 8 or more tokens) ending in a K % 32 tail;
     * 3104: the q8_0x8 pair tile's 4-row form (K >= 3072) and its q8 tail;
     * 4616: single tokens past R1_CPU_ROW1_ACT, rows several a pass (f32, f16, bf16) */
    static const int shapes[][2] = {{5, 32}, {70, 256},  {33, 576}, {17, 1536},
                                    {9, 7},  {21, 3100}, {9, 3104}, {7, 4616}};
    /* 13: three calls of 4 tokens and one of 1 */
    /* 13: three calls of 4 tokens and one of 1; past 16: the entries with a
     * gemm (one part) give every batch a single row's bits */
    static const int Ts[] = {2, 3, 5, 8, 13, 16, 27, 40};
    const int nT_all = quick ? 3 : 6;
    int cases = 0, bad = 0, ncase = 0;
    for (size_t ki = 0; ki < sizeof mm_kernels / sizeof mm_kernels[0]; ki++)
        for (size_t di = 0; di < sizeof dtypes / sizeof dtypes[0]; di++) {
            enum r1_kernel k = mm_kernels[ki];
            enum r1_dtype dt = dtypes[di];
            for (int si = 0; si < (quick ? 3 : 8); si++) {
                int rows = shapes[si][0], cols = shapes[si][1];
                if (r1_dtype_traits[dt].block > 1 && cols % r1_dtype_traits[dt].block) continue;
                if (k == R1_K_GATE_UP_SILU) rows *= 2;
                int on = k == R1_K_GATE_UP_SILU ? rows / 2 : rows;
                struct mat w = mat_new(dt, rows, cols);
                float *bias = frand_buf((size_t)rows);
                const int gemm = isa->mm[dt].gemm && r1_cpu_mm_parts(&isa->mm[dt]) == 1 && cols % 256 == 0;
                const int nT = gemm ? nT_all + 2 : nT_all;
                for (int ti = 0; ti < nT; ti++) {
                    int T = Ts[ti < nT_all ? ti : 6 + ti - nT_all], nth = 1 + ncase++ % 3;
                    float *x = frand_buf((size_t)T * cols), *a = frand_buf((size_t)T * on);
                    float *b = malloc((size_t)T * on * 4);
                    memcpy(b, a, (size_t)T * on * 4); /* matvec_add adds to out */
                    int claim = 0;
                    struct r1_op op = {.kernel = k, .T = T, .x = x, .w = &w.m, .b = bias, .out = a};
                    if (ncase % 2) op.claim = &claim;
                    run(r1_backend_cpu.fn[k], &op, nth);
                    for (int t = 0; t < T; t++) {
                        struct r1_op o1 = op;
                        claim = 0;
                        o1.T = 1, o1.x = x + (size_t)t * cols, o1.out = b + (size_t)t * on;
                        run(r1_backend_cpu.fn[k], &o1, 1 + (nth + t) % 3);
                    }
                    int same = !memcmp(a, b, (size_t)T * on * 4);
                    CHECK(same, "%s %s/%s %dx%d: a batch of %d rows differs from %d single rows", isa->name,
                          r1_kernel_names[k], r1_dtype_name(dt), rows, cols, T, T);
                    bad += !same, cases++;
                    free(x), free(a), free(b);
                }
                free(bias);
                free(w.buf);
            }
        }
    /* attention: GQA groups of 3 (single rows take the 4-query forms) and
     * of 6 (the R1 Qwen shapes: single rows take the 6-query forms, batches
     * the 4-query ones), f32, f16 and q8_0 caches; the q8_0 cache with 6
     * rows read directly only while a unit has at most 8 queries */
    static const enum r1_dtype akv[] = {R1_DTYPE_F32, R1_DTYPE_F16, R1_DTYPE_Q8_0};
    static const int acfg[][2] = {{9, 3}, {12, 2}}; /* heads, kv heads */
    for (int ai = 0; ai < 6; ai++) {
        const enum r1_dtype kdt = akv[ai % 3];
        int nh = acfg[ai / 3][0], nkv = acfg[ai / 3][1], hd = ai < 3 ? 64 : 128, nctx = 80;
        int stride = (nh + 2 * nkv) * hd;
        struct r1_kv_cache kv = kv_new(kdt, 1, nkv, nctx, hd);
        for (int ti = 0; ti < 6; ti++) { /* T <= 16 */
            int T = Ts[ti], pos0 = 3 + 11 * ti, nth = 1 + ti % 3;
            float *x = frand_buf((size_t)T * stride), *sc = malloc((size_t)3 * nctx * 4);
            float *a = malloc((size_t)T * nh * hd * 4), *b = malloc((size_t)T * nh * hd * 4);
            struct r1_op op = {.kernel = R1_K_ATTENTION_GQA,
                               .T = T,
                               .pos0 = pos0,
                               .x = x,
                               .n_head = nh,
                               .n_kv_head = nkv,
                               .head_dim = hd,
                               .kv = &kv,
                               .scratch = sc,
                               .scratch_stride = (size_t)nctx,
                               .out = a};
            op.kernel = R1_K_KV_APPEND;
            run(r1_backend_cpu.fn[R1_K_KV_APPEND], &op, nth);
            op.kernel = R1_K_ATTENTION_GQA;
            run(r1_backend_cpu.fn[R1_K_ATTENTION_GQA], &op, nth);
            for (int t = 0; t < T; t++) {
                struct r1_op o1 = op;
                o1.T = 1, o1.pos0 = pos0 + t, o1.x = x + (size_t)t * stride;
                o1.out = b + (size_t)t * nh * hd;
                run(r1_backend_cpu.fn[R1_K_ATTENTION_GQA], &o1, 1 + (nth + t) % 3);
            }
            int same = !memcmp(a, b, (size_t)T * nh * hd * 4);
            CHECK(same, "%s attention_gqa/%s (%d heads on %d): a batch of %d rows at %d differs from single rows",
                  isa->name, r1_dtype_name(kdt), nh, nkv, T, pos0);
            bad += !same, cases++;
            free(x), free(sc), free(a), free(b);
        }
        free(kv.k), free(kv.v);
    }
    printf("%-8s %-24s %4d cases  %s\n", isa->name, "batch <= 16 == single rows", cases, bad ? "DIFFERS" : "bit-exact");
}

static void test_tune(void) {
    CHECK(r1_cpu_tune("act_parts", 1) == 0 && r1_cpu_act_parts() == 1, "act_parts=1: %d parts", r1_cpu_act_parts());
    CHECK(r1_cpu_tune("act_parts", 3) != 0, "act_parts=3 refused");
    CHECK(r1_cpu_tune("row1", 0) == 0 && r1_cpu_tuning.row1 == 0, "row1=0: %d", r1_cpu_tuning.row1);
    CHECK(r1_cpu_tune("row1_act", 0) == 0 && r1_cpu_row1_fits((size_t)1 << 20), "row1_act=0: one row at 1 MiB (%d)",
          r1_cpu_tuning.row1_act);
    CHECK(r1_cpu_tune("nosuch", 1) != 0 && strstr(r1_last_error(), "nosuch"), "an unknown tuning refused: %s",
          r1_last_error());
    r1_cpu_tune_reset();
    CHECK(r1_cpu_act_parts() == 2 && r1_cpu_tuning.row1 == -1 && r1_cpu_row1_fits(R1_CPU_ROW1_ACT) &&
              !r1_cpu_row1_fits(R1_CPU_ROW1_ACT + 1),
          "reset: %d parts, row1 %d, row1_act %d", r1_cpu_act_parts(), r1_cpu_tuning.row1, r1_cpu_tuning.row1_act);
}

int main(void) {
    if (kt_start()) return 1;
    for (int i = 0; r1_cpu_isas[i]; i++) {
        const struct r1_cpu_isa *isa = r1_cpu_isas[i];
        if (!kt_select(isa)) continue;
        const double t_set = r1_now();
        const struct r1_cpu_isa *twin = NULL; /* a later set (tested in full) with its decode forms */
        for (int j = i + 1; r1_cpu_isas[j] && !twin; j++)
            if (!r1_cpu_isas[j]->emulated && r1_cpu_isas[j]->available() && r1_cpu_same_decode(isa, r1_cpu_isas[j]))
                twin = r1_cpu_isas[j];
        if (isa->emulated || twin) { /* its decode tiles are another set's: its batch forms only */
            if (twin) printf("%s: decode forms are %s's (tested there): batch forms only\n", isa->name, twin->name);
            only_batches = 1;
            test_matmul(isa);
            only_batches = 0;
            test_panel(isa); /* the blocks past one 256-token block */
            printf("== %s: %.1f s\n", isa->name, r1_now() - t_set);
            continue;
        }
        uint64_t seed = rng;
        test_matmul(isa);
        test_small_batch(isa);
        /* single tokens on 4 rows in lockstep (tuning row1 0), then a row at a time
         * (row1 1, also for the tiles whose default is 4 rows), against
         * the same batches; plain C has one form */
        if (strcmp(isa->name, "generic")) {
            r1_cpu_tuning.row1 = 0;
            printf("%s with single tokens 4 rows at a time:\n", isa->name);
            test_small_batch(isa);
            r1_cpu_tuning.row1 = 1;
            printf("%s with single tokens a row at a time:\n", isa->name);
            test_small_batch(isa);
            r1_cpu_tuning.row1 = -1;
        }
        /* one-part q8 activations (R1_CPU_ACT=q8), a user's choice rather
         * than the default: on the quick shapes (tails, several KC slices,
         * whole super-blocks) */
        r1_cpu_set_act_parts(1);
        const int was_quick = quick;
        quick = 1;
        printf("%s with one-part q8 activations (quick shapes):\n", isa->name);
        test_matmul(isa);
        test_small_batch(isa);
        quick = was_quick;
        r1_cpu_set_act_parts(2);
        test_tile_ranges(isa);
        test_tile_extremes(isa);
        test_panel(isa);
        test_q4_0x8(isa);
        if (!strcmp(isa->name, "avx512")) { /* also the tiles for CPUs without VBMI / BF16 */
            uint64_t after = rng;
            rng = seed; /* the same cases */
            r1_cpu_tune("vbmi", 0);
            CHECK(r1_cpu_select(isa->name) == 0, "select %s", isa->name);
            printf("avx512 without VBMI (same cases):\n");
            test_matmul(isa);
            r1_cpu_tune("vbmi", 1);
            r1_cpu_tune("gfni", 0); /* the VBMI q4_0 tile without GFNI */
            CHECK(r1_cpu_select(isa->name) == 0, "select %s", isa->name);
            printf("avx512 without GFNI:\n");
            test_tile_ranges(isa);
            r1_cpu_tune("gfni", 1);
            CHECK(r1_cpu_select(isa->name) == 0, "select %s", isa->name);
            rng = after;
        }
        printf("== %s: %.1f s\n", isa->name, r1_now() - t_set);
    }
    test_tune();
    r1_cpu_select(NULL);
    return TEST_DONE("test_matmul");
}
