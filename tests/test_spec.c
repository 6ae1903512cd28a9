/*
 * test_spec.c - speculative decoding (src/runtime/spec.c) against plain
 * decoding.
 *
 *  - Greedy: for every model fixture (tests/fixtures/<hf dir>/ and
 *    tests/fixtures/gguf/ *.gguf, a few also converted to q8_0 / q4_0 / bf16
 *    at load) on the best cpu kernel set, one other set this CPU runs (each
 *    fixture the next set, so the run covers them all) and, on every other
 *    fixture, ref, and for the
 *    default model (R1_TEST_MODEL, as test_smollm) on every kernel set but
 *    plain C, the emulated ones and a second set of the same decode forms, the
 *    speculative tokens equal the plain greedy tokens one for one: n-gram
 *    lookup at several fixed k and adaptive, a draft model at several k (the
 *    target itself: every draft must be kept), drafts forced right and
 *    forced wrong (every draft must be rejected), and a repetition penalty.
 *  - Temperature > 0: the first generated tokens' distribution under
 *    speculative sampling (a different draft model, and lookup) against
 *    plain sampling, SAMPLE_RUNS seeded runs each, a two-sample chi-square
 *    test per token position at significance level CHI2_ALPHA.
 *  - A draft of another vocabulary is refused with a message that names it;
 *    a larger draft is flagged.
 */
#include <dirent.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "kernels/cpu/cpu.h"
#include "r1infer.h"
#include "test.h"
#include "util/util.h"

#define FIXTURE_DIR "tests/fixtures"
#define DEFAULT_MODEL "models/SmolLM2-135M-Instruct.Q4_1.gguf"
#define N_GEN 40         /* greedy tokens compared per case (fixtures) */
#define N_GEN_REAL 40    /* the same on the default model */
#define SAMPLE_RUNS 1500 /* seeded runs per sampling variant */
#define SAMPLE_TOKENS 4  /* generated positions tested: 2..SAMPLE_TOKENS (the 1st is the prefill's) */
#define CHI2_ALPHA 0.001 /* significance level of each chi-square test */
#define CHI2_Z 3.0902    /* the standard normal quantile 1 - CHI2_ALPHA */
#define CHI2_MIN_BIN 10  /* categories with fewer samples (both runs) are pooled */

/* Quick (R1_TEST_QUICK, and always under AddressSanitizer, where the whole
 * set takes over 15 minutes): greedy cases on the best kernel set (and ref
 * where the full run has it, except under AddressSanitizer: the
 * speculative code is the same whatever the backend, and ref's kernels are
 * tested there by test_fixtures) instead of every set, 400 sampling runs.
 * The plain `make test` runs everything. */
static int quick;
#if defined(__SANITIZE_ADDRESS__)
#define SANITIZED 1
#else
#define SANITIZED 0
#endif

/* A prompt with repeats, as text being edited has: lookup finds n-grams. */
static int make_prompt(int vocab, int32_t *ids) {
    int n = 0;
    for (int rep = 0; rep < 4; rep++)
        for (int i = 0; i < 8; i++) ids[n++] = (int32_t)((7 * i * i + 3 + (rep == 2 && i == 5)) % (vocab - 10) + 5);
    return n;
}

static r1_session_t *session(r1_model_t *m, const char *backend) {
    struct r1_session_opts so = {.n_ctx = 256, .backend = backend, .kv_dtype = R1_DTYPE_AUTO};
    r1_session_t *s = r1_session_new(m, &so);
    CHECK(s != NULL, "session on %s: %s", backend, r1_last_error());
    return s;
}

/* n tokens of plain decoding after prompt; returns how many were made. */
static int plain(r1_session_t *s, const struct r1_sampler_params *sp, const int32_t *prompt, int np, int n,
                 int32_t *out) {
    const int V = r1_session_vocab(s);
    r1_session_truncate(s, 0);
    r1_sampler_t *smp = r1_sampler_new(sp, V);
    for (int i = 0; i < np; i++) r1_sampler_accept(smp, prompt[i]);
    const float *l = r1_session_forward(s, prompt, np, NULL);
    float *logits = malloc((size_t)V * sizeof(float));
    int made = 0;
    while (l && made < n) {
        memcpy(logits, l, (size_t)V * sizeof(float));
        out[made] = r1_sampler_sample(smp, logits);
        if (++made < n) l = r1_session_forward(s, &out[made - 1], 1, NULL);
    }
    free(logits);
    r1_sampler_free(smp);
    return made;
}

