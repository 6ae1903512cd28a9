/*
 * job.c - the loaders that cut a model to this process's share when it is
 * one rank of a job (r1_model_load, r1_model_synthetic: model/ cuts,
 * runtime knows the job), and the exchanges of the tensor-parallel forward
 * pass (job.h).
 */
#include <string.h>

#include "model/model.h"
#include "runtime/comm.h"
#include "runtime/job.h"

void r1_tp_partial_begin(const struct r1_tp *tp, float *x, size_t n) {
    if (tp->rank != 0) memset(x, 0, n * sizeof *x);
}

void r1_tp_partial_end(const struct r1_tp *tp, float *x, size_t n) {
    (void)tp;
    r1_comm_allreduce_sum_f32(x, n);
}

void r1_tp_gather_logits_root(const struct r1_tp *tp, float *row) {
    r1_comm_gather_f32(row, tp->v_counts, tp->v_displs, 0);
}

void r1_tp_gather_logits(const struct r1_tp *tp, float *row) { r1_comm_allgather_f32(row, tp->v_counts, tp->v_displs); }

r1_model_t *r1_model_load(const char *path, const struct r1_load_opts *opts) {
    return r1_model_load_ranks(path, opts, r1_comm_rank(), r1_comm_size());
}

r1_model_t *r1_model_synthetic(const struct r1_config *c, enum r1_dtype dtype, uint64_t seed, int progress) {
    return r1_model_synthetic_ranks(c, dtype, seed, progress, r1_comm_rank(), r1_comm_size());
}
