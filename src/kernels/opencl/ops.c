/*
 * ops.c - the OpenCL backend's kernel entry points: each sets the arguments
 * of its kernel in kernels.cl from the r1_op and queues it (no waiting).
 * Device addresses become (buffer, offset) pairs through r1cl_resolve.
 * Prefill matmuls may go to CLBlast instead (clblast.c). Ops from several
 * threads are serialized (ENTRY, at the end).
 */
#include <pthread.h>
#include <stdio.h>

#include "kernels/opencl/opencl_impl.h"

void r1cl_arg_ptr(cl_kernel k, cl_uint *i, const void *p) {
    cl_mem m;
    cl_ulong off;
    if (r1cl_resolve(p, &m, &off)) m = r1cl.dummy, off = 0;
    CL_CHECK(clSetKernelArg(k, (*i)++, sizeof m, &m));
    CL_CHECK(clSetKernelArg(k, (*i)++, sizeof off, &off));
}
void r1cl_arg_int(cl_kernel k, cl_uint *i, int v) {
    cl_int x = v;
    CL_CHECK(clSetKernelArg(k, (*i)++, sizeof x, &x));
}
void r1cl_arg_ulong(cl_kernel k, cl_uint *i, cl_ulong v) { CL_CHECK(clSetKernelArg(k, (*i)++, sizeof v, &v)); }
void r1cl_arg_float(cl_kernel k, cl_uint *i, float v) { CL_CHECK(clSetKernelArg(k, (*i)++, sizeof v, &v)); }

void r1cl_launch(cl_kernel k, const char *name, int dims, const size_t *global, const size_t *local) {
    cl_int e = clEnqueueNDRangeKernel(r1cl.queue, k, (cl_uint)dims, NULL, global, local, 0, NULL, NULL);
    if (e != CL_SUCCESS) {
        char what[96];
        snprintf(what, sizeof what, "clEnqueueNDRangeKernel(%s)", name);
        r1cl_check(e, what, __FILE__, __LINE__);
    }
}

/* weight arguments: dtype code (enum r1_dtype: f32 0, f16 1, bf16 2, q8_0 3,
 * q4_0 4, as kernels.cl's DT_*), data, row bytes, rows, cols */
static void arg_mat(cl_kernel k, cl_uint *i, const struct r1_mat *w) {
    r1cl_arg_int(k, i, (int)w->dtype);
    r1cl_arg_ptr(k, i, w->data);
    r1cl_arg_ulong(k, i, w->row_bytes);
    r1cl_arg_int(k, i, w->rows);
    r1cl_arg_int(k, i, w->cols);
}

static size_t round_up(size_t n, size_t m) { return (n + m - 1) / m * m; }

/* Weight rows per work-group: 1 on GPUs; on CPU devices (PoCL) a few
 * work-groups per compute unit, since each costs far more than a row. */
static int rows_per_group(int rows) {
    if (!r1cl.groups_cap) return 1;
    int rpg = (rows + r1cl.groups_cap - 1) / r1cl.groups_cap;
    return rpg > 0 ? rpg : 1;
}

/* The matmul kernels (kernels.cl), in either form (r1cl.item: a work-item
 * per row, else a work-group per rpg rows), or CLBlast for prefill:
 * gate_up 0: out = w x (+ bias), mode 0 store, 1 accumulate;
 * gate_up 1: out = silu(gate x) * (up x) over w = [gate; up] (bias, mode unused). */
static void matmul(const struct r1_op *op, const float *bias, int mode, int gate_up, const char *name) {
    if (op->T > R1CL_NT && r1cl.clblast && r1cl_blas_matmul(op, bias, mode, gate_up)) return;
    cl_kernel k =
        gate_up ? (r1cl.item ? r1cl.k_gate_up_item : r1cl.k_gate_up) : (r1cl.item ? r1cl.k_matmul_item : r1cl.k_matmul);
    const int out_rows = gate_up ? op->w->rows / 2 : op->w->rows;
    const size_t tgroups = (size_t)(op->T + R1CL_NT - 1) / R1CL_NT;
    cl_uint i = 0;
    arg_mat(k, &i, op->w);
    r1cl_arg_ptr(k, &i, op->x);
    r1cl_arg_int(k, &i, op->T);
    r1cl_arg_ptr(k, &i, op->out);
    if (!gate_up) {
        r1cl_arg_int(k, &i, op->w->rows);
        r1cl_arg_ptr(k, &i, bias);
        r1cl_arg_int(k, &i, bias != NULL);
        r1cl_arg_int(k, &i, mode);
    }
    if (r1cl.item) {
        size_t gl[2] = {round_up((size_t)out_rows, 16), tgroups}, lo[2] = {16, 1};
        r1cl_launch(k, name, 2, gl, lo);
        return;
    }
    int rpg = rows_per_group(out_rows);
    r1cl_arg_int(k, &i, rpg);
    size_t gl[2] = {(size_t)(out_rows + rpg - 1) / rpg * R1CL_WG, tgroups}, lo[2] = {R1CL_WG, 1};
    r1cl_launch(k, name, 2, gl, lo);
}

