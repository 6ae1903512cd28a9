/*
 * device_common.c - the backend-neutral services of the device backends
 * (see device_common.h). It must not call a device API: only strings,
 * locks and the environment.
 */
#include "util/env.h"
#include "kernels/device_common.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util/util.h"

int r1_device_error_vset(struct r1_device_error *e, const char *fmt, va_list ap) {
    char msg[sizeof e->msg];
    vsnprintf(msg, sizeof msg, fmt, ap);
    pthread_mutex_lock(&e->mu);
    if (!e->failed) {
        snprintf(e->msg, sizeof e->msg, "%s", msg);
        e->failed = 1;
    }
    pthread_mutex_unlock(&e->mu);
    return r1_err("%s", msg);
}

int r1_device_error_set(struct r1_device_error *e, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    int rc = r1_device_error_vset(e, fmt, ap);
    va_end(ap);
    return rc;
}

int r1_device_error_take(struct r1_device_error *e) {
    char msg[sizeof e->msg];
    pthread_mutex_lock(&e->mu);
    int f = e->failed;
    snprintf(msg, sizeof msg, "%s", e->msg);
    e->failed = 0;
    pthread_mutex_unlock(&e->mu);
    return f ? r1_err("%s", msg) : 0;
}

int r1_device_weights_check(const char *backend, enum r1_dtype t, const enum r1_dtype *held, int n,
                            const char *advice) {
    for (int i = 0; i < n; i++)
        if (held[i] == t) return 0;
    const char *names[R1_DTYPE_COUNT];
    const int k = n < R1_DTYPE_COUNT ? n : R1_DTYPE_COUNT;
    for (int i = 0; i < k; i++) names[i] = r1_dtype_name(held[i]);
    char list[256];
    r1_join_words(list, sizeof list, names, k, " and ");
    return r1_err("the %s backend holds %s weights, not %s: %s", backend, list, r1_dtype_name(t), advice);
}

int r1_device_env_index(const char *env, const char *flag, int n, const char *kind, const char *hint) {
    const char *v = r1_env(env);
    if (!v || !*v) return 0;
    char *end;
    long d = strtol(v, &end, 10);
    if (*end || d < 0 || d >= n)
        return r1_err("%s / %s=%s: this machine has %d %s device%s (0..%d%s)", flag, env, v, n, kind, n == 1 ? "" : "s",
                      n - 1, hint ? hint : "");
    return (int)d;
}