/* Speculative steps until n tokens are out (or a step fails); returns how
 * many were made. */
static int spec_gen(r1_spec_t *x, int n, int32_t *out) {
    int made = 0;
    while (made < n) {
        const int32_t *ids;
        int k = r1_spec_step(x, &ids);
        if (k <= 0) {
            CHECK(0, "r1_spec_step: %s", r1_last_error());
            break;
        }
        for (int i = 0; i < k && made < n; i++) out[made++] = ids[i];
    }
    return made;
}

/* The same with a speculative decoder; stats in *st. */
static int spec(r1_session_t *s, r1_session_t *ds, const struct r1_sampler_params *sp, const struct r1_spec_opts *so,
                const int32_t *prompt, int np, int n, int32_t *out, struct r1_spec_stats *st) {
    const int V = r1_session_vocab(s);
    r1_session_truncate(s, 0);
    r1_sampler_t *smp = r1_sampler_new(sp, V);
    for (int i = 0; i < np; i++) r1_sampler_accept(smp, prompt[i]);
    r1_spec_t *x = r1_spec_new(s, ds, smp, so);
    CHECK(x != NULL, "r1_spec_new: %s", r1_last_error());
    const float *l = r1_session_forward(s, prompt, np, NULL);
    int made = 0;
    if (x && l && r1_spec_begin(x, prompt, np, l) == 0) made = spec_gen(x, n, out);
    if (x) r1_spec_get_stats(x, st);
    r1_spec_free(x);
    r1_sampler_free(smp);
    return made;
}

static void two_turns(const char *name, const char *backend, r1_session_t *s, r1_session_t *ds,
                      const struct r1_sampler_params *gp, const int32_t *prompt, int np, int n);

/* Every greedy case on one model and backend. */
static void greedy_cases(const char *name, r1_model_t *m, const char *backend, const int32_t *prompt, int np, int n) {
    r1_session_t *s = session(m, backend), *ds = session(m, backend);
    if (!s || !ds) goto out;
    struct r1_sampler_params gp = r1_sampler_defaults();
    gp.temperature = 0;
    int32_t want[64], got[64], want_pen[64];
    int nw = plain(s, &gp, prompt, np, n, want);
    CHECK(nw == n, "%s/%s: plain decoding made %d of %d tokens", name, backend, nw, n);
    struct r1_sampler_params pen = gp;
    pen.repeat_penalty = 1.3f;
    plain(s, &pen, prompt, np, n, want_pen);
    struct kase {
        const char *what;
        int draft, lookup, k, fixed, oracle, wrong, penalty;
    } cases[] = {
        {"lookup k=1", 0, 3, 1, 1, 0, 0, 0},          {"lookup k=4", 0, 3, 4, 1, 0, 0, 0},
        {"lookup k=15", 0, 2, 15, 1, 0, 0, 0},        {"lookup adaptive", 0, 3, 0, 0, 0, 0, 0},
        {"lookup right k=6", 0, 3, 6, 1, 1, 0, 0},    {"lookup wrong k=3", 0, 3, 3, 1, 1, 1, 0},
        {"draft=self k=2", 1, 0, 2, 1, 0, 0, 0},      {"draft=self k=7", 1, 0, 7, 1, 0, 0, 0},
        {"draft=self adaptive", 1, 0, 0, 0, 0, 0, 0}, {"draft wrong k=5", 1, 0, 5, 1, 1, 1, 0},
        {"lookup k=5 penalty", 0, 1, 5, 1, 0, 0, 1},
    };
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        const struct kase *k = &cases[c];
        struct r1_spec_opts so = {.lookup = k->lookup, .k = k->k, .fixed_k = k->fixed};
        if (k->oracle) so.oracle = want, so.n_oracle = n, so.oracle_wrong = k->wrong;
        struct r1_spec_stats st = {0};
        const int32_t *ref = k->penalty ? want_pen : want;
        int ng = spec(s, k->draft ? ds : NULL, k->penalty ? &pen : &gp, &so, prompt, np, n, got, &st);
        int same = ng == n && !memcmp(got, ref, (size_t)n * sizeof *got), at = 0;
        while (at < ng && at < n && got[at] == ref[at]) at++;
        CHECK(same, "%s/%s %s: speculative greedy differs from plain at token %d of %d", name, backend, k->what, at, n);
        if (k->oracle || k->draft) {
            int all_kept = st.accepted == st.drafted, none = st.accepted == 0;
            CHECK(st.drafted > 0, "%s/%s %s: nothing drafted", name, backend, k->what);
            if (k->wrong)
                CHECK(none, "%s/%s %s: %ld of %ld wrong drafts kept", name, backend, k->what, st.accepted, st.drafted);
            else
                CHECK(all_kept, "%s/%s %s: only %ld of %ld right drafts kept", name, backend, k->what, st.accepted,
                      st.drafted);
        }
        if (getenv("R1_TEST_VERBOSE"))
            printf("  %-22s %-6s %-20s drafted %3ld accepted %3ld steps %3ld\n", name, backend, k->what, st.drafted,
                   st.accepted, st.steps);
    }
    two_turns(name, backend, s, ds, &gp, prompt, np, n < 24 ? n : 24);
