/*
 * session.c - one conversation: KV cache, scratch buffers, thread pool and
 * the forward pass as a fixed sequence of kernel calls through the resolved
 * backend table. Everything is allocated in r1_session_new; the forward
 * pass allocates nothing.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/kernels.h"
#include "model/model.h"
#include "runtime/pool.h"

#define MAX_BATCH 512

struct r1_session {
    struct r1_model *m;
    const struct r1_backend *be;
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
    float *scratch; /* (threads, n_ctx) attention scores */
    int profile;
    double us[R1_K_COUNT];
    long calls[R1_K_COUNT];
};

static void run(struct r1_session *s, struct r1_op *op) {
    if (s->profile) {
        double t0 = r1_now();
        r1_pool_run(s->pool, s->k[op->kernel], op);
        s->us[op->kernel] += (r1_now() - t0) * 1e6;
        s->calls[op->kernel]++;
    } else {
        r1_pool_run(s->pool, s->k[op->kernel], op);
    }
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
    s->be = be;
    s->profile = opts->profile;
    if (r1_backend_resolve(be, s->k)) {
        free(s);
        return NULL;
    }
    int nth = opts->n_threads > 0 ? opts->n_threads : (!strcmp(be->name, "ref") ? 1 : r1_physical_cores());
    s->pool = r1_pool_new(nth);
    if (!s->pool) {
        free(s);
        return NULL;
    }
    s->n_ctx = n_ctx;
    s->n_batch = n_ctx < MAX_BATCH ? n_ctx : MAX_BATCH;
    const int hd = c->head_dim, qd = c->n_head * hd, nqkv = qd + 2 * c->n_kv_head * hd;
    s->kv = (struct r1_kv_cache){.dtype = kvt, .n_layer = c->n_layer, .n_kv_head = c->n_kv_head,
                                 .n_ctx = n_ctx, .head_dim = hd};
    size_t kv_bytes = (size_t)c->n_layer * c->n_kv_head * (size_t)n_ctx * hd * (kvt == R1_DTYPE_F16 ? 2 : 4);
    size_t nb = (size_t)s->n_batch;
    s->kv.k = r1_alloc(kv_bytes, "the KV cache (keys)");
    s->kv.v = r1_alloc(kv_bytes, "the KV cache (values)");
    s->rope_cos = r1_alloc((size_t)n_ctx * hd / 2 * 4, "rope tables");
    s->rope_sin = r1_alloc((size_t)n_ctx * hd / 2 * 4, "rope tables");
    s->x = r1_alloc(nb * c->dim * 4, "activations");
    s->xb = r1_alloc(nb * c->dim * 4, "activations");
    s->qkv = r1_alloc(nb * nqkv * 4, "activations");
    s->att = r1_alloc(nb * qd * 4, "activations");
    s->hb = r1_alloc(nb * c->ffn * 4, "activations");
    s->logits = r1_alloc((size_t)c->vocab * 4, "logits");
    s->scratch = r1_alloc((size_t)nth * n_ctx * 4, "attention scratch");
    if (!s->kv.k || !s->kv.v || !s->rope_cos || !s->rope_sin || !s->x || !s->xb || !s->qkv ||
        !s->att || !s->hb || !s->logits || !s->scratch) {
        char msg[1024];
        snprintf(msg, sizeof msg, "%s", r1_last_error());
        r1_session_free(s);
        r1_err("%s", msg);
        return NULL;
    }
    /* RoPE as transformers computes it: inv_freq in f32, angle = f32(pos) * inv_freq in f32 */
    for (int i = 0; i < hd / 2; i++) {
        float inv = (float)(1.0 / pow((double)c->rope_theta, (double)(2 * i) / (double)hd));
        for (int p = 0; p < n_ctx; p++) {
            float ang = (float)p * inv;
            s->rope_cos[(size_t)p * (hd / 2) + i] = (float)cos((double)ang);
            s->rope_sin[(size_t)p * (hd / 2) + i] = (float)sin((double)ang);
        }
    }
    return s;
}

void r1_session_free(r1_session_t *s) {
    if (!s) return;
    if (s->pool) r1_pool_free(s->pool);
    free(s->kv.k);
    free(s->kv.v);
    free(s->rope_cos);
    free(s->rope_sin);
    free(s->x);
    free(s->xb);
    free(s->qkv);
    free(s->att);
    free(s->hb);
    free(s->logits);
    free(s->scratch);
    free(s);
}

int r1_session_n_ctx(const r1_session_t *s) { return s->n_ctx; }
int r1_session_n_past(const r1_session_t *s) { return s->n_past; }
const char *r1_session_backend(const r1_session_t *s) { return s->be->name; }

int r1_session_truncate(r1_session_t *s, int n) {
    if (n < 0 || n > s->n_past) return r1_err("cannot truncate to %d tokens (%d cached)", n, s->n_past);
    s->n_past = n;
    return 0;
}

/* One batch of T tokens at positions n_past.. ; logits of every row into
 * all (if non-NULL), and of the last row into s->logits. */
static void forward_batch(struct r1_session *s, const int32_t *ids, int T, float *all) {
    const struct r1_model *m = s->m;
    const struct r1_config *c = &m->cfg;
    const int D = c->dim;
    struct r1_op base = {.T = T, .pos0 = s->n_past, .n_head = c->n_head, .n_kv_head = c->n_kv_head,
                         .head_dim = c->head_dim, .kv = &s->kv, .rope_cos = s->rope_cos,
                         .rope_sin = s->rope_sin, .scratch = s->scratch,
                         .scratch_stride = (size_t)s->n_ctx, .eps = c->eps, .n = D};
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
    int rows = all ? T : 1;
    const float *xin = all ? s->x : s->x + (size_t)(T - 1) * D;
    op = base, op.kernel = R1_K_RMS_NORM, op.T = rows, op.out = s->xb, op.x = xin, op.b = m->out_norm;
    run(s, &op);
    op = base, op.kernel = R1_K_LM_HEAD, op.T = rows, op.out = all ? all : s->logits, op.x = s->xb,
    op.w = &m->lm_head;
    run(s, &op);
    if (all) memcpy(s->logits, all + (size_t)(T - 1) * c->vocab, (size_t)c->vocab * sizeof(float));
    s->n_past += T;
}

const float *r1_session_forward(r1_session_t *s, const int32_t *ids, int n, float *all_logits) {
    const struct r1_config *c = &s->m->cfg;
    if (n <= 0) {
        r1_err("no tokens to run");
        return NULL;
    }
    if (n > s->n_ctx - s->n_past) {
        r1_err("context full: %d tokens cached + %d new > --ctx %d", s->n_past, n, s->n_ctx);
        return NULL;
    }
    for (int i = 0; i < n; i++)
        if (ids[i] < 0 || ids[i] >= c->vocab) {
            r1_err("token id %d at position %d is outside the vocabulary (0..%d)", ids[i], i, c->vocab - 1);
            return NULL;
        }
    for (int i = 0; i < n; i += s->n_batch) {
        int T = n - i < s->n_batch ? n - i : s->n_batch;
        forward_batch(s, ids + i, T, all_logits ? all_logits + (size_t)i * c->vocab : NULL);
    }
    return s->logits;
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
