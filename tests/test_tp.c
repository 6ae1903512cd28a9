/*
 * test_tp.c - tensor parallel shares without MPI: the plan (uneven KV head
 * shares, FFN runs on block boundaries, every unit held by exactly one
 * rank, clear refusals) and the cut, rank by rank, of synthetic models in
 * every weight layout the cpu kernels read (f32, f16, bf16, q8_0, q4_0,
 * q4_1 and their x8 regroupings, q4_K, q6_K): each kept row and column
 * must dequantize to exactly the full model's numbers.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "model/model.h"
#include "runtime/job.h"
#include "model/tp.h"
#include "test.h"

/* the limit of |cut - full| over every weight: the cut only moves bytes */
#define CUT_TOL 0.0f

static void plan_covers(const struct r1_config *c, int size, int blk) {
    int q = 0, kv = 0, f = 0, v = 0, ok = 1;
    for (int r = 0; r < size; r++) {
        struct r1_tp tp;
        if (r1_tp_plan(c, r, size, blk, blk, &tp)) {
            CHECK(0, "plan rank %d of %d: %s", r, size, r1_last_error());
            return;
        }
        ok &= tp.q0 == q && tp.kv0 == kv && tp.f0 == f && tp.v0 == v && tp.q1 > tp.q0 && tp.f1 > tp.f0;
        ok &= (tp.q1 - tp.q0) == (tp.kv1 - tp.kv0) * (c->n_head / c->n_kv_head) && tp.f0 % blk == 0;
        q = tp.q1, kv = tp.kv1, f = tp.f1, v = tp.v1;
    }
    CHECK(ok && q == c->n_head && kv == c->n_kv_head && f == c->ffn && v == c->vocab,
          "%d ranks: the shares tile heads %d/%d, ffn %d/%d, vocab %d/%d", size, q, c->n_head, f, c->ffn, v, c->vocab);
}

static float maxdiff_rows(const struct r1_mat *cut, int r, const struct r1_mat *full, int fr, int c0, float *a,
                          float *b) {
    r1_mat_row_f32(cut, r, a);
    r1_mat_row_f32(full, fr, b);
    float d = 0;
    for (int i = 0; i < cut->cols; i++) d = fmaxf(d, fabsf(a[i] - b[c0 + i]));
    return d;
}

/* Cut rank r of size from a fresh copy and compare with the full model.
 * file_layout: the copy keeps the file's layout, as a rank loads it, and the
 * cut regroups the share into the kernels' layout (the full model's). */
static void check_cut(const struct r1_config *c, enum r1_dtype dt, int r, int size, int file_layout) {
    r1_model_t *full = r1_model_synthetic(c, dt, 7, 0);
    r1_model_t *m = file_layout ? r1_model_synthetic_file_layout(c, dt, 7) : r1_model_synthetic(c, dt, 7, 0);
    if (!full || !m) {
        CHECK(0, "synthesize %s: %s", r1_dtype_name(dt), r1_last_error());
        r1_model_free(full), r1_model_free(m);
        return;
    }
    const enum r1_dtype before = m ? m->layers[0].wgu.dtype : dt;
    if (r1_tp_apply(m, r, size)) {
        CHECK(0, "%s rank %d of %d: %s", r1_dtype_name(dt), r, size, r1_last_error());
        r1_model_free(full), r1_model_free(m);
        return;
    }
    const struct r1_tp *tp = m->tp;
    const int hd = c->head_dim, qd = c->n_head * hd, kvd = c->n_kv_head * hd;
    const int nq = (tp->q1 - tp->q0) * hd, nkv = (tp->kv1 - tp->kv0) * hd;
    CHECK(m->cfg.n_head == tp->q1 - tp->q0 && m->cfg.n_kv_head == tp->kv1 - tp->kv0 && m->cfg.ffn == tp->f1 - tp->f0 &&
              m->cfg.vocab == c->vocab,
          "%s rank %d: the model's shape is its share", r1_dtype_name(dt), r);
    float *a = malloc(sizeof(float) * 4096), *b = malloc(sizeof(float) * 4096);
    float d = 0, db = 0;
    for (int l = 0; l < c->n_layer; l++) {
        const struct r1_layer *L = &m->layers[l], *F = &full->layers[l];
        for (int i = 0; i < nq + 2 * nkv; i++) {
            int fr = i < nq         ? tp->q0 * hd + i
                     : i < nq + nkv ? qd + tp->kv0 * hd + (i - nq)
                                    : qd + kvd + tp->kv0 * hd + (i - nq - nkv);
            d = fmaxf(d, maxdiff_rows(&L->wqkv, i, &F->wqkv, fr, 0, a, b));
            db = fmaxf(db, fabsf(L->bqkv[i] - F->bqkv[fr]));
        }
        for (int i = 0; i < c->dim; i++) {
            d = fmaxf(d, maxdiff_rows(&L->wo, i, &F->wo, i, tp->q0 * hd, a, b));
            d = fmaxf(d, maxdiff_rows(&L->wdown, i, &F->wdown, i, tp->f0, a, b));
        }
        for (int i = 0; i < tp->f1 - tp->f0; i++) {
            d = fmaxf(d, maxdiff_rows(&L->wgu, i, &F->wgu, tp->f0 + i, 0, a, b));
            d = fmaxf(d, maxdiff_rows(&L->wgu, tp->f1 - tp->f0 + i, &F->wgu, c->ffn + tp->f0 + i, 0, a, b));
        }
        CHECK(L->wo.cols == nq && L->wdown.cols == tp->f1 - tp->f0 && L->wqkv.rows == nq + 2 * nkv,
              "%s rank %d: cut shapes", r1_dtype_name(dt), r);
    }
    for (int i = 0; i < tp->v1 - tp->v0; i++)
        d = fmaxf(d, maxdiff_rows(&m->lm_head, i, &full->lm_head, tp->v0 + i, 0, a, b));
    for (int i = 0; i < c->vocab; i += 37) d = fmaxf(d, maxdiff_rows(&m->emb, i, &full->emb, i, 0, a, b));
    printf("  %-5s rank %d of %d%s: wo %s -> %s, gate|up %s -> %s, max |cut - full| = %g, bias %g (limit %g)\n",
           r1_dtype_name(dt), r, size, file_layout ? " (from the file's layout)" : "",
           r1_dtype_name(full->layers[0].wo.dtype), r1_dtype_name(m->layers[0].wo.dtype), r1_dtype_name(before),
           r1_dtype_name(m->layers[0].wgu.dtype), (double)d, (double)db, (double)CUT_TOL);
    for (int l = 0; l < c->n_layer; l++) {
        const struct r1_layer *L = &m->layers[l], *F = &full->layers[l];
        /* the row cuts keep the width, so the full model's layout (o_proj's and
         * down's columns are cut: their layout is the one for the new width) */
        CHECK(L->wqkv.dtype == F->wqkv.dtype && L->wgu.dtype == F->wgu.dtype && m->lm_head.dtype == full->lm_head.dtype,
              "%s rank %d%s: the share is in the kernels' layout (gate|up %s, the full model's %s)", r1_dtype_name(dt),
              r, file_layout ? " from the file's layout" : "", r1_dtype_name(L->wgu.dtype),
              r1_dtype_name(F->wgu.dtype));
    }
    CHECK(d <= CUT_TOL && db <= CUT_TOL, "%s rank %d of %d: the cut changed weights by %g", r1_dtype_name(dt), r, size,
          (double)d);
    free(a), free(b);
    r1_model_free(full), r1_model_free(m);
}

