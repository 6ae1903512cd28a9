/*
 * config.c - config.json of a Qwen2 or Llama checkpoint -> struct r1_config,
 * with every size checked and unsupported settings refused by name; and the
 * RoPE frequencies both architectures derive from it (llama3 scaling).
 */
#include <errno.h>
#include <jansson.h>
#include <unistd.h>
#include <math.h>
#include <string.h>

#include "model/model.h"

static int get_int(json_t *root, const char *key, int *out, int required, const char *path) {
    json_t *v = json_object_get(root, key);
    if (!v || json_is_null(v)) {
        if (required) return r1_err("%s: missing field '%s'", path, key);
        return 0;
    }
    if (!json_is_integer(v)) return r1_err("%s: field '%s' must be an integer", path, key);
    json_int_t x = json_integer_value(v);
    if (x <= 0 || x > (1 << 30)) return r1_err("%s: field '%s' = %lld is out of range", path, key, (long long)x);
    *out = (int)x;
    return 0;
}

static int get_num(json_t *root, const char *key, float *out, const char *path) {
    json_t *v = json_object_get(root, key);
    if (!v || json_is_null(v)) return 0;
    if (!json_is_number(v)) return r1_err("%s: field '%s' must be a number", path, key);
    double x = json_number_value(v);
    if (!(x > 0) || !isfinite(x)) return r1_err("%s: field '%s' = %g must be positive", path, key, x);
    *out = (float)x;
    return 0;
}

const char *r1_arch_name(enum r1_arch a) {
    static const char *const names[R1_ARCH_COUNT] = {[R1_ARCH_QWEN2] = "qwen2", [R1_ARCH_LLAMA] = "llama"};
    return (int)a >= 0 && a < R1_ARCH_COUNT ? names[a] : "?";
}

int r1_config_check(const struct r1_config *c, const char *src) {
    if (c->dim <= 0 || c->n_layer <= 0 || c->n_head <= 0 || c->n_kv_head <= 0 || c->ffn <= 0 || c->vocab <= 0 ||
        c->max_pos <= 0 || c->head_dim <= 0)
        return r1_err("%s: sizes must be positive (hidden_size %d, layers %d, heads %d, kv heads "
                      "%d, head_dim %d, intermediate_size %d, vocab_size %d, "
                      "max_position_embeddings %d)",
                      src, c->dim, c->n_layer, c->n_head, c->n_kv_head, c->head_dim, c->ffn, c->vocab, c->max_pos);
    if ((int)c->arch < 0 || c->arch >= R1_ARCH_COUNT) return r1_err("%s: unknown architecture", src);
    if (c->n_head % c->n_kv_head)
        return r1_err("%s: num_attention_heads %d is not a multiple of num_key_value_heads %d", src, c->n_head,
                      c->n_kv_head);
    if (c->head_dim % 2 || c->head_dim > 512)
        return r1_err("%s: head_dim %d must be even and at most 512", src, c->head_dim);
    if (!(c->eps > 0) || !(c->rope_theta > 0)) return r1_err("%s: rms_norm_eps and rope_theta must be positive", src);
    if ((size_t)c->vocab * (size_t)c->dim > ((size_t)1 << 36) ||
        (size_t)c->n_head * (size_t)c->head_dim > ((size_t)1 << 20))
        return r1_err("%s: vocab_size x hidden_size or heads x head_dim is absurdly large", src);
    if (c->rope_factor != 0 && (!(c->rope_factor >= 1) || !(c->rope_low_freq_factor > 0) ||
                                !(c->rope_high_freq_factor > c->rope_low_freq_factor) || c->rope_orig_ctx <= 0))
        return r1_err("%s: llama3 rope scaling needs factor >= 1, 0 < low_freq_factor < "
                      "high_freq_factor and original_max_position_embeddings > 0 (found %g, %g, "
                      "%g, %d)",
                      src, c->rope_factor, c->rope_low_freq_factor, c->rope_high_freq_factor, c->rope_orig_ctx);
    return 0;
}

/* inv_freq[i] = theta^(-2i/head_dim), as transformers' default rope; with
 * llama3 scaling (transformers' _compute_llama3_parameters) the low
 * frequencies (wavelength above original_ctx / low_freq_factor) are divided
 * by factor, the high ones (below original_ctx / high_freq_factor) kept, and
 * those between interpolated. GGUF stores the divisors instead
 * (rope_freqs.weight, llama.cpp's converter computes them from the same
 * formula): given `factors`, inv_freq[i] is divided by factors[i]. */
