/*
 * cmd_convert.c - `r1infer convert`: a Hugging Face Qwen2 or Llama checkpoint
 * directory -> one GGUF v3 file (<arch>.* metadata, the tokenizer from
 * tokenizer.json when present, tensors under their GGUF names, unfused, in
 * the chosen dtype), written the way llama.cpp's converter writes it so both
 * engines read the same file: for llama the Q and K rows permuted for
 * llama.cpp's interleaved rope and llama3 scaling as rope_freqs.weight.
 * Tensors are converted one at a time while writing.
 * The container is gguf_write.c's; the tensor names are gguf_load.c's.
 */
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"
#include "cli/opts.h"
#include "kernels/dtype.h"
#include "gguf/gguf.h"
#include "tokenizer/gguf_tok.h"
#include "model/model.h"
#include "model/safetensors.h"

static void help(FILE *f) {
    fprintf(f, "usage: r1infer convert -m HFDIR|IN.gguf -o OUT.gguf\n"
               "       [--dtype f32|f16|bf16|q8_0|q4_0|q4_1|q5_0|q5_1|q4_K|q5_K|q6_K]\n"
               "Writes a GGUF v3 file llama.cpp and gguf-py can read. --dtype defaults to the\n"
               "checkpoint's own; norms and biases stay f32. A matrix whose width does not fit the\n"
               "block of the dtype falls back to q8_0 (or f16).\n"
               "From a Hugging Face directory, q4_K is a Q4_K_M-like mix: attn_v, ffn_down and\n"
               "output in q6_K. From a GGUF file every matrix gets --dtype, exactly what loading\n"
               "it with --dtype does (so llama.cpp can run the same weights); its metadata and\n"
               "tokenizer are copied.\n");
}

struct shard {
    struct r1_file file;
    struct r1_st st;
};

struct conv {
    struct shard *sh;
    int n_sh;
    const struct r1_src_tensor **src; /* per written tensor */
    enum r1_dtype *dt;
    int *heads; /* per written tensor: > 0 = rows permuted head by head (llama Q/K) */
    int n, cap;
    struct r1_src_tensor rope_freqs; /* llama3 scaling as llama.cpp stores it */
    float *rope_factors;
    float *row;
    size_t row_cap;
};

static const struct r1_src_tensor *find(const struct conv *c, const char *name) {
    for (int i = 0; i < c->n_sh; i++)
        for (int j = 0; j < c->sh[i].st.n; j++)
            if (!strcmp(c->sh[i].st.tensors[j].name, name)) return &c->sh[i].st.tensors[j];
    return NULL;
}

