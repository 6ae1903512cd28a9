/*
 * schema.c - a JSON schema as a GBNF grammar (gbnf.c compiles it): the
 * subset clients send for structured outputs and tool arguments.
 *
 * Supported: type (one or a list), enum, const, object properties with
 * required ones (emitted in the schema's order, optional ones may be left
 * out; no other properties), additionalProperties as the schema of a free
 * object's values, arrays with items / minItems / maxItems, tuples
 * (prefixItems, or items as a list, with items / additionalItems for the
 * rest), strings with minLength / maxLength, a pattern (the ECMA-262
 * subset of schema_pattern.c) or the formats date, time, date-time and
 * uuid, integers and numbers within minimum / maximum / exclusiveMinimum /
 * exclusiveMaximum (schema_range.c: exact grammars of the decimals),
 * booleans, null, anyOf / oneOf, allOf (merged, or distributed over an
 * anyOf), and $ref to any JSON pointer of the document (#, #/$defs/NAME,
 * #/properties/a/items, ...; recursive ones too). Annotations (title,
 * description, default, examples, ...) are ignored. A keyword that
 * constrains values in a way the grammar cannot (other formats,
 * multipleOf, uniqueItems, ...) is an error, not ignored.
 * No I/O; every error is a message.
 */
#include <jansson.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "r1infer.h"
#include "grammar/schema_int.h"

