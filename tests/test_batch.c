/*
 * test_batch.c - continuous batching (r1_batch_*) against sequences alone.
 *
 * For every fixture model (tests/fixtures/<name>/ with config.json, and the
 * quantized GGUF fixtures) and backend (ref, the oracle, and cpu with the
 * kernel set R1_CPU_ISA picks; tests/batch_isa.sh runs the others), f32 KV:
 *   - each of four sequences (prompts of different lengths) is first run
 *     alone in a session: prefill, then N_GEN greedy tokens;
 *   - then all four share steps of a batch: they start at different steps,
 *     their prompts go in chunks of different sizes while the others decode,
 *     the order of the sequences in a step rotates; every sequence must give
 *     exactly its greedy tokens alone;
 *   - a fifth sequence gets the first one's prompt by r1_batch_seq_copy and
 *     must continue with the same tokens;
 *   - a sequence that would pass --ctx, rows of a sequence that are not
 *     contiguous and a bad sequence index are errors, and leave the
 *     sequences where they were.
 * Then the same with a q8_0 KV cache on the cpu backend for the fixtures
 * whose head_dim it takes (alone and batched quantize the same K/V rows).
 * And the paged pool (run_pool): prompts across several blocks, a prefix
 * shared by r1_batch_seq_copy (blocks counted, not copied) and continued by
 * both holders (each copies the shared block it writes into), a cache cut
 * back into a shared block and refilled, a pool too small for a step (an
 * error that moves nothing, until another sequence gives its blocks back),
 * every block free again at the end; tokens always those of a sequence
 * alone.
 */
#include <dirent.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "r1infer.h"
#include "test.h"

#define FIXTURE_DIR "tests/fixtures"
#define N_SEQ 4
#define N_GEN 12
#define N_CTX 128
#define MAX_ROWS 64

static const int PROMPT_LEN[N_SEQ] = {9, 23, 3, 40};
static const int CHUNK[N_SEQ] = {4, 7, 16, 13}; /* prompt rows per step */
static const int START[N_SEQ] = {0, 2, 3, 5};   /* first step */
static enum r1_dtype kv_dt = R1_DTYPE_F32;      /* the KV cache of the pass */

static int argmax(const float *x, int n) {
    int b = 0;
    for (int i = 1; i < n; i++)
        if (x[i] > x[b]) b = i;
    return b;
}

static void make_prompt(int q, int vocab, int32_t *ids) {
    uint32_t r = 12345u + 7919u * (uint32_t)q;
    for (int i = 0; i < PROMPT_LEN[q]; i++) {
        r = r * 1664525u + 1013904223u;
        ids[i] = (int32_t)((r >> 8) % (uint32_t)vocab);
    }
}

/* Prefill + k greedy tokens alone; 0 or -1. */
static int alone_k(r1_model_t *m, const char *be, const int32_t *prompt, int n, int32_t *gen, int k) {
    r1_session_t *s = r1_session_new(
        m, &(struct r1_session_opts){.n_ctx = 2 * N_CTX, .backend = be, .n_threads = 2, .kv_dtype = kv_dt});
    if (!s) return -1;
    int vocab = r1_model_config(m)->vocab;
    const float *l = r1_session_forward(s, prompt, n, NULL);
    for (int i = 0; l && i < k; i++) {
        gen[i] = argmax(l, vocab);
        if (i + 1 < k) l = r1_session_forward(s, &gen[i], 1, NULL);
    }
    r1_session_free(s);
    return l ? 0 : -1;
}

static int alone(r1_model_t *m, const char *be, const int32_t *prompt, int n, int32_t *gen) {
    return alone_k(m, be, prompt, n, gen, N_GEN);
}

static enum r1_dtype load_dt = R1_DTYPE_AUTO; /* the weights of the pass: the file's, or converted at load */

