/*
 * regroup_k.c - the K-quants regrouped for the cpu kernels (dtype.h:
 * q4_Kx8, q5_Kx8, q6_Kx8): in each 256-weight super-block the quants of
 * 32-weight group b (a q4_K/q5_K sub-block, two q6_K sub-blocks) are placed
 * in the lanes that the q8x8 activations (cpu.h) give to block b, and the
 * scales, mins and d stay where GGUF has them, so a super-block keeps its
 * size. Lossless; plain C, byte and bit moves only; never in files.
 *
 * A super-block's quants are first unpacked to q[256] (integers 0..15,
 * 0..31 or 0..63) and packed again in the other layout; to_f32 of a
 * regrouped block packs the GGUF block back and runs GGUF's own to_f32, so
 * both give the same floats by construction.
 */
#include <string.h>

#include "kernels/dtype.h"
#include "kernels/quants.h"

/* where weight k (0..31) of group b sits in the four 64-byte vectors of the
 * x8 lane order: vector p, element e = 4 * lane + byte (see r1_q8_0x8_at) */
static void x8_pos(int b, int k, int *p, int *e) {
    int j = k % 16 / 4;
    *p = 2 * (k / 16) + j / 2;
    *e = 4 * (b + 8 * (j % 2)) + k % 4;
}

/* ---- GGUF super-blocks <-> q[256] ---- */
static void q4k_put(uint8_t *blk, const int *q) {
    memset(blk + 16, 0, 128);
    for (int s = 0; s < 8; s++)
        for (int l = 0; l < 32; l++) blk[16 + 32 * (s / 2) + l] |= (uint8_t)((q[32 * s + l] & 15) << (4 * (s & 1)));
}
static void q5k_get(const uint8_t *blk, int *q) {
    for (int s = 0; s < 8; s++)
        for (int l = 0; l < 32; l++)
            q[32 * s + l] = ((blk[48 + 32 * (s / 2) + l] >> (4 * (s & 1))) & 15) | ((blk[16 + l] >> s) & 1) << 4;
}
static void q5k_put(uint8_t *blk, const int *q) {
    memset(blk + 16, 0, 160);
    for (int s = 0; s < 8; s++)
        for (int l = 0; l < 32; l++) {
            int v = q[32 * s + l];
            blk[48 + 32 * (s / 2) + l] |= (uint8_t)((v & 15) << (4 * (s & 1)));
            blk[16 + l] |= (uint8_t)(((v >> 4) & 1) << s);
        }
}
static void q6k_put(uint8_t *blk, const int *q) {
    memset(blk, 0, 192);
    for (int i = 0; i < 256; i++) {
        int g = i / 32, l = i % 32, h = g / 4, r = g % 4;
        blk[64 * h + 32 * (r % 2) + l] |= (uint8_t)((q[i] & 15) << (4 * (r / 2)));
        blk[128 + 32 * h + l] |= (uint8_t)(((q[i] >> 4) & 3) << (2 * r));
    }
}

/* ---- q[256] <-> the x8 lane order: the low 4 bits as q4_0x8's nibbles
 * (vector p in the low nibbles of load p for p < 2, the high nibbles of
 * load p - 2 otherwise), bit 4 as one 64-bit mask per vector (q5_K), bits 4
 * and 5 as 2-bit fields (bits 2p, 2p + 1 of byte e of a 64-byte array, q6_K) */
