/*
 * load_json.c - reads a Hugging Face tokenizer.json (+ tokenizer_config.json)
 * into r1_tokenizer_t with jansson. Supports what byte-level BPE checkpoints
 * use (Qwen2, GPT-2 style): model BPE, added_tokens, normalizer NFC/Sequence,
 * pre_tokenizer Split(Isolated)/ByteLevel/Sequence, decoder ByteLevel,
 * post_processor TemplateProcessing/ByteLevel. Anything else is an error that
 * names the file and the field; nothing here is guessed.
 */
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tokenizer/tokenizer_internal.h"
#include "util/util.h"

static json_t *load_json(const char *path, int optional, int *missing) {
    size_t len;
    *missing = 0;
    char *text = r1_file_read(path, &len);
    if (!text) {
        *missing = 1; /* r1_file_read's error names the path */
        (void)optional;
        return NULL;
    }
    json_error_t e;
    json_t *j = json_loadb(text, len, 0, &e);
    free(text);
    if (!j) r1_err("%s:%d:%d: malformed JSON: %s", path, e.line, e.column, e.text);
    else if (!json_is_object(j)) {
        json_decref(j);
        r1_err("%s: the top level is not a JSON object", path);
        return NULL;
    }
    return j;
}

static const char *type_of(json_t *o) {
    json_t *ty = json_object_get(o, "type");
    return json_is_string(ty) ? json_string_value(ty) : NULL;
}

static int load_normalizer(r1_tokenizer_t *t, json_t *n, const char *f) {
    if (!n || json_is_null(n)) return 0;
    const char *ty = type_of(n);
    if (!ty) return r1_err("%s: normalizer has no \"type\"", f);
    if (!strcmp(ty, "NFC")) {
        t->nfc = 1;
        return 0;
    }
    if (!strcmp(ty, "Sequence")) {
        json_t *list = json_object_get(n, "normalizers"), *it;
        size_t i;
        if (!json_is_array(list)) return r1_err("%s: normalizer.normalizers is not an array", f);
        json_array_foreach(list, i, it) if (load_normalizer(t, it, f)) return -1;
        return 0;
    }
    return r1_err("%s: normalizer type \"%s\" is not supported (only NFC, Sequence)", f, ty);
}

static int load_pre(r1_tokenizer_t *t, json_t *p, const char *f, int *bytelevel) {
    if (!p || json_is_null(p)) return 0;
    const char *ty = type_of(p);
    if (!ty) return r1_err("%s: pre_tokenizer has no \"type\"", f);
    if (*bytelevel) return r1_err("%s: pre_tokenizer %s after ByteLevel is not supported", f, ty);
    if (!strcmp(ty, "Sequence")) {
        json_t *list = json_object_get(p, "pretokenizers"), *it;
        size_t i;
        if (!json_is_array(list)) return r1_err("%s: pre_tokenizer.pretokenizers is not an array", f);
        json_array_foreach(list, i, it) if (load_pre(t, it, f, bytelevel)) return -1;
        return 0;
    }
    if (!strcmp(ty, "Split")) {
        json_t *pat = json_object_get(p, "pattern");
        json_t *re = json_object_get(pat, "Regex"), *lit = json_object_get(pat, "String");
        const char *beh = json_string_value(json_object_get(p, "behavior"));
        if (!json_is_string(re) && !json_is_string(lit))
            return r1_err("%s: pre_tokenizer Split.pattern has neither Regex nor String", f);
        if (!beh || strcmp(beh, "Isolated"))
            return r1_err("%s: pre_tokenizer Split.behavior \"%s\" is not supported (only Isolated)", f,
                          beh ? beh : "(missing)");
        if (json_is_true(json_object_get(p, "invert")))
            return r1_err("%s: pre_tokenizer Split.invert true is not supported", f);
        json_t *s = json_is_string(re) ? re : lit;
        return r1_tok_add_split(t, json_string_value(s), json_string_length(s), !json_is_string(re), f);
    }
    if (!strcmp(ty, "Digits")) { /* numbers split off: each digit alone, or runs of digits */
        const char *re = json_is_true(json_object_get(p, "individual_digits")) ? r1_tok_regex_digit : "\\p{N}+";
        return r1_tok_add_split(t, re, strlen(re), 0, f);
    }
    if (!strcmp(ty, "ByteLevel")) {
        *bytelevel = 1;
        t->add_prefix_space = json_is_true(json_object_get(p, "add_prefix_space"));
        json_t *ur = json_object_get(p, "use_regex");
        if (!ur || json_is_true(ur)) return r1_tok_add_split(t, r1_tok_regex_gpt2, strlen(r1_tok_regex_gpt2), 0, f);
        return 0;
    }
    return r1_err("%s: pre_tokenizer type \"%s\" is not supported (Split, Digits, ByteLevel, Sequence)", f, ty);
}

