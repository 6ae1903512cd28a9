/*
 * test_ctx.c - the default context's rule (r1_ctx_pick): the model's length
 * where its KV caches fit in the free memory less the headroom, else the
 * most that fit in steps of 256, never below min(max_pos, 256); and the KV
 * bytes per position of the R1-1.5B shape in each cache dtype.
 */
#include <stdint.h>

#include "runtime/session.h"
#include "test.h"

#define GIB (1ull << 30)

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
    CHECK(capped == 1 && (unsigned long long)n * f16 <= 6 * GIB &&
              (unsigned long long)(n + 256) * f16 > 6 * GIB,
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
    return TEST_DONE("test_ctx");
}
