/*
 * comm_one.c - the one-process implementation of comm.h: every collective
 * over a job of one rank leaves the data as it is. Built when MPI is not;
 * refuses to run as a rank of a larger job (mpirun on a build without
 * MPI), where each process would silently run the whole model alone.
 */
#ifndef R1_MPI
#include <stdlib.h>

#include "runtime/comm.h"
#include "util/util.h"
#include "util/env.h"

int r1_comm_init(int *argc, char ***argv) {
    (void)argc, (void)argv;
    /* Open MPI's mpirun names the job's size in the environment */
    const char *n = r1_env("OMPI_COMM_WORLD_SIZE");
    if (n && atoi(n) > 1)
        return r1_err("started by mpirun with %s ranks, but this r1infer was built without MPI: "
                      "rebuild with make MPI=1 (needs openmpi-bin libopenmpi-dev)",
                      n);
    return 0;
}
int r1_comm_rank(void) { return 0; }
int r1_comm_size(void) { return 1; }
const char *r1_comm_name(void) { return "one"; }
void r1_comm_allreduce_sum_f32(float *x, size_t n) { (void)x, (void)n; }
void r1_comm_allgather_f32(float *buf, const int *counts, const int *displs) { (void)buf, (void)counts, (void)displs; }
void r1_comm_argmax_f32(float *val, int *idx) { (void)val, (void)idx; }
void r1_comm_bcast(void *buf, size_t bytes, int root) { (void)buf, (void)bytes, (void)root; }
void r1_comm_gather_f32(float *buf, const int *counts, const int *displs, int root) {
    (void)buf, (void)counts, (void)displs, (void)root;
}
void r1_comm_bcast_idle(void *buf, size_t bytes, int root) { (void)buf, (void)bytes, (void)root; }
int r1_comm_threads_ok(void) { return 1; }
double r1_comm_seconds(void) { return 0.0; }
void r1_comm_abort(int code) { exit(code); }
void r1_comm_finalize(void) {}
#else
typedef int r1_comm_one_unused; /* an MPI build uses comm_mpi.c */
#endif