static void run_model(const char *name, const char *path, const char *be) {
    r1_model_t *m = r1_model_load(path, &(struct r1_load_opts){.dtype = load_dt});
    CHECK(m, "%s: load: %s", name, r1_last_error());
    if (!m) return;
    if (kv_dt == R1_DTYPE_Q8_0 && r1_model_config(m)->head_dim % 32) { /* refused at session start */
        r1_model_free(m);
        return;
    }
    const int vocab = r1_model_config(m)->vocab;
    int32_t prompt[N_SEQ][64], ref[N_SEQ][N_GEN], got[N_SEQ + 1][N_GEN];
    for (int q = 0; q < N_SEQ; q++) {
        make_prompt(q, vocab, prompt[q]);
        CHECK(!alone(m, be, prompt[q], PROMPT_LEN[q], ref[q]), "%s/%s: alone: %s", name, be, r1_last_error());
    }
    r1_batch_t *b = r1_batch_new(
        m,
        &(struct r1_batch_opts){
            .n_seq = N_SEQ + 1, .n_ctx = N_CTX, .n_batch = MAX_ROWS, .backend = be, .n_threads = 2, .kv_dtype = kv_dt});
    CHECK(b, "%s/%s: r1_batch_new: %s", name, be, r1_last_error());
    if (!b) {
        r1_model_free(m);
        return;
    }
    float *logits = malloc((size_t)MAX_ROWS * vocab * sizeof(float));
    int done[N_SEQ] = {0}, n_gen[N_SEQ] = {0}, mixed = 0, copied = 0;
    for (int step = 0; step < 200; step++) {
        int32_t ids[MAX_ROWS], seq[MAX_ROWS], owner[MAX_ROWS];
        uint8_t want[MAX_ROWS];
        int n = 0, n_want = 0, n_prefill = 0, n_decode = 0;
        for (int k = 0; k < N_SEQ; k++) {
            int q = (k + step) % N_SEQ; /* the order rotates */
            if (step < START[q] || n_gen[q] == N_GEN) continue;
            if (done[q] < PROMPT_LEN[q]) {
                int c = PROMPT_LEN[q] - done[q] < CHUNK[q] ? PROMPT_LEN[q] - done[q] : CHUNK[q];
                for (int i = 0; i < c; i++, n++) {
                    ids[n] = prompt[q][done[q] + i], seq[n] = q;
                    want[n] = done[q] + i == PROMPT_LEN[q] - 1;
                    if (want[n]) owner[n_want++] = q;
                }
                done[q] += c;
                n_prefill++;
            } else {
                ids[n] = got[q][n_gen[q] - 1], seq[n] = q, want[n] = 1, n++;
                owner[n_want++] = q;
                n_decode++;
            }
        }
        if (!n) break;
        if (n_prefill && n_decode) mixed++;
        int r = r1_batch_step(b, n, ids, seq, want, logits);
        CHECK(r == n_want, "%s/%s: step %d: %d logits rows, expected %d (%s)", name, be, step, r, n_want,
              r1_last_error());
        if (r != n_want) break;
        for (int i = 0; i < n_want; i++) {
            int q = owner[i];
            got[q][n_gen[q]++] = argmax(logits + (size_t)i * vocab, vocab);
        }
    }
    CHECK(mixed > 0, "%s/%s: no step mixed prompt chunks and decode rows", name, be);
    for (int q = 0; q < N_SEQ; q++) {
        CHECK(n_gen[q] == N_GEN, "%s/%s: sequence %d generated %d of %d", name, be, q, n_gen[q], N_GEN);
        int same = n_gen[q] == N_GEN && !memcmp(got[q], ref[q], sizeof ref[q]);
        CHECK(same, "%s/%s: sequence %d (prompt %d) batched differs from alone", name, be, q, PROMPT_LEN[q]);
        CHECK(r1_batch_seq_n_past(b, q) == PROMPT_LEN[q] + N_GEN - 1, "%s/%s: sequence %d has %d cached", name, be, q,
              r1_batch_seq_n_past(b, q));
    }
    /* sequence 4 = sequence 0's prompt, copied, then decoded alone in the batch */
    const int d = N_SEQ;
    CHECK(!r1_batch_seq_copy(b, d, 0, PROMPT_LEN[0] - 1), "%s/%s: copy: %s", name, be, r1_last_error());
    int32_t id = prompt[0][PROMPT_LEN[0] - 1], sq = d;
    for (int i = 0; i < N_GEN; i++) {
        if (r1_batch_step(b, 1, &id, &sq, NULL, logits) != 1) break;
        got[d][i] = id = argmax(logits, vocab);
        copied++;
    }
    CHECK(copied == N_GEN && !memcmp(got[d], ref[0], sizeof ref[0]), "%s/%s: a copied prompt continues differently",
          name, be);
    /* errors leave every sequence where it was */
    int past0 = r1_batch_seq_n_past(b, 0), past1 = r1_batch_seq_n_past(b, 1);
    int32_t ids3[3] = {1, 2, 3}, seq3[3] = {0, 1, 0};
    CHECK(r1_batch_step(b, 3, ids3, seq3, NULL, logits) < 0 && strstr(r1_last_error(), "contiguous"),
          "%s/%s: split rows of a sequence: %s", name, be, r1_last_error());
    int32_t bad_seq[1] = {N_SEQ + 1};
    CHECK(r1_batch_step(b, 1, ids3, bad_seq, NULL, logits) < 0, "%s/%s: a sequence outside the pool runs", name, be);
    CHECK(!r1_batch_seq_truncate(b, 1, 0), "%s/%s: truncate: %s", name, be, r1_last_error());
    CHECK(r1_batch_seq_truncate(b, 1, 5) < 0, "%s/%s: truncate past the cache", name, be);
    int32_t fill[MAX_ROWS], fseq[MAX_ROWS];
    for (int i = 0; i < MAX_ROWS; i++) fill[i] = i % vocab, fseq[i] = 1;
    int ok = r1_batch_step(b, MAX_ROWS, fill, fseq, NULL, logits) == 1;
    ok = ok && r1_batch_step(b, MAX_ROWS, fill, fseq, NULL, logits) == 1; /* 128 = N_CTX */
    CHECK(ok, "%s/%s: filling a sequence to --ctx: %s", name, be, r1_last_error());
    int32_t two[2] = {5, 6}, seq2[2] = {0, 1};
    CHECK(r1_batch_step(b, 2, two, seq2, NULL, logits) < 0 && strstr(r1_last_error(), "sequence 1 is full"),
          "%s/%s: a full sequence: '%s'", name, be, r1_last_error());
    CHECK(r1_batch_seq_n_past(b, 0) == past0 && r1_batch_seq_n_past(b, 1) == N_CTX && past1 > 0,
          "%s/%s: a failed step moved a sequence", name, be);
    printf("%s/%s: %d sequences x %d greedy tokens batched == alone (%d mixed steps)\n", name, be, N_SEQ, N_GEN, mixed);
    free(logits);
    r1_batch_free(b);
    r1_model_free(m);
}

