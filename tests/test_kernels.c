/*
 * test_kernels.c - conformance of the cpu backend's kernels other than the
 * matmuls (test_matmul.c) against the reference kernels: embedding,
 * rms_norm, rope, kv_append, attention (f32, f16 and q8_0 KV caches) and its
 * blocked helpers alone, silu_mul and argmax, odd shapes, 1..3 threads, for
 * every ISA table this CPU can run; and paged KV caches against contiguous
 * ones, bit for bit (ref and cpu).
 * Prints one line per (ISA, kernel) group with its worst normalized error
 * against a named limit.
 *
 *   R1_TEST_QUICK=1    a small set of shapes (for qemu)
 *   R1_TEST_VERBOSE=1  one line per case
 *
 * Depends only on src/kernels and src/util, so it cross-compiles for aarch64.
 */
#include <pthread.h>

#include "kernel_test.h"

#define NMSE_NORM 1e-10
#define NMSE_ROPE 1e-12
#define NMSE_ATTN 1e-9
#define NMSE_EMBED 0.0 /* same conversion: exact */
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
static void test_embedding(const struct r1_cpu_isa *isa) {
    for (size_t di = 0; di < sizeof dtypes / sizeof dtypes[0]; di++) {
        enum r1_dtype dt = dtypes[di];
        if (96 % r1_dtype_traits[dt].block) continue; /* K-quants: embedding is ref's code */
        char what[48];
        snprintf(what, sizeof what, "embedding/%s", r1_dtype_name(dt));
        struct group g = {isa->name, what, NMSE_EMBED, 0, "", 0};
        struct mat w = mat_new(dt, 50, 96);
        for (int T = 1; T <= 17; T += 8) {
            int32_t ids[17];
            for (int t = 0; t < T; t++) ids[t] = (int32_t)((unsigned)(frand() * 1000 + 5000) % 50);
            float *a = malloc((size_t)T * 96 * 4), *b = malloc((size_t)T * 96 * 4);
            struct r1_op op = {.kernel = R1_K_EMBEDDING, .T = T, .w = &w.m, .ids = ids, .out = b};
            run(r1_ref_kernels[R1_K_EMBEDDING], &op, 1);
            op.out = a;
            run(r1_backend_cpu.fn[R1_K_EMBEDDING], &op, 1 + T % 3);
            group_add(&g, nmse(a, b, (size_t)T * 96), "T=%d", T);
            free(a);
            free(b);
        }
        free(w.buf);
        group_print(&g);
    }
}

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

static const enum r1_dtype kv_dtypes[] = {R1_DTYPE_F32, R1_DTYPE_F16, R1_DTYPE_Q8_0};

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

