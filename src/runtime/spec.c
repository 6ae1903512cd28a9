/*
 * spec.c - speculative decoding (r1infer.h): draft sources (n-gram lookup
 * over the text so far, or a draft model's session), verification of the
 * drafts in one batched target forward, rollback of both KV caches by
 * truncation, and the choice of how many tokens to draft next from measured
 * costs and the acceptance seen so far.
 *
 * It must not change what is generated: greedy output is the plain greedy
 * output token for token (the cpu kernels compute batches of <= 16 rows bit
 * for bit like single steps), and sampled output follows the target's
 * sampling distribution (speculative sampling). Buffers are allocated in
 * r1_spec_new / grown in r1_spec_begin, not per step.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "r1infer.h"
#include "util/util.h"

#define PROBE_EVERY 16   /* plain steps between forced one-token drafts */
#define MATCH_MAX 32     /* longest suffix match measured (lookup), unless --lookup asks more */
#define LOOKUP_RATE 0.15 /* weight of a new observation in a lookup estimate */
#define N_BUCKET 8       /* lookup acceptance estimates, by match length (bucket()) */

struct r1_spec {
    struct r1_spec_target t; /* a session's (r1_spec_new) or the caller's */
    r1_session_t *d;         /* draft (NULL: lookup) */
    r1_sampler_t *smp;       /* the caller's: sees every kept token */
    r1_sampler_t *dsmp;      /* the draft model's proposals (temperature > 0) */
    struct r1_spec_opts o;
    int vt, vd; /* vocab of target and draft */
    int greedy;
    int32_t *hist; /* (cap) prompt + generated ids */
    int n_hist, cap, n_prompt;
    int have_logits; /* logits0 holds the target's next-token logits (after begin) */
    float *logits0;  /* (vt) */
    float *all;      /* (R1_SPEC_MAX_K + 1, vt) verification logits */
    float *p;        /* (vt) target probabilities */
    float *q;        /* (R1_SPEC_MAX_K, vd) draft probabilities, temperature > 0 */
    float *dl;       /* (vd) draft logits copy */
    int32_t draft[R1_SPEC_MAX_K];
    int32_t out[R1_SPEC_MAX_K + 1];
    /* adaptation: the estimated probability that a draft token is kept
     * (given that those before it were), for a draft model, and for a
     * lookup draft by the length of the match it continues (bucket()) */
    double acc_model;
    double acc[N_BUCKET];
    double t_target[R1_SPEC_MAX_K + 2]; /* seconds per target forward of T rows, 0 = unknown */
    double t_draft;                     /* seconds per drafted token (draft model) */
    int plain_run;                      /* plain steps since the last draft */
    int kcur;                           /* drafts for the next step: doubled when all are kept, cut to
                                           the kept count + 1 on a rejection */
    struct r1_spec_stats st;
};

int r1_spec_check_draft(const r1_model_t *target, const r1_tokenizer_t *target_tok, const r1_model_t *draft,
                        const r1_tokenizer_t *draft_tok, int *warn) {
    if (warn) *warn = r1_model_decode_bytes(draft) > r1_model_decode_bytes(target);
    if (target_tok && draft_tok) {
        int nt = r1_tokenizer_vocab_size(target_tok), nd = r1_tokenizer_vocab_size(draft_tok);
        if (nt != nd)
            return r1_err("the draft model's tokenizer has %d tokens, the target's %d: a draft "
                          "model must share the target's vocabulary",
                          nd, nt);
        for (int32_t id = 0; id < nt; id++) {
            char *a = NULL, *b = NULL;
            long la = r1_tokenizer_decode(target_tok, &id, 1, 0, &a);
            long lb = r1_tokenizer_decode(draft_tok, &id, 1, 0, &b);
            int same = la == lb && (la < 0 || !memcmp(a, b, (size_t)la));
            if (!same) {
                r1_err("the draft model's token %d is '%.40s' but the target's is '%.40s': a "
                       "draft model must share the target's vocabulary",
                       id, b ? b : "?", a ? a : "?");
                free(a), free(b);
                return -1;
            }
            free(a), free(b);
        }
        return 0;
    }
    if (target_tok || draft_tok)
        return r1_err("only one of the target and the draft model has a tokenizer: cannot check "
                      "that they share a vocabulary");
    int vt = r1_model_config(target)->vocab, vd = r1_model_config(draft)->vocab;
    if (vt != vd)
        return r1_err("the draft model has %d token ids, the target %d (and no tokenizers to "
                      "compare): a draft model must share the target's vocabulary",
                      vd, vt);
    return 0;
}

