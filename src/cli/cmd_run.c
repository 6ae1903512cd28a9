/*
 * cmd_run.c - `r1infer run` (one prompt, streamed) and `r1infer chat`
 * (interactive, with the chat template and a prompt cache that reuses the
 * KV cache of the conversation so far).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli/cli.h"
#include "cli/opts.h"
#include "runtime/comm.h"
#include "util/util.h"

struct gen {
    r1_session_t *s;
    r1_tokenizer_t *tok; /* NULL when --prompt-ids without a tokenizer */
    r1_sampler_t *smp;
    r1_spec_t *spec;       /* speculative decoder, or NULL */
    const int32_t *cached; /* with spec: the ids in the session's cache */
    int n_cached;
    int32_t stop[4];
    int n_stop, ignore_eos, print_ids, dim_think, vocab;
    r1_grammar_t *gram; /* --grammar / --json-schema / --json: the output follows it */
    r1_gvocab_t *gvocab;
    r1_gmatch_t *gm;
    int gram_wait;     /* an R1 prompt opened <think>: the grammar starts after </think> */
    double sample_s;   /* time in the sampler (and the grammar) */
    r1_think_t *think; /* --reasoning-budget, or NULL */
};

static int is_stop(const struct gen *g, int32_t id) {
    if (g->ignore_eos) return 0;
    for (int i = 0; i < g->n_stop; i++)
        if (g->stop[i] == id) return 1;
    return 0;
}

static void add_stop(struct gen *g, int id) {
    if (id < 0 || g->n_stop >= 4) return;
    for (int i = 0; i < g->n_stop; i++)
        if (g->stop[i] == id) return;
    g->stop[g->n_stop++] = id;
}

/* Generate up to n tokens after the session's current state whose last
 * logits are in `logits`. Appends generated ids to *out (if non-NULL).
 * Returns the number generated, -1 on error. */
