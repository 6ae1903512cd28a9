/*
 * argmax.cu - *out_id = argmax of x[0..n), the lowest index on ties (as the
 * reference): one block, each thread scans a strided slice, then a shared
 * memory tree over (value, index) pairs. Output in device memory.
 */
#include "kernels/cuda/common.cuh"
#include "kernels/cuda/cuda_kernels.h"

#define ARGMAX_THREADS 1024

__device__ __forceinline__ bool better(float v, int i, float bv, int bi) {
    return v > bv || (v == bv && i < bi);
}

__global__ void __launch_bounds__(ARGMAX_THREADS) argmax_kernel(const float *__restrict__ x, int n, int32_t *out) {
    __shared__ float sv[ARGMAX_THREADS];
    __shared__ int si[ARGMAX_THREADS];
    float bv = -INFINITY;
    int bi = n; /* sentinel: any real index wins a tie */
    for (int i = threadIdx.x; i < n; i += ARGMAX_THREADS) {
        const float v = x[i];
        if (better(v, i, bv, bi)) bv = v, bi = i;
    }
    sv[threadIdx.x] = bv, si[threadIdx.x] = bi;
    __syncthreads();
    for (int s = ARGMAX_THREADS / 2; s > 0; s >>= 1) {
        if (threadIdx.x < s && better(sv[threadIdx.x + s], si[threadIdx.x + s], sv[threadIdx.x], si[threadIdx.x]))
            sv[threadIdx.x] = sv[threadIdx.x + s], si[threadIdx.x] = si[threadIdx.x + s];
        __syncthreads();
    }
    if (threadIdx.x == 0) *out = si[0] < n ? si[0] : 0; /* all NaN: 0, as the reference */
}

extern "C" void r1cu_argmax(const struct r1_op *op, int ith, int nth) {
    (void)ith, (void)nth;
    argmax_kernel<<<1, ARGMAX_THREADS, 0, r1cu_stream()>>>(op->x, op->n, op->out_id);
    CUDA_LAUNCHED("argmax_kernel");
}
