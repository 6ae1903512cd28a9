/*
 * test_kernels.c - conformance of the cpu backend's kernels other than the
 * matmuls (test_matmul.c) against the reference kernels (the embedding is
 * the reference's own on cpu): rms_norm, rope, kv_append, attention (f32, f16 and q8_0 KV caches) and its
 * blocked helpers alone, silu_mul and argmax, odd shapes, 1..3 threads, for
 * every ISA table this CPU can run (paged KV caches: test_kv_paged.c).
 * Prints one line per (ISA, kernel) group with its worst normalized error
 * against a named limit.
 *
 *   R1_TEST_QUICK=1    a small set of shapes (for qemu)
 *   R1_TEST_VERBOSE=1  one line per case
 *
 * Depends only on src/kernels and src/util, so it cross-compiles for aarch64.
 */
#include "kernel_test.h"

#define NMSE_NORM 1e-10
#define NMSE_ROPE 1e-12
#define NMSE_ATTN 1e-9
/* attention over a q8_0 cache against attention over the f32 values it was
 * quantized from (the cache's own error, not the kernel's) */
#define NMSE_KV_Q8 2e-4
/* decode attention split along the context against the same kernel split by
 * heads only: the same products, summed in another order (spans merged by
 * log-sum-exp), so f32 rounding apart */
#define NMSE_ATTN_SPLIT 1e-10
#define MAXERR_ATTN_SPLIT 1e-5

/* silu(g) * u against the expf formula, extremes included */
static void test_silu(const struct r1_cpu_isa *isa) {
    if (!isa->silu_mul) return;
    enum { N = 1000 };
    float g[N], u[N], o[N];
    for (int i = 0; i < N; i++) g[i] = frand() * 40.0f, u[i] = frand() * 4.0f;
    const float ext[] = {0.0f, -0.0f, 88.0f, -88.0f, 89.0f, -89.0f, 104.0f, -104.0f, 1e4f, -1e4f, 1e-30f};
    for (size_t i = 0; i < sizeof ext / sizeof ext[0]; i++) g[i] = ext[i], u[i] = 1.5f;
    isa->silu_mul(g, u, o, N - 3); /* an odd tail */
    double worst = 0;
    int bad = 0;
    for (int i = 0; i < N - 3; i++) {
        float want = g[i] / (1.0f + expf(-g[i])) * u[i];
        double e = fabs((double)o[i] - want) / (fabs(want) + 1e-30);
        if (!(e <= 2e-6) && !(fabs(want) < 1e-30 && fabs(o[i]) < 1e-30)) bad++;
        else if (e > worst && fabs(want) >= 1e-30) worst = e;
    }
    CHECK(bad == 0, "%s silu_mul: %d of %d values off by more than 2e-6 relative", isa->name, bad, N - 3);
    printf("%-8s silu_mul                   %d values, worst relative error %.3g (limit 2e-6)\n", isa->name, N - 3,
           worst);
}

/* ---- the small kernels ---- */
static void test_rms_norm(const struct r1_cpu_isa *isa) {
    struct group g = {isa->name, "rms_norm", NMSE_NORM, 0, "", 0};
    static const int ns[] = {37, 1536};
    for (int i = 0; i < 2; i++)
        for (int T = 1; T <= 17; T += 8) {
            int n = ns[i];
            float *x = frand_buf((size_t)T * n), *wt = frand_buf((size_t)n);
            float *a = malloc((size_t)T * n * 4), *b = malloc((size_t)T * n * 4);
            struct r1_op op = {.kernel = R1_K_RMS_NORM, .T = T, .x = x, .b = wt, .n = n, .eps = 1e-6f, .out = b};
            run(r1_ref_kernels[R1_K_RMS_NORM], &op, 1);
            op.out = a;
            run(r1_backend_cpu.fn[R1_K_RMS_NORM], &op, 1 + (T + i) % 3);
            group_add(&g, nmse(a, b, (size_t)T * n), "n=%d T=%d", n, T);
            free(x), free(wt), free(a), free(b);
        }
    group_print(&g);
}

