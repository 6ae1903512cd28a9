/*
 * tokenizer_internal.h - the inside of r1_tokenizer_t, shared by the files of
 * src/tokenizer/, and the builder API other loaders (GGUF) use to construct
 * the same tokenizer from plain arrays. Nothing outside src/tokenizer/ and the
 * model loaders should include it; the public API is include/r1infer.h.
 *
 * Pipeline (Hugging Face tokenizers semantics, byte-level BPE only):
 *   added tokens (raw text, leftmost-longest) -> NFC on valid UTF-8 runs ->
 *   regex splits (Isolated) -> byte-level BPE by merge rank -> post-processor
 *   prefix/suffix ids when add_special.
 */
#ifndef R1_TOKENIZER_INTERNAL_H
#define R1_TOKENIZER_INTERNAL_H

#include <pthread.h>
#include <stddef.h>
#include <stdint.h>

#include "r1infer.h"

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>

/* The Qwen2 pre-tokenizer regex (tokenizer.json of Qwen2 / R1-Distill-Qwen). */
extern const char *const r1_tok_regex_qwen2;
/* The GPT-2 regex ByteLevel uses when use_regex is true. */
extern const char *const r1_tok_regex_gpt2;
/* Llama 3's split regex (tokenizer.json of Llama 3 / R1-Distill-Llama). */
extern const char *const r1_tok_regex_llama3;
/* One numeric character: HF's Digits pre-tokenizer with individual_digits. */
extern const char *const r1_tok_regex_digit;

/* ---- small open-addressing hash tables (strmap.c) ---- */

/* Byte string -> int32 value. Keys are copied into an internal pool. */
struct r1_strmap {
    uint32_t *slots; /* cap entries: index+1 into ents, 0 = empty */
    uint32_t cap;    /* power of two */
    uint32_t n;
    struct r1_strmap_ent {
        uint64_t hash;
        uint32_t off, len; /* key bytes in pool */
        int32_t val;
    } * ents;
    uint32_t ents_cap;
    char *pool;
    size_t pool_len, pool_cap;
};
int r1_strmap_init(struct r1_strmap *m, uint32_t expect);
void r1_strmap_free(struct r1_strmap *m);
/* Insert key (keeps the existing value if present); 0 or -1 on OOM. */
int r1_strmap_put(struct r1_strmap *m, const void *key, size_t len, int32_t val);
/* Value of key or -1. */
int32_t r1_strmap_get(const struct r1_strmap *m, const void *key, size_t len);
uint64_t r1_hash_bytes(const void *p, size_t n);

/* (left id, right id) -> (rank, merged id). */
struct r1_mergemap {
    struct r1_merge_ent {
        uint64_t key; /* (left << 32 | right) + 1; 0 = empty */
        int32_t rank, id;
    } * slots;
    uint32_t cap, n;
};
int r1_mergemap_init(struct r1_mergemap *m, uint32_t expect);
void r1_mergemap_free(struct r1_mergemap *m);
/* Insert; keeps the first (lowest rank) entry for a pair. */
int r1_mergemap_put(struct r1_mergemap *m, int32_t a, int32_t b, int32_t rank, int32_t id);
/* Returns 1 and fills rank/id when the pair merges. */
static inline int r1_mergemap_get(const struct r1_mergemap *m, int32_t a, int32_t b, int32_t *rank, int32_t *id) {
    uint64_t key = (((uint64_t)(uint32_t)a << 32) | (uint32_t)b) + 1;
    uint64_t h = key * 0x9E3779B97F4A7C15ull;
    uint32_t mask = m->cap - 1, i = (uint32_t)(h >> 32) & mask;
    for (;;) {
        const struct r1_merge_ent *e = &m->slots[i];
        if (e->key == key) {
            *rank = e->rank;
            *id = e->id;
            return 1;
        }
        if (e->key == 0) return 0;
        i = (i + 1) & mask;
    }
}

/* ---- byte-level alphabet (bytelevel.c) ---- */
/* Code point that byte b is written as in a byte-level vocab. */
uint32_t r1_bytelevel_char(uint8_t b);
/* Inverse: byte of code point cp, or -1 if cp is not in the alphabet. */
int r1_bytelevel_byte(uint32_t cp);
/* Decode a vocab string written in the byte-level alphabet into raw bytes.
 * out must hold len bytes. Returns the byte count, or -1 if some character
 * is not in the alphabet (the caller then keeps the UTF-8 as it is). */
long r1_bytelevel_decode(const char *s, size_t len, uint8_t *out);

/* ---- the tokenizer ---- */

enum r1_chat_kind { R1_CHAT_KIND_CHATML = 0, R1_CHAT_KIND_DEEPSEEK_R1 };

#define R1_TOK_MAX_SPLITS 4

struct r1_added_tok {
    char *text;
    size_t len;
    int32_t id;
    int special;
};

struct r1_tokenizer {
    /* every id 0..n_ids-1: its decoded bytes (raw bytes, what decode emits) */
    int32_t n_ids;
    uint32_t *tok_off, *tok_len; /* n_ids: bytes of id in tok_bytes; unused ids empty */
    char *tok_bytes;
    size_t tok_bytes_len, tok_bytes_cap;
    uint8_t *tok_flags; /* R1_TOKF_* per id */

