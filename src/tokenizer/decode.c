/*
 * decode.c - ids -> bytes. Every id's bytes were worked out at load (the
 * ByteLevel decoder's inverse map, or the token as it is when it is not
 * written in the byte-level alphabet), so decoding is concatenation. The
 * streaming decoder holds back only a trailing incomplete UTF-8 sequence;
 * bytes that can never complete one are passed through, so the pieces of a
 * stream always add up to the batch decode.
 */
#include <stdlib.h>
#include <string.h>

#include "tokenizer/tokenizer_internal.h"
#include "util/util.h"

static int id_ok(const r1_tokenizer_t *t, int32_t id) {
    return id >= 0 && id < t->n_ids && (t->tok_flags[id] & R1_TOKF_USED);
}

static int id_hidden(const r1_tokenizer_t *t, int32_t id, int skip_special) {
    return skip_special && (t->tok_flags[id] & R1_TOKF_SPECIAL);
}

long r1_tokenizer_decode(const r1_tokenizer_t *t, const int32_t *ids, size_t n, int skip_special, char **out) {
    *out = NULL;
    size_t total = 0;
    for (size_t i = 0; i < n; i++) {
        if (!id_ok(t, ids[i])) return r1_err("decode: unknown token id %d", (int)ids[i]);
        if (!id_hidden(t, ids[i], skip_special)) total += t->tok_len[ids[i]];
    }
    if (total > (size_t)0x7ffffffffffffffe) return r1_err("decode: output too large");
    char *s = malloc(total + 1);
    if (!s) return r1_err("out of memory while decoding");
    size_t k = 0;
    for (size_t i = 0; i < n; i++) {
        if (id_hidden(t, ids[i], skip_special)) continue;
        memcpy(s + k, t->tok_bytes + t->tok_off[ids[i]], t->tok_len[ids[i]]);
        k += t->tok_len[ids[i]];
    }
    s[k] = 0;
    *out = s;
    return (long)k;
}

/* ---- streaming ---- */

struct r1_detok {
    const r1_tokenizer_t *t;
    int skip_special;
    char pend[4]; /* an incomplete UTF-8 prefix held back */
    int npend;
    char *buf; /* what the last call returned */
    size_t cap;
};

r1_detok_t *r1_detok_new(const r1_tokenizer_t *t, int skip_special) {
    r1_detok_t *d = calloc(1, sizeof *d);
    if (!d) {
        r1_err("out of memory");
        return NULL;
    }
    d->t = t;
    d->skip_special = skip_special;
    return d;
}

void r1_detok_free(r1_detok_t *d) {
    if (!d) return;
    free(d->buf);
    free(d);
}

/* Bytes a sequence starting with lead byte c needs (0 if c cannot start one). */
static int seq_len(uint8_t c) {
    if (c < 0x80) return 1;
    if (c >= 0xC2 && c < 0xE0) return 2;
    if (c >= 0xE0 && c < 0xF0) return 3;
    if (c >= 0xF0 && c < 0xF5) return 4;
    return 0;
}

/* Whether p[0..n) (n < seq_len(p[0])) can still grow into a valid sequence. */
static int valid_prefix(const uint8_t *p, int n) {
    for (int i = 1; i < n; i++)
        if ((p[i] & 0xC0) != 0x80) return 0;
    if (n >= 2) {
        if (p[0] == 0xE0 && p[1] < 0xA0) return 0;
        if (p[0] == 0xED && p[1] >= 0xA0) return 0;
        if (p[0] == 0xF0 && p[1] < 0x90) return 0;
        if (p[0] == 0xF4 && p[1] >= 0x90) return 0;
    }
    return 1;
}

static int reserve(r1_detok_t *d, size_t n) {
    if (n <= d->cap) return 0;
    size_t c = d->cap ? d->cap : 64;
    while (c < n) c *= 2;
    char *p = realloc(d->buf, c);
    if (!p) return r1_err("out of memory while decoding");
    d->buf = p;
    d->cap = c;
    return 0;
}

const char *r1_detok_push(r1_detok_t *d, int32_t id) {
    const r1_tokenizer_t *t = d->t;
    if (!id_ok(t, id)) {
        r1_err("decode: unknown token id %d", (int)id);
        return NULL;
    }
    size_t len = id_hidden(t, id, d->skip_special) ? 0 : t->tok_len[id];
    size_t n = (size_t)d->npend + len;
    if (reserve(d, n + 1)) return NULL;
    memcpy(d->buf, d->pend, (size_t)d->npend);
    memcpy(d->buf + d->npend, t->tok_bytes + t->tok_off[id], len);
    /* hold back a trailing incomplete sequence (at most 3 bytes) */
    size_t keep = 0;
    for (size_t back = 1; back <= 3 && back <= n; back++) {
        const uint8_t *p = (const uint8_t *)d->buf + n - back;
        if ((*p & 0xC0) == 0x80) continue; /* continuation: look further back */
        int need = seq_len(*p);
        if (need > (int)back && valid_prefix(p, (int)back)) keep = back;
        break;
    }
    d->npend = (int)keep;
    memcpy(d->pend, d->buf + n - keep, keep);
    d->buf[n - keep] = 0;
    return d->buf;
}

const char *r1_detok_flush(r1_detok_t *d) {
    if (reserve(d, 5)) return NULL;
    memcpy(d->buf, d->pend, (size_t)d->npend);
    d->buf[d->npend] = 0;
    d->npend = 0;
    return d->buf;
}
