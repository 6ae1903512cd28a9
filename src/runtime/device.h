/*
 * device.h - weights on a device backend (cuda): the device layout of a
 * matrix and a reference-counted device copy of a whole model, shared by the
 * sessions that run it. Host backends never call any of this.
 *
 * Device layout of an r1_mat (data is a device pointer):
 *   f32, f16, bf16  rows of cols weights, each row padded to a multiple of
 *                   16 bytes (row_bytes = align16(cols * size)), so every row
 *                   starts 16-byte aligned for vector loads.
 *   q8_0 (planar)   int8 quants (rows, row_bytes = align16(cols)), then at
 *                   r1_device_q8_scales_offset() the f16 scales (rows, cols/32).
 *   q4_0 (planar)   GGUF's 16 nibble bytes of each block (rows, row_bytes =
 *                   align16(cols/2)), then the f16 scales (rows, cols/32) at
 *                   r1_device_quant_scales_offset(); only backends whose
 *                   weights_ok accepts it (opencl).
 * Other dtypes are refused (weights_ok).
 * A backend whose single allocations are limited (struct r1_device_ops
 * max_alloc) gets the weights in several arenas, no matrix split between two.
 */
#ifndef R1_RUNTIME_DEVICE_H
#define R1_RUNTIME_DEVICE_H

#include <stddef.h>

#include "kernels/kernels.h"

struct r1_model;

static inline size_t r1_align16(size_t n) { return (n + 15) & ~(size_t)15; }

/* Byte offset of the f16 scales of a planar q8_0 device matrix. */
static inline size_t r1_device_q8_scales_offset(int rows, int cols) { return (size_t)rows * r1_align16((size_t)cols); }

/* Byte offset of the f16 scales of a planar q8_0 or q4_0 device matrix. */
static inline size_t r1_device_quant_scales_offset(enum r1_dtype t, int rows, int cols) {
    return (size_t)rows * r1_align16((size_t)cols / (t == R1_DTYPE_Q4_0 ? 2 : 1));
}

/* The dtype a matrix of host dtype t has on the device: the cpu's regrouped
 * layouts (q8_0x8, q4_0x8) go back to their plain format at upload (lossless);
 * the other quantized formats (q4_1, q5_0, q5_1, K-quants) are requantized to
 * q8_0 at upload (through f32: adds q8_0's rounding). */
enum r1_dtype r1_device_dtype(enum r1_dtype t);

/* Device bytes of src in device layout; 0 for a dtype the device cannot hold. */
size_t r1_device_mat_bytes(const struct r1_mat *src);

/* Convert the host matrix src to device layout and upload it to dst (which
 * holds r1_device_mat_bytes(src) bytes); *out describes the device copy.
 * Returns 0, or -1 with an error. */
int r1_device_mat_upload(const struct r1_device_ops *d, void *dst, const struct r1_mat *src, struct r1_mat *out);

/* A device copy of m's weights for backend be, made on first use and shared
 * by later callers (reference counted): a struct r1_model whose r1_mat and
 * vector pointers are device pointers (cfg, dtype as m's). NULL with an
 * error (out of device memory, dtype not supported). Release with put. */
const struct r1_model *r1_device_model_get(const struct r1_model *m, const struct r1_backend *be);
void r1_device_model_put(const struct r1_model *dm);

#endif