/* A session as a target: every row is computed. */
static int sess_n_past(void *s) { return r1_session_n_past(s); }
static int sess_n_ctx(void *s) { return r1_session_n_ctx(s); }
static int sess_truncate(void *s, int n) { return r1_session_truncate(s, n); }
static const float *sess_forward(void *s, const int32_t *ids, int n, float *all, int *done) {
    *done = n;
    return r1_session_forward(s, ids, n, all);
}

r1_spec_t *r1_spec_new(r1_session_t *target, r1_session_t *draft, r1_sampler_t *smp, const struct r1_spec_opts *opts) {
    struct r1_spec_target t = {.ctx = target,
                               .vocab = r1_session_vocab(target),
                               .n_past = sess_n_past,
                               .n_ctx = sess_n_ctx,
                               .forward = sess_forward,
                               .truncate = sess_truncate};
    return r1_spec_new_target(&t, draft, smp, opts);
}

static int hist_push(struct r1_spec *sp, int32_t id);

r1_spec_t *r1_spec_new_target(const struct r1_spec_target *target, r1_session_t *draft, r1_sampler_t *smp,
                              const struct r1_spec_opts *opts) {
    struct r1_spec_opts o = *opts;
    if (!draft && o.lookup <= 0) {
        r1_err("speculative decoding needs a draft source: --lookup N or --draft MODEL");
        return NULL;
    }
    if (o.k == 0) o.k = draft ? 5 : R1_SPEC_MAX_K;
    if (o.k < 1 || o.k > R1_SPEC_MAX_K) {
        r1_err("--draft-n must be from 1 to %d (the verification batch holds k + 1 <= 16 "
               "tokens), got %d",
               R1_SPEC_MAX_K, o.k);
        return NULL;
    }
    struct r1_spec *sp = calloc(1, sizeof *sp);
    if (!sp) {
        r1_err("out of memory");
        return NULL;
    }
    sp->t = *target, sp->d = draft, sp->smp = smp, sp->o = o;
    sp->vt = target->vocab;
    sp->vd = draft ? r1_session_vocab(draft) : 0;
    sp->greedy = r1_sampler_greedy(smp);
    sp->logits0 = r1_alloc((size_t)sp->vt * sizeof(float), "speculative decoding");
    sp->all = r1_alloc((size_t)(R1_SPEC_MAX_K + 1) * sp->vt * sizeof(float), "speculative decoding");
    sp->p = r1_alloc((size_t)sp->vt * sizeof(float), "speculative decoding");
    if (draft) {
        sp->dl = r1_alloc((size_t)sp->vd * sizeof(float), "speculative decoding");
        sp->q = r1_alloc((size_t)R1_SPEC_MAX_K * sp->vd * sizeof(float), "speculative decoding");
        struct r1_sampler_params dp = r1_sampler_get_params(smp);
        dp.repeat_penalty = 1.0f, dp.presence_penalty = dp.frequency_penalty = 0.0f;
        dp.seed ^= 0x5eed5eed5eedull;
        sp->dsmp = r1_sampler_new(&dp, sp->vd);
    }
    if (!sp->logits0 || !sp->all || !sp->p || (draft && (!sp->dl || !sp->q || !sp->dsmp))) {
        r1_spec_free(sp);
        return NULL;
    }
    /* what the draft session holds from an earlier decoder: r1_spec_begin
     * compares the prompt with hist, as it does for this decoder's own text */
    for (int i = 0; draft && o.draft_held && i < o.n_draft_held && i < r1_session_n_past(draft); i++)
        if (hist_push(sp, o.draft_held[i])) {
            r1_spec_free(sp);
            return NULL;
        }
    sp->o.draft_held = NULL, sp->o.n_draft_held = 0; /* the caller's array: not kept */
    sp->kcur = draft ? (o.k < 4 ? o.k : 4) : o.k;    /* lookup: a match is often a long copy */
    sp->acc_model = 0.6;
    /* an edit prompt's copy resumes a token or two after each change:
     * short matches start trusted, and what is seen corrects them */
    static const double prior[N_BUCKET] = {0.5, 0.6, 0.65, 0.7, 0.75, 0.8, 0.85, 0.9};
    memcpy(sp->acc, prior, sizeof prior);
    return sp;
}

