/*
 * spec_bench.c - `r1infer bench --spec`: plain against speculative decoding
 * in one run, on the same prompts, model and threads. For each prompt: plain
 * greedy decoding of n tokens (timed), then speculative decoding with each
 * draft setting asked for (timed), its text checked against plain's, its
 * statistics (drafted, accepted, tokens per target step) and its speedup
 * printed. Draft sources: n-gram lookup, a draft model, or a synthetic
 * draft whose tokens are forced right or wrong (--oracle: the draft model
 * still runs, so its cost is what is measured).
 *
 * Timing shares the machine politely when R1_BENCH_LOCK names a lock file:
 * the models load under a shared flock, the timed decoding runs under an
 * exclusive one.
 */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <unistd.h>

#include "util/env.h"
#include "bench/bench.h"
#include "model/model.h"
#include "runtime/job.h"
#include "util/util.h"

#define MAX_PROMPTS 16
#define MAX_SETTINGS 16

static r1_model_t *load(const char *path, const char *synth, enum r1_dtype dt, int vocab, uint64_t seed) {
    if (path) return r1_model_load(path, &(struct r1_load_opts){.dtype = dt, .progress = isatty(2)});
    struct r1_config cfg;
    if (r1_synth_config(synth, &cfg)) return NULL;
    if (vocab > 0) cfg.vocab = vocab; /* a draft shares the target's id range */
    fprintf(stderr, "generating the synthetic %s model in memory (vocab %d)\n", synth, cfg.vocab);
    return r1_model_synthetic(&cfg, dt, seed, isatty(2));
}

/* Greedy (or sampled) decoding of up to n tokens after ids; stops at a stop
 * id unless ignore_eos. Returns tokens made, *secs the decode time. */
static int decode(r1_session_t *s, r1_spec_t **spp, r1_session_t *ds, const struct spec_bench_opts *o,
                  const struct r1_spec_opts *so, const int32_t *ids, int n_ids, int n, const int32_t *stop, int n_stop,
                  int32_t *out, double *secs, struct r1_spec_stats *st) {
    const int V = r1_session_vocab(s);
    r1_session_truncate(s, 0);
    r1_sampler_t *smp = r1_sampler_new(&o->sp, V);
    float *logits = malloc((size_t)V * sizeof(float));
    int made = 0;
    if (!smp || !logits) goto out;
    for (int i = 0; i < n_ids; i++) r1_sampler_accept(smp, ids[i]);
    const float *l = r1_session_forward(s, ids, n_ids, NULL);
    if (!l) goto out;
    r1_spec_t *sp = NULL;
    if (so) {
        sp = r1_spec_new(s, ds, smp, so);
        if (!sp || r1_spec_begin(sp, ids, n_ids, l)) {
            r1_spec_free(sp);
            goto out;
        }
        *spp = sp;
    }
    memcpy(logits, l, (size_t)V * sizeof(float));
    double t0 = r1_now();
    int done = 0;
    while (made < n && !done) {
        const int32_t *got;
        int32_t one;
        int k;
        if (sp) {
            k = r1_spec_step(sp, &got);
            if (k < 0) break;
        } else {
            one = r1_sampler_sample(smp, logits);
            got = &one, k = 1;
        }
        for (int i = 0; i < k && made < n; i++) {
            for (int j = 0; j < n_stop && !o->ignore_eos; j++) done |= got[i] == stop[j];
            if (done) break;
            out[made++] = got[i];
        }
        if (sp || done || made == n) continue;
        if (!(l = r1_session_forward(s, &one, 1, NULL))) break;
        memcpy(logits, l, (size_t)V * sizeof(float));
    }
    *secs = r1_now() - t0;
    if (sp) r1_spec_get_stats(sp, st);
    r1_spec_free(sp);
    *spp = NULL;
out:
    free(logits);
    r1_sampler_free(smp);
    return made;
}

static char *read_text(const char *path) {
    FILE *f = fopen(path, "rb");
    if (!f) {
        r1_err("cannot open %s", path);
        return NULL;
    }
    char *buf = malloc(1 << 20);
    size_t n = buf ? fread(buf, 1, (1 << 20) - 1, f) : 0;
    fclose(f);
    if (buf) buf[n] = 0;
    return buf;
}

static int lock_fd = -1;
static void lock(int how) {
    if (lock_fd >= 0) flock(lock_fd, how);
}

