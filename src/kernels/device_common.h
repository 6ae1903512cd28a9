/*
 * device_common.h - what the device backends (cuda, opencl) do alike, with
 * nothing of either's API: the sticky error that kernels (which return
 * nothing) report through the next sync or download, the check of the
 * weight dtypes a backend holds, and the device index of their
 * environment names (util/env.h r1_env_choice parses the others). Each
 * backend still reads its own names, in its own file.
 * Included from C and from CUDA C++.
 */
#ifndef R1_KERNELS_DEVICE_COMMON_H
#define R1_KERNELS_DEVICE_COMMON_H

#include <pthread.h>
#include <stdarg.h>

#include "kernels/kernels.h"
#include "util/env.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The first failure since the last report (one per backend). */
struct r1_device_error {
    pthread_mutex_t mu;
    int failed;
    char msg[512];
};
#define R1_DEVICE_ERROR_INIT                                                                                           \
    {                                                                                                                  \
        PTHREAD_MUTEX_INITIALIZER, 0, { 0 }                                                                            \
    }

/* Keep the formatted message as e's failure unless one is kept already (the
 * first since the last take wins), and set r1_err to it. Returns -1. */
int r1_device_error_set(struct r1_device_error *e, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
int r1_device_error_vset(struct r1_device_error *e, const char *fmt, va_list ap);

/* Report and clear e's failure: 0 when none is kept, else -1 with r1_err set
 * to it. */
int r1_device_error_take(struct r1_device_error *e);

/* 0 when t is one of held[0..n); else -1 with "the BACKEND backend holds
 * f32, ... and q8_0 weights, not T: ADVICE". */
int r1_device_weights_check(const char *backend, enum r1_dtype t, const enum r1_dtype *held, int n, const char *advice);

/* The device index in environment name env (which option `flag` sets) of n
 * devices of a kind ("CUDA", "OpenCL"): 0 when unset or empty; -1 with an
 * error naming the range (and hint after it) when not in 0..n-1. */
int r1_device_env_index(const char *env, const char *flag, int n, const char *kind, const char *hint);

#ifdef __cplusplus
}
#endif

#endif
