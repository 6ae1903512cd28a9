/*
 * build.c - turn source tensors (Hugging Face names) into the kernel layout:
 * one arena holding the embedding, per layer a fused Q|K|V weight with its
 * fused bias and a fused gate|up weight, norms in f32, and the lm_head.
 * Each matrix has its own dtype: the one asked for, or with R1_DTYPE_AUTO
 * its source's (see pick_dtype for fused parts of different types).
 * Sizes are computed first, then one allocation, then conversion.
 */
#include <errno.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "model/model.h"

#define NAMELEN 128

struct planner {
    size_t off;
    uint8_t *base;   /* NULL while sizing */
    size_t in_place; /* bytes of matrices pointing into the source */
    size_t released; /* bytes of source tensors converted (given back after) */
    uint64_t plan;   /* hash of every piece's place, dtype and shape (the layout cache's key) */
    enum r1_dtype (*layout)(enum r1_dtype dt, int cols); /* the backend's (struct r1_backend) */
};

static void *take(struct planner *p, size_t bytes) {
    size_t at = (p->off + 63) & ~(size_t)63;
    p->off = at + bytes;
    const uint64_t piece[2] = {at, bytes};
    p->plan = r1_hash64(p->plan, piece, sizeof piece);
    return p->base ? p->base + at : NULL;
}

/* In-place matrices must start where the kernels' aligned loads allow (the
 * GGUF default alignment); an arena matrix starts on 64 bytes. */
#define IN_PLACE_ALIGN 32

/* Whether the n tensors `part` (NULL entries: missing) lie one after the
 * other in the source, each stored as the kernels read dtype dt with cols
 * columns and rows in order, together `rows` rows of rb bytes, starting
 * where the kernels' loads allow: then a matrix fusing them can point there. */
static int contiguous(const struct r1_src_tensor *const *part, int n, enum r1_dtype dt, int rows, int cols, size_t rb) {
    int64_t total = 0;
    for (int i = 0; i < n; i++) {
        const struct r1_src_tensor *t = part[i];
        if (!t || t->dtype != dt || t->interleaved_heads > 0 || t->ndim != 2 || t->shape[1] != cols ||
            t->size != rb * (size_t)t->shape[0] || (i && t->data != part[i - 1]->data + part[i - 1]->size))
            return 0;
        total += t->shape[0];
    }
    return n > 0 && total == rows && (uintptr_t)part[0]->data % IN_PLACE_ALIGN == 0;
}

/* Plan matrix m of (rows, cols) in dtype dt, made of the n source tensors
 * `part` stacked by rows (q|k|v, gate|up; NULL entries for missing ones,
 * reported when the matrix is filled). regroup: take the layout the
 * backend's matmuls read fastest (p->layout; not for an embedding table only
 * ever read a row at a time). When the parts are already that layout, one
 * after the other in memory the model keeps (src->in_place), m points there. */
static int plan_mat(struct planner *p, struct r1_mat *m, enum r1_dtype dt, int rows, int cols, const char *what,
                    const struct r1_tensor_source *src, const struct r1_src_tensor *const *part, int n, int regroup) {
    /* a width the block does not divide (SmolLM2's 576 columns for the
     * 256-wide K-quants) falls back to q8_0, then f16, as convert does */
    if (!r1_dtype_row_bytes(dt, cols)) dt = r1_dtype_row_bytes(R1_DTYPE_Q8_0, cols) ? R1_DTYPE_Q8_0 : R1_DTYPE_F16;
    if (regroup && p->layout) dt = p->layout(dt, cols);
    size_t rb = r1_dtype_row_bytes(dt, cols);
    if (rb == 0)
        return r1_err("%s: %d columns cannot be stored as %s (needs a multiple of %d)", what, cols, r1_dtype_name(dt),
                      r1_dtype_traits[dt].block);
    m->dtype = dt;
    m->rows = rows;
    m->cols = cols;
    m->row_bytes = rb;
    const int here = src->in_place && contiguous(part, n, dt, rows, cols, rb);
    const int64_t shape[4] = {dt, rows, cols, here};
    p->plan = r1_hash64(p->plan, shape, sizeof shape);
    if (here) {
        m->data = part[0]->data;
        p->in_place += rb * (size_t)rows;
        return 0;
    }
    for (int i = 0; i < n; i++) p->released += part[i] ? part[i]->size : 0;
    m->data = take(p, rb * (size_t)rows);
    return 0;
}

