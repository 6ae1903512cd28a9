/*
 * test_perplexity.c - `r1infer perplexity` (src/eval/) against oracles.
 *
 *  - eval_top_k against a full sort, ties and k >= n included.
 *  - Every Hugging Face fixture with logits (tests/fixtures/<name>/, made by
 *    tools/make_fixtures.py): the perplexity of the prompt computed here, in
 *    double, straight from transformers' logits, equals eval_perplexity's
 *    on the f32 path (ref and cpu, f32 KV cache) within PPL_TOL_FIXTURE.
 *  - The default model on the corpus (the Debian FAQ, from the debian-faq
 *    package; tests/fixtures/ppl_debian_faq by tools/make_ppl_fixture.py):
 *    r1infer's ids equal transformers', and the f32 perplexity of 4 windows
 *    of 512 equals transformers' within PPL_TOL_HF (each window's NLL too).
 *    The model comes from R1_TEST_MODEL and the text from R1_TEST_CORPUS
 *    (scripts/run-tests.sh provides both); without them this part fails.
 *  - KL-divergence files: a run against its own base gives KL 0 and 100%
 *    top-1 agreement; against q8_0 weights KL > 0, and the top-k estimate
 *    never exceeds the full one; bases from another model, text, --ctx or
 *    damaged files are refused with a message.
 */
#include <jansson.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "eval/eval.h"
#include "r1infer.h"
#include "test.h"
#include "util/util.h"

/* f32 weights and kernels against transformers' f32 logits: the logits
 * differ by ~1e-6 of max|logit| (test_fixtures), the perplexity by less */
#define PPL_TOL_FIXTURE 1e-4
/* the default model over 1020 scored tokens of the corpus, f32 path vs
 * transformers' float32 (dequantized Q4_1), relative: measured 4e-8 for
 * the PPL and 1.6e-7 for the worst window's NLL */
#define PPL_TOL_HF 1e-5
/* a run against its own base: the base stores log-probabilities as f32,
 * which leaves ~1e-9 of KL divergence */
#define KLD_SELF_MAX 1e-7

static int32_t *ids_of(json_t *a, int *n) {
    *n = (int)json_array_size(a);
    int32_t *v = malloc((size_t)(*n ? *n : 1) * sizeof *v);
    for (int i = 0; i < *n; i++) v[i] = (int32_t)json_integer_value(json_array_get(a, (size_t)i));
    return v;
}

static void test_top_k(void) {
    uint64_t z = 42;
    int bad = 0;
    for (int trial = 0; trial < 200; trial++) {
        int n = 1 + trial % 97, k = trial % 13;
        float x[97];
        for (int i = 0; i < n; i++) {
            z = z * 6364136223846793005ull + 1442695040888963407ull;
            x[i] = (float)((z >> 33) % 17) - 8; /* many ties */
        }
        int32_t got[97], want[97];
        int kk = eval_top_k(x, n, k, got);
        for (int i = 0; i < n; i++) want[i] = i;
        for (int i = 1; i < n; i++) /* stable insertion sort, descending */
            for (int j = i; j > 0 && x[want[j]] > x[want[j - 1]]; j--) {
                int32_t t = want[j];
                want[j] = want[j - 1];
                want[j - 1] = t;
            }
        bad += kk != (k < n ? k : n) || memcmp(got, want, (size_t)kk * sizeof *got) != 0;
    }
    CHECK(bad == 0, "eval_top_k differs from a stable sort in %d of 200 cases", bad);
    float one[1] = {3};
    int32_t id = -1;
    CHECK(eval_top_k(one, 1, 5, &id) == 1 && id == 0, "top-k of one value");
    float big[3] = {1000, 0, -1000};
    double lse = eval_logsumexp(big, 3);
    CHECK(fabs(lse - 1000) < 1e-12, "logsumexp of large logits: %.17g", lse);
}