/* ---- the grammar text and the first error (schema_int.h) ---- */
void sch_put(struct out *o, const char *s, size_t n) {
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

void sch_putf(struct out *o, const char *fmt, ...) {
    char buf[512];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    if (n >= (int)sizeof buf) n = (int)sizeof buf - 1;
    if (n > 0) sch_put(o, buf, (size_t)n);
}

int sch_err(struct conv *c, const char *fmt, ...) {
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

void sch_literal(struct out *o, const char *s, size_t n) {
    puts_(o, "\"");
    for (size_t i = 0; i < n; i++) {
        unsigned char ch = (unsigned char)s[i];
        if (ch == '"' || ch == '\\') {
            puts_(o, "\\");
            sch_put(o, s + i, 1);
        } else if (ch < 0x20) {
            sch_putf(o, "\\x%02X", ch);
        } else {
            sch_put(o, s + i, 1);
        }
    }
    puts_(o, "\"");
}

/* The JSON text of a value as a GBNF literal. */
static int put_json_literal(struct conv *c, struct out *o, const json_t *v) {
    char *s = json_dumps(v, JSON_COMPACT | JSON_ENCODE_ANY);
    if (!s) return sch_err(c, "out of memory");
    puts_(o, "(");
    sch_literal(o, s, strlen(s));
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

/* A new generated rule's name into name (r<N>); -1 past the limit. */
static int new_rule(struct conv *c, char *name, size_t n) {
    if (c->n_rules >= MAX_RULES) return sch_err(c, "the schema needs more than %d grammar rules", MAX_RULES);
    snprintf(name, n, "r%d", c->n_rules++);
    return 0;
}

/* Define rule `name` as the value of schema s (its text goes to the grammar). */
static int define(struct conv *c, const char *name, const json_t *s, int depth) {
    struct out body = {0};
    int rc = sch_value(c, &body, s, depth);
    if (!rc) {
        sch_putf(&c->g, "%s ::= ", name);
        sch_put(&c->g, body.p ? body.p : "", body.len);
        sch_put(&c->g, "\n", 1);
    }
    free(body.p);
    return rc;
}

static const char *IGNORED[] = {"title",
                                "description",
                                "default",
                                "examples",
                                "$schema",
                                "$id",
                                "$comment",
                                "deprecated",
                                "readOnly",
                                "writeOnly",
                                "$defs",
                                "definitions",
                                "strict",
                                "additionalProperties",
                                "type",
                                "properties",
                                "required",
                                "items",
                                "enum",
                                "const",
                                "anyOf",
                                "oneOf",
                                "allOf",
                                "$ref",
                                "minItems",
                                "maxItems",
                                "minLength",
                                "maxLength",
                                "discriminator",
                                "nullable",
                                "prefixItems",
                                "additionalItems",
                                "format",
                                "minimum",
                                "maximum",
                                "exclusiveMinimum",
                                "exclusiveMaximum",
                                "pattern",
                                NULL};

static int check_keywords(struct conv *c, const json_t *s) {
    const char *k;
    const json_t *v;
    json_object_foreach((json_t *)s, k, v) {
        int known = 0;
        for (int i = 0; IGNORED[i] && !known; i++) known = !strcmp(k, IGNORED[i]);
        if (!known)
            return sch_err(c,
                           "the schema keyword '%.60s' is not supported (supported: type, properties, "
                           "required, items, prefixItems, minItems, maxItems, minLength, maxLength, "
                           "format, minimum, maximum, enum, const, anyOf, oneOf, allOf, $ref, $defs)",
                           k);
    }
    return 0;
}

static int get_count(struct conv *c, const json_t *s, const char *key, long dflt, long *out) {
    const json_t *v = json_object_get(s, key);
    *out = dflt;
    if (!v) return 0;
    if (!json_is_integer(v) || json_integer_value(v) < 0 || json_integer_value(v) > 4096)
        return sch_err(c, "'%s' must be an integer between 0 and 4096", key);
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
        sch_putf(o, "%s", FORMATS[0].rule);
        puts_(o, " ) [tT ] ( ");
        sch_putf(o, "%s", FORMATS[1].rule);
        puts_(o, " ) \"\\\"\"");
        return 0;
    }
    for (size_t i = 0; i < sizeof FORMATS / sizeof *FORMATS; i++)
        if (!strcmp(f, FORMATS[i].name)) {
            puts_(o, "\"\\\"\" ( ");
            sch_putf(o, "%s", FORMATS[i].rule);
            puts_(o, " ) \"\\\"\"");
            return 0;
        }
    return sch_err(c, "the string format '%.40s' is not supported (date, time, date-time, uuid)", f);
}

static int string_value(struct conv *c, struct out *o, const json_t *s) {
    const json_t *pat = json_object_get(s, "pattern");
    if (pat) {
        if (!json_is_string(pat)) return sch_err(c, "'pattern' must be a string");
        if (json_object_get(s, "minLength") || json_object_get(s, "maxLength") || json_object_get(s, "format"))
            return sch_err(c, "'pattern' with 'minLength', 'maxLength' or 'format' is not supported");
        return sch_pattern(c, o, json_string_value(pat));
    }
    const json_t *f = json_object_get(s, "format");
    if (f) {
        if (!json_is_string(f)) return sch_err(c, "'format' must be a string");
        if (json_object_get(s, "minLength") || json_object_get(s, "maxLength"))
            return sch_err(c, "'format' with 'minLength' or 'maxLength' is not supported");
        return format_value(c, o, json_string_value(f));
    }
    long lo, hi;
    if (get_count(c, s, "minLength", 0, &lo) || get_count(c, s, "maxLength", -1, &hi)) return -1;
    if (hi >= 0 && hi < lo) return sch_err(c, "'maxLength' is below 'minLength'");
    if (lo == 0 && hi < 0) return puts_(o, "json-string"), 0;
    if (hi < 0) sch_putf(o, "\"\\\"\" json-char{%ld,} \"\\\"\"", lo);
    else sch_putf(o, "\"\\\"\" json-char{%ld,%ld} \"\\\"\"", lo, hi);
    return 0;
}

/* A tuple: the prefix schemas in order, every one present, then items of
 * the rest's schema (none when it is false), within maxItems. */
static int tuple_value(struct conv *c, struct out *o, const json_t *prefix, const json_t *rest, long hi, int depth) {
    const size_t n = json_array_size(prefix);
    if (hi >= 0 && (size_t)hi < n) return sch_err(c, "'maxItems' is below the number of prefix items");
    puts_(o, "\"[\" ws");
    size_t i;
    const json_t *item;
    json_array_foreach(prefix, i, item) {
        char r[32];
        if (new_rule(c, r, sizeof r) || define(c, r, item, depth + 1)) return -1;
        sch_putf(o, " %s%s ws", i ? "\",\" ws " : "", r);
    }
    if (!rest || !json_is_false(rest)) {
        char r[32];
        if (!rest || json_is_true(rest)) snprintf(r, sizeof r, "json-value");
        else if (!json_is_object(rest)) return sch_err(c, "the schema of the items after the tuple must be an object");
        else if (new_rule(c, r, sizeof r) || define(c, r, rest, depth + 1)) return -1;
        if (hi < 0) sch_putf(o, " ( \",\" ws %s ws )*", r);
        else if ((size_t)hi > n) sch_putf(o, " ( \",\" ws %s ws ){0,%ld}", r, hi - (long)n);
    }
    puts_(o, " \"]\"");
    return 0;
}

static int array_value(struct conv *c, struct out *o, const json_t *s, int depth) {
    long lo, hi;
    if (get_count(c, s, "minItems", 0, &lo) || get_count(c, s, "maxItems", -1, &hi)) return -1;
    if (hi >= 0 && hi < lo) return sch_err(c, "'maxItems' is below 'minItems'");
    const json_t *items = json_object_get(s, "items"), *prefix = json_object_get(s, "prefixItems");
    if (json_is_object(prefix)) { /* one schema, not a list: read as the items' (items, if given, wins) */
        if (!items) items = prefix;
        prefix = NULL;
    }
    if (prefix) {
        if (!json_is_array(prefix) || !json_array_size(prefix))
            return sch_err(c, "'prefixItems' must be a non-empty array");
        return tuple_value(c, o, prefix, items, hi, depth);
    }
    if (json_is_array(items)) { /* draft 4-7 tuples: the rest's schema is additionalItems */
        if (!json_array_size(items)) return sch_err(c, "'items' as a list must not be empty");
        return tuple_value(c, o, items, json_object_get(s, "additionalItems"), hi, depth);
    }
    char item[32];
    if (!items || json_is_true(items)) snprintf(item, sizeof item, "json-value");
    else if (!json_is_object(items)) return sch_err(c, "'items' must be a schema (an object)");
    else if (new_rule(c, item, sizeof item) || define(c, item, items, depth + 1)) return -1;
    if (hi == 0) return puts_(o, "\"[\" ws \"]\""), 0;
    /* "[" ws item ws ("," ws item ws){lo-1, hi-1} "]", the whole run optional when lo is 0 */
    sch_putf(o, "\"[\" ws %s%s ws ( \",\" ws %s ws )", lo == 0 ? "( " : "", item, item);
    long rlo = lo > 0 ? lo - 1 : 0;
    if (hi < 0) sch_putf(o, "{%ld,}", rlo);
    else sch_putf(o, "{%ld,%ld}", rlo, hi - 1);
    sch_putf(o, "%s \"]\"", lo == 0 ? " )?" : "");
    return 0;
}

/* Properties p_1..p_n in order, required ones always, optional ones maybe:
 * H_i (nothing written yet) and T_i (something written: a comma first). */
static int object_value(struct conv *c, struct out *o, const json_t *s, int depth) {
    const json_t *props = json_object_get(s, "properties"), *req = json_object_get(s, "required");
    const json_t *addl = json_object_get(s, "additionalProperties");
    if (req && !json_is_array(req)) return sch_err(c, "'required' must be an array of property names");
    if (!props || !json_object_size(props)) {
        if (props && !json_is_object(props)) return sch_err(c, "'properties' must be an object");
        if (req && json_array_size(req)) return sch_err(c, "'required' names properties the schema does not define");
        if (addl && json_is_false(addl)) return puts_(o, "\"{\" ws \"}\""), 0;
        if (!addl || json_is_true(addl)) return puts_(o, "json-object"), 0;
        if (!json_is_object(addl)) return sch_err(c, "'additionalProperties' must be a boolean or a schema");
        char v[32], mem[32];
        if (new_rule(c, v, sizeof v) || define(c, v, addl, depth + 1) || new_rule(c, mem, sizeof mem)) return -1;
        sch_putf(&c->g, "%s ::= json-string ws \":\" ws %s ws\n", mem, v);
        sch_putf(o, "\"{\" ws ( %s ( \",\" ws %s )* )? \"}\"", mem, mem);
        return 0;
    }
    if (!json_is_object(props)) return sch_err(c, "'properties' must be an object");
    size_t n = json_object_size(props), i;
    const json_t *name;
    json_array_foreach(req, i, name) {
        if (!json_is_string(name) || !json_object_get(props, json_string_value(name)))
            return sch_err(c, "'required' names '%.60s', which is not in 'properties'",
                           json_is_string(name) ? json_string_value(name) : "(not a string)");
    }
    char(*kv)[32] = calloc(n, sizeof *kv);
    int *required = calloc(n, sizeof *required);
    if (!kv || !required) {
        free(kv), free(required);
        return sch_err(c, "out of memory");
    }
    const char *key;
    const json_t *ps;
    size_t k = 0;
    int rc = 0;
    json_object_foreach((json_t *)props, key, ps) {
        json_array_foreach(req, i, name) if (!strcmp(json_string_value(name), key)) required[k] = 1;
        char vr[32];
        if (!json_is_object(ps) && !json_is_boolean(ps)) {
            rc = sch_err(c, "the schema of property '%.60s' must be an object", key);
            break;
        }
        if (new_rule(c, vr, sizeof vr) || new_rule(c, kv[k], sizeof kv[k])) {
            rc = -1;
            break;
        }
        if (json_is_boolean(ps)) sch_putf(&c->g, "%s ::= json-value\n", vr);
        else if (define(c, vr, ps, depth + 1)) {
            rc = -1;
            break;
        }
        struct out lit = {0};
        json_t *kj = json_string(key);
        char *ks = kj ? json_dumps(kj, JSON_ENCODE_ANY) : NULL;
        json_decref(kj);
        if (!ks) {
            rc = sch_err(c, "out of memory");
            break;
        }
        sch_literal(&lit, ks, strlen(ks));
        free(ks);
        sch_putf(&c->g, "%s ::= ", kv[k]);
        sch_put(&c->g, lit.p ? lit.p : "", lit.len);
        sch_putf(&c->g, " ws \":\" ws %s ws\n", vr);
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
                sch_putf(&c->g, "%s ::= %s %s\n", nh, kv[j], t);
                sch_putf(&c->g, "%s ::= \",\" ws %s %s\n", nt, kv[j], t);
            } else {
                sch_putf(&c->g, "%s ::= %s %s | %s\n", nh, kv[j], t, h);
                sch_putf(&c->g, "%s ::= \",\" ws %s %s | %s\n", nt, kv[j], t, t);
            }
            memcpy(h, nh, sizeof h), memcpy(t, nt, sizeof t);
        }
        if (!rc) sch_putf(o, "\"{\" ws %s \"}\"", h);
    }
    free(kv);
    free(required);
    return rc;
}

