/*
 * match.c - the grammar matcher: which tokens a grammar accepts next, and
 * the matcher's state as tokens are taken.
 *
 * The state is a set of stacks of a pushdown automaton, each a chain of
 * nodes (element position, parent node) in an arena; every stack's top is a
 * character class, and `accept` says whether the grammar may end here. A
 * byte advances every stack whose class accepts it (multi-byte UTF-8 is
 * followed as a partial character, keeping the stacks that can still
 * accept it). Tail references pop their frame first, so a repetition does
 * not deepen the stack and a state inside a long string stays the same.
 *
 * The vocabulary is a trie of the tokens' bytes laid out in preorder
 * (r1_gvocab); a mask is one walk of the trie that skips every subtree
 * whose prefix no stack accepts. Masks are cached per state (key: the
 * stacks' element positions), so a state met again costs a hash lookup.
 * Scratch nodes live past the committed ones and are dropped after each
 * query; nothing is allocated per query once the arenas have grown.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "grammar/grammar_impl.h"
#include "util/util.h"

#define MAX_TOKEN_BYTES 256 /* longer tokens are never allowed */
#define MAX_EXPAND 1024     /* nesting of one expansion (left recursion ends here) */
#define N_CACHE 64          /* masks kept per matcher */
#define MAX_KEY 8192        /* longest cache key (ints) */
#define MAX_END 8

/* ------------------------------------------------------------ vocabulary */

struct tnode {
    int32_t size;   /* nodes in the subtree, this one included */
    int32_t t0, nt; /* tokens ending here: sorted[t0 .. t0+nt) */
    uint16_t depth; /* bytes from the root (>= 1) */
    uint8_t byte;
};

struct r1_gvocab {
    int vocab;
    char *blob;         /* every token's bytes */
    uint32_t *off;      /* (vocab) offset in blob */
    uint16_t *len;      /* (vocab) byte count; 0 = never allowed (special, empty or too long) */
    int32_t *sorted;    /* ids with bytes, sorted by their bytes */
    struct tnode *trie; /* (n_trie) preorder */
    int n_trie, max_len;
    int32_t end[MAX_END];
    int n_end;
};

/* qsort_r's context, not a global: requests build vocabularies at once */
static int cmp_tok(const void *a, const void *b, void *ctx) {
    const r1_gvocab_t *v = ctx;
    int32_t x = *(const int32_t *)a, y = *(const int32_t *)b;
    int lx = v->len[x], ly = v->len[y], n = lx < ly ? lx : ly;
    int c = memcmp(v->blob + v->off[x], v->blob + v->off[y], (size_t)n);
    if (c) return c;
    return lx != ly ? lx - ly : x - y;
}

static int is_end(const r1_gvocab_t *v, int32_t id) {
    for (int i = 0; i < v->n_end; i++)
        if (v->end[i] == id) return 1;
    return 0;
}

