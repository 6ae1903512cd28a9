/*
 * gbnf.c - compiles a GBNF grammar (the BNF dialect of llama.cpp's grammars)
 * into the rule tables of grammar_impl.h.
 *
 *   root   ::= "{" ws pair ("," ws pair)* "}"     # the start rule is "root"
 *   pair   ::= [a-z]+ ws ":" ws ( "true" | "false" ) ws
 *   ws     ::= [ \t\n]{0,8}
 *
 * Literals "...", classes [...] / [^...], any character ".", rule names,
 * groups ( ... ), alternatives |, and the postfix operators * + ? {m} {m,}
 * {m,n}; escapes \n \r \t \\ \" \] \- \xHH \uHHHH \UHHHHHHHH; comments #.
 * Newlines are white space: a rule ends where the next "name ::=" begins.
 * A pure function of the text: every error is a message, never a crash.
 */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "grammar/grammar_impl.h"

#define MAX_REPEAT 4096 /* the largest count of {m,n} */
#define MAX_RULES 100000
#define MAX_DEPTH 64 /* nested groups */

struct balt {
    struct gel *e;
    int n, cap;
};

struct brule {
    char *name; /* NULL for generated rules */
    struct balt *alts;
    int n, cap;
    int defined;
};

struct parser {
    const char *start, *p, *end;
    struct brule *rules;
    int n_rules, cap_rules;
    uint32_t *rng;
    int n_rng, cap_rng;
    struct gclass *cls;
    int n_cls, cap_cls;
    char *err;
    size_t errlen;
    int failed;
    int depth;
};

static int perr(struct parser *ps, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static int perr(struct parser *ps, const char *fmt, ...) {
    if (ps->failed) return -1;
    ps->failed = 1;
    if (ps->err && ps->errlen) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(ps->err, ps->errlen, fmt, ap);
        va_end(ap);
    }
    return -1;
}

static int grow(void **p, int *cap, int need, size_t size) {
    if (need <= *cap) return 0;
    int c = *cap ? *cap : 8;
    while (c < need) c *= 2;
    void *np = realloc(*p, (size_t)c * size);
    if (!np) return -1;
    *p = np;
    *cap = c;
    return 0;
}

static int alt_push(struct parser *ps, struct balt *a, struct gel e) {
    if (grow((void **)&a->e, &a->cap, a->n + 1, sizeof *a->e)) return perr(ps, "out of memory");
    a->e[a->n++] = e;
    return 0;
}

/* A new rule (generated when name is NULL); its index or -1. */
static int rule_new(struct parser *ps, const char *name, size_t len) {
    if (ps->n_rules >= MAX_RULES) return perr(ps, "the grammar has more than %d rules", MAX_RULES);
    if (grow((void **)&ps->rules, &ps->cap_rules, ps->n_rules + 1, sizeof *ps->rules)) return perr(ps, "out of memory");
    struct brule *r = &ps->rules[ps->n_rules];
    memset(r, 0, sizeof *r);
    if (name) {
        if (!(r->name = malloc(len + 1))) return perr(ps, "out of memory");
        memcpy(r->name, name, len);
        r->name[len] = 0;
    }
    return ps->n_rules++;
}

static int rule_find(struct parser *ps, const char *name, size_t len) {
    for (int i = 0; i < ps->n_rules; i++)
        if (ps->rules[i].name && strlen(ps->rules[i].name) == len && !memcmp(ps->rules[i].name, name, len)) return i;
    return rule_new(ps, name, len);
}

static struct balt *rule_add_alt(struct parser *ps, int r) {
    struct brule *b = &ps->rules[r];
    if (grow((void **)&b->alts, &b->cap, b->n + 1, sizeof *b->alts)) return perr(ps, "out of memory"), NULL;
    memset(&b->alts[b->n], 0, sizeof b->alts[b->n]);
    return &b->alts[b->n++];
}

