/*
 * matvec.cuh - the warp dot product shared by the small-batch matvec kernels
 * (matvec.cu: qkv_bias, matvec_add, lm_head; gate_up_silu.cu). A warp owns
 * one weight row: each lane streams 16-byte weight loads (coalesced: the
 * warp reads 512 contiguous bytes per load), U of them in flight before the
 * first use, and dots them with the T activation rows (read through L1).
 */
#ifndef R1_CUDA_MATVEC_CUH
#define R1_CUDA_MATVEC_CUH

#include "kernels/cuda/common.cuh"

#define MV_WARPS 4 /* rows (warps) per block */
#define MV_U 4     /* 16-byte loads in flight per lane */

/* acc[t] (t < T <= NT) += w[r,:]·x[t,:] summed over the warp (every lane
 * holds the sums on return). XV: K % 4 == 0, so activations load as float4. */
template <int DT, int NT, bool XV>
__device__ __forceinline__ void warp_dot(const dmat &w, int r, const float *__restrict__ x, int T,
                                         float acc[NT]) {
    constexpr int EPL = wt<DT>::EPL;
    const int K = w.cols, lane = threadIdx.x & 31;
    const uint4 *row = reinterpret_cast<const uint4 *>(w.data + (size_t)r * w.row_bytes);
    const __half *sc = DT == DT_Q8 ? w.scales + (size_t)r * (K / 32) : nullptr;
    const int nvec = K / EPL;
    float part[NT];
#pragma unroll
    for (int t = 0; t < NT; t++) part[t] = 0.0f;

    auto consume = [&](uint4 raw, float s, int v) {
        float wf[EPL];
        dequant16<DT>(raw, s, wf);
        const int c = v * EPL;
#pragma unroll
        for (int t = 0; t < NT; t++) {
            if (t >= T) break;
            const float *xt = x + (size_t)t * K + c;
            float d = 0.0f;
            if constexpr (XV) {
#pragma unroll
                for (int j = 0; j < EPL; j += 4) {
                    float4 xv = __ldg(reinterpret_cast<const float4 *>(xt + j));
                    d += wf[j] * xv.x + wf[j + 1] * xv.y + wf[j + 2] * xv.z + wf[j + 3] * xv.w;
                }
            } else {
#pragma unroll
                for (int j = 0; j < EPL; j++) d += wf[j] * __ldg(xt + j);
            }
            part[t] += d;
        }
    };

    int v = lane;
    for (; v + 32 * (MV_U - 1) < nvec; v += 32 * MV_U) {
        uint4 raw[MV_U];
        float s[MV_U];
#pragma unroll
        for (int u = 0; u < MV_U; u++) {
            raw[u] = __ldg(row + v + 32 * u);
            s[u] = DT == DT_Q8 ? __half2float(sc[(v + 32 * u) * EPL / 32]) : 1.0f;
        }
#pragma unroll
        for (int u = 0; u < MV_U; u++) consume(raw[u], s[u], v + 32 * u);
    }
    for (; v < nvec; v += 32)
        consume(__ldg(row + v), DT == DT_Q8 ? __half2float(sc[v * EPL / 32]) : 1.0f, v);
    /* a tail shorter than one 16-byte load (f32/f16/bf16 with K % EPL != 0) */
    for (int c = nvec * EPL + lane; c < K; c += 32) {
        float wv = dmat_elem(w, r, c);
#pragma unroll
        for (int t = 0; t < NT; t++)
            if (t < T) part[t] += wv * x[(size_t)t * K + c];
    }
#pragma unroll
    for (int t = 0; t < NT; t++) acc[t] += warp_sum(part[t]);
}

/* Instantiate KERNEL<DT, NT, XV> for the matrix's dtype, T and K. */
#define MV_DISPATCH(KERNEL, w, T, ...)                                                       \
    do {                                                                                     \
        const bool xv_ = (w).cols % 4 == 0;                                                  \
        switch ((w).dt) {                                                                    \
        case DT_F32: MV_DISPATCH_NT(KERNEL, DT_F32, T, xv_, __VA_ARGS__); break;             \
        case DT_F16: MV_DISPATCH_NT(KERNEL, DT_F16, T, xv_, __VA_ARGS__); break;             \
        case DT_BF16: MV_DISPATCH_NT(KERNEL, DT_BF16, T, xv_, __VA_ARGS__); break;           \
        default: MV_DISPATCH_NT(KERNEL, DT_Q8, T, xv_, __VA_ARGS__); break;                  \
        }                                                                                    \
    } while (0)
#define MV_DISPATCH_NT(KERNEL, DT, T, XV, ...)                                               \
    do {                                                                                     \
        if ((T) == 1) {                                                                      \
            if (XV) KERNEL<DT, 1, true>__VA_ARGS__;                                          \
            else KERNEL<DT, 1, false>__VA_ARGS__;                                            \
        } else {                                                                             \
            if (XV) KERNEL<DT, R1CU_MATVEC_MAX_T, true>__VA_ARGS__;                          \
            else KERNEL<DT, R1CU_MATVEC_MAX_T, false>__VA_ARGS__;                            \
        }                                                                                    \
    } while (0)

#endif