static void test_rope(const struct r1_cpu_isa *isa) {
    struct group g = {isa->name, "rope_qk", NMSE_ROPE, 0, "", 0};
    const int nh = 4, nkv = 2, hd = 64, nctx = 64, stride = (nh + 2 * nkv) * hd;
    float *cs = frand_buf((size_t)nctx * hd / 2), *sn = frand_buf((size_t)nctx * hd / 2);
    for (int T = 1; T <= 17; T += 8) {
        float *a = frand_buf((size_t)T * stride), *b = malloc((size_t)T * stride * 4);
        memcpy(b, a, (size_t)T * stride * 4);
        struct r1_op op = {.kernel = R1_K_ROPE_QK,
                           .T = T,
                           .pos0 = 7,
                           .n_head = nh,
                           .n_kv_head = nkv,
                           .head_dim = hd,
                           .rope_cos = cs,
                           .rope_sin = sn,
                           .out = b};
        run(r1_ref_kernels[R1_K_ROPE_QK], &op, 1);
        op.out = a;
        run(r1_backend_cpu.fn[R1_K_ROPE_QK], &op, 1 + T % 3);
        group_add(&g, nmse(a, b, (size_t)T * stride), "T=%d", T);
        free(a), free(b);
    }
    free(cs), free(sn);
    group_print(&g);
}

static void test_kv_append(const struct r1_cpu_isa *isa) {
    for (int di = 0; di < 3; di++) {
        enum r1_dtype dt = kv_dtypes[di];
        const int nh = 6, nkv = 2, hd = 128, nctx = 40, stride = (nh + 2 * nkv) * hd;
        size_t bytes = (size_t)2 * nkv * nctx * r1_dtype_row_bytes(dt, hd);
        int bad = 0, cases = 0;
        for (int T = 1; T <= 17; T += 8) {
            struct r1_kv_cache a = kv_new(dt, 2, nkv, nctx, hd), b = a;
            b.k = malloc(bytes), b.v = malloc(bytes);
            memcpy(b.k, a.k, bytes), memcpy(b.v, a.v, bytes);
            float *x = frand_buf((size_t)T * stride);
            x[nh * hd] = 1e-6f;        /* an f16 subnormal */
            x[nh * hd + 1] = 70000.0f; /* f16 overflow */
            struct r1_op op = {.kernel = R1_K_KV_APPEND,
                               .T = T,
                               .pos0 = 5,
                               .x = x,
                               .n_head = nh,
                               .n_kv_head = nkv,
                               .head_dim = hd,
                               .layer = 1,
                               .kv = &b};
            run(r1_ref_kernels[R1_K_KV_APPEND], &op, 1);
            op.kv = &a;
            run(r1_backend_cpu.fn[R1_K_KV_APPEND], &op, 1 + T % 3);
            int same = memcmp(a.k, b.k, bytes) == 0 && memcmp(a.v, b.v, bytes) == 0;
            CHECK(same, "%s kv_append/%s T=%d: cache differs from ref", isa->name, r1_dtype_name(dt), T);
            bad += !same, cases++;
            free(a.k), free(a.v), free(b.k), free(b.v), free(x);
        }
        printf("%-8s kv_append/%-14s %4d cases  %s\n", isa->name, r1_dtype_name(dt), cases,
               bad ? "DIFFERS" : "bit-exact");
    }
}