static int typed_value(struct conv *c, struct out *o, const json_t *s, const char *type, int depth) {
    if (!strcmp(type, "string")) return string_value(c, o, s);
    if (!strcmp(type, "number")) return sch_number(c, o, s);
    if (!strcmp(type, "integer")) return sch_integer(c, o, s);
    if (!strcmp(type, "boolean")) return puts_(o, "json-bool"), 0;
    if (!strcmp(type, "null")) return puts_(o, "json-null"), 0;
    if (!strcmp(type, "object")) return object_value(c, o, s, depth);
    if (!strcmp(type, "array")) return array_value(c, o, s, depth);
    return sch_err(c, "unknown type '%.40s'", type);
}

/* The value at a JSON pointer "#/a/b/0" (RFC 6901: ~1 is '/', ~0 '~',
 * %XX escapes of the URI fragment decoded) in root, or NULL. */
const json_t *sch_json_pointer(const json_t *root, const char *ref) {
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
        if (!strcmp(c->refs[i], ref)) return sch_putf(o, "ref%d", c->ref_rule[i]), 0;
    const json_t *target = sch_json_pointer(c->root, ref);
    if (!target) return sch_err(c, "the $ref '%.80s' is not a JSON pointer into this schema (#/...) that exists", ref);
    if (c->n_refs == c->cap_refs) {
        int cap = c->cap_refs ? c->cap_refs * 2 : 8;
        const char **r = realloc(c->refs, (size_t)cap * sizeof *r);
        if (r) c->refs = r;
        int *rr = r ? realloc(c->ref_rule, (size_t)cap * sizeof *rr) : NULL;
        if (!rr) return sch_err(c, "out of memory");
        c->ref_rule = rr, c->cap_refs = cap;
    }
    int id = c->n_ref_rules++;
    c->refs[c->n_refs] = ref;
    c->ref_rule[c->n_refs++] = id;
    char name[32];
    snprintf(name, sizeof name, "ref%d", id);
    sch_put(o, name, strlen(name));
    return define(c, name, target, depth + 1);
}