out:
    r1_session_free(ds);
    r1_session_free(s);
}

/* A chat's second turn on one decoder (draft = the target's own weights):
 * turn 1 generates from the prompt; turn 2's prompt is turn 1's text plus new
 * ids, the target keeps its cache up to there, as `chat` does. The draft
 * must keep that prefix too (r1_spec_begin runs only the new ids through
 * it) and turn 2 must still be plain greedy's text for the whole prompt. */
static void two_turns(const char *name, const char *backend, r1_session_t *s, r1_session_t *ds,
                      const struct r1_sampler_params *gp, const int32_t *prompt, int np, int n) {
    const int V = r1_session_vocab(s);
    int32_t p2[160], want[64], got[64];
    r1_session_truncate(s, 0);
    r1_sampler_t *smp = r1_sampler_new(gp, V);
    struct r1_spec_opts so = {.k = 4, .fixed_k = 1};
    r1_spec_t *x = r1_spec_new(s, ds, smp, &so);
    CHECK(x != NULL, "r1_spec_new: %s", r1_last_error());
    const float *l = r1_session_forward(s, prompt, np, NULL);
    int made = 0;
    if (x && l && r1_spec_begin(x, prompt, np, l) == 0) made = spec_gen(x, n, got);
    CHECK(made == n, "%s/%s two turns: turn 1 made %d of %d tokens", name, backend, made, n);
    /* turn 2: prompt, turn 1's ids (the cache holds all but the last), 5 new ids */
    int n2 = 0;
    for (int i = 0; i < np; i++) p2[n2++] = prompt[i];
    for (int i = 0; i < made; i++) p2[n2++] = got[i];
    for (int i = 0; i < 5; i++) p2[n2++] = prompt[(3 * i) % np];
    struct r1_spec_stats st0 = {0}, st = {0};
    if (x) r1_spec_get_stats(x, &st0);
    r1_session_truncate(s, np + made - 1);
    l = r1_session_forward(s, p2 + np + made - 1, n2 - (np + made - 1), NULL);
    int made2 = 0;
    if (x && l && r1_spec_begin(x, p2, n2, l) == 0) made2 = spec_gen(x, n, got);
    if (x) r1_spec_get_stats(x, &st);
    long reused = st.draft_reused - st0.draft_reused, ran = st.draft_prefilled - st0.draft_prefilled;
    CHECK(reused >= np && reused + ran == n2,
          "%s/%s two turns: the draft kept %ld and ran %ld of "
          "turn 2's %d prompt ids (turn 1's %d should stay)",
          name, backend, reused, ran, n2, np);
    int nw = plain(s, gp, p2, n2, n, want), at = 0;
    while (at < made2 && at < nw && got[at] == want[at]) at++;
    CHECK(made2 == n && nw == n && at == n,
          "%s/%s two turns: turn 2 differs from plain greedy at "
          "token %d of %d",
          name, backend, at, n);
    r1_spec_free(x);
    r1_sampler_free(smp);
}

