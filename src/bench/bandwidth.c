/*
 * bandwidth.c - the memory read-bandwidth probe, run the way the engine runs
 * a kernel: one r1_op handed to every thread of the pool with (ith, nth),
 * each thread reading its slice of a buffer far larger than the caches. The
 * same buffer, partly re-read, is the cache flush between timed kernel runs.
 * Must not write the buffer while timing (a read probe measures reads).
 *
 * It is the ceiling the engine's figures are divided by, so it must be the
 * fastest reader we can write, or fractions pass 1 and mean nothing. Three
 * readers run in turn within each run and the best run counts (bw->reader
 * names its reader; on a Zen 4 VM the linear one won, the others within a
 * few percent; on an AVX2-only Zen 3 VM, where only the linear one ran,
 * decode read faster than it):
 *   linear   the slice summed front to back, 4 independent accumulators of
 *            the widest vectors (AVX-512 where present, else AVX2; the other
 *            two as well);
 *   prefetch the same with a software prefetch 2 KiB ahead of every line;
 *   streams  the slice as 4 streams read in lockstep, each prefetched ahead,
 *            as the decode tiles read 4 rows at once.
 * Pages: the probe runs on 4 KiB pages (linear reader only) and on 2 MiB
 * pages (MADV_HUGEPAGE, what r1_alloc asks for the weights; all readers);
 * under virtualization the page size alone can change streaming bandwidth
 * severalfold. The ceiling is the best of all.
 */
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "bench/bench.h"

typedef float v4f __attribute__((vector_size(16), may_alias, aligned(16)));
typedef float v8f __attribute__((vector_size(32), may_alias, aligned(32)));
typedef float v16f __attribute__((vector_size(64), may_alias, aligned(64)));

#define CHUNK_FLOATS 1024 /* slices are whole 4 KiB pages */
#define PF_AHEAD 2048     /* bytes a prefetching reader runs ahead */

/* The readers' bodies, one per reader, compiled once per vector type V
 * (v4f, v8f, v16f: 16, 32 or 64 bytes) under its target attribute: GCC
 * keeps vectors of the target's own width in registers (a 64-byte vector
 * type on AVX2 went through the stack, at a fraction of the speed). Each
 * sums n floats (n % 64 == 0; streams: n % 256 == 0) into four independent
 * accumulators. */
#define LV(V) (64 / sizeof(V)) /* vectors a line */
#define SUM_RETURN(V)                                                                                                  \
    a0 += a1 + a2 + a3;                                                                                                \
    float s = 0;                                                                                                       \
    for (size_t k = 0; k < sizeof(V) / sizeof(float); k++) s += a0[k];                                                 \
    return s;
/* linear, front to back; PF: each line prefetched PF_AHEAD bytes before it
 * is read (the prefetches may run past the slice: they never fault) */
#define SUM_BODY(V, PF)                                                                                                \
    const V *v = (const V *)p;                                                                                         \
    V a0 = {0}, a1 = {0}, a2 = {0}, a3 = {0};                                                                          \
    for (size_t i = 0; i < n / (sizeof(V) / sizeof(float)); i += 4) {                                                  \
        if (PF)                                                                                                        \
            for (size_t l = 0; l < 4 / LV(V); l++)                                                                     \
                __builtin_prefetch((const char *)(v + i) + PF_AHEAD + 64 * l, 0, 3);                                   \
        a0 += v[i];                                                                                                    \
        a1 += v[i + 1];                                                                                                \
        a2 += v[i + 2];                                                                                                \
        a3 += v[i + 3];                                                                                                \
    }                                                                                                                  \
    SUM_RETURN(V)
/* 4 streams (the slice's quarters) read in lockstep, a line of each at a
 * time, each prefetched ahead, as the decode tiles read 4 rows at once */
#define STREAMS_BODY(V)                                                                                                \
    const size_t q = n / 64;                                                                                           \
    const V *s0 = (const V *)p, *s1 = s0 + q * LV(V), *s2 = s1 + q * LV(V), *s3 = s2 + q * LV(V);                      \
    V a0 = {0}, a1 = {0}, a2 = {0}, a3 = {0};                                                                          \
    for (size_t i = 0; i < q * LV(V); i += LV(V)) {                                                                    \
        __builtin_prefetch((const char *)(s0 + i) + PF_AHEAD / 2, 0, 3);                                               \
        __builtin_prefetch((const char *)(s1 + i) + PF_AHEAD / 2, 0, 3);                                               \
        __builtin_prefetch((const char *)(s2 + i) + PF_AHEAD / 2, 0, 3);                                               \
        __builtin_prefetch((const char *)(s3 + i) + PF_AHEAD / 2, 0, 3);                                               \
        for (size_t j = 0; j < LV(V); j++) {                                                                           \
            a0 += s0[i + j];                                                                                           \
            a1 += s1[i + j];                                                                                           \
            a2 += s2[i + j];                                                                                           \
            a3 += s3[i + j];                                                                                           \
        }                                                                                                              \
    }                                                                                                                  \
    SUM_RETURN(V)

static float sum_generic(const float *p, size_t n){SUM_BODY(v4f, 0)}
#if defined(__x86_64__)
#define READERS(ISA, TGT, V)                                                                                           \
    __attribute__((target(TGT))) static float sum_##ISA(const float *p, size_t n) { SUM_BODY(V, 0) }                   \
    __attribute__((target(TGT))) static float sum_##ISA##_pf(const float *p, size_t n) { SUM_BODY(V, 1) }              \
    __attribute__((target(TGT))) static float sum_##ISA##_streams(const float *p, size_t n) { STREAMS_BODY(V) }
