/*
 * gguf_tok.c - the tokenizer and GGUF, both ways:
 *  - r1_tokenizer_load_gguf: read tokenizer.ggml.* metadata (gpt2-style
 *    byte-level BPE: tokens, token_type, merges, bos/eos, pre, chat
 *    template) and build the tokenizer through r1_tokenizer_build;
 *  - r1_gguf_w_tokenizer: write those keys from a model directory's
 *    tokenizer.json / tokenizer_config.json (for `r1infer convert`).
 * Parsing the container is gguf.c's job; the BPE itself is tokenizer.c's.
 */
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gguf/gguf.h"
#include "tokenizer/gguf_tok.h"
#include "tokenizer/tokenizer_internal.h"
#include "util/util.h"

#define PAD_NAME 24 /* bytes for "[PAD<int>]" */

/* NUL-terminated copy of a GGUF string (NULL + error if it holds a NUL). */
static char *dup_str(struct r1_gguf_str s, const char *path, const char *what) {
    if (memchr(s.s, 0, s.len)) {
        r1_err("%s: %s contains a NUL byte", path, what);
        return NULL;
    }
    char *d = malloc(s.len + 1);
    if (!d) {
        r1_err("out of memory");
        return NULL;
    }
    memcpy(d, s.s, s.len);
    d[s.len] = 0;
    return d;
}

/* A string array as n NUL-terminated strings in one allocation. */
static char **str_array(const struct r1_gguf_kv *kv, const char *path, const char *what) {
    size_t n = (size_t)kv->arr_n, bytes;
    /* the strings plus NULs fit in val_size; the pointers in n * sizeof(char *) */
    if (!r1_mul_ok(n, sizeof(char *), &bytes) || !r1_add_ok(bytes, kv->val_size, &bytes)) {
        r1_err("%s: %s is too large", path, what);
        return NULL;
    }
    char **v = malloc(bytes ? bytes : 1);
    if (!v) {
        r1_err("out of memory reading %s of %s", what, path);
        return NULL;
    }
    char *pool = (char *)(v + n);
    const uint8_t *p = kv->val;
    for (size_t i = 0; i < n; i++) {
        struct r1_gguf_str s;
        p = r1_gguf_next_str(p, &s);
        if (memchr(s.s, 0, s.len)) {
            r1_err("%s: %s entry %zu contains a NUL byte", path, what, i);
            free(v);
            return NULL;
        }
        memcpy(pool, s.s, s.len);
        pool[s.len] = 0;
        v[i] = pool;
        pool += s.len + 1;
    }
    return v;
}

static int opt_id(const struct r1_gguf *g, const char *key, int32_t n, int32_t *out) {
    int64_t v;
    *out = -1;
    int r = r1_gguf_get_int(g, key, 0, n - 1, &v);
    if (r > 0) *out = (int32_t)v;
    return r < 0 ? -1 : 0;
}

