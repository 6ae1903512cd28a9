/*
 * quants.h - reference conversions of the GGUF block formats Q4_1, Q5_0,
 * Q5_1, Q4_K, Q5_K, Q6_K (quants.c). Reached through r1_dtype_traits; listed
 * here for the table in dtype.c and for tests. n is a multiple of the block.
 */
#ifndef R1_QUANTS_H
#define R1_QUANTS_H

#include "kernels/dtype.h"

void r1_q4_1_to_f32(const void *src, float *dst, int64_t n);
void r1_q5_0_to_f32(const void *src, float *dst, int64_t n);
void r1_q5_1_to_f32(const void *src, float *dst, int64_t n);
void r1_q4_K_to_f32(const void *src, float *dst, int64_t n);
void r1_q5_K_to_f32(const void *src, float *dst, int64_t n);
void r1_q6_K_to_f32(const void *src, float *dst, int64_t n);

/* Min/max quantizers (no search): good enough for convert, not llama.cpp's. */
void r1_q4_K_from_f32(const float *src, void *dst, int64_t n);
void r1_q6_K_from_f32(const float *src, void *dst, int64_t n);
void r1_q5_K_from_f32(const float *src, void *dst, int64_t n);
void r1_q4_1_from_f32(const float *src, void *dst, int64_t n);
void r1_q5_0_from_f32(const float *src, void *dst, int64_t n);
void r1_q5_1_from_f32(const float *src, void *dst, int64_t n);

/* The K-quants regrouped for the cpu kernels (regroup_k.c, dtype.h). */
int r1_kx8_regroup(enum r1_dtype from, enum r1_dtype to, const void *src, void *dst, int64_t n);
void r1_q4_Kx8_to_f32(const void *src, float *dst, int64_t n);
void r1_q5_Kx8_to_f32(const void *src, float *dst, int64_t n);
void r1_q6_Kx8_to_f32(const void *src, float *dst, int64_t n);
void r1_q4_Kx8_from_f32(const float *src, void *dst, int64_t n);
void r1_q5_Kx8_from_f32(const float *src, void *dst, int64_t n);
void r1_q6_Kx8_from_f32(const float *src, void *dst, int64_t n);

#endif