/* A class of the given ranges (pairs), sorted and merged. */
static int class_new(struct parser *ps, uint32_t *r, int n, int negated) {
    for (int i = 1; i < n; i++) /* insertion sort by lo */
        for (int j = i; j > 0 && r[2 * j] < r[2 * j - 2]; j--) {
            uint32_t a = r[2 * j], b = r[2 * j + 1];
            r[2 * j] = r[2 * j - 2], r[2 * j + 1] = r[2 * j - 1];
            r[2 * j - 2] = a, r[2 * j - 1] = b;
        }
    int m = 0;
    for (int i = 0; i < n; i++) {
        if (m && r[2 * i] <= r[2 * m - 1] + 1) {
            if (r[2 * i + 1] > r[2 * m - 1]) r[2 * m - 1] = r[2 * i + 1];
        } else {
            r[2 * m] = r[2 * i], r[2 * m + 1] = r[2 * i + 1], m++;
        }
    }
    if (grow((void **)&ps->rng, &ps->cap_rng, ps->n_rng + m, 2 * sizeof *ps->rng) ||
        grow((void **)&ps->cls, &ps->cap_cls, ps->n_cls + 1, sizeof *ps->cls))
        return perr(ps, "out of memory");
    if (m) memcpy(ps->rng + 2 * ps->n_rng, r, (size_t)m * 2 * sizeof *r);
    ps->cls[ps->n_cls] = (struct gclass){.r0 = ps->n_rng, .nr = m, .negated = negated};
    ps->n_rng += m;
    return ps->n_cls++;
}

/* --------------------------------------------------------------- lexing */

static void skip_ws(struct parser *ps) {
    while (ps->p < ps->end) {
        char c = *ps->p;
        if (c == ' ' || c == '\t' || c == '\n' || c == '\r') ps->p++;
        else if (c == '#')
            while (ps->p < ps->end && *ps->p != '\n') ps->p++;
        else break;
    }
}

static int is_name_char(char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-' || c == '_';
}

static size_t name_len(const char *p, const char *end) {
    size_t n = 0;
    while (p + n < end && is_name_char(p[n])) n++;
    return n;
}

/* Whether the text at p starts a rule definition: name ws "::=". */
static int at_rule_start(struct parser *ps) {
    size_t n = name_len(ps->p, ps->end);
    if (!n) return 0;
    const char *q = ps->p + n;
    while (q < ps->end && (*q == ' ' || *q == '\t' || *q == '\n' || *q == '\r')) q++;
    return ps->end - q >= 3 && !memcmp(q, "::=", 3);
}

static int hexval(char c) {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
}

/* One code point of a literal or class (escapes decoded); -1 on error. */
static int64_t read_char(struct parser *ps) {
    if (ps->p >= ps->end) return perr(ps, "the grammar ends inside a literal or class");
    const unsigned char *s = (const unsigned char *)ps->p;
    if (*s == '\\') {
        if (ps->end - ps->p < 2) return perr(ps, "the grammar ends inside an escape");
        char e = ps->p[1];
        ps->p += 2;
        int nhex = e == 'x' ? 2 : e == 'u' ? 4 : e == 'U' ? 8 : 0;
        if (nhex) {
            uint32_t v = 0;
            for (int i = 0; i < nhex; i++) {
                int h = ps->p < ps->end ? hexval(*ps->p) : -1;
                if (h < 0) return perr(ps, "'\\%c' needs %d hex digits", e, nhex);
                v = v * 16 + (uint32_t)h;
                ps->p++;
            }
            if (v > 0x10ffff) return perr(ps, "the escape \\%c%X is beyond U+10FFFF", e, v);
            return v;
        }
        switch (e) {
        case 'n':
            return '\n';
        case 'r':
            return '\r';
        case 't':
            return '\t';
        case '\\':
        case '"':
        case ']':
        case '[':
        case '-':
        case '^':
        case '/':
        case '\'':
            return (unsigned char)e;
        default:
            return perr(ps, "unknown escape '\\%c'", e);
        }
    }
    /* UTF-8 */
    int len = *s < 0x80 ? 1 : (*s & 0xe0) == 0xc0 ? 2 : (*s & 0xf0) == 0xe0 ? 3 : (*s & 0xf8) == 0xf0 ? 4 : 0;
    if (!len || ps->end - ps->p < len) return perr(ps, "the grammar is not valid UTF-8");
    uint32_t v = len == 1 ? *s : *s & (0x7f >> len);
    for (int i = 1; i < len; i++) {
        if ((s[i] & 0xc0) != 0x80) return perr(ps, "the grammar is not valid UTF-8");
        v = v << 6 | (s[i] & 0x3f);
    }
    ps->p += len;
    return v;
}

/* -------------------------------------------------------------- parsing */

static int parse_alternatives(struct parser *ps, int rule, char close);

/* The postfix operator after the item a->e[start..a->n): the item is moved
 * into generated rules and replaced by a reference. */
