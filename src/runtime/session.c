/*
 * session.c - one conversation: KV cache, scratch buffers, thread pool and
 * the forward pass as a fixed sequence of kernel calls through the resolved
 * backend table. Everything is allocated in r1_session_new; the forward
 * pass allocates nothing.
 *
 * On a device backend (be->dev, cuda) the same sequence runs with device
 * buffers: activations, KV cache, rope tables and scratch live on the
 * device, the weights are the shared device copy (runtime/device.c), ids and
 * the position are uploaded before the step, ops run on the calling thread
 * (the kernels queue asynchronously) and only the logits, or the argmax id,
 * come back. A decode step (T = 1) is captured once as a graph and replayed.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/kernels.h"
#include "model/model.h"
#include "runtime/device.h"
#include "runtime/pool.h"
#include "runtime/session.h"

#define MAX_BATCH 512

struct r1_session {
    struct r1_model *m;
    const struct r1_model *w; /* weights the kernels read: m, or its device copy */
    const struct r1_backend *be;
    const struct r1_device_ops *dev; /* be->dev: NULL on host backends */
    r1_kernel_fn k[R1_K_COUNT];
    struct r1_pool *pool;
    int n_ctx, n_batch, n_past;
    struct r1_kv_cache kv;
    float *rope_cos, *rope_sin; /* (n_ctx, head_dim/2) */
    float *x;      /* (n_batch, dim) residual stream */
    float *xb;     /* (n_batch, dim) normed */
    float *qkv;    /* (n_batch, qkv rows) */
    float *att;    /* (n_batch, q_dim) */
    float *hb;     /* (n_batch, ffn) */
    float *logits; /* (vocab) */
    float *scratch; /* (threads, n_ctx) attention scores; device: dev->scratch_floats */
    /* device backends only */
    int32_t *d_ids;     /* (n_batch) token ids */
    int32_t *d_pos;     /* position of row 0 of the step */
    int32_t *d_id;      /* argmax result */
    float *d_logits;    /* (vocab) last-row logits */
    float *d_all;       /* (n_batch, vocab) every row, allocated on first all-logits call */
    void *graph;        /* the captured decode step */
    int use_graph;
    int profile;
    double us[R1_K_COUNT];
    long calls[R1_K_COUNT];
    _Alignas(64) int claim; /* op->claim: rows handed out to the threads */
    char claim_pad[60];
};

static void run(struct r1_session *s, struct r1_op *op) {
    if (s->dev) { /* queued on the device's stream from this thread */
        if (s->profile) {
            s->dev->sync();
            double t0 = r1_now();
            s->k[op->kernel](op, 0, 1);
            s->dev->sync();
            s->us[op->kernel] += (r1_now() - t0) * 1e6;
            s->calls[op->kernel]++;
        } else {
            s->k[op->kernel](op, 0, 1);
        }
    } else if (s->profile) {
        s->claim = 0;
        op->claim = &s->claim;
        double t0 = r1_now();
        r1_pool_run(s->pool, s->k[op->kernel], op);
        s->us[op->kernel] += (r1_now() - t0) * 1e6;
        s->calls[op->kernel]++;
    } else {
        s->claim = 0; /* published to the workers by r1_pool_run */
        op->claim = &s->claim;
        r1_pool_run(s->pool, s->k[op->kernel], op);
    }
}

/* Buffers of the forward pass: device memory on a device backend. */
static void *balloc(struct r1_session *s, size_t bytes, const char *what) {
    return s->dev ? s->dev->alloc(bytes, what) : r1_alloc(bytes, what);
}
static void bfree(struct r1_session *s, void *p) {
    if (s->dev) s->dev->free(p);
    else free(p);
}

