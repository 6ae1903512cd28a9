/*
 * cmd_bench.c - `r1infer bench`: parse the options and hand them to
 * bench_run (src/bench/). Shared options (-m, --backend, --dtype, --kv,
 * --threads, sampler flags) are parsed by opts.c like every other command.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench/bench.h"
#include "cli/cli.h"
#include "cli/opts.h"

static void bench_help(FILE *f) {
    fprintf(f, "usage: r1infer bench (-m MODEL | --synthetic 1.5b|7b|14b|32b|tiny) [options]\n"
               "Measures memory bandwidth, every kernel of a decode step alone (caches flushed),\n"
               "the in-situ kernel profile of real decode steps, and end-to-end prefill/decode\n"
               "against the bandwidth ceiling. The report goes to stdout.\n"
               "  --synthetic NAME       a random model of that shape, built in memory (no disk)\n"
               "  --runs N               timed runs per kernel, median reported (default 20)\n"
               "  --compare NAME         also run the end-to-end figures on this backend (ref: reduced plan)\n"
               "  --csv FILE             leaderboard rows (one per kernel + decode_step)\n"
               "  --json FILE            the full result\n"
               "  --svg FILE             a chart: in-situ shares and per-kernel GB/s vs bandwidth\n"
               "  --batch 1,2,4,8,16     instead: aggregate decode tok/s and step time of that many sequences\n"
               "                         decoding together (continuous batching), next to the bandwidth probe;\n"
               "                         with --profile also each kernel's ms per step at each batch size;\n"
               "                         with --depth each batch size also at those depths (every sequence\n"
               "                         that many positions deep; share of the bandwidth counts its cache)\n"
               "  --quick                small buffers and few tokens (for tests; figures are not meaningful)\n"
               "  --depth 8192,16384     also decode at these contexts (up to 5; each row's bytes per token\n"
               "                         count the KV cache it reads; capped at the model's length)\n"
               "  --full-fill            compute every cache position before the ctx-4096 decode\n"
               "                         (default: fast-forward them, which reads the same bytes)\n"
               "  --spec                 instead: plain vs speculative decoding tok/s on the same prompts\n"
               "    --lookup N / --draft MODEL / --draft-synthetic NAME   the draft source (default --lookup 3)\n"
               "    --spec-k LIST        draft settings, e.g. 2,4,8,a (a number: that k fixed; a: adaptive up\n"
               "                         to --draft-n; aK: adaptive up to K); default a\n"
               "    --oracle right|wrong force every drafted token right (kept) or wrong (rejected);\n"
               "                         a setting wK or wa in --spec-k forces its drafts wrong\n"
               "    --prompt-file FILE   a prompt (repeatable; chat template applied); default: synthetic ids\n"
               "    -n N                 tokens per prompt (default 128); --ignore-eos\n"
               "    --runs N             each figure the fastest of N runs (default 1)\n");
    cli_opts_help(f, CLI_OPT_MODEL | CLI_OPT_PROFILE | CLI_OPT_SAMPLING | CLI_OPT_SPEC);
}

static const char *const bench_flags[] = {"--synthetic",
                                          "--runs",
                                          "--compare",
                                          "--csv",
                                          "--json",
                                          "--svg",
                                          "--batch",
                                          "--quick",
                                          "--full-fill",
                                          "--spec",
                                          "--draft-synthetic",
                                          "--spec-k",
                                          "--oracle",
                                          "--prompt-file",
                                          "-n",
                                          "--n-predict",
                                          "--ignore-eos",
                                          "--help",
                                          NULL};

int cmd_bench(int argc, char **argv) {
    struct cli_opts co;
    cli_opts_init(&co, "bench");
    co.sp.seed = 1; /* a benchmark is reproducible unless --seed says otherwise */
    struct bench_opts o = {.runs = 20};
    struct spec_bench_opts so = {.n = 128};
    int spec = 0, runs_given = 0;
    for (int i = 1; i < argc; i++) {
        int r = cli_opts_take(&co, argc, argv, &i);
        if (r < 0) return 2;
        if (r) continue;
        const char *a = argv[i];
        int has = i + 1 < argc;
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
            bench_help(stdout);
            return 0;
        } else if (!strcmp(a, "--quick")) o.quick = 1;
        else if (!strcmp(a, "--spec")) spec = 1;
        else if (!strcmp(a, "--ignore-eos")) so.ignore_eos = 1;
        else if (has && !strcmp(a, "--draft-synthetic")) so.draft_synthetic = argv[++i];
        else if (has && (!strcmp(a, "-n") || !strcmp(a, "--n-predict"))) {
            long v;
            if (cli_int("bench", a, argv[++i], 1, 1 << 20, &v)) return 2;
            so.n = (int)v;
        } else if (has && !strcmp(a, "--prompt-file") && so.n_prompt_files < 16)
            so.prompt_files[so.n_prompt_files++] = argv[++i];
        else if (has && !strcmp(a, "--oracle")) {
            const char *v = argv[++i];
            so.oracle = 1, so.oracle_wrong = !strcmp(v, "wrong");
            if (strcmp(v, "right") && strcmp(v, "wrong")) {
                fprintf(stderr, "r1infer bench: --oracle is right or wrong, got '%s'\n", v);
                return 2;
            }
        } else if (has && !strcmp(a, "--spec-k")) {
            char buf[256];
            snprintf(buf, sizeof buf, "%s", argv[++i]);
            for (char *t = strtok(buf, ","); t && so.n_settings < MAX_SPEC_SETTINGS; t = strtok(NULL, ",")) {
                int wrong = t[0] == 'w'; /* wK, wa: this setting's drafts forced wrong */
                const char *u = t + wrong;
                const char *num = u + (u[0] == 'a');
                char *end = (char *)num;
                long k = *num ? strtol(num, &end, 10) : 0;
                if (u[0] == 'a') k = -k;
                if (*end || (u[0] != 'a' && end == num) || k > R1_SPEC_MAX_K || k < -R1_SPEC_MAX_K ||
                    (u[0] != 'a' && k < 1)) {
                    fprintf(stderr,
                            "r1infer bench: --spec-k takes 1..%d or a or aK (w before: forced wrong), got '%s'\n",
                            R1_SPEC_MAX_K, t);
                    return 2;
                }
                so.wrong[so.n_settings] = wrong;
                so.settings[so.n_settings++] = (int)k;
            }
        } else if (!strcmp(a, "--full-fill")) o.full_fill = 1;
        else if (has && !strcmp(a, "--synthetic")) o.synthetic = argv[++i];
        else if (has && !strcmp(a, "--compare")) o.compare = argv[++i];
        else if (has && !strcmp(a, "--csv")) o.csv = argv[++i];
        else if (has && !strcmp(a, "--json")) o.json = argv[++i];
        else if (has && !strcmp(a, "--svg")) o.svg = argv[++i];
        else if (has && !strcmp(a, "--batch")) {
            const char *p = argv[++i];
            o.n_batch = 0;
            for (;;) {
                char *end;
                long v = strtol(p, &end, 10);
                if (end == p || v < 1 || v > BENCH_MAX_BATCH || o.n_batch == BENCH_MAX_ROWS || (*end && *end != ',')) {
                    fprintf(stderr,
                            "r1infer bench: --batch expects up to %d sizes from 1 to %d separated by commas, "
                            "got '%s'\n",
                            BENCH_MAX_ROWS, BENCH_MAX_BATCH, argv[i]);
                    return 2;
                }
                o.batch[o.n_batch++] = (int)v;
                if (!*end) break;
                p = end + 1;
            }
        } else if (has && !strcmp(a, "--depth")) {
            const int cap = (int)(sizeof o.depth / sizeof o.depth[0]);
            const char *p = argv[++i];
            o.n_depth = 0;
            for (;;) {
                char *end;
                long v = strtol(p, &end, 10);
                if (end == p || v < 1 || v > (1 << 24) || o.n_depth == cap || (*end && *end != ',')) {
                    fprintf(stderr,
                            "r1infer bench: --depth expects up to %d contexts from 1 to %d separated by commas, "
                            "got '%s'\n",
                            cap, 1 << 24, argv[i]);
                    return 2;
                }
                o.depth[o.n_depth++] = (int)v;
                if (!*end) break;
                p = end + 1;
            }
        } else if (has && !strcmp(a, "--runs")) {
            long v;
            if (cli_int("bench", a, argv[++i], 1, 100000, &v)) return 2;
            o.runs = (int)v;
            runs_given = 1;
        } else {
            /* a flag of this command not taken above lacks its value (or is a 17th --prompt-file) */
            for (int k = 0; bench_flags[k]; k++)
                if (!strcmp(a, bench_flags[k])) {
                    fprintf(stderr, "r1infer bench: %s %s\n", a, has ? "at most 16 times" : "needs a value");
                    return 2;
                }
            return cli_unknown("bench", a, bench_flags, co.groups);
        }
    }
    if (spec) {
        so.model = co.model, so.synthetic = o.synthetic, so.draft = co.draft;
        if (!so.model && !so.synthetic && !(so.model = cli_default_model("bench"))) return 2;
        so.backend = co.backend, so.dtype = co.dtype, so.kv_dtype = co.kv_dtype;
        so.n_threads = co.n_threads, so.lookup = co.lookup, so.sp = co.sp;
        if (!co.seed_set) so.sp.seed = 1;
        so.runs = runs_given ? o.runs : 1;
        int temp_given = 0; /* greedy unless --temp says otherwise: the texts must match */
        for (int i = 1; i < argc; i++) temp_given |= !strcmp(argv[i], "--temp");
        if (!temp_given) so.sp.temperature = 0;
        if (so.n < 1) so.n = 1;
        if (!so.n_settings) so.settings[so.n_settings++] = co.draft_n ? -co.draft_n : 0;
        return bench_spec_run(&so);
    }
    if (co.model && o.synthetic) {
        fprintf(stderr, "r1infer bench: give a model with -m DIR|FILE.gguf, or --synthetic 1.5b (one of the two)\n");
        return 2;
    }
    if (!co.model && !o.synthetic && !(co.model = cli_default_model("bench"))) return 2;
    if (co.n_ctx)
        fprintf(stderr, "r1infer bench: --ctx is ignored (bench decodes at 0, 512, 4096 and the --depth contexts)\n");
    if (co.profile && !o.n_batch) fprintf(stderr, "r1infer bench: --profile is implied (the in-situ table)\n");
    o.profile = co.profile;
    o.model = co.model;
    o.backend = co.backend;
    o.dtype = co.dtype;
    o.kv_dtype = co.kv_dtype;
    o.n_threads = co.n_threads;
    o.sp = co.sp;
    o.no_mmap = co.no_mmap, o.mlock = co.mlock, o.layout_cache = co.layout_cache;
    return bench_run(&o);
}
