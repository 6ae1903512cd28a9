/*
 * test_grammar.c - grammar-constrained sampling: GBNF compile errors, JSON
 * schemas turned into grammars (and the keywords refused), the matcher on
 * byte strings, masks against one-token-at-a-time checks, and completions
 * drawn at temperature 1 from random logits over the real 151,936-token
 * R1 vocabulary: every one must parse as JSON and validate against its
 * schema (a small validator of the supported subset below).
 */
#include <jansson.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "r1infer.h"
#include "test.h"
#include "util/util.h"

#define DIR "data/tokenizers/deepseek-r1-distill-qwen"
#define RUNS 8         /* completions per schema */
#define MAX_STEPS 1500 /* tokens per completion */

/* ---------------------------------------------------------- validator */

static int validate(const json_t *v, const json_t *s, const json_t *root);

static const json_t *resolve(const json_t *root, const char *ref) {
    if (!strcmp(ref, "#")) return root;
    if (!strncmp(ref, "#/$defs/", 8)) return json_object_get(json_object_get(root, "$defs"), ref + 8);
    if (!strncmp(ref, "#/definitions/", 14)) return json_object_get(json_object_get(root, "definitions"), ref + 14);
    return NULL;
}

static int type_ok(const json_t *v, const char *t) {
    if (!strcmp(t, "string")) return json_is_string(v);
    if (!strcmp(t, "integer")) return json_is_integer(v);
    if (!strcmp(t, "number")) return json_is_number(v);
    if (!strcmp(t, "boolean")) return json_is_boolean(v);
    if (!strcmp(t, "null")) return json_is_null(v);
    if (!strcmp(t, "object")) return json_is_object(v);
    if (!strcmp(t, "array")) return json_is_array(v);
    return 0;
}

static long utf8_chars(const char *s, size_t n) {
    long c = 0;
    for (size_t i = 0; i < n; i++) c += ((unsigned char)s[i] & 0xc0) != 0x80;
    return c;
}

static int validate(const json_t *v, const json_t *s, const json_t *root) {
    if (json_is_true(s)) return 1;
    const json_t *x;
    if ((x = json_object_get(s, "$ref"))) return validate(v, resolve(root, json_string_value(x)), root);
    if ((x = json_object_get(s, "const")) && !json_equal(v, x)) return 0;
    if ((x = json_object_get(s, "enum"))) {
        size_t i;
        const json_t *e;
        int found = 0;
        json_array_foreach(x, i, e) found |= json_equal(v, e);
        if (!found) return 0;
    }
    if ((x = json_object_get(s, "anyOf")) || (x = json_object_get(s, "oneOf"))) {
        size_t i;
        const json_t *e;
        int n = 0;
        json_array_foreach(x, i, e) n += validate(v, e, root);
        if (!n) return 0;
    }
    if ((x = json_object_get(s, "type"))) {
        if (json_is_string(x) && !type_ok(v, json_string_value(x))) return 0;
        if (json_is_array(x)) {
            size_t i;
            const json_t *e;
            int ok = 0;
            json_array_foreach(x, i, e) ok |= type_ok(v, json_string_value(e));
            if (!ok) return 0;
        }
    }
    if (json_is_string(v)) {
        long n = utf8_chars(json_string_value(v), json_string_length(v));
        if ((x = json_object_get(s, "minLength")) && n < json_integer_value(x)) return 0;
        if ((x = json_object_get(s, "maxLength")) && n > json_integer_value(x)) return 0;
    }
    if (json_is_array(v)) {
        long n = (long)json_array_size(v);
        if ((x = json_object_get(s, "minItems")) && n < json_integer_value(x)) return 0;
        if ((x = json_object_get(s, "maxItems")) && n > json_integer_value(x)) return 0;
        const json_t *items = json_object_get(s, "items");
        size_t i;
        const json_t *e;
        if (items) json_array_foreach(v, i, e) if (!validate(e, items, root)) return 0;
    }
    if (json_is_object(v)) {
        const json_t *props = json_object_get(s, "properties"), *addl = json_object_get(s, "additionalProperties");
        size_t i;
        const json_t *e;
        json_array_foreach(json_object_get(s, "required"), i,
                           e) if (!json_object_get(v, json_string_value(e))) return 0;
        const char *k;
        json_object_foreach((json_t *)v, k, e) {
            const json_t *ps = props ? json_object_get(props, k) : NULL;
            if (ps && !validate(e, ps, root)) return 0;
            if (!ps && addl && json_is_false(addl)) return 0;
            if (!ps && addl && json_is_object(addl) && !validate(e, addl, root)) return 0;
        }
    }
    return 1;
}

/* -------------------------------------------------------------- tests */

static void test_gbnf_errors(void) {
    static const char *bad[] = {
        "",
        "root ::= \"a",
        "root ::= [a-",
        "root ::= (\"a\"",
        "root ::= foo",
        "root ::= \"a\"\nroot ::= \"b\"",
        "root ::= \"\\q\"",
        "root ::= \"a\"{3,1}",
        "root ::= \"a\"{99999}",
        "root ::= *",
        "x ::= \"a\"",
        "root ::= \"\\xZZ\"",
        "root ::= [z-a]",
        "::= \"a\"",
        "root ::= \"a\" )",
        "root := \"a\"",
    };
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        char err[256];
        r1_grammar_t *g = r1_grammar_parse(bad[i], strlen(bad[i]), err, sizeof err);
        CHECK(!g && err[0], "grammar %zu '%s' should fail with a message (got '%s')", i, bad[i], err);
        r1_grammar_free(g);
    }
}