r1_session_t *r1_session_new(r1_model_t *m, const struct r1_session_opts *opts) {
    struct r1_session_opts def = {.kv_dtype = R1_DTYPE_AUTO};
    if (!opts) opts = &def;
    const struct r1_config *c = &m->cfg;
    const char *bname = opts->backend ? opts->backend : "cpu";
    const struct r1_backend *be = r1_backend_find(bname);
    if (!be) return NULL;
    int n_ctx = opts->n_ctx > 0 ? opts->n_ctx : (c->max_pos < 4096 ? c->max_pos : 4096);
    if (n_ctx > c->max_pos) {
        r1_err("--ctx %d is larger than the model's max_position_embeddings %d", n_ctx, c->max_pos);
        return NULL;
    }
    enum r1_dtype kvt = opts->kv_dtype == R1_DTYPE_AUTO ? be->kv_dtype : opts->kv_dtype;
    if (kvt != R1_DTYPE_F32 && kvt != R1_DTYPE_F16) {
        r1_err("KV cache dtype must be f32 or f16");
        return NULL;
    }
    struct r1_session *s = calloc(1, sizeof *s);
    if (!s) {
        r1_err("out of memory");
        return NULL;
    }
    s->m = m;
    s->w = m;
    s->be = be;
    s->dev = be->dev;
    s->profile = opts->profile;
    if (r1_backend_resolve(be, s->k)) {
        free(s);
        return NULL;
    }
    int nth = opts->n_threads > 0 ? opts->n_threads : (!strcmp(be->name, "ref") ? 1 : r1_physical_cores());
    if (s->dev) nth = 1; /* one thread queues the kernels; the device runs them */
    s->pool = r1_pool_new(nth);
    if (!s->pool) {
        free(s);
        return NULL;
    }
    if (s->dev) {
        s->w = r1_device_model_get(m, be);
        if (!s->w) {
            char msg[1024];
            snprintf(msg, sizeof msg, "%s", r1_last_error());
            r1_session_free(s);
            r1_err("%s", msg);
            return NULL;
        }
        s->use_graph = s->dev->graph_begin != NULL;
    }
    s->n_ctx = n_ctx;
    s->n_batch = n_ctx < MAX_BATCH ? n_ctx : MAX_BATCH;
    const int hd = c->head_dim, qd = c->n_head * hd, nqkv = qd + 2 * c->n_kv_head * hd;
    s->kv = (struct r1_kv_cache){.dtype = kvt, .n_layer = c->n_layer, .n_kv_head = c->n_kv_head,
                                 .n_ctx = n_ctx, .head_dim = hd};
    size_t kv_bytes = (size_t)c->n_layer * c->n_kv_head * (size_t)n_ctx * hd * (kvt == R1_DTYPE_F16 ? 2 : 4);
    size_t nb = (size_t)s->n_batch;
    size_t scratch_floats = (size_t)nth * n_ctx;
    if (s->dev) scratch_floats = s->dev->scratch_floats(s->n_batch, c->n_head, hd, n_ctx);
    s->kv.k = balloc(s, kv_bytes, "the KV cache (keys)");
    s->kv.v = s->kv.k ? balloc(s, kv_bytes, "the KV cache (values)") : NULL;
    s->rope_cos = balloc(s, (size_t)n_ctx * hd / 2 * 4, "rope tables");
    s->rope_sin = balloc(s, (size_t)n_ctx * hd / 2 * 4, "rope tables");
    s->x = balloc(s, nb * c->dim * 4, "activations");
    s->xb = balloc(s, nb * c->dim * 4, "activations");
    s->qkv = balloc(s, nb * nqkv * 4, "activations");
    s->att = balloc(s, nb * qd * 4, "activations");
    s->hb = balloc(s, nb * c->ffn * 4, "activations");
    s->logits = r1_alloc((size_t)c->vocab * 4, "logits");
    s->scratch = balloc(s, scratch_floats * 4, "attention scratch");
    int dev_ok = 1;
    if (s->dev) {
        s->d_ids = balloc(s, nb * 4, "token ids");
        s->d_pos = balloc(s, 16, "the position");
        s->d_id = balloc(s, 16, "the argmax");
        s->d_logits = balloc(s, (size_t)c->vocab * 4, "logits");
        dev_ok = s->d_ids && s->d_pos && s->d_id && s->d_logits;
    }
    if (!s->kv.k || !s->kv.v || !s->rope_cos || !s->rope_sin || !s->x || !s->xb || !s->qkv ||
        !s->att || !s->hb || !s->logits || !s->scratch || !dev_ok) {
        char msg[1024];
        snprintf(msg, sizeof msg, "%s", r1_last_error());
        r1_session_free(s);
        r1_err("%s", msg);
        return NULL;
    }
    /* RoPE as transformers computes it: inv_freq in f32 (the model's, llama3
     * scaling included), angle = f32(pos) * inv_freq in f32 */
    float *rc = s->rope_cos, *rs = s->rope_sin;
    if (s->dev) { /* computed here, then uploaded */
        rc = r1_alloc((size_t)n_ctx * hd / 2 * 4, "rope tables");
        rs = r1_alloc((size_t)n_ctx * hd / 2 * 4, "rope tables");
    }
    if (rc && rs) {
        for (int i = 0; i < hd / 2; i++) {
            float inv = m->rope_inv_freq[i];
            for (int p = 0; p < n_ctx; p++) {
                float ang = (float)p * inv;
                rc[(size_t)p * (hd / 2) + i] = (float)cos((double)ang);
                rs[(size_t)p * (hd / 2) + i] = (float)sin((double)ang);
            }
        }
    }
    if (s->dev) {
        int rc_ok = rc && rs && !s->dev->upload(s->rope_cos, rc, (size_t)n_ctx * hd / 2 * 4) &&
                    !s->dev->upload(s->rope_sin, rs, (size_t)n_ctx * hd / 2 * 4) && !s->dev->sync();
        free(rc);
        free(rs);
        if (!rc_ok) {
            char msg[1024];
            snprintf(msg, sizeof msg, "%s", r1_last_error());
            r1_session_free(s);
            r1_err("%s", msg);
            return NULL;
        }
    }
    return s;
}

