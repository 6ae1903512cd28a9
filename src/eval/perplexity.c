/*
 * perplexity.c - a text's perplexity in windows, scored as llama.cpp's
 * perplexity tool scores it: back-to-back windows of ctx tokens, each run
 * from an empty cache, the second half of each scored (every scored token
 * has at least ctx/2 tokens of context). The per-token log-probabilities go
 * to a callback (the KL-divergence file, the comparison with one).
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "eval/eval.h"
#include "util/util.h"

uint64_t eval_hash_ids(const int32_t *ids, size_t n) {
    uint64_t h = 0xcbf29ce484222325ull;
    for (size_t i = 0; i < n; i++) {
        uint32_t v = (uint32_t)ids[i];
        for (int b = 0; b < 4; b++) {
            h ^= (v >> (8 * b)) & 0xff;
            h *= 0x100000001b3ull;
        }
    }
    return h;
}

int eval_windows_plan(int n_tokens, int ctx, int n_chunks_req, struct eval_windows *w) {
    if (ctx < 4) return r1_err("--ctx %d is too small to score anything (at least 4)", ctx);
    if (n_tokens < ctx)
        return r1_err("the text has %d tokens, fewer than one window of --ctx %d: give a longer text or a "
                      "smaller --ctx",
                      n_tokens, ctx);
    w->ctx = ctx;
    w->first = ctx / 2;
    w->n_chunks = n_tokens / ctx;
    if (n_chunks_req > 0 && n_chunks_req < w->n_chunks) w->n_chunks = n_chunks_req;
    return 0;
}

void eval_ppl_finish(struct eval_ppl *r) {
    if (r->count <= 0) {
        r->ppl = r->err = 0;
        return;
    }
    double mean = r->nll / r->count, var = r->nll2 / r->count - mean * mean;
    r->ppl = exp(mean);
    r->err = var > 0 && r->count > 1 ? r->ppl * sqrt(var / (r->count - 1)) : 0;
}

static void show(int mode, int done, const struct eval_windows *w, const struct eval_ppl *r) {
    if (mode == 0) return;
    double rate = r->secs > 0 ? r->evaluated / r->secs : 0;
    double eta = done > 0 ? r->secs / done * (w->n_chunks - done) : 0;
    if (mode == 2) {
        fprintf(stderr, "[%d/%d] PPL %.4f +/- %.4f  %.1f tok/s\n", done, w->n_chunks, r->ppl, r->err, rate);
        return;
    }
    char bar[31];
    int fill = w->n_chunks ? 30 * done / w->n_chunks : 30;
    for (int i = 0; i < 30; i++) bar[i] = i < fill ? '#' : '.';
    bar[30] = 0;
    fprintf(stderr, "\r\033[K[%s] %d/%d windows  PPL %.4f +/- %.4f  %.1f tok/s  ETA %dm%02ds", bar, done, w->n_chunks,
            r->ppl, r->err, rate, (int)eta / 60, (int)eta % 60);
    if (done == w->n_chunks) fputc('\n', stderr);
    fflush(stderr);
}

int eval_perplexity(r1_session_t *s, int vocab, const int32_t *ids, const struct eval_windows *w, int progress,
                    eval_row_fn row, void *row_ctx, struct eval_ppl *out) {
    memset(out, 0, sizeof *out);
    if (w->ctx > r1_session_n_ctx(s))
        return r1_err("the session holds %d tokens, fewer than a window of %d", r1_session_n_ctx(s), w->ctx);
    const int n_scored_rows = w->ctx - w->first;
    float *logits = malloc((size_t)n_scored_rows * vocab * sizeof(float));
    if (!logits) return r1_err("out of memory for %d rows of logits", n_scored_rows);
    int rc = -1;
    double t0 = r1_now();
    for (int c = 0; c < w->n_chunks; c++) {
        const int32_t *win = ids + (size_t)c * w->ctx;
        if (r1_session_truncate(s, 0)) goto out;
        if (w->first > 0 && !r1_session_forward(s, win, w->first, NULL)) goto out;
        if (!r1_session_forward(s, win + w->first, n_scored_rows, logits)) goto out;
        out->evaluated += w->ctx;
        /* row j of the window predicts token j + 1: rows first .. ctx-2 */
        for (int j = w->first; j < w->ctx - 1; j++) {
            const float *l = logits + (size_t)(j - w->first) * vocab;
            int32_t target = win[j + 1];
            double lse = eval_logsumexp(l, vocab);
            double nll = lse - (double)l[target];
            out->nll += nll;
            out->nll2 += nll * nll;
            out->count++;
            if (row && row(row_ctx, l, target, lse)) goto out;
        }
        out->secs = r1_now() - t0;
        eval_ppl_finish(out);
        show(progress, c + 1, w, out);
    }
    rc = 0;
out:
    free(logits);
    out->secs = r1_now() - t0;
    eval_ppl_finish(out);
    return rc;
}