/* The source tensor `name` when it exists, for plan_mat (errors come later). */
static const struct r1_src_tensor *peek(const struct r1_tensor_source *src, const char *name) {
    return src->find(src->ctx, name);
}

/* Look up `name`, check its shape is (rows, cols) or (rows) when cols == 0. */
static const struct r1_src_tensor *get(const struct r1_tensor_source *src, const char *name, int64_t rows,
                                       int64_t cols) {
    const struct r1_src_tensor *t = src->find(src->ctx, name);
    if (!t) {
        char alias[NAMELEN];
        if (src->file_name && !src->file_name(name, alias, sizeof alias))
            r1_err("%s: tensor '%s' (%s) is missing", src->path, alias, name);
        else r1_err("%s: tensor '%s' is missing", src->path, name);
        return NULL;
    }
    int want_nd = cols ? 2 : 1;
    if (t->ndim != want_nd || t->shape[0] != rows || (cols && t->shape[1] != cols)) {
        char found[96] = "";
        int o = 0;
        for (int i = 0; i < t->ndim && o < 80; i++)
            o += snprintf(found + o, sizeof found - (size_t)o, "%s%lld", i ? ", " : "", (long long)t->shape[i]);
        if (cols)
            r1_err("%s: tensor '%s' has shape [%s], expected [%lld, %lld]", src->path, name, found, (long long)rows,
                   (long long)cols);
        else r1_err("%s: tensor '%s' has shape [%s], expected [%lld]", src->path, name, found, (long long)rows);
        return NULL;
    }
    if (!r1_dtype_traits[t->dtype].to_f32) {
        r1_err("%s: tensor '%s' has type %s, which cannot be read yet", src->path, name, r1_dtype_name(t->dtype));
        return NULL;
    }
    return t;
}

/* The stored row holding Hugging Face row r of t. llama.cpp's converter
 * stores the Q and K rows of llama models permuted for its interleaved rope:
 * within each head, HF rows j and j + hd/2 (the pair rotate-half rotates
 * together) become rows 2j and 2j + 1. r1infer undoes that here, once, at
 * load rather than rotating interleaved pairs at run time, so one rope kernel
 * (rotate-half, as transformers computes it) serves qwen2 and llama and the
 * KV cache holds the same numbers whatever the file format. */
static int64_t src_row(const struct r1_src_tensor *t, int64_t r) {
    if (t->interleaved_heads <= 0) return r;
    int64_t hd = t->shape[0] / t->interleaved_heads, h = r / hd, w = r % hd;
    return h * hd + 2 * (w % (hd / 2)) + w / (hd / 2);
}

/* Row r of t as a row of dtype dt at dst (tmp: t's cols floats). */
static void convert_row(const struct r1_src_tensor *t, enum r1_dtype dt, int r, uint8_t *dst, float *tmp) {
    int cols = (int)t->shape[1];
    size_t src_rb = r1_dtype_row_bytes(t->dtype, cols);
    const uint8_t *row = t->data + (size_t)src_row(t, r) * src_rb;
    if (t->dtype == dt) {
        memcpy(dst, row, src_rb);
    } else if (r1_dtype_regroup(t->dtype, dt, row, dst, cols) != 0) {
        /* not a lossless regrouping (q4_0 -> q4_0x8, ...): through f32 */
        r1_dtype_traits[t->dtype].to_f32(row, tmp, cols);
        r1_dtype_traits[dt].from_f32(tmp, dst, cols);
    }
}

