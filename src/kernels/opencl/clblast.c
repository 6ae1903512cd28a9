/*
 * clblast.c - prefill matmuls through CLBlast, the maintained OpenCL BLAS:
 * the weight matrix is dequantized to f32 into a workspace (dequant_f32 in
 * kernels.cl), then one SGEMM computes the whole batch (x @ w^T), with the
 * bias broadcast first (beta 1) or the residual accumulated (beta 1);
 * gate|up goes through a (T, 2F) workspace and silu_mul. Chosen by
 * R1_CL_PREFILL (backend.c) for batches of more than R1CL_NT rows.
 * Without CLBlast in the build (no clblast_c.h) it never applies.
 */
#include "kernels/opencl/opencl.h"
#include "kernels/opencl/opencl_impl.h"

#ifndef R1_CLBLAST
int r1_opencl_has_clblast(void) { return 0; }
int r1cl_blas_matmul(const struct r1_op *op, const float *bias, int accumulate, int gate_up) {
    (void)op, (void)bias, (void)accumulate, (void)gate_up;
    return 0;
}
#else
#include <clblast_c.h>
#include <pthread.h>

int r1_opencl_has_clblast(void) { return 1; }

/* grown on demand, kept for the process */
static struct {
    cl_mem m;
    size_t size;
    cl_kernel k_bias, k_silu;
} ws[2];

static cl_mem workspace(int slot, size_t bytes) {
    if (bytes <= ws[slot].size) return ws[slot].m;
    if (ws[slot].m) clReleaseMemObject(ws[slot].m), ws[slot].m = NULL, ws[slot].size = 0;
    cl_int e;
    cl_mem m = clCreateBuffer(r1cl.ctx, CL_MEM_READ_WRITE, bytes, NULL, &e);
    if (CL_CHECK_E(e, "clCreateBuffer (CLBlast workspace)")) return NULL;
    ws[slot].m = m, ws[slot].size = bytes;
    return m;
}

static cl_kernel kernel(cl_kernel *k, const char *name) {
    if (!*k) {
        cl_int e;
        *k = clCreateKernel(r1cl.prog, name, &e);
        if (e != CL_SUCCESS) {
            r1cl_fail("OpenCL error %s (%d) from clCreateKernel(%s)", r1cl_err_name(e), (int)e, name);
            *k = NULL;
        }
    }
    return *k;
}

static int blas_check(CLBlastStatusCode s, const char *what) {
    if (s == CLBlastSuccess) return 0;
    return r1cl_fail("CLBlast error %d from %s%s", (int)s, what,
                     (int)s < 0 && (int)s > -100 ? " (an OpenCL error code)" : "");
}

int r1cl_blas_matmul(const struct r1_op *op, const float *bias, int accumulate, int gate_up) {
    const struct r1_mat *w = op->w;
    const size_t rows = (size_t)w->rows, K = (size_t)w->cols, T = (size_t)op->T;
    const size_t wbytes = rows * K * 4;
    if (wbytes > r1cl.max_alloc || (gate_up && T * rows * 4 > r1cl.max_alloc)) return 0;
    cl_mem wf = workspace(0, wbytes);
    if (!wf) return 1;
    cl_uint i = 0;
    cl_kernel k = r1cl.k_dequant;
    r1cl_arg_int(k, &i, (int)w->dtype);
    r1cl_arg_ptr(k, &i, w->data);
    r1cl_arg_ulong(k, &i, w->row_bytes);
    r1cl_arg_int(k, &i, w->rows);
    r1cl_arg_int(k, &i, w->cols);
    CL_CHECK(clSetKernelArg(k, i++, sizeof wf, &wf));
    cl_ulong zero = 0;
    CL_CHECK(clSetKernelArg(k, i++, sizeof zero, &zero));
    size_t gl[2] = {(K + 63) / 64 * 64, rows}, lo[2] = {64, 1};
    r1cl_launch(k, "dequant_f32", 2, gl, lo);
    cl_mem xm, om;
    cl_ulong xo, oo;
    if (r1cl_resolve(op->x, &xm, &xo) || r1cl_resolve(op->out, &om, &oo)) return 1;
    cl_mem cm = om;
    size_t co = oo / 4;
    if (gate_up) {
        cm = workspace(1, T * rows * 4), co = 0;
        if (!cm) return 1;
    }
    float beta = accumulate ? 1.0f : 0.0f;
    if (bias) {
        cl_kernel kb = kernel(&ws[0].k_bias, "bias_rows");
        if (!kb) return 1;
        i = 0;
        r1cl_arg_ptr(kb, &i, op->out);
        r1cl_arg_ptr(kb, &i, bias);
        r1cl_arg_int(kb, &i, (int)rows);
        size_t g2[2] = {(rows + 63) / 64 * 64, T}, l2[2] = {64, 1};
        r1cl_launch(kb, "bias_rows", 2, g2, l2);
        beta = 1.0f;
    }
    if (blas_check(CLBlastSgemm(CLBlastLayoutRowMajor, CLBlastTransposeNo, CLBlastTransposeYes, T, rows, K, 1.0f, xm,
                                xo / 4, K, wf, 0, K, beta, cm, co, rows, &r1cl.queue, NULL),
                   "CLBlastSgemm"))
        return 1;
    if (gate_up) {
        cl_kernel ks = kernel(&ws[0].k_silu, "silu_mul");
        if (!ks) return 1;
        i = 0;
        CL_CHECK(clSetKernelArg(ks, i++, sizeof cm, &cm));
        CL_CHECK(clSetKernelArg(ks, i++, sizeof zero, &zero));
        r1cl_arg_int(ks, &i, (int)rows / 2);
        r1cl_arg_ptr(ks, &i, op->out);
        size_t g2[2] = {(rows / 2 + 63) / 64 * 64, T}, l2[2] = {64, 1};
        r1cl_launch(ks, "silu_mul", 2, g2, l2);
    }
    return 1;
}
#endif