static void x8_put(const int *q, uint8_t *qs, uint8_t *h5, uint8_t *h6) {
    memset(qs, 0, 128);
    if (h5) memset(h5, 0, 32);
    if (h6) memset(h6, 0, 64);
    for (int b = 0; b < 8; b++)
        for (int k = 0; k < 32; k++) {
            int p, e, v = q[32 * b + k];
            x8_pos(b, k, &p, &e);
            qs[64 * (p % 2) + e] |= (uint8_t)((v & 15) << (4 * (p / 2)));
            if (h5) h5[8 * p + e / 8] |= (uint8_t)(((v >> 4) & 1) << (e % 8));
            if (h6) h6[e] |= (uint8_t)(((v >> 4) & 3) << (2 * p));
        }
}
static void x8_get(const uint8_t *qs, const uint8_t *h5, const uint8_t *h6, int *q) {
    for (int b = 0; b < 8; b++)
        for (int k = 0; k < 32; k++) {
            int p, e;
            x8_pos(b, k, &p, &e);
            int v = (qs[64 * (p % 2) + e] >> (4 * (p / 2))) & 15;
            if (h5) v |= ((h5[8 * p + e / 8] >> (e % 8)) & 1) << 4;
            if (h6) v |= ((h6[e] >> (2 * p)) & 3) << 4;
            q[32 * b + k] = v;
        }
}

/* ---- one super-block, both ways. Layouts (bytes):
 *   q4_Kx8: d, dmin, scales[12] (as q4_K) | qs[128] x8
 *   q5_Kx8: d, dmin, scales[12] (as q5_K) | h5[32] masks | qs[128] x8
 *   q6_Kx8: qs[128] x8 | h6[64] | scales[16], d (as q6_K) */
/* q4_K -> q4_Kx8 without unpacking (a model load regroups gigabytes of
 * these): by x8_pos, weight k < 16 of group b and weight k + 16 share the
 * byte 64 bit3(k) + 32 bit2(k) + 4 b + k % 4 (low and high nibble); in
 * q4_K groups 2j and 2j + 1 are the low and high nibbles of the bytes
 * 32 j + k (weights k < 16) and 32 j + 16 + k (weights k + 16). */
static void q4k_to_x8(const uint8_t *src, uint8_t *dst) {
    memcpy(dst, src, 16);
    const uint8_t *qs = src + 16;
    uint8_t *o = dst + 16;
    for (int j = 0; j < 4; j++)
        for (int k = 0; k < 16; k++) {
            uint8_t lo = qs[32 * j + k], hi = qs[32 * j + 16 + k];
            int d = 64 * ((k >> 3) & 1) + 32 * ((k >> 2) & 1) + (k & 3) + 8 * j;
            o[d] = (uint8_t)((lo & 15) | (hi << 4));
            o[d + 4] = (uint8_t)((lo >> 4) | (hi & 0xF0));
        }
}

/* q6_K -> q6_Kx8 the same way: group b's low nibbles are nibble (b / 2) % 2
 * of bytes 64 (b / 4) + 32 (b % 2) + k, its top two bits bits 2 (b % 4) of
 * bytes 128 + 32 (b / 4) + k; in x8 weight k of group b goes to vector
 * p = 2 bit4(k) + bit3(k), element e = 4 b + 32 bit2(k) + k % 4. */
static void q6k_to_x8(const uint8_t *src, uint8_t *dst) {
    memcpy(dst + 192, src + 192, 18);
    uint8_t *h6 = dst + 128;
    memset(h6, 0, 64);
    for (int b = 0; b < 8; b++) {
        const uint8_t *ql = src + 64 * (b >> 2) + 32 * (b & 1), *qh = src + 128 + 32 * (b >> 2);
        const int nib = 4 * ((b >> 1) & 1), hs = 2 * (b & 3);
        for (int k = 0; k < 16; k++) {
            int e = 4 * b + 32 * ((k >> 2) & 1) + (k & 3), p = (k >> 3) & 1;
            dst[64 * p + e] = (uint8_t)(((ql[k] >> nib) & 15) | ((ql[k + 16] >> nib) & 15) << 4);
            h6[e] |= (uint8_t)(((qh[k] >> hs) & 3) << (2 * p) | ((qh[k + 16] >> hs) & 3) << (2 * p + 4));
        }
    }
}

