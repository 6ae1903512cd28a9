/*
 * test_cuda.c - the cuda backend against the reference kernels, then the
 * whole model on the GPU against the CPU on the Hugging Face fixtures (the
 * suite is device_conformance.h).
 *
 * What is CUDA's: T = 1 and batches on both sides of the matvec/GEMM switch
 * (T = 8 | 9), f32/f16/bf16/q8_0 weights, both prefill precisions (and
 * their limits), the position from device memory (graph replays), and the
 * fixtures with decode graphs on and off.
 *
 * Built by every build; without CUDA, or with no device, it reports a skip
 * and passes.
 */
#include <stdio.h>
#include <stdlib.h>

#include "test.h"

#ifndef R1_CUDA
int main(void) {
    printf("skipped: built without CUDA\n");
    return TEST_DONE("test_cuda");
}
#else
#include "device_conformance.h"
#include "kernels/cuda/cuda.h"

/* Named limits of this backend, ||out - ref|| / ||ref|| */
#define REL_GEMM_EXACT 1e-5    /* bf16/f16 weights, activations split hi + lo */
#define REL_GEMM_16BIT 1e-2    /* bf16 activations (8 bits): the 1e-3..1e-2 of bf16 operands */
#define REL_GEMM_Q8 1.5e-2     /* q8_0 dequantized to bf16 for the GEMM, + activation rounding */
#define REL_GEMM_Q8_EXACT 1e-2 /* q8_0 -> bf16 weights only */

static const enum r1_dtype WDT[] = {R1_DTYPE_F32, R1_DTYPE_F16, R1_DTYPE_BF16, R1_DTYPE_Q8_0};
static const int TS[] = {1, 3, 8, 9, 40};
static const int HEADS[][3] = {{12, 2, 128}, {28, 4, 128}, {4, 4, 16}, {20, 2, 64}, {6, 3, 32}};

/* matmul paths: inner = the prefill precision of T > 8 (0 fast, 1 exact) */
static int n_inner(int T) { return T > 8 ? 2 : 1; }
static int path_set(int outer, int exact, int T) {
    (void)outer, (void)T;
    r1_cuda_set_prefill_exact(exact);
    return 1;
}
static void path_end(void) { r1_cuda_set_prefill_exact(0); }
static double path_limit(enum r1_dtype dt, int T, int outer, int exact, const char **name) {
    (void)outer;
    if (T <= 8) return *name = "REL_MATVEC", REL_MATVEC;
    if (dt == R1_DTYPE_F32) return *name = "REL_GEMM_F32", REL_GEMM_F32;
    if (dt == R1_DTYPE_Q8_0)
        return exact ? (*name = "REL_GEMM_Q8_EXACT", REL_GEMM_Q8_EXACT) : (*name = "REL_GEMM_Q8", REL_GEMM_Q8);
    return exact ? (*name = "REL_GEMM_EXACT", REL_GEMM_EXACT) : (*name = "REL_GEMM_16BIT", REL_GEMM_16BIT);
}
static void path_label(char *buf, size_t cap, int T, int outer, int exact) {
    (void)outer;
    snprintf(buf, cap, "%s", T > 8 ? (exact ? " exact" : " fast") : "");
}

/* fixture modes: exact prefill + graphs, exact without graphs, fast prefill
 * (printed, not checked: its limits are the kernels') */
static const char *const MODES[] = {"exact prefill, graphs", "exact prefill, no graphs", "fast prefill"};
static int mode_set(int mode, const char *fixture) {
    (void)fixture;
    r1_cuda_set_prefill_exact(mode < 2);
    r1_cuda_set_graphs(mode != 1);
    return mode < 2;
}
static void mode_end(void) {
    r1_cuda_set_prefill_exact(0);
    r1_cuda_set_graphs(1);
}

static const struct dc_backend CUDA = {
    .name = "cuda",
    .dev_label = "gpu",
    .wdt = WDT,
    .n_wdt = sizeof WDT / sizeof WDT[0],
    .ts = TS,
    .n_ts = sizeof TS / sizeof TS[0],
    .heads = HEADS,
    .n_heads = sizeof HEADS / sizeof HEADS[0],
    .pos_dev_label = " graph plan",
    .n_outer = 1,
    .n_inner = n_inner,
    .path_set = path_set,
    .path_limit = path_limit,
    .path_label = path_label,
    .path_end = path_end,
    .path_limits = "REL_MATVEC ..",
    .modes = MODES,
    .n_modes = 3,
    .mode_width = 26,
    .mode_set = mode_set,
    .mode_end = mode_end,
    .kv_q8 = 1,
};

int main(void) {
    if (r1_cuda_device_count() == 0) {
        printf("skipped: no CUDA device\n");
        return TEST_DONE("test_cuda");
    }
    if (dc_open(&CUDA)) return TEST_DONE("test_cuda");
    char name[128];
    int sms = 0, cc = 0;
    size_t mem = 0;
    r1_cuda_device_info(name, sizeof name, &sms, &mem, &cc);
    printf("device: %s (cc %d.%d, %d SMs, %.0f GiB)\n", name, cc / 10, cc % 10, sms, mem / 1073741824.0);
    dc_run(&CUDA, NULL);
    return TEST_DONE("test_cuda");
}
#endif
