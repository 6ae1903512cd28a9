/*
 * dtype.c - reference conversions for every weight format (plain C; the
 * oracle that fast dot products are tested against).
 */
#include "dtype.h"

#include <math.h>
#include <string.h>
#include <strings.h>

#include "kernels/quants.h"
#include "util/util.h"

static void f32_to_f32(const void *src, float *dst, int64_t n) {
    memcpy(dst, src, (size_t)n * sizeof(float));
}
static void f32_from_f32(const float *src, void *dst, int64_t n) {
    memcpy(dst, src, (size_t)n * sizeof(float));
}
static void f16_to_f32(const void *src, float *dst, int64_t n) {
    const uint16_t *s = src;
    for (int64_t i = 0; i < n; i++) dst[i] = r1_f16_to_f32(s[i]);
}
static void f16_from_f32(const float *src, void *dst, int64_t n) {
    uint16_t *d = dst;
    for (int64_t i = 0; i < n; i++) d[i] = r1_f32_to_f16(src[i]);
}
static void bf16_to_f32(const void *src, float *dst, int64_t n) {
    const uint16_t *s = src;
    for (int64_t i = 0; i < n; i++) dst[i] = r1_bf16_to_f32(s[i]);
}
static void bf16_from_f32(const float *src, void *dst, int64_t n) {
    uint16_t *d = dst;
    for (int64_t i = 0; i < n; i++) d[i] = r1_f32_to_bf16(src[i]);
}

static void q8_0_to_f32(const void *src, float *dst, int64_t n) {
    const struct r1_block_q8_0 *b = src;
    for (int64_t i = 0; i < n / R1_QK; i++) {
        float d = r1_f16_to_f32(b[i].d);
        for (int j = 0; j < R1_QK; j++) dst[i * R1_QK + j] = d * (float)b[i].qs[j];
    }
}
static void q8_0_from_f32(const float *src, void *dst, int64_t n) {
    struct r1_block_q8_0 *b = dst;
    for (int64_t i = 0; i < n / R1_QK; i++) {
        const float *x = src + i * R1_QK;
        float amax = 0;
        for (int j = 0; j < R1_QK; j++) amax = fmaxf(amax, fabsf(x[j]));
        float d = amax / 127.0f, id = d ? 1.0f / d : 0.0f;
        b[i].d = r1_f32_to_f16(d);
        for (int j = 0; j < R1_QK; j++) b[i].qs[j] = (int8_t)roundf(x[j] * id);
    }
}

static void q4_0_to_f32(const void *src, float *dst, int64_t n) {
    const struct r1_block_q4_0 *b = src;
    for (int64_t i = 0; i < n / R1_QK; i++) {
        float d = r1_f16_to_f32(b[i].d);
        for (int j = 0; j < R1_QK / 2; j++) {
            dst[i * R1_QK + j] = d * (float)((b[i].qs[j] & 0x0f) - 8);
            dst[i * R1_QK + j + R1_QK / 2] = d * (float)((b[i].qs[j] >> 4) - 8);
        }
    }
}
static void q4_0_from_f32(const float *src, void *dst, int64_t n) {
    struct r1_block_q4_0 *b = dst;
    for (int64_t i = 0; i < n / R1_QK; i++) {
        const float *x = src + i * R1_QK;
        float amax = 0, max = 0;
        for (int j = 0; j < R1_QK; j++)
            if (fabsf(x[j]) > amax) {
                amax = fabsf(x[j]);
                max = x[j];
            }
        float d = max / -8.0f, id = d ? 1.0f / d : 0.0f;
        b[i].d = r1_f32_to_f16(d);
        for (int j = 0; j < R1_QK / 2; j++) {
            float a = x[j] * id + 8.5f, c = x[j + R1_QK / 2] * id + 8.5f;
            int qa = (int)a, qc = (int)c;
            if (qa > 15) qa = 15;
            if (qc > 15) qc = 15;
            if (qa < 0) qa = 0;
            if (qc < 0) qc = 0;
            b[i].qs[j] = (uint8_t)(qa | (qc << 4));
        }
    }
}

_Static_assert(sizeof(struct r1_block_q4_0x8) == 144, "q4_0x8 block is 144 bytes");

