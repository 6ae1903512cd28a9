/*
 * schema_allof.c - the JSON schema keyword allOf (schema.c calls it): the
 * schemas it lists resolved into one, merged or distributed.
 */
#include <jansson.h>
#include <string.h>

#include "grammar/schema_int.h"

/* Keywords that say nothing about the value (merging skips a schema of
 * only these). */
static int is_annotation(const char *k) {
    static const char *ANNOT[] = {"title", "description", "default",    "examples", "$schema",
                                  "$id",   "$comment",    "deprecated", "readOnly", "writeOnly",
                                  "$defs", "definitions", "strict",     NULL};
    for (int i = 0; ANNOT[i]; i++)
        if (!strcmp(k, ANNOT[i])) return 1;
    return 0;
}

static int annotation_only(const json_t *s) {
    const char *k;
    const json_t *v;
    json_object_foreach((json_t *)s, k, v) if (!is_annotation(k)) return 0;
    return 1;
}

/* An object schema merged into into (allOf): its properties (a name
 * already there gets the allOf of both schemas), required names,
 * additionalProperties false. */
static int merge_object(struct conv *c, json_t *into, const json_t *s) {
    const json_t *type = json_object_get(s, "type"), *props = json_object_get(s, "properties"), *item;
    size_t i;
    const char *k;
    const json_t *v;
    json_object_foreach(
        (json_t *)s, k,
        v) if (strcmp(k, "type") && strcmp(k, "properties") && strcmp(k, "required") &&
               strcmp(k, "additionalProperties") &&
               !is_annotation(k)) return sch_err(c, "'allOf' merges object schemas only ('%.40s' is not one of theirs)",
                                                 k);
    if (type && !(json_is_string(type) && !strcmp(json_string_value(type), "object")))
        return sch_err(c, "'allOf' merges object schemas only");
    if (props) {
        if (!json_is_object(props)) return sch_err(c, "'properties' must be an object");
        json_t *dst = json_object_get(into, "properties");
        json_object_foreach((json_t *)props, k, v) { /* a name in both: both its schemas */
            const json_t *had = json_object_get(dst, k);
            if (json_object_set_new(dst, k, had ? json_pack("{s:[O,O]}", "allOf", had, v) : json_incref((json_t *)v)))
                return sch_err(c, "out of memory");
        }
    }
    const json_t *req = json_object_get(s, "required");
    if (req) {
        if (!json_is_array(req)) return sch_err(c, "'required' must be an array of property names");
        json_t *dst = json_object_get(into, "required");
        json_array_foreach(req, i, item) {
            size_t k;
            const json_t *have;
            int dup = 0;
            json_array_foreach(dst, k, have) dup |= json_equal(have, item);
            if (!dup && json_array_append(dst, (json_t *)item)) return sch_err(c, "out of memory");
        }
    }
    const json_t *addl = json_object_get(s, "additionalProperties");
    if (addl && json_is_false(addl)) json_object_set_new(into, "additionalProperties", json_false());
    return 0;
}

/* type t (a string or a list of them) names name */
static int has_type_name(const json_t *t, const char *name) {
    size_t i;
    const json_t *x;
    if (json_is_string(t)) return !strcmp(json_string_value(t), name);
    json_array_foreach(t, i, x) if (json_is_string(x) && !strcmp(json_string_value(x), name)) return 1;
    return 0;
}

/* A schema other than an object's merged into into (allOf): types
 * intersected, lower bounds raised, upper ones lowered; another keyword
 * in two schemas must be the same in both. */
