/*
 * rms_norm.cu - out[t,:] = x[t,:] / sqrt(mean(x[t,:]^2) + eps) * b[:], one
 * block per row, f32 throughout (the sum is a tree, not the reference's
 * sequential order: differences are rounding only).
 */
#include "kernels/cuda/common.cuh"
#include "kernels/cuda/cuda_kernels.h"

#define NORM_THREADS 256

__global__ void __launch_bounds__(NORM_THREADS)
    rms_norm_kernel(const float *__restrict__ x, const float *__restrict__ b, int n, float eps, float *out) {
    __shared__ float red[NORM_THREADS / 32];
    __shared__ float inv_s;
    const float *xr = x + (size_t)blockIdx.x * n;
    float *o = out + (size_t)blockIdx.x * n;
    float ss = 0.0f;
    for (int i = threadIdx.x; i < n; i += NORM_THREADS) ss += xr[i] * xr[i];
    ss = warp_sum(ss);
    if ((threadIdx.x & 31) == 0) red[threadIdx.x / 32] = ss;
    __syncthreads();
    if (threadIdx.x < 32) {
        float v = threadIdx.x < NORM_THREADS / 32 ? red[threadIdx.x] : 0.0f;
        v = warp_sum(v);
        if (threadIdx.x == 0) inv_s = 1.0f / sqrtf(v / (float)n + eps);
    }
    __syncthreads();
    const float inv = inv_s;
    for (int i = threadIdx.x; i < n; i += NORM_THREADS) o[i] = xr[i] * inv * b[i];
}

extern "C" void r1cu_rms_norm(const struct r1_op *op, int ith, int nth) {
    (void)ith, (void)nth;
    rms_norm_kernel<<<op->T, NORM_THREADS, 0, r1cu_stream()>>>(op->x, op->b, op->n, op->eps, op->out);
    CUDA_LAUNCHED("rms_norm_kernel");
}
