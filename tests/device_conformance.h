/*
 * device_conformance.h - the conformance suite of a device backend (cuda,
 * opencl) against the reference kernels, and of the whole model on the
 * device against the CPU on the Hugging Face fixtures; test_cuda.c and
 * test_opencl.c each include it once and pass a struct dc_backend with what
 * is theirs (weight dtypes, batch sizes, head shapes, matmul paths and their
 * limits, fixture modes). It must not name a backend's own API: that stays
 * in the test file, behind the hooks.
 *
 * Kernels: random inputs drawn fresh for each case, device outputs poisoned
 * with NaN before each run (an unwritten element fails), the position from
 * device memory. Error is ||out - ref|| / ||ref|| against a named limit;
 * every group prints its worst. Fixtures: greedy ids on the device (argmax
 * on the device) equal the CPU's, and prefill logits agree within a named
 * limit.
 */
#ifndef R1_TESTS_DEVICE_CONFORMANCE_H
#define R1_TESTS_DEVICE_CONFORMANCE_H

#include <dirent.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "kernels/kernels.h"
#include "r1infer.h"
#include "runtime/device.h"
#include "runtime/session.h"
#include "test.h"
#include "util/util.h"

/* Named limits shared by every device, ||out - ref|| / ||ref|| */
#define REL_EXACT 1e-7          /* same conversions: embedding, kv_append, argmax */
#define REL_F32 2e-6            /* f32 arithmetic, other summation order: norm, rope, attention (exp differs) */
#define REL_MATVEC 1e-5         /* the matvec kernels: f32 accumulate over dequantized weights */
#define REL_GEMM_F32 1e-5       /* a BLAS SGEMM over f32 (or dequantized to f32) weights */
#define REL_PREFILL_LOGITS 2e-3 /* fixture prefill logits, device vs CPU (max-norm rel) */

/* What a backend's test brings. Matmul paths: for each outer path o <
 * n_outer, each T of ts, each inner path i < n_inner(T), path_set chooses
 * the path (0: the combination is not run). Fixture modes: mode_set chooses
 * mode m for the fixture named; -1 skips it, 0 runs it unchecked (printed
 * only), 1 runs and checks it. */
struct dc_backend {
    const char *name;      /* r1_backend_find name and session backend */
    const char *dev_label; /* in "first mismatch at ..: cpu N, <label> N" */
    const enum r1_dtype *wdt;
    int n_wdt; /* weight dtypes the kernels take */
    const int *ts;
    int n_ts; /* matmul batch sizes */
    const int (*heads)[3];
    int n_heads;               /* q heads, kv heads, head_dim */
    const char *pos_dev_label; /* attention cases with the position on the device */
    int n_outer;
    int (*n_inner)(int T);
    int (*path_set)(int outer, int inner, int T);
    double (*path_limit)(enum r1_dtype dt, int T, int outer, int inner, const char **name);
    void (*path_label)(char *buf, size_t cap, int T, int outer, int inner); /* after "dt RxK T=n" */
    void (*path_begin)(void), (*path_end)(void);
    const char *path_limits; /* the matmul summary line: "limits by path: <this> %.0e" */
    const char *const *modes;
    int n_modes, mode_width;
    int (*mode_set)(int mode, const char *fixture);
    void (*mode_end)(void);
    int kv_q8; /* 1: the backend holds a q8_0 KV cache (kv_append, attention, fixtures vs ref) */
};

/* KV cache dtypes a test walks: f32, f16, and q8_0 where the backend has it
 * and head_dim is a multiple of its block */
static int n_kv_dtypes(const struct dc_backend *b, int hd) { return 2 + (b->kv_q8 && hd % 32 == 0); }
static enum r1_dtype kv_dtype_at(int i) { return i == 2 ? R1_DTYPE_Q8_0 : i ? R1_DTYPE_F16 : R1_DTYPE_F32; }

static const struct r1_backend *be;
static const struct r1_device_ops *dv;
static int verbose;

