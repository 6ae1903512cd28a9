/*
 * gguf_load.c - load a Qwen2 GGUF file: hyper-parameters from the qwen2.*
 * metadata, tensors renamed to their Hugging Face names and reshaped from
 * GGUF's innermost-first order to (rows, cols), then handed to
 * r1_model_build, which fuses Q|K|V and gate|up exactly as for safetensors.
 * Q and K are used as stored: llama.cpp's converter permutes them for llama
 * but not for qwen2 (whose RoPE is rotate-half, like Hugging Face's).
 * Parsing is gguf.c's job; nothing here reads the file directly.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "model/gguf.h"
#include "model/model.h"

/* ----------------------------------------------------------------- names */

static const char *const GLOBAL[][2] = {
    {"token_embd.weight", "model.embed_tokens.weight"},
    {"output_norm.weight", "model.norm.weight"},
    {"output.weight", "lm_head.weight"},
};

static const char *const LAYER[][2] = {
    {"attn_norm.weight", "input_layernorm.weight"},
    {"attn_q.weight", "self_attn.q_proj.weight"},
    {"attn_q.bias", "self_attn.q_proj.bias"},
    {"attn_k.weight", "self_attn.k_proj.weight"},
    {"attn_k.bias", "self_attn.k_proj.bias"},
    {"attn_v.weight", "self_attn.v_proj.weight"},
    {"attn_v.bias", "self_attn.v_proj.bias"},
    {"attn_output.weight", "self_attn.o_proj.weight"},
    {"ffn_norm.weight", "post_attention_layernorm.weight"},
    {"ffn_gate.weight", "mlp.gate_proj.weight"},
    {"ffn_up.weight", "mlp.up_proj.weight"},
    {"ffn_down.weight", "mlp.down_proj.weight"},
};

#define N_GLOBAL (sizeof GLOBAL / sizeof GLOBAL[0])
#define N_LAYER (sizeof LAYER / sizeof LAYER[0])

/* Map `name` from column `from` to column `to` of the tables. */
static int map_name(const char *name, char *out, size_t cap, int from) {
    int to = !from;
    static const char *const prefix[2] = {"blk.", "model.layers."};
    for (size_t i = 0; i < N_GLOBAL; i++)
        if (!strcmp(name, GLOBAL[i][from]))
            return (size_t)snprintf(out, cap, "%s", GLOBAL[i][to]) < cap ? 0 : -1;
    size_t pl = strlen(prefix[from]);
    if (strncmp(name, prefix[from], pl)) return -1;
    const char *p = name + pl;
    long layer = 0;
    int digits = 0;
    while (*p >= '0' && *p <= '9' && digits < 7) layer = layer * 10 + (*p++ - '0'), digits++;
    if (!digits || *p != '.' || (digits > 1 && name[pl] == '0')) return -1;
    p++;
    for (size_t i = 0; i < N_LAYER; i++)
        if (!strcmp(p, LAYER[i][from]))
            return (size_t)snprintf(out, cap, "%s%ld.%s", prefix[to], layer, LAYER[i][to]) < cap ? 0
                                                                                                 : -1;
    return -1;
}

int r1_gguf_name_to_hf(const char *gguf, char *out, size_t cap) { return map_name(gguf, out, cap, 0); }
int r1_gguf_name_from_hf(const char *hf, char *out, size_t cap) { return map_name(hf, out, cap, 1); }

/* ---------------------------------------------------------------- source */

#define NAMELEN 96

struct gguf_src {
    struct r1_src_tensor *t;
    char (*names)[NAMELEN];
    size_t n;
};

static const struct r1_src_tensor *gguf_find(void *ctx, const char *name) {
    struct gguf_src *s = ctx;
    for (size_t i = 0; i < s->n; i++)
        if (!strcmp(s->t[i].name, name)) return &s->t[i];
    return NULL;
}

