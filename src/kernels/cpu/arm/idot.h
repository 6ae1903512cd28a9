/*
 * idot.h - template (no include guard): the integer dot products of one
 * step of the AArch64 q8-activation tiles, included by arm/tiles_neon.c and
 * arm/tiles_dot.c after they define
 *   ARM_DOT   1: sdot (ARMv8.2 dotprod); 0: smull/smlal (ARMv8.0)
 *   ARM_TGT   the target attribute of every function (empty for ARMv8.0)
 * Nothing here may be used outside those two files.
 *
 * A step's weights W and activations X are int8x16 registers of 16 columns
 * each. Each function returns an int32x4 whose lane i is one group's sum of
 * w * x (a group is what one weight scale and one activation scale cover):
 *   dot_g32   4 groups of 32 columns (W[2i], W[2i+1] x X[2i], X[2i+1])
 *   dot_g16   4 groups of 16 columns (W[i] x X[i]), |w| <= 32
 *   xsum_g32  the sums of X over 4 groups of 32 columns
 *   dot_x8    nx + the lane sums of Wl[i] x Xl[i] and Wh[i] x Xh[i], i < 4,
 *             where 32-bit lane k of every register belongs to group k
 *             (q4_0x8 against q8x8, |w| <= 15)
 * Without dotprod the products are summed in int16 lanes as long as they
 * cannot overflow (|x| <= 127 from the q8 quantizer): the weight's class says
 * how far (WCLS_NARROW |w| <= 16: 16 products; WCLS_WIDE |w| <= 32: 8;
 * WCLS_Q8 any int8: 2), then widened pairwise.
 *
 * Instructions per call (dot / ARMv8.0): dot_g32 4 movi + 8 sdot + 3 addp /
 * narrow 16 smull/smlal + 3 addp + 1 saddlp, wide 16 + 4 + 1, q8 16 + 8 + 3;
 * dot_g16 4 + 4 + 3 / 8 + 3 + 1; xsum_g32 4 + 8 + 3 / 8 + 3 + 1; dot_x8
 * 8 sdot (+ 1 mov) / 16 smull/smlal + 3 + 1 add.
 */
#include <arm_neon.h>

#define ARM_INL static inline __attribute__((always_inline)) ARM_TGT

#define ARM_BARRIER() __asm__ volatile("" ::: "memory")

enum { WCLS_NARROW, WCLS_WIDE, WCLS_Q8 };

#if ARM_DOT
#if defined(__clang__) && !defined(__ARM_FEATURE_DOTPROD)
/* clang's arm_neon.h (before 16) declares vdotq_s32 only for a global
 * +dotprod; the target attribute still lets the assembler take sdot */
ARM_INL int32x4_t sdot(int32x4_t acc, int8x16_t w, int8x16_t x) {
    __asm__("sdot %0.4s, %1.16b, %2.16b" : "+w"(acc) : "w"(w), "w"(x));
    return acc;
}
#define vdotq_s32 sdot
#endif

ARM_INL int32x4_t dot_pair(int8x16_t w0, int8x16_t x0, int8x16_t w1, int8x16_t x1) {
    return vdotq_s32(vdotq_s32(vdupq_n_s32(0), w0, x0), w1, x1);
}

ARM_INL int32x4_t dot_g32(const int cls, const int8x16_t *W, const int8x16_t *X) {
    (void)cls;
    int32x4_t b0 = dot_pair(W[0], X[0], W[1], X[1]), b1 = dot_pair(W[2], X[2], W[3], X[3]);
    int32x4_t b2 = dot_pair(W[4], X[4], W[5], X[5]), b3 = dot_pair(W[6], X[6], W[7], X[7]);
    return vpaddq_s32(vpaddq_s32(b0, b1), vpaddq_s32(b2, b3));
}

ARM_INL int32x4_t dot_g16(const int8x16_t *W, const int8x16_t *X) {
    const int32x4_t z = vdupq_n_s32(0);
    int32x4_t g0 = vdotq_s32(z, W[0], X[0]), g1 = vdotq_s32(z, W[1], X[1]);
    int32x4_t g2 = vdotq_s32(z, W[2], X[2]), g3 = vdotq_s32(z, W[3], X[3]);
    return vpaddq_s32(vpaddq_s32(g0, g1), vpaddq_s32(g2, g3));
}

ARM_INL int32x4_t dot_x8(int32x4_t nx, const int8x16_t *Wl, const int8x16_t *Wh, const int8x16_t *Xl,
                         const int8x16_t *Xh) {
    _Pragma("GCC unroll 4") for (int i = 0; i < 4; i++) {
        nx = vdotq_s32(nx, Wl[i], Xl[i]);
        nx = vdotq_s32(nx, Wh[i], Xh[i]);
    }
    return nx;
}

