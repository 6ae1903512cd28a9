/*
 * cpu_table.c - the CPU performance table in one run: for each weight dtype and
 * thread count, prefill tok/s (64 and 512 tokens) and greedy decode tok/s on
 * a checkpoint, next to the read bandwidth measured by the same threads right
 * before, and decode as a fraction of the ceiling (bandwidth / bytes per
 * token). Usage: build/tools/cpu_table MODEL... [threads...] [--isa LIST]
 * (threads default 1 2). MODEL is a checkpoint directory, a row per dtype
 * (R1_TABLE_DTYPES=q4_0,f16 runs only those; default f16,bf16,q8_0,q4_0),
 * or a .gguf file, one row in the file's own weight types (a Q4_K_M mix).
 * --isa avx512,avx2,generic prints the same rows for each kernel set this
 * CPU runs (R1_CPU_ISA for one run; default: the best). "fraction" divides
 * decode by the probe taken before the row; "frac/win" is the median over
 * windows of 4 decode tokens of each window's GB/s over a 512 MiB read right
 * after it.
 * R1_TABLE_AB=1 instead compares q4_0 weights regrouped (q4_0x8, the
 * default where the cpu kernels have it) with plain q4_0 on the same decode,
 * alternating token by token so that the machine's noise hits both alike;
 * R1_TABLE_AB=split compares the guided row split of decode matmuls with the
 * static one the same way, for each dtype of the table; R1_TABLE_AB=act
 * compares two-part integer activations (the default) with one part (q8);
 * R1_TABLE_AB=rows the float tiles' decode rows four a pass where a
 * token's activations outgrow L1 (the default) with one row at a time
 * (cpu.h r1_cpu_tuning.row1_act).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "bench/bench.h"
#include "kernels/cpu/cpu.h"
#include "runtime/pool.h"
#include "util/util.h"

#define MiB ((size_t)1 << 20)

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static double time_prefill(r1_session_t *s, const int32_t *ids, int n) {
    r1_session_truncate(s, 0);
    double t0 = r1_now();
    if (!r1_session_forward(s, ids, n, NULL)) return -1;
    return n / (r1_now() - t0);
}

/* The two variants R1_TABLE_AB=split|act|rows alternates: b = 0 is the default. */
enum { AB_NONE, AB_SPLIT, AB_ACT, AB_ROWS };
/* per mode: its R1_TABLE_AB value, then the labels of variants 0 and 1 */
static const char *const ab_names[][3] = {
    {"", "", ""}, {"split", "guided", "static"}, {"act", "q8x2", "q8"}, {"rows", "rows4", "row1"}};
static void ab_set(int ab, int b) {
    if (ab == AB_ACT) r1_cpu_set_act_parts(b ? 1 : 2);
    else if (ab == AB_ROWS) r1_cpu_tuning.row1_act = b ? 0 : R1_CPU_ROW1_ACT;
    else r1_cpu_tune("static_split", b);
}

static int ab_q4_0(const char *dir, const int *threads, int nt, const int32_t *ids, int n_dec) {
    r1_model_t *m[2];
    for (int i = 0; i < 2; i++) {
        r1_cpu_tune("q4_0_plain", i);
        m[i] = r1_model_load(dir, &(struct r1_load_opts){.dtype = R1_DTYPE_Q4_0});
        if (!m[i]) {
            fprintf(stderr, "%s\n", r1_last_error());
            return 1;
        }
    }
    r1_cpu_tune("q4_0_plain", 0);
    double bpt = (double)r1_model_decode_bytes(m[1]);
    for (int k = 0; k < nt; k++) {
        struct r1_pool *pool = r1_pool_new(threads[k]);
        struct bench_bw bw;
        memset(&bw, 0, sizeof bw);
        if (bench_bw_measure(&bw, pool, 1200 * MiB, 32 * MiB, 3)) return 1;
        bench_bw_free(&bw);
        r1_pool_free(pool);
        r1_session_t *s[2];
        double t[2] = {0, 0}, pf[2] = {0, 0};
        int32_t id[2] = {1, 1};
        for (int i = 0; i < 2; i++) {
            s[i] = r1_session_new(
                m[i], &(struct r1_session_opts){
                          .n_ctx = 1024, .backend = "cpu", .n_threads = threads[k], .kv_dtype = R1_DTYPE_AUTO});
            if (!s[i]) return 1;
        }
        for (int rep = 0; rep < 3; rep++)
            for (int i = 0; i < 2; i++) pf[i] += time_prefill(s[i], ids, 64) / 3;
        for (int j = 0; j < 2 * n_dec; j++) {
            int i = j & 1;
            double t0 = r1_now();
            if (!r1_session_forward(s[i], &id[i], 1, NULL)) return 1;
            t[i] += r1_now() - t0;
        }
        printf("q4_0 %d thr, bw %.1f GB/s: %s %.2f tok/s (%.2f of ceiling), prefill64 %.1f | plain "
               "q4_0 %.2f tok/s (%.2f), prefill64 %.1f\n",
               threads[k], bw.best_gbps, r1_dtype_name(r1_model_dtype(m[0])), n_dec / t[0],
               n_dec / t[0] * bpt / 1e9 / bw.best_gbps, pf[0], n_dec / t[1], n_dec / t[1] * bpt / 1e9 / bw.best_gbps,
               pf[1]);
        fflush(stdout);
        for (int i = 0; i < 2; i++) r1_session_free(s[i]);
    }
    for (int i = 0; i < 2; i++) r1_model_free(m[i]);
    return 0;
}