/* The kernel sets this CPU runs, then ref: the model loaded for each (the
 * weight layout follows the kernel set). every = 0 samples them: the best
 * set and one other, the next one at each call, so that a run of calls
 * covers every set without each case paying for all of them. every = 1
 * (a real model) runs every set but the emulated ones, plain C and a set
 * whose decode forms an earlier one has (r1_cpu_same_decode: the AMX set
 * and avx512), a minute or more on a real model; the fixtures' calls
 * sample all of them. */
static void greedy_all(const char *name, const char *path, enum r1_dtype dt, const int32_t *prompt, int np, int n,
                       int with_ref, int every) {
    static int turn; /* which of the other sets the next sampled call takes */
    const struct r1_cpu_isa *avail[16];
    const char *sets[16];
    int na = 0, ns = 0;
    for (int i = 0; r1_cpu_isas[i] && na < 15; i++)
        if (r1_cpu_isas[i]->available()) avail[na++] = r1_cpu_isas[i];
    if (na) sets[ns++] = avail[0]->name;
    if (!quick && every)
        for (int i = 1; i < na; i++) {
            int twin = 0; /* verification steps are decode forms: one set of those that share them */
            for (int j = 0; j < i; j++) twin |= r1_cpu_same_decode(avail[i], avail[j]);
            if (!avail[i]->emulated && !twin && strcmp(avail[i]->name, "generic")) sets[ns++] = avail[i]->name;
        }
    else if (!quick && na > 1) sets[ns++] = avail[1 + turn++ % (na - 1)]->name;
    if (with_ref && !SANITIZED) sets[ns++] = NULL; /* the ref backend */
    for (int i = 0; i < ns; i++) {
        const char *backend = sets[i] ? "cpu" : "ref";
        if (sets[i]) r1_cpu_select(sets[i]);
        else r1_cpu_select(NULL);
        r1_model_t *m = r1_model_load(path, &(struct r1_load_opts){.dtype = dt});
        CHECK(m != NULL, "%s: %s", path, r1_last_error());
        if (!m) continue;
        int32_t p[64];
        int pn = np;
        if (prompt) memcpy(p, prompt, (size_t)np * sizeof *p);
        else pn = make_prompt(r1_model_config(m)->vocab, p);
        double t0 = r1_now();
        greedy_cases(name, m, backend, p, pn, n);
        printf("%-28s %-9s greedy speculative == plain (%d tokens, 11 cases; %.1fs)\n", name, sets[i] ? sets[i] : "ref",
               n, r1_now() - t0);
        r1_model_free(m);
    }
    r1_cpu_select(NULL);
}

static int cmp_name(const void *a, const void *b) { return strcmp((const char *)a, (const char *)b); }

static void test_fixtures(void) {
    DIR *d = opendir(FIXTURE_DIR);
    CHECK(d != NULL, "no %s (run from the repository root)", FIXTURE_DIR);
    if (!d) return;
    struct dirent *e;
    char names[32][300];
    int nn = 0;
    while ((e = readdir(d)) && nn < 32) {
        char p[512];
        snprintf(p, sizeof p, FIXTURE_DIR "/%s/config.json", e->d_name);
        struct stat st;
        if (e->d_name[0] != '.' && stat(p, &st) == 0) snprintf(names[nn++], 300, "%.200s", e->d_name);
    }
    closedir(d);
    d = opendir(FIXTURE_DIR "/gguf");
    while (d && (e = readdir(d)) && nn < 32) {
        size_t l = strlen(e->d_name);
        if (l > 5 && !strcmp(e->d_name + l - 5, ".gguf")) snprintf(names[nn++], 300, "gguf/%.200s", e->d_name);
    }
    if (d) closedir(d);
    CHECK(nn >= 8, "only %d model fixtures found", nn);
    qsort(names, (size_t)nn, sizeof names[0], cmp_name);
    /* ref (every weight dequantized per use: the slow backend) on every
     * other fixture; the speculative code is the same on every backend */
    for (int i = 0; i < nn; i++) {
        char path[400];
        snprintf(path, sizeof path, FIXTURE_DIR "/%.300s", names[i]);
        greedy_all(names[i], path, R1_DTYPE_AUTO, NULL, 0, N_GEN, i % 2 == 0, 0);
    }
    /* the integer and bf16 kernels on one fixture, converted at load */
    static const enum r1_dtype dts[] = {R1_DTYPE_Q8_0, R1_DTYPE_Q4_0, R1_DTYPE_BF16, R1_DTYPE_Q4_1};
    for (int i = 0; i < 4; i++) {
        char name[64];
        snprintf(name, sizeof name, "gqa2_f32 as %s", r1_dtype_name(dts[i]));
        greedy_all(name, FIXTURE_DIR "/gqa2_f32", dts[i], NULL, 0, N_GEN, 0, 0);
    }
}

