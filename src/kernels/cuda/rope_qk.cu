/*
 * rope_qk.cu - rotate-half RoPE of the Q and K heads of the qkv buffer in
 * place, at position pos+t (pos from device memory when the step is a graph),
 * with the session's cos/sin tables (n_ctx, head_dim/2).
 */
#include "kernels/cuda/common.cuh"
#include "kernels/cuda/cuda_kernels.h"

__global__ void rope_kernel(float *qkv, int stride, int hd, const float *__restrict__ cs,
                            const float *__restrict__ sn, int pos0, const int32_t *pos_dev) {
    const int t = blockIdx.x, h = blockIdx.y, half = hd / 2;
    const int pos = r1cu_pos(pos0, pos_dev) + t;
    float *v = qkv + (size_t)t * stride + (size_t)h * hd;
    const float *c = cs + (size_t)pos * half, *s = sn + (size_t)pos * half;
    for (int k = threadIdx.x; k < half; k += blockDim.x) {
        const float a = v[k], b = v[k + half];
        v[k] = a * c[k] - b * s[k];
        v[k + half] = b * c[k] + a * s[k];
    }
}

extern "C" void r1cu_rope_qk(const struct r1_op *op, int ith, int nth) {
    (void)ith, (void)nth;
    const int hd = op->head_dim, stride = (op->n_head + 2 * op->n_kv_head) * hd;
    const int threads = hd / 2 < 128 ? (hd / 2 + 31) / 32 * 32 : 128;
    rope_kernel<<<dim3(op->T, op->n_head + op->n_kv_head), threads, 0, r1cu_stream()>>>(
        op->out, stride, hd, op->rope_cos, op->rope_sin, op->pos0, op->pos_dev);
    CUDA_LAUNCHED("rope_kernel");
}
