/*
 * schema.c - a JSON schema as a GBNF grammar (gbnf.c compiles it): the
 * subset clients send for structured outputs and tool arguments.
 *
 * Supported: type (one or a list), enum, const, object properties with
 * required ones (emitted in the schema's order, optional ones may be left
 * out; no other properties), additionalProperties as the schema of a free
 * object's values, arrays with items / minItems / maxItems, tuples
 * (prefixItems, or items as a list, with items / additionalItems for the
 * rest), strings with minLength / maxLength, an anchored pattern (the
 * ECMA-262 subset below) or the formats date, time, date-time and uuid,
 * numbers, integers with minimum / maximum /
 * exclusiveMinimum / exclusiveMaximum (an exact grammar of the decimal
 * range), numbers between integer minimum / maximum (exact, no exponent),
 * booleans, null, anyOf / oneOf, allOf (one schema, or object
 * schemas merged: their properties and required lists joined), and $ref to
 * any JSON pointer of the document (#, #/$defs/NAME, #/properties/a/items,
 * ...; recursive ones too). Annotations (title, description, default,
 * examples, ...) are ignored. A keyword that constrains values in a way the
 * grammar cannot (other formats, fractional or exclusive bounds on a number,
 * uniqueItems, ...) is an error, not ignored.
 * No I/O; every error is a message.
 */
#include <jansson.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "r1infer.h"

#define MAX_DEPTH 64
#define MAX_RULES 10000

struct out {
    char *p;
    size_t len, cap;
    int failed;
};

struct conv {
    struct out g;           /* the grammar text */
    const json_t *root;     /* the whole schema (for $ref) */
    const char **refs;      /* $ref strings already given a rule (of the current root) */
    int *ref_rule;          /* their rule numbers (ref<N>) */
    int n_refs, cap_refs, n_ref_rules;
    int n_rules;
    char *err;
    size_t errlen;
    int failed;
};

static void put(struct out *o, const char *s, size_t n);
/* a string literal, its length counted by the compiler */
#define puts_(o, lit) put((o), (lit), sizeof(lit) - 1)
static void put(struct out *o, const char *s, size_t n) {
    if (o->failed) return;
    if (o->len + n + 1 > o->cap) {
        size_t c = o->cap ? o->cap : 1024;
        while (c < o->len + n + 1) c *= 2;
        char *p = realloc(o->p, c);
        if (!p) {
            o->failed = 1;
            return;
        }
        o->p = p, o->cap = c;
    }
    memcpy(o->p + o->len, s, n);
    o->len += n;
    o->p[o->len] = 0;
}

