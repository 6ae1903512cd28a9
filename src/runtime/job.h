/*
 * job.h - a model in this process's job (runtime/comm.h): loaded as this
 * rank's share, and the exchanges of its tensor-parallel forward pass
 * (model/tp.h makes the shares; comm moves the bytes).
 */
#ifndef R1_RUNTIME_JOB_H
#define R1_RUNTIME_JOB_H

#include <stddef.h>

#include "model/model.h"
#include "model/tp.h"

/* A random-weight model of config c (model/model.h
 * r1_model_synthetic_ranks), cut to this process's share when it is one
 * rank of several. (r1_model_load, r1infer.h, is defined beside it.) */
r1_model_t *r1_model_synthetic(const struct r1_config *c, enum r1_dtype dtype, uint64_t seed, int progress);

/* Around a matvec_add whose result is a partial sum (o_proj, down_proj) into
 * the residual x (n floats): begin zeroes x on ranks other than 0 (so the
 * residual is added once), end sums x over the ranks. */
void r1_tp_partial_begin(const struct r1_tp *tp, float *x, size_t n);
void r1_tp_partial_end(const struct r1_tp *tp, float *x, size_t n);
/* One row of full-vocabulary logits of which this rank wrote [v0, v1):
 * every rank's part to every rank, so all sample the same token. */
void r1_tp_gather_logits(const struct r1_tp *tp, float *row);
/* The same on rank 0 only (a server's rank 0 samples; the others need none). */
void r1_tp_gather_logits_root(const struct r1_tp *tp, float *row);

#endif