void r1_spec_free(r1_spec_t *sp) {
    if (!sp) return;
    free(sp->hist);
    free(sp->logits0);
    free(sp->all);
    free(sp->p);
    free(sp->q);
    free(sp->dl);
    r1_sampler_free(sp->dsmp);
    free(sp);
}

static int hist_push(struct r1_spec *sp, int32_t id) {
    if (sp->n_hist == sp->cap) {
        int cap = sp->cap ? 2 * sp->cap : 1024;
        int32_t *h = realloc(sp->hist, (size_t)cap * sizeof *h);
        if (!h) return r1_err("out of memory");
        sp->hist = h, sp->cap = cap;
    }
    sp->hist[sp->n_hist++] = id;
    return 0;
}

int r1_spec_begin(r1_spec_t *sp, const int32_t *ids, int n, const float *logits) {
    /* the draft's cache holds hist[0, dn) (steps truncate it to the kept ids);
     * a chat's next turn starts with the last turn's text, so that prefix
     * stays instead of running the whole conversation through the draft again */
    int keep = 0;
    if (sp->d) {
        int lim = r1_session_n_past(sp->d);
        if (lim > sp->n_hist) lim = sp->n_hist;
        if (lim > n) lim = n;
        while (keep < lim && sp->hist[keep] == ids[keep]) keep++;
    }
    sp->n_hist = 0;
    for (int i = 0; i < n; i++)
        if (hist_push(sp, ids[i])) return -1;
    sp->n_prompt = n;
    memcpy(sp->logits0, logits, (size_t)sp->vt * sizeof(float));
    sp->have_logits = 1;
    if (sp->d) {
        r1_session_truncate(sp->d, keep);
        for (int i = 0; i < n; i++)
            if (ids[i] >= sp->vd)
                return r1_err("token id %d of the prompt is outside the draft model's vocabulary", ids[i]);
        /* the new ids in one call, as the target ran its prompt, so that a
         * draft with the target's weights computes the target's very logits */
        double t0 = r1_now();
        if (n > keep && !r1_session_forward(sp->d, ids + keep, n - keep, NULL)) return -1;
        sp->st.draft_s += r1_now() - t0;
        sp->st.draft_prefilled += n - keep;
        sp->st.draft_reused += keep;
    }
    return 0;
}

/* ---- draft sources ---- */

/* Lookup acceptance buckets by match length: 1, 2, 3, 4-5, 6-8, 9-12,
 * 13-20, 21+ tokens (a long match is a copy in progress). */
static int bucket(int len) {
    static const int upto[N_BUCKET - 1] = {1, 2, 3, 5, 8, 12, 20};
    int b = 0;
    while (b < N_BUCKET - 1 && len > upto[b]) b++;
    return b;
}

/* The earlier place whose preceding tokens match the longest suffix of the
 * text (up to max(lookup, MATCH_MAX) tokens; the most recent among equals), and what
 * followed it: up to k tokens into sp->draft; *match = the match length
 * (0 and no draft when not even the last token occurred before). */
static int draft_lookup(struct r1_spec *sp, int k, int *match) {
    const int32_t *h = sp->hist;
    const int len = sp->n_hist;
    const int32_t last = h[len - 1];
    const int lmax = sp->o.lookup > MATCH_MAX ? sp->o.lookup : MATCH_MAX;
    int best = 0, at = -1;
    for (int c = len - 1; c >= 1; c--) { /* c: where the continuation starts */
        if (h[c - 1] != last) continue;
        int cap = c < lmax ? c : lmax, l = 1;
        while (l < cap && h[c - 1 - l] == h[len - 1 - l]) l++;
        if (l > best) best = l, at = c;
        if (best == lmax) break;
    }
    *match = best;
    if (at < 0) return 0;
    int m = 0;
    while (m < k && at + m < len) {
        sp->draft[m] = h[at + m];
        m++;
    }
    return m;
}