/* A grammar's verdict on whole strings (bytes, through the matcher). */
static void test_strings(const r1_gvocab_t *v) {
    static const struct {
        const char *grammar, *text;
        int ok; /* 1 complete, 0 rejected, 2 a valid prefix, not complete */
    } cases[] = {
        {"root ::= \"ab\" | \"ac\"", "ac", 1},
        {"root ::= \"ab\" | \"ac\"", "ad", 0},
        {"root ::= \"ab\" | \"ac\"", "a", 2},
        {"root ::= [a-c]+ \"!\"", "abcab!", 1},
        {"root ::= [a-c]+ \"!\"", "!", 0},
        {"root ::= [^x]* \"x\"", "héllo wörld ✓x", 1},
        {"root ::= [а-я]{2,3}", "жук", 1},
        {"root ::= [а-я]{2,3}", "жукк", 0},
        {"root ::= [а-я]{2,3}", "ж", 2},
        {"root ::= \"a\"{2} \"b\"?", "aab", 1},
        {"root ::= \"a\"{2} \"b\"?", "aa", 1},
        {"root ::= \"a\"{2} \"b\"?", "aaa", 0},
        {"root ::= x x\nx ::= (\"(\" x \")\")?", "(())()", 1},
        {"root ::= x x\nx ::= (\"(\" x \")\")?", "(()))", 0},
        {"root ::= . . \"\\n\"  # any two characters", "🙂é\n", 1},
        {"root ::= \"\\u00e9\\x41\"", "éA", 1},
        /* a UTF-8 prefix is kept only while some byte can finish it as a
         * character: ED A0..BF would start a surrogate (U+D800..DFFF) */
        {"root ::= [^\"]*", "\xed\xbd", 0},
        {"root ::= [^\"]*", "\xed\xa0", 0},
        {"root ::= [^\"]*", "\xed\x9f\xbf", 1},
        {"root ::= [^\"]*", "\xed\x9f", 2},
        {"root ::= [^\"]*", "\xee\x80\x80", 1},
        {"root ::= [\\u0000-\\uFFFF]*", "\xed", 2},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        char err[256];
        r1_grammar_t *g = r1_grammar_parse(cases[i].grammar, strlen(cases[i].grammar), err, sizeof err);
        CHECK(g, "case %zu: %s", i, err);
        if (!g) continue;
        r1_gmatch_t *m = r1_gmatch_new(g, v);
        int rc = r1_gmatch_accept_bytes(m, cases[i].text, strlen(cases[i].text));
        int got = rc < 0 ? 0 : r1_gmatch_done(m) ? 1 : 2;
        CHECK(got == cases[i].ok, "case %zu: '%s' on '%s': got %d, want %d", i, cases[i].text, cases[i].grammar, got,
              cases[i].ok);
        r1_gmatch_free(m);
        r1_grammar_free(g);
    }
    /* left recursion is refused, not a crash, also through nullable rules */
    static const char *lr[] = {"root ::= root \"a\" | \"b\"", "root ::= e x\ne ::= \"q\"?\nx ::= root | \"z\"",
                               "root ::= (\"a\"* root)? \"b\""};
    for (int i = 0; i < 3; i++) {
        char err[256];
        r1_grammar_t *g = r1_grammar_parse(lr[i], strlen(lr[i]), err, sizeof err);
        CHECK(!g && strstr(err, "left-recursive"), "left recursion %d: got '%s'", i, err);
        r1_grammar_free(g);
    }
}

static const char *SCHEMAS[] = {
    "{\"type\":\"object\",\"properties\":{\"name\":{\"type\":\"string\",\"maxLength\":12},\"age\":{\"type\":"
    "\"integer\"},\"ok\":{\"type\":\"boolean\"}},\"required\":[\"name\",\"age\"]}",
    "{\"type\":\"object\",\"properties\":{\"color\":{\"enum\":[\"red\",\"green\",\"blue\",42,null]},\"tags\":"
    "{\"type\":\"array\",\"items\":{\"type\":\"string\",\"maxLength\":5},\"minItems\":1,\"maxItems\":3}},"
    "\"required\":[\"color\",\"tags\"],\"additionalProperties\":false}",
    "{\"type\":\"array\",\"items\":{\"type\":\"number\"},\"maxItems\":6}",
    "{\"$defs\":{\"node\":{\"type\":\"object\",\"properties\":{\"v\":{\"type\":\"integer\"},\"kids\":{\"type\":"
    "\"array\",\"items\":{\"$ref\":\"#/$defs/node\"},\"maxItems\":2}},\"required\":[\"v\"]}},\"$ref\":"
    "\"#/$defs/node\"}",
    "{\"type\":\"object\",\"properties\":{\"a\":{\"type\":[\"string\",\"null\"],\"maxLength\":4},\"b\":{\"anyOf\":"
    "[{\"type\":\"integer\"},{\"const\":\"x\"}]},\"c\":{\"type\":\"string\",\"minLength\":2,\"maxLength\":3}},"
    "\"required\":[\"b\",\"c\"]}",
    "{\"type\":\"object\",\"properties\":{\"x\":{\"type\":\"object\",\"properties\":{\"y\":{\"type\":\"null\"},"
    "\"z\":{\"const\":true}}}},\"required\":[\"x\"],\"title\":\"T\",\"description\":\"nested\"}",
    "{\"type\":\"object\",\"properties\":{\"one\":{\"type\":\"string\",\"maxLength\":3}},\"required\":[]}",
    "{\"enum\":[\"yes\",\"no\",\"maybe\"]}",
    "{\"type\":\"object\",\"additionalProperties\":{\"type\":\"integer\"},\"maxProperties2\":0}",
};

