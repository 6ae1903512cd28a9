/*
 * cpu.h - the inside of the cpu backend: one table of per-ISA primitives
 * (matmul tiles per weight dtype, activation quantization, the small vector
 * helpers attention needs). cpu.c owns the kernels, the thread split and the
 * blocking (cpu_attn.c the attention); an ISA file (generic.c, x86/avx2.c, x86/avx512.c, arm/neon.c)
 * only fills a table. The table is chosen once at init from what the CPU
 * supports; tests may select any available one with r1_cpu_select.
 * Nothing here allocates or knows about threads.
 */
#ifndef R1_CPU_H
#define R1_CPU_H

#include <stddef.h>
#include <stdint.h>

#include "kernels/kernels.h"

#define R1_CPU_MR 4 /* most weight rows one tile call computes (also the out stride) */
#define R1_CPU_NT 4 /* most tokens one tile call computes (pair_nt too) */

/* How a weight dtype wants its activations: plain f32 rows, q8 blocks, or
 * bf16 rows (R1_CPU_ACT_BF16: K bf16 values rounded to nearest even, the
 * next token r1_cpu_bf16_stride(K) bytes further; batches only). */
enum r1_cpu_act {
    R1_CPU_ACT_F32,
    R1_CPU_ACT_Q8,
    R1_CPU_ACT_BF16,
    R1_CPU_ACT_Q8X8,
    R1_CPU_ACT_Q8S,
    R1_CPU_ACT_Q8W,
    R1_CPU_ACT_F32EO,
    R1_CPU_ACT_Q16,
    R1_CPU_ACT_F32EO32,
    R1_CPU_ACT_Q8WS,
};
static inline size_t r1_cpu_bf16_stride(int K) { return ((size_t)K * 2 + 63) & ~(size_t)63; }

/* A token's activations in q8 form (R1_CPU_ACT_Q8), K % 32 == 0:
 *   float d[K/32]         per-block scale (x = d * q)
 *   int8  qs[K]           at byte offset r1_cpu_q8_qoff(K)
 * and the next token starts r1_cpu_q8_stride(K) bytes further. */
static inline size_t r1_cpu_q8_qoff(int K) { return ((size_t)K / 32 * 4 + 63) & ~(size_t)63; }
static inline size_t r1_cpu_q8_stride(int K) { return r1_cpu_q8_qoff(K) + (((size_t)K + 63) & ~(size_t)63); }

/* A token's activations in q8s form (R1_CPU_ACT_Q8S), K % 32 == 0: the q8
 * form above, then the block sums the GGUF formats' offsets and mins need
 * (computed once per token, not once per row group):
 *   int16 s16[K/16]   at r1_cpu_q8_stride(K): the sum of the q of each 16 columns
 *   float fs[K/32]    at r1_cpu_q8s_foff(K): d[b] x the sum of block b's q
 * and the next token starts r1_cpu_q8s_stride(K) bytes further. */
static inline size_t r1_cpu_q8s_foff(int K) {
    return r1_cpu_q8_stride(K) + (((size_t)K / 8 + 63) & ~(size_t)63);
}
static inline size_t r1_cpu_q8s_stride(int K) {
    return r1_cpu_q8s_foff(K) + (((size_t)K / 8 + 63) & ~(size_t)63);
}
/* 1 for the activation forms that start with the q8 form (Q8, Q8S). */
static inline int r1_cpu_act_q8(enum r1_cpu_act a) { return a == R1_CPU_ACT_Q8 || a == R1_CPU_ACT_Q8S; }
/* 1 for the integer activation forms (q8 in one part or two). */
static inline int r1_cpu_act_int(enum r1_cpu_act a) {
    return r1_cpu_act_q8(a) || a == R1_CPU_ACT_Q8X8 || a == R1_CPU_ACT_Q8W || a == R1_CPU_ACT_Q8WS;
}
/* Fills s16 and fs of a token whose q8 part is already there (plain C). */
void r1_cpu_q8s_sums(uint8_t *tok, int K);

