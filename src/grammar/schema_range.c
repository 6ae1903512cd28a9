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

/* Numbers within decimal bounds, exact and without an exponent. A value
 * is a sign and a magnitude i.f; each side of zero is a range of
 * magnitudes (a lower bound, perhaps strict, and perhaps an upper one),
 * written as integer parts strictly inside the range with any fraction,
 * plus each bound's own integer part with the fractions on the right side
 * of the bound's fraction digits. A client reads the number as a double,
 * so next to a bound a value keeps to SIG_DIGITS significant digits: two
 * such decimals are two doubles, and the bound's order holds for them too
 * (a longer fraction could round onto the bound). */
#define FRAC_DIGITS 16 /* as json-number's fractions */
#define SIG_DIGITS 15  /* DBL_DIG */

struct bound { /* a magnitude ip.frac (frac: digits without trailing zeros) */
    long long ip;
    char frac[FRAC_DIGITS + 1];
    int strict;
};

/* The state of a fraction's digits against a bound: NULL = already on the
 * right side (free); else the bound's digits not yet matched (an empty
 * string reads as zeros). dead: past the bound on the wrong side. */
struct fside {
    const char *d;
    int strict, dead;
};

static struct fside lower_next(struct fside s, char c) {
    if (!s.d || s.dead) return s;
    const char b = *s.d ? *s.d : '0';
    if (c > b) return (struct fside){NULL, 0, 0};
    if (c < b) return (struct fside){NULL, 0, 1};
    s.d += *s.d != 0;
    if (!*s.d && !s.strict) s.d = NULL; /* equal so far, >= holds from here */
    return s;
}

static struct fside upper_next(struct fside s, char c) {
    if (!s.d || s.dead) return s;
    const char b = *s.d ? *s.d : '0';
    if (c < b) return (struct fside){NULL, 0, 0};
    if (c > b) return (struct fside){NULL, 0, 1};
    s.d += *s.d != 0;
    if (!*s.d && s.strict) s.dead = 1; /* equal so far, < cannot hold any more */
    return s;
}

/* the fraction may end here (the rest reads as zeros) */
static int frac_end_ok(struct fside lo, struct fside hi) {
    if (lo.dead || hi.dead) return 0;
    if (lo.d && (*lo.d || lo.strict)) return 0; /* bound digits left (one is nonzero), or > 0 still needed */
    return 1; /* an upper bound with digits left is above zero; "" non-strict allows equality */
}

static int frac_viable(struct fside lo, struct fside hi, int n) {
    if (frac_end_ok(lo, hi)) return 1;
    if (lo.dead || hi.dead || !n) return 0;
    if (!lo.d && !hi.d) return 1;
    for (char c = '0'; c <= '9'; c++)
        if (frac_viable(lower_next(lo, c), upper_next(hi, c), n - 1)) return 1;
    return 0;
}

static int fside_eq(struct fside a, struct fside b) { return a.d == b.d && a.strict == b.strict && a.dead == b.dead; }

/* The digit strings of 1..n digits that keep (lo, hi), as alternatives:
 * each run of digits with the same next states, then its rest. */
static void frac_digits(struct out *o, struct fside lo, struct fside hi, int n) {
    int alts = 0;
    puts_(o, "( ");
    for (char c = '0'; c <= '9';) {
        const struct fside nl = lower_next(lo, c), nh = upper_next(hi, c);
        char e = c;
        while (e < '9' && fside_eq(lower_next(lo, e + 1), nl) && fside_eq(upper_next(hi, e + 1), nh)) e++;
        if (frac_viable(nl, nh, n - 1)) {
            if (alts++) puts_(o, " | ");
            if (c == e) sch_putf(o, "\"%c\"", c);
            else sch_putf(o, "[%c-%c]", c, e);
            if (n > 1) {
                if (!nl.d && !nh.d) sch_putf(o, " [0-9]{0,%d}", n - 1);
                else if (frac_end_ok(nl, nh)) puts_(o, " "), frac_digits(o, nl, nh, n - 1), puts_(o, "?");
                else puts_(o, " "), frac_digits(o, nl, nh, n - 1);
            }
        }
        c = (char)(e + 1);
    }
    puts_(o, " )");
}

/* the fraction digits an integer part ip leaves within SIG_DIGITS */
static int frac_room(long long ip) {
    int n = 0;
    for (; ip; ip /= 10) n++;
    return SIG_DIGITS - n < FRAC_DIGITS ? SIG_DIGITS - n : FRAC_DIGITS;
}

/* the integer part ip with a fraction that keeps (lo, hi); 0 if none does */
static int with_fraction(struct out *o, const char *sign, long long ip, struct fside lo, struct fside hi) {
    const int end = frac_end_ok(lo, hi), room = frac_room(ip);
    int digits = 0;
    for (char c = '0'; c <= '9' && room > 0; c++) digits |= frac_viable(lower_next(lo, c), upper_next(hi, c), room - 1);
    if (!end && !digits) return 0;
    sch_put(o, sign, strlen(sign));
    nonneg_range(o, ip, ip);
    if (!digits) return 1;
    puts_(o, " ( \".\" ");
    if (!lo.d && !hi.d) sch_putf(o, "[0-9]{1,%d}", room);
    else frac_digits(o, lo, hi, room);
    if (end) puts_(o, " )?");
    else puts_(o, " )");
    return 1;
}

static void sep(struct out *o, int *alts) {
    if ((*alts)++) puts_(o, " | ");
}

/* Magnitudes m with lo <(=) m, and m <(=) *hi when hi, each alternative
 * after the sign; *alts counts the alternatives written (" | " before all
 * but the first). */
