/*
 * opencl_impl.h - shared by the OpenCL backend's files: the process-wide
 * state (device, context, queue, program, kernels), the CL_CHECK macro that
 * names the failing call and its error code, address resolution and the
 * kernel entry points (r1_kernel_fn signature; (ith, nth) are always (0, 1)).
 */
#ifndef R1_OPENCL_IMPL_H
#define R1_OPENCL_IMPL_H

#ifndef CL_TARGET_OPENCL_VERSION
#define CL_TARGET_OPENCL_VERSION 120
#endif
#include <CL/cl.h>

#include "kernels/kernels.h"

/* Work-group sizes, as kernels.cl defines them. */
#define R1CL_WG 64
#define R1CL_NT 4
#define R1CL_NORM_WG 256
#define R1CL_ATT_WG 64
#define R1CL_ATT_G 8

struct r1cl_state {
    int ready, clblast;
    int item; /* matmuls: 1 = a work-item per row (CPU devices), 0 = a work-group
                 per row */
    cl_platform_id platform;
    cl_device_id device;
    cl_context ctx;
    cl_command_queue queue;
    cl_program prog;
    cl_mem dummy; /* bound to unused buffer arguments */
    cl_kernel k_matmul, k_gate_up, k_matmul_item, k_gate_up_item, k_embedding, k_rms_norm, k_rope, k_kv_append,
        k_kv_append_q8, k_attention, k_argmax, k_dequant;
    cl_ulong mem, max_alloc, local_mem;
    int groups_cap; /* matmul work-groups per launch at most (CPU devices), 0: one
                       per row */
    char dev_name[256];
};
extern struct r1cl_state r1cl;

const char *r1cl_err_name(cl_int e);
/* 0 if e is CL_SUCCESS, else records "OpenCL error NAME (code) from call at
 * file:line" for the next sync / download, sets r1_err and returns -1. */
int r1cl_check(cl_int e, const char *call, const char *file, int line);
int r1cl_fail(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
#define CL_CHECK(call) r1cl_check((call), #call, __FILE__, __LINE__)
#define CL_CHECK_E(e, name) r1cl_check((e), name, __FILE__, __LINE__)

/* The buffer and byte offset of a device address (NULL: a dummy buffer). */
int r1cl_resolve(const void *p, cl_mem *mem, cl_ulong *off);

/* Prefill matmul through CLBlast (clblast.c): out (T, rows) = x (T, K) w^T
 * (+ out when accumulate, + bias). 1 when it ran (or failed: error
 * recorded), 0 when it does not apply (no CLBlast, or the weights too large
 * for the dequantization workspace). gate_up: out (T, rows/2) = silu * up. */
int r1cl_blas_matmul(const struct r1_op *op, const float *bias, int accumulate, int gate_up);

void r1cl_embedding(const struct r1_op *op, int ith, int nth);
void r1cl_rms_norm(const struct r1_op *op, int ith, int nth);
void r1cl_qkv_bias(const struct r1_op *op, int ith, int nth);
void r1cl_rope_qk(const struct r1_op *op, int ith, int nth);
void r1cl_kv_append(const struct r1_op *op, int ith, int nth);
void r1cl_attention_gqa(const struct r1_op *op, int ith, int nth);
void r1cl_matvec_add(const struct r1_op *op, int ith, int nth);
void r1cl_gate_up_silu(const struct r1_op *op, int ith, int nth);
void r1cl_lm_head(const struct r1_op *op, int ith, int nth);
void r1cl_argmax(const struct r1_op *op, int ith, int nth);

/* Kernel argument helpers: each sets argument *i and advances it; failures
 * are recorded (reported by the next sync). */
void r1cl_arg_ptr(cl_kernel k, cl_uint *i, const void *p);
void r1cl_arg_int(cl_kernel k, cl_uint *i, int v);
void r1cl_arg_ulong(cl_kernel k, cl_uint *i, cl_ulong v);
void r1cl_arg_float(cl_kernel k, cl_uint *i, float v);
void r1cl_launch(cl_kernel k, const char *name, int dims, const size_t *global, const size_t *local);

#endif