/* Find backend b and its device hooks; 0, or -1 after a failed CHECK. */
static int dc_open(const struct dc_backend *b) {
    verbose = getenv("R1_TEST_VERBOSE") != NULL;
    be = r1_backend_find(b->name);
    CHECK(be != NULL, "r1_backend_find(%s): %s", b->name, r1_last_error());
    if (!be) return -1;
    dv = be->dev;
    return 0;
}

/* ---- random data ---- */
static uint64_t rng = 0x9E3779B97F4A7C15ull;
static float frand(void) { return r1_frand_normal(&rng); }
static int irand(int n) {
    rng ^= rng << 13, rng ^= rng >> 7, rng ^= rng << 17;
    return (int)(rng % (uint64_t)n);
}
static float *hrand(size_t n) {
    float *p = malloc(n * sizeof(float) + 64);
    for (size_t i = 0; i < n; i++) p[i] = frand();
    return p;
}

/* ---- device buffers ---- */
static void *dup_dev(const void *h, size_t bytes) {
    void *d = dv->alloc(bytes, "test buffer");
    if (d && h) dv->upload(d, h, bytes);
    return d;
}
static void poison(void *d, size_t bytes) {
    float *nan = malloc(bytes + 4);
    for (size_t i = 0; i < bytes / 4; i++) nan[i] = NAN;
    dv->upload(d, nan, bytes);
    free(nan);
}
static int fetch(void *h, const void *d, size_t bytes) { return dv->download(h, d, bytes); }

/* ||a - b|| / ||b||; NaN or an unwritten (NaN-poisoned) element gives INFINITY */
static double rel(const float *a, const float *b, size_t n) {
    double num = 0, den = 0;
    for (size_t i = 0; i < n; i++) {
        if (a[i] != a[i]) return INFINITY;
        double d = (double)a[i] - b[i];
        num += d * d, den += (double)b[i] * b[i];
    }
    return den > 0 ? sqrt(num / den) : sqrt(num);
}

struct group {
    const char *name;
    double worst, limit;
    const char *limit_name;
    int cases;
};
static void report(struct group *g, double e, const char *what) {
    g->cases++;
    if (!(e <= g->worst)) g->worst = e;
    if (verbose) printf("  %-40s %s %.3g\n", g->name, what, e);
    CHECK(e <= g->limit, "%s %s: rel err %.3g > %s %.0e", g->name, what, e, g->limit_name, g->limit);
}
static void done(struct group *g) {
    printf("%-44s %3d cases, worst %.3g (%s %.0e)\n", g->name, g->cases, g->worst, g->limit_name, g->limit);
}

/* ---- weights: a host matrix and its device copy ---- */
struct mat {
    struct r1_mat h, d;
    void *hbuf, *dbuf;
};
static struct mat mat_new(enum r1_dtype dt, int rows, int cols) {
    struct mat m;
    size_t rb = r1_dtype_row_bytes(dt, cols);
    m.hbuf = malloc(rb * rows + 64);
    float *row = malloc(sizeof(float) * cols);
    for (int r = 0; r < rows; r++) {
        for (int c = 0; c < cols; c++) row[c] = frand() * 0.5f;
        r1_dtype_traits[dt].from_f32(row, (uint8_t *)m.hbuf + (size_t)r * rb, cols);
    }
    free(row);
    m.h = (struct r1_mat){.data = m.hbuf, .dtype = dt, .rows = rows, .cols = cols, .row_bytes = rb};
    m.dbuf = dv->alloc(r1_device_mat_bytes(&m.h), "test matrix");
    CHECK(m.dbuf && r1_device_mat_upload(dv, m.dbuf, &m.h, &m.d) == 0, "upload %s %dx%d: %s", r1_dtype_name(dt), rows,
          cols, r1_last_error());
    return m;
}
static void mat_free(struct mat *m) {
    free(m->hbuf);
    dv->free(m->dbuf);
}

static void run_ref(enum r1_kernel k, const struct r1_op *op) { r1_ref_kernels[k](op, 0, 1); }
static int run_dev(enum r1_kernel k, const struct r1_op *op) {
    be->fn[k](op, 0, 1);
    int rc = dv->sync();
    CHECK(rc == 0, "%s: %s", r1_kernel_names[k], r1_last_error());
    return rc;
}

