/*
 * model.c - r1_model_load: pick the loader from the path (directory or
 * .gguf), and the model's accessors.
 */
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "model/model.h"
#include "model/tp.h"

static int ends_with(const char *s, const char *suffix) {
    size_t a = strlen(s), b = strlen(suffix);
    return a >= b && strcasecmp(s + a - b, suffix) == 0;
}

r1_model_t *r1_model_load_ranks(const char *path, const struct r1_load_opts *opts, int rank, int size) {
    struct r1_load_opts def = {.dtype = R1_DTYPE_AUTO, .progress = 0};
    if (!opts) opts = &def;
    if (!path || !*path) {
        r1_err("no model given (use -m DIR or -m FILE.gguf)");
        return NULL;
    }
    struct r1_model *m = calloc(1, sizeof *m);
    if (!m) {
        r1_err("out of memory");
        return NULL;
    }
    m->path = strdup(path);
    m->layout_for = r1_backend_find(opts->backend ? opts->backend : "cpu");
    if (!m->layout_for) {
        r1_model_free(m);
        return NULL;
    }
    m->file_layout = size > 1; /* the share is regrouped, not the whole model */
    int rc;
    if (r1_path_is_dir(path)) rc = r1_model_load_hf(m, path, opts);
    else if (ends_with(path, ".gguf")) rc = r1_model_load_gguf(m, path, opts);
    else rc = r1_err("%s: not a model directory (config.json + *.safetensors) or a .gguf file", path);
    if (rc || (size > 1 && r1_tp_apply(m, rank, size))) {
        r1_model_free(m);
        return NULL;
    }
    return m;
}

void r1_model_free(r1_model_t *m) {
    if (!m) return;
    free(m->layers);
    r1_pages_free(m->arena, m->arena_size);
    for (int i = 0; i < m->n_maps; i++) r1_file_unmap(&m->maps[i]);
    free(m->maps);
    free(m->path);
    r1_tp_free(m->tp);
    free(m);
}

const struct r1_config *r1_model_config(const r1_model_t *m) { return &m->cfg; }

enum r1_dtype r1_model_dtype(const r1_model_t *m) { return m->dtype; }

static size_t mat_bytes(const struct r1_mat *w) { return (size_t)w->rows * w->row_bytes; }

size_t r1_model_decode_bytes(const r1_model_t *m) {
    const struct r1_config *c = &m->cfg;
    size_t n = mat_bytes(&m->lm_head) + (size_t)c->dim * 4;
    for (int l = 0; l < c->n_layer; l++) {
        const struct r1_layer *L = &m->layers[l];
        n += mat_bytes(&L->wqkv) + mat_bytes(&L->wo) + mat_bytes(&L->wgu) + mat_bytes(&L->wdown);
        n += (size_t)L->wqkv.rows * 4 + (size_t)c->dim * 8;
    }
    return n;
}
