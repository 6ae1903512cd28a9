/*
 * kernel_test.h - what test_kernels.c (the small kernels) and test_matmul.c
 * (the matmul tiles, panels and small batches) share: random inputs, nmse, a
 * kernel run on several threads one after another, weight matrices of every
 * dtype, KV caches, and the per-group worst-case report.
 *
 * Depends only on src/kernels and src/util, so both programs cross-compile
 * for aarch64 (scripts/test-arm.sh).
 */
#ifndef R1_KERNEL_TEST_H
#define R1_KERNEL_TEST_H

#include <math.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/cpu/cpu.h"
#include "kernels/kernels.h"
#include "test.h"
#include "util/util.h"

__attribute__((unused)) static int quick, verbose;

/* ---- helpers ---- */
__attribute__((unused)) static uint64_t rng = 88172645463325252ull;
__attribute__((unused)) static float frand(void) { return r1_frand_normal(&rng); } /* roughly N(0,1) */
__attribute__((unused)) static float *frand_buf(size_t n) {
    float *p = malloc(n * sizeof(float) + 64);
    for (size_t i = 0; i < n; i++) p[i] = frand();
    return p;
}
__attribute__((unused)) static double nmse(const float *a, const float *b, size_t n) {
    double num = 0, den = 0;
    for (size_t i = 0; i < n; i++) {
        double d = (double)a[i] - (double)b[i];
        num += d * d;
        den += (double)b[i] * b[i];
    }
    if (num != num) return INFINITY;
    return den > 0 ? num / den : num;
}
__attribute__((unused)) static void run(r1_kernel_fn fn, const struct r1_op *op, int nth) {
    for (int i = 0; i < nth; i++) fn(op, i, nth);
}

struct mat {
    struct r1_mat m;
    void *buf;
};
/* Random bytes for a row of a dtype without a quantizer, then every f16
 * field (scales, mins) set to a small random value: all bit patterns of the
 * quants, 6-bit scales and high bits occur. The _1 formats get a min near
 * -d * (half their range), as real ones: weights centred on 0. */
__attribute__((unused)) static void rand_blocks(enum r1_dtype dt, uint8_t *p, size_t bytes) {
    const struct r1_dtype_traits *tr = &r1_dtype_traits[dt];
    static const int f16_at[][3] = {/* dtype, offsets of f16 fields (-1: none) */
                                    {R1_DTYPE_Q4_1, 0, 2}, {R1_DTYPE_Q5_0, 0, -1}, {R1_DTYPE_Q5_1, 0, 2},
                                    {R1_DTYPE_Q4_K, 0, 2}, {R1_DTYPE_Q5_K, 0, 2},  {R1_DTYPE_Q6_K, 208, -1}};
    for (size_t i = 0; i < bytes; i++) p[i] = (uint8_t)((unsigned)(frand() * 1000.0f + 1e4f) & 0xff);
    for (size_t b = 0; b < bytes; b += tr->block_size)
        for (int i = 0; i < 6; i++)
            for (int j = 1; j < 3 && f16_at[i][0] == (int)dt; j++)
                if (f16_at[i][j] >= 0) {
                    float v = frand() * (tr->block > 32 ? 2e-4f : 4e-3f);
                    if (j == 2 && tr->block == 32) /* the min of q4_1/q5_1 */
                        v = -r1_f16_to_f32((uint16_t)(p[b] | p[b + 1] << 8)) * (dt == R1_DTYPE_Q4_1 ? 7.5f : 15.5f) *
                            (1.0f + 0.2f * frand());
                    uint16_t h = r1_f32_to_f16(v);
                    p[b + f16_at[i][j]] = (uint8_t)h, p[b + f16_at[i][j] + 1] = (uint8_t)(h >> 8);
                }
}

__attribute__((unused)) static struct mat mat_new(enum r1_dtype dt, int rows, int cols) {
    struct mat r;
    size_t rb = r1_dtype_row_bytes(dt, cols);
    r.buf = malloc(rb * rows + 64);
    if (!r1_dtype_traits[dt].from_f32) {
        rand_blocks(dt, r.buf, rb * rows);
        r.m = (struct r1_mat){.data = r.buf, .dtype = dt, .rows = rows, .cols = cols, .row_bytes = rb};
        return r;
    }
    float *tmp = frand_buf((size_t)cols);
    for (int i = 0; i < rows; i++) {
        for (int j = 0; j < cols; j++) tmp[j] = frand() * 0.05f;
        r1_dtype_traits[dt].from_f32(tmp, (uint8_t *)r.buf + rb * i, cols);
    }
    free(tmp);
    r.m = (struct r1_mat){.data = r.buf, .dtype = dt, .rows = rows, .cols = cols, .row_bytes = rb};
    return r;
}

