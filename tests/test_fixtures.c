/*
 * test_fixtures.c - the whole model against the Hugging Face oracle.
 *
 * For every tests/fixtures/<name>/ (made by tools/make_fixtures.py: a small
 * random-weight Qwen2ForCausalLM checkpoint, expected.json and logits.bin)
 * and every configuration in CONFIGS (backend x KV-cache dtype):
 *   - the logits of every prompt position match HF's:
 *       max|logit - hf| <= tol * max|hf|   at every position
 *   - 32 greedy tokens, fed back one at a time, equal HF's greedy ids
 *   - prefill in two chunks gives the one-shot logits (KV cache append)
 *   - r1_session_truncate + re-forward reproduces the same logits, for the
 *     prompt and for the decode steps (replayed as one batch)
 * For bf16/f16 checkpoints, top-1 agreement with HF running natively in that
 * dtype (logits_native.bin) is printed; it fails only below 90%.
 */
#include <dirent.h>
#include <jansson.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "r1infer.h"
#include "test.h"

#define FIXTURE_DIR "tests/fixtures"
#define N_CTX 256
#define N_GEN 32

/* f32 weights-in-f32 compute (bf16/f16 weights are upcast exactly) */
#define LOGIT_TOL_F32 1e-4
/* an f16 KV cache rounds K and V to 11 significant bits; the fixtures' large
 * q/k biases amplify that to ~1e-3..2e-3 of max|logit| (measured, cpu backend) */
#define LOGIT_TOL_KV_F16 5e-3
/* the same forward run twice in different batch splits */
#define LOGIT_TOL_REPLAY 1e-5
#define NATIVE_TOP1_MIN 0.90
/* --dtype conversions: teacher-forced top-1 agreement with the f32-weight
 * result over prompt + greedy positions. The fixtures' weights are scaled up
 * so HF's logits are spread, which makes them chaotic: bf16 rounding (0.4%
 * per weight) already moves the logits by 1.5-3% of max|logit|, against
 * top-1 margins of ~2%. Measured (ref kernels, weights-only quantization):
 * bf16 100%, q8_0 96-98%, q4_0 28-45% (logit error 80-120%). The q8_0 and
 * q4_0 limits are therefore floors for these fixtures, not quality claims;
 * kernel-level accuracy is pinned by test_matmul and the dequant tests. */
#define TOP1_MIN_BF16 0.99
#define TOP1_MIN_Q8_0 0.88
#define TOP1_MIN_Q4_0 0.20 /* chance is 1/vocab */
/* The trained fixture (trained_f32: a small Qwen2 trained on text, see
 * tools/make_fixtures.py) has a real model's peaked distributions, so there
 * a real model's bar applies: >= 99% teacher-forced top-1 for bf16 and q8_0.
 * q4_0 is held to 90%. */
#define TOP1_MIN_TRAINED_BF16 0.99
#define TOP1_MIN_TRAINED_Q8_0 0.99
#define TOP1_MIN_TRAINED_Q4_0 0.90

struct config {
    const char *backend;
    enum r1_dtype kv;
    const char *tol_name;
    double tol;
};

static const struct config CONFIGS[] = {
    {"ref", R1_DTYPE_F32, "LOGIT_TOL_F32", LOGIT_TOL_F32},
    {"cpu", R1_DTYPE_F32, "LOGIT_TOL_F32", LOGIT_TOL_F32},
    {"cpu", R1_DTYPE_F16, "LOGIT_TOL_KV_F16", LOGIT_TOL_KV_F16},
};

struct fixture {
    char name[128], dir[512];
    int vocab, n_prompt, n_greedy;
    int32_t *prompt, *greedy, *greedy_native;
    float *logits, *logits_native; /* n_prompt x vocab */
    char dtype[32];
    double rope_theta;
    char arch[16]; /* "qwen2" or "llama"; "" unknown */
    int tied;      /* -1 unknown */
    int trained;   /* weights trained on text: peaked logits */
};

static int argmax(const float *x, int n) {
    int b = 0;
    for (int i = 1; i < n; i++)
        if (x[i] > x[b]) b = i;
    return b;
}