/* A token's activations in q8w form (R1_CPU_ACT_Q8W), K % 32 == 0: the q8
 * form with its quants widened to int16 (float d[K/32], int16 q[K] at
 * r1_cpu_q8_qoff(K)), for tiles that multiply with vpmaddwd; the next token
 * r1_cpu_q8w_stride(K) bytes further. With two-part activations (the
 * default, r1_cpu_set_act_parts) a token is one q8w row that holds both
 * parts: q = 256 q_hi + q_lo (|q| <= 32639) at d = d_lo, the integers a
 * pair tile folds in int32. */
static inline size_t r1_cpu_q8w_stride(int K) { return r1_cpu_q8_qoff(K) + (((size_t)K * 2 + 63) & ~(size_t)63); }
/* A token's activations in q8ws form (R1_CPU_ACT_Q8WS), K % 32 == 0: the
 * q8w form (both parts in its int16 quants, as above), then the block sums
 * the K-quants' mins need:
 *   float fs[K/32]   at r1_cpu_q8ws_foff(K): fs_hi[b] + fs_lo[b], each part's
 *                    d[b] x the sum of block b's q (q8s's fs; one part: fs_hi)
 * the next token r1_cpu_q8ws_stride(K) bytes further. Tiles widen 4- and
 * 5-bit quants to int16 and multiply with vpmaddwd: one product per weight
 * for both parts, where q8s pairs take two vpmaddubsw and two vpmaddwd. */
static inline size_t r1_cpu_q8ws_foff(int K) { return r1_cpu_q8w_stride(K); }
static inline size_t r1_cpu_q8ws_stride(int K) {
    return r1_cpu_q8ws_foff(K) + (((size_t)K / 32 * sizeof(float) + 63) & ~(size_t)63);
}
/* A token in q8w form (sums: q8ws) into dst from its q8 form h (one part)
 * or its two parts h and l (q8 or q8s form, l at h's scale / 256); plain C,
 * and the bytes an ISA's q8w_fold must make. */
void r1_cpu_q8w_fold_c(const uint8_t *h, const uint8_t *l, uint8_t *dst, int K, int sums);
/* A token's activations in q16 form (R1_CPU_ACT_Q16, the integer panel
 * GEMMs of batches), K % 32 == 0: per block of 32 a scale d = max|x| / 32767
 * (float d[K/32]) and int16 q[K] = x / d rounded, at r1_cpu_q8_qoff(K); the
 * next token r1_cpu_q8w_stride(K) bytes further (the q8w layout, 15 bits). */
/* A token's activations in f32eo form (R1_CPU_ACT_F32EO, batches), K % 16
 * == 0: f32, each 16 columns in the order 0, 2, ..., 14, 1, 3, ..., 15 (the
 * order in which a 32-byte load of bf16 weights splits into two vectors with
 * one shift and one mask); the next token r1_cpu_f32eo_stride(K) bytes on. */
static inline size_t r1_cpu_f32eo_stride(int K) { return ((size_t)K * 4 + 63) & ~(size_t)63; }
/* A token's activations in f32eo32 form (R1_CPU_ACT_F32EO32, decode and
 * small batches too), any K: f32, each 32 columns in the order 0, 2, ..., 30,
 * 1, 3, ..., 31 (the order in which a 64-byte load of 32 bf16 weights splits
 * into two zmm of f32 with one shift and one AND); the last K % 32 columns
 * padded with zeros to a whole group of 32 in that order (a tile's masked
 * weight load makes the padding's weights zero too); the next token
 * r1_cpu_f32eo32_stride(K) bytes on. */
static inline size_t r1_cpu_f32eo32_stride(int K) { return (((size_t)K + 31) & ~(size_t)31) * 4; }