static int apply_postfix(struct parser *ps, struct balt *a, int start, int rule_of_a) {
    for (;;) {
        skip_ws(ps);
        if (ps->p >= ps->end) return 0;
        char c = *ps->p;
        long lo, hi; /* hi -1: unbounded */
        if (c == '*') lo = 0, hi = -1, ps->p++;
        else if (c == '+') lo = 1, hi = -1, ps->p++;
        else if (c == '?') lo = 0, hi = 1, ps->p++;
        else if (c == '{') {
            ps->p++;
            char *q;
            skip_ws(ps);
            lo = strtol(ps->p, &q, 10);
            if (q == ps->p || lo < 0) return perr(ps, "'{' must be followed by a count");
            ps->p = q;
            skip_ws(ps);
            hi = lo;
            if (ps->p < ps->end && *ps->p == ',') {
                ps->p++;
                skip_ws(ps);
                hi = -1;
                if (ps->p < ps->end && *ps->p != '}') {
                    hi = strtol(ps->p, &q, 10);
                    if (q == ps->p || hi < lo) return perr(ps, "a repetition {m,n} needs m <= n");
                    ps->p = q;
                    skip_ws(ps);
                }
            }
            if (ps->p >= ps->end || *ps->p != '}') return perr(ps, "a repetition {...} is not closed");
            ps->p++;
            if (lo > MAX_REPEAT || hi > MAX_REPEAT) return perr(ps, "a repetition count is above %d", MAX_REPEAT);
        } else return 0;
        if (a->n == start) return perr(ps, "'%c' follows nothing", c);
        /* the item, copied out of the alternative (a may move as rules grow) */
        int n_item = a->n - start;
        struct gel *item = malloc((size_t)n_item * sizeof *item);
        if (!item) return perr(ps, "out of memory");
        memcpy(item, a->e + start, (size_t)n_item * sizeof *item);
        a->n = start;
        /* tail: x{0,hi-lo} as a chain of optionals, or x* */
        int tail = -1;
        if (hi < 0) {
            int r = rule_new(ps, NULL, 0);
            struct balt *t = r < 0 ? NULL : rule_add_alt(ps, r);
            for (int i = 0; t && i < n_item; i++) alt_push(ps, t, item[i]);
            if (t) alt_push(ps, t, (struct gel){GEL_RULE, r});
            if (t && rule_add_alt(ps, r)) tail = r;
        } else {
            for (long k = 0; k < hi - lo && !ps->failed; k++) {
                int r = rule_new(ps, NULL, 0);
                struct balt *t = r < 0 ? NULL : rule_add_alt(ps, r);
                for (int i = 0; t && i < n_item; i++) alt_push(ps, t, item[i]);
                if (t && tail >= 0) alt_push(ps, t, (struct gel){GEL_RULE, tail});
                if (t && rule_add_alt(ps, r)) tail = r;
            }
        }
        a = rule_of_a >= 0 ? &ps->rules[rule_of_a].alts[ps->rules[rule_of_a].n - 1] : a;
        for (long k = 0; k < lo && !ps->failed; k++)
            for (int i = 0; i < n_item; i++) alt_push(ps, a, item[i]);
        if (tail >= 0) alt_push(ps, a, (struct gel){GEL_RULE, tail});
        free(item);
        if (ps->failed) return -1;
    }
}

/* One sequence of the alternative currently last in `rule`, up to '|', the
 * closing character, or the next rule's definition. */
