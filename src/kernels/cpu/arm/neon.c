/*
 * neon.c - the AArch64 NEON tables of the cpu backend: "neon-dot" (ARMv8.2
 * dotprod, sdot for q8_0/q4_0) and "neon" (baseline ARMv8: smull/smlal).
 * Tiles of 4 weight rows x 1 token; a batch runs token by token over each
 * group of rows while it is in cache. Compiled on every architecture; the
 * code exists only on aarch64, and dotprod is reached only after the HWCAP
 * check (target attribute, never a global -march).
 */
#include "kernels/cpu/cpu.h"
#include "kernels/cpu/kquants.h"

#if defined(__aarch64__)
#include <arm_neon.h>
#include <sys/auxv.h>

#include "util/util.h"

#ifndef HWCAP_ASIMDDP
#define HWCAP_ASIMDDP (1UL << 20)
#endif

#define DOT_TGT __attribute__((target("arch=armv8.2-a+dotprod")))

static int neon_available(void) { return 1; }
static int neon_dot_available(void) { return (getauxval(AT_HWCAP) & HWCAP_ASIMDDP) != 0; }

static inline float32x4_t ld_f32(const uint8_t *p, int k) { return vld1q_f32((const float *)p + k); }
static inline float32x4_t ld_f16(const uint8_t *p, int k) {
    return vcvt_f32_f16(vld1_f16((const float16_t *)p + k));
}
static inline float32x4_t ld_bf16(const uint8_t *p, int k) {
    return vreinterpretq_f32_u32(vshll_n_u16(vld1_u16((const uint16_t *)p + k), 16));
}
static inline float sc_f32(const uint8_t *p, int k) { return ((const float *)p)[k]; }
static inline float sc_f16(const uint8_t *p, int k) { return r1_f16_to_f32(((const uint16_t *)p)[k]); }
static inline float sc_bf16(const uint8_t *p, int k) { return r1_bf16_to_f32(((const uint16_t *)p)[k]); }

#define ROWS (void)K;                                                                              \
    const uint8_t *wr[4] = {w, w + (nr > 1 ? ws : 0), w + (nr > 2 ? 2 * ws : 0),                   \
                            w + (nr > 3 ? 3 * ws : 0)};

/* One token at a time: 4 rows, 4 lanes, two accumulators per row. */
#define FTILE(NAME, LD, SC)                                                                        \
    static void NAME(int K, int k0, int k1, const uint8_t *w, size_t ws, int nr, const uint8_t *x, size_t xs,      \
                     int nt, float *out) {                                                         \
        ROWS                                                                                       \
        for (int t = 0; t < nt; t++) {                                                             \
            const float *xt = (const float *)(x + (size_t)t * xs);                                 \
            float32x4_t a[4][2];                                                                   \
            for (int r = 0; r < 4; r++) a[r][0] = a[r][1] = vdupq_n_f32(0.0f);                     \
            int k = k0;                                                                            \
            for (; k + 8 <= k1; k += 8) {                                                           \
                float32x4_t x0 = vld1q_f32(xt + k), x1 = vld1q_f32(xt + k + 4);                    \
                for (int r = 0; r < 4; r++) {                                                      \
                    a[r][0] = vfmaq_f32(a[r][0], LD(wr[r], k), x0);                                \
                    a[r][1] = vfmaq_f32(a[r][1], LD(wr[r], k + 4), x1);                            \
                }                                                                                  \
            }                                                                                      \
            for (int r = 0; r < nr; r++) {                                                         \
                float s = vaddvq_f32(vaddq_f32(a[r][0], a[r][1]));                                 \
                for (int kk = k; kk < k1; kk++) s += SC(wr[r], kk) * xt[kk];                        \
                out[t * R1_CPU_MR + r] = s;                                                        \
            }                                                                                      \
        }                                                                                          \
    }
FTILE(tile_f32, ld_f32, sc_f32)
FTILE(tile_f16, ld_f16, sc_f16)
FTILE(tile_bf16, ld_bf16, sc_bf16)

/* Block b of a row as two int8x16 (weights 0..15, 16..31) and its scale. */
static inline void lq_q8_0(const uint8_t *p, int b, int8x16_t *q0, int8x16_t *q1, float *d) {
    const uint8_t *blk = p + (size_t)b * sizeof(struct r1_block_q8_0);
    uint16_t h;
    memcpy(&h, blk, 2);
    *d = r1_f16_to_f32(h);
    *q0 = vld1q_s8((const int8_t *)blk + 2);
    *q1 = vld1q_s8((const int8_t *)blk + 18);
}
static inline void lq_q4_0(const uint8_t *p, int b, int8x16_t *q0, int8x16_t *q1, float *d) {
    const uint8_t *blk = p + (size_t)b * sizeof(struct r1_block_q4_0);
    uint16_t h;
    memcpy(&h, blk, 2);
    *d = r1_f16_to_f32(h);
    uint8x16_t q = vld1q_u8(blk + 2);
    *q0 = vsubq_s8(vreinterpretq_s8_u8(vandq_u8(q, vdupq_n_u8(0x0f))), vdupq_n_s8(8));
    *q1 = vsubq_s8(vreinterpretq_s8_u8(vshrq_n_u8(q, 4)), vdupq_n_s8(8));
}