static int merge_scalar(struct conv *c, json_t *into, const json_t *s) {
    static const char *LOWER[] = {"minimum", "exclusiveMinimum", "minLength", "minItems", NULL};
    static const char *UPPER[] = {"maximum", "exclusiveMaximum", "maxLength", "maxItems", NULL};
    const char *k;
    const json_t *v;
    json_object_foreach((json_t *)s, k, v) {
        if (is_annotation(k)) continue;
        const json_t *had = json_object_get(into, k);
        json_t *put = NULL;
        int lower = 0, upper = 0;
        for (int i = 0; LOWER[i]; i++) lower |= !strcmp(k, LOWER[i]), upper |= !strcmp(k, UPPER[i]);
        if (!had) put = json_incref((json_t *)v);
        else if (!strcmp(k, "type")) { /* the names in both */ put = json_array();
            size_t i;
            const json_t *t;
            if (json_is_string(v) && has_type_name(had, json_string_value(v))) json_array_append(put, (json_t *)v);
            json_array_foreach(v, i, t) if (json_is_string(t) && has_type_name(had, json_string_value(t)))
                json_array_append(put, (json_t *)t);
            /* integer within number */
            if (has_type_name(had, "number") && has_type_name(v, "integer") && !has_type_name(put, "integer"))
                json_array_append_new(put, json_string("integer"));
            if (has_type_name(v, "number") && has_type_name(had, "integer") && !has_type_name(put, "integer"))
                json_array_append_new(put, json_string("integer"));
            if (!json_array_size(put)) return json_decref(put), sch_err(c, "the schemas of 'allOf' share no type");
        } else if ((lower || upper) && json_is_number(v) && json_is_number(had)) {
            const double a = json_number_value(had), b = json_number_value(v);
            put = json_incref((json_t *)((lower ? b > a : b < a) ? v : had));
        } else if (json_equal(had, v)) {
            continue;
        } else {
            return sch_err(c, "'allOf' cannot merge two different '%.40s'", k);
        }
        if (json_object_set_new(into, k, put)) return sch_err(c, "out of memory");
    }
    return 0;
}

/* The schemas an allOf asks for at once, into list: $refs resolved,
 * nested allOfs opened, the schema's own keywords beside its allOf as one
 * more. */
static int all_of_members(struct conv *c, json_t *list, const json_t *s, int depth) {
    if (depth > MAX_DEPTH) return sch_err(c, "the schema nests deeper than %d", MAX_DEPTH);
    if (json_is_true(s)) return 0;
    if (!json_is_object(s)) return sch_err(c, "'allOf' lists schemas (objects)");
    const json_t *ref = json_object_get(s, "$ref"), *all = json_object_get(s, "allOf"), *item;
    if (ref) {
        const json_t *t = json_is_string(ref) ? sch_json_pointer(c->root, json_string_value(ref)) : NULL;
        if (!t) return sch_err(c, "the $ref '%.80s' in 'allOf' does not resolve", json_string_value(ref));
        return all_of_members(c, list, t, depth + 1);
    }
    if (!all) return annotation_only(s) ? 0 : json_array_append(list, (json_t *)s) ? sch_err(c, "out of memory") : 0;
    if (!json_is_array(all)) return sch_err(c, "'allOf' must be an array");
    size_t i;
    json_array_foreach(all, i, item) if (all_of_members(c, list, item, depth + 1)) return -1;
    json_t *own = json_copy((json_t *)s);
    if (!own || json_object_del(own, "allOf")) return json_decref(own), sch_err(c, "out of memory");
    int rc = annotation_only(own) ? 0 : json_array_append(list, own) ? sch_err(c, "out of memory") : 0;
    json_decref(own);
    return rc;
}

/* v of JSON type name t */
static int has_type(const json_t *v, const char *t) {
    if (!strcmp(t, "string")) return json_is_string(v);
    if (!strcmp(t, "integer"))
        return json_is_integer(v) || (json_is_real(v) && json_real_value(v) == (double)(long long)json_real_value(v));
    if (!strcmp(t, "number")) return json_is_number(v);
    if (!strcmp(t, "boolean")) return json_is_boolean(v);
    if (!strcmp(t, "null")) return json_is_null(v);
    if (!strcmp(t, "object")) return json_is_object(v);
    if (!strcmp(t, "array")) return json_is_array(v);
    return 0;
}

/* Whether schema m admits v, as its type, enum and const tell; another
 * constraint beside an enum is not checked here: an error. */
static int admits(struct conv *c, const json_t *m, const json_t *v, int *ok) {
    const char *k;
    const json_t *x;
    *ok = 1;
    json_object_foreach((json_t *)m, k, x) {
        if (!strcmp(k, "enum")) {
            size_t i;
            const json_t *e;
            int in = 0;
            if (json_is_array(x)) json_array_foreach(x, i, e) in |= json_equal(e, v);
            *ok &= in;
        } else if (!strcmp(k, "const")) {
            *ok &= json_equal(x, v);
        } else if (!strcmp(k, "type")) {
            size_t i;
            const json_t *t;
            int any = json_is_string(x) && has_type(v, json_string_value(x));
            if (json_is_array(x))
                json_array_foreach(x, i, t) any |= json_is_string(t) && has_type(v, json_string_value(t));
            *ok &= any;
        } else if (!is_annotation(k)) {
            return sch_err(c, "'allOf' with 'enum' or 'const' beside '%.40s' is not supported", k);
        }
    }
    return 0;
}

