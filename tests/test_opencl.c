/*
 * test_opencl.c - the opencl backend against the reference kernels, then the
 * whole model on the OpenCL device against the CPU on the Hugging Face
 * fixtures (the suite is device_conformance.h). Here and in CI the device is
 * PoCL (the CPU as an OpenCL device).
 *
 * What is OpenCL's: T = 1 and batches on both sides of the 4-token group of
 * the matmul kernel, both matmul forms (a work-group per row, a work-item
 * per row), f32/f16/bf16/q8_0/q4_0 weights, both prefill paths (own kernel,
 * CLBlast), formats requantized to q8_0 at upload, the fixtures once
 * more with the weights split over small arenas, and a q8_0 KV cache
 * (the reference quantizer's bytes, attention over them, the fixtures
 * against ref).
 *
 * Built by every build; without OpenCL, or with no OpenCL platform, it
 * reports a skip and passes.
 */
#include <stdio.h>
#include <stdlib.h>

#include "test.h"

#ifndef R1_OPENCL
int main(void) {
    printf("skipped: built without OpenCL (install ocl-icd-opencl-dev "
           "opencl-c-headers, or make OPENCL=1)\n");
    return TEST_DONE("test_opencl");
}
#else
#include "device_conformance.h"
#include "kernels/opencl/opencl.h"

/* Named limits of this backend, ||out - ref|| / ||ref|| */
#define REL_REQUANT_Q8 1e-2 /* q4_1 / q5_* / K-quants requantized to q8_0 at upload */

static const enum r1_dtype WDT[] = {R1_DTYPE_F32, R1_DTYPE_F16, R1_DTYPE_BF16, R1_DTYPE_Q8_0, R1_DTYPE_Q4_0};
static const int TS[] = {1, 3, 4, 5, 9, 40};
/* q heads, kv heads, head_dim: group sizes 6, 7, 1, 10 (two slices of at
 * most 8), 3, 9 */
static const int HEADS[][3] = {{12, 2, 128}, {28, 4, 128}, {4, 4, 16}, {20, 2, 64}, {6, 3, 32}, {9, 1, 68}};

/* matmul paths: outer = the kernel form (0 work-group, 1 work-item), inner =
 * the prefill path of T > 4 (0 own kernel, 1 CLBlast; the CLBlast path does
 * not depend on the form) */
static int item0;
static void path_begin(void) { item0 = r1_opencl_set_matmul(0); }
static void path_end(void) {
    r1_opencl_set_prefill(0);
    r1_opencl_set_matmul(item0);
}
static int n_inner(int T) { return T > 4 && r1_opencl_has_clblast() ? 2 : 1; }
static int path_set(int item, int blas, int T) {
    (void)T;
    if (blas && item) return 0;
    r1_opencl_set_prefill(blas);
    r1_opencl_set_matmul(item);
    return 1;
}
static double path_limit(enum r1_dtype dt, int T, int item, int blas, const char **name) {
    (void)dt, (void)item;
    if (T <= 4 || !blas) return *name = "REL_MATVEC", REL_MATVEC;
    return *name = "REL_GEMM_F32", REL_GEMM_F32;
}
static void path_label(char *buf, size_t cap, int T, int item, int blas) {
    snprintf(buf, cap, " %s%s", item ? "item" : "group", T > 4 ? (blas ? " clblast" : " own") : "");
}

/* fixture modes: own prefill, own + weights over several 256 KiB arenas
 * (gqa2_f32 only), CLBlast prefill (when built with it) */
static const char *const MODES[] = {"own prefill", "weights split", "clblast prefill"};
static int mode_set(int mode, const char *fixture) {
    if (mode == 1 && strcmp(fixture, "gqa2_f32")) return -1;
    if (mode == 2 && !r1_opencl_has_clblast()) return -1;
    r1_opencl_set_prefill(mode == 2);
    r1_opencl_set_max_alloc(mode == 1 ? 256 << 10 : 0);
    return 1;
}
static void mode_end(void) {
    r1_opencl_set_prefill(0);
    r1_opencl_set_max_alloc(0);
}

