/*
 * regroup.c - the in-memory layouts that regroup a GGUF block format for the
 * cpu kernels without changing a number (dtype.h): q4_1x8 and q8_0x8, 8
 * blocks at a time with their quants placed in the lanes of the q8x8
 * activations, the row's last blocks short of a group left as they were.
 * Plain C, byte moves only; never in files.
 * (q4_0x8 itself lives in dtype.c.)
 */
#include <string.h>

#include "kernels/dtype.h"
#include "kernels/quants.h"

#define Q41_BYTES 20 /* d f16 | m f16 | qs[16] */

_Static_assert(sizeof(struct r1_block_q4_1x8) == 8 * Q41_BYTES, "q4_1x8 group is 8 q4_1 blocks");

/* n weights of q4_1 (from a group boundary of a row) -> q4_1x8 */
static void q4_1_to_x8(const uint8_t *src, uint8_t *dst, int64_t n) {
    int64_t g = n / R1_QK_X8;
    for (int64_t s = 0; s < g; s++, src += 8 * Q41_BYTES, dst += sizeof(struct r1_block_q4_1x8)) {
        struct r1_block_q4_1x8 x;
        for (int b = 0; b < 8; b++) {
            const uint8_t *p = src + b * Q41_BYTES;
            x.d[b] = (uint16_t)(p[0] | p[1] << 8);
            x.m[b] = (uint16_t)(p[2] | p[3] << 8);
            for (int c = 0; c < R1_QK / 2; c++) x.qs[r1_q4_0x8_at(b, c)] = p[4 + c];
        }
        memcpy(dst, &x, sizeof x);
    }
    memcpy(dst, src, (size_t)(n % R1_QK_X8 / R1_QK) * Q41_BYTES); /* the tail stays q4_1 */
}

/* and back */
static void x8_to_q4_1(const uint8_t *src, uint8_t *dst, int64_t n) {
    int64_t g = n / R1_QK_X8;
    for (int64_t s = 0; s < g; s++, src += sizeof(struct r1_block_q4_1x8), dst += 8 * Q41_BYTES) {
        struct r1_block_q4_1x8 x;
        memcpy(&x, src, sizeof x);
        for (int b = 0; b < 8; b++) {
            uint8_t *p = dst + b * Q41_BYTES;
            p[0] = (uint8_t)x.d[b], p[1] = (uint8_t)(x.d[b] >> 8);
            p[2] = (uint8_t)x.m[b], p[3] = (uint8_t)(x.m[b] >> 8);
            for (int c = 0; c < R1_QK / 2; c++) p[4 + c] = x.qs[r1_q4_0x8_at(b, c)];
        }
    }
    memcpy(dst, src, (size_t)(n % R1_QK_X8 / R1_QK) * Q41_BYTES);
}

/* through q4_1 a group at a time */
void r1_q4_1x8_to_f32(const void *src, float *dst, int64_t n) {
    uint8_t tmp[8 * Q41_BYTES];
    const uint8_t *p = src;
    for (int64_t k = 0; k < n; k += R1_QK_X8) {
        int64_t m = n - k < R1_QK_X8 ? n - k : R1_QK_X8;
        x8_to_q4_1(p, tmp, m);
        r1_q4_1_to_f32(tmp, dst + k, m);
        p += m / R1_QK * Q41_BYTES;
    }
}

void r1_q4_1x8_from_f32(const float *src, void *dst, int64_t n) {
    uint8_t tmp[8 * Q41_BYTES];
    uint8_t *p = dst;
    for (int64_t k = 0; k < n; k += R1_QK_X8) {
        int64_t m = n - k < R1_QK_X8 ? n - k : R1_QK_X8;
        r1_q4_1_from_f32(src + k, tmp, m);
        q4_1_to_x8(tmp, p, m);
        p += m / R1_QK * Q41_BYTES;
    }
}

/* ---- q8_0x8 ---- */
#define Q80_BYTES 34 /* d f16 | qs[32] */

_Static_assert(sizeof(struct r1_block_q8_0x8) == 8 * Q80_BYTES, "q8_0x8 group is 8 q8_0 blocks");