/* Rows [lo, hi) of t into m at row r0 + lo, converting dtype as needed
 * (tmp: t's cols floats). */
static void convert_range(const struct r1_src_tensor *t, struct r1_mat *m, int r0, int lo, int hi, float *tmp) {
    int cols = (int)t->shape[1];
    size_t src_rb = r1_dtype_row_bytes(t->dtype, cols);
    uint8_t *dst = (uint8_t *)m->data + (size_t)r0 * m->row_bytes;
    if (t->dtype == m->dtype && t->interleaved_heads <= 0) {
        memcpy(dst + (size_t)lo * src_rb, t->data + (size_t)lo * src_rb, src_rb * (size_t)(hi - lo));
        return;
    }
    for (int r = lo; r < hi; r++) convert_row(t, m->dtype, r, dst + (size_t)r * m->row_bytes, tmp);
}

struct conv_job {
    const struct r1_src_tensor *t;
    struct r1_mat *m;
    int r0, lo, hi, ok;
};
static void *conv_thread(void *arg) {
    struct conv_job *j = arg;
    float *tmp = malloc((size_t)j->t->shape[1] * sizeof(float));
    if (tmp) convert_range(j->t, j->m, j->r0, j->lo, j->hi, tmp);
    j->ok = tmp != NULL;
    free(tmp);
    return NULL;
}

/* Copy rows of t into m starting at row r0, converting dtype as needed; a
 * conversion of a big tensor runs on every core (quantizing a 1.5B model on
 * one core takes seconds). */
static void convert_rows(const struct r1_src_tensor *t, struct r1_mat *m, int r0, float *tmp) {
    int rows = (int)t->shape[0];
    int nth = t->dtype == m->dtype || (int64_t)rows * t->shape[1] < ((int64_t)1 << 20) ? 1 : r1_physical_cores();
    if (nth > 16) nth = 16;
    if (nth > rows) nth = rows;
    struct conv_job job[16];
    pthread_t th[16];
    int started[16] = {0};
    for (int i = 1; i < nth; i++) {
        job[i] = (struct conv_job){t, m, r0, (int)((int64_t)rows * i / nth), (int)((int64_t)rows * (i + 1) / nth), 0};
        started[i] = pthread_create(&th[i], NULL, conv_thread, &job[i]) == 0;
    }
    convert_range(t, m, r0, 0, nth > 1 ? (int)((int64_t)rows / nth) : rows, tmp);
    for (int i = 1; i < nth; i++) {
        if (started[i]) pthread_join(th[i], NULL);
        if (!started[i] || !job[i].ok) /* no thread or no memory for it: do its rows here */
            convert_range(t, m, r0, job[i].lo, job[i].hi, tmp);
    }
}

/* A vector (norm weight, bias) as f32, with the Q/K row order undone. */
static void to_f32_vec(const struct r1_src_tensor *t, float *dst, int n) {
    r1_dtype_traits[t->dtype].to_f32(t->data, dst, n);
    if (t->interleaved_heads <= 0) return;
    int hd = n / t->interleaved_heads, half = hd / 2;
    float pair[1024]; /* one head: head_dim <= 512 */
    for (int h = 0; h < t->interleaved_heads; h++) {
        float *v = dst + (size_t)h * hd;
        for (int j = 0; j < half; j++) pair[j] = v[2 * j], pair[half + j] = v[2 * j + 1];
        memcpy(v, pair, (size_t)hd * sizeof *v);
    }
}

/* A vector read through to_f32_vec: give its pages back (those wholly
 * inside it; keep_files gives back the rest of what no matrix uses). */
static void vec_done(const struct r1_tensor_source *src, const struct r1_src_tensor *t) {
    if (src->in_place) r1_mem_release(t->data, t->size);
}

