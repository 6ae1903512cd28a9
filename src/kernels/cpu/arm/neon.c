/*
 * neon.c - the AArch64 NEON tables of the cpu backend: "neon-dot" (ARMv8.2
 * dotprod: sdot) and "neon" (baseline ARMv8: smull/smlal). Tiles of 4
 * weight rows x up to 4 tokens (decode with two-part activations is 2
 * tokens, a batch 4 at a time), each weight loaded once per tile and used
 * for every token. Here: the float tiles, the q8 quantizer, the vector
 * helpers and the two tables; the q8-activation tiles of every quantized
 * format are in arm/tiles_neon.c and arm/tiles_dot.c (arm/arm.h).
 * Compiled on every architecture; the code exists only on aarch64, and
 * dotprod is reached only after the HWCAP check (target attribute, never a
 * global -march).
 */
#include "kernels/cpu/arm/arm.h"
#include "kernels/cpu/cpu.h"

#if defined(__aarch64__)
#include <arm_neon.h>
#include <sys/auxv.h>

#include "util/util.h"

#ifndef HWCAP_ASIMDDP
#define HWCAP_ASIMDDP (1UL << 20)
#endif

static int neon_available(void) { return 1; }
static int neon_dot_available(void) { return (getauxval(AT_HWCAP) & HWCAP_ASIMDDP) != 0; }

#define INL static inline __attribute__((always_inline))

/* ---- float weights: 4 rows x NT tokens of f32 activations, 8 columns a
 * step (per row 1-2 ldr + 0-2 fcvtl/shll, then 2 fmla per token) ---- */
INL void ld8_f32(const uint8_t *p, int k, float32x4_t *lo, float32x4_t *hi) {
    *lo = vld1q_f32((const float *)p + k);
    *hi = vld1q_f32((const float *)p + k + 4);
}
INL void ld8_f16(const uint8_t *p, int k, float32x4_t *lo, float32x4_t *hi) {
    const float16x8_t h = vld1q_f16((const float16_t *)p + k);
    *lo = vcvt_f32_f16(vget_low_f16(h));
    *hi = vcvt_high_f32_f16(h);
}
INL void ld8_bf16(const uint8_t *p, int k, float32x4_t *lo, float32x4_t *hi) {
    const uint16x8_t h = vld1q_u16((const uint16_t *)p + k);
    *lo = vreinterpretq_f32_u32(vshll_n_u16(vget_low_u16(h), 16));
    *hi = vreinterpretq_f32_u32(vshll_high_n_u16(h, 16));
}
INL float sc_f32(const uint8_t *p, int k) { return ((const float *)p)[k]; }
INL float sc_f16(const uint8_t *p, int k) { return r1_f16_to_f32(((const uint16_t *)p)[k]); }
INL float sc_bf16(const uint8_t *p, int k) { return r1_bf16_to_f32(((const uint16_t *)p)[k]); }

enum { FT_F32, FT_F16, FT_BF16 };

/* Rows past nr and tokens past nt repeat the first (computed, not stored).
 * One token keeps two accumulators per row (8 independent fmla chains). */
INL void ftile(const int DT, const int NT, int K, int k0, int k1, const uint8_t *w, size_t ws, int nr, const uint8_t *x,
               size_t xs, int nt, float *out) {
    (void)K;
    const uint8_t *wr[4] = {w, w + (nr > 1 ? ws : 0), w + (nr > 2 ? 2 * ws : 0), w + (nr > 3 ? 3 * ws : 0)};
    const float *xt[4];
    for (int t = 0; t < NT; t++) xt[t] = (const float *)(x + (size_t)(t < nt ? t : 0) * xs);
    float32x4_t acc[4][4];
    _Pragma("GCC unroll 4") for (int r = 0; r < 4; r++) {
        _Pragma("GCC unroll 4") for (int t = 0; t < NT; t++) acc[r][t] = vdupq_n_f32(0.0f);
    }
    int k = k0;
    for (; k + 8 <= k1; k += 8) {
        float32x4_t xl[4], xh[4];
        _Pragma("GCC unroll 4") for (int t = 0; t < NT; t++) {
            xl[t] = vld1q_f32(xt[t] + k);
            xh[t] = vld1q_f32(xt[t] + k + 4);
        }
        _Pragma("GCC unroll 4") for (int r = 0; r < 4; r++) {
            float32x4_t lo, hi;
            if (DT == FT_F32) ld8_f32(wr[r], k, &lo, &hi);
            else if (DT == FT_F16) ld8_f16(wr[r], k, &lo, &hi);
            else ld8_bf16(wr[r], k, &lo, &hi);
            /* one chain per token, the same for every NT: a token's sum
             * must not depend on how many tokens share the tile (a batch of
             * up to 16 rows is bit for bit that many decode steps) */
            _Pragma("GCC unroll 4") for (int t = 0; t < NT; t++) {
                acc[r][t] = vfmaq_f32(vfmaq_f32(acc[r][t], lo, xl[t]), hi, xh[t]);
            }
        }
    }
    float res[4][4];
    _Pragma("GCC unroll 4") for (int r = 0; r < 4; r++) _Pragma("GCC unroll 4") for (int t = 0; t < NT; t++) {
        res[r][t] = vaddvq_f32(acc[r][t]);
    }
    for (int t = 0; t < nt; t++)
        for (int r = 0; r < nr; r++) {
            float s = res[r][t];
            for (int kk = k; kk < k1; kk++)
                s += (DT == FT_F32   ? sc_f32(wr[r], kk)
                      : DT == FT_F16 ? sc_f16(wr[r], kk)
                                     : sc_bf16(wr[r], kk)) *
                     xt[t][kk];
            out[t * R1_CPU_MR + r] = s;
        }
}

