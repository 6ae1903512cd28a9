/*
 * sampler.c - the `sample` step: penalties, then greedy (temperature 0) or
 * temperature + top-k + top-p + min-p over a candidate list, drawn with a
 * seeded xoshiro256** generator so a seed reproduces a run exactly.
 * The candidate buffer is allocated once per sampler.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "r1infer.h"
#include "util/util.h"

#define NB 4096
#define SPAN 30.0f /* tokens less likely than e^-30 of the best are dropped */

struct cand {
    float logit;
    int32_t id;
};

struct r1_sampler {
    struct r1_sampler_params p;
    int vocab;
    struct cand *c, *tmp; /* (vocab) candidates, ordered / unordered */
    int *bkt;             /* (vocab) bucket of each unordered candidate */
    int *bucket;          /* (NB + 1) counts, then bucket ends */
    int32_t *recent;      /* ring of the last repeat_last_n ids */
    int n_recent, head;
    uint64_t rng[4];
};

struct r1_sampler_params r1_sampler_defaults(void) {
    return (struct r1_sampler_params){.temperature = 0.6f,
                                      .top_k = 0,
                                      .top_p = 0.95f,
                                      .min_p = 0.0f,
                                      .repeat_penalty = 1.0f,
                                      .repeat_last_n = 64,
                                      .seed = 0};
}