r1_gvocab_t *r1_gvocab_new(const r1_tokenizer_t *t, int vocab, const int32_t *end_ids, int n_end) {
    r1_gvocab_t *v = calloc(1, sizeof *v);
    if (!v) return r1_err("out of memory"), NULL;
    v->vocab = vocab;
    for (int i = 0; i < n_end && v->n_end < MAX_END; i++)
        if (end_ids[i] >= 0 && end_ids[i] < vocab) v->end[v->n_end++] = end_ids[i];
    v->off = calloc((size_t)vocab, sizeof *v->off);
    v->len = calloc((size_t)vocab, sizeof *v->len);
    v->sorted = malloc((size_t)vocab * sizeof *v->sorted);
    size_t cap = (size_t)vocab * 8 + 64, used = 0;
    v->blob = malloc(cap);
    if (!v->off || !v->len || !v->sorted || !v->blob) goto oom;
    int n_tok = r1_tokenizer_vocab_size(t), n = 0;
    for (int32_t id = 0; id < vocab; id++) {
        if (id >= n_tok || r1_tokenizer_is_special(t, id) || is_end(v, id)) continue;
        char *s = NULL;
        long l = r1_tokenizer_decode(t, &id, 1, 0, &s);
        if (l > 0 && l <= MAX_TOKEN_BYTES) {
            if (used + (size_t)l > cap) {
                while (used + (size_t)l > cap) cap *= 2;
                char *nb = realloc(v->blob, cap);
                if (!nb) {
                    free(s);
                    goto oom;
                }
                v->blob = nb;
            }
            memcpy(v->blob + used, s, (size_t)l);
            v->off[id] = (uint32_t)used, v->len[id] = (uint16_t)l;
            used += (size_t)l;
            v->sorted[n++] = id;
            if (l > v->max_len) v->max_len = (int)l;
        }
        free(s);
    }
    qsort_r(v->sorted, (size_t)n, sizeof *v->sorted, cmp_tok, v);
    /* the trie, in preorder: a node per distinct prefix */
    size_t tcap = used + 1;
    v->trie = malloc(tcap * sizeof *v->trie);
    int32_t path[MAX_TOKEN_BYTES + 1];
    if (!v->trie) goto oom;
    int depth = 0;
    for (int k = 0; k < n; k++) {
        int32_t id = v->sorted[k];
        const uint8_t *b = (const uint8_t *)v->blob + v->off[id];
        int l = v->len[id], lcp = 0;
        if (k) {
            int32_t p = v->sorted[k - 1];
            const uint8_t *pb = (const uint8_t *)v->blob + v->off[p];
            int pl = v->len[p];
            while (lcp < pl && lcp < l && pb[lcp] == b[lcp]) lcp++;
        }
        for (; depth > lcp; depth--) v->trie[path[depth]].size = v->n_trie - path[depth];
        for (; depth < l; depth++) {
            path[depth + 1] = v->n_trie;
            v->trie[v->n_trie++] =
                (struct tnode){.size = 1, .t0 = k, .nt = 0, .depth = (uint16_t)(depth + 1), .byte = b[depth]};
        }
        struct tnode *nd = &v->trie[path[l]];
        if (!nd->nt) nd->t0 = k;
        nd->nt++;
    }
    for (; depth > 0; depth--) v->trie[path[depth]].size = v->n_trie - path[depth];
    return v;
oom:
    r1_gvocab_free(v);
    r1_err("out of memory for the grammar's vocabulary");
    return NULL;
}

void r1_gvocab_free(r1_gvocab_t *v) {
    if (!v) return;
    free(v->blob);
    free(v->off);
    free(v->len);
    free(v->sorted);
    free(v->trie);
    free(v);
}

/* --------------------------------------------------------------- matcher */

struct gnode {
    int32_t pos;    /* element index in g->el */
    int32_t parent; /* node index, -1 = bottom */
};

struct gstate {
    int32_t t0, nt; /* the stacks: their top nodes tops[t0 .. t0+nt) */
    uint32_t val;   /* partial UTF-8: the bits so far */
    uint8_t need;   /* continuation bytes still to come (0: none) */
    uint8_t len;    /* the partial character's length */
    uint8_t accept; /* the grammar may end here */
};

struct mcache {
    uint64_t hash;
    int32_t *key;
    int klen, cap;
    uint64_t *bits;
};

struct r1_gmatch {
    const r1_grammar_t *g;
    const r1_gvocab_t *v;
    struct gnode *nodes;
    int n_nodes, cap_nodes, base_nodes; /* nodes below base_nodes belong to the committed state */
    int32_t *tops;
    int n_tops, cap_tops, base_tops;
    struct gstate cur;
    int failed; /* out of memory or an expansion too deep */
    int ended;  /* an end id was taken */
    struct mcache cache[N_CACHE];
    int next_slot;
    int32_t *key;          /* (MAX_KEY) scratch */
    struct gstate *dstate; /* (max_len + 1) trie walk */
    int32_t *dmark;        /* (max_len + 1, 2) */
    long hits, misses;
};

static int32_t node_new(r1_gmatch_t *m, int32_t pos, int32_t parent) {
    if (m->n_nodes == m->cap_nodes) {
        int c = m->cap_nodes ? m->cap_nodes * 2 : 1024;
        struct gnode *n = realloc(m->nodes, (size_t)c * sizeof *n);
        if (!n) return m->failed = 1, -2;
        m->nodes = n, m->cap_nodes = c;
    }
    m->nodes[m->n_nodes] = (struct gnode){pos, parent};
    return m->n_nodes++;
}

static int stack_eq(const r1_gmatch_t *m, int32_t a, int32_t b) {
    while (a != b) {
        if (a < 0 || b < 0 || m->nodes[a].pos != m->nodes[b].pos) return 0;
        a = m->nodes[a].parent, b = m->nodes[b].parent;
    }
    return 1;
}

