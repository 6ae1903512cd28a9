/*
 * logprobs.h - the log-probabilities a response reports (OpenAI's
 * `logprobs`): one entry per token, the chosen token's log-probability and
 * the top alternatives, all from the raw logits of the model (before
 * temperature, penalties or any other sampling step), computed with
 * src/eval/ so they equal `r1infer perplexity`'s values. The list belongs
 * to one job; response.c turns it into JSON. No I/O, no locking.
 */
#ifndef R1_SERVER_LOGPROBS_H
#define R1_SERVER_LOGPROBS_H

#include <stdint.h>

#include "r1infer.h"

#define LP_MAX_TOP 20 /* chat top_logprobs; completions allow 5 */

struct lp_entry {
    int32_t id;
    int has_logprob; /* 0 for the first prompt token (nothing predicts it) */
    float logprob;
    int n_top;
    int32_t top_id[LP_MAX_TOP]; /* most likely first */
    float top_lp[LP_MAX_TOP];
};

struct lp_list {
    const r1_tokenizer_t *tok;
    int n_top;          /* alternatives per entry (0..LP_MAX_TOP) */
    struct lp_entry *e; /* (n) */
    int n, cap;
    int sent;         /* entries already put in a streamed chunk */
    long text_offset; /* bytes of text before entry `sent` (completions' text_offset) */
    int failed;       /* out of memory: the response says so */
};

void lp_init(struct lp_list *l, const r1_tokenizer_t *tok, int n_top);
void lp_free(struct lp_list *l);
/* Append the entry of `id`, chosen from (or following) this raw logits row
 * of vocab floats, which is left unchanged. */
void lp_push(struct lp_list *l, const float *logits, int vocab, int32_t id);
/* Prompt log-probabilities: rows[0..n) are the logits of prompt positions
 * at..at+n-1 of ids[0..n_ids); row i scores ids[at + i + 1]. */
void lp_push_rows(struct lp_list *l, const float *rows, int n, int vocab, const int32_t *ids, int at, int n_ids);
/* Append an entry without a log-probability (the first prompt token). */
void lp_push_none(struct lp_list *l, int32_t id);
/* The bytes of one token (special tokens as their text); malloc'ed, length
 * in *len; NULL for an unknown id. */
char *lp_token_bytes(const struct lp_list *l, int32_t id, long *len);

#endif
