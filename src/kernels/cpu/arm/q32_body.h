/*
 * q32_body.h - template (no include guard): the AArch64 tiles for the
 * 32-weight block formats q8_0, q4_0, q4_1, q5_0, q5_1 against q8
 * activations, and q4_0x8 against q8x8 activations, included by
 * arm/tiles_neon.c and arm/tiles_dot.c after arm/idot.h. Q32_TILE(NAME, F)
 * defines the exported tile NAME of format F, X8_TILE(NAME) the q4_0x8 one;
 * the including file spells out the names, so that grep finds each tile's
 * definition. Nothing here may be used outside those files.
 *
 * A step is 128 columns: 4 blocks of each of 4 rows, decoded once into 8
 * int8x16 registers and two float vectors (lane i: block i's d, and its m
 * for the _1 formats), then used for every token:
 *   acc[r][t] += cvt(dot_g32(W, X_t)) * (d_r * dx_t)      (lane i: block i)
 *   acc[r][t] += m_r * (dx_t * sum of X_t's block)         (_1 formats)
 * q4_0 and q5_0 are decoded to signed values (q - 8, q - 16), q4_1 and q5_1
 * to unsigned ones; q5's fifth bit comes from a table lookup of the qh byte
 * and a bit test. A last part of 1-3 blocks is copied into zero-padded
 * buffers and run as one more step. Lanes are summed once, at the end.
 *
 * Instructions per step and row (decode, shared by the tokens): q8_0 8 ldr
 * + 5 scale; q4_0 4 ldr + 16 and/ushr/sub + 5; q4_1 4 + 8 + 10; q5_0 and
 * q5_1 4 + 44 + 5 (+5); per row and token: dot_g32 (idot.h) + 4 ldr/ldp of
 * X + scvtf + fmul + fmla (+ fmla for the _1 formats); per token: ldr dx
 * (+ xsum_g32, scvtf, fmul for the _1 formats).
 *
 * q4_0x8 (dtype.h: 8 q4_0 blocks regrouped, 256 columns) needs neither: 16
 * bytes of its quants hold 4 bytes of each of 4 blocks, the matching 16 of
 * the q8x8 activations (cpu.h) likewise, so dot_x8 sums each block in its
 * own 32-bit lane, starting from the activations' -8 x lane sums (nx: the
 * nibbles need no offset), and the 8 f16 scales are one load. Per 256
 * columns and row: 4 ldp + 8 and/ushr + 1 ldr + 2 fcvtl; per row and token:
 * 2 dot_x8 (16 sdot) + 8 ldp of X + 2 (scvtf + fmul + fmla); per token: 4
 * ldr + 2 add.
 */

enum { F_Q8_0, F_Q4_0, F_Q4_1, F_Q5_0, F_Q5_1 };

#define Q32_BS(F) ((F) == F_Q8_0 ? 34 : (F) == F_Q4_0 ? 18 : (F) == F_Q4_1 ? 20 : (F) == F_Q5_0 ? 22 : 24)
#define Q32_MIN(F) ((F) == F_Q4_1 || (F) == F_Q5_1) /* w = d*q + m */
#define Q32_CLS(F) ((F) == F_Q8_0 ? WCLS_Q8 : (F) == F_Q5_1 ? WCLS_WIDE : WCLS_NARROW)

/* The f16 at p + i * stride, i < 4, as f32 lanes (p 2-byte aligned). */
ARM_INL float32x4_t f16x4(const uint8_t *p, size_t stride) {
    uint16x4_t h = vld1_dup_u16((const uint16_t *)p);
    h = vld1_lane_u16((const uint16_t *)(p + stride), h, 1);
    h = vld1_lane_u16((const uint16_t *)(p + 2 * stride), h, 2);
    h = vld1_lane_u16((const uint16_t *)(p + 3 * stride), h, 3);
    return vcvt_f32_f16(vreinterpret_f16_u16(h));
}

/* The 4 blocks at p: W[2i], W[2i+1] = block i's weights 0..15, 16..31;
 * *a = the d of each block, *b = its m (_1 formats). */