READERS(avx2, "avx2", v8f) READERS(avx512, "avx512f", v16f)
#endif

    struct reader {
    const char *name;
    float (*fn)(const float *, size_t);
};
static struct reader readers[3] = {{"linear", sum_generic}};
static int n_readers = 1;

static void pick_readers(void) {
    n_readers = 1;
    readers[0] = (struct reader){"linear", sum_generic};
#if defined(__x86_64__)
    __builtin_cpu_init();
    if (__builtin_cpu_supports("avx512f")) {
        readers[0].fn = sum_avx512;
        readers[n_readers++] = (struct reader){"prefetch", sum_avx512_pf};
        readers[n_readers++] = (struct reader){"streams", sum_avx512_streams};
    } else if (__builtin_cpu_supports("avx2")) {
        readers[0].fn = sum_avx2;
        readers[n_readers++] = (struct reader){"prefetch", sum_avx2_pf};
        readers[n_readers++] = (struct reader){"streams", sum_avx2_streams};
    }
#endif
}

int bench_bw_reader_sums(const float *p, size_t n, const char **names, float *sums) {
    pick_readers();
    for (int i = 0; i < n_readers; i++) {
        names[i] = readers[i].name;
        sums[i] = readers[i].fn(p, n);
    }
    return n_readers;
}

/* The probe as a kernel: op->x = buffer, op->scratch_stride = floats to read
 * (a multiple of CHUNK_FLOATS), op->layer = the reader, op->out[16 * ith] =
 * this thread's sum. */
static void k_read(const struct r1_op *op, int ith, int nth) {
    size_t chunks = op->scratch_stride / CHUNK_FLOATS;
    size_t per = (chunks + (size_t)nth - 1) / (size_t)nth;
    size_t lo = (size_t)ith * per, hi = lo + per;
    if (lo > chunks) lo = chunks;
    if (hi > chunks) hi = chunks;
    op->out[16 * ith] = hi > lo ? readers[op->layer].fn(op->x + lo * CHUNK_FLOATS, (hi - lo) * CHUNK_FLOATS) : 0.0f;
}

static volatile float sink;

static void read_bytes(const struct bench_bw *bw, struct r1_pool *pool, size_t bytes, int reader) {
    float partial[16 * 64];
    int nth = r1_pool_size(pool);
    if (nth > 64) nth = 64;
    struct r1_op op = {.x = bw->buf,
                       .out = partial,
                       .layer = reader,
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

/* GB/s of bw->runs reads of the whole buffer by each of the first nr
 * readers, taken in turn within every run (so a bandwidth that drifts over
 * seconds hits them alike): the best run of each reader, and the median of
 * the reader with the best run */
static void probe(struct bench_bw *bw, struct r1_pool *pool, const char *what, int nr, double *best, double *median,
                  int *which) {
    double gbps[3][64];
    for (int i = 0; i < nr; i++) read_bytes(bw, pool, bw->bytes, i); /* warm-up: TLB, page tables, threads awake */
    for (int r = 0; r < bw->runs; r++)
        for (int i = 0; i < nr; i++) {
            bench_progress("memory bandwidth (%s, %s): read %zu MiB, run %d/%d", what, readers[i].name, bw->bytes >> 20,
                           r + 1, bw->runs);
            double t0 = r1_now();
            read_bytes(bw, pool, bw->bytes, i);
            gbps[i][r] = (double)bw->bytes / (r1_now() - t0) / 1e9;
        }
    *best = 0;
    for (int i = 0; i < nr; i++) {
        qsort(gbps[i], (size_t)bw->runs, sizeof gbps[i][0], cmp_double);
        if (gbps[i][bw->runs - 1] <= *best) continue;
        *best = gbps[i][bw->runs - 1], *which = i;
        *median = bw->runs % 2 ? gbps[i][bw->runs / 2] : 0.5 * (gbps[i][bw->runs / 2 - 1] + gbps[i][bw->runs / 2]);
    }
}

int bench_bw_measure(struct bench_bw *bw, struct r1_pool *pool, size_t bytes, size_t flush_bytes, int runs) {
    memset(bw, 0, sizeof *bw);
    pick_readers();
    if (r1_pool_size(pool) > 64) return r1_err("bandwidth probe: at most 64 threads");
    bytes = bytes / (CHUNK_FLOATS * sizeof(float)) * (CHUNK_FLOATS * sizeof(float));
    bw->bytes = bytes;
    bw->flush_bytes = flush_bytes < bytes ? flush_bytes : bytes;
    bw->runs = runs < 1 ? 1 : runs > 64 ? 64 : runs;
    double b4, m4, bh, mh;
    int w4 = 0, wh = 0;
    if (map_buf(bw, bytes, 0)) return -1;
    probe(bw, pool, "4 KiB pages", 1, &b4, &m4, &w4);
    unmap_buf(bw);
    if (map_buf(bw, bytes, 1)) return -1; /* kept: the flush buffer */
    probe(bw, pool, "2 MiB pages", n_readers, &bh, &mh, &wh);
    bw->best_4k_gbps = b4;
    bw->best_huge_gbps = bh;
    bw->best_gbps = b4 > bh ? b4 : bh;
    bw->median_gbps = b4 > bh ? m4 : mh;
    bw->reader = readers[b4 > bh ? w4 : wh].name;
    return 0;
}

void bench_flush(const struct bench_bw *bw, struct r1_pool *pool) { read_bytes(bw, pool, bw->flush_bytes, 0); }

void bench_bw_free(struct bench_bw *bw) { unmap_buf(bw); }