void r1_q4_0_to_x8(const struct r1_block_q4_0 *src, struct r1_block_q4_0x8 *dst, int64_t n) {
    for (int64_t s = 0; s < n / R1_QK_X8; s++, src += 8, dst++)
        for (int b = 0; b < 8; b++) {
            dst->d[b] = src[b].d;
            for (int c = 0; c < R1_QK / 2; c++) dst->qs[r1_q4_0x8_at(b, c)] = src[b].qs[c];
        }
}
static void q4_0x8_to_f32(const void *src, float *dst, int64_t n) {
    const struct r1_block_q4_0x8 *x = src;
    struct r1_block_q4_0 b[8];
    for (int64_t s = 0; s < n / R1_QK_X8; s++) {
        for (int i = 0; i < 8; i++) {
            b[i].d = x[s].d[i];
            for (int c = 0; c < R1_QK / 2; c++) b[i].qs[c] = x[s].qs[r1_q4_0x8_at(i, c)];
        }
        q4_0_to_f32(b, dst + s * R1_QK_X8, R1_QK_X8);
    }
}
static void q4_0x8_from_f32(const float *src, void *dst, int64_t n) {
    struct r1_block_q4_0 b[8];
    for (int64_t s = 0; s < n / R1_QK_X8; s++) {
        q4_0_from_f32(src + s * R1_QK_X8, b, R1_QK_X8);
        r1_q4_0_to_x8(b, (struct r1_block_q4_0x8 *)dst + s, R1_QK_X8);
    }
}

/* The _1/_5 formats and the K-quants live in quants.c. A NULL from_f32 means
 * r1infer cannot produce the type (it can still read it). */
const struct r1_dtype_traits r1_dtype_traits[R1_DTYPE_COUNT] = {
    [R1_DTYPE_F32] = {"f32", 1, 4, f32_to_f32, f32_from_f32},
    [R1_DTYPE_F16] = {"f16", 1, 2, f16_to_f32, f16_from_f32},
    [R1_DTYPE_BF16] = {"bf16", 1, 2, bf16_to_f32, bf16_from_f32},
    [R1_DTYPE_Q8_0] = {"q8_0", R1_QK, sizeof(struct r1_block_q8_0), q8_0_to_f32, q8_0_from_f32},
    [R1_DTYPE_Q4_0] = {"q4_0", R1_QK, sizeof(struct r1_block_q4_0), q4_0_to_f32, q4_0_from_f32},
    [R1_DTYPE_Q4_1] = {"q4_1", R1_QK, 20, r1_q4_1_to_f32, NULL},
    [R1_DTYPE_Q5_0] = {"q5_0", R1_QK, 22, r1_q5_0_to_f32, NULL},
    [R1_DTYPE_Q5_1] = {"q5_1", R1_QK, 24, r1_q5_1_to_f32, NULL},
    [R1_DTYPE_Q4_K] = {"q4_K", R1_QK_K, 144, r1_q4_K_to_f32, r1_q4_K_from_f32},
    [R1_DTYPE_Q5_K] = {"q5_K", R1_QK_K, 176, r1_q5_K_to_f32, NULL},
    [R1_DTYPE_Q6_K] = {"q6_K", R1_QK_K, 210, r1_q6_K_to_f32, r1_q6_K_from_f32},
    [R1_DTYPE_Q4_0X8] = {"q4_0x8", R1_QK_X8, sizeof(struct r1_block_q4_0x8), q4_0x8_to_f32,
                         q4_0x8_from_f32},
};

const char *r1_dtype_name(enum r1_dtype t) {
    if ((int)t < 0 || t >= R1_DTYPE_COUNT) return "?";
    return r1_dtype_traits[t].name;
}

int r1_dtype_parse(const char *name) {
    for (int i = 0; i < R1_DTYPE_COUNT; i++)
        if (strcasecmp(name, r1_dtype_traits[i].name) == 0) return i;
    return -1;
}

size_t r1_dtype_row_bytes(enum r1_dtype t, int64_t n) {
    const struct r1_dtype_traits *tr = &r1_dtype_traits[t];
    if (n < 0 || n % tr->block) return 0;
    return (size_t)(n / tr->block) * tr->block_size;
}

void r1_mat_row_f32(const struct r1_mat *m, int row, float *dst) {
    r1_dtype_traits[m->dtype].to_f32((const uint8_t *)m->data + (size_t)row * m->row_bytes, dst,
                                     m->cols);
}
