/*
 * cmd_synth.c - `r1infer synth`: write a random-weight checkpoint of a real
 * shape so tests and benchmarks have a model on any machine.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"
#include "cli/opts.h"
#include "model/model.h"

static void help(FILE *f) {
    fprintf(f, "usage: r1infer synth --config tiny|1.5b|7b|14b|32b|llama-8b|llama-70b -o DIR\n"
               "                     [--tokenizer DIR] [--dtype bf16|f16|f32] [--seed N]\n"
               "Writes config.json, model.safetensors (uniform random weights, std 0.02) and the\n"
               "tokenizer files (default for the Qwen shapes: data/tokenizers/deepseek-r1-distill-qwen;\n"
               "the llama shapes get none unless --tokenizer names one; \"\" for none).\n");
}

int cmd_synth(int argc, char **argv) {
    static const char *const flags[] = {"--config", "-o", "--tokenizer", "--seed", "--dtype", "--help", NULL};
    const char *config = NULL, *out = NULL, *tok = NULL;
    enum r1_dtype dt = R1_DTYPE_BF16;
    unsigned long long seed = 1;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
            help(stdout);
            return 0;
        }
        if (i + 1 >= argc) {
            int known = 0;
            for (int k = 0; flags[k]; k++) known |= !strcmp(a, flags[k]);
            if (!known) return cli_unknown("synth", a, flags, 0);
            fprintf(stderr, "r1infer synth: %s needs a value\n", a);
            return 2;
        }
        const char *v = argv[++i];
        if (!strcmp(a, "--config")) config = v;
        else if (!strcmp(a, "-o")) out = v;
        else if (!strcmp(a, "--tokenizer")) tok = v;
        else if (!strcmp(a, "--seed")) {
            long x;
            if (cli_int("synth", a, v, 0, 0x7fffffffffffffffL, &x)) return 2;
            seed = (unsigned long long)x;
        }
        else if (!strcmp(a, "--dtype")) {
            int d = r1_dtype_parse(v);
            if (d != R1_DTYPE_F32 && d != R1_DTYPE_F16 && d != R1_DTYPE_BF16) {
                fprintf(stderr, "r1infer synth: --dtype must be bf16, f16 or f32\n");
                return 2;
            }
            dt = (enum r1_dtype)d;
        } else {
            return cli_unknown("synth", a, flags, 0);
        }
    }
    if (!config || !out) {
        help(stderr);
        return 2;
    }
    struct r1_config c;
    if (r1_synth_config(config, &c)) {
        fprintf(stderr, "r1infer synth: %s\n", r1_last_error());
        return 1;
    }
    if (!tok && c.arch == R1_ARCH_QWEN2) tok = "data/tokenizers/deepseek-r1-distill-qwen";
    if (r1_synth_write(out, &c, dt, seed, tok && *tok ? tok : NULL, 1)) {
        fprintf(stderr, "r1infer synth: %s\n", r1_last_error());
        return 1;
    }
    fprintf(stderr, "wrote %s (%s, %s)\n", out, config, r1_dtype_name(dt));
    return 0;
}
