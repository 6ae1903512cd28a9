/*
 * test_kv_paged.c - paged KV caches (kernels.h r1_kv_cache.pages) against
 * contiguous ones, bit for bit, for the reference kernels and every ISA
 * table of the cpu backend this CPU can run: append then attention over a
 * shuffled page table, the context split at depth, several sequences of one
 * pool in one op; each appended row where the page table says and no other
 * row of the pool touched.
 *
 *   R1_TEST_QUICK=1    a small set of cases (for qemu)
 *
 * Depends only on src/kernels and src/util, so it cross-compiles for aarch64.
 */
#include "kernel_test.h"

/* ---- paged KV caches ----
 * A paged cache is one sequence's view of a pool shared by several: its
 * position p lies in row pages[p / R1_KV_PAGE] * R1_KV_PAGE + p % R1_KV_PAGE
 * of each (layer, kv head) stripe of the pool. Over a pool whose page table
 * is a scrambled permutation the kernels must give the same bits as over a
 * contiguous cache holding the same rows (the same values read in the same
 * order, only from elsewhere), put each appended row where the table says
 * and touch no other row of the pool. */

/* A fixed-seed shuffle of 0..n-1. */
/* The kernels under test: the cpu backend's (set 1, named by its ISA) or
 * the reference's (set 0). */
struct kset {
    r1_kernel_fn append, attn;
    const char *who;
};
static struct kset kset_of(int set, const struct r1_cpu_isa *isa) {
    if (set) return (struct kset){r1_backend_cpu.fn[R1_K_KV_APPEND], r1_backend_cpu.fn[R1_K_ATTENTION_GQA], isa->name};
    return (struct kset){r1_ref_kernels[R1_K_KV_APPEND], r1_ref_kernels[R1_K_ATTENTION_GQA], "ref"};
}

/* A copy of n bytes at p (a pool's state before the kernels run). */
static uint8_t *copy_of(const void *p, size_t n) {
    uint8_t *c = malloc(n);
    if (c) memcpy(c, p, n);
    return c;
}

static void paged_perm(int32_t *perm, int n, uint64_t seed) {
    for (int i = 0; i < n; i++) perm[i] = i;
    for (int i = n - 1; i > 0; i--) {
        seed = seed * 6364136223846793005ull + 1442695040888963407ull;
        int j = (int)((seed >> 33) % (uint64_t)(i + 1));
        int32_t t = perm[i];
        perm[i] = perm[j], perm[j] = t;
    }
}

/* The pool row of position p of (layer, h) in the paged view kv, worked out
 * here (not by r1_kv_row, which the kernels use). */
static size_t paged_row(const struct r1_kv_cache *kv, int layer, int h, int p) {
    return ((size_t)layer * kv->n_kv_head + h) * (size_t)kv->n_ctx + (size_t)kv->pages[p / R1_KV_PAGE] * R1_KV_PAGE +
           (size_t)(p % R1_KV_PAGE);
}

/* a against b (n floats) bit for bit: 0, else the largest |a - b|
 * (INFINITY where the bits differ without a numeric difference: NaN, -0). */
static double paged_diff(const float *a, const float *b, size_t n) {
    if (!memcmp(a, b, n * sizeof(float))) return 0;
    double m = 0;
    for (size_t i = 0; i < n; i++) {
        double d = fabs((double)a[i] - b[i]);
        if (d != d) d = INFINITY;
        if (d > m) m = d;
    }
    return m > 0 ? m : INFINITY;
}

/* One case of a bit-exact group (paged a against contiguous b): g->worst
 * is the largest |a - b| seen. */
static void paged_add(struct group *g, const float *a, const float *b, size_t n, const char *fmt, ...)
    __attribute__((format(printf, 5, 6)));
static void paged_add(struct group *g, const float *a, const float *b, size_t n, const char *fmt, ...) {
    char c[96];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(c, sizeof c, fmt, ap);
    va_end(ap);
    double d = paged_diff(a, b, n);
    g->cases++;
    CHECK(d == 0, "%s %s %s: paged differs from contiguous, max |diff| %.3g", g->isa, g->what, c, d);
    if (verbose) printf("  %-8s %-22s %-40s max |diff| %.3g\n", g->isa, g->what, c, d);
    if (d > g->worst || g->cases == 1) {
        g->worst = d;
        snprintf(g->worst_case, sizeof g->worst_case, "%s", c);
    }
}

