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
#include "util/util.h"

struct gen {
    r1_session_t *s;
    r1_tokenizer_t *tok; /* NULL when --prompt-ids without a tokenizer */
    r1_sampler_t *smp;
    r1_spec_t *spec;         /* speculative decoder, or NULL */
    const int32_t *cached;   /* with spec: the ids in the session's cache */
    int n_cached;
    int32_t stop[4];
    int n_stop, ignore_eos, print_ids, dim_think, vocab;
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
            id = r1_sampler_sample(g->smp, logits);
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
    if (g->spec && r1_session_n_past(g->s) > g->n_cached + made)
        r1_session_truncate(g->s, g->n_cached + made);
    if (dt) fputs(r1_detok_flush(dt), stdout);
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
    fprintf(f, "usage: r1infer run -m MODEL -p PROMPT [options]\n"
               "  -p, --prompt TEXT      the user's message (chat template applied unless --raw)\n"
               "  --system TEXT          a system prompt\n"
               "  -n N                   tokens to generate (default 256)\n"
               "  --raw                  feed the prompt as it is, without the chat template\n"
               "  --ignore-eos           keep generating past the end-of-sentence token\n"
               "  --prompt-ids 1,2,3     feed token ids instead of text (for tests)\n"
               "  --print-ids            print the generated ids as a JSON array instead of text\n");
    cli_opts_help(f);
}

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

/* Whether a prompt's text ends inside an open <think> (the R1 template's
 * generation prompt "...<think>\n"). */
static int ends_in_think(const char *text) {
    if (!text) return 0;
    size_t len = strlen(text);
    while (len && (text[len - 1] == '\n' || text[len - 1] == ' ')) len--;
    return len >= 7 && !memcmp(text + len - 7, "<think>", 7);
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
    cli_opts_init(&o);
    const char *prompt = NULL, *system = NULL, *pids = NULL;
    int n = 256, raw = 0, ignore_eos = 0, print_ids = 0;
    for (int i = 1; i < argc; i++) {
        int r = cli_opts_take(&o, argc, argv, &i);
        if (r < 0) return 2;
        if (r) continue;
        const char *a = argv[i];
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
            run_help(stdout);
            return 0;
        } else if (!strcmp(a, "--raw")) raw = 1;
        else if (!strcmp(a, "--ignore-eos")) ignore_eos = 1;
        else if (!strcmp(a, "--print-ids")) print_ids = 1;
        else if (i + 1 < argc && (!strcmp(a, "-p") || !strcmp(a, "--prompt"))) prompt = argv[++i];
        else if (i + 1 < argc && !strcmp(a, "--system")) system = argv[++i];
        else if (i + 1 < argc && !strcmp(a, "--prompt-ids")) pids = argv[++i];
        else if (i + 1 < argc && !strcmp(a, "-n")) {
            n = atoi(argv[++i]);
            if (n < 0) n = 0;
        } else {
            fprintf(stderr, "r1infer run: unknown option or missing value: %s\n", a);
            run_help(stderr);
            return 2;
        }
    }
    if (!prompt && !pids) {
        fprintf(stderr, "r1infer run: give a prompt with -p TEXT (or --prompt-ids)\n");
        return 2;
    }
    if (!o.model && !(o.model = cli_default_model("run"))) return 1;
    r1_model_t *m;
    r1_session_t *s;
    if (cli_open(&o, &m, &s)) return 1;
    struct gen g;
    int rc = 1;
    int32_t *ids = NULL;
    int n_ids = 0;
    r1_model_t *dm = NULL;
    r1_session_t *ds = NULL;
    if (setup_gen(&g, &o, m, s, pids == NULL || !print_ids)) goto out;
    if (cli_open_spec(&o, m, g.tok, s, g.smp, &g.spec, &dm, &ds)) goto out;
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
        }
        in_think = ends_in_think(text);
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
    int made = generate(&g, logits, n, &secs, NULL, NULL);
    if (made < 0) goto out;
    fprintf(stderr, "Generated %d tokens in %.2fs (%.2f tok/s)\n", made, secs, made > 0 ? made / secs : 0.0);
    if (g.spec && o.verbose) cli_print_spec_stats(g.spec);
    if (o.profile) print_profile(s);
    rc = 0;
out:
    r1_think_free(g.think);
    r1_spec_free(g.spec);
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
    fprintf(f, "usage: r1infer chat -m MODEL [--system TEXT] [-n N] [options]\n"
               "Type a message and press enter; /reset clears the conversation, /quit or EOF ends.\n"
               "The model's reasoning (<think>...</think>) is shown dimmed on a terminal.\n");
    cli_opts_help(f);
}

int cmd_chat(int argc, char **argv) {
    struct cli_opts o;
    cli_opts_init(&o);
    const char *system = NULL;
    int n = 4096;
    for (int i = 1; i < argc; i++) {
        int r = cli_opts_take(&o, argc, argv, &i);
        if (r < 0) return 2;
        if (r) continue;
        if (!strcmp(argv[i], "-h") || !strcmp(argv[i], "--help")) {
            chat_help(stdout);
            return 0;
        } else if (i + 1 < argc && !strcmp(argv[i], "--system")) system = argv[++i];
        else if (i + 1 < argc && !strcmp(argv[i], "-n")) n = atoi(argv[++i]);
        else {
            fprintf(stderr, "r1infer chat: unknown option or missing value: %s\n", argv[i]);
            chat_help(stderr);
            return 2;
        }
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
    if (cli_open_spec(&o, m, g.tok, s, g.smp, &g.spec, &dm, &ds)) goto out;
    msgs = calloc(1024, sizeof *msgs);
    if (system) msgs[n_msgs++] = (struct r1_chat_msg){"system", strdup(system)};
    for (;;) {
        if (tty) fputs("\n> ", stdout), fflush(stdout);
        if (!fgets(line, sizeof line, stdin)) break;
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
        int in_think = ends_in_think(text);
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
        int made = generate(&g, logits, n, &secs, &gen_ids, &n_gen);
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
        fprintf(stderr, "[prefill %d new tokens (%d cached) at %.1f tok/s; %d tokens at %.2f tok/s]\n",
                n_ids - keep, keep, (n_ids - keep) / tp, made, made > 0 ? made / secs : 0.0);
        if (g.spec && o.verbose) cli_print_spec_stats(g.spec);
    }
    rc = 0;
out:
    r1_think_free(g.think);
    r1_spec_free(g.spec);
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
