/*
 * amx_emu.c - a software model of the AMX instructions amx_tile.h names,
 * for the "avx512-amx-emu" kernel set: the AMX blocks' source compiled
 * against it runs on any x86-64 CPU, so their indexing, tile shapes and
 * arithmetic are tested where the hardware is missing. Slow (plain C), and
 * never chosen by default.
 *
 * What it models (Intel SDM, palette 1): 8 tiles of up to 16 rows x 64
 * bytes per thread; LDTILECFG's checks; TILELOADD / TILESTORED of rows x
 * colsb bytes, a load zeroing the rest of the tile; TILEZERO; TDPBF16PS with
 * its shape rules (a.rows == dst.rows, a.colsb == 4 b.rows, b.colsb ==
 * dst.colsb) and its arithmetic: per output element the even and odd bf16
 * products are each summed over k into an f32 (one FMA a term, round to
 * nearest even), the two sums added, and that added to the element; input
 * denormals read as zero and output denormals flushed to zero, whatever
 * MXCSR says. A fault the hardware would raise stops the process.
 */
#include "kernels/cpu/x86/amx_tile.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define NTILE 8

static _Thread_local struct {
    int valid;
    uint8_t rows[NTILE];
    uint16_t colsb[NTILE];
    uint8_t t[NTILE][16][64];
} st;

static void fault(const char *what, int t) {
    fprintf(stderr, "amx emulation: %s (tile %d): the hardware would fault here\n", what, t);
    abort();
}

static void check_tile(int t, const char *op) {
    if (!st.valid) fault(op, t);
    if (t < 0 || t >= NTILE || st.rows[t] == 0 || st.colsb[t] == 0) fault(op, t);
}

void r1_amx_emu_loadconfig(const struct r1_amx_cfg *cfg) {
    memset(&st, 0, sizeof st);
    if (cfg->palette == 0) return; /* the init state: no tile usable */
    if (cfg->palette != 1) fault("LDTILECFG: palette other than 1", -1);
    for (int i = 0; i < 16; i++) {
        const int used = cfg->rows[i] || cfg->colsb[i];
        if (i >= NTILE) {
            if (used) fault("LDTILECFG: a tile past the 8 of palette 1", i);
            continue;
        }
        if (used && (!cfg->rows[i] || !cfg->colsb[i])) fault("LDTILECFG: rows or colsb zero", i);
        if (cfg->rows[i] > 16 || cfg->colsb[i] > 64 || cfg->colsb[i] % 4)
            fault("LDTILECFG: more than 16 rows, 64 bytes a row, or colsb % 4", i);
        st.rows[i] = cfg->rows[i];
        st.colsb[i] = cfg->colsb[i];
    }
    st.valid = 1;
}

void r1_amx_emu_zero(int t) {
    check_tile(t, "TILEZERO");
    memset(st.t[t], 0, sizeof st.t[t]);
}

void r1_amx_emu_loadd(int t, const void *base, long stride) {
    check_tile(t, "TILELOADD");
    memset(st.t[t], 0, sizeof st.t[t]);
    for (int r = 0; r < st.rows[t]; r++) memcpy(st.t[t][r], (const uint8_t *)base + r * stride, st.colsb[t]);
}

void r1_amx_emu_stored(int t, void *base, long stride) {
    check_tile(t, "TILESTORED");
    for (int r = 0; r < st.rows[t]; r++) memcpy((uint8_t *)base + r * stride, st.t[t][r], st.colsb[t]);
}

/* The products touch only the model's tile registers, so sanitizer builds
 * leave them uninstrumented (a tenth of the time there); the loads and
 * stores, which read and write the caller's memory, stay checked. */
#if defined(__GNUC__)
#define EMU_NO_SAN __attribute__((no_sanitize("address", "undefined")))
#else
#define EMU_NO_SAN
#endif

/* bf16 as the tile unit reads it: denormals are zero */
static inline EMU_NO_SAN float bf16_daz(const uint8_t *p) {
    uint32_t u = (uint32_t)(p[0] | p[1] << 8) << 16;
    if ((u & 0x7f800000u) == 0) u &= 0x80000000u;
    float f;
    memcpy(&f, &u, 4);
    return f;
}
/* an f32 result as the tile unit writes it: denormals flushed to zero */
static inline EMU_NO_SAN float ftz(float f) { return fabsf(f) < 0x1p-126f ? copysignf(0.0f, f) : f; }

#if defined(__x86_64__)
#define EMU_TGT __attribute__((target("avx2,fma"))) /* fmaf inline; x86-64 CPUs that run it have both */
#else
#define EMU_TGT
#endif

EMU_TGT EMU_NO_SAN void r1_amx_emu_dpbf16ps(int dst, int a, int b) {
    check_tile(dst, "TDPBF16PS dst");
    check_tile(a, "TDPBF16PS src1");
    check_tile(b, "TDPBF16PS src2");
    if (dst == a || dst == b || a == b) fault("TDPBF16PS: the same tile twice", dst);
    if (st.rows[a] != st.rows[dst] || st.colsb[a] != 4 * st.rows[b] || st.colsb[b] != st.colsb[dst])
        fault("TDPBF16PS: tile shapes that do not chain", dst);
    const int K = st.colsb[a] / 4, N = st.colsb[dst] / 4;
    /* src2's pairs split into its even and odd elements, as floats */
    float be[16][16] = {{0}}, bo[16][16] = {{0}}; /* n past N: computed, not stored */
    for (int k = 0; k < K; k++)
        for (int n = 0; n < N; n++) {
            be[k][n] = bf16_daz(st.t[b][k] + 4 * n);
            bo[k][n] = bf16_daz(st.t[b][k] + 4 * n + 2);
        }
    for (int m = 0; m < st.rows[dst]; m++) {
        float even[16] = {0}, odd[16] = {0};
        for (int k = 0; k < K; k++) {
            const float ae = bf16_daz(st.t[a][m] + 4 * k), ao = bf16_daz(st.t[a][m] + 4 * k + 2);
            for (int n = 0; n < 16; n++) {
                even[n] = ftz(fmaf(ae, be[k][n], even[n]));
                odd[n] = ftz(fmaf(ao, bo[k][n], odd[n]));
            }
        }
        float c[16];
        memcpy(c, st.t[dst][m], sizeof c);
        for (int n = 0; n < N; n++) c[n] = ftz(ftz(c[n]) + ftz(even[n] + odd[n]));
        memcpy(st.t[dst][m], c, (size_t)N * 4);
    }
}
