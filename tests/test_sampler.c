/*
 * test_sampler.c - the sampler through the public API: greedy, top-k, top-p,
 * min-p, penalties, seeding, and that draws at a temperature follow the
 * softmax (chi-square with a loose bound).
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "r1infer.h"
#include "test.h"
#include "util/util.h"

#define V 16

static const float BASE[V] = {0.3f,  1.2f, -0.5f, 2.0f,  0.9f, -1.5f, 1.7f,  0.1f,
                              -0.2f, 1.0f, 0.4f,  -2.5f, 0.6f, 1.4f,  -0.8f, 0.0f};

static struct r1_sampler_params plain(float temp, uint64_t seed) {
    struct r1_sampler_params p = r1_sampler_defaults();
    p.temperature = temp;
    p.top_k = 0;
    p.top_p = 1.0f;
    p.min_p = 0.0f;
    p.repeat_penalty = 1.0f;
    p.presence_penalty = p.frequency_penalty = 0.0f;
    p.seed = seed;
    return p;
}

static int32_t draw(r1_sampler_t *s, const float *logits, int n) {
    float buf[256];
    memcpy(buf, logits, sizeof *buf * n);
    return r1_sampler_sample(s, buf);
}

static int argmax(const float *x, int n) {
    int b = 0;
    for (int i = 1; i < n; i++)
        if (x[i] > x[b]) b = i;
    return b;
}

/* util.h's r1_argmax (the greedy picks of the sampler, bench, kld and the
 * cpu backend) against the plain loop above: every length up to 80 and a
 * vocabulary's, with ties (few distinct values), NaNs, -0 beside +0, -inf
 * and a NaN first element, the maximum at each end and in the 16-wide tail. */
static void test_r1_argmax(void) {
    enum { N = 151936 };
    float *x = malloc(sizeof *x * N);
    unsigned st = 11;
    int bad = 0, cases = 0;
    for (int kind = 0; kind < 6; kind++)
        for (int n = 1; n <= 81; n++) {
            const int len = n == 81 ? N : n;
            for (int rep = 0; rep < 8; rep++) {
                for (int i = 0; i < len; i++) {
                    st = st * 1103515245u + 12345u;
                    const unsigned r = st >> 8;
                    x[i] = kind == 0   ? (float)(r & 0xffff) / 6553.6f - 5.0f
                           : kind == 1 ? (float)(r % 4) /* ties */
                           : kind == 2 ? (r % 5 == 0 ? NAN : (float)(r % 7) - 3.0f)
                           : kind == 3 ? (r % 2 ? 0.0f : -0.0f)
                           : kind == 4 ? (r % 3 ? -INFINITY : -(float)(r % 9))
                                       : (float)(r % 50);
                }
                if (kind == 5) /* the maximum first, last or in the last 16 */
                    x[rep % 3 == 0 ? 0 : rep % 3 == 1 ? len - 1 : len - 1 - (int)(st % 16) % len] = 99.0f;
                if (kind == 2 && rep == 0) x[0] = NAN;
                const int want = argmax(x, len), got = r1_argmax(x, len);
                if (got != want && bad++ < 5)
                    fprintf(stderr, "  r1_argmax kind %d n %d rep %d: %d, want %d\n", kind, len, rep, got, want);
                cases++;
            }
        }
    CHECK(bad == 0, "r1_argmax differs from the plain loop in %d of %d vectors", bad, cases);
    free(x);
}

/* probabilities of softmax(logits / temp) restricted to keep[] (renormalised) */
static void softmax_over(const float *l, int n, float temp, const int *keep, double *p) {
    double mx = -INFINITY, sum = 0;
    for (int i = 0; i < n; i++)
        if (keep[i] && l[i] > mx) mx = l[i];
    for (int i = 0; i < n; i++) {
        p[i] = keep[i] ? exp((l[i] - mx) / temp) : 0;
        sum += p[i];
    }
    for (int i = 0; i < n; i++) p[i] /= sum;
}

/* N draws; chi-square of the counts against p (cells with p = 0 must get no
 * draws). Prints the statistic; returns 1 if within a loose bound. */
static int chi_square_ok(const char *what, r1_sampler_t *s, const float *l, int n, const double *p, int N) {
    long cnt[256] = {0};
    for (int i = 0; i < N; i++) {
        int32_t id = draw(s, l, n);
        if (id < 0 || id >= n) return 0;
        cnt[id]++;
    }
    double chi = 0;
    int df = -1, bad = 0;
    for (int i = 0; i < n; i++) {
        if (p[i] == 0) {
            if (cnt[i]) bad = 1;
            continue;
        }
        double e = p[i] * N;
        chi += (cnt[i] - e) * (cnt[i] - e) / e;
        df++;
    }
    /* mean df, sd sqrt(2 df): allow 6 sd (false alarm ~1e-6 with a fixed seed: never) */
    double bound = df + 6 * sqrt(2.0 * (df > 0 ? df : 1)) + 5;
    printf("%s: chi2 %.2f with %d dof (bound %.1f)%s\n", what, chi, df, bound,
           bad ? ", DRAWS OUTSIDE THE SUPPORT" : "");
    return !bad && chi <= bound;
}