void r1_rope_inv_freq(const struct r1_config *c, const float *factors, float *out) {
    const int half = c->head_dim / 2;
    for (int i = 0; i < half; i++) {
        double inv = 1.0 / pow((double)c->rope_theta, (double)(2 * i) / (double)c->head_dim);
        if (factors) {
            inv /= (double)factors[i];
        } else if (c->rope_factor > 0) {
            double lo = c->rope_low_freq_factor, hi = c->rope_high_freq_factor, f = c->rope_factor;
            double wavelen = 2.0 * M_PI / inv, orig = (double)c->rope_orig_ctx;
            if (wavelen > orig / lo) {
                inv /= f;
            } else if (wavelen >= orig / hi) {
                double smooth = (orig / wavelen - lo) / (hi - lo);
                inv = (1.0 - smooth) * inv / f + smooth * inv;
            }
        }
        out[i] = (float)inv;
    }
}

/* rope_scaling (transformers 4) or rope_parameters (5): "default", or
 * "llama3" with its four numbers; any other type is refused by name. */
static int read_rope(struct r1_config *c, json_t *v, const char *key, const char *path) {
    if (!v || json_is_null(v)) return 0;
    if (!json_is_object(v)) return r1_err("%s: %s must be an object", path, key);
    json_t *rt = json_object_get(v, "rope_type");
    if (!rt) rt = json_object_get(v, "type");
    const char *type = json_is_string(rt) ? json_string_value(rt) : "default";
    if (get_num(v, "rope_theta", &c->rope_theta, path)) return -1;
    if (!strcmp(type, "default")) return 0;
    if (strcmp(type, "llama3"))
        return r1_err("%s: %s type '%s' is not supported (r1infer knows default and llama3)", path, key, type);
    if (get_num(v, "factor", &c->rope_factor, path) || get_num(v, "low_freq_factor", &c->rope_low_freq_factor, path) ||
        get_num(v, "high_freq_factor", &c->rope_high_freq_factor, path) ||
        get_int(v, "original_max_position_embeddings", &c->rope_orig_ctx, 0, path))
        return -1;
    if (!(c->rope_factor > 0) || !(c->rope_low_freq_factor > 0) || !(c->rope_high_freq_factor > 0) ||
        c->rope_orig_ctx <= 0)
        return r1_err("%s: %s of type llama3 needs factor, low_freq_factor, high_freq_factor and "
                      "original_max_position_embeddings",
                      path, key);
    return 0;
}

/* A boolean field that r1infer supports only as false. */
static int must_be_false(json_t *root, const char *key, const char *why, const char *path) {
    json_t *v = json_object_get(root, key);
    if (v && json_is_true(v)) return r1_err("%s: %s=true is not supported (%s)", path, key, why);
    return 0;
}

