/*
 * amx_blocks.h - the AMX kernel set: the avx512 table plus prefill blocks
 * (cpu.h r1_cpu_block_fn) that multiply bf16 weight panels with bf16
 * activations in 16x16 f32 tiles, a 32-row x 32-token block per pass over K.
 * One source, compiled twice: amx_avx512.c on the hardware's tile
 * instructions ("avx512-amx", chosen where the CPU and the OS allow AMX) and
 * amx_emu_avx512.c on amx_emu.c's software model of them
 * ("avx512-amx-emu", every CPU with AVX-512 and AVX512_BF16; tests only), so
 * that the blocks are tested on every machine with AVX-512.
 *
 * Precision: the activations come in three bf16 parts x = x0 + x1 + x2
 * (cpu_act.c; x to f32 precision), the weights in one (bf16) or two
 * (amx_panel.c: hi + lo, every other format) bf16 parts, and a block sums
 * the products of the parts whose magnitude reaches 2^-17 of w x: bf16 w
 * x0, w x1, w x2; f16 and the quantized formats w_hi x0, w_hi x1, w_lo x0
 * (and f16 w_hi x2, w_lo x1: f16 is exactly hi + lo). Each product is exact
 * in the tile's f32 sums, so a block lands within f32 rounding of the
 * dequantized weights times the f32 activations: closer to ref than the
 * two-part int8 tiles of decode (test_matmul.c holds them to its float limit).
 *
 * Each thread loads the tile configuration once. Linux grants the tile
 * state per process on request (arch_prctl ARCH_REQ_XCOMP_PERM).
 */
#include "kernels/cpu/cpu.h"

#if defined(__x86_64__)
#include <cpuid.h>
#include <immintrin.h>
#include <pthread.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "kernels/cpu/x86/amx_tile.h"
#include "kernels/cpu/x86/x86.h"
#include "util/util.h"

#define TGT_B "avx512f,avx512bw,avx512vl,avx512dq,avx512vnni,avx2,fma,f16c,avx512bf16"
#if defined(R1_AMX_EMU)
#define TGTA __attribute__((target(TGT_B)))
#else
#define TGTA __attribute__((target(TGT_B ",amx-tile,amx-bf16")))
#endif

static _Thread_local int amx_ready; /* this thread loaded the tile configuration */

/* 1 if this CPU and OS run the blocks (the model: every CPU that runs the
 * avx512 table and AVX512_BF16, which the panels need). */
static int amx_probe(void) {
    if (!r1_cpu_avx512.available() || !__builtin_cpu_supports("avx512bf16")) return 0;
#if defined(R1_AMX_EMU)
    return 1;
#else
    unsigned a, b, c, d;
    if (!__get_cpuid_count(7, 0, &a, &b, &c, &d)) return 0;
    if (!((d >> 22) & 1) || !((d >> 24) & 1)) return 0; /* AMX-BF16, AMX-TILE */
#if defined(__linux__)
    return syscall(SYS_arch_prctl, 0x1023 /* ARCH_REQ_XCOMP_PERM */, 18 /* XTILEDATA */) == 0;
#else
    return 0;
#endif
#endif
}

/* C[j * ldc + i] = (or += when add) tmp[i * 16 + j] for i < ni, j < nj: a
 * stored tile (weight rows by tokens) into C (tokens by rows), transposed
 * in registers so that each token's part is one masked vector. */
static inline __attribute__((always_inline)) TGTA void tile_out(const float *tmp, float *C, int ldc, int ni, int nj,
                                                                int add) {
    __m512 row[16], col[16];
    for (int i = 0; i < 16; i++) row[i] = _mm512_loadu_ps(tmp + 16 * i);
    r1_x86_transpose16(row, col);
    const __mmask16 m = (__mmask16)(ni >= 16 ? 0xffff : (1u << ni) - 1);
    for (int j = 0; j < nj; j++) {
        float *o = C + (size_t)j * ldc;
        _mm512_mask_storeu_ps(o, m, add ? _mm512_add_ps(_mm512_maskz_loadu_ps(m, o), col[j]) : col[j]);
    }
}

/* C (=, or += when add) sum over the np pairs p of A[pa[p][0]] · B[pa[p][1]]
 * over nk chunks of 32 columns: A are bf16 weight rows (stride ws, mc a
 * multiple of 16, rows past mr zero padding), B bf16 activation parts in
 * VNNI layout (gb bytes from one group of 16 tokens to the next), both at the
 * slice's first column; each pair differs from the one before in one part,
 * so a product loads one pair of tiles (A or B), not both. Tile (i, j) of a
 * pass: weight row i, token j -> C[token * ldc + row], rows < mr only. */
