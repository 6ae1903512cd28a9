/*
 * cpu.c - the fast CPU backend: every kernel of the suite, split by
 * (ith, nth), on top of one per-ISA table of primitives (cpu.h) chosen at
 * init from what the CPU supports (AVX-512 VNNI, AVX2+FMA+F16C, NEON with or
 * without dotprod, else portable C). Matmul-type kernels walk the weights in
 * groups of isa->mr rows; for a batch (prefill) each group is used for every
 * token of a token block while it is still in cache, so weights are read from
 * memory once per TOKEN_BLOCK tokens rather than once per token.
 *
 * A dtype may have a separate batch form (T > 16; smaller batches run the
 * decode form, bit for bit a decode step per row): bf16 activations and an
 * optional whole-block function (AMX) that computes a ROW_BLOCK x TOKEN_BLOCK
 * block over all of K at once, with the tiles for what it declines.
 *
 * Kernels never allocate in steady state: activations, in the form each
 * tile reads (cpu_act.c), go to a thread-local buffer grown on first use and
 * then reused. Dtypes without a tile fall back to the reference kernel.
 */
#include "kernels/cpu/cpu.h"

#include <math.h>
#include <stddef.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util/env.h"
#include "util/util.h"

#define TOKEN_BLOCK 64 /* tokens that share one pass over the weights in prefill */
#define ROW_BLOCK 64   /* weight rows per block (a multiple of every isa->mr) */
#define TOKEN_BLOCK_PANEL                                                                                              \
    256               /* the same for the panel GEMM (cpu.h r1_cpu_panel_fn): each                                     \
                         weight panel is dequantized once per this many tokens */
#define KC 512        /* columns per slice in a batch (a multiple of 64) */
#define KC_BLOCK 1024 /* the same for the block functions (a multiple of 256: r1_cpu_block_fn) */
#define KC_BF16                                                                                                        \
    2048 /* the same for bf16 activations (half the bytes per column) and                                              \
            q8x8 ones (the x8 tiles' per-call setup wants long slices) */
/* Batches of at most SMALL_BATCH tokens (speculative verification, a few
 * sequences decoding together) run the decode form: the decode tiles and
 * activation form over all K at once, so each row's result is bit for bit
 * what a single-token step gives (greedy speculative decoding must produce
 * exactly the plain greedy tokens). Larger batches (prefill) take the batch
 * form and K slices. */
#define SMALL_BATCH 16

const struct r1_cpu_isa *const r1_cpu_isas[] = {
#if defined(__x86_64__)
    &r1_cpu_avx512_amx,
    &r1_cpu_avx512,
    &r1_cpu_avx2_vnni,
    &r1_cpu_avx2,
#endif
#if defined(__aarch64__)
    &r1_cpu_neon_dot,
    &r1_cpu_neon,
#endif
    &r1_cpu_generic,
#if defined(__x86_64__)
    &r1_cpu_avx512_amx_emu,
#endif
    NULL,
};

static _Atomic(const struct r1_cpu_isa *) current_isa;

int r1_cpu_select(const char *name) {
    for (int i = 0; r1_cpu_isas[i]; i++) {
        const struct r1_cpu_isa *isa = r1_cpu_isas[i];
        if (name ? strcmp(name, isa->name) != 0 : isa->emulated) continue;
        if (!isa->available()) {
            if (name) return r1_err("cpu backend: this CPU cannot run the '%s' kernels", name);
            continue;
        }
        atomic_store(&current_isa, isa);
        return 0;
    }
    return r1_err("cpu backend: no kernel set named '%s'", name ? name : "(best)");
}

int r1_cpu_same_decode(const struct r1_cpu_isa *a, const struct r1_cpu_isa *b) {
    int same = a->quant_q8 == b->quant_q8 && a->quant_q8_2 == b->quant_q8_2 && a->quant_q8x8 == b->quant_q8x8 &&
               a->quant_q8x8_2 == b->quant_q8x8_2 && a->mr == b->mr && a->nt == b->nt;
    for (int d = 0; d < R1_DTYPE_ALL && same; d++)
        same = a->mm[d].tile == b->mm[d].tile && a->mm[d].act == b->mm[d].act &&
               a->mm[d].pair_tile == b->mm[d].pair_tile && a->mm[d].pair_nt == b->mm[d].pair_nt &&
               a->mm[d].carry_k == b->mm[d].carry_k;
    return same;
}

/* R1_CPU_ISA=avx2 (or any table's name) runs that table instead of the best
 * one, e.g. to measure what a CPU without AVX-512 gets; honoured on first
 * use, so the loader's choices (r1_cpu_regroup_q4_0) follow it too. */
