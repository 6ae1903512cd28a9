/*
 * cuda.h - the C API of the CUDA backend (make CUDA=1), beyond the backend
 * table r1_backend_cuda (kernels.h): device facts, the device-to-device copy
 * bandwidth for benchmarks, and the prefill precision switch for tests.
 * Every function needs a usable device: call r1_backend_find("cuda") first.
 */
#ifndef R1_CUDA_H
#define R1_CUDA_H

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Number of CUDA devices, 0 when there is no driver or no device (never fails). */
int r1_cuda_device_count(void);

/* The device in use: name (NUL-terminated into name[cap]), multiprocessors,
 * memory in bytes, compute capability major*10+minor. 0, or -1 with an error. */
int r1_cuda_device_info(char *name, size_t cap, int *sms, size_t *mem, int *cc);

/* Device-to-device copy bandwidth: best of reps cudaMemcpy of `bytes`,
 * counting bytes read + written (GB/s = 1e9 B/s). -1 with an error. */
double r1_cuda_copy_gbps(size_t bytes, int reps);

/* Prefill GEMM precision. 0 (default, R1_CUDA_PREFILL=fast): activations
 * rounded to the weights' 16-bit type, one tensor-core GEMM. 1 (exact):
 * activations split into hi + lo 16-bit parts, two GEMMs, ~f32 accuracy. */
void r1_cuda_set_prefill_exact(int exact);

/* Decode-step graphs on (1, default, R1_CUDA_GRAPH=1) or off (0). Sessions
 * read it when they capture their first decode step. Two more settings are
 * read once at init, for comparisons: R1_CUDA_ATT=plain runs every step
 * through the general attention kernel, R1_CUDA_ATT_CHUNK=32|64|128 sets the
 * decode attention's keys per split (32). */
void r1_cuda_set_graphs(int on);

#ifdef __cplusplus
}
#endif
#endif