/* Vectors read through to_f32 need a dtype with whole blocks of n. */
static int vec_ok(const struct r1_src_tensor *t, int n, const char *path) {
    if (r1_dtype_traits[t->dtype].block != 1 && n % r1_dtype_traits[t->dtype].block)
        return r1_err("%s: tensor '%s' (%d values) is stored as %s, which needs multiples of %d", path, t->name, n,
                      r1_dtype_name(t->dtype), r1_dtype_traits[t->dtype].block);
    return 0;
}

/* Whether a dtype is one of the float formats (not block-quantized). */
static int is_float(enum r1_dtype t) { return t == R1_DTYPE_F32 || t == R1_DTYPE_F16 || t == R1_DTYPE_BF16; }

/* The dtype a matrix made of the n tensors `names` is held in. A forced
 * dtype wins; with R1_DTYPE_AUTO the parts' own dtype is kept when they
 * share it, otherwise (a mixed quantization such as Q4_K_M, where attn_v is
 * Q6_K beside Q4_K q/k) the parts meet in a type each fits without large
 * loss: q8_0 when all are quantized (the widest quant r1infer reads is 6
 * bits), the wider float when floats are involved. Missing parts are
 * skipped here and reported when the matrix is filled. */
static int pick_dtype(const struct r1_tensor_source *src, const char *const *names, int n, enum r1_dtype forced,
                      enum r1_dtype *out) {
    enum r1_dtype first = R1_DTYPE_AUTO;
    int same = 1, any_float = 0, any_f32 = 0, f16 = 0, bf16 = 0;
    for (int i = 0; i < n; i++) {
        const struct r1_src_tensor *t = src->find(src->ctx, names[i]);
        if (!t) continue; /* reported, in file order, when the matrix is filled */
        if (first == R1_DTYPE_AUTO) first = t->dtype;
        same &= t->dtype == first;
        any_float |= is_float(t->dtype);
        any_f32 |= t->dtype == R1_DTYPE_F32;
        f16 |= t->dtype == R1_DTYPE_F16;
        bf16 |= t->dtype == R1_DTYPE_BF16;
    }
    if (forced != R1_DTYPE_AUTO) *out = forced;
    else if (first == R1_DTYPE_AUTO) *out = R1_DTYPE_F32; /* all missing: an error later */
    else if (same) *out = first;
    else if (!any_float) *out = R1_DTYPE_Q8_0;
    else if (any_f32 || (f16 && bf16)) *out = R1_DTYPE_F32;
    else *out = f16 ? R1_DTYPE_F16 : R1_DTYPE_BF16;
    return 0;
}

/* The dtypes of one layer's matrices (and of the model-level ones). */
struct layer_dtypes {
    enum r1_dtype qkv, o, gu, down;
};

static int pick_layer(const struct r1_tensor_source *src, int l, enum r1_dtype forced, struct layer_dtypes *d) {
    char n[4][NAMELEN];
    const char *p[4] = {n[0], n[1], n[2], n[3]};
    static const char *const qkv[3] = {"q_proj", "k_proj", "v_proj"};
    for (int i = 0; i < 3; i++) snprintf(n[i], NAMELEN, "model.layers.%d.self_attn.%s.weight", l, qkv[i]);
    if (pick_dtype(src, p, 3, forced, &d->qkv)) return -1;
    snprintf(n[0], NAMELEN, "model.layers.%d.self_attn.o_proj.weight", l);
    if (pick_dtype(src, p, 1, forced, &d->o)) return -1;
    snprintf(n[0], NAMELEN, "model.layers.%d.mlp.gate_proj.weight", l);
    snprintf(n[1], NAMELEN, "model.layers.%d.mlp.up_proj.weight", l);
    if (pick_dtype(src, p, 2, forced, &d->gu)) return -1;
    snprintf(n[0], NAMELEN, "model.layers.%d.mlp.down_proj.weight", l);
    return pick_dtype(src, p, 1, forced, &d->down);
}