/* The worst case of a group, printed as one line. */
struct group {
    const char *isa, *what;
    double limit, worst;
    char worst_case[96];
    int cases;
};
__attribute__((unused)) static void group_add(struct group *g, double e, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
__attribute__((unused)) static void group_add(struct group *g, double e, const char *fmt, ...) {
    char c[96];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(c, sizeof c, fmt, ap);
    va_end(ap);
    g->cases++;
    CHECK(e <= g->limit, "%s %s %s: nmse %.3g > limit %.3g", g->isa, g->what, c, e, g->limit);
    if (verbose) printf("  %-8s %-22s %-40s nmse %.3g\n", g->isa, g->what, c, e);
    if (e >= g->worst || g->cases == 1) {
        g->worst = e;
        snprintf(g->worst_case, sizeof g->worst_case, "%s", c);
    }
}
__attribute__((unused)) static void group_print(const struct group *g) {
    printf("%-8s %-24s %4d cases  worst nmse %9.3g (limit %.0e) at %s\n", g->isa, g->what, g->cases, g->worst, g->limit,
           g->worst_case);
}

/* ---- matmul-type kernels ---- */
__attribute__((unused)) static const enum r1_kernel mm_kernels[] = {R1_K_QKV_BIAS, R1_K_MATVEC_ADD, R1_K_LM_HEAD,
                                                                    R1_K_GATE_UP_SILU};
__attribute__((unused)) static const enum r1_dtype dtypes[] = {
    R1_DTYPE_F32,    R1_DTYPE_F16,    R1_DTYPE_BF16,   R1_DTYPE_Q8_0,   R1_DTYPE_Q4_0,  R1_DTYPE_Q4_1,
    R1_DTYPE_Q5_0,   R1_DTYPE_Q5_1,   R1_DTYPE_Q4_K,   R1_DTYPE_Q5_K,   R1_DTYPE_Q6_K,  R1_DTYPE_Q4_0X8,
    R1_DTYPE_Q4_1X8, R1_DTYPE_Q8_0X8, R1_DTYPE_Q4_KX8, R1_DTYPE_Q5_KX8, R1_DTYPE_Q6_KX8};

__attribute__((unused)) static struct r1_kv_cache kv_new(enum r1_dtype dt, int nl, int nkv, int nctx, int hd) {
    struct r1_kv_cache kv = {dt, nl, nkv, nctx, hd, NULL, NULL, NULL};
    size_t n = (size_t)nl * nkv * nctx * hd, es = dt == R1_DTYPE_F16 ? 2 : 4;
    if (dt == R1_DTYPE_Q8_0) { /* rows of hd / 32 blocks, quantized from N(0,1) values */
        size_t rb = r1_dtype_row_bytes(dt, hd);
        kv.k = malloc(n / hd * rb);
        kv.v = malloc(n / hd * rb);
        float *row = malloc((size_t)hd * sizeof(float));
        for (size_t r = 0; r < n / hd; r++)
            for (int which = 0; which < 2; which++) {
                for (int i = 0; i < hd; i++) row[i] = frand();
                r1_dtype_traits[dt].from_f32(row, (uint8_t *)(which ? kv.v : kv.k) + r * rb, hd);
            }
        free(row);
        return kv;
    }
    kv.k = malloc(n * es);
    kv.v = malloc(n * es);
    for (size_t i = 0; i < n; i++) {
        float a = frand(), b = frand();
        if (dt == R1_DTYPE_F16) {
            ((uint16_t *)kv.k)[i] = r1_f32_to_f16(a);
            ((uint16_t *)kv.v)[i] = r1_f32_to_f16(b);
        } else {
            ((float *)kv.k)[i] = a;
            ((float *)kv.v)[i] = b;
        }
    }
    return kv;
}

__attribute__((unused)) static const enum r1_dtype kv_dtypes[] = {R1_DTYPE_F32, R1_DTYPE_F16, R1_DTYPE_Q8_0};

/* fn on nth threads at once (the split's units are claimed concurrently). */
struct th_arg {
    r1_kernel_fn fn;
    const struct r1_op *op;
    int ith, nth;
};
__attribute__((unused)) static void *th_main(void *p) {
    struct th_arg *a = p;
    a->fn(a->op, a->ith, a->nth);
    return NULL;
}
__attribute__((unused)) static void run_threads(r1_kernel_fn fn, const struct r1_op *op, int nth) {
    pthread_t th[4];
    struct th_arg a[4];
    for (int i = 0; i < nth; i++) a[i] = (struct th_arg){fn, op, i, nth};
    for (int i = 1; i < nth; i++) CHECK(pthread_create(&th[i], NULL, th_main, &a[i]) == 0, "thread");
    th_main(&a[0]);
    for (int i = 1; i < nth; i++) pthread_join(th[i], NULL);
}

/* Reads R1_TEST_QUICK / R1_TEST_VERBOSE, starts the cpu backend and lists
 * the kernel sets this CPU runs; 0 on success. */
__attribute__((unused)) static int kt_start(void) {
    quick = getenv("R1_TEST_QUICK") != NULL;
    verbose = getenv("R1_TEST_VERBOSE") != NULL;
    if (r1_backend_cpu.init && r1_backend_cpu.init() != 0) {
        printf("cpu backend init failed\n");
        return 1;
    }
    printf("cpu backend: best ISA here is '%s'; testing:", r1_cpu_current()->name);
    for (int i = 0; r1_cpu_isas[i]; i++)
        if (r1_cpu_isas[i]->available()) printf(" %s", r1_cpu_isas[i]->name);
    printf("\n");
    return 0;
}
/* Selects isa for the tests that follow: 1, or 0 (said) when this CPU does
 * not run it or R1_TEST_SETS (a space-separated list of set names, for a
 * run that tests some sets elsewhere) leaves it out. */
__attribute__((unused)) static int kt_select(const struct r1_cpu_isa *isa) {
    if (!isa->available()) {
        printf("%-8s not available on this CPU: skipped\n", isa->name);
        return 0;
    }
    const char *only = getenv("R1_TEST_SETS");
    if (only) {
        int listed = 0;
        const size_t n = strlen(isa->name);
        for (const char *p = strstr(only, isa->name); p && !listed; p = strstr(p + 1, isa->name))
            listed = (p == only || p[-1] == ' ') && (p[n] == ' ' || p[n] == 0);
        if (!listed) {
            printf("%-8s not in R1_TEST_SETS: skipped\n", isa->name);
            return 0;
        }
    }
    CHECK(r1_cpu_select(isa->name) == 0, "select %s", isa->name);
    return 1;
}

#endif
