/*
 * kquants_generic.c - plain C tiles for q4_K, q5_K, q6_K, q4_1, q5_0, q5_1
 * weights against q8 activations (kquants.h). Correct on every arch; the
 * generic, avx2 and NEON tables use them. No intrinsics, no target flags.
 *
 * Each 64-column chunk of a row is decoded into unsigned quants q[64] and,
 * per 16 columns g, a scale a[g] and an offset b[g] with w = a*q - b (the
 * block layouts are those of kernels/quants.c, the oracle):
 *   q4_K/q5_K  a = d*sc[s], b = dmin*m[s]   (s = the 32-weight sub-block)
 *   q6_K       a = d*sc[i/16], b = 32*a
 *   q4_1/q5_1  a = d, b = -m;   q5_0  a = d, b = 16*d
 * Then for a token with activations x = dx*xq (dx per 32 columns):
 *   sum w*x = sum_g dx * (a[g] * sum(q*xq) - b[g] * sum(xq)),
 * integer sums inside a group of 16, float across groups. The activation
 * sums are computed once per chunk and token and shared by the rows.
 */
#include <string.h>

#include "kernels/cpu/kquants.h"
#include "kernels/dtype.h"
#include "util/util.h"

static float f16_at(const uint8_t *p) { return r1_f16_to_f32((uint16_t)(p[0] | p[1] << 8)); }

/* Decoder: the chunk of row at column c (c % 64 == 0; n = 64, or 32 for a
 * last half chunk of a 32-block format) into q[n], a[n/16], b[n/16]. */
typedef void (*dec_fn)(const uint8_t *row, int c, int n, uint8_t *q, float *a, float *b);

/* 6-bit scale and min of sub-block s of a q4_K/q5_K super-block (12 bytes) */
static void kq_sm(const uint8_t *s12, int s, int *sc, int *m) {
    if (s < 4) {
        *sc = s12[s] & 63;
        *m = s12[s + 4] & 63;
    } else {
        *sc = (s12[s + 4] & 0x0f) | ((s12[s - 4] >> 6) << 4);
        *m = (s12[s + 4] >> 4) | ((s12[s] >> 6) << 4);
    }
}

static void kq_ab(const uint8_t *blk, int j, float *a, float *b) {
    float d = f16_at(blk), dmin = f16_at(blk + 2);
    for (int h = 0; h < 2; h++) {
        int sc, m;
        kq_sm(blk + 4, 2 * j + h, &sc, &m);
        a[2 * h] = a[2 * h + 1] = d * (float)sc;
        b[2 * h] = b[2 * h + 1] = dmin * (float)m;
    }
}

static void dec_q4_K(const uint8_t *row, int c, int n, uint8_t *q, float *a, float *b) {
    (void)n;
    const uint8_t *blk = row + (size_t)(c / R1_QK_K) * 144;
    const int j = (c % R1_QK_K) / 64;
    const uint8_t *qs = blk + 16 + 32 * j;
    for (int l = 0; l < 32; l++) {
        q[l] = qs[l] & 0x0f;
        q[l + 32] = qs[l] >> 4;
    }
    kq_ab(blk, j, a, b);
}

static void dec_q5_K(const uint8_t *row, int c, int n, uint8_t *q, float *a, float *b) {
    (void)n;
    const uint8_t *blk = row + (size_t)(c / R1_QK_K) * 176;
    const int j = (c % R1_QK_K) / 64;
    const uint8_t *qh = blk + 16, *qs = blk + 48 + 32 * j;
    for (int l = 0; l < 32; l++) {
        q[l] = (uint8_t)((qs[l] & 0x0f) | ((qh[l] >> (2 * j)) & 1) << 4);
        q[l + 32] = (uint8_t)((qs[l] >> 4) | ((qh[l] >> (2 * j + 1)) & 1) << 4);
    }
    kq_ab(blk, j, a, b);
}

static void dec_q6_K(const uint8_t *row, int c, int n, uint8_t *q, float *a, float *b) {
    (void)n;
    const uint8_t *blk = row + (size_t)(c / R1_QK_K) * 210;
    const int j = (c % R1_QK_K) / 64, h = j / 2, sh = 4 * (j % 2);
    const uint8_t *ql = blk + 64 * h, *qh = blk + 128 + 32 * h;
    const int8_t *sc = (const int8_t *)(blk + 192) + 4 * j;
    for (int l = 0; l < 32; l++) {
        q[l] = (uint8_t)(((ql[l] >> sh) & 0x0f) | ((qh[l] >> sh) & 3) << 4);
        q[l + 32] = (uint8_t)(((ql[l + 32] >> sh) & 0x0f) | ((qh[l] >> (sh + 2)) & 3) << 4);
    }
    float d = f16_at(blk + 208);
    for (int g = 0; g < 4; g++) {
        a[g] = d * (float)sc[g];
        b[g] = 32.0f * a[g];
    }
}