static r1_tokenizer_t *from_gguf(const struct r1_gguf *g, const char *path) {
    r1_tokenizer_t *tok = NULL;
    char **tokens = NULL, **merges = NULL, *pre = NULL, *tmpl = NULL;
    int32_t *types = NULL;
    struct r1_gguf_str s;
    int bad, r = r1_gguf_get_str(g, "tokenizer.ggml.model", &s);
    if (r < 0) return NULL;
    if (r == 0) {
        r1_err("%s: no tokenizer in this GGUF file (tokenizer.ggml.model is missing)", path);
        return NULL;
    }
    if (s.len != 4 || memcmp(s.s, "gpt2", 4)) {
        r1_err("%s: tokenizer model '%.*s' is not supported (r1infer reads byte-level BPE, "
               "tokenizer.ggml.model = gpt2)",
               path, (int)(s.len > 40 ? 40 : s.len), s.s);
        return NULL;
    }
    const struct r1_gguf_kv *kt = r1_gguf_get_arr(g, "tokenizer.ggml.tokens", R1_GGUF_STRING, &bad);
    if (!kt) {
        if (!bad) r1_err("%s: missing metadata 'tokenizer.ggml.tokens'", path);
        return NULL;
    }
    if (kt->arr_n == 0 || kt->arr_n > INT32_MAX) {
        r1_err("%s: tokenizer.ggml.tokens has %llu entries", path, (unsigned long long)kt->arr_n);
        return NULL;
    }
    struct r1_tok_spec spec = {.n_tokens = (int32_t)kt->arr_n, .source = path};
    if (!(tokens = str_array(kt, path, "tokenizer.ggml.tokens"))) goto out;
    spec.tokens = (const char *const *)tokens;
    const struct r1_gguf_kv *ty = r1_gguf_get_arr(g, "tokenizer.ggml.token_type", R1_GGUF_I32, &bad);
    if (bad) goto out;
    if (ty) {
        if (ty->arr_n != kt->arr_n) {
            r1_err("%s: tokenizer.ggml.token_type has %llu entries for %llu tokens", path,
                   (unsigned long long)ty->arr_n, (unsigned long long)kt->arr_n);
            goto out;
        }
        types = malloc((size_t)ty->arr_n * sizeof *types);
        if (!types) {
            r1_err("out of memory");
            goto out;
        }
        for (size_t i = 0; i < (size_t)ty->arr_n; i++) {
            const uint8_t *p = ty->val + 4 * i;
            types[i] = (int32_t)((uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24);
        }
        spec.types = types;
    }
    const struct r1_gguf_kv *km = r1_gguf_get_arr(g, "tokenizer.ggml.merges", R1_GGUF_STRING, &bad);
    if (bad) goto out;
    if (km) {
        if (!(merges = str_array(km, path, "tokenizer.ggml.merges"))) goto out;
        spec.merges = (const char *const *)merges;
        spec.n_merges = (size_t)km->arr_n;
    }
    if (opt_id(g, "tokenizer.ggml.bos_token_id", spec.n_tokens, &spec.bos) ||
        opt_id(g, "tokenizer.ggml.eos_token_id", spec.n_tokens, &spec.eos) ||
        r1_gguf_get_bool(g, "tokenizer.ggml.add_bos_token", &spec.add_bos) < 0)
        goto out;
    if ((r = r1_gguf_get_str(g, "tokenizer.ggml.pre", &s)) < 0) goto out;
    if (r > 0 && !(pre = dup_str(s, path, "tokenizer.ggml.pre"))) goto out;
    spec.pre = pre;
    if ((r = r1_gguf_get_str(g, "tokenizer.chat_template", &s)) < 0) goto out;
    if (r > 0 && !(tmpl = dup_str(s, path, "tokenizer.chat_template"))) goto out;
    spec.chat_template = tmpl;
    tok = r1_tokenizer_build(&spec);
out:
    free(tokens);
    free(merges);
    free(types);
    free(pre);
    free(tmpl);
    return tok;
}

r1_tokenizer_t *r1_tokenizer_load_gguf(const char *path) {
    struct r1_file f = {.fd = -1};
    struct r1_gguf g;
    if (r1_file_map(&f, path)) return NULL;
    r1_tokenizer_t *t = NULL;
    if (r1_gguf_parse(&g, f.data, f.size, path) == 0) {
        t = from_gguf(&g, path);
        r1_gguf_free(&g);
    }
    r1_file_unmap(&f);
    return t;
}

/* ------------------------------------------------------------- writing */

static json_t *load_json(const char *dir, const char *name, int required) {
    char *p = r1_path_join(dir, name);
    json_error_t je;
    json_t *j = p ? json_load_file(p, 0, &je) : NULL;
    if (!j && required) r1_err("%s: line %d: %s", p ? p : name, je.line, je.text);
    free(p);
    return j;
}

/* A token given as "text" or {"content": "text"} in tokenizer_config.json. */
static const char *token_text(json_t *v) {
    if (json_is_object(v)) v = json_object_get(v, "content");
    return json_is_string(v) ? json_string_value(v) : NULL;
}

int r1_gguf_w_tokenizer(struct r1_gguf_writer *w, const char *dir, int vocab, int bos, int eos) {
    json_t *tj = load_json(dir, "tokenizer.json", 1), *cfg = load_json(dir, "tokenizer_config.json", 0);
    char **tokens = NULL, **merges = NULL, *pool = NULL;
    int32_t *types = NULL;
    size_t n_merges = 0;
    int rc = -1;
    if (!tj) goto out;
    json_t *model = json_object_get(tj, "model"), *mv = json_object_get(model, "vocab"),
           *mm = json_object_get(model, "merges"), *added = json_object_get(tj, "added_tokens");
    json_t *mt = json_object_get(model, "type");
    if (!json_is_object(mv) || (mt && (!json_is_string(mt) || strcmp(json_string_value(mt), "BPE")))) {
        r1_err("%s/tokenizer.json: only BPE tokenizers with a vocab can be converted", dir);
        goto out;
    }
    tokens = calloc((size_t)vocab, sizeof *tokens);
    types = calloc((size_t)vocab, sizeof *types);
    pool = malloc((size_t)vocab * PAD_NAME);
    if (!tokens || !types || !pool) {
        r1_err("out of memory");
        goto out;
    }
    const char *key;
    json_t *val;
    json_object_foreach(mv, key, val) {
        json_int_t id = json_integer_value(val);
        if (!json_is_integer(val) || id < 0 || id >= vocab) {
            r1_err("%s/tokenizer.json: vocab entry '%s' has id outside 0..%d", dir, key, vocab - 1);
            goto out;
        }
        tokens[id] = (char *)key;
        types[id] = R1_TOK_TYPE_NORMAL;
    }
    size_t i;
    json_array_foreach(added, i, val) {
        json_t *jid = json_object_get(val, "id"), *c = json_object_get(val, "content");
        json_int_t id = json_integer_value(jid);
        if (!json_is_integer(jid) || !json_is_string(c) || id < 0 || id >= vocab) {
            r1_err("%s/tokenizer.json: added_tokens[%zu] needs an id in 0..%d and a content", dir, i, vocab - 1);
            goto out;
        }
        tokens[id] = (char *)json_string_value(c);
        types[id] = json_is_true(json_object_get(val, "special")) ? R1_TOK_TYPE_CONTROL : R1_TOK_TYPE_USER_DEFINED;
    }
    for (int id = 0; id < vocab; id++) /* rows of the embedding beyond the tokenizer */
        if (!tokens[id]) {
            tokens[id] = pool + (size_t)id * PAD_NAME;
            snprintf(tokens[id], PAD_NAME, "[PAD%d]", id);
            types[id] = R1_TOK_TYPE_UNUSED;
        }
    n_merges = json_array_size(mm);
    merges = calloc(n_merges ? n_merges : 1, sizeof *merges);
    if (!merges) {
        r1_err("out of memory");
        goto out;
    }
    json_array_foreach(mm, i, val) {
        if (json_is_string(val)) {
            merges[i] = strdup(json_string_value(val));
        } else if (json_is_array(val) && json_array_size(val) == 2 && json_is_string(json_array_get(val, 0)) &&
                   json_is_string(json_array_get(val, 1))) {
            const char *a = json_string_value(json_array_get(val, 0));
            const char *b = json_string_value(json_array_get(val, 1));
            size_t la = strlen(a), lb = strlen(b);
            if ((merges[i] = malloc(la + lb + 2))) {
                memcpy(merges[i], a, la);
                merges[i][la] = ' ';
                memcpy(merges[i] + la + 1, b, lb + 1);
            }
        } else {
            r1_err("%s/tokenizer.json: merge %zu is neither \"a b\" nor [\"a\", \"b\"]", dir, i);
            goto out;
        }
        if (!merges[i]) {
            r1_err("out of memory");
            goto out;
        }
    }
    /* the pre-tokenizer, by the regex or step that tells the families apart:
     * Llama 3 groups up to 3 digits, Qwen2 splits digits one at a time in its
     * regex, SmolLM in a Digits step before GPT-2's ByteLevel regex */
    const char *pre = "gpt2";
    json_t *pt = json_object_get(tj, "pre_tokenizer");
    char *dump = pt ? json_dumps(pt, JSON_COMPACT) : NULL;
    if (dump && strstr(dump, "\\\\p{N}{1,3}")) pre = "llama-bpe";
    else if (dump && strstr(dump, "\\\\p{N}|")) pre = "qwen2";
    else if (dump && strstr(dump, "\"individual_digits\":true")) pre = "smollm";
    free(dump);
    int add_bos = cfg && json_is_true(json_object_get(cfg, "add_bos_token"));
    const char *tmpl = NULL;
    json_t *ct = cfg ? json_object_get(cfg, "chat_template") : NULL;
    if (json_is_string(ct)) tmpl = json_string_value(ct);
    json_array_foreach(ct, i, val) /* [{"name": "default", "template": ...}] */
        if (json_is_string(json_object_get(val, "name")) &&
            !strcmp(json_string_value(json_object_get(val, "name")), "default")) tmpl =
            json_string_value(json_object_get(val, "template"));
    /* ids from config.json, else the token texts of tokenizer_config.json */
    for (int k = 0; k < 2 && cfg; k++) {
        int *id = k ? &eos : &bos;
        const char *text = token_text(json_object_get(cfg, k ? "eos_token" : "bos_token"));
        for (int j = 0; *id < 0 && text && j < vocab; j++)
            if (!strcmp(tokens[j], text)) *id = j;
    }
    if (r1_gguf_w_str(w, "tokenizer.ggml.model", "gpt2") || r1_gguf_w_str(w, "tokenizer.ggml.pre", pre) ||
        r1_gguf_w_arr_str(w, "tokenizer.ggml.tokens", (const char *const *)tokens, (size_t)vocab) ||
        r1_gguf_w_arr_i32(w, "tokenizer.ggml.token_type", types, (size_t)vocab) ||
        r1_gguf_w_arr_str(w, "tokenizer.ggml.merges", (const char *const *)merges, n_merges) ||
        (bos >= 0 && r1_gguf_w_u32(w, "tokenizer.ggml.bos_token_id", (uint32_t)bos)) ||
        (eos >= 0 && r1_gguf_w_u32(w, "tokenizer.ggml.eos_token_id", (uint32_t)eos)) ||
        r1_gguf_w_bool(w, "tokenizer.ggml.add_bos_token", add_bos) ||
        r1_gguf_w_bool(w, "tokenizer.ggml.add_eos_token", 0) ||
        (tmpl && r1_gguf_w_str(w, "tokenizer.chat_template", tmpl)))
        goto out;
    rc = 0;
out:
    for (size_t k = 0; merges && k < n_merges; k++) free(merges[k]);
    free(merges);
    free(tokens);
    free(types);
    free(pool);
    json_decref(tj);
    json_decref(cfg);
    return rc;
}
