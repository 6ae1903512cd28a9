/*
 * suite.c - the kernel suite: every kernel of one decode step at the model's
 * shapes, each timed alone through the backend table and the engine's
 * thread pool. Before every timed run the caches are flushed (a read of
 * bw->flush_bytes, not timed) and per-layer kernels rotate over the layers,
 * so weights and KV come from memory as they do in a real step (a kernel
 * whose other layers' bytes exceed the flush is cold by rotation alone and
 * skips the flush). Each row
 * carries an explicit traffic model (weights + activations + KV bytes).
 * Allocates its own activations and KV cache; never touches a session.
 * On a device backend (opencl, cuda) the same buffers are copied to the
 * device, the weights are the shared device copy (runtime/device.c), the
 * kernel runs on the calling thread and each timed run ends with a sync, so
 * a row is the kernel's time on the device plus one launch and one wait.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench/bench.h"
#include "runtime/device.h"

struct suite_bufs {
    float *x, *xb, *qkv, *att, *hb, *logits, *logits0, *scratch, *cos, *sin;
    struct r1_kv_cache kv;
};

static uint64_t rng = 0x243f6a8885a308d3ull;
static float frand(void) { /* uniform [-1, 1) */
    rng ^= rng >> 12, rng ^= rng << 25, rng ^= rng >> 27;
    return (float)((rng * 0x2545f4914f6cdd1dull) >> 40) * (2.0f / 16777216.0f) - 1.0f;
}
static void fill(float *p, size_t n, float a) {
    for (size_t i = 0; i < n; i++) p[i] = a * frand();
}

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static double mat_bytes(const struct r1_mat *w) { return (double)w->rows * (double)w->row_bytes; }

static void free_bufs(struct suite_bufs *b) {
    free(b->x), free(b->xb), free(b->qkv), free(b->att), free(b->hb), free(b->logits);
    free(b->logits0), free(b->scratch), free(b->cos), free(b->sin), free(b->kv.k), free(b->kv.v);
}

static int alloc_bufs(struct suite_bufs *b, const struct r1_config *c, enum r1_dtype kvt, int ctx, int nth) {
    memset(b, 0, sizeof *b);
    const int hd = c->head_dim, qd = c->n_head * hd, nqkv = qd + 2 * c->n_kv_head * hd;
    /* kvn cache rows of es bytes (head_dim values in the cache's dtype) */
    size_t kvn = (size_t)c->n_layer * c->n_kv_head * (size_t)ctx, es = r1_dtype_row_bytes(kvt, hd);
    b->x = r1_alloc((size_t)c->dim * 4, "bench activations");
    b->xb = r1_alloc((size_t)c->dim * 4, "bench activations");
    b->qkv = r1_alloc((size_t)nqkv * 4, "bench activations");
    b->att = r1_alloc((size_t)qd * 4, "bench activations");
    b->hb = r1_alloc((size_t)c->ffn * 4, "bench activations");
    b->logits = r1_alloc((size_t)c->vocab * 4, "bench logits");
    b->logits0 = r1_alloc((size_t)c->vocab * 4, "bench logits");
    b->scratch = r1_alloc((size_t)nth * ctx * 4, "bench attention scratch");
    b->cos = r1_alloc((size_t)ctx * hd / 2 * 4, "bench rope tables");
    b->sin = r1_alloc((size_t)ctx * hd / 2 * 4, "bench rope tables");
    b->kv = (struct r1_kv_cache){
        .dtype = kvt, .n_layer = c->n_layer, .n_kv_head = c->n_kv_head, .n_ctx = ctx, .head_dim = hd};
    b->kv.k = r1_alloc(kvn * es, "bench KV cache");
    b->kv.v = r1_alloc(kvn * es, "bench KV cache");
    if (!b->x || !b->xb || !b->qkv || !b->att || !b->hb || !b->logits || !b->logits0 || !b->scratch || !b->cos ||
        !b->sin || !b->kv.k || !b->kv.v) {
        free_bufs(b);
        return -1;
    }
    fill(b->x, (size_t)c->dim, 1.0f);
    fill(b->xb, (size_t)c->dim, 1.0f);
    fill(b->qkv, (size_t)nqkv, 1.0f);
    fill(b->att, (size_t)qd, 1.0f);
    fill(b->hb, (size_t)c->ffn, 0.1f);
    /* logits of a confident model: a bulk around 0 and one clear winner */
    for (int i = 0; i < c->vocab; i++) b->logits0[i] = 2.5f * (frand() + frand() + frand());
    b->logits0[c->vocab / 3] = 25.0f;
    float kr[512], vr[512];            /* head_dim <= 512, checked at load */
    for (size_t r = 0; r < kvn; r++) { /* a row at a time, in the cache's dtype */
        for (int i = 0; i < hd; i++) kr[i] = 0.5f * frand(), vr[i] = 0.5f * frand();
        r1_dtype_traits[kvt].from_f32(kr, (uint8_t *)b->kv.k + r * es, hd);
        r1_dtype_traits[kvt].from_f32(vr, (uint8_t *)b->kv.v + r * es, hd);
    }
    for (int i = 0; i < hd / 2; i++) { /* as the session computes them */
        float inv = (float)(1.0 / pow((double)c->rope_theta, (double)(2 * i) / (double)hd));
        for (int p = 0; p < ctx; p++) {
            b->cos[(size_t)p * (hd / 2) + i] = (float)cos((double)((float)p * inv));
            b->sin[(size_t)p * (hd / 2) + i] = (float)sin((double)((float)p * inv));
        }
    }
    return 0;
}

