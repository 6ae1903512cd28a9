/*
 * env.c - the environment variables r1infer reads (env.h): the table, and
 * the only getenv calls in the library.
 */
#include "util/env.h"

#include <stdlib.h>
#include <string.h>

#include "util/util.h"

extern char **environ;

const struct r1_env_var r1_env_vars[] = {
    {"R1INFER_MODEL", "a model path", "models/SmolLM2-135M-Instruct.Q4_1.gguf if present",
     "The model of run, chat, serve and bench when -m is not given.", NULL},
    {"R1_CPU_ISA", "avx512-amx, avx512, avx2-vnni, avx2, neon-dot, neon, generic; avx512-amx-emu (tests)",
     "the best set this CPU runs",
     "Runs that kernel set of the cpu backend instead of the best one (a set this CPU cannot run is an "
     "error): what a machine without AVX-512 or AMX gets, or AMX off (avx512).",
     NULL},
    {"R1_CPU_ACT", "q8 or q8x2", "each format's",
     "Integer activations of the quantized matmuls: q8 quantizes each token once (llama.cpp's "
     "precision), q8x2 twice (the residual too, logits within ~5e-3 of f32). Unset: one part for the "
     "K-quants and regrouped q4_0 (q4_0x8) on the avx512 set (not avx512-amx), two for every other format.",
     "q8|q8x2"},
    {"R1_KERNEL_<name>", "ref", "the backend's kernel",
     "Runs kernel <name> (embedding, rms_norm, qkv_bias, rope_qk, kv_append, attention_gqa, matvec_add, "
     "gate_up_silu, lm_head, argmax) on the reference backend, to bisect a numerical bug; a misspelt "
     "name is an error.",
     NULL},
    {"R1_CL_DEVICE", "a device index", "0", "The OpenCL device (what --cl-device sets; r1infer devices lists them).",
     NULL},
    {"R1_CL_PREFILL", "own or clblast", "own on CPU devices, clblast on GPUs",
     "Who multiplies prompt batches on the opencl backend.", "own|clblast"},
    {"R1_CL_MATMUL", "group or item", "group on GPUs, item on CPU devices",
     "How the opencl backend's decode matvecs split rows: a work-group a row, or a work-item a row.", "group|item"},
    {"R1_CL_CACHE", "0 or 1", "1", "Caches compiled OpenCL programs under $XDG_CACHE_HOME/r1infer.", "0|1"},
    {"R1_GPU", "a device index", "0", "The CUDA device (what --gpu sets).", NULL},
    {"R1_CUDA_GRAPH", "0 or 1", "1", "The cuda backend captures a decode step as one CUDA graph.", "0|1"},
    {"R1_CUDA_PREFILL", "fast or exact", "fast", "The precision of the cuda backend's prompt GEMMs.", "fast|exact"},
    {"R1_CUDA_ATT", "fast or plain", "fast", "The cuda backend's decode attention kernel.", "fast|plain"},
    {"R1_CUDA_ATT_CHUNK", "32, 64 or 128", "32", "Keys per split of the cuda decode attention.", "32|64|128"},
    {"R1_SPEC_FIXED_K", "any value", "unset",
     "Tests: serve drafts --draft-n tokens at every speculative step instead of adapting k.", NULL},
    {"R1_BENCH_LOCK", "a file path", "unset",
     "bench --spec holds a shared lock on it while it measures (an exclusive holder waits for it).", NULL},
    {"XDG_CACHE_HOME", "a directory", "$HOME/.cache",
     "Where the OpenCL program cache and the layout cache (--layout-cache auto) live.", NULL},
    {"HOME", "a directory", "-", "The caches' default place.", NULL},
    {"USER", "a name", "r1infer", "The submitter a benchmark report names.", NULL},
    {"OMPI_COMM_WORLD_SIZE", "set by mpirun", "-", "The number of ranks: tensor parallelism over MPI.", NULL},
    {"OMPI_COMM_WORLD_LOCAL_RANK", "set by mpirun", "-", "A rank's index on its machine: the GPU a NCCL rank takes.",
     NULL},
    {"PMIX_RANK", "set by mpirun", "-", "Present when a process is a rank of an MPI job.", NULL},
};
const int r1_env_count = sizeof r1_env_vars / sizeof r1_env_vars[0];

