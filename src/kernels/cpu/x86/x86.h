/*
 * x86.h - helpers shared by the x86 ISA tables (avx2.c, avx512.c): the CPUID
 * check for F16C and the AVX2 vector helpers the AVX-512 table reuses.
 * x86-64 only; callers must have checked the CPU first.
 */
#ifndef R1_CPU_X86_H
#define R1_CPU_X86_H

#include <stddef.h>
#include <stdint.h>

int r1_x86_has_f16c(void);
/* How the avx2-vnni table multiplies bytes (set by its availability check):
 * 1 AVX-VNNI, 2 AVX512-VNNI on ymm (AVX512VL), 0 neither (avx2_dot.h) */
extern int r1_x86_avx2_vnni;
/* AVX2 tiles of the 32-weight block formats (q32_avx2.c; cpu.h r1_cpu_tile_fn):
 * q8_0 on q8 activations, q4_0x8 on q8x8, the others on q8s. The _avx2vnni
 * forms need r1_x86_avx2_vnni != 0. */
#define R1_X86_Q32_AVX2(NAME)                                                                      \
    void NAME##_avx2(int K, int k0, int k1, const uint8_t *w, size_t ws, int nr, const uint8_t *x,  \
                     size_t xs, int nt, float *out);                                               \
    void NAME##_avx2vnni(int K, int k0, int k1, const uint8_t *w, size_t ws, int nr,               \
                         const uint8_t *x, size_t xs, int nt, float *out);
R1_X86_Q32_AVX2(r1_x86_tile_q8_0)
R1_X86_Q32_AVX2(r1_x86_tile_q4_0)
R1_X86_Q32_AVX2(r1_x86_tile_q4_1)
R1_X86_Q32_AVX2(r1_x86_tile_q5_0)
R1_X86_Q32_AVX2(r1_x86_tile_q5_1)
R1_X86_Q32_AVX2(r1_x86_tile_q4_0x8)
void r1_x86_quant_q8x8_avx2(const float *x, uint8_t *dst, int K);
/* q8_0 weights against q8w activations (batches, plain AVX2) */
void r1_x86_tile_q8_0_q8w_avx2(int K, int k0, int k1, const uint8_t *w, size_t ws, int nr,
                               const uint8_t *x, size_t xs, int nt, float *out);
void r1_x86_quant_q8_avx2(const float *x, uint8_t *dst, int K);
float r1_x86_dot_f32_avx2(const float *a, const float *b, int n);
float r1_x86_dot_f16_avx2(const float *a, const uint16_t *b, int n);
void r1_x86_axpy_f32_avx2(float a, const float *x, float *y, int n);
void r1_x86_axpy_f16_avx2(float a, const uint16_t *x, float *y, int n);
void r1_x86_f32_to_f16_avx2(const float *x, uint16_t *y, int n);

/* AVX2 helpers of the blocked attention (attn_avx2.c); see cpu.h. */
void r1_x86_f16_to_f32_avx2(const uint16_t *x, float *y, int n);
void r1_x86_attn_qk_avx2(const float *q, int M, const float *k, int P, int hd, float *s, int ss);
void r1_x86_attn_pv_avx2(const float *s, int ss, int M, const float *v, int P, int hd, float *o);
void r1_x86_attn_qk_f16_avx2(const float *q, int M, const uint16_t *k, int P, int hd, float *s, int ss);
void r1_x86_attn_pv_f16_avx2(const float *s, int ss, int M, const uint16_t *v, int P, int hd, float *o);
float r1_x86_attn_softmax_avx2(float *s, int n, float scale, float *m);
void r1_x86_silu_mul_avx2(const float *g, const float *u, float *o, int n);

/* AVX-512 helpers of the blocked attention (attn_avx512.c); see cpu.h. */
void r1_x86_f16_to_f32_avx512(const uint16_t *x, float *y, int n);
void r1_x86_attn_qk_avx512(const float *q, int M, const float *k, int P, int hd, float *s, int ss);
void r1_x86_attn_pv_avx512(const float *s, int ss, int M, const float *v, int P, int hd, float *o);
float r1_x86_attn_softmax_avx512(float *s, int n, float scale, float *m);

/* AMX prefill blocks (amx_avx512.c), r1_cpu_block_fn in cpu.h (plus the
 * plane stride of the split activations). r1_x86_amx_probe asks Linux for the
 * tile state and returns 1 if the blocks may run (R1_CPU_NO_AMX=1: 0). */
int r1_x86_amx_probe(void);
int r1_x86_block_q4_0x8_amx(int K, const uint8_t *w, size_t ws, int mc, const uint8_t *xv,
                            size_t xplane, int t0, int tn, float *C, int ldc);
/* q4_0x8 weights (q4x8_avx512.c): the VNNI tile on q8x8 activations, its
 * quantizer, and the plain tile on bf16 activations */
void r1_x86_tile_q4_0x8_avx512(int K, int k0, int k1, const uint8_t *w, size_t ws, int nr,
                               const uint8_t *x, size_t xs, int nt, float *out);
void r1_x86_tile_q4_0x8_bf16(int K, int k0, int k1, const uint8_t *w, size_t ws, int nr,
                             const uint8_t *x, size_t xs, int nt, float *out);
void r1_x86_quant_q8x8_avx512(const float *x, uint8_t *dst, int K);
void r1_x86_silu_mul_avx512(const float *g, const float *u, float *o, int n);
void r1_x86_attn_qk_f16_avx512(const float *q, int M, const uint16_t *k, int P, int hd, float *s,
                               int ss);
void r1_x86_attn_pv_f16_avx512(const float *s, int ss, int M, const uint16_t *v, int P, int hd,
                               float *o);
int r1_x86_block_bf16_amx(int K, const uint8_t *w, size_t ws, int mc, const uint8_t *xv, size_t xplane,
                          int t0, int tn, float *C, int ldc);
int r1_x86_block_f16_amx(int K, const uint8_t *w, size_t ws, int mc, const uint8_t *xv, size_t xplane,
                         int t0, int tn, float *C, int ldc);
int r1_x86_block_q8_0_amx(int K, const uint8_t *w, size_t ws, int mc, const uint8_t *xv, size_t xplane,
                          int t0, int tn, float *C, int ldc);
int r1_x86_block_q4_0_amx(int K, const uint8_t *w, size_t ws, int mc, const uint8_t *xv, size_t xplane,
                          int t0, int tn, float *C, int ldc);


/* The end of an AVX-512 tile: the 4 x NT zmm accumulators acc[r][t] summed
 * across lanes into out[t * R1_CPU_MR + r] for the nr rows and nt tokens
 * asked for (constant indices only, so acc stays in registers). */
#define R1_X86_TILE_OUT(NT)                                                                        \
    do {                                                                                           \
        float res_[4][NT];                                                                         \
        _Pragma("GCC unroll 4") for (int r_ = 0; r_ < 4; r_++)                                     \
            _Pragma("GCC unroll 4") for (int t_ = 0; t_ < NT; t_++)                                \
                res_[r_][t_] = _mm512_reduce_add_ps(acc[r_][t_]);                                  \
        for (int t_ = 0; t_ < nt; t_++)                                                            \
            for (int r_ = 0; r_ < nr; r_++) out[t_ * R1_CPU_MR + r_] = res_[r_][t_];               \
    } while (0)

#endif
