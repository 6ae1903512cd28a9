/*
 * kq_body.h - template (no include guard): the AArch64 tiles for the
 * K-quants q4_K, q5_K, q6_K against q8 activations, included by
 * arm/tiles_neon.c and arm/tiles_dot.c after arm/idot.h. KQ_TILE(NAME, F)
 * defines the exported tile NAME of format F (F_Q4_K, F_Q5_K, F_Q6_K); the
 * including file spells out the names, so that grep finds each tile's
 * definition. Nothing here may be used outside those files.
 *
 * When a tile enters a 256-weight super-block it unpacks the block's scales
 * once per row into floats on the stack (q4_K/q5_K: A[s] = d*sc[s], B[s] =
 * -dmin*m[s] for the 8 sub-blocks of 32, by two table lookups on the 12
 * packed bytes; q6_K: A[g] = d*sc[g] for the 16 groups of 16). Then:
 *   q4_K/q5_K  steps of 128 columns (4 sub-blocks: one scale vector load),
 *              or 64 (a range that starts or ends half-way: the second half
 *              of the registers zero), quants unsigned (0..15, 0..31):
 *                acc[r][t] += cvt(dot_g32(W, X_t)) * (A_r * dx_t)
 *                acc[r][t] += B_r * (dx_t * sum of X_t per sub-block)
 *   q6_K       steps of 64 columns (4 groups of 16), quants q - 32:
 *                acc[r][t] += cvt(dot_g16(W, X_t)) * (A_r * dx_t)
 *              or, up to 2 tokens, 128 (two such halves: chunks 2h and
 *              2h + 1 share their bytes, loaded once)
 * Each step's weights are decoded once per row and used for every token.
 *
 * Instructions per row (decode, shared by the tokens): scales per
 * super-block q4_K/q5_K 1 ldr + 8 tbl/shift/logic + 6 widen + 4 scvtf + 4
 * fmul + 2 stp + 2 f16 loads; q6_K 1 ldr + 6 widen + 4 scvtf + 4 fmul + 2 stp;
 * per step q4_K 4 ldr + 8 and/ushr, q5_K 6 ldr + 8 cmtst + 8 ushr/and + 8
 * sli/sri, q6_K 6 ldr + 6-8 and/ushr + 4 sli/sri + 4 sub. Per row and token
 * and step: dot_g32 / dot_g16 (idot.h) + 2-4 ldp of X + scvtf + fmul + fmla
 * (+ fmla for the mins).
 */

enum { F_Q4_K, F_Q5_K, F_Q6_K = -1 }; /* q6_K: F < 0 */

ARM_INL float f16_at(const uint8_t *p) {
    return vgetq_lane_f32(vcvt_f32_f16(vreinterpret_f16_u16(vld1_dup_u16((const uint16_t *)p))), 0);
}

/* A[s] = d*sc[s], B[s] = -dmin*m[s], s < 8, of a q4_K/q5_K super-block.
 * Lanes of the unpacked bytes: sc0-3 = v0-3 & 63, sc4-7 = (v8-11 & 15) |
 * (v0-3 >> 6) << 4, m0-3 = v4-7 & 63, m4-7 = (v8-11 >> 4) | (v4-7 >> 6) << 4. */
