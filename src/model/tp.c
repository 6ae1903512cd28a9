/*
 * tp.c - this rank's share of a loaded model (see tp.h): the plan (which
 * heads, FFN columns and vocabulary rows), the cut (a new arena holding
 * only those, rows copied as they are, columns cut at quantization block
 * boundaries through the plain GGUF block layout and regrouped for the
 * kernels again, losslessly) and the exchanges of the forward pass.
 * Runs once after loading; the forward pass only calls the three hooks.
 */
#include <stdlib.h>
#include <string.h>

#include "model/model.h"
#include "model/tp.h"

void r1_tp_share(int n, int r, int N, int *lo, int *hi) {
    int base = n / N, extra = n % N;
    *lo = r * base + (r < extra ? r : extra);
    *hi = *lo + base + (r < extra);
}

/* The plain GGUF block layout a kernel layout regroups (itself where the
 * layout keeps each block whole, as the K-quant x8 do per super-block). */
static const enum r1_dtype plain_of[R1_DTYPE_ALL] = {
    [R1_DTYPE_Q4_0X8] = R1_DTYPE_Q4_0, [R1_DTYPE_Q4_1X8] = R1_DTYPE_Q4_1, [R1_DTYPE_Q8_0X8] = R1_DTYPE_Q8_0};
static enum r1_dtype plain(enum r1_dtype t) { return plain_of[t] ? plain_of[t] : t; }
/* Weights per column block: where a column cut may fall. */
static int col_block(enum r1_dtype t) { return r1_dtype_traits[plain(t)].block; }

int r1_tp_plan(const struct r1_config *c, int rank, int size, int wo_block, int down_block, struct r1_tp *tp) {
    if (size < 1 || rank < 0 || rank >= size) return r1_err("rank %d of %d: no such rank", rank, size);
    if (size > c->n_kv_head)
        return r1_err("%d ranks, but the model has %d KV heads: each rank holds whole KV heads, so "
                      "run at most %d ranks (mpirun -np %d)",
                      size, c->n_kv_head, c->n_kv_head, c->n_kv_head);
    if (size > c->vocab) return r1_err("%d ranks for a vocabulary of %d", size, c->vocab);
    memset(tp, 0, sizeof *tp);
    tp->rank = rank, tp->size = size, tp->full = *c;
    const int group = c->n_head / c->n_kv_head;
    r1_tp_share(c->n_kv_head, rank, size, &tp->kv0, &tp->kv1);
    tp->q0 = tp->kv0 * group, tp->q1 = tp->kv1 * group;
    if ((size_t)tp->q0 * c->head_dim % (size_t)wo_block)
        return r1_err("rank %d of %d would begin o_proj at column %d, inside a block of %d weights: "
                      "choose a rank count whose head groups (%d heads x %d) are whole blocks, or a "
                      "dtype with smaller blocks (--dtype q8_0)",
                      rank, size, tp->q0 * c->head_dim, wo_block, group, c->head_dim);
    const int units = (c->ffn + down_block - 1) / down_block;
    if (units < size)
        return r1_err("an FFN of %d columns in blocks of %d cannot be shared by %d ranks", c->ffn, down_block, size);
    int u0, u1;
    r1_tp_share(units, rank, size, &u0, &u1);
    tp->f0 = u0 * down_block;
    tp->f1 = u1 * down_block < c->ffn ? u1 * down_block : c->ffn;
    r1_tp_share(c->vocab, rank, size, &tp->v0, &tp->v1);
    return 0;
}

/* ---- the cut ---- */

struct planner {
    size_t off;
    uint8_t *base;                                       /* NULL while sizing */
    enum r1_dtype (*layout)(enum r1_dtype dt, int cols); /* the bound backend's (struct r1_backend), or NULL */
};
/* The layout the bound backend's kernels read dt in at this width. */
static enum r1_dtype kernel_layout(const struct planner *p, enum r1_dtype dt, int cols) {
    return p->layout ? p->layout(dt, cols) : dt;
}
static void *take(struct planner *p, size_t bytes) {
    size_t at = (p->off + 63) & ~(size_t)63;
    p->off = at + bytes;
    return p->base ? p->base + at : NULL;
}
static void *take_copy(struct planner *p, const void *src, size_t bytes) {
    void *d = take(p, bytes);
    if (d) memcpy(d, src, bytes);
    return d;
}

