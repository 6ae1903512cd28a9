/*
 * bandwidth.c - the memory read-bandwidth probe, run the way the engine runs
 * a kernel: one r1_op handed to every thread of the pool with (ith, nth),
 * each thread summing its slice of a buffer far larger than the caches with
 * the widest loads the CPU has. The same buffer, partly re-read, is the
 * cache flush between timed kernel runs. Must not write the buffer while
 * timing (a read probe measures reads).
 *
 * The probe runs twice: on 4 KiB pages (how the engine's own allocations
 * are mapped unless they ask for more) and on 2 MiB pages (MADV_HUGEPAGE);
 * under virtualization the page size alone can change streaming bandwidth
 * severalfold. The ceiling is the better of the two.
 */
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "bench/bench.h"

typedef float v16f __attribute__((vector_size(64), may_alias, aligned(64)));

#define CHUNK_FLOATS 1024 /* slices are whole 4 KiB pages */

/* Sum n floats (n % 64 == 0) with four independent 64-byte accumulators. */
#define SUM_BODY                                                                                    \
    const v16f *v = (const v16f *)p;                                                                \
    v16f a0 = {0}, a1 = {0}, a2 = {0}, a3 = {0};                                                    \
    for (size_t i = 0; i < n / 16; i += 4) {                                                        \
        a0 += v[i];                                                                                 \
        a1 += v[i + 1];                                                                             \
        a2 += v[i + 2];                                                                             \
        a3 += v[i + 3];                                                                             \
    }                                                                                               \
    a0 += a1 + a2 + a3;                                                                             \
    float s = 0;                                                                                    \
    for (int k = 0; k < 16; k++) s += a0[k];                                                        \
    return s;

static float sum_generic(const float *p, size_t n) { SUM_BODY }
#if defined(__x86_64__)
__attribute__((target("avx2"))) static float sum_avx2(const float *p, size_t n) { SUM_BODY }
__attribute__((target("avx512f"))) static float sum_avx512(const float *p, size_t n) { SUM_BODY }
#endif

static float (*sum_fn)(const float *, size_t) = sum_generic;

static void pick_sum(void) {
#if defined(__x86_64__)
    __builtin_cpu_init();
    if (__builtin_cpu_supports("avx512f")) sum_fn = sum_avx512;
    else if (__builtin_cpu_supports("avx2")) sum_fn = sum_avx2;
#endif
}

/* The probe as a kernel: op->x = buffer, op->scratch_stride = floats to read
 * (a multiple of CHUNK_FLOATS), op->out[16 * ith] = this thread's sum. */
static void k_read(const struct r1_op *op, int ith, int nth) {
    size_t chunks = op->scratch_stride / CHUNK_FLOATS;
    size_t per = (chunks + (size_t)nth - 1) / (size_t)nth;
    size_t lo = (size_t)ith * per, hi = lo + per;
    if (lo > chunks) lo = chunks;
    if (hi > chunks) hi = chunks;
    op->out[16 * ith] = hi > lo ? sum_fn(op->x + lo * CHUNK_FLOATS, (hi - lo) * CHUNK_FLOATS) : 0.0f;
}

static volatile float sink;

static void read_bytes(const struct bench_bw *bw, struct r1_pool *pool, size_t bytes) {
    float partial[16 * 64];
    int nth = r1_pool_size(pool);
    if (nth > 64) nth = 64;
    struct r1_op op = {.x = bw->buf, .out = partial,
                       .scratch_stride = bytes / sizeof(float) / CHUNK_FLOATS * CHUNK_FLOATS};
    r1_pool_run(pool, k_read, &op);
    float s = 0;
    for (int i = 0; i < nth; i++) s += partial[16 * i];
    sink = s;
}

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* An anonymous mapping of bytes (2 MiB aligned), every page touched. */
static int map_buf(struct bench_bw *bw, size_t bytes, int huge) {
    const size_t align = (size_t)2 << 20;
    size_t len = bytes + align;
    void *p = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED)
        return r1_err("out of memory: the bandwidth probe needs %.1f MiB", (double)bytes / (1024.0 * 1024.0));
    float *buf = (float *)(((uintptr_t)p + align - 1) & ~(uintptr_t)(align - 1));
#ifdef MADV_HUGEPAGE
    if (huge) madvise(buf, bytes, MADV_HUGEPAGE); /* a request: the kernel may refuse */
#else
    (void)huge;
#endif
    memset(buf, 0, bytes);
    bw->map = p;
    bw->map_len = len;
    bw->buf = buf;
    return 0;
}

static void unmap_buf(struct bench_bw *bw) {
    if (bw->map) munmap(bw->map, bw->map_len);
    bw->map = NULL;
    bw->buf = NULL;
}

/* best and median GB/s of bw->runs reads of the whole buffer */
static void probe(struct bench_bw *bw, struct r1_pool *pool, const char *what, double *best, double *median) {
    double gbps[64];
    read_bytes(bw, pool, bw->bytes); /* warm-up: TLB, page tables, threads awake */
    for (int r = 0; r < bw->runs; r++) {
        bench_progress("memory bandwidth (%s): read %zu MiB, run %d/%d", what, bw->bytes >> 20, r + 1, bw->runs);
        double t0 = r1_now();
        read_bytes(bw, pool, bw->bytes);
        gbps[r] = (double)bw->bytes / (r1_now() - t0) / 1e9;
    }
    qsort(gbps, (size_t)bw->runs, sizeof gbps[0], cmp_double);
    *best = gbps[bw->runs - 1];
    *median = bw->runs % 2 ? gbps[bw->runs / 2] : 0.5 * (gbps[bw->runs / 2 - 1] + gbps[bw->runs / 2]);
}

int bench_bw_measure(struct bench_bw *bw, struct r1_pool *pool, size_t bytes, size_t flush_bytes, int runs) {
    memset(bw, 0, sizeof *bw);
    pick_sum();
    if (r1_pool_size(pool) > 64) return r1_err("bandwidth probe: at most 64 threads");
    bytes = bytes / (CHUNK_FLOATS * sizeof(float)) * (CHUNK_FLOATS * sizeof(float));
    bw->bytes = bytes;
    bw->flush_bytes = flush_bytes < bytes ? flush_bytes : bytes;
    bw->runs = runs < 1 ? 1 : runs > 64 ? 64 : runs;
    double b4, m4, bh, mh;
    if (map_buf(bw, bytes, 0)) return -1;
    probe(bw, pool, "4 KiB pages", &b4, &m4);
    unmap_buf(bw);
    if (map_buf(bw, bytes, 1)) return -1; /* kept: the flush buffer */
    probe(bw, pool, "2 MiB pages", &bh, &mh);
    bw->best_4k_gbps = b4;
    bw->best_huge_gbps = bh;
    bw->best_gbps = b4 > bh ? b4 : bh;
    bw->median_gbps = b4 > bh ? m4 : mh;
    return 0;
}

void bench_flush(const struct bench_bw *bw, struct r1_pool *pool) { read_bytes(bw, pool, bw->flush_bytes); }

void bench_bw_free(struct bench_bw *bw) { unmap_buf(bw); }