static int generate(struct gen *g, const float *logits0, int n, double *secs, int32_t **out, int *n_out) {
    const int vocab = g->vocab;
    float *logits = malloc((size_t)vocab * sizeof(float));
    r1_detok_t *dt = g->tok ? r1_detok_new(g->tok, 1) : NULL;
    if (!logits || (g->tok && !dt)) {
        free(logits);
        r1_detok_free(dt);
        return -1;
    }
    memcpy(logits, logits0, (size_t)vocab * sizeof(float));
    int made = 0, in_think = g->dim_think;
    double t0 = r1_now();
    if (g->print_ids) fputc('[', stdout);
    if (in_think) fputs("\033[2m", stdout);
    const int32_t *ids = NULL, *force = NULL; /* force: the ids that close a think block */
    int n_ids = 0, at = 0, n_force = g->think ? r1_think_start(g->think, &force) : 0;
    if (g->spec && r1_spec_begin(g->spec, g->cached, g->n_cached, logits)) {
        fprintf(stderr, "\nr1infer: %s\n", r1_last_error());
        n = 0;
    }
    while (made < n) {
        int32_t id;
        const int forced = n_force > 0;
        if (forced) { /* emitted, not sampled; the sampler still hears of it */
            id = *force++;
            n_force--;
            r1_sampler_accept(g->smp, id);
        } else if (g->spec) { /* the next of the ids the last speculative step gave */
            if (at == n_ids) {
                n_ids = r1_spec_step(g->spec, &ids);
                at = 0;
                if (n_ids < 0) {
                    fprintf(stderr, "\n[%s: stopping]\n", r1_last_error());
                    break;
                }
            }
            id = ids[at++];
        } else {
            double ts = r1_now();
            if (g->gm && !g->gram_wait) {
                id = r1_sampler_sample_grammar(g->smp, logits, g->gm);
                if (id < 0) {
                    fprintf(stderr, "\n[the grammar allows no token: stopping]\n");
                    break;
                }
                if (!is_stop(g, id)) r1_gmatch_accept(g->gm, id);
            } else {
                id = r1_sampler_sample(g->smp, logits);
            }
            g->sample_s += r1_now() - ts;
        }
        if (!forced && is_stop(g, id)) break;
        made++;
        if (out) {
            int32_t *no = realloc(*out, (size_t)(*n_out + 1) * sizeof(int32_t));
            if (no) {
                *out = no;
                (*out)[(*n_out)++] = id;
            }
        }
        if (g->gm && g->gram_wait && g->tok) { /* the think block closes: the grammar starts */
            char *piece = NULL;
            if (r1_tokenizer_decode(g->tok, &id, 1, 0, &piece) >= 0 && strstr(piece, "</think>")) g->gram_wait = 0;
            free(piece);
        }
        const char *text = dt ? r1_detok_push(dt, id) : NULL;
        if (g->print_ids) {
            printf(made > 1 ? ",%d" : "%d", id);
        } else if (dt) {
            if (text) {
                fputs(text, stdout);
                if (in_think && strstr(text, "</think>")) {
                    fputs("\033[0m", stdout);
                    in_think = 0;
                }
            }
        }
        fflush(stdout);
        if (g->gm && !g->gram_wait && r1_gmatch_finished(g->gm)) break;
        if (g->think && !forced && (n_force = r1_think_push(g->think, text, &force)) < 0) {
            fprintf(stderr, "\nr1infer: %s\n", r1_last_error());
            break;
        }
        if (made == n || g->spec) continue;
        if (r1_session_n_past(g->s) >= r1_session_n_ctx(g->s)) {
            fprintf(stderr, "\n[context full at %d tokens (--ctx): stopping]\n", r1_session_n_ctx(g->s));
            break;
        }
        const float *l = r1_session_forward(g->s, &id, 1, NULL);
        if (!l) {
            fprintf(stderr, "\nr1infer: %s\n", r1_last_error());
            break;
        }
        memcpy(logits, l, (size_t)vocab * sizeof(float));
    }
    /* the cache holds no more than the ids the caller knows of (a step may
     * have run past a stop token or -n) */
    if (g->spec && r1_session_n_past(g->s) > g->n_cached + made) r1_session_truncate(g->s, g->n_cached + made);
    if (dt && !g->print_ids) fputs(r1_detok_flush(dt), stdout);
    if (in_think) fputs("\033[0m", stdout);
    if (g->print_ids) fputs("]\n", stdout);
    else fputc('\n', stdout);
    fflush(stdout);
    *secs = r1_now() - t0;
    free(logits);
    r1_detok_free(dt);
    return made;
}

static int parse_ids(const char *s, int32_t **ids) {
    int n = 0, cap = 16;
    *ids = malloc((size_t)cap * sizeof(int32_t));
    const char *p = s;
    while (*p) {
        char *end;
        long v = strtol(p, &end, 10);
        if (end == p || v < 0 || v > 0x7fffffff) {
            fprintf(stderr, "r1infer: --prompt-ids expects comma-separated ids, got '%s'\n", s);
            free(*ids);
            return -1;
        }
        if (n == cap) *ids = realloc(*ids, (size_t)(cap *= 2) * sizeof(int32_t));
        (*ids)[n++] = (int32_t)v;
        p = end;
        while (*p == ',' || *p == ' ') p++;
    }
    return n;
}

static void print_profile(r1_session_t *s) {
    const char *names[32];
    double us[32], total = 0;
    long calls[32];
    int n = r1_session_profile(s, names, us, calls, 32);
    for (int i = 0; i < n; i++) total += us[i];
    fprintf(stderr, "\nkernel profile (all steps):\n  %-16s %10s %8s %7s\n", "kernel", "ms", "calls", "share");
    for (int i = 0; i < n; i++)
        if (calls[i])
            fprintf(stderr, "  %-16s %10.2f %8ld %6.1f%%\n", names[i], us[i] / 1e3, calls[i],
                    total > 0 ? 100 * us[i] / total : 0);
}