static inline int32x4_t idot_base(int8x16_t w0, int8x16_t w1, int8x16_t x0, int8x16_t x1) {
    int16x8_t p0 = vmlal_high_s8(vmull_s8(vget_low_s8(w0), vget_low_s8(x0)), w0, x0);
    int16x8_t p1 = vmlal_high_s8(vmull_s8(vget_low_s8(w1), vget_low_s8(x1)), w1, x1);
    return vaddq_s32(vpaddlq_s16(p0), vpaddlq_s16(p1));
}
static inline DOT_TGT int32x4_t idot_dot(int8x16_t w0, int8x16_t w1, int8x16_t x0, int8x16_t x1) {
    return vdotq_s32(vdotq_s32(vdupq_n_s32(0), w0, x0), w1, x1);
}

#define QTILE(NAME, LQ, IDOT, ATTR)                                                                \
    static ATTR void NAME(int K, int k0, int k1, const uint8_t *w, size_t ws, int nr, const uint8_t *x, size_t xs, \
                          int nt, float *out) {                                                    \
        ROWS                                                                                       \
        const size_t qoff = r1_cpu_q8_qoff(K);                                                     \
        for (int t = 0; t < nt; t++) {                                                             \
            const uint8_t *xt = x + (size_t)t * xs;                                                \
            const float *dx = (const float *)xt;                                                   \
            const int8_t *xq = (const int8_t *)(xt + qoff);                                        \
            float32x4_t a[4];                                                                      \
            for (int r = 0; r < 4; r++) a[r] = vdupq_n_f32(0.0f);                                  \
            for (int b = k0 / 32; b < k1 / 32; b++) {                                                     \
                int8x16_t x0 = vld1q_s8(xq + b * 32), x1 = vld1q_s8(xq + b * 32 + 16);             \
                for (int r = 0; r < 4; r++) {                                                      \
                    int8x16_t q0, q1;                                                              \
                    float d;                                                                       \
                    LQ(wr[r], b, &q0, &q1, &d);                                                    \
                    a[r] = vmlaq_n_f32(a[r], vcvtq_f32_s32(IDOT(q0, q1, x0, x1)), d * dx[b]);      \
                }                                                                                  \
            }                                                                                      \
            for (int r = 0; r < nr; r++) out[t * R1_CPU_MR + r] = vaddvq_f32(a[r]);                \
        }                                                                                          \
    }
#define NOATTR
QTILE(tile_q8_0, lq_q8_0, idot_base, NOATTR)
QTILE(tile_q4_0, lq_q4_0, idot_base, NOATTR)
QTILE(tile_q8_0_dot, lq_q8_0, idot_dot, DOT_TGT)
QTILE(tile_q4_0_dot, lq_q4_0, idot_dot, DOT_TGT)

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
    for (; i + 4 <= n; i += 4) s = vfmaq_f32(s, vld1q_f32(a + i), ld_f16((const uint8_t *)b, i));
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
    for (; i + 4 <= n; i += 4)
        vst1q_f32(y + i, vfmaq_n_f32(vld1q_f32(y + i), ld_f16((const uint8_t *)x, i), a));
    for (; i < n; i++) y[i] += a * r1_f16_to_f32(x[i]);
}
static void f32_to_f16(const float *x, uint16_t *y, int n) {
    int i = 0;
    for (; i + 4 <= n; i += 4) vst1_f16((float16_t *)y + i, vcvt_f16_f32(vld1q_f32(x + i)));
    for (; i < n; i++) y[i] = r1_f32_to_f16(x[i]);
}

#define NEON_TABLE(NAME, AVAIL, Q8, Q4)                                                            \
    {                                                                                              \
        .name = NAME, .available = AVAIL, .mr = 4, .nt = 1,                                        \
        .mm =                                                                                      \
            {                                                                                      \
                [R1_DTYPE_F32] = {R1_CPU_ACT_F32, tile_f32},                                       \
                [R1_DTYPE_F16] = {R1_CPU_ACT_F32, tile_f16},                                       \
                [R1_DTYPE_BF16] = {R1_CPU_ACT_F32, tile_bf16},                                     \
                [R1_DTYPE_Q8_0] = {R1_CPU_ACT_Q8, Q8},                                             \
                [R1_DTYPE_Q4_0] = {R1_CPU_ACT_Q8, Q4},                                             \
                [R1_DTYPE_Q4_1] = {R1_CPU_ACT_Q8, r1_kq_tile_q4_1_c},                              \
                [R1_DTYPE_Q5_0] = {R1_CPU_ACT_Q8, r1_kq_tile_q5_0_c},                              \
                [R1_DTYPE_Q5_1] = {R1_CPU_ACT_Q8, r1_kq_tile_q5_1_c},                              \
                [R1_DTYPE_Q4_K] = {R1_CPU_ACT_Q8, r1_kq_tile_q4_K_c},                              \
                [R1_DTYPE_Q5_K] = {R1_CPU_ACT_Q8, r1_kq_tile_q5_K_c},                              \
                [R1_DTYPE_Q6_K] = {R1_CPU_ACT_Q8, r1_kq_tile_q6_K_c},                              \
            },                                                                                     \
        .quant_q8 = r1_cpu_quant_q8_c, .dot_f32 = dot_f32, .dot_f16 = dot_f16,                     \
        .axpy_f32 = axpy_f32, .axpy_f16 = axpy_f16, .f32_to_f16 = f32_to_f16,                      \
    }

const struct r1_cpu_isa r1_cpu_neon = NEON_TABLE("neon", neon_available, tile_q8_0, tile_q4_0);
const struct r1_cpu_isa r1_cpu_neon_dot =
    NEON_TABLE("neon-dot", neon_dot_available, tile_q8_0_dot, tile_q4_0_dot);

#endif /* __aarch64__ */