    struct r1_strmap vocab;    /* raw bytes -> id, BPE model vocab only */
    struct r1_mergemap merges; /* byte pair merges by rank */
    int32_t byte_id[256];      /* id of each single byte, -1 if none */
    int ignore_merges;         /* whole word in vocab wins (Llama-3 style) */

    struct r1_added_tok *added; /* sorted by length, longest first */
    size_t n_added;
    uint8_t added_first[256]; /* 1 if some added token starts with the byte */

    int nfc;                              /* normalizer NFC */
    pcre2_code *split[R1_TOK_MAX_SPLITS]; /* regex splits, applied in order */
    int n_split;
    int add_prefix_space; /* ByteLevel add_prefix_space */

    int32_t post_prefix[4], post_suffix[4]; /* post-processor ids */
    int n_post_prefix, n_post_suffix;

    int32_t bos, eos;
    char *bos_text; /* bos_token string for the chat template */
    enum r1_chat_kind chat;
    char *chat_system; /* ChatML: the template's default system prompt, or NULL */

    /* cache of encoded pieces (shared, trylock: never waits) */
    pthread_mutex_t cache_lock;
    struct r1_piece_cache *cache;
};

enum { R1_TOKF_USED = 1, R1_TOKF_ADDED = 2, R1_TOKF_SPECIAL = 4 };

/* ---- builder API (tokenizer.c): used by the tokenizer.json and GGUF loaders ---- */

/* GGUF token types (tokenizer.ggml.token_type). */
enum r1_tok_type {
    R1_TOK_TYPE_NORMAL = 1,
    R1_TOK_TYPE_UNKNOWN = 2,
    R1_TOK_TYPE_CONTROL = 3,      /* special added token */
    R1_TOK_TYPE_USER_DEFINED = 4, /* non-special added token */
    R1_TOK_TYPE_UNUSED = 5,
    R1_TOK_TYPE_BYTE = 6
};

struct r1_tok_spec {
    const char *const *tokens; /* n_tokens strings, id = index, byte-level vocab form */
    const int32_t *types;      /* n_tokens enum r1_tok_type, or NULL = all normal */
    int32_t n_tokens;
    const char *const *merges; /* n_merges "left right" strings, in rank order */
    size_t n_merges;
    int32_t bos, eos;          /* -1 when unknown */
    int add_bos;               /* post-processor adds bos when add_special */
    const char *pre;           /* tokenizer.ggml.pre: "qwen2", "llama-bpe", "smollm", "gpt2", NULL */
    const char *chat_template; /* Jinja source or NULL */
    const char *source;        /* file name used in error messages */
};

/* Build a tokenizer from arrays (copies everything). NULL + r1_err on error. */
r1_tokenizer_t *r1_tokenizer_build(const struct r1_tok_spec *spec);

/* Provided by the GGUF loader (gguf_tok.c). */
r1_tokenizer_t *r1_tokenizer_load_gguf(const char *path);

/* ---- pieces used between the files ---- */
r1_tokenizer_t *r1_tok_new(void); /* zeroed, lock initialised */
/* Allocate the per-id tables for n ids. */
int r1_tok_alloc_ids(r1_tokenizer_t *t, int32_t n, size_t bytes_hint);
/* Set the bytes of id (any order; an id set twice is an error). */
int r1_tok_set_id(r1_tokenizer_t *t, int32_t id, const void *bytes, size_t len, int flags);
/* Finish: sort added tokens, build first-byte table, byte ids, cache. */
int r1_tok_finish(r1_tokenizer_t *t, const char *source);
/* Compile a split regex (PCRE2, UTF + UCP + invalid-UTF, JIT). */
int r1_tok_add_split(r1_tokenizer_t *t, const char *pattern, size_t len, int literal, const char *source);
/* A model (BPE) vocab entry written in the byte-level alphabet. */
int r1_tok_add_vocab(r1_tokenizer_t *t, const char *s, size_t len, int32_t id);
/* Merge of two vocab strings (byte-level form); rank = order in the file. */
int r1_tok_add_merge(r1_tokenizer_t *t, const char *a, size_t alen, const char *b, size_t blen, int32_t rank,
                     const char *source);
int r1_tok_add_added(r1_tokenizer_t *t, const char *text, size_t len, int32_t id, int special);
/* Recognise a Jinja chat template (NULL = missing); warns on stderr if unknown.
 * *default_system receives a ChatML template's default system prompt
 * (malloc'ed) or NULL. */
enum r1_chat_kind r1_chat_detect(const char *jinja, const char *source, char **default_system);

/* Load tokenizer.json (+ tokenizer_config.json) from a directory. */
r1_tokenizer_t *r1_tokenizer_load_hf(const char *dir);

/* The piece cache (encode.c). */
struct r1_piece_cache *r1_piece_cache_new(void);
void r1_piece_cache_free(struct r1_piece_cache *c);

#endif