/* Alternatives of a list of schemas (anyOf / oneOf). */
static int alternatives(struct conv *c, struct out *o, const json_t *list, const char *key, int depth) {
    if (!json_is_array(list) || !json_array_size(list)) return sch_err(c, "'%s' must be a non-empty array", key);
    size_t i;
    const json_t *s;
    puts_(o, "( ");
    json_array_foreach(list, i, s) {
        char r[32];
        if (new_rule(c, r, sizeof r) || define(c, r, s, depth + 1)) return -1;
        sch_putf(o, "%s%s", i ? " | " : "", r);
    }
    puts_(o, " )");
    return 0;
}

int sch_value(struct conv *c, struct out *o, const json_t *s, int depth) {
    if (depth > MAX_DEPTH) return sch_err(c, "the schema nests deeper than %d", MAX_DEPTH);
    if (json_is_true(s)) return puts_(o, "json-value"), 0;
    if (!json_is_object(s)) return sch_err(c, "a schema must be an object");
    if (check_keywords(c, s)) return -1;
    const json_t *v;
    if ((v = json_object_get(s, "$ref"))) {
        if (!json_is_string(v)) return sch_err(c, "'$ref' must be a string");
        return ref_value(c, o, json_string_value(v), depth);
    }
    if ((v = json_object_get(s, "const"))) return put_json_literal(c, o, v);
    if ((v = json_object_get(s, "enum"))) {
        if (!json_is_array(v) || !json_array_size(v)) return sch_err(c, "'enum' must be a non-empty array");
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
        if (!json_is_array(v) || !json_array_size(v)) return sch_err(c, "'allOf' must be a non-empty array");
        return sch_all_of(c, o, s, depth);
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
        if (!json_array_size(type)) return sch_err(c, "'type' must not be an empty list");
        size_t i;
        const json_t *t;
        puts_(o, "( ");
        json_array_foreach(type, i, t) {
            if (!json_is_string(t)) return sch_err(c, "'type' must be a string or a list of strings");
            if (i) puts_(o, " | ");
            if (typed_value(c, o, s, json_string_value(t), depth)) return -1;
        }
        puts_(o, " )");
        return 0;
    }
    if (type) return sch_err(c, "'type' must be a string or a list of strings");
    if (json_object_get(s, "properties")) return object_value(c, o, s, depth);
    if (json_object_get(s, "items") || json_object_get(s, "prefixItems")) return array_value(c, o, s, depth);
    /* string keywords without a type: a string (never a silently ignored constraint) */
    if (json_object_get(s, "pattern") || json_object_get(s, "format") || json_object_get(s, "minLength") ||
        json_object_get(s, "maxLength"))
        return string_value(c, o, s);
    if (json_object_get(s, "minimum") || json_object_get(s, "maximum") || json_object_get(s, "exclusiveMinimum") ||
        json_object_get(s, "exclusiveMaximum"))
        return sch_err(c, "'minimum' and 'maximum' need \"type\": \"integer\"");
    return puts_(o, "json-value"), 0;
}

