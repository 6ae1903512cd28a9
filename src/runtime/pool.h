/*
 * pool.h - the persistent thread pool. Threads are created once per session
 * and wait between kernels; r1_pool_run hands one op to every thread as
 * (ith, nth) and returns when all are done. Nothing is allocated per call.
 */
#ifndef R1_POOL_H
#define R1_POOL_H

#include "kernels/kernels.h"

struct r1_pool;

/* n_threads >= 1 (the caller's thread is thread 0). NULL on error. */
struct r1_pool *r1_pool_new(int n_threads);
void r1_pool_free(struct r1_pool *p);
int r1_pool_size(const struct r1_pool *p);
/* Pause iterations an idle worker spins before it sleeps (default ~ms);
 * 0: sleep at once, for a pool used now and then beside another (a probe
 * that must not steal cores from the engine between its runs). */
void r1_pool_set_spin(struct r1_pool *p, int iters);
/* Run fn(op, ith, nth) for ith in [0, nth) and wait for all. */
void r1_pool_run(struct r1_pool *p, r1_kernel_fn fn, const struct r1_op *op);

#endif