int main(void) {
    test_r1_argmax();
    /* defaults */
    struct r1_sampler_params d = r1_sampler_defaults();
    CHECK(fabsf(d.temperature - 0.6f) < 1e-6f, "default temperature %g, want 0.6", d.temperature);
    CHECK(fabsf(d.top_p - 0.95f) < 1e-6f, "default top_p %g, want 0.95", d.top_p);
    CHECK(d.top_k == 0, "default top_k %d, want 0 (off)", d.top_k);
    CHECK(d.min_p == 0.0f, "default min_p %g, want 0 (off)", d.min_p);
    CHECK(d.repeat_penalty == 1.0f, "default repeat_penalty %g, want 1 (off)", d.repeat_penalty);
    CHECK(d.presence_penalty == 0.0f && d.frequency_penalty == 0.0f, "default presence/frequency penalties not 0");

    const int amax = argmax(BASE, V); /* 3 */
    struct r1_sampler_params p;
    r1_sampler_t *s;

    /* greedy: temperature 0 = argmax, whatever the seed, every time */
    p = plain(0.0f, 123);
    s = r1_sampler_new(&p, V);
    CHECK(s != NULL, "r1_sampler_new: %s", r1_last_error());
    int ok = 1;
    for (int i = 0; i < 50; i++) ok &= draw(s, BASE, V) == amax;
    CHECK(ok, "temperature 0 did not always return the argmax %d", amax);
    {
        /* argmax at every position of a range of vectors */
        float l[V];
        unsigned x = 7;
        ok = 1;
        for (int t = 0; t < 200; t++) {
            for (int i = 0; i < V; i++) {
                x = x * 1103515245u + 12345u;
                l[i] = (float)((x >> 8) & 0xffff) / 6553.6f - 5.0f;
            }
            int a = argmax(l, V);
            ok &= draw(s, l, V) == a;
        }
        CHECK(ok, "temperature 0 != argmax on random vectors");
    }
    r1_sampler_free(s);

    /* top_k = 1 is greedy at any temperature */
    for (int t = 0; t < 3; t++) {
        float temps[3] = {0.6f, 1.0f, 5.0f};
        p = plain(temps[t], 99 + t);
        p.top_k = 1;
        s = r1_sampler_new(&p, V);
        ok = s != NULL;
        for (int i = 0; ok && i < 500; i++) ok &= draw(s, BASE, V) == amax;
        CHECK(ok, "top_k=1 at temperature %g not greedy", temps[t]);
        r1_sampler_free(s);
    }

    /* seeding: same seed -> same 200 draws; another seed -> another sequence */
    {
        int32_t a[200], b[200], c[200];
        p = plain(1.0f, 42);
        r1_sampler_t *s1 = r1_sampler_new(&p, V), *s2 = r1_sampler_new(&p, V);
        p.seed = 43;
        r1_sampler_t *s3 = r1_sampler_new(&p, V);
        for (int i = 0; i < 200; i++) a[i] = draw(s1, BASE, V);
        for (int i = 0; i < 200; i++) b[i] = draw(s2, BASE, V);
        for (int i = 0; i < 200; i++) c[i] = draw(s3, BASE, V);
        CHECK(!memcmp(a, b, sizeof a), "same seed gave different sequences");
        CHECK(memcmp(a, c, sizeof a) != 0, "seeds 42 and 43 gave the same 200 draws");
        int distinct = 0, seen[V] = {0};
        for (int i = 0; i < 200; i++) distinct += !seen[a[i]]++;
        CHECK(distinct >= 5, "200 draws at temperature 1 hit only %d distinct ids", distinct);
        r1_sampler_free(s1);
        r1_sampler_free(s2);
        r1_sampler_free(s3);
    }

    /* top_p small: only the argmax survives the nucleus */
    p = plain(1.0f, 5);
    p.top_p = 0.05f;
    s = r1_sampler_new(&p, V);
    ok = s != NULL;
    for (int i = 0; ok && i < 1000; i++) ok &= draw(s, BASE, V) == amax;
    CHECK(ok, "top_p=0.05 chose something other than the argmax");
    r1_sampler_free(s);

    /* min_p: tokens below min_p * p_max are never chosen, the rest are */
    {
        /* probabilities at temperature 1 relative to the best: e^(l - 2) */
        p = plain(1.0f, 77);
        p.min_p = 0.5f; /* keeps l >= 2 + ln 0.5 = 1.307: ids 3 (2.0), 6 (1.7), 13 (1.4) */
        s = r1_sampler_new(&p, V);
        int keep[V] = {0}, hits[V] = {0};
        for (int i = 0; i < V; i++) keep[i] = BASE[i] - 2.0f >= logf(0.5f);
        for (int i = 0; s && i < 3000; i++) hits[draw(s, BASE, V)]++;
        int outside = 0, inside = 0;
        for (int i = 0; i < V; i++) {
            if (!keep[i]) outside += hits[i];
            else inside += hits[i] > 0;
        }
        CHECK(outside == 0, "min_p=0.5: %d draws below the threshold", outside);
        CHECK(inside == 3, "min_p=0.5: only %d of the 3 kept ids were drawn", inside);
        r1_sampler_free(s);
        double pr[V];
        p.seed = 78;
        s = r1_sampler_new(&p, V);
        softmax_over(BASE, V, 1.0f, keep, pr);
        CHECK(chi_square_ok("min_p 0.5, temp 1", s, BASE, V, pr, 20000),
              "min_p draws do not follow the renormalised softmax");
        r1_sampler_free(s);
    }

    /* -inf logits (masked ids) are never drawn */
    {
        float l[V];
        memcpy(l, BASE, sizeof l);
        l[3] = l[6] = -INFINITY;
        p = plain(1.5f, 8);
        s = r1_sampler_new(&p, V);
        ok = s != NULL;
        for (int i = 0; ok && i < 2000; i++) {
            int32_t id = draw(s, l, V);
            ok &= id != 3 && id != 6 && id >= 0 && id < V;
        }
        CHECK(ok, "a -inf logit was drawn");
        r1_sampler_free(s);
    }

    /* repetition penalty */
    {
        /* id 3 (2.0) is the best, id 6 (1.7) second; penalty 1.5 -> 2.0/1.5 = 1.33 */
        p = plain(0.0f, 1);
        p.repeat_penalty = 1.5f;
        p.repeat_last_n = 4;
        s = r1_sampler_new(&p, V);
        CHECK(draw(s, BASE, V) == 3, "penalty with an empty history changed the argmax");
        r1_sampler_free(s);
        s = r1_sampler_new(&p, V);
        r1_sampler_accept(s, 3);
        float l[V];
        memcpy(l, BASE, sizeof l);
        int32_t id = r1_sampler_sample(s, l);
        CHECK(id == 6, "seen id 3 (penalised to 1.33) still chosen over id 6 (1.7): got %d", id);
        CHECK(fabsf(l[3] - 2.0f / 1.5f) < 1e-5f, "penalised positive logit %g, want %g", l[3], 2.0f / 1.5f);
        /* history: 3, 6. A negative logit seen is multiplied (made more negative) */
        r1_sampler_accept(s, 2); /* BASE[2] = -0.5 */
        memcpy(l, BASE, sizeof l);
        id = r1_sampler_sample(s, l);
        CHECK(fabsf(l[2] - (-0.75f)) < 1e-5f, "penalised negative logit %g, want -0.75", l[2]);
        CHECK(id == 13, "with 3 and 6 penalised the best is 13 (1.4): got %d", id);
        /* the window is repeat_last_n = 4 ids: after 4 other ids, 3 is free again */
        for (int i = 0; i < 4; i++) r1_sampler_accept(s, 0);
        memcpy(l, BASE, sizeof l);
        id = r1_sampler_sample(s, l);
        CHECK(id == 3, "id 3 still penalised after leaving the repeat_last_n window: got %d", id);
        r1_sampler_free(s);

        /* at temperature 1 the penalised id becomes rarer */
        int with = 0, without = 0;
        p = plain(1.0f, 11);
        r1_sampler_t *a = r1_sampler_new(&p, V);
        p.repeat_penalty = 1.5f;
        p.repeat_last_n = 1;
        r1_sampler_t *b = r1_sampler_new(&p, V);
        for (int i = 0; i < 4000; i++) {
            without += draw(a, BASE, V) == 3;
            r1_sampler_accept(b, 3); /* history is always just id 3 */
            with += draw(b, BASE, V) == 3;
        }
        printf("repeat penalty 1.5: id 3 drawn %d/4000 times (unpenalised %d/4000)\n", with, without);
        CHECK(with < without * 0.8, "repeat penalty did not lower id 3's frequency (%d vs %d)", with, without);
        r1_sampler_free(a);
        r1_sampler_free(b);
    }

    /* presence and frequency penalties: subtract presence + count * frequency */
    {
        p = plain(0.0f, 1);
        p.presence_penalty = 0.25f;
        p.frequency_penalty = 0.5f;
        p.repeat_last_n = 16;
        s = r1_sampler_new(&p, V);
        r1_sampler_accept(s, 9);
        r1_sampler_accept(s, 9);
        r1_sampler_accept(s, 4);
        float l[V];
        memcpy(l, BASE, sizeof l);
        (void)r1_sampler_sample(s, l);
        CHECK(fabsf(l[9] - (1.0f - 0.25f - 2 * 0.5f)) < 1e-5f, "id 9 seen twice: logit %g, want %g", l[9],
              1.0f - 0.25f - 1.0f);
        CHECK(fabsf(l[4] - (0.9f - 0.25f - 0.5f)) < 1e-5f, "id 4 seen once: logit %g, want %g", l[4], 0.9f - 0.75f);
        CHECK(l[3] == BASE[3], "unseen id 3 changed: %g", l[3]);
        r1_sampler_free(s);
    }

    /* draws follow the softmax: temperature 1, 0.5; with top_k and top_p */
    {
        int all[V], keep[V];
        double pr[V];
        for (int i = 0; i < V; i++) all[i] = 1;

        p = plain(1.0f, 2024);
        s = r1_sampler_new(&p, V);
        softmax_over(BASE, V, 1.0f, all, pr);
        CHECK(chi_square_ok("temp 1", s, BASE, V, pr, 20000), "temp 1 draws are not softmax");
        r1_sampler_free(s);

        p = plain(0.5f, 2025);
        s = r1_sampler_new(&p, V);
        softmax_over(BASE, V, 0.5f, all, pr);
        CHECK(chi_square_ok("temp 0.5", s, BASE, V, pr, 20000), "temp 0.5 draws are not softmax");
        r1_sampler_free(s);

        p = plain(1.0f, 2026);
        p.top_k = 4; /* ids 3, 6, 13, 1 */
        s = r1_sampler_new(&p, V);
        for (int i = 0; i < V; i++) keep[i] = i == 3 || i == 6 || i == 13 || i == 1;
        softmax_over(BASE, V, 1.0f, keep, pr);
        CHECK(chi_square_ok("top_k 4, temp 1", s, BASE, V, pr, 20000),
              "top_k 4 draws are not the renormalised softmax of the top 4");
        r1_sampler_free(s);

        /* top_p: the smallest prefix of the sorted probabilities whose sum
         * reaches top_p (the token that crosses it is included) */
        double full[V];
        softmax_over(BASE, V, 1.0f, all, full);
        int order[V];
        for (int i = 0; i < V; i++) order[i] = i;
        for (int i = 0; i < V; i++)
            for (int j = i + 1; j < V; j++)
                if (full[order[j]] > full[order[i]]) {
                    int t = order[i];
                    order[i] = order[j];
                    order[j] = t;
                }
        /* choose top_p in the middle of a gap so rounding cannot move the cut */
        double cum = 0;
        int kn = 0;
        for (; kn < V && cum < 0.6; kn++) cum += full[order[kn]];
        float top_p = (float)(cum - 0.5 * full[order[kn - 1]]);
        memset(keep, 0, sizeof keep);
        for (int i = 0; i < kn; i++) keep[order[i]] = 1;
        p = plain(1.0f, 2027);
        p.top_p = top_p;
        s = r1_sampler_new(&p, V);
        softmax_over(BASE, V, 1.0f, keep, pr);
        char what[64];
        snprintf(what, sizeof what, "top_p %.3f (%d ids), temp 1", top_p, kn);
        CHECK(chi_square_ok(what, s, BASE, V, pr, 20000),
              "top_p draws are not the renormalised softmax of the nucleus");
        r1_sampler_free(s);
    }

    /* a large vocabulary: temperature 0.6 over a peaked vector picks the peak */
    {
        enum { BIG = 151936 };
        float *l = malloc(sizeof *l * BIG), *w = malloc(sizeof *w * BIG);
        for (int i = 0; i < BIG; i++) l[i] = (float)((i * 2654435761u) % 1000) / 1000.0f;
        l[123456] = 40.0f;
        p = r1_sampler_defaults();
        p.seed = 3;
        s = r1_sampler_new(&p, BIG);
        ok = s != NULL;
        for (int t = 0; ok && t < 20; t++) {
            memcpy(w, l, sizeof *w * BIG);
            ok &= r1_sampler_sample(s, w) == 123456;
        }
        CHECK(ok, "defaults over a 151936 vocabulary did not pick the dominant id");
        r1_sampler_free(s);
        free(l);
        free(w);
    }

    return TEST_DONE("test_sampler");
}