static int load_post(r1_tokenizer_t *t, json_t *p, const char *f) {
    if (!p || json_is_null(p)) return 0;
    const char *ty = type_of(p);
    if (!ty) return r1_err("%s: post_processor has no \"type\"", f);
    if (!strcmp(ty, "ByteLevel")) return 0;
    if (!strcmp(ty, "Sequence")) {
        json_t *list = json_object_get(p, "processors"), *it;
        size_t i;
        if (!json_is_array(list)) return r1_err("%s: post_processor.processors is not an array", f);
        json_array_foreach(list, i, it) if (load_post(t, it, f)) return -1;
        return 0;
    }
    if (strcmp(ty, "TemplateProcessing")) return r1_err("%s: post_processor type \"%s\" is not supported", f, ty);
    json_t *single = json_object_get(p, "single"), *specials = json_object_get(p, "special_tokens");
    if (!json_is_array(single)) return r1_err("%s: post_processor.single is not an array", f);
    int after = 0;
    size_t i;
    json_t *it;
    json_array_foreach(single, i, it) {
        if (json_object_get(it, "Sequence")) {
            after = 1;
            continue;
        }
        const char *name = json_string_value(json_object_get(json_object_get(it, "SpecialToken"), "id"));
        if (!name) return r1_err("%s: post_processor.single[%zu] is not SpecialToken or Sequence", f, i);
        json_t *ids = json_object_get(json_object_get(specials, name), "ids"), *v;
        size_t k;
        if (!json_is_array(ids)) return r1_err("%s: post_processor.special_tokens has no ids for \"%s\"", f, name);
        json_array_foreach(ids, k, v) {
            json_int_t id = json_integer_value(v);
            if (!json_is_integer(v) || id < 0 || id >= t->n_ids)
                return r1_err("%s: post_processor.special_tokens.\"%s\" has an invalid id", f, name);
            int *n = after ? &t->n_post_suffix : &t->n_post_prefix;
            if (*n == 4) return r1_err("%s: post_processor adds too many tokens", f);
            (after ? t->post_suffix : t->post_prefix)[(*n)++] = (int32_t)id;
        }
    }
    return 0;
}

static int load_model(r1_tokenizer_t *t, json_t *root, const char *f) {
    json_t *model = json_object_get(root, "model");
    if (!json_is_object(model)) return r1_err("%s: \"model\" is missing or not an object", f);
    const char *ty = type_of(model);
    if (ty && strcmp(ty, "BPE")) return r1_err("%s: model.type \"%s\" is not supported (only BPE)", f, ty);
    json_t *vocab = json_object_get(model, "vocab"), *merges = json_object_get(model, "merges");
    if (!json_is_object(vocab)) return r1_err("%s: model.vocab is missing or not an object", f);
    if (!json_is_array(merges)) return r1_err("%s: model.merges is missing or not an array", f);
    const char *cp = json_string_value(json_object_get(model, "continuing_subword_prefix"));
    const char *ew = json_string_value(json_object_get(model, "end_of_word_suffix"));
    if ((cp && *cp) || (ew && *ew))
        return r1_err("%s: model.continuing_subword_prefix / end_of_word_suffix are not supported", f);
    t->ignore_merges = json_is_true(json_object_get(model, "ignore_merges"));

    /* size the id space: the largest id of vocab and added tokens */
    json_int_t max_id = -1;
    const char *key;
    json_t *v;
    size_t bytes = 0;
    json_object_foreach(vocab, key, v) {
        json_int_t id = json_integer_value(v);
        if (!json_is_integer(v) || id < 0 || id >= (1 << 28))
            return r1_err("%s: model.vocab[\"%s\"] is not a valid id", f, key);
        if (id > max_id) max_id = id;
        bytes += strlen(key);
    }
    json_t *added = json_object_get(root, "added_tokens");
    if (added && !json_is_null(added) && !json_is_array(added)) return r1_err("%s: added_tokens is not an array", f);
    size_t i;
    json_array_foreach(added, i, v) {
        json_t *id = json_object_get(v, "id"), *c = json_object_get(v, "content");
        if (!json_is_integer(id) || json_integer_value(id) < 0 || json_integer_value(id) >= (1 << 28) ||
            !json_is_string(c) || !json_string_length(c))
            return r1_err("%s: added_tokens[%zu] needs an \"id\" and a non-empty \"content\"", f, i);
        if (json_integer_value(id) > max_id) max_id = json_integer_value(id);
        bytes += json_string_length(c);
    }
    if (max_id < 0) return r1_err("%s: model.vocab is empty", f);
    if (r1_tok_alloc_ids(t, (int32_t)max_id + 1, bytes + 16)) return -1;
    json_object_foreach(vocab, key, v) {
        if (r1_tok_add_vocab(t, key, strlen(key), (int32_t)json_integer_value(v))) return -1;
    }
    json_array_foreach(added, i, v) {
        json_t *c = json_object_get(v, "content");
        if (r1_tok_add_added(t, json_string_value(c), json_string_length(c),
                             (int32_t)json_integer_value(json_object_get(v, "id")),
                             json_is_true(json_object_get(v, "special"))))
            return -1;
    }
    if (r1_mergemap_init(&t->merges, (uint32_t)json_array_size(merges))) return -1;
    json_array_foreach(merges, i, v) {
        const char *a, *b;
        size_t al, bl;
        if (json_is_string(v)) {
            a = json_string_value(v);
            const char *sp = strchr(a, ' ');
            if (!sp || strchr(sp + 1, ' '))
                return r1_err("%s: model.merges[%zu] \"%s\" is not \"left right\"", f, i, a);
            al = (size_t)(sp - a);
            b = sp + 1;
            bl = strlen(b);
        } else if (json_is_array(v) && json_array_size(v) == 2 && json_is_string(json_array_get(v, 0)) &&
                   json_is_string(json_array_get(v, 1))) {
            a = json_string_value(json_array_get(v, 0));
            al = json_string_length(json_array_get(v, 0));
            b = json_string_value(json_array_get(v, 1));
            bl = json_string_length(json_array_get(v, 1));
        } else {
            return r1_err("%s: model.merges[%zu] is neither \"a b\" nor [\"a\", \"b\"]", f, i);
        }
        if (r1_tok_add_merge(t, a, al, b, bl, (int32_t)i, f)) return -1;
    }
    return 0;
}