static void test_schema_errors(void) {
    static const char *bad[] = {
        "{\"type\":\"string\",\"pattern\":\"^a{2,1}$\"}",
        "{\"type\":\"string\",\"format\":\"email\"}",
        "{\"type\":\"string\",\"pattern\":\"a\\\\b\"}",
        "{\"type\":\"string\",\"pattern\":\"^a(?=b)$\"}",
        "{\"type\":\"string\",\"pattern\":\"^(a$\"}",
        "{\"type\":\"string\",\"pattern\":\"^a)$\"}",
        "{\"type\":\"string\",\"pattern\":\"^(a)\\\\1$\"}",
        "{\"type\":\"string\",\"pattern\":\"^[z-a]$\"}",
        "{\"minimum\":1}",
        "{\"type\":\"number\",\"minimum\":0.12345678901234567}",
        "{\"type\":\"number\",\"minimum\":\"3\"}",
        "{\"type\":\"wat\"}",
        "{\"$ref\":\"#/$defs/missing\"}",
        "{\"type\":\"object\",\"properties\":{\"a\":{}},\"required\":[\"b\"]}",
        "{\"allOf\":[{\"enum\":[1]},{\"enum\":[2]}]}",
        "[1,2",
        "{\"enum\":[]}",
        "{\"type\":\"array\",\"minItems\":3,\"maxItems\":1}",
        "7",
        "{\"type\":\"array\",\"uniqueItems\":true}",
    };
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        char err[256];
        char *g = r1_grammar_json_schema(bad[i], strlen(bad[i]), 0, err, sizeof err);
        CHECK(!g && err[0], "schema %zu '%s' should be refused with a message", i, bad[i]);
        free(g);
    }
}

/* Schemas whose grammar is only literals: an object with no properties and
 * no others allowed (what the openai SDK sends for a pydantic model without
 * fields and a tool without arguments) and an empty array. Each compiles,
 * parses, accepts its one value (with inner whitespace) and nothing else. */
static void test_schema_literals(const r1_gvocab_t *v) {
    static const struct {
        const char *schema, *text;
        int ok;
    } cases[] = {
        {"{\"type\":\"object\",\"properties\":{},\"additionalProperties\":false}", "{}", 1},
        {"{\"type\":\"object\",\"properties\":{},\"additionalProperties\":false}", "{\n  }", 1},
        {"{\"type\":\"object\",\"properties\":{},\"additionalProperties\":false}", "{\"a\":1}", 0},
        {"{\"type\":\"object\",\"additionalProperties\":false}", "{}", 1},
        {"{\"type\":\"array\",\"maxItems\":0}", "[ ]", 1},
        {"{\"type\":\"array\",\"maxItems\":0}", "[1]", 0},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        char err[256] = "";
        char *text = r1_grammar_json_schema(cases[i].schema, strlen(cases[i].schema), 0, err, sizeof err);
        r1_grammar_t *g = text ? r1_grammar_parse(text, strlen(text), err, sizeof err) : NULL;
        CHECK(g, "literal schema %zu '%s': %s\n%s", i, cases[i].schema, err, text ? text : "");
        free(text);
        if (!g) continue;
        r1_gmatch_t *m = r1_gmatch_new(g, v);
        int rc = r1_gmatch_accept_bytes(m, cases[i].text, strlen(cases[i].text));
        int got = rc == 0 && r1_gmatch_done(m);
        CHECK(got == cases[i].ok, "literal schema %zu on '%s': accepted %d, want %d", i, cases[i].text, got,
              cases[i].ok);
        r1_gmatch_free(m);
        r1_grammar_free(g);
    }
}

/* 1 if text matches schema's grammar completely (the schema must compile) */
static int schema_accepts(const r1_gvocab_t *v, const char *schema, const char *text) {
    char err[256] = "";
    char *g_text = r1_grammar_json_schema(schema, strlen(schema), 0, err, sizeof err);
    r1_grammar_t *g = g_text ? r1_grammar_parse(g_text, strlen(g_text), err, sizeof err) : NULL;
    CHECK(g, "schema '%s': %s", schema, err);
    free(g_text);
    if (!g) return -1;
    r1_gmatch_t *m = r1_gmatch_new(g, v);
    int ok = r1_gmatch_accept_bytes(m, text, strlen(text)) == 0 && r1_gmatch_done(m);
    r1_gmatch_free(m);
    r1_grammar_free(g);
    return ok;
}

