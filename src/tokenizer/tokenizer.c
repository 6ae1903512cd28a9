/*
 * tokenizer.c - the life cycle of r1_tokenizer_t: the builder pieces both
 * loaders share (ids, added tokens, merges, split regexes), the builder from
 * plain arrays (for GGUF), r1_tokenizer_load's dispatch, and the small
 * accessors. Encoding lives in encode.c, decoding in decode.c.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tokenizer/tokenizer_internal.h"
#include "util/util.h"

const char *const r1_tok_regex_qwen2 = "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}| "
                                       "?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+";
const char *const r1_tok_regex_gpt2 =
    "'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)|\\s+";
const char *const r1_tok_regex_llama3 = "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1,3}| "
                                        "?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+";
const char *const r1_tok_regex_digit = "\\p{N}";

/* GGUF tokenizer.ggml.pre -> what tokenizer.json of the same model says:
 * the split regexes in order (Isolated), NFC, and Llama-3's ignore_merges
 * (a whole pre-token found in the vocab is one id, merges or not). */
static const struct pre_kind {
    const char *name;
    const char *const *split[2];
    int nfc, ignore_merges;
} PRE_KINDS[] = {
    {"qwen2", {&r1_tok_regex_qwen2}, 1, 0},
    {"deepseek-r1-qwen", {&r1_tok_regex_qwen2}, 1, 0},
    {"llama-bpe", {&r1_tok_regex_llama3}, 0, 1}, /* Llama 3 and the R1 Llama distills */
    {"llama3", {&r1_tok_regex_llama3}, 0, 1},
    {"smollm", {&r1_tok_regex_digit, &r1_tok_regex_gpt2}, 0, 0}, /* Digits(individual) + ByteLevel */
    {"gpt2", {&r1_tok_regex_gpt2}, 0, 0},
    {"default", {&r1_tok_regex_gpt2}, 0, 0},
};

r1_tokenizer_t *r1_tok_new(void) {
    r1_tokenizer_t *t = calloc(1, sizeof *t);
    if (!t) {
        r1_err("out of memory for the tokenizer");
        return NULL;
    }
    pthread_mutex_init(&t->cache_lock, NULL);
    t->bos = t->eos = -1;
    for (int i = 0; i < 256; i++) t->byte_id[i] = -1;
    return t;
}

void r1_tokenizer_free(r1_tokenizer_t *t) {
    if (!t) return;
    free(t->tok_off);
    free(t->tok_len);
    free(t->tok_bytes);
    free(t->tok_flags);
    r1_strmap_free(&t->vocab);
    r1_mergemap_free(&t->merges);
    for (size_t i = 0; i < t->n_added; i++) free(t->added[i].text);
    free(t->added);
    for (int i = 0; i < t->n_split; i++) pcre2_code_free(t->split[i]);
    free(t->bos_text);
    free(t->chat_system);
    r1_piece_cache_free(t->cache);
    pthread_mutex_destroy(&t->cache_lock);
    free(t);
}

int r1_tok_alloc_ids(r1_tokenizer_t *t, int32_t n, size_t bytes_hint) {
    if (n <= 0 || n > (1 << 28)) return r1_err("tokenizer has an invalid vocabulary size %d", (int)n);
    t->n_ids = n;
    t->tok_off = calloc((size_t)n, sizeof *t->tok_off);
    t->tok_len = calloc((size_t)n, sizeof *t->tok_len);
    t->tok_flags = calloc((size_t)n, 1);
    t->tok_bytes_cap = bytes_hint > 4096 ? bytes_hint : 4096;
    t->tok_bytes = malloc(t->tok_bytes_cap);
    if (!t->tok_off || !t->tok_len || !t->tok_flags || !t->tok_bytes)
        return r1_err("out of memory for a vocabulary of %d tokens", (int)n);
    if (r1_strmap_init(&t->vocab, (uint32_t)n)) return -1;
    return 0;
}

