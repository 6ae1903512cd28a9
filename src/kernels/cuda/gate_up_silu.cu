/*
 * gate_up_silu.cu - w = [gate; up] (2F, dim): out[t,j] = silu(x·gate_j) * (x·up_j).
 * T <= 8: one warp per j streams both rows (one pass over the fused weight,
 * no intermediate in memory). Larger T: one GEMM into a (T, 2F) workspace,
 * then the silu-multiply epilogue.
 */
#include "kernels/cuda/cuda_kernels.h"
#include "kernels/cuda/matvec.cuh"

template <int DT, int NT, bool XV>
__global__ void __launch_bounds__(MV_WARPS * 32)
    gate_up_kernel(dmat w, const float *__restrict__ x, int T, float *out) {
    const int F = w.rows / 2;
    const int j = blockIdx.x * MV_WARPS + threadIdx.x / 32;
    if (j >= F) return;
    float g[NT], u[NT];
#pragma unroll
    for (int t = 0; t < NT; t++) g[t] = u[t] = 0.0f;
    warp_dot<DT, NT, XV>(w, j, x, T, g);
    warp_dot<DT, NT, XV>(w, j + F, x, T, u);
    if ((threadIdx.x & 31) != 0) return;
#pragma unroll
    for (int t = 0; t < NT; t++) {
        if (t >= T) break;
        out[(size_t)t * F + j] = g[t] / (1.0f + expf(-g[t])) * u[t];
    }
}

__global__ void silu_mul_kernel(const float *__restrict__ gu, int F, long n, float *out) {
    for (long i = blockIdx.x * (long)blockDim.x + threadIdx.x; i < n; i += (long)gridDim.x * blockDim.x) {
        const long t = i / F, j = i % F;
        const float g = gu[t * 2 * F + j], u = gu[t * 2 * F + F + j];
        out[i] = g / (1.0f + expf(-g)) * u;
    }
}

extern "C" void r1cu_gate_up_silu(const struct r1_op *op, int ith, int nth) {
    (void)ith, (void)nth;
    dmat w;
    if (dmat_from(op->w, &w)) {
        r1cu_fail("cuda gate_up_silu: unsupported weight dtype");
        return;
    }
    const int T = op->T, F = w.rows / 2;
    cudaStream_t st = r1cu_stream();
    if (T <= R1CU_MATVEC_MAX_T) {
        const dim3 grid(cdiv(F, MV_WARPS)), block(MV_WARPS * 32);
        MV_DISPATCH(gate_up_kernel, w, T, <<<grid, block, 0, st>>>(w, op->x, T, op->out));
        CUDA_LAUNCHED("gate_up_kernel");
        return;
    }
    float *gu = (float *)r1cu_workspace(R1CU_WS_TMP, (size_t)T * 2 * F * sizeof(float));
    if (!gu || r1cu_gemm(op->w, op->x, T, gu, 2 * F, 0.0f)) return;
    const long n = (long)T * F;
    silu_mul_kernel<<<cdiv(n, 256) < 8192 ? cdiv(n, 256) : 8192, 256, 0, st>>>(gu, F, n, op->out);
    CUDA_LAUNCHED("silu_mul_kernel");
}
