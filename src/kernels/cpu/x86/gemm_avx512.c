/*
 * gemm_avx512.c - batches (prefill, more than R1_CPU_PANEL_MIN_T tokens) of
 * the regrouped K-quants (q4_Kx8, q5_Kx8, q6_Kx8; Q4_K_M files), q8_0x8
 * and the float formats (f32, f16, bf16) on AVX-512 machines without AMX, through an
 * f32 GEMM (cpu.h r1_cpu_panel_fn; where AMX runs, cpu.c keeps its blocks).
 * It is gemm_avx2.c's panel on zmm: per block of up to 64 weight rows and
 * slice of KP = 256 columns (the last one shorter where K % 256 != 0), the
 * weights are dequantized once to f32 (amx_panel.c's r1_x86_x8_row_f32,
 * gemm_avx2.c's float rows) into a
 * panel that stores each group of 32 rows column by column (two zmm per
 * column, 32 KiB per group: in L1 while the tokens pass); then 32 rows x 8
 * tokens per pass in 16 zmm accumulators, each activation an embedded
 * broadcast. The activations stay f32, so the products are f32-exact and the
 * sums differ from ref's only in order. The decode tiles it replaces in
 * batches run on two-part int8 activations: twice the integer work.
 *
 * Must not: allocate (thread scratch slot 2), read activations past column
 * K. x86-64 only; target attributes.
 */
#include "kernels/cpu/cpu.h"

#if defined(__x86_64__)
#include <immintrin.h>
#include <string.h>

#include "kernels/cpu/x86/x86.h"
#include "kernels/dtype.h"

#define TGT_S "avx512f,avx512bw,avx512vl,avx512dq,avx512vnni,avx2,fma,f16c"
#define TGT __attribute__((target(TGT_S)))
#define INL static inline __attribute__((always_inline, target(TGT_S)))

#define KP 256 /* columns per panel slice (one x8 group) */
#define GR 32  /* rows per group (two zmm) */
#define NTP 8  /* tokens per pass */
#define PF_ROWS 2

/* 8 rows of 8 floats (src, row stride ss) transposed: column j to dst + j * GR */
#define tr8(src, ss, dst) r1_x86_tr8((src), (ss), (dst), GR)

/* A row's columns [k0, k1) as f32 into dst (k0 a multiple of KP, k1 of 256
 * or K). */
typedef void (*deq_fn)(const uint8_t *row, int k0, int k1, float *dst);

/* Rows [0, nr) of w, columns [k0, k1) (kn = k1 - k0 <= KP), into the group
 * pg (pg[k * GR + i] = row i, column k0 + k), rows past nr and columns from
 * kn to kn rounded up to 8 zero. stage: GR x KP floats. */
static TGT void fill_group(deq_fn deq, int K, const uint8_t *w, size_t ws, int nr, int k0, int k1, float *stage,
                           float *pg) {
    const int kn = k1 - k0, kn8 = (kn + 7) & ~7;
    /* the slice's bytes of a row (about: the formats' blocks are whole) */
    const size_t b0 = (size_t)((double)ws * k0 / K), b1 = (size_t)((double)ws * k1 / K);
    for (int i = 0; i < GR; i++) {
        float *s = stage + (size_t)i * KP;
        if (i + PF_ROWS < nr)
            for (size_t o = b0; o < b1; o += 64)
                _mm_prefetch((const char *)(w + (size_t)(i + PF_ROWS) * ws + o), _MM_HINT_T0);
        if (i < nr) deq(w + (size_t)i * ws, k0, k1, s);
        else memset(s, 0, (size_t)kn * sizeof(float));
        for (int k = kn; k < kn8; k++) s[k] = 0.0f;
    }
    for (int r = 0; r < GR; r += 8)
        for (int k = 0; k < kn8; k += 8) tr8(stage + (size_t)r * KP + k, KP, pg + (size_t)k * GR + r);
}

/* C[t * ldc + i] (= or +=) sum over k < kn of pg[k * GR + i] xt[t][k], i <
 * 32, t < NT */
INL void gemm_pass(const int NT, const float *pg, int kn, const float *const *xt, float *C, int ldc, int add) {
    __m512 acc[NTP][2];
    _Pragma("GCC unroll 8") for (int t = 0; t < NT; t++) acc[t][0] = acc[t][1] = _mm512_setzero_ps();
    const float *x0 = xt[0], *x1 = xt[1], *x2 = xt[2], *x3 = xt[3], *x4 = xt[4], *x5 = xt[5], *x6 = xt[6], *x7 = xt[7];
    _Pragma("GCC unroll 2") for (int k = 0; k < kn; k++) {
        __m512 a0 = _mm512_load_ps(pg), a1 = _mm512_load_ps(pg + 16), b;
#define GEMM_TOK(T_, X_)                                                                                               \
    if (NT > T_) {                                                                                                     \
        b = _mm512_set1_ps(*X_++);                                                                                     \
        acc[T_][0] = _mm512_fmadd_ps(a0, b, acc[T_][0]);                                                               \
        acc[T_][1] = _mm512_fmadd_ps(a1, b, acc[T_][1]);                                                               \
    }
        GEMM_TOK(0, x0)
        GEMM_TOK(1, x1)
        GEMM_TOK(2, x2)
        GEMM_TOK(3, x3)
        GEMM_TOK(4, x4)
        GEMM_TOK(5, x5)
        GEMM_TOK(6, x6)
        GEMM_TOK(7, x7)
#undef GEMM_TOK
        pg += GR;
    }
    _Pragma("GCC unroll 8") for (int t = 0; t < NT; t++) {
        float *c = C + (size_t)t * ldc;
        if (add) {
            acc[t][0] = _mm512_add_ps(acc[t][0], _mm512_loadu_ps(c));
            acc[t][1] = _mm512_add_ps(acc[t][1], _mm512_loadu_ps(c + 16));
        }
        _mm512_storeu_ps(c, acc[t][0]);
        _mm512_storeu_ps(c + 16, acc[t][1]);
    }
}