static void op_qkv_bias(const struct r1_op *op) { matmul(op, op->b, 0, 0, "matmul (qkv_bias)"); }
static void op_matvec_add(const struct r1_op *op) { matmul(op, NULL, 1, 0, "matmul (matvec_add)"); }
static void op_lm_head(const struct r1_op *op) { matmul(op, NULL, 0, 0, "matmul (lm_head)"); }
static void op_gate_up_silu(const struct r1_op *op) { matmul(op, NULL, 0, 1, "gate_up_silu"); }

static void op_embedding(const struct r1_op *op) {
    cl_kernel k = r1cl.k_embedding;
    cl_uint i = 0;
    arg_mat(k, &i, op->w);
    r1cl_arg_ptr(k, &i, op->ids);
    r1cl_arg_ptr(k, &i, op->out);
    size_t gl[2] = {round_up((size_t)op->w->cols, 64), (size_t)op->T}, lo[2] = {64, 1};
    r1cl_launch(k, "embedding", 2, gl, lo);
}

static void op_rms_norm(const struct r1_op *op) {
    cl_kernel k = r1cl.k_rms_norm;
    cl_uint i = 0;
    r1cl_arg_ptr(k, &i, op->x);
    r1cl_arg_ptr(k, &i, op->b);
    r1cl_arg_ptr(k, &i, op->out);
    r1cl_arg_int(k, &i, op->n);
    r1cl_arg_float(k, &i, op->eps);
    size_t gl[2] = {R1CL_NORM_WG, (size_t)op->T}, lo[2] = {R1CL_NORM_WG, 1};
    r1cl_launch(k, "rms_norm", 2, gl, lo);
}

/* position arguments: pos0, the device copy (or none), whether to read it */
static void arg_pos(cl_kernel k, cl_uint *i, const struct r1_op *op) {
    r1cl_arg_int(k, i, op->pos0);
    r1cl_arg_ptr(k, i, op->pos_dev);
    r1cl_arg_int(k, i, op->pos_dev != NULL);
}

static void op_rope_qk(const struct r1_op *op) {
    cl_kernel k = r1cl.k_rope;
    cl_uint i = 0;
    r1cl_arg_ptr(k, &i, op->out);
    r1cl_arg_ptr(k, &i, op->rope_cos);
    r1cl_arg_ptr(k, &i, op->rope_sin);
    r1cl_arg_int(k, &i, op->n_head);
    r1cl_arg_int(k, &i, op->n_kv_head);
    r1cl_arg_int(k, &i, op->head_dim);
    r1cl_arg_int(k, &i, op->T);
    arg_pos(k, &i, op);
    size_t gl[1] = {round_up((size_t)op->head_dim / 2 * (op->n_head + op->n_kv_head) * op->T, 64)}, lo[1] = {64};
    r1cl_launch(k, "rope_qk", 1, gl, lo);
}

static void arg_kv(cl_kernel k, cl_uint *i, const struct r1_op *op) {
    r1cl_arg_ptr(k, i, op->kv->k);
    r1cl_arg_ptr(k, i, op->kv->v);
}

/* the cache dtype as kernels.cl's kvt: 0 f32, 1 f16, 2 q8_0 */
static int kv_code(const struct r1_kv_cache *kv) { return kv->dtype == R1_DTYPE_Q8_0 ? 2 : kv->dtype == R1_DTYPE_F16; }

