/*
 * schema_pattern.c - the JSON schema keyword 'pattern' as a grammar (schema.c
 * calls it for strings).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>

#include "grammar/schema_int.h"

/* Pattern: an ECMA-262 subset as the grammar of a JSON string's content
 * (a pattern without ^ or $ may have any characters before or after it). Literals (escaped or not), `.`, classes [...]
 * / [^...] with ranges and \d \w \s, \d \w \s \D \W \S, groups ( ) and (?: ), `|`, quantifiers * + ? {n} {n,} {n,m} (a
 * lazy `?` after them is the same language). Characters a JSON string must escape (", \, controls) are written escaped;
 * `.` and negated classes stand for the characters that need no escape. Backreferences, lookarounds, \b and anchors
 * inside are not supported: an error, or with a lenient conversion a string the pattern does not constrain. */
#define RX_MAX_RANGES 64
struct rx {
    struct conv *c;
    const char *p, *end;
    int depth;
};

/* the next code point of the pattern (UTF-8), -1 at its end or on a bad byte */
static long rx_cp(struct rx *r) {
    if (r->p >= r->end) return -1;
    const unsigned char *u = (const unsigned char *)r->p;
    int n = u[0] < 0x80 ? 1 : u[0] >= 0xf0 ? 4 : u[0] >= 0xe0 ? 3 : u[0] >= 0xc0 ? 2 : 0;
    if (!n || r->p + n > r->end) return -1;
    long v = n == 1 ? u[0] : u[0] & (0x7f >> n);
    for (int i = 1; i < n; i++) v = v << 6 | (u[i] & 0x3f);
    r->p += n;
    return v;
}

/* code point cp as it appears in JSON text, as a GBNF literal */
static void rx_char(struct out *o, long cp) {
    char b[8];
    int n = 0;
    if (cp == '"' || cp == '\\') b[n++] = '\\', b[n++] = (char)cp;
    else if (cp == '\n') b[n++] = '\\', b[n++] = 'n';
    else if (cp == '\t') b[n++] = '\\', b[n++] = 't';
    else if (cp == '\r') b[n++] = '\\', b[n++] = 'r';
    else if (cp < 0x20) n = snprintf(b, sizeof b, "\\u%04lx", cp);
    else if (cp < 0x80) b[n++] = (char)cp;
    else if (cp < 0x800) b[n++] = (char)(0xc0 | cp >> 6), b[n++] = (char)(0x80 | (cp & 0x3f));
    else if (cp < 0x10000)
        b[n++] = (char)(0xe0 | cp >> 12), b[n++] = (char)(0x80 | (cp >> 6 & 0x3f)), b[n++] = (char)(0x80 | (cp & 0x3f));
    else
        b[n++] = (char)(0xf0 | cp >> 18), b[n++] = (char)(0x80 | (cp >> 12 & 0x3f)),
        b[n++] = (char)(0x80 | (cp >> 6 & 0x3f)), b[n++] = (char)(0x80 | (cp & 0x3f));
    sch_literal(o, b, (size_t)n);
}

struct rx_set {
    long lo[RX_MAX_RANGES], hi[RX_MAX_RANGES];
    int n;
};
static int rx_add(struct rx *r, struct rx_set *set, long lo, long hi) {
    if (set->n == RX_MAX_RANGES) return sch_err(r->c, "'pattern': a class with more than %d ranges", RX_MAX_RANGES);
    set->lo[set->n] = lo, set->hi[set->n++] = hi;
    return 0;
}
/* \d \w \s into set (negated ones are refused inside classes) */
static int rx_shorthand(struct rx *r, struct rx_set *set, char e) {
    if (e == 'd') return rx_add(r, set, '0', '9');
    if (e == 'w')
        return rx_add(r, set, 'a', 'z') || rx_add(r, set, 'A', 'Z') || rx_add(r, set, '0', '9') ||
               rx_add(r, set, '_', '_');
    return rx_add(r, set, ' ', ' ') || rx_add(r, set, '\t', '\t') || rx_add(r, set, '\n', '\n') ||
           rx_add(r, set, '\r', '\r');
}
/* the set as alternatives of JSON text: one class of the characters that
 * need no escape, then each one that does, escaped; negated: the class of
 * the unescaped characters outside it */
