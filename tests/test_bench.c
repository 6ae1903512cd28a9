/*
 * test_bench.c - pieces of the benchmark that a wrong result would make lie:
 * the bandwidth probe's readers (bench/bandwidth.c) must read every float
 * of their slice once, or the ceiling every fraction is divided by is wrong.
 * (Not in test_kernels: the aarch64 sanitizer build of scripts/test-arm.sh
 * links that one with the kernels alone.)
 */
#include <stdlib.h>

#include "bench/bench.h"
#include "test.h"

/* The bandwidth probe's readers (bench/bandwidth.c) read every float of
 * their slice once: their sums of position-dependent small integers (exact
 * in float) equal the plain sum, at lengths that split into streams and
 * lines unevenly. */
static void test_bw_readers(void) {
    const size_t nmax = 64 * 1024 + 256;
    float *p = aligned_alloc(64, nmax * sizeof *p);
    CHECK(p != NULL, "out of memory");
    if (!p) return;
    for (size_t i = 0; i < nmax; i++) p[i] = (float)((i * 7 + i / 64) % 11);
    const size_t ns[] = {256, 512, 768, 4096 + 256, nmax};
    for (size_t k = 0; k < sizeof ns / sizeof *ns; k++) {
        double want = 0;
        for (size_t i = 0; i < ns[k]; i++) want += p[i];
        const char *names[3];
        float sums[3];
        int nr = bench_bw_reader_sums(p, ns[k], names, sums);
        CHECK(nr >= 1, "bandwidth readers: none");
        for (int r = 0; r < nr; r++)
            CHECK(sums[r] == (float)want, "bandwidth reader %s, n = %zu: sum %.1f, want %.1f", names[r], ns[k],
                  (double)sums[r], want);
    }
    free(p);
}

int main(void) {
    test_bw_readers();
    return TEST_DONE("test_bench");
}