void r1_session_free(r1_session_t *s) {
    if (!s) return;
    if (s->pool) r1_pool_free(s->pool);
    if (s->dev) {
        s->dev->sync(); /* nothing queued may still use the buffers */
        if (s->graph) s->dev->graph_free(s->graph);
        bfree(s, s->d_ids);
        bfree(s, s->d_pos);
        bfree(s, s->d_id);
        bfree(s, s->d_logits);
        bfree(s, s->d_all);
        if (s->w != s->m) r1_device_model_put(s->w);
    }
    bfree(s, s->kv.k);
    bfree(s, s->kv.v);
    bfree(s, s->rope_cos);
    bfree(s, s->rope_sin);
    bfree(s, s->x);
    bfree(s, s->xb);
    bfree(s, s->qkv);
    bfree(s, s->att);
    bfree(s, s->hb);
    free(s->logits);
    bfree(s, s->scratch);
    free(s);
}

int r1_session_n_ctx(const r1_session_t *s) { return s->n_ctx; }
int r1_session_n_past(const r1_session_t *s) { return s->n_past; }
const char *r1_session_backend(const r1_session_t *s) { return s->be->name; }
int r1_session_vocab(const r1_session_t *s) { return s->m->cfg.vocab; }

int r1_session_skip(r1_session_t *s, int n) {
    if (n < 0 || n > s->n_ctx - s->n_past)
        return r1_err("cannot skip %d positions (%d cached, --ctx %d)", n, s->n_past, s->n_ctx);
    s->n_past += n;
    return 0;
}

int r1_session_truncate(r1_session_t *s, int n) {
    if (n < 0 || n > s->n_past) return r1_err("cannot truncate to %d tokens (%d cached)", n, s->n_past);
    s->n_past = n;
    return 0;
}

/* The kernel sequence of one batch of T tokens at positions n_past..: the
 * final norm + lm_head over every row into `out` when all_rows, else over the
 * last row. Buffers are the backend's (device pointers on a device backend);
 * pos_dev, when set, is the device copy of n_past (captured graphs). */