static void run_help(FILE *f) {
    fprintf(f, "usage: r1infer run [-m MODEL] (-p PROMPT | -f FILE) [options]\n"
               "  -p, --prompt TEXT      the user's message (chat template applied unless --raw); '-' reads stdin\n"
               "  -f, --file FILE        read the prompt from FILE ('-' for stdin; a final newline dropped)\n"
               "  --system TEXT          a system prompt (also --system-prompt)\n"
               "  -n, --n-predict N      tokens to generate (default 256)\n"
               "  --raw                  feed the prompt as it is, without the chat template\n"
               "  --ignore-eos           keep generating past the end-of-sentence token\n"
               "  --prompt-ids 1,2,3     feed token ids instead of text (for tests)\n"
               "  --print-ids            print the generated ids as a JSON array instead of text\n"
               "  --grammar FILE         the output follows this GBNF grammar (rule root)\n"
               "  --json-schema FILE     the output is JSON valid against this schema\n"
               "  --json                 the output is a JSON object\n"
               "                         (for an R1 model, the answer after its think block)\n");
    cli_opts_help(f, CLI_OPT_MODEL | CLI_OPT_CTX | CLI_OPT_PROFILE | CLI_OPT_SAMPLING | CLI_OPT_SPEC);
}

static const char *const run_flags[] = {
    "-p",    "--prompt",     "-f",           "--file",      "--system",  "--system-prompt", "-n",     "--n-predict",
    "--raw", "--ignore-eos", "--prompt-ids", "--print-ids", "--grammar", "--json-schema",   "--json", "--help",
    NULL};
static const char *const chat_flags[] = {"--system",      "--system-prompt", "-n",     "--n-predict", "--grammar",
                                         "--json-schema", "--json",          "--help", NULL};

static int setup_gen(struct gen *g, const struct cli_opts *o, r1_model_t *m, r1_session_t *s, int need_tok) {
    memset(g, 0, sizeof *g);
    g->s = s;
    g->vocab = r1_model_config(m)->vocab;
    g->tok = r1_tokenizer_load(o->model);
    if (!g->tok && need_tok) {
        fprintf(stderr, "r1infer: %s\n", r1_last_error());
        return -1;
    }
    g->smp = r1_sampler_new(&o->sp, r1_model_config(m)->vocab);
    if (!g->smp) {
        fprintf(stderr, "r1infer: %s\n", r1_last_error());
        return -1;
    }
    add_stop(g, r1_model_config(m)->eos_id);
    if (g->tok) {
        add_stop(g, r1_tokenizer_eos(g->tok));
        add_stop(g, r1_tokenizer_token_id(g->tok, "<|im_end|>"));
        add_stop(g, r1_tokenizer_token_id(g->tok, "<|endoftext|>"));
    }
    return 0;
}

/* Whether a templated prompt ends inside an open <think> block (R1). */
static int opens_think(const char *text) {
    size_t n = text ? strlen(text) : 0;
    while (n && (text[n - 1] == '\n' || text[n - 1] == ' ')) n--;
    return n >= 7 && !memcmp(text + n - 7, "<think>", 7);
}

/* The grammar of --grammar FILE, --json-schema FILE or --json. */
static int open_grammar(struct gen *g, const char *grammar_file, const char *schema_file) {
    char err[320], *text = NULL;
    size_t len = 0;
    const char *file = grammar_file ? grammar_file : schema_file;
    char *data = file ? r1_file_read(file, &len) : NULL;
    if (file && !data) {
        fprintf(stderr, "r1infer: %s\n", r1_last_error());
        return -1;
    }
    if (grammar_file) text = data, data = NULL;
    else if (!(text = r1_grammar_json_schema(data, len, 0, err, sizeof err))) {
        fprintf(stderr, "r1infer: %s: %s\n", schema_file ? schema_file : "--json", err);
        free(data);
        return -1;
    }
    free(data);
    g->gram = r1_grammar_parse(text, strlen(text), err, sizeof err);
    free(text);
    if (!g->gram) {
        fprintf(stderr, "r1infer: %s: %s\n", file ? file : "--json", err);
        return -1;
    }
    if (!g->tok || !(g->gvocab = r1_gvocab_new(g->tok, g->vocab, g->stop, g->n_stop)) ||
        !(g->gm = r1_gmatch_new(g->gram, g->gvocab))) {
        fprintf(stderr, "r1infer: grammar: %s\n", g->tok ? r1_last_error() : "needs the model's tokenizer");
        return -1;
    }
    return 0;
}

