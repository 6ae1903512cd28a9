/*
 * kld.c - the KL-divergence base file (format in eval.h) and the
 * comparison of a run with it: KL(base || run) per token, top-1 agreement,
 * the change of the correct token's probability. The reader checks every
 * size before trusting it and refuses a base made by another model,
 * tokenizer, text or window setting.
 */
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "eval/eval.h"
#include "util/util.h"

#define HEAD_BYTES 64
static const char MAGIC[8] = {'R', '1', 'K', 'L', 'D', 'B', 0, 0};

static size_t record_bytes(const struct eval_kld_head *h) {
    return h->top_k ? 12 + (size_t)h->top_k * 8 : 8 + (size_t)h->vocab * 4;
}

static void put32(uint8_t *p, uint32_t v) {
    for (int i = 0; i < 4; i++) p[i] = (uint8_t)(v >> (8 * i));
}
static void put64(uint8_t *p, uint64_t v) {
    for (int i = 0; i < 8; i++) p[i] = (uint8_t)(v >> (8 * i));
}
static uint32_t get32(const uint8_t *p) {
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}
static uint64_t get64(const uint8_t *p) { return (uint64_t)get32(p) | (uint64_t)get32(p + 4) << 32; }
static void putf(uint8_t *p, float f) {
    uint32_t u;
    memcpy(&u, &f, 4);
    put32(p, u);
}
static float getf(const uint8_t *p) {
    uint32_t u = get32(p);
    float f;
    memcpy(&f, &u, 4);
    return f;
}

static void encode_head(uint8_t *b, const struct eval_kld_head *h) {
    memset(b, 0, HEAD_BYTES);
    memcpy(b, MAGIC, 8);
    put32(b + 8, EVAL_KLD_VERSION);
    put32(b + 12, h->vocab);
    put32(b + 16, h->ctx);
    put32(b + 20, h->first);
    put32(b + 24, h->n_chunks);
    put32(b + 28, h->top_k);
    put64(b + 32, h->n_tokens);
    put64(b + 40, h->ids_hash);
}

/* ------------------------------------------------------------ writer */

struct eval_kld_writer {
    FILE *f;
    char *path;
    struct eval_kld_head h;
    int32_t *top;
    uint8_t *mask, *rec;
};

static void writer_free(struct eval_kld_writer *w) {
    if (w->f) fclose(w->f);
    free(w->path);
    free(w->top);
    free(w->mask);
    free(w->rec);
    free(w);
}

struct eval_kld_writer *eval_kld_create(const char *path, const struct eval_kld_head *h) {
    if (h->vocab == 0 || h->top_k > h->vocab) {
        r1_err("%s: top-k %u must be at most the vocabulary size %u", path, h->top_k, h->vocab);
        return NULL;
    }
    struct eval_kld_writer *w = calloc(1, sizeof *w);
    if (!w) return r1_err("out of memory"), NULL;
    w->h = *h;
    w->h.n_tokens = 0;
    w->path = strdup(path);
    w->top = malloc((h->top_k ? h->top_k : 1) * sizeof(int32_t));
    w->mask = calloc(h->vocab, 1);
    w->rec = malloc(record_bytes(h));
    w->f = fopen(path, "wb");
    if (!w->f) r1_err("%s: cannot create the file: %s", path, strerror(errno));
    else if (!w->path || !w->top || !w->mask || !w->rec) r1_err("out of memory");
    uint8_t head[HEAD_BYTES];
    encode_head(head, &w->h);
    if (w->f && w->path && w->top && w->mask && w->rec && fwrite(head, HEAD_BYTES, 1, w->f) == 1) return w;
    if (w->f) r1_err("%s: cannot write: %s", path, strerror(errno));
    writer_free(w);
    return NULL;
}

int eval_kld_put(struct eval_kld_writer *w, const float *logits, int32_t target, double lse) {
    const struct eval_kld_head *h = &w->h;
    uint8_t *r = w->rec;
    put32(r, (uint32_t)target);
    putf(r + 4, (float)((double)logits[target] - lse));
    if (h->top_k == 0) {
        for (uint32_t i = 0; i < h->vocab; i++) putf(r + 8 + 4 * (size_t)i, (float)((double)logits[i] - lse));
    } else {
        int k = eval_top_k(logits, (int)h->vocab, (int)h->top_k, w->top);
        for (int i = 0; i < k; i++) w->mask[w->top[i]] = 1;
        double rest = 0;
        for (uint32_t i = 0; i < h->vocab; i++)
            if (!w->mask[i]) rest += exp((double)logits[i] - lse);
        for (int i = 0; i < k; i++) {
            w->mask[w->top[i]] = 0;
            put32(r + 12 + 8 * (size_t)i, (uint32_t)w->top[i]);
            putf(r + 16 + 8 * (size_t)i, (float)((double)logits[w->top[i]] - lse));
        }
        putf(r + 8, rest > 0 ? (float)log(rest) : -INFINITY);
    }
    if (fwrite(r, record_bytes(h), 1, w->f) != 1) return r1_err("%s: cannot write: %s", w->path, strerror(errno));
    w->h.n_tokens++;
    return 0;
}