/* allOf of several schemas, as one schema written by value():
 * - one of them with anyOf / oneOf: distributed (allOf [A, anyOf [B, C]]
 *   is anyOf [allOf [A, B], allOf [A, C]]);
 * - one with enum / const: the values every other one admits;
 * - else object schemas merged (merge_object), or others' keywords
 *   (merge_scalar). */
int sch_all_of(struct conv *c, struct out *o, const json_t *s, int depth) {
    json_t *list = json_array(), *one = NULL;
    if (!list) return sch_err(c, "out of memory");
    int rc = all_of_members(c, list, s, depth + 1);
    size_t n = json_array_size(list), i, k;
    const json_t *m = NULL;
    if (!rc && n == 0) rc = (puts_(o, "json-value"), 0);
    else if (!rc && n == 1) rc = sch_value(c, o, json_array_get(list, 0), depth + 1);
    else if (!rc) {
        json_array_foreach(list, i, m) if (json_object_get(m, "anyOf") || json_object_get(m, "oneOf")) break;
        if (i < n) { /* distributed over the alternatives */
            const json_t *alts = json_object_get(m, "anyOf");
            if (!alts) alts = json_object_get(m, "oneOf");
            json_t *rest = json_copy((json_t *)m), *any = json_array(), *alt;
            if (rest) json_object_del(rest, "anyOf"), json_object_del(rest, "oneOf");
            one = json_pack("{s:o}", "anyOf", any);
            if (!rest || !one || !json_is_array(alts))
                rc = sch_err(c, json_is_array(alts) ? "out of memory" : "'anyOf' must be an array");
            json_array_foreach(alts, k, alt) {
                if (rc) break;
                json_t *parts = json_array(), *p;
                size_t j;
                json_array_foreach(list, j, p) if (j != i) json_array_append(parts, p);
                if (!annotation_only(rest)) json_array_append(parts, rest);
                json_array_append(parts, alt);
                if (json_array_append_new(any, json_pack("{s:o}", "allOf", parts))) rc = sch_err(c, "out of memory");
            }
            json_decref(rest);
        } else {
            json_array_foreach(list, i, m) if (json_object_get(m, "enum") || json_object_get(m, "const")) break;
            if (i < n) { /* the values every schema admits */
                const json_t *vals = json_object_get(m, "enum"), *v;
                json_t *keep = json_array();
                one = json_pack("{s:o}", "enum", keep);
                if (!one) rc = sch_err(c, "out of memory");
                if (!vals) vals = json_object_get(m, "const"), vals = vals ? json_pack("[O]", vals) : NULL;
                else json_incref((json_t *)vals);
                json_array_foreach(vals, k, v) {
                    int all_ok = 1, ok;
                    json_array_foreach(list, i, m) {
                        if (rc || (rc = admits(c, m, v, &ok))) break;
                        all_ok &= ok;
                    }
                    if (!rc && all_ok) json_array_append(keep, (json_t *)v);
                }
                json_decref((json_t *)vals);
                if (!rc && !json_array_size(keep)) rc = sch_err(c, "no value satisfies every schema of 'allOf'");
            } else {
                int objects = 0;
                json_array_foreach(list, i, m) objects |=
                    json_object_get(m, "properties") || json_object_get(m, "required") ||
                    json_object_get(m, "additionalProperties") || has_type_name(json_object_get(m, "type"), "object");
                one = objects ? json_pack("{s:s, s:{}, s:[]}", "type", "object", "properties", "required")
                              : json_object();
                if (!one) rc = sch_err(c, "out of memory");
                json_array_foreach(
                    list, i, m) if (rc || (rc = objects ? merge_object(c, one, m) : merge_scalar(c, one, m))) break;
            }
        }
        /* the new schema's parts are the document's own (their rules are
         * written now); only the containers are ours */
        if (!rc) rc = sch_value(c, o, one, depth + 1);
    }
    json_decref(one);
    json_decref(list);
    return rc;
}