/* Integer ranges against the arithmetic on every integer in [-1200, 1200]
 * (and a few far ones), for bounds of 1 to 4 digits, open on either side,
 * exclusive, fractional and draft 4's boolean exclusives; then formats,
 * tuples, $ref to any JSON pointer and allOf of object schemas. */
static void test_schema_keywords(const r1_gvocab_t *v) {
    /* R1_TEST_QUICK (the sanitizer run): every 7th value of the sweeps */
    const int step = getenv("R1_TEST_QUICK") ? 7 : 1;
    static const struct {
        const char *bounds;
        double lo, hi; /* the integers expected: lo <= x <= hi */
    } ranges[] = {
        {"\"minimum\":-5,\"maximum\":120", -5, 120},
        {"\"minimum\":0", 0, 1e18},
        {"\"minimum\":10", 10, 1e18},
        {"\"minimum\":-37", -37, 1e18},
        {"\"maximum\":-3", -1e18, -3},
        {"\"maximum\":999", -1e18, 999},
        {"\"exclusiveMinimum\":0,\"maximum\":1000", 1, 1000},
        {"\"minimum\":2.5,\"exclusiveMaximum\":17", 3, 16},
        {"\"minimum\":5,\"exclusiveMinimum\":true,\"maximum\":5000", 6, 5000},
        {"\"minimum\":-1000,\"maximum\":-999", -1000, -999},
        {"\"minimum\":7,\"maximum\":7", 7, 7},
        {"\"minimum\":99,\"maximum\":1001", 99, 1001},
        {"\"minimum\":-1010,\"maximum\":1099", -1010, 1099},
    };
    int bad = 0, n = 0;
    for (size_t i = 0; i < sizeof ranges / sizeof *ranges; i++) {
        char schema[160];
        snprintf(schema, sizeof schema, "{\"type\":\"integer\",%s}", ranges[i].bounds);
        char err[256] = "";
        char *g_text = r1_grammar_json_schema(schema, strlen(schema), 0, err, sizeof err);
        r1_grammar_t *g = g_text ? r1_grammar_parse(g_text, strlen(g_text), err, sizeof err) : NULL;
        CHECK(g, "integer range %s: %s", schema, err);
        free(g_text);
        if (!g) continue;
        static const long far[] = {12345, -12345, 100000, -100000, 999999999999999L};
        for (long x = -1205; x <= 1205 + 5; x += x < 1205 ? step : 1) {
            long val = x <= 1205 ? x : far[x - 1206];
            char text[32];
            snprintf(text, sizeof text, "%ld", val);
            r1_gmatch_t *m = r1_gmatch_new(g, v);
            int ok = r1_gmatch_accept_bytes(m, text, strlen(text)) == 0 && r1_gmatch_done(m);
            r1_gmatch_free(m);
            int want = val >= ranges[i].lo && val <= ranges[i].hi;
            n++;
            if (ok != want && bad++ < 10) fprintf(stderr, "%s: %s accepted %d, want %d\n", schema, text, ok, want);
        }
        r1_grammar_free(g);
    }
    CHECK(bad == 0, "integer ranges: %d of %d values wrong", bad, n);
    printf("integer ranges: %d values checked\n", n);
    /* numbers between decimal bounds (inclusive or exclusive): integer parts
     * 0..1200 of both signs with fractions near the bounds', against the
     * arithmetic */
    static const struct {
        const char *bounds;
        double lo, hi;
        int lo_x, hi_x; /* exclusive */
    } nranges[] = {
        {"\"minimum\":0,\"maximum\":1", 0, 1, 0, 0},
        {"\"minimum\":-90,\"maximum\":90", -90, 90, 0, 0},
        {"\"minimum\":-1000,\"maximum\":-3", -1000, -3, 0, 0},
        {"\"minimum\":7", 7, 1e18, 0, 0},
        {"\"maximum\":-1", -1e18, -1, 0, 0},
        {"\"minimum\":-5,\"maximum\":1100", -5, 1100, 0, 0},
        {"\"minimum\":0.25,\"maximum\":3.5", 0.25, 3.5, 0, 0},
        {"\"exclusiveMinimum\":0,\"exclusiveMaximum\":1", 0, 1, 1, 1},
        {"\"exclusiveMinimum\":-2.5,\"maximum\":-0.75", -2.5, -0.75, 1, 0},
        {"\"minimum\":-0.5,\"exclusiveMaximum\":0.5", -0.5, 0.5, 0, 1},
        {"\"exclusiveMinimum\":1.25", 1.25, 1e18, 1, 0},
        {"\"exclusiveMaximum\":-0.001", -1e18, -0.001, 0, 1},
        {"\"minimum\":0.1,\"maximum\":0.1", 0.1, 0.1, 0, 0},
        {"\"minimum\":2.5,\"exclusiveMaximum\":17,\"maximum\":20", 2.5, 17, 0, 1},
        {"\"minimum\":3,\"exclusiveMinimum\":true,\"maximum\":3.05", 3, 3.05, 1, 0},
        {"\"exclusiveMinimum\":0.999,\"exclusiveMaximum\":1.001", 0.999, 1.001, 1, 1},
    };
    const size_t fstep = step > 1 ? 2 : 1; /* quick: every other fraction */
    static const char *fracs[] = {
        "",      ".0",  ".000",  ".5",  ".25",   ".2500", ".2499",  ".2501",  ".999",  ".001",
        ".0010", ".75", ".7499", ".05", ".0501", ".1",    ".09999", ".10001", ".9991", ".0000000000000001"};
    bad = 0, n = 0;
    for (size_t i = 0; i < sizeof nranges / sizeof *nranges; i++) {
        char schema[160];
        snprintf(schema, sizeof schema, "{\"type\":\"number\",%s}", nranges[i].bounds);
        char err2[256] = "";
        char *g_text = r1_grammar_json_schema(schema, strlen(schema), 0, err2, sizeof err2);
        r1_grammar_t *g = g_text ? r1_grammar_parse(g_text, strlen(g_text), err2, sizeof err2) : NULL;
        CHECK(g, "number range %s: %s", schema, err2);
        free(g_text);
        if (!g) continue;
        for (int ip = 0; ip <= 1200; ip += ip < 12 ? 1 : step)
            for (int neg = 0; neg < 2; neg++)
                for (size_t f = 0; f < sizeof fracs / sizeof *fracs; f += fstep) {
                    char text[48];
                    snprintf(text, sizeof text, "%s%d%s", neg ? "-" : "", ip, fracs[f]);
                    const double x = strtod(text, NULL);
                    r1_gmatch_t *m = r1_gmatch_new(g, v);
                    int ok = r1_gmatch_accept_bytes(m, text, strlen(text)) == 0 && r1_gmatch_done(m);
                    r1_gmatch_free(m);
                    int want = (nranges[i].lo_x ? x > nranges[i].lo : x >= nranges[i].lo) &&
                               (nranges[i].hi_x ? x < nranges[i].hi : x <= nranges[i].hi);
                    if (neg && x == 0 && !ok) continue; /* -0 may be left out: 0 is written without a sign */
                    n++;
                    /* over 15 digits (a leading 0 not counted) the grammar may refuse a value, never accept
                     * one whose double is out of range */
                    const int digits = (int)strlen(text) - neg - (ip == 0) - (fracs[f][0] == '.');
                    if (digits > 15 && !ok) continue;
                    if (ok != want && bad++ < 10)
                        fprintf(stderr, "%s: %s accepted %d, want %d\n", schema, text, ok, want);
                }
        r1_grammar_free(g);
    }
    CHECK(bad == 0, "number ranges: %d of %d values wrong", bad, n);
    printf("number ranges: %d values checked\n", n);
    char err[256];
    static const char *empty = "{\"type\":\"integer\",\"minimum\":5,\"maximum\":4}";
    char *none = r1_grammar_json_schema(empty, strlen(empty), 0, err, sizeof err);
    CHECK(!none && strstr(err, "no integer"), "an empty range is refused: %s", err);
    free(none);
    static const struct {
        const char *schema, *text;
        int ok;
    } cases[] = {
        {"{\"type\":\"string\",\"pattern\":\"^[a-z]{2,4}-\\\\d+$\"}", "\"ab-12\"", 1},
        {"{\"type\":\"string\",\"pattern\":\"^[a-z]{2,4}-\\\\d+$\"}", "\"a-1\"", 0},
        {"{\"type\":\"string\",\"pattern\":\"^[a-z]{2,4}-\\\\d+$\"}", "\"abcde-1\"", 0},
        {"{\"type\":\"string\",\"pattern\":\"^(foo|bar)?baz$\"}", "\"baz\"", 1},
        {"{\"type\":\"string\",\"pattern\":\"^(foo|bar)?baz$\"}", "\"barbaz\"", 1},
        {"{\"type\":\"string\",\"pattern\":\"^(foo|bar)?baz$\"}", "\"quxbaz\"", 0},
        {"{\"type\":\"string\",\"pattern\":\"^\\\\w+@\\\\w+\\\\.com$\"}", "\"a_1@b.com\"", 1},
        {"{\"type\":\"string\",\"pattern\":\"^\\\\w+@\\\\w+\\\\.com$\"}", "\"a@bxcom\"", 0},
        {"{\"type\":\"string\",\"pattern\":\"^a.c$\"}", "\"abc\"", 1},
        {"{\"type\":\"string\",\"pattern\":\"^a.c$\"}", "\"a\\\"c\"", 0},
        {"{\"type\":\"string\",\"pattern\":\"^say \\\"hi\\\"[!?]*$\"}", "\"say \\\"hi\\\"!?\"", 1},
        {"{\"type\":\"string\",\"pattern\":\"^[^0-9]{1,3}(?:x|)$\"}", "\"abx\"", 1},
        {"{\"type\":\"string\",\"pattern\":\"^[^0-9]{1,3}(?:x|)$\"}", "\"a1\"", 0},
        {"{\"type\":\"string\",\"pattern\":\"^[\\\\s,]+$\"}", "\" ,\\n\"", 1},
        {"{\"pattern\":\"^ab?$\"}", "\"a\"", 1},
        {"{\"pattern\":\"^ab?$\"}", "7", 0},
        {"{\"type\":\"string\",\"format\":\"date\"}", "\"2024-02-29\"", 1},
        {"{\"type\":\"string\",\"format\":\"date\"}", "\"2024-13-01\"", 0},
        {"{\"type\":\"string\",\"format\":\"time\"}", "\"23:59:60Z\"", 0},
        {"{\"type\":\"string\",\"format\":\"time\"}", "\"12:30:00.125+05:30\"", 1},
        {"{\"type\":\"string\",\"format\":\"date-time\"}", "\"2024-01-01T00:00:00Z\"", 1},
        {"{\"type\":\"string\",\"format\":\"date-time\"}", "\"2024-01-01\"", 0},
        {"{\"type\":\"string\",\"format\":\"uuid\"}", "\"123e4567-e89b-12d3-a456-426614174000\"", 1},
        {"{\"type\":\"string\",\"format\":\"uuid\"}", "\"123e4567e89b12d3a456426614174000\"", 0},
        {"{\"type\":\"array\",\"prefixItems\":[{\"type\":\"integer\"},{\"type\":\"string\"}],\"items\":false}",
         "[1, \"a\"]", 1},
        {"{\"type\":\"array\",\"prefixItems\":[{\"type\":\"integer\"},{\"type\":\"string\"}],\"items\":false}", "[1]",
         0},
        {"{\"type\":\"array\",\"prefixItems\":[{\"type\":\"integer\"},{\"type\":\"string\"}],\"items\":false}",
         "[1,\"a\",2]", 0},
        {"{\"type\":\"array\",\"prefixItems\":[{\"type\":\"integer\"}],\"items\":{\"type\":\"string\"}}",
         "[1,\"a\",\"b\"]", 1},
        {"{\"type\":\"array\",\"items\":[{\"type\":\"integer\"},{\"type\":\"string\"}],\"additionalItems\":"
         "{\"type\":\"integer\"}}",
         "[1,\"a\",2,3]", 1},
        {"{\"type\":\"array\",\"items\":[{\"type\":\"integer\"}],\"maxItems\":2}", "[1,2,3]", 0},
        {"{\"type\":\"object\",\"properties\":{\"a\":{\"type\":\"integer\"},\"b\":{\"$ref\":\"#/properties/a\"}},"
         "\"required\":[\"a\",\"b\"]}",
         "{\"a\":1,\"b\":2}", 1},
        {"{\"type\":\"object\",\"properties\":{\"a\":{\"type\":\"integer\"},\"b\":{\"$ref\":\"#/properties/a\"}},"
         "\"required\":[\"a\",\"b\"]}",
         "{\"a\":1,\"b\":\"x\"}", 0},
        {"{\"type\":\"array\",\"items\":{\"$ref\":\"#/$defs/x~1y\"},\"$defs\":{\"x/y\":{\"const\":7}}}", "[7,7]", 1},
        {"{\"allOf\":[{\"type\":\"object\",\"properties\":{\"a\":{\"type\":\"integer\"}},\"required\":[\"a\"]},"
         "{\"$ref\":\"#/$defs/B\"}],\"$defs\":{\"B\":{\"type\":\"object\",\"properties\":{\"b\":{\"type\":"
         "\"string\"}},\"required\":[\"b\"]}}}",
         "{\"a\":1,\"b\":\"x\"}", 1},
        {"{\"allOf\":[{\"type\":\"object\",\"properties\":{\"a\":{\"type\":\"integer\"}},\"required\":[\"a\"]},"
         "{\"$ref\":\"#/$defs/B\"}],\"$defs\":{\"B\":{\"type\":\"object\",\"properties\":{\"b\":{\"type\":"
         "\"string\"}},\"required\":[\"b\"]}}}",
         "{\"a\":1}", 0},
        /* unanchored patterns: anything before and after */
        {"{\"type\":\"string\",\"pattern\":\"[0-9]+\"}", "\"ab12c\"", 1},
        {"{\"type\":\"string\",\"pattern\":\"[0-9]+\"}", "\"abc\"", 0},
        {"{\"type\":\"string\",\"pattern\":\"^ab\"}", "\"abzz\"", 1},
        {"{\"type\":\"string\",\"pattern\":\"^ab\"}", "\"zab\"", 0},
        {"{\"type\":\"string\",\"pattern\":\"c\\\\$\"}", "\"xc$y\"", 1},
        /* allOf: enums intersected, types filtering them */
        {"{\"allOf\":[{\"enum\":[\"a\",\"b\",\"c\"]},{\"enum\":[\"b\",\"c\",\"d\"]}]}", "\"b\"", 1},
        {"{\"allOf\":[{\"enum\":[\"a\",\"b\",\"c\"]},{\"enum\":[\"b\",\"c\",\"d\"]}]}", "\"a\"", 0},
        {"{\"allOf\":[{\"enum\":[1,\"x\",null]},{\"type\":[\"integer\",\"null\"]}]}", "\"x\"", 0},
        {"{\"allOf\":[{\"enum\":[1,\"x\",null]},{\"type\":[\"integer\",\"null\"]}]}", "null", 1},
        /* allOf over anyOf: distributed */
        {"{\"allOf\":[{\"type\":\"object\",\"properties\":{\"a\":{\"type\":\"integer\"}},\"required\":[\"a\"]},"
         "{\"anyOf\":[{\"properties\":{\"b\":{\"const\":1}},\"required\":[\"b\"]},"
         "{\"properties\":{\"c\":{\"const\":2}},\"required\":[\"c\"]}]}]}",
         "{\"a\":5,\"c\":2}", 1},
        {"{\"allOf\":[{\"type\":\"object\",\"properties\":{\"a\":{\"type\":\"integer\"}},\"required\":[\"a\"]},"
         "{\"anyOf\":[{\"properties\":{\"b\":{\"const\":1}},\"required\":[\"b\"]},"
         "{\"properties\":{\"c\":{\"const\":2}},\"required\":[\"c\"]}]}]}",
         "{\"a\":5}", 0},
        /* a property in two merged schemas: both hold */
        {"{\"allOf\":[{\"properties\":{\"n\":{\"type\":\"integer\",\"minimum\":0}},\"required\":[\"n\"]},"
         "{\"properties\":{\"n\":{\"type\":\"integer\",\"maximum\":9}}}]}",
         "{\"n\":12}", 0},
        {"{\"allOf\":[{\"properties\":{\"n\":{\"type\":\"integer\",\"minimum\":0}},\"required\":[\"n\"]},"
         "{\"properties\":{\"n\":{\"type\":\"integer\",\"maximum\":9}}}]}",
         "{\"n\":7}", 1},
        /* prefixItems given as one schema: the items' */
        {"{\"type\":\"array\",\"prefixItems\":{\"type\":\"string\"}}", "[\"a\",\"b\"]", 1},
        {"{\"type\":\"array\",\"prefixItems\":{\"type\":\"string\"}}", "[1]", 0},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        int got = schema_accepts(v, cases[i].schema, cases[i].text);
        CHECK(got == cases[i].ok, "schema %s on %s: accepted %d, want %d", cases[i].schema, cases[i].text, got,
              cases[i].ok);
    }
    /* a pattern the grammar cannot express: refused, or (lenient) an unconstrained string beside the
     * rest of the schema, still enforced; a malformed pattern is refused either way */
    static const char *look = "{\"type\":\"object\",\"properties\":{\"a\":{\"type\":\"string\",\"pattern\":"
                              "\"^(?=a)a$\"},\"n\":{\"type\":\"integer\"}},\"required\":[\"a\",\"n\"]}";
    char *strict = r1_grammar_json_schema(look, strlen(look), 0, err, sizeof err);
    CHECK(!strict && strstr(err, "lookarounds"), "a lookahead refused when strict: %s", strict ? "accepted" : err);
    free(strict);
    char *lenient = r1_grammar_json_schema(look, strlen(look), R1_SCHEMA_LENIENT, err, sizeof err);
    r1_grammar_t *lg = lenient ? r1_grammar_parse(lenient, strlen(lenient), err, sizeof err) : NULL;
    CHECK(lg, "a lookahead left unenforced when lenient: %s", err);
    if (lg) {
        static const struct {
            const char *text;
            int ok;
        } lt[] = {{"{\"a\":\"zz\",\"n\":1}", 1}, {"{\"a\":\"zz\",\"n\":\"1\"}", 0}};
        for (int i = 0; i < 2; i++) {
            r1_gmatch_t *m = r1_gmatch_new(lg, v);
            int ok = r1_gmatch_accept_bytes(m, lt[i].text, strlen(lt[i].text)) == 0 && r1_gmatch_done(m);
            r1_gmatch_free(m);
            CHECK(ok == lt[i].ok, "lenient lookahead schema on %s: accepted %d", lt[i].text, ok);
        }
    }
    r1_grammar_free(lg);
    free(lenient);
    static const char *broken = "{\"type\":\"string\",\"pattern\":\"^(?=a)(b$\"}";
    char *bg = r1_grammar_json_schema(broken, strlen(broken), R1_SCHEMA_LENIENT, err, sizeof err);
    CHECK(!bg, "a malformed pattern refused even when lenient");
    free(bg);
}