/* The rows of a pool (every layer and kv head) after appends through the
 * views v[0..nv) (one pool, disjoint page tables): position p < len[s] of
 * (layer, h) is contiguous cache c[s]'s row p, K and V, and every other row
 * is as the pool was before (snap_k, snap_v). Returns the rows that are not. */
static int paged_placed(const struct r1_kv_cache *v, int nv, const struct r1_kv_cache *c, const int *len, int layer,
                        const uint8_t *snap_k, const uint8_t *snap_v, const char *who, const char *what) {
    const size_t rb = r1_dtype_row_bytes(v->dtype, v->head_dim);
    const size_t rows = (size_t)v->n_layer * v->n_kv_head * v->n_ctx;
    const uint8_t *pk = v->k, *pv = v->v;
    char *owned = calloc(rows, 1);
    int bad = 0;
    for (int s = 0; s < nv; s++)
        for (int h = 0; h < v->n_kv_head; h++)
            for (int p = 0; p < len[s]; p++) {
                size_t r = paged_row(&v[s], layer, h, p);
                size_t rc = ((size_t)layer * c[s].n_kv_head + h) * (size_t)c[s].n_ctx + (size_t)p;
                int ok = r == r1_kv_row(&v[s], layer, h, p) && !owned[r] &&
                         !memcmp(pk + r * rb, (const uint8_t *)c[s].k + rc * rb, rb) &&
                         !memcmp(pv + r * rb, (const uint8_t *)c[s].v + rc * rb, rb);
                if (!ok && !bad++)
                    CHECK(0, "%s %s: sequence %d position %d (layer %d, kv head %d) not in pool row %zu", who, what, s,
                          p, layer, h, r);
                owned[r] = 1;
            }
    for (size_t r = 0; r < rows; r++)
        if (!owned[r] && (memcmp(pk + r * rb, snap_k + r * rb, rb) || memcmp(pv + r * rb, snap_v + r * rb, rb)))
            if (!bad++) CHECK(0, "%s %s: pool row %zu written, no sequence's position lies there", who, what, r);
    CHECK(bad == 0, "%s %s: %d pool rows misplaced", who, what, bad);
    free(owned);
    return bad;
}

static void paged_print(const struct group *g, const char *placed) {
    if (g->worst == 0) printf("%-8s %-24s %4d cases  bit-exact%s\n", g->isa, g->what, g->cases, placed);
    else
        printf("%-8s %-24s %4d cases  DIFFERS: max |paged - contiguous| %.3g at %s%s\n", g->isa, g->what, g->cases,
               g->worst, g->worst_case, placed);
}

/* 1. (pos0, T) chunks appended then attended in turn, into a contiguous
 * cache and a pool of 8 blocks of which the sequence's 5 are scrambled: the
 * cache fills to 1, 63, 64, 65, 135, ... 300 positions; decode rows, prompt
 * chunks of 17 and 64+, chunks across a block's end. */