/* Columns [c0, c0 + n) of one row of w (c0 on a block boundary of w's plain
 * dtype pl) into d in layout nt; through tmp (a plain row) when w is
 * regrouped. -1 with an error if a regrouping is refused (it should not be). */
static int cut_row(const struct r1_mat *w, const uint8_t *row, enum r1_dtype pl, enum r1_dtype nt, int c0, int n,
                   uint8_t *tmp, uint8_t *d) {
    if (pl != w->dtype) {
        if (r1_dtype_regroup(w->dtype, pl, row, tmp, w->cols))
            return r1_err("cannot regroup %s as %s", r1_dtype_name(w->dtype), r1_dtype_name(pl));
        row = tmp;
    }
    const struct r1_dtype_traits *tr = &r1_dtype_traits[pl];
    row += (size_t)(c0 / tr->block) * tr->block_size;
    if (nt == pl) memcpy(d, row, r1_dtype_row_bytes(nt, n));
    else if (r1_dtype_regroup(pl, nt, row, d, n))
        return r1_err("cannot regroup %s as %s", r1_dtype_name(pl), r1_dtype_name(nt));
    return 0;
}

/* Rows of w in the runs [lo[i], hi[i]) (i < n), one after another, in the
 * layout the kernels read (a rank loads the file's layout, so its share is
 * the only part regrouped). tmp: a plain row of w. -1 with an error if a
 * regrouping is refused (it should not be). */
static int cut_rows(struct planner *p, const struct r1_mat *w, int n, const int *lo, const int *hi, uint8_t *tmp,
                    struct r1_mat *o) {
    const enum r1_dtype pl = plain(w->dtype), nt = kernel_layout(p, pl, w->cols);
    *o = *w;
    o->dtype = nt;
    o->row_bytes = r1_dtype_row_bytes(nt, w->cols);
    o->rows = 0;
    for (int i = 0; i < n; i++) o->rows += hi[i] - lo[i];
    uint8_t *d = take(p, (size_t)o->rows * o->row_bytes);
    o->data = d;
    if (!d) return 0;
    for (int i = 0; i < n; i++) {
        const uint8_t *src = (const uint8_t *)w->data + (size_t)lo[i] * w->row_bytes;
        if (nt == w->dtype) { /* already the kernels' layout: the bytes as they are */
            size_t len = (size_t)(hi[i] - lo[i]) * w->row_bytes;
            memcpy(d, src, len);
            d += len;
            continue;
        }
        for (int r = lo[i]; r < hi[i]; r++, src += w->row_bytes, d += o->row_bytes)
            if (cut_row(w, src, pl, nt, 0, w->cols, tmp, d)) return -1;
    }
    return 0;
}

/* Columns [c0, c1) of every row of w (c0 on a column block boundary), in
 * the layout the kernels read for the new width. tmp: a plain row of w.
 * -1 with an error if a regrouping is refused (it should not be). */
static int cut_cols(struct planner *p, const struct r1_mat *w, int c0, int c1, uint8_t *tmp, struct r1_mat *o) {
    const enum r1_dtype pl = plain(w->dtype);
    const int n = c1 - c0;
    const enum r1_dtype nt = kernel_layout(p, pl, n);
    *o = (struct r1_mat){.dtype = nt, .rows = w->rows, .cols = n, .row_bytes = r1_dtype_row_bytes(nt, n)};
    uint8_t *d = take(p, (size_t)o->rows * o->row_bytes);
    o->data = d;
    if (!d) return 0;
    for (int r = 0; r < w->rows; r++, d += o->row_bytes)
        if (cut_row(w, (const uint8_t *)w->data + (size_t)r * w->row_bytes, pl, nt, c0, n, tmp, d)) return -1;
    return 0;
}

