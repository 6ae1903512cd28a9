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
static inline size_t r1_cpu_q8s_foff(int K) { return r1_cpu_q8_stride(K) + (((size_t)K / 8 + 63) & ~(size_t)63); }
static inline size_t r1_cpu_q8s_stride(int K) { return r1_cpu_q8s_foff(K) + (((size_t)K / 8 + 63) & ~(size_t)63); }
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
/* The parts of a format without a choice of its own: R1_CPU_ACT's (or
 * r1_cpu_set_act_parts') when set, else 2. */
int r1_cpu_act_parts(void);
/* The parts this entry's activations take: the forced choice, else 1 where
 * the entry sets one_part, else 2. */
struct r1_cpu_mm;
int r1_cpu_mm_parts(const struct r1_cpu_mm *mm);
/* 1 if the cpu kernels want q4_0 weights regrouped as q4_0x8 (their
 * kernel set has a tile for it, and r1_cpu_tuning.q4_0_plain is 0). */
int r1_cpu_regroup_q4_0(void);
/* The layout the loader holds weights of dtype dt and `cols` columns in:
 * a regrouping of dt (dtype.h: q4_0x8, q4_1x8, q8_0x8, q4_Kx8, q5_Kx8,
 * q6_Kx8) where the current ISA has a
 * tile for it, else dt itself (r1_cpu_tuning.plain and q4_0_plain keep the
 * file's layout, for comparisons). */
enum r1_dtype r1_cpu_layout(enum r1_dtype dt, int cols);

/* out[t * R1_CPU_MR + r] = (row r of w) · (token t of x) over columns
 * [k0, k1), r < nr <= isa->mr, t < nt <= isa->nt. Row r starts at w + r * ws;
 * token t at x + t * xs (f32 floats or a q8 token, as the dtype's act says).
 * K = cols; k0 is a multiple of 64, k1 of 64 or K (256 for q8x8 activations:
 * cpu.c's batch slices are KC = 512 columns). */
typedef void (*r1_cpu_tile_fn)(int K, int k0, int k1, const uint8_t *w, size_t ws, int nr, const uint8_t *x, size_t xs,
                               int nt, float *out);

/* A whole block of a batch at once (the AMX sets): C[(t - t0) * ldc + r]
 * = (or += when add) row r of w (dtype dt, K columns) · token t over the
 * columns [k0, k1), r < mc, t in [t0, t0 + tn); nothing else of C is
 * written. xv holds the batch's activations split in three bf16 parts, x0
 * = bf16(x), x1 = bf16(x - x0), x2 = bf16(x - x0 - x1), each in the VNNI
 * layout (below: r1_cpu_vnni_bytes), xplane bytes apart. K % 32 == 0,
 * k0 % 256 == 0, k1 % 256 == 0 or k1 == K, t0 % 16 == 0, mc <= 64; returns
 * -1, touching nothing, when those do not hold. */
typedef int (*r1_cpu_block_fn)(enum r1_dtype dt, int K, int k0, int k1, const uint8_t *w, size_t ws, int mc,
                               const uint8_t *xv, size_t xplane, int t0, int tn, float *C, int ldc, int add);

/* The VNNI layout of bf16 activations (K % 32 == 0) of T tokens: per group
 * of 16 tokens and chunk c of 32 columns, 1 KiB whose row kk holds the
 * 32-bit column pair (2kk, 2kk+1) of chunk c of each of the 16 tokens (zero
 * for tokens past T). Bytes: r1_cpu_vnni_bytes. */
static inline size_t r1_cpu_vnni_bytes(int K, int T) { return (size_t)((T + 15) / 16) * (size_t)(K / 32) * 1024; }
/* The T tokens of x (K floats each) in the three bf16 parts of a block
 * (r1_cpu_block_fn), each in the VNNI layout, part p at v + p * plane:
 * plain C (cpu.h vnni_parts gives the same bits). */
void r1_cpu_vnni_parts_c(const float *x, int T, int K, uint8_t *v, size_t plane);

/* A whole block of a batch on f32 activations (the panel GEMM of the AVX2
 * tables): C[t * ldc + r] = row r of w · token t (K floats at x + t * xs
 * bytes), r < mc <= ldc, t < tn, over all K columns; rows of C from mc up to
 * ldc may be overwritten. Batches of more than R1_CPU_PANEL_MIN_T tokens
 * take it where a dtype has one (smaller ones: the tiles). */
typedef void (*r1_cpu_panel_fn)(int K, const uint8_t *w, size_t ws, int mc, const float *x, size_t xs, int tn, float *C,
                                int ldc);
#define R1_CPU_PANEL_MIN_T 16

/* 0 while cpu.c calls a tile on rows an earlier call of this small batch
 * (the same rows, other tokens) has just read, so they are in cache: the
 * decode tiles then skip their prefetch of the next rows. 1 otherwise. */