static void paged_append_attn(const struct r1_cpu_isa *isa, int with_ref) {
    enum { NH = 4, NKV = 2, HD = 32, NL = 2, LAYER = 1, NCTX = 300, NBLK = 8, PROWS = NBLK * R1_KV_PAGE };
    static const int chunks[][2] = {/* pos0, T */ {0, 1},
                                    {1, 62},
                                    {63, 1},
                                    {64, 1},
                                    {65, 70},
                                    {135, 17},
                                    {152, 48},
                                    {200, 1},
                                    {201, 65},
                                    {266, 33},
                                    {299, 1}};
    const int nchunk = quick ? 6 : 11, stride = (NH + 2 * NKV) * HD,
              len = chunks[nchunk - 1][0] + chunks[nchunk - 1][1];
    int32_t pages[NBLK];
    paged_perm(pages, NBLK, 1);
    int descents = 0;
    for (int i = 0; i + 1 < (len + R1_KV_PAGE - 1) / R1_KV_PAGE; i++) descents += pages[i] > pages[i + 1];
    CHECK(descents > 0, "paged test: page table %d %d %d ... is monotonic", pages[0], pages[1], pages[2]);
    for (int set = with_ref ? 0 : 1; set < 2; set++) {
        const struct kset ks = kset_of(set, isa);
        const r1_kernel_fn append = ks.append, attn = ks.attn;
        const char *who = ks.who;
        for (int di = 0; di < 3; di++) {
            const enum r1_dtype dt = kv_dtypes[di];
            const size_t pbytes = (size_t)NL * NKV * PROWS * r1_dtype_row_bytes(dt, HD);
            char what[48];
            snprintf(what, sizeof what, "paged attn/%s", r1_dtype_name(dt));
            struct group g = {who, what, 0, 0, "", 0};
            struct r1_kv_cache c = kv_new(dt, NL, NKV, NCTX, HD), pool = kv_new(dt, NL, NKV, PROWS, HD);
            pool.pages = pages;
            uint8_t *snap_k = copy_of(pool.k, pbytes), *snap_v = copy_of(pool.v, pbytes);
            float *sc = malloc((size_t)3 * PROWS * sizeof(float));
            for (int i = 0; i < nchunk; i++) {
                const int pos0 = chunks[i][0], T = chunks[i][1], nth = 1 + (i + di + set) % 3;
                const size_t n = (size_t)T * NH * HD;
                float *x = frand_buf((size_t)T * stride), *a = malloc(n * 4), *b = malloc(n * 4);
                struct r1_op op = {.kernel = R1_K_KV_APPEND,
                                   .T = T,
                                   .pos0 = pos0,
                                   .x = x,
                                   .n_head = NH,
                                   .n_kv_head = NKV,
                                   .head_dim = HD,
                                   .layer = LAYER,
                                   .kv = &c,
                                   .scratch = sc,
                                   .scratch_stride = PROWS,
                                   .out = b};
                run(append, &op, nth);
                op.kernel = R1_K_ATTENTION_GQA;
                run(attn, &op, nth);
                op.kernel = R1_K_KV_APPEND, op.kv = &pool;
                run(append, &op, nth);
                op.kernel = R1_K_ATTENTION_GQA, op.out = a;
                run(attn, &op, nth);
                paged_add(&g, a, b, n, "pos0=%d T=%d nth=%d", pos0, T, nth);
                free(x), free(a), free(b);
            }
            int bad = paged_placed(&pool, 1, &c, &len, LAYER, snap_k, snap_v, who, what);
            paged_print(&g, bad ? "; rows MISPLACED" : "; rows in place");
            free(c.k), free(c.v), free(pool.k), free(pool.v), free(snap_k), free(snap_v), free(sc);
        }
    }
}

/* 2. Decode at depth split along the context (cpu_attn.c's flash-decoding
 * split: claimed units, spans of 2048 positions) over a pool of 88 blocks
 * holding a sequence of up to 5000 positions in 79 scrambled ones, against
 * the contiguous cache: the rows of the step appended to both first, 2 and
 * 3 threads running at once. Caches made once for every ISA. */
enum { PS_NH = 4, PS_NKV = 2, PS_HD = 32, PS_NCTX = 5000, PS_NBLK = 88, PS_PROWS = PS_NBLK * R1_KV_PAGE };
static struct r1_kv_cache ps_c[3], ps_pool[3]; /* by dtype */
static int32_t ps_pages[PS_NBLK];
static void paged_split_free(void) {
    for (int i = 0; i < 3; i++) free(ps_c[i].k), free(ps_c[i].v), free(ps_pool[i].k), free(ps_pool[i].v);
}

