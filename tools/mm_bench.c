/*
 * mm_bench.c - the matmul kernels of a decode step (or a prefill batch) at a
 * model's shapes, for several weight dtypes side by side in one process:
 * the variants run in turn, round after round, so a machine whose speed
 * drifts hits them alike. Weights are random (quantized from N(0, 0.02)),
 * enough distinct layer sets to stream from memory (far more than the L3),
 * run through the engine's thread pool with claimed rows, as a session does.
 *
 *   build/tools/mm_bench [-t THREADS] [-T TOKENS] [--shape smol|1.5b|7b|8b|14b] [--isa NAME]
 *                        [--rounds N] DTYPE[,DTYPE...]
 *
 * DTYPE is any weight dtype name (q4_1, q4_1x8, q8_0, ...); it is used as
 * given (no regrouping), so a format and its regrouped layout can be
 * compared. DTYPE@NAME=VALUE runs that dtype with the cpu tuning NAME set
 * to the integer VALUE (cpu.h r1_cpu_tune; e.g. q4_K@act_parts=1 beside
 * q4_K, bf16@row1_act=0), the defaults back after each such variant; the
 * kernel set is one a process (--isa). Prints per dtype the layer matmuls' and the lm_head's GB/s
 * (decode, T = 1) or GFLOP/s (T > 1), best and median over the rounds.
 * At T = 1 each round starts with the bench's read-bandwidth probe (512 MiB,
 * 2 MiB pages, the best of its readers), and "frac" is the median over
 * rounds of the layers' GB/s over that round's probe: the machine's speed
 * drifts by minutes, so a fraction is only fair against a probe taken
 * beside it. Speed is only ever measured here, never asserted.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench/bench.h"
#include "kernels/cpu/cpu.h"
#include "kernels/dtype.h"
#include "runtime/pool.h"
#include "util/util.h"

#define MAX_V 8
#define MAX_SETS 256
#define STREAM_BYTES ((size_t)400 << 20) /* layer weights streamed per round */

struct shape {
    const char *name;
    int dim, qkv, ffn, vocab, layers;
};
static const struct shape shapes[] = {
    {"smol", 576, 960, 1536, 49152, 30},    /* SmolLM2-135M */
    {"1.5b", 1536, 2048, 8960, 151936, 28}, /* R1-Distill-Qwen-1.5B */
    {"7b", 3584, 4608, 18944, 152064, 28},  /* R1-Distill-Qwen-7B */
    {"8b", 4096, 6144, 14336, 128256, 32},  /* R1-Distill-Llama-8B */
    {"14b", 5120, 7168, 13824, 152064, 48}, /* R1-Distill-Qwen-14B */
};

struct variant {
    enum r1_dtype dt;
    char env[64]; /* "NAME=VALUE" set while this variant runs, or "" */
    int nsets;
    struct r1_mat m[MAX_SETS][4], head[3];
    size_t set_bytes, head_bytes;
    double lay[64], hd[64], op[4][64]; /* seconds per round: all layers, lm_head, each kind */
    double frac[64];                   /* T = 1: layers' GB/s over the round's probe */
};

static uint64_t rng = 0x2545F4914F6CDD1Dull;
static float frand(void) { return r1_frand_normal(&rng); }

/* A variant's matrices are carved from one arena (r1_alloc: 2 MiB pages
 * for big buffers), as a session's weights lie in one pool: each matrix on
 * its own r1_alloc got 4 KiB pages below 32 MiB, and every dtype then read
 * at the same ~27 GB/s while the engine read 40-50 on the same machine. */
struct arena {
    uint8_t *base;
    size_t used, size;
};
static size_t mat_bytes(enum r1_dtype dt, int rows, int cols) {
    return (r1_dtype_row_bytes(dt, cols) * (size_t)rows + 63) & ~(size_t)63;
}

/* rows x cols of dt, random; rows quantized once and repeated (speed does
 * not depend on the values, and quantizing gigabytes would take long) */
static int mat_make(struct arena *a, struct r1_mat *m, enum r1_dtype dt, int rows, int cols) {
    size_t rb = r1_dtype_row_bytes(dt, cols);
    if (!rb) return r1_err("%s cannot hold rows of %d columns", r1_dtype_name(dt), cols);
    if (a->used + mat_bytes(dt, rows, cols) > a->size) return r1_err("mm_bench: arena too small");
    uint8_t *p = a->base + a->used;
    a->used += mat_bytes(dt, rows, cols);
    enum { DISTINCT = 64 };
    float *x = malloc((size_t)cols * 4);
    for (int r = 0; r < rows && r < DISTINCT; r++) {
        for (int c = 0; c < cols; c++) x[c] = frand() * 0.02f;
        r1_dtype_traits[dt].from_f32(x, p + (size_t)r * rb, cols);
    }
    for (int r = DISTINCT; r < rows; r++) memcpy(p + (size_t)r * rb, p + (size_t)(r % DISTINCT) * rb, rb);
    free(x);
    *m = (struct r1_mat){.data = p, .dtype = dt, .rows = rows, .cols = cols, .row_bytes = rb};
    return 0;
}

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

