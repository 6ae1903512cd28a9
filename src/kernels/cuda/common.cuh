/*
 * common.cuh - shared by the CUDA backend's .cu files: the check macros, the
 * backend's internal services (stream, cuBLAS, workspace; in backend.cu), the
 * device view of an r1_mat and per-dtype loads. No kernels here.
 */
#ifndef R1_CUDA_COMMON_CUH
#define R1_CUDA_COMMON_CUH

#include <cublas_v2.h>
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>
#include <stdint.h>

#include "kernels/kernels.h" /* C linkage inside */

extern "C" int r1_err(const char *fmt, ...);
extern "C" int r1_err_prefix(const char *fmt, ...);

/* Record a failed CUDA call (the first one is kept and reported by the next
 * sync or download, since kernels return void). Returns 0 on success. */
int r1cu_check(cudaError_t e, const char *what, const char *file, int line);
int r1cu_check_blas(cublasStatus_t e, const char *what, const char *file, int line);
/* Record a failure that is not a CUDA call's (kept like r1cu_check); -1. */
int r1cu_fail(const char *fmt, ...);
#define CUDA_CHECK(x) r1cu_check((x), #x, __FILE__, __LINE__)
#define CUBLAS_CHECK(x) r1cu_check_blas((x), #x, __FILE__, __LINE__)
/* After every launch: a bad configuration is reported with the kernel's name. */
#define CUDA_LAUNCHED(name) r1cu_check(cudaGetLastError(), "launch of " name, __FILE__, __LINE__)

cudaStream_t r1cu_stream(void);
cublasHandle_t r1cu_blas(void);
int r1cu_prefill_exact(void);
/* A device buffer of at least bytes for one of the workspace slots; grows
 * (never inside a graph capture: only the prefill path uses it). NULL on error. */
enum { R1CU_WS_X, R1CU_WS_W, R1CU_WS_TMP, R1CU_WS_COUNT };
void *r1cu_workspace(int slot, size_t bytes);

/* Position of row 0: from device memory when the step is a replayable graph. */
__device__ __forceinline__ int r1cu_pos(int pos0, const int32_t *pos_dev) {
    return pos_dev ? *pos_dev : pos0;
}

/* ---- weights: device layout of runtime/device.h ---- */
enum { DT_F32, DT_F16, DT_BF16, DT_Q8 };

struct dmat {
    const uint8_t *data;   /* rows of row_bytes (16-byte aligned) */
    const __half *scales;  /* q8_0: (rows, cols/32) */
    int rows, cols;
    size_t row_bytes;
    int dt;
};

static inline int dmat_from(const struct r1_mat *m, struct dmat *d) {
    d->data = (const uint8_t *)m->data;
    d->rows = m->rows, d->cols = m->cols, d->row_bytes = m->row_bytes;
    d->scales = nullptr;
    switch (m->dtype) {
    case R1_DTYPE_F32: d->dt = DT_F32; break;
    case R1_DTYPE_F16: d->dt = DT_F16; break;
    case R1_DTYPE_BF16: d->dt = DT_BF16; break;
    case R1_DTYPE_Q8_0:
        d->dt = DT_Q8;
        d->scales = (const __half *)(d->data + (size_t)m->rows * m->row_bytes);
        break;
    default: return -1;
    }
    return 0;
}

/* Elements per 16-byte load. */
template <int DT> struct wt { static constexpr int EPL = DT == DT_F32 ? 4 : DT == DT_Q8 ? 16 : 8; };

__device__ __forceinline__ float bf16lo(uint32_t u) { return __uint_as_float(u << 16); }
__device__ __forceinline__ float bf16hi(uint32_t u) { return __uint_as_float(u & 0xffff0000u); }

/* 16 bytes of weights to EPL floats (q8_0: times the block scale s). */
template <int DT>
__device__ __forceinline__ void dequant16(uint4 raw, float s, float *o) {
    const uint32_t w[4] = {raw.x, raw.y, raw.z, raw.w};
    if constexpr (DT == DT_F32) {
#pragma unroll
        for (int i = 0; i < 4; i++) o[i] = __uint_as_float(w[i]);
    } else if constexpr (DT == DT_BF16) {
#pragma unroll
        for (int i = 0; i < 4; i++) o[2 * i] = bf16lo(w[i]), o[2 * i + 1] = bf16hi(w[i]);
    } else if constexpr (DT == DT_F16) {
#pragma unroll
        for (int i = 0; i < 4; i++) {
            __half2 h = *reinterpret_cast<const __half2 *>(&w[i]);
            float2 f = __half22float2(h);
            o[2 * i] = f.x, o[2 * i + 1] = f.y;
        }
    } else {
#pragma unroll
        for (int i = 0; i < 4; i++)
#pragma unroll
            for (int b = 0; b < 4; b++) o[4 * i + b] = (float)(int8_t)(w[i] >> (8 * b)) * s;
    }
}

/* One weight (scalar path: tails, embedding). */
__device__ __forceinline__ float dmat_elem(const dmat &w, int r, int c) {
    const uint8_t *row = w.data + (size_t)r * w.row_bytes;
    switch (w.dt) {
    case DT_F32: return reinterpret_cast<const float *>(row)[c];
    case DT_F16: return __half2float(reinterpret_cast<const __half *>(row)[c]);
    case DT_BF16: return __bfloat162float(reinterpret_cast<const __nv_bfloat16 *>(row)[c]);
    default:
        return (float)(int8_t)row[c] * __half2float(w.scales[(size_t)r * (w.cols / 32) + c / 32]);
    }
}

__device__ __forceinline__ float warp_sum(float v) {
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
    return v;
}
__device__ __forceinline__ float warp_max(float v) {
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
    return v;
}

static inline unsigned cdiv(long a, long b) { return (unsigned)((a + b - 1) / b); }

/* The prefill GEMM (gemm.cu): out[t*ostride + r] = x[t,:]·w[r,:] + beta*out, T rows. */
int r1cu_gemm(const struct r1_mat *w, const float *x, int T, float *out, int ostride, float beta);
/* The small-batch matvec (matvec.cu): same, for T <= R1CU_MATVEC_MAX_T, plus a bias. */
#define R1CU_MATVEC_MAX_T 8
int r1cu_matvec(const struct r1_mat *w, const float *x, int T, float *out, int ostride,
                const float *bias, int accumulate);

#endif