/* Add a stack to st (whose tops end the buffer), unless it holds an equal one. */
static void push_top(r1_gmatch_t *m, struct gstate *st, int32_t node) {
    for (int i = 0; i < st->nt; i++)
        if (stack_eq(m, m->tops[st->t0 + i], node)) return;
    if (m->n_tops == m->cap_tops) {
        int c = m->cap_tops ? m->cap_tops * 2 : 256;
        int32_t *t = realloc(m->tops, (size_t)c * sizeof *t);
        if (!t) {
            m->failed = 1;
            return;
        }
        m->tops = t, m->cap_tops = c;
    }
    m->tops[m->n_tops++] = node;
    st->nt++;
}

/* Bring the stack `node` to tops whose element is a class; an empty stack
 * sets accept. */
static void expand(r1_gmatch_t *m, struct gstate *st, int32_t node, int depth) {
    const r1_grammar_t *g = m->g;
    for (;;) {
        if (node == -2 || depth > MAX_EXPAND) {
            m->failed |= depth > MAX_EXPAND;
            return;
        }
        if (node < 0) {
            st->accept = 1;
            return;
        }
        const struct gel *e = &g->el[m->nodes[node].pos];
        if (e->type == GEL_CLASS) {
            push_top(m, st, node);
            return;
        }
        if (e->type == GEL_END) {
            node = m->nodes[node].parent;
            depth++;
            continue;
        }
        int32_t pos = m->nodes[node].pos, parent = m->nodes[node].parent;
        /* a reference last in its alternative returns straight to the parent */
        int32_t cont = g->el[pos + 1].type == GEL_END ? parent : node_new(m, pos + 1, parent);
        int r = e->v, a0 = g->rule_alt0[r], na = g->rule_nalt[r];
        for (int a = 0; a < na; a++) expand(m, st, node_new(m, g->alt[a0 + a], cont), depth + 1);
        return;
    }
}

static void state_begin(r1_gmatch_t *m, struct gstate *out) { *out = (struct gstate){.t0 = m->n_tops}; }

/* out = in after the code point cp. */
static void advance_cp(r1_gmatch_t *m, const struct gstate *in, uint32_t cp, struct gstate *out) {
    state_begin(m, out);
    for (int i = 0; i < in->nt; i++) {
        int32_t t = m->tops[in->t0 + i];
        const struct gnode n = m->nodes[t];
        if (gclass_match(m->g, m->g->el[n.pos].v, cp)) expand(m, out, node_new(m, n.pos + 1, n.parent), 0);
    }
}

static const uint32_t UTF8_MIN[5] = {0, 0, 0x80, 0x800, 0x10000};
static const uint32_t UTF8_MAX[5] = {0, 0x7f, 0x7ff, 0xffff, 0x10ffff};

/* out = in after the partial character (len bytes, need still to come, val
 * so far): the stacks whose class can still accept some completion. */
static void keep_partial(r1_gmatch_t *m, const struct gstate *in, struct gstate *out, uint32_t val, int need, int len) {
    state_begin(m, out);
    uint32_t lo = val << (6 * need), hi = lo | ((1u << (6 * need)) - 1);
    if (lo < UTF8_MIN[len]) lo = UTF8_MIN[len];
    if (hi > UTF8_MAX[len]) hi = UTF8_MAX[len];
    out->val = val, out->need = (uint8_t)need, out->len = (uint8_t)len;
    if (lo > hi) return;
    /* the completions that are characters: the surrogates (U+D800..DFFF,
     * which advance_byte refuses once the last byte is in) left out, or a
     * prefix such as ED BD would be kept that no byte can finish */
    uint32_t lo2 = 1, hi2 = 0; /* a second range: empty unless [lo, hi] straddles them */
    if (lo <= 0xdfff && hi >= 0xd800) {
        if (hi > 0xdfff) lo2 = 0xe000, hi2 = hi;
        if (lo >= 0xd800) {
            if (lo2 > hi2) return; /* only surrogates */
            lo = lo2, hi = hi2, lo2 = 1, hi2 = 0;
        } else hi = 0xd7ff;
    }
    for (int i = 0; i < in->nt; i++) {
        int32_t t = m->tops[in->t0 + i];
        const uint32_t c = m->g->el[m->nodes[t].pos].v;
        if (gclass_overlaps(m->g, c, lo, hi) || (lo2 <= hi2 && gclass_overlaps(m->g, c, lo2, hi2))) push_top(m, out, t);
    }
}