extern _Thread_local int r1_cpu_tile_prefetch;

/* The cpu backend's settled choices, one struct (r1_cpu_tuning; the
 * defaults are what runs). Nothing reads them from the environment: tests
 * and the comparison tools (mm_bench, cpu_table, tile_hot) set another
 * form by name with r1_cpu_tune, between steps, and r1_cpu_tune_reset puts
 * the defaults back. The measurements behind each default are in
 * docs/kernels.md.
 *   row1: single-token decode tiles read their rows one at a time (one
 *     linear stream a row) where that is faster: -1 (default) the
 *     per-tile choice (AVX-512 q8_0x8, q4_1x8, q4_0x8, bf16, f16, f32 and
 *     AVX2 q8_0 one row; the AVX-512 K-quant x8 tiles 4 rows in lockstep,
 *     their super-blocks carry more arithmetic per byte); 0: 4 rows
 *     everywhere; 1: one row everywhere. Same bits either way.
 *   row1_act: the most bytes of a token's activations that the float tiles
 *     (f32, f16, bf16) still read one row at a time in decode; past it four
 *     rows a pass, so the activations come from L2 once per pass instead
 *     of being pushed out of L1 by each row (bf16 at K = 8960: 35 KB);
 *     0: one row at a time whatever K.
 *   row_pf: how far ahead (bytes) the AVX-512 one-row float tiles prefetch
 *     in their row's stream; 0: the same bytes 4 rows on.
 *   small_batch: the largest batch (1..16) that runs the decode form, bit
 *     for bit a decode step per row (speculative verification relies on it).
 *   pairs: two-part activations run a table's pair tiles (both parts folded
 *     in int32); 0: the plain tiles on both parts.
 *   carry: small batches walk K in ranges that stay in L1, the tiles
 *     carrying their sums (same bits); 0: all K at once.
 *   static_split: matmuls split rows evenly between threads instead of
 *     claiming runs of rows.
 *   plain: keep q4_1, q8_0 and the K-quants in GGUF's layout instead of the
 *     x8 regroupings the kernel set reads; q4_0_plain: the same for q4_0.
 *   vbmi, gfni: the AVX-512 tiles use VBMI / GFNI where the CPU has them
 *     (0: the tiles for CPUs without; the CPU check is made at selection).
 *   attn_split: decode attention of one sequence on several threads splits
 *     the context into spans as well as the heads (cpu_attn.c); 0: the
 *     heads only.
 *   panel: batches past R1_CPU_PANEL_MIN_T tokens run a dtype's panel GEMM
 *     where its entry has one (batch_panel); 0: the tiles (for
 *     comparisons).
 *   gemm: batches of 2+ tokens on one-part activations run the entry's
 *     gemm where it has one; 0: the decode tiles and the panel. */
struct r1_cpu_tuning {
    int row1, row1_act, row_pf, small_batch, pairs, carry, static_split, plain, q4_0_plain;
    int vbmi, gfni;
    int attn_split;
    int panel;
    int gemm;
};
extern struct r1_cpu_tuning r1_cpu_tuning;
#define R1_CPU_ROW1_ACT 16384 /* row1_act's default */
/* Sets the field `name` of r1_cpu_tuning (also "act_parts": 1 or 2,
 * r1_cpu_set_act_parts) to value; -1 with an error for an unknown name. Call
 * between steps; a layout choice (plain, q4_0_plain) applies to models
 * loaded after it, a feature choice (vbmi, gfni) from the next
 * r1_cpu_select. */
int r1_cpu_tune(const char *name, int value);
/* Every field of r1_cpu_tuning back to its default (and the activation
 * parts to R1_CPU_ACT's choice). */
void r1_cpu_tune_reset(void);
static inline int r1_cpu_row1_fits(size_t xs) {
    return r1_cpu_tuning.row1_act <= 0 || xs <= (size_t)r1_cpu_tuning.row1_act;
}
/* The one dispatch by token count: a tile kept as one body per token count
 * runs nt1 for one token, nt2 for two, nt4 for three or four. */
static inline void r1_cpu_tile_nt(r1_cpu_tile_fn nt1, r1_cpu_tile_fn nt2, r1_cpu_tile_fn nt4, int K, int k0, int k1,
                                  const uint8_t *w, size_t ws, int nr, const uint8_t *x, size_t xs, int nt,
                                  float *out) {
    (nt == 1 ? nt1 : nt == 2 ? nt2 : nt4)(K, k0, k1, w, ws, nr, x, xs, nt, out);
}
/* The tile f (a one-row form) on nr rows, one call a row: out[t *
 * R1_CPU_MR + r] as one call on the nr rows would write it. */