ARM_INL void kq_scales(const uint8_t *blk, float *A, float *B) {
    static const uint8_t lo_at[16] = {0, 1, 2, 3, 8, 9, 10, 11, 4, 5, 6, 7, 8, 9, 10, 11};
    static const uint8_t hi_at[16] = {255, 255, 255, 255, 0, 1, 2, 3, 255, 255, 255, 255, 4, 5, 6, 7};
    static const int8_t lo_sh[16] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, -4, -4, -4, -4};
    static const uint8_t lo_mask[16] = {63, 63, 63, 63, 15, 15, 15, 15, 63, 63, 63, 63, 15, 15, 15, 15};
    const uint8x16_t v = vld1q_u8(blk + 4); /* 12 scale bytes and 4 of what follows */
    uint8x16_t lo = vshlq_u8(vqtbl1q_u8(v, vld1q_u8(lo_at)), vld1q_s8(lo_sh));
    lo = vandq_u8(lo, vld1q_u8(lo_mask));
    const uint8x16_t hi = vshlq_n_u8(vshrq_n_u8(vqtbl1q_u8(v, vld1q_u8(hi_at)), 6), 4);
    const uint8x16_t s = vorrq_u8(lo, hi);
    const uint16x8_t sc = vmovl_u8(vget_low_u8(s)), mn = vmovl_high_u8(s);
    const float d = f16_at(blk), dmin = -f16_at(blk + 2);
    vst1q_f32(A, vmulq_n_f32(vcvtq_f32_u32(vmovl_u16(vget_low_u16(sc))), d));
    vst1q_f32(A + 4, vmulq_n_f32(vcvtq_f32_u32(vmovl_high_u16(sc)), d));
    vst1q_f32(B, vmulq_n_f32(vcvtq_f32_u32(vmovl_u16(vget_low_u16(mn))), dmin));
    vst1q_f32(B + 4, vmulq_n_f32(vcvtq_f32_u32(vmovl_high_u16(mn)), dmin));
}

/* The 64 quants of chunk j (sub-blocks 2j, 2j+1) of a q4_K/q5_K super-block:
 * W[0], W[1] = sub-block 2j's columns 0..15, 16..31; W[2], W[3] = 2j+1's. */
ARM_INL void kq_decode(const int F, const uint8_t *blk, unsigned j, int8x16_t *W) {
    const uint8_t *qs = blk + (F == F_Q4_K ? 16 : 48) + 32 * j;
    const uint8x16_t l0 = vld1q_u8(qs), l1 = vld1q_u8(qs + 16);
    if (F == F_Q4_K) {
        const uint8x16_t m4 = vdupq_n_u8(0x0f);
        W[0] = vreinterpretq_s8_u8(vandq_u8(l0, m4));
        W[1] = vreinterpretq_s8_u8(vandq_u8(l1, m4));
        W[2] = vreinterpretq_s8_u8(vshrq_n_u8(l0, 4));
        W[3] = vreinterpretq_s8_u8(vshrq_n_u8(l1, 4));
        return;
    }
    /* q5_K: bit 2j of qh[l] is the fifth bit of sub-block 2j's weight l,
     * bit 2j+1 that of sub-block 2j+1 */
    const uint8x16_t h0 = vld1q_u8(blk + 16), h1 = vld1q_u8(blk + 32);
    const uint8x16_t b0 = vdupq_n_u8((uint8_t)(1u << (2 * j))), b1 = vdupq_n_u8((uint8_t)(2u << (2 * j)));
    const uint8x16_t x10 = vdupq_n_u8(0x10);
    W[0] = vreinterpretq_s8_u8(vsliq_n_u8(l0, vshrq_n_u8(vtstq_u8(h0, b0), 7), 4));
    W[1] = vreinterpretq_s8_u8(vsliq_n_u8(l1, vshrq_n_u8(vtstq_u8(h1, b0), 7), 4));
    W[2] = vreinterpretq_s8_u8(vsriq_n_u8(vandq_u8(vtstq_u8(h0, b1), x10), l0, 4));
    W[3] = vreinterpretq_s8_u8(vsriq_n_u8(vandq_u8(vtstq_u8(h1, b1), x10), l1, 4));
}

/* Columns [c, c + 128) (half: [c, c + 64)) at chunk j of the super-blocks
 * blk[r]; A[r], B[r] that super-block's scales, padded with zeros. */