static void rx_put_set(struct out *o, const struct rx_set *set, int neg) {
    static const long special[][2] = {{0, 0x1f}, {'"', '"'}, {'\\', '\\'}};
    if (neg) {
        puts_(o, "[^");
        for (int i = 0; i < set->n; i++) sch_putf(o, "\\U%08lX-\\U%08lX", set->lo[i], set->hi[i]);
        puts_(o, "\\x00-\\x1F\\\"\\\\]");
        return;
    }
    puts_(o, "( ");
    int alts = 0, in_class = 0;
    for (int i = 0; i < set->n; i++) { /* the plain part: each range minus the specials */
        long lo = set->lo[i], hi = set->hi[i];
        for (long a = lo; a <= hi;) {
            long b = hi, skip = 0;
            for (int k = 0; k < 3; k++) {
                if (a >= special[k][0] && a <= special[k][1]) skip = special[k][1] + 1;
                else if (special[k][0] > a && special[k][0] - 1 < b) b = special[k][0] - 1;
            }
            if (skip) {
                a = skip;
                continue;
            }
            if (!in_class) puts_(o, "["), in_class = 1;
            sch_putf(o, "\\U%08lX-\\U%08lX", a, b);
            a = b + 1;
        }
    }
    if (in_class) puts_(o, "]"), alts++;
    for (int k = 0; k < 3; k++) /* the escaped ones: \t \n \r, '"', '\' (other controls left out) */
        for (long cp = special[k][0]; cp <= special[k][1]; cp++) {
            if (k == 0 && cp != '\t' && cp != '\n' && cp != '\r') continue;
            int in = 0;
            for (int i = 0; i < set->n && !in; i++) in = cp >= set->lo[i] && cp <= set->hi[i];
            if (!in) continue;
            if (alts++) puts_(o, " | ");
            rx_char(o, cp);
        }
    if (!alts) puts_(o, "[^\\x00-\\U0010FFFF]"); /* an empty class matches nothing */
    puts_(o, " )");
}

static int rx_alt(struct rx *r, struct out *o);

static int rx_class(struct rx *r, struct out *o) {
    struct rx_set set = {.n = 0};
    int neg = 0;
    if (r->p < r->end && *r->p == '^') neg = 1, r->p++;
    int first = 1;
    for (;;) {
        if (r->p >= r->end) return sch_err(r->c, "'pattern': a class is not closed");
        if (*r->p == ']' && !first) {
            r->p++;
            break;
        }
        first = 0;
        long lo = rx_cp(r);
        if (lo == '\\') {
            long e = rx_cp(r);
            if (e == 'd' || e == 'w' || e == 's') {
                if (rx_shorthand(r, &set, (char)e)) return -1;
                continue;
            }
            if (e == 'D' || e == 'W' || e == 'S' || e == 'b' || e < 0)
                return sch_err(r->c, "'pattern': '\\%c' inside a class is not supported", e < 0 ? ' ' : (char)e);
            lo = e == 'n' ? '\n' : e == 't' ? '\t' : e == 'r' ? '\r' : e;
        }
        if (lo < 0) return sch_err(r->c, "'pattern' is not valid UTF-8");
        long hi = lo;
        if (r->end - r->p >= 2 && r->p[0] == '-' && r->p[1] != ']') {
            r->p++;
            hi = rx_cp(r);
            if (hi == '\\') {
                long e = rx_cp(r);
                hi = e == 'n' ? '\n' : e == 't' ? '\t' : e == 'r' ? '\r' : e;
            }
            if (hi < lo) return sch_err(r->c, "'pattern': a class range runs backwards");
        }
        if (rx_add(r, &set, lo, hi)) return -1;
    }
    rx_put_set(o, &set, neg);
    return 0;
}

/* a construct the grammar cannot express (the pattern may be valid) */
static int rx_unsupported(struct rx *r, const char *what) {
    r->c->unsupported = 1;
    return sch_err(r->c, "'pattern': %s are not supported", what);
}

