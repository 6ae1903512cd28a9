/*
 * test_ctx.c - the default context's rule (r1_ctx_pick): the model's length
 * where its KV caches fit in the free memory less the headroom, else the
 * most that fit in steps of 256, never below min(max_pos, 256); and the KV
 * bytes per position of the R1-1.5B shape in each cache dtype; and a
 * context longer than the rope rows a session computes at a time (they are
 * filled as positions are reached): a 2100-token prompt in one step and in
 * five pieces give the same logits, and the rope rows filled as positions
 * are reached are the whole table's.
 */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "runtime/session.h"
#include "test.h"

#define GIB (1ull << 30)
#define TOL_CHUNKED 1e-4 /* max |logit| difference, one step vs five pieces */

/* dir/ = trained_f32 with max_position_embeddings 4096: a symlink to its
 * weights and a config.json rewritten; 0 on success */
static int stretched(char *dir) {
    if (!mkdtemp(dir)) return -1;
    char path[512], src[512];
    snprintf(path, sizeof path, "%s/model.safetensors", dir);
    if (!realpath("tests/fixtures/trained_f32/model.safetensors", src) || symlink(src, path) != 0) return -1;
    FILE *in = fopen("tests/fixtures/trained_f32/config.json", "r");
    snprintf(path, sizeof path, "%s/config.json", dir);
    FILE *out = fopen(path, "w");
    char line[512];
    int n = 0;
    while (in && out && fgets(line, sizeof line, in))
        n += strstr(line, "\"max_position_embeddings\": 512") != NULL
                 ? fputs("  \"max_position_embeddings\": 4096,\n", out) >= 0
                 : (fputs(line, out), 0);
    if (in) fclose(in);
    if (out) fclose(out);
    return n == 1 ? 0 : -1;
}

static void long_prompt(void) {
    char dir[] = "/tmp/r1ctx.XXXXXX", path[600];
    int made = stretched(dir);
    CHECK(made == 0, "a copy of trained_f32 with 4096 positions in %s", dir);
    r1_model_t *m = made ? NULL : r1_model_load(dir, &(struct r1_load_opts){.dtype = R1_DTYPE_AUTO});
    snprintf(path, sizeof path, "%s/config.json", dir), unlink(path);
    snprintf(path, sizeof path, "%s/model.safetensors", dir), unlink(path);
    rmdir(dir);
    CHECK(m, "trained_f32 with 4096 positions: %s", r1_last_error());
    if (!m) return;
    enum { N = 2100, PIECE = 420 };
    const struct r1_session_opts o = {.n_ctx = 2304, .backend = "cpu", .n_threads = 2, .kv_dtype = R1_DTYPE_AUTO};
    r1_session_t *a = r1_session_new(m, &o), *b = r1_session_new(m, &o);
    CHECK(a && b, "sessions of 2304 positions: %s", r1_last_error());
    int32_t *ids = malloc(N * sizeof *ids);
    const int V = a ? r1_session_vocab(a) : 0;
    float *la = malloc((size_t)(V > 0 ? V : 1) * sizeof *la);
    if (a && b && ids && la) {
        for (int i = 0; i < N; i++) ids[i] = (int32_t)((i * 7919 + 13) % (V - 2) + 1);
        const float *l = r1_session_forward(a, ids, N, NULL);
        CHECK(l, "one step of %d: %s", N, r1_last_error());
        if (l) memcpy(la, l, (size_t)V * sizeof *la);
        const float *lb = NULL;
        for (int i = 0; i < N && (i == 0 || lb); i += PIECE) lb = r1_session_forward(b, ids + i, PIECE, NULL);
        CHECK(lb, "five steps of %d: %s", PIECE, r1_last_error());
        /* the rows computed so far are the whole table's rows, bit for bit */
        const float *tc, *ts;
        int filled = r1_session_rope_host(b, &tc, &ts);
        const int half = r1_model_config(m)->head_dim / 2;
        float *rc = malloc((size_t)(filled > 0 ? filled : 1) * half * sizeof *rc);
        float *rs = malloc((size_t)(filled > 0 ? filled : 1) * half * sizeof *rs);
        CHECK(filled >= N && filled <= 2304, "rope rows computed after %d positions: %d", N, filled);
        if (filled > 0 && rc && rs) {
            r1_rope_rows(m, rc, rs, 0, filled);
            int bad = -1;
            for (size_t i = 0; i < (size_t)filled * half && bad < 0; i++)
                if (rc[i] != tc[i] || rs[i] != ts[i]) bad = (int)(i / half);
            CHECK(bad < 0, "rope row %d filled in pieces differs from the whole table's", bad);
        }
        free(rc);
        free(rs);
        if (l && lb) {
            double e = 0;
            for (int v = 0; v < V; v++) e = fmax(e, fabs((double)la[v] - lb[v]));
            CHECK(e <= TOL_CHUNKED, "position %d: one step vs five pieces, max |diff| %.3g (TOL_CHUNKED %g)", N - 1, e,
                  TOL_CHUNKED);
            printf("  2100-token prompt, one step vs five pieces: max |diff| %.3g (TOL_CHUNKED %g)\n", e, TOL_CHUNKED);
        }
    }
    free(ids);
    free(la);
    r1_session_free(a);
    r1_session_free(b);
    r1_model_free(m);
}

