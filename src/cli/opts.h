/*
 * opts.h - the options shared by run, chat, bench and serve (model, backend,
 * sampler, context), parsed in one place so every command spells them alike.
 */
#ifndef R1_CLI_OPTS_H
#define R1_CLI_OPTS_H

#include <stdio.h>

#include "r1infer.h"

/* Groups of shared options; a command accepts (and its --help lists) the
 * groups in cli_opts.groups, the others are unknown options to it. */
enum cli_opt_group {
    CLI_OPT_MODEL = 1,    /* -m, --backend, --gpu, --cl-device, --dtype, --kv, -t (always) */
    CLI_OPT_CTX = 2,      /* -c, --ctx */
    CLI_OPT_PROFILE = 4,  /* --profile */
    CLI_OPT_SAMPLING = 8, /* --temp ... --seed */
    CLI_OPT_SPEC = 16,    /* --lookup, --draft, --draft-n, --verbose */
};

struct cli_opts {
    const char *cmd; /* the subcommand, for messages */
    unsigned groups; /* enum cli_opt_group bits: the options this command takes */
    const char *model;
    const char *backend;
    enum r1_dtype dtype, kv_dtype;
    int n_ctx, n_threads, profile, seed_set;
    struct r1_sampler_params sp;
    /* speculative decoding (run, chat, bench --spec) */
    const char *draft;        /* --draft MODEL */
    int lookup;               /* --lookup N */
    int draft_n;              /* --draft-n K (0: the default) */
    int verbose;              /* --verbose: statistics at the end */
    int no_mmap, mlock;       /* --no-mmap, --mlock (struct r1_load_opts) */
    int reasoning_budget;     /* --reasoning-budget N: thinking tokens before </think>; -1 = no limit */
    const char *layout_cache; /* --layout-cache auto|DIR (struct r1_load_opts); NULL: off */
};

/* Defaults, for subcommand cmd (named in messages); every group accepted. */
void cli_opts_init(struct cli_opts *o, const char *cmd);
/* If argv[*i] is a shared option, consume it (and its value), return 1;
 * return 0 if it is not one; -1 (message printed) on a bad value. */
int cli_opts_take(struct cli_opts *o, int argc, char **argv, int *i);
/* Help text for the shared options of the given groups. */
void cli_opts_help(FILE *f, unsigned groups);
/* Parse v as a whole decimal integer in [lo, hi] (or a number, cli_real)
 * into *out; otherwise print "r1infer CMD: FLAG expects an integer from LO
 * to HI, got 'V'" and return -1. */
int cli_int(const char *cmd, const char *flag, const char *v, long lo, long hi, long *out);
int cli_real(const char *cmd, const char *flag, const char *v, double lo, double hi, double *out);
/* Report an unknown option arg of cmd in one line, with the closest of the
 * command's own flags (own, NULL-terminated, may be NULL) and the shared
 * ones of groups when one is near, or that a shared option of another group
 * does not apply to cmd. Returns 2 (the exit code). */
int cli_unknown(const char *cmd, const char *arg, const char *const *own, unsigned groups);
/* The one of names (NULL-terminated) nearest to arg by edit distance, or
 * NULL when none is near (more than one edit, two for 8 letters or more). */
const char *cli_closest(const char *arg, const char *const *names);
/* The whole of file path ("-": stdin) as a string, one trailing newline
 * dropped (malloc'ed, the caller frees); NULL with a message on failure. */
char *cli_read_text(const char *cmd, const char *path);
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
int cli_open_spec(const struct cli_opts *o, r1_model_t *m, const r1_tokenizer_t *tok, r1_session_t *s,
                  r1_sampler_t *smp, r1_spec_t **sp, r1_model_t **dm, r1_session_t **ds);
/* --draft: load the draft model and check it against target m (tokenizer
 * tok, may be NULL): a different vocabulary is refused, a larger model
 * warned about. Prints the error and returns NULL on failure. */
r1_model_t *cli_load_draft(const struct cli_opts *o, const r1_model_t *m, const r1_tokenizer_t *tok);
/* "drafted N, accepted N (P%), T tokens per target step ..." on stderr. */
void cli_print_spec_stats(const r1_spec_t *sp);

#endif