ARM_INL int32x4_t xsum_g32(const int8x16_t *X) {
    const int8x16_t one = vdupq_n_s8(1);
    int32x4_t b0 = dot_pair(one, X[0], one, X[1]), b1 = dot_pair(one, X[2], one, X[3]);
    int32x4_t b2 = dot_pair(one, X[4], one, X[5]), b3 = dot_pair(one, X[6], one, X[7]);
    return vpaddq_s32(vpaddq_s32(b0, b1), vpaddq_s32(b2, b3));
}
#else
/* 2 products per int16 lane */
ARM_INL int16x8_t mul16(int8x16_t w, int8x16_t x) {
    return vmlal_high_s8(vmull_s8(vget_low_s8(w), vget_low_s8(x)), w, x);
}
/* 4 products per int16 lane (|w| <= 64) */
ARM_INL int16x8_t mul32(int8x16_t w0, int8x16_t x0, int8x16_t w1, int8x16_t x1) {
    int16x8_t p = vmlal_high_s8(vmull_s8(vget_low_s8(w0), vget_low_s8(x0)), w0, x0);
    p = vmlal_s8(p, vget_low_s8(w1), vget_low_s8(x1));
    return vmlal_high_s8(p, w1, x1);
}

ARM_INL int32x4_t dot_g32(const int cls, const int8x16_t *W, const int8x16_t *X) {
    if (cls == WCLS_Q8) {
        int32x4_t b[4];
        _Pragma("GCC unroll 4") for (int i = 0; i < 4; i++) {
            const int16x8_t p0 = mul16(W[2 * i], X[2 * i]), p1 = mul16(W[2 * i + 1], X[2 * i + 1]);
            b[i] = vpadalq_s16(vpaddlq_s16(p0), p1);
        }
        return vpaddq_s32(vpaddq_s32(b[0], b[1]), vpaddq_s32(b[2], b[3]));
    }
    int16x8_t p0 = mul32(W[0], X[0], W[1], X[1]), p1 = mul32(W[2], X[2], W[3], X[3]);
    int16x8_t p2 = mul32(W[4], X[4], W[5], X[5]), p3 = mul32(W[6], X[6], W[7], X[7]);
    int16x8_t p01 = vpaddq_s16(p0, p1), p23 = vpaddq_s16(p2, p3); /* 8 products a lane */
    if (cls == WCLS_NARROW) return vpaddlq_s16(vpaddq_s16(p01, p23));
    return vpaddq_s32(vpaddlq_s16(p01), vpaddlq_s16(p23));
}

ARM_INL int32x4_t dot_g16(const int8x16_t *W, const int8x16_t *X) {
    int16x8_t p01 = vpaddq_s16(mul16(W[0], X[0]), mul16(W[1], X[1]));
    int16x8_t p23 = vpaddq_s16(mul16(W[2], X[2]), mul16(W[3], X[3]));
    return vpaddlq_s16(vpaddq_s16(p01, p23)); /* 8 products a lane before widening */
}

/* bytes 0..7 are groups 0, 1 and bytes 8..15 groups 2, 3: 8 products per
 * int16 lane of each half */
ARM_INL int32x4_t dot_x8(int32x4_t nx, const int8x16_t *Wl, const int8x16_t *Wh, const int8x16_t *Xl,
                         const int8x16_t *Xh) {
    int16x8_t lo = vmull_s8(vget_low_s8(Wl[0]), vget_low_s8(Xl[0])), hi = vmull_high_s8(Wl[0], Xl[0]);
    lo = vmlal_s8(lo, vget_low_s8(Wh[0]), vget_low_s8(Xh[0]));
    hi = vmlal_high_s8(hi, Wh[0], Xh[0]);
    _Pragma("GCC unroll 4") for (int i = 1; i < 4; i++) {
        lo = vmlal_s8(lo, vget_low_s8(Wl[i]), vget_low_s8(Xl[i]));
        hi = vmlal_high_s8(hi, Wl[i], Xl[i]);
        lo = vmlal_s8(lo, vget_low_s8(Wh[i]), vget_low_s8(Xh[i]));
        hi = vmlal_high_s8(hi, Wh[i], Xh[i]);
    }
    return vaddq_s32(nx, vpaddq_s32(vpaddlq_s16(lo), vpaddlq_s16(hi)));
}

ARM_INL int32x4_t xsum_g32(const int8x16_t *X) {
    int16x8_t s[4];
    _Pragma("GCC unroll 4") for (int i = 0; i < 4; i++) { s[i] = vpadalq_s8(vpaddlq_s8(X[2 * i]), X[2 * i + 1]); }
    return vpaddlq_s16(vpaddq_s16(vpaddq_s16(s[0], s[1]), vpaddq_s16(s[2], s[3])));
}
#endif