char *r1_grammar_json_schema(const char *schema, size_t len, int flags, char *err, size_t errlen) {
    struct conv c = {.err = err, .errlen = errlen, .lenient = !!(flags & R1_SCHEMA_LENIENT)};
    if (err && errlen) err[0] = 0;
    json_t *root = NULL;
    if (schema) {
        json_error_t je;
        if (!(root = json_loadb(schema, len, JSON_DECODE_ANY, &je))) {
            sch_err(&c, "the schema is not valid JSON: %s", je.text);
            return NULL;
        }
    }
    c.root = root;
    struct out rootbody = {0};
    sch_put(&c.g, BASE_RULES, strlen(BASE_RULES));
    int rc = root ? sch_value(&c, &rootbody, root, 0) : (sch_put(&rootbody, "json-object", 11), 0);
    if (!rc) {
        sch_put(&c.g, "root ::= ws ", 12);
        sch_put(&c.g, rootbody.p, rootbody.len);
        sch_put(&c.g, "\n", 1);
    }
    free(rootbody.p);
    free(c.refs);
    free(c.ref_rule);
    json_decref(root);
    if (!rc && (c.g.failed || rootbody.failed)) rc = sch_err(&c, "out of memory");
    if (rc) {
        free(c.g.p);
        return NULL;
    }
    return c.g.p;
}