/* Device copies of every buffer of h (d's pointers are device addresses). */
static void *dev_copy(const struct r1_device_ops *dv, const void *h, size_t bytes, int *ok) {
    void *p = dv->alloc(bytes, "bench buffers");
    if (!p || dv->upload(p, h, bytes)) *ok = 0;
    return p;
}
static void free_dev_bufs(const struct r1_device_ops *dv, struct suite_bufs *d) {
    void *p[] = {d->x,       d->xb,      d->qkv, d->att, d->hb,   d->logits,
                 d->logits0, d->scratch, d->cos, d->sin, d->kv.k, d->kv.v};
    for (size_t i = 0; i < sizeof p / sizeof p[0]; i++) dv->free(p[i]);
    memset(d, 0, sizeof *d);
}
static int dev_bufs(const struct r1_device_ops *dv, const struct suite_bufs *h, struct suite_bufs *d,
                    const struct r1_config *c, int ctx) {
    const int hd = c->head_dim, qd = c->n_head * hd, nqkv = qd + 2 * c->n_kv_head * hd;
    size_t kvn = (size_t)c->n_layer * c->n_kv_head * (size_t)ctx, es = r1_dtype_row_bytes(h->kv.dtype, hd);
    int ok = 1;
    memset(d, 0, sizeof *d);
    d->x = dev_copy(dv, h->x, (size_t)c->dim * 4, &ok);
    d->xb = dev_copy(dv, h->xb, (size_t)c->dim * 4, &ok);
    d->qkv = dev_copy(dv, h->qkv, (size_t)nqkv * 4, &ok);
    d->att = dev_copy(dv, h->att, (size_t)qd * 4, &ok);
    d->hb = dev_copy(dv, h->hb, (size_t)c->ffn * 4, &ok);
    d->logits = dev_copy(dv, h->logits0, (size_t)c->vocab * 4, &ok);
    d->logits0 = dev_copy(dv, h->logits0, (size_t)c->vocab * 4, &ok);
    size_t sf = dv->scratch_floats(1, c->n_head, hd, ctx);
    d->scratch = dv->alloc(sf * 4, "bench attention scratch");
    if (!d->scratch) ok = 0;
    d->cos = dev_copy(dv, h->cos, (size_t)ctx * hd / 2 * 4, &ok);
    d->sin = dev_copy(dv, h->sin, (size_t)ctx * hd / 2 * 4, &ok);
    d->kv = h->kv;
    d->kv.k = dev_copy(dv, h->kv.k, kvn * es, &ok);
    d->kv.v = dev_copy(dv, h->kv.v, kvn * es, &ok);
    if (!ok || dv->sync()) {
        free_dev_bufs(dv, d);
        return -1;
    }
    return 0;
}

