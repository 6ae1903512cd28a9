/*
 * encode.c - text -> ids. Added tokens are cut out of the raw text first
 * (leftmost, longest); each stretch between them is NFC-normalized (valid
 * UTF-8 runs only), split by the pre-tokenizer regexes (Isolated: matches and
 * the gaps between them are pieces; invalid bytes never match, so they end up
 * in gap pieces) and each piece is byte-level BPE'd: merges applied by rank
 * with a min-heap over a linked list of symbols. Pieces up to 64 bytes are
 * cached (shared cache, taken with trylock so threads never wait on it).
 * Must not print; never reads outside (text, len).
 */
#include <stdlib.h>
#include <string.h>
#include <utf8proc.h>

#include "tokenizer/tokenizer_internal.h"
#include "util/util.h"

/* ---- growable buffers ---- */

struct ivec {
    int32_t *v;
    size_t n, cap;
};

static int ivec_reserve(struct ivec *a, size_t extra) {
    if (a->n + extra <= a->cap) return 0;
    size_t c = a->cap ? a->cap : 64;
    while (c < a->n + extra) c *= 2;
    int32_t *p = realloc(a->v, c * sizeof *p);
    if (!p) return r1_err("out of memory while encoding");
    a->v = p;
    a->cap = c;
    return 0;
}

static int ivec_push(struct ivec *a, int32_t id) {
    if (a->n == a->cap && ivec_reserve(a, 1)) return -1;
    a->v[a->n++] = id;
    return 0;
}

struct bytes {
    char *p;
    size_t n, cap;
};

static int bytes_append(struct bytes *b, const void *p, size_t n) {
    if (b->n + n > b->cap) {
        size_t c = b->cap ? b->cap : 256;
        while (c < b->n + n) c *= 2;
        char *q = realloc(b->p, c);
        if (!q) return r1_err("out of memory while encoding");
        b->p = q;
        b->cap = c;
    }
    memcpy(b->p + b->n, p, n);
    b->n += n;
    return 0;
}

/* ---- the piece cache ---- */

#define CACHE_SLOTS (1u << 16)
#define CACHE_MAX_KEY 64
#define CACHE_POOL (CACHE_SLOTS * 8u)

struct r1_piece_cache {
    struct cache_slot {
        uint64_t hash;
        uint32_t koff, voff;
        uint16_t klen, vlen; /* klen 0 = empty */
    } slots[CACHE_SLOTS];
    uint32_t n;
    size_t klen, vlen;
    char keys[CACHE_POOL];
    int32_t vals[CACHE_POOL];
};

struct r1_piece_cache *r1_piece_cache_new(void) {
    return calloc(1, sizeof(struct r1_piece_cache));
}
void r1_piece_cache_free(struct r1_piece_cache *c) { free(c); }

static void cache_reset(struct r1_piece_cache *c) {
    memset(c->slots, 0, sizeof c->slots);
    c->n = 0;
    c->klen = c->vlen = 0;
}

/* Appends the cached ids of the piece to out; 1 on a hit. Lock held. */
static int cache_get(const struct r1_piece_cache *c, uint64_t h, const char *p, size_t n, struct ivec *out) {
    uint32_t i = (uint32_t)h & (CACHE_SLOTS - 1);
    for (;;) {
        const struct cache_slot *s = &c->slots[i];
        if (!s->klen) return 0;
        if (s->hash == h && s->klen == n && !memcmp(c->keys + s->koff, p, n)) {
            if (ivec_reserve(out, s->vlen)) return 0;
            memcpy(out->v + out->n, c->vals + s->voff, s->vlen * sizeof(int32_t));
            out->n += s->vlen;
            return 1;
        }
        i = (i + 1) & (CACHE_SLOTS - 1);
    }
}

static void cache_put(struct r1_piece_cache *c, uint64_t h, const char *p, size_t n, const int32_t *ids, size_t m) {
    if (c->n >= CACHE_SLOTS / 2 || c->klen + n > CACHE_POOL || c->vlen + m > CACHE_POOL) cache_reset(c);
    uint32_t i = (uint32_t)h & (CACHE_SLOTS - 1);
    while (c->slots[i].klen) {
        if (c->slots[i].hash == h && c->slots[i].klen == n && !memcmp(c->keys + c->slots[i].koff, p, n)) return;
        i = (i + 1) & (CACHE_SLOTS - 1);
    }
    struct cache_slot *s = &c->slots[i];
    memcpy(c->keys + c->klen, p, n);
    memcpy(c->vals + c->vlen, ids, m * sizeof *ids);
    s->hash = h;
    s->koff = (uint32_t)c->klen;
    s->voff = (uint32_t)c->vlen;
    s->klen = (uint16_t)n;
    s->vlen = (uint16_t)m;
    c->klen += n;
    c->vlen += m;
    c->n++;
}