int main(void) {
    int lo, hi;
    r1_tp_share(3, 0, 2, &lo, &hi);
    CHECK(lo == 0 && hi == 2, "3 over 2: rank 0 holds [0, 2), not [%d, %d)", lo, hi);
    r1_tp_share(3, 1, 2, &lo, &hi);
    CHECK(lo == 2 && hi == 3, "3 over 2: rank 1 holds [2, 3), not [%d, %d)", lo, hi);

    /* the default model's shape: 9 Q heads in 3 KV groups */
    struct r1_config smol = {
        .dim = 576, .n_layer = 30, .n_head = 9, .n_kv_head = 3, .head_dim = 64, .ffn = 1536, .vocab = 49152};
    for (int n = 1; n <= 3; n++) plan_covers(&smol, n, 32);
    struct r1_tp tp;
    CHECK(r1_tp_plan(&smol, 0, 2, 32, 32, &tp) == 0 && tp.kv1 == 2 && tp.q1 == 6 && tp.f1 == 768,
          "smollm over 2: rank 0 holds 2 KV heads, 6 Q heads, 768 FFN columns");
    CHECK(r1_tp_plan(&smol, 0, 4, 32, 32, &tp) != 0 && strstr(r1_last_error(), "at most 3 ranks"),
          "4 ranks on 3 KV heads are refused: %s", r1_last_error());
    struct r1_config q7;
    CHECK(r1_synth_config("7b", &q7) == 0, "7b shape");
    plan_covers(&q7, 2, 256);
    plan_covers(&q7, 4, 32); /* 7 heads x 128 per rank: whole q8_0 blocks */
    CHECK(r1_tp_plan(&q7, 2, 3, 256, 256, &tp) != 0 && strstr(r1_last_error(), "inside a block"),
          "7b q4_K over 3 ranks: o_proj would be cut inside a super-block: %s", r1_last_error());

    /* the cut in every layout: widths where the 256-wide K-quants and the x8 groups apply */
    struct r1_config c;
    CHECK(r1_synth_config("tiny", &c) == 0, "tiny shape");
    c.dim = 512, c.n_head = 8, c.n_kv_head = 4, c.head_dim = 64, c.ffn = 768, c.vocab = 512, c.n_layer = 1;
    c.tied = 0;
    static const enum r1_dtype dts[] = {R1_DTYPE_F32,  R1_DTYPE_F16,  R1_DTYPE_BF16, R1_DTYPE_Q8_0,
                                        R1_DTYPE_Q4_0, R1_DTYPE_Q4_1, R1_DTYPE_Q4_K, R1_DTYPE_Q6_K};
    for (size_t i = 0; i < sizeof dts / sizeof dts[0]; i++) {
        int k = dts[i] == R1_DTYPE_Q4_K || dts[i] == R1_DTYPE_Q6_K;
        for (int fl = 0; fl < 2; fl++) {
            for (int r = 0; r < 2; r++) check_cut(&c, dts[i], r, 2, fl);
            if (!k) /* 3 ranks: KV heads 2|1|1, o_proj cut at 256 and 384 columns */
                for (int r = 0; r < 3; r++) check_cut(&c, dts[i], r, 3, fl);
        }
    }
    c.tied = 1; /* tied: the LM head's rows are the embedding's */
    check_cut(&c, R1_DTYPE_Q4_1, 1, 2, 0);
    check_cut(&c, R1_DTYPE_Q4_1, 1, 2, 1);
    return TEST_DONE("test_tp");
}
