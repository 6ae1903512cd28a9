/*
 * comm_nccl.h - the collectives of comm.h on GPU memory, over NCCL, for
 * ranks of an mpirun job whose activations live on a CUDA device (built
 * with `make CUDA=1 NCCL=1`, which needs MPI=1: the job starts and
 * bootstraps through MPI, comm.h's host calls stay MPI's). Each rank uses
 * the device of its local rank on the node. Failures end the job as in
 * comm.h. Not wired into the forward pass yet: the session runs tensor
 * parallel on the host backends only.
 */
#ifndef R1_RUNTIME_COMM_NCCL_H
#define R1_RUNTIME_COMM_NCCL_H

#include <stddef.h>

/* After r1_comm_init: pick this rank's device, make the NCCL communicator
 * of the job (rank 0's id broadcast over MPI). 0, or -1 with an error. */
int r1_comm_dev_init(void);
/* Device memory x[0..n) := the sum over ranks; ordered after the work
 * queued on `stream` (a cudaStream_t, NULL: the legacy default stream),
 * and complete on return. */
void r1_comm_dev_allreduce_sum_f32(float *x, size_t n, void *stream);
/* In place on device memory: rank r's counts[r] floats at buf + displs[r]
 * to every rank (uneven counts: one broadcast per rank in one group). */
void r1_comm_dev_allgather_f32(float *buf, const int *counts, const int *displs, void *stream);
void r1_comm_dev_free(void);

#endif
