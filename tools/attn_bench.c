/*
 * attn_bench.c - decode attention alone at depth: one token's attention over
 * every layer of a model shape's KV cache (the cache filled with random
 * values, larger than the caches of the CPU from 8k positions on), run
 * through the engine's thread pool with claimed units as a session does, for
 * several thread counts, with the context split (cpu tuning attn_split=1,
 * the default) and without it (heads only). The variants run in turn,
 * round after round, so a machine whose speed drifts hits them alike.
 *
 *   build/tools/attn_bench [--shape 1.5b|7b|8b|smol] [--depth 8192,16384,32768]
 *                          [-t 1,2] [--kv f16,q8_0] [--rounds N]
 *
 * Prints per (KV dtype, depth, threads, split) the median, fastest and
 * slowest ms per token (all layers) over the rounds, and the KV bytes read
 * per token over the median time in GB/s. Speed is only measured here,
 * never asserted.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/cpu/cpu.h"
#include "kernels/dtype.h"
#include "runtime/pool.h"
#include "util/util.h"

#define MAX_LIST 8
#define MAX_ROUNDS 64

struct shape {
    const char *name;
    int layers, n_head, n_kv_head, head_dim;
};
static const struct shape shapes[] = {
    {"1.5b", 28, 12, 2, 128},
    {"7b", 28, 28, 4, 128},
    {"8b", 32, 32, 8, 128},
    {"smol", 30, 9, 3, 64},
};

static int parse_list(const char *s, int *out) {
    int n = 0;
    while (*s && n < MAX_LIST) {
        char *end;
        long v = strtol(s, &end, 10);
        if (end == s || v < 1 || v > 1 << 20) return -1;
        out[n++] = (int)v;
        s = *end == ',' ? end + 1 : end;
        if (*end && *end != ',') return -1;
    }
    return n;
}

static uint64_t rng = 0x9e3779b97f4a7c15ull;
static uint32_t next_u32(void) {
    rng ^= rng << 13, rng ^= rng >> 7, rng ^= rng << 17;
    return (uint32_t)(rng >> 11);
}

/* Random rows: f16 values in [-1, 1); q8_0 blocks of random quants with a
 * scale of 1/127 (no quantizer pass over a gigabyte of cache). */
static void fill(enum r1_dtype dt, void *p, size_t rows, int hd) {
    size_t rb = r1_dtype_row_bytes(dt, hd);
    if (dt == R1_DTYPE_F16) {
        uint16_t *h = p;
        for (size_t i = 0; i < rows * hd; i++) h[i] = r1_f32_to_f16((float)(next_u32() % 2048) / 1024.0f - 1.0f);
        return;
    }
    uint8_t *b = p;
    const uint16_t d = r1_f32_to_f16(1.0f / 127.0f);
    for (size_t i = 0; i < rows * rb; i++) b[i] = (uint8_t)next_u32();
    for (size_t i = 0; i < rows * rb; i += 34) b[i] = (uint8_t)d, b[i + 1] = (uint8_t)(d >> 8);
}

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