/* fn on nth threads at once (the split's units are claimed concurrently). */
struct th_arg {
    r1_kernel_fn fn;
    const struct r1_op *op;
    int ith, nth;
};
static void *th_main(void *p) {
    struct th_arg *a = p;
    a->fn(a->op, a->ith, a->nth);
    return NULL;
}
static void run_threads(r1_kernel_fn fn, const struct r1_op *op, int nth) {
    pthread_t th[4];
    struct th_arg a[4];
    for (int i = 0; i < nth; i++) a[i] = (struct th_arg){fn, op, i, nth};
    for (int i = 1; i < nth; i++) CHECK(pthread_create(&th[i], NULL, th_main, &a[i]) == 0, "thread");
    th_main(&a[0]);
    for (int i = 1; i < nth; i++) pthread_join(th[i], NULL);
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

/* ---- paged KV caches ----
 * A paged cache is one sequence's view of a pool shared by several: its
 * position p lies in row pages[p / R1_KV_PAGE] * R1_KV_PAGE + p % R1_KV_PAGE
 * of each (layer, kv head) stripe of the pool. Over a pool whose page table
 * is a scrambled permutation the kernels must give the same bits as over a
 * contiguous cache holding the same rows (the same values read in the same
 * order, only from elsewhere), put each appended row where the table says
 * and touch no other row of the pool. */

/* A fixed-seed shuffle of 0..n-1. */
static void paged_perm(int32_t *perm, int n, uint64_t seed) {
    for (int i = 0; i < n; i++) perm[i] = i;
    for (int i = n - 1; i > 0; i--) {
        seed = seed * 6364136223846793005ull + 1442695040888963407ull;
        int j = (int)((seed >> 33) % (uint64_t)(i + 1));
        int32_t t = perm[i];
        perm[i] = perm[j], perm[j] = t;
    }
}

/* The pool row of position p of (layer, h) in the paged view kv, worked out
 * here (not by r1_kv_row, which the kernels use). */
static size_t paged_row(const struct r1_kv_cache *kv, int layer, int h, int p) {
    return ((size_t)layer * kv->n_kv_head + h) * (size_t)kv->n_ctx + (size_t)kv->pages[p / R1_KV_PAGE] * R1_KV_PAGE +
           (size_t)(p % R1_KV_PAGE);
}

/* a against b (n floats) bit for bit: 0, else the largest |a - b|
 * (INFINITY where the bits differ without a numeric difference: NaN, -0). */
static double paged_diff(const float *a, const float *b, size_t n) {
    if (!memcmp(a, b, n * sizeof(float))) return 0;
    double m = 0;
    for (size_t i = 0; i < n; i++) {
        double d = fabs((double)a[i] - b[i]);
        if (d != d) d = INFINITY;
        if (d > m) m = d;
    }
    return m > 0 ? m : INFINITY;
}

/* One case of a bit-exact group (paged a against contiguous b): g->worst
 * is the largest |a - b| seen. */
static void paged_add(struct group *g, const float *a, const float *b, size_t n, const char *fmt, ...)
    __attribute__((format(printf, 5, 6)));
static void paged_add(struct group *g, const float *a, const float *b, size_t n, const char *fmt, ...) {
    char c[96];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(c, sizeof c, fmt, ap);
    va_end(ap);
    double d = paged_diff(a, b, n);
    g->cases++;
    CHECK(d == 0, "%s %s %s: paged differs from contiguous, max |diff| %.3g", g->isa, g->what, c, d);
    if (verbose) printf("  %-8s %-22s %-40s max |diff| %.3g\n", g->isa, g->what, c, d);
    if (d > g->worst || g->cases == 1) {
        g->worst = d;
        snprintf(g->worst_case, sizeof g->worst_case, "%s", c);
    }
}

/* The rows of a pool (every layer and kv head) after appends through the
 * views v[0..nv) (one pool, disjoint page tables): position p < len[s] of
 * (layer, h) is contiguous cache c[s]'s row p, K and V, and every other row
 * is as the pool was before (snap_k, snap_v). Returns the rows that are not. */
static int paged_placed(const struct r1_kv_cache *v, int nv, const struct r1_kv_cache *c, const int *len, int layer,
                        const uint8_t *snap_k, const uint8_t *snap_v, const char *who, const char *what) {
    const size_t rb = r1_dtype_row_bytes(v->dtype, v->head_dim);
    const size_t rows = (size_t)v->n_layer * v->n_kv_head * v->n_ctx;
    const uint8_t *pk = v->k, *pv = v->v;
    char *owned = calloc(rows, 1);
    int bad = 0;
    for (int s = 0; s < nv; s++)
        for (int h = 0; h < v->n_kv_head; h++)
            for (int p = 0; p < len[s]; p++) {
                size_t r = paged_row(&v[s], layer, h, p);
                size_t rc = ((size_t)layer * c[s].n_kv_head + h) * (size_t)c[s].n_ctx + (size_t)p;
                int ok = r == r1_kv_row(&v[s], layer, h, p) && !owned[r] &&
                         !memcmp(pk + r * rb, (const uint8_t *)c[s].k + rc * rb, rb) &&
                         !memcmp(pv + r * rb, (const uint8_t *)c[s].v + rc * rb, rb);
                if (!ok && !bad++)
                    CHECK(0, "%s %s: sequence %d position %d (layer %d, kv head %d) not in pool row %zu", who, what, s,
                          p, layer, h, r);
                owned[r] = 1;
            }
    for (size_t r = 0; r < rows; r++)
        if (!owned[r] && (memcmp(pk + r * rb, snap_k + r * rb, rb) || memcmp(pv + r * rb, snap_v + r * rb, rb)))
            if (!bad++) CHECK(0, "%s %s: pool row %zu written, no sequence's position lies there", who, what, r);
    CHECK(bad == 0, "%s %s: %d pool rows misplaced", who, what, bad);
    free(owned);
    return bad;
}

static void paged_print(const struct group *g, const char *placed) {
    if (g->worst == 0) printf("%-8s %-24s %4d cases  bit-exact%s\n", g->isa, g->what, g->cases, placed);
    else
        printf("%-8s %-24s %4d cases  DIFFERS: max |paged - contiguous| %.3g at %s%s\n", g->isa, g->what, g->cases,
               g->worst, g->worst_case, placed);
}

/* 1. (pos0, T) chunks appended then attended in turn, into a contiguous
 * cache and a pool of 8 blocks of which the sequence's 5 are scrambled: the
 * cache fills to 1, 63, 64, 65, 135, ... 300 positions; decode rows, prompt
 * chunks of 17 and 64+, chunks across a block's end. */
static void paged_append_attn(const struct r1_cpu_isa *isa, int with_ref) {
    enum { NH = 4, NKV = 2, HD = 32, NL = 2, LAYER = 1, NCTX = 300, NBLK = 8, PROWS = NBLK * R1_KV_PAGE };
    static const int chunks[][2] = {/* pos0, T */ {0, 1},
                                    {1, 62},
                                    {63, 1},
                                    {64, 1},
                                    {65, 70},
                                    {135, 17},
                                    {152, 48},
                                    {200, 1},
                                    {201, 65},
                                    {266, 33},
                                    {299, 1}};
    const int nchunk = quick ? 6 : 11, stride = (NH + 2 * NKV) * HD,
              len = chunks[nchunk - 1][0] + chunks[nchunk - 1][1];
    int32_t pages[NBLK];
    paged_perm(pages, NBLK, 1);
    int descents = 0;
    for (int i = 0; i + 1 < (len + R1_KV_PAGE - 1) / R1_KV_PAGE; i++) descents += pages[i] > pages[i + 1];
    CHECK(descents > 0, "paged test: page table %d %d %d ... is monotonic", pages[0], pages[1], pages[2]);
    for (int set = with_ref ? 0 : 1; set < 2; set++) {
        const r1_kernel_fn append = set ? r1_backend_cpu.fn[R1_K_KV_APPEND] : r1_ref_kernels[R1_K_KV_APPEND];
        const r1_kernel_fn attn = set ? r1_backend_cpu.fn[R1_K_ATTENTION_GQA] : r1_ref_kernels[R1_K_ATTENTION_GQA];
        const char *who = set ? isa->name : "ref";
        for (int di = 0; di < 3; di++) {
            const enum r1_dtype dt = kv_dtypes[di];
            const size_t pbytes = (size_t)NL * NKV * PROWS * r1_dtype_row_bytes(dt, HD);
            char what[48];
            snprintf(what, sizeof what, "paged attn/%s", r1_dtype_name(dt));
            struct group g = {who, what, 0, 0, "", 0};
            struct r1_kv_cache c = kv_new(dt, NL, NKV, NCTX, HD), pool = kv_new(dt, NL, NKV, PROWS, HD);
            pool.pages = pages;
            uint8_t *snap_k = malloc(pbytes), *snap_v = malloc(pbytes);
            memcpy(snap_k, pool.k, pbytes), memcpy(snap_v, pool.v, pbytes);
            float *sc = malloc((size_t)3 * PROWS * sizeof(float));
            for (int i = 0; i < nchunk; i++) {
                const int pos0 = chunks[i][0], T = chunks[i][1], nth = 1 + (i + di + set) % 3;
                const size_t n = (size_t)T * NH * HD;
                float *x = frand_buf((size_t)T * stride), *a = malloc(n * 4), *b = malloc(n * 4);
                struct r1_op op = {.kernel = R1_K_KV_APPEND,
                                   .T = T,
                                   .pos0 = pos0,
                                   .x = x,
                                   .n_head = NH,
                                   .n_kv_head = NKV,
                                   .head_dim = HD,
                                   .layer = LAYER,
                                   .kv = &c,
                                   .scratch = sc,
                                   .scratch_stride = PROWS,
                                   .out = b};
                run(append, &op, nth);
                op.kernel = R1_K_ATTENTION_GQA;
                run(attn, &op, nth);
                op.kernel = R1_K_KV_APPEND, op.kv = &pool;
                run(append, &op, nth);
                op.kernel = R1_K_ATTENTION_GQA, op.out = a;
                run(attn, &op, nth);
                paged_add(&g, a, b, n, "pos0=%d T=%d nth=%d", pos0, T, nth);
                free(x), free(a), free(b);
            }
            int bad = paged_placed(&pool, 1, &c, &len, LAYER, snap_k, snap_v, who, what);
            paged_print(&g, bad ? "; rows MISPLACED" : "; rows in place");
            free(c.k), free(c.v), free(pool.k), free(pool.v), free(snap_k), free(snap_v), free(sc);
        }
    }
}

/* 2. Decode at depth split along the context (cpu_attn.c's flash-decoding
 * split: claimed units, spans of 2048 positions) over a pool of 88 blocks
 * holding a sequence of up to 5000 positions in 79 scrambled ones, against
 * the contiguous cache: the rows of the step appended to both first, 2 and
 * 3 threads running at once. Caches made once for every ISA. */
enum { PS_NH = 4, PS_NKV = 2, PS_HD = 32, PS_NCTX = 5000, PS_NBLK = 88, PS_PROWS = PS_NBLK * R1_KV_PAGE };
static struct r1_kv_cache ps_c[3], ps_pool[3]; /* by dtype */
static int32_t ps_pages[PS_NBLK];
static void paged_split_free(void) {
    for (int i = 0; i < 3; i++) free(ps_c[i].k), free(ps_c[i].v), free(ps_pool[i].k), free(ps_pool[i].v);
}

static void paged_split(const struct r1_cpu_isa *isa) {
    static const int pt[][2] = {/* pos0, T */ {4100, 1}, {4094, 3}, {2048, 1}, {4997, 3}};
    const int stride = (PS_NH + 2 * PS_NKV) * PS_HD;
    const int blocked = isa->attn_qk && isa->attn_pv && isa->attn_softmax && isa->f16_to_f32;
    if (!ps_c[0].k) paged_perm(ps_pages, PS_NBLK, 2);
    for (int di = 0; di < 3; di++) {
        const enum r1_dtype dt = kv_dtypes[di];
        const size_t rb = r1_dtype_row_bytes(dt, PS_HD);
        if (!ps_c[di].k) { /* the pool holds the contiguous cache's rows where its pages say */
            ps_c[di] = kv_new(dt, 1, PS_NKV, PS_NCTX, PS_HD);
            ps_pool[di] = kv_new(dt, 1, PS_NKV, PS_PROWS, PS_HD);
            ps_pool[di].pages = ps_pages;
            for (int h = 0; h < PS_NKV; h++)
                for (int p = 0; p < PS_NCTX; p++) {
                    size_t r = paged_row(&ps_pool[di], 0, h, p), rc = (size_t)h * PS_NCTX + p;
                    memcpy((uint8_t *)ps_pool[di].k + r * rb, (uint8_t *)ps_c[di].k + rc * rb, rb);
                    memcpy((uint8_t *)ps_pool[di].v + r * rb, (uint8_t *)ps_c[di].v + rc * rb, rb);
                }
        }
        char what[48];
        snprintf(what, sizeof what, "paged split/%s", r1_dtype_name(dt));
        struct group g = {isa->name, what, 0, 0, "", 0};
        r1_cpu_tune("attn_split", 1);
        for (int i = 0; i < (quick ? 1 : 4); i++) { /* quick: under qemu + ASan too */
            const int pos0 = pt[i][0], T = pt[i][1], nth = 2 + (i + di) % 2, spans = (pos0 + T + 2047) / 2048;
            const size_t n = (size_t)T * PS_NH * PS_HD;
            int claim = 0;
            float *x = frand_buf((size_t)T * stride), *sc = malloc((size_t)nth * PS_PROWS * sizeof(float));
            float *a = malloc(n * 4), *b = malloc(n * 4);
            struct r1_op op = {.kernel = R1_K_KV_APPEND,
                               .T = T,
                               .pos0 = pos0,
                               .x = x,
                               .n_head = PS_NH,
                               .n_kv_head = PS_NKV,
                               .head_dim = PS_HD,
                               .kv = &ps_c[di],
                               .scratch = sc,
                               .scratch_stride = PS_PROWS,
                               .out = b,
                               .claim = &claim};
            run_threads(r1_backend_cpu.fn[R1_K_KV_APPEND], &op, nth);
            op.kv = &ps_pool[di];
            run_threads(r1_backend_cpu.fn[R1_K_KV_APPEND], &op, nth);
            op.kernel = R1_K_ATTENTION_GQA, op.kv = &ps_c[di], claim = 0;
            run_threads(r1_backend_cpu.fn[R1_K_ATTENTION_GQA], &op, nth);
            /* every unit claimed and completed: the split ran */
            CHECK(!blocked || claim >> 16 == spans * PS_NKV, "%s %s contiguous: %d units completed, want %d", isa->name,
                  what, claim >> 16, spans * PS_NKV);
            op.kv = &ps_pool[di], op.out = a, claim = 0;
            run_threads(r1_backend_cpu.fn[R1_K_ATTENTION_GQA], &op, nth);
            CHECK(!blocked || claim >> 16 == spans * PS_NKV, "%s %s paged: %d units completed, want %d", isa->name,
                  what, claim >> 16, spans * PS_NKV);
            paged_add(&g, a, b, n, "pos0=%d T=%d nth=%d", pos0, T, nth);
            free(x), free(sc), free(a), free(b);
        }
        r1_cpu_tune_reset();
        paged_print(&g, blocked ? "" : " (one head at a time: no split)");
    }
}

/* 3. Rows of three sequences in one op (op->seq, op->pos; op->kv their
 * paged views of one pool, disjoint scrambled page tables) against each
 * sequence alone on a contiguous cache of its own: a prompt chunk beside
 * decode rows, the sequences out of order in the batch, then decode steps;
 * kv_append and attention both batched. */
static void paged_batch(const struct r1_cpu_isa *isa, int with_ref) {
    enum { NH = 4, NKV = 2, HD = 32, NL = 2, LAYER = 1, NCTX = 256, NBLK = 16, PROWS = NBLK * R1_KV_PAGE, NS = 3 };
    static const int hist[NS] = {120, 63, 1}; /* positions each sequence holds before the steps */
    static const int steps[][NS][2] = {       /* (sequence, T) in row order; T 0: not in this step */
                                       {{1, 1}, {0, 17}, {2, 3}},
                                       {{2, 1}, {0, 1}, {1, 1}},
                                       {{0, 65}, {1, 1}, {2, 0}}};
    const int nstep = quick ? 2 : 3, stride = (NH + 2 * NKV) * HD;
    int32_t perm[NBLK];
    paged_perm(perm, NBLK, 3);
    for (int set = with_ref ? 0 : 1; set < 2; set++) {
        const r1_kernel_fn append = set ? r1_backend_cpu.fn[R1_K_KV_APPEND] : r1_ref_kernels[R1_K_KV_APPEND];
        const r1_kernel_fn attn = set ? r1_backend_cpu.fn[R1_K_ATTENTION_GQA] : r1_ref_kernels[R1_K_ATTENTION_GQA];
        const char *who = set ? isa->name : "ref";
        for (int di = 0; di < 3; di++) {
            const enum r1_dtype dt = kv_dtypes[di];
            const size_t pbytes = (size_t)NL * NKV * PROWS * r1_dtype_row_bytes(dt, HD);
            char what[48];
            snprintf(what, sizeof what, "paged batch/%s", r1_dtype_name(dt));
            struct group g = {who, what, 0, 0, "", 0};
            struct r1_kv_cache c[NS], v[NS], pool = kv_new(dt, NL, NKV, PROWS, HD);
            uint8_t *snap_k = malloc(pbytes), *snap_v = malloc(pbytes);
            memcpy(snap_k, pool.k, pbytes), memcpy(snap_v, pool.v, pbytes);
            float *sc = malloc((size_t)3 * PROWS * sizeof(float));
            int len[NS];
            for (int s = 0; s < NS; s++) { /* each sequence's history, appended alone */
                c[s] = kv_new(dt, NL, NKV, NCTX, HD);
                v[s] = pool, v[s].pages = perm + s * (NBLK / NS);
                len[s] = hist[s];
                float *x = frand_buf((size_t)len[s] * stride);
                struct r1_op op = {.kernel = R1_K_KV_APPEND,
                                   .T = len[s],
                                   .x = x,
                                   .n_head = NH,
                                   .n_kv_head = NKV,
                                   .head_dim = HD,
                                   .layer = LAYER,
                                   .kv = &c[s]};
                run(append, &op, 1 + s % 3);
                op.kv = &v[s];
                run(append, &op, 1 + s % 3);
                free(x);
            }
            for (int st = 0; st < nstep; st++) {
                int T = 0, nth = 1 + (st + di + set) % 3;
                int32_t seq[128], pos[128];
                for (int j = 0; j < NS; j++)
                    for (int t = 0; t < steps[st][j][1]; t++, T++)
                        seq[T] = steps[st][j][0], pos[T] = len[steps[st][j][0]] + t;
                const size_t n = (size_t)T * NH * HD;
                float *x = frand_buf((size_t)T * stride), *a = malloc(n * 4), *b = malloc(n * 4);
                struct r1_op op = {.kernel = R1_K_KV_APPEND,
                                   .T = T,
                                   .seq = seq,
                                   .pos = pos,
                                   .x = x,
                                   .n_head = NH,
                                   .n_kv_head = NKV,
                                   .head_dim = HD,
                                   .layer = LAYER,
                                   .kv = v,
                                   .scratch = sc,
                                   .scratch_stride = PROWS,
                                   .out = a};
                run(append, &op, nth);
                op.kernel = R1_K_ATTENTION_GQA;
                run(attn, &op, nth);
                for (int j = 0, t0 = 0; j < NS; t0 += steps[st][j][1], j++) { /* each sequence alone */
                    const int s = steps[st][j][0], Ts = steps[st][j][1];
                    if (!Ts) continue;
                    struct r1_op one = op;
                    one.kernel = R1_K_KV_APPEND, one.T = Ts, one.pos0 = len[s], one.seq = NULL, one.pos = NULL;
                    one.x = x + (size_t)t0 * stride, one.kv = &c[s], one.out = b + (size_t)t0 * NH * HD;
                    run(append, &one, nth);
                    one.kernel = R1_K_ATTENTION_GQA;
                    run(attn, &one, nth);
                    len[s] += Ts;
                }
                paged_add(&g, a, b, n, "step %d (T=%d) nth=%d", st, T, nth);
                free(x), free(a), free(b);
            }
            int bad = paged_placed(v, NS, c, len, LAYER, snap_k, snap_v, who, what);
            paged_print(&g, bad ? "; rows MISPLACED" : "; rows in place");
            for (int s = 0; s < NS; s++) free(c[s].k), free(c[s].v);
            free(pool.k), free(pool.v), free(snap_k), free(snap_v), free(sc);
        }
    }
}

/* Paged caches against contiguous ones, bit for bit: append and attention
 * (ref once, the ISA's kernels), the split at depth, several sequences of
 * one pool in one op. */
static void test_attention_paged(const struct r1_cpu_isa *isa) {
    static int ref_done; /* ref's kernels on the first ISA only (they do not change with it) */
    const int with_ref = !ref_done;
    ref_done = 1;
    paged_append_attn(isa, with_ref);
    paged_split(isa);
    paged_batch(isa, with_ref);
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
        int untouched = 1;
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
                    /* weights: row m's scores, zero past M as the caller leaves them */
                    for (int m = 0; m < MMAX; m++)
                        for (int p = 0; p < SS; p++) s[m * SS + p] = m < M && p < P ? frand() : 0.0f;
                    memcpy(o0, o, (size_t)MMAX * hd * 4);
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
                    group_add(&gv, n > 0 ? e / n : e, "M=%d P=%d hd=%d", M, P, hd);
                    free(q), free(kf), free(vf), free(o), free(o0), free(s), free(kh), free(vh);
                    free(kq), free(vq);
                }
        CHECK(untouched, "%s attn_qk/attn_pv%s wrote rows past M rounded up to 4", isa->name, form_name[form]);
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
        test_embedding(isa);
        test_rms_norm(isa);
        test_rope(isa);
        test_kv_append(isa);
        test_attention(isa);
        test_attention_q8(isa);
        test_attention_split(isa);
        test_attention_paged(isa);
        test_attn_blocks(isa);
        test_argmax(isa);
    }
    split_kv_free();
    paged_split_free();
    r1_cpu_select(NULL);
    return TEST_DONE("test_kernels");
}
