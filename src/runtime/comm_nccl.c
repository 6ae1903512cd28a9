/*
 * comm_nccl.c - comm_nccl.h over NCCL: the communicator is bootstrapped
 * through the MPI job (comm_mpi.c), collectives run on the caller's CUDA
 * stream and are waited for, so a caller sees the result as with comm.h.
 * Built only with `make CUDA=1 NCCL=1`.
 */
#ifdef R1_NCCL
#include <cuda_runtime.h>
#include <mpi.h>
#include <nccl.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "runtime/comm.h"
#include "runtime/comm_nccl.h"
#include "util/util.h"
#include "util/env.h"

static ncclComm_t g_comm;
static int g_ready;

static void fatal(const char *what, const char *msg) {
    fprintf(stderr, "r1infer: rank %d of %d: %s failed: %s (did another rank die?)\n", r1_comm_rank(), r1_comm_size(),
            what, msg);
    r1_comm_abort(1);
}
#define NCCL_CHECK(x, what)                                                                                            \
    do {                                                                                                               \
        ncclResult_t rc_ = (x);                                                                                        \
        if (rc_ != ncclSuccess) fatal(what, ncclGetErrorString(rc_));                                                  \
    } while (0)
#define CUDA_CHECK(x, what)                                                                                            \
    do {                                                                                                               \
        cudaError_t rc_ = (x);                                                                                         \
        if (rc_ != cudaSuccess) fatal(what, cudaGetErrorString(rc_));                                                  \
    } while (0)

int r1_comm_dev_init(void) {
    if (g_ready || r1_comm_size() == 1) return 0;
    int n_dev = 0;
    if (cudaGetDeviceCount(&n_dev) != cudaSuccess || n_dev < 1)
        return r1_err("rank %d: no CUDA device for NCCL", r1_comm_rank());
    const char *lr = r1_env("OMPI_COMM_WORLD_LOCAL_RANK");
    int local = lr ? atoi(lr) : r1_comm_rank();
    if (cudaSetDevice(local % n_dev) != cudaSuccess)
        return r1_err("rank %d: cannot use CUDA device %d", r1_comm_rank(), local % n_dev);
    ncclUniqueId id;
    if (r1_comm_rank() == 0 && ncclGetUniqueId(&id) != ncclSuccess) {
        fprintf(stderr, "r1infer: ncclGetUniqueId failed\n");
        r1_comm_abort(1);
    }
    r1_comm_bcast(&id, sizeof id, 0);
    ncclResult_t rc = ncclCommInitRank(&g_comm, r1_comm_size(), id, r1_comm_rank());
    if (rc != ncclSuccess) return r1_err("ncclCommInitRank: %s", ncclGetErrorString(rc));
    g_ready = 1;
    return 0;
}

void r1_comm_dev_allreduce_sum_f32(float *x, size_t n, void *stream) {
    if (!g_ready) return;
    cudaStream_t st = (cudaStream_t)stream;
    NCCL_CHECK(ncclAllReduce(x, x, n, ncclFloat, ncclSum, g_comm, st), "NCCL all-reduce");
    CUDA_CHECK(cudaStreamSynchronize(st), "NCCL all-reduce");
}

void r1_comm_dev_allgather_f32(float *buf, const int *counts, const int *displs, void *stream) {
    if (!g_ready) return;
    cudaStream_t st = (cudaStream_t)stream;
    NCCL_CHECK(ncclGroupStart(), "NCCL all-gather");
    for (int r = 0; r < r1_comm_size(); r++)
        NCCL_CHECK(ncclBroadcast(buf + displs[r], buf + displs[r], (size_t)counts[r], ncclFloat, r, g_comm, st),
                   "NCCL all-gather");
    NCCL_CHECK(ncclGroupEnd(), "NCCL all-gather");
    CUDA_CHECK(cudaStreamSynchronize(st), "NCCL all-gather");
}

void r1_comm_dev_free(void) {
    if (!g_ready) return;
    ncclCommDestroy(g_comm);
    g_ready = 0;
}
#else
typedef int r1_comm_nccl_unused; /* built with make CUDA=1 NCCL=1 */
#endif
