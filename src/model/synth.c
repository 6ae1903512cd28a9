/*
 * synth.c - random-weight models of the real shapes: the named configs
 * (tiny, 1.5b, 7b, 14b, 32b), a writer for a Hugging Face directory
 * (config.json + model.safetensors + tokenizer files), and an in-memory
 * model for benchmarks that never touches the disk. Weights are uniform
 * with std 0.02 (biases too), norms are 1.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include "model/model.h"
#include "model/tp.h"

struct synth_cfg {
    const char *name;
    enum r1_arch arch;
    int dim, n_layer, n_head, n_kv_head, ffn, vocab, max_pos;
    float theta;
    int bos, eos;
};

static const struct synth_cfg synth_cfgs[] = {
    {"tiny", R1_ARCH_QWEN2, 64, 2, 4, 2, 128, 151936, 4096, 10000.0f, 151646, 151643},
    {"1.5b", R1_ARCH_QWEN2, 1536, 28, 12, 2, 8960, 151936, 131072, 10000.0f, 151646, 151643},
    {"7b", R1_ARCH_QWEN2, 3584, 28, 28, 4, 18944, 152064, 131072, 10000.0f, 151646, 151643},
    {"14b", R1_ARCH_QWEN2, 5120, 48, 40, 8, 13824, 152064, 131072, 1000000.0f, 151646, 151643},
    {"32b", R1_ARCH_QWEN2, 5120, 64, 40, 8, 27648, 152064, 131072, 1000000.0f, 151646, 151643},
    /* DeepSeek-R1-Distill-Llama: rope_theta 500000 with llama3 scaling (below) */
    {"llama-8b", R1_ARCH_LLAMA, 4096, 32, 32, 8, 14336, 128256, 131072, 500000.0f, 128000, 128001},
    {"llama-70b", R1_ARCH_LLAMA, 8192, 80, 64, 8, 28672, 128256, 131072, 500000.0f, 128000, 128001},
};

int r1_synth_config(const char *name, struct r1_config *c) {
    for (size_t i = 0; i < sizeof synth_cfgs / sizeof synth_cfgs[0]; i++) {
        const struct synth_cfg *s = &synth_cfgs[i];
        if (strcmp(s->name, name)) continue;
        *c = (struct r1_config){.arch = s->arch,
                                .dim = s->dim,
                                .n_layer = s->n_layer,
                                .n_head = s->n_head,
                                .n_kv_head = s->n_kv_head,
                                .head_dim = s->dim / s->n_head,
                                .ffn = s->ffn,
                                .vocab = s->vocab,
                                .max_pos = s->max_pos,
                                .tied = 0,
                                .eps = 1e-6f,
                                .rope_theta = s->theta,
                                .qkv_bias = s->arch == R1_ARCH_QWEN2,
                                .file_dtype = R1_DTYPE_BF16,
                                .bos_id = s->bos,
                                .eos_id = s->eos};
        if (s->arch == R1_ARCH_LLAMA) {
            c->eps = 1e-5f;
            c->rope_factor = 8.0f;
            c->rope_low_freq_factor = 1.0f;
            c->rope_high_freq_factor = 4.0f;
            c->rope_orig_ctx = 8192;
        }
        return 0;
    }
    return r1_err("unknown synthetic config '%s' (tiny, 1.5b, 7b, 14b, 32b, llama-8b, llama-70b)", name);
}

/* ---- the tensor list of a Qwen2 checkpoint ---- */
struct tdesc {
    char name[96];
    int64_t rows, cols; /* cols 0: vector */
    int kind;           /* 0 weight, 1 bias, 2 norm */
};

