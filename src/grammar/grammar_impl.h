/*
 * grammar_impl.h - the compiled form of a grammar, shared by the GBNF
 * compiler (gbnf.c) and the matcher (match.c). Private to src/grammar/.
 *
 * A grammar is a list of rules; a rule is a list of alternatives; an
 * alternative is a run of elements in `el` ended by GEL_END. An element is
 * a character class (a set of code-point ranges, maybe negated) or a
 * reference to a rule. Literals are runs of one-character classes;
 * repetitions and groups were turned into generated rules by the compiler.
 */
#ifndef R1_GRAMMAR_IMPL_H
#define R1_GRAMMAR_IMPL_H

#include <stdint.h>

#include "r1infer.h"

enum gel_type { GEL_END = 0, GEL_CLASS, GEL_RULE };

struct gel {
    int32_t type; /* enum gel_type */
    int32_t v;    /* GEL_CLASS: class index; GEL_RULE: rule index */
};

struct gclass {
    int32_t r0, nr; /* ranges rng[r0 .. r0+nr), sorted and merged */
    int32_t negated;
};

struct r1_grammar {
    struct gel *el;     /* (n_el) every alternative's elements, each run ended by GEL_END */
    int32_t *alt;       /* (n_alt) the first element of each alternative */
    int32_t *rule_alt0; /* (n_rules) the first alternative of each rule in alt[] */
    int32_t *rule_nalt; /* (n_rules) how many */
    uint32_t *rng;      /* (n_rng, 2) inclusive code-point ranges */
    struct gclass *cls; /* (n_cls) */
    int n_el, n_alt, n_rules, n_rng, n_cls;
    int root;
};

/* Whether class c accepts code point cp / some code point in [lo, hi]. */
static inline int gclass_match(const struct r1_grammar *g, int c, uint32_t cp) {
    const struct gclass *k = &g->cls[c];
    int in = 0;
    for (int i = 0; i < k->nr && !in; i++) in = cp >= g->rng[2 * (k->r0 + i)] && cp <= g->rng[2 * (k->r0 + i) + 1];
    return in != k->negated;
}

static inline int gclass_overlaps(const struct r1_grammar *g, int c, uint32_t lo, uint32_t hi) {
    const struct gclass *k = &g->cls[c];
    for (int i = 0; i < k->nr; i++) {
        uint32_t a = g->rng[2 * (k->r0 + i)], b = g->rng[2 * (k->r0 + i) + 1];
        if (k->negated) {
            if (a <= lo && b >= hi) return 0; /* merged ranges: one covering range means none left */
        } else if (a <= hi && b >= lo) {
            return 1;
        }
    }
    return k->negated;
}

#endif