/* A token's activations in q8x8 form (R1_CPU_ACT_Q8X8, for the regrouped
 * weights: q4_0x8, q4_1x8, q8_0x8, q4_Kx8, q5_Kx8, q6_Kx8), K % 32 == 0: per 256 columns (8 q8 blocks b, scales d[b])
 * 384 bytes:
 *   int8  xl[2][64]  xl[h] lane i (4 bytes) = q[b][4j .. 4j+3],
 *   int8  xh[2][64]  xh[h] lane i = q[b][16+4j .. 16+4j+3],
 *                    with b = i % 8, j = 2h + i / 8 (the q4_0x8 lanes)
 *   int32 nx[16]     -8 x the sum of lane i's 16 bytes over xl and xh
 *   float dx[16]     d[i % 8]
 * then the last K % 256 columns (if any) in q8 form (R1_CPU_ACT_Q8, K % 256
 * columns), and the next token starts r1_cpu_q8x8_stride(K) bytes further. */
#define R1_CPU_Q8X8_BYTES 384
static inline size_t r1_cpu_q8x8_stride(int K) {
    return (size_t)K / 256 * R1_CPU_Q8X8_BYTES + (K % 256 ? r1_cpu_q8_stride(K % 256) : 0);
}
/* Plain-C q8x8 quantization (the ISA files may have faster ones). */
void r1_cpu_quant_q8x8_c(const float *x, uint8_t *dst, int K);
/* A token already in q8 form (r1_cpu_q8_*) rearranged into q8x8 form. */
void r1_cpu_q8_to_q8x8(const uint8_t *q8, uint8_t *dst, int K);

/* Integer activations in two parts. One int8 per value (q8: 8 bits of the
 * block's largest value) loses the small values of a block that holds an
 * outlier, and small models have such outliers: on SmolLM2-135M the q8 logits
 * were ~0.9 off f32's, enough to flip a greedy token. With 2 parts (the
 * default) each token is quantized twice: hi = q8(x), lo = q8(x - deq(hi)),
 * and every integer matmul computes w·hi + w·lo, i.e. the tile runs on two
 * activation rows for the weights it loaded once: twice the integer dot
 * products, the same memory traffic, logits within ~5e-3 of f32 on that
 * model. Tiles with a pair form (r1_cpu_mm.pair_tile: the AVX-512 x8 ones)
 * fold both rows in int32 and convert, scale and reduce once per token.
 * 1 part (R1_CPU_ACT=q8) is what llama.cpp does. Call between steps.
 * The lo part's scale is the hi part's / 256 exactly (r1_cpu_quant_q8_lo_c),
 * so a tile may fold both parts in int32: (w·q_hi << 8) + w·q_lo, times d_lo.
 * Any other value of parts: R1_CPU_ACT's choice again, read at the next use. */
void r1_cpu_set_act_parts(int parts);
int r1_cpu_act_parts(void);
/* 1 if the cpu kernels want q4_0 weights regrouped as q4_0x8 (their best
 * ISA has a tile for it; R1_Q4_0_PLAIN=1 says no, for comparisons). */
int r1_cpu_regroup_q4_0(void);
/* The layout the loader holds weights of dtype dt and `cols` columns in:
 * a regrouping of dt (dtype.h: q4_0x8, q4_1x8, q8_0x8, q4_Kx8, q5_Kx8,
 * q6_Kx8) where the current ISA has a
 * tile for it, else dt itself. R1_CPU_PLAIN=1 keeps every format but q4_0
 * as stored (R1_Q4_0_PLAIN=1 does q4_0), for comparisons. */
enum r1_dtype r1_cpu_layout(enum r1_dtype dt, int cols);

/* out[t * R1_CPU_MR + r] = (row r of w) · (token t of x) over columns
 * [k0, k1), r < nr <= isa->mr, t < nt <= isa->nt. Row r starts at w + r * ws;
 * token t at x + t * xs (f32 floats or a q8 token, as the dtype's act says).
 * K = cols; k0 is a multiple of 64, k1 of 64 or K (256 for q8x8 activations:
 * cpu.c's batch slices are KC = 512 columns). */