/* --reasoning-budget: a fresh budget for the reply that follows; prints the
 * error and returns -1 where it cannot apply. */
static int open_think(struct gen *g, const struct cli_opts *o, int in_think) {
    r1_think_free(g->think);
    g->think = NULL;
    if (g->spec) {
        fprintf(stderr, "r1infer: --reasoning-budget does not combine with --lookup or --draft\n");
        return -1;
    }
    if (!(g->think = r1_think_new(g->tok, o->reasoning_budget, in_think))) {
        fprintf(stderr, "r1infer: --reasoning-budget: %s\n", r1_last_error());
        return -1;
    }
    return 0;
}

int cmd_run(int argc, char **argv) {
    struct cli_opts o;
    cli_opts_init(&o, "run");
    const char *prompt = NULL, *system = NULL, *pids = NULL, *file = NULL;
    const char *grammar_file = NULL, *schema_file = NULL;
    long n = 256;
    int raw = 0, ignore_eos = 0, print_ids = 0, json = 0;
    for (int i = 1; i < argc; i++) {
        int r = cli_opts_take(&o, argc, argv, &i);
        if (r < 0) return 2;
        if (r) continue;
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        int value = !strcmp(a, "-p") || !strcmp(a, "--prompt") || !strcmp(a, "-f") || !strcmp(a, "--file") ||
                    !strcmp(a, "--system") || !strcmp(a, "--system-prompt") || !strcmp(a, "--prompt-ids") ||
                    !strcmp(a, "-n") || !strcmp(a, "--n-predict") || !strcmp(a, "--grammar") ||
                    !strcmp(a, "--json-schema");
        if (value && !v) {
            fprintf(stderr, "r1infer run: %s needs a value\n", a);
            return 2;
        }
        i += value;
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
            run_help(stdout);
            return 0;
        } else if (!strcmp(a, "--raw")) raw = 1;
        else if (!strcmp(a, "--ignore-eos")) ignore_eos = 1;
        else if (!strcmp(a, "--print-ids")) print_ids = 1;
        else if (!strcmp(a, "--json")) json = 1;
        else if (!strcmp(a, "--grammar")) grammar_file = v;
        else if (!strcmp(a, "--json-schema")) schema_file = v;
        else if (!strcmp(a, "-p") || !strcmp(a, "--prompt")) prompt = v;
        else if (!strcmp(a, "-f") || !strcmp(a, "--file")) file = v;
        else if (!strcmp(a, "--system") || !strcmp(a, "--system-prompt")) system = v;
        else if (!strcmp(a, "--prompt-ids")) pids = v;
        else if (!strcmp(a, "-n") || !strcmp(a, "--n-predict")) {
            if (cli_int("run", a, v, 0, 1 << 24, &n)) return 2;
        } else return cli_unknown("run", a, run_flags, o.groups);
    }
    if (!!prompt + !!file + !!pids > 1) {
        fprintf(stderr, "r1infer run: give one prompt: -p TEXT, -f FILE or --prompt-ids\n");
        return 2;
    }
    if (!prompt && !pids && !file) {
        fprintf(stderr, "r1infer run: give a prompt with -p TEXT, -f FILE or -p - (stdin)\n");
        return 2;
    }
    char *prompt_text = NULL; /* -f FILE, -p - */
    if (file || (prompt && !strcmp(prompt, "-"))) {
        if (!(prompt_text = cli_read_text("run", file ? file : "-"))) return 1;
        prompt = prompt_text;
    }
    r1_model_t *m;
    r1_session_t *s;
    if ((!o.model && !(o.model = cli_default_model("run"))) || cli_open(&o, &m, &s)) {
        free(prompt_text);
        return 1;
    }
    struct gen g;
    int rc = 1;
    int32_t *ids = NULL;
    int n_ids = 0;
    r1_model_t *dm = NULL;
    r1_session_t *ds = NULL;
    if (setup_gen(&g, &o, m, s, pids == NULL || !print_ids)) goto out;
    if ((grammar_file || schema_file || json) && open_grammar(&g, grammar_file, schema_file)) goto out;
    if (!g.gm && cli_open_spec(&o, m, g.tok, s, g.smp, &g.spec, &dm, &ds)) goto out;
    g.ignore_eos = ignore_eos;
    g.print_ids = print_ids;
    int in_think = 0; /* the prompt ends in an open <think> */
    if (pids) {
        if ((n_ids = parse_ids(pids, &ids)) < 0) goto out;
    } else {
        char *text = NULL;
        if (raw) {
            text = strdup(prompt);
        } else {
            struct r1_chat_msg msgs[2];
            size_t k = 0;
            if (system) msgs[k++] = (struct r1_chat_msg){"system", system};
            msgs[k++] = (struct r1_chat_msg){"user", prompt};
            text = r1_chat_apply(g.tok, msgs, k, 1);
            g.dim_think = isatty(1) && strstr(text ? text : "", "<think>") != NULL;
            g.gram_wait = g.gm && opens_think(text);
        }
        in_think = opens_think(text);
        if (!text) {
            fprintf(stderr, "r1infer: %s\n", r1_last_error());
            goto out;
        }
        /* the template already holds BOS; raw prompts get the post-processor's */
        n_ids = r1_tokenizer_encode(g.tok, text, strlen(text), raw, &ids);
        free(text);
        if (n_ids < 0) {
            fprintf(stderr, "r1infer: %s\n", r1_last_error());
            goto out;
        }
    }
    if (n_ids == 0) {
        fprintf(stderr, "r1infer run: the prompt is empty\n");
        goto out;
    }
    if (n_ids >= r1_session_n_ctx(s)) {
        fprintf(stderr, "r1infer: the prompt has %d tokens but the context holds %d (raise --ctx)\n", n_ids,
                r1_session_n_ctx(s));
        goto out;
    }
    if (o.reasoning_budget >= 0 && open_think(&g, &o, in_think)) goto out;
    for (int i = 0; i < n_ids; i++) r1_sampler_accept(g.smp, ids[i]);
    double t0 = r1_now();
    const float *logits = r1_session_forward(s, ids, n_ids, NULL);
    double tp = r1_now() - t0;
    if (!logits) {
        fprintf(stderr, "r1infer: %s\n", r1_last_error());
        goto out;
    }
    fprintf(stderr, "Prefill: %.2fs (%.1f tok/s)\n", tp, n_ids / tp);
    if (o.profile) r1_session_profile_reset(s);
    double secs;
    g.cached = ids, g.n_cached = n_ids;
    int made = generate(&g, logits, (int)n, &secs, NULL, NULL);
    if (made < 0) goto out;
    fprintf(stderr, "Generated %d tokens in %.2fs (%.2f tok/s)\n", made, secs, made > 0 ? made / secs : 0.0);
    if (g.spec && o.verbose) cli_print_spec_stats(g.spec);
    if ((g.gm || o.verbose) && made > 0) {
        long hits = 0, misses = 0;
        if (g.gm) r1_gmatch_stats(g.gm, &hits, &misses);
        fprintf(stderr, "Sampling: %.3f ms/token, %.1f%% of the decode time%s", 1e3 * g.sample_s / made,
                100 * g.sample_s / secs, g.gm ? " (grammar)" : "\n");
        if (g.gm) fprintf(stderr, "; grammar mask cache %ld hits, %ld misses\n", hits, misses);
    }
    if (o.profile) print_profile(s);
    rc = 0;