static uint32_t u32_at(const uint8_t *p) {
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

/* the 32-weight formats: block layout (bytes, offsets of m/qh/qs, -1 = none) */
static void dec_q32(const uint8_t *row, int c, int n, uint8_t *q, float *a, float *b, int bs, int moff, int qhoff,
                    int qsoff) {
    for (int i = 0; i < n / 32; i++) {
        const uint8_t *blk = row + (size_t)(c / 32 + i) * bs;
        const uint8_t *qs = blk + qsoff;
        uint32_t qh = qhoff >= 0 ? u32_at(blk + qhoff) : 0;
        uint8_t *o = q + 32 * i;
        for (int l = 0; l < 16; l++) {
            o[l] = (uint8_t)((qs[l] & 0x0f) | ((qh >> l) & 1) << 4);
            o[l + 16] = (uint8_t)((qs[l] >> 4) | ((qh >> (l + 16)) & 1) << 4);
        }
        float d = f16_at(blk);
        a[2 * i] = a[2 * i + 1] = d;
        b[2 * i] = b[2 * i + 1] = moff >= 0 ? -f16_at(blk + moff) : 16.0f * d;
    }
}
static void dec_q4_1(const uint8_t *row, int c, int n, uint8_t *q, float *a, float *b) {
    dec_q32(row, c, n, q, a, b, 20, 2, -1, 4);
}
static void dec_q5_0(const uint8_t *row, int c, int n, uint8_t *q, float *a, float *b) {
    dec_q32(row, c, n, q, a, b, 22, -1, 2, 6);
}
static void dec_q5_1(const uint8_t *row, int c, int n, uint8_t *q, float *a, float *b) {
    dec_q32(row, c, n, q, a, b, 24, 2, 4, 8);
}

static void tile_kq(R1_KQ_TILE_ARGS, dec_fn dec) {
    const size_t qoff = r1_cpu_q8_qoff(K);
    float acc[R1_CPU_MR][R1_CPU_NT];
    memset(acc, 0, sizeof acc);
    for (int c = k0; c < k1; c += 64) {
        const int n = k1 - c < 64 ? k1 - c : 64, ng = n / 16;
        int32_t S[R1_CPU_NT][4];
        float dx[R1_CPU_NT][2];
        const int8_t *xq[R1_CPU_NT];
        for (int t = 0; t < nt; t++) {
            const uint8_t *xt = x + (size_t)t * xs;
            xq[t] = (const int8_t *)(xt + qoff) + c;
            dx[t][0] = ((const float *)xt)[c / 32];
            dx[t][1] = n > 32 ? ((const float *)xt)[c / 32 + 1] : 0.0f;
            for (int g = 0; g < ng; g++) {
                int32_t s = 0;
                for (int l = 0; l < 16; l++) s += xq[t][16 * g + l];
                S[t][g] = s;
            }
        }
        for (int r = 0; r < nr; r++) {
            uint8_t q[64];
            float a[4], b[4];
            dec(w + (size_t)r * ws, c, n, q, a, b);
            for (int t = 0; t < nt; t++) {
                float sum = 0.0f;
                for (int h = 0; h < ng / 2; h++) {
                    float part = 0.0f;
                    for (int g = 2 * h; g < 2 * h + 2; g++) {
                        int32_t p = 0;
                        for (int l = 0; l < 16; l++) p += (int32_t)q[16 * g + l] * xq[t][16 * g + l];
                        part += a[g] * (float)p - b[g] * (float)S[t][g];
                    }
                    sum += dx[t][h] * part;
                }
                acc[r][t] += sum;
            }
        }
    }
    for (int t = 0; t < nt; t++)
        for (int r = 0; r < nr; r++) out[t * R1_CPU_MR + r] = acc[r][t];
}

#define KQ_TILE(NAME, DEC)                                                                                             \
    void NAME(R1_KQ_TILE_ARGS) { tile_kq(K, k0, k1, w, ws, nr, x, xs, nt, out, DEC); }
KQ_TILE(r1_kq_tile_q4_K_c, dec_q4_K)
KQ_TILE(r1_kq_tile_q5_K_c, dec_q5_K)
KQ_TILE(r1_kq_tile_q6_K_c, dec_q6_K)
KQ_TILE(r1_kq_tile_q4_1_c, dec_q4_1)
KQ_TILE(r1_kq_tile_q5_0_c, dec_q5_0)
KQ_TILE(r1_kq_tile_q5_1_c, dec_q5_1)