int main(void) {
    /* R1-Distill-Qwen-1.5B: 28 layers, 2 KV heads of 128 */
    struct r1_config c = {.n_layer = 28, .n_kv_head = 2, .head_dim = 128, .max_pos = 131072};
    size_t f16 = r1_kv_pos_bytes(&c, R1_DTYPE_F16), q8 = r1_kv_pos_bytes(&c, R1_DTYPE_Q8_0);
    size_t f32 = r1_kv_pos_bytes(&c, R1_DTYPE_F32);
    CHECK(f16 == 2u * 28 * 2 * 128 * 2, "f16 KV bytes per position %zu", f16);
    CHECK(f32 == 2 * f16, "f32 KV bytes per position %zu", f32);
    CHECK(q8 == 2u * 28 * 2 * 4 * 34, "q8_0 KV bytes per position %zu (4 blocks of 34 bytes a row)", q8);

    int capped = -1;
    /* plenty of memory: the model's length */
    int n = r1_ctx_pick(131072, f16, 64 * GIB, &capped);
    CHECK(n == 131072 && capped == 0, "64 GiB free: %d (capped %d), want 131072", n, capped);
    /* 2 GiB free: the headroom (1 GiB) leaves 1 GiB = 37449 positions -> 37376 */
    n = r1_ctx_pick(131072, f16, 2 * GIB, &capped);
    CHECK(capped == 1 && n % 256 == 0, "2 GiB free: %d (capped %d), want a multiple of 256", n, capped);
    CHECK((unsigned long long)n * f16 <= GIB && (unsigned long long)(n + 256) * f16 > GIB,
          "2 GiB free: %d positions = %.3f GiB, want the most that fit in 1 GiB", n, (double)n * f16 / GIB);
    /* 8 GiB free: a quarter (2 GiB) is kept, 6 GiB for the cache */
    n = r1_ctx_pick(1 << 20, f16, 8 * GIB, &capped);
    CHECK(capped == 1 && (unsigned long long)n * f16 <= 6 * GIB && (unsigned long long)(n + 256) * f16 > 6 * GIB,
          "8 GiB free: %d positions, want the most that fit in 6 GiB", n);
    /* a q8_0 cache fits more positions in the same memory */
    int nq = r1_ctx_pick(1 << 20, q8, 8 * GIB, &capped);
    CHECK(nq > n, "q8_0 fits %d positions, f16 %d", nq, n);
    /* almost nothing free: the floor, min(max_pos, 256) */
    n = r1_ctx_pick(131072, f16, GIB / 2, &capped);
    CHECK(n == 256 && capped == 1, "0.5 GiB free: %d, want the floor 256", n);
    n = r1_ctx_pick(100, f16, GIB / 2, &capped);
    CHECK(n == 100, "0.5 GiB free, max_pos 100: %d, want 100", n);
    /* unknown free memory: the model's length */
    n = r1_ctx_pick(32768, f16, 0, &capped);
    CHECK(n == 32768 && capped == 0, "unknown free memory: %d, want 32768", n);
    long_prompt();
    return TEST_DONE("test_ctx");
}