int r1_tok_set_id(r1_tokenizer_t *t, int32_t id, const void *bytes, size_t len, int flags) {
    if (id < 0 || id >= t->n_ids) return r1_err("token id %d is out of range", (int)id);
    if (t->tok_bytes_len + len > UINT32_MAX) return r1_err("tokenizer vocabulary too large");
    if (t->tok_bytes_len + len > t->tok_bytes_cap) {
        size_t c = t->tok_bytes_cap * 2;
        while (c < t->tok_bytes_len + len) c *= 2;
        char *p = realloc(t->tok_bytes, c);
        if (!p) return r1_err("out of memory for the vocabulary");
        t->tok_bytes = p;
        t->tok_bytes_cap = c;
    }
    memcpy(t->tok_bytes + t->tok_bytes_len, bytes, len);
    t->tok_off[id] = (uint32_t)t->tok_bytes_len;
    t->tok_len[id] = (uint32_t)len;
    t->tok_bytes_len += len;
    t->tok_flags[id] |= (uint8_t)(flags | R1_TOKF_USED);
    return 0;
}

/* Add a model (BPE) vocab entry given in the byte-level alphabet. */
int r1_tok_add_vocab(r1_tokenizer_t *t, const char *s, size_t len, int32_t id) {
    uint8_t stack[256], *buf = len <= sizeof stack ? stack : malloc(len);
    if (!buf) return r1_err("out of memory");
    long n = r1_bytelevel_decode(s, len, buf);
    const void *raw = n >= 0 ? (const void *)buf : (const void *)s;
    size_t rlen = n >= 0 ? (size_t)n : len;
    int rc = r1_tok_set_id(t, id, raw, rlen, 0);
    if (!rc) rc = r1_strmap_put(&t->vocab, raw, rlen, id);
    if (buf != stack) free(buf);
    return rc;
}

int r1_tok_add_added(r1_tokenizer_t *t, const char *text, size_t len, int32_t id, int special) {
    if (len == 0) return r1_err("added token %d has empty content", (int)id);
    if (t->n_added % 64 == 0) {
        void *p = realloc(t->added, (t->n_added + 64) * sizeof *t->added);
        if (!p) return r1_err("out of memory");
        t->added = p;
    }
    struct r1_added_tok *a = &t->added[t->n_added];
    a->text = malloc(len + 1);
    if (!a->text) return r1_err("out of memory");
    memcpy(a->text, text, len);
    a->text[len] = 0;
    a->len = len;
    a->id = id;
    a->special = special;
    t->n_added++;
    /* decode bytes: the ByteLevel decoder maps the token if every character
     * is in the alphabet, else keeps it as it is (Hugging Face semantics). */
    uint8_t stack[256], *buf = len <= sizeof stack ? stack : malloc(len);
    if (!buf) return r1_err("out of memory");
    long n = r1_bytelevel_decode(text, len, buf);
    int rc =
        n >= 0 ? r1_tok_set_id(t, id, buf, (size_t)n, R1_TOKF_ADDED) : r1_tok_set_id(t, id, text, len, R1_TOKF_ADDED);
    if (buf != stack) free(buf);
    if (!rc && special) t->tok_flags[id] |= R1_TOKF_SPECIAL;
    return rc;
}

/* Id of a vocab string written in the byte-level alphabet (as in merges). */
static int32_t vocab_lookup_form(const r1_tokenizer_t *t, const char *s, size_t len) {
    uint8_t stack[256], *buf = len <= sizeof stack ? stack : malloc(len);
    if (!buf) return -1;
    long n = r1_bytelevel_decode(s, len, buf);
    int32_t id = n >= 0 ? r1_strmap_get(&t->vocab, buf, (size_t)n) : -1;
    if (id < 0) id = r1_strmap_get(&t->vocab, s, len);
    if (buf != stack) free(buf);
    return id;
}