static inline void r1_cpu_tile_by_row(r1_cpu_tile_fn f, int K, int k0, int k1, const uint8_t *w, size_t ws, int nr,
                                      const uint8_t *x, size_t xs, int nt, float *out) {
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
    /* Optional form for batches (T > 16, prefill): its own activation form
     * and a tile, or a whole-block function (batch_act R1_CPU_ACT_BF16,
     * columns a multiple of 32). NULL: tile serves batches too. May trade
     * exactness for speed, within the conformance test's named limits. */
    enum r1_cpu_act batch_act;
    r1_cpu_tile_fn batch_tile;
    r1_cpu_block_fn batch_block;
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
    /* 1: this weight type takes one-part int8 activations unless R1_CPU_ACT
     * forces two (a measured precision choice, docs/quality.md), so that
     * `gemm` serves every batch. */
    int one_part;
    /* Optional, for act R1_CPU_ACT_Q8X8 on one-part activations: the GEMM of
     * batches of 2 or more tokens (r1_cpu_panel_fn's arguments, x at the
     * tokens in act form), each token's sums bit for bit the decode tile's,
     * the weights unpacked once per 16 tokens instead of once per 4. */
    r1_cpu_panel_fn gemm;
};

struct r1_cpu_isa {
    const char *name;
    int (*available)(void); /* 1 if this CPU (and OS) runs it */
    int emulated;           /* 1: a software model of an ISA (tests); never the default */
    int mr, nt;             /* tile shape, <= R1_CPU_MR, R1_CPU_NT */
    struct r1_cpu_mm mm[R1_DTYPE_ALL];
    void (*quant_q8)(const float *x, uint8_t *dst, int K);   /* one token, K % 32 == 0 */
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
    /* Optional: r1_cpu_vnni_parts_c (the same bits); NULL: that one. */
    void (*vnni_parts)(const float *x, int T, int K, uint8_t *v, size_t plane);
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
    void (*silu_mul)(const float *g, const float *u, float *o, int n); /* o may be g */
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
extern const struct r1_cpu_isa r1_cpu_avx2;      /* x86-64 only, else name NULL */
extern const struct r1_cpu_isa r1_cpu_avx2_vnni; /* x86-64 only: AVX2 + AVX-VNNI (or AVX512-VNNI/VL) */
extern const struct r1_cpu_isa r1_cpu_avx512;    /* x86-64 only */
/* x86-64 only: the avx512 table with AMX blocks for batches, on the
 * hardware's tiles and on a software model of them (emulated; amx_blocks.h).
 * Filled by their first successful availability check. */
extern struct r1_cpu_isa r1_cpu_avx512_amx;
extern struct r1_cpu_isa r1_cpu_avx512_amx_emu;
extern const struct r1_cpu_isa r1_cpu_neon; /* aarch64 only */
extern const struct r1_cpu_isa r1_cpu_neon_dot;

/* Every ISA table built into this binary, best first, NULL-terminated
 * (tables for another architecture are left out; emulated ones last). */
extern const struct r1_cpu_isa *const r1_cpu_isas[];

/* Use the named ISA for the cpu kernels from now on ("avx512", "avx2-vnni", "avx2",
 * "neon-dot", "neon", "generic"); NULL = the best available. Returns -1 with
 * an error if the name is unknown or this CPU cannot run it. */
int r1_cpu_select(const char *name);
/* 1 if kernel sets a and b have the same decode forms: every dtype's tile,
 * activation form and pair tile, and the activation quantizers (the AMX set
 * is the avx512 set with blocks for batches), so that tests of decode steps
 * need only one of them. */
int r1_cpu_same_decode(const struct r1_cpu_isa *a, const struct r1_cpu_isa *b);
/* The ISA the cpu kernels use now (selects the best one first if needed). */
const struct r1_cpu_isa *r1_cpu_current(void);

/* Thread-local scratch slot 2 (slot 0 is cpu_act.c's, 3, 4 and 5
 * cpu.c's): at least bytes, 64-byte aligned, kept for the thread's next
 * call, freed at thread exit. */
uint8_t *r1_cpu_scratch(int slot, size_t bytes);

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
 * thread's scratch slot 0 (valid until its next call); *xs = the
 * bytes from one token to the next (a pair tile's token: both parts). For
 * a batch that blocks take (mm->batch_block): the three bf16 parts in the
 * VNNI layout (r1_cpu_block_fn's xv), *xs the bytes of one part. */
const uint8_t *r1_cpu_prep_act(const struct r1_cpu_isa *isa, const struct r1_cpu_mm *mm, const float *x, int T, int K,
                               size_t *xs);

/* The attention kernels of the suite (cpu_attn.c), in cpu.c's kernel table. */
void r1_cpu_k_kv_append(const struct r1_op *op, int ith, int nth);
void r1_cpu_k_attention_gqa(const struct r1_op *op, int ith, int nth);

#endif