static void kx8_from_gguf(enum r1_dtype to, const uint8_t *src, uint8_t *dst) {
    int q[256];
    if (to == R1_DTYPE_Q4_KX8) {
        q4k_to_x8(src, dst);
    } else if (to == R1_DTYPE_Q5_KX8) {
        q5k_get(src, q);
        memcpy(dst, src, 16);
        x8_put(q, dst + 48, dst + 16, NULL);
    } else {
        q6k_to_x8(src, dst);
    }
}
static void kx8_to_gguf(enum r1_dtype from, const uint8_t *src, uint8_t *dst) {
    int q[256];
    if (from == R1_DTYPE_Q4_KX8) {
        x8_get(src + 16, NULL, NULL, q);
        memcpy(dst, src, 16);
        q4k_put(dst, q);
    } else if (from == R1_DTYPE_Q5_KX8) {
        x8_get(src + 48, src + 16, NULL, q);
        memcpy(dst, src, 16);
        q5k_put(dst, q);
    } else {
        x8_get(src, NULL, src + 128, q);
        memcpy(dst + 192, src + 192, 18);
        q6k_put(dst, q);
    }
}

static enum r1_dtype base_of(enum r1_dtype x8) {
    return x8 == R1_DTYPE_Q4_KX8 ? R1_DTYPE_Q4_K : x8 == R1_DTYPE_Q5_KX8 ? R1_DTYPE_Q5_K : R1_DTYPE_Q6_K;
}

int r1_kx8_regroup(enum r1_dtype from, enum r1_dtype to, const void *src, void *dst, int64_t n) {
    if ((to != R1_DTYPE_Q4_KX8 && to != R1_DTYPE_Q5_KX8 && to != R1_DTYPE_Q6_KX8) || from != base_of(to) || n % R1_QK_K)
        return -1;
    const size_t bs = r1_dtype_traits[to].block_size;
    for (int64_t s = 0; s < n / R1_QK_K; s++) kx8_from_gguf(to, (const uint8_t *)src + s * bs, (uint8_t *)dst + s * bs);
    return 0;
}

#define KX8_CONV(NAME, DT)                                                                                             \
    static void NAME##_to_f32(const void *src, float *dst, int64_t n) {                                                \
        uint8_t blk[210];                                                                                              \
        const size_t bs = r1_dtype_traits[DT].block_size;                                                              \
        for (int64_t s = 0; s < n / R1_QK_K; s++) {                                                                    \
            kx8_to_gguf(DT, (const uint8_t *)src + s * bs, blk);                                                       \
            r1_dtype_traits[base_of(DT)].to_f32(blk, dst + s * R1_QK_K, R1_QK_K);                                      \
        }                                                                                                              \
    }                                                                                                                  \
    static void NAME##_from_f32(const float *src, void *dst, int64_t n) {                                              \
        uint8_t blk[210];                                                                                              \
        const size_t bs = r1_dtype_traits[DT].block_size;                                                              \
        for (int64_t s = 0; s < n / R1_QK_K; s++) {                                                                    \
            r1_dtype_traits[base_of(DT)].from_f32(src + s * R1_QK_K, blk, R1_QK_K);                                    \
            kx8_from_gguf(DT, blk, (uint8_t *)dst + s * bs);                                                           \
        }                                                                                                              \
    }
KX8_CONV(q4kx8, R1_DTYPE_Q4_KX8)
KX8_CONV(q5kx8, R1_DTYPE_Q5_KX8)
KX8_CONV(q6kx8, R1_DTYPE_Q6_KX8)

void r1_q4_Kx8_to_f32(const void *src, float *dst, int64_t n) { q4kx8_to_f32(src, dst, n); }
void r1_q5_Kx8_to_f32(const void *src, float *dst, int64_t n) { q5kx8_to_f32(src, dst, n); }
void r1_q6_Kx8_to_f32(const void *src, float *dst, int64_t n) { q6kx8_to_f32(src, dst, n); }
void r1_q4_Kx8_from_f32(const float *src, void *dst, int64_t n) { q4kx8_from_f32(src, dst, n); }
void r1_q5_Kx8_from_f32(const float *src, void *dst, int64_t n) { q5kx8_from_f32(src, dst, n); }
void r1_q6_Kx8_from_f32(const float *src, void *dst, int64_t n) { q6kx8_from_f32(src, dst, n); }