/* Perplexity of rows first..n-2 straight from the logits, in double. */
static double ppl_from_logits(const float *logits, const int32_t *ids, int n, int first, int vocab) {
    double nll = 0;
    for (int j = first; j < n - 1; j++) {
        const float *l = logits + (size_t)j * vocab;
        double mx = l[0], sum = 0;
        for (int i = 1; i < vocab; i++) mx = fmax(mx, l[i]);
        for (int i = 0; i < vocab; i++) sum += exp((double)l[i] - mx);
        nll += mx + log(sum) - l[ids[j + 1]];
    }
    return exp(nll / (n - 1 - first));
}

static void test_fixtures(void) {
    static const char *const names[] = {"gqa2_f32", "gqa4_tied_f32", "llama_gqa_f32", "trained_f32", "f16", "mha_bf16"};
    static const char *const backends[] = {"ref", "cpu"};
    for (size_t f = 0; f < sizeof names / sizeof names[0]; f++) {
        char dir[256], path[300];
        snprintf(dir, sizeof dir, "tests/fixtures/%s", names[f]);
        snprintf(path, sizeof path, "%s/expected.json", dir);
        json_error_t je;
        json_t *fx = json_load_file(path, 0, &je);
        CHECK(fx != NULL, "%s: %s", path, je.text);
        if (!fx) continue;
        int n, vocab = (int)json_integer_value(json_object_get(fx, "vocab"));
        int32_t *ids = ids_of(json_object_get(fx, "prompt_ids"), &n);
        snprintf(path, sizeof path, "%s/logits.bin", dir);
        size_t bytes = 0;
        float *hf = (float *)r1_file_read(path, &bytes);
        CHECK(hf && bytes == (size_t)n * vocab * 4, "%s: %zu bytes, want %d x %d floats", path, bytes, n, vocab);
        r1_model_t *m = hf ? r1_model_load(dir, &(struct r1_load_opts){.dtype = R1_DTYPE_F32}) : NULL;
        CHECK(!hf || m, "%s: %s", dir, r1_last_error());
        for (int b = 0; m && b < 2; b++) {
            r1_session_t *s =
                r1_session_new(m, &(struct r1_session_opts){
                                      .n_ctx = n, .backend = backends[b], .n_threads = 2, .kv_dtype = R1_DTYPE_F32});
            CHECK(s != NULL, "session: %s", r1_last_error());
            if (!s) continue;
            /* every prompt position scored (first 0), and llama.cpp's half */
            for (int first = 0; first <= n / 2; first += n / 2) {
                struct eval_windows w = {.ctx = n, .first = first, .n_chunks = 1};
                struct eval_ppl r;
                int rc = eval_perplexity(s, vocab, ids, &w, 0, NULL, NULL, &r);
                double want = ppl_from_logits(hf, ids, n, first, vocab), rel = fabs(r.ppl - want) / want;
                CHECK(rc == 0 && r.count == n - 1 - first, "%s %s: eval_perplexity: %s", names[f], backends[b],
                      r1_last_error());
                CHECK(rel <= PPL_TOL_FIXTURE, "%s %s first %d: PPL %.9g vs transformers' %.9g: %.2e > PPL_TOL_FIXTURE",
                      names[f], backends[b], first, r.ppl, want, rel);
                printf("%-14s %s rows %2d..%2d: PPL %.6f, from HF logits %.6f, rel diff %.1e (PPL_TOL_FIXTURE %g)\n",
                       names[f], backends[b], first, n - 2, r.ppl, want, rel, PPL_TOL_FIXTURE);
            }
            r1_session_free(s);
        }
        r1_model_free(m);
        free(hf);
        free(ids);
        json_decref(fx);
    }
}