/* Once the share of w is filled: the pages of w given back when w lies in a
 * mapped file of m (they come back from the file if read again), so that
 * the peak of a cut is the share plus about one matrix of the file. */
static void cut_done(const struct planner *p, const struct r1_model *m, const struct r1_mat *w) {
    if (!p->base) return;
    const uint8_t *d = w->data;
    for (int i = 0; i < m->n_maps; i++)
        if (!m->maps[i].anon && d >= m->maps[i].data && d < m->maps[i].data + m->maps[i].size)
            r1_mem_release(d, (size_t)w->rows * w->row_bytes);
}

/* Lay out (p->base NULL) or fill this rank's share of m into `layers`, emb,
 * out_norm, rope and lm_head of nm. */
static int cut(struct planner *p, const struct r1_model *m, const struct r1_tp *tp, struct r1_model *nm, uint8_t *tmp) {
    const struct r1_config *c = &m->cfg;
    const int D = c->dim, hd = c->head_dim, qd = c->n_head * hd, kvd = c->n_kv_head * hd;
    const int lo[3] = {tp->q0 * hd, qd + tp->kv0 * hd, qd + kvd + tp->kv0 * hd};
    const int hi[3] = {tp->q1 * hd, qd + tp->kv1 * hd, qd + kvd + tp->kv1 * hd};
    const int glo[2] = {tp->f0, c->ffn + tp->f0}, ghi[2] = {tp->f1, c->ffn + tp->f1};
    nm->emb = m->emb;
    nm->emb.data = take_copy(p, m->emb.data, (size_t)m->emb.rows * m->emb.row_bytes);
    for (int l = 0; l < c->n_layer; l++) {
        const struct r1_layer *L = &m->layers[l];
        struct r1_layer *N = &nm->layers[l];
        N->attn_norm = take_copy(p, L->attn_norm, (size_t)D * 4);
        N->ffn_norm = take_copy(p, L->ffn_norm, (size_t)D * 4);
        N->bqkv = take(p, (size_t)(hi[0] - lo[0] + 2 * (hi[1] - lo[1])) * 4);
        if (N->bqkv)
            for (int i = 0, at = 0; i < 3; at += hi[i] - lo[i], i++)
                memcpy(N->bqkv + at, L->bqkv + lo[i], (size_t)(hi[i] - lo[i]) * 4);
        if (cut_rows(p, &L->wqkv, 3, lo, hi, tmp, &N->wqkv) || cut_rows(p, &L->wgu, 2, glo, ghi, tmp, &N->wgu) ||
            cut_cols(p, &L->wo, tp->q0 * hd, tp->q1 * hd, tmp, &N->wo) ||
            cut_cols(p, &L->wdown, tp->f0, tp->f1, tmp, &N->wdown))
            return -1;
        cut_done(p, m, &L->wqkv), cut_done(p, m, &L->wgu), cut_done(p, m, &L->wo), cut_done(p, m, &L->wdown);
    }
    nm->out_norm = take_copy(p, m->out_norm, (size_t)D * 4);
    nm->rope_inv_freq = take_copy(p, m->rope_inv_freq, (size_t)hd / 2 * 4);
    const int vlo[1] = {tp->v0}, vhi[1] = {tp->v1};
    if (m->lm_head.data == m->emb.data && kernel_layout(p, plain(m->emb.dtype), D) == m->emb.dtype) {
        /* tied, and the table in the kernels' layout: this rank's rows of it */
        nm->lm_head = m->emb;
        nm->lm_head.rows = tp->v1 - tp->v0;
        nm->lm_head.data = nm->emb.data ? (const uint8_t *)nm->emb.data + (size_t)tp->v0 * m->emb.row_bytes : NULL;
        return 0;
    }
    if (cut_rows(p, &m->lm_head, 1, vlo, vhi, tmp, &nm->lm_head)) return -1;
    cut_done(p, m, &m->lm_head);
    return 0;
}