/* weights per block (32 for q8_0, q4_0: such matrices need cols % 32 == 0) */
static int dc_block(enum r1_dtype t) { return r1_dtype_traits[t].block; }

/* ---- kernels ---- */
static void dc_test_embedding(const struct dc_backend *b) {
    struct group g = {"embedding", 0, REL_EXACT, "REL_EXACT", 0};
    for (int di = 0; di < b->n_wdt; di++) {
        int cols = dc_block(b->wdt[di]) > 1 ? 96 : 37, V = 101;
        struct mat m = mat_new(b->wdt[di], V, cols);
        for (int T = 1; T <= 6; T += 5) {
            int32_t ids[6];
            for (int t = 0; t < T; t++) ids[t] = irand(V);
            float *ref = malloc(sizeof(float) * T * cols), *got = malloc(sizeof(float) * T * cols);
            void *dids = dup_dev(ids, sizeof ids), *dout = dv->alloc(sizeof(float) * T * cols, "out");
            poison(dout, sizeof(float) * T * cols);
            struct r1_op op = {.kernel = R1_K_EMBEDDING, .T = T, .w = &m.h, .ids = ids, .out = ref};
            run_ref(R1_K_EMBEDDING, &op);
            op.w = &m.d, op.ids = dids, op.out = dout;
            if (!run_dev(R1_K_EMBEDDING, &op) && !fetch(got, dout, sizeof(float) * T * cols)) {
                char w[64];
                snprintf(w, sizeof w, "%s T=%d", r1_dtype_name(b->wdt[di]), T);
                report(&g, rel(got, ref, (size_t)T * cols), w);
            }
            dv->free(dids), dv->free(dout), free(ref), free(got);
        }
        mat_free(&m);
    }
    done(&g);
}

static void dc_test_rms_norm(void) {
    struct group g = {"rms_norm", 0, REL_F32, "REL_F32", 0};
    const int NS[] = {1, 37, 1536, 3584};
    for (int ni = 0; ni < 4; ni++)
        for (int T = 1; T <= 7; T += 6) {
            int n = NS[ni];
            float *x = hrand((size_t)T * n), *b = hrand(n), *ref = malloc(sizeof(float) * T * n),
                  *got = malloc(sizeof(float) * T * n);
            float *dx = dup_dev(x, sizeof(float) * T * n), *db = dup_dev(b, sizeof(float) * n),
                  *dout = dv->alloc(sizeof(float) * T * n, "out");
            poison(dout, sizeof(float) * T * n);
            struct r1_op op = {.kernel = R1_K_RMS_NORM, .T = T, .n = n, .eps = 1e-6f, .x = x, .b = b, .out = ref};
            run_ref(R1_K_RMS_NORM, &op);
            op.x = dx, op.b = db, op.out = dout;
            if (!run_dev(R1_K_RMS_NORM, &op) && !fetch(got, dout, sizeof(float) * T * n)) {
                char w[64];
                snprintf(w, sizeof w, "n=%d T=%d", n, T);
                report(&g, rel(got, ref, (size_t)T * n), w);
            }
            dv->free(dx), dv->free(db), dv->free(dout), free(x), free(b), free(ref), free(got);
        }
    done(&g);
}

/* qkv_bias, matvec_add, lm_head, gate_up_silu over dtypes x shapes x T x
 * the backend's paths */