/* The mask against r1_gmatch_allows on every token, in a few states. */
static void test_mask(const r1_gvocab_t *v, int vocab) {
    char err[256];
    char *text = r1_grammar_json_schema(SCHEMAS[0], strlen(SCHEMAS[0]), 0, err, sizeof err);
    r1_grammar_t *g = text ? r1_grammar_parse(text, strlen(text), err, sizeof err) : NULL;
    CHECK(g, "schema 0: %s", err);
    free(text);
    if (!g) return;
    r1_gmatch_t *m = r1_gmatch_new(g, v);
    static const char *steps[] = {"", "{", "\"name\"", ": \"b", "é", "\\u00", "e9\", \"age\": 1"};
    int bad = 0;
    long allowed = 0;
    for (size_t s = 0; s < sizeof steps / sizeof *steps; s++) {
        CHECK(r1_gmatch_accept_bytes(m, steps[s], strlen(steps[s])) == 0, "step '%s' refused", steps[s]);
        double t0 = r1_now();
        const uint64_t *bits = r1_gmatch_mask(m);
        double t1 = r1_now();
        for (int id = 0; id < vocab; id++) {
            int b = (int)(bits[id >> 6] >> (id & 63) & 1);
            allowed += b;
            if (b != r1_gmatch_allows(m, id) && bad++ < 5) fprintf(stderr, "step %zu: token %d mask %d\n", s, id, b);
        }
        printf("state %zu: mask %.2f ms, %d one-token checks %.2f ms\n", s, 1e3 * (t1 - t0), vocab,
               1e3 * (r1_now() - t1));
    }
    CHECK(bad == 0, "the mask disagrees with r1_gmatch_allows on %d tokens", bad);
    CHECK(allowed > 1000, "the mask allows only %ld tokens over the steps", allowed);
    r1_gmatch_free(m);
    r1_grammar_free(g);
}