int r1_tp_apply(struct r1_model *m, int rank, int size) {
    if (m->tp) return r1_err("the model is already one rank's share");
    const struct r1_config *c = &m->cfg;
    int wo_block = 1, down_block = 1, maxcols = 0;
    for (int l = 0; l < c->n_layer; l++) {
        const struct r1_layer *L = &m->layers[l];
        if (col_block(L->wo.dtype) > wo_block) wo_block = col_block(L->wo.dtype);
        if (col_block(L->wdown.dtype) > down_block) down_block = col_block(L->wdown.dtype);
        if (L->wo.row_bytes > (size_t)maxcols) maxcols = (int)L->wo.row_bytes;
        if (L->wdown.row_bytes > (size_t)maxcols) maxcols = (int)L->wdown.row_bytes;
        if (L->wqkv.row_bytes > (size_t)maxcols) maxcols = (int)L->wqkv.row_bytes;
        if (L->wgu.row_bytes > (size_t)maxcols) maxcols = (int)L->wgu.row_bytes;
    }
    if (m->lm_head.row_bytes > (size_t)maxcols) maxcols = (int)m->lm_head.row_bytes;
    if (size < 1 || rank < 0 || rank >= size) return r1_err("rank %d of %d ranks", rank, size);
    struct r1_tp *tp = calloc(1, sizeof *tp);
    if (!tp) return r1_err("out of memory");
    for (int r = 0; r < size; r++) /* every rank's cut, so that all fail alike */
        if (r1_tp_plan(c, r, size, wo_block, down_block, tp)) {
            free(tp);
            return r1_err_prefix("tensor parallelism over %d ranks", size);
        }
    r1_tp_plan(c, rank, size, wo_block, down_block, tp);
    tp->v_counts = calloc((size_t)size, sizeof(int));
    tp->v_displs = calloc((size_t)size, sizeof(int));
    struct r1_model nm = {0};
    nm.layers = calloc((size_t)c->n_layer, sizeof *nm.layers);
    uint8_t *tmp = malloc((size_t)maxcols + 64); /* a plain row is as long as its regrouped one */
    if (!tp->v_counts || !tp->v_displs || !nm.layers || !tmp) goto oom;
    for (int r = 0; r < size; r++) {
        int lo, hi;
        r1_tp_share(c->vocab, r, size, &lo, &hi);
        tp->v_counts[r] = hi - lo, tp->v_displs[r] = lo;
    }
    struct planner p = {.layout = m->layout_for ? m->layout_for->weight_layout : NULL};
    if (cut(&p, m, tp, &nm, tmp)) goto fail;
    nm.arena_size = p.off;
    nm.arena = r1_pages_alloc(p.off, "this rank's share of the weights");
    if (!nm.arena) goto fail;
    p = (struct planner){.base = nm.arena, .layout = p.layout};
    if (cut(&p, m, tp, &nm, tmp)) {
        r1_pages_free(nm.arena, nm.arena_size);
        goto fail;
    }
    free(tmp);
    r1_pages_free(m->arena, m->arena_size); /* the whole model: the share was copied out of it */
    for (int i = 0; i < m->n_maps; i++) r1_file_unmap(&m->maps[i]);
    free(m->maps);
    m->maps = NULL, m->n_maps = 0, m->in_place_bytes = 0;
    free(m->layers);
    m->arena = nm.arena, m->arena_size = nm.arena_size, m->layers = nm.layers;
    m->emb = nm.emb, m->out_norm = nm.out_norm, m->rope_inv_freq = nm.rope_inv_freq, m->lm_head = nm.lm_head;
    m->dtype = c->n_layer > 0 ? m->layers[0].wgu.dtype : m->dtype;
    m->cfg.n_head = tp->q1 - tp->q0;
    m->cfg.n_kv_head = tp->kv1 - tp->kv0;
    m->cfg.ffn = tp->f1 - tp->f0;
    m->tp = tp;
    return 0;
oom:
    r1_err("out of memory");
fail:
    free(tmp);
    free(nm.layers);
    r1_tp_free(tp);
    return -1;
}

void r1_tp_free(struct r1_tp *tp) {
    if (!tp) return;
    free(tp->v_counts);
    free(tp->v_displs);
    free(tp);
}