static void forward_ops(struct r1_session *s, const int32_t *ids, int T, int all_rows, float *out,
                        const int32_t *pos_dev) {
    const struct r1_model *m = s->w;
    const struct r1_config *c = &m->cfg;
    const int D = c->dim;
    struct r1_op base = {.T = T, .pos0 = s->n_past, .n_head = c->n_head, .n_kv_head = c->n_kv_head,
                         .head_dim = c->head_dim, .kv = &s->kv, .rope_cos = s->rope_cos,
                         .rope_sin = s->rope_sin, .scratch = s->scratch,
                         .scratch_stride = (size_t)s->n_ctx, .eps = c->eps, .n = D,
                         .pos_dev = pos_dev};
    struct r1_op op = base;
    op.kernel = R1_K_EMBEDDING, op.out = s->x, op.w = &m->emb, op.ids = ids;
    run(s, &op);
    for (int l = 0; l < c->n_layer; l++) {
        const struct r1_layer *L = &m->layers[l];
        base.layer = l;
        op = base, op.kernel = R1_K_RMS_NORM, op.out = s->xb, op.x = s->x, op.b = L->attn_norm;
        run(s, &op);
        op = base, op.kernel = R1_K_QKV_BIAS, op.out = s->qkv, op.x = s->xb, op.w = &L->wqkv, op.b = L->bqkv;
        run(s, &op);
        op = base, op.kernel = R1_K_ROPE_QK, op.out = s->qkv;
        run(s, &op);
        op = base, op.kernel = R1_K_KV_APPEND, op.x = s->qkv;
        run(s, &op);
        op = base, op.kernel = R1_K_ATTENTION_GQA, op.out = s->att, op.x = s->qkv;
        run(s, &op);
        op = base, op.kernel = R1_K_MATVEC_ADD, op.out = s->x, op.x = s->att, op.w = &L->wo;
        run(s, &op);
        op = base, op.kernel = R1_K_RMS_NORM, op.out = s->xb, op.x = s->x, op.b = L->ffn_norm;
        run(s, &op);
        op = base, op.kernel = R1_K_GATE_UP_SILU, op.out = s->hb, op.x = s->xb, op.w = &L->wgu;
        run(s, &op);
        op = base, op.kernel = R1_K_MATVEC_ADD, op.out = s->x, op.x = s->hb, op.w = &L->wdown;
        run(s, &op);
    }
    /* final norm + lm_head: every row when all logits are wanted, else the last */
    int rows = all_rows ? T : 1;
    const float *xin = all_rows ? s->x : s->x + (size_t)(T - 1) * D;
    op = base, op.kernel = R1_K_RMS_NORM, op.T = rows, op.out = s->xb, op.x = xin, op.b = m->out_norm;
    run(s, &op);
    op = base, op.kernel = R1_K_LM_HEAD, op.T = rows, op.out = out, op.x = s->xb, op.w = &m->lm_head;
    run(s, &op);
}

/* One batch of T tokens at positions n_past.. ; logits of every row into
 * all (if non-NULL), and of the last row into s->logits (on a device backend
 * only when want_logits: otherwise they stay in s->d_logits). 0, or -1 with
 * an error (device backends: a failed upload, launch or download). */