ARM_INL void kq_step(const int F, const int NT, const int half, const uint8_t *const *blk, unsigned j, float (*A)[16],
                     float (*B)[16], const int8_t *const *xp, const float *const *dp, float32x4_t (*acc)[4]) {
    const int8x16_t z = vdupq_n_s8(0);
    float dx[4][4], gs[4][4]; /* per token, of each sub-block; read back row by row */
    _Pragma("GCC unroll 4") for (int t = 0; t < NT; t++) {
        int8x16_t X[8];
        _Pragma("GCC unroll 8") for (int i = 0; i < 8; i++) { X[i] = half && i >= 4 ? z : vld1q_s8(xp[t] + 16 * i); }
        const float32x4_t d = half ? vcombine_f32(vld1_f32(dp[t]), vdup_n_f32(0.0f)) : vld1q_f32(dp[t]);
        vst1q_f32(dx[t], d);
        vst1q_f32(gs[t], vmulq_f32(vcvtq_f32_s32(xsum_g32(X)), d));
    }
    _Pragma("GCC unroll 4") for (int r = 0; r < 4; r++) {
        if (NT > 1 || F == F_Q5_K) ARM_BARRIER(); /* a row at a time: no spills */
        int8x16_t W[8];
        kq_decode(F, blk[r], j, W);
        if (half) W[4] = W[5] = W[6] = W[7] = z;
        else kq_decode(F, blk[r], j + 1, W + 4);
        const float32x4_t a = vld1q_f32(A[r] + 2 * j), b = vld1q_f32(B[r] + 2 * j);
        _Pragma("GCC unroll 4") for (int t = 0; t < NT; t++) {
            int8x16_t X[8];
            _Pragma("GCC unroll 8") for (int i = 0; i < 8; i++) {
                X[i] = half && i >= 4 ? z : vld1q_s8(xp[t] + 16 * i);
            }
            const int32x4_t s = dot_g32(F == F_Q4_K ? WCLS_NARROW : WCLS_WIDE, W, X);
            acc[r][t] = vfmaq_f32(acc[r][t], vcvtq_f32_s32(s), vmulq_f32(a, vld1q_f32(dx[t])));
            acc[r][t] = vfmaq_f32(acc[r][t], b, vld1q_f32(gs[t]));
        }
    }
}

/* d * sc[g] of the 16 groups of a q6_K super-block */
ARM_INL void q6_scales(const uint8_t *blk, float *A) {
    const int8x16_t s = vld1q_s8((const int8_t *)blk + 192);
    const int16x8_t s0 = vmovl_s8(vget_low_s8(s)), s1 = vmovl_high_s8(s);
    const float d = f16_at(blk + 208);
    vst1q_f32(A, vmulq_n_f32(vcvtq_f32_s32(vmovl_s16(vget_low_s16(s0))), d));
    vst1q_f32(A + 4, vmulq_n_f32(vcvtq_f32_s32(vmovl_high_s16(s0)), d));
    vst1q_f32(A + 8, vmulq_n_f32(vcvtq_f32_s32(vmovl_s16(vget_low_s16(s1))), d));
    vst1q_f32(A + 12, vmulq_n_f32(vcvtq_f32_s32(vmovl_high_s16(s1)), d));
}

/* The quants of a q6_K super-block minus 32, 16 columns a register: chunk j
 * alone (two = 0: W[0..3]) or chunks j, j + 1 (two = 1, j even: W[0..7]).
 * Chunks 2h and 2h + 1 share their bytes: ql 64h.. (nibble j % 2) and qh
 * 128 + 32h.. (bits 4(j % 2) for groups 0, 1 and 4(j % 2) + 2 for groups
 * 2, 3 of the chunk). */
