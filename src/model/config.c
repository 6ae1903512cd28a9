/*
 * config.c - config.json of a Qwen2 checkpoint -> struct r1_config, with
 * every size checked and unsupported settings refused by name.
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

int r1_config_check(const struct r1_config *c, const char *src) {
    if (c->dim <= 0 || c->n_layer <= 0 || c->n_head <= 0 || c->n_kv_head <= 0 || c->ffn <= 0 ||
        c->vocab <= 0 || c->max_pos <= 0)
        return r1_err("%s: sizes must be positive (hidden_size %d, layers %d, heads %d, kv heads "
                      "%d, intermediate_size %d, vocab_size %d, max_position_embeddings %d)",
                      src, c->dim, c->n_layer, c->n_head, c->n_kv_head, c->ffn, c->vocab, c->max_pos);
    if (c->dim % c->n_head)
        return r1_err("%s: hidden_size %d is not a multiple of num_attention_heads %d", src, c->dim,
                      c->n_head);
    if (c->n_head % c->n_kv_head)
        return r1_err("%s: num_attention_heads %d is not a multiple of num_key_value_heads %d", src,
                      c->n_head, c->n_kv_head);
    if (c->head_dim % 2 || c->head_dim > 512)
        return r1_err("%s: head_dim %d must be even and at most 512", src, c->head_dim);
    if (!(c->eps > 0) || !(c->rope_theta > 0))
        return r1_err("%s: rms_norm_eps and rope_theta must be positive", src);
    if ((size_t)c->vocab * (size_t)c->dim > ((size_t)1 << 36))
        return r1_err("%s: vocab_size x hidden_size is absurdly large", src);
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
    if (mt && json_is_string(mt) && strcmp(json_string_value(mt), "qwen2") != 0) {
        r1_err("%s: model_type '%s' is not supported (r1infer runs qwen2 models)", path,
               json_string_value(mt));
        goto out;
    }
    if (get_int(root, "hidden_size", &c->dim, 1, path) ||
        get_int(root, "num_hidden_layers", &c->n_layer, 1, path) ||
        get_int(root, "num_attention_heads", &c->n_head, 1, path) ||
        get_int(root, "intermediate_size", &c->ffn, 1, path) ||
        get_int(root, "vocab_size", &c->vocab, 1, path) ||
        get_int(root, "max_position_embeddings", &c->max_pos, 0, path))
        goto out;
    c->n_kv_head = c->n_head;
    if (get_int(root, "num_key_value_heads", &c->n_kv_head, 0, path) ||
        get_num(root, "rms_norm_eps", &c->eps, path) || get_num(root, "rope_theta", &c->rope_theta, path))
        goto out;
    json_t *v = json_object_get(root, "tie_word_embeddings");
    c->tied = v && json_is_true(v);
    v = json_object_get(root, "use_sliding_window");
    if (v && json_is_true(v)) {
        r1_err("%s: use_sliding_window=true is not supported (set it to false; the R1 distills "
               "do not use it)", path);
        goto out;
    }
    v = json_object_get(root, "rope_scaling");
    if (v && !json_is_null(v)) {
        r1_err("%s: rope_scaling is not supported (found a non-null value)", path);
        goto out;
    }
    /* transformers 5 moves rope_theta into rope_parameters */
    v = json_object_get(root, "rope_parameters");
    if (v && !json_is_null(v)) {
        json_t *rt = json_object_get(v, "rope_type");
        if (!json_is_object(v) || (rt && (!json_is_string(rt) || strcmp(json_string_value(rt), "default")))) {
            r1_err("%s: rope_parameters: only rope_type \"default\" is supported", path);
            goto out;
        }
        if (get_num(v, "rope_theta", &c->rope_theta, path)) goto out;
    }
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
    c->head_dim = c->dim / c->n_head;
    v = json_object_get(root, "head_dim");
    if (v && json_is_integer(v) && json_integer_value(v) != c->head_dim) {
        r1_err("%s: head_dim %lld differs from hidden_size / num_attention_heads = %d", path,
               (long long)json_integer_value(v), c->head_dim);
        goto out;
    }
    rc = r1_config_check(c, path);
out:
    json_decref(root);
    return rc;
}