static void dc_test_matmul(const struct dc_backend *b, enum r1_kernel k) {
    if (b->path_begin) b->path_begin();
    struct group g = {r1_kernel_names[k], 0, 0, "per case (below)", 0};
    double worst_limit = 0;
    const int shapes[][2] = {{67, 96}, {131, 320}, {1536, 1536}, {37, 250}, {300, 37}}; /* rows, cols */
    for (int di = 0; di < b->n_wdt; di++)
        for (int si = 0; si < 5; si++) {
            enum r1_dtype dt = b->wdt[di];
            int rows = shapes[si][0], K = shapes[si][1];
            if (K % dc_block(dt)) continue;
            if (k == R1_K_GATE_UP_SILU) rows *= 2;
            struct mat m = mat_new(dt, rows, K);
            int orows = k == R1_K_GATE_UP_SILU ? rows / 2 : rows;
            for (int outer = 0; outer < b->n_outer; outer++)
                for (int ti = 0; ti < b->n_ts; ti++)
                    for (int inner = 0; inner < b->n_inner(b->ts[ti]); inner++) {
                        int T = b->ts[ti];
                        if (!b->path_set(outer, inner, T)) continue;
                        size_t on = (size_t)T * orows;
                        float *x = hrand((size_t)T * K), *bias = hrand(rows), *init = hrand(on);
                        float *ref = malloc(sizeof(float) * on), *got = malloc(sizeof(float) * on);
                        memcpy(ref, init, sizeof(float) * on);
                        float *dx = dup_dev(x, sizeof(float) * T * K), *db = dup_dev(bias, sizeof(float) * rows);
                        float *dout = dup_dev(NULL, sizeof(float) * on);
                        if (k == R1_K_MATVEC_ADD) dv->upload(dout, init, sizeof(float) * on);
                        else poison(dout, sizeof(float) * on);
                        struct r1_op op = {.kernel = k, .T = T, .w = &m.h, .x = x, .b = bias, .out = ref};
                        run_ref(k, &op);
                        op.w = &m.d, op.x = dx, op.b = db, op.out = dout;
                        if (!run_dev(k, &op) && !fetch(got, dout, sizeof(float) * on)) {
                            const char *ln;
                            double lim = b->path_limit(dt, T, outer, inner, &ln);
                            double e = rel(got, ref, on);
                            char w[96], path[48];
                            b->path_label(path, sizeof path, T, outer, inner);
                            snprintf(w, sizeof w, "%s %dx%d T=%d%s", r1_dtype_name(dt), rows, K, T, path);
                            g.limit = lim, g.limit_name = ln;
                            report(&g, e, w);
                            if (lim > worst_limit) worst_limit = lim;
                        }
                        dv->free(dx), dv->free(db), dv->free(dout);
                        free(x), free(bias), free(init), free(ref), free(got);
                    }
            mat_free(&m);
        }
    if (b->path_end) b->path_end();
    printf("%-44s %3d cases, worst %.3g (limits by path: %s %.0e)\n", g.name, g.cases, g.worst, b->path_limits,
           worst_limit);
}

/* a qkv buffer, rope tables and a KV cache with random contents */
struct attn_fix {
    int nh, nkv, hd, n_ctx, stride;
    enum r1_dtype kvt;
    struct r1_kv_cache hkv, dkv;
    float *cs, *sn, *dcs, *dsn;
};
static void attn_fix_new(struct attn_fix *f, int nh, int nkv, int hd, int n_ctx, enum r1_dtype kvt) {
    f->nh = nh, f->nkv = nkv, f->hd = hd, f->n_ctx = n_ctx, f->kvt = kvt;
    f->stride = (nh + 2 * nkv) * hd;
    const size_t rows = (size_t)2 * nkv * n_ctx, rb = r1_dtype_row_bytes(kvt, hd);
    f->hkv = (struct r1_kv_cache){.dtype = kvt, .n_layer = 2, .n_kv_head = nkv, .n_ctx = n_ctx, .head_dim = hd};
    f->hkv.k = malloc(rows * rb), f->hkv.v = malloc(rows * rb);
    float *ra = malloc((size_t)hd * 4), *rv = malloc((size_t)hd * 4);
    for (size_t r = 0; r < rows; r++) { /* random rows in the cache's dtype (q8_0: the reference's quantizer) */
        for (int i = 0; i < hd; i++) ra[i] = frand(), rv[i] = frand();
        r1_dtype_traits[kvt].from_f32(ra, (uint8_t *)f->hkv.k + r * rb, hd);
        r1_dtype_traits[kvt].from_f32(rv, (uint8_t *)f->hkv.v + r * rb, hd);
    }
    free(ra), free(rv);
    f->dkv = f->hkv;
    f->dkv.k = dup_dev(f->hkv.k, rows * rb), f->dkv.v = dup_dev(f->hkv.v, rows * rb);
    size_t nt = (size_t)n_ctx * hd / 2;
    f->cs = malloc(nt * 4), f->sn = malloc(nt * 4);
    for (int p = 0; p < n_ctx; p++)
        for (int i = 0; i < hd / 2; i++) {
            float ang = (float)p * powf(10000.0f, -2.0f * i / hd);
            f->cs[(size_t)p * hd / 2 + i] = cosf(ang), f->sn[(size_t)p * hd / 2 + i] = sinf(ang);
        }
    f->dcs = dup_dev(f->cs, nt * 4), f->dsn = dup_dev(f->sn, nt * 4);
}
static void attn_fix_free(struct attn_fix *f) {
    free(f->hkv.k), free(f->hkv.v), free(f->cs), free(f->sn);
    dv->free(f->dkv.k), dv->free(f->dkv.v), dv->free(f->dcs), dv->free(f->dsn);
}