/* One row per thread count: model `path` held as dt (R1_DTYPE_AUTO: the
 * file's own), labelled `label`, on the ISA selected now. */
static int table_rows(const char *path, enum r1_dtype dt, const char *label, const int *threads, int nt, int ab) {
    int32_t ids[512];
    const int n_dec = 32;
    r1_model_t *m = r1_model_load(path, &(struct r1_load_opts){.dtype = dt});
    if (!m) {
        fprintf(stderr, "%s\n", r1_last_error());
        return 1;
    }
    const int vocab = r1_model_config(m)->vocab;
    for (int i = 0; i < 512; i++) ids[i] = (1000 + (i * 7919) % 100000) % vocab;
    double bpt = (double)r1_model_decode_bytes(m);
    for (int k = 0; k < nt; k++) {
        /* the ceiling: read bandwidth with this many threads, right now */
        struct r1_pool *pool = r1_pool_new(threads[k]);
        struct bench_bw bw;
        memset(&bw, 0, sizeof bw);
        if (bench_bw_measure(&bw, pool, 1200 * MiB, 512 * MiB, 3)) return 1;
        r1_pool_set_spin(pool, 0); /* kept for the probes between decode windows, asleep */
        r1_session_t *s =
            r1_session_new(m, &(struct r1_session_opts){
                                  .n_ctx = 1024, .backend = "cpu", .n_threads = threads[k], .kv_dtype = R1_DTYPE_AUTO});
        if (!s) {
            fprintf(stderr, "%s\n", r1_last_error());
            return 1;
        }
        if (ab) {
            double t[2] = {0, 0}, pf[2] = {0, 0};
            int32_t id = 1;
            for (int i = 0; i < 8; i++) {
                ab_set(ab, i & 1);
                pf[i & 1] += time_prefill(s, ids, 64) / 4;
            }
            for (int i = 0; i < 4 * n_dec; i++) {
                ab_set(ab, i & 1);
                double t0 = r1_now();
                if (!r1_session_forward(s, &id, 1, NULL)) return 1;
                t[i & 1] += r1_now() - t0;
            }
            ab_set(ab, 0);
            printf("%-7s %-16s %3d  %s %.2f tok/s (%.2f) pf64 %.1f  %s %.2f tok/s (%.2f) pf64 %.1f  "
                   "bw %.1f GB/s\n",
                   r1_cpu_current()->name, label, threads[k], ab_names[ab][1], 2 * n_dec / t[0],
                   2 * n_dec / t[0] * bpt / 1e9 / bw.best_gbps, pf[0], ab_names[ab][2], 2 * n_dec / t[1],
                   2 * n_dec / t[1] * bpt / 1e9 / bw.best_gbps, pf[1], bw.best_gbps);
            fflush(stdout);
            r1_session_free(s);
            bench_bw_free(&bw);
            r1_pool_free(pool);
            continue;
        }
        time_prefill(s, ids, 512); /* warm-up: first touch of the session's buffers and scratch */
        double pf512 = time_prefill(s, ids, 512);
        double pf64 = time_prefill(s, ids, 64); /* its cache is what decode extends */
        /* decode in windows of WIN tokens, each followed by a 512 MiB read
         * through the probe's threads: every window gets the bandwidth of
         * its own moment, so a machine whose bandwidth drifts from second
         * to second does not decide the fraction */
        enum { WIN = 4 };
        double frac[64], tdec = 0;
        int nw = 0;
        int32_t id = 1;
        for (int w = 0; w < n_dec / WIN; w++) {
            double t0 = r1_now();
            for (int i = 0; i < WIN; i++) {
                const float *l = r1_session_forward(s, &id, 1, NULL);
                int best = 0;
                for (int j = 1; j < vocab; j++)
                    if (l[j] > l[best]) best = j;
                id = best;
            }
            double tw = r1_now() - t0;
            tdec += tw;
            usleep(20000); /* the session's workers stop spinning and sleep: the probe has the cores */
            t0 = r1_now();
            bench_flush(&bw, pool);
            double probe = (double)bw.flush_bytes / (r1_now() - t0) / 1e9;
            frac[nw++] = WIN * bpt / tw / 1e9 / probe;
        }
        qsort(frac, (size_t)nw, sizeof frac[0], cmp_double);
        double dec = nw * WIN / tdec, fmed = nw % 2 ? frac[nw / 2] : 0.5 * (frac[nw / 2 - 1] + frac[nw / 2]);
        printf("%-7s %-16s %3d %9.3f %10.1f %10.1f %10.2f %9.1f %9.1f %9.2f %9.2f\n", r1_cpu_current()->name, label,
               threads[k], bpt / 1e9, pf64, pf512, dec, dec * bpt / 1e9, bw.best_gbps, dec * bpt / 1e9 / bw.best_gbps,
               fmed);
        fflush(stdout);
        r1_session_free(s);
        bench_bw_free(&bw);
        r1_pool_free(pool);
    }
    r1_model_free(m);
    return 0;
}