int r1_config_from_json(struct r1_config *c, const char *path) {
    json_error_t je;
    if (access(path, R_OK) != 0)
        return r1_err("%s: cannot open: %s (a model directory holds config.json and *.safetensors)", path,
                      strerror(errno));
    json_t *root = json_load_file(path, 0, &je);
    if (!root) return r1_err("%s: line %d: %s", path, je.line, je.text);
    int rc = -1;
    if (!json_is_object(root)) {
        r1_err("%s: expected a JSON object", path);
        goto out;
    }
    memset(c, 0, sizeof *c);
    c->eps = 1e-6f;
    c->rope_theta = 10000.0f;
    c->max_pos = 4096;
    c->bos_id = c->eos_id = -1;
    json_t *mt = json_object_get(root, "model_type");
    const char *type = json_is_string(mt) ? json_string_value(mt) : "qwen2";
    if (!strcmp(type, "qwen2")) {
        c->arch = R1_ARCH_QWEN2;
        c->qkv_bias = 1;
    } else if (!strcmp(type, "llama")) {
        c->arch = R1_ARCH_LLAMA;
        json_t *ab = json_object_get(root, "attention_bias");
        if (ab && json_is_true(ab)) {
            r1_err("%s: attention_bias=true is not supported for llama (its o_proj bias has no "
                   "place in r1infer's kernels; the R1 Llama distills have none)",
                   path);
            goto out;
        }
        if (must_be_false(root, "mlp_bias", "the R1 Llama distills have no MLP bias", path)) goto out;
        json_t *tp = json_object_get(root, "pretraining_tp");
        if (tp && json_is_integer(tp) && json_integer_value(tp) != 1) {
            r1_err("%s: pretraining_tp=%lld is not supported (only 1)", path, (long long)json_integer_value(tp));
            goto out;
        }
    } else {
        r1_err("%s: model_type '%s' is not supported (r1infer runs qwen2 and llama models)", path, type);
        goto out;
    }
    if (get_int(root, "hidden_size", &c->dim, 1, path) || get_int(root, "num_hidden_layers", &c->n_layer, 1, path) ||
        get_int(root, "num_attention_heads", &c->n_head, 1, path) ||
        get_int(root, "intermediate_size", &c->ffn, 1, path) || get_int(root, "vocab_size", &c->vocab, 1, path) ||
        get_int(root, "max_position_embeddings", &c->max_pos, 0, path))
        goto out;
    c->n_kv_head = c->n_head;
    if (get_int(root, "num_key_value_heads", &c->n_kv_head, 0, path) || get_num(root, "rms_norm_eps", &c->eps, path) ||
        get_num(root, "rope_theta", &c->rope_theta, path))
        goto out;
    json_t *v = json_object_get(root, "tie_word_embeddings");
    c->tied = v && json_is_true(v);
    v = json_object_get(root, "use_sliding_window");
    if (v && json_is_true(v)) {
        r1_err("%s: use_sliding_window=true is not supported (set it to false; the R1 distills "
               "do not use it)",
               path);
        goto out;
    }
    /* transformers 5 moves rope_theta and the scaling into rope_parameters */
    if (read_rope(c, json_object_get(root, "rope_scaling"), "rope_scaling", path) ||
        read_rope(c, json_object_get(root, "rope_parameters"), "rope_parameters", path))
        goto out;
    v = json_object_get(root, "hidden_act");
    if (v && (!json_is_string(v) || strcmp(json_string_value(v), "silu") != 0)) {
        r1_err("%s: hidden_act must be \"silu\"", path);
        goto out;
    }
    /* transformers 5 writes "dtype", older versions "torch_dtype" */
    v = json_object_get(root, "torch_dtype");
    if (!v) v = json_object_get(root, "dtype");
    c->file_dtype = R1_DTYPE_BF16;
    if (v && json_is_string(v)) {
        const char *s = json_string_value(v);
        if (!strcmp(s, "float32")) c->file_dtype = R1_DTYPE_F32;
        else if (!strcmp(s, "float16")) c->file_dtype = R1_DTYPE_F16;
        else if (!strcmp(s, "bfloat16")) c->file_dtype = R1_DTYPE_BF16;
        else {
            r1_err("%s: torch_dtype '%s' is not supported (float32, float16, bfloat16)", path, s);
            goto out;
        }
    }
    v = json_object_get(root, "bos_token_id");
    if (v && json_is_integer(v)) c->bos_id = (int)json_integer_value(v);
    v = json_object_get(root, "eos_token_id");
    if (v && json_is_array(v) && json_array_size(v) > 0) v = json_array_get(v, 0);
    if (v && json_is_integer(v)) c->eos_id = (int)json_integer_value(v);
    /* head_dim: explicit (Llama may set q_dim = heads x head_dim != hidden_size), or derived */
    v = json_object_get(root, "head_dim");
    if (v && !json_is_null(v)) {
        if (get_int(root, "head_dim", &c->head_dim, 1, path)) goto out;
        if (c->arch == R1_ARCH_QWEN2 && c->head_dim * c->n_head != c->dim) {
            r1_err("%s: head_dim %d differs from hidden_size / num_attention_heads = %d/%d", path, c->head_dim, c->dim,
                   c->n_head);
            goto out;
        }
    } else if (c->dim % c->n_head) {
        r1_err("%s: hidden_size %d is not a multiple of num_attention_heads %d (and no head_dim "
               "is given)",
               path, c->dim, c->n_head);
        goto out;
    } else {
        c->head_dim = c->dim / c->n_head;
    }
    rc = r1_config_check(c, path);
out:
    json_decref(root);
    return rc;
}