static void paged_split(const struct r1_cpu_isa *isa) {
    static const int pt[][2] = {/* pos0, T */ {4100, 1}, {4094, 3}, {2048, 1}, {4997, 3}};
    const int stride = (PS_NH + 2 * PS_NKV) * PS_HD;
    const int blocked = isa->attn_qk && isa->attn_pv && isa->attn_softmax && isa->f16_to_f32;
    if (!ps_c[0].k) paged_perm(ps_pages, PS_NBLK, 2);
    for (int di = 0; di < 3; di++) {
        const enum r1_dtype dt = kv_dtypes[di];
        const size_t rb = r1_dtype_row_bytes(dt, PS_HD);
        if (!ps_c[di].k) { /* the pool holds the contiguous cache's rows where its pages say */
            ps_c[di] = kv_new(dt, 1, PS_NKV, PS_NCTX, PS_HD);
            ps_pool[di] = kv_new(dt, 1, PS_NKV, PS_PROWS, PS_HD);
            ps_pool[di].pages = ps_pages;
            for (int h = 0; h < PS_NKV; h++)
                for (int p = 0; p < PS_NCTX; p++) {
                    size_t r = paged_row(&ps_pool[di], 0, h, p), rc = (size_t)h * PS_NCTX + p;
                    memcpy((uint8_t *)ps_pool[di].k + r * rb, (uint8_t *)ps_c[di].k + rc * rb, rb);
                    memcpy((uint8_t *)ps_pool[di].v + r * rb, (uint8_t *)ps_c[di].v + rc * rb, rb);
                }
        }
        char what[48];
        snprintf(what, sizeof what, "paged split/%s", r1_dtype_name(dt));
        struct group g = {isa->name, what, 0, 0, "", 0};
        r1_cpu_tune("attn_split", 1);
        for (int i = 0; i < (quick ? 1 : 4); i++) { /* quick: under qemu + ASan too */
            const int pos0 = pt[i][0], T = pt[i][1], nth = 2 + (i + di) % 2, spans = (pos0 + T + 2047) / 2048;
            const size_t n = (size_t)T * PS_NH * PS_HD;
            int claim = 0;
            float *x = frand_buf((size_t)T * stride), *sc = malloc((size_t)nth * PS_PROWS * sizeof(float));
            float *a = malloc(n * 4), *b = malloc(n * 4);
            struct r1_op op = {.kernel = R1_K_KV_APPEND,
                               .T = T,
                               .pos0 = pos0,
                               .x = x,
                               .n_head = PS_NH,
                               .n_kv_head = PS_NKV,
                               .head_dim = PS_HD,
                               .kv = &ps_c[di],
                               .scratch = sc,
                               .scratch_stride = PS_PROWS,
                               .out = b,
                               .claim = &claim};
            run_threads(r1_backend_cpu.fn[R1_K_KV_APPEND], &op, nth);
            op.kv = &ps_pool[di];
            run_threads(r1_backend_cpu.fn[R1_K_KV_APPEND], &op, nth);
            op.kernel = R1_K_ATTENTION_GQA, op.kv = &ps_c[di], claim = 0;
            run_threads(r1_backend_cpu.fn[R1_K_ATTENTION_GQA], &op, nth);
            /* every unit claimed and completed: the split ran */
            CHECK(!blocked || claim >> 16 == spans * PS_NKV, "%s %s contiguous: %d units completed, want %d", isa->name,
                  what, claim >> 16, spans * PS_NKV);
            op.kv = &ps_pool[di], op.out = a, claim = 0;
            run_threads(r1_backend_cpu.fn[R1_K_ATTENTION_GQA], &op, nth);
            CHECK(!blocked || claim >> 16 == spans * PS_NKV, "%s %s paged: %d units completed, want %d", isa->name,
                  what, claim >> 16, spans * PS_NKV);
            paged_add(&g, a, b, n, "pos0=%d T=%d nth=%d", pos0, T, nth);
            free(x), free(sc), free(a), free(b);
        }
        r1_cpu_tune_reset();
        paged_print(&g, blocked ? "" : " (one head at a time: no split)");
    }
}

/* 3. Rows of three sequences in one op (op->seq, op->pos; op->kv their
 * paged views of one pool, disjoint scrambled page tables) against each
 * sequence alone on a contiguous cache of its own: a prompt chunk beside
 * decode rows, the sequences out of order in the batch, then decode steps;
 * kv_append and attention both batched. */
