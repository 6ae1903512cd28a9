/*
 * synth_gguf.c - a random-weight GGUF of a real shape (`r1infer synth -o
 * FILE.gguf`), written tensor by tensor so a model far larger than memory
 * (the 32b in q4_K: ~19 GB) is made without ever being held. Matrices are
 * in any dtype r1infer can quantize to: each row is one of a few dozen rows
 * quantized once from uniform noise (std 0.02), picked by a hash of (tensor,
 * row), so writing costs a copy per row, not a quantization; norms are 1,
 * biases noise in f32. q|k|v and gate|up are stored one after the other, as
 * `convert` does, so a loader may use them where they lie. Only for memory,
 * start-up and speed measurements: the numbers mean nothing.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/dtype.h"
#include "gguf/gguf.h"
#include "tokenizer/gguf_tok.h"
#include "model/model.h"
#include "synth/synth.h"

#define POOL_ROWS 64
#define MAX_POOLS 4

struct gtensor {
    char name[64];
    int64_t shape[2]; /* rows, cols (cols 0: a vector) */
    enum r1_dtype dt;
    int norm;
};

struct pool {
    int cols;
    uint8_t *rows; /* POOL_ROWS rows of the dtype */
};

struct gsynth {
    struct gtensor *t;
    int n;
    enum r1_dtype dt;
    uint64_t seed;
    struct pool pool[MAX_POOLS];
    float *row;
};

static float uniform(uint64_t *x) {
    *x ^= *x >> 12, *x ^= *x << 25, *x ^= *x >> 27;
    uint32_t r = (uint32_t)((*x * 0x2545f4914f6cdd1dull) >> 40);
    return ((float)r * (1.0f / 16777216.0f) * 2.0f - 1.0f) * 0.0346f; /* std 0.02 */
}

/* The pool of rows `cols` wide, quantized on first use. */
static const uint8_t *pool_of(struct gsynth *g, int cols) {
    size_t rb = r1_dtype_row_bytes(g->dt, cols);
    for (int i = 0; i < MAX_POOLS; i++) {
        struct pool *p = &g->pool[i];
        if (p->cols == cols) return p->rows;
        if (p->cols) continue;
        float *f = realloc(g->row, (size_t)cols * sizeof *f);
        p->rows = malloc(rb * POOL_ROWS);
        if (!f || !p->rows) {
            free(f == g->row ? NULL : f);
            r1_err("out of memory");
            return NULL;
        }
        g->row = f;
        uint64_t st = g->seed * 0x9e3779b97f4a7c15ull + (uint64_t)cols;
        if (!st) st = 1;
        for (int r = 0; r < POOL_ROWS; r++) {
            for (int c = 0; c < cols; c++) f[c] = uniform(&st);
            r1_dtype_traits[g->dt].from_f32(f, p->rows + (size_t)r * rb, cols);
        }
        p->cols = cols;
        return p->rows;
    }
    r1_err("synthetic GGUF: more than %d matrix widths", MAX_POOLS);
    return NULL;
}

static int gfill(void *ctx, int index, uint8_t *dst, size_t size) {
    struct gsynth *g = ctx;
    const struct gtensor *t = &g->t[index];
    uint64_t st = (g->seed + 1) * 0xbf58476d1ce4e5b9ull + (uint64_t)index * 0x94d049bb133111ebull;
    if (!st) st = 1;
    if (!t->shape[1]) { /* a norm (1) or a bias (noise), f32 */
        float *v = (float *)dst;
        for (size_t i = 0; i < size / 4; i++) v[i] = t->norm ? 1.0f : uniform(&st);
        return 0;
    }
    const int cols = (int)t->shape[1];
    const size_t rb = r1_dtype_row_bytes(t->dt, cols);
    const uint8_t *pool = pool_of(g, cols);
    if (!pool) return -1;
    for (int64_t r = 0; r < t->shape[0]; r++) {
        uint64_t h = ((uint64_t)r + 1) * 0x9e3779b97f4a7c15ull ^ st;
        h ^= h >> 29;
        memcpy(dst + (size_t)r * rb, pool + (size_t)(h % POOL_ROWS) * rb, rb);
    }
    return 0;
}