/* The paged pool (see the top): prompt A of POOL_A tokens, POOL_GEN greedy. */
#define POOL_A 150
#define POOL_GEN 14
#define POOL_BLOCKS 6

/* Steps of sequence q from its cache on: ids[0..n) in chunks of 50, then
 * greedy tokens into gen[0..k); 0 or -1. */
static int pool_run(r1_batch_t *b, int q, const int32_t *ids, int n, int32_t *gen, int k, float *logits, int vocab) {
    int32_t seq[50];
    for (int i = 0; i < 50; i++) seq[i] = q;
    for (int at = 0; at < n; at += 50) {
        int c = n - at < 50 ? n - at : 50;
        if (r1_batch_step(b, c, ids + at, seq, NULL, logits) != 1) return -1;
    }
    for (int i = 0; i < k; i++) {
        gen[i] = argmax(logits, vocab);
        if (i + 1 < k && r1_batch_step(b, 1, &gen[i], seq, NULL, logits) != 1) return -1;
    }
    return 0;
}

static void run_pool(const char *name, const char *path, const char *be, enum r1_dtype kv) {
    r1_model_t *m = r1_model_load(path, &(struct r1_load_opts){.dtype = R1_DTYPE_AUTO});
    CHECK(m, "%s: load: %s", name, r1_last_error());
    if (!m) return;
    const int vocab = r1_model_config(m)->vocab;
    int32_t a[POOL_A + POOL_GEN], a2[POOL_A], ref[POOL_GEN + 1], ref2[POOL_GEN], got[POOL_GEN + 1];
    uint32_t r = 99u;
    for (int i = 0; i < POOL_A; i++)
        r = r * 1664525u + 1013904223u, a[i] = a2[i] = (int32_t)((r >> 8) % (uint32_t)vocab);
    for (int i = 100; i < POOL_A; i++) a2[i] = (a[i] + 1) % vocab; /* A's first 100, then others */
    enum r1_dtype keep = kv_dt;
    kv_dt = kv;
    CHECK(!alone_k(m, be, a, POOL_A, ref, POOL_GEN) && !alone_k(m, be, a2, POOL_A, ref2, POOL_GEN), "%s: alone: %s",
          name, r1_last_error());
    kv_dt = keep;
    r1_batch_t *b = r1_batch_new(m, &(struct r1_batch_opts){.n_seq = 4,
                                                            .n_ctx = 256,
                                                            .n_batch = 64,
                                                            .pool_pos = POOL_BLOCKS * 64,
                                                            .backend = be,
                                                            .n_threads = 2,
                                                            .kv_dtype = kv});
    CHECK(b, "%s: r1_batch_new: %s", name, r1_last_error());
    if (!b) {
        r1_model_free(m);
        return;
    }
    float *logits = malloc((size_t)64 * vocab * sizeof(float));
    int total = 0, nfree = 0, per = r1_batch_pool(b, &total, &nfree);
    CHECK(per == 64 && total == POOL_BLOCKS && nfree == total, "%s: pool of %d blocks of %d, %d free", name, total, per,
          nfree);
    /* sequence 0: A across three blocks, 8 greedy tokens (157 positions: 3 blocks) */
    int ok = !pool_run(b, 0, a, POOL_A, got, 8, logits, vocab);
    CHECK(ok && !memcmp(got, ref, 8 * sizeof *got), "%s: a prompt across blocks differs from alone (%s)", name,
          r1_last_error());
    r1_batch_pool(b, NULL, &nfree);
    CHECK(nfree == POOL_BLOCKS - 3, "%s: 157 positions hold %d blocks", name, POOL_BLOCKS - nfree);
    /* sequence 1 = A's first 130 positions, shared: no block taken */
    CHECK(!r1_batch_seq_copy(b, 1, 0, 130), "%s: copy: %s", name, r1_last_error());
    r1_batch_pool(b, NULL, &nfree);
    CHECK(nfree == POOL_BLOCKS - 3 && r1_batch_seq_own(b, 1) == 0 && r1_batch_seq_own(b, 0) == 0,
          "%s: a shared prefix took blocks (%d free, seq 1 owns %d, seq 0 owns %d)", name, nfree,
          r1_batch_seq_own(b, 1), r1_batch_seq_own(b, 0));
    CHECK(r1_batch_seq_need(b, 1, 1) == 1 && r1_batch_seq_need(b, 0, 1) == 1,
          "%s: a write into a shared block needs a block of its own", name);
    /* both write into the shared third block in one step: each its own copy */
    int32_t two[2] = {a[130], got[7]}, seq2[2] = {1, 0};
    uint8_t want2[2] = {0, 1};
    ok = r1_batch_step(b, 2, two, seq2, want2, logits) == 1;
    got[8] = argmax(logits, vocab);
    ok = ok && !pool_run(b, 0, NULL, 0, got + 8, POOL_GEN - 8, logits, vocab) &&
         !memcmp(got, ref, POOL_GEN * sizeof *got);
    CHECK(ok, "%s: sequence 0 after sharing its prefix differs from alone (%s)", name, r1_last_error());
    ok = !pool_run(b, 1, a + 131, POOL_A - 131, got, POOL_GEN, logits, vocab) &&
         !memcmp(got, ref, sizeof got[0] * POOL_GEN);
    CHECK(ok, "%s: a shared prefix continued differs from alone (%s)", name, r1_last_error());
    /* sequence 2 = sequence 0 cut back into a shared block, then other tokens */
    CHECK(!r1_batch_seq_copy(b, 2, 0, 150) && !r1_batch_seq_truncate(b, 2, 100), "%s: copy/truncate: %s", name,
          r1_last_error());
    r1_batch_pool(b, NULL, &nfree);
    ok = nfree == 2 && !pool_run(b, 2, a2 + 100, POOL_A - 100, got, POOL_GEN, logits, vocab) &&
         !memcmp(got, ref2, sizeof ref2);
    CHECK(ok, "%s: a cache cut into a shared block and refilled differs from alone (%d free; %s)", name, nfree,
          r1_last_error());
    /* the pool is full now: a step that needs a block fails and moves nothing */
    int past = r1_batch_seq_n_past(b, 3);
    r1_batch_pool(b, NULL, &nfree);
    int32_t fill[64], fseq[64];
    for (int i = 0; i < 64; i++) fill[i] = a[i], fseq[i] = 3;
    CHECK(nfree == 0 && r1_batch_step(b, 64, fill, fseq, NULL, logits) < 0 &&
              strstr(r1_last_error(), "KV pool is full") && r1_batch_seq_n_past(b, 3) == past,
          "%s: a step past the pool: %d free, '%s'", name, nfree, r1_last_error());
    int own = r1_batch_seq_own(b, 1);
    CHECK(!r1_batch_seq_truncate(b, 1, 0), "%s: truncate: %s", name, r1_last_error());
    r1_batch_pool(b, NULL, &nfree);
    CHECK(own > 0 && nfree == own && r1_batch_step(b, 64, fill, fseq, NULL, logits) == 1,
          "%s: blocks given back (%d of %d) and used: %s", name, nfree, own, r1_last_error());
    for (int q = 0; q < 4; q++) r1_batch_seq_truncate(b, q, 0);
    r1_batch_pool(b, NULL, &nfree);
    CHECK(nfree == POOL_BLOCKS, "%s: %d of %d blocks free after every sequence emptied", name, nfree, POOL_BLOCKS);
    /* the default pool holds every sequence at its whole context, also one that is not a multiple of a block */
    r1_batch_t *d =
        r1_batch_new(m, &(struct r1_batch_opts){
                            .n_seq = 3, .n_ctx = 100, .n_batch = 64, .backend = be, .n_threads = 2, .kv_dtype = kv});
    int full = d != NULL;
    for (int q = 0; full && q < 3; q++) {
        for (int i = 0; i < 64; i++) fseq[i] = q;
        full =
            r1_batch_step(d, 64, fill, fseq, NULL, logits) == 1 && r1_batch_step(d, 36, fill, fseq, NULL, logits) == 1;
    }
    CHECK(full, "%s: 3 sequences of --ctx 100 in the default pool: %s", name, r1_last_error());
    r1_batch_free(d);
    printf("%s/%s (%s KV): paged pool of %d blocks: shared prefixes, copies on write, a full pool == alone\n", name, be,
           r1_dtype_name(kv), POOL_BLOCKS);
    free(logits);
    r1_batch_free(b);
    r1_model_free(m);
}