static void test_attention(const struct r1_cpu_isa *isa) {
    static const int cfg[][4] = {/* n_head, n_kv_head, head_dim, n_ctx */
                                 {12, 2, 128, 96},
                                 {4, 4, 64, 40},
                                 {6, 2, 80, 70},
                                 {28, 4, 128, 300}};
    /* the last two (full run, n_ctx 300 only) span several blocks of cache
     * positions and of query rows */
    static const int pt[][2] = {/* pos0, T */ {0, 1},
                                {37, 1},
                                {0, 17},
                                {5, 3},
                                {20, 17},
                                {0, 64},
                                {250, 1},
                                {70, 130}};
    for (int di = 0; di < 3; di++) {
        enum r1_dtype dt = kv_dtypes[di];
        char what[48];
        snprintf(what, sizeof what, "attention_gqa/%s", r1_dtype_name(dt));
        struct group g = {isa->name, what, NMSE_ATTN, 0, "", 0};
        for (int c = 0; c < (quick ? 2 : 4); c++) {
            int nh = cfg[c][0], nkv = cfg[c][1], hd = cfg[c][2], nctx = cfg[c][3];
            if (r1_dtype_row_bytes(dt, hd) == 0) continue; /* q8_0: head_dim % 32 */
            struct r1_kv_cache kv = kv_new(dt, 2, nkv, nctx, hd);
            for (int i = 0; i < (quick ? 4 : 8); i++) {
                int pos0 = pt[i][0], T = pt[i][1], nth = 1 + (c + i) % 3;
                if (pos0 + T > nctx) continue;
                int stride = (nh + 2 * nkv) * hd;
                float *x = frand_buf((size_t)T * stride), *sc = malloc((size_t)3 * nctx * 4);
                float *a = malloc((size_t)T * nh * hd * 4), *b = malloc((size_t)T * nh * hd * 4);
                struct r1_op op = {.kernel = R1_K_ATTENTION_GQA,
                                   .T = T,
                                   .pos0 = pos0,
                                   .x = x,
                                   .n_head = nh,
                                   .n_kv_head = nkv,
                                   .head_dim = hd,
                                   .layer = 1,
                                   .kv = &kv,
                                   .scratch = sc,
                                   .scratch_stride = (size_t)nctx,
                                   .out = b};
                run(r1_ref_kernels[R1_K_ATTENTION_GQA], &op, 1);
                op.out = a;
                run(r1_backend_cpu.fn[R1_K_ATTENTION_GQA], &op, nth);
                group_add(&g, nmse(a, b, (size_t)T * nh * hd), "h=%d/%d hd=%d pos0=%d T=%d nth=%d", nh, nkv, hd, pos0,
                          T, nth);
                free(x), free(sc), free(a), free(b);
            }
            free(kv.k), free(kv.v);
        }
        group_print(&g);
    }
}

/* Decode attention split along the context (spans of 2048 positions,
 * claimed by the threads, merged by log-sum-exp) against the same kernel
 * split by heads only and against ref: odd context lengths from 1 span to
 * 5, rows that straddle a span's end (a row with nothing in the last span),
 * GQA groups 6 and 7 and none, f32 / f16 / q8_0 caches, 2 and 3 threads
 * running at once. Caches made once for all ISAs. */
static const int split_cfg[][3] = {{12, 2, 128}, {28, 4, 128}, {4, 4, 64}}; /* heads, kv heads, hd */
#define SPLIT_NCTX 9016
static struct r1_kv_cache split_kv[3][3]; /* (dtype, cfg): made once for every ISA */
static void split_kv_free(void) {
    for (int i = 0; i < 3; i++)
        for (int j = 0; j < 3; j++) free(split_kv[i][j].k), free(split_kv[i][j].v);
}

