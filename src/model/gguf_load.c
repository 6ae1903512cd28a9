/*
 * gguf_load.c - load a Qwen2 or Llama GGUF file: hyper-parameters from the
 * <arch>.* metadata, tensors renamed to their Hugging Face names and
 * reshaped from GGUF's innermost-first order to (rows, cols), then handed to
 * r1_model_build, which fuses Q|K|V and gate|up exactly as for safetensors.
 * llama.cpp's converter permutes the Q and K rows of llama models for its
 * interleaved rope (not those of qwen2, whose rope is rotate-half like
 * Hugging Face's): such tensors are marked (interleaved_heads) and the
 * builder restores Hugging Face's row order at load.
 * Parsing is gguf.c's job; nothing here reads the file directly.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gguf/gguf.h"
#include "model/model.h"

/* ----------------------------------------------------------------- names */

static const char *const GLOBAL[][2] = {
    {"token_embd.weight", "model.embed_tokens.weight"},
    {"output_norm.weight", "model.norm.weight"},
    {"output.weight", "lm_head.weight"},
    {R1_ROPE_FREQS_NAME, R1_ROPE_FREQS_NAME},
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
        if (!strcmp(name, GLOBAL[i][from])) return (size_t)snprintf(out, cap, "%s", GLOBAL[i][to]) < cap ? 0 : -1;
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
            return (size_t)snprintf(out, cap, "%s%ld.%s", prefix[to], layer, LAYER[i][to]) < cap ? 0 : -1;
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
                    return r1_err("%s: tensor '%s' has %d dimensions, expected at most 2", path, gname, gt->n_dims);
        struct r1_src_tensor *t = &s->t[s->n];
        t->name = s->names[s->n];
        t->dtype = (enum r1_dtype)ti->dtype;
        t->ndim = gt->n_dims > 2 ? 2 : gt->n_dims;
        if (gt->ne[0] > INT32_MAX || gt->ne[1] > INT32_MAX) return r1_err("%s: tensor '%s' is too large", path, gname);
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

/* <arch>.<key> */
static const char *akey(const char *arch, const char *key, char *buf, size_t cap) {
    snprintf(buf, cap, "%s.%s", arch, key);
    return buf;
}

static int config_from_gguf(struct r1_config *c, const struct r1_gguf *g, struct gguf_src *s) {
    struct r1_gguf_str as;
    int r = r1_gguf_get_str(g, "general.architecture", &as);
    if (r < 0) return -1;
    if (r == 0) return r1_err("%s: missing metadata 'general.architecture'", g->path);
    memset(c, 0, sizeof *c);
    const char *arch;
    if (as.len == 5 && !memcmp(as.s, "qwen2", 5)) {
        arch = "qwen2";
        c->arch = R1_ARCH_QWEN2;
        c->qkv_bias = 1;
    } else if (as.len == 5 && !memcmp(as.s, "llama", 5)) {
        arch = "llama";
        c->arch = R1_ARCH_LLAMA;
    } else {
        return r1_err("%s: architecture '%.*s' is not supported (r1infer runs qwen2 and llama "
                      "models)",
                      g->path, (int)(as.len > 40 ? 40 : as.len), as.s);
    }
    c->eps = 1e-6f;
    c->rope_theta = 10000.0f;
    c->max_pos = 4096;
    c->bos_id = c->eos_id = -1;
    char k[96];
    if (get_size(g, akey(arch, "embedding_length", k, sizeof k), 1, &c->dim) ||
        get_size(g, akey(arch, "block_count", k, sizeof k), 1, &c->n_layer) ||
        get_size(g, akey(arch, "feed_forward_length", k, sizeof k), 1, &c->ffn) ||
        get_size(g, akey(arch, "attention.head_count", k, sizeof k), 1, &c->n_head) ||
        get_size(g, akey(arch, "context_length", k, sizeof k), 0, &c->max_pos))
        return -1;
    c->n_kv_head = c->n_head;
    if (get_size(g, akey(arch, "attention.head_count_kv", k, sizeof k), 0, &c->n_kv_head) ||
        get_pos_float(g, akey(arch, "rope.freq_base", k, sizeof k), &c->rope_theta) ||
        get_pos_float(g, akey(arch, "attention.layer_norm_rms_epsilon", k, sizeof k), &c->eps))
        return -1;
    /* head_dim: attention.key_length when present (it may differ from
     * embedding_length / head_count in llama), else derived */
    int kl = 0, vl = 0, rd = 0;
    if (get_size(g, akey(arch, "attention.key_length", k, sizeof k), 0, &kl) ||
        get_size(g, akey(arch, "attention.value_length", k, sizeof k), 0, &vl) ||
        get_size(g, akey(arch, "rope.dimension_count", k, sizeof k), 0, &rd))
        return -1;
    if (kl) {
        c->head_dim = kl;
        if (c->arch == R1_ARCH_QWEN2 && kl * c->n_head != c->dim)
            return r1_err("%s: qwen2.attention.key_length %d differs from embedding_length / "
                          "head_count = %d/%d",
                          g->path, kl, c->dim, c->n_head);
    } else if (c->dim % c->n_head) {
        return r1_err("%s: %s.embedding_length %d is not a multiple of %s.attention.head_count %d "
                      "(and no %s.attention.key_length is given)",
                      g->path, arch, c->dim, arch, c->n_head, arch);
    } else {
        c->head_dim = c->dim / c->n_head;
    }
    if (vl && vl != c->head_dim)
        return r1_err("%s: %s.attention.value_length %d differs from the key length %d (not "
                      "supported)",
                      g->path, arch, vl, c->head_dim);
    if (rd && rd != c->head_dim)
        return r1_err("%s: %s.rope.dimension_count %d differs from head_dim %d (partial rotary "
                      "embeddings are not supported)",
                      g->path, arch, rd, c->head_dim);
    struct r1_gguf_str st;
    r = r1_gguf_get_str(g, akey(arch, "rope.scaling.type", k, sizeof k), &st);
    if (r < 0) return -1;
    if (r > 0 && !(st.len == 4 && !memcmp(st.s, "none", 4)))
        return r1_err("%s: rope scaling '%.*s' is not supported", g->path, (int)(st.len > 40 ? 40 : st.len), st.s);
    const struct r1_src_tensor *emb = gguf_find((void *)s, "model.embed_tokens.weight");
    if (!emb || emb->ndim != 2) return r1_err("%s: tensor 'token_embd.weight' is missing or not 2-D", g->path);
    c->vocab = (int)emb->shape[0];
    int bad;
    const struct r1_gguf_kv *toks = r1_gguf_get_arr(g, "tokenizer.ggml.tokens", R1_GGUF_STRING, &bad);
    if (bad) return -1;
    if (toks && toks->arr_n > (uint64_t)c->vocab)
        return r1_err("%s: %llu tokens but token_embd has only %d rows", g->path, (unsigned long long)toks->arr_n,
                      c->vocab);
    c->tied = gguf_find((void *)s, "lm_head.weight") == NULL;
    int64_t id;
    if ((r = r1_gguf_get_int(g, "tokenizer.ggml.bos_token_id", 0, c->vocab - 1, &id)) < 0) return -1;
    if (r) c->bos_id = (int)id;
    if ((r = r1_gguf_get_int(g, "tokenizer.ggml.eos_token_id", 0, c->vocab - 1, &id)) < 0) return -1;
    if (r) c->eos_id = (int)id;
    /* the dtype holding most bytes of the layer matrices */
    size_t bytes[R1_DTYPE_COUNT] = {0};
    for (size_t i = 0; i < s->n; i++)
        if (s->t[i].ndim == 2 && !strncmp(s->t[i].name, "model.layers.", 13)) bytes[s->t[i].dtype] += s->t[i].size;
    c->file_dtype = emb->dtype;
    for (int t = 0; t < R1_DTYPE_COUNT; t++)
        if (bytes[t] > bytes[c->file_dtype]) c->file_dtype = (enum r1_dtype)t;
    if (r1_config_check(c, g->path)) return -1;
    /* llama: Q and K rows in llama.cpp's interleaved-rope order (see the top) */
    if (c->arch == R1_ARCH_LLAMA)
        for (size_t i = 0; i < s->n; i++) {
            const char *n = s->t[i].name, *e = strrchr(n, '.');
            if (!e || strncmp(n, "model.layers.", 13)) continue;
            int heads = 0;
            if (!strncmp(e - 6, "q_proj", 6)) heads = c->n_head;
            else if (!strncmp(e - 6, "k_proj", 6)) heads = c->n_kv_head;
            if (!heads) continue;
            if (s->t[i].shape[0] != (int64_t)heads * c->head_dim)
                return r1_err("%s: tensor '%s' has %lld rows, expected %d heads x %d", g->path, n,
                              (long long)s->t[i].shape[0], heads, c->head_dim);
            s->t[i].interleaved_heads = heads;
        }
    return 0;
}

int r1_model_load_gguf(struct r1_model *m, const char *path, const struct r1_load_opts *opts) {
    struct r1_file f = {.fd = -1};
    struct r1_gguf g;
    struct gguf_src s = {0};
    int rc = -1;
    if (r1_model_open_file(&f, path, opts)) return -1;
    if (r1_gguf_parse(&g, f.data, f.size, path)) goto out_unmap;
    if (make_source(&s, &g, path) || config_from_gguf(&m->cfg, &g, &s)) goto out;
    struct r1_tensor_source src = {.ctx = &s,
                                   .path = path,
                                   .find = gguf_find,
                                   .file_name = r1_gguf_name_from_hf,
                                   .in_place = 1,
                                   .private_pages = f.anon};
    if (opts->layout_cache && !opts->no_mmap) {
        src.layout_cache = opts->layout_cache;
        src.file_key = r1_layout_file_key(0xcbf29ce484222325ull, path, f.data, f.size);
    }
    rc = r1_model_build(m, &src, opts->dtype, opts->progress);
out:
    free(s.t);
    free(s.names);
    r1_gguf_free(&g);
out_unmap:
    if (!rc) return r1_model_keep_files(m, &f, 1, opts);
    r1_file_unmap(&f);
    return rc;
}