out:
    free(prompt_text);
    r1_think_free(g.think);
    r1_spec_free(g.spec);
    r1_gmatch_free(g.gm);
    r1_gvocab_free(g.gvocab);
    r1_grammar_free(g.gram);
    r1_session_free(ds);
    r1_model_free(dm);
    free(ids);
    r1_sampler_free(g.smp);
    r1_tokenizer_free(g.tok);
    r1_session_free(s);
    r1_model_free(m);
    return rc;
}

/* ------------------------------------------------------------------ chat */

static void chat_help(FILE *f) {
    fprintf(f, "usage: r1infer chat [-m MODEL] [--system TEXT] [-n N] [options]\n"
               "Type a message and press enter; /reset clears the conversation, /quit or EOF ends.\n"
               "The model's own chat template is used (DeepSeek-R1 or ChatML, from the model files);\n"
               "an R1 model's reasoning (<think>...</think>) is shown dimmed on a terminal.\n"
               "  --system TEXT          a system prompt (also --system-prompt)\n"
               "  -n, --n-predict N      most tokens per answer (default 4096)\n"
               "  --grammar FILE, --json-schema FILE, --json   every answer follows this GBNF grammar /\n"
               "                         is JSON valid against this schema / is a JSON object (after the\n"
               "                         think block of an R1 model)\n");
    cli_opts_help(f, CLI_OPT_MODEL | CLI_OPT_CTX | CLI_OPT_SAMPLING | CLI_OPT_SPEC);
}