static void test_attention_split(const struct r1_cpu_isa *isa) {
    static const int pt[][2] = {/* pos0, T */ {2047, 1},
                                {2048, 1},
                                {5000, 1},
                                {9000, 1},
                                {2040, 16},
                                {6141, 3}};
    const int nctx = SPLIT_NCTX;
    /* against ref on the first ISA only (ref at depth is slow; the others
     * meet ref through the heads-only kernel, test_attention) */
    static int ref_done;
    const int with_ref = !ref_done;
    ref_done = 1;
    if (!(isa->attn_qk && isa->attn_pv && isa->attn_softmax && isa->f16_to_f32)) {
        printf("%-8s attn split                 none: no blocked attention (one head at a time)\n", isa->name);
        return;
    }
    for (int di = 0; di < 3; di++) {
        enum r1_dtype dt = kv_dtypes[di];
        char ws[48], wr[48];
        snprintf(ws, sizeof ws, "attn split/%s", r1_dtype_name(dt));
        struct group gs = {isa->name, ws, NMSE_ATTN_SPLIT, 0, "", 0};
        snprintf(wr, sizeof wr, "attn split/%s vs ref", r1_dtype_name(dt));
        struct group gr = {isa->name, wr, NMSE_ATTN, 0, "", 0};
        double maxd = 0;
        for (int c = 0; c < (quick ? 1 : 3); c++) {
            int nh = split_cfg[c][0], nkv = split_cfg[c][1], hd = split_cfg[c][2];
            int stride = (nh + 2 * nkv) * hd;
            if (!split_kv[di][c].k) split_kv[di][c] = kv_new(dt, 1, nkv, nctx, hd);
            struct r1_kv_cache kv = split_kv[di][c];
            for (int i = 0; i < (quick ? 3 : 6); i++) {
                int pos0 = pt[i][0], T = pt[i][1], nth = 2 + (c + i) % 2, claim = 0;
                size_t n = (size_t)T * nh * hd;
                /* room for every span's partial results at 2048 positions */
                float *x = frand_buf((size_t)T * stride), *sc = malloc((size_t)nth * 16 * nctx * 4);
                float *a = malloc(n * 4), *b = malloc(n * 4), *r = malloc(n * 4);
                struct r1_op op = {.kernel = R1_K_ATTENTION_GQA,
                                   .T = T,
                                   .pos0 = pos0,
                                   .x = x,
                                   .n_head = nh,
                                   .n_kv_head = nkv,
                                   .head_dim = hd,
                                   .kv = &kv,
                                   .scratch = sc,
                                   .scratch_stride = (size_t)16 * nctx,
                                   .out = r,
                                   .claim = &claim};
                if (with_ref) run(r1_ref_kernels[R1_K_ATTENTION_GQA], &op, 1);
                r1_cpu_tune("attn_split", 0);
                op.out = b;
                run_threads(r1_backend_cpu.fn[R1_K_ATTENTION_GQA], &op, nth);
                r1_cpu_tune("attn_split", 1);
                op.out = a, claim = 0;
                run_threads(r1_backend_cpu.fn[R1_K_ATTENTION_GQA], &op, nth);
                /* every unit claimed and completed: the split ran (or, at
                 * one span, nothing was claimed) */
                int spans = (pos0 + T + 2047) / 2048;
                CHECK(spans == 1 || claim >> 16 == spans * nkv, "%s %s: %d units completed, want %d", isa->name,
                      gs.what, claim >> 16, spans * nkv);
                for (size_t j = 0; j < n; j++)
                    if (fabs((double)a[j] - b[j]) > maxd) maxd = fabs((double)a[j] - b[j]);
                group_add(&gs, nmse(a, b, n), "h=%d/%d pos0=%d T=%d nth=%d", nh, nkv, pos0, T, nth);
                if (with_ref) group_add(&gr, nmse(a, r, n), "h=%d/%d pos0=%d T=%d nth=%d", nh, nkv, pos0, T, nth);
                free(x), free(sc), free(a), free(b), free(r);
            }
        }
        r1_cpu_tune_reset();
        group_print(&gs);
        if (with_ref) group_print(&gr);
        CHECK(maxd <= MAXERR_ATTN_SPLIT, "%s attn split/%s: max |split - heads| %.3g > %.0e", isa->name,
              r1_dtype_name(dt), maxd, MAXERR_ATTN_SPLIT);
        printf("%-8s attn split/%-14s max |split - heads only| %.3g (limit %.0e)\n", isa->name, r1_dtype_name(dt), maxd,
               MAXERR_ATTN_SPLIT);
    }
}

/* A q8_0 cache: the ISA's converter gives the reference's values bit for
 * bit, and attention over the cache is within NMSE_KV_Q8 of attention over
 * the f32 values it holds quantized (the 1.5B's shape: 12 heads on 2). */
