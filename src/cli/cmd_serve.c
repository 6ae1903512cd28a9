/*
 * cmd_serve.c - `r1infer serve`: load the model once, make one session per
 * slot (src/server/sched.c) and serve the OpenAI-compatible HTTP API
 * (src/server/http.c) until SIGINT or SIGTERM. Only option parsing and
 * start-up / shut-down order live here.
 */
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util/env.h"
#include "cli/cli.h"
#include "cli/opts.h"
#include "runtime/comm.h"
#include "server/server.h"
#include "util/util.h"

static void serve_help(FILE *f) {
    fprintf(f, "usage: r1infer serve -m MODEL [options]\n"
               "OpenAI-compatible API: POST /v1/chat/completions, POST /v1/completions (stream true|false),\n"
               "GET /v1/models, GET /health, GET /metrics (Prometheus), POST /tokenize, POST /detokenize,\n"
               "and a chat page at GET /. Every active conversation's next token is computed in one\n"
               "forward pass (continuous batching); prompts go in chunks between them.\n"
               "  --host ADDR            address to bind (default 127.0.0.1)\n"
               "  --port N               port (default 8080; 0 = any free port, printed at start)\n"
               "  --parallel N           conversations generated at once (default 4)\n"
               "  --kv-budget SIZE       memory of the KV pool all conversations share, in blocks of 64\n"
               "                         positions taken as they grow (bytes, or with K, M, G: 8G);\n"
               "                         default: N x --ctx positions, or what fits in the free memory\n"
               "  --batch-tokens N       rows in one forward pass: a decode row per busy slot plus chunks\n"
               "                         of waiting prompts (default 512; prompt rows beside decode rows:\n"
               "                         at most 128, so answers keep coming while a long prompt goes in)\n"
               "  --queue N              requests that may wait for a free slot; more get 503 (default 64)\n"
               "  --api-key KEY          require 'Authorization: Bearer KEY' on /v1/*\n"
               "  --max-body BYTES       largest request body (default 8388608); larger gets 413\n"
               "  --timeout SECS         drop connections idle this long, e.g. slow clients (default 30)\n"
               "  --max-conns N          simultaneous connections (default 256)\n"
               "  --max-conns-per-ip N   simultaneous connections of one client address (default 3/4 of\n"
               "                         --max-conns, 0 = no limit)\n"
               "  --request-deadline S   a request's headers and body must arrive within S seconds (default 30)\n"
               "  --no-access-log        no line per request on stderr\n"
               "The context (--ctx, default the model's) is the most one conversation may hold; a prefix\n"
               "another conversation computed (a system prompt, tool list, earlier turn) is shared, not\n"
               "recomputed. When every block is taken, idle caches are emptied first; if running ones hold\n"
               "them all, the youngest request ends (503 for a prompt, finish_reason length for an answer).\n"
               "The threads (-t) are the engine's, which all slots share.\n"
               "Speculative decoding (--lookup N, --draft MODEL [--draft-n K]) applies to every request\n"
               "without logprobs: each slot drafts (n-gram lookup over its prompt and output, or the draft\n"
               "model in a session of its own) and its last token + drafts are verified as rows of the\n"
               "engine's step (all slots' verifications <= 16 rows per step, within --batch-tokens);\n"
               "greedy text is the same as without. A draft model keeps the slot's last prompt and\n"
               "output cached: a follow-up runs only its new ids through it.\n"
               "The sampling options set the defaults of requests that leave a field out.\n");
    cli_opts_help(f, CLI_OPT_MODEL | CLI_OPT_CTX | CLI_OPT_SAMPLING | CLI_OPT_SPEC);
}

static const char *const serve_flags[] = {"--host",          "--port",      "--parallel",         "-np",
                                          "--batch-tokens",  "--queue",     "--api-key",          "--max-body",
                                          "--timeout",       "--max-conns", "--max-conns-per-ip", "--request-deadline",
                                          "--no-access-log", "--help",      "--kv-budget",        NULL};

