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
#include "runtime/session_impl.h"
#include "runtime/job.h"

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
    kv_pages(s, s->paged ? s->pg_hi * R1_KV_PAGE : upto);
}

r1_session_t *r1_session_create(r1_model_t *m, const struct r1_session_opts *opts, int n_seq, int n_batch,
                                long pool_rows) {
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
    if (pool_rows > 0 && !s->dev) { /* one paged pool: (layer, KV head, pool row, head_dim) */
        pool_rows = (pool_rows + R1_KV_PAGE - 1) / R1_KV_PAGE * R1_KV_PAGE;
        if (pool_rows > (long)INT32_MAX / 2 ||
            (size_t)pool_rows > SIZE_MAX / 4 / ((size_t)c->n_layer * c->n_kv_head * r1_dtype_row_bytes(kvt, hd))) {
            r1_session_free(s);
            r1_err("a KV pool of %ld positions does not fit in memory", pool_rows);
            return NULL;
        }
        s->paged = 1;
        s->pg_n = (int)(pool_rows / R1_KV_PAGE);
        s->pg_per_seq = (n_ctx + R1_KV_PAGE - 1) / R1_KV_PAGE;
        s->kv.n_ctx = (int)pool_rows;
        kv_bytes = (size_t)c->n_layer * c->n_kv_head * (size_t)pool_rows * r1_dtype_row_bytes(kvt, hd);
        s->pg_tab = malloc((size_t)n_seq * s->pg_per_seq * sizeof *s->pg_tab);
        s->pg_ref = calloc((size_t)s->pg_n, sizeof *s->pg_ref);
        s->pg_free = malloc((size_t)s->pg_n * sizeof *s->pg_free);
        if (!s->pg_tab || !s->pg_ref || !s->pg_free) {
            r1_session_free(s);
            r1_err("out of memory for the KV pool's page tables");
            return NULL;
        }
        for (size_t i = 0; i < (size_t)n_seq * s->pg_per_seq; i++) s->pg_tab[i] = -1;
        for (int i = 0; i < s->pg_n; i++) s->pg_free[i] = s->pg_n - 1 - i; /* block 0 on top */
        s->pg_nfree = s->pg_n;
    }
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
        if (s->paged) {
            s->kvs[q].pages = s->pg_tab + (size_t)q * s->pg_per_seq;
            continue;
        }
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
    free(s->pg_tab);
    free(s->pg_ref);
    free(s->pg_free);
    free(s);
}

r1_session_t *r1_session_new(r1_model_t *m, const struct r1_session_opts *opts) {
    return r1_session_create(m, opts, 1, 0, 0);
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

/* The kernel sequence of one batch of T tokens: row t of sequence seq[t] at
 * position pos[t] (seq and pos NULL: every row in kv at pos0 + t); the final
 * norm + lm_head over the rows `sel` picks into `out`. Buffers are the
 * backend's (device pointers on a device backend); pos_dev, when set, is the
 * device copy of pos0 (captured graphs). */
void r1_forward_ops(struct r1_session *s, const int32_t *ids, int T, int pos0, struct r1_kv_cache *kv,
                    const int32_t *seq, const int32_t *pos, struct out_sel sel, float *out, const int32_t *pos_dev) {
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
        r1_forward_ops(s, ids, T, s->n_past, &s->kv, NULL, NULL, (struct out_sel){.all_rows = all != NULL},
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
            r1_forward_ops(s, s->d_ids, 1, s->n_past, &s->kv, NULL, NULL, (struct out_sel){0}, s->d_logits, s->d_pos);
            s->graph = d->graph_end();
            if (!s->graph) return -1;
        }
    }
    if (graph && s->graph) {
        if (d->graph_launch(s->graph)) return -1;
    } else {
        r1_forward_ops(s, s->d_ids, T, s->n_past, &s->kv, NULL, NULL, (struct out_sel){.all_rows = all != NULL},
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