/* out = in after byte b; 1 if out can still go on or end. */
static int advance_byte(r1_gmatch_t *m, const struct gstate *in, uint8_t b, struct gstate *out) {
    if (!in->need) {
        if (b < 0x80) advance_cp(m, in, b, out);
        else if (b >= 0xc2 && b <= 0xf4) {
            int len = b < 0xe0 ? 2 : b < 0xf0 ? 3 : 4;
            keep_partial(m, in, out, b & (0x7f >> len), len - 1, len);
        } else state_begin(m, out);
    } else if ((b & 0xc0) != 0x80) {
        state_begin(m, out);
    } else {
        uint32_t val = in->val << 6 | (b & 0x3f);
        if (in->need > 1) keep_partial(m, in, out, val, in->need - 1, in->len);
        else if (val < UTF8_MIN[in->len] || (val >= 0xd800 && val <= 0xdfff)) state_begin(m, out);
        else advance_cp(m, in, val, out);
    }
    return out->nt > 0 || out->accept;
}

static void scratch_reset(r1_gmatch_t *m) {
    m->n_nodes = m->base_nodes;
    m->n_tops = m->base_tops;
}

r1_gmatch_t *r1_gmatch_new(const r1_grammar_t *g, const r1_gvocab_t *v) {
    r1_gmatch_t *m = calloc(1, sizeof *m);
    if (!m) return r1_err("out of memory"), NULL;
    m->g = g, m->v = v;
    m->key = malloc(MAX_KEY * sizeof *m->key);
    m->dstate = malloc(((size_t)v->max_len + 1) * sizeof *m->dstate);
    m->dmark = malloc(((size_t)v->max_len + 1) * 2 * sizeof *m->dmark);
    if (!m->key || !m->dstate || !m->dmark) {
        r1_gmatch_free(m);
        return r1_err("out of memory"), NULL;
    }
    state_begin(m, &m->cur);
    int r = g->root, a0 = g->rule_alt0[r];
    for (int a = 0; a < g->rule_nalt[r]; a++) expand(m, &m->cur, node_new(m, g->alt[a0 + a], -1), 0);
    if (m->failed) {
        r1_gmatch_free(m);
        return r1_err("the grammar recurses without consuming input (left recursion?)"), NULL;
    }
    m->base_nodes = m->n_nodes, m->base_tops = m->n_tops;
    return m;
}

void r1_gmatch_free(r1_gmatch_t *m) {
    if (!m) return;
    for (int i = 0; i < N_CACHE; i++) {
        free(m->cache[i].key);
        free(m->cache[i].bits);
    }
    free(m->nodes);
    free(m->tops);
    free(m->key);
    free(m->dstate);
    free(m->dmark);
    free(m);
}

int r1_gmatch_done(const r1_gmatch_t *m) { return !m->ended && m->cur.accept; }

int r1_gmatch_finished(const r1_gmatch_t *m) { return m->ended || (m->cur.accept && m->cur.nt == 0); }

/* The state after the bytes s[0..n) from the committed one, in scratch;
 * 1 if it can go on or end. */
static int walk(r1_gmatch_t *m, const uint8_t *s, size_t n, struct gstate *out) {
    struct gstate a = m->cur, b;
    for (size_t i = 0; i < n; i++) {
        if (!advance_byte(m, &a, s[i], &b)) return 0;
        a = b;
    }
    *out = a;
    return !m->failed;
}

int r1_gmatch_allows(r1_gmatch_t *m, int32_t id) {
    const r1_gvocab_t *v = m->v;
    if (m->ended || id < 0 || id >= v->vocab) return 0;
    if (is_end(v, id)) return m->cur.accept && !m->cur.need;
    if (!v->len[id]) return 0;
    struct gstate st;
    int ok = walk(m, (const uint8_t *)v->blob + v->off[id], v->len[id], &st);
    scratch_reset(m);
    return ok;
}

/* Make st (in scratch) the committed state. */
static void commit(r1_gmatch_t *m, const struct gstate *st) {
    memmove(m->tops, m->tops + st->t0, (size_t)st->nt * sizeof *m->tops);
    m->cur = *st;
    m->cur.t0 = 0;
    m->n_tops = m->base_tops = st->nt;
    m->base_nodes = m->n_nodes; /* the old nodes stay: stacks share their tails */
}

int r1_gmatch_accept_bytes(r1_gmatch_t *m, const char *s, size_t n) {
    if (m->ended) return -1;
    struct gstate st;
    if (!walk(m, (const uint8_t *)s, n, &st)) {
        scratch_reset(m);
        return -1;
    }
    commit(m, &st);
    return 0;
}