static void putf(struct out *o, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void putf(struct out *o, const char *fmt, ...) {
    char buf[512];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    if (n >= (int)sizeof buf) n = (int)sizeof buf - 1;
    if (n > 0) put(o, buf, (size_t)n);
}

static int cerr(struct conv *c, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static int cerr(struct conv *c, const char *fmt, ...) {
    if (c->failed) return -1;
    c->failed = 1;
    if (c->err && c->errlen) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(c->err, c->errlen, fmt, ap);
        va_end(ap);
    }
    return -1;
}

/* A GBNF literal of the bytes s[0..n). */
static void put_literal(struct out *o, const char *s, size_t n) {
    puts_(o, "\"");
    for (size_t i = 0; i < n; i++) {
        unsigned char ch = (unsigned char)s[i];
        if (ch == '"' || ch == '\\') {
            puts_(o, "\\");
            put(o, s + i, 1);
        } else if (ch < 0x20) {
            putf(o, "\\x%02X", ch);
        } else {
            put(o, s + i, 1);
        }
    }
    puts_(o, "\"");
}

/* The JSON text of a value as a GBNF literal. */
static int put_json_literal(struct conv *c, struct out *o, const json_t *v) {
    char *s = json_dumps(v, JSON_COMPACT | JSON_ENCODE_ANY);
    if (!s) return cerr(c, "out of memory");
    puts_(o, "(");
    put_literal(o, s, strlen(s));
    puts_(o, ")");
    free(s);
    return 0;
}

/* The common rules every schema grammar can use. */
static const char *BASE_RULES =
    "ws ::= ( \" \" | \"\\n\" [ \\t]{0,20} )?\n"
    "json-char ::= [^\"\\\\\\x00-\\x1F] | \"\\\\\" ( [\"\\\\/bfnrt] | \"u\" [0-9a-fA-F]{4} )\n"
    "json-string ::= \"\\\"\" json-char* \"\\\"\"\n"
    "json-int ::= \"-\"? ( \"0\" | [1-9] [0-9]{0,15} )\n"
    "json-number ::= json-int ( \".\" [0-9]{1,16} )? ( [eE] [-+]? [0-9]{1,3} )?\n"
    "json-bool ::= \"true\" | \"false\"\n"
    "json-null ::= \"null\"\n"
    "json-value ::= json-object | json-array | json-string | json-number | json-bool | json-null\n"
    "json-object ::= \"{\" ws ( json-member ( \",\" ws json-member )* )? \"}\"\n"
    "json-member ::= json-string ws \":\" ws json-value ws\n"
    "json-array ::= \"[\" ws ( json-value ws ( \",\" ws json-value ws )* )? \"]\"\n";

static int value(struct conv *c, struct out *o, const json_t *s, int depth);

/* A new generated rule's name into name (r<N>); -1 past the limit. */
static int new_rule(struct conv *c, char *name, size_t n) {
    if (c->n_rules >= MAX_RULES) return cerr(c, "the schema needs more than %d grammar rules", MAX_RULES);
    snprintf(name, n, "r%d", c->n_rules++);
    return 0;
}

/* Define rule `name` as the value of schema s (its text goes to the grammar). */
static int define(struct conv *c, const char *name, const json_t *s, int depth) {
    struct out body = {0};
    int rc = value(c, &body, s, depth);
    if (!rc) {
        putf(&c->g, "%s ::= ", name);
        put(&c->g, body.p ? body.p : "", body.len);
        put(&c->g, "\n", 1);
    }
    free(body.p);
    return rc;
}

static const char *IGNORED[] = {"title", "description", "default", "examples", "$schema", "$id", "$comment",
                                "deprecated", "readOnly", "writeOnly", "$defs", "definitions", "strict",
                                "additionalProperties", "type", "properties", "required", "items", "enum",
                                "const", "anyOf", "oneOf", "allOf", "$ref", "minItems", "maxItems",
                                "minLength", "maxLength", "discriminator", "nullable", "prefixItems",
                                "additionalItems", "format", "minimum", "maximum", "exclusiveMinimum",
                                "exclusiveMaximum", "pattern", NULL};

static int check_keywords(struct conv *c, const json_t *s) {
    const char *k;
    const json_t *v;
    json_object_foreach((json_t *)s, k, v) {
        int known = 0;
        for (int i = 0; IGNORED[i] && !known; i++) known = !strcmp(k, IGNORED[i]);
        if (!known) return cerr(c, "the schema keyword '%.60s' is not supported (supported: type, properties, "
                                   "required, items, prefixItems, minItems, maxItems, minLength, maxLength, "
                                   "format, minimum, maximum, enum, const, anyOf, oneOf, allOf, $ref, $defs)", k);
    }
    return 0;
}

static int get_count(struct conv *c, const json_t *s, const char *key, long dflt, long *out) {
    const json_t *v = json_object_get(s, key);
    *out = dflt;
    if (!v) return 0;
    if (!json_is_integer(v) || json_integer_value(v) < 0 || json_integer_value(v) > 4096)
        return cerr(c, "'%s' must be an integer between 0 and 4096", key);
    *out = (long)json_integer_value(v);
    return 0;
}

/* String formats as grammars (RFC 3339 dates and times, RFC 4122 uuids). */
static const struct {
    const char *name, *rule;
} FORMATS[] = {
    {"date", "[0-9]{4} \"-\" ( \"0\" [1-9] | \"1\" [0-2] ) \"-\" ( \"0\" [1-9] | [12] [0-9] | \"3\" [01] )"},
    {"time", "( [01] [0-9] | \"2\" [0-3] ) \":\" [0-5] [0-9] \":\" [0-5] [0-9] ( \".\" [0-9]{1,9} )? "
             "( [zZ] | [+-] ( [01] [0-9] | \"2\" [0-3] ) \":\" [0-5] [0-9] )"},
    {"uuid", "[0-9a-fA-F]{8} \"-\" [0-9a-fA-F]{4} \"-\" [0-9a-fA-F]{4} \"-\" [0-9a-fA-F]{4} \"-\" "
             "[0-9a-fA-F]{12}"},
};

static int format_value(struct conv *c, struct out *o, const char *f) {
    if (!strcmp(f, "date-time")) {
        puts_(o, "\"\\\"\" ( ");
        putf(o, "%s", FORMATS[0].rule);
        puts_(o, " ) [tT ] ( ");
        putf(o, "%s", FORMATS[1].rule);
        puts_(o, " ) \"\\\"\"");
        return 0;
    }
    for (size_t i = 0; i < sizeof FORMATS / sizeof *FORMATS; i++)
        if (!strcmp(f, FORMATS[i].name)) {
            puts_(o, "\"\\\"\" ( ");
            putf(o, "%s", FORMATS[i].rule);
            puts_(o, " ) \"\\\"\"");
            return 0;
        }
    return cerr(c, "the string format '%.40s' is not supported (date, time, date-time, uuid)", f);
}

/* ---- pattern: an anchored ECMA-262 subset as the grammar of a JSON
 * string's content. Literals (escaped or not), `.`, classes [...] / [^...]
 * with ranges and \d \w \s, \d \w \s \D \W \S, groups ( ) and (?: ), `|`,
 * quantifiers * + ? {n} {n,} {n,m} (a lazy `?` after them is the same
 * language). Characters a JSON string must escape (", \, controls) are
 * written escaped; `.` and negated classes stand for the characters that
 * need no escape. Backreferences, lookarounds, \b and anchors inside are
 * errors. ---- */
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
    put_literal(o, b, (size_t)n);
}

struct rx_set {
    long lo[RX_MAX_RANGES], hi[RX_MAX_RANGES];
    int n;
};
static int rx_add(struct rx *r, struct rx_set *set, long lo, long hi) {
    if (set->n == RX_MAX_RANGES) return cerr(r->c, "'pattern': a class with more than %d ranges", RX_MAX_RANGES);
    set->lo[set->n] = lo, set->hi[set->n++] = hi;
    return 0;
}
/* \d \w \s into set (negated ones are refused inside classes) */
static int rx_shorthand(struct rx *r, struct rx_set *set, char e) {
    if (e == 'd') return rx_add(r, set, '0', '9');
    if (e == 'w') return rx_add(r, set, 'a', 'z') || rx_add(r, set, 'A', 'Z') || rx_add(r, set, '0', '9') ||
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
        for (int i = 0; i < set->n; i++) putf(o, "\\U%08lX-\\U%08lX", set->lo[i], set->hi[i]);
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
            putf(o, "\\U%08lX-\\U%08lX", a, b);
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
        if (r->p >= r->end) return cerr(r->c, "'pattern': a class is not closed");
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
                return cerr(r->c, "'pattern': '\\%c' inside a class is not supported", e < 0 ? ' ' : (char)e);
            lo = e == 'n' ? '\n' : e == 't' ? '\t' : e == 'r' ? '\r' : e;
        }
        if (lo < 0) return cerr(r->c, "'pattern' is not valid UTF-8");
        long hi = lo;
        if (r->end - r->p >= 2 && r->p[0] == '-' && r->p[1] != ']') {
            r->p++;
            hi = rx_cp(r);
            if (hi == '\\') {
                long e = rx_cp(r);
                hi = e == 'n' ? '\n' : e == 't' ? '\t' : e == 'r' ? '\r' : e;
            }
            if (hi < lo) return cerr(r->c, "'pattern': a class range runs backwards");
        }
        if (rx_add(r, &set, lo, hi)) return -1;
    }
    rx_put_set(o, &set, neg);
    return 0;
}

