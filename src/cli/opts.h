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

/* Load model and make a session per the options (the default model when
 * o->model is NULL); prints the error and returns -1 on failure. */
int cli_open(const struct cli_opts *o, r1_model_t **m, r1_session_t **s);

#endif