#define FTILE(NAME, DT)                                                                                                \
    static void NAME##_nt1(R1_KQ_TILE_ARGS) { ftile(DT, 1, K, k0, k1, w, ws, nr, x, xs, nt, out); }                    \
    static void NAME##_nt2(R1_KQ_TILE_ARGS) { ftile(DT, 2, K, k0, k1, w, ws, nr, x, xs, nt, out); }                    \
    static void NAME##_nt4(R1_KQ_TILE_ARGS) { ftile(DT, 4, K, k0, k1, w, ws, nr, x, xs, nt, out); }                    \
    static void NAME(R1_KQ_TILE_ARGS) {                                                                                \
        r1_cpu_tile_nt(NAME##_nt1, NAME##_nt2, NAME##_nt4, K, k0, k1, w, ws, nr, x, xs, nt, out);                      \
    }
FTILE(tile_f32, FT_F32)
FTILE(tile_f16, FT_F16)
FTILE(tile_bf16, FT_BF16)

/* q8 activations (cpu.h), the same bits as r1_cpu_quant_q8_c: fmaxnm is
 * fmaxf, fcvtns rounds to nearest even as lrintf does by default. */
static void quant_q8(const float *x, uint8_t *dst, int K) {
    float *d = (float *)dst;
    int8_t *qs = (int8_t *)(dst + r1_cpu_q8_qoff(K));
    for (int b = 0; b < K / 32; b++) {
        float32x4_t v[8];
        float32x4_t m = vdupq_n_f32(0.0f);
        for (int i = 0; i < 8; i++) {
            v[i] = vld1q_f32(x + 32 * b + 4 * i);
            m = vmaxnmq_f32(m, vabsq_f32(v[i]));
        }
        const float amax = vmaxnmvq_f32(m), db = amax / 127.0f, id = db ? 1.0f / db : 0.0f;
        d[b] = db;
        int16x8_t h[4];
        for (int i = 0; i < 4; i++)
            h[i] = vcombine_s16(vqmovn_s32(vcvtnq_s32_f32(vmulq_n_f32(v[2 * i], id))),
                                vqmovn_s32(vcvtnq_s32_f32(vmulq_n_f32(v[2 * i + 1], id))));
        vst1q_s8(qs + 32 * b, vcombine_s8(vqmovn_s16(h[0]), vqmovn_s16(h[1])));
        vst1q_s8(qs + 32 * b + 16, vcombine_s8(vqmovn_s16(h[2]), vqmovn_s16(h[3])));
    }
}

/* 4 f16 values at b + i as f32 */
INL float32x4_t ld4_f16(const uint16_t *b, int i) { return vcvt_f32_f16(vld1_f16((const float16_t *)b + i)); }

/* q8x8 activations (cpu.h): the q8 form of each 256 columns, rearranged */
static void quant_q8x8(const float *x, uint8_t *dst, int K) {
    _Alignas(64) uint8_t q8[64 + 256]; /* d[8], then the quants at r1_cpu_q8_qoff(256) = 64 */
    for (int s = 0; s < K / 256; s++) {
        quant_q8(x + (size_t)s * 256, q8, 256);
        r1_cpu_q8_to_q8x8(q8, dst + (size_t)s * R1_CPU_Q8X8_BYTES, 256);
    }
}

static float dot_f32(const float *a, const float *b, int n) {
    float32x4_t s = vdupq_n_f32(0.0f);
    int i = 0;
    for (; i + 4 <= n; i += 4) s = vfmaq_f32(s, vld1q_f32(a + i), vld1q_f32(b + i));
    float r = vaddvq_f32(s);
    for (; i < n; i++) r += a[i] * b[i];
    return r;
}
static float dot_f16(const float *a, const uint16_t *b, int n) {
    float32x4_t s = vdupq_n_f32(0.0f);
    int i = 0;
    for (; i + 4 <= n; i += 4) s = vfmaq_f32(s, vld1q_f32(a + i), ld4_f16(b, i));
    float r = vaddvq_f32(s);
    for (; i < n; i++) r += a[i] * r1_f16_to_f32(b[i]);
    return r;
}
static void axpy_f32(float a, const float *x, float *y, int n) {
    int i = 0;
    for (; i + 4 <= n; i += 4) vst1q_f32(y + i, vfmaq_n_f32(vld1q_f32(y + i), vld1q_f32(x + i), a));
    for (; i < n; i++) y[i] += a * x[i];
}
static void axpy_f16(float a, const uint16_t *x, float *y, int n) {
    int i = 0;
    for (; i + 4 <= n; i += 4) vst1q_f32(y + i, vfmaq_n_f32(vld1q_f32(y + i), ld4_f16(x, i), a));
    for (; i < n; i++) y[i] += a * r1_f16_to_f32(x[i]);
}
static void f32_to_f16(const float *x, uint16_t *y, int n) {
    int i = 0;
    for (; i + 4 <= n; i += 4) vst1_f16((float16_t *)y + i, vcvt_f16_f32(vld1q_f32(x + i)));
    for (; i < n; i++) y[i] = r1_f32_to_f16(x[i]);
}

/* The fields the two tables share: everything but the quantized tiles */
#define NEON_COMMON                                                                                                    \
    .quant_q8 = quant_q8, .quant_q8x8 = quant_q8x8, .dot_f32 = dot_f32, .dot_f16 = dot_f16, .axpy_f32 = axpy_f32,      \
    .axpy_f16 = axpy_f16, .f32_to_f16 = f32_to_f16

const struct r1_cpu_isa r1_cpu_neon = {
    .name = "neon",
    .available = neon_available,
    .mr = 4,
    .nt = 4,
    .mm =
        {
            [R1_DTYPE_F32] = {.act = R1_CPU_ACT_F32, .tile = tile_f32},
            [R1_DTYPE_F16] = {.act = R1_CPU_ACT_F32, .tile = tile_f16},
            [R1_DTYPE_BF16] = {.act = R1_CPU_ACT_F32, .tile = tile_bf16},
            [R1_DTYPE_Q8_0] = {.act = R1_CPU_ACT_Q8, .tile = r1_arm_tile_q8_0_neon},
            [R1_DTYPE_Q4_0] = {.act = R1_CPU_ACT_Q8, .tile = r1_arm_tile_q4_0_neon},
            [R1_DTYPE_Q4_1] = {.act = R1_CPU_ACT_Q8, .tile = r1_arm_tile_q4_1_neon},
            [R1_DTYPE_Q5_0] = {.act = R1_CPU_ACT_Q8, .tile = r1_arm_tile_q5_0_neon},
            [R1_DTYPE_Q5_1] = {.act = R1_CPU_ACT_Q8, .tile = r1_arm_tile_q5_1_neon},
            [R1_DTYPE_Q4_K] = {.act = R1_CPU_ACT_Q8, .tile = r1_arm_tile_q4_K_neon},
            [R1_DTYPE_Q5_K] = {.act = R1_CPU_ACT_Q8, .tile = r1_arm_tile_q5_K_neon},
            [R1_DTYPE_Q6_K] = {.act = R1_CPU_ACT_Q8, .tile = r1_arm_tile_q6_K_neon},
            [R1_DTYPE_Q4_0X8] = {.act = R1_CPU_ACT_Q8X8, .tile = r1_arm_tile_q4_0x8_neon},
        },
    NEON_COMMON,
};

const struct r1_cpu_isa r1_cpu_neon_dot = {
    .name = "neon-dot",
    .available = neon_dot_available,
    .mr = 4,
    .nt = 4,
    .mm =
        {
            [R1_DTYPE_F32] = {.act = R1_CPU_ACT_F32, .tile = tile_f32},
            [R1_DTYPE_F16] = {.act = R1_CPU_ACT_F32, .tile = tile_f16},
            [R1_DTYPE_BF16] = {.act = R1_CPU_ACT_F32, .tile = tile_bf16},
            [R1_DTYPE_Q8_0] = {.act = R1_CPU_ACT_Q8, .tile = r1_arm_tile_q8_0_dot},
            [R1_DTYPE_Q4_0] = {.act = R1_CPU_ACT_Q8, .tile = r1_arm_tile_q4_0_dot},
            [R1_DTYPE_Q4_1] = {.act = R1_CPU_ACT_Q8, .tile = r1_arm_tile_q4_1_dot},
            [R1_DTYPE_Q5_0] = {.act = R1_CPU_ACT_Q8, .tile = r1_arm_tile_q5_0_dot},
            [R1_DTYPE_Q5_1] = {.act = R1_CPU_ACT_Q8, .tile = r1_arm_tile_q5_1_dot},
            [R1_DTYPE_Q4_K] = {.act = R1_CPU_ACT_Q8, .tile = r1_arm_tile_q4_K_dot},
            [R1_DTYPE_Q5_K] = {.act = R1_CPU_ACT_Q8, .tile = r1_arm_tile_q5_K_dot},
            [R1_DTYPE_Q6_K] = {.act = R1_CPU_ACT_Q8, .tile = r1_arm_tile_q6_K_dot},
            [R1_DTYPE_Q4_0X8] = {.act = R1_CPU_ACT_Q8X8, .tile = r1_arm_tile_q4_0x8_dot},
        },
    NEON_COMMON,
};

#endif /* __aarch64__ */