/* the table entry for name: exact, or a prefix entry "P_<x>" whose "P_" starts name */
static const struct r1_env_var *lookup(const char *name) {
    for (int i = 0; i < r1_env_count; i++) {
        const char *n = r1_env_vars[i].name, *lt = strchr(n, '<');
        if (lt ? !strncmp(name, n, (size_t)(lt - n)) : !strcmp(name, n)) return &r1_env_vars[i];
    }
    return NULL;
}

const char *r1_env(const char *name) {
    R1_ASSERT(lookup(name) != NULL); /* every name the library reads is in the table */
    return getenv(name);
}

void r1_env_each(const char *prefix, void (*fn)(const char *, const char *, void *), void *ctx) {
    R1_ASSERT(lookup(prefix) != NULL);
    const size_t n = strlen(prefix);
    for (char **e = environ; e && *e; e++) {
        if (strncmp(*e, prefix, n) != 0) continue;
        const char *eq = strchr(*e, '=');
        if (!eq) continue;
        char suffix[128];
        snprintf(suffix, sizeof suffix, "%.*s", (int)(eq - *e - (ptrdiff_t)n), *e + n);
        fn(suffix, eq + 1, ctx);
    }
}

int r1_env_check(FILE *f) {
    int bad = 0;
    for (char **e = environ; e && *e; e++) {
        if (strncmp(*e, "R1_", 3) != 0 && strncmp(*e, "R1INFER_", 8) != 0) continue;
        const char *eq = strchr(*e, '=');
        char name[128];
        snprintf(name, sizeof name, "%.*s", eq ? (int)(eq - *e) : (int)strlen(*e), *e);
        const struct r1_env_var *v = lookup(name);
        if (v && v->choices && eq && eq[1]) {
            const char *c = v->choices, *val = eq + 1;
            const size_t n = strlen(val);
            int ok = 0;
            while (*c && !ok) {
                const char *bar = strchr(c, '|');
                const size_t l = bar ? (size_t)(bar - c) : strlen(c);
                ok = l == n && !strncmp(c, val, n);
                c += l + (bar != NULL);
            }
            if (!ok) {
                fprintf(f, "r1infer: environment %s=%s: expected one of %s\n", name, val, v->choices);
                bad++;
            }
        }
        if (v) continue;
        if (!strncmp(name, "R1_TEST", 7) || !strncmp(name, "R1_BIN", 6) || !strncmp(name, "R1_BUILD", 8) ||
            !strncmp(name, "R1_BENCH", 8))
            continue; /* the test scripts' own */
        fprintf(f, "r1infer: environment variable %s is not one r1infer reads (r1infer --help-env lists them)\n", name);
        bad++;
    }
    return bad;
}

void r1_env_print(FILE *f) {
    fprintf(f, "| variable | takes | default | meaning |\n|---|---|---|---|\n");
    for (int i = 0; i < r1_env_count; i++)
        fprintf(f, "| `%s` | %s | %s | %s |\n", r1_env_vars[i].name, r1_env_vars[i].values, r1_env_vars[i].dflt,
                r1_env_vars[i].meaning);
}

int r1_env_choice(const char *name, const char *const *values, int n, int dflt) {
    const char *v = r1_env(name);
    if (!v || !*v) return dflt;
    for (int i = 0; i < n; i++)
        if (!strcmp(v, values[i])) return i;
    char list[128];
    r1_join_words(list, sizeof list, values, n, " or ");
    r1_err("environment %s=%s: expected %s", name, v, list);
    return -1;
}
