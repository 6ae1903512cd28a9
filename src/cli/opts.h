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
/* Load model and make a session per the options; prints the error and
 * returns -1 on failure. */
int cli_open(const struct cli_opts *o, r1_model_t **m, r1_session_t **s);

#endif