static void test_default_model(void) {
    const char *path = getenv("R1_TEST_MODEL");
    if (!path || !*path) path = DEFAULT_MODEL;
    r1_tokenizer_t *tok = r1_tokenizer_load(path);
    CHECK(tok != NULL, "the default model %s: %s (scripts/get-model.sh fetches it)", path, r1_last_error());
    if (!tok) return;
    const char *text = "Repeat this code exactly:\n\nint add(int a, int b) {\n    int sum = a + b;\n"
                       "    return sum;\n}\n";
    struct r1_chat_msg msg = {"user", text};
    char *chat = r1_chat_apply(tok, &msg, 1, 1);
    int32_t *ids = NULL;
    int n = chat ? r1_tokenizer_encode(tok, chat, strlen(chat), 0, &ids) : -1;
    CHECK(n > 0 && n <= 64, "the default model's prompt: %d tokens", n);
    if (n > 0 && n <= 64) greedy_all("SmolLM2-135M (default)", path, R1_DTYPE_AUTO, ids, n, N_GEN_REAL, 0, 1);
    free(ids);
    free(chat);
    r1_tokenizer_free(tok);
}

/* Chi-square quantile 1 - CHI2_ALPHA with df degrees of freedom
 * (Wilson-Hilferty; within 1% for df >= 3). */
static double chi2_crit(int df) {
    double k = df, a = 2.0 / (9.0 * k);
    return k * pow(1.0 - a + CHI2_Z * sqrt(a), 3);
}