typedef void (*r1_cpu_tile_fn)(int K, int k0, int k1, const uint8_t *w, size_t ws, int nr,
                               const uint8_t *x, size_t xs, int nt, float *out);

/* A whole block of a batch at once (AMX): C[(t - t0) * ldc + r] = row r of w ·
 * token t, r < mc <= ldc, t in [t0, t0 + tn), over all K columns; rows of C
 * from mc up to ldc may be overwritten. xv holds the batch's activations
 * split in three bf16 parts, x0 = bf16(x), x1 = bf16(x - x0), x2 =
 * bf16(x - x0 - x1), each in the VNNI layout of r1_cpu_pack_vnni, xplane
 * bytes apart; t0 % 16 == 0.
 * Returns -1, touching nothing, when it cannot: the caller then uses the
 * tiles. */
typedef int (*r1_cpu_block_fn)(int K, const uint8_t *w, size_t ws, int mc, const uint8_t *xv,
                               size_t xplane, int t0, int tn, float *C, int ldc);

/* bf16 activation rows (R1_CPU_ACT_BF16 form, K % 32 == 0) of T tokens into
 * the VNNI layout: per group of 16 tokens and chunk c of 32 columns, 1 KiB
 * whose row kk holds the 32-bit column pair (2kk, 2kk+1) of chunk c of each
 * of the 16 tokens (zero for tokens past T). Bytes: r1_cpu_vnni_bytes. */
static inline size_t r1_cpu_vnni_bytes(int K, int T) {
    return (size_t)((T + 15) / 16) * (size_t)(K / 32) * 1024;
}
void r1_cpu_pack_vnni(const uint8_t *x, size_t xs, int K, int T, uint8_t *dst);

/* A whole block of a batch on f32 activations (the panel GEMM of the AVX2
 * tables): C[t * ldc + r] = row r of w · token t (K floats at x + t * xs
 * bytes), r < mc <= ldc, t < tn, over all K columns; rows of C from mc up to
 * ldc may be overwritten. Batches of more than R1_CPU_PANEL_MIN_T tokens
 * take it where a dtype has one (smaller ones: the tiles). */
typedef void (*r1_cpu_panel_fn)(int K, const uint8_t *w, size_t ws, int mc, const float *x, size_t xs,
                                int tn, float *C, int ldc);
#define R1_CPU_PANEL_MIN_T 16

/* 0 while cpu.c calls a tile on rows an earlier call of this small batch
 * (the same rows, other tokens) has just read, so they are in cache: the
 * decode tiles then skip their prefetch of the next rows. 1 otherwise. */
extern _Thread_local int r1_cpu_tile_prefetch;

/* -1 (the default, R1_CPU_ROW1 unset): single-token decode tiles read their
 * rows one at a time, each row one linear stream, instead of 4 rows in
 * lockstep (4 streams 1 row apart): AVX-512 q8_0x8, q4_1x8, q4_0x8 (pairs),
 * bf16, f16 and f32; AVX2 q8_0. Decode is bound by memory, and on the Zen 5
 * VM this was measured on the lockstep streams were read slower (bench
 * --batch 1, q8_0 on AVX-512: 46 -> 36 ms a step). Where one row was not
 * faster it is not used: the AVX-512 K-quant x8 tiles (q4_Kx8, q5_Kx8,
 * q6_Kx8), whose super-blocks cost more arithmetic, read 4 rows a pass by
 * default, each super-block's activations shared by them (Zen 4 VM, mm_bench
 * 1.5B layers with the two alternating, 2 threads: q4_Kx8 32.0 -> 38.9,
 * q6_Kx8 36.8 -> 48.9 GB/s; one thread 17.0 -> 20.5 and 19.5 -> 25.9); 1
 * (R1_CPU_ROW1=1) makes them read a row at a time too. AVX2's K-quants read one row at a time always
 * (kquants_avx2.c; Q4_K_M decode ~15% faster on a Zen 3 VM than 4 rows in
 * lockstep). AVX2's float tiles (f32, f16, bf16) read one row
 * at a time, with four FMA chains a row, but for r1_cpu_row1_act below.
 * The outputs are the same bits: each row's sums are its own.
 * R1_CPU_ROW1=0 keeps the 4-row forms everywhere, for comparisons; read once,
 * by the backend's init. */