int eval_kld_close(struct eval_kld_writer *w) {
    uint8_t head[HEAD_BYTES];
    encode_head(head, &w->h);
    int rc = fseek(w->f, 0, SEEK_SET) || fwrite(head, HEAD_BYTES, 1, w->f) != 1 || fflush(w->f);
    if (rc) r1_err("%s: cannot write: %s", w->path, strerror(errno));
    rc |= fclose(w->f) != 0;
    w->f = NULL;
    writer_free(w);
    return rc ? -1 : 0;
}

/* ------------------------------------------------------------ reader */

struct eval_kld_reader {
    FILE *f;
    char *path;
    struct eval_kld_head h;
    uint64_t done;
    uint8_t *rec, *mask;
};

void eval_kld_free(struct eval_kld_reader *r) {
    if (!r) return;
    if (r->f) fclose(r->f);
    free(r->path);
    free(r->rec);
    free(r->mask);
    free(r);
}

struct eval_kld_reader *eval_kld_open(const char *path, struct eval_kld_head *h) {
    struct eval_kld_reader *r = calloc(1, sizeof *r);
    if (!r) return r1_err("out of memory"), NULL;
    r->path = strdup(path);
    uint8_t b[HEAD_BYTES];
    if (!(r->f = fopen(path, "rb"))) {
        r1_err("%s: cannot open the KL-divergence base: %s", path, strerror(errno));
        goto fail;
    }
    if (fread(b, HEAD_BYTES, 1, r->f) != 1 || memcmp(b, MAGIC, 8)) {
        r1_err("%s is not a KL-divergence base written by r1infer perplexity --kld-base", path);
        goto fail;
    }
    if (get32(b + 8) != EVAL_KLD_VERSION) {
        r1_err("%s: KL-divergence base version %u; this r1infer reads version %d (make it again)", path, get32(b + 8),
               EVAL_KLD_VERSION);
        goto fail;
    }
    r->h = (struct eval_kld_head){.vocab = get32(b + 12),
                                  .ctx = get32(b + 16),
                                  .first = get32(b + 20),
                                  .n_chunks = get32(b + 24),
                                  .top_k = get32(b + 28),
                                  .n_tokens = get64(b + 32),
                                  .ids_hash = get64(b + 40)};
    const struct eval_kld_head *x = &r->h;
    size_t rb = 0, want = 0;
    int sane = x->vocab > 0 && x->vocab <= (1u << 24) && x->top_k <= x->vocab && x->ctx >= 4 && x->first < x->ctx &&
               x->n_tokens <= (uint64_t)x->n_chunks * x->ctx;
    if (sane) rb = record_bytes(x);
    if (!sane || !r1_mul_ok(rb, (size_t)x->n_tokens, &want) || !r1_add_ok(want, HEAD_BYTES, &want) ||
        fseek(r->f, 0, SEEK_END) || (size_t)ftell(r->f) != want || fseek(r->f, HEAD_BYTES, SEEK_SET)) {
        r1_err("%s: the KL-divergence base is damaged or truncated (its header does not match its size)", path);
        goto fail;
    }
    r->rec = malloc(rb);
    r->mask = calloc(x->vocab, 1);
    if (!r->rec || !r->mask || !r->path) {
        r1_err("out of memory");
        goto fail;
    }
    *h = r->h;
    return r;
fail:
    eval_kld_free(r);
    return NULL;
}

int eval_kld_check(const struct eval_kld_head *base, const struct eval_kld_head *run, const char *path) {
    if (base->vocab != run->vocab)
        return r1_err("%s was made with a model of %u tokens; this one has %u: a KL-divergence base "
                      "compares runs of the same model (other weights), not of another model",
                      path, base->vocab, run->vocab);
    if (base->ctx != run->ctx || base->first != run->first)
        return r1_err("%s was made with --ctx %u; this run uses --ctx %u: use the same", path, base->ctx, run->ctx);
    if (base->n_chunks != run->n_chunks)
        return r1_err("%s holds %u windows; this run scores %u: use the same --chunks", path, base->n_chunks,
                      run->n_chunks);
    if (base->ids_hash != run->ids_hash)
        return r1_err("%s was made from other token ids (another tokenizer or another text): the base and "
                      "this run must score the same tokens",
                      path);
    return 0;
}