static void dc_test_rope_kv(const struct dc_backend *b) {
    struct group gr = {"rope_qk", 0, REL_F32, "REL_F32", 0}, gk = {"kv_append", 0, REL_EXACT, "REL_EXACT", 0};
    struct group gq = {"kv_append q8_0, same rows: bytes equal", 0, 0.0, "identical", 0};
    for (int hi = 0; hi < b->n_heads; hi++)
        for (int kvi = 0; kvi < n_kv_dtypes(b, b->heads[hi][2]); kvi++)
            for (int T = 1; T <= 5; T += 4)
                for (int via_dev = 0; via_dev < 2; via_dev++) {
                    struct attn_fix f;
                    attn_fix_new(&f, b->heads[hi][0], b->heads[hi][1], b->heads[hi][2], 96, kv_dtype_at(kvi));
                    int pos0 = irand(f.n_ctx - T);
                    size_t nq = (size_t)T * f.stride;
                    float *q = hrand(nq), *ref = malloc(nq * 4), *got = malloc(nq * 4);
                    memcpy(ref, q, nq * 4);
                    float *dq = dup_dev(q, nq * 4);
                    int32_t *dpos = dup_dev(&pos0, 4);
                    struct r1_op op = {.kernel = R1_K_ROPE_QK,
                                       .T = T,
                                       .pos0 = pos0,
                                       .n_head = f.nh,
                                       .n_kv_head = f.nkv,
                                       .head_dim = f.hd,
                                       .rope_cos = f.cs,
                                       .rope_sin = f.sn,
                                       .out = ref,
                                       .layer = 1,
                                       .kv = &f.hkv};
                    run_ref(R1_K_ROPE_QK, &op);
                    struct r1_op dop = op;
                    dop.rope_cos = f.dcs, dop.rope_sin = f.dsn, dop.out = dq, dop.kv = &f.dkv;
                    if (via_dev) dop.pos0 = -1000000, dop.pos_dev = dpos; /* must read the device copy */
                    char w[96];
                    snprintf(w, sizeof w, "%d/%d hd %d T=%d kv %s%s", f.nh, f.nkv, f.hd, T, r1_dtype_name(f.kvt),
                             via_dev ? " pos on device" : "");
                    if (!run_dev(R1_K_ROPE_QK, &dop) && !fetch(got, dq, nq * 4)) report(&gr, rel(got, ref, nq), w);
                    /* kv_append of the rotated rows */
                    op.kernel = dop.kernel = R1_K_KV_APPEND;
                    op.x = ref, dop.x = dq;
                    run_ref(R1_K_KV_APPEND, &op);
                    if (!run_dev(R1_K_KV_APPEND, &dop)) {
                        size_t n = (size_t)2 * f.nkv * f.n_ctx * f.hd, nb = n / f.hd * r1_dtype_row_bytes(f.kvt, f.hd);
                        uint8_t *hk = malloc(nb), *hv = malloc(nb);
                        fetch(hk, f.dkv.k, nb), fetch(hv, f.dkv.v, nb);
                        /* the ref rows were rotated on the host from the same q: compare bytes
                         * (q8_0: the device's quantizer must give the reference's bytes) */
                        int same = !memcmp(hk, f.hkv.k, nb) && !memcmp(hv, f.hkv.v, nb);
                        double e = 0;
                        if (!same) { /* rope rounding may differ: report the value error */
                            float *a = malloc(n * 4), *bb = malloc(n * 4);
                            r1_dtype_traits[f.kvt].to_f32(hk, a, (int64_t)n);
                            r1_dtype_traits[f.kvt].to_f32(f.hkv.k, bb, (int64_t)n);
                            e = rel(a, bb, n);
                            free(a), free(bb);
                            gk.limit = 1e-3, gk.limit_name = "REL_EXACT (rope-rounded: 1e-3)";
                        }
                        report(&gk, e, w);
                        if (f.kvt == R1_DTYPE_Q8_0) { /* the same rows on both sides: the same bytes */
                            /* and ties: block 0 of the first K row with d = 1 exactly, halves to round away */
                            static const float tie[] = {127.0f, 2.5f, -3.5f, 0.5f, -0.5f, 126.5f, 1e-3f};
                            float *k0 = ref + (size_t)f.nh * f.hd;
                            for (size_t j = 0; j < sizeof tie / sizeof tie[0]; j++) k0[j] = tie[j];
                            run_ref(R1_K_KV_APPEND, &op);
                            float *dr = dup_dev(ref, nq * 4);
                            dop.x = dr;
                            if (!run_dev(R1_K_KV_APPEND, &dop)) {
                                fetch(hk, f.dkv.k, nb), fetch(hv, f.dkv.v, nb);
                                same = !memcmp(hk, f.hkv.k, nb) && !memcmp(hv, f.hkv.v, nb);
                                report(&gq, same ? 0.0 : INFINITY, w);
                            }
                            dv->free(dr);
                        }
                        free(hk), free(hv);
                    }
                    dv->free(dq), dv->free(dpos), free(q), free(ref), free(got);
                    attn_fix_free(&f);
                }
    done(&gr);
    done(&gk);
    if (gq.cases) done(&gq);
}