extern int r1_cpu_decode_row1;
/* The most bytes of a token's activations that the float tiles (f32, f16,
 * bf16) read one row at a time in decode: past it, a row streamed beside
 * them pushed them out of a 32 KiB L1 before the next row came to them
 * (bf16's f32eo32 at the 1.5B's down, K = 8960: 35 KB), so such rows go
 * four a pass (AVX-512's 4-row forms, AVX2's avx2.c ROW_TILES) and the
 * activations come from L2 once per pass. Same bits either way.
 * R1_CPU_ROW1_ACT, default R1_CPU_ROW1_ACT; 0 or less: one row at a time
 * whatever K, for comparisons (mm_bench bf16@R1_CPU_ROW1_ACT=0). Read with
 * r1_cpu_decode_row1. Zen 4 VM, 1.5B down, mm_bench with the two
 * alternating, 2 threads: AVX-512 bf16 20.8 -> 25.4 GB/s, f16 20.9 -> 25.7.
 * Splitting K instead (cpu.c's carried ranges, one token) was slower still
 * (8.1 against 11.2 one row at a time, 1 thread): a row read in pieces is
 * no longer one stream with the next. */
#define R1_CPU_ROW1_ACT 16384
extern int r1_cpu_row1_act;
static inline int r1_cpu_row1_fits(size_t xs) { return r1_cpu_row1_act <= 0 || xs <= (size_t)r1_cpu_row1_act; }
/* How far ahead the AVX-512 one-row float tiles (bf16, f16, f32) prefetch
 * in their row's stream, in bytes: R1_CPU_ROW_PF, default 2048 (rows lie one
 * after another, so past a row's end that is the next row's start); 0 or
 * less: the same bytes 4 rows on, the form before, for comparisons
 * (mm_bench bf16@R1_CPU_ROW_PF=0). 4 rows on was 12 KiB ahead at K = 1536
 * and 70 KiB at K = 8960, past the 32 KiB L1 it fetched into; Zen 4 VM, 2
 * threads, mm_bench 1.5B bf16 layers with the two alternating: medians
 * 25.2 -> 27.2 and 27.3 -> 29.0 GB/s. Read with r1_cpu_decode_row1. The x8
 * and K-quant one-row forms keep 4 rows on (q8_0x8 moved within noise). */
extern int r1_cpu_row_pf;
/* The tile f (a one-row form) on nr rows, one call a row: out[t *
 * R1_CPU_MR + r] as one call on the nr rows would write it. */
static inline void r1_cpu_tile_by_row(r1_cpu_tile_fn f, int K, int k0, int k1, const uint8_t *w,
                                      size_t ws, int nr, const uint8_t *x, size_t xs, int nt,
                                      float *out) {
    for (int r = 0; r < nr; r++) f(K, k0, k1, w + (size_t)r * ws, ws, 1, x, xs, nt, out + r);
}

/* Carried sums (a tile whose table entry sets carry_k): while
 * r1_cpu_tile_acc is not NULL, a call keeps its unreduced sums there between
 * calls on consecutive column ranges of the same rows and tokens, every
 * boundary a multiple of carry_k: it starts from them when k0 > 0, and when
 * k1 < K it leaves them there and writes nothing to out. The last call's
 * out is then the same bits as one call over all K. cpu.c's small batches
 * walk K in such ranges so that the range of every token's activations
 * stays in L1 while all the row groups of a block use it. The room is
 * R1_CPU_ACC_BYTES, 64-byte aligned, one per (rows, tokens) of a call. */