ARM_INL void q6_decode(const int two, const uint8_t *blk, unsigned j, int8x16_t *W) {
    const uint8_t *ql = blk + 64 * (j / 2), *qh = blk + 128 + 32 * (j / 2);
    const uint8x16_t l0 = vld1q_u8(ql), l1 = vld1q_u8(ql + 16), l2 = vld1q_u8(ql + 32), l3 = vld1q_u8(ql + 48);
    const uint8x16_t h0 = vld1q_u8(qh), h1 = vld1q_u8(qh + 16);
    const uint8x16_t h2 = vshrq_n_u8(h0, 2), h3 = vshrq_n_u8(h1, 2);
    const int8x16_t o = vdupq_n_s8(32);
    uint8x16_t q[8];
    int n = 0;
    if (two || j % 2 == 0) { /* low nibbles; (qh & 3) and (qh >> 2 & 3) inserted above them */
        const uint8x16_t m3 = vdupq_n_u8(3);
        q[n++] = vsliq_n_u8(l0, vandq_u8(h0, m3), 4);
        q[n++] = vsliq_n_u8(l1, vandq_u8(h1, m3), 4);
        q[n++] = vsliq_n_u8(l2, vandq_u8(h2, m3), 4);
        q[n++] = vsliq_n_u8(l3, vandq_u8(h3, m3), 4);
    }
    if (two || j % 2 == 1) { /* high nibbles under (qh & 0x30) and (qh >> 2 & 0x30) */
        const uint8x16_t m30 = vdupq_n_u8(0x30);
        q[n++] = vsriq_n_u8(vandq_u8(h0, m30), l0, 4);
        q[n++] = vsriq_n_u8(vandq_u8(h1, m30), l1, 4);
        q[n++] = vsriq_n_u8(vandq_u8(h2, m30), l2, 4);
        q[n++] = vsriq_n_u8(vandq_u8(h3, m30), l3, 4);
    }
    _Pragma("GCC unroll 8") for (int g = 0; g < 4 + 4 * two; g++) { W[g] = vsubq_s8(vreinterpretq_s8_u8(q[g]), o); }
}

/* Columns [c, c + 64) (two: [c, c + 128)) at chunk j of the super-blocks
 * blk[r]; A[r] their scales. */
ARM_INL void q6_step(const int NT, const int two, const uint8_t *const *blk, unsigned j, float (*A)[16],
                     const int8_t *const *xp, const float *const *dp, float32x4_t (*acc)[4]) {
    float dx[4][2][4]; /* one scale per group of 16: dx0 dx0 dx1 dx1 (dx2 dx2 dx3 dx3) */
    _Pragma("GCC unroll 4") for (int t = 0; t < NT; t++) {
        const float32x4_t d = two ? vld1q_f32(dp[t]) : vcombine_f32(vld1_f32(dp[t]), vld1_f32(dp[t]));
        vst1q_f32(dx[t][0], vzip1q_f32(d, d));
        vst1q_f32(dx[t][1], vzip2q_f32(d, d));
    }
    _Pragma("GCC unroll 4") for (int r = 0; r < 4; r++) {
        ARM_BARRIER(); /* a row at a time: no spills */
        int8x16_t W[8];
        q6_decode(two, blk[r], j, W);
        const float32x4_t a0 = vld1q_f32(A[r] + 4 * j), a1 = two ? vld1q_f32(A[r] + 4 * j + 4) : a0;
        _Pragma("GCC unroll 4") for (int t = 0; t < NT; t++) {
            int8x16_t X[8];
            _Pragma("GCC unroll 8") for (int i = 0; i < 4 + 4 * two; i++) { X[i] = vld1q_s8(xp[t] + 16 * i); }
            acc[r][t] = vfmaq_f32(acc[r][t], vcvtq_f32_s32(dot_g16(W, X)), vmulq_f32(a0, vld1q_f32(dx[t][0])));
            if (two)
                acc[r][t] =
                    vfmaq_f32(acc[r][t], vcvtq_f32_s32(dot_g16(W + 4, X + 4)), vmulq_f32(a1, vld1q_f32(dx[t][1])));
        }
    }
}

