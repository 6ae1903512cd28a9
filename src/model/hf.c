/*
 * hf.c - load a Hugging Face checkpoint directory: config.json plus
 * model.safetensors or the shards named in model.safetensors.index.json.
 * Files are mmapped, parsed by safetensors.c, and handed to r1_model_build.
 */
#include <jansson.h>
#include <stdlib.h>
#include <string.h>

#include "model/model.h"
#include "model/safetensors.h"

struct shard {
    char *path;
    struct r1_file file;
    struct r1_st st;
};

struct hf_src {
    struct shard *shards;
    int n;
};

static const struct r1_src_tensor *hf_find(void *ctx, const char *name) {
    struct hf_src *h = ctx;
    for (int i = 0; i < h->n; i++)
        for (int j = 0; j < h->shards[i].st.n; j++)
            if (!strcmp(h->shards[i].st.tensors[j].name, name)) return &h->shards[i].st.tensors[j];
    return NULL;
}

static void hf_close(struct hf_src *h) {
    for (int i = 0; i < h->n; i++) {
        r1_st_free(&h->shards[i].st);
        r1_file_unmap(&h->shards[i].file);
        free(h->shards[i].path);
    }
    free(h->shards);
    memset(h, 0, sizeof *h);
}

static int add_shard(struct hf_src *h, const char *dir, const char *name, const struct r1_load_opts *opts) {
    if (strchr(name, '/') || !strcmp(name, "..") || name[0] == 0)
        return r1_err("%s/model.safetensors.index.json: shard name '%s' is not a plain file name", dir, name);
    for (int i = 0; i < h->n; i++)
        if (!strcmp(strrchr(h->shards[i].path, '/') + 1, name)) return 0;
    struct shard *ns = realloc(h->shards, (size_t)(h->n + 1) * sizeof *ns);
    if (!ns) return r1_err("out of memory");
    h->shards = ns;
    struct shard *s = &h->shards[h->n];
    memset(s, 0, sizeof *s);
    s->file.fd = -1;
    s->path = r1_path_join(dir, name);
    if (!s->path) return r1_err("out of memory");
    h->n++;
    if (r1_model_open_file(&s->file, s->path, opts)) return -1;
    return r1_st_parse(&s->st, s->file.data, s->file.size, s->path);
}

static int hf_open(struct hf_src *h, const char *dir, const struct r1_load_opts *opts) {
    memset(h, 0, sizeof *h);
    char *index = r1_path_join(dir, "model.safetensors.index.json");
    FILE *fp = fopen(index, "rb");
    if (!fp) {
        free(index);
        return add_shard(h, dir, "model.safetensors", opts);
    }
    fclose(fp);
    json_error_t je;
    json_t *root = json_load_file(index, 0, &je);
    int rc = -1;
    if (!root) {
        r1_err("%s: line %d: %s", index, je.line, je.text);
        goto out;
    }
    json_t *wm = json_object_get(root, "weight_map");
    if (!json_is_object(wm)) {
        r1_err("%s: missing object 'weight_map'", index);
        goto out;
    }
    const char *key;
    json_t *val;
    json_object_foreach(wm, key, val) {
        if (!json_is_string(val)) {
            r1_err("%s: weight_map['%s'] must be a file name", index, key);
            goto out;
        }
        if (add_shard(h, dir, json_string_value(val), opts)) goto out;
    }
    if (h->n == 0) {
        r1_err("%s: weight_map is empty", index);
        goto out;
    }
    rc = 0;
out:
    json_decref(root);
    free(index);
    return rc;
}

int r1_model_load_hf(struct r1_model *m, const char *dir, const struct r1_load_opts *opts) {
    char *cfg_path = r1_path_join(dir, "config.json");
    int rc = r1_config_from_json(&m->cfg, cfg_path);
    free(cfg_path);
    if (rc) return -1;
    struct hf_src h;
    if (hf_open(&h, dir, opts)) {
        hf_close(&h);
        return -1;
    }
    const char *shown = h.n == 1 ? h.shards[0].path : dir;
    struct r1_tensor_source src = {
        .ctx = &h, .path = shown, .find = hf_find, .in_place = 1, .private_pages = opts->no_mmap};
    if (opts->layout_cache && !opts->no_mmap) {
        src.layout_cache = opts->layout_cache;
        src.file_key = 0xcbf29ce484222325ull;
        for (int i = 0; i < h.n; i++)
            src.file_key =
                r1_layout_file_key(src.file_key, h.shards[i].path, h.shards[i].file.data, h.shards[i].file.size);
    }
    rc = r1_model_build(m, &src, opts->dtype, opts->progress);
    if (!rc) { /* the model keeps the files it points into */
        struct r1_file *files = calloc((size_t)h.n, sizeof *files);
        if (!files) rc = r1_err("out of memory");
        for (int i = 0; i < h.n && files; i++) files[i] = h.shards[i].file, h.shards[i].file.data = NULL;
        if (files) rc = r1_model_keep_files(m, files, h.n, opts);
        free(files);
    }
    hf_close(&h);
    return rc;
}
