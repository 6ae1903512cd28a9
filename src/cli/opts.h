/*
 * opts.h - the options shared by run, chat, bench and serve (model, backend,
 * sampler, context), parsed in one place so every command spells them alike.
 */
#ifndef R1_CLI_OPTS_H
#define R1_CLI_OPTS_H

#include <stdio.h>

#include "r1infer.h"

struct cli_opts {
    const char *model;
    const char *backend;
    enum r1_dtype dtype, kv_dtype;
    int n_ctx, n_threads, profile, seed_set;
    struct r1_sampler_params sp;
    /* speculative decoding (run, chat, bench --spec) */
    const char *draft; /* --draft MODEL */
    int lookup;        /* --lookup N */
    int draft_n;       /* --draft-n K (0: the default) */
    int verbose;       /* --verbose: statistics at the end */
    int reasoning_budget; /* --reasoning-budget N: thinking tokens before </think>; -1 = no limit */
};

void cli_opts_init(struct cli_opts *o);
/* If argv[*i] is a shared option, consume it (and its value), return 1;
 * return 0 if it is not one; -1 (message printed) on a bad value. */
int cli_opts_take(struct cli_opts *o, int argc, char **argv, int *i);
/* Help text for the shared options. */
void cli_opts_help(FILE *f);
/* The model to use when -m is omitted: $R1INFER_MODEL, else the default
 * model (scripts/get-model.sh) in ./models/ or in models/ beside the
 * executable's build directory. NULL, with a message on stderr saying how to
 * get one, when there is none. The string is static or the environment's. */
const char *cli_default_model(const char *cmd);
#define CLI_DEFAULT_MODEL_FILE "SmolLM2-135M-Instruct.Q4_1.gguf"

/* The context when --ctx is not given (r1_ctx_default for n_seq sequences),
 * with its one-line notice on stderr. */
int cli_default_ctx(const struct cli_opts *o, const r1_model_t *m, int n_seq);

/* Load model and make a session per the options (the default model when
 * o->model is NULL); prints the error and returns -1 on failure. */
int cli_open(const struct cli_opts *o, r1_model_t **m, r1_session_t **s);

/* The speculative decoder the options ask for (--lookup, --draft), on
 * target session s of model m (tokenizer tok, may be NULL) with sampler smp:
 * *sp = NULL when none is asked for. With --draft the draft model is loaded
 * (checked against the target: a different vocabulary is refused, a larger
 * model warned about) and gets its own session, returned in *dm and *ds for
 * the caller to free after *sp. Prints the error and returns -1 on failure. */
int cli_open_spec(const struct cli_opts *o, r1_model_t *m, const r1_tokenizer_t *tok,
                  r1_session_t *s, r1_sampler_t *smp, r1_spec_t **sp, r1_model_t **dm,
                  r1_session_t **ds);
/* --draft: load the draft model and check it against target m (tokenizer
 * tok, may be NULL): a different vocabulary is refused, a larger model
 * warned about. Prints the error and returns NULL on failure. */
r1_model_t *cli_load_draft(const struct cli_opts *o, const r1_model_t *m, const r1_tokenizer_t *tok);
/* "drafted N, accepted N (P%), T tokens per target step ..." on stderr. */
void cli_print_spec_stats(const r1_spec_t *sp);

#endif
