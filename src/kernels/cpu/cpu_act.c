/*
 * cpu_act.c - the activation forms of the cpu matmuls (cpu.h R1_CPU_ACT_*):
 * each matmul hands its f32 tokens to r1_cpu_prep_act, which writes them in
 * the form its tile reads (bf16 rows, or three bf16 parts in VNNI planes
 * for the AMX blocks, q16, the float orders f32eo and f32eo32, q8 / q8s /
 * q8x8 in one or two parts, q8w) into thread-local scratch (slot 0).
 * Quantizers come from the ISA table where it has them, else the plain-C
 * forms here. The matmul plumbing that reads them is in cpu.c.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/cpu/cpu.h"
#include "util/env.h"
#include "util/util.h"

static uint8_t *scratch(size_t bytes) { return r1_cpu_scratch(0, bytes); }

/* Integer activations in 1 or 2 parts (cpu.h): 1 or 2 when R1_CPU_ACT or
 * r1_cpu_set_act_parts forces it on every format, 0 for each format's own
 * (r1_cpu_mm.one_part), -1 until first read. */
static _Atomic int act_parts = -1;
void r1_cpu_set_act_parts(int parts) { act_parts = parts == 1 ? 1 : parts == 2 ? 2 : -1; }
static int act_forced(void) {
    int p = act_parts;
    if (p < 0) {
        const char *e = r1_env("R1_CPU_ACT");
        p = e && !strcmp(e, "q8") ? 1 : e && !strcmp(e, "q8x2") ? 2 : 0;
        act_parts = p;
    }
    return p;
}
int r1_cpu_act_parts(void) {
    int p = act_forced();
    return p ? p : 2;
}
int r1_cpu_mm_parts(const struct r1_cpu_mm *mm) {
    int p = act_forced();
    return p ? p : mm->one_part ? 1 : 2;
}
int r1_cpu_act_rows(const struct r1_cpu_mm *mm) {
    return r1_cpu_act_q8(mm->act) || mm->act == R1_CPU_ACT_Q8X8 ? r1_cpu_mm_parts(mm) : 1;
}
/* A q8 token (quantized in place) completed into its form: the sums of q8s. */
static void act_finish(const struct r1_cpu_mm *mm, uint8_t *tok, int K) {
    if (mm->act == R1_CPU_ACT_Q8S) r1_cpu_q8s_sums(tok, K);
}

/* x's two q8 parts (r1_cpu_set_act_parts) in q8 form into h and l; r: room
 * for K floats when the ISA has no quant_q8_2. */
static void quant_parts(const struct r1_cpu_isa *isa, const float *x, uint8_t *h, uint8_t *l, int K, float *r) {
    if (isa->quant_q8_2) {
        isa->quant_q8_2(x, h, l, K);
        return;
    }
    isa->quant_q8(x, h, K);
    const float *d = (const float *)h;
    const int8_t *q = (const int8_t *)(h + r1_cpu_q8_qoff(K));
    for (int k = 0; k < K; k++) r[k] = x[k] - d[k / 32] * (float)q[k];
    r1_cpu_quant_q8_lo_c(r, d, l, K);
}

/* A token in q8w form (cpu.h) from its q8 form h (one part) or its two
 * parts h and l: q = 256 q_h + q_l at l's scale (d_h / 256), the integers
 * the pair tiles fold in int32; sums: and the q8ws form's fs, each part's
 * d x its block's sum, added (q8s's fs, which the pair tiles add alike). */
void r1_cpu_q8w_fold_c(const uint8_t *h, const uint8_t *l, uint8_t *dst, int K, int sums) {
    const size_t qoff = r1_cpu_q8_qoff(K);
    memcpy(dst, l ? l : h, (size_t)K / 32 * sizeof(float));
    const int8_t *qh = (const int8_t *)(h + qoff), *ql = l ? (const int8_t *)(l + qoff) : NULL;
    int16_t *q = (int16_t *)(dst + qoff);
    for (int i = 0; i < K; i++) q[i] = (int16_t)(ql ? qh[i] * 256 + ql[i] : qh[i]); /* one part: q_h at d_h */
    if (!sums) return;
    float *fs = (float *)(dst + r1_cpu_q8ws_foff(K));
    for (int b = 0; b < K / 32; b++) {
        int sh = 0, sl = 0;
        for (int i = 0; i < 32; i++) sh += qh[32 * b + i], sl += ql ? ql[32 * b + i] : 0;
        fs[b] = ((const float *)h)[b] * (float)sh;
        if (ql) fs[b] += ((const float *)l)[b] * (float)sl;
    }
}

static void quant_bf16_c(const float *x, uint16_t *dst, int K) {
    for (int i = 0; i < K; i++) dst[i] = r1_f32_to_bf16(x[i]);
}

