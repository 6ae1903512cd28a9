/*
 * think.c - the reasoning budget: follows the <think>...</think> block in
 * the text a model generates and, once the block has held its budget of
 * tokens, hands the caller the ids that close it ("\n</think>\n\n") to emit
 * instead of sampling. It sees text and ids only: no session, no sampler.
 */
#include <stdlib.h>
#include <string.h>

#include "r1infer.h"
#include "util/util.h"

static const char OPEN[] = "<think>", CLOSE[] = "</think>", CLOSE_TEXT[] = "\n</think>\n\n";
#define TAIL 7 /* bytes kept from earlier text: a tag is never wholly in them */

struct r1_think {
    int budget;   /* thinking tokens allowed, >= 0 */
    int in_think; /* inside an open block */
    int used;     /* tokens generated inside the open block */
    char tail[TAIL];
    size_t n_tail;
    char *buf; /* tail + one token's text, grown as needed */
    size_t buf_cap;
    int32_t *close; /* (n_close) the ids of CLOSE_TEXT */
    int n_close;
};

r1_think_t *r1_think_new(const r1_tokenizer_t *tok, int budget, int in_think) {
    if (!tok) return r1_err("a reasoning budget needs the model's tokenizer"), NULL;
    if (budget < 0) return r1_err("a reasoning budget is a count of tokens >= 0, not %d", budget), NULL;
    struct r1_think *t = calloc(1, sizeof *t);
    if (!t) return r1_err("out of memory"), NULL;
    t->budget = budget;
    t->in_think = in_think != 0;
    t->buf_cap = 256; /* a token's text: grown only for a longer one */
    if (!(t->buf = malloc(t->buf_cap))) {
        free(t);
        return r1_err("out of memory"), NULL;
    }
    t->n_close = r1_tokenizer_encode(tok, CLOSE_TEXT, strlen(CLOSE_TEXT), 0, &t->close);
    if (t->n_close <= 0) {
        r1_think_free(t);
        return r1_err("cannot encode the </think> that ends a reasoning block"), NULL;
    }
    return t;
}

void r1_think_free(r1_think_t *t) {
    if (!t) return;
    free(t->close);
    free(t->buf);
    free(t);
}

/* The block is over budget: close it. */
static int close_now(struct r1_think *t, const int32_t **ids) {
    if (!t->in_think || t->used < t->budget) return 0;
    t->in_think = 0;
    t->n_tail = 0;
    *ids = t->close;
    return t->n_close;
}

int r1_think_start(r1_think_t *t, const int32_t **ids) { return close_now(t, ids); }

int r1_think_push(r1_think_t *t, const char *text, const int32_t **ids) {
    size_t n = text ? strlen(text) : 0;
    int tag = 0; /* the last tag in the text: 1 open, -1 close */
    if (n) {
        size_t len = t->n_tail + n;
        if (len + 1 > t->buf_cap) {
            char *nb = realloc(t->buf, len + 1);
            if (!nb) return r1_err("out of memory"), -1;
            t->buf = nb, t->buf_cap = len + 1;
        }
        memcpy(t->buf, t->tail, t->n_tail);
        memcpy(t->buf + t->n_tail, text, n);
        t->buf[len] = 0;
        for (const char *p = t->buf; (p = strchr(p, '<')); p++) {
            if (!strncmp(p, OPEN, sizeof OPEN - 1)) tag = 1;
            else if (!strncmp(p, CLOSE, sizeof CLOSE - 1)) tag = -1;
        }
        t->n_tail = len < TAIL ? len : TAIL;
        memcpy(t->tail, t->buf + len - t->n_tail, t->n_tail);
    }
    if (tag == 1) { /* a new block: the tag's own token is not thinking */
        t->in_think = 1;
        t->used = 0;
    } else if (tag == -1) {
        t->in_think = 0;
    } else if (t->in_think) {
        t->used++;
    }
    return close_now(t, ids);
}

int r1_think_used(const r1_think_t *t) { return t->used; }
int r1_think_open(const r1_think_t *t) { return t->in_think; }