static int32_t *json_ids(json_t *a, int *n) {
    if (!json_is_array(a)) return NULL;
    *n = (int)json_array_size(a);
    int32_t *ids = malloc(sizeof *ids * (*n ? *n : 1));
    for (int i = 0; i < *n; i++) ids[i] = (int32_t)json_integer_value(json_array_get(a, i));
    return ids;
}

static float *read_floats(const char *dir, const char *file, size_t count) {
    char path[1024];
    snprintf(path, sizeof path, "%s/%s", dir, file);
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    float *x = malloc(sizeof *x * count);
    size_t got = fread(x, sizeof *x, count, f);
    int extra = fgetc(f) != EOF;
    fclose(f);
    if (got != count || extra) {
        free(x);
        return NULL;
    }
    return x; /* little-endian host assumed (x86, arm64) */
}

static int load_fixture(const char *name, struct fixture *fx) {
    memset(fx, 0, sizeof *fx);
    snprintf(fx->name, sizeof fx->name, "%s", name);
    snprintf(fx->dir, sizeof fx->dir, "%s/%s", FIXTURE_DIR, name);
    char path[1024];
    snprintf(path, sizeof path, "%s/expected.json", fx->dir);
    json_error_t je;
    json_t *root = json_load_file(path, 0, &je);
    CHECK(root != NULL, "%s: %s", path, je.text);
    if (!root) return -1;
    int n_prompt = 0;
    fx->vocab = (int)json_integer_value(json_object_get(root, "vocab"));
    fx->prompt = json_ids(json_object_get(root, "prompt_ids"), &fx->n_prompt);
    fx->greedy = json_ids(json_object_get(root, "greedy_ids"), &fx->n_greedy);
    n_prompt = (int)json_integer_value(json_object_get(root, "n_prompt"));
    int n_native = 0;
    fx->greedy_native = json_ids(json_object_get(root, "greedy_ids_native"), &n_native);
    const char *dt = json_string_value(json_object_get(root, "weights_dtype"));
    snprintf(fx->dtype, sizeof fx->dtype, "%s", dt ? dt : "?");
    json_t *ar = json_object_get(root, "arch");
    snprintf(fx->arch, sizeof fx->arch, "%s", json_is_string(ar) ? json_string_value(ar) : "");
    json_t *th = json_object_get(root, "rope_theta");
    fx->rope_theta = th ? json_number_value(th) : 0;
    fx->trained = json_is_true(json_object_get(root, "trained"));
    json_t *tied = json_object_get(root, "tied");
    fx->tied = tied ? json_is_true(tied) : -1;
    const char *lf = json_string_value(json_object_get(root, "logits_file"));
    const char *nf = json_string_value(json_object_get(root, "logits_native_file"));
    int ok = fx->prompt && fx->greedy && fx->vocab > 0 && n_prompt == fx->n_prompt && fx->n_greedy == N_GEN && lf;
    CHECK(ok, "%s: malformed expected.json", path);
    if (ok) {
        size_t cnt = (size_t)fx->n_prompt * fx->vocab;
        fx->logits = read_floats(fx->dir, lf, cnt);
        CHECK(fx->logits != NULL, "%s/%s: missing or not %zu floats", fx->dir, lf, cnt);
        if (nf) {
            fx->logits_native = read_floats(fx->dir, nf, cnt);
            CHECK(fx->logits_native != NULL, "%s/%s: missing or not %zu floats", fx->dir, nf, cnt);
        }
        ok = fx->logits != NULL;
    }
    json_decref(root);
    return ok ? 0 : -1;
}

static void free_fixture(struct fixture *fx) {
    free(fx->prompt);
    free(fx->greedy);
    free(fx->greedy_native);
    free(fx->logits);
    free(fx->logits_native);
}