/* The draft model: catch up on the ids it has not seen, then k tokens one
 * by one (their distributions into sp->q when sampling). */
static int draft_model(struct r1_spec *sp, int k) {
    int dn = r1_session_n_past(sp->d);
    if (dn >= sp->n_hist) { /* cannot happen: the last id is never in its cache */
        r1_session_truncate(sp->d, sp->n_hist - 1);
        dn = sp->n_hist - 1;
    }
    int room = r1_session_n_ctx(sp->d) - sp->n_hist;
    if (k > room) k = room;
    if (k <= 0) return 0;
    /* in batches of <= 16 ids, which the kernels compute like single steps */
    const float *l = NULL;
    for (int at = dn; at < sp->n_hist; at += 16) {
        int c = sp->n_hist - at < 16 ? sp->n_hist - at : 16;
        if (!(l = r1_session_forward(sp->d, sp->hist + at, c, NULL))) return -1;
    }
    for (int i = 0; i < k; i++) {
        if (!l) return -1;
        memcpy(sp->dl, l, (size_t)sp->vd * sizeof(float));
        int32_t x;
        if (sp->greedy) {
            x = 0;
            for (int j = 1; j < sp->vd; j++)
                if (sp->dl[j] > sp->dl[x]) x = j;
        } else {
            float *q = sp->q + (size_t)i * sp->vd;
            r1_sampler_probs(sp->dsmp, sp->dl, q);
            x = r1_sampler_draw(sp->dsmp, q, sp->vd);
        }
        if (x < 0 || x >= sp->vt) return i; /* an id the target does not have */
        sp->draft[i] = x;
        if (i + 1 < k) l = r1_session_forward(sp->d, &x, 1, NULL);
    }
    return k;
}

/* ---- how many to draft ---- */

/* Seconds a target forward of T rows takes: measured, else interpolated
 * between the nearest measured sizes, else extrapolated with the slope of
 * the two nearest (at least 5% of a single step per row); before two are
 * known, 30% of a single step per row (in the unit of a single step when
 * nothing is measured). */
static double cost_target(const struct r1_spec *sp, int T) {
    const double *t = sp->t_target;
    if (t[T] > 0) return t[T];
    int below = 0, above = 0;
    for (int u = T - 1; u >= 1 && !below; u--)
        if (t[u] > 0) below = u;
    for (int u = T + 1; u <= R1_SPEC_MAX_K + 1 && !above; u++)
        if (t[u] > 0) above = u;
    if (below && above) return t[below] + (t[above] - t[below]) * (T - below) / (above - below);
    int a = below ? below : above, b = 0; /* the nearest, and the next one on the same side */
    if (!a) return 1.0 + 0.3 * (T - 1);
    for (int u = a + (below ? -1 : 1); u >= 1 && u <= R1_SPEC_MAX_K + 1 && !b; u += below ? -1 : 1)
        if (t[u] > 0) b = u;
    const double one = t[1] > 0 ? t[1] : t[a] / (1.0 + 0.3 * (a - 1));
    double slope = b ? (t[a] - t[b]) / (a - b) : 0.3 * one;
    if (slope < 0.05 * one) slope = 0.05 * one;
    double c = t[a] + slope * (T - a);
    return c > 0.5 * one ? c : 0.5 * one;
}

/* How many of a draft model's tokens to draft: kcur (doubled when every
 * draft was kept, cut to the kept count + 1 on a rejection), if it pays: a
 * step with k drafts, each kept with chance a, yields (1 - a^(k+1)) / (1 -
 * a) tokens for a target forward of k + 1 rows plus k draft tokens. When
 * kcur drafts do not beat plain decoding's tokens per second, half as many
 * are tried, and so on down to none (a plain step; one draft every
 * PROBE_EVERY such steps keeps a measured). */