static const struct dc_backend OPENCL = {
    .name = "opencl",
    .dev_label = "opencl",
    .wdt = WDT,
    .n_wdt = sizeof WDT / sizeof WDT[0],
    .ts = TS,
    .n_ts = sizeof TS / sizeof TS[0],
    .heads = HEADS,
    .n_heads = sizeof HEADS / sizeof HEADS[0],
    .pos_dev_label = " pos on device",
    .n_outer = 2,
    .n_inner = n_inner,
    .path_set = path_set,
    .path_limit = path_limit,
    .path_label = path_label,
    .path_begin = path_begin,
    .path_end = path_end,
    .path_limits = "REL_MATVEC, REL_GEMM_F32 ..",
    .modes = MODES,
    .n_modes = 3,
    .mode_width = 16,
    .mode_set = mode_set,
    .mode_end = mode_end,
    .kv_q8 = 1,
};

/* formats the device does not hold: requantized to q8_0 at upload (device.c),
 * the cpu's regroupings of them too (a model loaded for cpu, run here) */
static void test_requant(void) {
    struct group g = {"lm_head, weights requantized to q8_0", 0, REL_REQUANT_Q8, "REL_REQUANT_Q8", 0};
    const enum r1_dtype dts[] = {R1_DTYPE_Q4_1, R1_DTYPE_Q5_0,   R1_DTYPE_Q5_1,   R1_DTYPE_Q4_K,
                                 R1_DTYPE_Q6_K, R1_DTYPE_Q4_1X8, R1_DTYPE_Q4_KX8, R1_DTYPE_Q6_KX8};
    const int shapes[][2] = {{67, 256}, {300, 512}};
    for (size_t di = 0; di < sizeof dts / sizeof dts[0]; di++)
        for (int si = 0; si < 2; si++)
            for (int T = 1; T <= 5; T += 4) {
                int rows = shapes[si][0], K = shapes[si][1];
                struct mat m = mat_new(dts[di], rows, K);
                CHECK(m.d.dtype == R1_DTYPE_Q8_0, "%s: device copy is %s, not q8_0", r1_dtype_name(dts[di]),
                      r1_dtype_name(m.d.dtype));
                size_t on = (size_t)T * rows;
                float *x = hrand((size_t)T * K), *ref = malloc(sizeof(float) * on), *got = malloc(sizeof(float) * on);
                float *dx = dup_dev(x, sizeof(float) * T * K), *dout = dv->alloc(sizeof(float) * on, "out");
                poison(dout, sizeof(float) * on);
                struct r1_op op = {.kernel = R1_K_LM_HEAD, .T = T, .w = &m.h, .x = x, .out = ref};
                run_ref(R1_K_LM_HEAD, &op);
                op.w = &m.d, op.x = dx, op.out = dout;
                if (!run_dev(R1_K_LM_HEAD, &op) && !fetch(got, dout, sizeof(float) * on)) {
                    char w[64];
                    snprintf(w, sizeof w, "%s %dx%d T=%d", r1_dtype_name(dts[di]), rows, K, T);
                    report(&g, rel(got, ref, on), w);
                }
                dv->free(dx), dv->free(dout), free(x), free(ref), free(got);
                mat_free(&m);
            }
    done(&g);
}

int main(void) {
    if (r1_opencl_device_count() == 0) {
        printf("skipped: no OpenCL platform or device (install pocl-opencl-icd, or "
               "a GPU driver's ICD)\n");
        return TEST_DONE("test_opencl");
    }
    double t0 = r1_now();
    if (dc_open(&OPENCL)) return TEST_DONE("test_opencl");
    char desc[512];
    int units = 0;
    size_t mem = 0;
    r1_opencl_device_info(desc, sizeof desc, &mem, &units);
    printf("device: %s, %d compute units, %.2f GiB; ready in %.1fs (program "
           "cache: $XDG_CACHE_HOME/r1infer)\n",
           desc, units, mem / 1073741824.0, r1_now() - t0);
    dc_run(&OPENCL, test_requant);
    return TEST_DONE("test_opencl");
}
#endif
