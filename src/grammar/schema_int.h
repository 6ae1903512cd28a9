/*
 * schema_int.h - what the pieces of the JSON-schema converter share
 * (schema.c, schema_allof.c, schema_pattern.c, schema_range.c): the grammar text being
 * written, the conversion's state and its first error, and the
 * converters of one keyword each. Not part of the library's interface.
 */
#ifndef R1_GRAMMAR_SCHEMA_INT_H
#define R1_GRAMMAR_SCHEMA_INT_H

#include <jansson.h>
#include <stddef.h>

#define MAX_DEPTH 64
#define MAX_RULES 10000

struct out {
    char *p;
    size_t len, cap;
    int failed;
};

struct conv {
    struct out g;       /* the grammar text */
    const json_t *root; /* the whole schema (for $ref) */
    const char **refs;  /* $ref strings already given a rule (of the current root) */
    int *ref_rule;      /* their rule numbers (ref<N>) */
    int n_refs, cap_refs, n_ref_rules;
    int n_rules;
    char *err;
    size_t errlen;
    int failed;
    int lenient;     /* R1_SCHEMA_LENIENT */
    int unsupported; /* the error is a pattern construct the grammar cannot express */
};

/* n bytes of s appended to o (a failed allocation marks o failed) */
void sch_put(struct out *o, const char *s, size_t n);
/* a string literal, its length counted by the compiler */
#define puts_(o, lit) sch_put((o), (lit), sizeof(lit) - 1)
void sch_putf(struct out *o, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* A GBNF literal of the bytes s[0..n). */
void sch_literal(struct out *o, const char *s, size_t n);
/* The conversion's first error (later ones are dropped); returns -1. */
int sch_err(struct conv *c, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* schema.c: the grammar of schema s into o (depth: its nesting); the value
 * at a JSON pointer "#/..." of root, or NULL */
int sch_value(struct conv *c, struct out *o, const json_t *s, int depth);
const json_t *sch_json_pointer(const json_t *root, const char *ref);
/* schema_allof.c: a schema with allOf */
int sch_all_of(struct conv *c, struct out *o, const json_t *s, int depth);
/* schema_pattern.c: a pattern as the grammar of a JSON string */
int sch_pattern(struct conv *c, struct out *o, const char *pat);
/* schema_range.c: integers and numbers within minimum / maximum */
int sch_integer(struct conv *c, struct out *o, const json_t *s);
int sch_number(struct conv *c, struct out *o, const json_t *s);

#endif