/* ---- byte-level BPE of one piece ---- */

struct heap_ent {
    int32_t rank, pos, left, right, merged;
};

struct enc {
    const r1_tokenizer_t *t;
    struct ivec *out;
    int32_t *sym_id, *sym_prev, *sym_next;
    struct heap_ent *heap;
    size_t sym_cap, heap_n;
    struct bytes norm;
    pcre2_match_data *md[R1_TOK_MAX_SPLITS];
    pcre2_match_context *mctx;
    pcre2_jit_stack *jstack;
};

static int heap_less(const struct heap_ent *a, const struct heap_ent *b) {
    return a->rank < b->rank || (a->rank == b->rank && a->pos < b->pos);
}

static void heap_push(struct enc *e, struct heap_ent x) {
    size_t i = e->heap_n++;
    while (i > 0) {
        size_t p = (i - 1) / 2;
        if (!heap_less(&x, &e->heap[p])) break;
        e->heap[i] = e->heap[p];
        i = p;
    }
    e->heap[i] = x;
}

static struct heap_ent heap_pop(struct enc *e) {
    struct heap_ent top = e->heap[0], x = e->heap[--e->heap_n];
    size_t i = 0, n = e->heap_n;
    for (;;) {
        size_t c = 2 * i + 1;
        if (c >= n) break;
        if (c + 1 < n && heap_less(&e->heap[c + 1], &e->heap[c])) c++;
        if (!heap_less(&e->heap[c], &x)) break;
        e->heap[i] = e->heap[c];
        i = c;
    }
    if (n) e->heap[i] = x;
    return top;
}

static void push_pair(struct enc *e, int32_t l) {
    int32_t r = e->sym_next[l], rank, id;
    if (r < 0) return;
    if (r1_mergemap_get(&e->t->merges, e->sym_id[l], e->sym_id[r], &rank, &id))
        heap_push(e, (struct heap_ent){rank, l, e->sym_id[l], e->sym_id[r], id});
}

static int bpe(struct enc *e, const uint8_t *p, size_t n) {
    const r1_tokenizer_t *t = e->t;
    if (t->ignore_merges) {
        int32_t id = r1_strmap_get(&t->vocab, p, n);
        if (id >= 0) return ivec_push(e->out, id);
    }
    if (n > e->sym_cap) {
        size_t c = n < 256 ? 256 : n;
        free(e->sym_id);
        free(e->heap);
        e->sym_id = malloc(3 * c * sizeof *e->sym_id);
        e->heap = malloc(3 * c * sizeof *e->heap);
        if (!e->sym_id || !e->heap) {
            e->sym_cap = 0;
            return r1_err("out of memory while encoding");
        }
        e->sym_cap = c;
    }
    e->sym_prev = e->sym_id + e->sym_cap;
    e->sym_next = e->sym_prev + e->sym_cap;
    int32_t first = -1, last = -1;
    for (size_t i = 0; i < n; i++) {
        int32_t id = t->byte_id[p[i]];
        e->sym_id[i] = id;
        if (id < 0) continue; /* a byte the vocab lacks (no unk token): dropped */
        e->sym_prev[i] = last;
        e->sym_next[i] = -1;
        if (last >= 0) e->sym_next[last] = (int32_t)i;
        else first = (int32_t)i;
        last = (int32_t)i;
    }
    e->heap_n = 0;
    for (int32_t i = first; i >= 0; i = e->sym_next[i]) push_pair(e, i);
    while (e->heap_n) {
        struct heap_ent h = heap_pop(e);
        int32_t l = h.pos, r = e->sym_next[l];
        if (e->sym_id[l] != h.left || r < 0 || e->sym_id[r] != h.right) continue; /* stale */
        e->sym_id[l] = h.merged;
        e->sym_id[r] = -1;
        e->sym_next[l] = e->sym_next[r];
        if (e->sym_next[r] >= 0) e->sym_prev[e->sym_next[r]] = l;
        if (e->sym_prev[l] >= 0) push_pair(e, e->sym_prev[l]);
        push_pair(e, l);
    }
    if (ivec_reserve(e->out, n)) return -1;
    for (int32_t i = first; i >= 0; i = e->sym_next[i]) e->out->v[e->out->n++] = e->sym_id[i];
    return 0;
}