static void test_real_model(void) {
    const char *model = getenv("R1_TEST_MODEL"), *corpus = getenv("R1_TEST_CORPUS");
    if (!model || !*model) model = "models/SmolLM2-135M-Instruct.Q4_1.gguf";
    if (!corpus || !*corpus) corpus = "build/corpus/debian-faq.txt";
    if (access(model, R_OK) || access(corpus, R_OK)) {
        CHECK(0,
              "the default model (%s) or the corpus (%s) is absent: scripts/run-tests.sh fetches the model "
              "and unpacks the corpus of the debian-faq package (scripts/install-deps.sh installs it)",
              model, corpus);
        return;
    }
    json_error_t je;
    json_t *fx = json_load_file("tests/fixtures/ppl_debian_faq/expected.json", 0, &je);
    CHECK(fx != NULL, "ppl_debian_faq/expected.json: %s", je.text);
    if (!fx) return;
    int n_fx, ctx = (int)json_integer_value(json_object_get(fx, "ctx"));
    int n_chunks = (int)json_integer_value(json_object_get(fx, "n_chunks"));
    int32_t *fx_ids = ids_of(json_object_get(fx, "ids"), &n_fx);
    json_t *corp = json_object_get(fx, "corpus");
    size_t len = 0;
    char *text = r1_file_read(corpus, &len);
    CHECK(text && (json_int_t)len == json_integer_value(json_object_get(corp, "bytes")),
          "%s: %zu bytes, the fixture was made from %lld (another version of debian-faq?)", corpus, len,
          (long long)json_integer_value(json_object_get(corp, "bytes")));
    r1_tokenizer_t *tok = r1_tokenizer_load(model);
    int32_t *ids = NULL;
    int n = tok && text ? r1_tokenizer_encode(tok, text, len, 1, &ids) : -1;
    CHECK(n == json_integer_value(json_object_get(corp, "n_tokens")), "corpus: %d ids, transformers %lld", n,
          (long long)json_integer_value(json_object_get(corp, "n_tokens")));
    CHECK(n >= n_fx && !memcmp(ids, fx_ids, (size_t)n_fx * sizeof *ids),
          "corpus: r1infer's first %d ids differ from transformers'", n_fx);
    r1_model_t *m = r1_model_load(model, &(struct r1_load_opts){.dtype = R1_DTYPE_F32});
    r1_session_t *s =
        m ? r1_session_new(
                m, &(struct r1_session_opts){.n_ctx = ctx, .backend = "cpu", .n_threads = 2, .kv_dtype = R1_DTYPE_F32})
          : NULL;
    CHECK(s != NULL, "%s: %s", model, r1_last_error());
    if (s && n >= n_fx) {
        struct eval_windows w;
        eval_windows_plan(n, ctx, n_chunks, &w);
        double worst = 0;
        for (int c = 0; c < n_chunks; c++) { /* one window at a time: each window's NLL */
            struct eval_windows one = w;
            one.n_chunks = 1;
            struct eval_ppl r;
            eval_perplexity(s, r1_model_config(m)->vocab, ids + (size_t)c * ctx, &one, 0, NULL, NULL, &r);
            double want = json_real_value(json_array_get(json_object_get(fx, "window_nll"), (size_t)c));
            worst = fmax(worst, fabs(r.nll - want) / want);
        }
        struct eval_ppl r;
        int rc = eval_perplexity(s, r1_model_config(m)->vocab, ids, &w, 0, NULL, NULL, &r);
        double want = json_real_value(json_object_get(fx, "ppl")), rel = fabs(r.ppl - want) / want;
        CHECK(rc == 0 && r.count == json_integer_value(json_object_get(fx, "count")), "scored %ld tokens", r.count);
        CHECK(rel <= PPL_TOL_HF && worst <= PPL_TOL_HF,
              "default model f32: PPL %.6f vs transformers' %.6f (rel %.2e), worst window NLL rel %.2e > "
              "PPL_TOL_HF %g",
              r.ppl, want, rel, worst, PPL_TOL_HF);
        printf("default model, %s, %d windows of %d, f32: PPL %.6f, transformers %.6f, rel diff %.1e, worst "
               "window NLL rel diff %.1e (PPL_TOL_HF %g)\n",
               corpus, n_chunks, ctx, r.ppl, want, rel, worst, PPL_TOL_HF);
    }
    r1_session_free(s);
    r1_model_free(m);
    r1_tokenizer_free(tok);
    free(ids);
    free(fx_ids);
    free(text);
    json_decref(fx);
}

/* ------------------------------------------------------ KL divergence */

struct kctx {
    struct eval_kld_writer *w;
    struct eval_kld_reader *r;
    struct eval_kld_stats st;
};
static int on_row(void *c, const float *l, int32_t t, double lse) {
    struct kctx *k = c;
    return k->w ? eval_kld_put(k->w, l, t, lse) : eval_kld_next(k->r, &k->st, l, t, lse);
}

