/*
 * sbuf.h - a growable byte buffer for the server's text pipeline (SSE
 * output, held-back text, request bodies). Always NUL-terminated when
 * non-empty. An allocation failure sets `failed` and drops later appends, so
 * callers check once at the end instead of after every append.
 */
#ifndef R1_SERVER_SBUF_H
#define R1_SERVER_SBUF_H

#include <stdlib.h>
#include <string.h>

struct sbuf {
    char *p; /* (cap) bytes, p[len] == 0 */
    size_t len, cap;
    int failed; /* an append did not fit in memory */
};

static inline int sbuf_reserve(struct sbuf *b, size_t extra) {
    if (b->failed) return -1;
    if (extra > ((size_t)-1) / 2 - b->len) {
        b->failed = 1;
        return -1;
    }
    size_t need = b->len + extra + 1;
    if (need <= b->cap) return 0;
    size_t cap = b->cap ? b->cap : 64;
    while (cap < need) cap *= 2;
    char *np = realloc(b->p, cap);
    if (!np) {
        b->failed = 1;
        return -1;
    }
    b->p = np;
    b->cap = cap;
    return 0;
}

static inline int sbuf_add(struct sbuf *b, const char *s, size_t n) {
    if (sbuf_reserve(b, n)) return -1;
    if (n) memcpy(b->p + b->len, s, n);
    b->len += n;
    b->p[b->len] = 0;
    return 0;
}

static inline int sbuf_adds(struct sbuf *b, const char *s) { return sbuf_add(b, s, strlen(s)); }

/* Remove the first n bytes. */
static inline void sbuf_consume(struct sbuf *b, size_t n) {
    if (n >= b->len) n = b->len;
    if (!n) return;
    memmove(b->p, b->p + n, b->len - n);
    b->len -= n;
    b->p[b->len] = 0;
}

static inline void sbuf_clear(struct sbuf *b) {
    b->len = 0;
    if (b->p) b->p[0] = 0;
}

static inline void sbuf_free(struct sbuf *b) {
    free(b->p);
    memset(b, 0, sizeof *b);
}

#endif