static int parse_sequence(struct parser *ps, int rule, char close) {
    if (!rule_add_alt(ps, rule)) return -1;
#define CUR (&ps->rules[rule].alts[ps->rules[rule].n - 1])
    for (;;) {
        skip_ws(ps);
        if (ps->p >= ps->end || *ps->p == '|' || (close && *ps->p == close)) return 0;
        if (!close && at_rule_start(ps)) return 0;
        int start = CUR->n;
        char c = *ps->p;
        if (c == '"') {
            ps->p++;
            while (ps->p < ps->end && *ps->p != '"') {
                int64_t cp = read_char(ps);
                if (cp < 0) return -1;
                uint32_t r[2] = {(uint32_t)cp, (uint32_t)cp};
                int k = class_new(ps, r, 1, 0);
                if (k < 0 || alt_push(ps, CUR, (struct gel){GEL_CLASS, k})) return -1;
            }
            if (ps->p >= ps->end) return perr(ps, "a literal is not closed");
            ps->p++;
        } else if (c == '[') {
            ps->p++;
            int neg = ps->p < ps->end && *ps->p == '^';
            if (neg) ps->p++;
            uint32_t *r = NULL;
            int n = 0, cap = 0;
            while (ps->p < ps->end && *ps->p != ']') {
                int64_t lo = read_char(ps), hi = lo;
                if (lo >= 0 && ps->end - ps->p >= 2 && *ps->p == '-' && ps->p[1] != ']') {
                    ps->p++;
                    hi = read_char(ps);
                    if (hi >= 0 && hi < lo) hi = perr(ps, "a class range ends before it starts");
                }
                if (lo < 0 || hi < 0 || grow((void **)&r, &cap, n + 1, 2 * sizeof *r)) {
                    free(r);
                    return perr(ps, "out of memory");
                }
                r[2 * n] = (uint32_t)lo, r[2 * n + 1] = (uint32_t)hi, n++;
            }
            if (ps->p >= ps->end) {
                free(r);
                return perr(ps, "a class [...] is not closed");
            }
            ps->p++;
            int k = class_new(ps, r ? r : (uint32_t[2]){0, 0}, r ? n : 0, neg);
            free(r);
            if (k < 0 || alt_push(ps, CUR, (struct gel){GEL_CLASS, k})) return -1;
        } else if (c == '.') {
            ps->p++;
            int k = class_new(ps, (uint32_t[2]){0, 0}, 0, 1);
            if (k < 0 || alt_push(ps, CUR, (struct gel){GEL_CLASS, k})) return -1;
        } else if (c == '(') {
            ps->p++;
            if (++ps->depth > MAX_DEPTH) return perr(ps, "groups are nested deeper than %d", MAX_DEPTH);
            int g = rule_new(ps, NULL, 0);
            if (g < 0 || parse_alternatives(ps, g, ')')) return -1;
            ps->depth--;
            if (ps->p >= ps->end || *ps->p != ')') return perr(ps, "a group ( ... ) is not closed");
            ps->p++;
            if (alt_push(ps, CUR, (struct gel){GEL_RULE, g})) return -1;
        } else if (is_name_char(c)) {
            size_t n = name_len(ps->p, ps->end);
            int r = rule_find(ps, ps->p, n);
            if (r < 0) return -1;
            ps->p += n;
            if (alt_push(ps, CUR, (struct gel){GEL_RULE, r})) return -1;
        } else {
            return perr(ps, "unexpected '%c' at offset %ld", c, (long)(ps->p - ps->start));
        }
        if (apply_postfix(ps, CUR, start, rule)) return -1;
    }
#undef CUR
}

static int parse_alternatives(struct parser *ps, int rule, char close) {
    for (;;) {
        if (parse_sequence(ps, rule, close)) return -1;
        skip_ws(ps);
        if (ps->p < ps->end && *ps->p == '|') {
            ps->p++;
            continue;
        }
        return 0;
    }
}

static void parser_free(struct parser *ps) {
    for (int i = 0; i < ps->n_rules; i++) {
        for (int k = 0; k < ps->rules[i].n; k++) free(ps->rules[i].alts[k].e);
        free(ps->rules[i].alts);
        free(ps->rules[i].name);
    }
    free(ps->rules);
    free(ps->rng);
    free(ps->cls);
}

/* The rule tables of the parsed rules (ps->rng and ps->cls move into it). */
static r1_grammar_t *link_grammar(struct parser *ps, int root) {
    r1_grammar_t *g = calloc(1, sizeof *g);
    if (!g) return NULL;
    int n_alt = 0, n_el = 0;
    for (int i = 0; i < ps->n_rules; i++) {
        n_alt += ps->rules[i].n;
        for (int k = 0; k < ps->rules[i].n; k++) n_el += ps->rules[i].alts[k].n + 1;
    }
    g->el = malloc((size_t)(n_el ? n_el : 1) * sizeof *g->el);
    g->alt = malloc((size_t)(n_alt ? n_alt : 1) * sizeof *g->alt);
    g->rule_alt0 = malloc((size_t)ps->n_rules * sizeof *g->rule_alt0);
    g->rule_nalt = malloc((size_t)ps->n_rules * sizeof *g->rule_nalt);
    if (!g->el || !g->alt || !g->rule_alt0 || !g->rule_nalt) {
        r1_grammar_free(g);
        return NULL;
    }
    for (int i = 0; i < ps->n_rules; i++) {
        g->rule_alt0[i] = g->n_alt;
        g->rule_nalt[i] = ps->rules[i].n;
        for (int k = 0; k < ps->rules[i].n; k++) {
            const struct balt *a = &ps->rules[i].alts[k];
            g->alt[g->n_alt++] = g->n_el;
            if (a->n) memcpy(g->el + g->n_el, a->e, (size_t)a->n * sizeof *a->e);
            g->n_el += a->n;
            g->el[g->n_el++] = (struct gel){GEL_END, 0};
        }
    }
    g->n_rules = ps->n_rules;
    g->rng = ps->rng, g->n_rng = ps->n_rng, ps->rng = NULL;
    g->cls = ps->cls, g->n_cls = ps->n_cls, ps->cls = NULL;
    g->root = root;
    return g;
}

