/*
 * cuda_kernels.h - the CUDA backend's kernel entry points (one per .cu file),
 * with the r1_kernel_fn signature; backend.cu puts them in r1_backend_cuda.
 * (ith, nth) are always (0, 1): each call queues its launches on the stream.
 */
#ifndef R1_CUDA_KERNELS_H
#define R1_CUDA_KERNELS_H

#include "kernels/kernels.h"

#ifdef __cplusplus
extern "C" {
#endif

void r1cu_embedding(const struct r1_op *op, int ith, int nth);
void r1cu_rms_norm(const struct r1_op *op, int ith, int nth);
void r1cu_qkv_bias(const struct r1_op *op, int ith, int nth);
void r1cu_rope_qk(const struct r1_op *op, int ith, int nth);
void r1cu_kv_append(const struct r1_op *op, int ith, int nth);
void r1cu_attention_gqa(const struct r1_op *op, int ith, int nth);
void r1cu_matvec_add(const struct r1_op *op, int ith, int nth);
void r1cu_gate_up_silu(const struct r1_op *op, int ith, int nth);
void r1cu_lm_head(const struct r1_op *op, int ith, int nth);
void r1cu_argmax(const struct r1_op *op, int ith, int nth);

/* Split-K attention plan shared by attention_gqa.cu and the scratch size. */
void r1cu_attention_plan(int T, int n_ctx, int *n_split, int *chunk);

#ifdef __cplusplus
}
#endif
#endif
