/*
 * pool.c - persistent worker threads. A decode step issues hundreds of small
 * kernels, so the hot path takes no lock: the master publishes (fn, op) and
 * a new generation in one 64-bit word (generation << 32 | next share); every
 * thread, the master included, claims shares ith = 1..n-1 from that word
 * with a compare-and-swap that also checks the generation, runs them and
 * counts them done. So a worker the OS has not scheduled (a shared or
 * oversubscribed machine) costs nothing: the master runs its share itself
 * instead of waiting a time slice. Kernels only see (ith, nth), never which
 * thread runs a share. Workers spin with a pause hint, then sleep on a
 * condition variable; the master takes the mutex only when one sleeps.
 */
#include "runtime/pool.h"

#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdlib.h>

#include "util/util.h"

/* pause iterations before a worker sleeps (~ a few ms) */
#define SPIN_ITERS (1 << 16)
/* pause iterations before a waiting master starts yielding its core */
#define MASTER_SPIN (1 << 14)

static inline void cpu_relax(void) {
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#elif defined(__aarch64__)
    __asm__ __volatile__("yield");
#endif
}

struct r1_pool {
    int n;
    pthread_t *threads;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    /* written by the master, read by the workers: own cache line */
    _Alignas(64) _Atomic unsigned long long state; /* gen << 32 | next share to claim */
    atomic_int quit;
    r1_kernel_fn fn;
    const struct r1_op *op;
    _Alignas(64) atomic_int done;     /* shares 1..n-1 finished in the current job */
    _Alignas(64) atomic_int sleepers; /* workers waiting (or about to) on cv */
    atomic_int spin;                  /* pause iterations before an idle worker sleeps */
};

struct worker_arg {
    struct r1_pool *p;
    int ith;
};

static unsigned gen_of(unsigned long long st) { return (unsigned)(st >> 32); }

/* Claim and run shares of job `gen` until none is left (or a newer job has
 * replaced it, which cannot happen while a claimed share is unfinished). */
static void run_shares(struct r1_pool *p, unsigned gen) {
    unsigned long long st = atomic_load_explicit(&p->state, memory_order_acquire);
    for (;;) {
        if (gen_of(st) != gen) return;
        int s = (int)(st & 0xffffffffu);
        if (s >= p->n) return;
        if (!atomic_compare_exchange_weak_explicit(&p->state, &st, st + 1, memory_order_acq_rel, memory_order_acquire))
            continue;
        p->fn(p->op, s, p->n);
        atomic_fetch_add_explicit(&p->done, 1, memory_order_release);
        st = atomic_load_explicit(&p->state, memory_order_acquire);
    }
}

static void *worker(void *arg_) {
    struct worker_arg *arg = arg_;
    struct r1_pool *p = arg->p;
    free(arg);
    unsigned seen = gen_of(atomic_load(&p->state));
    for (;;) {
        unsigned g;
        int spins = 0;
        while ((g = gen_of(atomic_load_explicit(&p->state, memory_order_acquire))) == seen) {
            if (atomic_load_explicit(&p->quit, memory_order_relaxed)) return NULL;
            if (++spins < atomic_load_explicit(&p->spin, memory_order_relaxed)) {
                cpu_relax();
                continue;
            }
            /* long idle: sleep. sleepers is raised before the generation is
             * re-checked and the master reads sleepers after publishing a job
             * (both seq_cst), so either we see the job or the master sees us
             * and broadcasts under the mutex. */
            pthread_mutex_lock(&p->mu);
            atomic_fetch_add(&p->sleepers, 1);
            while (gen_of(atomic_load(&p->state)) == seen && !atomic_load(&p->quit)) pthread_cond_wait(&p->cv, &p->mu);
            atomic_fetch_sub(&p->sleepers, 1);
            pthread_mutex_unlock(&p->mu);
            spins = 0;
        }
        seen = g;
        if (atomic_load(&p->quit)) return NULL;
        run_shares(p, g);
    }
}

struct r1_pool *r1_pool_new(int n_threads) {
    if (n_threads < 1) n_threads = 1;
    struct r1_pool *p = aligned_alloc(64, (sizeof *p + 63) & ~(size_t)63);
    if (!p) return NULL;
    *p = (struct r1_pool){0};
    p->n = n_threads;
    atomic_init(&p->spin, SPIN_ITERS);
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

void r1_pool_set_spin(struct r1_pool *p, int iters) { atomic_store(&p->spin, iters); }

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
    atomic_store_explicit(&p->done, 0, memory_order_relaxed);
    unsigned gen = gen_of(atomic_load_explicit(&p->state, memory_order_relaxed)) + 1;
    /* seq_cst: publishes fn, op, done; share 0 is the master's */
    atomic_store(&p->state, (unsigned long long)gen << 32 | 1u);
    if (atomic_load(&p->sleepers) > 0) {
        pthread_mutex_lock(&p->mu);
        pthread_cond_broadcast(&p->cv);
        pthread_mutex_unlock(&p->mu);
    }
    fn(op, 0, p->n);
    run_shares(p, gen); /* whatever no worker has picked up yet */
    int spins = 0;
    while (atomic_load_explicit(&p->done, memory_order_acquire) < p->n - 1) {
        if (++spins < MASTER_SPIN) {
            cpu_relax();
        } else {
            sched_yield(); /* a worker holds a share but has lost its core */
            spins = 0;
        }
    }
}
