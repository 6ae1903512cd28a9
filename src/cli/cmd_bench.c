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
    fprintf(f,
            "usage: r1infer bench (-m MODEL | --synthetic 1.5b|7b|14b|32b|tiny) [options]\n"
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
            "                         decoding together (continuous batching), next to the bandwidth probe\n"
            "  --quick                small buffers and few tokens (for tests; figures are not meaningful)\n"
            "  --full-fill            compute every cache position before the ctx-4096 decode\n"
            "                         (default: fast-forward them, which reads the same bytes)\n");
    cli_opts_help(f);
}

int cmd_bench(int argc, char **argv) {
    struct cli_opts co;
    cli_opts_init(&co);
    co.sp.seed = 1; /* a benchmark is reproducible unless --seed says otherwise */
    struct bench_opts o = {.runs = 20};
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
        else if (!strcmp(a, "--full-fill")) o.full_fill = 1;
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
                if (end == p || v < 1 || v > BENCH_MAX_BATCH || o.n_batch == BENCH_MAX_ROWS ||
                    (*end && *end != ',')) {
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
        } else if (has && !strcmp(a, "--runs")) {
            char *end;
            long v = strtol(argv[++i], &end, 10);
            if (*end || v < 1 || v > 100000) {
                fprintf(stderr, "r1infer bench: --runs expects a number from 1 to 100000, got '%s'\n", argv[i]);
                return 2;
            }
            o.runs = (int)v;
        } else {
            fprintf(stderr, "r1infer bench: unknown option or missing value: %s\n", a);
            bench_help(stderr);
            return 2;
        }
    }
    if (co.model && o.synthetic) {
        fprintf(stderr, "r1infer bench: give a model with -m DIR|FILE.gguf, or --synthetic 1.5b (one of the two)\n");
        return 2;
    }
    if (!co.model && !o.synthetic && !(co.model = cli_default_model("bench"))) return 2;
    if (co.n_ctx) fprintf(stderr, "r1infer bench: --ctx is ignored (bench picks its contexts: 0, 512, 4096)\n");
    if (co.profile) fprintf(stderr, "r1infer bench: --profile is implied (the in-situ table)\n");
    o.model = co.model;
    o.backend = co.backend;
    o.dtype = co.dtype;
    o.kv_dtype = co.kv_dtype;
    o.n_threads = co.n_threads;
    o.sp = co.sp;
    return bench_run(&o);
}