static int tensor_list(const struct r1_config *c, struct tdesc *out) {
    int n = 0, hd = c->head_dim;
#define ADD(k, r, cl, ...)                                                                                             \
    do {                                                                                                               \
        if (out) {                                                                                                     \
            snprintf(out[n].name, sizeof out[n].name, __VA_ARGS__);                                                    \
            out[n].rows = (r), out[n].cols = (cl), out[n].kind = (k);                                                  \
        }                                                                                                              \
        n++;                                                                                                           \
    } while (0)
    ADD(0, c->vocab, c->dim, "model.embed_tokens.weight");
    for (int l = 0; l < c->n_layer; l++) {
        const char *p = "model.layers.";
        ADD(0, c->n_head * hd, c->dim, "%s%d.self_attn.q_proj.weight", p, l);
        if (c->qkv_bias) ADD(1, c->n_head * hd, 0, "%s%d.self_attn.q_proj.bias", p, l);
        ADD(0, c->n_kv_head * hd, c->dim, "%s%d.self_attn.k_proj.weight", p, l);
        if (c->qkv_bias) ADD(1, c->n_kv_head * hd, 0, "%s%d.self_attn.k_proj.bias", p, l);
        ADD(0, c->n_kv_head * hd, c->dim, "%s%d.self_attn.v_proj.weight", p, l);
        if (c->qkv_bias) ADD(1, c->n_kv_head * hd, 0, "%s%d.self_attn.v_proj.bias", p, l);
        ADD(0, c->dim, c->n_head * hd, "%s%d.self_attn.o_proj.weight", p, l);
        ADD(0, c->ffn, c->dim, "%s%d.mlp.gate_proj.weight", p, l);
        ADD(0, c->ffn, c->dim, "%s%d.mlp.up_proj.weight", p, l);
        ADD(0, c->dim, c->ffn, "%s%d.mlp.down_proj.weight", p, l);
        ADD(2, c->dim, 0, "%s%d.input_layernorm.weight", p, l);
        ADD(2, c->dim, 0, "%s%d.post_attention_layernorm.weight", p, l);
    }
    ADD(2, c->dim, 0, "model.norm.weight");
    if (!c->tied) ADD(0, c->vocab, c->dim, "lm_head.weight");
#undef ADD
    return n;
}

/* Fill n values of kind into dst as `dt` (f32, f16 or bf16). */
static void fill(void *dst, enum r1_dtype dt, size_t n, int kind, uint64_t *state) {
    const float a = 0.02f * 1.7320508f; /* uniform [-a, a] has std 0.02 */
    uint64_t x = *state;
    for (size_t i = 0; i < n; i++) {
        float v = 1.0f;
        if (kind != 2) {
            x ^= x >> 12, x ^= x << 25, x ^= x >> 27;
            uint32_t r = (uint32_t)((x * 0x2545f4914f6cdd1dull) >> 40); /* 24 bits */
            v = ((float)r * (1.0f / 16777216.0f) * 2.0f - 1.0f) * a;
        }
        if (dt == R1_DTYPE_F32) ((float *)dst)[i] = v;
        else if (dt == R1_DTYPE_F16) ((uint16_t *)dst)[i] = r1_f32_to_f16(v);
        else ((uint16_t *)dst)[i] = r1_f32_to_bf16(v);
    }
    *state = x;
}

static uint64_t tensor_seed(uint64_t seed, int index) {
    uint64_t z = seed * 0x9e3779b97f4a7c15ull + (uint64_t)index * 0xbf58476d1ce4e5b9ull + 1;
    z ^= z >> 31;
    return z ? z : 1;
}

/* ---- in-memory model: a tensor source that generates on lookup ---- */
struct gen_src {
    const struct r1_config *c;
    struct tdesc *list;
    int n;
    uint64_t seed;
    struct r1_src_tensor cur;
    void *buf;
};

static const struct r1_src_tensor *gen_find(void *ctx, const char *name) {
    struct gen_src *g = ctx;
    for (int i = 0; i < g->n; i++) {
        if (strcmp(g->list[i].name, name)) continue;
        const struct tdesc *d = &g->list[i];
        size_t count = (size_t)d->rows * (size_t)(d->cols ? d->cols : 1);
        uint64_t st = tensor_seed(g->seed, i);
        fill(g->buf, R1_DTYPE_BF16, count, d->kind, &st);
        g->cur = (struct r1_src_tensor){.name = d->name,
                                        .dtype = R1_DTYPE_BF16,
                                        .ndim = d->cols ? 2 : 1,
                                        .shape = {d->rows, d->cols},
                                        .data = g->buf,
                                        .size = count * 2};
        return &g->cur;
    }
    return NULL;
}

static r1_model_t *synthetic(const struct r1_config *c, enum r1_dtype dtype, uint64_t seed, int progress,
                             int file_layout) {
    if (r1_config_check(c, "synthetic config")) return NULL;
    struct r1_model *m = calloc(1, sizeof *m);
    int n = tensor_list(c, NULL);
    struct tdesc *list = calloc((size_t)n, sizeof *list);
    size_t big = (size_t)c->vocab * c->dim;
    if ((size_t)c->ffn * c->dim > big) big = (size_t)c->ffn * c->dim;
    void *buf = malloc(big * 2);
    if (!m || !list || !buf) {
        free(m), free(list), free(buf);
        r1_err("out of memory generating a synthetic model");
        return NULL;
    }
    tensor_list(c, list);
    m->cfg = *c;
    m->path = strdup("synthetic");
    m->file_layout = file_layout;
    m->layout_for = r1_backend_find("cpu"); /* as r1_model_load's default */
    struct gen_src g = {.c = c, .list = list, .n = n, .seed = seed, .buf = buf};
    struct r1_tensor_source src = {.ctx = &g, .path = "synthetic", .find = gen_find};
    int rc = r1_model_build(m, &src, dtype == R1_DTYPE_AUTO ? R1_DTYPE_BF16 : dtype, progress);
    free(list);
    free(buf);
    if (rc) {
        r1_model_free(m);
        return NULL;
    }
    return m;
}

