/*
 * main.c - build/r1infer: dispatch to a subcommand. Each subcommand lives in
 * its own file and parses its own flags.
 */
#include <stdio.h>
#include <string.h>

#include "cli/cli.h"
#include "cli/opts.h"
#include "r1infer.h"
#include "runtime/comm.h"
#include "util/env.h"

static const struct {
    const char *name;
    int (*fn)(int, char **);
    const char *help;
} commands[] = {
    {"run", cmd_run, "generate text from a prompt"},
    {"chat", cmd_chat, "interactive chat with the model's chat template"},
    {"tokenize", cmd_tokenize, "encode text to ids, or decode ids (--decode)"},
    {"synth", cmd_synth, "write a random-weight checkpoint of a real shape"},
    {"bench", cmd_bench, "kernel suite and end-to-end benchmark"},
    {"serve", cmd_serve, "OpenAI-compatible HTTP server"},
    {"convert", cmd_convert, "convert a Hugging Face checkpoint to GGUF"},
    {"perplexity", cmd_perplexity, "perplexity of a text; KL divergence against a reference run"},
    {"devices", cmd_devices, "list the devices of every backend (cpu, opencl, cuda)"},
};

static void usage(FILE *f) {
    fprintf(f, "usage: r1infer <command> [options]   (r1infer <command> --help for options;\n"
               "       r1infer --version for the version, commit, kernel sets and backends)\n\n");
    for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++)
        fprintf(f, "  %-10s %s\n", commands[i].name, commands[i].help);
    fprintf(f, "\n  r1infer --help-env   the environment variables r1infer reads\n");
}

int main(int argc, char **argv) {
    if (r1_comm_init(&argc, &argv)) { /* one rank of an mpirun job: tensor parallel */
        fprintf(stderr, "r1infer: %s\n", r1_last_error());
        return 1;
    }
    if (argc < 2 || !strcmp(argv[1], "-h") || !strcmp(argv[1], "--help") || !strcmp(argv[1], "help")) {
        usage(argc < 2 ? stderr : stdout);
        return argc < 2 ? 2 : 0;
    }
    if (!strcmp(argv[1], "--version") || !strcmp(argv[1], "version")) return cmd_version();
    if (!strcmp(argv[1], "--help-env")) {
        r1_env_print(stdout);
        return 0;
    }
    r1_env_check(stderr);
    for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++)
        if (!strcmp(argv[1], commands[i].name)) {
            if (r1_comm_size() > 1 && strcmp(argv[1], "run") && strcmp(argv[1], "serve") && strcmp(argv[1], "chat") &&
                strcmp(argv[1], "bench")) {
                fprintf(stderr,
                        "r1infer: %s does not run under mpirun: tensor parallelism serves run, chat, serve "
                        "and bench\n",
                        argv[1]);
                r1_comm_abort(2);
            }
            int rc = commands[i].fn(argc - 1, argv + 1);
            if (rc && r1_comm_size() > 1) r1_comm_abort(rc); /* the others may wait for this rank */
            return rc;
        }
    const char *names[sizeof commands / sizeof commands[0] + 4] = {"--version", "--help", "--help-env"};
    for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++) names[i + 3] = commands[i].name;
    const char *near = cli_closest(argv[1], names);
    fprintf(stderr, "r1infer: unknown %s '%s'%s%s%s (r1infer --help lists the commands)\n",
            argv[1][0] == '-' ? "option" : "command", argv[1], near ? "; did you mean " : "", near ? near : "",
            near ? "?" : "");
    return 2;
}