int main(int argc, char **argv) {
    int nth = 2, T = 1, rounds = 10;
    const char *shape_name = "smol", *isa = NULL, *list = NULL;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "-t") && i + 1 < argc) nth = atoi(argv[++i]);
        else if (!strcmp(argv[i], "-T") && i + 1 < argc) T = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--shape") && i + 1 < argc) shape_name = argv[++i];
        else if (!strcmp(argv[i], "--isa") && i + 1 < argc) isa = argv[++i];
        else if (!strcmp(argv[i], "--rounds") && i + 1 < argc) rounds = atoi(argv[++i]);
        else if (argv[i][0] != '-') list = argv[i];
        else {
            fprintf(stderr, "mm_bench: unknown option %s\n", argv[i]);
            return 2;
        }
    }
    if (!list || nth < 1 || T < 1 || rounds < 1 || rounds > 64) {
        fprintf(stderr, "usage: mm_bench [-t THREADS] [-T TOKENS] [--shape smol|1.5b|7b|8b|14b] [--isa NAME] "
                        "[--rounds N<=64] DTYPE[,DTYPE...]\n");
        return 2;
    }
    const struct shape *sh = NULL;
    for (size_t i = 0; i < sizeof shapes / sizeof shapes[0]; i++)
        if (!strcmp(shapes[i].name, shape_name)) sh = &shapes[i];
    if (!sh) {
        fprintf(stderr, "mm_bench: no shape '%s' (smol, 1.5b)\n", shape_name);
        return 2;
    }
    if (r1_backend_cpu.init() || (isa && r1_cpu_select(isa))) {
        fprintf(stderr, "mm_bench: %s\n", r1_last_error());
        return 1;
    }
    static struct variant v[MAX_V];
    int nv = 0;
    char buf[256];
    snprintf(buf, sizeof buf, "%s", list);
    for (char *tok = strtok(buf, ","); tok && nv < MAX_V; tok = strtok(NULL, ",")) {
        char *at = strchr(tok, '@'); /* dtype@NAME=VALUE: with that environment variable */
        v[nv].env[0] = 0;
        if (at) {
            *at = 0;
            snprintf(v[nv].env, sizeof v[nv].env, "%s", at + 1);
            char *eq = strchr(v[nv].env, '=');
            if (!eq) {
                fprintf(stderr, "mm_bench: '%s': want DTYPE@NAME=VALUE\n", v[nv].env);
                return 2;
            }
            *eq = 0;
            const int bad = r1_cpu_tune(v[nv].env, atoi(eq + 1));
            r1_cpu_tune_reset();
            *eq = '=';
            if (bad) {
                fprintf(stderr, "mm_bench: '%s': %s\n", v[nv].env, r1_last_error());
                return 2;
            }
        }
        int dt = r1_dtype_parse_any(tok);
        if (dt < 0 || !r1_dtype_traits[dt].from_f32) {
            fprintf(stderr, "mm_bench: '%s' is no dtype this tool can make\n", tok);
            return 2;
        }
        v[nv++].dt = (enum r1_dtype)dt;
    }
    const int rows[4] = {sh->qkv, sh->dim, 2 * sh->ffn, sh->dim}, cols[4] = {sh->dim, sh->dim, sh->dim, sh->ffn};
    const enum r1_kernel kern[4] = {R1_K_QKV_BIAS, R1_K_MATVEC_ADD, R1_K_GATE_UP_SILU, R1_K_MATVEC_ADD};
    for (int i = 0; i < nv; i++) {
        struct variant *x = &v[i];
        x->set_bytes = 0;
        for (int k = 0; k < 4; k++) x->set_bytes += r1_dtype_row_bytes(x->dt, cols[k]) * (size_t)rows[k];
        x->nsets = (int)((STREAM_BYTES + x->set_bytes - 1) / x->set_bytes);
        if (x->nsets > MAX_SETS) x->nsets = MAX_SETS;
        if (T > 1) x->nsets = 1; /* prefill: compute-bound, one layer */
        struct arena a = {.size = 3 * mat_bytes(x->dt, sh->vocab, sh->dim)};
        for (int k = 0; k < 4; k++) a.size += (size_t)x->nsets * mat_bytes(x->dt, rows[k], cols[k]);
        if (!(a.base = r1_alloc(a.size, "weights"))) goto fail;
        for (int s = 0; s < x->nsets; s++)
            for (int k = 0; k < 4; k++)
                if (mat_make(&a, &x->m[s][k], x->dt, rows[k], cols[k])) goto fail;
        for (int h = 0; h < 3; h++) /* three heads in turn: more than the L3 */
            if (mat_make(&a, &x->head[h], x->dt, sh->vocab, sh->dim)) goto fail;
        x->head_bytes = r1_dtype_row_bytes(x->dt, sh->dim) * (size_t)sh->vocab;
    }
    struct r1_pool *pool = r1_pool_new(nth);
    if (!pool) goto fail;
    size_t maxrows = (size_t)sh->vocab > (size_t)2 * sh->ffn ? (size_t)sh->vocab : (size_t)2 * sh->ffn;
    float *xin = malloc((size_t)T * sh->ffn * 4), *out = malloc((size_t)T * maxrows * 4);
    float *bias = calloc((size_t)sh->qkv, 4);
    for (size_t i = 0; i < (size_t)T * sh->ffn; i++) xin[i] = frand();
    memset(out, 0, (size_t)T * maxrows * 4);
    int claim = 0;
    printf("mm_bench: %s shapes (dim %d, qkv %d, ffn %d, vocab %d), %d threads, T=%d, isa %s, %d rounds\n", sh->name,
           sh->dim, sh->qkv, sh->ffn, sh->vocab, nth, T, r1_cpu_current()->name, rounds);
    double probe[64];
    for (int rd = -1; rd < rounds; rd++) { /* round -1: warm-up */
        if (T == 1 && rd >= 0) {
            struct bench_bw bw;
            if (bench_bw_measure(&bw, pool, (size_t)512 << 20, (size_t)32 << 20, 1)) goto fail;
            probe[rd] = bw.best_gbps;
            bench_bw_free(&bw);
        }
        for (int i = 0; i < nv; i++) {
            struct variant *x = &v[i];
            char *eq = strchr(x->env, '=');
            if (eq) {
                *eq = 0;
                r1_cpu_tune(x->env, atoi(eq + 1));
            }
            double t0 = r1_now(), tk[4] = {0, 0, 0, 0};
            for (int s = 0; s < x->nsets; s++)
                for (int k = 0; k < 4; k++) {
                    struct r1_op op = {.kernel = kern[k],
                                       .T = T,
                                       .x = xin,
                                       .out = out,
                                       .w = &x->m[s][k],
                                       .b = k == 0 ? bias : NULL,
                                       .claim = &claim};
                    claim = 0;
                    double a = r1_now();
                    r1_pool_run(pool, r1_backend_cpu.fn[kern[k]], &op);
                    tk[k] += r1_now() - a;
                }
            double t1 = r1_now();
            if (rd >= 0)
                for (int k = 0; k < 4; k++) x->op[k][rd] = tk[k];
            struct r1_op op = {
                .kernel = R1_K_LM_HEAD, .T = T, .x = xin, .out = out, .w = &x->head[(rd + 1) % 3], .claim = &claim};
            claim = 0;
            r1_pool_run(pool, r1_backend_cpu.fn[R1_K_LM_HEAD], &op);
            double t2 = r1_now();
            if (rd >= 0) x->lay[rd] = t1 - t0, x->hd[rd] = t2 - t1;
            if (rd >= 0 && T == 1) x->frac[rd] = (double)x->set_bytes * x->nsets / (t1 - t0) / 1e9 / probe[rd];
            if (eq) {
                r1_cpu_tune_reset();
                *eq = '=';
            }
        }
    }
    if (T == 1) {
        double ps[64];
        memcpy(ps, probe, (size_t)rounds * sizeof(double));
        qsort(ps, (size_t)rounds, sizeof(double), cmp_double);
        printf("read probe %.2f GB/s best, %.2f median (each round's probe: frac)\n", ps[rounds - 1], ps[rounds / 2]);
    }
    printf("%-8s %10s %10s %10s %10s %8s %8s %8s %8s   %s\n", "dtype", "layers", "(median)", "lm_head", "(median)",
           "qkv", "o", "gate_up", "down", T == 1 ? "GB/s of weights read; frac" : "GFLOP/s");
    for (int i = 0; i < nv; i++) {
        struct variant *x = &v[i];
        qsort(x->lay, (size_t)rounds, sizeof(double), cmp_double);
        qsort(x->hd, (size_t)rounds, sizeof(double), cmp_double);
        double lw = T == 1 ? (double)x->set_bytes * x->nsets : 0, hw = T == 1 ? (double)x->head_bytes : 0;
        if (T > 1) {
            for (int k = 0; k < 4; k++) lw += 2.0 * rows[k] * cols[k] * T;
            hw = 2.0 * sh->vocab * sh->dim * T;
        }
        char name[96];
        snprintf(name, sizeof name, "%s%s%s", r1_dtype_name(x->dt), x->env[0] ? "@" : "", x->env);
        printf("%-8s %10.2f %10.2f %10.2f %10.2f", name, lw / x->lay[0] / 1e9, lw / x->lay[rounds / 2] / 1e9,
               hw / x->hd[0] / 1e9, hw / x->hd[rounds / 2] / 1e9);
        for (int k = 0; k < 4; k++) { /* medians */
            qsort(x->op[k], (size_t)rounds, sizeof(double), cmp_double);
            double b = T == 1 ? (double)r1_dtype_row_bytes(x->dt, cols[k]) * rows[k] * x->nsets
                              : 2.0 * rows[k] * cols[k] * T * x->nsets;
            printf(" %8.2f", b / x->op[k][rounds / 2] / 1e9);
        }
        if (T == 1) {
            qsort(x->frac, (size_t)rounds, sizeof(double), cmp_double);
            printf("   %.2f", x->frac[rounds / 2]);
        }
        printf("\n");
    }
    r1_pool_free(pool);
    return 0;
fail:
    fprintf(stderr, "mm_bench: %s\n", r1_last_error());
    return 1;
}