static void dc_test_attention(const struct dc_backend *b) {
    struct group g = {"attention_gqa", 0, REL_F32, "REL_F32", 0};
    struct {
        int T, pos0, n_ctx;
    } cases[] = {{1, 0, 64}, {1, 5, 64},  {1, 300, 1200}, {1, 1100, 1200},
                 {3, 0, 64}, {17, 0, 64}, {17, 40, 96},   {9, 500, 1200}};
    for (int hi = 0; hi < b->n_heads; hi++)
        for (int kvi = 0; kvi < n_kv_dtypes(b, b->heads[hi][2]); kvi++)
            for (size_t ci = 0; ci < sizeof cases / sizeof cases[0]; ci++)
                for (int via_dev = 0; via_dev < (cases[ci].T == 1 ? 2 : 1); via_dev++) {
                    struct attn_fix f;
                    int T = cases[ci].T, pos0 = cases[ci].pos0;
                    attn_fix_new(&f, b->heads[hi][0], b->heads[hi][1], b->heads[hi][2], cases[ci].n_ctx,
                                 kv_dtype_at(kvi));
                    size_t nq = (size_t)T * f.stride, no = (size_t)T * f.nh * f.hd;
                    float *q = hrand(nq), *ref = malloc(no * 4), *got = malloc(no * 4);
                    float *scr = malloc(sizeof(float) * f.n_ctx);
                    size_t sf = dv->scratch_floats(T, f.nh, f.hd, f.n_ctx);
                    float *dq = dup_dev(q, nq * 4), *dout = dv->alloc(no * 4, "out"),
                          *dscr = dv->alloc(sf * 4, "scratch");
                    int32_t *dpos = dup_dev(&pos0, 4);
                    poison(dout, no * 4);
                    struct r1_op op = {.kernel = R1_K_ATTENTION_GQA,
                                       .T = T,
                                       .pos0 = pos0,
                                       .n_head = f.nh,
                                       .n_kv_head = f.nkv,
                                       .head_dim = f.hd,
                                       .layer = 1,
                                       .kv = &f.hkv,
                                       .x = q,
                                       .out = ref,
                                       .scratch = scr,
                                       .scratch_stride = (size_t)f.n_ctx};
                    run_ref(R1_K_ATTENTION_GQA, &op);
                    op.kv = &f.dkv, op.x = dq, op.out = dout, op.scratch = dscr;
                    if (via_dev) op.pos0 = -1000000, op.pos_dev = dpos;
                    char w[96];
                    snprintf(w, sizeof w, "%d/%d hd %d T=%d pos %d ctx %d kv %s%s", f.nh, f.nkv, f.hd, T, pos0, f.n_ctx,
                             r1_dtype_name(f.kvt), via_dev ? b->pos_dev_label : "");
                    if (!run_dev(R1_K_ATTENTION_GQA, &op) && !fetch(got, dout, no * 4))
                        report(&g, rel(got, ref, no), w);
                    dv->free(dq), dv->free(dout), dv->free(dscr), dv->free(dpos);
                    free(q), free(ref), free(got), free(scr);
                    attn_fix_free(&f);
                }
    done(&g);
}

