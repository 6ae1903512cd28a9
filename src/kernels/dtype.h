/*
 * dtype.h - the per-dtype table: block geometry, reference dequantization
 * (to_f32) and quantization (from_f32) for every weight format. Block
 * layouts are GGUF's. Fast dot products live in the backends, not here.
 */
#ifndef R1_DTYPE_H
#define R1_DTYPE_H

#include <stddef.h>
#include <stdint.h>

#include "r1infer.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The cpu kernels' regroupings of the quantized types: the same numbers as
 * the file's blocks, interleaved 8 blocks (or 8 super-blocks' quants) at a
 * time so one vector load feeds 8 rows' worth of lanes. Never in files and
 * never seen through include/r1infer.h; they extend enum r1_dtype past
 * R1_DTYPE_COUNT, and the cpu backend picks them when it binds a matrix.
 *   q4_0x8: 8 f16 scales + 128 bytes of nibbles (layout below)
 *   q4_1x8: 8 f16 scales, 8 f16 mins, 128 bytes of nibbles; the last
 *           (columns % 256) / 32 blocks of a row stay q4_1
 *   q8_0x8: 8 f16 scales + 256 quants stored as q + 128 in q4_0x8's lane
 *           order; the row's last blocks stay q8_0
 *   q4_Kx8, q5_Kx8, q6_Kx8: each super-block's quants in the same lane
 *           order (scales, mins and d as stored): the same bytes */
#define R1_DTYPE_Q4_0X8 (R1_DTYPE_COUNT + 0)
#define R1_DTYPE_Q4_1X8 (R1_DTYPE_COUNT + 1)
#define R1_DTYPE_Q8_0X8 (R1_DTYPE_COUNT + 2)
#define R1_DTYPE_Q4_KX8 (R1_DTYPE_COUNT + 3)
#define R1_DTYPE_Q5_KX8 (R1_DTYPE_COUNT + 4)
#define R1_DTYPE_Q6_KX8 (R1_DTYPE_COUNT + 5)
#define R1_DTYPE_ALL (R1_DTYPE_COUNT + 6) /* the public types and the private layouts */

#define R1_QK 32    /* weights per block of the *_0/_1 formats */
#define R1_QK_K 256 /* weights per K-quant super-block */

struct r1_block_q8_0 {
    uint16_t d; /* f16 scale */
    int8_t qs[R1_QK];
};
struct r1_block_q4_0 {
    uint16_t d;            /* f16 scale */
    uint8_t qs[R1_QK / 2]; /* low nibble: weights 0..15, high: 16..31; value = q - 8 */
};

/* R1_DTYPE_Q4_0X8: 8 q4_0 blocks b = 0..7 of 32 weights. Byte c (0..3) of
 * dword j (0..3) of block b's 16 nibble bytes sits at
 * qs[64 * (j / 2) + 32 * (j % 2) + 4 * b + c], so a 64-byte load at qs + 64h
 * gives in 32-bit lane i (0..15) dword 2h + i / 8 of block i % 8. */
#define R1_QK_X8 256
struct r1_block_q4_0x8 {
    uint16_t d[8];
    uint8_t qs[128];
};
static inline int r1_q4_0x8_at(int b, int byte) { /* offset in qs of block b's byte */
    int j = byte / 4;
    return 64 * (j / 2) + 32 * (j % 2) + 4 * b + byte % 4;
}
/* n weights (n % 256 == 0) of q4_0 blocks regrouped as q4_0x8 (lossless). */
void r1_q4_0_to_x8(const struct r1_block_q4_0 *src, struct r1_block_q4_0x8 *dst, int64_t n);

/* R1_DTYPE_Q4_1X8 (regroup.c): a row of K weights is K / 256 groups of 8
 * q4_1 blocks, their scales d[b], mins m[b] and nibbles placed as
 * q4_0x8's (qs[r1_q4_0x8_at(b, byte)]), then the (K % 256) / 32 last blocks
 * as plain q4_1 (20 bytes each). Its traits say block 32 of 20 bytes, so a
 * row has q4_1's size; to_f32 / from_f32 take a whole row, or a part that
 * starts at a multiple of 256 weights and is 256 long or the rest of the
 * row (what the reference kernels ask for). */