extern _Thread_local void *r1_cpu_tile_acc;
#define R1_CPU_ACC_BYTES (R1_CPU_MR * R1_CPU_NT * 64)

struct r1_cpu_mm {
    enum r1_cpu_act act;
    r1_cpu_tile_fn tile; /* NULL: not supported, the kernel falls back to ref */
    /* Optional form for batches (T > 16, prefill): its own activation form;
     * NULL: tile serves batches too. May trade exactness for speed (bf16
     * activations), within the conformance test's named limits. */
    enum r1_cpu_act batch_act;
    r1_cpu_tile_fn batch_tile;
    r1_cpu_block_fn batch_block; /* optional, with batch_act R1_CPU_ACT_BF16 */
    int (*batch_avail)(void);    /* NULL, or 0 when the batch form is off on this CPU */
    /* Set by cpu.c on its copy for one matmul (tables leave it 0): every
     * tile call spans all K columns (the decode form, also on batches of
     * up to 16 tokens, so that each row is bit for bit a decode step's). */
    int whole_k;
    r1_cpu_panel_fn batch_panel; /* optional: batches > R1_CPU_PANEL_MIN_T tokens, f32 activations */
    /* The form batch_panel reads its tokens in: R1_CPU_ACT_F32 (0, f32 rows)
     * or R1_CPU_ACT_Q16 (x then points at q16 tokens, xs bytes apart). */
    enum r1_cpu_act panel_act;
    /* Optional, for act R1_CPU_ACT_Q8X8, Q8 or Q8S with two-part activations
     * (r1_cpu_act_parts() == 2): the tile on pairs. Token t is the pair cpu.c
     * lays out, its hi part at x + t * xs and its lo part (scale hi's / 256)
     * one token of the form further (r1_cpu_q8x8_stride(K),
     * r1_cpu_q8_stride(K), r1_cpu_q8s_stride(K) bytes); out gets the token's whole dot
     * product (both parts folded in int32 inside the tile), t < nt <=
     * pair_nt. */
    r1_cpu_tile_fn pair_tile;
    int pair_nt;
    /* Set by cpu.c on its copy (tables leave it 0): tile is pair_tile. */
    int pairs;
    /* Optional: tile (pair_tile too, where set) carries its sums through
     * r1_cpu_tile_acc on column ranges that start and end at multiples of
     * carry_k (or at K); 0: it does not. */
    int carry_k;
};