/* one atom and its quantifier */
static int rx_item(struct rx *r, struct out *o) {
    long cp = rx_cp(r);
    if (cp < 0) return sch_err(r->c, "'pattern' is not valid UTF-8");
    if (cp == '(') {
        if (r->end - r->p >= 2 && r->p[0] == '?') {
            if (r->p[1] != ':') return rx_unsupported(r, "lookarounds and named groups");
            r->p += 2;
        }
        puts_(o, "( ");
        if (rx_alt(r, o)) return -1;
        if (r->p >= r->end || *r->p != ')') return sch_err(r->c, "'pattern': a group is not closed");
        r->p++;
        puts_(o, " )");
    } else if (cp == '[') {
        if (rx_class(r, o)) return -1;
    } else if (cp == '.') {
        puts_(o, "[^\\x00-\\x1F\\\"\\\\]");
    } else if (cp == '\\') {
        long e = rx_cp(r);
        if (e < 0) return sch_err(r->c, "'pattern' ends inside an escape");
        struct rx_set set = {.n = 0};
        if (e == 'd' || e == 'w' || e == 's' || e == 'D' || e == 'W' || e == 'S') {
            if (rx_shorthand(r, &set, (char)(e | 0x20))) return -1;
            rx_put_set(o, &set, e < 'a');
        } else if ((e >= '1' && e <= '9') || e == 'b' || e == 'B' || e == 'k' || e == 'p' || e == 'P') {
            return rx_unsupported(r, e == 'b' || e == 'B' ? "word boundaries" : "backreferences and \\p classes");
        } else if (e == 'u') {
            char hex[5] = {0}, *endp;
            if (r->end - r->p < 4) return sch_err(r->c, "'pattern': \\u needs 4 hex digits");
            memcpy(hex, r->p, 4), r->p += 4;
            long v = strtol(hex, &endp, 16);
            if (*endp) return sch_err(r->c, "'pattern': \\u needs 4 hex digits");
            rx_char(o, v);
        } else {
            rx_char(o, e == 'n' ? '\n' : e == 't' ? '\t' : e == 'r' ? '\r' : e == 'f' ? '\f' : e);
        }
    } else if (cp == '^' || cp == '$') {
        return rx_unsupported(r, "anchors inside the pattern");
    } else if (cp == '*' || cp == '+' || cp == '?' || cp == '{' || cp == ')' || cp == '|') {
        return sch_err(r->c, "'pattern': '%c' with nothing before it", (char)cp);
    } else {
        rx_char(o, cp);
    }
    if (r->p >= r->end) return 0;
    char q = *r->p;
    if (q == '*' || q == '+' || q == '?') {
        sch_putf(o, "%c", q), r->p++;
    } else if (q == '{') {
        const char *p = r->p + 1;
        char *e;
        long m = strtol(p, &e, 10), n = m;
        if (e == p || m < 0 || m > 1000) return sch_err(r->c, "'pattern': a bad {m,n} count");
        if (*e == ',') {
            p = e + 1;
            n = *p == '}' ? -1 : strtol(p, &e, 10);
            if ((n >= 0 && (e == p || n < m || n > 1000))) return sch_err(r->c, "'pattern': a bad {m,n} count");
            if (n < 0) e = (char *)p;
        }
        if (e >= r->end || *e != '}') return sch_err(r->c, "'pattern': a bad {m,n} count");
        if (n < 0) sch_putf(o, "{%ld,}", m);
        else if (n == m) sch_putf(o, "{%ld}", m);
        else sch_putf(o, "{%ld,%ld}", m, n);
        r->p = e + 1;
    } else return 0;
    if (r->p < r->end && *r->p == '?') r->p++; /* lazy: the same strings */
    return 0;
}

static int rx_alt(struct rx *r, struct out *o) {
    if (++r->depth > MAX_DEPTH) return sch_err(r->c, "'pattern' nests deeper than %d", MAX_DEPTH);
    puts_(o, "( ");
    int items = 0;
    while (r->p < r->end && *r->p != ')' && !(*r->p == '$' && r->p + 1 == r->end)) {
        if (*r->p == '|') {
            if (!items) puts_(o, "\"\"");
            puts_(o, " | "), r->p++, items = 0;
            continue;
        }
        if (items++) puts_(o, " ");
        if (rx_item(r, o)) return -1;
    }
    if (!items) puts_(o, "\"\"");
    puts_(o, " )");
    r->depth--;
    return 0;
}

/* backslashes right before pat[i]: an odd count escapes it */
static int escaped(const char *pat, size_t i) {
    size_t k = 0;
    while (k < i && pat[i - 1 - k] == '\\') k++;
    return k & 1;
}

int sch_pattern(struct conv *c, struct out *o, const char *pat) {
    const size_t n = strlen(pat), mark = o->len;
    const int head = n && pat[0] == '^', tail = n > (size_t)head && pat[n - 1] == '$' && !escaped(pat, n - 1);
    struct rx r = {c, pat + head, pat + n, 0};
    puts_(o, "\"\\\"\" ");
    if (!head) puts_(o, "json-char* ");
    int rc = rx_alt(&r, o);
    if (!rc && r.p + tail != r.end) rc = sch_err(c, "'pattern': an unmatched ')'");
    if (rc && c->lenient && c->unsupported) { /* the string unconstrained, the error forgotten, if PCRE2 reads
                                               * the pattern (a malformed one stays an error) */
        int code;
        PCRE2_SIZE at;
        pcre2_code *re = pcre2_compile((PCRE2_SPTR)pat, n, PCRE2_UTF, &code, &at, NULL);
        if (!re) return -1;
        pcre2_code_free(re);
        o->len = mark;
        c->failed = c->unsupported = 0;
        if (c->err && c->errlen) c->err[0] = 0;
        puts_(o, "json-string");
        return 0;
    }
    if (rc) return -1;
    if (!tail) puts_(o, " json-char*");
    puts_(o, " \"\\\"\"");
    return 0;
}