static uint64_t rng_state = 88172645463325252ull;
static float frand(void) {
    rng_state ^= rng_state << 13, rng_state ^= rng_state >> 7, rng_state ^= rng_state << 17;
    return (float)((rng_state >> 11) * (1.0 / 9007199254740992.0));
}

/* RUNS completions per schema at temperature 1 on random logits. */
static void test_sampling(const r1_tokenizer_t *t, const r1_gvocab_t *v, int vocab, int32_t eos) {
    float *logits = malloc((size_t)vocab * sizeof *logits);
    int32_t *ids = malloc(MAX_STEPS * sizeof *ids);
    long tokens = 0, hits = 0, misses = 0;
    double t0 = r1_now();
    for (size_t k = 0; k < sizeof SCHEMAS / sizeof *SCHEMAS; k++) {
        char err[256];
        char *text = r1_grammar_json_schema(SCHEMAS[k], strlen(SCHEMAS[k]), 0, err, sizeof err);
        if (k == 8) { /* an unknown keyword is refused */
            CHECK(!text, "schema 8 has an unknown keyword and must be refused");
            free(text);
            continue;
        }
        r1_grammar_t *g = text ? r1_grammar_parse(text, strlen(text), err, sizeof err) : NULL;
        CHECK(g, "schema %zu: %s\n%s", k, err, text ? text : "");
        free(text);
        if (!g) continue;
        json_t *schema = json_loads(SCHEMAS[k], 0, NULL);
        int valid = 0;
        for (int run = 0; run < RUNS; run++) {
            struct r1_sampler_params p = r1_sampler_defaults();
            p.temperature = 1.0f, p.top_p = 1.0f, p.seed = 1000 * k + (uint64_t)run;
            r1_sampler_t *s = r1_sampler_new(&p, vocab);
            r1_gmatch_t *m = r1_gmatch_new(g, v);
            int n = 0, ended = 0;
            while (n < MAX_STEPS && !ended) {
                for (int i = 0; i < vocab; i++) logits[i] = 4.0f * frand();
                int32_t id = r1_sampler_sample_grammar(s, logits, m);
                if (id < 0 || r1_gmatch_accept(m, id)) break;
                if (id == eos) ended = 1;
                else ids[n++] = id;
                if (r1_gmatch_finished(m)) ended = 1;
            }
            tokens += n;
            char *out = NULL;
            long len = r1_tokenizer_decode(t, ids, (size_t)n, 0, &out);
            json_error_t je;
            json_t *doc = ended && len >= 0 ? json_loadb(out, (size_t)len, JSON_DECODE_ANY, &je) : NULL;
            int ok = doc && validate(doc, schema, schema);
            valid += ok;
            if (!ok)
                fprintf(stderr, "schema %zu run %d (%s): %.300s\n", k, run, ended ? "ended" : "unfinished",
                        out ? out : "");
            long h, mi;
            r1_gmatch_stats(m, &h, &mi);
            hits += h, misses += mi;
            json_decref(doc);
            free(out);
            r1_gmatch_free(m);
            r1_sampler_free(s);
        }
        CHECK(valid == RUNS, "schema %zu: %d of %d completions parse and validate", k, valid, RUNS);
        json_decref(schema);
        r1_grammar_free(g);
    }
    double dt = r1_now() - t0;
    printf("random logits: %ld tokens in %.2f s (%.2f ms/token incl. the 151936-logit draw), mask cache %ld hits, "
           "%ld misses\n",
           tokens, dt, 1e3 * dt / (tokens ? tokens : 1), hits, misses);
    free(logits);
    free(ids);
}

int main(void) {
    test_gbnf_errors();
    test_schema_errors();
    r1_tokenizer_t *t = r1_tokenizer_load(DIR);
    CHECK(t, "tokenizer: %s", r1_last_error());
    if (!t) return TEST_DONE("grammar");
    int vocab = r1_tokenizer_vocab_size(t);
    int32_t eos = r1_tokenizer_eos(t);
    double t0 = r1_now();
    r1_gvocab_t *v = r1_gvocab_new(t, vocab, &eos, 1);
    printf("vocabulary trie of %d tokens in %.1f ms\n", vocab, 1e3 * (r1_now() - t0));
    CHECK(v, "gvocab: %s", r1_last_error());
    if (v) {
        test_strings(v);
        test_schema_literals(v);
        test_schema_keywords(v);
        test_mask(v, vocab);
        test_sampling(t, v, vocab, eos);
    }
    r1_gvocab_free(v);
    r1_tokenizer_free(t);
    return TEST_DONE("grammar");
}