static int choose_k(struct r1_spec *sp, double a, int kmax) {
    if (sp->o.fixed_k) return kmax;
    if (a > 0.98) a = 0.98;
    const double plain = 1.0 / cost_target(sp, 1);
    const double td = sp->t_draft > 0 ? sp->t_draft : 0.1 * cost_target(sp, 1);
    int k = sp->kcur < kmax ? sp->kcur : kmax;
    for (; k > 0; k /= 2) { /* kcur, else half of it, ..., else 0 */
        double e = (1 - pow(a, k + 1)) / (1 - a), c = cost_target(sp, k + 1) + k * td;
        if (e / c > plain) break;
    }
    if (k == 0 && ++sp->plain_run >= PROBE_EVERY) k = 1;
    if (k > 0) sp->plain_run = 0;
    return k;
}

/* How many of the m tokens a lookup match of length `match` offers to
 * draft: the k (0..m) with the most expected tokens per second, draft i
 * (continuing a match of match + i tokens) kept with chance acc[bucket]
 * given the ones before it; 0 (a plain step) unless that beats plain
 * decoding, except one draft after PROBE_EVERY plain steps in a row, so
 * estimates that fell too low can recover. */
static int choose_k_lookup(struct r1_spec *sp, int match, int m) {
    if (sp->o.fixed_k) return m;
    const double c1 = cost_target(sp, 1);
    double best = 1.0 / c1, e = 1.0, p = 1.0;
    int k = 0;
    for (int i = 1; i <= m; i++) {
        double a = sp->acc[bucket(match + i - 1)];
        p *= a > 0.98 ? 0.98 : a;
        e += p;
        double r = e / cost_target(sp, i + 1);
        if (r > best * 1.01) best = r, k = i; /* a longer batch must pay a little more */
    }
    if (k == 0 && ++sp->plain_run >= PROBE_EVERY) k = 1;
    if (k > 0) sp->plain_run = 0;
    return k;
}

static void ema(double *v, double x, double w) { *v = *v > 0 ? *v + w * (x - *v) : x; }

/* ---- one step ---- */