static TGT void gemm_n(int nt, const float *pg, int kn, const float *const *xt, float *C, int ldc, int add) {
    switch (nt) {
    case 8:
        gemm_pass(8, pg, kn, xt, C, ldc, add);
        break;
    case 7:
        gemm_pass(7, pg, kn, xt, C, ldc, add);
        break;
    case 6:
        gemm_pass(6, pg, kn, xt, C, ldc, add);
        break;
    case 5:
        gemm_pass(5, pg, kn, xt, C, ldc, add);
        break;
    case 4:
        gemm_pass(4, pg, kn, xt, C, ldc, add);
        break;
    case 3:
        gemm_pass(3, pg, kn, xt, C, ldc, add);
        break;
    case 2:
        gemm_pass(2, pg, kn, xt, C, ldc, add);
        break;
    default:
        gemm_pass(1, pg, kn, xt, C, ldc, add);
        break;
    }
}

/* r1_cpu_panel_fn on the rows deq unpacks */
static TGT void panel_run(deq_fn deq, int K, const uint8_t *w, size_t ws, int mc, const float *x, size_t xs, int tn,
                          float *C, int ldc) {
    const int ng = (mc + GR - 1) / GR;
    float *panel = (float *)r1_cpu_scratch(2, (size_t)(ng + 1) * KP * GR * sizeof(float));
    float *stage = panel + (size_t)ng * KP * GR;
    for (int k0 = 0; k0 < K; k0 += KP) {
        const int k1 = K - k0 < KP ? K : k0 + KP, kn = k1 - k0;
        for (int g = 0; g < ng; g++)
            fill_group(deq, K, w + (size_t)g * GR * ws, ws, mc - g * GR < GR ? mc - g * GR : GR, k0, k1, stage,
                       panel + (size_t)g * KP * GR);
        for (int g = 0; g < ng; g++)
            for (int t = 0; t < tn; t += NTP) {
                const int nt = tn - t < NTP ? tn - t : NTP;
                const float *xt[NTP];
                for (int j = 0; j < NTP; j++)
                    xt[j] = (const float *)((const uint8_t *)x + (size_t)(t + (j < nt ? j : 0)) * xs) + k0;
                gemm_n(nt, panel + (size_t)g * KP * GR, kn, xt, C + (size_t)t * ldc + g * GR, ldc, k0 > 0);
            }
    }
}

/* the regrouped K-quants' rows (K % 256 == 0) */
#define X8_ROW(NAME, DT)                                                                                               \
    static TGT void NAME(const uint8_t *row, int k0, int k1, float *dst) { r1_x86_x8_row_f32(DT, row, k0, k1, dst); }
X8_ROW(row_q4_Kx8, R1_DTYPE_Q4_KX8)
X8_ROW(row_q5_Kx8, R1_DTYPE_Q5_KX8)
X8_ROW(row_q6_Kx8, R1_DTYPE_Q6_KX8)
/* q8_0x8 rows: whole groups of 256 columns (8 blocks, 8 x the dtype's
 * block_size bytes), then the row's last K % 256 columns in plain q8_0
 * blocks (a slice shorter than KP is that tail: slices start at
 * multiples of 256); r1_x86_x8_row_f32 takes one group at a time */
static TGT void row_q8_0x8(const uint8_t *row, int k0, int k1, float *dst) {
    const uint8_t *g = row + (size_t)(k0 / 256) * 8 * r1_dtype_traits[R1_DTYPE_Q8_0X8].block_size;
    if (k1 - k0 == KP) r1_x86_x8_row_f32(R1_DTYPE_Q8_0X8, g, 0, 256, dst);
    else r1_dtype_traits[R1_DTYPE_Q8_0].to_f32(g, dst, k1 - k0);
}

/* FN: the panel GEMM on the rows DEQ unpacks */
#define PANEL(FN, DEQ)                                                                                                 \
    TGT void FN(int K, const uint8_t *w, size_t ws, int mc, const float *x, size_t xs, int tn, float *C, int ldc) {    \
        panel_run(DEQ, K, w, ws, mc, x, xs, tn, C, ldc);                                                               \
    }
PANEL(r1_x86_panel_avx512_f32, r1_x86_row_f32_f32)
PANEL(r1_x86_panel_avx512_f16, r1_x86_row_f16_f32)
PANEL(r1_x86_panel_avx512_bf16, r1_x86_row_bf16_f32)
PANEL(r1_x86_panel_avx512_q8_0x8, row_q8_0x8)
PANEL(r1_x86_panel_avx512_q4_Kx8, row_q4_Kx8)
PANEL(r1_x86_panel_avx512_q5_Kx8, row_q5_Kx8)
PANEL(r1_x86_panel_avx512_q6_Kx8, row_q6_Kx8)

#endif /* __x86_64__ */