int r1_tok_add_merge(r1_tokenizer_t *t, const char *a, size_t alen, const char *b, size_t blen, int32_t rank,
                     const char *source) {
    int32_t ia = vocab_lookup_form(t, a, alen), ib = vocab_lookup_form(t, b, blen);
    if (ia < 0 || ib < 0)
        return r1_err("%s: merge %d (\"%.*s %.*s\") names unknown token \"%.*s\"", source, (int)rank, (int)alen, a,
                      (int)blen, b, ia < 0 ? (int)alen : (int)blen, ia < 0 ? a : b);
    size_t la = t->tok_len[ia], lb = t->tok_len[ib];
    char stack[512], *cat = la + lb <= sizeof stack ? stack : malloc(la + lb);
    if (!cat) return r1_err("out of memory");
    memcpy(cat, t->tok_bytes + t->tok_off[ia], la);
    memcpy(cat + la, t->tok_bytes + t->tok_off[ib], lb);
    int32_t id = r1_strmap_get(&t->vocab, cat, la + lb);
    if (cat != stack) free(cat);
    if (id < 0)
        return r1_err("%s: merge %d (\"%.*s %.*s\") makes a token that is not in the vocab", source, (int)rank,
                      (int)alen, a, (int)blen, b);
    return r1_mergemap_put(&t->merges, ia, ib, rank, id);
}

int r1_tok_add_split(r1_tokenizer_t *t, const char *pattern, size_t len, int literal, const char *source) {
    if (t->n_split == R1_TOK_MAX_SPLITS)
        return r1_err("%s: more than %d pre-tokenizer splits", source, R1_TOK_MAX_SPLITS);
    int err;
    PCRE2_SIZE off;
    uint32_t opt = PCRE2_UTF | PCRE2_UCP | PCRE2_MATCH_INVALID_UTF | (literal ? PCRE2_LITERAL : 0);
    pcre2_code *re = pcre2_compile((PCRE2_SPTR)pattern, len, opt, &err, &off, NULL);
    if (!re) {
        PCRE2_UCHAR msg[256];
        pcre2_get_error_message(err, msg, sizeof msg);
        return r1_err("%s: pre_tokenizer regex does not compile at offset %zu: %s", source, (size_t)off, (char *)msg);
    }
    pcre2_jit_compile(re, PCRE2_JIT_COMPLETE); /* falls back to the interpreter */
    t->split[t->n_split++] = re;
    return 0;
}

static int cmp_added(const void *a, const void *b) {
    const struct r1_added_tok *x = a, *y = b;
    if (x->len != y->len) return x->len > y->len ? -1 : 1;
    return x->id < y->id ? -1 : x->id > y->id;
}

int r1_tok_finish(r1_tokenizer_t *t, const char *source) {
    if (t->n_added) qsort(t->added, t->n_added, sizeof *t->added, cmp_added);
    memset(t->added_first, 0, sizeof t->added_first);
    for (size_t i = 0; i < t->n_added; i++) t->added_first[(uint8_t)t->added[i].text[0]] = 1;
    int missing = 0;
    for (int b = 0; b < 256; b++) {
        uint8_t c = (uint8_t)b;
        t->byte_id[b] = r1_strmap_get(&t->vocab, &c, 1);
        missing += t->byte_id[b] < 0;
    }
    if (missing == 256) return r1_err("%s: the vocab is not byte-level (no single-byte tokens)", source);
    if (!t->cache) t->cache = r1_piece_cache_new(); /* optional: NULL just means slower */
    return 0;
}

/* ---- builder from arrays (GGUF) ---- */

