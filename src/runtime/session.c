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
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "kernels/kernels.h"
#include "model/model.h"
#include "model/tp.h"
#include "runtime/comm.h"
#include "runtime/device.h"
#include "runtime/pool.h"
#include "runtime/session.h"
#include "runtime/job.h"

#define MAX_BATCH 512

struct r1_session {
    struct r1_model *m;
    int tp_local;             /* tensor parallel: the next step's logits stay this rank's rows (no gather) */
    int tp_root;              /* tensor parallel: logits are gathered on rank 0 only (a batch that leads or follows) */
    const struct r1_model *w; /* weights the kernels read: m, or its device copy */
    const struct r1_backend *be;
    const struct r1_device_ops *dev; /* be->dev: NULL on host backends */
    r1_kernel_fn k[R1_K_COUNT];
    struct r1_pool *pool;
    int n_ctx, n_batch, n_past;
    struct r1_kv_cache kv; /* sequence 0: the session's own; kvs[0] of a batch */
    /* batches (r1_batch_*): the KV pool, one cache per sequence, one
     * allocation for all; n_seq == 1 for a plain session */
    int n_seq;
    struct r1_kv_cache *kvs; /* (n_seq) views into kv.k / kv.v */
    int *seq_past;           /* (n_seq) positions cached per sequence */
    int *seen;               /* (n_seq) step stamp: sequences must be one run */
    int stamp;
    int32_t *row_seq, *row_pos, *out_rows; /* (n_batch) the step's rows */
    float *gather;                         /* (n_batch, dim) rows whose logits are wanted */
    float *rope_cos, *rope_sin;            /* (n_ctx, head_dim/2) */
    /* host backends: the rope rows computed so far (filled as positions are
     * reached: a context of the model's whole length costs what is used),
     * and whether the KV cache asks for huge pages yet */
    int rope_n, kv_huge;
    size_t kv_bytes;
    float *x;       /* (n_batch, dim) residual stream */
    float *xb;      /* (n_batch, dim) normed */
    float *qkv;     /* (n_batch, qkv rows) */
    float *att;     /* (n_batch, q_dim) */
    float *hb;      /* (n_batch, ffn) */
    float *logits;  /* (vocab) */
    float *scratch; /* (threads, n_ctx) attention scores; device: dev->scratch_floats */
    /* device backends only */
    int32_t *d_ids;  /* (n_batch) token ids */
    int32_t *d_pos;  /* position of row 0 of the step */
    int32_t *d_id;   /* argmax result */
    float *d_logits; /* (vocab) last-row logits */
    float *d_all;    /* (n_batch, vocab) every row, allocated on first all-logits call */
    void *graph;     /* the captured decode step */
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

/* RoPE rows [p0, p1) as transformers computes them: inv_freq in f32 (the
 * model's, llama3 scaling included), angle = f32(pos) * inv_freq in f32 */
void r1_rope_rows(const struct r1_model *m, float *rc, float *rs, int p0, int p1) {
    const int half = m->cfg.head_dim / 2;
    for (int p = p0; p < p1; p++)
        for (int i = 0; i < half; i++) {
            float ang = (float)p * m->rope_inv_freq[i];
            rc[(size_t)p * half + i] = (float)cos((double)ang);
            rs[(size_t)p * half + i] = (float)sin((double)ang);
        }
}

int r1_session_rope_host(const r1_session_t *s, const float **cos_tab, const float **sin_tab) {
    if (s->dev) return -1;
    *cos_tab = s->rope_cos, *sin_tab = s->rope_sin;
    return s->rope_n;
}

/* Host KV cache pages. Each (layer, KV head) of a sequence is one run of
 * n_ctx rows, and a huge page holds the first 2 MiB of every run: a long
 * context on huge pages commits runs x 2 MiB at its first token (hundreds
 * of MB for a 1.5B). Small pages until a run's rows fill 2 MiB, huge pages
 * from then on (the TLB win is a long context's). */
#define KV_HUGE ((size_t)2 << 20)
static void kv_pages(struct r1_session *s, int upto) {
    if (s->kv_huge || !s->kv.k || !s->kv.v) return;
    const int huge = (size_t)upto * r1_dtype_row_bytes(s->kv.dtype, s->kv.head_dim) >= KV_HUGE;
#if defined(MADV_HUGEPAGE) && defined(MADV_NOHUGEPAGE)
    if (s->kv_bytes >= ((size_t)32 << 20)) { /* what r1_alloc_untouched puts on 2 MiB boundaries */
        const size_t n = (s->kv_bytes + KV_HUGE - 1) & ~(KV_HUGE - 1);
        madvise(s->kv.k, n, huge ? MADV_HUGEPAGE : MADV_NOHUGEPAGE);
        madvise(s->kv.v, n, huge ? MADV_HUGEPAGE : MADV_NOHUGEPAGE);
    }
#endif
    s->kv_huge = huge;
}

/* Host backends, before a step whose rows reach position upto - 1: the rope
 * rows computed (1024 positions at a time) and the KV pages advised. */
static void host_positions(struct r1_session *s, int upto) {
    if (s->dev) return;
    if (upto > s->rope_n) {
        int to = (upto + 1023) / 1024 * 1024;
        if (to > s->n_ctx) to = s->n_ctx;
        r1_rope_rows(s->w, s->rope_cos, s->rope_sin, s->rope_n, to);
        s->rope_n = to;
    }
    kv_pages(s, upto);
}

static r1_session_t *session_create(r1_model_t *m, const struct r1_session_opts *opts, int n_seq, int n_batch) {
    struct r1_session_opts def = {.kv_dtype = R1_DTYPE_AUTO};
    if (!opts) opts = &def;
    const struct r1_config *c = &m->cfg;
    const char *bname = opts->backend ? opts->backend : "cpu";
    const struct r1_backend *be = r1_backend_find(bname);
    if (!be) return NULL;
    int n_ctx = opts->n_ctx > 0 ? opts->n_ctx : r1_ctx_default(m, n_seq, opts->kv_dtype, bname, NULL, 0);
    if (n_ctx > c->max_pos) {
        r1_err("--ctx %d is larger than the model's max_position_embeddings %d", n_ctx, c->max_pos);
        return NULL;
    }
    enum r1_dtype kvt = opts->kv_dtype == R1_DTYPE_AUTO ? be->kv_dtype : opts->kv_dtype;
    if (kvt != R1_DTYPE_F32 && kvt != R1_DTYPE_F16 && kvt != R1_DTYPE_Q8_0) {
        r1_err("the KV cache dtype must be f32, f16 or q8_0, not %s", r1_dtype_name(kvt));
        return NULL;
    }
    if (kvt == R1_DTYPE_Q8_0 && c->head_dim % R1_QK) {
        r1_err("--kv q8_0 needs a head_dim that is a multiple of %d (this model's is %d); use --kv f16", R1_QK,
               c->head_dim);
        return NULL;
    }
    struct r1_session *s = calloc(1, sizeof *s);
    if (!s) {
        r1_err("out of memory");
        return NULL;
    }
    if (m->tp && be->dev) {
        free(s);
        r1_err("tensor parallelism runs on the cpu and ref backends, not %s", be->name);
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
    if (n_batch <= 0) n_batch = MAX_BATCH;
    if (n_seq == 1 && n_batch > n_ctx) n_batch = n_ctx;
    s->n_batch = n_batch;
    s->n_seq = n_seq;
    const int hd = c->head_dim, qd = c->n_head * hd, nqkv = qd + 2 * c->n_kv_head * hd;
    s->kv = (struct r1_kv_cache){
        .dtype = kvt, .n_layer = c->n_layer, .n_kv_head = c->n_kv_head, .n_ctx = n_ctx, .head_dim = hd};
    size_t seq_bytes = (size_t)c->n_layer * c->n_kv_head * (size_t)n_ctx * r1_dtype_row_bytes(kvt, hd);
    if (seq_bytes > SIZE_MAX / 2 / (size_t)n_seq) {
        r1_session_free(s);
        r1_err("a KV pool of %d sequences x %d positions does not fit in memory", n_seq, n_ctx);
        return NULL;
    }
    size_t kv_bytes = seq_bytes * (size_t)n_seq;
    size_t nb = (size_t)s->n_batch;
    size_t scratch_floats = (size_t)nth * n_ctx;
    if (s->dev) scratch_floats = s->dev->scratch_floats(s->n_batch, c->n_head, hd, n_ctx);
    /* host memory: pages committed as positions are written (a context of
     * the model's whole length costs what the conversation uses) */
    s->kv.k = s->dev ? balloc(s, kv_bytes, "the KV cache (keys)") : r1_alloc_untouched(kv_bytes, "the KV cache (keys)");
    s->kv.v = !s->kv.k ? NULL
              : s->dev ? balloc(s, kv_bytes, "the KV cache (values)")
                       : r1_alloc_untouched(kv_bytes, "the KV cache (values)");
    s->kv_bytes = kv_bytes;
    if (!s->dev) kv_pages(s, 0);
    if (s->dev) {
        s->rope_cos = balloc(s, (size_t)n_ctx * hd / 2 * 4, "rope tables");
        s->rope_sin = balloc(s, (size_t)n_ctx * hd / 2 * 4, "rope tables");
    } else {
        s->rope_cos = r1_alloc_untouched((size_t)n_ctx * hd / 2 * 4, "rope tables");
        s->rope_sin = r1_alloc_untouched((size_t)n_ctx * hd / 2 * 4, "rope tables");
    }
    s->x = balloc(s, nb * c->dim * 4, "activations");
    s->xb = balloc(s, nb * c->dim * 4, "activations");
    s->qkv = balloc(s, nb * nqkv * 4, "activations");
    s->att = balloc(s, nb * qd * 4, "activations");
    s->hb = balloc(s, nb * c->ffn * 4, "activations");
    s->logits = r1_alloc((size_t)c->vocab * 4, "logits");
    s->scratch = balloc(s, scratch_floats * 4, "attention scratch");
    s->kvs = calloc((size_t)n_seq, sizeof *s->kvs);
    s->seq_past = calloc((size_t)n_seq, sizeof *s->seq_past);
    s->seen = calloc((size_t)n_seq, sizeof *s->seen);
    s->row_seq = malloc(nb * sizeof(int32_t));
    s->row_pos = malloc(nb * sizeof(int32_t));
    s->out_rows = malloc(nb * sizeof(int32_t));
    s->gather = s->dev ? NULL : r1_alloc(nb * c->dim * 4, "activations");
    if (!s->kvs || !s->seq_past || !s->seen || !s->row_seq || !s->row_pos || !s->out_rows || (!s->dev && !s->gather)) {
        r1_session_free(s);
        r1_err("out of memory for the batch state");
        return NULL;
    }
    for (int q = 0; q < n_seq && s->kv.k && s->kv.v; q++) {
        s->kvs[q] = s->kv;
        s->kvs[q].k = (uint8_t *)s->kv.k + seq_bytes * (size_t)q;
        s->kvs[q].v = (uint8_t *)s->kv.v + seq_bytes * (size_t)q;
    }
    int dev_ok = 1;
    if (s->dev) {
        s->d_ids = balloc(s, nb * 4, "token ids");
        s->d_pos = balloc(s, 16, "the position");
        s->d_id = balloc(s, 16, "the argmax");
        s->d_logits = balloc(s, (size_t)c->vocab * 4, "logits");
        dev_ok = s->d_ids && s->d_pos && s->d_id && s->d_logits;
    }
    if (!s->kv.k || !s->kv.v || !s->rope_cos || !s->rope_sin || !s->x || !s->xb || !s->qkv || !s->att || !s->hb ||
        !s->logits || !s->scratch || !dev_ok) {
        char msg[1024];
        snprintf(msg, sizeof msg, "%s", r1_last_error());
        r1_session_free(s);
        r1_err("%s", msg);
        return NULL;
    }
    if (s->dev) { /* the whole table computed here, then uploaded */
        float *rc = r1_alloc((size_t)n_ctx * hd / 2 * 4, "rope tables");
        float *rs = r1_alloc((size_t)n_ctx * hd / 2 * 4, "rope tables");
        if (rc && rs) r1_rope_rows(m, rc, rs, 0, n_ctx);
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
    free(s->kvs);
    free(s->seq_past);
    free(s->seen);
    free(s->row_seq);
    free(s->row_pos);
    free(s->out_rows);
    free(s->gather);
    free(s);
}

r1_session_t *r1_session_new(r1_model_t *m, const struct r1_session_opts *opts) {
    return session_create(m, opts, 1, 0);
}

int r1_session_n_ctx(const r1_session_t *s) { return s->n_ctx; }
int r1_session_n_past(const r1_session_t *s) { return s->n_past; }
const char *r1_session_backend(const r1_session_t *s) { return s->be->name; }
int r1_session_vocab(const r1_session_t *s) { return s->m->cfg.vocab; }

int r1_session_skip(r1_session_t *s, int n) {
    if (n < 0 || n > s->n_ctx - s->n_past)
        return r1_err("cannot skip %d positions (%d cached, --ctx %d)", n, s->n_past, s->n_ctx);
    if (!s->dev && n > 0) { /* zeros written: real pages, as a prefill would leave them */
        const struct r1_kv_cache *kv = &s->kv;
        const size_t row = r1_dtype_row_bytes(kv->dtype, kv->head_dim);
        for (int lh = 0; lh < kv->n_layer * kv->n_kv_head; lh++) {
            size_t at = ((size_t)lh * kv->n_ctx + (size_t)s->n_past) * row;
            memset((uint8_t *)kv->k + at, 0, (size_t)n * row);
            memset((uint8_t *)kv->v + at, 0, (size_t)n * row);
        }
    }
    s->n_past += n;
    return 0;
}

int r1_session_truncate(r1_session_t *s, int n) {
    if (n < 0 || n > s->n_past) return r1_err("cannot truncate to %d tokens (%d cached)", n, s->n_past);
    s->n_past = n;
    return 0;
}

/* Which rows of a step go through the final norm + lm_head. */
struct out_sel {
    int all_rows;        /* every row, in order */
    const int32_t *rows; /* else these n rows (host backends; gathered first) */
    int n;               /* else (rows NULL) the last row */
};

/* The kernel sequence of one batch of T tokens: row t of sequence seq[t] at
 * position pos[t] (seq and pos NULL: every row in kv at pos0 + t); the final
 * norm + lm_head over the rows `sel` picks into `out`. Buffers are the
 * backend's (device pointers on a device backend); pos_dev, when set, is the
 * device copy of pos0 (captured graphs). */
static void forward_ops(struct r1_session *s, const int32_t *ids, int T, int pos0, struct r1_kv_cache *kv,
                        const int32_t *seq, const int32_t *pos, struct out_sel sel, float *out,
                        const int32_t *pos_dev) {
    const struct r1_model *m = s->w;
    const struct r1_config *c = &m->cfg;
    const int D = c->dim;
    if (!s->dev) { /* pos is a host array here */
        int upto = pos0 + T;
        if (pos)
            for (int t = 0; t < T; t++) upto = pos[t] + 1 > upto ? pos[t] + 1 : upto;
        host_positions(s, upto);
    }
    struct r1_op base = {.T = T,
                         .pos0 = pos0,
                         .seq = seq,
                         .pos = pos,
                         .n_head = c->n_head,
                         .n_kv_head = c->n_kv_head,
                         .head_dim = c->head_dim,
                         .kv = kv,
                         .rope_cos = s->rope_cos,
                         .rope_sin = s->rope_sin,
                         .scratch = s->scratch,
                         .scratch_stride = (size_t)s->n_ctx,
                         .eps = c->eps,
                         .n = D,
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
        if (m->tp) r1_tp_partial_begin(m->tp, s->x, (size_t)T * D);
        run(s, &op);
        if (m->tp) r1_tp_partial_end(m->tp, s->x, (size_t)T * D);
        op = base, op.kernel = R1_K_RMS_NORM, op.out = s->xb, op.x = s->x, op.b = L->ffn_norm;
        run(s, &op);
        op = base, op.kernel = R1_K_GATE_UP_SILU, op.out = s->hb, op.x = s->xb, op.w = &L->wgu;
        run(s, &op);
        op = base, op.kernel = R1_K_MATVEC_ADD, op.out = s->x, op.x = s->hb, op.w = &L->wdown;
        if (m->tp) r1_tp_partial_begin(m->tp, s->x, (size_t)T * D);
        run(s, &op);
        if (m->tp) r1_tp_partial_end(m->tp, s->x, (size_t)T * D);
    }
    /* final norm + lm_head: every row when all logits are wanted, the picked
     * rows (gathered), else the last */
    int rows = sel.all_rows ? T : sel.rows ? sel.n : 1;
    if (rows == 0) return; /* a step whose logits nobody wants */
    const float *xin = sel.all_rows ? s->x : s->x + (size_t)(T - 1) * D;
    if (sel.rows) {
        for (int i = 0; i < sel.n; i++)
            memcpy(s->gather + (size_t)i * D, s->x + (size_t)sel.rows[i] * D, (size_t)D * sizeof(float));
        xin = s->gather;
    }
    op = base, op.kernel = R1_K_RMS_NORM, op.T = rows, op.out = s->xb, op.x = xin, op.b = m->out_norm;
    run(s, &op);
    op = base, op.kernel = R1_K_LM_HEAD, op.T = rows, op.out = out, op.x = s->xb, op.w = &m->lm_head;
    if (!m->tp) {
        run(s, &op);
        return;
    }
    for (int i = 0; i < rows; i++) { /* this rank's vocabulary rows, then everyone's */
        const size_t V = (size_t)c->vocab;
        op.T = 1, op.x = s->xb + (size_t)i * D, op.out = out + i * V + m->tp->v0;
        run(s, &op);
        if (s->tp_local) continue;
        if (s->tp_root) r1_tp_gather_logits_root(m->tp, out + i * V);
        else r1_tp_gather_logits(m->tp, out + i * V);
    }
}

/* One batch of T tokens at positions n_past.. ; logits of every row into
 * all (if non-NULL), and of the last row into s->logits (on a device backend
 * only when want_logits: otherwise they stay in s->d_logits). 0, or -1 with
 * an error (device backends: a failed upload, launch or download). */
static int forward_batch(struct r1_session *s, const int32_t *ids, int T, float *all, int want_logits) {
    const int V = s->m->cfg.vocab;
    if (!s->dev) {
        forward_ops(s, ids, T, s->n_past, &s->kv, NULL, NULL, (struct out_sel){.all_rows = all != NULL},
                    all ? all : s->logits, NULL);
        if (all) memcpy(s->logits, all + (size_t)(T - 1) * V, (size_t)V * sizeof(float));
        s->n_past += T;
        return 0;
    }
    const struct r1_device_ops *d = s->dev;
    int32_t pos = s->n_past;
    if (d->upload(s->d_ids, ids, (size_t)T * sizeof *ids) || d->upload(s->d_pos, &pos, sizeof pos)) return -1;
    if (all && !s->d_all) {
        s->d_all = d->alloc((size_t)s->n_batch * V * sizeof(float), "all-rows logits");
        if (!s->d_all) return -1;
    }
    /* capture the decode step once; replays read the position from d_pos. graph_begin > 0: the
     * backend has graphs turned off, so the step launches directly */
    int graph = T == 1 && !all && s->use_graph && !s->profile;
    if (graph && !s->graph) {
        int rc = d->graph_begin();
        if (rc < 0) return -1;
        if (rc == 0) {
            forward_ops(s, s->d_ids, 1, s->n_past, &s->kv, NULL, NULL, (struct out_sel){0}, s->d_logits, s->d_pos);
            s->graph = d->graph_end();
            if (!s->graph) return -1;
        }
    }
    if (graph && s->graph) {
        if (d->graph_launch(s->graph)) return -1;
    } else {
        forward_ops(s, s->d_ids, T, s->n_past, &s->kv, NULL, NULL, (struct out_sel){.all_rows = all != NULL},
                    all ? s->d_all : s->d_logits, NULL);
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
            return r1_err("token id %d at position %d is outside the vocabulary (0..%d)", ids[i], i, c->vocab - 1);
    return 0;
}

/* All batches of n tokens; logits wanted back on the host or not. */
static int forward_all(r1_session_t *s, const int32_t *ids, int n, float *all_logits, int want) {
    const struct r1_config *c = &s->m->cfg;
    if (check_ids(s, ids, n)) return -1;
    int past = s->n_past;
    for (int i = 0; i < n; i += s->n_batch) {
        int T = n - i < s->n_batch ? n - i : s->n_batch;
        if (forward_batch(s, ids + i, T, all_logits ? all_logits + (size_t)i * c->vocab : NULL, want && i + T == n)) {
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
    const struct r1_tp *tp = s->m->tp;
    if (tp && !s->dev) { /* each rank's best of its vocabulary rows, then the best of those */
        s->tp_local = 1;
        int rc = forward_all(s, ids, n, NULL, 0);
        s->tp_local = 0;
        if (rc) return -1;
        int id = tp->v0 + r1_argmax(s->logits + tp->v0, tp->v1 - tp->v0);
        float v = s->logits[id];
        r1_comm_argmax_f32(&v, &id);
        return id;
    }
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

/* ------------------------------------------------------------- batches */

/* A batch is a session whose KV pool holds n_seq caches; steps take rows of
 * any of them (continuous batching). */
struct r1_batch {
    struct r1_session *s;
    int lead; /* rank 0 of a tensor-parallel job, leading (opts.lead): see "lead" below */
    pthread_mutex_t mu;
    int32_t *l_rows; /* the leader's copy of a step's rows, as broadcast */
    float *f_logits; /* a follower's logits rows (grown to the most a step asked for) */
    int f_rows;
};

/* lead: the other ranks of a tensor-parallel job hold the same pool (their
 * share of every head) and run r1_batch_follow: each call that changes the
 * pool is first broadcast from rank 0 as a command (a step's rows after
 * it), then run by every rank, so that all take the same steps in the same
 * order. The mutex keeps one command and its collectives apart from
 * another's: the server's threads call in from several threads. */
enum { LEAD_STEP = 1, LEAD_TRUNCATE, LEAD_SKIP, LEAD_COPY, LEAD_QUIT };
struct lead_cmd {
    int32_t op, a, b, n, want; /* want: a step's want flags follow its rows */
};

static void lead_send(struct r1_batch *b, struct lead_cmd c) {
    pthread_mutex_lock(&b->mu);
    r1_comm_bcast_idle(&c, sizeof c, 0); /* the followers wait for it this way */
}

static int lead_done(struct r1_batch *b, int rc) {
    pthread_mutex_unlock(&b->mu);
    return rc;
}

r1_batch_t *r1_batch_new(r1_model_t *m, const struct r1_batch_opts *o) {
    if (o->n_seq < 1) return r1_err("a batch needs at least one sequence (--parallel)"), NULL;
    if (o->n_batch < 0 || o->n_batch > 65536)
        return r1_err("rows per step (--batch-tokens) must be 1..65536, not %d", o->n_batch), NULL;
    struct r1_batch *b = calloc(1, sizeof *b);
    if (!b) return r1_err("out of memory"), NULL;
    struct r1_session_opts so = {.n_ctx = o->n_ctx,
                                 .backend = o->backend,
                                 .n_threads = o->n_threads,
                                 .kv_dtype = o->kv_dtype,
                                 .profile = o->profile};
    b->s = session_create(m, &so, o->n_seq, o->n_batch);
    pthread_mutex_init(&b->mu, NULL);
    if (o->lead && m->tp && r1_comm_size() > 1 && r1_comm_rank() == 0) {
        if (b->s && !(b->l_rows = malloc((size_t)3 * b->s->n_batch * sizeof *b->l_rows))) {
            r1_session_free(b->s), b->s = NULL;
            r1_err("out of memory for the step rows");
        }
        /* the followers make the same pool (or hear that there is none), then say whether they could */
        int32_t shape[4] = {b->s ? b->s->n_seq : 0, b->s ? b->s->n_ctx : 0, b->s ? b->s->n_batch : 0, o->kv_dtype};
        r1_comm_bcast(shape, sizeof shape, 0);
        if (b->s) {
            float failed = 0;
            r1_comm_allreduce_sum_f32(&failed, 1);
            b->lead = 1;
            b->s->tp_root = 1; /* rank 0 samples: only it needs the logits */
            if (failed) {      /* the ones that could wait for a command: QUIT */
                r1_batch_free(b);
                return r1_err("%.0f of the other ranks could not make the KV pool (%d sequences x %d positions): "
                              "out of memory?",
                              failed, shape[0], shape[1]),
                       NULL;
            }
        }
    }
    if (!b->s) {
        pthread_mutex_destroy(&b->mu);
        free(b);
        return NULL;
    }
    return b;
}

void r1_batch_free(r1_batch_t *b) {
    if (!b) return;
    if (b->lead) {
        lead_send(b, (struct lead_cmd){.op = LEAD_QUIT});
        lead_done(b, 0);
    }
    r1_session_free(b->s);
    free(b->l_rows);
    pthread_mutex_destroy(&b->mu);
    free(b->f_logits);
    free(b);
}

int r1_batch_profile(const r1_batch_t *b, const char **names, double *us, long *calls, int cap) {
    return r1_session_profile(b->s, names, us, calls, cap);
}
void r1_batch_profile_reset(r1_batch_t *b) { r1_session_profile_reset(b->s); }
int r1_batch_n_seq(const r1_batch_t *b) { return b->s->n_seq; }
int r1_batch_n_ctx(const r1_batch_t *b) { return b->s->n_ctx; }
int r1_batch_n_batch(const r1_batch_t *b) { return b->s->n_batch; }
const char *r1_batch_backend(const r1_batch_t *b) { return b->s->be->name; }

int r1_batch_seq_n_past(const r1_batch_t *b, int seq) {
    if (seq < 0 || seq >= b->s->n_seq) return r1_err("no sequence %d (the pool has %d)", seq, b->s->n_seq);
    return b->s->seq_past[seq];
}

static int seq_truncate(r1_batch_t *b, int seq, int n) {
    struct r1_session *s = b->s;
    if (seq < 0 || seq >= s->n_seq) return r1_err("no sequence %d (the pool has %d)", seq, s->n_seq);
    if (n < 0 || n > s->seq_past[seq])
        return r1_err("cannot truncate sequence %d to %d tokens (%d cached)", seq, n, s->seq_past[seq]);
    s->seq_past[seq] = n;
    return 0;
}

static int seq_skip(r1_batch_t *b, int seq, int n) {
    struct r1_session *s = b->s;
    if (seq < 0 || seq >= s->n_seq) return r1_err("no sequence %d (the pool has %d)", seq, s->n_seq);
    if (n < 0 || n > s->n_ctx - s->seq_past[seq])
        return r1_err("cannot skip %d positions of sequence %d (%d cached, --ctx %d)", n, seq, s->seq_past[seq],
                      s->n_ctx);
    if (!s->dev && n > 0) { /* zeros written: real pages, as a prefill would leave them */
        const struct r1_kv_cache *kv = &s->kvs[seq];
        const size_t row = r1_dtype_row_bytes(kv->dtype, kv->head_dim);
        for (int lh = 0; lh < kv->n_layer * kv->n_kv_head; lh++) {
            size_t at = ((size_t)lh * kv->n_ctx + (size_t)s->seq_past[seq]) * row;
            memset((uint8_t *)kv->k + at, 0, (size_t)n * row);
            memset((uint8_t *)kv->v + at, 0, (size_t)n * row);
        }
    }
    s->seq_past[seq] += n;
    return 0;
}

static int seq_copy(r1_batch_t *b, int dst, int src, int n) {
    struct r1_session *s = b->s;
    if (dst < 0 || dst >= s->n_seq || src < 0 || src >= s->n_seq)
        return r1_err("no sequence %d (the pool has %d)", dst < 0 || dst >= s->n_seq ? dst : src, s->n_seq);
    if (n < 0 || n > s->seq_past[src])
        return r1_err("cannot copy %d positions of sequence %d (%d cached)", n, src, s->seq_past[src]);
    if (dst == src) return 0;
    const struct r1_kv_cache *kv = &s->kv;
    const size_t row = r1_dtype_row_bytes(kv->dtype, kv->head_dim), run = (size_t)n * row;
    const size_t stride = (size_t)kv->n_ctx * row; /* one (layer, head) */
    void *tmp = NULL;
    if (s->dev && n > 0 && !(tmp = r1_alloc(run, "a KV copy"))) return -1;
    for (int lh = 0; lh < kv->n_layer * kv->n_kv_head; lh++)
        for (int which = 0; which < 2; which++) {
            const uint8_t *from = (const uint8_t *)(which ? s->kvs[src].v : s->kvs[src].k) + lh * stride;
            uint8_t *to = (uint8_t *)(which ? s->kvs[dst].v : s->kvs[dst].k) + lh * stride;
            if (!s->dev) memcpy(to, from, run);
            else if (run && (s->dev->download(tmp, from, run) || s->dev->upload(to, tmp, run) || s->dev->sync())) {
                free(tmp);
                return -1;
            }
        }
    free(tmp);
    s->seq_past[dst] = n;
    return 0;
}

/* A device backend runs each sequence's run of rows as its own forward
 * (the kernels there read one cache per op). */
static int batch_step_device(struct r1_session *s, int n, const int32_t *ids, int n_out, float *logits) {
    const struct r1_device_ops *d = s->dev;
    const int V = s->m->cfg.vocab;
    int k = 0;
    for (int t0 = 0; t0 < n;) {
        int t1 = t0 + 1;
        while (t1 < n && s->row_seq[t1] == s->row_seq[t0]) t1++;
        const int T = t1 - t0;
        int first = k; /* out_rows[first..k) lie in this run */
        while (k < n_out && s->out_rows[k] < t1) k++;
        int all = k - first > 1 || (k > first && s->out_rows[first] != t1 - 1);
        if (all && !s->d_all && !(s->d_all = d->alloc((size_t)s->n_batch * V * sizeof(float), "all-rows logits")))
            return -1;
        if (d->upload(s->d_ids, ids + t0, (size_t)T * sizeof *ids)) return -1;
        forward_ops(s, s->d_ids, T, s->row_pos[t0], &s->kvs[s->row_seq[t0]], NULL, NULL,
                    (struct out_sel){.all_rows = all}, all ? s->d_all : s->d_logits, NULL);
        for (int i = first; i < k; i++) {
            const float *src = all ? s->d_all + (size_t)(s->out_rows[i] - t0) * V : s->d_logits;
            if (d->download(logits + (size_t)i * V, src, (size_t)V * sizeof(float))) return -1;
        }
        t0 = t1;
    }
    return d->sync();
}

static int step(r1_batch_t *b, int n, const int32_t *ids, const int32_t *seq, const uint8_t *want, float *logits) {
    struct r1_session *s = b->s;
    const struct r1_config *c = &s->m->cfg;
    if (n <= 0 || n > s->n_batch) return r1_err("a step takes 1..%d rows, not %d", s->n_batch, n);
    if (++s->stamp == 0x7fffffff) {
        memset(s->seen, 0, (size_t)s->n_seq * sizeof *s->seen);
        s->stamp = 1;
    }
    int n_out = 0;
    for (int t = 0; t < n; t++) {
        const int q = seq[t];
        if (q < 0 || q >= s->n_seq) return r1_err("row %d: no sequence %d (the pool has %d)", t, q, s->n_seq);
        if (ids[t] < 0 || ids[t] >= c->vocab)
            return r1_err("row %d: token id %d is outside the vocabulary (0..%d)", t, ids[t], c->vocab - 1);
        const int first = t == 0 || seq[t - 1] != q;
        if (first && s->seen[q] == s->stamp)
            return r1_err("row %d: the rows of sequence %d are not contiguous in the step", t, q);
        s->seen[q] = s->stamp;
        s->row_seq[t] = q;
        s->row_pos[t] = first ? s->seq_past[q] : s->row_pos[t - 1] + 1;
        if (s->row_pos[t] >= s->n_ctx)
            return r1_err("sequence %d is full: %d cached + %d new > %d positions per sequence (--ctx)", q,
                          s->seq_past[q], s->row_pos[t] - s->seq_past[q] + 1, s->n_ctx);
        const int last = t == n - 1 || seq[t + 1] != q;
        if (want ? want[t] != 0 : last) s->out_rows[n_out++] = t;
    }
    if (s->dev) {
        if (batch_step_device(s, n, ids, n_out, logits)) return -1;
    } else {
        forward_ops(s, ids, n, 0, s->kvs, s->row_seq, s->row_pos, (struct out_sel){.rows = s->out_rows, .n = n_out},
                    logits, NULL);
    }
    for (int t = 0; t < n; t++)
        if (t == n - 1 || seq[t + 1] != seq[t]) s->seq_past[seq[t]] = s->row_pos[t] + 1;
    return n_out;
}

int r1_batch_seq_truncate(r1_batch_t *b, int seq, int n) {
    if (!b->lead) return seq_truncate(b, seq, n);
    lead_send(b, (struct lead_cmd){.op = LEAD_TRUNCATE, .a = seq, .n = n});
    return lead_done(b, seq_truncate(b, seq, n));
}

int r1_batch_seq_skip(r1_batch_t *b, int seq, int n) {
    if (!b->lead) return seq_skip(b, seq, n);
    lead_send(b, (struct lead_cmd){.op = LEAD_SKIP, .a = seq, .n = n});
    return lead_done(b, seq_skip(b, seq, n));
}

int r1_batch_seq_copy(r1_batch_t *b, int dst, int src, int n) {
    if (!b->lead) return seq_copy(b, dst, src, n);
    lead_send(b, (struct lead_cmd){.op = LEAD_COPY, .a = dst, .b = src, .n = n});
    return lead_done(b, seq_copy(b, dst, src, n));
}

int r1_batch_step(r1_batch_t *b, int n, const int32_t *ids, const int32_t *seq, const uint8_t *want, float *logits) {
    if (!b->lead) return step(b, n, ids, seq, want, logits);
    if (n <= 0 || n > b->s->n_batch) return r1_err("a step takes 1..%d rows, not %d", b->s->n_batch, n);
    lead_send(b, (struct lead_cmd){.op = LEAD_STEP, .n = n, .want = want != NULL});
    /* the rows: ids, sequences, want flags (the followers' copies, in the batch's scratch) */
    int32_t *rows = b->l_rows;
    memcpy(rows, ids, (size_t)n * sizeof *rows);
    memcpy(rows + n, seq, (size_t)n * sizeof *rows);
    if (want)
        for (int t = 0; t < n; t++) rows[2 * n + t] = want[t];
    r1_comm_bcast(rows, (size_t)(want ? 3 : 2) * n * sizeof *rows, 0);
    return lead_done(b, step(b, n, ids, seq, want, logits));
}

int r1_batch_follow(r1_model_t *m, const struct r1_batch_opts *o) {
    if (!m->tp || r1_comm_size() < 2 || r1_comm_rank() == 0)
        return r1_err("r1_batch_follow is for the ranks after 0 of a tensor-parallel job");
    int32_t shape[4] = {0};
    r1_comm_bcast(shape, sizeof shape, 0);
    if (!shape[0]) return r1_err("rank 0 made no KV pool"); /* it says why */
    struct r1_batch_opts fo = *o;
    fo.n_seq = shape[0], fo.n_ctx = shape[1], fo.n_batch = shape[2], fo.kv_dtype = (enum r1_dtype)shape[3];
    fo.lead = 0;
    r1_batch_t *b = r1_batch_new(m, &fo);
    float failed = b ? 0 : 1;
    r1_comm_allreduce_sum_f32(&failed, 1);
    if (!b) return -1;
    b->s->tp_root = 1; /* this rank's share of the logits goes to rank 0 */
    const int V = m->cfg.vocab;
    uint8_t *want = malloc((size_t)b->s->n_batch);
    int32_t *rows = malloc((size_t)3 * b->s->n_batch * sizeof *rows);
    if (!want || !rows) { /* rank 0 would wait for this rank forever */
        fprintf(stderr, "r1infer: rank %d: out of memory for the step rows\n", r1_comm_rank());
        r1_comm_abort(1);
    }
    int rc = 0;
    for (struct lead_cmd c;;) {
        r1_comm_bcast_idle(&c, sizeof c, 0);
        if (c.op == LEAD_QUIT) break;
        if (c.op == LEAD_TRUNCATE) seq_truncate(b, c.a, c.n); /* an error is rank 0's too: it reports it */
        else if (c.op == LEAD_SKIP) seq_skip(b, c.a, c.n);
        else if (c.op == LEAD_COPY) seq_copy(b, c.a, c.b, c.n);
        else if (c.op == LEAD_STEP && c.n > 0 && c.n <= b->s->n_batch) {
            r1_comm_bcast(rows, (size_t)(c.want ? 3 : 2) * c.n * sizeof *rows, 0);
            int out = 0;
            for (int t = 0; t < c.n; t++) {
                if (c.want) want[t] = rows[2 * c.n + t] != 0;
                out += c.want ? want[t] : t == c.n - 1 || rows[c.n + t + 1] != rows[c.n + t];
            }
            if (out > b->f_rows) { /* the logits are gathered on every rank: room for them */
                free(b->f_logits);
                if (!(b->f_logits = malloc((size_t)out * V * sizeof(float)))) {
                    fprintf(stderr, "r1infer: rank %d: out of memory for %d rows of logits\n", r1_comm_rank(), out);
                    r1_comm_abort(1);
                }
                b->f_rows = out;
            }
            step(b, c.n, rows, rows + c.n, c.want ? want : NULL, b->f_logits);
        } else {
            fprintf(stderr, "r1infer: rank %d: an unknown command %d from rank 0\n", r1_comm_rank(), c.op);
            r1_comm_abort(1);
        }
    }
    free(want);
    free(rows);
    r1_batch_free(b);
    return rc;
}