static int cmp_str(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

/* Every *.safetensors file of dir, mapped and parsed. */
static int open_shards(struct conv *c, const char *dir) {
    DIR *d = opendir(dir);
    if (!d) return r1_err("%s: cannot open the directory", dir);
    char **names = NULL;
    int n = 0, rc = -1;
    struct dirent *e;
    while ((e = readdir(d))) {
        size_t l = strlen(e->d_name);
        if (l > 12 && !strcmp(e->d_name + l - 12, ".safetensors")) {
            char **nn = realloc(names, (size_t)(n + 1) * sizeof *nn);
            if (!nn || !(nn[n] = strdup(e->d_name))) {
                names = nn ? nn : names;
                r1_err("out of memory");
                goto out;
            }
            names = nn;
            n++;
        }
    }
    if (n == 0) {
        r1_err("%s: no *.safetensors files", dir);
        goto out;
    }
    qsort(names, (size_t)n, sizeof *names, cmp_str);
    if (!(c->sh = calloc((size_t)n, sizeof *c->sh))) {
        r1_err("out of memory");
        goto out;
    }
    for (int i = 0; i < n; i++) {
        char *p = r1_path_join(dir, names[i]);
        struct shard *s = &c->sh[c->n_sh];
        s->file.fd = -1;
        int bad = !p || r1_file_map(&s->file, p);
        if (!bad) {
            c->n_sh++;
            bad = r1_st_parse(&s->st, s->file.data, s->file.size, p);
        }
        free(p);
        if (bad) goto out;
    }
    rc = 0;
out:
    for (int i = 0; i < n; i++) free(names[i]);
    free(names);
    closedir(d);
    return rc;
}

/* The dtype a tensor is written in. */
static enum r1_dtype choose(const struct r1_src_tensor *t, const char *gguf_name, enum r1_dtype want, int mix) {
    if (t->ndim == 1) return R1_DTYPE_F32;
    if (mix && want == R1_DTYPE_Q4_K &&
        (strstr(gguf_name, "attn_v.") || strstr(gguf_name, "ffn_down.") || !strcmp(gguf_name, "output.weight")))
        want = R1_DTYPE_Q6_K;
    int64_t cols = t->shape[t->ndim - 1];
    if (r1_dtype_row_bytes(want, cols) || cols == 0) return want;
    if (r1_dtype_row_bytes(R1_DTYPE_Q8_0, cols)) return R1_DTYPE_Q8_0;
    return R1_DTYPE_F16;
}

static int add_src(struct conv *c, struct r1_gguf_writer *w, const struct r1_src_tensor *t, const char *hf,
                   enum r1_dtype want, int heads, const char *dir);

/* A tensor of the checkpoint; heads > 0 permutes its rows for llama.cpp's rope. */
static int add(struct conv *c, struct r1_gguf_writer *w, const char *hf, enum r1_dtype want, int heads,
               const char *dir) {
    const struct r1_src_tensor *t = find(c, hf);
    if (!t) return r1_err("%s: tensor '%s' is missing", dir, hf);
    return add_src(c, w, t, hf, want, heads, dir);
}

static int add_src(struct conv *c, struct r1_gguf_writer *w, const struct r1_src_tensor *t, const char *hf,
                   enum r1_dtype want, int heads, const char *dir) {
    char name[96];
    if (r1_gguf_name_from_hf(hf, name, sizeof name)) return r1_err("no GGUF name for '%s'", hf);
    if (t->ndim < 1 || t->ndim > 2) return r1_err("%s: tensor '%s' is not 1-D or 2-D", dir, hf);
    if (c->n == c->cap) {
        int cap = c->cap ? 2 * c->cap : 256;
        const struct r1_src_tensor **ns = realloc(c->src, (size_t)cap * sizeof *ns);
        if (ns) c->src = ns;
        enum r1_dtype *nd = realloc(c->dt, (size_t)cap * sizeof *nd);
        if (nd) c->dt = nd;
        int *nh = realloc(c->heads, (size_t)cap * sizeof *nh);
        if (nh) c->heads = nh;
        if (!ns || !nd || !nh) return r1_err("out of memory");
        c->cap = cap;
    }
    enum r1_dtype dt = choose(t, name, want, 1);
    if (r1_gguf_w_tensor(w, name, dt, t->ndim, t->shape)) return -1;
    size_t cols = (size_t)t->shape[t->ndim - 1];
    if (cols > c->row_cap) {
        free(c->row);
        if (!(c->row = malloc(cols * sizeof(float)))) return r1_err("out of memory");
        c->row_cap = cols;
    }
    if (heads > 0 && t->shape[0] % (2 * heads))
        return r1_err("%s: tensor '%s' has %lld rows, not a multiple of 2 x %d heads", dir, hf, (long long)t->shape[0],
                      heads);
    c->src[c->n] = t;
    c->heads[c->n] = heads;
    c->dt[c->n++] = dt;
    return 0;
}

/* llama.cpp's row order for its interleaved rope (its converter's permute):
 * within a head, row 2j + s holds Hugging Face row s * hd/2 + j. */
static int64_t hf_row(int64_t g, int64_t rows, int heads) {
    if (heads <= 0) return g;
    int64_t hd = rows / heads, h = g / hd, w = g % hd;
    return h * hd + (w % 2) * (hd / 2) + w / 2;
}

static int fill(void *ctx, int i, uint8_t *dst, size_t size) {
    struct conv *c = ctx;
    const struct r1_src_tensor *t = c->src[i];
    enum r1_dtype dt = c->dt[i];
    const int heads = c->heads[i];
    if (t->dtype == dt && heads <= 0) {
        memcpy(dst, t->data, size);
        return 0;
    }
    /* a 1-D tensor (a bias) permuted as rows of one value */
    int64_t cols = t->ndim == 2 ? t->shape[1] : heads > 0 ? 1 : t->shape[0];
    int64_t rows = t->ndim == 2 ? t->shape[0] : heads > 0 ? t->shape[0] : 1;
    size_t srb = r1_dtype_row_bytes(t->dtype, cols), drb = r1_dtype_row_bytes(dt, cols);
    for (int64_t r = 0; r < rows; r++) {
        const uint8_t *src = t->data + (size_t)hf_row(r, rows, heads) * srb;
        if (t->dtype == dt) {
            memcpy(dst + (size_t)r * drb, src, drb);
            continue;
        }
        r1_dtype_traits[t->dtype].to_f32(src, c->row, cols);
        r1_dtype_traits[dt].from_f32(c->row, dst + (size_t)r * drb, cols);
    }
    return 0;
}

/* general.file_type (llama.cpp's LlamaFileType numbering) */
static uint32_t file_type(enum r1_dtype d) {
    switch (d) {
    case R1_DTYPE_F32:
        return 0;
    case R1_DTYPE_F16:
        return 1;
    case R1_DTYPE_Q4_0:
        return 2;
    case R1_DTYPE_Q8_0:
        return 7;
    case R1_DTYPE_Q4_K:
        return 15; /* Q4_K_M */
    case R1_DTYPE_Q6_K:
        return 18;
    case R1_DTYPE_BF16:
        return 32;
    default:
        return 0;
    }
}

/* ---- GGUF in: every matrix requantized to the one dtype, metadata copied ---- */

struct gconv {
    const struct r1_gguf *g;
    struct r1_src_tensor *src; /* (g->n_tensors) */
    enum r1_dtype *dt;
    float *row;
};

static int gfill(void *ctx, int i, uint8_t *dst, size_t size) {
    struct gconv *c = ctx;
    const struct r1_src_tensor *t = &c->src[i];
    if (t->dtype == c->dt[i]) {
        memcpy(dst, t->data, size);
        return 0;
    }
    int64_t cols = t->shape[t->ndim - 1], rows = t->ndim == 2 ? t->shape[0] : 1;
    size_t srb = r1_dtype_row_bytes(t->dtype, cols), drb = r1_dtype_row_bytes(c->dt[i], cols);
    for (int64_t r = 0; r < rows; r++) {
        r1_dtype_traits[t->dtype].to_f32(t->data + (size_t)r * srb, c->row, cols);
        r1_dtype_traits[c->dt[i]].from_f32(c->row, dst + (size_t)r * drb, cols);
    }
    return 0;
}

/* The same conversion `--dtype want` makes at load (a matrix too narrow for
 * the dtype's block falls back to q8_0, then f16), written as a file, so
 * llama.cpp can read the very weights r1infer computes with. Rows keep their
 * stored order (llama Q/K stay in llama.cpp's). */
static int convert_gguf(const char *in, const char *out, enum r1_dtype want) {
    struct r1_file f = {.fd = -1};
    struct r1_gguf g = {0};
    struct gconv c = {0};
    struct r1_gguf_writer *w = NULL;
    int rc = -1;
    if (r1_file_map(&f, in) || r1_gguf_parse(&g, f.data, f.size, in)) goto out;
    c.g = &g;
    c.src = calloc(g.n_tensors ? g.n_tensors : 1, sizeof *c.src);
    c.dt = calloc(g.n_tensors ? g.n_tensors : 1, sizeof *c.dt);
    w = r1_gguf_writer_new();
    if (!c.src || !c.dt || !w) {
        r1_err("out of memory");
        goto out;
    }
    int64_t max_cols = 1;
    for (size_t i = 0; i < g.n_tensors; i++) {
        const struct r1_gguf_tensor *gt = &g.tensors[i];
        const struct r1_ggml_type *ty = r1_ggml_type_info(gt->ggml_type);
        if (!ty || ty->dtype < 0 || gt->n_dims < 1 || gt->n_dims > 2) {
            r1_err("%s: tensor '%.*s' (%s, %d dims) cannot be converted", in, (int)gt->name.len, gt->name.s,
                   ty ? ty->name : "unknown type", gt->n_dims);
            goto out;
        }
        struct r1_src_tensor *t = &c.src[i];
        t->dtype = (enum r1_dtype)ty->dtype;
        t->ndim = gt->n_dims;
        t->shape[0] = gt->n_dims == 2 ? (int64_t)gt->ne[1] : (int64_t)gt->ne[0];
        t->shape[1] = (int64_t)gt->ne[0];
        t->data = gt->data;
        t->size = gt->size;
        enum r1_dtype d = want == R1_DTYPE_AUTO ? t->dtype : choose(t, "", want, 0);
        if (t->ndim == 1) d = t->dtype; /* norms stay as they are */
        c.dt[i] = d;
        if ((int64_t)gt->ne[0] > max_cols) max_cols = (int64_t)gt->ne[0];
    }
    if (!(c.row = malloc((size_t)max_cols * sizeof(float)))) {
        r1_err("out of memory");
        goto out;
    }
    for (size_t i = 0; i < g.n_kv; i++) {
        const struct r1_gguf_kv *kv = &g.kv[i];
        if ((kv->key.len == 17 && !memcmp(kv->key.s, "general.file_type", 17)) ||
            (kv->key.len == 17 && !memcmp(kv->key.s, "general.alignment", 17)))
            continue; /* rewritten / the writer's own */
        if (r1_gguf_w_copy(w, kv)) goto out;
    }
    if (want != R1_DTYPE_AUTO && r1_gguf_w_u32(w, "general.file_type", file_type(want))) goto out;
    for (size_t i = 0; i < g.n_tensors; i++) {
        char name[256];
        snprintf(name, sizeof name, "%.*s", (int)g.tensors[i].name.len, g.tensors[i].name.s);
        if (r1_gguf_w_tensor(w, name, c.dt[i], c.src[i].ndim, c.src[i].shape)) goto out;
    }
    rc = r1_gguf_w_write(w, out, gfill, &c, 1);
out:
    r1_gguf_writer_free(w);
    free(c.src);
    free(c.dt);
    free(c.row);
    r1_gguf_free(&g);
    r1_file_unmap(&f);
    return rc;
}

static int convert(const char *dir, const char *out, enum r1_dtype want) {
    struct r1_config cfg;
    char *cp = r1_path_join(dir, "config.json");
    int rc = cp ? r1_config_from_json(&cfg, cp) : -1;
    free(cp);
    if (rc) return -1;
    if (want == R1_DTYPE_AUTO) want = cfg.file_dtype;
    struct conv c = {0};
    struct r1_gguf_writer *w = r1_gguf_writer_new();
    rc = -1;
    if (!w || open_shards(&c, dir)) goto out;
    const char *base = strrchr(dir, '/');
    base = base && base[1] ? base + 1 : dir;
    const char *arch = r1_arch_name(cfg.arch);
    const int llama = cfg.arch == R1_ARCH_LLAMA;
    char k[96];
#define KEY(x) (snprintf(k, sizeof k, "%s.%s", arch, x), k)
    if (r1_gguf_w_str(w, "general.architecture", arch) || r1_gguf_w_str(w, "general.name", base) ||
        r1_gguf_w_u32(w, "general.file_type", file_type(want)) ||
        r1_gguf_w_u32(w, KEY("context_length"), (uint32_t)cfg.max_pos) ||
        r1_gguf_w_u32(w, KEY("embedding_length"), (uint32_t)cfg.dim) ||
        r1_gguf_w_u32(w, KEY("block_count"), (uint32_t)cfg.n_layer) ||
        r1_gguf_w_u32(w, KEY("feed_forward_length"), (uint32_t)cfg.ffn) ||
        r1_gguf_w_u32(w, KEY("attention.head_count"), (uint32_t)cfg.n_head) ||
        r1_gguf_w_u32(w, KEY("attention.head_count_kv"), (uint32_t)cfg.n_kv_head) ||
        r1_gguf_w_f32(w, KEY("rope.freq_base"), cfg.rope_theta) ||
        r1_gguf_w_f32(w, KEY("attention.layer_norm_rms_epsilon"), cfg.eps))
        goto out;
    if (llama && (r1_gguf_w_u32(w, KEY("vocab_size"), (uint32_t)cfg.vocab) ||
                  r1_gguf_w_u32(w, KEY("rope.dimension_count"), (uint32_t)cfg.head_dim)))
        goto out;
    if (cfg.head_dim * cfg.n_head != cfg.dim && /* explicit head_dim, as llama.cpp writes it */
        (r1_gguf_w_u32(w, KEY("attention.key_length"), (uint32_t)cfg.head_dim) ||
         r1_gguf_w_u32(w, KEY("attention.value_length"), (uint32_t)cfg.head_dim)))
        goto out;
#undef KEY
    char *tj = r1_path_join(dir, "tokenizer.json");
    FILE *tf = tj ? fopen(tj, "rb") : NULL;
    free(tj);
    if (tf) {
        fclose(tf);
        if (r1_gguf_w_tokenizer(w, dir, cfg.vocab, cfg.bos_id, cfg.eos_id)) goto out;
    } else {
        fprintf(stderr, "r1infer convert: no tokenizer.json in %s: the GGUF has no tokenizer\n", dir);
    }
    if (add(&c, w, "model.embed_tokens.weight", want, 0, dir)) goto out;
    if (cfg.rope_factor > 0) { /* llama3 scaling: the divisor of each frequency */
        int half = cfg.head_dim / 2;
        float *base_f = malloc((size_t)half * 2 * sizeof(float));
        c.rope_factors = base_f;
        if (!base_f) {
            r1_err("out of memory");
            goto out;
        }
        struct r1_config plain = cfg;
        plain.rope_factor = 0;
        r1_rope_inv_freq(&plain, NULL, base_f);
        r1_rope_inv_freq(&cfg, NULL, base_f + half);
        for (int i = 0; i < half; i++) base_f[i] = base_f[i] / base_f[half + i];
        c.rope_freqs = (struct r1_src_tensor){.name = R1_ROPE_FREQS_NAME,
                                              .dtype = R1_DTYPE_F32,
                                              .ndim = 1,
                                              .shape = {half},
                                              .data = (const uint8_t *)base_f,
                                              .size = (size_t)half * sizeof(float)};
        if (add_src(&c, w, &c.rope_freqs, R1_ROPE_FREQS_NAME, R1_DTYPE_F32, 0, dir)) goto out;
    }
    /* q|k|v and gate|up one after the other: a loader that fuses them can
     * use them where they lie in the file when it keeps their dtype */
    static const char *const layer[] = {
        "input_layernorm.weight",  "self_attn.q_proj.weight", "self_attn.k_proj.weight",
        "self_attn.v_proj.weight", "self_attn.q_proj.bias",   "self_attn.k_proj.bias",
        "self_attn.v_proj.bias",   "self_attn.o_proj.weight", "post_attention_layernorm.weight",
        "mlp.gate_proj.weight",    "mlp.up_proj.weight",      "mlp.down_proj.weight",
    };
    for (int l = 0; l < cfg.n_layer; l++)
        for (size_t j = 0; j < sizeof layer / sizeof layer[0]; j++) {
            if (!cfg.qkv_bias && strstr(layer[j], ".bias")) continue;
            int heads = !llama                                       ? 0
                        : !strncmp(layer[j], "self_attn.q_proj", 16) ? cfg.n_head
                        : !strncmp(layer[j], "self_attn.k_proj", 16) ? cfg.n_kv_head
                                                                     : 0;
            char hf[128];
            snprintf(hf, sizeof hf, "model.layers.%d.%s", l, layer[j]);
            if (add(&c, w, hf, want, heads, dir)) goto out;
        }
    if (add(&c, w, "model.norm.weight", want, 0, dir) || (!cfg.tied && add(&c, w, "lm_head.weight", want, 0, dir)))
        goto out;
    rc = r1_gguf_w_write(w, out, fill, &c, 1);
out:
    r1_gguf_writer_free(w);
    for (int i = 0; i < c.n_sh; i++) {
        r1_st_free(&c.sh[i].st);
        r1_file_unmap(&c.sh[i].file);
    }
    free(c.sh);
    free(c.src);
    free(c.dt);
    free(c.heads);
    free(c.row);
    free(c.rope_factors);
    return rc;
}

int cmd_convert(int argc, char **argv) {
    static const char *const flags[] = {"-m", "-o", "--dtype", "--help", NULL};
    const char *in = NULL, *out = NULL;
    enum r1_dtype dt = R1_DTYPE_AUTO;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
            help(stdout);
            return 0;
        }
        if (i + 1 >= argc) {
            int known = 0;
            for (int k = 0; flags[k]; k++) known |= !strcmp(a, flags[k]);
            if (!known) return cli_unknown("convert", a, flags, 0);
            fprintf(stderr, "r1infer convert: %s needs a value\n", a);
            return 2;
        }
        const char *v = argv[++i];
        if (!strcmp(a, "-m")) in = v;
        else if (!strcmp(a, "-o")) out = v;
        else if (!strcmp(a, "--dtype")) {
            int d = r1_dtype_parse(v);
            if (d < 0 || !r1_dtype_traits[d].from_f32) {
                fprintf(stderr, "r1infer convert: --dtype must be f32, f16, bf16, q8_0, q4_0, q4_1, q5_0, q5_1, "
                                "q4_K, q5_K or q6_K\n");
                return 2;
            }
            dt = (enum r1_dtype)d;
        } else {
            return cli_unknown("convert", a, flags, 0);
        }
    }
    if (!in || !out) {
        help(stderr);
        return 2;
    }
    size_t il = strlen(in);
    int gguf = il > 5 && !strcmp(in + il - 5, ".gguf");
    if (gguf ? convert_gguf(in, out, dt) : convert(in, out, dt)) {
        fprintf(stderr, "r1infer convert: %s\n", r1_last_error());
        return 1;
    }
    fprintf(stderr, "wrote %s\n", out);
    return 0;
}
