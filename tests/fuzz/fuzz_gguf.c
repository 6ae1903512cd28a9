/*
 * fuzz_gguf.c - libFuzzer target for the GGUF parser (src/gguf/gguf.c): any
 * byte string must parse or be rejected with an error, never crash or read
 * out of bounds; on success every accessor is exercised on every key and
 * tensor. Build and run with scripts/fuzz.sh [SECONDS] fuzz_gguf.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "gguf/gguf.h"

static volatile uint8_t sink;

static void touch_kv(const struct r1_gguf *g, const struct r1_gguf_kv *kv) {
    char key[256];
    size_t n = kv->key.len < sizeof key - 1 ? kv->key.len : sizeof key - 1;
    memcpy(key, kv->key.s, n);
    key[n] = 0;
    if (n != kv->key.len || memchr(key, 0, n)) return; /* not reachable by name */
    const struct r1_gguf_kv *found = r1_gguf_find_kv(g, key);
    if (found != kv) abort();
    int64_t i;
    double f;
    int b, bad;
    struct r1_gguf_str s;
    r1_gguf_get_int(g, key, INT64_MIN, INT64_MAX, &i);
    r1_gguf_get_float(g, key, &f);
    r1_gguf_get_bool(g, key, &b);
    if (r1_gguf_get_str(g, key, &s) == 1 && s.len) sink ^= (uint8_t)s.s[s.len - 1];
    const struct r1_gguf_kv *arr = r1_gguf_get_arr(g, key, R1_GGUF_STRING, &bad);
    if (arr) {
        const uint8_t *p = arr->val;
        for (uint64_t k = 0; k < arr->arr_n; k++) {
            p = r1_gguf_next_str(p, &s);
            if (s.len) sink ^= (uint8_t)s.s[s.len - 1];
        }
        if (p != arr->val + arr->val_size) abort();
    }
    if (kv->val_size) sink ^= kv->val[kv->val_size - 1];
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    /* copy so reads past the end are caught by ASan */
    uint8_t *buf = malloc(size ? size : 1);
    if (!buf) return 0;
    memcpy(buf, data, size);
    struct r1_gguf g;
    if (r1_gguf_parse(&g, buf, size, "fuzz") == 0) {
        for (size_t i = 0; i < g.n_kv; i++) touch_kv(&g, &g.kv[i]);
        for (size_t i = 0; i < g.n_tensors; i++) {
            const struct r1_gguf_tensor *t = &g.tensors[i];
            if (t->size) sink ^= t->data[t->size - 1];
            char name[128];
            if (t->name.len < sizeof name && !memchr(t->name.s, 0, t->name.len)) {
                memcpy(name, t->name.s, t->name.len);
                name[t->name.len] = 0;
                if (r1_gguf_find_tensor(&g, name) != t) abort();
                char hf[128];
                r1_gguf_name_to_hf(name, hf, sizeof hf);
            }
        }
        r1_gguf_free(&g);
    }
    free(buf);
    return 0;
}
