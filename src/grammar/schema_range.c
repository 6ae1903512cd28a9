/*
 * schema_range.c - minimum / maximum on integers and numbers as exact
 * grammars of the decimal strings in range (schema.c calls them).
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "grammar/schema_int.h"

#define INT_LIMIT 999999999999999LL /* |bounds| up to 15 digits (json-int has 16) */

/* The numbers of n digits from a to b (digit strings, a <= b; inner
 * positions may start with 0): per leading digit, its rest's range. */
static void same_len(struct out *o, const char *a, const char *b, int n) {
    int a_min = 1, b_max = 1; /* a's rest all 0, b's rest all 9 */
    for (int i = 1; i < n; i++) a_min &= a[i] == '0', b_max &= b[i] == '9';
    if (a_min && b_max) { /* the whole block: [a0-b0] [0-9]{n-1} */
        if (a[0] == b[0]) sch_putf(o, "\"%c\"", a[0]);
        else sch_putf(o, "[%c-%c]", a[0], b[0]);
        if (n > 1) sch_putf(o, " [0-9]{%d}", n - 1);
        return;
    }
    if (a[0] == b[0]) {
        sch_putf(o, "\"%c\" ", a[0]);
        same_len(o, a + 1, b + 1, n - 1);
        return;
    }
    char nines[24], zeros[24];
    memset(nines, '9', sizeof nines), memset(zeros, '0', sizeof zeros);
    sch_putf(o, "( \"%c\" ", a[0]);
    same_len(o, a + 1, nines, n - 1);
    if (b[0] - a[0] >= 2) {
        if (b[0] - a[0] == 2) sch_putf(o, " | \"%c\"", a[0] + 1);
        else sch_putf(o, " | [%c-%c]", a[0] + 1, b[0] - 1);
        if (n > 1) sch_putf(o, " [0-9]{%d}", n - 1);
    }
    sch_putf(o, " | \"%c\" ", b[0]);
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
        if (la < 16) sch_putf(o, " | [1-9] [0-9]{%d,15}", la);
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
    if (lb - la >= 2) sch_putf(o, " | [1-9] [0-9]{%d,%d}", la, lb - 2);
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
        if (!json_is_number(j)) return sch_err(c, "'%s' must be a number", pass ? xkey : key);
        double d = json_number_value(j);
        if (!(d >= -(double)INT_LIMIT && d <= (double)INT_LIMIT))
            return sch_err(c, "'%s' must be within +-%lld for an integer grammar", pass ? xkey : key, INT_LIMIT);
        long long iv = upper ? (long long)floor(d) : (long long)ceil(d);
        const int excl = pass || (x && json_is_true(x));
        if (excl && (double)iv == d) iv += upper ? -1 : 1;
        if (!*set || (upper ? iv < *v : iv > *v)) *v = iv;
        *set = 1;
    }
    return 0;
}

int sch_integer(struct conv *c, struct out *o, const json_t *s) {
    long long lo = 0, hi = 0;
    int has_lo, has_hi;
    if (int_bound(c, s, 0, &lo, &has_lo) || int_bound(c, s, 1, &hi, &has_hi)) return -1;
    if (!has_lo && !has_hi) return puts_(o, "json-int"), 0;
    if (has_lo && has_hi && lo > hi) return sch_err(c, "no integer lies between 'minimum' and 'maximum'");
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
int sch_number(struct conv *c, struct out *o, const json_t *s) {
    const json_t *lo_j = json_object_get(s, "minimum"), *hi_j = json_object_get(s, "maximum");
    if (json_object_get(s, "exclusiveMinimum") || json_object_get(s, "exclusiveMaximum"))
        return sch_err(c, "'exclusiveMinimum' and 'exclusiveMaximum' are supported on integers, not on numbers");
    if (!lo_j && !hi_j) return puts_(o, "json-number"), 0;
    long long lo = 0, hi = 0;
    for (int k = 0; k < 2; k++) {
        const json_t *j = k ? hi_j : lo_j;
        if (!j) continue;
        double d = json_number_value(j);
        if (!json_is_number(j) || d != floor(d) || !(fabs(d) <= (double)INT_LIMIT))
            return sch_err(c, "'%s' on a number must be an integer within +-%lld", k ? "maximum" : "minimum", INT_LIMIT);
        *(k ? &hi : &lo) = (long long)d;
    }
    if (lo_j && hi_j && lo > hi) return sch_err(c, "no number lies between 'minimum' and 'maximum'");
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

