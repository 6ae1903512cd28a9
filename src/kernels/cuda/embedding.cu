/*
 * embedding.cu - out[t,:] = row ids[t] of the embedding table, dequantized
 * to f32 (exactly as the reference converts it). ids are in device memory.
 */
#include "kernels/cuda/common.cuh"
#include "kernels/cuda/cuda_kernels.h"

__global__ void embedding_kernel(dmat w, const int32_t *__restrict__ ids, float *out) {
    const int t = blockIdx.x, r = ids[t];
    float *o = out + (size_t)t * w.cols;
    for (int c = threadIdx.x; c < w.cols; c += blockDim.x) o[c] = dmat_elem(w, r, c);
}

extern "C" void r1cu_embedding(const struct r1_op *op, int ith, int nth) {
    (void)ith, (void)nth;
    dmat w;
    if (dmat_from(op->w, &w)) {
        r1cu_fail("cuda embedding: unsupported dtype");
        return;
    }
    embedding_kernel<<<op->T, 256, 0, r1cu_stream()>>>(w, op->ids, op->out);
    CUDA_LAUNCHED("embedding_kernel");
}