/* one atom and its quantifier */
static int rx_item(struct rx *r, struct out *o) {
    long cp = rx_cp(r);
    if (cp < 0) return cerr(r->c, "'pattern' is not valid UTF-8");
    if (cp == '(') {
        if (r->end - r->p >= 2 && r->p[0] == '?') {
            if (r->p[1] != ':') return cerr(r->c, "'pattern': lookarounds and named groups are not supported");
            r->p += 2;
        }
        puts_(o, "( ");
        if (rx_alt(r, o)) return -1;
        if (r->p >= r->end || *r->p != ')') return cerr(r->c, "'pattern': a group is not closed");
        r->p++;
        puts_(o, " )");
    } else if (cp == '[') {
        if (rx_class(r, o)) return -1;
    } else if (cp == '.') {
        puts_(o, "[^\\x00-\\x1F\\\"\\\\]");
    } else if (cp == '\\') {
        long e = rx_cp(r);
        if (e < 0) return cerr(r->c, "'pattern' ends inside an escape");
        struct rx_set set = {.n = 0};
        if (e == 'd' || e == 'w' || e == 's' || e == 'D' || e == 'W' || e == 'S') {
            if (rx_shorthand(r, &set, (char)(e | 0x20))) return -1;
            rx_put_set(o, &set, e < 'a');
        } else if ((e >= '1' && e <= '9') || e == 'b' || e == 'B' || e == 'k' || e == 'p' || e == 'P') {
            return cerr(r->c, "'pattern': '\\%c' is not supported", (char)e);
        } else if (e == 'u') {
            char hex[5] = {0}, *endp;
            if (r->end - r->p < 4) return cerr(r->c, "'pattern': \\u needs 4 hex digits");
            memcpy(hex, r->p, 4), r->p += 4;
            long v = strtol(hex, &endp, 16);
            if (*endp) return cerr(r->c, "'pattern': \\u needs 4 hex digits");
            rx_char(o, v);
        } else {
            rx_char(o, e == 'n' ? '\n' : e == 't' ? '\t' : e == 'r' ? '\r' : e == 'f' ? '\f' : e);
        }
    } else if (cp == '^' || cp == '$') {
        return cerr(r->c, "'pattern': '%c' is supported only as the anchor at the start or end", (char)cp);
    } else if (cp == '*' || cp == '+' || cp == '?' || cp == '{' || cp == ')' || cp == '|') {
        return cerr(r->c, "'pattern': '%c' with nothing before it", (char)cp);
    } else {
        rx_char(o, cp);
    }
    if (r->p >= r->end) return 0;
    char q = *r->p;
    if (q == '*' || q == '+' || q == '?') {
        putf(o, "%c", q), r->p++;
    } else if (q == '{') {
        const char *p = r->p + 1;
        char *e;
        long m = strtol(p, &e, 10), n = m;
        if (e == p || m < 0 || m > 1000) return cerr(r->c, "'pattern': a bad {m,n} count");
        if (*e == ',') {
            p = e + 1;
            n = *p == '}' ? -1 : strtol(p, &e, 10);
            if ((n >= 0 && (e == p || n < m || n > 1000))) return cerr(r->c, "'pattern': a bad {m,n} count");
            if (n < 0) e = (char *)p;
        }
        if (e >= r->end || *e != '}') return cerr(r->c, "'pattern': a bad {m,n} count");
        if (n < 0) putf(o, "{%ld,}", m);
        else if (n == m) putf(o, "{%ld}", m);
        else putf(o, "{%ld,%ld}", m, n);
        r->p = e + 1;
    } else return 0;
    if (r->p < r->end && *r->p == '?') r->p++; /* lazy: the same strings */
    return 0;
}

