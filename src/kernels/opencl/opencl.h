/*
 * opencl.h - the C API of the OpenCL backend (built when the OpenCL headers
 * are found, or with make OPENCL=1), beyond the backend table
 * r1_backend_opencl (kernels.h): device listing, facts about the device in
 * use, the device copy bandwidth for benchmarks, and the prefill switch.
 * Functions other than r1_opencl_list need a usable device: call
 * r1_backend_find("opencl") first.
 */
#ifndef R1_OPENCL_H
#define R1_OPENCL_H

#include <stddef.h>
#include <stdio.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Print every OpenCL platform and device (index as --cl-device takes it,
 * name, version, driver, memory, fp16) to f. Returns the number of devices
 * (0 when there is no platform; never fails). */
int r1_opencl_list(FILE *f);

/* Number of OpenCL devices over all platforms (0 without an ICD or platform).
 */
int r1_opencl_device_count(void);

/* The device in use: "name (platform, driver version)" into desc[cap], global
 * memory in bytes, compute units. 0, or -1 with an error. */
int r1_opencl_device_info(char *desc, size_t cap, size_t *mem, int *units);

/* 1 if the device in use is a CPU (PoCL): its memory is the host's. */
int r1_opencl_is_cpu(void);

/* Device-to-device copy bandwidth (best of reps clEnqueueCopyBuffer of
 * `bytes`, read + written counted), GB/s; -1 with an error. */
double r1_opencl_copy_gbps(size_t bytes, int reps);

/* Prefill matmuls (T > 4 rows): 0 = our own kernel, 1 = CLBlast SGEMM over
 * weights dequantized to f32 (when built with CLBlast). Default from
 * R1_CL_PREFILL=own|clblast, read at init; default own on CPU devices (faster on
 * PoCL), clblast on GPUs. */
void r1_opencl_set_prefill(int clblast);
/* Matmul kernels: 1 = a work-item per row (default on CPU devices), 0 = a
 * work-group per row with vector loads and a local reduction (default on
 * GPUs). Default from R1_CL_MATMUL=item|group, read at init. Returns the
 * previous setting. */
int r1_opencl_set_matmul(int item);

/* Cap the size of one device allocation below the device's own limit (0:
 * the device's), so tests can spread weights over several arenas
 * (runtime/device.c). Returns the previous cap. */
size_t r1_opencl_set_max_alloc(size_t bytes);
int r1_opencl_has_clblast(void);

#ifdef __cplusplus
}
#endif
#endif