/* q16 form (cpu.h R1_CPU_ACT_Q16), plain C */
static void quant_q16_c(const float *x, uint8_t *dst, int K) {
    float *d = (float *)dst;
    int16_t *q = (int16_t *)(dst + r1_cpu_q8_qoff(K));
    for (int b = 0; b < K / 32; b++) {
        float amax = 0.0f;
        for (int i = 0; i < 32; i++) amax = fmaxf(amax, fabsf(x[32 * b + i]));
        d[b] = amax / 32767.0f;
        const float id = amax > 0.0f ? 32767.0f / amax : 0.0f;
        for (int i = 0; i < 32; i++) q[32 * b + i] = (int16_t)lrintf(x[32 * b + i] * id);
    }
}

/* One token in f32eo32 form (cpu.h): whole groups of 32 by a loop the
 * compiler vectorizes, the last K % 32 columns padded with zeros. */
static void to_f32eo32(const float *restrict x, float *restrict o, int K) {
    int g = 0;
    for (; g + 32 <= K; g += 32)
        for (int i = 0; i < 16; i++) o[g + i] = x[g + 2 * i], o[g + 16 + i] = x[g + 2 * i + 1];
    if (g < K)
        for (int i = 0; i < 16; i++) {
            o[g + i] = g + 2 * i < K ? x[g + 2 * i] : 0.0f;
            o[g + 16 + i] = g + 2 * i + 1 < K ? x[g + 2 * i + 1] : 0.0f;
        }
}

/* bf16(f) as VCVTNEPS2BF16 makes it (the AMX sets' conversion): round to
 * nearest even, a denormal to a zero of its sign (the tiles read a denormal
 * bf16 as zero in any case) */
static uint16_t bf16_hw(float f) {
    uint32_t u;
    memcpy(&u, &f, 4);
    return (u & 0x7f800000u) == 0 ? (uint16_t)(u >> 16 & 0x8000u) : r1_f32_to_bf16(f);
}

/* x0 = bf16(x), x1 = bf16(x - x0), x2 = bf16(x - x0 - x1) (bf16_hw):
 * 24 significant bits, x to f32 precision; value (t, k) at
 * 32-bit word 16 (k % 32 / 2) + t % 16 of the 1 KiB of (t / 16, k / 32),
 * half k % 2 */
void r1_cpu_vnni_parts_c(const float *x, int T, int K, uint8_t *v, size_t plane) {
    const int nc = K / 32;
    memset(v, 0, 3 * plane); /* tokens past T */
    for (int t = 0; t < T; t++)
        for (int k = 0; k < K; k++) {
            const float xv = x[(size_t)t * K + k];
            const uint16_t h0 = bf16_hw(xv);
            const float r = xv - r1_bf16_to_f32(h0);
            const uint16_t h1 = bf16_hw(r), h2 = bf16_hw(r - r1_bf16_to_f32(h1));
            const size_t at = ((size_t)(t / 16) * nc + k / 32) * 1024 + (size_t)(16 * (k % 32 / 2) + t % 16) * 4 +
                              (size_t)(k % 2) * 2;
            memcpy(v + at, &h0, 2);
            memcpy(v + plane + at, &h1, 2);
            memcpy(v + 2 * plane + at, &h2, 2);
        }
}