/* A matrix whose dtype differs from a part's is converted through f32. */
static int check_target(const struct r1_mat *m, const struct r1_tensor_source *src, const char *name) {
    const struct r1_src_tensor *t = src->find(src->ctx, name);
    if (t && t->dtype != m->dtype && !r1_dtype_traits[m->dtype].from_f32)
        return r1_err("%s: tensor '%s' (%s) cannot be converted to %s (r1infer cannot produce "
                      "%s; choose --dtype f32, f16, bf16, q8_0, q4_0, q4_1, q5_0, q5_1, q4_K or q6_K)",
                      src->path, name, r1_dtype_name(t->dtype), r1_dtype_name(m->dtype), r1_dtype_name(m->dtype));
    return 0;
}

/* Loading progress on a terminal: bytes of the source read so far. */
struct progress {
    int tty;
    const char *path;
    size_t done, total;
    double last;
};

static void progress_add(struct progress *pr, const struct r1_src_tensor *t) {
    pr->done += t->size;
    if (!pr->tty) return;
    double now = r1_now();
    if (now - pr->last < 0.1 && pr->done < pr->total) return;
    pr->last = now;
    fprintf(stderr, "\rloading %s: %3d%% (%.2f of %.2f GB)", pr->path,
            pr->total ? (int)(100.0 * (double)pr->done / (double)pr->total) : 100, pr->done / 1e9, pr->total / 1e9);
}

/* How the arena is filled from the source: converting, or (a layout cache
 * mapped from its file) checking a sample of it against the source. */
struct filler {
    const struct r1_tensor_source *src;
    struct progress *pr;
    const uint8_t *a0, *a1; /* the arena: converted matrices lie here */
    float *tmp;             /* the widest row, in floats */
    uint8_t *row;           /* check: a row or vector converted here, (widest row) x 4 bytes */
    int check;              /* compare instead of writing */
    const char *differs;    /* check: the first tensor whose bytes differ */
};

/* Rows r0.. of m from t: nothing to do when m points into the source. A
 * check converts t's first and last rows and compares. */
static void fill_mat(struct filler *f, const struct r1_src_tensor *t, struct r1_mat *m, int r0) {
    int mapped = (const uint8_t *)m->data < f->a0 || (const uint8_t *)m->data >= f->a1;
    if (!mapped && !f->check) convert_rows(t, m, r0, f->tmp);
    const int last = (int)t->shape[0] - 1, rows[2] = {0, last};
    for (int i = 0; i < 2 && !mapped && f->check && !f->differs; i++) {
        convert_row(t, m->dtype, rows[i], f->row, f->tmp);
        if (memcmp(f->row, (const uint8_t *)m->data + (size_t)(r0 + rows[i]) * m->row_bytes, m->row_bytes))
            f->differs = t->name;
    }
    progress_add(f->pr, t);
    if (f->src->in_place && !mapped) r1_mem_release(t->data, t->size);
}

/* A vector as f32 into dst (a check compares). */
static void fill_vec(struct filler *f, const struct r1_src_tensor *t, float *dst, int n) {
    to_f32_vec(t, f->check ? (float *)f->row : dst, n);
    if (f->check && !f->differs && memcmp(f->row, dst, (size_t)n * sizeof *dst)) f->differs = t->name;
    vec_done(f->src, t);
}

/* The arena, once its size is known: mapped from the layout cache when the
 * source names one and it holds this plan; else refuse a model that cannot
 * fit. A source in private memory gives back what it converts as it goes. */
