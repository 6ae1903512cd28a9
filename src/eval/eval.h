/*
 * eval.h - measuring a model's quality: log-probabilities of a logits row,
 * perplexity over a text in windows (as llama.cpp's perplexity tool scores
 * it), and the KL divergence of one run against a saved reference run.
 * Used by `r1infer perplexity` and by the server's logprobs. Nothing here
 * prints except the progress of eval_perplexity when asked to.
 */
#ifndef R1_EVAL_H
#define R1_EVAL_H

#include <stdint.h>
#include <stdio.h>

#include "r1infer.h"

/* ------------------------------------------------------ logprob.c */

/* log(sum_i exp(x[i])) of n > 0 logits, accumulated in double with the
 * maximum subtracted first. logprob(i) = x[i] - eval_logsumexp(x, n). */
double eval_logsumexp(const float *x, int n);
/* The k largest of n values, their indices into ids[0..k) sorted by value
 * descending (ties: lower index first). k is clamped to [0, n]; returns it. */
int eval_top_k(const float *x, int n, int k, int32_t *ids);

/* ---------------------------------------------------- perplexity.c */

/* FNV-1a (64-bit) of n token ids, each as 4 little-endian bytes. */
uint64_t eval_hash_ids(const int32_t *ids, size_t n);

/* The windows of a text of n_tokens: n_chunks windows of ctx tokens each,
 * back to back from the start; in each, the tokens after position first
 * (= ctx/2) are scored, so each has at least ctx/2 tokens of context:
 * ctx - 1 - first per window. n_chunks_req 0 = as many as fit. Returns -1
 * with an error when not even one window fits. */
struct eval_windows {
    int ctx, first, n_chunks;
};
int eval_windows_plan(int n_tokens, int ctx, int n_chunks_req, struct eval_windows *w);

/* Called for every scored token, in order: the raw logits row (vocab
 * floats) that predicts `target`, and its log-sum-exp. Nonzero stops the
 * run (eval_perplexity then returns -1 with whatever error was set). */
typedef int (*eval_row_fn)(void *ctx, const float *logits, int32_t target, double lse);

struct eval_ppl {
    long count;       /* tokens scored */
    double nll, nll2; /* sums of -logprob and its square */
    double ppl, err;  /* exp(mean nll) and its standard error (llama.cpp's estimate) */
    long evaluated;   /* tokens run through the model */
    double secs;      /* wall time of the forward passes and scoring */
};
/* The running estimate: ppl and err from count, nll, nll2. */
void eval_ppl_finish(struct eval_ppl *r);

/* Score ids in the windows w on session s of a model with vocab logits
 * (the session's context must hold w->ctx tokens; it is truncated before
 * each window). Each window runs as two forward calls, the unscored first
 * half without logits, then the rest with every row's logits. progress: 0 = silent, 1 = a bar rewritten on
 * stderr, 2 = one line per window on stderr. row may be NULL. 0 or -1. */
int eval_perplexity(r1_session_t *s, int vocab, const int32_t *ids, const struct eval_windows *w, int progress,
                    eval_row_fn row, void *row_ctx, struct eval_ppl *out);

/* ----------------------------------------------------------- kld.c
 * A KL-divergence base file holds the log-probabilities of a reference run
 * (say f32 weights) for every scored token, so later runs (quantized
 * weights) are compared with it token by token. Little-endian:
 *
 *   header (64 bytes)
 *     char     magic[8]     "R1KLDB\0\0"
 *     uint32   version      1
 *     uint32   vocab        the model's vocabulary size
 *     uint32   ctx, first   the windows (eval_windows)
 *     uint32   n_chunks
 *     uint32   top_k        0 = full distributions, else the k most likely
 *     uint64   n_tokens     scored tokens (records)
 *     uint64   ids_hash     eval_hash_ids of the n_chunks * ctx evaluated ids
 *     uint8    reserved[16] zero
 *   n_tokens records
 *     int32    target       the token that came next in the text
 *     float32  target_lp    its log-probability
 *     top_k > 0: float32 rest_lp   log of the probability left outside the top k
 *                                  (-inf when none is)
 *                top_k x (int32 id, float32 lp), most likely first
 *     top_k = 0: vocab x float32 lp, in id order
 *
 * With top-k records the KL divergence is computed over k + 1 outcomes (the
 * k tokens and "the rest"); that merges the tail and so never exceeds the
 * full KL divergence (the log-sum inequality). */

#define EVAL_KLD_VERSION 1
#define EVAL_KLD_DEFAULT_TOP 64

struct eval_kld_head {
    uint32_t vocab, ctx, first, n_chunks, top_k;
    uint64_t n_tokens, ids_hash;
};

/* Writing: open, one eval_kld_put per scored token, close (which fills in
 * n_tokens). Returns NULL / -1 with an error naming the path. */
struct eval_kld_writer;
struct eval_kld_writer *eval_kld_create(const char *path, const struct eval_kld_head *h);
int eval_kld_put(struct eval_kld_writer *w, const float *logits, int32_t target, double lse);
int eval_kld_close(struct eval_kld_writer *w);

/* Reading and comparing. eval_kld_open checks the magic, the version and
 * the size; eval_kld_check then compares the file with the run about to be
 * made (vocab, windows, token hash) and refuses one from another model,
 * tokenizer, text or window setting with a sentence saying which. */
struct eval_kld_reader;
struct eval_kld_reader *eval_kld_open(const char *path, struct eval_kld_head *h);
int eval_kld_check(const struct eval_kld_head *base, const struct eval_kld_head *run, const char *path);
void eval_kld_free(struct eval_kld_reader *r);

/* The statistics of a comparison, accumulated token by token. */
struct eval_kld_stats {
    long count, same_top;
    double kld, kld2;           /* sums of KL(base || run) and its square */
    double dp, dp2;             /* sums of p_run(target) - p_base(target), and squares */
    double nll_base, nll_base2; /* the base's -logprob of the target */
    float *klds;                /* (count) every token's KL divergence, for percentiles */
    long cap;
};
/* Compare the next record of r with this run's row (logits, its lse, the
 * target, which must be the record's). 0, or -1 with an error. */
int eval_kld_next(struct eval_kld_reader *r, struct eval_kld_stats *st, const float *logits, int32_t target,
                  double lse);

struct eval_kld_summary {
    double mean_kld, mean_kld_err, p99_kld, median_kld, max_kld;
    double same_top, same_top_err; /* fraction of tokens whose most likely token is the base's */
    double mean_dp, mean_dp_err, rms_dp;
    double ppl_base;
};
/* Sorts st->klds. */
void eval_kld_summarize(struct eval_kld_stats *st, struct eval_kld_summary *s);
void eval_kld_stats_free(struct eval_kld_stats *st);

#endif