static int piece(struct enc *e, const char *p, size_t n) {
    if (n == 0) return 0;
    const r1_tokenizer_t *t = e->t;
    if (n == 1) {
        int32_t id = t->byte_id[(uint8_t)*p];
        return id >= 0 ? ivec_push(e->out, id) : 0;
    }
    struct r1_piece_cache *c = t->cache;
    if (!c || n > CACHE_MAX_KEY) return bpe(e, (const uint8_t *)p, n);
    uint64_t h = r1_hash_bytes(p, n);
    pthread_mutex_t *lock = (pthread_mutex_t *)&t->cache_lock;
    if (pthread_mutex_trylock(lock) == 0) {
        int hit = cache_get(c, h, p, n, e->out);
        pthread_mutex_unlock(lock);
        if (hit) return 0;
    }
    size_t start = e->out->n;
    if (bpe(e, (const uint8_t *)p, n)) return -1;
    size_t m = e->out->n - start;
    if (m <= CACHE_MAX_KEY && pthread_mutex_trylock(lock) == 0) {
        cache_put(c, h, p, n, e->out->v + start, m);
        pthread_mutex_unlock(lock);
    }
    return 0;
}

/* ---- pre-tokenizer: regex splits, Isolated ---- */

static int split(struct enc *e, int stage, const char *p, size_t n) {
    const r1_tokenizer_t *t = e->t;
    if (stage == t->n_split) return piece(e, p, n);
    pcre2_code *re = t->split[stage];
    pcre2_match_data *md = e->md[stage];
    size_t pos = 0, gap = 0;
    while (pos < n) {
        int rc = pcre2_match(re, (PCRE2_SPTR)p, n, pos, PCRE2_NOTEMPTY, md, e->mctx);
        if (rc == PCRE2_ERROR_JIT_STACKLIMIT && !e->jstack) {
            e->jstack = pcre2_jit_stack_create(32 * 1024, 8 * 1024 * 1024, NULL);
            if (e->jstack) {
                pcre2_jit_stack_assign(e->mctx, NULL, e->jstack);
                continue;
            }
        }
        if (rc < 0) break; /* no match (or a limit hit): the rest is one gap */
        PCRE2_SIZE *ov = pcre2_get_ovector_pointer(md);
        size_t ms = ov[0], me = ov[1];
        if (me <= pos || ms < pos || me > n) break; /* cannot happen; never loop */
        if (ms > gap && split(e, stage + 1, p + gap, ms - gap)) return -1;
        if (split(e, stage + 1, p + ms, me - ms)) return -1;
        pos = gap = me;
    }
    if (gap < n && split(e, stage + 1, p + gap, n - gap)) return -1;
    return 0;
}

/* ---- normalizer: NFC over the valid UTF-8 runs ---- */

/* Length of the valid UTF-8 sequence at p (1..4), or 0 if invalid. */
static size_t utf8_valid_len(const uint8_t *p, size_t n) {
    uint8_t c = p[0];
    if (c < 0x80) return 1;
    if (c < 0xC2) return 0;
    if (c < 0xE0) return n >= 2 && (p[1] & 0xC0) == 0x80 ? 2 : 0;
    if (c < 0xF0) {
        if (n < 3 || (p[1] & 0xC0) != 0x80 || (p[2] & 0xC0) != 0x80) return 0;
        if (c == 0xE0 && p[1] < 0xA0) return 0;  /* overlong */
        if (c == 0xED && p[1] >= 0xA0) return 0; /* surrogate */
        return 3;
    }
    if (c < 0xF5) {
        if (n < 4 || (p[1] & 0xC0) != 0x80 || (p[2] & 0xC0) != 0x80 || (p[3] & 0xC0) != 0x80) return 0;
        if (c == 0xF0 && p[1] < 0x90) return 0;  /* overlong */
        if (c == 0xF4 && p[1] >= 0x90) return 0; /* > U+10FFFF */
        return 4;
    }
    return 0;
}