static void test_attention_q8(const struct r1_cpu_isa *isa) {
    const int nh = 12, nkv = 2, hd = 128, nctx = 200, stride = (nh + 2 * nkv) * hd;
    const size_t rows = (size_t)2 * nkv * nctx, rb = r1_dtype_row_bytes(R1_DTYPE_Q8_0, hd);
    int same = 1;
    if (isa->q8_0_to_f32) {
        struct r1_kv_cache q = kv_new(R1_DTYPE_Q8_0, 1, 2, 64, hd);
        float *a = malloc((size_t)2 * 64 * hd * 4), *b = malloc((size_t)2 * 64 * hd * 4);
        isa->q8_0_to_f32(q.k, a, 2 * 64 * hd);
        r1_dtype_traits[R1_DTYPE_Q8_0].to_f32(q.k, b, 2 * 64 * hd);
        same = !memcmp(a, b, (size_t)2 * 64 * hd * 4);
        CHECK(same, "%s q8_0_to_f32 differs from the reference's values", isa->name);
        free(a), free(b), free(q.k), free(q.v);
    }
    struct r1_kv_cache f = kv_new(R1_DTYPE_F32, 2, nkv, nctx, hd);
    struct r1_kv_cache q = {R1_DTYPE_Q8_0, 2, nkv, nctx, hd, malloc(rows * rb), malloc(rows * rb), NULL};
    for (size_t r = 0; r < rows; r++) {
        r1_dtype_traits[R1_DTYPE_Q8_0].from_f32((float *)f.k + r * hd, (uint8_t *)q.k + r * rb, hd);
        r1_dtype_traits[R1_DTYPE_Q8_0].from_f32((float *)f.v + r * hd, (uint8_t *)q.v + r * rb, hd);
    }
    struct group g = {isa->name, "attention q8_0 vs f32", NMSE_KV_Q8, 0, "", 0};
    static const int pt[][2] = {{199, 1}, {0, 40}, {150, 50}};
    for (int i = 0; i < 3; i++) {
        int pos0 = pt[i][0], T = pt[i][1];
        float *x = frand_buf((size_t)T * stride), *sc = malloc((size_t)2 * nctx * 4);
        float *a = malloc((size_t)T * nh * hd * 4), *b = malloc((size_t)T * nh * hd * 4);
        struct r1_op op = {.kernel = R1_K_ATTENTION_GQA,
                           .T = T,
                           .pos0 = pos0,
                           .x = x,
                           .n_head = nh,
                           .n_kv_head = nkv,
                           .head_dim = hd,
                           .layer = 1,
                           .kv = &f,
                           .scratch = sc,
                           .scratch_stride = (size_t)nctx,
                           .out = b};
        run(r1_ref_kernels[R1_K_ATTENTION_GQA], &op, 1);
        op.out = a, op.kv = &q;
        run(r1_backend_cpu.fn[R1_K_ATTENTION_GQA], &op, 2);
        group_add(&g, nmse(a, b, (size_t)T * nh * hd), "pos0=%d T=%d", pos0, T);
        free(x), free(sc), free(a), free(b);
    }
    group_print(&g);
    printf("%-8s %-24s %s\n", isa->name, "q8_0_to_f32",
           !isa->q8_0_to_f32 ? "(plain C)"
           : same            ? "bit-exact"
                             : "DIFFERS");
    free(f.k), free(f.v), free(q.k), free(q.v);
}

/* The blocked attention's helpers alone, against plain C in double: every
 * query count M from 1 to 13 (the AVX2 forms take rows 6 at a time and the
 * rest by a switch), P odd for the f16 forms, hd 16 and 128. Rows past M
 * rounded up to 4 must stay untouched (the helpers may compute the rows up
 * to that, no further). The q8_0 forms take hd 32 and 256. */