ARM_INL void q32_decode(const int F, const uint8_t *p, int8x16_t *W, float32x4_t *a, float32x4_t *b) {
    static const uint8_t idx[2][16] = {{0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1},
                                       {2, 2, 2, 2, 2, 2, 2, 2, 3, 3, 3, 3, 3, 3, 3, 3}};
    static const uint8_t bit[16] = {1, 2, 4, 8, 16, 32, 64, 128, 1, 2, 4, 8, 16, 32, 64, 128};
    const size_t bs = Q32_BS(F);
    *a = f16x4(p, bs);
    if (Q32_MIN(F)) *b = f16x4(p + 2, bs);
    const uint8x16_t m4 = vdupq_n_u8(0x0f);
    _Pragma("GCC unroll 4") for (int i = 0; i < 4; i++) {
        const uint8_t *blk = p + (size_t)i * bs;
        if (F == F_Q8_0) {
            W[2 * i] = vld1q_s8((const int8_t *)blk + 2);
            W[2 * i + 1] = vld1q_s8((const int8_t *)blk + 18);
            continue;
        }
        const uint8x16_t q = vld1q_u8(blk + (F == F_Q4_0 ? 2 : F == F_Q4_1 ? 4 : F == F_Q5_0 ? 6 : 8));
        uint8x16_t lo, hi;
        if (F == F_Q4_0 || F == F_Q4_1) {
            lo = vandq_u8(q, m4);
            hi = vshrq_n_u8(q, 4);
            if (F == F_Q4_0) {
                lo = vsubq_u8(lo, vdupq_n_u8(8));
                hi = vsubq_u8(hi, vdupq_n_u8(8));
            }
        } else {
            /* bit l of qh is the fifth bit of weight l: 0xff masks per weight */
            uint32_t qh;
            memcpy(&qh, blk + (F == F_Q5_0 ? 2 : 4), 4);
            const uint8x16_t hv = vreinterpretq_u8_u32(vdupq_n_u32(qh)), bits = vld1q_u8(bit);
            const uint8x16_t h0 = vtstq_u8(vqtbl1q_u8(hv, vld1q_u8(idx[0])), bits);
            const uint8x16_t h1 = vtstq_u8(vqtbl1q_u8(hv, vld1q_u8(idx[1])), bits);
            if (F == F_Q5_0) { /* q - 16: high nibble 0 with the bit, 0xf0 without */
                lo = vsliq_n_u8(q, vbicq_u8(m4, h0), 4);
                hi = vsriq_n_u8(vbicq_u8(vdupq_n_u8(0xf0), h1), q, 4);
            } else {
                lo = vsliq_n_u8(q, vshrq_n_u8(h0, 7), 4);
                hi = vsriq_n_u8(vandq_u8(h1, vdupq_n_u8(0x10)), q, 4);
            }
        }
        W[2 * i] = vreinterpretq_s8_u8(lo);
        W[2 * i + 1] = vreinterpretq_s8_u8(hi);
    }
}

/* One step: wp[r] = row r's first block, xp[t] / dp[t] = token t's quants
 * and scales at the step's first column. */
ARM_INL void q32_step(const int F, const int NT, const uint8_t *const *wp, const int8_t *const *xp,
                      const float *const *dp, float32x4_t (*acc)[4]) {
    float gs[4][4]; /* per token dx * (sum of X) of each block; read back row by row */
    _Pragma("GCC unroll 4") for (int t = 0; t < NT; t++) {
        if (Q32_MIN(F)) {
            int8x16_t X[8];
            _Pragma("GCC unroll 8") for (int i = 0; i < 8; i++) X[i] = vld1q_s8(xp[t] + 16 * i);
            vst1q_f32(gs[t], vmulq_f32(vcvtq_f32_s32(xsum_g32(X)), vld1q_f32(dp[t])));
        }
    }
    _Pragma("GCC unroll 4") for (int r = 0; r < 4; r++) {
        if (NT > 1 || F == F_Q5_0 || F == F_Q5_1) ARM_BARRIER(); /* a row at a time: no spills */
        int8x16_t W[8];
        float32x4_t a, b = vdupq_n_f32(0.0f);
        q32_decode(F, wp[r], W, &a, &b);
        _Pragma("GCC unroll 4") for (int t = 0; t < NT; t++) {
            int8x16_t X[8];
            _Pragma("GCC unroll 8") for (int i = 0; i < 8; i++) X[i] = vld1q_s8(xp[t] + 16 * i);
            const int32x4_t s = dot_g32(Q32_CLS(F), W, X);
            acc[r][t] = vfmaq_f32(acc[r][t], vcvtq_f32_s32(s), vmulq_f32(a, vld1q_f32(dp[t])));
            if (Q32_MIN(F)) acc[r][t] = vfmaq_f32(acc[r][t], b, vld1q_f32(gs[t]));
        }
    }
}