static int forward_batch(struct r1_session *s, const int32_t *ids, int T, float *all, int want_logits) {
    const int V = s->m->cfg.vocab;
    if (!s->dev) {
        forward_ops(s, ids, T, all != NULL, all ? all : s->logits, NULL);
        if (all) memcpy(s->logits, all + (size_t)(T - 1) * V, (size_t)V * sizeof(float));
        s->n_past += T;
        return 0;
    }
    const struct r1_device_ops *d = s->dev;
    int32_t pos = s->n_past;
    if (d->upload(s->d_ids, ids, (size_t)T * sizeof *ids) || d->upload(s->d_pos, &pos, sizeof pos))
        return -1;
    if (all && !s->d_all) {
        s->d_all = d->alloc((size_t)s->n_batch * V * sizeof(float), "all-rows logits");
        if (!s->d_all) return -1;
    }
    if (T == 1 && !all && s->use_graph && !s->profile) {
        if (!s->graph) { /* capture the decode step once; replays read the position from d_pos */
            if (d->graph_begin()) return -1;
            forward_ops(s, s->d_ids, 1, 0, s->d_logits, s->d_pos);
            s->graph = d->graph_end();
            if (!s->graph) return -1;
        }
        if (d->graph_launch(s->graph)) return -1;
    } else {
        forward_ops(s, s->d_ids, T, all != NULL, all ? s->d_all : s->d_logits, NULL);
    }
    s->n_past += T;
    if (all) {
        if (d->download(all, s->d_all, (size_t)T * V * sizeof(float))) return -1;
        memcpy(s->logits, all + (size_t)(T - 1) * V, (size_t)V * sizeof(float));
        /* the last row also where a following argmax looks for it */
        return d->upload(s->d_logits, s->logits, (size_t)V * sizeof(float));
    }
    return want_logits ? d->download(s->logits, s->d_logits, (size_t)V * sizeof(float)) : 0;
}

static int check_ids(const struct r1_session *s, const int32_t *ids, int n) {
    const struct r1_config *c = &s->m->cfg;
    if (n <= 0) return r1_err("no tokens to run");
    if (n > s->n_ctx - s->n_past)
        return r1_err("context full: %d tokens cached + %d new > --ctx %d", s->n_past, n, s->n_ctx);
    for (int i = 0; i < n; i++)
        if (ids[i] < 0 || ids[i] >= c->vocab)
            return r1_err("token id %d at position %d is outside the vocabulary (0..%d)", ids[i], i,
                          c->vocab - 1);
    return 0;
}

/* All batches of n tokens; logits wanted back on the host or not. */
static int forward_all(r1_session_t *s, const int32_t *ids, int n, float *all_logits, int want) {
    const struct r1_config *c = &s->m->cfg;
    if (check_ids(s, ids, n)) return -1;
    int past = s->n_past;
    for (int i = 0; i < n; i += s->n_batch) {
        int T = n - i < s->n_batch ? n - i : s->n_batch;
        if (forward_batch(s, ids + i, T, all_logits ? all_logits + (size_t)i * c->vocab : NULL,
                          want && i + T == n)) {
            s->n_past = past; /* the cache rows written are ignored past n_past */
            return -1;
        }
    }
    return 0;
}

const float *r1_session_forward(r1_session_t *s, const int32_t *ids, int n, float *all_logits) {
    return forward_all(s, ids, n, all_logits, 1) ? NULL : s->logits;
}

int32_t r1_session_forward_argmax(r1_session_t *s, const int32_t *ids, int n) {
    if (forward_all(s, ids, n, NULL, 0)) return -1;
    int32_t id = -1;
    struct r1_op op = {.kernel = R1_K_ARGMAX, .T = 1, .n = s->m->cfg.vocab};
    if (!s->dev) {
        op.x = s->logits, op.out_id = &id;
        run(s, &op);
        return id;
    }
    op.x = s->d_logits, op.out_id = s->d_id;
    run(s, &op);
    if (s->dev->download(&id, s->d_id, sizeof id)) return -1;
    return id;
}

int r1_session_profile(const r1_session_t *s, const char **names, double *us, long *calls, int cap) {
    int n = 0;
    for (int k = 0; k < R1_K_COUNT && n < cap; k++, n++) {
        names[n] = r1_kernel_names[k];
        us[n] = s->us[k];
        calls[n] = s->calls[k];
    }
    return n;
}

void r1_session_profile_reset(r1_session_t *s) {
    memset(s->us, 0, sizeof s->us);
    memset(s->calls, 0, sizeof s->calls);
}