int r1_spec_step(r1_spec_t *sp, const int32_t **out) {
    *out = sp->out;
    if (sp->have_logits) { /* the first token: from the prefill's logits */
        sp->have_logits = 0;
        int32_t y = r1_sampler_sample(sp->smp, sp->logits0);
        if (hist_push(sp, y)) return -1;
        sp->out[0] = y;
        sp->st.generated++;
        return 1;
    }
    const int past = sp->t.n_past(sp->t.ctx);
    int room = sp->t.n_ctx(sp->t.ctx) - past; /* rows the target can still take */
    if (room < 1) return r1_err("context full: %d tokens cached (--ctx)", past);
    int kmax = sp->o.k < room - 1 ? sp->o.k : room - 1;
    const int gen = sp->n_hist - sp->n_prompt; /* generated so far: draft i is token gen + i */
    if (sp->o.oracle && kmax > sp->o.n_oracle - gen) kmax = sp->o.n_oracle - gen;
    double t0 = r1_now();
    int nd = 0, match = 0;
    if (sp->d) {
        int k = kmax > 0 ? choose_k(sp, sp->acc_model, kmax) : 0;
        if (k > 0) nd = draft_model(sp, k);
        if (nd < 0) return -1;
    } else if (kmax > 0) { /* the match decides how far to trust it */
        nd = draft_lookup(sp, kmax, &match);
        if (nd > 0) nd = choose_k_lookup(sp, match, nd);
    }
    if (sp->o.oracle)
        for (int i = 0; i < nd; i++) {
            int32_t x = sp->o.oracle[gen + i];
            sp->draft[i] = sp->o.oracle_wrong ? (x + 1) % sp->vt : x;
        }
    double t1 = r1_now();
    if (sp->d && nd > 0) ema(&sp->t_draft, (t1 - t0) / nd, 0.2);
    sp->st.draft_s += t1 - t0;
    /* the target: the last id and the drafts as one batch */
    int32_t ids[R1_SPEC_MAX_K + 1];
    ids[0] = sp->hist[sp->n_hist - 1];
    memcpy(ids + 1, sp->draft, (size_t)nd * sizeof *ids);
    int rows = nd + 1; /* a target may compute fewer (the server's step budget): fewer drafts */
    const float *l = sp->t.forward(sp->t.ctx, ids, nd + 1, nd > 0 ? sp->all : NULL, &rows);
    if (!l) return -1;
    if (nd == 0) memcpy(sp->all, l, (size_t)sp->vt * sizeof(float));
    if (rows >= 1 && rows <= nd) nd = rows - 1;
    double t2 = r1_now();
    ema(&sp->t_target[nd + 1], t2 - t1, 0.2);
    sp->st.target_s += t2 - t1;
    sp->st.steps++;
    sp->st.drafted += nd;
    /* keep the longest agreeing prefix, then the target's own token */
    int m = 0;
    int32_t y = -1;
    for (; m < nd; m++) {
        float *L = sp->all + (size_t)m * sp->vt;
        int32_t x = sp->draft[m];
        if (sp->greedy) {
            y = r1_sampler_sample(sp->smp, L); /* penalties see the kept ids, as in plain */
            if (y != x) break;
            continue;
        }
        r1_sampler_probs(sp->smp, L, sp->p);
        double px = sp->p[x];
        const float *q = sp->d ? sp->q + (size_t)m * sp->vd : NULL;
        double qx = q ? q[x] : 1.0;
        if (r1_sampler_uniform(sp->smp) * qx < px) { /* kept with probability min(1, p/q) */
            r1_sampler_accept(sp->smp, x);
            continue;
        }
        /* rejected: a draw from max(0, p - q), normalized */
        if (q) {
            int n = sp->vt < sp->vd ? sp->vt : sp->vd;
            for (int i = 0; i < n; i++) sp->p[i] = sp->p[i] > q[i] ? sp->p[i] - q[i] : 0.0f;
        } else {
            sp->p[x] = 0.0f;
        }
        y = r1_sampler_draw(sp->smp, sp->p, sp->vt);
        if (y < 0) y = x; /* p == q: nothing left (x then had p >= q and was kept) */
        r1_sampler_accept(sp->smp, y);
        break;
    }
    if (m == nd) { /* every draft kept: a token of the target's own from the last row */
        float *L = sp->all + (size_t)nd * sp->vt;
        y = r1_sampler_sample(sp->smp, L);
    }
    /* per-token chance of a keep: m kept, then one rejection if m < nd */
    if (nd > 0 && sp->d) {
        sp->acc_model += 0.25 * ((double)m / (m + (m < nd)) - sp->acc_model);
        if (m == nd) sp->kcur = 2 * sp->kcur < sp->o.k ? 2 * sp->kcur : sp->o.k;
        else sp->kcur = m + 1;
    }
    /* lookup: each draft seen (the kept ones, then the rejected one) is an
     * observation of its bucket's chance */
    for (int i = 0; !sp->d && i <= m && i < nd; i++) {
        double *a = &sp->acc[bucket(match + i)];
        *a += LOOKUP_RATE * ((i < m) - *a);
    }
    sp->st.accepted += m;
    /* both caches keep the last id and the kept drafts */
    sp->t.truncate(sp->t.ctx, past + 1 + m);
    if (sp->d) {
        int dn = r1_session_n_past(sp->d), keep = sp->n_hist + m;
        if (dn > keep) r1_session_truncate(sp->d, keep);
    }
    for (int i = 0; i < m; i++) {
        sp->out[i] = sp->draft[i];
        if (hist_push(sp, sp->draft[i])) return -1;
    }
    sp->out[m] = y;
    if (hist_push(sp, y)) return -1;
    sp->st.generated += m + 1;
    return m + 1;
}

void r1_spec_get_stats(const r1_spec_t *sp, struct r1_spec_stats *st) { *st = sp->st; }

int r1_spec_draft_held(const r1_spec_t *sp, const int32_t **ids) {
    *ids = sp->hist;
    if (!sp->d) return 0;
    int n = r1_session_n_past(sp->d);
    return n < sp->n_hist ? n : sp->n_hist;
}