int r1_gmatch_accept(r1_gmatch_t *m, int32_t id) {
    const r1_gvocab_t *v = m->v;
    if (m->ended || id < 0 || id >= v->vocab) return -1;
    if (is_end(v, id)) {
        if (!m->cur.accept) return -1;
        m->ended = 1;
        return 0;
    }
    if (!v->len[id]) return -1;
    return r1_gmatch_accept_bytes(m, v->blob + v->off[id], v->len[id]);
}

/* ------------------------------------------------------------------ masks */

static uint64_t fnv(const int32_t *k, int n) {
    uint64_t h = 1469598103934665603ull;
    for (int i = 0; i < n; i++) h = (h ^ (uint32_t)k[i]) * 1099511628211ull;
    return h;
}

/* The committed state as a key: each stack's positions, then the partial
 * character and accept; -1 when it does not fit. */
static int state_key(r1_gmatch_t *m) {
    int n = 0;
    for (int i = 0; i < m->cur.nt; i++) {
        for (int32_t t = m->tops[m->cur.t0 + i]; t >= 0; t = m->nodes[t].parent) {
            if (n >= MAX_KEY - 8) return -1;
            m->key[n++] = m->nodes[t].pos;
        }
        m->key[n++] = -1;
    }
    m->key[n++] = (int32_t)m->cur.val, m->key[n++] = m->cur.need, m->key[n++] = m->cur.len;
    m->key[n++] = m->cur.accept;
    return n;
}

static void compute_mask(r1_gmatch_t *m, uint64_t *bits) {
    const r1_gvocab_t *v = m->v;
    memset(bits, 0, (size_t)(v->vocab + 63) / 64 * sizeof *bits);
    m->dstate[0] = m->cur;
    m->dmark[0] = m->n_nodes, m->dmark[1] = m->n_tops;
    for (int i = 0; i < v->n_trie;) {
        const struct tnode *t = &v->trie[i];
        int d = t->depth;
        m->n_nodes = m->dmark[2 * (d - 1)], m->n_tops = m->dmark[2 * (d - 1) + 1];
        struct gstate ns;
        if (!advance_byte(m, &m->dstate[d - 1], t->byte, &ns)) {
            i += t->size;
            continue;
        }
        m->dstate[d] = ns;
        m->dmark[2 * d] = m->n_nodes, m->dmark[2 * d + 1] = m->n_tops;
        for (int k = 0; k < t->nt; k++) {
            int32_t id = v->sorted[t->t0 + k];
            bits[id >> 6] |= 1ull << (id & 63);
        }
        i++;
    }
    if (m->cur.accept && !m->cur.need)
        for (int k = 0; k < v->n_end; k++) bits[v->end[k] >> 6] |= 1ull << (v->end[k] & 63);
    scratch_reset(m);
}

const uint64_t *r1_gmatch_mask(r1_gmatch_t *m) {
    int klen = state_key(m);
    uint64_t h = klen > 0 ? fnv(m->key, klen) : 0;
    if (klen > 0)
        for (int i = 0; i < N_CACHE; i++) {
            struct mcache *c = &m->cache[i];
            if (c->bits && c->hash == h && c->klen == klen && !memcmp(c->key, m->key, (size_t)klen * sizeof *m->key)) {
                m->hits++;
                return c->bits;
            }
        }
    m->misses++;
    struct mcache *c = &m->cache[m->next_slot];
    m->next_slot = (m->next_slot + 1) % N_CACHE;
    if (!c->bits && !(c->bits = malloc((size_t)(m->v->vocab + 63) / 64 * sizeof *c->bits))) return NULL;
    c->klen = 0;
    if (klen > 0) {
        if (klen > c->cap) {
            int32_t *k = realloc(c->key, (size_t)klen * sizeof *k);
            if (k) c->key = k, c->cap = klen;
        }
        if (c->cap >= klen) {
            memcpy(c->key, m->key, (size_t)klen * sizeof *m->key);
            c->klen = klen, c->hash = h;
        }
    }
    compute_mask(m, c->bits);
    if (m->ended) memset(c->bits, 0, (size_t)(m->v->vocab + 63) / 64 * sizeof *c->bits), c->klen = 0;
    return c->bits;
}

void r1_gmatch_stats(const r1_gmatch_t *m, long *hits, long *misses) {
    if (hits) *hits = m->hits;
    if (misses) *misses = m->misses;
}