/* Run m over ids in w and write a base (top_k) or compare with one. */
static int kld_run(r1_model_t *m, const int32_t *ids, const struct eval_windows *w, const char *path, int write,
                   uint32_t top_k, struct eval_kld_summary *sum) {
    int vocab = r1_model_config(m)->vocab;
    struct eval_kld_head h = {.vocab = (uint32_t)vocab,
                              .ctx = (uint32_t)w->ctx,
                              .first = (uint32_t)w->first,
                              .n_chunks = (uint32_t)w->n_chunks,
                              .top_k = top_k,
                              .ids_hash = eval_hash_ids(ids, (size_t)w->n_chunks * w->ctx)};
    struct kctx k = {0};
    struct eval_kld_head bh;
    if (write) k.w = eval_kld_create(path, &h);
    else if ((k.r = eval_kld_open(path, &bh)) && eval_kld_check(&bh, &h, path)) eval_kld_free(k.r), k.r = NULL;
    if (!k.w && !k.r) return -1;
    r1_session_t *s = r1_session_new(
        m, &(struct r1_session_opts){.n_ctx = w->ctx, .backend = "cpu", .n_threads = 2, .kv_dtype = R1_DTYPE_F32});
    struct eval_ppl r;
    int rc = s ? eval_perplexity(s, vocab, ids, w, 0, on_row, &k, &r) : -1;
    r1_session_free(s);
    if (k.w) rc |= eval_kld_close(k.w);
    if (k.r) eval_kld_summarize(&k.st, sum);
    eval_kld_free(k.r);
    eval_kld_stats_free(&k.st);
    return rc;
}

