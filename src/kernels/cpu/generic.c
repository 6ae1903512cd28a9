/*
 * generic.c - the portable ISA table of the cpu backend: plain C tiles
 * (dequantize a chunk of a row, dot it with each token). Used where no SIMD
 * path fits the CPU, and as the shape every SIMD table follows. It must stay
 * plain C: no intrinsics, no target attributes.
 */
#include <math.h>
#include <string.h>

#include "kernels/cpu/cpu.h"
#include "kernels/cpu/kquants.h"
#include "util/util.h"

#define CHUNK 256 /* weights dequantized at a time (a multiple of every block) */

static void tile_c(int K, int k0, int k1, const uint8_t *w, size_t ws, int nr, const uint8_t *x, size_t xs, int nt,
                   float *out, enum r1_dtype dt) {
    (void)K;
    const struct r1_dtype_traits *tr = &r1_dtype_traits[dt];
    float buf[CHUNK];
    for (int r = 0; r < nr; r++) {
        float acc[R1_CPU_NT] = {0};
        for (int c = k0; c < k1; c += CHUNK) {
            int cn = k1 - c < CHUNK ? k1 - c : CHUNK;
            tr->to_f32(w + (size_t)r * ws + (size_t)(c / tr->block) * tr->block_size, buf, cn);
            for (int t = 0; t < nt; t++) {
                const float *xt = (const float *)(x + (size_t)t * xs) + c;
                float s = 0.0f;
                for (int i = 0; i < cn; i++) s += buf[i] * xt[i];
                acc[t] += s;
            }
        }
        for (int t = 0; t < nt; t++) out[t * R1_CPU_MR + r] = acc[t];
    }
}

#define TILE_C(DT, NAME)                                                                                               \
    static void NAME(int K, int k0, int k1, const uint8_t *w, size_t ws, int nr, const uint8_t *x, size_t xs, int nt,  \
                     float *out) {                                                                                     \
        tile_c(K, k0, k1, w, ws, nr, x, xs, nt, out, DT);                                                              \
    }
TILE_C(R1_DTYPE_F32, tile_f32)
TILE_C(R1_DTYPE_F16, tile_f16)
TILE_C(R1_DTYPE_BF16, tile_bf16)
TILE_C(R1_DTYPE_Q8_0, tile_q8_0)
TILE_C(R1_DTYPE_Q4_0, tile_q4_0)

/* The q8x8 form of 256 columns from their q8 scales d[8] and quants qs[256]. */
static void q8x8_from_q8(const float *d, const int8_t *qs, uint8_t *o) {
    int32_t nx[16] = {0};
    float dx[16];
    for (int i = 0; i < 16; i++) {
        int b = i % 8, u = i / 8;
        for (int part = 0; part < 4; part++) { /* xl0, xl1, xh0, xh1 */
            int j = 2 * (part % 2) + u, first = 16 * (part / 2) + 4 * j;
            for (int c = 0; c < 4; c++) {
                int8_t v = qs[32 * b + first + c];
                o[64 * part + 4 * i + c] = (uint8_t)v;
                nx[i] -= 8 * v;
            }
        }
        dx[i] = d[b];
    }
    memcpy(o + 256, nx, sizeof nx);
    memcpy(o + 320, dx, sizeof dx);
}

void r1_cpu_q8_to_q8x8(const uint8_t *q8, uint8_t *dst, int K) {
    const float *d = (const float *)q8;
    const int8_t *qs = (const int8_t *)(q8 + r1_cpu_q8_qoff(K));
    for (int s = 0; s < K / 256; s++) q8x8_from_q8(d + 8 * s, qs + 256 * s, dst + (size_t)s * R1_CPU_Q8X8_BYTES);
    const int G = K / 256, Kt = K % 256;
    if (Kt) { /* the tail in q8 form: its scales, then its quants */
        uint8_t *t = dst + (size_t)G * R1_CPU_Q8X8_BYTES;
        memcpy(t, d + 8 * G, (size_t)Kt / 32 * sizeof(float));
        memcpy(t + r1_cpu_q8_qoff(Kt), qs + 256 * G, (size_t)Kt);
    }
}

void r1_cpu_quant_q8x8_c(const float *x, uint8_t *dst, int K) {
    uint8_t q8[64 + 256]; /* r1_cpu_q8 form of 256 columns: d[8], then qs at 64 */
    for (int s = 0; s < K / 256; s++) {
        r1_cpu_quant_q8_c(x + (size_t)s * 256, q8, 256);
        q8x8_from_q8((const float *)q8, (const int8_t *)(q8 + 64), dst + (size_t)s * R1_CPU_Q8X8_BYTES);
    }
    if (K % 256) /* the tail in q8 form */
        r1_cpu_quant_q8_c(x + (size_t)K / 256 * 256, dst + (size_t)K / 256 * R1_CPU_Q8X8_BYTES, K % 256);
}

