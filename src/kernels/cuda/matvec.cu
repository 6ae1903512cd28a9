/*
 * matvec.cu - qkv_bias, matvec_add and lm_head: out[t,r] (=|+=) w[r,:]·x[t,:]
 * (+ b[r]). T <= 8 rows run the warp-per-row matvec (matvec.cuh), reading
 * the weights once for all rows; larger batches go to the cuBLAS GEMM
 * (gemm.cu) with the bias added after.
 */
#include "kernels/cuda/cuda_kernels.h"
#include "kernels/cuda/matvec.cuh"

template <int DT, int NT, bool XV>
__global__ void __launch_bounds__(MV_WARPS * 32)
    matvec_kernel(dmat w, const float *__restrict__ x, int T, float *out, int ostride,
                  const float *__restrict__ bias, int accumulate) {
    const int r = blockIdx.x * MV_WARPS + threadIdx.x / 32;
    if (r >= w.rows) return;
    float acc[NT];
#pragma unroll
    for (int t = 0; t < NT; t++) acc[t] = 0.0f;
    warp_dot<DT, NT, XV>(w, r, x, T, acc);
    if ((threadIdx.x & 31) != 0) return;
    const float b = bias ? bias[r] : 0.0f;
#pragma unroll
    for (int t = 0; t < NT; t++) {
        if (t >= T) break;
        float *o = out + (size_t)t * ostride + r;
        const float v = acc[t] + b;
        *o = accumulate ? *o + v : v;
    }
}

int r1cu_matvec(const struct r1_mat *m, const float *x, int T, float *out, int ostride,
                const float *bias, int accumulate) {
    dmat w;
    if (dmat_from(m, &w)) return r1cu_fail("cuda matvec: unsupported weight dtype %d", (int)m->dtype);
    const dim3 grid(cdiv(w.rows, MV_WARPS)), block(MV_WARPS * 32);
    cudaStream_t st = r1cu_stream();
    MV_DISPATCH(matvec_kernel, w, T, <<<grid, block, 0, st>>>(w, x, T, out, ostride, bias, accumulate));
    return CUDA_LAUNCHED("matvec_kernel");
}

__global__ void add_bias_kernel(float *out, const float *__restrict__ b, int rows, long n) {
    for (long i = blockIdx.x * (long)blockDim.x + threadIdx.x; i < n; i += (long)gridDim.x * blockDim.x)
        out[i] += b[i % rows];
}

/* T > 8: GEMM, then epilogue */
static void matmul(const struct r1_op *op, const float *bias, int accumulate) {
    const int T = op->T, R = op->w->rows;
    if (T <= R1CU_MATVEC_MAX_T) {
        r1cu_matvec(op->w, op->x, T, op->out, R, bias, accumulate);
        return;
    }
    if (r1cu_gemm(op->w, op->x, T, op->out, R, accumulate ? 1.0f : 0.0f)) return;
    if (bias) {
        long n = (long)T * R;
        add_bias_kernel<<<cdiv(n, 256) < 4096 ? cdiv(n, 256) : 4096, 256, 0, r1cu_stream()>>>(
            op->out, bias, R, n);
        CUDA_LAUNCHED("add_bias_kernel");
    }
}

extern "C" void r1cu_qkv_bias(const struct r1_op *op, int ith, int nth) {
    (void)ith, (void)nth;
    matmul(op, op->b, 0);
}

extern "C" void r1cu_matvec_add(const struct r1_op *op, int ith, int nth) {
    (void)ith, (void)nth;
    matmul(op, nullptr, 1);
}

extern "C" void r1cu_lm_head(const struct r1_op *op, int ith, int nth) {
    (void)ith, (void)nth;
    matmul(op, nullptr, 0);
}