/* F: F_Q4_K, F_Q5_K, or -1 for q6_K */
ARM_INL void kq_tile(const int F, const int NT, R1_KQ_TILE_ARGS) {
    const size_t bs = F == F_Q4_K ? 144 : F == F_Q5_K ? 176 : 210, qoff = r1_cpu_q8_qoff(K);
    const uint8_t *wr[4] = {w, w + (nr > 1 ? ws : 0), w + (nr > 2 ? 2 * ws : 0), w + (nr > 3 ? 3 * ws : 0)};
    const uint8_t *xt[4];
    for (int t = 0; t < NT; t++) xt[t] = x + (size_t)(t < nt ? t : 0) * xs;
    float32x4_t acc[4][4];
    _Pragma("GCC unroll 4") for (int r = 0; r < 4; r++) _Pragma("GCC unroll 4") for (int t = 0; t < NT; t++) acc[r][t] =
        vdupq_n_f32(0.0f);
    float A[4][16], B[4][16]; /* lanes past the super-block's stay 0 */
    memset(A, 0, sizeof A);
    memset(B, 0, sizeof B);
    int c = k0;
    while (c < k1) {
        const int sb = (int)((unsigned)c / R1_QK_K), send = k1 < (sb + 1) * R1_QK_K ? k1 : (sb + 1) * R1_QK_K;
        const uint8_t *blk[4];
        _Pragma("GCC unroll 4") for (int r = 0; r < 4; r++) {
            blk[r] = wr[r] + (size_t)sb * bs;
            if (F < 0) q6_scales(blk[r], A[r]);
            else kq_scales(blk[r], A[r], B[r]);
        }
        while (c < send) {
            const unsigned j = (unsigned)c % R1_QK_K / 64;
            const int n = c + 128 <= send && (F >= 0 || (j % 2 == 0 && NT <= 2)) ? 128 : 64;
            const int8_t *xp[4];
            const float *dp[4];
            _Pragma("GCC unroll 4") for (int t = 0; t < NT; t++) {
                xp[t] = (const int8_t *)(xt[t] + qoff) + c;
                dp[t] = (const float *)xt[t] + (unsigned)c / 32;
            }
            if (NT <= 2) { /* decode: fetch the next 4 rows' bytes of this step ahead (not
                            * measured on ARM hardware; the x86 tiles gained from it) */
                const size_t off = F < 0 ? (size_t)64 * (j / 2) : (size_t)(F == F_Q4_K ? 16 : 48) + 32 * j;
                _Pragma("GCC unroll 4") for (int r = 0; r < 4; r++) __builtin_prefetch(blk[r] + 4 * ws + off);
            }
            if (F < 0 && n == 128) q6_step(NT, 1, blk, j, A, xp, dp, acc);
            else if (F < 0) q6_step(NT, 0, blk, j, A, xp, dp, acc);
            else if (n == 128) kq_step(F, NT, 0, blk, j, A, B, xp, dp, acc);
            else kq_step(F, NT, 1, blk, j, A, B, xp, dp, acc);
            c += n;
        }
    }
    float res[4][4];
    _Pragma("GCC unroll 4") for (int r = 0; r < 4; r++) _Pragma("GCC unroll 4") for (int t = 0; t < NT; t++) res[r][t] =
        vaddvq_f32(acc[r][t]);
    for (int t = 0; t < nt; t++)
        for (int r = 0; r < nr; r++) out[t * R1_CPU_MR + r] = res[r][t];
}

#define KQ_TILE(NAME, F)                                                                                               \
    static ARM_TGT void NAME##_nt1(R1_KQ_TILE_ARGS) { kq_tile(F, 1, K, k0, k1, w, ws, nr, x, xs, nt, out); }           \
    static ARM_TGT void NAME##_nt2(R1_KQ_TILE_ARGS) { kq_tile(F, 2, K, k0, k1, w, ws, nr, x, xs, nt, out); }           \
    static ARM_TGT void NAME##_nt4(R1_KQ_TILE_ARGS) { kq_tile(F, 4, K, k0, k1, w, ws, nr, x, xs, nt, out); }           \
    ARM_TGT void NAME(R1_KQ_TILE_ARGS) {                                                                               \
        r1_cpu_tile_nt(NAME##_nt1, NAME##_nt2, NAME##_nt4, K, k0, k1, w, ws, nr, x, xs, nt, out);                      \
    }