static void test_sampling(void) {
    r1_model_t *m = r1_model_load(FIXTURE_DIR "/trained_f32", &(struct r1_load_opts){.dtype = R1_DTYPE_AUTO});
    r1_model_t *dm = r1_model_load(FIXTURE_DIR "/f16", &(struct r1_load_opts){.dtype = R1_DTYPE_AUTO});
    /* a draft close to the target (its weights in q4_0): most drafts kept */
    r1_model_t *dq = r1_model_load(FIXTURE_DIR "/trained_f32", &(struct r1_load_opts){.dtype = R1_DTYPE_Q4_0});
    CHECK(m && dm && dq, "trained_f32 / f16 fixtures: %s", r1_last_error());
    if (!m || !dm || !dq) goto out0;
    r1_session_t *s = session(m, "cpu"), *ds = session(dm, "cpu"), *dsq = session(dq, "cpu");
    const int V = r1_model_config(m)->vocab, runs = quick ? 400 : SAMPLE_RUNS;
    int32_t prompt[64], lprompt[128];
    int np = make_prompt(V, prompt);
    /* lookup's prompt: the model's own greedy continuation, then the prompt
     * and its start again, so the n-grams at the end lead to likely tokens */
    struct r1_sampler_params gp = r1_sampler_defaults();
    gp.temperature = 0;
    int32_t g[24];
    plain(s, &gp, prompt, np, 24, g);
    int nl = 0;
    for (int i = 0; i < np; i++) lprompt[nl++] = prompt[i];
    for (int i = 0; i < 24; i++) lprompt[nl++] = g[i];
    for (int i = 0; i < np; i++) lprompt[nl++] = prompt[i];
    for (int i = 0; i < 6; i++) lprompt[nl++] = g[i];
    enum { NV = 3 }; /* draft f16, draft = the target in q4_0, lookup */
    int *cnt = calloc((size_t)2 * NV * SAMPLE_TOKENS * V, sizeof *cnt); /* [variant][plain|spec][pos][id] */
    long drafted[NV] = {0}, accepted[NV] = {0};
    for (int v = 0; v < NV; v++) {
        struct r1_sampler_params sp = r1_sampler_defaults();
        sp.temperature = v == 2 ? 0.5f : 1.0f, sp.top_p = 1.0f;
        const int32_t *pr = v == 2 ? lprompt : prompt;
        int pn = v == 2 ? nl : np;
        r1_session_t *d = v == 0 ? ds : v == 1 ? dsq : NULL;
        for (int r = 0; r < runs; r++) {
            int32_t out[SAMPLE_TOKENS];
            int *c0 = cnt + (size_t)(2 * v) * SAMPLE_TOKENS * V, *c1 = c0 + (size_t)SAMPLE_TOKENS * V;
            sp.seed = 1000 + (uint64_t)r;
            CHECK(plain(s, &sp, pr, pn, SAMPLE_TOKENS, out) == SAMPLE_TOKENS, "plain sampling");
            for (int p = 0; p < SAMPLE_TOKENS; p++) c0[(size_t)p * V + out[p]]++;
            struct r1_spec_opts so = {.lookup = v == 2 ? 3 : 0, .k = 3, .fixed_k = 1};
            struct r1_spec_stats st = {0};
            sp.seed = 500000 + (uint64_t)r * 7 + v;
            int ng = spec(s, d, &sp, &so, pr, pn, SAMPLE_TOKENS, out, &st);
            CHECK(ng == SAMPLE_TOKENS, "speculative sampling made %d tokens", ng);
            for (int p = 0; p < ng; p++) c1[(size_t)p * V + out[p]]++;
            drafted[v] += st.drafted, accepted[v] += st.accepted;
        }
    }
    static const char *const vname[NV] = {"draft model (f16 fixture)", "draft (target in q4_0)",
                                          "lookup (temperature 0.5)"};
    for (int v = 0; v < NV; v++) {
        CHECK(accepted[v] > 0 && accepted[v] < drafted[v],
              "%s: %ld of %ld drafts kept: both paths (keep, resample) must run", vname[v], accepted[v], drafted[v]);
        for (int p = 1; p < SAMPLE_TOKENS; p++) {
            const int *a = cnt + ((size_t)(2 * v) * SAMPLE_TOKENS + p) * V;
            const int *b = cnt + ((size_t)(2 * v + 1) * SAMPLE_TOKENS + p) * V;
            double x2 = 0;
            int bins = 0, pa = 0, pb = 0;
            for (int i = 0; i < V; i++) {
                if (a[i] + b[i] < CHI2_MIN_BIN) {
                    pa += a[i], pb += b[i];
                    continue;
                }
                x2 += (double)(a[i] - b[i]) * (a[i] - b[i]) / (a[i] + b[i]), bins++;
            }
            if (pa + pb > 0) x2 += (double)(pa - pb) * (pa - pb) / (pa + pb), bins++;
            double crit = bins > 1 ? chi2_crit(bins - 1) : 0;
            CHECK(bins > 2, "%s token %d: only %d categories", vname[v], p + 1, bins);
            CHECK(x2 <= crit,
                  "%s token %d: chi-square %.1f > %.1f (df %d, alpha %g): the "
                  "speculative distribution differs from plain sampling",
                  vname[v], p + 1, x2, crit, bins - 1, CHI2_ALPHA);
            printf("sampling %-26s token %d: chi-square %6.1f, df %3d, critical %.1f at alpha %g "
                   "(%d runs; %ld/%ld drafts kept)\n",
                   vname[v], p + 1, x2, bins - 1, crit, CHI2_ALPHA, runs, accepted[v], drafted[v]);
        }
    }
    free(cnt);
    r1_session_free(dsq);
    r1_session_free(ds);
    r1_session_free(s);
out0:
    r1_model_free(dq);
    r1_model_free(dm);
    r1_model_free(m);
}