/* One suite row: kernel k (or the sampler when k < 0) configured for layer l by setup. */
struct row_spec {
    const char *id, *insitu, *dtype;
    enum r1_kernel k; /* R1_K_COUNT: the sampler */
    int per_layer, per_step;
    double bytes;
    char shape[96];
};

struct ctx {
    const struct r1_model *m;
    const struct r1_config *c;
    struct suite_bufs *b;
    int pos; /* position of the decoded token: attention reads pos + 1 entries */
};

/* The op of row `id` for layer l, as session.c builds it for a decode step. */
static void make_op(const struct ctx *x, const char *id, int l, int32_t *tok, int32_t *out_id, struct r1_op *op) {
    const struct r1_config *c = x->c;
    const struct r1_layer *L = &x->m->layers[l];
    struct suite_bufs *b = x->b;
    *op = (struct r1_op){.T = 1,
                         .pos0 = x->pos,
                         .n_head = c->n_head,
                         .n_kv_head = c->n_kv_head,
                         .head_dim = c->head_dim,
                         .kv = &b->kv,
                         .rope_cos = b->cos,
                         .rope_sin = b->sin,
                         .scratch = b->scratch,
                         .scratch_stride = (size_t)b->kv.n_ctx,
                         .eps = c->eps,
                         .n = c->dim,
                         .layer = l};
    if (!strcmp(id, "embedding")) op->kernel = R1_K_EMBEDDING, op->out = b->x, op->w = &x->m->emb, op->ids = tok;
    else if (!strcmp(id, "rms_norm")) op->kernel = R1_K_RMS_NORM, op->out = b->xb, op->x = b->x, op->b = L->attn_norm;
    else if (!strcmp(id, "qkv_bias"))
        op->kernel = R1_K_QKV_BIAS, op->out = b->qkv, op->x = b->xb, op->w = &L->wqkv, op->b = L->bqkv;
    else if (!strcmp(id, "rope_qk")) op->kernel = R1_K_ROPE_QK, op->out = b->qkv;
    else if (!strcmp(id, "kv_append")) op->kernel = R1_K_KV_APPEND, op->x = b->qkv;
    else if (!strcmp(id, "attention_gqa")) op->kernel = R1_K_ATTENTION_GQA, op->out = b->att, op->x = b->qkv;
    else if (!strcmp(id, "matvec_add.o_proj"))
        op->kernel = R1_K_MATVEC_ADD, op->out = b->x, op->x = b->att, op->w = &L->wo;
    else if (!strcmp(id, "gate_up_silu"))
        op->kernel = R1_K_GATE_UP_SILU, op->out = b->hb, op->x = b->xb, op->w = &L->wgu;
    else if (!strcmp(id, "matvec_add.down_proj"))
        op->kernel = R1_K_MATVEC_ADD, op->out = b->x, op->x = b->hb, op->w = &L->wdown;
    else if (!strcmp(id, "lm_head"))
        op->kernel = R1_K_LM_HEAD, op->out = b->logits, op->x = b->xb, op->w = &x->m->lm_head;
    else if (!strcmp(id, "argmax")) op->kernel = R1_K_ARGMAX, op->x = b->logits, op->n = c->vocab, op->out_id = out_id;
    else op->kernel = R1_K_COUNT; /* sample */
}

