/*
 * logprobs.c - per-token log-probabilities of a response; see logprobs.h.
 */
#include "server/logprobs.h"

#include <stdlib.h>
#include <string.h>

#include "eval/eval.h"

void lp_init(struct lp_list *l, const r1_tokenizer_t *tok, int n_top) {
    memset(l, 0, sizeof *l);
    l->tok = tok;
    l->n_top = n_top < 0 ? 0 : n_top > LP_MAX_TOP ? LP_MAX_TOP : n_top;
}

void lp_free(struct lp_list *l) {
    free(l->e);
    memset(l, 0, sizeof *l);
}

static struct lp_entry *grow(struct lp_list *l) {
    if (l->failed) return NULL;
    if (l->n == l->cap) {
        int cap = l->cap ? 2 * l->cap : 64;
        struct lp_entry *e = realloc(l->e, (size_t)cap * sizeof *e);
        if (!e) {
            l->failed = 1;
            return NULL;
        }
        l->e = e;
        l->cap = cap;
    }
    struct lp_entry *e = &l->e[l->n++];
    memset(e, 0, sizeof *e);
    return e;
}

void lp_push(struct lp_list *l, const float *logits, int vocab, int32_t id) {
    struct lp_entry *e = grow(l);
    if (!e) return;
    double lse = eval_logsumexp(logits, vocab);
    e->id = id;
    e->has_logprob = 1;
    e->logprob = (float)((double)logits[id] - lse);
    e->n_top = eval_top_k(logits, vocab, l->n_top, e->top_id);
    for (int i = 0; i < e->n_top; i++) e->top_lp[i] = (float)((double)logits[e->top_id[i]] - lse);
}

void lp_push_rows(struct lp_list *l, const float *rows, int n, int vocab, const int32_t *ids, int at, int n_ids) {
    for (int i = 0; i < n && at + i + 1 < n_ids; i++) lp_push(l, rows + (size_t)i * vocab, vocab, ids[at + i + 1]);
}

void lp_push_none(struct lp_list *l, int32_t id) {
    struct lp_entry *e = grow(l);
    if (e) e->id = id;
}

char *lp_token_bytes(const struct lp_list *l, int32_t id, long *len) {
    char *s = NULL;
    *len = r1_tokenizer_decode(l->tok, &id, 1, 0, &s);
    if (*len < 0) {
        free(s);
        return NULL;
    }
    return s;
}
