/*
 * pool.c - persistent worker threads. Workers spin briefly on a generation
 * counter (a decode step issues hundreds of small kernels, so sleeping
 * between them costs more than the kernels), then fall back to a condition
 * variable so idle sessions do not burn a core.
 */
#include "runtime/pool.h"

#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdlib.h>

#include "util/util.h"

#define SPIN_ITERS 200000

struct r1_pool {
    int n;
    pthread_t *threads;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    atomic_uint gen;     /* bumped for every job */
    atomic_int pending;  /* workers still running the current job */
    atomic_int quit;
    r1_kernel_fn fn;
    const struct r1_op *op;
};

struct worker_arg {
    struct r1_pool *p;
    int ith;
};

static void *worker(void *arg_) {
    struct worker_arg *arg = arg_;
    struct r1_pool *p = arg->p;
    int ith = arg->ith;
    free(arg);
    unsigned seen = atomic_load(&p->gen);
    for (;;) {
        unsigned g;
        int spins = 0;
        while ((g = atomic_load_explicit(&p->gen, memory_order_acquire)) == seen) {
            if (atomic_load(&p->quit)) return NULL;
            if (++spins > SPIN_ITERS) {
                pthread_mutex_lock(&p->mu);
                while (atomic_load(&p->gen) == seen && !atomic_load(&p->quit))
                    pthread_cond_wait(&p->cv, &p->mu);
                pthread_mutex_unlock(&p->mu);
                spins = 0;
            }
        }
        seen = g;
        if (atomic_load(&p->quit)) return NULL;
        p->fn(p->op, ith, p->n);
        atomic_fetch_sub_explicit(&p->pending, 1, memory_order_release);
    }
}

struct r1_pool *r1_pool_new(int n_threads) {
    if (n_threads < 1) n_threads = 1;
    struct r1_pool *p = calloc(1, sizeof *p);
    if (!p) return NULL;
    p->n = n_threads;
    pthread_mutex_init(&p->mu, NULL);
    pthread_cond_init(&p->cv, NULL);
    p->threads = calloc((size_t)n_threads, sizeof(pthread_t));
    if (!p->threads) {
        free(p);
        return NULL;
    }
    for (int i = 1; i < n_threads; i++) {
        struct worker_arg *a = malloc(sizeof *a);
        if (!a) {
            p->n = i;
            r1_pool_free(p);
            return NULL;
        }
        a->p = p;
        a->ith = i;
        if (pthread_create(&p->threads[i], NULL, worker, a) != 0) {
            free(a);
            p->n = i;
            r1_pool_free(p);
            r1_err("cannot create thread %d of %d", i, n_threads);
            return NULL;
        }
    }
    return p;
}

void r1_pool_free(struct r1_pool *p) {
    if (!p) return;
    pthread_mutex_lock(&p->mu);
    atomic_store(&p->quit, 1);
    pthread_cond_broadcast(&p->cv);
    pthread_mutex_unlock(&p->mu);
    for (int i = 1; i < p->n; i++) pthread_join(p->threads[i], NULL);
    pthread_mutex_destroy(&p->mu);
    pthread_cond_destroy(&p->cv);
    free(p->threads);
    free(p);
}

int r1_pool_size(const struct r1_pool *p) { return p->n; }

void r1_pool_run(struct r1_pool *p, r1_kernel_fn fn, const struct r1_op *op) {
    if (p->n == 1) {
        fn(op, 0, 1);
        return;
    }
    p->fn = fn;
    p->op = op;
    atomic_store(&p->pending, p->n - 1);
    pthread_mutex_lock(&p->mu);
    atomic_fetch_add_explicit(&p->gen, 1, memory_order_release);
    pthread_cond_broadcast(&p->cv);
    pthread_mutex_unlock(&p->mu);
    fn(op, 0, p->n);
    while (atomic_load_explicit(&p->pending, memory_order_acquire) > 0) sched_yield();
}
