/*
 * cmd_perplexity.c - `r1infer perplexity`: a text's perplexity under the
 * model, scored in windows as llama.cpp's perplexity tool scores it, and the
 * KL divergence of this run against a saved reference run (--kld-base
 * writes one, --kld compares with one). The scoring is src/eval/.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli/cli.h"
#include "cli/opts.h"
#include "eval/eval.h"
#include "util/util.h"

#define DEFAULT_CTX 512

static void help(FILE *f) {
    fprintf(f,
            "usage: r1infer perplexity [-m MODEL] -f TEXT [--ctx 512] [--chunks N] [options]\n"
            "Tokenizes TEXT and scores it in back-to-back windows of --ctx tokens, each from an\n"
            "empty cache; the second half of each window is scored, so every scored token has\n"
            "at least ctx/2 tokens of context (llama.cpp's perplexity tool scores the same way).\n"
            "Prints PPL +/- its standard error, the tokens scored and the speed.\n"
            "  -f, --file TEXT        the text (UTF-8; any bytes are accepted)\n"
            "  -c, --ctx N            window length in tokens (default 512)\n"
            "  --chunks N             score only the first N windows (default: all that fit)\n"
            "  --kld-base FILE        save this run's log-probabilities as the reference\n"
            "  --kld-top K            ... the K most likely tokens per position and the rest's mass\n"
            "                         (default %d); 0 = the full distributions (vocab x 4 bytes each)\n"
            "  --kld FILE             compare with a saved reference: KL divergence (mean, 99th\n"
            "                         percentile), top-1 agreement, change of the correct token's p\n"
            "  --json                 print the results as one JSON object on stdout\n",
            EVAL_KLD_DEFAULT_TOP);
    cli_opts_help(f, CLI_OPT_MODEL | CLI_OPT_PROFILE);
}

static const char *const ppl_flags[] = {"-f",    "--file", "--chunks", "--kld-base", "--kld-top",
                                        "--kld", "--json", "--help",   NULL};

struct rows {
    struct eval_kld_writer *w;
    struct eval_kld_reader *r;
    struct eval_kld_stats st;
};

static int on_row(void *ctx, const float *logits, int32_t target, double lse) {
    struct rows *x = ctx;
    if (x->w) return eval_kld_put(x->w, logits, target, lse);
    if (x->r) return eval_kld_next(x->r, &x->st, logits, target, lse);
    return 0;
}

int cmd_perplexity(int argc, char **argv) {
    struct cli_opts o;
    cli_opts_init(&o, "perplexity");
    o.groups = CLI_OPT_MODEL | CLI_OPT_CTX | CLI_OPT_PROFILE; /* no sampling: every token is scored */
    const char *file = NULL, *kld_base = NULL, *kld = NULL;
    int chunks = 0, top_k = EVAL_KLD_DEFAULT_TOP, json = 0;
    for (int i = 1; i < argc; i++) {
        int r = cli_opts_take(&o, argc, argv, &i);
        if (r < 0) return 2;
        if (r) continue;
        const char *a = argv[i];
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
            help(stdout);
            return 0;
        } else if (!strcmp(a, "--json")) json = 1;
        else if (i + 1 < argc && (!strcmp(a, "-f") || !strcmp(a, "--file"))) file = argv[++i];
        else if (i + 1 < argc && !strcmp(a, "--kld-base")) kld_base = argv[++i];
        else if (i + 1 < argc && !strcmp(a, "--kld")) kld = argv[++i];
        else if (i + 1 < argc && (!strcmp(a, "--chunks") || !strcmp(a, "--kld-top"))) {
            long v;
            if (cli_int("perplexity", a, argv[++i], 0, 1 << 24, &v)) return 2;
            if (!strcmp(a, "--chunks")) chunks = (int)v;
            else top_k = (int)v;
        } else {
            for (int k = 0; ppl_flags[k]; k++)
                if (!strcmp(a, ppl_flags[k])) { /* taken above unless its value is missing */
                    fprintf(stderr, "r1infer perplexity: %s needs a value\n", a);
                    return 2;
                }
            return cli_unknown("perplexity", a, ppl_flags, o.groups);
        }
    }
    if (!file) {
        fprintf(stderr, "r1infer perplexity: give the text with -f FILE\n");
        return 2;
    }
    if (kld_base && kld) {
        fprintf(stderr, "r1infer perplexity: --kld-base writes a reference and --kld compares with one: "
                        "give one of them\n");
        return 2;
    }
    if (!o.model && !(o.model = cli_default_model("perplexity"))) return 1;
    if (o.n_ctx == 0) o.n_ctx = DEFAULT_CTX;

    size_t len = 0;
    char *text = r1_file_read(file, &len);
    if (!text) {
        fprintf(stderr, "r1infer perplexity: %s\n", r1_last_error());
        return 1;
    }
    if (len == 0) {
        fprintf(stderr, "r1infer perplexity: %s is empty: there is nothing to score\n", file);
        free(text);
        return 1;
    }
    int rc = 1;
    r1_model_t *m = NULL;
    r1_session_t *s = NULL;
    int32_t *ids = NULL;
    struct rows rows = {0};
    r1_tokenizer_t *tok = r1_tokenizer_load(o.model);
    if (!tok) {
        fprintf(stderr, "r1infer perplexity: %s\n", r1_last_error());
        goto out;
    }
    int n = r1_tokenizer_encode(tok, text, len, 1, &ids);
    struct eval_windows w;
    if (n < 0 || eval_windows_plan(n, o.n_ctx, chunks, &w)) {
        fprintf(stderr, "r1infer perplexity: %s: %s\n", file, r1_last_error());
        goto out;
    }
    if (cli_open(&o, &m, &s)) goto out;
    const int vocab = r1_model_config(m)->vocab;
    struct eval_kld_head head = {.vocab = (uint32_t)vocab,
                                 .ctx = (uint32_t)w.ctx,
                                 .first = (uint32_t)w.first,
                                 .n_chunks = (uint32_t)w.n_chunks,
                                 .top_k = (uint32_t)top_k,
                                 .ids_hash = eval_hash_ids(ids, (size_t)w.n_chunks * w.ctx)};
    if (kld_base && !(rows.w = eval_kld_create(kld_base, &head))) {
        fprintf(stderr, "r1infer perplexity: %s\n", r1_last_error());
        goto out;
    }
    if (kld) {
        struct eval_kld_head bh;
        if (!(rows.r = eval_kld_open(kld, &bh)) || eval_kld_check(&bh, &head, kld)) {
            fprintf(stderr, "r1infer perplexity: %s\n", r1_last_error());
            goto out;
        }
    }
    fprintf(stderr, "perplexity: %s, %s weights, %d tokens; %d windows of %d, the last %d tokens of each scored\n",
            file, r1_dtype_name(r1_model_dtype(m)), n, w.n_chunks, w.ctx, w.ctx - 1 - w.first);
    struct eval_ppl r;
    int prc = eval_perplexity(s, vocab, ids, &w, json ? 0 : isatty(2) ? 1 : 2, on_row, &rows, &r);
    if (prc) {
        fprintf(stderr, "\nr1infer perplexity: %s\n", r1_last_error());
        goto out;
    }
    if (rows.w) {
        struct eval_kld_writer *kw = rows.w;
        rows.w = NULL;
        if (eval_kld_close(kw)) {
            fprintf(stderr, "r1infer perplexity: %s\n", r1_last_error());
            goto out;
        }
    }
    double tps = r.secs > 0 ? r.evaluated / r.secs : 0;
    struct eval_kld_summary ks = {0};
    if (rows.r) eval_kld_summarize(&rows.st, &ks);
    if (json) {
        printf("{\"model\": \"%s\", \"dtype\": \"%s\", \"ctx\": %d, \"chunks\": %d, \"tokens\": %d, "
               "\"scored\": %ld, \"ppl\": %.6f, \"ppl_err\": %.6f, \"nll\": %.9f, \"evaluated\": %ld, "
               "\"secs\": %.3f, \"tok_s\": %.2f",
               o.model, r1_dtype_name(r1_model_dtype(m)), w.ctx, w.n_chunks, n, r.count, r.ppl, r.err, r.nll / r.count,
               r.evaluated, r.secs, tps);
        if (rows.r)
            printf(", \"kld\": {\"mean\": %.8f, \"mean_err\": %.8f, \"p99\": %.8f, \"median\": %.8f, \"max\": %.6f, "
                   "\"same_top\": %.6f, \"same_top_err\": %.6f, \"mean_dp\": %.8f, \"mean_dp_err\": %.8f, "
                   "\"rms_dp\": %.8f, \"ppl_base\": %.6f}",
                   ks.mean_kld, ks.mean_kld_err, ks.p99_kld, ks.median_kld, ks.max_kld, ks.same_top, ks.same_top_err,
                   ks.mean_dp, ks.mean_dp_err, ks.rms_dp, ks.ppl_base);
        printf("}\n");
    } else {
        printf("PPL = %.4f +/- %.5f\n", r.ppl, r.err);
        printf("tokens scored: %ld (%d windows of %d, the last %d of each)\n", r.count, w.n_chunks, w.ctx,
               w.ctx - 1 - w.first);
        printf("speed: %.1f tok/s (%ld tokens evaluated in %.2f s)\n", tps, r.evaluated, r.secs);
        if (kld_base) printf("saved the log-probabilities (top %d) to %s\n", top_k, kld_base);
        if (rows.r) {
            printf("KL divergence vs %s (base PPL %.4f):\n", kld, ks.ppl_base);
            printf("  mean KLD:     %.6f +/- %.6f\n", ks.mean_kld, ks.mean_kld_err);
            printf("  99%% KLD:      %.6f   (median %.6f, max %.6f)\n", ks.p99_kld, ks.median_kld, ks.max_kld);
            printf("  same top-1:   %.3f%% +/- %.3f%%\n", 100 * ks.same_top, 100 * ks.same_top_err);
            printf("  mean dp:      %.4f%% +/- %.4f%%   (p_run - p_base of the correct token)\n", 100 * ks.mean_dp,
                   100 * ks.mean_dp_err);
            printf("  RMS dp:       %.4f%%\n", 100 * ks.rms_dp);
        }
    }
    rc = 0;
out:
    if (rows.w) eval_kld_close(rows.w);
    eval_kld_free(rows.r);
    eval_kld_stats_free(&rows.st);
    free(ids);
    free(text);
    r1_tokenizer_free(tok);
    r1_session_free(s);
    r1_model_free(m);
    return rc;
}
