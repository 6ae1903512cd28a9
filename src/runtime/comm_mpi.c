/*
 * comm_mpi.c - comm.h over MPI (Open MPI from Debian; `make MPI=1`, ranks
 * started by mpirun). Collectives run on MPI_COMM_WORLD from one thread at
 * a time (MPI_THREAD_SERIALIZED: run's main thread, or the server's
 * threads in turn; the kernel threads never communicate). Errors return to us (MPI_ERRORS_RETURN) so the message
 * names the rank and the collective before the job is aborted; a rank that
 * dies is noticed by mpirun, which ends the others.
 */
#ifdef R1_MPI
#include <fcntl.h>
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "runtime/comm.h"
#include "util/util.h"
#include "util/env.h"

static int g_on, g_rank, g_size = 1, g_err_fd = 2, g_threads;
static double g_seconds;

static void check(int rc, const char *what) {
    if (rc == MPI_SUCCESS) return;
    char msg[MPI_MAX_ERROR_STRING];
    int len = 0;
    MPI_Error_string(rc, msg, &len);
    dprintf(g_err_fd, "r1infer: rank %d of %d: %s failed: %.*s (did another rank die?)\n", g_rank, g_size, what, len,
            msg);
    MPI_Abort(MPI_COMM_WORLD, 1);
    _exit(1);
}

int r1_comm_init(int *argc, char ***argv) {
    const char *n = r1_env("OMPI_COMM_WORLD_SIZE");
    if (!n && !r1_env("PMIX_RANK")) return 0; /* started alone: no MPI at all */
    int provided = 0; /* serialized: the server's threads take turns (runtime/session.c's lead) */
    if (MPI_Init_thread(argc, argv, MPI_THREAD_SERIALIZED, &provided) != MPI_SUCCESS)
        return r1_err("MPI_Init_thread failed");
    g_threads = provided >= MPI_THREAD_SERIALIZED;
    g_on = 1;
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    MPI_Comm_rank(MPI_COMM_WORLD, &g_rank);
    MPI_Comm_size(MPI_COMM_WORLD, &g_size);
    atexit(r1_comm_finalize);
    if (g_rank != 0) { /* rank 0 speaks for the job */
        g_err_fd = dup(2);
        if (g_err_fd < 0) g_err_fd = 2;
        int null = open("/dev/null", O_WRONLY);
        if (null >= 0) {
            fflush(stdout), fflush(stderr);
            dup2(null, 1), dup2(null, 2);
            close(null);
        }
    }
    return 0;
}

int r1_comm_rank(void) { return g_rank; }
int r1_comm_size(void) { return g_size; }
const char *r1_comm_name(void) { return g_on ? "mpi" : "one"; }

/* Two ranks' sum is one addition per element, the same bits whatever
 * MPI's algorithm. From three on, MPI picks its summation order by the
 * message's size, so a sum would change with the number of rows a step
 * has (a server's steps mix conversations); the partials are gathered and
 * added in rank order instead: the same bits for every step shape. */
static float *g_sum_buf;
static size_t g_sum_cap;

void r1_comm_allreduce_sum_f32(float *x, size_t n) {
    if (g_size == 1) return;
    double t0 = r1_now();
    if (n > (size_t)0x7fffffff / (size_t)g_size) check(MPI_ERR_COUNT, "all-reduce");
    if (g_size == 2) {
        check(MPI_Allreduce(MPI_IN_PLACE, x, (int)n, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD), "all-reduce");
    } else {
        if (n * (size_t)g_size > g_sum_cap) {
            float *p = realloc(g_sum_buf, n * (size_t)g_size * sizeof *p);
            if (!p) check(MPI_ERR_NO_MEM, "all-reduce (its gather buffer)");
            g_sum_buf = p, g_sum_cap = n * (size_t)g_size;
        }
        check(MPI_Allgather(x, (int)n, MPI_FLOAT, g_sum_buf, (int)n, MPI_FLOAT, MPI_COMM_WORLD), "all-reduce");
        memcpy(x, g_sum_buf, n * sizeof *x);
        for (int r = 1; r < g_size; r++)
            for (size_t i = 0; i < n; i++) x[i] += g_sum_buf[(size_t)r * n + i];
    }
    g_seconds += r1_now() - t0;
}

void r1_comm_allgather_f32(float *buf, const int *counts, const int *displs) {
    if (g_size == 1) return;
    double t0 = r1_now();
    check(MPI_Allgatherv(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, buf, counts, displs, MPI_FLOAT, MPI_COMM_WORLD),
          "all-gather");
    g_seconds += r1_now() - t0;
}

void r1_comm_gather_f32(float *buf, const int *counts, const int *displs, int root) {
    if (g_size == 1) return;
    double t0 = r1_now();
    if (g_rank == root)
        check(MPI_Gatherv(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, buf, counts, displs, MPI_FLOAT, root, MPI_COMM_WORLD),
              "gather");
    else
        check(MPI_Gatherv(buf + displs[g_rank], counts[g_rank], MPI_FLOAT, NULL, NULL, NULL, MPI_FLOAT, root,
                          MPI_COMM_WORLD),
              "gather");
    g_seconds += r1_now() - t0;
}

void r1_comm_argmax_f32(float *val, int *idx) {
    if (g_size == 1) return;
    double t0 = r1_now();
    struct {
        float v;
        int i;
    } p = {*val, *idx}; /* MPI_FLOAT_INT's layout */
    check(MPI_Allreduce(MPI_IN_PLACE, &p, 1, MPI_FLOAT_INT, MPI_MAXLOC, MPI_COMM_WORLD), "argmax all-reduce");
    *val = p.v, *idx = p.i;
    g_seconds += r1_now() - t0;
}

void r1_comm_bcast(void *buf, size_t bytes, int root) {
    if (g_size == 1) return;
    double t0 = r1_now();
    if (bytes > (size_t)0x7fffffff) check(MPI_ERR_COUNT, "broadcast");
    check(MPI_Bcast(buf, (int)bytes, MPI_BYTE, root, MPI_COMM_WORLD), "broadcast");
    g_seconds += r1_now() - t0;
}

void r1_comm_bcast_idle(void *buf, size_t bytes, int root) {
    if (g_size == 1) return;
    if (bytes > (size_t)0x7fffffff) check(MPI_ERR_COUNT, "broadcast");
    MPI_Request req;
    check(MPI_Ibcast(buf, (int)bytes, MPI_BYTE, root, MPI_COMM_WORLD, &req), "broadcast");
    const double t0 = r1_now();
    for (int done = 0;;) {
        check(MPI_Test(&req, &done, MPI_STATUS_IGNORE), "broadcast");
        if (done) break;
        if (r1_now() - t0 > 0.002) { /* spun 2 ms: then wake every 200 us */
            struct timespec ts = {0, 200000};
            nanosleep(&ts, NULL);
        }
    }
}

int r1_comm_threads_ok(void) { return !g_on || g_threads; }

double r1_comm_seconds(void) { return g_seconds; }

void r1_comm_abort(int code) {
    if (!g_on || g_size == 1) exit(code);
    fflush(stdout), fflush(stderr);
    MPI_Abort(MPI_COMM_WORLD, code);
    _exit(code);
}

void r1_comm_finalize(void) {
    if (!g_on) return;
    g_on = 0;
    int done = 0;
    MPI_Finalized(&done);
    if (!done) MPI_Finalize();
}
#else
typedef int r1_comm_mpi_unused; /* a build without MPI uses comm_one.c */
#endif