static int is_model_dir(const char *dir) {
    char p[700];
    struct stat st;
    snprintf(p, sizeof p, "%s/config.json", dir);
    return stat(p, &st) == 0;
}

int main(void) {
    static const char *const backends[] = {"ref", "cpu"};
    static const char *const ggufs[] = {"llama_q4_1.gguf", "mha_q8_0.gguf", "tied_q4_k_m.gguf"};
    DIR *dp = opendir(FIXTURE_DIR);
    CHECK(dp, "cannot open %s (run from the repository root)", FIXTURE_DIR);
    if (!dp) return TEST_DONE("test_batch");
    char names[32][256];
    int n = 0;
    struct dirent *e;
    while ((e = readdir(dp)) && n < 32) {
        char dir[600];
        snprintf(dir, sizeof dir, "%s/%s", FIXTURE_DIR, e->d_name);
        if (e->d_name[0] != '.' && is_model_dir(dir)) snprintf(names[n++], sizeof names[0], "%s", e->d_name);
    }
    closedir(dp);
    qsort(names, (size_t)n, sizeof names[0], (int (*)(const void *, const void *))strcmp);
    CHECK(n >= 3, "only %d fixture models in %s", n, FIXTURE_DIR);
    for (int i = 0; i < n; i++)
        for (int k = 0; k < 2; k++) {
            char dir[600];
            snprintf(dir, sizeof dir, "%s/%s", FIXTURE_DIR, names[i]);
            run_model(names[i], dir, backends[k]);
        }
    for (size_t i = 0; i < sizeof ggufs / sizeof *ggufs; i++)
        for (int k = 0; k < 2; k++) {
            char path[600];
            snprintf(path, sizeof path, "%s/gguf/%s", FIXTURE_DIR, ggufs[i]);
            run_model(ggufs[i], path, backends[k]);
        }
    run_pool("llama_gqa_f32", FIXTURE_DIR "/llama_gqa_f32", "ref", R1_DTYPE_F32);
    run_pool("llama_gqa_f32", FIXTURE_DIR "/llama_gqa_f32", "cpu", R1_DTYPE_F32);
    run_pool("llama_gqa_f32", FIXTURE_DIR "/llama_gqa_f32", "cpu", R1_DTYPE_F16);
    run_pool("llama_gqa_f32", FIXTURE_DIR "/llama_gqa_f32", "cpu", R1_DTYPE_Q8_0);
    kv_dt = R1_DTYPE_Q8_0;
    for (int i = 0; i < n; i++) {
        char dir[8800], name[8800];
        snprintf(dir, sizeof dir, "%s/%s", FIXTURE_DIR, names[i]);
        snprintf(name, sizeof name, "%s (q8_0 KV)", names[i]);
        run_model(name, dir, "cpu");
    }
    /* weights the cpu set regroups (q4_0x8, q8_0x8, q4_Kx8 where a row is
     * whole groups of 256): a model of width 256 converted at load, its
     * sequences batched with prompt chunks give the tokens they give alone
     * (rows of 256 columns are one K slice: longer rows' slicing of steps
     * past 16 rows is not reached here) */
    kv_dt = R1_DTYPE_F16;
    static const enum r1_dtype conv[] = {R1_DTYPE_Q4_0, R1_DTYPE_Q8_0, R1_DTYPE_Q4_K};
    for (size_t i = 0; i < sizeof conv / sizeof *conv; i++) {
        char name[128];
        load_dt = conv[i];
        snprintf(name, sizeof name, "gqa4_tied_f32 (as %s)", r1_dtype_name(conv[i]));
        run_model(name, FIXTURE_DIR "/gqa4_tied_f32", "cpu");
    }
    load_dt = R1_DTYPE_AUTO;
    return TEST_DONE("test_batch");
}