struct r1_block_q4_1x8 {
    uint16_t d[8], m[8];
    uint8_t qs[128];
};
void r1_q4_1x8_to_f32(const void *src, float *dst, int64_t n);
void r1_q4_1x8_from_f32(const float *src, void *dst, int64_t n);
/* R1_DTYPE_Q8_0X8 (regroup.c): K / 256 groups of 8 q8_0 blocks, then the
 * last (K % 256) / 32 blocks as plain q8_0 (34 bytes each; block 32 of 34
 * bytes, as q8_0). In a group, quant k (0..31) of block b is stored as
 * q + 128 (unsigned) at qs[r1_q8_0x8_at(b, k)]: a 64-byte load at qs + 64p
 * gives lane i (4 bytes) the quants of block i % 8 that part p of the q8x8
 * activations (cpu.h) holds in lane i. */
struct r1_block_q8_0x8 {
    uint16_t d[8];
    uint8_t qs[256];
};
static inline int r1_q8_0x8_at(int b, int k) {
    int h = k / 16, j = k % 16 / 4; /* low (h 0) or high half, dword j of it */
    return 64 * (2 * h + j / 2) + 4 * (8 * (j % 2) + b) + k % 4;
}
void r1_q8_0x8_to_f32(const void *src, float *dst, int64_t n);
void r1_q8_0x8_from_f32(const float *src, void *dst, int64_t n);

/* R1_DTYPE_Q4_KX8, _Q5_KX8, _Q6_KX8 (regroup_k.c): q4_K, q5_K, q6_K whose
 * super-blocks keep d, dmin and the scales where GGUF has them, but hold
 * the quants of each 32-weight group b (0..7) in q8x8's lanes for block b:
 *   q4_Kx8: d, dmin, scales[12] | qs[128]
 *   q5_Kx8: d, dmin, scales[12] | h5[32] | qs[128]
 *   q6_Kx8: qs[128] | h6[64] | scales[16] (int8), d
 * with quant k of group b at vector p, element e (r1_q8_0x8_at(b, k) = 64 p
 * + e): its low 4 bits in qs[64 (p % 2) + e], the low nibble for p < 2,
 * the high one otherwise (q4_0x8's nibbles); q5: bit 4 as bit e of the
 * 64-bit little-endian mask h5[8 p ..]; q6: bits 4, 5 as bits 2p, 2p + 1
 * of h6[e]. */

/* Lossless change of layout of a row part of n weights (as to_f32 takes it)
 * from `from` to `to` (q4_0 -> q4_0x8, q4_1 -> q4_1x8, q8_0 -> q8_0x8, the
 * K-quants -> their x8; and back for q4_0x8, q4_1x8 and q8_0x8). Returns 0, or -1
 * touching nothing when the pair is not a regrouping. */
int r1_dtype_regroup(enum r1_dtype from, enum r1_dtype to, const void *src, void *dst, int64_t n);

typedef void (*r1_to_f32_fn)(const void *src, float *dst, int64_t n);
typedef void (*r1_from_f32_fn)(const float *src, void *dst, int64_t n);

struct r1_dtype_traits {
    const char *name;
    int block;               /* weights per block */
    size_t block_size;       /* bytes per block */
    r1_to_f32_fn to_f32;     /* n is a multiple of block */
    r1_from_f32_fn from_f32; /* NULL where r1infer cannot produce the type */
};

extern const struct r1_dtype_traits r1_dtype_traits[R1_DTYPE_ALL];

/* r1_dtype_parse that also knows the private layouts ("q4_0x8"): for the
 * kernel tools and tests. */
int r1_dtype_parse_any(const char *name);

/* Bytes of a row of n weights; 0 if n is not a multiple of the block. */
size_t r1_dtype_row_bytes(enum r1_dtype t, int64_t n);

/* A matrix in kernel layout: rows of `cols` weights, each row_bytes long. */
struct r1_mat {
    const void *data;
    enum r1_dtype dtype;
    int rows, cols;
    size_t row_bytes;
};

/* Dequantize one full row of m into dst (cols floats). */
void r1_mat_row_f32(const struct r1_mat *m, int row, float *dst);

#ifdef __cplusplus
}
#endif
#endif
