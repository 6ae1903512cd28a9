/*
 * kv_append.cu - copy the K and V heads of the qkv buffer into the cache at
 * (layer, head, pos+t), converting to the cache dtype (f16: round to nearest
 * even, as the reference's r1_f32_to_f16; q8_0: the reference's blocks).
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

/* A q8_0 cache (rows of hd / 32 GGUF blocks: f16 scale d, 32 int8): a
 * thread per 32 values of a K or V row, the reference's quantizer (d = amax
 * / 127, q = x * (1 / d) rounded half away from zero, d rounded to nearest
 * even; the _rn intrinsics keep the divisions exact and the product from
 * being fused), so the cache holds the host backends' bytes. */
__global__ void kv_append_q8_kernel(const float *__restrict__ qkv, int stride, int n_head, int nkv, int hd,
                                    int n_ctx, int layer, uint8_t *kc, uint8_t *vc, int pos0,
                                    const int32_t *pos_dev) {
    const int t = blockIdx.x, h = blockIdx.y, nb = hd / 32;
    const int pos = r1cu_pos(pos0, pos_dev) + t;
    for (int i = threadIdx.x; i < 2 * nb; i += blockDim.x) {
        const int is_v = i / nb, b = i % nb;
        const float *x = qkv + (size_t)t * stride + (size_t)(n_head + is_v * nkv + h) * hd + b * 32;
        uint8_t *dst = (is_v ? vc : kc) + ((((size_t)layer * nkv + h) * n_ctx + pos) * nb + b) * 34;
        float amax = 0.0f;
        for (int j = 0; j < 32; j++) {
            const float a = fabsf(x[j]);
            amax = a > amax ? a : amax;
        }
        const float d = __fdiv_rn(amax, 127.0f), id = d != 0.0f ? __fdiv_rn(1.0f, d) : 0.0f;
        const unsigned short dh = __half_as_ushort(__float2half_rn(d));
        dst[0] = (uint8_t)(dh & 0xff), dst[1] = (uint8_t)(dh >> 8);
        for (int j = 0; j < 32; j++) {
            const float v = __fmul_rn(x[j], id);
            const int q = (int)v; /* toward zero, exact for |v| <= 128 */
            const float fr = __fsub_rn(v, (float)q);
            dst[2 + j] = (uint8_t)(int8_t)(q + (fr >= 0.5f) - (fr <= -0.5f));
        }
    }
}

extern "C" void r1cu_kv_append(const struct r1_op *op, int ith, int nth) {
    (void)ith, (void)nth;
    const struct r1_kv_cache *kv = op->kv;
    const int hd = op->head_dim, stride = (op->n_head + 2 * op->n_kv_head) * hd;
    const dim3 grid(op->T, op->n_kv_head);
    const int threads = hd < 128 ? (hd + 31) / 32 * 32 : 128;
    if (kv->dtype == R1_DTYPE_Q8_0) {
        kv_append_q8_kernel<<<grid, 32, 0, r1cu_stream()>>>(op->x, stride, op->n_head, op->n_kv_head, hd, kv->n_ctx,
                                                            op->layer, (uint8_t *)kv->k, (uint8_t *)kv->v, op->pos0,
                                                            op->pos_dev);
        CUDA_LAUNCHED("kv_append_q8_kernel");
        return;
    }
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