static void test_attn_blocks(const struct r1_cpu_isa *isa) {
    if (!isa->attn_qk || !isa->attn_pv) return;
    enum { SS = 72, MMAX = 16 };
    static const int hds[] = {16, 128}, Ps[] = {1, 3, 6, 64};
    static const char *const form_name[] = {"", "_f16", "_q8"};
    for (int form = 0; form < 3; form++) { /* f32, f16, q8_0 cache rows */
        const int f16 = form == 1, q8 = form == 2;
        if (f16 && (!isa->attn_qk_f16 || !isa->attn_pv_f16)) continue;
        if (q8 && (!isa->attn_qk_q8 || !isa->attn_pv_q8)) continue;
        char wq[48], wv[48];
        snprintf(wq, sizeof wq, "attn_qk%s (M 1-13)", form_name[form]);
        snprintf(wv, sizeof wv, "attn_pv%s (M 1-13)", form_name[form]);
        struct group gq = {isa->name, wq, NMSE_ATTN, 0, "", 0};
        struct group gv = {isa->name, wv, NMSE_ATTN, 0, "", 0};
        int untouched = 1, alone_same = 1;
        float *o_alone = malloc((size_t)MMAX * 4 * 256 * 4); /* 4 rows per query, hd <= 256 */
        for (int hi = 0; hi < 2; hi++)
            for (int pi = 0; pi < 4; pi++)
                for (int M = 1; M <= 13; M++) {
                    const int hd = q8 ? 2 * hds[hi] : hds[hi]; /* q8_0: hd % 32 == 0 */
                    const int P = f16 || q8 ? Ps[pi] : (Ps[pi] + 3) & ~3, M4 = (M + 3) & ~3;
                    float *q = frand_buf((size_t)MMAX * hd), *kf = frand_buf((size_t)P * hd);
                    float *vf = frand_buf((size_t)P * hd), *o = frand_buf((size_t)MMAX * hd);
                    float *o0 = malloc((size_t)MMAX * hd * 4), *s = malloc((size_t)MMAX * SS * 4);
                    uint16_t *kh = malloc((size_t)P * hd * 2), *vh = malloc((size_t)P * hd * 2);
                    for (int i = 0; i < P * hd; i++) { /* the values an f16 cache holds */
                        kh[i] = r1_f32_to_f16(kf[i]), kf[i] = r1_f16_to_f32(kh[i]);
                        vh[i] = r1_f32_to_f16(vf[i]), vf[i] = r1_f16_to_f32(vh[i]);
                    }
                    const size_t rb = (size_t)hd / 32 * 34; /* a q8_0 row */
                    uint8_t *kq = malloc((size_t)P * rb), *vq = malloc((size_t)P * rb);
                    if (q8) /* the values a q8_0 cache holds */
                        for (int p = 0; p < P; p++) {
                            const struct r1_dtype_traits *tr = &r1_dtype_traits[R1_DTYPE_Q8_0];
                            tr->from_f32(kf + (size_t)p * hd, kq + p * rb, hd);
                            tr->to_f32(kq + p * rb, kf + (size_t)p * hd, hd);
                            tr->from_f32(vf + (size_t)p * hd, vq + p * rb, hd);
                            tr->to_f32(vq + p * rb, vf + (size_t)p * hd, hd);
                        }
                    memset(q + (size_t)M * hd, 0, (size_t)(MMAX - M) * hd * 4);
                    for (int i = 0; i < MMAX * SS; i++) s[i] = 1e30f; /* sentinel */
                    if (q8) isa->attn_qk_q8(q, M, kq, P, hd, s, SS);
                    else if (f16) isa->attn_qk_f16(q, M, kh, P, hd, s, SS);
                    else isa->attn_qk(q, M, kf, P, hd, s, SS);
                    double e = 0, n = 0;
                    for (int m = 0; m < M; m++)
                        for (int p = 0; p < P; p++) {
                            double want = 0;
                            for (int d = 0; d < hd; d++) want += (double)q[m * hd + d] * kf[p * hd + d];
                            double got = s[m * SS + p];
                            e += (got - want) * (got - want), n += want * want;
                        }
                    for (int i = M4 * SS; i < MMAX * SS; i++) untouched &= s[i] == 1e30f;
                    group_add(&gq, n > 0 ? e / n : e, "M=%d P=%d hd=%d", M, P, hd);
                    /* a query's scores are the bits it gets alone (a decode row's
                     * attention must not depend on what shares its call) */
                    for (int m = 0; m < M && M > 1; m++) {
                        float s1[4 * SS];
                        if (q8) isa->attn_qk_q8(q + (size_t)m * hd, 1, kq, P, hd, s1, SS);
                        else if (f16) isa->attn_qk_f16(q + (size_t)m * hd, 1, kh, P, hd, s1, SS);
                        else isa->attn_qk(q + (size_t)m * hd, 1, kf, P, hd, s1, SS);
                        alone_same &= !memcmp(s1, s + (size_t)m * SS, (size_t)P * 4);
                    }
                    /* weights: row m's scores, zero past M as the caller leaves them */
                    for (int m = 0; m < MMAX; m++)
                        for (int p = 0; p < SS; p++) s[m * SS + p] = m < M && p < P ? frand() : 0.0f;
                    memcpy(o0, o, (size_t)MMAX * hd * 4);
                    for (int m = 0; m < M && M > 1; m++) { /* each query alone first */
                        float *o1 = o_alone + (size_t)m * hd * 4;
                        memcpy(o1, o0 + (size_t)m * hd, (size_t)hd * 4);
                        if (q8) isa->attn_pv_q8(s + (size_t)m * SS, SS, 1, vq, P, hd, o1);
                        else if (f16) isa->attn_pv_f16(s + (size_t)m * SS, SS, 1, vh, P, hd, o1);
                        else isa->attn_pv(s + (size_t)m * SS, SS, 1, vf, P, hd, o1);
                    }
                    if (q8) isa->attn_pv_q8(s, SS, M, vq, P, hd, o);
                    else if (f16) isa->attn_pv_f16(s, SS, M, vh, P, hd, o);
                    else isa->attn_pv(s, SS, M, vf, P, hd, o);
                    e = 0, n = 0;
                    for (int m = 0; m < M; m++)
                        for (int d = 0; d < hd; d++) {
                            double want = o0[m * hd + d];
                            for (int p = 0; p < P; p++) want += (double)s[m * SS + p] * vf[p * hd + d];
                            double got = o[m * hd + d];
                            e += (got - want) * (got - want), n += want * want;
                        }
                    untouched &= !memcmp(o + (size_t)M4 * hd, o0 + (size_t)M4 * hd, (size_t)(MMAX - M4) * hd * 4);
                    for (int m = 0; m < M && M > 1; m++)
                        alone_same &= !memcmp(o_alone + (size_t)m * hd * 4, o + (size_t)m * hd, (size_t)hd * 4);
                    group_add(&gv, n > 0 ? e / n : e, "M=%d P=%d hd=%d", M, P, hd);
                    free(q), free(kf), free(vf), free(o), free(o0), free(s), free(kh), free(vh);
                    free(kq), free(vq);
                }
        CHECK(untouched, "%s attn_qk/attn_pv%s wrote rows past M rounded up to 4", isa->name, form_name[form]);
        CHECK(alone_same, "%s attn_qk/attn_pv%s: a query's bits depend on the queries beside it", isa->name,
              form_name[form]);
        free(o_alone);
        group_print(&gq);
        group_print(&gv);
    }
}

