/*
 * strmap.c - the two small open-addressing hash tables the tokenizer needs:
 * byte string -> id (vocab) and id pair -> (rank, id) (merges). Linear
 * probing, power-of-two capacity, load factor <= 1/2. No deletion.
 */
#include <stdlib.h>
#include <string.h>

#include "tokenizer/tokenizer_internal.h"
#include "util/util.h"

uint64_t r1_hash_bytes(const void *p, size_t n) {
    /* 64-bit FNV-1a over 8-byte words with a final mix: fast enough, no UB. */
    const uint8_t *s = p;
    uint64_t h = 0xcbf29ce484222325ull ^ (n * 0x9E3779B97F4A7C15ull);
    while (n >= 8) {
        uint64_t w;
        memcpy(&w, s, 8);
        h = (h ^ w) * 0x100000001b3ull;
        h ^= h >> 29;
        s += 8;
        n -= 8;
    }
    uint64_t w = 0;
    memcpy(&w, s, n);
    h = (h ^ w) * 0x100000001b3ull;
    h ^= h >> 32;
    h *= 0xff51afd7ed558ccdull;
    h ^= h >> 33;
    return h;
}

static uint32_t pow2_at_least(uint32_t n) {
    uint32_t c = 16;
    while (c < n && c < (1u << 30)) c <<= 1;
    return c;
}

int r1_strmap_init(struct r1_strmap *m, uint32_t expect) {
    memset(m, 0, sizeof *m);
    m->cap = pow2_at_least(expect * 2 + 1);
    m->slots = calloc(m->cap, sizeof *m->slots);
    if (!m->slots) return r1_err("out of memory for a tokenizer hash table");
    return 0;
}

void r1_strmap_free(struct r1_strmap *m) {
    free(m->slots);
    free(m->ents);
    free(m->pool);
    memset(m, 0, sizeof *m);
}

static int strmap_grow(struct r1_strmap *m) {
    uint32_t cap = m->cap * 2;
    uint32_t *slots = calloc(cap, sizeof *slots);
    if (!slots) return r1_err("out of memory for a tokenizer hash table");
    for (uint32_t e = 0; e < m->n; e++) {
        uint32_t i = (uint32_t)m->ents[e].hash & (cap - 1);
        while (slots[i]) i = (i + 1) & (cap - 1);
        slots[i] = e + 1;
    }
    free(m->slots);
    m->slots = slots;
    m->cap = cap;
    return 0;
}

int32_t r1_strmap_get(const struct r1_strmap *m, const void *key, size_t len) {
    if (!m->slots) return -1;
    uint64_t h = r1_hash_bytes(key, len);
    uint32_t mask = m->cap - 1, i = (uint32_t)h & mask;
    for (;;) {
        uint32_t s = m->slots[i];
        if (!s) return -1;
        const struct r1_strmap_ent *e = &m->ents[s - 1];
        if (e->hash == h && e->len == len && memcmp(m->pool + e->off, key, len) == 0) return e->val;
        i = (i + 1) & mask;
    }
}

int r1_strmap_put(struct r1_strmap *m, const void *key, size_t len, int32_t val) {
    if (len > UINT32_MAX / 2) return r1_err("tokenizer key too long");
    if ((m->n + 1) * 2 > m->cap && strmap_grow(m)) return -1;
    uint64_t h = r1_hash_bytes(key, len);
    uint32_t mask = m->cap - 1, i = (uint32_t)h & mask;
    for (;;) {
        uint32_t s = m->slots[i];
        if (!s) break;
        const struct r1_strmap_ent *e = &m->ents[s - 1];
        if (e->hash == h && e->len == len && memcmp(m->pool + e->off, key, len) == 0) return 0;
        i = (i + 1) & mask;
    }
    if (m->n == m->ents_cap) {
        uint32_t c = m->ents_cap ? m->ents_cap * 2 : 1024;
        void *p = realloc(m->ents, (size_t)c * sizeof *m->ents);
        if (!p) return r1_err("out of memory for a tokenizer hash table");
        m->ents = p;
        m->ents_cap = c;
    }
    if (m->pool_len + len + 1 > m->pool_cap) {
        size_t c = m->pool_cap ? m->pool_cap : 65536;
        while (c < m->pool_len + len + 1) c *= 2;
        if (c > UINT32_MAX) return r1_err("tokenizer vocabulary too large");
        void *p = realloc(m->pool, c);
        if (!p) return r1_err("out of memory for a tokenizer hash table");
        m->pool = p;
        m->pool_cap = c;
    }
    memcpy(m->pool + m->pool_len, key, len);
    struct r1_strmap_ent *e = &m->ents[m->n];
    e->hash = h;
    e->off = (uint32_t)m->pool_len;
    e->len = (uint32_t)len;
    e->val = val;
    m->pool_len += len;
    m->slots[i] = ++m->n;
    return 0;
}

int r1_mergemap_init(struct r1_mergemap *m, uint32_t expect) {
    m->n = 0;
    m->cap = pow2_at_least(expect * 2 + 1);
    m->slots = calloc(m->cap, sizeof *m->slots);
    if (!m->slots) return r1_err("out of memory for the merges table");
    return 0;
}

void r1_mergemap_free(struct r1_mergemap *m) {
    free(m->slots);
    memset(m, 0, sizeof *m);
}

int r1_mergemap_put(struct r1_mergemap *m, int32_t a, int32_t b, int32_t rank, int32_t id) {
    if ((m->n + 1) * 2 > m->cap) {
        struct r1_mergemap g;
        if (r1_mergemap_init(&g, m->cap)) return -1;
        for (uint32_t i = 0; i < m->cap; i++) {
            struct r1_merge_ent *e = &m->slots[i];
            if (!e->key) continue;
            uint64_t k = e->key - 1;
            r1_mergemap_put(&g, (int32_t)(k >> 32), (int32_t)(uint32_t)k, e->rank, e->id);
        }
        free(m->slots);
        *m = g;
    }
    uint64_t key = (((uint64_t)(uint32_t)a << 32) | (uint32_t)b) + 1;
    uint64_t h = key * 0x9E3779B97F4A7C15ull;
    uint32_t mask = m->cap - 1, i = (uint32_t)(h >> 32) & mask;
    while (m->slots[i].key) {
        if (m->slots[i].key == key) return 0; /* first (lowest rank) wins */
        i = (i + 1) & mask;
    }
    m->slots[i].key = key;
    m->slots[i].rank = rank;
    m->slots[i].id = id;
    m->n++;
    return 0;
}