int bench_spec_run(const struct spec_bench_opts *o) {
    const char *lp = r1_env("R1_BENCH_LOCK");
    if (lp && *lp) lock_fd = open(lp, O_RDONLY | O_CREAT, 0644);
    lock(LOCK_SH);
    int rc = 1;
    r1_model_t *m = NULL, *dm = NULL;
    r1_session_t *s = NULL, *ds = NULL;
    r1_tokenizer_t *tok = NULL;
    int32_t *pids[MAX_PROMPTS] = {0}, *plain_out = NULL, *spec_out = NULL;
    int n_pids[MAX_PROMPTS] = {0}, np = 0;
    const char *pname[MAX_PROMPTS];
    m = load(o->model, o->synthetic, o->dtype, 0, 1);
    if (!m) goto fail;
    const int V = r1_model_config(m)->vocab;
    if (o->draft || o->draft_synthetic) {
        dm = load(o->draft, o->draft_synthetic, o->dtype, o->draft_synthetic ? V : 0, 2);
        if (!dm) goto fail;
    }
    if (o->model) tok = r1_tokenizer_load(o->model);
    if (dm) {
        r1_tokenizer_t *dtok = tok && o->draft ? r1_tokenizer_load(o->draft) : NULL;
        int warn = 0;
        if (r1_spec_check_draft(m, tok, dm, dtok, &warn)) {
            r1_tokenizer_free(dtok);
            goto fail;
        }
        r1_tokenizer_free(dtok);
        if (warn) fprintf(stderr, "warning: the draft model reads more bytes per token than the target\n");
    }
    struct r1_session_opts so = {
        .n_ctx = 2048, .backend = o->backend, .n_threads = o->n_threads, .kv_dtype = o->kv_dtype};
    s = r1_session_new(m, &so);
    if (!s || (dm && !(ds = r1_session_new(dm, &so)))) goto fail;
    /* prompts: files through the chat template, else a synthetic id list */
    for (int i = 0; i < o->n_prompt_files && np < MAX_PROMPTS; i++) {
        if (!tok) {
            r1_err("--prompt-file needs a model with a tokenizer");
            goto fail;
        }
        char *text = read_text(o->prompt_files[i]);
        if (!text) goto fail;
        struct r1_chat_msg msg = {"user", text};
        char *chat = r1_chat_apply(tok, &msg, 1, 1);
        free(text);
        if (!chat) goto fail;
        n_pids[np] = r1_tokenizer_encode(tok, chat, strlen(chat), 0, &pids[np]);
        free(chat);
        if (n_pids[np] < 0) goto fail;
        const char *slash = strrchr(o->prompt_files[i], '/');
        pname[np++] = slash ? slash + 1 : o->prompt_files[i];
    }
    if (np == 0) { /* ids 1000.. in a repeating pattern: lookup has something to find */
        pids[0] = malloc(64 * sizeof(int32_t));
        for (int i = 0; i < 64; i++) pids[0][i] = 1000 + (i * 37) % 29;
        n_pids[0] = 64, pname[0] = "synthetic ids", np = 1;
    }
    int32_t stop[4];
    int n_stop = 0;
    if (r1_model_config(m)->eos_id >= 0) stop[n_stop++] = r1_model_config(m)->eos_id;
    if (tok && r1_tokenizer_eos(tok) >= 0) stop[n_stop++] = r1_tokenizer_eos(tok);
    if (tok && r1_tokenizer_token_id(tok, "<|im_end|>") >= 0) stop[n_stop++] = r1_tokenizer_token_id(tok, "<|im_end|>");
    plain_out = malloc((size_t)o->n * sizeof(int32_t));
    spec_out = malloc((size_t)o->n * sizeof(int32_t));
    if (!plain_out || !spec_out) goto fail;
    printf("speculative decoding: %s%s%s, %s, %d threads, %d tokens per prompt, %s\n",
           o->model ? o->model : "synthetic ", o->model ? "" : o->synthetic,
           dm ? (o->draft ? " + draft model" : " + synthetic draft") : "", r1_dtype_name(r1_model_dtype(m)),
           o->n_threads > 0 ? o->n_threads : r1_physical_cores(), o->n, o->sp.temperature > 0 ? "sampled" : "greedy");
    if (dm)
        printf("draft: %s%s (%.2f GB of weights per token vs the target's %.2f GB)%s\n",
               o->draft ? o->draft : "synthetic ", o->draft ? "" : o->draft_synthetic, r1_model_decode_bytes(dm) / 1e9,
               r1_model_decode_bytes(m) / 1e9,
               o->oracle ? (o->oracle_wrong ? "; its tokens forced wrong (every draft rejected)"
                                            : "; its tokens forced to the target's (every draft kept)")
                         : "");
    printf("%-22s %-12s %8s %8s %8s %8s %7s %6s %s\n", "prompt", "draft", "tokens", "tok/s", "speedup", "accepted",
           "tok/step", "steps", "text");
    long tot_d = 0, tot_a = 0;
    int all_same = 1;
    for (int p = 0; p < np; p++) {
        r1_spec_t *unused = NULL;
        struct r1_spec_stats st;
        double ps;
        int pn = 0;
        ps = 1e30;
        for (int r = 0; r < (o->runs > 0 ? o->runs : 1); r++) { /* the fastest of runs */
            double t;
            lock(LOCK_EX);
            pn = decode(s, &unused, NULL, o, NULL, pids[p], n_pids[p], o->n, stop, n_stop, plain_out, &t, &st);
            lock(LOCK_SH);
            if (t < ps) ps = t;
        }
        if (pn <= 0) goto fail;
        printf("%-22.22s %-12s %8d %8.2f %8s %8s %7s %6s\n", pname[p], "none (plain)", pn, pn / ps, "1.00x", "", "",
               "");
        for (int k = 0; k < o->n_settings; k++) {
            struct r1_spec_opts xo = {.lookup = dm ? 0 : (o->lookup > 0 ? o->lookup : 3),
                                      .k = o->settings[k] > 0   ? o->settings[k]
                                           : o->settings[k] < 0 ? -o->settings[k]
                                                                : 0,
                                      .fixed_k = o->settings[k] > 0};
            if (o->oracle || o->wrong[k])
                xo.oracle = plain_out, xo.n_oracle = pn, xo.oracle_wrong = o->oracle_wrong || o->wrong[k];
            double ss = 1e30;
            int sn = 0;
            for (int r = 0; r < (o->runs > 0 ? o->runs : 1); r++) {
                double t;
                r1_spec_t *sp = NULL;
                struct r1_spec_stats st1 = {0};
                lock(LOCK_EX);
                sn = decode(s, &sp, ds, o, &xo, pids[p], n_pids[p], pn, stop, n_stop, spec_out, &t, &st1);
                lock(LOCK_SH);
                if (t < ss) ss = t, st = st1;
                if (sn < 0) break;
            }
            if (sn < 0) goto fail;
            int same = sn == pn && !memcmp(spec_out, plain_out, (size_t)pn * sizeof(int32_t));
            if (o->sp.temperature == 0) all_same &= same;
            char what[24];
            const char *src = xo.oracle_wrong ? (dm ? "wrong" : "lk-wrong") : dm ? "model" : "lookup";
            if (o->settings[k] > 0) snprintf(what, sizeof what, "%s k=%d", src, o->settings[k]);
            else snprintf(what, sizeof what, "%s k<=%d", src, xo.k ? xo.k : (dm ? 5 : 15));
            printf("%-22.22s %-12s %8d %8.2f %7.2fx %7.1f%% %7.2f %6ld %s\n", pname[p], what, sn, sn / ss,
                   (sn / ss) / (pn / ps), st.drafted ? 100.0 * st.accepted / st.drafted : 0.0,
                   st.steps ? (double)(st.generated - 1) / st.steps : 0.0, st.steps,
                   o->sp.temperature > 0 ? "(sampled)"
                   : same                ? "identical"
                                         : "DIFFERS");
            tot_d += st.drafted, tot_a += st.accepted;
            fflush(stdout);
        }
    }
    printf("speculative statistics: %ld drafted, %ld accepted (%.1f%%)%s\n", tot_d, tot_a,
           tot_d ? 100.0 * tot_a / tot_d : 0.0,
           o->sp.temperature > 0 ? ""
           : all_same            ? "; every greedy text identical to plain"
                                 : "; SOME TEXT DIFFERS");
    rc = all_same ? 0 : 1;
    goto out;
fail:
    fprintf(stderr, "r1infer bench --spec: %s\n", r1_last_error());
out:
    lock(LOCK_UN);
    for (int p = 0; p < np; p++) free(pids[p]);
    free(plain_out);
    free(spec_out);
    r1_tokenizer_free(tok);
    r1_session_free(ds);
    r1_session_free(s);
    r1_model_free(dm);
    r1_model_free(m);
    return rc;
}