static void test_draft_checks(void) {
    r1_model_t *a = r1_model_load(FIXTURE_DIR "/trained_f32", &(struct r1_load_opts){.dtype = R1_DTYPE_AUTO});
    r1_model_t *b = r1_model_load(FIXTURE_DIR "/gqa2_f32", &(struct r1_load_opts){.dtype = R1_DTYPE_AUTO});
    r1_model_t *c = r1_model_load(FIXTURE_DIR "/gqa4_tied_f32", &(struct r1_load_opts){.dtype = R1_DTYPE_AUTO});
    CHECK(a && b && c, "fixtures: %s", r1_last_error());
    if (a && b && c) {
        int warn = -1;
        CHECK(r1_spec_check_draft(a, NULL, b, NULL, &warn) == -1 && strstr(r1_last_error(), "512") &&
                  strstr(r1_last_error(), "384") && strstr(r1_last_error(), "vocabulary"),
              "a 512-id draft for a 384-id target: '%s'", r1_last_error());
        CHECK(r1_spec_check_draft(b, NULL, c, NULL, &warn) == 0 && warn == 1,
              "a larger draft (gqa4_tied_f32 for gqa2_f32): rc, warn %d: %s", warn, r1_last_error());
        CHECK(r1_spec_check_draft(c, NULL, b, NULL, &warn) == 0 && warn == 0, "a smaller draft: warn %d: %s", warn,
              r1_last_error());
        struct r1_spec_opts none = {0}, big = {.lookup = 2, .k = 16};
        r1_session_t *s = session(b, "cpu");
        r1_sampler_t *smp = r1_sampler_new(&(struct r1_sampler_params){.top_p = 1, .repeat_penalty = 1}, 512);
        CHECK(r1_spec_new(s, NULL, smp, &none) == NULL && strstr(r1_last_error(), "--lookup"), "no draft source: '%s'",
              r1_last_error());
        CHECK(r1_spec_new(s, NULL, smp, &big) == NULL && strstr(r1_last_error(), "15"), "k = 16: '%s'",
              r1_last_error());
        r1_sampler_free(smp);
        r1_session_free(s);
    }
    /* tokenizers that differ: the default model's against Llama 3's */
    const char *path = getenv("R1_TEST_MODEL");
    if (!path || !*path) path = DEFAULT_MODEL;
    r1_tokenizer_t *t1 = r1_tokenizer_load(path), *t2 = r1_tokenizer_load(FIXTURE_DIR "/tok_llama3");
    if (t1 && t2 && b) {
        CHECK(r1_spec_check_draft(b, t1, b, t2, NULL) == -1 && strstr(r1_last_error(), "token"),
              "different tokenizers: '%s'", r1_last_error());
        CHECK(r1_spec_check_draft(b, t1, b, t1, NULL) == 0, "the same tokenizer: %s", r1_last_error());
        printf("draft checks: '%s'\n", (r1_spec_check_draft(b, t1, b, t2, NULL), r1_last_error()));
    }
    r1_tokenizer_free(t1);
    r1_tokenizer_free(t2);
    r1_model_free(a);
    r1_model_free(b);
    r1_model_free(c);
}

int main(void) {
    quick = SANITIZED || getenv("R1_TEST_QUICK") != NULL;
    if (quick) printf("test_spec: quick set (%s)\n", SANITIZED ? "AddressSanitizer build" : "R1_TEST_QUICK");
    const char *only = getenv("R1_TEST_ONLY"); /* checks|fixtures|default|sampling */
    if (!only || strstr(only, "checks")) test_draft_checks();
    if (!only || strstr(only, "fixtures")) test_fixtures();
    /* under AddressSanitizer the default model's part (the fixtures' code
     * on a bigger model, most of a minute there) runs only when asked for */
    if (only ? strstr(only, "default") != NULL : !SANITIZED) test_default_model();
    if (!only || strstr(only, "sampling")) test_sampling();
    return TEST_DONE("test_spec");
}