/* Every tensor with a Qwen2 name becomes a source tensor under its HF name. */
static int make_source(struct gguf_src *s, const struct r1_gguf *g, const char *path) {
    s->t = calloc(g->n_tensors ? g->n_tensors : 1, sizeof *s->t);
    s->names = calloc(g->n_tensors ? g->n_tensors : 1, sizeof *s->names);
    if (!s->t || !s->names) return r1_err("out of memory");
    for (size_t i = 0; i < g->n_tensors; i++) {
        const struct r1_gguf_tensor *gt = &g->tensors[i];
        char gname[NAMELEN];
        if (gt->name.len >= sizeof gname) continue;
        memcpy(gname, gt->name.s, gt->name.len);
        gname[gt->name.len] = 0;
        if (r1_gguf_name_to_hf(gname, s->names[s->n], NAMELEN)) continue;
        const struct r1_ggml_type *ti = r1_ggml_type_info(gt->ggml_type);
        if (ti->dtype < 0)
            return r1_err("%s: tensor '%s' has type %s, which r1infer cannot compute with "
                          "(supported: f32, f16, bf16, q8_0, q4_0, q4_1, q5_0, q5_1, q4_K, q5_K, "
                          "q6_K); pick another quantization of the model",
                          path, gname, ti->name);
        if (gt->n_dims > 2)
            for (int d = 2; d < gt->n_dims; d++)
                if (gt->ne[d] != 1)
                    return r1_err("%s: tensor '%s' has %d dimensions, expected at most 2", path,
                                  gname, gt->n_dims);
        struct r1_src_tensor *t = &s->t[s->n];
        t->name = s->names[s->n];
        t->dtype = (enum r1_dtype)ti->dtype;
        t->ndim = gt->n_dims > 2 ? 2 : gt->n_dims;
        if (gt->ne[0] > INT32_MAX || gt->ne[1] > INT32_MAX)
            return r1_err("%s: tensor '%s' is too large", path, gname);
        if (t->ndim == 1) {
            t->shape[0] = (int64_t)gt->ne[0];
        } else {
            t->shape[0] = (int64_t)gt->ne[1]; /* rows */
            t->shape[1] = (int64_t)gt->ne[0]; /* cols: innermost in GGUF */
        }
        t->data = gt->data;
        t->size = gt->size;
        s->n++;
    }
    return 0;
}

/* -------------------------------------------------------------- metadata */

static int get_size(const struct r1_gguf *g, const char *key, int required, int *out) {
    int64_t v;
    int r = r1_gguf_get_int(g, key, 1, 1 << 30, &v);
    if (r < 0) return -1;
    if (r == 0) return required ? r1_err("%s: missing metadata '%s'", g->path, key) : 0;
    *out = (int)v;
    return 0;
}

static int get_pos_float(const struct r1_gguf *g, const char *key, float *out) {
    double v;
    int r = r1_gguf_get_float(g, key, &v);
    if (r < 0) return -1;
    if (r == 0) return 0;
    if (!(v > 0) || v > 1e30) return r1_err("%s: metadata '%s' = %g must be positive", g->path, key, v);
    *out = (float)v;
    return 0;
}