static TGTA void amx_core(int nk, const uint8_t *const *A, size_t ws, int mc, int mr, const uint8_t *const *B,
                          size_t gb, const int (*pa)[2], int np, int t0, int tn, float *C, int ldc, int add) {
    if (!amx_ready) {
        struct r1_amx_cfg cfg;
        memset(&cfg, 0, sizeof cfg);
        cfg.palette = 1;
        for (int i = 0; i < 8; i++) cfg.rows[i] = 16, cfg.colsb[i] = 64;
        AMX_LOADCONFIG(&cfg);
        amx_ready = 1;
    }
    const int g0 = t0 / 16, g1 = (t0 + tn + 15) / 16;
    float tmp[16 * 16];
    for (int g = g0; g < g1; g += 2) {
        const int two_g = g + 1 < g1;
        const size_t go = (size_t)g * gb, go1 = two_g ? go + gb : go;
        for (int r = 0; r < mc; r += 32) {
            const int two_r = r + 32 <= mc;
            const size_t ro = (size_t)r * ws, ro1 = two_r ? ro + 16 * ws : ro;
            AMX_ZERO(0);
            AMX_ZERO(1);
            AMX_ZERO(2);
            AMX_ZERO(3);
            for (int c = 0; c < nk; c++) {
                int ca = -1, cb = -1; /* the parts in tiles 4, 5 and 6, 7 */
                for (int p = 0; p < np; p++) {
                    if (pa[p][0] != ca) {
                        ca = pa[p][0];
                        AMX_LOADD(4, A[ca] + ro + (size_t)c * 64, (long)ws);
                        AMX_LOADD(5, A[ca] + ro1 + (size_t)c * 64, (long)ws);
                    }
                    if (pa[p][1] != cb) {
                        cb = pa[p][1];
                        const uint8_t *b = B[cb] + (size_t)c * 1024;
                        AMX_LOADD(6, b + go, 64);
                        AMX_LOADD(7, b + go1, 64);
                    }
                    AMX_DPBF16PS(0, 4, 6);
                    AMX_DPBF16PS(2, 5, 6);
                    AMX_DPBF16PS(1, 4, 7);
                    AMX_DPBF16PS(3, 5, 7);
                }
            }
            for (int q = 0; q < 4; q++) {
                const int rq = r + 16 * (q / 2), gq = g + q % 2;
                if ((q / 2 && !two_r) || (q % 2 && !two_g)) continue;
                switch (q) { /* the tile number must be a constant */
                case 0:
                    AMX_STORED(0, tmp, 64);
                    break;
                case 1:
                    AMX_STORED(1, tmp, 64);
                    break;
                case 2:
                    AMX_STORED(2, tmp, 64);
                    break;
                default:
                    AMX_STORED(3, tmp, 64);
                    break;
                }
                const int ni = mr - rq < 16 ? mr - rq : 16, j0 = gq * 16 - t0; /* token of column 0 */
                const int nj = tn - j0 < 16 ? tn - j0 : 16;
                if (ni > 0 && nj > 0) tile_out(tmp, C + (size_t)j0 * ldc + rq, ldc, ni, nj, add);
            }
        }
    }
}

/* The products a block sums: (weight part, activation part); see the top. */
static const int pairs_bf16[][2] = {{0, 0}, {0, 1}, {0, 2}};
static const int pairs_f16[][2] = {{1, 0}, {1, 1}, {0, 1}, {0, 0}, {0, 2}};
static const int pairs_q[][2] = {{1, 0}, {0, 0}, {0, 1}};