int eval_kld_next(struct eval_kld_reader *r, struct eval_kld_stats *st, const float *logits, int32_t target,
                  double lse) {
    const struct eval_kld_head *h = &r->h;
    if (r->done >= h->n_tokens) return r1_err("%s: more tokens scored than the base holds", r->path);
    if (fread(r->rec, record_bytes(h), 1, r->f) != 1) return r1_err("%s: read error", r->path);
    r->done++;
    const uint8_t *p = r->rec;
    if ((int32_t)get32(p) != target)
        return r1_err("%s: token %llu is %d in the base but %d here", r->path, (unsigned long long)r->done - 1,
                      (int32_t)get32(p), target);
    double base_lp = getf(p + 4), kl = 0;
    int base_top;
    if (h->top_k == 0) {
        base_top = 0;
        for (uint32_t i = 0; i < h->vocab; i++) {
            double lp = getf(p + 8 + 4 * (size_t)i);
            if (lp > getf(p + 8 + 4 * (size_t)base_top)) base_top = (int)i;
            double q = (double)logits[i] - lse;
            if (lp > -INFINITY) kl += exp(lp) * (lp - q);
        }
    } else {
        base_top = (int32_t)get32(p + 12);
        for (uint32_t i = 0; i < h->top_k; i++) {
            int32_t id = (int32_t)get32(p + 12 + 8 * (size_t)i);
            if (id < 0 || (uint32_t)id >= h->vocab) return r1_err("%s: token id %d out of range", r->path, id);
            double lp = getf(p + 16 + 8 * (size_t)i), q = (double)logits[id] - lse;
            r->mask[id] = 1;
            if (lp > -INFINITY) kl += exp(lp) * (lp - q);
        }
        double rest_lp = getf(p + 8);
        if (rest_lp > -INFINITY) {
            double q_rest = 0;
            for (uint32_t i = 0; i < h->vocab; i++)
                if (!r->mask[i]) q_rest += exp((double)logits[i] - lse);
            if (q_rest < 1e-300) q_rest = 1e-300;
            kl += exp(rest_lp) * (rest_lp - log(q_rest));
        }
        for (uint32_t i = 0; i < h->top_k; i++) r->mask[get32(p + 12 + 8 * (size_t)i)] = 0;
    }
    if (kl < 0) kl = 0; /* rounding of a zero divergence */
    if (st->count == st->cap) {
        long cap = st->cap ? 2 * st->cap : 4096;
        float *k = realloc(st->klds, (size_t)cap * sizeof *k);
        if (!k) return r1_err("out of memory");
        st->klds = k;
        st->cap = cap;
    }
    st->klds[st->count++] = (float)kl;
    st->kld += kl;
    st->kld2 += kl * kl;
    st->same_top += r1_argmax(logits, (int)h->vocab) == base_top;
    double dp = exp((double)logits[target] - lse) - exp(base_lp);
    st->dp += dp;
    st->dp2 += dp * dp;
    st->nll_base += -base_lp;
    st->nll_base2 += base_lp * base_lp;
    return 0;
}

static int cmp_float(const void *a, const void *b) {
    float x = *(const float *)a, y = *(const float *)b;
    return (x > y) - (x < y);
}

/* The fraction-quantile of sorted v[0..n), interpolated as llama.cpp does. */
static double percentile(const float *v, long n, double fraction) {
    if (n <= 0) return 0;
    double p = fraction * (double)(n - 1);
    long i = (long)p;
    p -= (double)i;
    return (1 - p) * v[i] + p * v[i + 1 < n ? i + 1 : n - 1];
}

static double mean_err(double sum, double sum2, long n) {
    if (n < 2) return 0;
    double m = sum / n, var = sum2 / n - m * m;
    return var > 0 ? sqrt(var / (n - 1)) : 0;
}

void eval_kld_summarize(struct eval_kld_stats *st, struct eval_kld_summary *s) {
    memset(s, 0, sizeof *s);
    long n = st->count;
    if (n <= 0) return;
    qsort(st->klds, (size_t)n, sizeof *st->klds, cmp_float);
    s->mean_kld = st->kld / n;
    s->mean_kld_err = mean_err(st->kld, st->kld2, n);
    s->p99_kld = percentile(st->klds, n, 0.99);
    s->median_kld = percentile(st->klds, n, 0.5);
    s->max_kld = st->klds[n - 1];
    s->same_top = (double)st->same_top / n;
    s->same_top_err = n > 1 ? sqrt(s->same_top * (1 - s->same_top) / (n - 1)) : 0;
    s->mean_dp = st->dp / n;
    s->mean_dp_err = mean_err(st->dp, st->dp2, n);
    s->rms_dp = sqrt(st->dp2 / n);
    s->ppl_base = exp(st->nll_base / n);
}

void eval_kld_stats_free(struct eval_kld_stats *st) {
    free(st->klds);
    memset(st, 0, sizeof *st);
}