int bench_suite_run(struct bench_suite *s, const struct r1_model *host_m, const struct r1_backend *be,
                    const r1_kernel_fn fn[R1_K_COUNT], enum r1_dtype kvt, struct r1_pool *pool,
                    const struct bench_bw *bw, int runs, int ctx, const struct r1_sampler_params *sp) {
    const struct r1_device_ops *dv = be->dev;
    const struct r1_model *m = host_m;
    if (dv && !(m = r1_device_model_get(host_m, be))) return -1;
    const struct r1_config *c = &m->cfg;
    const int nth = r1_pool_size(pool), hd = c->head_dim, L = c->n_layer;
    const int qd = c->n_head * hd, kvd = c->n_kv_head * hd, nqkv = qd + 2 * kvd;
    const double kvs = (double)r1_dtype_row_bytes(kvt, hd) / hd, D = c->dim, F = c->ffn, V = c->vocab;
    const char *wd = r1_dtype_name(m->dtype), *kd = r1_dtype_name(kvt);
    struct suite_bufs b, d;
    int32_t *d_tok = NULL, *d_id = NULL;
    memset(&d, 0, sizeof d);
    if (alloc_bufs(&b, c, kvt, ctx, nth)) {
        if (dv) r1_device_model_put(m);
        return -1;
    }
    r1_sampler_t *smp = r1_sampler_new(sp, c->vocab);
    if (dv && smp) {
        d_tok = dv->alloc(16, "bench token id");
        d_id = dv->alloc(16, "bench argmax");
        if (!d_tok || !d_id || dev_bufs(dv, &b, &d, c, ctx)) r1_sampler_free(smp), smp = NULL;
    }
    if (!smp) {
        free_bufs(&b);
        if (dv) dv->free(d_tok), dv->free(d_id), r1_device_model_put(m);
        return -1;
    }
    const struct r1_layer *L0 = &m->layers[0];
    struct row_spec rows[] = {
        {"embedding", "embedding", wd, R1_K_EMBEDDING, 0, 1, (double)m->emb.row_bytes + D * 4, ""},
        {"rms_norm", "rms_norm", "f32", R1_K_RMS_NORM, 1, 2 * L + 1, D * 4 * 3, ""},
        {"qkv_bias", "qkv_bias", wd, R1_K_QKV_BIAS, 1, L, mat_bytes(&L0->wqkv) + nqkv * 4.0 * 2 + D * 4, ""},
        {"rope_qk", "rope_qk", "f32", R1_K_ROPE_QK, 1, L, (qd + kvd) * 4.0 * 2 + hd * 4.0, ""},
        {"kv_append", "kv_append", kd, R1_K_KV_APPEND, 1, L, 2 * kvd * (4.0 + kvs), ""},
        {"attention_gqa", "attention_gqa", kd, R1_K_ATTENTION_GQA, 1, L,
         2.0 * c->n_kv_head * ctx * hd * kvs + qd * 4.0 * 2, ""},
        {"matvec_add.o_proj", "matvec_add", wd, R1_K_MATVEC_ADD, 1, L, mat_bytes(&L0->wo) + qd * 4.0 + D * 8, ""},
        {"gate_up_silu", "gate_up_silu", wd, R1_K_GATE_UP_SILU, 1, L, mat_bytes(&L0->wgu) + D * 4 + F * 4, ""},
        {"matvec_add.down_proj", "matvec_add", wd, R1_K_MATVEC_ADD, 1, L, mat_bytes(&L0->wdown) + F * 4 + D * 8, ""},
        {"lm_head", "lm_head", r1_dtype_name(m->lm_head.dtype), R1_K_LM_HEAD, 0, 1,
         mat_bytes(&m->lm_head) + D * 4 + V * 4, ""},
        {"argmax", "argmax", "f32", R1_K_ARGMAX, 0, 0, V * 4, ""},
        {"sample", "sample", "f32", R1_K_COUNT, 0, 1, V * 4, ""},
    };
    const int nrows = (int)(sizeof rows / sizeof rows[0]);
    snprintf(rows[0].shape, 96, "id -> 1x%d of %dx%d", c->dim, c->vocab, c->dim);
    snprintf(rows[1].shape, 96, "1x%d", c->dim);
    snprintf(rows[2].shape, 96, "1x%d @ %dx%d + bias", c->dim, nqkv, c->dim);
    snprintf(rows[3].shape, 96, "q %dx%d k %dx%d pos %d", c->n_head, hd, c->n_kv_head, hd, ctx - 1);
    snprintf(rows[4].shape, 96, "k+v %dx%d at pos %d", c->n_kv_head, hd, ctx - 1);
    snprintf(rows[5].shape, 96, "q %dx%d over kv %dx%dx%d", c->n_head, hd, c->n_kv_head, ctx, hd);
    snprintf(rows[6].shape, 96, "1x%d @ %dx%d", qd, c->dim, qd);
    snprintf(rows[7].shape, 96, "1x%d @ %dx%d", c->dim, 2 * c->ffn, c->dim);
    snprintf(rows[8].shape, 96, "1x%d @ %dx%d", c->ffn, c->dim, c->ffn);
    snprintf(rows[9].shape, 96, "1x%d @ %dx%d", c->dim, c->vocab, c->dim);
    snprintf(rows[10].shape, 96, "1x%d", c->vocab);
    snprintf(rows[11].shape, 96, "1x%d t=%.2g p=%.2g", c->vocab, sp->temperature, sp->top_p);

    struct ctx cx = {.m = m, .c = c, .b = dv ? &d : &b, .pos = ctx - 1};
    const int warm = 2;
    double *t = malloc(sizeof(double) * (size_t)(runs + warm));
    if (!t) {
        r1_sampler_free(smp);
        free_bufs(&b);
        if (dv) free_dev_bufs(dv, &d), dv->free(d_tok), dv->free(d_id), r1_device_model_put(m);
        return r1_err("out of memory");
    }
    memset(s, 0, sizeof *s);
    s->runs = runs;
    s->ctx = ctx;
    int fail = 0, claim = 0;
    for (int r = 0; r < nrows && s->n < BENCH_MAX_KERNELS && !fail; r++) {
        const struct row_spec *rs = &rows[r];
        /* a per-layer kernel whose other layers alone outweigh the flush is cold by rotation */
        int flush = !(rs->per_layer && rs->bytes * (L - 1) >= (double)bw->flush_bytes);
        for (int i = 0; i < runs + warm; i++) {
            bench_progress("kernel suite: %-20s run %d/%d", rs->id, i + 1, runs + warm);
            int l = rs->per_layer ? i % L : 0;
            int32_t tok = (int32_t)((uint64_t)(i + 1) * 2654435761u % (uint64_t)c->vocab), out_id = 0;
            struct r1_op op;
            make_op(&cx, rs->id, l, dv ? d_tok : &tok, dv ? d_id : &out_id, &op);
            claim = 0; /* as a session does for each op */
            if (!dv) op.claim = &claim;
            if (rs->k == R1_K_COUNT || rs->k == R1_K_ARGMAX) memcpy(b.logits, b.logits0, (size_t)c->vocab * 4);
            if (dv && rs->k == R1_K_ARGMAX) dv->upload(d.logits, b.logits0, (size_t)c->vocab * 4);
            if (dv && rs->k == R1_K_EMBEDDING) dv->upload(d_tok, &tok, sizeof tok);
            if (dv && dv->sync()) {
                fail = 1;
                break;
            }
            if (flush && i >= warm) bench_flush(bw, pool);
            double t0 = r1_now();
            if (rs->k == R1_K_COUNT) r1_sampler_sample(smp, b.logits); /* the sampler runs on the host */
            else if (dv) fn[rs->k](&op, 0, 1), fail = dv->sync() != 0;
            else r1_pool_run(pool, fn[rs->k], &op);
            t[i] = (r1_now() - t0) * 1e6;
            if (fail) break;
        }
        if (fail) break;
        qsort(t + warm, (size_t)runs, sizeof *t, cmp_double);
        struct bench_kernel *k = &s->k[s->n++];
        snprintf(k->id, sizeof k->id, "%s", rs->id);
        snprintf(k->shape, sizeof k->shape, "%s", rs->shape);
        k->insitu = rs->insitu;
        k->dtype = rs->dtype;
        k->per_step = rs->per_step;
        k->us_min = t[warm];
        k->us_median = runs % 2 ? t[warm + runs / 2] : 0.5 * (t[warm + runs / 2 - 1] + t[warm + runs / 2]);
        k->bytes = rs->bytes;
        k->gbps = k->us_median > 0 ? rs->bytes / (k->us_median * 1e3) : 0;
        k->frac = bw->best_gbps > 0 ? k->gbps / bw->best_gbps : 0;
    }
    free(t);
    r1_sampler_free(smp);
    free_bufs(&b);
    if (dv) free_dev_bufs(dv, &d), dv->free(d_tok), dv->free(d_id), r1_device_model_put(m);
    return fail ? r1_err_prefix("kernel suite on '%s'", be->name), -1 : 0;
}