static int alloc_arena(struct r1_model *m, const struct r1_tensor_source *src, const struct planner *p,
                       struct r1_layout_cache *lc) {
    const size_t bytes = p->off, in_place = p->in_place;
    char dir[4096];
    m->arena_size = bytes;
    if (src->layout_cache && !r1_layout_cache_dir(dir, sizeof dir, src->layout_cache)) {
        m->arena = r1_layout_cache_open(lc, dir, src->path, src->file_key, p->plan, bytes);
        if (lc->state == R1_LC_HIT) return 0; /* file pages: the page cache holds them */
    }
    uint64_t avail = r1_mem_available();
    if (src->private_pages) avail += p->released;
    const double G = 1024.0 * 1024.0 * 1024.0;
    if (src->in_place && bytes > avail)
        return r1_err("%s: the model needs %.2f GiB of memory for its weights in the kernels' layout "
                      "(plus %.2f GiB used in place from the file, which can be paged), but only %.2f GiB "
                      "is available; free memory, or use a smaller quantization of the model",
                      src->path, bytes / G, in_place / G, avail / G);
    if (src->in_place && in_place && bytes + in_place > avail)
        fprintf(stderr,
                "r1infer: warning: %s needs %.2f GiB of memory but %.2f GiB is available: "
                "weights will be read from the disk again on every token (slow)\n",
                src->path, (bytes + in_place) / G, avail / G);
    if (m->arena) return 0; /* a new layout cache file's */
    m->arena = r1_pages_alloc(bytes, "the model weights");
    if (!m->arena) return r1_err_prefix("%s", src->path);
    return 0;
}

/* Fill (or check) the arena planned for m from src. -1 with an error. */
static int fill_all(struct r1_model *m, const struct r1_tensor_source *src, struct filler *F) {
    const struct r1_config *c = &m->cfg;
    const int D = c->dim, hd = c->head_dim, qd = c->n_head * hd, kvd = c->n_kv_head * hd;
    char name[NAMELEN];
    const struct r1_src_tensor *t;
    if (!(t = get(src, "model.embed_tokens.weight", c->vocab, D))) return -1;
    if (check_target(&m->emb, src, t->name)) return -1;
    fill_mat(F, t, &m->emb, 0);
    for (int l = 0; l < c->n_layer; l++) {
        struct r1_layer *L = &m->layers[l];
        static const char *const qkv[3] = {"q_proj", "k_proj", "v_proj"};
        int rows[3] = {qd, kvd, kvd}, r0 = 0;
        for (int i = 0; i < 3; i++) {
            snprintf(name, sizeof name, "model.layers.%d.self_attn.%s.weight", l, qkv[i]);
            if (!(t = get(src, name, rows[i], D))) return -1;
            if (check_target(&L->wqkv, src, name)) return -1;
            fill_mat(F, t, &L->wqkv, r0);
            if (c->qkv_bias) { /* else the fused bias stays zero */
                snprintf(name, sizeof name, "model.layers.%d.self_attn.%s.bias", l, qkv[i]);
                if (!(t = get(src, name, rows[i], 0)) || vec_ok(t, rows[i], src->path)) return -1;
                fill_vec(F, t, L->bqkv + r0, rows[i]);
            }
            r0 += rows[i];
        }
        static const char *const mats[4] = {"self_attn.o_proj", "mlp.gate_proj", "mlp.up_proj", "mlp.down_proj"};
        struct r1_mat *dst[4] = {&L->wo, &L->wgu, &L->wgu, &L->wdown};
        const int64_t shape[4][2] = {{D, qd}, {c->ffn, D}, {c->ffn, D}, {D, c->ffn}};
        for (int i = 0; i < 4; i++) {
            snprintf(name, sizeof name, "model.layers.%d.%s.weight", l, mats[i]);
            if (!(t = get(src, name, shape[i][0], shape[i][1]))) return -1;
            if (check_target(dst[i], src, name)) return -1;
            fill_mat(F, t, dst[i], i == 2 ? c->ffn : 0);
        }
        snprintf(name, sizeof name, "model.layers.%d.input_layernorm.weight", l);
        if (!(t = get(src, name, D, 0)) || vec_ok(t, D, src->path)) return -1;
        fill_vec(F, t, L->attn_norm, D);
        snprintf(name, sizeof name, "model.layers.%d.post_attention_layernorm.weight", l);
        if (!(t = get(src, name, D, 0)) || vec_ok(t, D, src->path)) return -1;
        fill_vec(F, t, L->ffn_norm, D);
    }
    if (!(t = get(src, "model.norm.weight", D, 0)) || vec_ok(t, D, src->path)) return -1;
    fill_vec(F, t, m->out_norm, D);
    float *freq = F->check ? (float *)F->row : m->rope_inv_freq;
    if ((t = src->find(src->ctx, R1_ROPE_FREQS_NAME))) { /* GGUF: the llama3 divisors */
        if (!(t = get(src, R1_ROPE_FREQS_NAME, hd / 2, 0)) || vec_ok(t, hd / 2, src->path)) return -1;
        float *f = F->tmp; /* maxcols >= head_dim/2 floats */
        to_f32_vec(t, f, hd / 2);
        for (int i = 0; i < hd / 2; i++)
            if (!(f[i] > 0) || !(f[i] < 1e6f))
                return r1_err("%s: rope_freqs.weight[%d] = %g is not a positive frequency divisor", src->path, i, f[i]);
        r1_rope_inv_freq(c, f, freq);
    } else {
        r1_rope_inv_freq(c, NULL, freq);
    }
    if (F->check && !F->differs && memcmp(freq, m->rope_inv_freq, (size_t)hd / 2 * sizeof *freq))
        F->differs = "the rope frequencies";
    if (!c->tied) {
        if (!(t = get(src, "lm_head.weight", c->vocab, D))) return -1;
        if (check_target(&m->lm_head, src, t->name)) return -1;
        fill_mat(F, t, &m->lm_head, 0);
    }
    return 0;
}

