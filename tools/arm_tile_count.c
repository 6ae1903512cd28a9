/*
 * arm_tile_count.c - runs one cpu-backend tile ITERS times over 4 rows x
 * K = 4096 columns and NT tokens: arm_tile_count ISA DTYPE NT ITERS. Only a
 * load for scripts/arm-count.sh to count instructions under qemu; the
 * weights are random bytes (the values do not change the instructions).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/cpu/cpu.h"
#include "kernels/dtype.h"

int main(int argc, char **argv) {
    if (argc != 5) {
        fprintf(stderr, "usage: %s ISA DTYPE NT ITERS\n", argv[0]);
        return 2;
    }
    const int K = 4096, nt = atoi(argv[3]), iters = atoi(argv[4]);
    if (r1_cpu_select(argv[1]) != 0) return 1;
    const struct r1_cpu_isa *isa = r1_cpu_current();
    int dt = -1;
    for (int i = 0; i < R1_DTYPE_ALL; i++)
        if (!strcmp(r1_dtype_name((enum r1_dtype)i), argv[2])) dt = i;
    if (dt < 0 || !isa->mm[dt].tile || nt < 1 || nt > isa->nt) {
        fprintf(stderr, "%s: no %s tile for %d tokens\n", argv[1], argv[2], nt);
        return 1;
    }
    const struct r1_cpu_mm *mm = &isa->mm[dt];
    const size_t ws = r1_dtype_row_bytes((enum r1_dtype)dt, K);
    const size_t xs = mm->act == R1_CPU_ACT_F32    ? (size_t)K * sizeof(float)
                      : mm->act == R1_CPU_ACT_Q8X8 ? r1_cpu_q8x8_stride(K)
                                                   : r1_cpu_q8_stride(K);
    uint8_t *w = aligned_alloc(64, ws * 4), *x = aligned_alloc(64, xs * 4);
    float *xf = malloc((size_t)K * sizeof(float));
    for (size_t i = 0; i < ws * 4; i++) w[i] = (uint8_t)(rand() & 0x3f); /* small f16 scales */
    for (int i = 0; i < K; i++) xf[i] = (float)(rand() % 200 - 100) / 50.0f;
    for (int t = 0; t < 4; t++) {
        if (mm->act == R1_CPU_ACT_F32) memcpy(x + t * xs, xf, (size_t)K * sizeof(float));
        else if (mm->act == R1_CPU_ACT_Q8X8) r1_cpu_quant_q8x8_c(xf, x + t * xs, K);
        else isa->quant_q8(xf, x + t * xs, K);
    }
    float out[R1_CPU_MR * R1_CPU_NT], s = 0;
    for (int i = 0; i < iters; i++) {
        mm->tile(K, 0, K, w, ws, 4, x, xs, nt, out);
        s += out[0];
    }
    printf("%g\n", s); /* keeps the calls */
    free(w), free(x), free(xf);
    return 0;
}