static void dc_test_argmax(void) {
    struct group g = {"argmax", 0, REL_EXACT, "REL_EXACT", 0};
    const int NS[] = {1, 33, 1000, 151936};
    for (int ni = 0; ni < 4; ni++)
        for (int tie = 0; tie < 2; tie++) {
            int n = NS[ni];
            float *x = hrand(n);
            if (tie && n > 2) {
                int a = irand(n), b = irand(n);
                x[a] = x[b] = 100.0f;
            }
            int32_t want = -1, got = -2;
            struct r1_op op = {.kernel = R1_K_ARGMAX, .n = n, .x = x, .out_id = &want};
            run_ref(R1_K_ARGMAX, &op);
            float *dx = dup_dev(x, sizeof(float) * n);
            int32_t *did = dv->alloc(16, "id");
            op.x = dx, op.out_id = did;
            if (!run_dev(R1_K_ARGMAX, &op) && !fetch(&got, did, 4)) {
                char w[64];
                snprintf(w, sizeof w, "n=%d%s", n, tie ? " tie" : "");
                report(&g, got == want ? 0.0 : INFINITY, w);
            }
            dv->free(dx), dv->free(did), free(x);
        }
    done(&g);
}

/* ---- fixtures: device vs CPU ---- */
#define N_GEN 32
static int greedy(r1_model_t *m, const char *backend, enum r1_dtype kv, const int32_t *prompt, int n, float *all,
                  int32_t *ids) {
    r1_session_t *s =
        r1_session_new(m, &(struct r1_session_opts){.n_ctx = 256, .backend = backend, .n_threads = 2, .kv_dtype = kv});
    CHECK(s != NULL, "%s session: %s", backend, r1_last_error());
    if (!s) return -1;
    int rc = r1_session_forward(s, prompt, n, all) ? 0 : -1;
    r1_session_truncate(s, 0);
    int32_t id = rc ? -1 : r1_session_forward_argmax(s, prompt, n);
    for (int i = 0; i < N_GEN && id >= 0; i++) {
        ids[i] = id;
        if (i + 1 < N_GEN) id = r1_session_forward_argmax(s, &id, 1);
    }
    if (id < 0) rc = -1;
    CHECK(rc == 0, "%s forward: %s", backend, r1_last_error());
    r1_session_free(s);
    return rc;
}

/* max over rows of max |a - b| / max |a| (NaN in b: INFINITY) */
static double logits_err(const float *a, const float *b, int rows, int V) {
    double worst = 0;
    for (int r = 0; r < rows; r++) {
        double mx = 0, md = 0;
        for (int j = 0; j < V; j++) {
            mx = fmax(mx, fabs(a[(size_t)r * V + j]));
            double dd = fabs((double)a[(size_t)r * V + j] - b[(size_t)r * V + j]);
            md = dd == dd ? fmax(md, dd) : INFINITY;
        }
        worst = fmax(worst, md / (mx > 0 ? mx : 1));
    }
    return worst;
}