r1_model_t *r1_model_synthetic_ranks(const struct r1_config *c, enum r1_dtype dtype, uint64_t seed, int progress,
                                     int rank, int size) {
    /* as r1_model_load: a tensor-parallel rank keeps the file's layout and
     * regroups only its share */
    r1_model_t *m = synthetic(c, dtype, seed, progress, size > 1);
    if (m && size > 1 && r1_tp_apply(m, rank, size)) {
        r1_model_free(m);
        return NULL;
    }
    return m;
}

r1_model_t *r1_model_synthetic_file_layout(const struct r1_config *c, enum r1_dtype dtype, uint64_t seed) {
    return synthetic(c, dtype, seed, 0, 1);
}

/* ---- writer ---- */
static int mkdir_p(const char *dir) {
    char p[4096];
    if (strlen(dir) >= sizeof p) return r1_err("%s: path too long", dir);
    strcpy(p, dir);
    for (char *q = p + 1; *q; q++) {
        if (*q != '/') continue;
        *q = 0;
        if (mkdir(p, 0755) != 0 && errno != EEXIST) return r1_err("%s: cannot create: %s", p, strerror(errno));
        *q = '/';
    }
    if (mkdir(p, 0755) != 0 && errno != EEXIST) return r1_err("%s: cannot create: %s", p, strerror(errno));
    return 0;
}

static int copy_file(const char *from, const char *to) {
    size_t len;
    char *data = r1_file_read(from, &len);
    if (!data) return -1;
    FILE *fp = fopen(to, "wb");
    int ok = fp && fwrite(data, 1, len, fp) == len;
    if (fp && fclose(fp) != 0) ok = 0;
    free(data);
    return ok ? 0 : r1_err("%s: cannot write: %s", to, strerror(errno));
}