static void op_kv_append(const struct r1_op *op) {
    const int q8 = op->kv->dtype == R1_DTYPE_Q8_0;
    cl_kernel k = q8 ? r1cl.k_kv_append_q8 : r1cl.k_kv_append;
    cl_uint i = 0;
    r1cl_arg_ptr(k, &i, op->x);
    arg_kv(k, &i, op);
    if (!q8) r1cl_arg_int(k, &i, op->kv->dtype == R1_DTYPE_F16);
    r1cl_arg_int(k, &i, op->n_head);
    r1cl_arg_int(k, &i, op->n_kv_head);
    r1cl_arg_int(k, &i, op->head_dim);
    r1cl_arg_int(k, &i, op->kv->n_ctx);
    r1cl_arg_int(k, &i, op->layer);
    r1cl_arg_int(k, &i, op->T);
    arg_pos(k, &i, op);
    size_t items =
        q8 ? (size_t)op->head_dim / 32 * op->n_kv_head * op->T * 2 : (size_t)op->head_dim * op->n_kv_head * op->T;
    size_t gl[1] = {round_up(items, 64)}, lo[1] = {64};
    r1cl_launch(k, q8 ? "kv_append_q8" : "kv_append", 1, gl, lo);
}

static void op_attention_gqa(const struct r1_op *op) {
    const int hd = op->head_dim, group = op->n_head / op->n_kv_head;
    if (hd % 4 || hd > 4 * R1CL_ATT_WG || (op->kv->dtype == R1_DTYPE_Q8_0 && hd % 32)) {
        r1cl_fail("opencl attention: head_dim %d is not a multiple of 4 up to %d", hd, 4 * R1CL_ATT_WG);
        return;
    }
    const int n_slices = (group + R1CL_ATT_G - 1) / R1CL_ATT_G, ng = group < R1CL_ATT_G ? group : R1CL_ATT_G;
    const int tq = op->T < R1CL_ATT_G / ng ? op->T : R1CL_ATT_G / ng; /* prompt tokens per work-group */
    cl_kernel k = r1cl.k_attention;
    cl_uint i = 0;
    r1cl_arg_ptr(k, &i, op->x);
    arg_kv(k, &i, op);
    r1cl_arg_ptr(k, &i, op->out);
    r1cl_arg_int(k, &i, kv_code(op->kv));
    r1cl_arg_int(k, &i, op->n_head);
    r1cl_arg_int(k, &i, op->n_kv_head);
    r1cl_arg_int(k, &i, hd);
    r1cl_arg_int(k, &i, op->kv->n_ctx);
    r1cl_arg_int(k, &i, op->layer);
    r1cl_arg_int(k, &i, op->T);
    arg_pos(k, &i, op);
    r1cl_arg_int(k, &i, group);
    r1cl_arg_int(k, &i, n_slices);
    r1cl_arg_int(k, &i, tq);
    CL_CHECK(clSetKernelArg(k, i++, sizeof(float) * (size_t)ng * tq * hd, NULL));
    size_t gl[2] = {(size_t)R1CL_ATT_WG * op->n_kv_head * n_slices, (size_t)(op->T + tq - 1) / tq},
           lo[2] = {R1CL_ATT_WG, 1};
    r1cl_launch(k, "attention", 2, gl, lo);
}

static void op_argmax(const struct r1_op *op) {
    cl_kernel k = r1cl.k_argmax;
    cl_uint i = 0;
    r1cl_arg_ptr(k, &i, op->x);
    r1cl_arg_int(k, &i, op->n);
    r1cl_arg_ptr(k, &i, op->out_id);
    size_t gl[1] = {R1CL_NORM_WG}, lo[1] = {R1CL_NORM_WG};
    r1cl_launch(k, "argmax", 1, gl, lo);
}

/* The entry points: one op at a time over the shared kernel objects (the
 * arguments of a cl_kernel are not safe to set from two threads), so
 * sessions on several threads (serve --parallel N) interleave op by op on
 * the one in-order queue. */
static pthread_mutex_t op_mu = PTHREAD_MUTEX_INITIALIZER;
#define ENTRY(name)                                                                                                    \
    void r1cl_##name(const struct r1_op *op, int ith, int nth) {                                                       \
        (void)ith, (void)nth;                                                                                          \
        pthread_mutex_lock(&op_mu);                                                                                    \
        op_##name(op);                                                                                                 \
        pthread_mutex_unlock(&op_mu);                                                                                  \
    }
ENTRY(embedding)
ENTRY(rms_norm)
ENTRY(qkv_bias)
ENTRY(rope_qk)
ENTRY(kv_append)
ENTRY(attention_gqa)
ENTRY(matvec_add)
ENTRY(gate_up_silu)
ENTRY(lm_head)
ENTRY(argmax)