static int config_from_gguf(struct r1_config *c, const struct r1_gguf *g, const struct gguf_src *s) {
    struct r1_gguf_str arch;
    int r = r1_gguf_get_str(g, "general.architecture", &arch);
    if (r < 0) return -1;
    if (r == 0) return r1_err("%s: missing metadata 'general.architecture'", g->path);
    if (arch.len != 5 || memcmp(arch.s, "qwen2", 5))
        return r1_err("%s: architecture '%.*s' is not supported (r1infer runs qwen2 models)",
                      g->path, (int)(arch.len > 40 ? 40 : arch.len), arch.s);
    memset(c, 0, sizeof *c);
    c->eps = 1e-6f;
    c->rope_theta = 10000.0f;
    c->max_pos = 4096;
    c->bos_id = c->eos_id = -1;
    if (get_size(g, "qwen2.embedding_length", 1, &c->dim) ||
        get_size(g, "qwen2.block_count", 1, &c->n_layer) ||
        get_size(g, "qwen2.feed_forward_length", 1, &c->ffn) ||
        get_size(g, "qwen2.attention.head_count", 1, &c->n_head) ||
        get_size(g, "qwen2.context_length", 0, &c->max_pos))
        return -1;
    c->n_kv_head = c->n_head;
    if (get_size(g, "qwen2.attention.head_count_kv", 0, &c->n_kv_head) ||
        get_pos_float(g, "qwen2.rope.freq_base", &c->rope_theta) ||
        get_pos_float(g, "qwen2.attention.layer_norm_rms_epsilon", &c->eps))
        return -1;
    c->head_dim = c->dim / c->n_head;
    int kl = c->head_dim;
    if (get_size(g, "qwen2.attention.key_length", 0, &kl)) return -1;
    if (kl != c->head_dim)
        return r1_err("%s: qwen2.attention.key_length %d differs from embedding_length / "
                      "head_count = %d", g->path, kl, c->head_dim);
    struct r1_gguf_str st;
    r = r1_gguf_get_str(g, "qwen2.rope.scaling.type", &st);
    if (r < 0) return -1;
    if (r > 0 && !(st.len == 4 && !memcmp(st.s, "none", 4)))
        return r1_err("%s: rope scaling '%.*s' is not supported", g->path,
                      (int)(st.len > 40 ? 40 : st.len), st.s);
    const struct r1_src_tensor *emb = gguf_find((void *)s, "model.embed_tokens.weight");
    if (!emb || emb->ndim != 2)
        return r1_err("%s: tensor 'token_embd.weight' is missing or not 2-D", g->path);
    c->vocab = (int)emb->shape[0];
    int bad;
    const struct r1_gguf_kv *toks = r1_gguf_get_arr(g, "tokenizer.ggml.tokens", R1_GGUF_STRING, &bad);
    if (bad) return -1;
    if (toks && toks->arr_n > (uint64_t)c->vocab)
        return r1_err("%s: %llu tokens but token_embd has only %d rows", g->path,
                      (unsigned long long)toks->arr_n, c->vocab);
    c->tied = gguf_find((void *)s, "lm_head.weight") == NULL;
    int64_t id;
    if ((r = r1_gguf_get_int(g, "tokenizer.ggml.bos_token_id", 0, c->vocab - 1, &id)) < 0) return -1;
    if (r) c->bos_id = (int)id;
    if ((r = r1_gguf_get_int(g, "tokenizer.ggml.eos_token_id", 0, c->vocab - 1, &id)) < 0) return -1;
    if (r) c->eos_id = (int)id;
    /* the dtype holding most bytes of the layer matrices */
    size_t bytes[R1_DTYPE_COUNT] = {0};
    for (size_t i = 0; i < s->n; i++)
        if (s->t[i].ndim == 2 && !strncmp(s->t[i].name, "model.layers.", 13))
            bytes[s->t[i].dtype] += s->t[i].size;
    c->file_dtype = emb->dtype;
    for (int t = 0; t < R1_DTYPE_COUNT; t++)
        if (bytes[t] > bytes[c->file_dtype]) c->file_dtype = (enum r1_dtype)t;
    return r1_config_check(c, g->path);
}

int r1_model_load_gguf(struct r1_model *m, const char *path, const struct r1_load_opts *opts) {
    struct r1_file f = {.fd = -1};
    struct r1_gguf g;
    struct gguf_src s = {0};
    int rc = -1;
    if (r1_file_map(&f, path)) return -1;
    if (r1_gguf_parse(&g, f.data, f.size, path)) goto out_unmap;
    if (make_source(&s, &g, path) || config_from_gguf(&m->cfg, &g, &s)) goto out;
    struct r1_tensor_source src = {.ctx = &s, .path = path, .find = gguf_find};
    rc = r1_model_build(m, &src, opts->dtype, opts->progress);
out:
    free(s.t);
    free(s.names);
    r1_gguf_free(&g);
out_unmap:
    r1_file_unmap(&f);
    return rc;
}