int main(int argc, char **argv) {
    const struct shape *sh = &shapes[0];
    int depth[MAX_LIST] = {8192, 16384, 32768}, nd = 3, thr[MAX_LIST] = {1, 2}, nt = 2, rounds = 9;
    enum r1_dtype kvs[2] = {R1_DTYPE_F16, R1_DTYPE_Q8_0};
    int nk = 2;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!v) goto usage;
        if (!strcmp(a, "--shape")) {
            sh = NULL;
            for (size_t j = 0; j < sizeof shapes / sizeof shapes[0]; j++)
                if (!strcmp(v, shapes[j].name)) sh = &shapes[j];
            if (!sh) goto usage;
        } else if (!strcmp(a, "--depth")) {
            if ((nd = parse_list(v, depth)) < 1) goto usage;
        } else if (!strcmp(a, "-t")) {
            if ((nt = parse_list(v, thr)) < 1) goto usage;
        } else if (!strcmp(a, "--rounds")) {
            rounds = atoi(v);
            if (rounds < 1 || rounds > MAX_ROUNDS) goto usage;
        } else if (!strcmp(a, "--kv")) {
            nk = 0;
            for (const char *s = v; *s && nk < 2;) {
                const char *e = strchr(s, ',');
                size_t n = e ? (size_t)(e - s) : strlen(s);
                if (n == 3 && !strncmp(s, "f16", 3)) kvs[nk++] = R1_DTYPE_F16;
                else if (n == 4 && !strncmp(s, "q8_0", 4)) kvs[nk++] = R1_DTYPE_Q8_0;
                else goto usage;
                s = e ? e + 1 : s + n;
            }
        } else goto usage;
        i++;
    }
    if (r1_backend_cpu.init && r1_backend_cpu.init() != 0) {
        fprintf(stderr, "attn_bench: %s\n", r1_last_error());
        return 1;
    }
    const int hd = sh->head_dim, nh = sh->n_head, nkv = sh->n_kv_head, L = sh->layers;
    const int stride = (nh + 2 * nkv) * hd;
    int maxd = 0, maxt = 0;
    for (int i = 0; i < nd; i++) maxd = depth[i] > maxd ? depth[i] : maxd;
    for (int i = 0; i < nt; i++) maxt = thr[i] > maxt ? thr[i] : maxt;
    struct r1_pool *pool[MAX_LIST];
    for (int i = 0; i < nt; i++)
        if (!(pool[i] = r1_pool_new(thr[i]))) {
            fprintf(stderr, "attn_bench: %s\n", r1_last_error());
            return 1;
        }
    float *x = malloc((size_t)stride * sizeof(float)), *out = malloc((size_t)nh * hd * sizeof(float));
    float *sc = malloc((size_t)maxt * maxd * sizeof(float));
    if (!x || !out || !sc) return fprintf(stderr, "attn_bench: out of memory\n"), 1;
    for (int i = 0; i < stride; i++) x[i] = (float)(next_u32() % 2048) / 1024.0f - 1.0f;
    printf("decode attention, %s shape (%d layers, %d heads on %d KV heads, head_dim %d), ISA %s, %d rounds\n",
           sh->name, L, nh, nkv, hd, r1_cpu_current()->name, rounds);
    printf("%-5s %6s %3s %-6s %9s %9s %9s %8s\n", "kv", "depth", "thr", "split", "median_ms", "min_ms", "max_ms",
           "GB/s");
    for (int k = 0; k < nk; k++) {
        const enum r1_dtype dt = kvs[k];
        const size_t rows = (size_t)L * nkv * maxd, rb = r1_dtype_row_bytes(dt, hd);
        struct r1_kv_cache kv = {dt, L, nkv, maxd, hd, malloc(rows * rb), malloc(rows * rb), NULL};
        if (!kv.k || !kv.v) return fprintf(stderr, "attn_bench: out of memory\n"), 1;
        fill(dt, kv.k, rows, hd);
        fill(dt, kv.v, rows, hd);
        for (int di = 0; di < nd; di++) {
            const int nv = 2 * nt;
            static double t[2 * MAX_LIST][MAX_ROUNDS];
            for (int r = 0; r < rounds + 1; r++) /* round 0 warms up */
                for (int v = 0; v < nv; v++) {
                    int ti = v / 2, split = v % 2, claim = 0;
                    r1_cpu_tune("attn_split", split);
                    double t0 = r1_now();
                    for (int l = 0; l < L; l++) {
                        struct r1_op op = {.kernel = R1_K_ATTENTION_GQA,
                                           .T = 1,
                                           .pos0 = depth[di] - 1,
                                           .x = x,
                                           .out = out,
                                           .n_head = nh,
                                           .n_kv_head = nkv,
                                           .head_dim = hd,
                                           .layer = l,
                                           .kv = &kv,
                                           .scratch = sc,
                                           .scratch_stride = (size_t)maxd,
                                           .claim = &claim};
                        claim = 0;
                        r1_pool_run(pool[ti], r1_backend_cpu.fn[R1_K_ATTENTION_GQA], &op);
                    }
                    if (r) t[v][r - 1] = (r1_now() - t0) * 1e3;
                }
            r1_cpu_tune_reset();
            const double bytes = 2.0 * L * nkv * (double)depth[di] * rb;
            for (int v = 0; v < nv; v++) {
                qsort(t[v], (size_t)rounds, sizeof(double), cmp_double);
                double med = rounds % 2 ? t[v][rounds / 2] : 0.5 * (t[v][rounds / 2 - 1] + t[v][rounds / 2]);
                printf("%-5s %6d %3d %-6s %9.2f %9.2f %9.2f %8.2f\n", r1_dtype_name(dt), depth[di], thr[v / 2],
                       v % 2 ? "ctx" : "heads", med, t[v][0], t[v][rounds - 1], bytes / (med * 1e6));
            }
        }
        free(kv.k), free(kv.v);
    }
    for (int i = 0; i < nt; i++) r1_pool_free(pool[i]);
    free(x), free(out), free(sc);
    return 0;
usage:
    fprintf(stderr, "usage: attn_bench [--shape 1.5b|7b|8b|smol] [--depth 8192,16384,32768] [-t 1,2]\n"
                    "                  [--kv f16,q8_0] [--rounds N]\n");
    return 2;
}