/* max over rows of max|a-b| / max|ref| (per-row scale); worst row in *row */
static double rel_err_rows(const float *a, const float *b, const float *ref, int rows, int V, int *row) {
    double worst = 0;
    *row = 0;
    for (int r = 0; r < rows; r++) {
        double scale = 0, e = 0;
        for (int i = 0; i < V; i++) {
            double d = fabs((double)a[(size_t)r * V + i] - b[(size_t)r * V + i]);
            if (!(d <= e)) e = d; /* NaN propagates */
            double m = fabs(ref[(size_t)r * V + i]);
            if (m > scale) scale = m;
        }
        double rel = e / (scale > 0 ? scale : 1);
        if (!(rel <= worst)) {
            worst = rel;
            *row = r;
        }
    }
    return worst;
}

static void run_config(const struct fixture *fx, r1_model_t *model, const struct config *cf) {
    const int V = fx->vocab, n = fx->n_prompt;
    char tag[256];
    snprintf(tag, sizeof tag, "%s [%s, kv %s]", fx->name, cf->backend, r1_dtype_name(cf->kv));
    r1_session_t *s = r1_session_new(model, &(struct r1_session_opts){
                                                .n_ctx = N_CTX,
                                                .backend = cf->backend,
                                                .n_threads = 2,
                                                .kv_dtype = cf->kv,
                                            });
    CHECK(s != NULL, "%s: r1_session_new: %s", tag, r1_last_error());
    if (!s) return;
    CHECK(!strcmp(r1_session_backend(s), cf->backend), "%s: backend is '%s'", tag, r1_session_backend(s));
    CHECK(r1_session_n_past(s) == 0, "%s: new session n_past %d", tag, r1_session_n_past(s));

    float *all = calloc((size_t)n * V, sizeof *all);
    float *chunked = calloc((size_t)n * V, sizeof *chunked);
    float *steps = calloc((size_t)N_GEN * V, sizeof *steps); /* decode-step logits */
    float *replay = calloc((size_t)N_GEN * V, sizeof *replay);
    int32_t got[N_GEN];
    /* an f16 cache may be read back (rounded) by one path and not the other */
    const double replay_tol = cf->kv == R1_DTYPE_F32 ? LOGIT_TOL_REPLAY : cf->tol;

    /* 1. one-shot prefill: every prompt position against HF */
    const float *last = r1_session_forward(s, fx->prompt, n, all);
    CHECK(last != NULL, "%s: prefill: %s", tag, r1_last_error());
    if (!last) goto out;
    CHECK(r1_session_n_past(s) == n, "%s: n_past %d after prefill of %d", tag, r1_session_n_past(s), n);
    CHECK(!memcmp(last, all + (size_t)(n - 1) * V, sizeof *last * V),
          "%s: returned logits differ from the last row of all_logits", tag);
    int row;
    double err = rel_err_rows(all, fx->logits, fx->logits, n, V, &row);
    printf("%-34s prefill max rel err %.3g (pos %d), %s %.0e: %s\n", tag, err, row, cf->tol_name, cf->tol,
           err <= cf->tol ? "ok" : "FAIL");
    CHECK(err <= cf->tol, "%s: prefill logits at position %d: max|err|/max|hf| = %.3g > %s = %.0e", tag, row, err,
          cf->tol_name, cf->tol);
    if (fx->logits_native) {
        int agree = 0, agree_hf = 0;
        for (int r = 0; r < n; r++) {
            int a = argmax(fx->logits_native + (size_t)r * V, V);
            agree += argmax(all + (size_t)r * V, V) == a;
            agree_hf += argmax(fx->logits + (size_t)r * V, V) == a;
        }
        double fr = (double)agree / n;
        printf("%-34s top-1 agreement with HF native %s: %.3f (HF f32-compute vs native: %.3f)\n", tag, fx->dtype, fr,
               (double)agree_hf / n);
        CHECK(fr >= NATIVE_TOP1_MIN, "%s: top-1 agreement with native %s only %.3f", tag, fx->dtype, fr);
    }

    /* 2. greedy decode, one token at a time */
    memcpy(steps, last, sizeof *steps * V);
    int mismatch = -1;
    for (int i = 0; i < N_GEN; i++) {
        got[i] = argmax(steps + (size_t)i * V, V);
        if (got[i] != fx->greedy[i] && mismatch < 0) mismatch = i;
        if (i == N_GEN - 1) break;
        const float *l = r1_session_forward(s, &got[i], 1, NULL);
        CHECK(l != NULL, "%s: decode step %d: %s", tag, i, r1_last_error());
        if (!l) goto out;
        memcpy(steps + (size_t)(i + 1) * V, l, sizeof *l * V);
    }
    if (mismatch >= 0) {
        const float *lg = steps + (size_t)mismatch * V;
        printf("%-34s greedy: FIRST MISMATCH at step %d: expected %d (logit %.5f), got %d "
               "(logit %.5f)\n",
               tag, mismatch, fx->greedy[mismatch], lg[fx->greedy[mismatch]], got[mismatch], lg[got[mismatch]]);
    } else {
        printf("%-34s greedy: %d/%d ids match\n", tag, N_GEN, N_GEN);
    }
    CHECK(mismatch < 0, "%s: greedy id %d: expected %d, got %d", tag, mismatch,
          mismatch >= 0 ? fx->greedy[mismatch] : 0, mismatch >= 0 ? got[mismatch] : 0);
    CHECK(r1_session_n_past(s) == n + N_GEN - 1, "%s: n_past %d after decoding, expected %d", tag, r1_session_n_past(s),
          n + N_GEN - 1);

    /* 3. truncate back to the prompt; replay the decoded ids as one batch */
    CHECK(r1_session_truncate(s, n) == 0, "%s: truncate(%d): %s", tag, n, r1_last_error());
    CHECK(r1_session_n_past(s) == n, "%s: n_past %d after truncate(%d)", tag, r1_session_n_past(s), n);
    if (r1_session_forward(s, got, N_GEN - 1, replay + V)) {
        memcpy(replay, steps, sizeof *replay * V); /* row 0 is the prefill's */
        double e = rel_err_rows(replay, steps, steps, N_GEN, V, &row);
        printf("%-34s truncate + batched replay of the decode steps: max rel err %.3g (step %d)\n", tag, e, row);
        CHECK(e <= replay_tol, "%s: replay after truncate differs at step %d by %.3g", tag, row, e);
    } else {
        CHECK(0, "%s: replay after truncate: %s", tag, r1_last_error());
    }

    /* 4. truncate into the prompt; re-forward the rest of it */
    int k = n / 3;
    CHECK(r1_session_truncate(s, k) == 0, "%s: truncate(%d): %s", tag, k, r1_last_error());
    memset(chunked, 0, sizeof *chunked * (size_t)n * V);
    memcpy(chunked, all, sizeof *chunked * (size_t)k * V);
    if (r1_session_forward(s, fx->prompt + k, n - k, chunked + (size_t)k * V)) {
        double e = rel_err_rows(chunked, all, all, n, V, &row);
        printf("%-34s truncate(%d) + re-forward of the prompt: max rel err %.3g\n", tag, k, e);
        CHECK(e <= replay_tol, "%s: re-forward after truncate(%d) differs at pos %d by %.3g", tag, k, row, e);
    } else {
        CHECK(0, "%s: re-forward after truncate: %s", tag, r1_last_error());
    }
    /* invalid truncations are refused */
    int np = r1_session_n_past(s);
    CHECK(r1_session_truncate(s, np + 1) < 0, "%s: truncate beyond n_past accepted", tag);
    CHECK(r1_session_truncate(s, -1) < 0, "%s: truncate(-1) accepted", tag);
    CHECK(r1_session_n_past(s) == np, "%s: failed truncate changed n_past", tag);

    /* 5. prefill in two chunks from an empty cache */
    CHECK(r1_session_truncate(s, 0) == 0, "%s: truncate(0): %s", tag, r1_last_error());
    int h = n / 2;
    memset(chunked, 0, sizeof *chunked * (size_t)n * V);
    const float *l1 = r1_session_forward(s, fx->prompt, h, chunked);
    const float *l2 = l1 ? r1_session_forward(s, fx->prompt + h, n - h, chunked + (size_t)h * V) : NULL;
    CHECK(l1 && l2, "%s: chunked prefill: %s", tag, r1_last_error());
    if (l1 && l2) {
        double e = rel_err_rows(chunked, all, all, n, V, &row);
        double eh = rel_err_rows(chunked, fx->logits, fx->logits, n, V, &row);
        printf("%-34s prefill in 2 chunks (%d+%d): vs one-shot %.3g, vs HF %.3g\n", tag, h, n - h, e, eh);
        CHECK(e <= replay_tol, "%s: 2-chunk prefill differs from one-shot at pos %d by %.3g", tag, row, e);
        CHECK(eh <= cf->tol, "%s: 2-chunk prefill vs HF %.3g > %s", tag, eh, cf->tol_name);
    }
out:
    free(all);
    free(chunked);
    free(steps);
    free(replay);
    r1_session_free(s);
}