static int int_arg(const char *flag, const char *v, long lo, long hi, long *out) {
    return cli_int("serve", flag, v, lo, hi, out);
}

/* A size in bytes: digits, optionally a fraction, then K, M, G or T (powers of 1024); 0 or -1 with a message. */
static int size_arg(const char *flag, const char *v, unsigned long long *out) {
    char *end;
    double x = strtod(v, &end);
    double mul = 1;
    if (*end == 'K' || *end == 'k') mul = 1024.0, end++;
    else if (*end == 'M' || *end == 'm') mul = 1024.0 * 1024, end++;
    else if (*end == 'G' || *end == 'g') mul = 1024.0 * 1024 * 1024, end++;
    else if (*end == 'T' || *end == 't') mul = 1024.0 * 1024 * 1024 * 1024, end++;
    if (*end == 'B' || *end == 'b') end++;
    if (end == v || *end || !(x > 0) || x * mul > 1e18) {
        fprintf(stderr, "r1infer serve: %s wants a size such as 4G, 512M or 1000000 (bytes), not '%s'\n", flag, v);
        return -1;
    }
    *out = (unsigned long long)(x * mul);
    return 0;
}

/* "path/to/Model/" -> "Model" (malloc'ed) */
static char *model_name(const char *path) {
    size_t n = strlen(path);
    while (n > 1 && path[n - 1] == '/') n--;
    size_t b = n;
    while (b > 0 && path[b - 1] != '/') b--;
    char *s = malloc(n - b + 1);
    if (s) {
        memcpy(s, path + b, n - b);
        s[n - b] = 0;
    }
    return s;
}

