/*
 * comm.h - the collectives tensor parallelism needs, behind one small
 * interface with one implementation per transport: MPI (comm_mpi.c, built
 * with `make MPI=1` and started by mpirun), NCCL for CUDA ranks
 * (comm_nccl.c, `make CUDA=1 NCCL=1`) and the one-process no-op
 * (comm_one.c, every other build). The state is process-wide: a process
 * is one rank of one job.
 *
 * A collective that fails (a rank died, the network went away) does not
 * return: it prints which rank and which collective on the rank's stderr
 * and ends the whole job, so the other ranks never wait forever.
 */
#ifndef R1_RUNTIME_COMM_H
#define R1_RUNTIME_COMM_H

#include <stddef.h>

/* Join the job this process was started in (mpirun sets the environment);
 * a process started alone stays rank 0 of 1 and initializes nothing.
 * Ranks other than 0 get stdout and stderr sent to /dev/null (rank 0
 * speaks for the job; fatal collective errors still reach the terminal).
 * Returns 0, or -1 with an error (a job started with mpirun on a build
 * without MPI). Call once, first thing in main. */
int r1_comm_init(int *argc, char ***argv);
/* This process's rank (0..size-1) and the job's size; 0 and 1 alone. */
int r1_comm_rank(void);
int r1_comm_size(void);
/* The transport's name: "mpi", "nccl" or "one". */
const char *r1_comm_name(void);
/* x[0..n) := the sum over ranks of x[0..n), on every rank. */
void r1_comm_allreduce_sum_f32(float *x, size_t n);
/* In place: rank r's counts[r] floats at buf + displs[r] go to every rank
 * (counts and displs: size entries, the same on every rank). */
void r1_comm_allgather_f32(float *buf, const int *counts, const int *displs);
/* The same gathered on rank root only (the others' buf beyond their own
 * part is left as it is). */
void r1_comm_gather_f32(float *buf, const int *counts, const int *displs, int root);
/* (*val, *idx) := the largest *val over the ranks and its *idx, on every
 * rank; among equal values the smallest idx (a distributed argmax). */
void r1_comm_argmax_f32(float *val, int *idx);
/* bytes at buf on rank root copied to buf on every rank. */
void r1_comm_bcast(void *buf, size_t bytes, int root);
/* The same, for a receiver that may wait long (a rank that follows
 * another's requests): it polls, sleeping between polls once it has
 * waited a while, instead of spinning a core. Every rank must take part
 * through this call (an MPI nonblocking broadcast matches no blocking one). */
void r1_comm_bcast_idle(void *buf, size_t bytes, int root);
/* Whether several threads may call the collectives, one at a time (the
 * transport was started with MPI_THREAD_SERIALIZED or more); always alone. */
int r1_comm_threads_ok(void);
/* Wall seconds spent inside the collectives above so far (this rank). */
double r1_comm_seconds(void);
/* End every rank of the job with exit status code (a rank that failed
 * alone: the others would wait for it in their next collective). Alone,
 * plain exit(code). */
void r1_comm_abort(int code);
/* Leave the job (registered with atexit by r1_comm_init). */
void r1_comm_finalize(void);

#endif
