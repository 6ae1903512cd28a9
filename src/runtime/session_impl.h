/*
 * session_impl.h - the session's state, shared by session.c (one
 * conversation, the forward pass) and batch.c (a KV pool of several
 * sequences, continuous batching). Private to src/runtime/.
 */
#ifndef R1_RUNTIME_SESSION_IMPL_H
#define R1_RUNTIME_SESSION_IMPL_H

#include <stdint.h>

#include "kernels/kernels.h"
#include "r1infer.h"

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
    /* A paged pool (pool_rows > 0, batch.c): kv.n_ctx rows per (layer, KV
     * head) in pg_n blocks of R1_KV_PAGE; sequence q's blocks are
     * pg_tab[q * pg_per_seq ..] (-1: none), valid below its cached
     * positions rounded up to a block; pg_ref counts the sequences holding
     * a block (shared prefixes), pg_free the free ones (a stack: the most
     * recently freed, already resident, are taken first), pg_hi one past
     * the highest block ever taken (the rows that have been touched). */
    int paged, pg_n, pg_per_seq, pg_nfree, pg_hi;
    int32_t *pg_tab, *pg_ref, *pg_free;
    int *seen; /* (n_seq) step stamp: sequences must be one run */
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

/* Which rows of a step go through the final norm + lm_head. */
struct out_sel {
    int all_rows;        /* every row, in order */
    const int32_t *rows; /* else these n rows (host backends; gathered first) */
    int n;               /* else (rows NULL) the last row */
};

/* A session of n_seq sequences (a batch: r1_batch_new) with steps of up to
 * n_batch rows (0: the default). pool_rows > 0 (host backends, batches):
 * the sequences share one paged KV pool of that many positions (a multiple
 * of R1_KV_PAGE), kvs[q] being sequence q's view through its page table;
 * 0: each sequence owns n_ctx positions. NULL with an error. */
r1_session_t *r1_session_create(r1_model_t *m, const struct r1_session_opts *opts, int n_seq, int n_batch,
                                long pool_rows);

/* The kernel sequence of one batch of T tokens (session.c). */
void r1_forward_ops(struct r1_session *s, const int32_t *ids, int T, int pos0, struct r1_kv_cache *kv,
                    const int32_t *seq, const int32_t *pos, struct out_sel sel, float *out, const int32_t *pos_dev);

#endif