static int nfc_run(struct bytes *out, const uint8_t *p, size_t n) {
    int need = 0; /* code points below U+0300 (lead bytes < 0xCC) are NFC-stable */
    for (size_t i = 0; i < n && !need; i++) need = p[i] >= 0xCC;
    if (!need) return bytes_append(out, p, n);
    utf8proc_uint8_t *dst = NULL;
    utf8proc_ssize_t m = utf8proc_map(p, (utf8proc_ssize_t)n, &dst, UTF8PROC_STABLE | UTF8PROC_COMPOSE);
    int rc = m >= 0 ? bytes_append(out, dst, (size_t)m) : bytes_append(out, p, n);
    free(dst);
    return rc;
}

/* Normalize p[0..n) into e->norm; returns 0 or -1. */
static int nfc(struct enc *e, const uint8_t *p, size_t n) {
    e->norm.n = 0;
    size_t i = 0;
    while (i < n) {
        size_t run = i;
        while (i < n) {
            size_t k = utf8_valid_len(p + i, n - i);
            if (!k) break;
            i += k;
        }
        if (i > run && nfc_run(&e->norm, p + run, i - run)) return -1;
        size_t bad = i;
        while (i < n && !utf8_valid_len(p + i, n - i)) i++;
        if (i > bad && bytes_append(&e->norm, p + bad, i - bad)) return -1;
    }
    return 0;
}

static int segment(struct enc *e, const char *p, size_t n) {
    const r1_tokenizer_t *t = e->t;
    if (n == 0) return 0;
    if (t->nfc) {
        int need = 0;
        for (size_t i = 0; i < n && !need; i++) need = (uint8_t)p[i] >= 0xCC;
        if (need) {
            if (nfc(e, (const uint8_t *)p, n)) return -1;
            p = e->norm.p;
            n = e->norm.n;
        }
    }
    if (t->add_prefix_space && p[0] != ' ') {
        struct bytes b = {0};
        int rc = bytes_append(&b, " ", 1) || bytes_append(&b, p, n) || split(e, 0, b.p, b.n);
        free(b.p);
        return rc ? -1 : 0;
    }
    return split(e, 0, p, n);
}

/* ---- added tokens ---- */

/* Leftmost-longest added token at or after pos: returns its index or -1. */
static long find_added(const r1_tokenizer_t *t, const char *s, size_t n, size_t pos, size_t *at) {
    for (size_t i = pos; i < n; i++) {
        if (!t->added_first[(uint8_t)s[i]]) continue;
        for (size_t k = 0; k < t->n_added; k++) { /* longest first */
            const struct r1_added_tok *a = &t->added[k];
            if (a->len <= n - i && (uint8_t)a->text[0] == (uint8_t)s[i] && !memcmp(a->text, s + i, a->len)) {
                *at = i;
                return (long)k;
            }
        }
    }
    return -1;
}

int r1_tokenizer_encode(const r1_tokenizer_t *t, const char *text, size_t len, int add_special, int32_t **ids) {
    *ids = NULL;
    if (!text && len) return r1_err("encode: text is NULL");
    struct ivec out = {0};
    struct enc e = {.t = t, .out = &out};
    int rc = -1;
    e.mctx = pcre2_match_context_create(NULL);
    if (!e.mctx) goto done;
    for (int i = 0; i < t->n_split; i++)
        if (!(e.md[i] = pcre2_match_data_create_from_pattern(t->split[i], NULL))) goto done;
    if (ivec_reserve(&out, len / 3 + 16)) goto done;
    if (add_special)
        for (int i = 0; i < t->n_post_prefix; i++)
            if (ivec_push(&out, t->post_prefix[i])) goto done;
    size_t pos = 0;
    while (pos < len) {
        size_t at = len;
        long k = t->n_added ? find_added(t, text, len, pos, &at) : -1;
        if (segment(&e, text + pos, (k >= 0 ? at : len) - pos)) goto done;
        if (k < 0) break;
        if (ivec_push(&out, t->added[k].id)) goto done;
        pos = at + t->added[k].len;
    }
    if (add_special)
        for (int i = 0; i < t->n_post_suffix; i++)
            if (ivec_push(&out, t->post_suffix[i])) goto done;
    if (out.n > INT32_MAX) {
        r1_err("encode: too many tokens");
        goto done;
    }
    if (!out.v && ivec_reserve(&out, 1)) goto done;
    *ids = out.v;
    out.v = NULL;
    rc = (int)out.n;
done:
    free(out.v);
    free(e.sym_id);
    free(e.heap);
    free(e.norm.p);
    for (int i = 0; i < t->n_split; i++) pcre2_match_data_free(e.md[i]);
    pcre2_match_context_free(e.mctx);
    if (e.jstack) pcre2_jit_stack_free(e.jstack);
    return rc;
}