/* The user's next line: rank 0 reads it and, in a tensor-parallel job,
 * every rank gets it (each then takes the same steps: the logits and the
 * seed are the same everywhere). 0 at the end of the input. */
static int chat_line(char *line, size_t cap) {
    int32_t n = -1;
    if (r1_comm_rank() == 0 && fgets(line, (int)cap, stdin)) n = (int32_t)strlen(line);
    if (r1_comm_size() == 1) return n >= 0;
    r1_comm_bcast_idle(&n, sizeof n, 0); /* the others wait while the user types */
    if (n >= 0) r1_comm_bcast(line, (size_t)n + 1, 0);
    return n >= 0;
}

int cmd_chat(int argc, char **argv) {
    struct cli_opts o;
    cli_opts_init(&o, "chat");
    o.groups &= ~(unsigned)CLI_OPT_PROFILE; /* chat prints no profile */
    const char *system = NULL, *grammar_file = NULL, *schema_file = NULL;
    long n = 4096;
    int json = 0;
    for (int i = 1; i < argc; i++) {
        int r = cli_opts_take(&o, argc, argv, &i);
        if (r < 0) return 2;
        if (r) continue;
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        int value = !strcmp(a, "--system") || !strcmp(a, "--system-prompt") || !strcmp(a, "-n") ||
                    !strcmp(a, "--n-predict") || !strcmp(a, "--grammar") || !strcmp(a, "--json-schema");
        if (value && !v) {
            fprintf(stderr, "r1infer chat: %s needs a value\n", a);
            return 2;
        }
        i += value;
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
            chat_help(stdout);
            return 0;
        } else if (!strcmp(a, "--system") || !strcmp(a, "--system-prompt")) system = v;
        else if (!strcmp(a, "--json")) json = 1;
        else if (!strcmp(a, "--grammar")) grammar_file = v;
        else if (!strcmp(a, "--json-schema")) schema_file = v;
        else if (!strcmp(a, "-n") || !strcmp(a, "--n-predict")) {
            if (cli_int("chat", a, v, 1, 1 << 24, &n)) return 2;
        } else return cli_unknown("chat", a, chat_flags, o.groups);
    }
    if (!o.model && !(o.model = cli_default_model("chat"))) return 1;
    r1_model_t *m;
    r1_session_t *s;
    if (cli_open(&o, &m, &s)) return 1;
    struct gen g;
    int rc = 1, tty = isatty(0);
    struct r1_chat_msg *msgs = NULL;
    size_t n_msgs = 0;
    int32_t *cached = NULL; /* ids currently in the KV cache */
    int n_cached = 0;
    char line[65536];
    r1_model_t *dm = NULL;
    r1_session_t *ds = NULL;
    if (setup_gen(&g, &o, m, s, 1)) goto out;
    if ((grammar_file || schema_file || json) && open_grammar(&g, grammar_file, schema_file)) goto out;
    if (!g.gm && cli_open_spec(&o, m, g.tok, s, g.smp, &g.spec, &dm, &ds)) goto out;
    msgs = calloc(1024, sizeof *msgs);
    if (system) msgs[n_msgs++] = (struct r1_chat_msg){"system", strdup(system)};
    for (;;) {
        if (tty) fputs("\n> ", stdout), fflush(stdout);
        if (!chat_line(line, sizeof line)) break;
        line[strcspn(line, "\r\n")] = 0;
        if (!line[0]) continue;
        if (!strcmp(line, "/quit") || !strcmp(line, "/exit")) break;
        if (!strcmp(line, "/reset")) {
            for (size_t i = system ? 1 : 0; i < n_msgs; i++) free((char *)msgs[i].content);
            n_msgs = system ? 1 : 0;
            continue;
        }
        if (n_msgs + 2 >= 1024) {
            fprintf(stderr, "[conversation too long: /reset]\n");
            continue;
        }
        msgs[n_msgs++] = (struct r1_chat_msg){"user", strdup(line)};
        char *text = r1_chat_apply(g.tok, msgs, n_msgs, 1);
        int32_t *ids = NULL;
        int n_ids = text ? r1_tokenizer_encode(g.tok, text, strlen(text), 0, &ids) : -1;
        g.dim_think = isatty(1) && text && strstr(text, "<think>") != NULL;
        if (g.gm) { /* every answer follows the grammar from its start */
            r1_gmatch_free(g.gm);
            if (!(g.gm = r1_gmatch_new(g.gram, g.gvocab))) {
                fprintf(stderr, "r1infer: %s\n", r1_last_error());
                free(text);
                goto out;
            }
            g.gram_wait = opens_think(text);
        }
        int in_think = opens_think(text);
        free(text);
        if (o.reasoning_budget >= 0 && open_think(&g, &o, in_think)) goto out;
        if (n_ids < 0) {
            fprintf(stderr, "r1infer: %s\n", r1_last_error());
            goto out;
        }
        /* prompt cache: keep the longest prefix already in the KV cache */
        int keep = 0;
        while (keep < n_cached && keep < n_ids - 1 && cached[keep] == ids[keep]) keep++;
        if (n_ids >= r1_session_n_ctx(s)) {
            fprintf(stderr, "[the conversation (%d tokens) no longer fits in --ctx %d: /reset]\n", n_ids,
                    r1_session_n_ctx(s));
            free((char *)msgs[--n_msgs].content);
            free(ids);
            continue;
        }
        r1_session_truncate(s, keep);
        double tp = r1_now();
        const float *logits = r1_session_forward(s, ids + keep, n_ids - keep, NULL);
        tp = r1_now() - tp;
        if (!logits) {
            fprintf(stderr, "r1infer: %s\n", r1_last_error());
            free(ids);
            goto out;
        }
        free(cached);
        cached = ids;
        n_cached = n_ids;
        double secs;
        int32_t *gen_ids = NULL;
        int n_gen = 0;
        g.cached = cached, g.n_cached = n_cached;
        int made = generate(&g, logits, (int)n, &secs, &gen_ids, &n_gen);
        if (made < 0) goto out;
        /* the cache now also holds the generated ids (all but the last one) */
        int32_t *nc = realloc(cached, (size_t)(n_cached + n_gen) * sizeof(int32_t));
        if (nc) {
            cached = nc;
            memcpy(cached + n_cached, gen_ids, (size_t)n_gen * sizeof(int32_t));
            n_cached = r1_session_n_past(s);
        }
        char *reply = NULL;
        r1_tokenizer_decode(g.tok, gen_ids, (size_t)n_gen, 1, &reply);
        free(gen_ids);
        msgs[n_msgs++] = (struct r1_chat_msg){"assistant", reply ? reply : strdup("")};
        /* on stderr: a pipe that wants only the answers drops it */
        fprintf(stderr, "[prefill %d new tokens (%d cached) at %.1f tok/s; %d tokens at %.2f tok/s]\n", n_ids - keep,
                keep, (n_ids - keep) / tp, made, made > 0 ? made / secs : 0.0);
        if (g.spec && o.verbose) cli_print_spec_stats(g.spec);
    }
    rc = 0;
out:
    r1_think_free(g.think);
    r1_spec_free(g.spec);
    r1_gmatch_free(g.gm);
    r1_gvocab_free(g.gvocab);
    r1_grammar_free(g.gram);
    r1_session_free(ds);
    r1_model_free(dm);
    for (size_t i = 0; i < n_msgs; i++) free((char *)msgs[i].content);
    free(msgs);
    free(cached);
    r1_sampler_free(g.smp);
    r1_tokenizer_free(g.tok);
    r1_session_free(s);
    r1_model_free(m);
    return rc;
}