int cmd_serve(int argc, char **argv) {
    struct cli_opts o;
    cli_opts_init(&o, "serve");
    o.groups &= ~(unsigned)CLI_OPT_PROFILE; /* the engine keeps no profile */
    struct server_opts so = {.host = "127.0.0.1",
                             .port = 8080,
                             .max_body = 8u << 20,
                             .timeout_s = 30,
                             .max_conns = 256,
                             .max_conns_per_ip = ~0u,
                             .deadline_s = 30,
                             .access_log = 1};
    /* several conversations by default: an R1 answer thinks for thousands of
     * tokens, and one slot would keep every other client waiting that long */
    long parallel = 4, queue = 64, batch_tokens = 512, x;
    unsigned long long kv_budget = 0;
    for (int i = 1; i < argc; i++) {
        int r = cli_opts_take(&o, argc, argv, &i);
        if (r < 0) return 2;
        if (r) continue;
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
            serve_help(stdout);
            return 0;
        }
        if (!strcmp(a, "--no-access-log")) {
            so.access_log = 0;
            continue;
        }
        int known = 0;
        for (int k = 0; serve_flags[k]; k++) known |= !strcmp(a, serve_flags[k]);
        if (!known) return cli_unknown("serve", a, serve_flags, o.groups);
        if (!v) {
            fprintf(stderr, "r1infer serve: %s needs a value\n", a);
            return 2;
        }
        i++;
        if (!strcmp(a, "--host")) so.host = v;
        else if (!strcmp(a, "--api-key")) so.api_key = v;
        else if (!strcmp(a, "--port")) {
            if (int_arg(a, v, 0, 65535, &x)) return 2;
            so.port = (int)x;
        } else if (!strcmp(a, "--parallel") || !strcmp(a, "-np")) {
            if (int_arg(a, v, 1, 256, &parallel)) return 2;
        } else if (!strcmp(a, "--kv-budget")) {
            if (size_arg(a, v, &kv_budget)) return 2;
        } else if (!strcmp(a, "--batch-tokens")) {
            if (int_arg(a, v, 1, 65536, &batch_tokens)) return 2;
        } else if (!strcmp(a, "--queue")) {
            if (int_arg(a, v, 0, 100000, &queue)) return 2;
        } else if (!strcmp(a, "--max-body")) {
            if (int_arg(a, v, 1024, 1L << 30, &x)) return 2;
            so.max_body = (size_t)x;
        } else if (!strcmp(a, "--timeout")) {
            if (int_arg(a, v, 1, 86400, &x)) return 2;
            so.timeout_s = (unsigned)x;
        } else if (!strcmp(a, "--max-conns-per-ip")) {
            if (int_arg(a, v, 0, 100000, &x)) return 2;
            so.max_conns_per_ip = (unsigned)x;
        } else if (!strcmp(a, "--request-deadline")) {
            if (int_arg(a, v, 0, 86400, &x)) return 2;
            so.deadline_s = (double)x;
        } else if (!strcmp(a, "--max-conns")) {
            if (int_arg(a, v, 1, 100000, &x)) return 2;
            so.max_conns = (unsigned)x;
        }
    }
    if (so.api_key && !*so.api_key) {
        fprintf(stderr, "r1infer serve: --api-key must not be empty\n");
        return 2;
    }
    if (o.lookup && o.draft) {
        fprintf(stderr, "r1infer serve: give one draft source: --draft MODEL or --lookup N\n");
        return 2;
    }
    if (o.draft_n && !o.lookup && !o.draft)
        fprintf(stderr, "r1infer serve: --draft-n does nothing without --draft or --lookup\n");
    if (!o.model && !(o.model = cli_default_model("serve"))) return 1;
    /* workers and connection threads inherit this mask: only the main thread takes the signals */
    signal(SIGPIPE, SIG_IGN);
    signal(SIGINT, SIG_DFL); /* a shell starts background jobs with SIGINT ignored */
    signal(SIGTERM, SIG_DFL);
    sigset_t sigs;
    sigemptyset(&sigs);
    sigaddset(&sigs, SIGINT);
    sigaddset(&sigs, SIGTERM);
    pthread_sigmask(SIG_BLOCK, &sigs, NULL);

    int rc = 1;
    struct r1_load_opts lo = {.dtype = o.dtype,
                              .progress = 1,
                              .no_mmap = o.no_mmap,
                              .mlock = o.mlock,
                              .layout_cache = o.layout_cache,
                              .backend = o.backend};
    r1_model_t *m = r1_model_load(o.model, &lo);
    r1_tokenizer_t *tok = m ? r1_tokenizer_load(o.model) : NULL;
    char *name = model_name(o.model);
    struct sched *s = NULL;
    struct server *srv = NULL;
    r1_model_t *dm = NULL;
    if (!m || !tok || !name) {
        fprintf(stderr, "r1infer serve: %s\n", r1_last_error());
        goto out;
    }
    int cores = o.n_threads > 0 ? o.n_threads : r1_physical_cores();
    if (r1_comm_size() > 1) { /* tensor parallel: rank 0 serves, the others follow its steps */
        if (o.draft) {
            fprintf(stderr, "r1infer serve: --draft does not run under mpirun (--lookup N does)\n");
            goto out;
        }
        if (!r1_comm_threads_ok()) {
            fprintf(stderr, "r1infer serve: this MPI library does not allow collectives from several threads "
                            "(MPI_THREAD_SERIALIZED), which serving under mpirun needs\n");
            goto out;
        }
        if (r1_comm_rank() > 0) {
            struct r1_batch_opts fo = {.backend = o.backend, .n_threads = cores};
            rc = r1_batch_follow(m, &fo) ? 1 : 0;
            goto out;
        }
    }
    if (o.draft && !(dm = cli_load_draft(&o, m, tok))) goto out; /* e.g. another vocabulary: refused by name */
    if (batch_tokens < parallel) {
        fprintf(stderr, "r1infer serve: --batch-tokens %ld is raised to --parallel %ld (a row for every slot)\n",
                batch_tokens, parallel);
        batch_tokens = parallel;
    }
    /* host backends: one pool, each conversation up to the model's context; device backends: --ctx each */
    char note[512];
    int n_ctx = o.n_ctx ? o.n_ctx : r1_model_config(m)->max_pos;
    long pool = r1_kv_pool_default(m, (int)parallel, n_ctx, o.kv_dtype, o.backend, kv_budget, note, sizeof note);
    if (!pool && !o.n_ctx) n_ctx = cli_default_ctx(&o, m, (int)parallel);
    if (pool) fprintf(stderr, "r1infer serve: %s\n", note);
    if (pool && pool < 4L * 64) {
        fprintf(stderr, "r1infer serve: --kv-budget %.0f bytes holds %ld positions; give at least 4 blocks of 64\n",
                (double)kv_budget, pool);
        goto out;
    }
    struct sched_opts sco = {.n_slots = (int)parallel,
                             .queue_cap = (int)queue,
                             .n_ctx = n_ctx,
                             .pool_pos = pool,
                             /* a pool's blocks are shared: kept caches cost only what no slot holds */
                             .n_keep = pool ? 2 * (int)parallel : 0,
                             .n_threads = cores,
                             .batch_tokens = (int)batch_tokens,
                             .backend = o.backend,
                             .kv_dtype = o.kv_dtype,
                             .model_name = name,
                             .seed_set = o.seed_set,
                             .spec_lookup = o.lookup,
                             .spec_k = o.draft_n,
                             .draft = dm,
                             /* the drafts of the slots run side by side, beside the engine */
                             .draft_threads = cores / (int)parallel > 1 ? cores / (int)parallel : 1,
                             /* tests: every step drafts --draft-n tokens (a lookup: when it matches) */
                             .spec_fixed_k = r1_env("R1_SPEC_FIXED_K") != NULL,
                             .reasoning_budget = o.reasoning_budget,
                             .lead = r1_comm_size() > 1};
    if (!(s = sched_new(m, tok, &sco))) {
        fprintf(stderr, "r1infer serve: %s\n", r1_last_error());
        goto out;
    }
    so.model_name = name;
    so.sp = o.sp;
    if (so.max_conns < (unsigned)(parallel + queue + 8)) so.max_conns = (unsigned)(parallel + queue + 8);
    if (so.max_conns_per_ip == ~0u) so.max_conns_per_ip = so.max_conns / 4 * 3; /* one address never takes all */
    if (!(srv = server_start(&so, s))) goto out;
    fprintf(
        stderr,
        "r1infer serve: listening on http://%s%s%s:%d (%ld slot%s, %d thread%s, ctx %d per conversation, %ld tokens "
        "per step, queue %ld%s%s%s)\n",
        strchr(so.host, ':') ? "[" : "", so.host, strchr(so.host, ':') ? "]" : "", server_port(srv), parallel,
        parallel == 1 ? "" : "s", cores, cores == 1 ? "" : "s", sched_n_ctx(s), batch_tokens, queue,
        so.api_key ? ", API key required" : "",
        o.lookup ? ", speculative: n-gram lookup"
        : dm     ? ", speculative: draft model "
                 : "",
        dm ? o.draft : "");
    fprintf(stderr, "r1infer serve: the chat page is at http://%s%s%s:%d/\n", strchr(so.host, ':') ? "[" : "",
            !strcmp(so.host, "0.0.0.0") ? "127.0.0.1" : so.host, strchr(so.host, ':') ? "]" : "", server_port(srv));
    fflush(stderr);
    int sig = 0;
    sigwait(&sigs, &sig);
    fprintf(stderr, "r1infer serve: %s: shutting down\n", sig == SIGINT ? "SIGINT" : "SIGTERM");
    rc = 0;
out:
    if (s) sched_stop(s);
    server_stop(srv);
    sched_free(s);
    r1_tokenizer_free(tok);
    r1_model_free(dm);
    r1_model_free(m);
    free(name);
    return rc;
}