r1_tokenizer_t *r1_tokenizer_build(const struct r1_tok_spec *s) {
    const char *src = s->source ? s->source : "tokenizer";
    r1_tokenizer_t *t = r1_tok_new();
    if (!t) return NULL;
    if (!s->tokens || s->n_tokens <= 0) {
        r1_err("%s: empty token list", src);
        goto fail;
    }
    if (r1_tok_alloc_ids(t, s->n_tokens, (size_t)s->n_tokens * 8)) goto fail;
    for (int32_t i = 0; i < s->n_tokens; i++) {
        const char *tok = s->tokens[i];
        if (!tok) {
            r1_err("%s: token %d is missing", src, (int)i);
            goto fail;
        }
        int type = s->types ? s->types[i] : R1_TOK_TYPE_NORMAL;
        int rc = type == R1_TOK_TYPE_CONTROL        ? r1_tok_add_added(t, tok, strlen(tok), i, 1)
                 : type == R1_TOK_TYPE_USER_DEFINED ? r1_tok_add_added(t, tok, strlen(tok), i, 0)
                                                    : r1_tok_add_vocab(t, tok, strlen(tok), i);
        if (rc) goto fail;
    }
    if (r1_mergemap_init(&t->merges, (uint32_t)s->n_merges)) goto fail;
    for (size_t i = 0; i < s->n_merges; i++) {
        const char *m = s->merges[i], *sp = m ? strchr(m, ' ') : NULL;
        if (!sp) {
            r1_err("%s: merge %zu is not \"left right\"", src, i);
            goto fail;
        }
        if (r1_tok_add_merge(t, m, (size_t)(sp - m), sp + 1, strlen(sp + 1), (int32_t)i, src)) goto fail;
    }
    const struct pre_kind *pk = &PRE_KINDS[5]; /* no pre: GPT-2's ByteLevel regex */
    if (s->pre) {
        size_t i, n = sizeof PRE_KINDS / sizeof PRE_KINDS[0];
        for (i = 0; i < n && strcmp(s->pre, PRE_KINDS[i].name); i++) {}
        if (i == n) {
            r1_err("%s: pre-tokenizer '%s' is not supported (known: qwen2, deepseek-r1-qwen, "
                   "llama-bpe, smollm, gpt2)",
                   src, s->pre);
            goto fail;
        }
        pk = &PRE_KINDS[i];
    }
    for (int i = 0; i < 2 && pk->split[i]; i++)
        if (r1_tok_add_split(t, *pk->split[i], strlen(*pk->split[i]), 0, src)) goto fail;
    t->nfc = pk->nfc;
    t->ignore_merges = pk->ignore_merges;
    t->bos = s->bos;
    t->eos = s->eos;
    if (s->add_bos && s->bos >= 0) t->post_prefix[t->n_post_prefix++] = s->bos;
    if (s->bos >= 0 && s->bos < t->n_ids) {
        size_t n = t->tok_len[s->bos];
        t->bos_text = malloc(n + 1);
        if (!t->bos_text) goto fail;
        memcpy(t->bos_text, t->tok_bytes + t->tok_off[s->bos], n);
        t->bos_text[n] = 0;
    }
    t->chat = r1_chat_detect(s->chat_template, src, &t->chat_system);
    if (r1_tok_finish(t, src)) goto fail;
    return t;
fail:
    r1_tokenizer_free(t);
    return NULL;
}

r1_tokenizer_t *r1_tokenizer_load(const char *path) {
    if (!path || !*path) {
        r1_err("no tokenizer path given");
        return NULL;
    }
    size_t n = strlen(path);
    if (n >= 5 && !strcmp(path + n - 5, ".gguf")) return r1_tokenizer_load_gguf(path);
    if (r1_path_is_dir(path)) return r1_tokenizer_load_hf(path);
    if (n >= 14 && !strcmp(path + n - 14, "tokenizer.json")) {
        char *dir = strdup(path);
        if (!dir) return NULL;
        char *slash = strrchr(dir, '/');
        if (slash) *slash = 0;
        else strcpy(dir, ".");
        r1_tokenizer_t *t = r1_tokenizer_load_hf(dir);
        free(dir);
        return t;
    }
    r1_err("%s: not a directory with tokenizer.json, a tokenizer.json or a .gguf file", path);
    return NULL;
}

/* ---- accessors ---- */

int r1_tokenizer_vocab_size(const r1_tokenizer_t *t) { return t->n_ids; }
int r1_tokenizer_bos(const r1_tokenizer_t *t) { return t->bos; }
int r1_tokenizer_eos(const r1_tokenizer_t *t) { return t->eos; }

int r1_tokenizer_is_special(const r1_tokenizer_t *t, int32_t id) {
    return id >= 0 && id < t->n_ids && (t->tok_flags[id] & R1_TOKF_SPECIAL);
}

int r1_tokenizer_token_id(const r1_tokenizer_t *t, const char *text) {
    size_t len = strlen(text);
    for (size_t i = 0; i < t->n_added; i++)
        if (t->added[i].len == len && !memcmp(t->added[i].text, text, len)) return t->added[i].id;
    int32_t id = vocab_lookup_form(t, text, len); /* "Ġthe" form, then raw bytes */
    return id;
}