int r1_synth_write(const char *dir, const struct r1_config *c, enum r1_dtype dt, uint64_t seed, const char *tokdir,
                   int progress) {
    if (dt != R1_DTYPE_F32 && dt != R1_DTYPE_F16 && dt != R1_DTYPE_BF16)
        return r1_err("synth writes f32, f16 or bf16 checkpoints, not %s", r1_dtype_name(dt));
    if (r1_config_check(c, "synthetic config")) return -1;
    if (mkdir_p(dir)) return -1;
    const char *tdname = dt == R1_DTYPE_F32 ? "float32" : dt == R1_DTYPE_F16 ? "float16" : "bfloat16";
    const char *stname = dt == R1_DTYPE_F32 ? "F32" : dt == R1_DTYPE_F16 ? "F16" : "BF16";
    size_t esize = dt == R1_DTYPE_F32 ? 4 : 2;
    char *path = r1_path_join(dir, "config.json");
    FILE *fp = fopen(path, "w");
    if (!fp) {
        r1_err("%s: cannot write: %s", path, strerror(errno));
        free(path);
        return -1;
    }
    int llama = c->arch == R1_ARCH_LLAMA;
    fprintf(fp,
            "{\n  \"architectures\": [\"%s\"],\n  \"model_type\": \"%s\",\n"
            "  \"hidden_act\": \"silu\",\n  \"hidden_size\": %d,\n  \"num_hidden_layers\": %d,\n"
            "  \"num_attention_heads\": %d,\n  \"num_key_value_heads\": %d,\n  \"head_dim\": %d,\n"
            "  \"intermediate_size\": %d,\n  \"vocab_size\": %d,\n  \"max_position_embeddings\": %d,\n"
            "  \"rms_norm_eps\": %g,\n  \"rope_theta\": %.1f,\n  \"tie_word_embeddings\": %s,\n",
            llama ? "LlamaForCausalLM" : "Qwen2ForCausalLM", r1_arch_name(c->arch), c->dim, c->n_layer, c->n_head,
            c->n_kv_head, c->head_dim, c->ffn, c->vocab, c->max_pos, (double)c->eps, (double)c->rope_theta,
            c->tied ? "true" : "false");
    if (llama) fprintf(fp, "  \"attention_bias\": false,\n  \"mlp_bias\": false,\n  \"pretraining_tp\": 1,\n");
    else fprintf(fp, "  \"use_sliding_window\": false,\n  \"sliding_window\": null,\n");
    if (c->rope_factor > 0)
        fprintf(fp,
                "  \"rope_scaling\": {\"rope_type\": \"llama3\", \"factor\": %g, "
                "\"low_freq_factor\": %g, \"high_freq_factor\": %g, "
                "\"original_max_position_embeddings\": %d},\n",
                (double)c->rope_factor, (double)c->rope_low_freq_factor, (double)c->rope_high_freq_factor,
                c->rope_orig_ctx);
    else fprintf(fp, "  \"rope_scaling\": null,\n");
    fprintf(fp,
            "  \"bos_token_id\": %d,\n  \"eos_token_id\": %d,\n  \"torch_dtype\": \"%s\",\n"
            "  \"r1infer_synthetic\": {\"seed\": %llu}\n}\n",
            c->bos_id, c->eos_id, tdname, (unsigned long long)seed);
    fclose(fp);
    free(path);

    int n = tensor_list(c, NULL);
    struct tdesc *list = calloc((size_t)n, sizeof *list);
    if (!list) return r1_err("out of memory");
    tensor_list(c, list);
    /* header */
    size_t cap = (size_t)n * 200 + 64, len = 0, off = 0;
    char *hdr = malloc(cap);
    len += (size_t)snprintf(hdr + len, cap - len, "{\"__metadata__\":{\"format\":\"pt\"}");
    for (int i = 0; i < n; i++) {
        size_t bytes = (size_t)list[i].rows * (size_t)(list[i].cols ? list[i].cols : 1) * esize;
        if (list[i].cols)
            len += (size_t)snprintf(
                hdr + len, cap - len, ",\"%s\":{\"dtype\":\"%s\",\"shape\":[%lld,%lld],\"data_offsets\":[%zu,%zu]}",
                list[i].name, stname, (long long)list[i].rows, (long long)list[i].cols, off, off + bytes);
        else
            len += (size_t)snprintf(hdr + len, cap - len,
                                    ",\"%s\":{\"dtype\":\"%s\",\"shape\":[%lld],\"data_offsets\":[%zu,%zu]}",
                                    list[i].name, stname, (long long)list[i].rows, off, off + bytes);
        off += bytes;
    }
    len += (size_t)snprintf(hdr + len, cap - len, "}");
    while (len % 8) hdr[len++] = ' ';
    path = r1_path_join(dir, "model.safetensors");
    fp = fopen(path, "wb");
    int rc = -1;
    void *buf = NULL;
    if (!fp) {
        r1_err("%s: cannot write: %s", path, strerror(errno));
        goto out;
    }
    uint8_t lenbuf[8];
    for (int i = 0; i < 8; i++) lenbuf[i] = (uint8_t)((uint64_t)len >> (8 * i));
    if (fwrite(lenbuf, 1, 8, fp) != 8 || fwrite(hdr, 1, len, fp) != len) goto werr;
    size_t big = (size_t)c->vocab * c->dim;
    if ((size_t)c->ffn * c->dim > big) big = (size_t)c->ffn * c->dim;
    buf = malloc(big * esize);
    if (!buf) {
        r1_err("out of memory");
        goto out;
    }
    int tty = progress && isatty(2);
    for (int i = 0; i < n; i++) {
        size_t count = (size_t)list[i].rows * (size_t)(list[i].cols ? list[i].cols : 1);
        uint64_t st = tensor_seed(seed, i);
        fill(buf, dt, count, list[i].kind, &st);
        if (fwrite(buf, esize, count, fp) != count) goto werr;
        if (tty) fprintf(stderr, "\rwriting %s: %d/%d tensors", path, i + 1, n);
    }
    if (tty) fprintf(stderr, "\r\033[K");
    if (fclose(fp) != 0) {
        fp = NULL;
        goto werr;
    }
    fp = NULL;
    if (tokdir) {
        static const char *const files[] = {"tokenizer.json", "tokenizer_config.json"};
        r1_tokenizer_t *tok = r1_tokenizer_load(tokdir); /* its ids must fit the embedding */
        int nv = tok ? r1_tokenizer_vocab_size(tok) : -1;
        r1_tokenizer_free(tok);
        if (nv < 0) goto out;
        if (nv > c->vocab) {
            r1_err("the tokenizer in %s has %d ids, more than the model's vocab_size %d; give "
                   "--tokenizer a matching one (or none)",
                   tokdir, nv, c->vocab);
            goto out;
        }
        for (int i = 0; i < 2; i++) {
            char *from = r1_path_join(tokdir, files[i]), *to = r1_path_join(dir, files[i]);
            int e = copy_file(from, to);
            free(from), free(to);
            if (e) goto out;
        }
    }
    rc = 0;
    goto out;
werr:
    r1_err("%s: write failed: %s", path, strerror(errno));
out:
    if (fp) fclose(fp);
    free(buf);
    free(hdr);
    free(list);
    free(path);
    return rc;
}