struct r1_cpu_isa {
    const char *name;
    int (*available)(void); /* 1 if this CPU (and OS) runs it */
    int mr, nt;             /* tile shape, <= R1_CPU_MR, R1_CPU_NT */
    struct r1_cpu_mm mm[R1_DTYPE_COUNT];
    void (*quant_q8)(const float *x, uint8_t *dst, int K); /* one token, K % 32 == 0 */
    void (*quant_q8x8)(const float *x, uint8_t *dst, int K); /* one token, K % 256 == 0; NULL: C */
    /* Optional: one token in two parts (r1_cpu_act_parts() == 2), hi = the
     * q8 (or q8x8) form of x, lo = that of x - hi dequantized (each
     * dequantized value a product and a difference, both rounded to f32);
     * NULL: plain C. */
    void (*quant_q8_2)(const float *x, uint8_t *hi, uint8_t *lo, int K);
    void (*quant_q8x8_2)(const float *x, uint8_t *hi, uint8_t *lo, int K);
    void (*quant_bf16)(const float *x, uint16_t *dst, int K); /* one token; NULL: plain C */
    void (*quant_q16)(const float *x, uint8_t *dst, int K);   /* one token, K % 32 == 0; NULL: plain C */
    /* Optional: r1_cpu_q8w_fold_c (the same bytes); NULL: that one. */
    void (*q8w_fold)(const uint8_t *h, const uint8_t *l, uint8_t *dst, int K, int sums);
    /* Optional: h1 = bf16(x - h0), h2 = bf16(x - h0 - h1) for i < K, h0 =
     * bf16(x) given (round to nearest even; the same bits as plain C). */
    void (*split_bf16)(const float *x, const uint16_t *h0, uint16_t *h1, uint16_t *h2, int K);
    float (*dot_f32)(const float *a, const float *b, int n);
    float (*dot_f16)(const float *a, const uint16_t *b, int n);
    void (*axpy_f32)(float a, const float *x, float *y, int n); /* y += a x */
    void (*axpy_f16)(float a, const uint16_t *x, float *y, int n);
    void (*f32_to_f16)(const float *x, uint16_t *y, int n);
    /* Blocked attention (optional; all NULL: cpu.c's per-head loop). Used
     * when head_dim hd % 16 == 0. Rows are contiguous, hd floats apart.
     * f16_to_f32:   y[i] = x[i], i < n.
     * attn_qk:      s[m * ss + p] = (row m of q) · (row p of k), m < M, p < P;
     *               P % 4 == 0. Any M >= 1: the rows up to M rounded up to 4
     *               exist (q's zero), and a form may compute them too.
     * attn_pv:      (row m of o) += sum over p < P of s[m * ss + p] (row p of v),
     *               m < M (rows to M rounded up to 4 as for attn_qk, s's zero).
     * attn_softmax: mx = max(*m, s[i] * scale over i < n); s[i] = exp(s[i] *
     *               scale - mx); *m = mx; returns the sum of the new s[i]. */
    void (*f16_to_f32)(const uint16_t *x, float *y, int n);
    void (*attn_qk)(const float *q, int M, const float *k, int P, int hd, float *s, int ss);
    void (*attn_pv)(const float *s, int ss, int M, const float *v, int P, int hd, float *o);
    float (*attn_softmax)(float *s, int n, float scale, float *m);
    /* Optional: attn_qk / attn_pv reading an f16 cache directly, with the
     * true P (any P >= 1, rows past P never read; qk's scores for columns
     * P..P+3 rounded up are unspecified). */
    void (*attn_qk_f16)(const float *q, int M, const uint16_t *k, int P, int hd, float *s, int ss);
    void (*attn_pv_f16)(const float *s, int ss, int M, const uint16_t *v, int P, int hd, float *o);
    /* Optional: o[i] = g[i] / (1 + exp(-g[i])) * u[i], i < n (NULL: expf). */
    void (*silu_mul)(const float *g, const float *u, float *o, int n);
    /* Optional: a q8_0 KV cache's consecutive blocks to f32, n % 32 == 0,
     * y[i] = d * q[i] rounded once (the reference's values); NULL: the
     * dtype table's to_f32. */
    void (*q8_0_to_f32)(const uint8_t *x, float *y, int n);
    /* Optional: attn_qk / attn_pv reading a q8_0 cache directly (rows of
     * head_dim / 32 blocks, hd % 32 == 0), with the true P as the f16
     * forms; each value d * q as the reference's. */
    void (*attn_qk_q8)(const float *q, int M, const uint8_t *k, int P, int hd, float *s, int ss);
    void (*attn_pv_q8)(const float *s, int ss, int M, const uint8_t *v, int P, int hd, float *o);
};

extern const struct r1_cpu_isa r1_cpu_generic;
extern const struct r1_cpu_isa r1_cpu_avx2;   /* x86-64 only, else name NULL */
extern const struct r1_cpu_isa r1_cpu_avx2_vnni; /* x86-64 only: AVX2 + AVX-VNNI (or AVX512-VNNI/VL) */
extern const struct r1_cpu_isa r1_cpu_avx512; /* x86-64 only */
extern const struct r1_cpu_isa r1_cpu_neon;   /* aarch64 only */
extern const struct r1_cpu_isa r1_cpu_neon_dot;

