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

static void f32_to_f32(const void *src, float *dst, int64_t n) { memcpy(dst, src, (size_t)n * sizeof(float)); }
static void f32_from_f32(const float *src, void *dst, int64_t n) { memcpy(dst, src, (size_t)n * sizeof(float)); }
/* f16 conversions with F16C where the CPU has it (loading converts whole
 * checkpoints: ~10x faster than the bit-by-bit C). Same results as the C for
 * every number (round to nearest even, subnormals kept); a NaN keeps its
 * payload instead of becoming the canonical one. */
#if defined(__x86_64__)
#include <immintrin.h>

#include "kernels/cpu/x86/x86.h"
__attribute__((target("avx,f16c"))) static int64_t f16_to_f32_f16c(const uint16_t *s, float *d, int64_t n) {
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) _mm256_storeu_ps(d + i, _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(s + i))));
    return i;
}
__attribute__((target("avx,f16c"))) static int64_t f16_from_f32_f16c(const float *s, uint16_t *d, int64_t n) {
    int64_t i = 0;
    for (; i + 8 <= n; i += 8)
        _mm_storeu_si128((__m128i *)(d + i), _mm256_cvtps_ph(_mm256_loadu_ps(s + i), _MM_FROUND_TO_NEAREST_INT));
    return i;
}
static int have_f16c(void) { /* load conversions may run on several threads */
    static _Atomic int f = -1;
    if (f < 0) {
        __builtin_cpu_init();
        f = __builtin_cpu_supports("avx") && r1_x86_has_f16c(); /* clang 14 lacks "f16c" here */
    }
    return f;
}
#endif
static void f16_to_f32(const void *src, float *dst, int64_t n) {
    const uint16_t *s = src;
    int64_t i = 0;
#if defined(__x86_64__)
    if (have_f16c()) i = f16_to_f32_f16c(s, dst, n);
#endif
    for (; i < n; i++) dst[i] = r1_f16_to_f32(s[i]);
}
static void f16_from_f32(const float *src, void *dst, int64_t n) {
    uint16_t *d = dst;
    int64_t i = 0;
#if defined(__x86_64__)
    if (have_f16c()) i = f16_from_f32_f16c(src, d, n);
#endif
    for (; i < n; i++) d[i] = r1_f32_to_f16(src[i]);
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
/* roundf (halves away from zero) for |v| <= 128, inlined: the library call
 * was most of a q8_0 load */
static inline int round_away(float v) {
    int i = (int)v; /* toward zero, exact here */
    float fr = v - (float)i;
    return i + (fr >= 0.5f) - (fr <= -0.5f);
}
static void q8_0_from_f32(const float *src, void *dst, int64_t n) {
    struct r1_block_q8_0 *b = dst;
    for (int64_t i = 0; i < n / R1_QK; i++) {
        const float *x = src + i * R1_QK;
        float amax = 0;
        for (int j = 0; j < R1_QK; j++) {
            float a = fabsf(x[j]);
            amax = a > amax ? a : amax; /* fmaxf without the library call (no NaNs here) */
        }
        float d = amax / 127.0f, id = d ? 1.0f / d : 0.0f;
        b[i].d = r1_f32_to_f16(d);
        for (int j = 0; j < R1_QK; j++) b[i].qs[j] = (int8_t)round_away(x[j] * id);
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
const struct r1_dtype_traits r1_dtype_traits[R1_DTYPE_ALL] = {
    [R1_DTYPE_F32] = {"f32", 1, 4, f32_to_f32, f32_from_f32},
    [R1_DTYPE_F16] = {"f16", 1, 2, f16_to_f32, f16_from_f32},
    [R1_DTYPE_BF16] = {"bf16", 1, 2, bf16_to_f32, bf16_from_f32},
    [R1_DTYPE_Q8_0] = {"q8_0", R1_QK, sizeof(struct r1_block_q8_0), q8_0_to_f32, q8_0_from_f32},
    [R1_DTYPE_Q4_0] = {"q4_0", R1_QK, sizeof(struct r1_block_q4_0), q4_0_to_f32, q4_0_from_f32},
    [R1_DTYPE_Q4_1] = {"q4_1", R1_QK, 20, r1_q4_1_to_f32, r1_q4_1_from_f32},
    [R1_DTYPE_Q5_0] = {"q5_0", R1_QK, 22, r1_q5_0_to_f32, r1_q5_0_from_f32},
    [R1_DTYPE_Q5_1] = {"q5_1", R1_QK, 24, r1_q5_1_to_f32, r1_q5_1_from_f32},
    [R1_DTYPE_Q4_K] = {"q4_K", R1_QK_K, 144, r1_q4_K_to_f32, r1_q4_K_from_f32},
    [R1_DTYPE_Q5_K] = {"q5_K", R1_QK_K, 176, r1_q5_K_to_f32, r1_q5_K_from_f32},
    [R1_DTYPE_Q6_K] = {"q6_K", R1_QK_K, 210, r1_q6_K_to_f32, r1_q6_K_from_f32},
    [R1_DTYPE_Q4_0X8] = {"q4_0x8", R1_QK_X8, sizeof(struct r1_block_q4_0x8), q4_0x8_to_f32, q4_0x8_from_f32},
    [R1_DTYPE_Q4_1X8] = {"q4_1x8", R1_QK, 20, r1_q4_1x8_to_f32, r1_q4_1x8_from_f32},
    [R1_DTYPE_Q8_0X8] = {"q8_0x8", R1_QK, sizeof(struct r1_block_q8_0), r1_q8_0x8_to_f32, r1_q8_0x8_from_f32},
    [R1_DTYPE_Q4_KX8] = {"q4_Kx8", R1_QK_K, 144, r1_q4_Kx8_to_f32, r1_q4_Kx8_from_f32},
    [R1_DTYPE_Q5_KX8] = {"q5_Kx8", R1_QK_K, 176, r1_q5_Kx8_to_f32, r1_q5_Kx8_from_f32},
    [R1_DTYPE_Q6_KX8] = {"q6_Kx8", R1_QK_K, 210, r1_q6_Kx8_to_f32, r1_q6_Kx8_from_f32},
};

const char *r1_dtype_name(enum r1_dtype t) {
    if ((int)t < 0 || (int)t >= R1_DTYPE_ALL) return "?";
    return r1_dtype_traits[t].name;
}

static int parse_below(const char *name, int end) {
    for (int i = 0; i < end; i++)
        if (strcasecmp(name, r1_dtype_traits[i].name) == 0) return i;
    return -1;
}
int r1_dtype_parse(const char *name) { return parse_below(name, R1_DTYPE_COUNT); }
int r1_dtype_parse_any(const char *name) { return parse_below(name, R1_DTYPE_ALL); }

size_t r1_dtype_row_bytes(enum r1_dtype t, int64_t n) {
    const struct r1_dtype_traits *tr = &r1_dtype_traits[t];
    if (n < 0 || n % tr->block) return 0;
    return (size_t)(n / tr->block) * tr->block_size;
}

void r1_mat_row_f32(const struct r1_mat *m, int row, float *dst) {
    r1_dtype_traits[m->dtype].to_f32((const uint8_t *)m->data + (size_t)row * m->row_bytes, dst, m->cols);
}