static void q8_0_to_x8(const uint8_t *src, uint8_t *dst, int64_t n) {
    int64_t g = n / R1_QK_X8;
    for (int64_t s = 0; s < g; s++, src += 8 * Q80_BYTES, dst += sizeof(struct r1_block_q8_0x8)) {
        struct r1_block_q8_0x8 x;
        for (int b = 0; b < 8; b++) {
            const uint8_t *p = src + b * Q80_BYTES;
            x.d[b] = (uint16_t)(p[0] | p[1] << 8);
            for (int k = 0; k < R1_QK; k++) x.qs[r1_q8_0x8_at(b, k)] = (uint8_t)(p[2 + k] ^ 0x80);
        }
        memcpy(dst, &x, sizeof x);
    }
    memcpy(dst, src, (size_t)(n % R1_QK_X8 / R1_QK) * Q80_BYTES);
}

static void x8_to_q8_0(const uint8_t *src, uint8_t *dst, int64_t n) {
    int64_t g = n / R1_QK_X8;
    for (int64_t s = 0; s < g; s++, src += sizeof(struct r1_block_q8_0x8), dst += 8 * Q80_BYTES) {
        struct r1_block_q8_0x8 x;
        memcpy(&x, src, sizeof x);
        for (int b = 0; b < 8; b++) {
            uint8_t *p = dst + b * Q80_BYTES;
            p[0] = (uint8_t)x.d[b], p[1] = (uint8_t)(x.d[b] >> 8);
            for (int k = 0; k < R1_QK; k++) p[2 + k] = (uint8_t)(x.qs[r1_q8_0x8_at(b, k)] ^ 0x80);
        }
    }
    memcpy(dst, src, (size_t)(n % R1_QK_X8 / R1_QK) * Q80_BYTES);
}

void r1_q8_0x8_to_f32(const void *src, float *dst, int64_t n) {
    uint8_t tmp[8 * Q80_BYTES];
    const uint8_t *p = src;
    for (int64_t k = 0; k < n; k += R1_QK_X8) {
        int64_t m = n - k < R1_QK_X8 ? n - k : R1_QK_X8;
        x8_to_q8_0(p, tmp, m);
        r1_dtype_traits[R1_DTYPE_Q8_0].to_f32(tmp, dst + k, m);
        p += m / R1_QK * Q80_BYTES;
    }
}

void r1_q8_0x8_from_f32(const float *src, void *dst, int64_t n) {
    uint8_t tmp[8 * Q80_BYTES];
    uint8_t *p = dst;
    for (int64_t k = 0; k < n; k += R1_QK_X8) {
        int64_t m = n - k < R1_QK_X8 ? n - k : R1_QK_X8;
        r1_dtype_traits[R1_DTYPE_Q8_0].from_f32(src + k, tmp, m);
        q8_0_to_x8(tmp, p, m);
        p += m / R1_QK * Q80_BYTES;
    }
}

int r1_dtype_regroup(enum r1_dtype from, enum r1_dtype to, const void *src, void *dst, int64_t n) {
    if (from == R1_DTYPE_Q4_0 && to == R1_DTYPE_Q4_0X8 && n % R1_QK_X8 == 0) {
        r1_q4_0_to_x8(src, dst, n);
        return 0;
    }
    if (from == R1_DTYPE_Q4_1 && to == R1_DTYPE_Q4_1X8 && n % R1_QK == 0) {
        q4_1_to_x8(src, dst, n);
        return 0;
    }
    if (from == R1_DTYPE_Q8_0 && to == R1_DTYPE_Q8_0X8 && n % R1_QK == 0) {
        q8_0_to_x8(src, dst, n);
        return 0;
    }
    /* back to GGUF's blocks (device backends read the plain formats) */
    if (from == R1_DTYPE_Q8_0X8 && to == R1_DTYPE_Q8_0 && n % R1_QK == 0) {
        x8_to_q8_0(src, dst, n);
        return 0;
    }
    if (from == R1_DTYPE_Q4_1X8 && to == R1_DTYPE_Q4_1 && n % R1_QK == 0) {
        x8_to_q4_1(src, dst, n);
        return 0;
    }
    if (from == R1_DTYPE_Q4_0X8 && to == R1_DTYPE_Q4_0 && n % R1_QK_X8 == 0) {
        const struct r1_block_q4_0x8 *x = src;
        struct r1_block_q4_0 *b = dst;
        for (int64_t s = 0; s < n / R1_QK_X8; s++)
            for (int i = 0; i < 8; i++) {
                b[8 * s + i].d = x[s].d[i];
                for (int c = 0; c < R1_QK / 2; c++) b[8 * s + i].qs[c] = x[s].qs[r1_q4_0x8_at(i, c)];
            }
        return 0;
    }
    return r1_kx8_regroup(from, to, src, dst, n);
}