static void test_kld(void) {
    const char *dir = "tests/fixtures/trained_f32";
    json_t *fx = json_load_file("tests/fixtures/trained_f32/expected.json", 0, NULL);
    int np, ng;
    int32_t *p = ids_of(json_object_get(fx, "prompt_ids"), &np), *g = ids_of(json_object_get(fx, "greedy_ids"), &ng);
    int32_t *ids = malloc((size_t)(np + ng) * sizeof *ids);
    memcpy(ids, p, (size_t)np * sizeof *ids);
    memcpy(ids + np, g, (size_t)ng * sizeof *ids);
    struct eval_windows w;
    CHECK(eval_windows_plan(np + ng, 16, 0, &w) == 0 && w.n_chunks == (np + ng) / 16, "windows");
    CHECK(eval_windows_plan(10, 16, 0, &w) < 0 && strstr(r1_last_error(), "fewer than one window"),
          "a text shorter than a window is refused: '%s'", r1_last_error());
    eval_windows_plan(np + ng, 16, 0, &w);
    char full[64], top[64];
    snprintf(full, sizeof full, "/tmp/r1kld-full-%d", (int)getpid());
    snprintf(top, sizeof top, "/tmp/r1kld-top-%d", (int)getpid());
    r1_model_t *m32 = r1_model_load(dir, &(struct r1_load_opts){.dtype = R1_DTYPE_F32});
    r1_model_t *m8 = r1_model_load(dir, &(struct r1_load_opts){.dtype = R1_DTYPE_Q4_0});
    CHECK(m32 && m8, "load %s: %s", dir, r1_last_error());
    if (!m32 || !m8) goto out;
    struct eval_kld_summary s_self, s_full, s_top;
    CHECK(kld_run(m32, ids, &w, full, 1, 0, NULL) == 0, "write full base: %s", r1_last_error());
    CHECK(kld_run(m32, ids, &w, top, 1, 8, NULL) == 0, "write top-8 base: %s", r1_last_error());
    CHECK(kld_run(m32, ids, &w, full, 0, 0, &s_self) == 0, "compare: %s", r1_last_error());
    CHECK(s_self.mean_kld <= KLD_SELF_MAX && s_self.same_top == 1 && fabs(s_self.mean_dp) < 1e-7,
          "a run against its own base: KLD %.3g, same top %.4f, dp %.3g", s_self.mean_kld, s_self.same_top,
          s_self.mean_dp);
    CHECK(kld_run(m8, ids, &w, full, 0, 0, &s_full) == 0 && kld_run(m8, ids, &w, top, 0, 0, &s_top) == 0,
          "compare q4_0: %s", r1_last_error());
    CHECK(s_full.mean_kld > 1e-5, "q4_0 weights against f32: KLD %.3g should be > 0", s_full.mean_kld);
    CHECK(s_top.mean_kld <= s_full.mean_kld * (1 + 1e-6) && s_top.mean_kld > 0.5 * s_full.mean_kld,
          "top-8 KLD %.6g must be at most the full KLD %.6g (and near it on a peaked model)", s_top.mean_kld,
          s_full.mean_kld);
    CHECK(s_full.same_top == s_top.same_top && fabs(s_full.mean_dp - s_top.mean_dp) < 1e-6,
          "top-1 agreement and dp do not depend on the base's top-k");
    printf("trained_f32 q4_0 vs f32, %d windows of 16: KLD full %.6f, top-8 %.6f, 99%% %.6f, same top %.2f%%, "
           "mean dp %.3f%%, RMS dp %.3f%%\n",
           w.n_chunks, s_full.mean_kld, s_top.mean_kld, s_full.p99_kld, 100 * s_full.same_top, 100 * s_full.mean_dp,
           100 * s_full.rms_dp);

    /* refusals */
    struct eval_kld_head a = {.vocab = 384, .ctx = 16, .first = 8, .n_chunks = 3, .ids_hash = 1}, b = a;
    b.vocab = 49152;
    CHECK(eval_kld_check(&a, &b, "x") < 0 && strstr(r1_last_error(), "another model"), "vocab: %s", r1_last_error());
    b = a, b.ids_hash = 2;
    CHECK(eval_kld_check(&a, &b, "x") < 0 && strstr(r1_last_error(), "another tokenizer"), "hash: %s", r1_last_error());
    b = a, b.ctx = 32, b.first = 16;
    CHECK(eval_kld_check(&a, &b, "x") < 0 && strstr(r1_last_error(), "--ctx"), "ctx: %s", r1_last_error());
    b = a, b.n_chunks = 2;
    CHECK(eval_kld_check(&a, &b, "x") < 0 && strstr(r1_last_error(), "--chunks"), "chunks: %s", r1_last_error());
    int32_t *other = malloc((size_t)(np + ng) * sizeof *other);
    memcpy(other, ids, (size_t)(np + ng) * sizeof *other);
    other[20] = (other[20] + 1) % 384; /* another text: refused by the hash */
    CHECK(kld_run(m8, other, &w, top, 0, 0, &s_top) < 0 && strstr(r1_last_error(), "other token ids"),
          "a base of other token ids: %s", r1_last_error());
    free(other);
    size_t len = 0;
    char *bytes = r1_file_read(top, &len);
    FILE *f = fopen(top, "wb");
    fwrite(bytes, 1, len - 5, f); /* truncated */
    fclose(f);
    struct eval_kld_head h;
    struct eval_kld_reader *r = eval_kld_open(top, &h);
    CHECK(!r && strstr(r1_last_error(), "truncated"), "a truncated base: %s", r1_last_error());
    eval_kld_free(r);
    f = fopen(top, "wb");
    fwrite("GGUF", 1, 4, f);
    fwrite(bytes, 1, len, f);
    fclose(f);
    r = eval_kld_open(top, &h);
    CHECK(!r && strstr(r1_last_error(), "not a KL-divergence base"), "another file: %s", r1_last_error());
    eval_kld_free(r);
    r = eval_kld_open("/nonexistent/x.kld", &h);
    CHECK(!r && strstr(r1_last_error(), "cannot open"), "missing: %s", r1_last_error());
    free(bytes);
out:
    unlink(full);
    unlink(top);
    r1_model_free(m32);
    r1_model_free(m8);
    free(ids);
    free(p);
    free(g);
    json_decref(fx);
}

int main(void) {
    test_top_k();
    test_fixtures();
    test_kld();
    test_real_model();
    return TEST_DONE("test_perplexity");
}