/* A token given as "text" or {"content": "text"} in tokenizer_config.json. */
static const char *config_token(json_t *cfg, const char *name) {
    json_t *v = json_object_get(cfg, name);
    if (json_is_object(v)) v = json_object_get(v, "content");
    return json_string_value(v);
}

static const char *config_template(json_t *cfg) {
    json_t *v = json_object_get(cfg, "chat_template"), *it;
    size_t i;
    if (json_is_string(v)) return json_string_value(v);
    json_array_foreach(v, i, it) { /* [{"name": "default", "template": ...}, ...] */
        const char *name = json_string_value(json_object_get(it, "name"));
        if (name && !strcmp(name, "default")) return json_string_value(json_object_get(it, "template"));
    }
    return NULL;
}

r1_tokenizer_t *r1_tokenizer_load_hf(const char *dir) {
    char *f = r1_path_join(dir, "tokenizer.json");
    char *cf = r1_path_join(dir, "tokenizer_config.json");
    json_t *root = NULL, *cfg = NULL;
    r1_tokenizer_t *t = NULL;
    int missing, bytelevel = 0;
    if (!f || !cf) goto fail;
    root = load_json(f, 0, &missing);
    if (!root) goto fail;
    if (!(t = r1_tok_new())) goto fail;
    if (load_model(t, root, f)) goto fail;
    if (load_normalizer(t, json_object_get(root, "normalizer"), f)) goto fail;
    if (load_pre(t, json_object_get(root, "pre_tokenizer"), f, &bytelevel)) goto fail;
    json_t *dec = json_object_get(root, "decoder");
    if (dec && !json_is_null(dec) && (!type_of(dec) || strcmp(type_of(dec), "ByteLevel"))) {
        r1_err("%s: decoder type \"%s\" is not supported (only ByteLevel)", f,
               type_of(dec) ? type_of(dec) : "(missing)");
        goto fail;
    }
    if (load_post(t, json_object_get(root, "post_processor"), f)) goto fail;
    if (r1_tok_finish(t, f)) goto fail;

    cfg = load_json(cf, 1, &missing);
    if (!cfg && !missing) goto fail; /* present but malformed */
    const char *bos = cfg ? config_token(cfg, "bos_token") : NULL;
    const char *eos = cfg ? config_token(cfg, "eos_token") : NULL;
    if (bos) {
        t->bos = r1_tokenizer_token_id(t, bos);
        if (t->bos < 0) {
            r1_err("%s: bos_token \"%s\" is not a token", cf, bos);
            goto fail;
        }
    } else if (t->n_post_prefix) {
        t->bos = t->post_prefix[0];
    }
    if (eos) {
        t->eos = r1_tokenizer_token_id(t, eos);
        if (t->eos < 0) {
            r1_err("%s: eos_token \"%s\" is not a token", cf, eos);
            goto fail;
        }
    } else {
        t->eos = r1_tokenizer_token_id(t, "<|endoftext|>");
    }
    if (bos) t->bos_text = strdup(bos);
    else if (t->bos >= 0) t->bos_text = strndup(t->tok_bytes + t->tok_off[t->bos], t->tok_len[t->bos]);
    t->chat = r1_chat_detect(cfg ? config_template(cfg) : NULL, cf, &t->chat_system);
    json_decref(root);
    json_decref(cfg);
    free(f);
    free(cf);
    return t;
fail:
    json_decref(root);
    json_decref(cfg);
    r1_tokenizer_free(t);
    free(f);
    free(cf);
    return NULL;
}
