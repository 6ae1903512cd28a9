/*
 * env.h - every environment variable r1infer reads, in one table, read
 * through one function. A name that is not in the table is a programming
 * error (r1_env asserts); a set R1_* variable that r1infer does not read is
 * reported once (r1_env_check), so a misspelt or retired name is not a
 * silent no-op. `r1infer --help-env` prints the table; the README's
 * Environment section is made from it (tools/env_table.sh).
 */
#ifndef R1_UTIL_ENV_H
#define R1_UTIL_ENV_H

#include <stdio.h>

#ifdef __cplusplus
extern "C" {
#endif

struct r1_env_var {
    const char *name;    /* a name, or a prefix ending in '_' followed by <...> in the doc */
    const char *values;  /* what it takes, in words */
    const char *dflt;    /* what holds when it is unset */
    const char *meaning; /* one sentence */
    const char *choices; /* "a|b|c": the only values it takes (r1_env_check), or NULL */
};
extern const struct r1_env_var r1_env_vars[];
extern const int r1_env_count;

/* The value of the variable name, a name in the table (or one that starts with a listed
 * prefix such as "R1_KERNEL_"); NULL when unset. */
const char *r1_env(const char *name);
/* Calls fn(suffix, value) for every variable set in the environment whose
 * name starts with `prefix` (a prefix in the table), e.g. R1_KERNEL_. */
void r1_env_each(const char *prefix, void (*fn)(const char *suffix, const char *value, void *ctx), void *ctx);
/* Prints one line to f for every R1_* / R1INFER_* variable set in the
 * environment that is not in the table, and for every value outside an
 * entry's choices; returns how many. */
int r1_env_check(FILE *f);
/* The table as Markdown (name | takes | default | meaning). */
void r1_env_print(FILE *f);
/* Variable `name` as the index of its value in values[0..n); dflt when
 * unset or empty; -1 with "environment NAME=V: expected A or B" otherwise. */
int r1_env_choice(const char *name, const char *const *values, int n, int dflt);

#ifdef __cplusplus
}
#endif

#endif