const struct r1_cpu_isa *r1_cpu_current(void) {
    const struct r1_cpu_isa *isa = atomic_load_explicit(&current_isa, memory_order_acquire);
    if (!isa) {
        const char *e = r1_env("R1_CPU_ISA");
        if (!e || !*e || r1_cpu_select(e) != 0) r1_cpu_select(NULL); /* generic always runs */
        isa = atomic_load(&current_isa);
    }
    return isa;
}

#define TUNING_DEFAULT                                                                                                 \
    {                                                                                                                  \
        .row1 = -1, .row1_act = R1_CPU_ROW1_ACT, .row_pf = 2048, .small_batch = SMALL_BATCH, .pairs = 1, .carry = 1,   \
        .vbmi = 1, .gfni = 1, .attn_split = 1, .panel = 1, .gemm = 1                                                   \
    }
struct r1_cpu_tuning r1_cpu_tuning = TUNING_DEFAULT;
static const struct r1_cpu_tuning tuning_default = TUNING_DEFAULT;
#define TUNE(F)                                                                                                        \
    { #F, offsetof(struct r1_cpu_tuning, F) }
static const struct {
    const char *name;
    size_t off;
} tunings[] = {TUNE(row1),  TUNE(row1_act),     TUNE(row_pf), TUNE(small_batch), TUNE(pairs),
               TUNE(carry), TUNE(static_split), TUNE(plain),  TUNE(q4_0_plain),  TUNE(vbmi),
               TUNE(gfni),  TUNE(attn_split),   TUNE(panel),  TUNE(gemm)};
#undef TUNE
int r1_cpu_tune(const char *name, int value) {
    if (!strcmp(name, "act_parts")) {
        if (value != 1 && value != 2) return r1_err("cpu tuning act_parts=%d: 1 or 2", value);
        r1_cpu_set_act_parts(value);
        return 0;
    }
    for (size_t i = 0; i < sizeof tunings / sizeof tunings[0]; i++)
        if (!strcmp(name, tunings[i].name)) {
            *(int *)((char *)&r1_cpu_tuning + tunings[i].off) = value;
            return 0;
        }
    return r1_err("no cpu tuning named '%s'", name);
}
void r1_cpu_tune_reset(void) {
    r1_cpu_tuning = tuning_default;
    r1_cpu_set_act_parts(-1);
}

int r1_cpu_regroup_q4_0(void) {
    return !r1_cpu_tuning.q4_0_plain && r1_cpu_current()->mm[R1_DTYPE_Q4_0X8].tile != NULL;
}

enum r1_dtype r1_cpu_layout(enum r1_dtype dt, int cols) {
    if (dt == R1_DTYPE_Q4_0) return cols % R1_QK_X8 == 0 && r1_cpu_regroup_q4_0() ? R1_DTYPE_Q4_0X8 : dt;
    static const enum r1_dtype grouped[R1_DTYPE_COUNT] = {[R1_DTYPE_Q4_1] = R1_DTYPE_Q4_1X8,
                                                          [R1_DTYPE_Q8_0] = R1_DTYPE_Q8_0X8,
                                                          [R1_DTYPE_Q4_K] = R1_DTYPE_Q4_KX8,
                                                          [R1_DTYPE_Q5_K] = R1_DTYPE_Q5_KX8,
                                                          [R1_DTYPE_Q6_K] = R1_DTYPE_Q6_KX8};
    enum r1_dtype g = (int)dt >= 0 && dt < R1_DTYPE_COUNT ? grouped[dt] : 0;
    if (!g || cols % r1_dtype_traits[g].block || r1_cpu_tuning.plain) return dt;
    return r1_cpu_current()->mm[g].tile ? g : dt;
}

/* R1_CPU_ISA names a set this build has and this CPU runs, or the backend
 * refuses to start (r1_cpu_current fell back to the best set). A program
 * that picked another set itself (r1_cpu_select: the tests, cpu_table
 * --isa) keeps its choice. */
static int cpu_init(void) {
    const struct r1_cpu_isa *isa = r1_cpu_current();
    const char *e = r1_env("R1_CPU_ISA");
    if (e && *e && strcmp(e, isa->name) != 0) {
        char names[128] = "";
        for (int i = 0; r1_cpu_isas[i]; i++) {
            if (!strcmp(e, r1_cpu_isas[i]->name)) {
                if (r1_cpu_isas[i]->available()) return 0;
                return r1_err("R1_CPU_ISA=%s: this CPU cannot run the '%s' kernels", e, e);
            }
            size_t l = strlen(names);
            snprintf(names + l, sizeof names - l, " %s", r1_cpu_isas[i]->name);
        }
        return r1_err("R1_CPU_ISA=%s: no such kernel set (this build has:%s)", e, names);
    }
    return 0;
}

/* ---- thread-local scratch: grown on first use, then reused; freed when
 * the thread exits (a pthread key destructor) ---- */
#define N_SCRATCH                                                                                                      \
    6 /* slot 3: attention blocks, 4: the panel GEMM's result blocks,                                                  \
         5: the carried sums of a small batch */
static _Thread_local uint8_t *tls_buf[N_SCRATCH];
static _Thread_local size_t tls_cap[N_SCRATCH];
_Thread_local int r1_cpu_tile_prefetch = 1;
_Thread_local void *r1_cpu_tile_acc;
static pthread_once_t tls_once = PTHREAD_ONCE_INIT;
static pthread_key_t tls_key;

static void tls_free(void *unused) {
    (void)unused;
    for (int i = 0; i < N_SCRATCH; i++) {
        free(tls_buf[i]);
        tls_buf[i] = NULL;
        tls_cap[i] = 0;
    }
}
static void tls_key_init(void) { R1_ASSERT(pthread_key_create(&tls_key, tls_free) == 0); }

uint8_t *r1_cpu_scratch(int slot, size_t bytes) {
    if (bytes > tls_cap[slot]) {
        size_t cap = (bytes + bytes / 2 + 4095) & ~(size_t)4095;
        pthread_once(&tls_once, tls_key_init);
        pthread_setspecific(tls_key, (void *)1); /* non-NULL: the destructor runs */
        free(tls_buf[slot]);
        tls_buf[slot] = aligned_alloc(64, cap);
        R1_ASSERT(tls_buf[slot] != NULL);
        tls_cap[slot] = cap;
    }
    return tls_buf[slot];
}

/* ---- matmul plumbing ---- */
enum store { STORE_SET, STORE_BIAS, STORE_ADD };

/* Activation rows per token a tile call reads: 1 for the pair tiles, which
 * read both parts of a token as one (cpu.h r1_cpu_mm.pair_tile). */
static int rows_per_token(const struct r1_cpu_mm *mm) { return mm->pairs ? 1 : r1_cpu_act_rows(mm); }

/* Two-part activations on tiles without a pair form: token t's result is
 * the sum of rows 2t and 2t+1 of C (ROW_BLOCK apart), folded in place into
 * row t for t < tn (pair tiles fold in int32 and write row t themselves). */
static void fold_parts(float *C, int tn, int mc) {
    for (int t = 0; t < tn; t++) {
        float *o = C + (size_t)t * ROW_BLOCK;
        const float *a = C + (size_t)(2 * t) * ROW_BLOCK, *b = a + ROW_BLOCK;
        for (int i = 0; i < mc; i++) o[i] = a[i] + b[i];
    }
}

/* The largest batch that runs the decode form (r1_cpu_tuning.small_batch,
 * clamped to 1..SMALL_BATCH). */
static int small_batch(void) {
    const int n = r1_cpu_tuning.small_batch;
    return n < 1 ? 1 : n > SMALL_BATCH ? SMALL_BATCH : n;
}

/* The tile for w and a batch of T tokens (in *buf), or NULL when this kernel
 * must fall back to ref. */
static const struct r1_cpu_mm *mm_for(const struct r1_cpu_isa *isa, const struct r1_mat *w, int T,
                                      struct r1_cpu_mm *buf) {
    const struct r1_cpu_mm *mm = &isa->mm[w->dtype];
    if (!mm->tile) return NULL;
    if (r1_cpu_act_q8(mm->act) && w->cols % 32) return NULL;
    if (mm->act == R1_CPU_ACT_Q8X8 && w->cols % 32) return NULL; /* a q8 tail past K % 256 */
    const int bact_ok = !(r1_cpu_act_q8(mm->batch_act) && w->cols % 32) &&
                        !(mm->batch_act == R1_CPU_ACT_Q8W && w->cols % 32) &&
                        !(mm->batch_act == R1_CPU_ACT_F32EO && w->cols % 16) && !(mm->batch_block && w->cols % 32);
    *buf = *mm;
    buf->batch_block = NULL;
    const int small_max = small_batch();
    buf->whole_k = T <= small_max;
    if (T > small_max && (mm->batch_tile || mm->batch_block) && bact_ok) {
        buf->whole_k = 0;
        buf->act = mm->batch_act;
        buf->tile = mm->batch_tile;
        buf->carry_k = 0; /* carry_k says what tile does; the batch tiles do not carry */
        buf->batch_block = mm->batch_block;
    }
    buf->pairs = 0;
    if ((buf->act == R1_CPU_ACT_Q8X8 || r1_cpu_act_q8(buf->act)) && buf->tile == mm->tile && mm->pair_tile &&
        r1_cpu_mm_parts(mm) == 2 && r1_cpu_tuning.pairs) {
        buf->tile = mm->pair_tile;
        buf->pairs = 1;
    }
    buf->batch_panel = NULL;
    if (T >= 2 && mm->gemm && r1_cpu_tuning.gemm && r1_cpu_mm_parts(mm) == 1 && w->cols % 256 == 0 &&
        !(T > small_max && buf->batch_block)) {
        /* one GEMM from 2 tokens up, each token's sums its decode step's
         * (the AMX blocks keep the batches past small_max) */
        buf->act = mm->act;
        buf->tile = mm->tile;
        buf->pairs = 0;
        buf->batch_block = NULL;
        buf->batch_panel = mm->gemm;
        return buf;
    }
    if (T > R1_CPU_PANEL_MIN_T && mm->batch_panel && r1_cpu_tuning.panel && !buf->batch_block && /* AMX blocks first */
        !(mm->panel_act == R1_CPU_ACT_Q16 && w->cols % 32)) {                                    /* mm_block's panel */
        buf->act = mm->panel_act;
        buf->batch_block = NULL;
        buf->batch_panel = mm->batch_panel;
    }
    return buf;
}

/* Rows [lo, hi) of this thread, split in whole groups of mr rows. */
static void split_rows(int rows, int mr, int ith, int nth, int *lo, int *hi) {
    int g0, g1;
    r1_split((rows + mr - 1) / mr, ith, nth, &g0, &g1);
    *lo = g0 * mr < rows ? g0 * mr : rows;
    *hi = g1 * mr < rows ? g1 * mr : rows;
}

/* Rows [r, r + nr) of tokens [t, t + nt) of C (ROW_BLOCK floats a token)
 * from a tile's out (R1_CPU_MR floats a token). */
static void put_tile(float *C, const float *tile, int t, int nt, int r, int nr) {
    for (int j = 0; j < nt; j++) {
        float *c = C + (size_t)(t + j) * ROW_BLOCK + r;
        const float *v = tile + j * R1_CPU_MR;
        for (int i = 0; i < nr; i++) c[i] = v[i];
    }
}

/* A small batch (the decode form, all K of a row in one sum) in column
 * ranges of about CARRY_ACT bytes of every token's activations, so that a
 * range stays in L1 while every group of isa->mr rows of the block uses it;
 * the tiles carry their unreduced sums from range to range (cpu.h
 * r1_cpu_tile_acc), so each row's result is the bits of one call over all K.
 * Over all K at once (below), 8 tokens' f32 activations (48 KB at K = 1536,
 * 287 KB at 8960) came from L2 again for every 4 rows. Returns -1, touching
 * nothing, when the batch's activations are at most CARRY_MIN bytes, all K
 * fits one range, or r1_cpu_tuning.carry is 0 (for comparisons). */
#define CARRY_ACT 16384
#define CARRY_MIN                                                                                                      \
    (96 << 10) /* below, whole K stays ahead: the activations stay in L2, and                                          \
                  ranges only cost their extra passes */
static int small_carry(const struct r1_cpu_isa *isa, const struct r1_cpu_mm *mm, int K, const uint8_t *base, size_t rb,
                       int r0, int mc, const uint8_t *xa, size_t xs, int t0, int tn, float *C) {
    if (!r1_cpu_tuning.carry || (size_t)tn * xs <= CARRY_MIN) return -1;
    const int tstep = mm->pairs ? mm->pair_nt : isa->nt, ng = (tn + tstep - 1) / tstep;
    const int ck = mm->carry_k;
    const size_t per_col = ((size_t)tn * xs + K - 1) / K; /* activation bytes per column */
    int kc = (int)((size_t)CARRY_ACT / per_col) / ck * ck;
    if (kc < ck) kc = ck;
    if (kc >= K) return -1;
    const int groups = (mc + isa->mr - 1) / isa->mr;
    uint8_t *acc = r1_cpu_scratch(5, (size_t)groups * ng * R1_CPU_ACC_BYTES);
    float tile[R1_CPU_MR * R1_CPU_NT];
    for (int k0 = 0; k0 < K; k0 += kc) {
        const int k1 = K - k0 <= kc ? K : k0 + kc;
        for (int r = 0; r < mc; r += isa->mr) {
            const int nr = mc - r < isa->mr ? mc - r : isa->mr;
            uint8_t *a = acc + (size_t)(r / isa->mr) * ng * R1_CPU_ACC_BYTES;
            for (int g = 0; g < ng; g++) {
                const int t = g * tstep, nt = tn - t < tstep ? tn - t : tstep;
                r1_cpu_tile_acc = a + (size_t)g * R1_CPU_ACC_BYTES;
                r1_cpu_tile_prefetch = g == 0; /* the first pass brings the rows in */
                mm->tile(K, k0, k1, base + (size_t)(r0 + r) * rb, rb, nr, xa + (size_t)(t0 + t) * xs, xs, nt, tile);
                if (k1 == K) put_tile(C, tile, t, nt, r, nr);
            }
        }
    }
    r1_cpu_tile_acc = NULL;
    r1_cpu_tile_prefetch = 1;
    return 0;
}

/* C[(t - t0) * ROW_BLOCK + i] = row r0+i of base · token t, for i < mc <= ROW_BLOCK and
 * t in [t0, t0 + tn), tn <= token_block(mm) (TOKEN_BLOCK_PANEL for the panel GEMM, which
 * makes its own slices). A batch walks K in KC-column slices so
 * the slice of ROW_BLOCK rows and of the tokens both stay in L2 while every
 * tile of them is computed; a single token streams each row group once. */
static void mm_block(const struct r1_cpu_isa *isa, const struct r1_cpu_mm *mm, enum r1_dtype dt, int K,
                     const uint8_t *base, size_t rb, int r0, int mc, const uint8_t *xa, size_t xs, int t0, int tn,
                     float *C) {
    if (mm->batch_block) { /* set only for batches past SMALL_BATCH (mm_for); long rows: block_rows */
        R1_ASSERT(mm->batch_block(dt, K, 0, K, base + (size_t)r0 * rb, rb, mc, xa, xs, t0, tn, C, ROW_BLOCK, 0) == 0);
        return;
    }
    if (mm->batch_panel) {
        mm->batch_panel(K, base + (size_t)r0 * rb, rb, mc, (const float *)(xa + (size_t)t0 * xs), xs, tn, C, ROW_BLOCK);
        return;
    }
    float tile[R1_CPU_MR * R1_CPU_NT];
    const int tstep = mm->pairs ? mm->pair_nt : isa->nt;
    const int kc = mm->whole_k || tn <= rows_per_token(mm)                    ? K /* a token's sums in one pass */
                   : mm->act == R1_CPU_ACT_BF16 || mm->act == R1_CPU_ACT_Q8X8 ? KC_BF16
                                                                              : KC;
    if (kc == K && tn > rows_per_token(mm)) {
        /* a small batch over all K: rows outer, so a group of isa->mr
         * rows comes from memory once and stays in L1 (L2 for long rows)
         * while every token group uses it; tokens outer streamed the
         * ROW_BLOCK rows again from L2 or memory for each token group */
        if (mm->whole_k && mm->carry_k && small_carry(isa, mm, K, base, rb, r0, mc, xa, xs, t0, tn, C) == 0) return;
        for (int r = 0; r < mc; r += isa->mr) {
            int nr = mc - r < isa->mr ? mc - r : isa->mr;
            for (int t = 0; t < tn; t += tstep) {
                int nt = tn - t < tstep ? tn - t : tstep;
                r1_cpu_tile_prefetch = t == 0; /* the first pass brings the rows in */
                mm->tile(K, 0, K, base + (size_t)(r0 + r) * rb, rb, nr, xa + (size_t)(t0 + t) * xs, xs, nt, tile);
                put_tile(C, tile, t, nt, r, nr);
            }
        }
        r1_cpu_tile_prefetch = 1;
        return;
    }
    for (int k0 = 0; k0 < K; k0 += kc) {
        int k1 = K - k0 < kc ? K : k0 + kc;
        /* tokens outer: a group's activation slice stays in L1 while the
         * ROW_BLOCK rows' slice comes from L2 (rows outer re-reads every
         * token's slice from L2 for each group of rows, which was slower) */
        for (int t = 0; t < tn; t += tstep) {
            int nt = tn - t < tstep ? tn - t : tstep;
            for (int r = 0; r < mc; r += isa->mr) {
                int nr = mc - r < isa->mr ? mc - r : isa->mr;
                mm->tile(K, k0, k1, base + (size_t)(r0 + r) * rb, rb, nr, xa + (size_t)(t0 + t) * xs, xs, nt, tile);
                for (int j = 0; j < nt; j++) {
                    float *c = C + (size_t)(t + j) * ROW_BLOCK + r;
                    const float *v = tile + j * R1_CPU_MR;
                    if (k0 == 0)
                        for (int i = 0; i < nr; i++) c[i] = v[i];
                    else
                        for (int i = 0; i < nr; i++) c[i] += v[i];
                }
            }
        }
    }
}

/* Tokens per block of a batch: where each block makes its weights into a
 * panel (the panel GEMM, the AMX blocks), TOKEN_BLOCK_PANEL, so that a panel
 * is made once per that many tokens; else TOKEN_BLOCK rows of activations. */
static int token_block(const struct r1_cpu_mm *mm) {
    return mm->batch_panel || mm->batch_block ? TOKEN_BLOCK_PANEL : TOKEN_BLOCK / rows_per_token(mm);
}

/* o[t * ostride + i] (=, = + bias[i], +=) C[t * ROW_BLOCK + i], t < tn, i < mc */
static void store_block(float *o, int ostride, const float *C, int tn, int mc, const float *bias, enum store st) {
    for (int t = 0; t < tn; t++) {
        float *ot = o + (size_t)t * ostride;
        const float *v = C + (size_t)t * ROW_BLOCK;
        switch (st) {
        case STORE_SET:
            for (int i = 0; i < mc; i++) ot[i] = v[i];
            break;
        case STORE_BIAS:
            for (int i = 0; i < mc; i++) ot[i] = v[i] + bias[i];
            break;
        case STORE_ADD:
            for (int i = 0; i < mc; i++) ot[i] += v[i];
            break;
        }
    }
}

/* out[(t - t0) * ostride + r - lo] (=, = +bias, +=) row r of base · token
 * t, r in [lo, hi), t in [t0, t0 + T) (the tokens' three bf16 parts at
 * vnni, plane bytes apart: r1_cpu_prep_act), by a block function (the AMX sets;
 * set only for batches past SMALL_BATCH, mm_for) on rows of K >= 2 KC_BLOCK
 * columns: per TOKEN_BLOCK_PANEL tokens, KC_BLOCK columns at a time for all
 * the rows, each block adding its slice's sums into out, so that the slice
 * of the tokens' activations stays in L2 while every row block uses it (a
 * block over all K read every token's whole activations, six bytes a value,
 * from memory again for each block of rows: the 1.5B down projection ran at
 * 0.65x the others). Shorter rows take one block each (mm_block). */
static void block_rows(const struct r1_cpu_mm *mm, enum r1_dtype dt, int K, const uint8_t *base, size_t rb,
                       const uint8_t *vnni, size_t plane, int t0, int T, int lo, int hi, float *out, int ostride,
                       const float *bias, enum store st) {
    for (int tb = t0; tb < t0 + T; tb += TOKEN_BLOCK_PANEL) {
        const int tn = t0 + T - tb < TOKEN_BLOCK_PANEL ? t0 + T - tb : TOKEN_BLOCK_PANEL;
        float *o = out + (size_t)(tb - t0) * ostride;
        for (int k0 = 0; k0 < K; k0 += KC_BLOCK) {
            const int k1 = K - k0 < 2 * KC_BLOCK ? K : k0 + KC_BLOCK; /* no slice under KC_BLOCK */
            for (int r0 = lo; r0 < hi; r0 += ROW_BLOCK) {
                const int mc = hi - r0 < ROW_BLOCK ? hi - r0 : ROW_BLOCK;
                R1_ASSERT(mm->batch_block(dt, K, k0, k1, base + (size_t)r0 * rb, rb, mc, vnni, plane, tb, tn,
                                          o + (r0 - lo), ostride, k0 > 0 || st == STORE_ADD) == 0);
            }
            if (k1 == K) break;
        }
        if (st == STORE_BIAS)
            for (int t = 0; t < tn; t++)
                for (int r = lo; r < hi; r++) o[(size_t)t * ostride + r - lo] += bias[r];
    }
}

/* out[t*ostride + r] (=, = +bias, +=) w[r,:]·x[t,:] for r in [lo, hi), t < T. */
static void mm_rows(const struct r1_cpu_isa *isa, const struct r1_cpu_mm *mm, const struct r1_mat *w, const uint8_t *xa,
                    size_t xs, int T, int lo, int hi, float *out, int ostride, const float *bias, enum store st) {
    if (mm->batch_block && w->cols >= 2 * KC_BLOCK) {
        block_rows(mm, w->dtype, w->cols, w->data, w->row_bytes, xa, xs, 0, T, lo, hi, out + lo, ostride, bias, st);
        return;
    }
    float Cs[TOKEN_BLOCK * ROW_BLOCK];
    const int parts = rows_per_token(mm), tblock = token_block(mm);
    float *C = tblock > TOKEN_BLOCK ? (float *)r1_cpu_scratch(4, (size_t)tblock * ROW_BLOCK * sizeof(float)) : Cs;
    for (int tb = 0; tb < T; tb += tblock) {
        int tn = T - tb < tblock ? T - tb : tblock;
        for (int r0 = lo; r0 < hi; r0 += ROW_BLOCK) {
            int mc = hi - r0 < ROW_BLOCK ? hi - r0 : ROW_BLOCK;
            mm_block(isa, mm, w->dtype, w->cols, w->data, w->row_bytes, r0, mc, xa, xs, tb * parts, tn * parts, C);
            if (parts == 2) fold_parts(C, tn, mc);
            store_block(out + (size_t)tb * ostride + r0, ostride, C, tn, mc, bias ? bias + r0 : NULL, st);
        }
    }
}

/* Matmuls take their rows through op->claim (kernels.h) unless
 * r1_cpu_tuning.static_split asks for the fixed split (comparisons). */
static int guided(const struct r1_op *op) { return op->claim && !r1_cpu_tuning.static_split; }
/* The next run of rows [*lo, *hi) of `rows`, left / (2 nth) rounded up to
 * whole ROW_BLOCKs; 0 when none is left. About 2 nth ln(rows / ROW_BLOCK)
 * claims per kernel, so the atomics cost nothing next to the rows. */
static int claim_rows(const struct r1_op *op, int rows, int nth, int *lo, int *hi) {
    int cur = __atomic_load_n(op->claim, __ATOMIC_RELAXED);
    for (;;) {
        if (cur >= rows) return 0;
        int left = rows - cur, n = (left / (2 * nth) + ROW_BLOCK - 1) / ROW_BLOCK * ROW_BLOCK;
        if (n < ROW_BLOCK) n = ROW_BLOCK;
        if (n > left) n = left;
        if (__atomic_compare_exchange_n(op->claim, &cur, cur + n, 0, __ATOMIC_RELAXED, __ATOMIC_RELAXED)) {
            *lo = cur;
            *hi = cur + n;
            return 1;
        }
    }
}

static void matmul_kernel(const struct r1_op *op, int ith, int nth, const float *bias, enum store st) {
    const struct r1_cpu_isa *isa = r1_cpu_current();
    struct r1_cpu_mm mmb;
    const struct r1_cpu_mm *mm = mm_for(isa, op->w, op->T, &mmb);
    if (!mm) {
        r1_ref_kernels[op->kernel](op, ith, nth);
        return;
    }
    const int rows = op->w->rows;
    size_t xs;
    int lo, hi;
    if (guided(op)) {
        if (!claim_rows(op, rows, nth, &lo, &hi)) return;
        const uint8_t *xa = r1_cpu_prep_act(isa, mm, op->x, op->T, op->w->cols, &xs);
        do mm_rows(isa, mm, op->w, xa, xs, op->T, lo, hi, op->out, rows, bias, st);
        while (claim_rows(op, rows, nth, &lo, &hi));
        return;
    }
    split_rows(rows, isa->mr, ith, nth, &lo, &hi);
    if (lo >= hi) return;
    const uint8_t *xa = r1_cpu_prep_act(isa, mm, op->x, op->T, op->w->cols, &xs);
    mm_rows(isa, mm, op->w, xa, xs, op->T, lo, hi, op->out, rows, bias, st);
}

static void k_qkv_bias(const struct r1_op *op, int ith, int nth) {
    matmul_kernel(op, ith, nth, op->b, op->b ? STORE_BIAS : STORE_SET);
}
static void k_matvec_add(const struct r1_op *op, int ith, int nth) { matmul_kernel(op, ith, nth, NULL, STORE_ADD); }
static void k_lm_head(const struct r1_op *op, int ith, int nth) { matmul_kernel(op, ith, nth, NULL, STORE_SET); }

static void k_gate_up_silu(const struct r1_op *op, int ith, int nth) {
    const struct r1_cpu_isa *isa = r1_cpu_current();
    const struct r1_mat *w = op->w;
    struct r1_cpu_mm mmb;
    const struct r1_cpu_mm *mm = mm_for(isa, w, op->T, &mmb);
    if (!mm) {
        r1_ref_kernels[op->kernel](op, ith, nth);
        return;
    }
    const int F = w->rows / 2, T = op->T, gd = guided(op);
    int lo = 0, hi = 0;
    if (!gd) split_rows(F, isa->mr, ith, nth, &lo, &hi);
    else if (!claim_rows(op, F, nth, &lo, &hi)) return;
    if (lo >= hi) return;
    size_t xs;
    const uint8_t *xa = r1_cpu_prep_act(isa, mm, op->x, T, w->cols, &xs);
    const uint8_t *up = (const uint8_t *)w->data + (size_t)F * w->row_bytes;
    if (mm->batch_block && w->cols >= 2 * KC_BLOCK) { /* gate into out, up into scratch, in column slices */
        do {
            const int nr = hi - lo;
            float *u = (float *)r1_cpu_scratch(4, (size_t)nr * (T < TOKEN_BLOCK_PANEL ? T : TOKEN_BLOCK_PANEL) *
                                                      sizeof(float));
            for (int tb = 0; tb < T; tb += TOKEN_BLOCK_PANEL) {
                const int tn = T - tb < TOKEN_BLOCK_PANEL ? T - tb : TOKEN_BLOCK_PANEL;
                float *o = op->out + (size_t)tb * F + lo;
                block_rows(mm, w->dtype, w->cols, w->data, w->row_bytes, xa, xs, tb, tn, lo, hi, o, F, NULL, STORE_SET);
                block_rows(mm, w->dtype, w->cols, up, w->row_bytes, xa, xs, tb, tn, lo, hi, u, nr, NULL, STORE_SET);
                for (int t = 0; t < tn; t++) {
                    float *ot = o + (size_t)t * F;
                    const float *uv = u + (size_t)t * nr;
                    if (isa->silu_mul) isa->silu_mul(ot, uv, ot, nr);
                    else
                        for (int i = 0; i < nr; i++) ot[i] = ot[i] / (1.0f + expf(-ot[i])) * uv[i];
                }
            }
        } while (gd && claim_rows(op, F, nth, &lo, &hi));
        return;
    }
    float gs[TOKEN_BLOCK * ROW_BLOCK], us[TOKEN_BLOCK * ROW_BLOCK], *g = gs, *u = us;
    const int parts = rows_per_token(mm), tblock = token_block(mm);
    if (tblock > TOKEN_BLOCK) {
        g = (float *)r1_cpu_scratch(4, (size_t)2 * tblock * ROW_BLOCK * sizeof(float));
        u = g + (size_t)tblock * ROW_BLOCK;
    }
again:
    for (int tb = 0; tb < T; tb += tblock) {
        int tn = T - tb < tblock ? T - tb : tblock;
        for (int r0 = lo; r0 < hi; r0 += ROW_BLOCK) {
            int mc = hi - r0 < ROW_BLOCK ? hi - r0 : ROW_BLOCK;
            mm_block(isa, mm, w->dtype, w->cols, w->data, w->row_bytes, r0, mc, xa, xs, tb * parts, tn * parts, g);
            mm_block(isa, mm, w->dtype, w->cols, up, w->row_bytes, r0, mc, xa, xs, tb * parts, tn * parts, u);
            if (parts == 2) {
                fold_parts(g, tn, mc);
                fold_parts(u, tn, mc);
            }
            for (int t = 0; t < tn; t++) {
                float *o = op->out + (size_t)(tb + t) * F + r0;
                const float *gv = g + (size_t)t * ROW_BLOCK, *uv = u + (size_t)t * ROW_BLOCK;
                if (isa->silu_mul) isa->silu_mul(gv, uv, o, mc);
                else
                    for (int i = 0; i < mc; i++) o[i] = gv[i] / (1.0f + expf(-gv[i])) * uv[i];
            }
        }
    }
    if (gd && claim_rows(op, F, nth, &lo, &hi)) goto again;
}

/* ---- the small kernels ---- */
static void k_rms_norm(const struct r1_op *op, int ith, int nth) {
    const struct r1_cpu_isa *isa = r1_cpu_current();
    int lo, hi, n = op->n;
    r1_split(op->T, ith, nth, &lo, &hi);
    for (int t = lo; t < hi; t++) {
        const float *x = op->x + (size_t)t * n;
        float *o = op->out + (size_t)t * n;
        float inv = 1.0f / sqrtf(isa->dot_f32(x, x, n) / (float)n + op->eps);
        for (int i = 0; i < n; i++) o[i] = x[i] * inv * op->b[i];
    }
}

static void k_rope_qk(const struct r1_op *op, int ith, int nth) {
    const int hd = op->head_dim, half = hd / 2, nh = op->n_head + op->n_kv_head;
    const int stride = (op->n_head + 2 * op->n_kv_head) * hd;
    int lo, hi;
    r1_split(op->T * nh, ith, nth, &lo, &hi);
    for (int i = lo; i < hi; i++) {
        int t = i / nh, h = i % nh;
        float *restrict v = op->out + (size_t)t * stride + (size_t)h * hd;
        float *restrict v2 = v + half;
        const float *c = op->rope_cos + (size_t)r1_op_pos(op, t) * half;
        const float *s = op->rope_sin + (size_t)r1_op_pos(op, t) * half;
        for (int k = 0; k < half; k++) {
            float a = v[k], b = v2[k];
            v[k] = a * c[k] - b * s[k];
            v2[k] = b * c[k] + a * s[k];
        }
    }
}

static void k_argmax(const struct r1_op *op, int ith, int nth) {
    (void)nth;
    if (ith != 0) return;
    *op->out_id = r1_argmax(op->x, op->n);
}

const struct r1_backend r1_backend_cpu = {
    .name = "cpu",
    .fn =
        {
            /* embedding: the reference's (r1_backend_resolve fills it) */
            [R1_K_RMS_NORM] = k_rms_norm,
            [R1_K_QKV_BIAS] = k_qkv_bias,
            [R1_K_ROPE_QK] = k_rope_qk,
            [R1_K_KV_APPEND] = r1_cpu_k_kv_append,
            [R1_K_ATTENTION_GQA] = r1_cpu_k_attention_gqa,
            [R1_K_MATVEC_ADD] = k_matvec_add,
            [R1_K_GATE_UP_SILU] = k_gate_up_silu,
            [R1_K_LM_HEAD] = k_lm_head,
            [R1_K_ARGMAX] = k_argmax,
        },
    .init = cpu_init,
    .kv_dtype = R1_DTYPE_F16,
    .weight_layout = r1_cpu_layout,
};