int r1_synth_write_gguf(const char *path, const struct r1_config *c, enum r1_dtype dt, uint64_t seed,
                        const char *tokdir, int progress) {
    if (r1_config_check(c, "synthetic config")) return -1;
    int in_gguf = 0; /* a ggml type holds it (not a regrouped layout) */
    for (uint32_t id = 0; id < 64 && (int)dt >= 0 && dt < R1_DTYPE_COUNT; id++)
        in_gguf |= r1_ggml_type_info(id) && r1_ggml_type_info(id)->dtype == (int)dt;
    if (!in_gguf || !r1_dtype_traits[dt].from_f32)
        return r1_err("a synthetic GGUF cannot be written in %s", r1_dtype_name(dt));
    if (c->arch != R1_ARCH_QWEN2) return r1_err("a synthetic GGUF is written for the qwen2 shapes only");
    const int hd = c->head_dim, widths[3] = {c->dim, c->n_head * hd, c->ffn};
    for (int i = 0; i < 3; i++)
        if (!r1_dtype_row_bytes(dt, widths[i]))
            return r1_err("%s: %d columns are not a whole number of %s blocks (%d)", r1_dtype_name(dt), widths[i],
                          r1_dtype_name(dt), r1_dtype_traits[dt].block);
    struct gsynth g = {.dt = dt, .seed = seed};
    g.t = calloc((size_t)(13 * c->n_layer + 3), sizeof *g.t);
    struct r1_gguf_writer *w = r1_gguf_writer_new();
    int rc = -1;
    if (!g.t || !w) {
        r1_err("out of memory");
        goto out;
    }
#define T(r, cl, isnorm, ...)                                                                                          \
    do {                                                                                                               \
        struct gtensor *t_ = &g.t[g.n++];                                                                              \
        snprintf(t_->name, sizeof t_->name, __VA_ARGS__);                                                              \
        t_->shape[0] = (r), t_->shape[1] = (cl), t_->norm = (isnorm);                                                  \
        t_->dt = (cl) != 0 ? dt : R1_DTYPE_F32;                                                                        \
    } while (0)
    T(c->vocab, c->dim, 0, "token_embd.weight");
    for (int l = 0; l < c->n_layer; l++) {
        T(c->dim, 0, 1, "blk.%d.attn_norm.weight", l);
        T(c->n_head * hd, c->dim, 0, "blk.%d.attn_q.weight", l);
        T(c->n_kv_head * hd, c->dim, 0, "blk.%d.attn_k.weight", l);
        T(c->n_kv_head * hd, c->dim, 0, "blk.%d.attn_v.weight", l);
        if (c->qkv_bias) {
            T(c->n_head * hd, 0, 0, "blk.%d.attn_q.bias", l);
            T(c->n_kv_head * hd, 0, 0, "blk.%d.attn_k.bias", l);
            T(c->n_kv_head * hd, 0, 0, "blk.%d.attn_v.bias", l);
        }
        T(c->dim, c->n_head * hd, 0, "blk.%d.attn_output.weight", l);
        T(c->dim, 0, 1, "blk.%d.ffn_norm.weight", l);
        T(c->ffn, c->dim, 0, "blk.%d.ffn_gate.weight", l);
        T(c->ffn, c->dim, 0, "blk.%d.ffn_up.weight", l);
        T(c->dim, c->ffn, 0, "blk.%d.ffn_down.weight", l);
    }
    T(c->dim, 0, 1, "output_norm.weight");
    if (!c->tied) T(c->vocab, c->dim, 0, "output.weight");
#undef T
    const char *a = c->arch == R1_ARCH_LLAMA ? "llama" : "qwen2";
    char k[96];
#define KEY(s) (snprintf(k, sizeof k, "%s.%s", a, s), k)
    if (r1_gguf_w_str(w, "general.architecture", a) || r1_gguf_w_str(w, "general.name", "synthetic") ||
        r1_gguf_w_u32(w, KEY("embedding_length"), (uint32_t)c->dim) ||
        r1_gguf_w_u32(w, KEY("block_count"), (uint32_t)c->n_layer) ||
        r1_gguf_w_u32(w, KEY("feed_forward_length"), (uint32_t)c->ffn) ||
        r1_gguf_w_u32(w, KEY("attention.head_count"), (uint32_t)c->n_head) ||
        r1_gguf_w_u32(w, KEY("attention.head_count_kv"), (uint32_t)c->n_kv_head) ||
        r1_gguf_w_u32(w, KEY("context_length"), (uint32_t)c->max_pos) ||
        r1_gguf_w_f32(w, KEY("rope.freq_base"), c->rope_theta) ||
        r1_gguf_w_f32(w, KEY("attention.layer_norm_rms_epsilon"), c->eps))
        goto out;
#undef KEY
    if (tokdir && r1_gguf_w_tokenizer(w, tokdir, c->vocab, c->bos_id, c->eos_id)) goto out;
    for (int i = 0; i < g.n; i++)
        if (r1_gguf_w_tensor(w, g.t[i].name, g.t[i].dt, g.t[i].shape[1] ? 2 : 1, g.t[i].shape)) goto out;
    rc = r1_gguf_w_write(w, path, gfill, &g, progress);
out:
    r1_gguf_writer_free(w);
    for (int i = 0; i < MAX_POOLS; i++) free(g.pool[i].rows);
    free(g.row);
    free(g.t);
    return rc;
}