/* Left recursion (a rule that can reach itself before consuming input)
 * would make the matcher's stacks grow without end: refused here. */
static int check_left_recursion(struct parser *ps) {
    int n = ps->n_rules;
    char *nullable = calloc((size_t)n, 1), *state = calloc((size_t)n, 1);
    int *path = malloc((size_t)n * sizeof *path), *next = malloc((size_t)n * sizeof *next);
    if (!nullable || !state || !path || !next) {
        free(nullable), free(state), free(path), free(next);
        return perr(ps, "out of memory");
    }
    for (int changed = 1; changed;) { /* the rules that can match nothing */
        changed = 0;
        for (int r = 0; r < n; r++) {
            if (nullable[r]) continue;
            for (int a = 0; a < ps->rules[r].n && !nullable[r]; a++) {
                const struct balt *al = &ps->rules[r].alts[a];
                int k = 0;
                while (k < al->n && al->e[k].type == GEL_RULE && nullable[al->e[k].v]) k++;
                if (k == al->n) nullable[r] = 1, changed = 1;
            }
        }
    }
    /* depth-first over "r can begin with rule q" edges; state 1 = on the path */
    int rc = 0;
    for (int r0 = 0; r0 < n && !rc; r0++) {
        if (state[r0]) continue;
        int depth = 0;
        path[0] = r0, next[0] = 0, state[r0] = 1;
        while (depth >= 0 && !rc) {
            int r = path[depth], found = -1;
            /* the next edge of r: enumerate (alt, position) pairs as one counter */
            while (found < 0) {
                int idx = next[depth]++, a = 0;
                while (a < ps->rules[r].n && idx >= ps->rules[r].alts[a].n) idx -= ps->rules[r].alts[a].n, a++;
                if (a >= ps->rules[r].n) break;
                const struct balt *al = &ps->rules[r].alts[a];
                int k = 0;
                while (k < idx && al->e[k].type == GEL_RULE && nullable[al->e[k].v]) k++;
                if (k == idx && al->e[idx].type == GEL_RULE) found = al->e[idx].v;
            }
            if (found < 0) {
                state[r] = 2;
                depth--;
            } else if (state[found] == 1) {
                const char *name = ps->rules[found].name;
                rc = perr(ps, "the grammar is left-recursive through rule '%s'", name ? name : "(a group)");
            } else if (!state[found]) {
                state[found] = 1;
                path[++depth] = found, next[depth] = 0;
            }
        }
    }
    free(nullable), free(state), free(path), free(next);
    return rc;
}

r1_grammar_t *r1_grammar_parse(const char *text, size_t len, char *err, size_t errlen) {
    struct parser ps = {.start = text, .p = text, .end = text + len, .err = err, .errlen = errlen};
    if (err && errlen) err[0] = 0;
    if (memchr(text, 0, len)) {
        perr(&ps, "the grammar contains a NUL byte");
        return NULL;
    }
    for (;;) {
        skip_ws(&ps);
        if (ps.p >= ps.end) break;
        size_t n = name_len(ps.p, ps.end);
        if (!n || !at_rule_start(&ps)) {
            perr(&ps, "expected a rule 'name ::= ...' at offset %ld", (long)(ps.p - text));
            break;
        }
        int r = rule_find(&ps, ps.p, n);
        if (r < 0) break;
        if (ps.rules[r].defined) {
            perr(&ps, "the rule '%s' is defined twice", ps.rules[r].name);
            break;
        }
        ps.rules[r].defined = 1;
        ps.p += n;
        skip_ws(&ps);
        ps.p += 3; /* ::= */
        if (parse_alternatives(&ps, r, 0)) break;
    }
    int root = -1;
    for (int i = 0; !ps.failed && i < ps.n_rules; i++) {
        if (ps.rules[i].name && !ps.rules[i].defined)
            perr(&ps, "the rule '%s' is used but not defined", ps.rules[i].name);
        if (ps.rules[i].name && !strcmp(ps.rules[i].name, "root")) root = i;
    }
    if (!ps.failed && root < 0) perr(&ps, "the grammar has no rule 'root'");
    if (!ps.failed) check_left_recursion(&ps);
    r1_grammar_t *g = NULL;
    if (!ps.failed && !(g = link_grammar(&ps, root))) perr(&ps, "out of memory");
    parser_free(&ps);
    return g;
}

void r1_grammar_free(r1_grammar_t *g) {
    if (!g) return;
    free(g->el);
    free(g->alt);
    free(g->rule_alt0);
    free(g->rule_nalt);
    free(g->rng);
    free(g->cls);
    free(g);
}