static uint64_t splitmix(uint64_t *x) {
    uint64_t z = (*x += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

static uint64_t rotl(uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }

static uint64_t next_u64(uint64_t *s) {
    uint64_t r = rotl(s[1] * 5, 7) * 9, t = s[1] << 17;
    s[2] ^= s[0], s[3] ^= s[1], s[1] ^= s[2], s[0] ^= s[3], s[2] ^= t, s[3] = rotl(s[3], 45);
    return r;
}

static double next_unit(uint64_t *s) { return (double)(next_u64(s) >> 11) * (1.0 / 9007199254740992.0); }

r1_sampler_t *r1_sampler_new(const struct r1_sampler_params *p, int vocab) {
    if (vocab <= 0) {
        r1_err("sampler: vocabulary size must be positive");
        return NULL;
    }
    if (p->temperature < 0 || p->top_p <= 0 || p->top_p > 1 || p->min_p < 0 || p->min_p > 1 || p->top_k < 0 ||
        p->repeat_penalty <= 0) {
        r1_err("sampler: need temperature >= 0, 0 < top_p <= 1, 0 <= min_p <= 1, top_k >= 0, "
               "repeat_penalty > 0");
        return NULL;
    }
    struct r1_sampler *s = calloc(1, sizeof *s);
    if (!s) return NULL;
    s->p = *p;
    if (s->p.repeat_last_n < 0) s->p.repeat_last_n = 0;
    s->vocab = vocab;
    s->c = malloc((size_t)vocab * sizeof *s->c);
    s->tmp = malloc((size_t)vocab * sizeof *s->tmp);
    s->bkt = malloc((size_t)vocab * sizeof *s->bkt);
    s->bucket = malloc((NB + 1) * sizeof *s->bucket);
    s->recent = malloc((size_t)(s->p.repeat_last_n ? s->p.repeat_last_n : 1) * sizeof(int32_t));
    if (!s->c || !s->tmp || !s->bkt || !s->bucket || !s->recent) {
        r1_sampler_free(s);
        r1_err("sampler: out of memory");
        return NULL;
    }
    uint64_t x = p->seed;
    for (int i = 0; i < 4; i++) s->rng[i] = splitmix(&x);
    return s;
}

void r1_sampler_free(r1_sampler_t *s) {
    if (!s) return;
    free(s->c);
    free(s->tmp);
    free(s->bkt);
    free(s->bucket);
    free(s->recent);
    free(s);
}

void r1_sampler_accept(r1_sampler_t *s, int32_t id) {
    if (s->p.repeat_last_n == 0) return;
    s->recent[s->head] = id;
    s->head = (s->head + 1) % s->p.repeat_last_n;
    if (s->n_recent < s->p.repeat_last_n) s->n_recent++;
}

static void apply_penalties(r1_sampler_t *s, float *logits) {
    const struct r1_sampler_params *p = &s->p;
    if (p->repeat_penalty == 1.0f && p->presence_penalty == 0.0f && p->frequency_penalty == 0.0f) return;
    /* count occurrences among recent ids; penalise each distinct id once */
    for (int i = 0; i < s->n_recent; i++) {
        int32_t id = s->recent[i];
        if (id < 0 || id >= s->vocab) continue;
        int first = 1, count = 0;
        for (int j = 0; j < s->n_recent; j++) {
            if (s->recent[j] == id) {
                if (j < i) first = 0;
                count++;
            }
        }
        if (!first) continue;
        float l = logits[id];
        if (p->repeat_penalty != 1.0f) l = l > 0 ? l / p->repeat_penalty : l * p->repeat_penalty;
        l -= (float)count * p->frequency_penalty + p->presence_penalty;
        logits[id] = l;
    }
}

/* Candidates are ordered by logit with a counting sort over NB buckets of
 * (max - logit) / temperature in [0, SPAN); only the bucket where a top-k or
 * top-p cut falls is sorted exactly, so a step costs O(vocab) however flat
 * the distribution is (a random model keeps ~all 152k tokens in the nucleus). */

static int cmp_cand(const void *a, const void *b) {
    const struct cand *x = a, *y = b;
    if (x->logit != y->logit) return x->logit < y->logit ? 1 : -1;
    return x->id < y->id ? -1 : x->id > y->id;
}

/* The candidates the sampler draws from after penalties: s->c[0..*keep)
 * with unnormalized probabilities (best = 1) summing to *total. Returns the
 * argmax; *keep = 0 when the choice is greedy (temperature 0 or top-k 1). */
static int32_t candidates(r1_sampler_t *s, float *logits, int *keep_out, double *total_out, int penalize) {
    const struct r1_sampler_params *p = &s->p;
    if (penalize) apply_penalties(s, logits);
    int best = r1_argmax(logits, s->vocab);
    *keep_out = 0;
    *total_out = 0;
    if (p->temperature > 0 && p->top_k != 1) {
        const float mx = logits[best], invt = 1.0f / p->temperature;
        /* min-p keeps p >= min_p * p_best, i.e. (mx - l) / T <= -log(min_p) */
        float span = SPAN;
        if (p->min_p > 0 && -logf(p->min_p) < span) span = -logf(p->min_p);
        const float scale = (float)NB / SPAN;
        int *count = s->bucket; /* NB + 1 */
        memset(count, 0, (NB + 1) * sizeof *count);
        int n = 0;
        for (int i = 0; i < s->vocab; i++) {
            float d = (mx - logits[i]) * invt;
            if (!(d <= span)) continue; /* also drops NaN and -inf */
            int b = (int)(d * scale);
            if (b >= NB) b = NB - 1;
            s->bkt[n] = b;
            s->tmp[n++] = (struct cand){logits[i], i};
            count[b + 1]++;
        }
        for (int b = 0; b < NB; b++) count[b + 1] += count[b]; /* bucket starts */
        for (int i = 0; i < n; i++) s->c[count[s->bkt[i]]++] = s->tmp[i];
        /* count[b] is now the end of bucket b; recover starts on demand */
        int keep = n;
        if (p->top_k > 0 && p->top_k < keep) {
            int b = 0;
            while (count[b] < p->top_k) b++;
            int lo = b ? count[b - 1] : 0;
            qsort(s->c + lo, (size_t)(count[b] - lo), sizeof *s->c, cmp_cand);
            keep = p->top_k;
        }
        /* probabilities (unnormalized, best = 1) */
        double total = 0;
        for (int i = 0; i < keep; i++) {
            s->c[i].logit = expf((s->c[i].logit - mx) * invt);
            total += s->c[i].logit;
        }
        if (p->top_p < 1.0f) {
            double target = p->top_p * total, cum = 0;
            int b = 0, lo = 0;
            /* find the bucket where the cumulative mass crosses target */
            for (b = 0; b < NB && lo < keep; b++) {
                int hi = count[b] < keep ? count[b] : keep;
                double m = 0;
                for (int i = lo; i < hi; i++) m += s->c[i].logit;
                if (cum + m >= target) {
                    qsort(s->c + lo, (size_t)(hi - lo), sizeof *s->c, cmp_cand); /* by prob desc */
                    int k = lo;
                    while (k < hi) {
                        cum += s->c[k++].logit;
                        if (cum >= target) break;
                    }
                    keep = k;
                    break;
                }
                cum += m;
                lo = hi;
            }
            total = 0;
            for (int i = 0; i < keep; i++) total += s->c[i].logit;
        }
        *keep_out = keep;
        *total_out = total;
    }
    return best;
}

/* The index of a candidate drawn from s->c[0..keep) by weight (total). */
static int draw_candidate(r1_sampler_t *s, int keep, double total) {
    double r = next_unit(s->rng) * total, acc = 0;
    int last = keep - 1;
    for (int i = 0; i < keep; i++) {
        if (!(s->c[i].logit > 0)) continue;
        acc += s->c[i].logit;
        last = i;
        if (r < acc) return i;
    }
    return last;
}

int32_t r1_sampler_sample(r1_sampler_t *s, float *logits) {
    int keep;
    double total;
    int32_t chosen = candidates(s, logits, &keep, &total, 1);
    if (keep > 0) chosen = s->c[draw_candidate(s, keep, total)].id;
    r1_sampler_accept(s, chosen);
    return chosen;
}

/* Grammar: candidates drawn and checked one at a time (a rejected one
 * leaves the draw, so the result follows the allowed part of the cut
 * exactly); after GRAMMAR_TRIES rejections a cut of at most
 * GRAMMAR_CHECK_ALL candidates is checked whole; only when none of them is
 * allowed (or the cut is larger) is the whole mask computed and applied. */
#define GRAMMAR_TRIES 8
#define GRAMMAR_CHECK_ALL 1024

static int bit(const uint64_t *b, int32_t i) { return (int)(b[i >> 6] >> (i & 63) & 1); }

int32_t r1_sampler_sample_grammar(r1_sampler_t *s, float *logits, r1_gmatch_t *m) {
    int keep;
    double total;
    int32_t chosen = candidates(s, logits, &keep, &total, 1);
    if (keep == 0) {
        if (r1_gmatch_allows(m, chosen)) goto done;
    } else {
        for (int t = 0; t < GRAMMAR_TRIES && total > 0; t++) {
            int i = draw_candidate(s, keep, total);
            if (r1_gmatch_allows(m, s->c[i].id)) {
                chosen = s->c[i].id;
                goto done;
            }
            total -= s->c[i].logit;
            s->c[i].logit = 0;
        }
        if (keep <= GRAMMAR_CHECK_ALL) { /* every candidate of the cut checked: the mask only when none passes */
            total = 0;
            for (int i = 0; i < keep; i++) {
                if (s->c[i].logit > 0 && !r1_gmatch_allows(m, s->c[i].id)) s->c[i].logit = 0;
                total += s->c[i].logit;
            }
            if (total > 0) {
                chosen = s->c[draw_candidate(s, keep, total)].id;
                goto done;
            }
        }
    }
    const uint64_t *bits = r1_gmatch_mask(m);
    if (!bits) return -1;
    int32_t first = -1;
    const int words = (s->vocab + 63) / 64;
    for (int w = 0; w < words; w++) {
        uint64_t b = bits[w];
        if (b && first < 0) first = w * 64 + __builtin_ctzll(b);
        if (b == ~0ull) continue;
        const int end = w * 64 + 64 < s->vocab ? w * 64 + 64 : s->vocab;
        for (int i = w * 64; i < end; i++)
            if (!(b >> (i & 63) & 1)) logits[i] = -INFINITY;
    }
    if (first < 0 || first >= s->vocab) return -1;
    chosen = candidates(s, logits, &keep, &total, 0);
    if (keep > 0) chosen = s->c[draw_candidate(s, keep, total)].id;
    if (!bit(bits, chosen)) chosen = first; /* every allowed logit was -inf or NaN */
done:
    r1_sampler_accept(s, chosen);
    return chosen;
}

struct r1_sampler_params r1_sampler_get_params(const r1_sampler_t *s) {
    return s->p;
}

int r1_sampler_greedy(const r1_sampler_t *s) { return !(s->p.temperature > 0 && s->p.top_k != 1); }

void r1_sampler_probs(r1_sampler_t *s, float *logits, float *probs) {
    int keep;
    double total;
    int32_t best = candidates(s, logits, &keep, &total, 1);
    memset(probs, 0, (size_t)s->vocab * sizeof *probs);
    if (keep == 0) {
        probs[best] = 1.0f;
        return;
    }
    for (int i = 0; i < keep; i++) probs[s->c[i].id] = (float)(s->c[i].logit / total);
}

double r1_sampler_uniform(r1_sampler_t *s) { return next_unit(s->rng); }

int32_t r1_sampler_draw(r1_sampler_t *s, const float *w, int n) {
    double total = 0;
    int32_t last = -1;
    for (int i = 0; i < n; i++)
        if (w[i] > 0) total += w[i], last = i;
    if (last < 0) return -1;
    double r = next_unit(s->rng) * total, acc = 0;
    for (int i = 0; i < n; i++) {
        if (!(w[i] > 0)) continue;
        acc += w[i];
        if (r < acc) return i;
    }
    return last;
}
