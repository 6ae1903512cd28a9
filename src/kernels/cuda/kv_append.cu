/*
 * kv_append.cu - copy the K and V heads of the qkv buffer into the cache at
 * (layer, head, pos+t), converting to the cache dtype (f16: round to nearest
 * even, as the reference's r1_f32_to_f16).
 */
#include "kernels/cuda/common.cuh"
#include "kernels/cuda/cuda_kernels.h"

template <bool F16>
__global__ void kv_append_kernel(const float *__restrict__ qkv, int stride, int n_head, int nkv, int hd,
                                 int n_ctx, int layer, void *kc, void *vc, int pos0, const int32_t *pos_dev) {
    const int t = blockIdx.x, h = blockIdx.y;
    const int pos = r1cu_pos(pos0, pos_dev) + t;
    const float *k = qkv + (size_t)t * stride + (size_t)(n_head + h) * hd;
    const float *v = k + (size_t)nkv * hd;
    const size_t idx = (((size_t)layer * nkv + h) * n_ctx + pos) * hd;
    for (int d = threadIdx.x; d < hd; d += blockDim.x) {
        if constexpr (F16) {
            ((__half *)kc)[idx + d] = __float2half_rn(k[d]);
            ((__half *)vc)[idx + d] = __float2half_rn(v[d]);
        } else {
            ((float *)kc)[idx + d] = k[d];
            ((float *)vc)[idx + d] = v[d];
        }
    }
}

extern "C" void r1cu_kv_append(const struct r1_op *op, int ith, int nth) {
    (void)ith, (void)nth;
    const struct r1_kv_cache *kv = op->kv;
    const int hd = op->head_dim, stride = (op->n_head + 2 * op->n_kv_head) * hd;
    const dim3 grid(op->T, op->n_kv_head);
    const int threads = hd < 128 ? (hd + 31) / 32 * 32 : 128;
    if (kv->dtype == R1_DTYPE_F16)
        kv_append_kernel<true><<<grid, threads, 0, r1cu_stream()>>>(op->x, stride, op->n_head, op->n_kv_head,
                                                                    hd, kv->n_ctx, op->layer, kv->k, kv->v,
                                                                    op->pos0, op->pos_dev);
    else
        kv_append_kernel<false><<<grid, threads, 0, r1cu_stream()>>>(op->x, stride, op->n_head, op->n_kv_head,
                                                                     hd, kv->n_ctx, op->layer, kv->k, kv->v,
                                                                     op->pos0, op->pos_dev);
    CUDA_LAUNCHED("kv_append_kernel");
}