static void magnitudes(struct out *o, int *alts, const char *sign, const struct bound *lo, const struct bound *hi) {
    const struct fside lo_f = {lo->frac[0] || lo->strict ? lo->frac : NULL, lo->strict, 0};
    const struct fside hi_f =
        hi ? (struct fside){hi->frac, hi->strict, !hi->frac[0] && hi->strict} : (struct fside){NULL, 0, 0};
    const struct fside free_f = {NULL, 0, 0};
    if (hi && lo->ip > hi->ip) return;
    struct out t = {0};
    if (hi && lo->ip == hi->ip) { /* one integer part: its fractions between both bounds */
        if (with_fraction(&t, sign, lo->ip, lo_f, hi_f)) sep(o, alts), sch_put(o, t.p, t.len);
        goto done;
    }
    if (with_fraction(&t, sign, lo->ip, lo_f, free_f)) sep(o, alts), sch_put(o, t.p, t.len);
    t.len = 0;
    /* integer parts strictly inside; next to a strict integer upper bound,
     * the last one keeps its fraction short (it could round up onto it) */
    const int split = hi && hi_f.dead;
    const long long top = hi ? hi->ip - 1 - split : -1;
    if (!hi || lo->ip + 1 <= top) {
        sep(o, alts);
        sch_put(o, sign, strlen(sign));
        nonneg_range(o, lo->ip + 1, top);
        sch_putf(o, " ( \".\" [0-9]{1,%d} )?", FRAC_DIGITS);
    }
    if (split && lo->ip + 1 <= hi->ip - 1 && with_fraction(&t, sign, hi->ip - 1, free_f, free_f))
        sep(o, alts), sch_put(o, t.p, t.len);
    t.len = 0;
    if (hi && with_fraction(&t, sign, hi->ip, free_f, hi_f)) sep(o, alts), sch_put(o, t.p, t.len);
done:
    if (t.failed) o->failed = 1;
    free(t.p);
}

/* A bound as sign and magnitude digits: the shortest decimal that reads
 * back as the double (0.1 is "0.1", not its binary expansion). */
static int parse_bound(struct conv *c, const char *key, double d, int strict, int *neg, struct bound *b) {
    if (!(fabs(d) <= (double)INT_LIMIT)) return sch_err(c, "'%s' on a number must be within +-%lld", key, INT_LIMIT);
    char txt[64];
    int fd = 0; /* the fewest fraction digits that read back as d */
    for (; fd <= FRAC_DIGITS; fd++) {
        snprintf(txt, sizeof txt, "%.*f", fd, d);
        if (strtod(txt, NULL) == d) break;
    }
    if (fd > FRAC_DIGITS) return sch_err(c, "'%s' on a number has more than %d decimals", key, FRAC_DIGITS);
    const char *p = txt;
    *neg = *p == '-';
    p += *neg;
    b->ip = strtoll(p, (char **)&p, 10);
    size_t n = 0;
    if (*p == '.')
        for (p++; *p && n < FRAC_DIGITS; p++) b->frac[n++] = *p;
    while (n && b->frac[n - 1] == '0') n--;
    b->frac[n] = 0;
    if (!b->ip && !n) *neg = 0;
    b->strict = strict;
    return 0;
}

/* The tighter of minimum / exclusiveMinimum (maximum / exclusiveMaximum
 * when upper; draft 4's boolean exclusives apply to the plain one). */
static int num_bound(struct conv *c, const json_t *s, int upper, int *set, int *neg, struct bound *b) {
    const char *key = upper ? "maximum" : "minimum", *xkey = upper ? "exclusiveMaximum" : "exclusiveMinimum";
    const json_t *plain = json_object_get(s, key), *x = json_object_get(s, xkey);
    double best = 0;
    int strict = 0;
    *set = 0;
    for (int pass = 0; pass < 2; pass++) {
        const json_t *j = pass ? x : plain;
        if (!j || json_is_boolean(j)) continue;
        if (!json_is_number(j)) return sch_err(c, "'%s' must be a number", pass ? xkey : key);
        const double d = json_number_value(j);
        const int st = pass || (x && json_is_true(x));
        if (!*set || (upper ? d < best : d > best) || (d == best && st)) best = d, strict = st;
        *set = 1;
    }
    return *set ? parse_bound(c, strict ? xkey : key, best, strict, neg, b) : 0;
}

int sch_number(struct conv *c, struct out *o, const json_t *s) {
    struct bound lo = {0}, hi = {0};
    int has_lo, has_hi, lo_neg = 0, hi_neg = 0;
    if (num_bound(c, s, 0, &has_lo, &lo_neg, &lo) || num_bound(c, s, 1, &has_hi, &hi_neg, &hi)) return -1;
    if (!has_lo && !has_hi) return puts_(o, "json-number"), 0;
    const struct bound zero = {0};
    int alts = 0;
    puts_(o, "( ");
    /* negative values -m: m <(=) -lo when lo < 0 (none without lo; lo >= 0 leaves only 0, written
     * unsigned), m >(=) -hi when hi <= 0 */
    if (!has_lo || lo_neg) {
        const struct bound *m_lo = has_hi && (hi_neg || (!hi.ip && !hi.frac[0])) ? &hi : &zero;
        if (m_lo == &hi && !hi.strict && !hi.ip && !hi.frac[0]) m_lo = &zero;
        magnitudes(o, &alts, "\"-\" ", m_lo, has_lo ? &lo : NULL);
    }
    /* values m >= 0: m >(=) lo when lo >= 0, m <(=) hi (none when hi < 0) */
    if (!has_hi || !hi_neg) {
        const struct bound *m_lo = has_lo && !lo_neg ? &lo : &zero;
        magnitudes(o, &alts, "", m_lo, has_hi ? &hi : NULL);
    }
    puts_(o, " )");
    if (!alts) return sch_err(c, "no number lies between the bounds");
    return 0;
}