/* "a,b,c" contains name as one of its items */
static int in_list(const char *list, const char *name) {
    size_t l = strlen(name);
    for (const char *p = list; (p = strstr(p, name)); p += l)
        if ((p == list || p[-1] == ',') && (!p[l] || p[l] == ',')) return 1;
    return 0;
}

int main(int argc, char **argv) {
    const char *models[16], *isas = NULL;
    int threads[8] = {1, 2}, nt = 0, nm = 0;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--isa") && i + 1 < argc) isas = argv[++i];
        else if (argv[i][0] >= '0' && argv[i][0] <= '9' && !strchr(argv[i], '/')) {
            if (nt < 8) threads[nt++] = atoi(argv[i]);
        } else if (argv[i][0] != '-' && nm < 16) models[nm++] = argv[i];
        else {
            fprintf(stderr, "cpu_table: unknown option %s\n", argv[i]);
            return 2;
        }
    }
    if (nm == 0) {
        fprintf(stderr,
                "usage: %s MODEL... [threads...] [--isa avx512,avx2,...]\n"
                "MODEL: a checkpoint directory (a row per dtype of R1_TABLE_DTYPES, default\n"
                "f16,bf16,q8_0,q4_0) or a .gguf file (one row, its own weight types)\n",
                argv[0]);
        return 2;
    }
    if (nt == 0) nt = 2;
    static const enum r1_dtype dts[] = {R1_DTYPE_F16, R1_DTYPE_BF16, R1_DTYPE_Q8_0, R1_DTYPE_Q4_0};
    if (r1_backend_cpu.init && r1_backend_cpu.init() != 0) {
        fprintf(stderr, "%s\n", r1_last_error());
        return 1;
    }
    const char *ab = getenv("R1_TABLE_AB");
    int abm = AB_NONE;
    for (int i = AB_SPLIT; ab && i <= AB_ROWS; i++)
        if (!strcmp(ab, ab_names[i][0])) abm = i;
    if (ab && *ab && *ab != '0' && abm == AB_NONE) {
        int32_t ids[512];
        for (int i = 0; i < 512; i++) ids[i] = 1000 + (i * 7919) % 100000;
        return ab_q4_0(models[0], threads, nt, ids, 64);
    }
    /* the kernel sets: each named one this CPU runs (or just the best) */
    const char *isa_names[8];
    int ni = 0;
    for (int i = 0; r1_cpu_isas[i] && ni < 8; i++)
        if (isas ? in_list(isas, r1_cpu_isas[i]->name) : i == 0 || !r1_cpu_isas[i - 1]->available()) {
            if (!r1_cpu_isas[i]->available()) {
                printf("(isa %s: this CPU cannot run it, skipped)\n", r1_cpu_isas[i]->name);
                continue;
            }
            isa_names[ni++] = r1_cpu_isas[i]->name;
            if (!isas) break;
        }
    printf("%-7s %-16s %3s %9s %10s %10s %10s %9s %9s %9s %9s\n", "isa", "weights", "thr", "GB/token", "pf64 t/s",
           "pf512 t/s", "dec t/s", "dec GB/s", "bw GB/s", "fraction", "frac/win");
    const char *only = getenv("R1_TABLE_DTYPES");
    for (int ii = 0; ii < ni; ii++) {
        if (r1_cpu_select(isa_names[ii])) {
            fprintf(stderr, "%s\n", r1_last_error());
            return 1;
        }
        for (int mi = 0; mi < nm; mi++) {
            size_t l = strlen(models[mi]);
            if (l > 5 && !strcmp(models[mi] + l - 5, ".gguf")) {
                const char *base = strrchr(models[mi], '/');
                if (table_rows(models[mi], R1_DTYPE_AUTO, base ? base + 1 : models[mi], threads, nt, abm)) return 1;
                continue;
            }
            for (size_t d = 0; d < sizeof dts / sizeof dts[0]; d++) {
                if (only && *only && !in_list(only, r1_dtype_name(dts[d]))) continue;
                if (table_rows(models[mi], dts[d], r1_dtype_name(dts[d]), threads, nt, abm)) return 1;
            }
        }
    }
    return 0;
}