/* r1_cpu_block_fn for every dtype with a panel (amx_panel.c) */
static int amx_block(enum r1_dtype dt, int K, int k0, int k1, const uint8_t *w, size_t ws, int mc, const uint8_t *xv,
                     size_t xplane, int t0, int tn, float *C, int ldc, int add) {
    if (K % 32 || k0 % 256 || k0 >= k1 || k1 > K || (k1 % 256 && k1 != K) || t0 % 16 || mc > 64) return -1;
    const size_t gb = (size_t)(K / 32) * 1024, xo = (size_t)(k0 / 32) * 1024;
    const int nk = (k1 - k0) / 32, ks = k1 - k0;
    const uint8_t *B[3] = {xv + xo, xv + xplane + xo, xv + 2 * xplane + xo};
    const int(*pa)[2] = dt == R1_DTYPE_BF16 ? pairs_bf16 : dt == R1_DTYPE_F16 ? pairs_f16 : pairs_q;
    const int np = dt == R1_DTYPE_F16 ? 5 : 3;
    if (dt == R1_DTYPE_BF16 && mc % 16 == 0) { /* the weights are their own panel */
        const uint8_t *A[1] = {w + (size_t)k0 * 2};
        amx_core(nk, A, ws, mc, mc, B, gb, pa, np, t0, tn, C, ldc, add);
        return 0;
    }
    /* the block's rows, hi and lo, zero-padded to a multiple of 16 rows (the
     * padding rows are computed, not stored); panel rows 64 bytes longer
     * than the slice: a tile's 16 rows a power of two apart would share a
     * few L1 sets */
    const int ps = ks + 32, mc16 = (mc + 15) & ~15; /* bf16 values a panel row */
    uint16_t *hi = (uint16_t *)r1_cpu_scratch(2, (size_t)2 * 64 * ps * 2), *lo = hi + (size_t)64 * ps;
    const size_t wo = r1_dtype_row_bytes(dt, k0); /* k0 is a whole number of every layout's groups */
    if (r1_x86_amx_panel(dt, w + wo, ws, mc, ks, ps, hi, lo) != 0) return -1;
    if (mc16 > mc) {
        memset(hi + (size_t)mc * ps, 0, (size_t)(mc16 - mc) * ps * 2);
        memset(lo + (size_t)mc * ps, 0, (size_t)(mc16 - mc) * ps * 2);
    }
    const uint8_t *A[2] = {(const uint8_t *)hi, (const uint8_t *)lo};
    amx_core(nk, A, (size_t)ps * 2, mc16, mc, B, gb, pa, np, t0, tn, C, ldc, add);
    return 0;
}

/* The kernel set: the avx512 table, with the blocks taking the batches of
 * every dtype that has a panel. Filled once, on the first availability check
 * that succeeds (the name and the check are all a set needs before that). */
static const enum r1_dtype amx_dtypes[] = {
    R1_DTYPE_BF16,   R1_DTYPE_F16,    R1_DTYPE_Q8_0,   R1_DTYPE_Q4_0,   R1_DTYPE_Q4_0X8,
    R1_DTYPE_Q4_1X8, R1_DTYPE_Q8_0X8, R1_DTYPE_Q4_KX8, R1_DTYPE_Q5_KX8, R1_DTYPE_Q6_KX8,
};
static int amx_available(void);
#if defined(R1_AMX_EMU)
struct r1_cpu_isa r1_cpu_avx512_amx_emu = {.name = "avx512-amx-emu", .available = amx_available, .emulated = 1};
#define AMX_TABLE r1_cpu_avx512_amx_emu
#else
struct r1_cpu_isa r1_cpu_avx512_amx = {.name = "avx512-amx", .available = amx_available};
#define AMX_TABLE r1_cpu_avx512_amx
#endif
static int amx_ok;
static pthread_once_t amx_once = PTHREAD_ONCE_INIT;
static void amx_fill(void) {
    amx_ok = amx_probe();
    if (!amx_ok) return;
    struct r1_cpu_isa t = r1_cpu_avx512;
    t.name = AMX_TABLE.name;
    t.available = AMX_TABLE.available;
    t.emulated = AMX_TABLE.emulated;
    t.quant_bf16 = r1_x86_quant_bf16;
    t.vnni_parts = r1_x86_vnni_parts;
    for (size_t i = 0; i < sizeof amx_dtypes / sizeof amx_dtypes[0]; i++) {
        struct r1_cpu_mm *mm = &t.mm[amx_dtypes[i]];
        mm->batch_act = R1_CPU_ACT_BF16;
        mm->batch_block = amx_block;
        /* two-part decode beside the f32-exact blocks: a sequence decoding
         * in a step with a prompt's rows gets the tokens it gets alone only
         * if its rows' form does not depend on the step's size (the one-part
         * GEMM is the avx512 set's, whose batches all take it) */
        mm->one_part = 0;
        mm->gemm = NULL;
    }
    AMX_TABLE = t;
}
static int amx_available(void) {
    pthread_once(&amx_once, amx_fill);
    return amx_ok;
}

#endif /* __x86_64__ */
