/*
 * gemm.cu - the prefill GEMM through cuBLAS: out (T, R) row-major, with
 * out[t*ostride + r] = x[t,:]·w[r,:] + beta * out[...], f32 accumulate.
 *
 * cuBLAS is column-major: row-major out (T, R) is column-major (R, T) with
 * ld = ostride, so C = op(A) B with A = the weights (row-major (R, K) read as
 * column-major (K, R), ld = row_bytes / element size, transposed) and B = the
 * activations (row-major (T, K) = column-major (K, T), ld = K).
 *
 *   bf16 / f16 weights   activations rounded to the same 16-bit type into a
 *                        workspace; tensor-core GemmEx. Exact mode
 *                        (r1_cuda_set_prefill_exact) adds a second GEMM over
 *                        the rounding residue x - hi (beta = 1).
 *   q8_0 weights         dequantized, R1CU_DEQ_ROWS rows at a time, into a
 *                        bf16 workspace, then as bf16.
 *   f32 weights          cublasSgemm (no TF32: default math mode).
 */
#include "kernels/cuda/cuda_kernels.h"
#include <type_traits>

#include "kernels/cuda/common.cuh"

#define DEQ_BYTES ((size_t)256 << 20) /* bf16 dequantization chunk */

/* hi = round(x), lo = round(x - hi) to the 16-bit type H */
template <typename H>
__global__ void split_kernel(const float *__restrict__ x, long n, H *hi, H *lo) {
    for (long i = blockIdx.x * (long)blockDim.x + threadIdx.x; i < n; i += (long)gridDim.x * blockDim.x) {
        const float v = x[i];
        H h;
        if constexpr (std::is_same<H, __half>::value) h = __float2half_rn(v);
        else h = __float2bfloat16_rn(v);
        hi[i] = h;
        if (lo) {
            float r;
            if constexpr (std::is_same<H, __half>::value) r = v - __half2float(h);
            else r = v - __bfloat162float(h);
            if constexpr (std::is_same<H, __half>::value) lo[i] = __float2half_rn(r);
            else lo[i] = __float2bfloat16_rn(r);
        }
    }
}

/* rows [r0, r0+n) of a planar q8_0 matrix to bf16 (n, K) */
__global__ void deq_q8_kernel(dmat w, int r0, int n, __nv_bfloat16 *o) {
    const int K = w.cols;
    const long total = (long)n * K;
    for (long i = blockIdx.x * (long)blockDim.x + threadIdx.x; i < total; i += (long)gridDim.x * blockDim.x) {
        const int r = (int)(i / K), c = (int)(i % K);
        o[i] = __float2bfloat16_rn(dmat_elem(w, r0 + r, c));
    }
}

static unsigned grid_for(long n) {
    unsigned g = cdiv(n, 256);
    return g < 8192 ? g : 8192;
}

int r1cu_gemm(const struct r1_mat *m, const float *x, int T, float *out, int ostride, float beta) {
    dmat w;
    if (dmat_from(m, &w)) return r1cu_fail("cuda gemm: unsupported weight dtype %d", (int)m->dtype);
    cublasHandle_t h = r1cu_blas();
    cudaStream_t st = r1cu_stream();
    const int R = w.rows, K = w.cols;
    const float one = 1.0f;
    if (w.dt == DT_F32) {
        const int lda = (int)(w.row_bytes / 4);
        return CUBLAS_CHECK(cublasSgemm(h, CUBLAS_OP_T, CUBLAS_OP_N, R, T, K, &one, (const float *)w.data,
                                        lda, x, K, &beta, out, ostride));
    }
    const bool half = w.dt == DT_F16, exact = r1cu_prefill_exact() != 0;
    const long n = (long)T * K;
    /* activations: hi | lo, 16-bit each */
    uint16_t *xb = (uint16_t *)r1cu_workspace(R1CU_WS_X, (size_t)n * 2 * (exact ? 2 : 1));
    if (!xb) return -1;
    if (half)
        split_kernel<__half><<<grid_for(n), 256, 0, st>>>(x, n, (__half *)xb, exact ? (__half *)(xb + n) : nullptr);
    else
        split_kernel<__nv_bfloat16><<<grid_for(n), 256, 0, st>>>(
            x, n, (__nv_bfloat16 *)xb, exact ? (__nv_bfloat16 *)(xb + n) : nullptr);
    if (CUDA_LAUNCHED("split_kernel")) return -1;
    const cudaDataType_t ty = half ? CUDA_R_16F : CUDA_R_16BF;

    auto gemm = [&](const void *A, int lda, int rows, float *C, float b) -> int {
        int rc = CUBLAS_CHECK(cublasGemmEx(h, CUBLAS_OP_T, CUBLAS_OP_N, rows, T, K, &one, A, ty, lda, xb, ty, K,
                                           &b, C, CUDA_R_32F, ostride, CUBLAS_COMPUTE_32F,
                                           CUBLAS_GEMM_DEFAULT));
        if (!rc && exact)
            rc = CUBLAS_CHECK(cublasGemmEx(h, CUBLAS_OP_T, CUBLAS_OP_N, rows, T, K, &one, A, ty, lda, xb + n, ty,
                                           K, &one, C, CUDA_R_32F, ostride, CUBLAS_COMPUTE_32F,
                                           CUBLAS_GEMM_DEFAULT));
        return rc;
    };
    if (w.dt != DT_Q8) return gemm(w.data, (int)(w.row_bytes / 2), R, out, beta);

    int per = (int)(DEQ_BYTES / ((size_t)K * 2));
    per = per < 128 ? 128 : per / 128 * 128;
    if (per > R) per = R;
    __nv_bfloat16 *wb = (__nv_bfloat16 *)r1cu_workspace(R1CU_WS_W, (size_t)per * K * 2);
    if (!wb) return -1;
    for (int r0 = 0; r0 < R; r0 += per) {
        const int rows = R - r0 < per ? R - r0 : per;
        deq_q8_kernel<<<grid_for((long)rows * K), 256, 0, st>>>(w, r0, rows, wb);
        if (CUDA_LAUNCHED("deq_q8_kernel")) return -1;
        if (gemm(wb, K, rows, out + r0, beta)) return -1;
    }
    return 0;
}