static void paged_batch(const struct r1_cpu_isa *isa, int with_ref) {
    enum { NH = 4, NKV = 2, HD = 32, NL = 2, LAYER = 1, NCTX = 256, NBLK = 16, PROWS = NBLK * R1_KV_PAGE, NS = 3 };
    static const int hist[NS] = {120, 63, 1}; /* positions each sequence holds before the steps */
    static const int steps[][NS][2] = {       /* (sequence, T) in row order; T 0: not in this step */
                                       {{1, 1}, {0, 17}, {2, 3}},
                                       {{2, 1}, {0, 1}, {1, 1}},
                                       {{0, 65}, {1, 1}, {2, 0}}};
    const int nstep = quick ? 2 : 3, stride = (NH + 2 * NKV) * HD;
    int32_t perm[NBLK];
    paged_perm(perm, NBLK, 3);
    for (int set = with_ref ? 0 : 1; set < 2; set++) {
        const struct kset ks = kset_of(set, isa);
        const r1_kernel_fn append = ks.append, attn = ks.attn;
        const char *who = ks.who;
        for (int di = 0; di < 3; di++) {
            const enum r1_dtype dt = kv_dtypes[di];
            const size_t pbytes = (size_t)NL * NKV * PROWS * r1_dtype_row_bytes(dt, HD);
            char what[48];
            snprintf(what, sizeof what, "paged batch/%s", r1_dtype_name(dt));
            struct group g = {who, what, 0, 0, "", 0};
            struct r1_kv_cache c[NS], v[NS], pool = kv_new(dt, NL, NKV, PROWS, HD);
            uint8_t *snap_k = copy_of(pool.k, pbytes), *snap_v = copy_of(pool.v, pbytes);
            float *sc = malloc((size_t)3 * PROWS * sizeof(float));
            int len[NS];
            for (int s = 0; s < NS; s++) { /* each sequence's history, appended alone */
                c[s] = kv_new(dt, NL, NKV, NCTX, HD);
                v[s] = pool, v[s].pages = perm + s * (NBLK / NS);
                len[s] = hist[s];
                float *x = frand_buf((size_t)len[s] * stride);
                struct r1_op op = {.kernel = R1_K_KV_APPEND,
                                   .T = len[s],
                                   .x = x,
                                   .n_head = NH,
                                   .n_kv_head = NKV,
                                   .head_dim = HD,
                                   .layer = LAYER,
                                   .kv = &c[s]};
                run(append, &op, 1 + s % 3);
                op.kv = &v[s];
                run(append, &op, 1 + s % 3);
                free(x);
            }
            for (int st = 0; st < nstep; st++) {
                int T = 0, nth = 1 + (st + di + set) % 3;
                int32_t seq[128], pos[128];
                for (int j = 0; j < NS; j++)
                    for (int t = 0; t < steps[st][j][1]; t++, T++)
                        seq[T] = steps[st][j][0], pos[T] = len[steps[st][j][0]] + t;
                const size_t n = (size_t)T * NH * HD;
                float *x = frand_buf((size_t)T * stride), *a = malloc(n * 4), *b = malloc(n * 4);
                struct r1_op op = {.kernel = R1_K_KV_APPEND,
                                   .T = T,
                                   .seq = seq,
                                   .pos = pos,
                                   .x = x,
                                   .n_head = NH,
                                   .n_kv_head = NKV,
                                   .head_dim = HD,
                                   .layer = LAYER,
                                   .kv = v,
                                   .scratch = sc,
                                   .scratch_stride = PROWS,
                                   .out = a};
                run(append, &op, nth);
                op.kernel = R1_K_ATTENTION_GQA;
                run(attn, &op, nth);
                for (int j = 0, t0 = 0; j < NS; t0 += steps[st][j][1], j++) { /* each sequence alone */
                    const int s = steps[st][j][0], Ts = steps[st][j][1];
                    if (!Ts) continue;
                    struct r1_op one = op;
                    one.kernel = R1_K_KV_APPEND, one.T = Ts, one.pos0 = len[s], one.seq = NULL, one.pos = NULL;
                    one.x = x + (size_t)t0 * stride, one.kv = &c[s], one.out = b + (size_t)t0 * NH * HD;
                    run(append, &one, nth);
                    one.kernel = R1_K_ATTENTION_GQA;
                    run(attn, &one, nth);
                    len[s] += Ts;
                }
                paged_add(&g, a, b, n, "step %d (T=%d) nth=%d", st, T, nth);
                free(x), free(a), free(b);
            }
            int bad = paged_placed(v, NS, c, len, LAYER, snap_k, snap_v, who, what);
            paged_print(&g, bad ? "; rows MISPLACED" : "; rows in place");
            for (int s = 0; s < NS; s++) free(c[s].k), free(c[s].v);
            free(pool.k), free(pool.v), free(snap_k), free(snap_v), free(sc);
        }
    }
}

/* Paged caches against contiguous ones, bit for bit: append and attention
 * (ref once, the ISA's kernels), the split at depth, several sequences of
 * one pool in one op. */
static void test_attention_paged(const struct r1_cpu_isa *isa) {
    static int ref_done; /* ref's kernels on the first ISA only (they do not change with it) */
    const int with_ref = !ref_done;
    ref_done = 1;
    paged_append_attn(isa, with_ref);
    paged_split(isa);
    paged_batch(isa, with_ref);
}

int main(void) {
    if (kt_start()) return 1;
    for (int i = 0; r1_cpu_isas[i]; i++) {
        const struct r1_cpu_isa *isa = r1_cpu_isas[i];
        if (!kt_select(isa)) continue;
        test_attention_paged(isa);
    }
    paged_split_free();
    r1_cpu_select(NULL);
    return TEST_DONE("test_kv_paged");
}