/* Every ISA table built into this binary, best first, NULL-terminated
 * (tables for another architecture are left out). */
extern const struct r1_cpu_isa *const r1_cpu_isas[];

/* Use the named ISA for the cpu kernels from now on ("avx512", "avx2-vnni", "avx2",
 * "neon-dot", "neon", "generic"); NULL = the best available. Returns -1 with
 * an error if the name is unknown or this CPU cannot run it. */
int r1_cpu_select(const char *name);
/* The ISA the cpu kernels use now (selects the best one first if needed). */
const struct r1_cpu_isa *r1_cpu_current(void);

/* Thread-local scratch slot 2 (slots 0 and 1 are cpu_act.c's, 3, 4 and 5
 * cpu.c's): at least bytes, 64-byte aligned, kept for the thread's next
 * call, freed at thread exit. */
uint8_t *r1_cpu_scratch(int slot, size_t bytes);

/* 1: matmuls split rows statically by (ith, nth) instead of claiming
 * them through op->claim (also R1_CPU_STATIC=1); for comparisons. Call
 * between steps, not during one. -1: R1_CPU_STATIC's choice again. */
void r1_cpu_set_static(int on);

/* Forget every setting read once from the environment (R1_CPU_ACT,
 * R1_CPU_STATIC, R1_CPU_ROW1, R1_CPU_SMALL_BATCH, R1_CPU_CARRY), and any
 * value the setters above gave them: each is read again at its next use
 * (R1_CPU_ROW1 at once). For tools that compare settings in one process
 * (mm_bench's DTYPE@NAME=VALUE); call between steps, not during one.
 * R1_CPU_ISA is not among them: it picks the table once (r1_cpu_select). */
void r1_cpu_reread_env(void);

/* Generic q8 activation quantization (plain C), shared by the ISA files. */
void r1_cpu_quant_q8_c(const float *x, uint8_t *dst, int K);
/* The lo part of two-part activations (r1_cpu_set_act_parts), plain C: the
 * residual r (K floats, K % 32 == 0) in q8 form with block b's scale fixed at
 * dh[b] / 256 (the hi part's scale; exact, a power of two) and q = r / that,
 * rounded to nearest even, clamped to [-127, 127] (|r| <= dh / 2, so only
 * rounding reaches the clamp); dh[b] == 0 gives d = 0, q = 0. Every two-part
 * quantizer gives these bits. */
void r1_cpu_quant_q8_lo_c(const float *r, const float *dh, uint8_t *dst, int K);

/* cpu_act.c: the activation forms. Activation rows per token a matmul in
 * mm's form reads (2 for q8, q8s and q8x8 with two parts, else 1). */
int r1_cpu_act_rows(const struct r1_cpu_mm *mm);
/* Tokens [0, T) of x (K floats each) in the form mm's tile reads, in this
 * thread's scratch slots 0 and 1 (valid until its next call); *xs = the
 * bytes from one token to the next (a pair tile's token: both parts). */
const uint8_t *r1_cpu_prep_act(const struct r1_cpu_isa *isa, const struct r1_cpu_mm *mm,
                               const float *x, int T, int K, size_t *xs);
/* The last bf16 batch r1_cpu_prep_act packed on this thread for a batch
 * block (AMX) in VNNI form, and *plane the bytes of each of its three
 * planes; NULL when the last bf16 batch was not packed. */
const uint8_t *r1_cpu_act_vnni(size_t *plane);

/* The attention kernels of the suite (cpu_attn.c), in cpu.c's kernel table. */
void r1_cpu_k_kv_append(const struct r1_op *op, int ith, int nth);
void r1_cpu_k_attention_gqa(const struct r1_op *op, int ith, int nth);

#endif