ARM_INL void q32_tile(const int F, const int NT, R1_KQ_TILE_ARGS) {
    const size_t bs = Q32_BS(F), qoff = r1_cpu_q8_qoff(K);
    /* rows past nr and tokens past nt repeat the first (computed, not stored) */
    const uint8_t *wr[4] = {w, w + (nr > 1 ? ws : 0), w + (nr > 2 ? 2 * ws : 0), w + (nr > 3 ? 3 * ws : 0)};
    const uint8_t *xt[4];
    for (int t = 0; t < NT; t++) xt[t] = x + (size_t)(t < nt ? t : 0) * xs;
    float32x4_t acc[4][4];
    _Pragma("GCC unroll 4") for (int r = 0; r < 4; r++) _Pragma("GCC unroll 4") for (int t = 0; t < NT; t++) acc[r][t] =
        vdupq_n_f32(0.0f);
    int c = k0;
    for (; c + 128 <= k1; c += 128) {
        const uint8_t *wp[4];
        const int8_t *xp[4];
        const float *dp[4];
        _Pragma("GCC unroll 4") for (int r = 0; r < 4; r++) {
            wp[r] = wr[r] + ((size_t)c / 32) * bs;
            /* decode: fetch the next 4 rows' blocks ahead (not measured on ARM
             * hardware; the x86 tiles gained from it) */
            if (NT <= 2) __builtin_prefetch(wp[r] + 4 * ws);
        }
        _Pragma("GCC unroll 4") for (int t = 0; t < NT; t++) {
            xp[t] = (const int8_t *)(xt[t] + qoff) + c;
            dp[t] = (const float *)xt[t] + (size_t)c / 32;
        }
        q32_step(F, NT, wp, xp, dp, acc);
    }
    if (c < k1) { /* 1-3 blocks: a step on zero-padded copies */
        const int nb = (k1 - c) / 32;
        uint8_t wb[4][4 * 34];
        int8_t xb[4][128];
        float db[4][4];
        const uint8_t *wp[4];
        const int8_t *xp[4];
        const float *dp[4];
        memset(wb, 0, sizeof wb);
        memset(xb, 0, sizeof xb);
        memset(db, 0, sizeof db);
        for (int r = 0; r < 4; r++) {
            memcpy(wb[r], wr[r] + ((size_t)c / 32) * bs, (size_t)nb * bs);
            wp[r] = wb[r];
        }
        for (int t = 0; t < NT; t++) {
            memcpy(xb[t], xt[t] + qoff + c, (size_t)nb * 32);
            memcpy(db[t], (const float *)xt[t] + (size_t)c / 32, (size_t)nb * sizeof(float));
            xp[t] = xb[t];
            dp[t] = db[t];
        }
        q32_step(F, NT, wp, xp, dp, acc);
    }
    float res[4][4];
    _Pragma("GCC unroll 4") for (int r = 0; r < 4; r++) _Pragma("GCC unroll 4") for (int t = 0; t < NT; t++) res[r][t] =
        vaddvq_f32(acc[r][t]);
    for (int t = 0; t < nt; t++)
        for (int r = 0; r < nr; r++) out[t * R1_CPU_MR + r] = res[r][t];
}

/* Super-block s of q4_0x8 rows (wr[r]) against q8x8 tokens (xt[t]). */
ARM_INL void x8_step(const int NT, const uint8_t *const *wr, const uint8_t *const *xt, size_t s,
                     float32x4_t (*acc)[4]) {
    int32_t nx[4][2][4]; /* per token -8 x the sums of blocks 0-3, 4-7; read back row by row */
    _Pragma("GCC unroll 4") for (int t = 0; t < NT; t++) {
        const int32_t *n = (const int32_t *)(xt[t] + s * R1_CPU_Q8X8_BYTES + 256);
        vst1q_s32(nx[t][0], vaddq_s32(vld1q_s32(n), vld1q_s32(n + 8)));
        vst1q_s32(nx[t][1], vaddq_s32(vld1q_s32(n + 4), vld1q_s32(n + 12)));
    }
    _Pragma("GCC unroll 4") for (int r = 0; r < 4; r++) {
        const uint8_t *bp = wr[r] + s * 144;
        const float16x8_t h = vld1q_f16((const float16_t *)bp);
        const float32x4_t dw[2] = {vcvt_f32_f16(vget_low_f16(h)), vcvt_high_f32_f16(h)};
        /* quant registers 0, 2, 4, 6 hold blocks 0-3, registers 1, 3, 5, 7 blocks 4-7 */
        _Pragma("GCC unroll 2") for (int p = 0; p < 2; p++) {
            ARM_BARRIER(); /* half a row at a time: no spills */
            int8x16_t Wl[4], Wh[4];
            _Pragma("GCC unroll 4") for (int i = 0; i < 4; i++) {
                const uint8x16_t q = vld1q_u8(bp + 16 + 32 * i + 16 * p);
                Wl[i] = vreinterpretq_s8_u8(vandq_u8(q, vdupq_n_u8(0x0f)));
                Wh[i] = vreinterpretq_s8_u8(vshrq_n_u8(q, 4));
            }
            _Pragma("GCC unroll 4") for (int t = 0; t < NT; t++) {
                const int8_t *xp = (const int8_t *)xt[t] + s * R1_CPU_Q8X8_BYTES + 16 * p;
                int8x16_t Xl[4], Xh[4];
                _Pragma("GCC unroll 4") for (int i = 0; i < 4; i++) {
                    Xl[i] = vld1q_s8(xp + 32 * i);
                    Xh[i] = vld1q_s8(xp + 128 + 32 * i);
                }
                const int32x4_t si = dot_x8(vld1q_s32(nx[t][p]), Wl, Wh, Xl, Xh);
                const float32x4_t dx = vld1q_f32((const float *)(xt[t] + s * R1_CPU_Q8X8_BYTES + 320) + 4 * p);
                acc[r][t] = vfmaq_f32(acc[r][t], vcvtq_f32_s32(si), vmulq_f32(dw[p], dx));
            }
        }
    }
}