int r1_model_build(struct r1_model *m, const struct r1_tensor_source *src, enum r1_dtype dtype, int progress) {
    const struct r1_config *c = &m->cfg;
    if (dtype != R1_DTYPE_AUTO && ((int)dtype < 0 || dtype >= R1_DTYPE_COUNT || !r1_dtype_traits[dtype].from_f32))
        return r1_err("weights cannot be converted to %s", r1_dtype_name(dtype));
    const int D = c->dim, hd = c->head_dim, qd = c->n_head * hd, kvd = c->n_kv_head * hd;
    const int nqkv = qd + 2 * kvd;
    m->layers = calloc((size_t)c->n_layer, sizeof *m->layers);
    if (!m->layers) return r1_err("out of memory");
    static const char *const emb_name[1] = {"model.embed_tokens.weight"};
    static const char *const head_name[1] = {"lm_head.weight"};
    enum r1_dtype emb_dt, head_dt = R1_DTYPE_AUTO;
    if (pick_dtype(src, emb_name, 1, dtype, &emb_dt) || (!c->tied && pick_dtype(src, head_name, 1, dtype, &head_dt)))
        return -1;

    /* pass 0 sizes the arena, pass 1 fills it */
    struct planner p = {.layout = m->file_layout || !m->layout_for ? NULL : m->layout_for->weight_layout};
    struct r1_layout_cache lc = {.fd = -1, .lock_fd = -1};
    struct progress pr = {.tty = progress && isatty(2), .path = src->path};
    char name[NAMELEN];
    for (int pass = 0; pass < 2; pass++) {
        p.off = 0, p.in_place = 0, p.released = 0, p.plan = 0xcbf29ce484222325ull;
        /* the table is only read a row at a time, unless it is the lm_head too */
        const struct r1_src_tensor *emb = peek(src, emb_name[0]), *head = peek(src, head_name[0]);
        if (plan_mat(&p, &m->emb, emb_dt, c->vocab, D, "embedding", src, &emb, 1, c->tied)) return -1;
        for (int l = 0; l < c->n_layer; l++) {
            struct r1_layer *L = &m->layers[l];
            struct layer_dtypes ld;
            if (pick_layer(src, l, dtype, &ld)) return -1;
            L->attn_norm = take(&p, (size_t)D * 4);
            L->ffn_norm = take(&p, (size_t)D * 4);
            L->bqkv = take(&p, (size_t)nqkv * 4);
            static const char *const part_name[7] = {"self_attn.q_proj", "self_attn.k_proj", "self_attn.v_proj",
                                                     "self_attn.o_proj", "mlp.gate_proj",    "mlp.up_proj",
                                                     "mlp.down_proj"};
            const struct r1_src_tensor *part[7];
            for (int i = 0; i < 7; i++) {
                snprintf(name, sizeof name, "model.layers.%d.%s.weight", l, part_name[i]);
                part[i] = peek(src, name);
            }
            if (plan_mat(&p, &L->wqkv, ld.qkv, nqkv, D, "q/k/v projection", src, part, 3, 1) ||
                plan_mat(&p, &L->wo, ld.o, D, qd, "o_proj", src, part + 3, 1, 1) ||
                plan_mat(&p, &L->wgu, ld.gu, 2 * c->ffn, D, "gate/up projection", src, part + 4, 2, 1) ||
                plan_mat(&p, &L->wdown, ld.down, D, c->ffn, "down_proj", src, part + 6, 1, 1))
                return -1;
        }
        m->out_norm = take(&p, (size_t)D * 4);
        m->rope_inv_freq = take(&p, (size_t)hd / 2 * 4);
        if (c->tied) {
            m->lm_head = m->emb;
        } else if (plan_mat(&p, &m->lm_head, head_dt, c->vocab, D, "lm_head", src, &head, 1, 1)) {
            return -1;
        }
        if (pass == 0) {
            if (alloc_arena(m, src, &p, &lc)) {
                r1_layout_cache_close(&lc);
                return -1;
            }
            p.base = m->arena;
        }
    }
    m->in_place_bytes = p.in_place;
    /* "the dtype of the big matrices": the FFN's, which holds most bytes */
    m->dtype = c->n_layer > 0 ? m->layers[0].wgu.dtype : emb_dt;
    if (pr.tty) { /* the bytes to read, for the progress line */
        static const char *const per_layer[] = {
            "self_attn.q_proj.weight", "self_attn.k_proj.weight", "self_attn.v_proj.weight", "self_attn.o_proj.weight",
            "mlp.gate_proj.weight",    "mlp.up_proj.weight",      "mlp.down_proj.weight"};
        const struct r1_src_tensor *t;
        if ((t = peek(src, emb_name[0]))) pr.total += t->size;
        if (!c->tied && (t = peek(src, head_name[0]))) pr.total += t->size;
        for (int l = 0; l < c->n_layer; l++)
            for (size_t i = 0; i < sizeof per_layer / sizeof *per_layer; i++) {
                snprintf(name, sizeof name, "model.layers.%d.%s", l, per_layer[i]);
                if ((t = peek(src, name))) pr.total += t->size;
            }
    }

    int maxcols = D > c->ffn ? D : c->ffn;
    if (maxcols < qd) maxcols = qd; /* o_proj's columns: heads x head_dim may exceed dim */
    struct filler F = {.src = src,
                       .pr = &pr,
                       .a0 = m->arena,
                       .a1 = (const uint8_t *)m->arena + m->arena_size,
                       .check = lc.state == R1_LC_HIT};
    F.tmp = malloc((size_t)maxcols * sizeof(float));
    F.row = malloc((size_t)maxcols * sizeof(float));
    int rc = F.tmp && F.row ? fill_all(m, src, &F) : r1_err("out of memory");
    if (!rc && F.differs) { /* a cache of the same plan holding other numbers: never used */
        char why[192];
        snprintf(why, sizeof why, "its %s differs from the model's", F.differs);
        F.check = 0, pr.done = 0;
        if (!r1_layout_cache_rebuild(&lc, m->arena, why))
            rc = r1_err("%s: cannot map the model's weights: %s", src->path, strerror(errno));
        else rc = fill_all(m, src, &F);
    }
    if (pr.tty) fprintf(stderr, "\r\033[K");
    if (!rc) r1_layout_cache_commit(&lc, m->arena, progress);
    m->layout_cache = lc.state;
    r1_layout_cache_close(&lc);
    free(F.tmp);
    free(F.row);
    return rc;
}