void r1_cpu_q8s_sums(uint8_t *tok, int K) {
    const float *d = (const float *)tok;
    const int8_t *q = (const int8_t *)(tok + r1_cpu_q8_qoff(K));
    int16_t *s16 = (int16_t *)(tok + r1_cpu_q8_stride(K));
    float *fs = (float *)(tok + r1_cpu_q8s_foff(K));
    for (int g = 0; g < K / 16; g++) {
        int s = 0;
        for (int i = 0; i < 16; i++) s += q[16 * g + i];
        s16[g] = (int16_t)s;
    }
    for (int b = 0; b < K / 32; b++) fs[b] = d[b] * (float)(s16[2 * b] + s16[2 * b + 1]);
}

void r1_cpu_quant_q8_c(const float *x, uint8_t *dst, int K) {
    float *d = (float *)dst;
    int8_t *qs = (int8_t *)(dst + r1_cpu_q8_qoff(K));
    for (int b = 0; b < K / 32; b++) {
        const float *xb = x + b * 32;
        float amax = 0.0f;
        for (int j = 0; j < 32; j++) amax = fmaxf(amax, fabsf(xb[j]));
        float db = amax / 127.0f, id = db ? 1.0f / db : 0.0f;
        d[b] = db;
        for (int j = 0; j < 32; j++) qs[b * 32 + j] = (int8_t)lrintf(xb[j] * id);
    }
}

void r1_cpu_quant_q8_lo_c(const float *r, const float *dh, uint8_t *dst, int K) {
    float *d = (float *)dst;
    int8_t *qs = (int8_t *)(dst + r1_cpu_q8_qoff(K));
    for (int b = 0; b < K / 32; b++) {
        const float dl = dh[b] * (1.0f / 256.0f), id = dl ? 1.0f / dl : 0.0f;
        d[b] = dl;
        for (int j = 0; j < 32; j++) {
            float v = rintf(r[b * 32 + j] * id);
            qs[b * 32 + j] = (int8_t)(v > 127.0f ? 127 : v < -127.0f ? -127 : (int)v);
        }
    }
}

static float dot_f32(const float *a, const float *b, int n) {
    float s = 0.0f;
    for (int i = 0; i < n; i++) s += a[i] * b[i];
    return s;
}
static float dot_f16(const float *a, const uint16_t *b, int n) {
    float s = 0.0f;
    for (int i = 0; i < n; i++) s += a[i] * r1_f16_to_f32(b[i]);
    return s;
}
static void axpy_f32(float a, const float *x, float *y, int n) {
    for (int i = 0; i < n; i++) y[i] += a * x[i];
}
static void axpy_f16(float a, const uint16_t *x, float *y, int n) {
    for (int i = 0; i < n; i++) y[i] += a * r1_f16_to_f32(x[i]);
}
static void f32_to_f16(const float *x, uint16_t *y, int n) {
    for (int i = 0; i < n; i++) y[i] = r1_f32_to_f16(x[i]);
}
static int always(void) { return 1; }

const struct r1_cpu_isa r1_cpu_generic = {
    .name = "generic",
    .available = always,
    .mr = R1_CPU_MR,
    .nt = R1_CPU_NT,
    .mm =
        {
            [R1_DTYPE_F32] = {R1_CPU_ACT_F32, tile_f32},
            [R1_DTYPE_F16] = {R1_CPU_ACT_F32, tile_f16},
            [R1_DTYPE_BF16] = {R1_CPU_ACT_F32, tile_bf16},
            [R1_DTYPE_Q8_0] = {R1_CPU_ACT_F32, tile_q8_0},
            [R1_DTYPE_Q4_0] = {R1_CPU_ACT_F32, tile_q4_0},
            [R1_DTYPE_Q4_1] = {R1_CPU_ACT_Q8, r1_kq_tile_q4_1_c},
            [R1_DTYPE_Q5_0] = {R1_CPU_ACT_Q8, r1_kq_tile_q5_0_c},
            [R1_DTYPE_Q5_1] = {R1_CPU_ACT_Q8, r1_kq_tile_q5_1_c},
            [R1_DTYPE_Q4_K] = {R1_CPU_ACT_Q8, r1_kq_tile_q4_K_c},
            [R1_DTYPE_Q5_K] = {R1_CPU_ACT_Q8, r1_kq_tile_q5_K_c},
            [R1_DTYPE_Q6_K] = {R1_CPU_ACT_Q8, r1_kq_tile_q6_K_c},
        },
    .quant_q8 = r1_cpu_quant_q8_c,
    .dot_f32 = dot_f32,
    .dot_f16 = dot_f16,
    .axpy_f32 = axpy_f32,
    .axpy_f16 = axpy_f16,
    .f32_to_f16 = f32_to_f16,
};