/* Weights converted at load (--dtype): run prompt + HF greedy ids as one
 * batch on the cpu backend and count positions whose argmax equals the
 * f32-weight model's. */
static void run_quantized(const struct fixture *fx) {
    static const struct top1_limit {
        enum r1_dtype dt;
        const char *limit_name;
        double limit;
    } QR[] = {{R1_DTYPE_BF16, "TOP1_MIN_BF16", TOP1_MIN_BF16},
              {R1_DTYPE_Q8_0, "TOP1_MIN_Q8_0", TOP1_MIN_Q8_0},
              {R1_DTYPE_Q4_0, "TOP1_MIN_Q4_0", TOP1_MIN_Q4_0}},
      QT[] = {{R1_DTYPE_BF16, "TOP1_MIN_TRAINED_BF16", TOP1_MIN_TRAINED_BF16},
              {R1_DTYPE_Q8_0, "TOP1_MIN_TRAINED_Q8_0", TOP1_MIN_TRAINED_Q8_0},
              {R1_DTYPE_Q4_0, "TOP1_MIN_TRAINED_Q4_0", TOP1_MIN_TRAINED_Q4_0}};
    const struct top1_limit *Q = fx->trained ? QT : QR;
    int n = fx->n_prompt + fx->n_greedy - 1, V = fx->vocab;
    int32_t *ids = malloc((size_t)n * sizeof *ids);
    memcpy(ids, fx->prompt, (size_t)fx->n_prompt * sizeof *ids);
    memcpy(ids + fx->n_prompt, fx->greedy, (size_t)(fx->n_greedy - 1) * sizeof *ids);
    float *base = malloc((size_t)n * V * sizeof(float)), *q = malloc((size_t)n * V * sizeof(float));
    int have_base = 0;
    for (int k = -1; k < (int)(sizeof QR / sizeof QR[0]); k++) {
        enum r1_dtype dt = k < 0 ? R1_DTYPE_F32 : Q[k].dt;
        r1_model_t *m = r1_model_load(fx->dir, &(struct r1_load_opts){.dtype = dt});
        if (!m) {
            printf("%-34s --dtype %s: not applicable (%s)\n", fx->name, r1_dtype_name(dt), r1_last_error());
            if (k < 0) break;
            continue;
        }
        r1_session_t *s = r1_session_new(
            m, &(struct r1_session_opts){.n_ctx = N_CTX, .backend = "cpu", .n_threads = 2, .kv_dtype = R1_DTYPE_F32});
        CHECK(s && r1_session_forward(s, ids, n, k < 0 ? base : q), "%s --dtype %s: %s", fx->name, r1_dtype_name(dt),
              r1_last_error());
        if (k < 0) {
            have_base = s != NULL;
        } else if (have_base && s) {
            int agree = 0;
            double maxrel = 0;
            for (int i = 0; i < n; i++) {
                agree += argmax(q + (size_t)i * V, V) == argmax(base + (size_t)i * V, V);
                double mx = 0, md = 0;
                for (int j = 0; j < V; j++) {
                    mx = fmax(mx, fabs(base[(size_t)i * V + j]));
                    md = fmax(md, fabs(base[(size_t)i * V + j] - q[(size_t)i * V + j]));
                }
                maxrel = fmax(maxrel, md / mx);
            }
            double frac = (double)agree / n;
            printf("%-34s --dtype %-5s teacher-forced top-1 vs f32 weights: %d/%d = %.3f (%s %.2f), "
                   "max logit err %.3f of max|logit|\n",
                   fx->name, r1_dtype_name(dt), agree, n, frac, Q[k].limit_name, Q[k].limit, maxrel);
            CHECK(frac >= Q[k].limit, "%s --dtype %s: top-1 agreement %.3f < %s %.2f", fx->name, r1_dtype_name(dt),
                  frac, Q[k].limit_name, Q[k].limit);
        }
        r1_session_free(s);
        r1_model_free(m);
    }
    free(ids);
    free(base);
    free(q);
}

