/*
 * quants.c - reference conversions of the GGUF block formats beyond q8_0 and
 * q4_0: Q4_1, Q5_0, Q5_1 (32-weight blocks) and the K-quants Q4_K, Q5_K,
 * Q6_K (256-weight super-blocks), plus simple quantizers for all of them
 * (used by `r1infer convert` and the loader's --dtype). Plain C, obviously correct, no SIMD: these
 * are the oracle the fast dot products are tested against, and they are
 * themselves tested against gguf-py's numpy dequantization
 * (tests/fixtures/quants/). Byte layouts are in the comments of each type.
 */
#include <math.h>
#include <string.h>

#include "kernels/quants.h"
#include "util/util.h"

static float f16_at(const uint8_t *p) { return r1_f16_to_f32((uint16_t)(p[0] | p[1] << 8)); }

static void put_f16(uint8_t *p, float v) {
    uint16_t h = r1_f32_to_f16(v);
    p[0] = (uint8_t)(h & 0xff);
    p[1] = (uint8_t)(h >> 8);
}

/* ---- 32-weight blocks ----
 * q4_1: d f16 | m f16 | qs[16]             w[j] = d*q + m,  q in 0..15
 * q5_0: d f16 | qh[4] | qs[16]             w[j] = d*(q - 16), q in 0..31
 * q5_1: d f16 | m f16 | qh[4] | qs[16]     w[j] = d*q + m,  q in 0..31
 * qs[j] holds weight j in the low nibble and weight j+16 in the high one;
 * bit j of the little-endian u32 qh is bit 4 of weight j. */

void r1_q4_1_to_f32(const void *src, float *dst, int64_t n) {
    const uint8_t *b = src;
    for (int64_t i = 0; i < n / R1_QK; i++, b += 20, dst += R1_QK) {
        float d = f16_at(b), m = f16_at(b + 2);
        const uint8_t *qs = b + 4;
        for (int j = 0; j < R1_QK / 2; j++) {
            dst[j] = d * (float)(qs[j] & 0x0f) + m;
            dst[j + 16] = d * (float)(qs[j] >> 4) + m;
        }
    }
}