/* k0, k1: multiples of 256 (q8x8 activations) */
ARM_INL void x8_tile(const int NT, R1_KQ_TILE_ARGS) {
    (void)K;
    const uint8_t *wr[4] = {w, w + (nr > 1 ? ws : 0), w + (nr > 2 ? 2 * ws : 0), w + (nr > 3 ? 3 * ws : 0)};
    const uint8_t *xt[4];
    for (int t = 0; t < NT; t++) xt[t] = x + (size_t)(t < nt ? t : 0) * xs;
    float32x4_t acc[4][4];
    _Pragma("GCC unroll 4") for (int r = 0; r < 4; r++) _Pragma("GCC unroll 4") for (int t = 0; t < NT; t++) acc[r][t] =
        vdupq_n_f32(0.0f);
    for (size_t s = (size_t)k0 / 256; s < (size_t)k1 / 256; s++) {
        if (NT <= 2) { /* decode: the next 4 rows' super-block ahead (as above) */
            _Pragma("GCC unroll 4") for (int r = 0; r < 4; r++) {
                __builtin_prefetch(wr[r] + s * 144 + 4 * ws);
                __builtin_prefetch(wr[r] + s * 144 + 4 * ws + 143);
            }
        }
        x8_step(NT, wr, xt, s, acc);
    }
    float res[4][4];
    _Pragma("GCC unroll 4") for (int r = 0; r < 4; r++) _Pragma("GCC unroll 4") for (int t = 0; t < NT; t++) res[r][t] =
        vaddvq_f32(acc[r][t]);
    for (int t = 0; t < nt; t++)
        for (int r = 0; r < nr; r++) out[t * R1_CPU_MR + r] = res[r][t];
}

/* One function per token count (1, 2, 4: nt = 3 runs the 4-token one). */
#define Q32_TILE(NAME, F)                                                                                              \
    static ARM_TGT void NAME##_nt1(R1_KQ_TILE_ARGS) { q32_tile(F, 1, K, k0, k1, w, ws, nr, x, xs, nt, out); }          \
    static ARM_TGT void NAME##_nt2(R1_KQ_TILE_ARGS) { q32_tile(F, 2, K, k0, k1, w, ws, nr, x, xs, nt, out); }          \
    static ARM_TGT void NAME##_nt4(R1_KQ_TILE_ARGS) { q32_tile(F, 4, K, k0, k1, w, ws, nr, x, xs, nt, out); }          \
    ARM_TGT void NAME(R1_KQ_TILE_ARGS) {                                                                               \
        r1_cpu_tile_nt(NAME##_nt1, NAME##_nt2, NAME##_nt4, K, k0, k1, w, ws, nr, x, xs, nt, out);                      \
    }
#define X8_TILE(NAME)                                                                                                  \
    static ARM_TGT void NAME##_nt1(R1_KQ_TILE_ARGS) { x8_tile(1, K, k0, k1, w, ws, nr, x, xs, nt, out); }              \
    static ARM_TGT void NAME##_nt2(R1_KQ_TILE_ARGS) { x8_tile(2, K, k0, k1, w, ws, nr, x, xs, nt, out); }              \
    static ARM_TGT void NAME##_nt4(R1_KQ_TILE_ARGS) { x8_tile(4, K, k0, k1, w, ws, nr, x, xs, nt, out); }              \
    ARM_TGT void NAME(R1_KQ_TILE_ARGS) {                                                                               \
        r1_cpu_tile_nt(NAME##_nt1, NAME##_nt2, NAME##_nt4, K, k0, k1, w, ws, nr, x, xs, nt, out);                      \
    }