static int rx_alt(struct rx *r, struct out *o) {
    if (++r->depth > MAX_DEPTH) return cerr(r->c, "'pattern' nests deeper than %d", MAX_DEPTH);
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

static int pattern_value(struct conv *c, struct out *o, const char *pat) {
    size_t n = strlen(pat);
    if (n < 2 || pat[0] != '^' || pat[n - 1] != '$' || (n >= 3 && pat[n - 2] == '\\'))
        return cerr(c, "'pattern' must be anchored: start with '^' and end with '$'");
    struct rx r = {c, pat + 1, pat + n, 0};
    puts_(o, "\"\\\"\" ");
    if (rx_alt(&r, o)) return -1;
    if (r.p + 1 != r.end) return cerr(c, "'pattern': an unmatched ')'");
    puts_(o, " \"\\\"\"");
    return 0;
}

static int string_value(struct conv *c, struct out *o, const json_t *s) {
    const json_t *pat = json_object_get(s, "pattern");
    if (pat) {
        if (!json_is_string(pat)) return cerr(c, "'pattern' must be a string");
        if (json_object_get(s, "minLength") || json_object_get(s, "maxLength") || json_object_get(s, "format"))
            return cerr(c, "'pattern' with 'minLength', 'maxLength' or 'format' is not supported");
        return pattern_value(c, o, json_string_value(pat));
    }
    const json_t *f = json_object_get(s, "format");
    if (f) {
        if (!json_is_string(f)) return cerr(c, "'format' must be a string");
        if (json_object_get(s, "minLength") || json_object_get(s, "maxLength"))
            return cerr(c, "'format' with 'minLength' or 'maxLength' is not supported");
        return format_value(c, o, json_string_value(f));
    }
    long lo, hi;
    if (get_count(c, s, "minLength", 0, &lo) || get_count(c, s, "maxLength", -1, &hi)) return -1;
    if (hi >= 0 && hi < lo) return cerr(c, "'maxLength' is below 'minLength'");
    if (lo == 0 && hi < 0) return puts_(o, "json-string"), 0;
    if (hi < 0) putf(o, "\"\\\"\" json-char{%ld,} \"\\\"\"", lo);
    else putf(o, "\"\\\"\" json-char{%ld,%ld} \"\\\"\"", lo, hi);
    return 0;
}

/* A tuple: the prefix schemas in order, every one present, then items of
 * the rest's schema (none when it is false), within maxItems. */
static int tuple_value(struct conv *c, struct out *o, const json_t *prefix, const json_t *rest, long hi,
                       int depth) {
    const size_t n = json_array_size(prefix);
    if (hi >= 0 && (size_t)hi < n) return cerr(c, "'maxItems' is below the number of prefix items");
    puts_(o, "\"[\" ws");
    size_t i;
    const json_t *item;
    json_array_foreach(prefix, i, item) {
        char r[32];
        if (new_rule(c, r, sizeof r) || define(c, r, item, depth + 1)) return -1;
        putf(o, " %s%s ws", i ? "\",\" ws " : "", r);
    }
    if (!rest || !json_is_false(rest)) {
        char r[32];
        if (!rest || json_is_true(rest)) snprintf(r, sizeof r, "json-value");
        else if (!json_is_object(rest)) return cerr(c, "the schema of the items after the tuple must be an object");
        else if (new_rule(c, r, sizeof r) || define(c, r, rest, depth + 1)) return -1;
        if (hi < 0) putf(o, " ( \",\" ws %s ws )*", r);
        else if ((size_t)hi > n) putf(o, " ( \",\" ws %s ws ){0,%ld}", r, hi - (long)n);
    }
    puts_(o, " \"]\"");
    return 0;
}

static int array_value(struct conv *c, struct out *o, const json_t *s, int depth) {
    long lo, hi;
    if (get_count(c, s, "minItems", 0, &lo) || get_count(c, s, "maxItems", -1, &hi)) return -1;
    if (hi >= 0 && hi < lo) return cerr(c, "'maxItems' is below 'minItems'");
    const json_t *items = json_object_get(s, "items"), *prefix = json_object_get(s, "prefixItems");
    if (prefix) {
        if (!json_is_array(prefix) || !json_array_size(prefix)) return cerr(c, "'prefixItems' must be a non-empty array");
        return tuple_value(c, o, prefix, items, hi, depth);
    }
    if (json_is_array(items)) { /* draft 4-7 tuples: the rest's schema is additionalItems */
        if (!json_array_size(items)) return cerr(c, "'items' as a list must not be empty");
        return tuple_value(c, o, items, json_object_get(s, "additionalItems"), hi, depth);
    }
    char item[32];
    if (!items || json_is_true(items)) snprintf(item, sizeof item, "json-value");
    else if (!json_is_object(items)) return cerr(c, "'items' must be a schema (an object)");
    else if (new_rule(c, item, sizeof item) || define(c, item, items, depth + 1)) return -1;
    if (hi == 0) return puts_(o, "\"[\" ws \"]\""), 0;
    /* "[" ws item ws ("," ws item ws){lo-1, hi-1} "]", the whole run optional when lo is 0 */
    putf(o, "\"[\" ws %s%s ws ( \",\" ws %s ws )", lo == 0 ? "( " : "", item, item);
    long rlo = lo > 0 ? lo - 1 : 0;
    if (hi < 0) putf(o, "{%ld,}", rlo);
    else putf(o, "{%ld,%ld}", rlo, hi - 1);
    putf(o, "%s \"]\"", lo == 0 ? " )?" : "");
    return 0;
}

/* Properties p_1..p_n in order, required ones always, optional ones maybe:
 * H_i (nothing written yet) and T_i (something written: a comma first). */
static int object_value(struct conv *c, struct out *o, const json_t *s, int depth) {
    const json_t *props = json_object_get(s, "properties"), *req = json_object_get(s, "required");
    const json_t *addl = json_object_get(s, "additionalProperties");
    if (req && !json_is_array(req)) return cerr(c, "'required' must be an array of property names");
    if (!props || !json_object_size(props)) {
        if (props && !json_is_object(props)) return cerr(c, "'properties' must be an object");
        if (req && json_array_size(req)) return cerr(c, "'required' names properties the schema does not define");
        if (addl && json_is_false(addl)) return puts_(o, "\"{\" ws \"}\""), 0;
        if (!addl || json_is_true(addl)) return puts_(o, "json-object"), 0;
        if (!json_is_object(addl)) return cerr(c, "'additionalProperties' must be a boolean or a schema");
        char v[32], mem[32];
        if (new_rule(c, v, sizeof v) || define(c, v, addl, depth + 1) || new_rule(c, mem, sizeof mem)) return -1;
        putf(&c->g, "%s ::= json-string ws \":\" ws %s ws\n", mem, v);
        putf(o, "\"{\" ws ( %s ( \",\" ws %s )* )? \"}\"", mem, mem);
        return 0;
    }
    if (!json_is_object(props)) return cerr(c, "'properties' must be an object");
    size_t n = json_object_size(props), i;
    const json_t *name;
    json_array_foreach(req, i, name) {
        if (!json_is_string(name) || !json_object_get(props, json_string_value(name)))
            return cerr(c, "'required' names '%.60s', which is not in 'properties'",
                        json_is_string(name) ? json_string_value(name) : "(not a string)");
    }
    char (*kv)[32] = calloc(n, sizeof *kv);
    int *required = calloc(n, sizeof *required);
    if (!kv || !required) {
        free(kv), free(required);
        return cerr(c, "out of memory");
    }
    const char *key;
    const json_t *ps;
    size_t k = 0;
    int rc = 0;
    json_object_foreach((json_t *)props, key, ps) {
        json_array_foreach(req, i, name) if (!strcmp(json_string_value(name), key)) required[k] = 1;
        char vr[32];
        if (!json_is_object(ps) && !json_is_boolean(ps)) {
            rc = cerr(c, "the schema of property '%.60s' must be an object", key);
            break;
        }
        if (new_rule(c, vr, sizeof vr) || new_rule(c, kv[k], sizeof kv[k])) {
            rc = -1;
            break;
        }
        if (json_is_boolean(ps)) putf(&c->g, "%s ::= json-value\n", vr);
        else if (define(c, vr, ps, depth + 1)) {
            rc = -1;
            break;
        }
        struct out lit = {0};
        json_t *kj = json_string(key);
        char *ks = kj ? json_dumps(kj, JSON_ENCODE_ANY) : NULL;
        json_decref(kj);
        if (!ks) {
            rc = cerr(c, "out of memory");
            break;
        }
        put_literal(&lit, ks, strlen(ks));
        free(ks);
        putf(&c->g, "%s ::= ", kv[k]);
        put(&c->g, lit.p ? lit.p : "", lit.len);
        putf(&c->g, " ws \":\" ws %s ws\n", vr);
        free(lit.p);
        k++;
    }
    if (!rc) {
        /* chains from the end: H_n+1 = T_n+1 = empty */
        char h[32] = "", t[32] = "", nh[32], nt[32];
        for (long j = (long)n - 1; j >= 0 && !rc; j--) {
            if (new_rule(c, nh, sizeof nh) || new_rule(c, nt, sizeof nt)) {
                rc = -1;
                break;
            }
            if (required[j]) {
                putf(&c->g, "%s ::= %s %s\n", nh, kv[j], t);
                putf(&c->g, "%s ::= \",\" ws %s %s\n", nt, kv[j], t);
            } else {
                putf(&c->g, "%s ::= %s %s | %s\n", nh, kv[j], t, h);
                putf(&c->g, "%s ::= \",\" ws %s %s | %s\n", nt, kv[j], t, t);
            }
            memcpy(h, nh, sizeof h), memcpy(t, nt, sizeof t);
        }
        if (!rc) putf(o, "\"{\" ws %s \"}\"", h);
    }
    free(kv);
    free(required);
    return rc;
}

/* ---- integer ranges: the decimal strings of [lo, hi] as a grammar ---- */
#define INT_LIMIT 999999999999999LL /* |bounds| up to 15 digits (json-int has 16) */

/* The numbers of n digits from a to b (digit strings, a <= b; inner
 * positions may start with 0): per leading digit, its rest's range. */
static void same_len(struct out *o, const char *a, const char *b, int n) {
    int a_min = 1, b_max = 1; /* a's rest all 0, b's rest all 9 */
    for (int i = 1; i < n; i++) a_min &= a[i] == '0', b_max &= b[i] == '9';
    if (a_min && b_max) { /* the whole block: [a0-b0] [0-9]{n-1} */
        if (a[0] == b[0]) putf(o, "\"%c\"", a[0]);
        else putf(o, "[%c-%c]", a[0], b[0]);
        if (n > 1) putf(o, " [0-9]{%d}", n - 1);
        return;
    }
    if (a[0] == b[0]) {
        putf(o, "\"%c\" ", a[0]);
        same_len(o, a + 1, b + 1, n - 1);
        return;
    }
    char nines[24], zeros[24];
    memset(nines, '9', sizeof nines), memset(zeros, '0', sizeof zeros);
    putf(o, "( \"%c\" ", a[0]);
    same_len(o, a + 1, nines, n - 1);
    if (b[0] - a[0] >= 2) {
        if (b[0] - a[0] == 2) putf(o, " | \"%c\"", a[0] + 1);
        else putf(o, " | [%c-%c]", a[0] + 1, b[0] - 1);
        if (n > 1) putf(o, " [0-9]{%d}", n - 1);
    }
    putf(o, " | \"%c\" ", b[0]);
    same_len(o, zeros, b + 1, n - 1);
    puts_(o, " )");
}

/* 0 <= lo <= hi (hi < 0: no upper bound, up to json-int's 16 digits) */
static void nonneg_range(struct out *o, long long lo, long long hi) {
    char a[24], b[24];
    const int la = snprintf(a, sizeof a, "%lld", lo);
    if (hi < 0) { /* lo's digit count up to 10^la - 1, then every longer number */
        memset(b, '9', (size_t)la), b[la] = 0;
        puts_(o, "( ");
        same_len(o, a, b, la);
        if (la < 16) putf(o, " | [1-9] [0-9]{%d,15}", la);
        puts_(o, " )");
        return;
    }
    const int lb = snprintf(b, sizeof b, "%lld", hi);
    if (la == lb) {
        puts_(o, "( ");
        same_len(o, a, b, la);
        puts_(o, " )");
        return;
    }
    char top[24], bottom[24];
    memset(top, '9', (size_t)la), top[la] = 0;
    memset(bottom, '0', (size_t)lb), bottom[0] = '1', bottom[lb] = 0;
    puts_(o, "( ");
    same_len(o, a, top, la);
    if (lb - la >= 2) putf(o, " | [1-9] [0-9]{%d,%d}", la, lb - 2);
    puts_(o, " | ");
    same_len(o, bottom, b, lb);
    puts_(o, " )");
}

/* A bound of keyword key as an integer: *v, *set; minimum rounds up,
 * maximum down, the exclusive ones (a number, or draft 4's boolean beside
 * minimum / maximum) one step further. */
static int int_bound(struct conv *c, const json_t *s, int upper, long long *v, int *set) {
    const char *key = upper ? "maximum" : "minimum", *xkey = upper ? "exclusiveMaximum" : "exclusiveMinimum";
    const json_t *b = json_object_get(s, key), *x = json_object_get(s, xkey);
    *set = 0;
    for (int pass = 0; pass < 2; pass++) {
        const json_t *j = pass ? x : b;
        if (!j || json_is_boolean(j)) continue;
        if (!json_is_number(j)) return cerr(c, "'%s' must be a number", pass ? xkey : key);
        double d = json_number_value(j);
        if (!(d >= -(double)INT_LIMIT && d <= (double)INT_LIMIT))
            return cerr(c, "'%s' must be within +-%lld for an integer grammar", pass ? xkey : key, INT_LIMIT);
        long long iv = upper ? (long long)floor(d) : (long long)ceil(d);
        const int excl = pass || (x && json_is_true(x));
        if (excl && (double)iv == d) iv += upper ? -1 : 1;
        if (!*set || (upper ? iv < *v : iv > *v)) *v = iv;
        *set = 1;
    }
    return 0;
}

static int integer_value(struct conv *c, struct out *o, const json_t *s) {
    long long lo = 0, hi = 0;
    int has_lo, has_hi;
    if (int_bound(c, s, 0, &lo, &has_lo) || int_bound(c, s, 1, &hi, &has_hi)) return -1;
    if (!has_lo && !has_hi) return puts_(o, "json-int"), 0;
    if (has_lo && has_hi && lo > hi) return cerr(c, "no integer lies between 'minimum' and 'maximum'");
    const int neg = !has_lo || lo < 0, pos = !has_hi || hi >= 0;
    puts_(o, "( ");
    if (neg) { /* -n for n from max(1, -hi) up to -lo (no limit without a minimum) */
        long long nlo = has_hi && hi < 0 ? -hi : 1;
        puts_(o, "\"-\" ");
        nonneg_range(o, nlo, has_lo ? -lo : -1);
    }
    if (pos) {
        if (neg) puts_(o, " | ");
        nonneg_range(o, has_lo && lo > 0 ? lo : 0, has_hi ? hi : -1);
    }
    puts_(o, " )");
    return 0;
}

/* A number between integer bounds (inclusive; either may be open), exact:
 * an integer part inside the range with any fraction, or a bound itself
 * with a fraction of zeros; no exponent. Fractional or exclusive bounds on
 * numbers are refused (their exact grammar is not built). */
static int number_value(struct conv *c, struct out *o, const json_t *s) {
    const json_t *lo_j = json_object_get(s, "minimum"), *hi_j = json_object_get(s, "maximum");
    if (json_object_get(s, "exclusiveMinimum") || json_object_get(s, "exclusiveMaximum"))
        return cerr(c, "'exclusiveMinimum' and 'exclusiveMaximum' are supported on integers, not on numbers");
    if (!lo_j && !hi_j) return puts_(o, "json-number"), 0;
    long long lo = 0, hi = 0;
    for (int k = 0; k < 2; k++) {
        const json_t *j = k ? hi_j : lo_j;
        if (!j) continue;
        double d = json_number_value(j);
        if (!json_is_number(j) || d != floor(d) || !(fabs(d) <= (double)INT_LIMIT))
            return cerr(c, "'%s' on a number must be an integer within +-%lld", k ? "maximum" : "minimum", INT_LIMIT);
        *(k ? &hi : &lo) = (long long)d;
    }
    if (lo_j && hi_j && lo > hi) return cerr(c, "no number lies between 'minimum' and 'maximum'");
    static const char FRAC[] = " ( \".\" [0-9]{1,16} )?", ZEROS[] = " ( \".\" \"0\"{1,16} )?";
    int alts = 0;
    puts_(o, "( ");
    /* negative values -(i.f): i.f <= -lo (i < -lo any fraction, i == -lo zeros) and i.f >= -hi when hi < 0 */
    if (!lo_j || lo < 0) {
        const long long ilo = hi_j && hi < 0 ? -hi : 0;
        if (!lo_j || -lo - 1 >= ilo) {
            puts_(o, "\"-\" ");
            nonneg_range(o, ilo, lo_j ? -lo - 1 : -1);
            puts_(o, FRAC);
            alts++;
        }
        if (lo_j) {
            if (alts++) puts_(o, " | ");
            puts_(o, "\"-\" ");
            nonneg_range(o, -lo, -lo);
            puts_(o, ZEROS);
        }
    }
    /* values >= 0: i < hi any fraction, i == hi zeros (i >= lo when lo > 0) */
    if (!hi_j || hi >= 0) {
        const long long ilo = lo_j && lo > 0 ? lo : 0;
        if (!hi_j || hi - 1 >= ilo) {
            if (alts++) puts_(o, " | ");
            nonneg_range(o, ilo, hi_j ? hi - 1 : -1);
            puts_(o, FRAC);
        }
        if (hi_j) {
            if (alts++) puts_(o, " | ");
            nonneg_range(o, hi, hi);
            puts_(o, ZEROS);
        }
    }
    puts_(o, " )");
    return 0;
}

static int typed_value(struct conv *c, struct out *o, const json_t *s, const char *type, int depth) {
    if (!strcmp(type, "string")) return string_value(c, o, s);
    if (!strcmp(type, "number")) return number_value(c, o, s);
    if (!strcmp(type, "integer")) return integer_value(c, o, s);
    if (!strcmp(type, "boolean")) return puts_(o, "json-bool"), 0;
    if (!strcmp(type, "null")) return puts_(o, "json-null"), 0;
    if (!strcmp(type, "object")) return object_value(c, o, s, depth);
    if (!strcmp(type, "array")) return array_value(c, o, s, depth);
    return cerr(c, "unknown type '%.40s'", type);
}

/* The value at a JSON pointer "#/a/b/0" (RFC 6901: ~1 is '/', ~0 '~',
 * %XX escapes of the URI fragment decoded) in root, or NULL. */
static const json_t *json_pointer(const json_t *root, const char *ref) {
    if (ref[0] != '#') return NULL;
    const json_t *at = root;
    const char *p = ref + 1;
    char tok[256];
    while (at && *p) {
        if (*p != '/') return NULL;
        size_t n = 0;
        for (p++; *p && *p != '/'; p++) {
            char ch = *p;
            if (ch == '~' && (p[1] == '0' || p[1] == '1')) ch = *++p == '0' ? '~' : '/';
            else if (ch == '%' && p[1] && p[2]) {
                char hex[3] = {p[1], p[2], 0}, *end;
                long v = strtol(hex, &end, 16);
                if (*end || v <= 0) return NULL;
                ch = (char)v, p += 2;
            }
            if (n + 1 >= sizeof tok) return NULL;
            tok[n++] = ch;
        }
        tok[n] = 0;
        if (json_is_object(at)) at = json_object_get(at, tok);
        else if (json_is_array(at)) {
            char *end;
            long i = strtol(tok, &end, 10);
            at = n && !*end && i >= 0 ? json_array_get(at, (size_t)i) : NULL;
        } else at = NULL;
    }
    return at;
}

/* The rule named for a $ref, defining it on first use. */
static int ref_value(struct conv *c, struct out *o, const char *ref, int depth) {
    for (int i = 0; i < c->n_refs; i++)
        if (!strcmp(c->refs[i], ref)) return putf(o, "ref%d", c->ref_rule[i]), 0;
    const json_t *target = json_pointer(c->root, ref);
    if (!target) return cerr(c, "the $ref '%.80s' is not a JSON pointer into this schema (#/...) that exists", ref);
    if (c->n_refs == c->cap_refs) {
        int cap = c->cap_refs ? c->cap_refs * 2 : 8;
        const char **r = realloc(c->refs, (size_t)cap * sizeof *r);
        if (r) c->refs = r;
        int *rr = r ? realloc(c->ref_rule, (size_t)cap * sizeof *rr) : NULL;
        if (!rr) return cerr(c, "out of memory");
        c->ref_rule = rr, c->cap_refs = cap;
    }
    int id = c->n_ref_rules++;
    c->refs[c->n_refs] = ref;
    c->ref_rule[c->n_refs++] = id;
    char name[32];
    snprintf(name, sizeof name, "ref%d", id);
    put(o, name, strlen(name));
    return define(c, name, target, depth + 1);
}

/* Alternatives of a list of schemas (anyOf / oneOf). */
static int alternatives(struct conv *c, struct out *o, const json_t *list, const char *key, int depth) {
    if (!json_is_array(list) || !json_array_size(list)) return cerr(c, "'%s' must be a non-empty array", key);
    size_t i;
    const json_t *s;
    puts_(o, "( ");
    json_array_foreach(list, i, s) {
        char r[32];
        if (new_rule(c, r, sizeof r) || define(c, r, s, depth + 1)) return -1;
        putf(o, "%s%s", i ? " | " : "", r);
    }
    puts_(o, " )");
    return 0;
}

/* allOf of several schemas: each an object schema (or a $ref to one, or
 * an allOf of them), merged into one: the properties of all (a name in two
 * of them takes the later schema), required lists joined, and the schema's
 * own properties beside allOf too; additionalProperties false if any says
 * so. Anything else in the list is an error. */
static int merge_object(struct conv *c, json_t *into, const json_t *s, int depth) {
    if (depth > MAX_DEPTH) return cerr(c, "the schema nests deeper than %d", MAX_DEPTH);
    const json_t *ref = json_object_get(s, "$ref");
    if (ref) {
        const json_t *t = json_is_string(ref) ? json_pointer(c->root, json_string_value(ref)) : NULL;
        if (!t) return cerr(c, "the $ref '%.80s' in 'allOf' does not resolve", json_string_value(ref));
        return merge_object(c, into, t, depth + 1);
    }
    const json_t *all = json_object_get(s, "allOf"), *item;
    size_t i;
    if (all) {
        if (!json_is_array(all)) return cerr(c, "'allOf' must be an array");
        json_array_foreach(all, i, item) if (merge_object(c, into, item, depth + 1)) return -1;
    }
    const json_t *type = json_object_get(s, "type"), *props = json_object_get(s, "properties");
    if (type && !(json_is_string(type) && !strcmp(json_string_value(type), "object")))
        return cerr(c, "'allOf' merges object schemas only");
    if (!type && !props && !all) return cerr(c, "'allOf' merges object schemas only");
    if (props) {
        if (!json_is_object(props)) return cerr(c, "'properties' must be an object");
        if (json_object_update(json_object_get(into, "properties"), (json_t *)props))
            return cerr(c, "out of memory");
    }
    const json_t *req = json_object_get(s, "required");
    if (req) {
        if (!json_is_array(req)) return cerr(c, "'required' must be an array of property names");
        json_t *dst = json_object_get(into, "required");
        json_array_foreach(req, i, item) {
            size_t k;
            const json_t *have;
            int dup = 0;
            json_array_foreach(dst, k, have) dup |= json_equal(have, item);
            if (!dup && json_array_append(dst, (json_t *)item)) return cerr(c, "out of memory");
        }
    }
    const json_t *addl = json_object_get(s, "additionalProperties");
    if (addl && json_is_false(addl)) json_object_set_new(into, "additionalProperties", json_false());
    return 0;
}

static int all_of(struct conv *c, struct out *o, const json_t *s, int depth) {
    json_t *m = json_pack("{s:s, s:{}, s:[]}", "type", "object", "properties", "required");
    if (!m) return cerr(c, "out of memory");
    int rc = merge_object(c, m, s, depth + 1);
    if (!rc) rc = object_value(c, o, m, depth + 1);
    /* the merged schema's property schemas are the document's own (object_value
     * defined their rules already); only the container is ours */
    json_decref(m);
    return rc;
}

static int value(struct conv *c, struct out *o, const json_t *s, int depth) {
    if (depth > MAX_DEPTH) return cerr(c, "the schema nests deeper than %d", MAX_DEPTH);
    if (json_is_true(s)) return puts_(o, "json-value"), 0;
    if (!json_is_object(s)) return cerr(c, "a schema must be an object");
    if (check_keywords(c, s)) return -1;
    const json_t *v;
    if ((v = json_object_get(s, "$ref"))) {
        if (!json_is_string(v)) return cerr(c, "'$ref' must be a string");
        return ref_value(c, o, json_string_value(v), depth);
    }
    if ((v = json_object_get(s, "const"))) return put_json_literal(c, o, v);
    if ((v = json_object_get(s, "enum"))) {
        if (!json_is_array(v) || !json_array_size(v)) return cerr(c, "'enum' must be a non-empty array");
        size_t i;
        const json_t *e;
        puts_(o, "( ");
        json_array_foreach(v, i, e) {
            if (i) puts_(o, " | ");
            if (put_json_literal(c, o, e)) return -1;
        }
        puts_(o, " )");
        return 0;
    }
    if ((v = json_object_get(s, "anyOf"))) return alternatives(c, o, v, "anyOf", depth);
    if ((v = json_object_get(s, "oneOf"))) return alternatives(c, o, v, "oneOf", depth);
    if ((v = json_object_get(s, "allOf"))) {
        if (!json_is_array(v) || !json_array_size(v)) return cerr(c, "'allOf' must be a non-empty array");
        if (json_array_size(v) == 1) return value(c, o, json_array_get(v, 0), depth + 1);
        return all_of(c, o, s, depth);
    }
    const json_t *type = json_object_get(s, "type");
    if (json_is_string(type)) {
        if (!strcmp(json_string_value(type), "null") || !json_object_get(s, "nullable") ||
            !json_is_true(json_object_get(s, "nullable")))
            return typed_value(c, o, s, json_string_value(type), depth);
        puts_(o, "( ");
        if (typed_value(c, o, s, json_string_value(type), depth)) return -1;
        puts_(o, " | json-null )");
        return 0;
    }
    if (json_is_array(type)) {
        if (!json_array_size(type)) return cerr(c, "'type' must not be an empty list");
        size_t i;
        const json_t *t;
        puts_(o, "( ");
        json_array_foreach(type, i, t) {
            if (!json_is_string(t)) return cerr(c, "'type' must be a string or a list of strings");
            if (i) puts_(o, " | ");
            if (typed_value(c, o, s, json_string_value(t), depth)) return -1;
        }
        puts_(o, " )");
        return 0;
    }
    if (type) return cerr(c, "'type' must be a string or a list of strings");
    if (json_object_get(s, "properties")) return object_value(c, o, s, depth);
    if (json_object_get(s, "items") || json_object_get(s, "prefixItems")) return array_value(c, o, s, depth);
    /* string keywords without a type: a string (never a silently ignored constraint) */
    if (json_object_get(s, "pattern") || json_object_get(s, "format") || json_object_get(s, "minLength") ||
        json_object_get(s, "maxLength"))
        return string_value(c, o, s);
    if (json_object_get(s, "minimum") || json_object_get(s, "maximum") || json_object_get(s, "exclusiveMinimum") ||
        json_object_get(s, "exclusiveMaximum"))
        return cerr(c, "'minimum' and 'maximum' need \"type\": \"integer\"");
    return puts_(o, "json-value"), 0;
}

char *r1_grammar_json_schema(const char *schema, size_t len, char *err, size_t errlen) {
    struct conv c = {.err = err, .errlen = errlen};
    if (err && errlen) err[0] = 0;
    json_t *root = NULL;
    if (schema) {
        json_error_t je;
        if (!(root = json_loadb(schema, len, JSON_DECODE_ANY, &je))) {
            cerr(&c, "the schema is not valid JSON: %s", je.text);
            return NULL;
        }
    }
    c.root = root;
    struct out rootbody = {0};
    put(&c.g, BASE_RULES, strlen(BASE_RULES));
    int rc = root ? value(&c, &rootbody, root, 0) : (put(&rootbody, "json-object", 11), 0);
    if (!rc) {
        put(&c.g, "root ::= ws ", 12);
        put(&c.g, rootbody.p, rootbody.len);
        put(&c.g, "\n", 1);
    }
    free(rootbody.p);
    free(c.refs);
    free(c.ref_rule);
    json_decref(root);
    if (!rc && (c.g.failed || rootbody.failed)) rc = cerr(&c, "out of memory");
    if (rc) {
        free(c.g.p);
        return NULL;
    }
    return c.g.p;
}

char *r1_grammar_tool_call(const char *const *names, const char *const *schemas, int n, char *err, size_t errlen) {
    struct conv c = {.err = err, .errlen = errlen};
    if (err && errlen) err[0] = 0;
    if (n <= 0) {
        cerr(&c, "no function to call");
        return NULL;
    }
    put(&c.g, BASE_RULES, strlen(BASE_RULES));
    struct out calls = {0};
    int rc = 0;
    for (int i = 0; i < n && !rc; i++) {
        json_t *schema = NULL;
        if (schemas[i]) {
            json_error_t je;
            if (!(schema = json_loads(schemas[i], JSON_DECODE_ANY, &je))) {
                rc = cerr(&c, "the parameters of '%.60s' are not valid JSON: %s", names[i], je.text);
                break;
            }
        }
        c.root = schema, c.n_refs = 0; /* $refs are the function's own */
        char args[32];
        if (new_rule(&c, args, sizeof args)) rc = -1;
        else if (schema) rc = define(&c, args, schema, 0);
        else putf(&c.g, "%s ::= json-object\n", args);
        json_decref(schema);
        if (rc) {
            char msg[256];
            snprintf(msg, sizeof msg, "%s", err && errlen ? err : "");
            c.failed = 0;
            cerr(&c, "the parameters of '%.60s': %s", names[i], msg);
            break;
        }
        json_t *nj = json_string(names[i]);
        char *ns = nj ? json_dumps(nj, JSON_ENCODE_ANY) : NULL;
        json_decref(nj);
        if (!ns) {
            rc = cerr(&c, "out of memory");
            break;
        }
        if (i) put(&calls, " | ", 3);
        put(&calls, "( ", 2);
        put_literal(&calls, ns, strlen(ns));
        putf(&calls, " ws \",\" ws \"\\\"arguments\\\"\" ws \":\" ws %s )", args);
        free(ns);
    }
    if (!rc) {
        putf(&c.g, "tool-call ::= \"{\" ws \"\\\"name\\\"\" ws \":\" ws ( ");
        put(&c.g, calls.p ? calls.p : "", calls.len);
        putf(&c.g, " ) ws \"}\"\n");
        putf(&c.g, "root ::= ws \"<tool_call>\" ws tool-call ws \"</tool_call>\"\n");
    }
    free(calls.p);
    free(c.refs);
    free(c.ref_rule);
    if (!rc && (c.g.failed || calls.failed)) rc = cerr(&c, "out of memory");
    if (rc) {
        free(c.g.p);
        return NULL;
    }
    return c.g.p;
}
