/*
 * batch.c - several sequences in one session (r1_batch_*): continuous
 * batching over a KV pool, and the tensor-parallel lead/follow protocol
 * that keeps every rank's pool in step with rank 0's.
 */
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/kernels.h"
#include "model/model.h"
#include "runtime/comm.h"
#include "runtime/session.h"
#include "runtime/session_impl.h"
#include "util/util.h"

/* ------------------------------------------------------------- batches */

/* A batch is a session whose KV pool holds n_seq caches; steps take rows of
 * any of them (continuous batching). */
struct r1_batch {
    struct r1_session *s;
    int lead; /* rank 0 of a tensor-parallel job, leading (opts.lead): see "lead" below */
    pthread_mutex_t mu;
    /* the page tables: the server's threads change sequences' caches while
     * a step runs on others (held only around table changes, never during
     * a forward pass) */
    pthread_mutex_t pool_mu;
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
    if (o->pool_pos < 0) return free(b), r1_err("the KV pool's positions must be >= 0, not %ld", o->pool_pos), NULL;
    long rows = o->pool_pos;
    if (!rows) { /* n_seq x n_ctx, as caches of their own would take */
        const struct r1_backend *be = r1_backend_find(o->backend ? o->backend : "cpu");
        if (!be) return free(b), NULL;
        int n_ctx = o->n_ctx > 0 ? o->n_ctx : r1_ctx_default(m, o->n_seq, o->kv_dtype, o->backend, NULL, 0);
        so.n_ctx = n_ctx;
        rows =
            be->dev ? 0 : (long)o->n_seq * ((n_ctx + R1_KV_PAGE - 1) / R1_KV_PAGE * R1_KV_PAGE); /* whole blocks each */
    }
    b->s = r1_session_create(m, &so, o->n_seq, o->n_batch, rows);
    pthread_mutex_init(&b->mu, NULL);
    pthread_mutex_init(&b->pool_mu, NULL);
    if (o->lead && m->tp && r1_comm_size() > 1 && r1_comm_rank() == 0) {
        if (b->s && !(b->l_rows = malloc((size_t)3 * b->s->n_batch * sizeof *b->l_rows))) {
            r1_session_free(b->s), b->s = NULL;
            r1_err("out of memory for the step rows");
        }
        /* the followers make the same pool (or hear that there is none), then say whether they could */
        int32_t shape[5] = {b->s ? b->s->n_seq : 0, b->s ? b->s->n_ctx : 0, b->s ? b->s->n_batch : 0, o->kv_dtype,
                            b->s && b->s->paged ? b->s->kv.n_ctx : 0};
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
        pthread_mutex_destroy(&b->pool_mu);
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
    pthread_mutex_destroy(&b->pool_mu);
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

/* ------------------------------------------------- the paged pool */

static int32_t *pg_table(struct r1_session *s, int q) { return s->pg_tab + (size_t)q * s->pg_per_seq; }

static int pg_take(struct r1_session *s) {
    int blk = s->pg_free[--s->pg_nfree];
    s->pg_ref[blk] = 1;
    if (blk + 1 > s->pg_hi) s->pg_hi = blk + 1;
    return blk;
}

static void pg_drop(struct r1_session *s, int blk) {
    if (--s->pg_ref[blk] == 0) s->pg_free[s->pg_nfree++] = blk;
}

/* Blocks sequence q needs to take to append n positions: the ones it has
 * no block for yet, and the block it writes into first when that block is
 * shared (copied before it is written: the others keep reading theirs). */
static int pg_need(const struct r1_session *s, int q, int n) {
    if (!s->paged || n <= 0) return 0;
    const int32_t *t = s->pg_tab + (size_t)q * s->pg_per_seq;
    const int past = s->seq_past[q], b1 = (past + n - 1) / R1_KV_PAGE;
    int need = 0;
    for (int blk = past / R1_KV_PAGE; blk <= b1; blk++) need += t[blk] < 0 || s->pg_ref[t[blk]] > 1;
    return need;
}

/* Rows [0, n) of block from copied into block to, every (layer, KV head), K and V. */
static void pg_copy_rows(struct r1_session *s, int to, int from, int n) {
    const struct r1_kv_cache *kv = &s->kv;
    const size_t row = r1_dtype_row_bytes(kv->dtype, kv->head_dim), stripe = (size_t)kv->n_ctx * row;
    for (int lh = 0; lh < kv->n_layer * kv->n_kv_head; lh++)
        for (int which = 0; which < 2; which++) {
            uint8_t *base = (uint8_t *)(which ? kv->v : kv->k) + (size_t)lh * stripe;
            memcpy(base + (size_t)to * R1_KV_PAGE * row, base + (size_t)from * R1_KV_PAGE * row, (size_t)n * row);
        }
}

/* Take the blocks pg_need counted (the caller checked there are enough). */
static void pg_reserve(struct r1_session *s, int q, int n) {
    if (!s->paged || n <= 0) return;
    int32_t *t = pg_table(s, q);
    const int past = s->seq_past[q], b1 = (past + n - 1) / R1_KV_PAGE;
    for (int blk = past / R1_KV_PAGE; blk <= b1; blk++) {
        if (t[blk] >= 0 && s->pg_ref[t[blk]] == 1) continue;
        int nb = pg_take(s);
        if (t[blk] >= 0) { /* shared: this sequence's rows below past in a copy of its own */
            pg_copy_rows(s, nb, t[blk], past - blk * R1_KV_PAGE);
            pg_drop(s, t[blk]);
        }
        t[blk] = nb;
    }
}

/* Sequence q keeps the blocks of its first n positions. */
static void pg_release(struct r1_session *s, int q, int n) {
    if (!s->paged) return;
    int32_t *t = pg_table(s, q);
    for (int blk = (n + R1_KV_PAGE - 1) / R1_KV_PAGE; blk < s->pg_per_seq && t[blk] >= 0; blk++) {
        pg_drop(s, t[blk]);
        t[blk] = -1;
    }
}

static int pool_full(const struct r1_session *s, int need) {
    return r1_err("the KV pool is full: %d more blocks of %d positions needed, %d of %d free", need, R1_KV_PAGE,
                  s->pg_nfree, s->pg_n);
}

static int seq_truncate(r1_batch_t *b, int seq, int n) {
    struct r1_session *s = b->s;
    if (seq < 0 || seq >= s->n_seq) return r1_err("no sequence %d (the pool has %d)", seq, s->n_seq);
    if (n < 0 || n > s->seq_past[seq])
        return r1_err("cannot truncate sequence %d to %d tokens (%d cached)", seq, n, s->seq_past[seq]);
    pthread_mutex_lock(&b->pool_mu);
    pg_release(s, seq, n);
    s->seq_past[seq] = n;
    pthread_mutex_unlock(&b->pool_mu);
    return 0;
}

static int seq_skip(r1_batch_t *b, int seq, int n) {
    struct r1_session *s = b->s;
    if (seq < 0 || seq >= s->n_seq) return r1_err("no sequence %d (the pool has %d)", seq, s->n_seq);
    if (n < 0 || n > s->n_ctx - s->seq_past[seq])
        return r1_err("cannot skip %d positions of sequence %d (%d cached, --ctx %d)", n, seq, s->seq_past[seq],
                      s->n_ctx);
    pthread_mutex_lock(&b->pool_mu);
    int need = pg_need(s, seq, n);
    if (need > s->pg_nfree) {
        pthread_mutex_unlock(&b->pool_mu);
        return pool_full(s, need);
    }
    pg_reserve(s, seq, n);
    pthread_mutex_unlock(&b->pool_mu);
    if (!s->dev && n > 0) { /* zeros written: real pages, as a prefill would leave them */
        const struct r1_kv_cache *kv = &s->kvs[seq];
        const size_t row = r1_dtype_row_bytes(kv->dtype, kv->head_dim);
        for (int lh = 0; lh < kv->n_layer * kv->n_kv_head; lh++)
            for (int p = s->seq_past[seq]; p < s->seq_past[seq] + n;) {
                int run = R1_KV_PAGE - p % R1_KV_PAGE; /* consecutive rows (one block, if paged) */
                if (run > s->seq_past[seq] + n - p) run = s->seq_past[seq] + n - p;
                size_t at = r1_kv_row(kv, lh / kv->n_kv_head, lh % kv->n_kv_head, p) * row;
                memset((uint8_t *)kv->k + at, 0, (size_t)run * row);
                memset((uint8_t *)kv->v + at, 0, (size_t)run * row);
                p += run;
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
    if (s->paged) { /* the blocks shared, nothing copied (a shared block is copied before it is written) */
        pthread_mutex_lock(&b->pool_mu);
        pg_release(s, dst, 0);
        int32_t *td = pg_table(s, dst);
        const int32_t *ts = pg_table(s, src);
        for (int blk = 0; blk < (n + R1_KV_PAGE - 1) / R1_KV_PAGE; blk++) {
            td[blk] = ts[blk];
            s->pg_ref[ts[blk]]++;
        }
        s->seq_past[dst] = n;
        pthread_mutex_unlock(&b->pool_mu);
        return 0;
    }
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

int r1_batch_pool(r1_batch_t *b, int *total, int *free_blocks) {
    struct r1_session *s = b->s;
    if (!s->paged) {
        if (total) *total = 0;
        if (free_blocks) *free_blocks = 0;
        return 0;
    }
    pthread_mutex_lock(&b->pool_mu);
    if (total) *total = s->pg_n;
    if (free_blocks) *free_blocks = s->pg_nfree;
    pthread_mutex_unlock(&b->pool_mu);
    return R1_KV_PAGE;
}

int r1_batch_seq_need(r1_batch_t *b, int seq, int n) {
    struct r1_session *s = b->s;
    if (seq < 0 || seq >= s->n_seq) return r1_err("no sequence %d (the pool has %d)", seq, s->n_seq);
    pthread_mutex_lock(&b->pool_mu);
    int need = pg_need(s, seq, n);
    pthread_mutex_unlock(&b->pool_mu);
    return need;
}

int r1_batch_seq_own(r1_batch_t *b, int seq) {
    struct r1_session *s = b->s;
    if (seq < 0 || seq >= s->n_seq) return r1_err("no sequence %d (the pool has %d)", seq, s->n_seq);
    if (!s->paged) return 0;
    pthread_mutex_lock(&b->pool_mu);
    const int32_t *t = pg_table(s, seq);
    int own = 0;
    for (int blk = 0; blk < s->pg_per_seq && t[blk] >= 0; blk++) own += s->pg_ref[t[blk]] == 1;
    pthread_mutex_unlock(&b->pool_mu);
    return own;
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
        r1_forward_ops(s, s->d_ids, T, s->row_pos[t0], &s->kvs[s->row_seq[t0]], NULL, NULL,
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
    if (s->paged) { /* every sequence's blocks for its rows, or none */
        pthread_mutex_lock(&b->pool_mu);
        int need = 0;
        for (int t0 = 0, t1; t0 < n; t0 = t1) {
            for (t1 = t0 + 1; t1 < n && seq[t1] == seq[t0];) t1++;
            need += pg_need(s, seq[t0], t1 - t0);
        }
        if (need > s->pg_nfree) {
            pthread_mutex_unlock(&b->pool_mu);
            return pool_full(s, need);
        }
        for (int t0 = 0, t1; t0 < n; t0 = t1) {
            for (t1 = t0 + 1; t1 < n && seq[t1] == seq[t0];) t1++;
            pg_reserve(s, seq[t0], t1 - t0);
        }
        pthread_mutex_unlock(&b->pool_mu);
    }
    if (s->dev) {
        if (batch_step_device(s, n, ids, n_out, logits)) return -1;
    } else {
        r1_forward_ops(s, ids, n, 0, s->kvs, s->row_seq, s->row_pos, (struct out_sel){.rows = s->out_rows, .n = n_out},
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
    int32_t shape[5] = {0};
    r1_comm_bcast(shape, sizeof shape, 0);
    if (!shape[0]) return r1_err("rank 0 made no KV pool"); /* it says why */
    struct r1_batch_opts fo = *o;
    fo.n_seq = shape[0], fo.n_ctx = shape[1], fo.n_batch = shape[2], fo.kv_dtype = (enum r1_dtype)shape[3];
    fo.pool_pos = shape[4];
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