char *r1_grammar_tool_call(const char *const *names, const char *const *schemas, int n, int max_calls, char *err,
                           size_t errlen) {
    struct conv c = {.err = err, .errlen = errlen};
    if (err && errlen) err[0] = 0;
    if (n <= 0) {
        sch_err(&c, "no function to call");
        return NULL;
    }
    sch_put(&c.g, BASE_RULES, strlen(BASE_RULES));
    struct out calls = {0};
    int rc = 0;
    for (int i = 0; i < n && !rc; i++) {
        json_t *schema = NULL;
        if (schemas[i]) {
            json_error_t je;
            if (!(schema = json_loads(schemas[i], JSON_DECODE_ANY, &je))) {
                rc = sch_err(&c, "the parameters of '%.60s' are not valid JSON: %s", names[i], je.text);
                break;
            }
        }
        c.root = schema, c.n_refs = 0; /* $refs are the function's own */
        char args[32];
        if (new_rule(&c, args, sizeof args)) rc = -1;
        else if (schema) rc = define(&c, args, schema, 0);
        else sch_putf(&c.g, "%s ::= json-object\n", args);
        json_decref(schema);
        if (rc) {
            char msg[256];
            snprintf(msg, sizeof msg, "%s", err && errlen ? err : "");
            c.failed = 0;
            sch_err(&c, "the parameters of '%.60s': %s", names[i], msg);
            break;
        }
        json_t *nj = json_string(names[i]);
        char *ns = nj ? json_dumps(nj, JSON_ENCODE_ANY) : NULL;
        json_decref(nj);
        if (!ns) {
            rc = sch_err(&c, "out of memory");
            break;
        }
        if (i) sch_put(&calls, " | ", 3);
        sch_put(&calls, "( ", 2);
        sch_literal(&calls, ns, strlen(ns));
        sch_putf(&calls, " ws \",\" ws \"\\\"arguments\\\"\" ws \":\" ws %s )", args);
        free(ns);
    }
    if (!rc) {
        sch_putf(&c.g, "tool-call ::= \"{\" ws \"\\\"name\\\"\" ws \":\" ws ( ");
        sch_put(&c.g, calls.p ? calls.p : "", calls.len);
        sch_putf(&c.g, " ) ws \"}\"\n");
        sch_putf(&c.g, "one-call ::= \"<tool_call>\" ws tool-call ws \"</tool_call>\"\n");
        if (max_calls > 1) sch_putf(&c.g, "root ::= ws one-call ( ws one-call ){0,%d}\n", max_calls - 1);
        else sch_putf(&c.g, "root ::= ws one-call\n");
    }
    free(calls.p);
    free(c.refs);
    free(c.ref_rule);
    if (!rc && (c.g.failed || calls.failed)) rc = sch_err(&c, "out of memory");
    if (rc) {
        free(c.g.p);
        return NULL;
    }
    return c.g.p;
}