static void dc_test_fixtures(const struct dc_backend *b) {
    DIR *d = opendir("tests/fixtures");
    CHECK(d != NULL, "no tests/fixtures (run from the repo root)");
    if (!d) return;
    struct dirent *e;
    while ((e = readdir(d))) {
        char dir[512], p[600];
        struct stat st;
        snprintf(dir, sizeof dir, "tests/fixtures/%s", e->d_name);
        snprintf(p, sizeof p, "%s/config.json", dir);
        if (e->d_name[0] == '.' || stat(p, &st) != 0) continue;
        r1_model_t *m = r1_model_load(dir, &(struct r1_load_opts){.dtype = R1_DTYPE_AUTO});
        CHECK(m != NULL, "%s: %s", dir, r1_last_error());
        if (!m) continue;
        const int V = r1_model_config(m)->vocab, n = 13;
        int32_t prompt[13];
        for (int i = 0; i < n; i++) prompt[i] = (int32_t)((i * 7919 + 11) % V);
        float *ac = malloc(sizeof(float) * n * V), *ag = malloc(sizeof(float) * n * V);
        for (int kvi = 0; kvi < n_kv_dtypes(b, r1_model_config(m)->head_dim); kvi++)
            for (int mode = 0; mode < b->n_modes; mode++) {
                enum r1_dtype kv = kv_dtype_at(kvi);
                /* a q8_0 cache against the oracle, ref, reading the same blocks */
                const char *host = kv == R1_DTYPE_Q8_0 ? "ref" : "cpu";
                int32_t ic[N_GEN], ig[N_GEN];
                int checked = b->mode_set(mode, e->d_name);
                if (checked < 0) continue;
                if (greedy(m, host, kv, prompt, n, ac, ic) || greedy(m, b->name, kv, prompt, n, ag, ig)) continue;
                double worst = logits_err(ac, ag, n, V);
                int first = -1;
                for (int i = 0; i < N_GEN && first < 0; i++)
                    if (ic[i] != ig[i]) first = i;
                printf("%-16s kv %-4s %-*s prefill logits vs %s %.3g; greedy %s", e->d_name, r1_dtype_name(kv),
                       b->mode_width, b->modes[mode], host, worst, first < 0 ? "32/32 ids equal\n" : "");
                if (first >= 0)
                    printf("first mismatch at %d: %s %d, %s %d\n", first, host, ic[first], b->dev_label, ig[first]);
                if (checked) {
                    CHECK(worst <= REL_PREFILL_LOGITS, "%s kv %s %s: prefill logits differ by %.3g > %s", e->d_name,
                          r1_dtype_name(kv), b->modes[mode], worst, "REL_PREFILL_LOGITS");
                    CHECK(first < 0, "%s kv %s %s: greedy ids differ from step %d", e->d_name, r1_dtype_name(kv),
                          b->modes[mode], first);
                }
            }
        free(ac), free(ag);
        r1_model_free(m);
    }
    closedir(d);
    if (b->mode_end) b->mode_end();
}

/* Every kernel group in the suite's order; between (after the matmuls) the
 * backend's own groups, when it has some. */
static void dc_run(const struct dc_backend *b, void (*after_matmul)(void)) {
    dc_test_embedding(b);
    dc_test_rms_norm();
    dc_test_matmul(b, R1_K_QKV_BIAS);
    dc_test_matmul(b, R1_K_MATVEC_ADD);
    dc_test_matmul(b, R1_K_LM_HEAD);
    dc_test_matmul(b, R1_K_GATE_UP_SILU);
    if (after_matmul) after_matmul();
    dc_test_rope_kv(b);
    dc_test_attention(b);
    dc_test_argmax();
    if (!getenv("R1_TEST_KERNELS_ONLY")) dc_test_fixtures(b);
}

#endif