static void test_argmax(const struct r1_cpu_isa *isa) {
    static const int ns[] = {1, 1000, 151936};
    int cases = 0, bad = 0;
    for (int i = 0; i < 3; i++)
        for (int ties = 0; ties < 2; ties++) {
            int n = ns[i];
            float *x = frand_buf((size_t)n);
            if (ties && n > 10) x[n / 3] = x[n - 2] = x[n / 2] = 100.0f;
            int32_t a = -1, b = -2;
            struct r1_op op = {.kernel = R1_K_ARGMAX, .x = x, .n = n, .out_id = &b};
            run(r1_ref_kernels[R1_K_ARGMAX], &op, 1);
            op.out_id = &a;
            run(r1_backend_cpu.fn[R1_K_ARGMAX], &op, 1 + i % 3);
            CHECK(a == b, "%s argmax n=%d ties=%d: %d, ref %d", isa->name, n, ties, a, b);
            bad += a != b, cases++;
            free(x);
        }
    printf("%-8s %-24s %4d cases  %s\n", isa->name, "argmax", cases, bad ? "DIFFERS" : "exact");
}

int main(void) {
    if (kt_start()) return 1;
    for (int i = 0; r1_cpu_isas[i]; i++) {
        const struct r1_cpu_isa *isa = r1_cpu_isas[i];
        if (!kt_select(isa)) continue;
        test_silu(isa);
        test_rms_norm(isa);
        test_rope(isa);
        test_kv_append(isa);
        test_attention(isa);
        test_attention_q8(isa);
        test_attention_split(isa);
        test_attn_blocks(isa);
        test_argmax(isa);
    }
    split_kv_free();
    r1_cpu_select(NULL);
    return TEST_DONE("test_kernels");
}