static int cmp_str(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

int main(void) {
    char *names[64];
    int nn = 0;
    DIR *d = opendir(FIXTURE_DIR);
    CHECK(d != NULL, "cannot open %s (run the tests from the repo root)", FIXTURE_DIR);
    if (!d) return TEST_DONE("test_fixtures");
    struct dirent *e;
    while ((e = readdir(d)) && nn < 64) {
        if (e->d_name[0] == '.') continue;
        char p[1024];
        struct stat st;
        snprintf(p, sizeof p, "%s/%s/config.json", FIXTURE_DIR, e->d_name); /* a checkpoint */
        if (stat(p, &st) != 0) continue;
        snprintf(p, sizeof p, "%s/%s/expected.json", FIXTURE_DIR, e->d_name);
        if (stat(p, &st) == 0) names[nn++] = strdup(e->d_name);
    }
    closedir(d);
    qsort(names, nn, sizeof *names, cmp_str);
    CHECK(nn >= 3, "only %d fixtures in %s (tools/make_fixtures.py makes them)", nn, FIXTURE_DIR);

    for (int f = 0; f < nn; f++) {
        struct fixture fx;
        if (load_fixture(names[f], &fx) == 0) {
            r1_model_t *m = r1_model_load(fx.dir, &(struct r1_load_opts){.dtype = R1_DTYPE_AUTO});
            CHECK(m != NULL, "%s: r1_model_load: %s", fx.dir, r1_last_error());
            if (m) {
                const struct r1_config *c = r1_model_config(m);
                CHECK(c->vocab == fx.vocab, "%s: vocab %d, expected %d", fx.name, c->vocab, fx.vocab);
                if (fx.arch[0])
                    CHECK(!strcmp(r1_arch_name(c->arch), fx.arch), "%s: architecture %s, expected %s", fx.name,
                          r1_arch_name(c->arch), fx.arch);
                if (fx.rope_theta > 0)
                    CHECK(fabs(c->rope_theta - fx.rope_theta) <= 1e-6 * fx.rope_theta, "%s: rope_theta %g, expected %g",
                          fx.name, c->rope_theta, fx.rope_theta);
                if (fx.tied >= 0) CHECK(c->tied == fx.tied, "%s: tied %d, expected %d", fx.name, c->tied, fx.tied);
                const char *want = !strcmp(fx.dtype, "float32")    ? "f32"
                                   : !strcmp(fx.dtype, "bfloat16") ? "bf16"
                                   : !strcmp(fx.dtype, "float16")  ? "f16"
                                                                   : "?";
                CHECK(!strcmp(r1_dtype_name(c->file_dtype), want), "%s: file dtype %s, expected %s", fx.name,
                      r1_dtype_name(c->file_dtype), want);
                CHECK(!strcmp(r1_dtype_name(r1_model_dtype(m)), want), "%s: loaded with dtype AUTO as %s, expected %s",
                      fx.name, r1_dtype_name(r1_model_dtype(m)), want);
                printf("%s: dim %d, %d layers, %d/%d heads, head_dim %d, ffn %d, vocab %d, "
                       "theta %g, tied %d, %s\n",
                       fx.name, c->dim, c->n_layer, c->n_head, c->n_kv_head, c->head_dim, c->ffn, c->vocab,
                       c->rope_theta, c->tied, r1_dtype_name(r1_model_dtype(m)));
                for (size_t i = 0; i < sizeof CONFIGS / sizeof CONFIGS[0]; i++) run_config(&fx, m, &CONFIGS[i]);
                r1_model_free(m);
                run_quantized(&fx);
            }
        }
        free_fixture(&fx);
        free(names[f]);
    }
    return TEST_DONE("test_fixtures");
}
