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
#include "synth/synth.h"

static void help(FILE *f) {
    fprintf(f, "usage: r1infer synth --config tiny|1.5b|7b|14b|32b|llama-8b|llama-70b -o DIR|FILE.gguf\n"
               "                     [--tokenizer DIR] [--dtype bf16|f16|f32] [--seed N]\n"
               "-o FILE.gguf (qwen2 shapes): one GGUF, --dtype also q8_0, q4_0, q4_1, q5_0, q5_1, q4_K,\n"
               "q5_K or q6_K, written a tensor at a time (a model larger than memory can be made); its\n"
               "rows repeat a few dozen random rows: for memory and speed measurements only.\n"
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
        } else if (!strcmp(a, "--dtype")) {
            int d = r1_dtype_parse(v);
            if (d < 0) {
                fprintf(stderr, "r1infer synth: unknown --dtype %s\n", v);
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
    size_t ol = strlen(out);
    if (ol > 5 && !strcmp(out + ol - 5, ".gguf")) { /* one file, written a tensor at a time */
        if (r1_synth_write_gguf(out, &c, dt, seed, tok && *tok ? tok : NULL, 1)) {
            fprintf(stderr, "r1infer synth: %s\n", r1_last_error());
            return 1;
        }
        fprintf(stderr, "wrote %s (%s, %s)\n", out, config, r1_dtype_name(dt));
        return 0;
    }
    if (dt != R1_DTYPE_F32 && dt != R1_DTYPE_F16 && dt != R1_DTYPE_BF16) {
        fprintf(stderr, "r1infer synth: a checkpoint directory holds bf16, f16 or f32 (--dtype)\n");
        return 2;
    }
    if (r1_synth_write(out, &c, dt, seed, tok && *tok ? tok : NULL, 1)) {
        fprintf(stderr, "r1infer synth: %s\n", r1_last_error());
        return 1;
    }
    fprintf(stderr, "wrote %s (%s, %s)\n", out, config, r1_dtype_name(dt));
    return 0;
}