static uint32_t qh_at(const uint8_t *p) {
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

void r1_q5_0_to_f32(const void *src, float *dst, int64_t n) {
    const uint8_t *b = src;
    for (int64_t i = 0; i < n / R1_QK; i++, b += 22, dst += R1_QK) {
        float d = f16_at(b);
        uint32_t qh = qh_at(b + 2);
        const uint8_t *qs = b + 6;
        for (int j = 0; j < R1_QK / 2; j++) {
            int lo = (qs[j] & 0x0f) | (int)((qh >> j) & 1) << 4;
            int hi = (qs[j] >> 4) | (int)((qh >> (j + 16)) & 1) << 4;
            dst[j] = d * (float)(lo - 16);
            dst[j + 16] = d * (float)(hi - 16);
        }
    }
}

void r1_q5_1_to_f32(const void *src, float *dst, int64_t n) {
    const uint8_t *b = src;
    for (int64_t i = 0; i < n / R1_QK; i++, b += 24, dst += R1_QK) {
        float d = f16_at(b), m = f16_at(b + 2);
        uint32_t qh = qh_at(b + 4);
        const uint8_t *qs = b + 8;
        for (int j = 0; j < R1_QK / 2; j++) {
            int lo = (qs[j] & 0x0f) | (int)((qh >> j) & 1) << 4;
            int hi = (qs[j] >> 4) | (int)((qh >> (j + 16)) & 1) << 4;
            dst[j] = d * (float)lo + m;
            dst[j + 16] = d * (float)hi + m;
        }
    }
}

/* ---- K-quants: 256 weights in 8 sub-blocks of 32 (Q4_K, Q5_K) ----
 * q4_K: d f16 | dmin f16 | scales[12] | qs[128]                   (144 bytes)
 * q5_K: d f16 | dmin f16 | scales[12] | qh[32] | qs[128]          (176 bytes)
 * Sub-block s has a 6-bit scale sc[s] and a 6-bit min m[s], packed in the
 * 12 scale bytes: for s < 4, sc = scales[s] & 63, m = scales[s+4] & 63; for
 * s >= 4 the low 4 bits are in scales[s+4] (sc low nibble, m high nibble) and
 * the top 2 bits in the top 2 bits of scales[s-4] (sc) and scales[s] (m).
 * w = d*sc[s]*q - dmin*m[s]. Sub-block s takes its 4-bit q from the low
 * (s even) or high (s odd) nibbles of qs[32*(s/2) .. +32]; Q5_K adds bit s
 * of qh[l] as bit 4 of weight l of sub-block s. */

static void kq_scale_min(const uint8_t *sc12, int s, int *sc, int *m) {
    if (s < 4) {
        *sc = sc12[s] & 63;
        *m = sc12[s + 4] & 63;
    } else {
        *sc = (sc12[s + 4] & 0x0f) | ((sc12[s - 4] >> 6) << 4);
        *m = (sc12[s + 4] >> 4) | ((sc12[s] >> 6) << 4);
    }
}

void r1_q4_K_to_f32(const void *src, float *dst, int64_t n) {
    const uint8_t *b = src;
    for (int64_t i = 0; i < n / R1_QK_K; i++, b += 144, dst += R1_QK_K) {
        float d = f16_at(b), dmin = f16_at(b + 2);
        const uint8_t *qs = b + 16;
        for (int s = 0; s < 8; s++) {
            int sc, m;
            kq_scale_min(b + 4, s, &sc, &m);
            float dl = d * (float)sc, ml = dmin * (float)m;
            const uint8_t *q = qs + 32 * (s / 2);
            int shift = 4 * (s & 1);
            for (int l = 0; l < 32; l++) dst[32 * s + l] = dl * (float)((q[l] >> shift) & 0x0f) - ml;
        }
    }
}

void r1_q5_K_to_f32(const void *src, float *dst, int64_t n) {
    const uint8_t *b = src;
    for (int64_t i = 0; i < n / R1_QK_K; i++, b += 176, dst += R1_QK_K) {
        float d = f16_at(b), dmin = f16_at(b + 2);
        const uint8_t *qh = b + 16, *qs = b + 48;
        for (int s = 0; s < 8; s++) {
            int sc, m;
            kq_scale_min(b + 4, s, &sc, &m);
            float dl = d * (float)sc, ml = dmin * (float)m;
            const uint8_t *q = qs + 32 * (s / 2);
            int shift = 4 * (s & 1);
            for (int l = 0; l < 32; l++) {
                int v = ((q[l] >> shift) & 0x0f) | ((qh[l] >> s) & 1) << 4;
                dst[32 * s + l] = dl * (float)v - ml;
            }
        }
    }
}

/* ---- Q6_K: ql[128] | qh[64] | scales[16] (int8) | d f16   (210 bytes) ----
 * Weight i = 32*g + l (g = 0..7, l = 0..31), with h = g/4, r = g%4:
 * low 4 bits from ql[64*h + 32*(r%2) + l] (low nibble for r < 2, high
 * otherwise), top 2 bits from (qh[32*h + l] >> 2r) & 3; w = d*scales[i/16]*(q-32). */

static void q6_pos(int i, int *qlb, int *qlshift, int *qhb, int *qhshift) {
    int g = i / 32, l = i % 32, h = g / 4, r = g % 4;
    *qlb = 64 * h + 32 * (r % 2) + l;
    *qlshift = 4 * (r / 2);
    *qhb = 32 * h + l;
    *qhshift = 2 * r;
}

void r1_q6_K_to_f32(const void *src, float *dst, int64_t n) {
    const uint8_t *b = src;
    for (int64_t k = 0; k < n / R1_QK_K; k++, b += 210, dst += R1_QK_K) {
        const uint8_t *ql = b, *qh = b + 128;
        const int8_t *sc = (const int8_t *)(b + 192);
        float d = f16_at(b + 208);
        for (int i = 0; i < R1_QK_K; i++) {
            int a, as, c, cs;
            q6_pos(i, &a, &as, &c, &cs);
            int q = ((ql[a] >> as) & 0x0f) | ((qh[c] >> cs) & 3) << 4;
            dst[i] = d * (float)sc[i / 16] * (float)(q - 32);
        }
    }
}

/* ---- quantizers (simple, not searched: min/max per sub-block) ---- */

static int clampi(int v, int lo, int hi) { return v < lo ? lo : v > hi ? hi : v; }

/* q4_K (qmax 15, 144 bytes) and q5_K (qmax 31, 176 bytes: qh[32] before qs) */
static void kq_from_f32(const float *src, void *dst, int64_t n, int qmax) {
    const size_t bs = qmax == 15 ? 144 : 176;
    uint8_t *b = dst;
    for (int64_t i = 0; i < n / R1_QK_K; i++, b += bs, src += R1_QK_K) {
        float scale[8], mins[8], maxscale = 0, maxmin = 0;
        for (int s = 0; s < 8; s++) {
            float lo = 0, hi = 0; /* the min is kept <= 0: w = d*q - m, m >= 0 */
            for (int l = 0; l < 32; l++) {
                lo = fminf(lo, src[32 * s + l]);
                hi = fmaxf(hi, src[32 * s + l]);
            }
            scale[s] = (hi - lo) / (float)qmax;
            mins[s] = -lo;
            maxscale = fmaxf(maxscale, scale[s]);
            maxmin = fmaxf(maxmin, mins[s]);
        }
        memset(b, 0, bs);
        put_f16(b, maxscale / 63.0f);
        put_f16(b + 2, maxmin / 63.0f);
        float d = f16_at(b), dmin = f16_at(b + 2);
        int sc[8], m[8];
        for (int s = 0; s < 8; s++) {
            sc[s] = d > 0 ? clampi((int)lrintf(scale[s] / d), 0, 63) : 0;
            m[s] = dmin > 0 ? clampi((int)lrintf(mins[s] / dmin), 0, 63) : 0;
        }
        uint8_t *s12 = b + 4;
        for (int s = 0; s < 4; s++) {
            s12[s] = (uint8_t)(sc[s] | (sc[s + 4] >> 4) << 6);
            s12[s + 4] = (uint8_t)(m[s] | (m[s + 4] >> 4) << 6);
            s12[s + 8] = (uint8_t)((sc[s + 4] & 0x0f) | (m[s + 4] & 0x0f) << 4);
        }
        uint8_t *qh = b + 16, *qs = b + (qmax == 15 ? 16 : 48);
        for (int s = 0; s < 8; s++) {
            float dl = d * (float)sc[s], ml = dmin * (float)m[s], idl = dl > 0 ? 1.0f / dl : 0.0f;
            for (int l = 0; l < 32; l++) {
                int q = clampi((int)lrintf((src[32 * s + l] + ml) * idl), 0, qmax);
                qs[32 * (s / 2) + l] |= (uint8_t)((q & 15) << (4 * (s & 1)));
                if (qmax == 31) qh[l] |= (uint8_t)((q >> 4) << s);
            }
        }
    }
}

void r1_q4_K_from_f32(const float *src, void *dst, int64_t n) { kq_from_f32(src, dst, n, 15); }
void r1_q5_K_from_f32(const float *src, void *dst, int64_t n) { kq_from_f32(src, dst, n, 31); }

void r1_q6_K_from_f32(const float *src, void *dst, int64_t n) {
    uint8_t *b = dst;
    for (int64_t k = 0; k < n / R1_QK_K; k++, b += 210, src += R1_QK_K) {
        float scale[16], amax = 0, smax = 0;
        for (int g = 0; g < 16; g++) {
            float big = 0; /* the weight of largest magnitude, with its sign */
            for (int l = 0; l < 16; l++)
                if (fabsf(src[16 * g + l]) > fabsf(big)) big = src[16 * g + l];
            scale[g] = big / -32.0f;
            if (fabsf(scale[g]) > amax) {
                amax = fabsf(scale[g]);
                smax = scale[g];
            }
        }
        memset(b, 0, 210);
        put_f16(b + 208, smax / -128.0f);
        float d = f16_at(b + 208), id = d != 0 ? 1.0f / d : 0.0f;
        int8_t *sc = (int8_t *)(b + 192);
        for (int g = 0; g < 16; g++) sc[g] = (int8_t)clampi((int)lrintf(scale[g] * id), -128, 127);
        for (int i = 0; i < R1_QK_K; i++) {
            float dl = d * (float)sc[i / 16];
            int q = dl != 0 ? clampi((int)lrintf(src[i] / dl), -32, 31) : 0;
            q += 32;
            int a, as, c, cs;
            q6_pos(i, &a, &as, &c, &cs);
            b[a] |= (uint8_t)((q & 0x0f) << as);
            b[128 + c] |= (uint8_t)((q >> 4) << cs);
        }
    }
}

/* ---- quantizers of the 32-weight formats (ggml's rounding: nearest, from
 * the block's min/max; the stored f16 scale and min are the ones used) ---- */

/* low nibble: weight j, high nibble: weight j+16 (and bit 4 in qh) */
static void pack32(const int *q, uint8_t *qs, uint8_t *qh) {
    uint32_t h = 0;
    for (int j = 0; j < R1_QK / 2; j++) {
        qs[j] = (uint8_t)((q[j] & 0x0f) | (q[j + 16] & 0x0f) << 4);
        h |= (uint32_t)((q[j] >> 4) & 1) << j | (uint32_t)((q[j + 16] >> 4) & 1) << (j + 16);
    }
    if (qh)
        for (int i = 0; i < 4; i++) qh[i] = (uint8_t)(h >> (8 * i));
}

/* q = round((x - min) / d) in 0..qmax, d = (max - min) / qmax */
static void quant_min(const float *x, int qmax, uint8_t *b, int *q) {
    float lo = x[0], hi = x[0];
    for (int j = 1; j < R1_QK; j++) {
        lo = fminf(lo, x[j]);
        hi = fmaxf(hi, x[j]);
    }
    put_f16(b, (hi - lo) / (float)qmax);
    put_f16(b + 2, lo);
    float d = f16_at(b), m = f16_at(b + 2), id = d > 0 ? 1.0f / d : 0.0f;
    for (int j = 0; j < R1_QK; j++) q[j] = clampi((int)lrintf((x[j] - m) * id), 0, qmax);
}

void r1_q4_1_from_f32(const float *src, void *dst, int64_t n) {
    uint8_t *b = dst;
    int q[R1_QK];
    for (int64_t i = 0; i < n / R1_QK; i++, b += 20, src += R1_QK) {
        quant_min(src, 15, b, q);
        pack32(q, b + 4, NULL);
    }
}

void r1_q5_1_from_f32(const float *src, void *dst, int64_t n) {
    uint8_t *b = dst;
    int q[R1_QK];
    for (int64_t i = 0; i < n / R1_QK; i++, b += 24, src += R1_QK) {
        quant_min(src, 31, b, q);
        pack32(q, b + 8, b + 4);
    }
}

/* q5_0: d = (the weight of largest magnitude) / -16, q = round(x / d) + 16 */
void r1_q5_0_from_f32(const float *src, void *dst, int64_t n) {
    uint8_t *b = dst;
    int q[R1_QK];
    for (int64_t i = 0; i < n / R1_QK; i++, b += 22, src += R1_QK) {
        float big = 0;
        for (int j = 0; j < R1_QK; j++)
            if (fabsf(src[j]) > fabsf(big)) big = src[j];
        put_f16(b, big / -16.0f);
        float d = f16_at(b), id = d != 0 ? 1.0f / d : 0.0f;
        for (int j = 0; j < R1_QK; j++) q[j] = clampi((int)lrintf(src[j] * id) + 16, 0, 31);
        pack32(q, b + 6, b + 2);
    }
}