const uint8_t *r1_cpu_prep_act(const struct r1_cpu_isa *isa, const struct r1_cpu_mm *mm, const float *x, int T, int K,
                               size_t *xs) {
    if (mm->act == R1_CPU_ACT_F32) {
        *xs = (size_t)K * sizeof(float);
        return (const uint8_t *)x;
    }
    if (mm->act == R1_CPU_ACT_BF16) {
        if (mm->batch_block && K % 32 == 0) { /* what a block reads (mm_for sets it only then) */
            const size_t plane = r1_cpu_vnni_bytes(K, T);
            uint8_t *v = scratch(3 * plane);
            (isa->vnni_parts ? isa->vnni_parts : r1_cpu_vnni_parts_c)(x, T, K, v, plane);
            *xs = plane;
            return v;
        }
        size_t s = r1_cpu_bf16_stride(K);
        uint8_t *buf = scratch((size_t)T * s);
        void (*q)(const float *, uint16_t *, int) = isa->quant_bf16 ? isa->quant_bf16 : quant_bf16_c;
        for (int t = 0; t < T; t++) q(x + (size_t)t * K, (uint16_t *)(buf + (size_t)t * s), K);
        *xs = s;
        return buf;
    }
    if (mm->act == R1_CPU_ACT_Q16) {
        size_t s = r1_cpu_q8w_stride(K);
        uint8_t *buf = scratch((size_t)T * s);
        void (*q)(const float *, uint8_t *, int) = isa->quant_q16 ? isa->quant_q16 : quant_q16_c;
        for (int t = 0; t < T; t++) q(x + (size_t)t * K, buf + (size_t)t * s, K);
        *xs = s;
        return buf;
    }
    if (mm->act == R1_CPU_ACT_F32EO) {
        size_t s = r1_cpu_f32eo_stride(K);
        uint8_t *buf = scratch((size_t)T * s);
        for (int t = 0; t < T; t++) {
            const float *xr = x + (size_t)t * K;
            float *o = (float *)(buf + (size_t)t * s);
            for (int g = 0; g < K; g += 16)
                for (int i = 0; i < 8; i++) o[g + i] = xr[g + 2 * i], o[g + 8 + i] = xr[g + 2 * i + 1];
        }
        *xs = s;
        return buf;
    }
    if (mm->act == R1_CPU_ACT_F32EO32) {
        size_t s = r1_cpu_f32eo32_stride(K);
        uint8_t *buf = scratch((size_t)T * s);
        for (int t = 0; t < T; t++) to_f32eo32(x + (size_t)t * K, (float *)(buf + (size_t)t * s), K);
        *xs = s;
        return buf;
    }
    if (mm->act == R1_CPU_ACT_Q8W || mm->act == R1_CPU_ACT_Q8WS) { /* one row a token, the parts folded */
        const int sums = mm->act == R1_CPU_ACT_Q8WS;
        const size_t s = sums ? r1_cpu_q8ws_stride(K) : r1_cpu_q8w_stride(K), s8 = r1_cpu_q8_stride(K);
        uint8_t *buf = scratch((size_t)T * s + 2 * s8 + (size_t)K * sizeof(float));
        uint8_t *h = buf + (size_t)T * s, *l = h + s8;
        const int two = r1_cpu_mm_parts(mm) == 2;
        void (*fold)(const uint8_t *, const uint8_t *, uint8_t *, int, int) =
            isa->q8w_fold ? isa->q8w_fold : r1_cpu_q8w_fold_c;
        for (int t = 0; t < T; t++) {
            const float *xt = x + (size_t)t * K;
            if (two) quant_parts(isa, xt, h, l, K, (float *)(l + s8));
            else isa->quant_q8(xt, h, K);
            fold(h, two ? l : NULL, buf + (size_t)t * s, K, sums);
        }
        *xs = s;
        return buf;
    }
    const int x8 = mm->act == R1_CPU_ACT_Q8X8, parts = r1_cpu_act_rows(mm);
    if (x8 && parts == 1) {
        size_t s = r1_cpu_q8x8_stride(K);
        uint8_t *buf = scratch((size_t)T * s);
        void (*q)(const float *, uint8_t *, int) = isa->quant_q8x8 ? isa->quant_q8x8 : r1_cpu_quant_q8x8_c;
        for (int t = 0; t < T; t++) q(x + (size_t)t * K, buf + (size_t)t * s, K);
        *xs = s;
        return buf;
    }
    const size_t s = x8                          ? r1_cpu_q8x8_stride(K)
                     : mm->act == R1_CPU_ACT_Q8S ? r1_cpu_q8s_stride(K)
                                                 : r1_cpu_q8_stride(K),
                 s8 = r1_cpu_q8_stride(K);
    if (parts == 1) {
        uint8_t *buf = scratch((size_t)T * s);
        for (int t = 0; t < T; t++) {
            isa->quant_q8(x + (size_t)t * K, buf + (size_t)t * s, K);
            act_finish(mm, buf + (size_t)t * s, K);
        }
        *xs = s;
        return buf;
    }
    /* two parts (r1_cpu_set_act_parts): row 2t = q8(x), row 2t+1 = q8 of
     * what that left, each rearranged into q8x8 form for x8 tiles */
    void (*q2)(const float *, uint8_t *, uint8_t *, int) = x8 ? isa->quant_q8x8_2 : isa->quant_q8_2;
    if (q2) {
        uint8_t *buf = scratch((size_t)T * 2 * s);
        for (int t = 0; t < T; t++) {
            uint8_t *h = buf + (size_t)(2 * t) * s, *l = h + s;
            q2(x + (size_t)t * K, h, l, K);
            if (!x8) act_finish(mm, h, K), act_finish(mm, l, K); /* q8s sums */
        }
        *xs = mm->pairs ? 2 * s : s; /* a pair tile's token: both rows */
        return buf;
    }
    uint8_t *buf = scratch((size_t)T * 2 * s + 2 * s8 + (size_t)K * sizeof(float));
    uint8_t *hi = buf + (size_t)T * 2 * s, *lo = hi + s8;
    float *r = (float *)(lo + s8);
    for (int t = 0; t < T; t++) {
        const float *xt = x + (size_t)t * K;
        uint8_t *h = x8 ? hi : buf + (size_t)(2 * t) * s, *l = x8 ? lo : buf + (size_t)(2 * t + 1) * s;
        quant_parts(isa, xt, h, l, K, r);
        if (x8) {
            r1_cpu_q8_to_q8x8(h, buf + (size_t)(2 * t) * s, K);
            r1_cpu_q8_to_q8x8(l, buf + (size_t)(2 * t + 1) * s, K);
        } else {
            act_finish(mm, h, K);
            act_finish(mm, l, K);
        }
    }
    *xs = mm->pairs ? 2 * s : s;
    return buf;
}
