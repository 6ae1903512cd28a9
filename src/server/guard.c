/*
 * guard.c - per-connection bookkeeping of the HTTP server (http.c): the
 * deadline for a request's headers and body, and what the access log line
 * of a request needs (its status and tokens).
 *
 * libmicrohttpd's own timeout is an idle timeout: a client that sends a
 * byte every few seconds keeps its connection for ever. Here every
 * connection that is reading a request has a start time; a watchdog thread
 * shuts down (shutdown(2), not close: the connection's thread still owns the
 * descriptor) every connection still reading past the deadline, and its
 * thread then closes it. Knows nothing of HTTP.
 */
#include "server/guard.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>

#include "server/front.h"
#include "util/util.h"

#define WATCH_MS 100 /* how often the watchdog looks */

struct guard {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    pthread_t thread;
    int started, stop;
    double deadline;
    struct conn_info *head;
    long shut; /* connections shut down for passing the deadline */
};

static void *watch(void *arg) {
    struct guard *g = arg;
    pthread_mutex_lock(&g->mu);
    while (!g->stop) {
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        ts.tv_nsec += WATCH_MS * 1000000L;
        if (ts.tv_nsec >= 1000000000L) ts.tv_sec++, ts.tv_nsec -= 1000000000L;
        pthread_cond_timedwait(&g->cv, &g->mu, &ts);
        double now = r1_now();
        for (struct conn_info *c = g->head; c; c = c->next)
            if (c->reading && now - c->start > g->deadline) {
                shutdown(c->fd, SHUT_RDWR);
                c->reading = 0;
                g->shut++;
            }
    }
    pthread_mutex_unlock(&g->mu);
    return NULL;
}

struct guard *guard_new(double deadline_s) {
    struct guard *g = calloc(1, sizeof *g);
    if (!g) return NULL;
    g->deadline = deadline_s;
    pthread_mutex_init(&g->mu, NULL);
    pthread_cond_init(&g->cv, NULL);
    if (deadline_s > 0 && pthread_create(&g->thread, NULL, watch, g) == 0) g->started = 1;
    if (deadline_s > 0 && !g->started) {
        guard_free(g);
        return NULL;
    }
    return g;
}

void guard_free(struct guard *g) {
    if (!g) return;
    if (g->started) {
        pthread_mutex_lock(&g->mu);
        g->stop = 1;
        pthread_cond_signal(&g->cv);
        pthread_mutex_unlock(&g->mu);
        pthread_join(g->thread, NULL);
    }
    while (g->head) {
        struct conn_info *c = g->head;
        g->head = c->next;
        free(c);
    }
    pthread_cond_destroy(&g->cv);
    pthread_mutex_destroy(&g->mu);
    free(g);
}

struct conn_info *guard_open(struct guard *g, int fd, const struct sockaddr *addr, socklen_t alen) {
    struct conn_info *c = calloc(1, sizeof *c);
    if (!c) return NULL;
    c->fd = fd;
    if (addr && alen <= sizeof c->addr) memcpy(&c->addr, addr, alen);
    c->start = r1_now();
    c->reading = 1;
    pthread_mutex_lock(&g->mu);
    c->next = g->head;
    if (g->head) g->head->prev = c;
    g->head = c;
    pthread_mutex_unlock(&g->mu);
    return c;
}

void guard_close(struct guard *g, struct conn_info *c) {
    if (!c) return;
    pthread_mutex_lock(&g->mu);
    if (c->prev) c->prev->next = c->next;
    else g->head = c->next;
    if (c->next) c->next->prev = c->prev;
    pthread_mutex_unlock(&g->mu);
    free(c);
}

void guard_reading(struct guard *g, struct conn_info *c, int reading) {
    if (!c) return;
    pthread_mutex_lock(&g->mu);
    if (reading && !c->reading) c->start = r1_now();
    c->reading = reading;
    pthread_mutex_unlock(&g->mu);
}

int guard_count_host(struct guard *g, const struct sockaddr_storage *addr) {
    int n = 0;
    pthread_mutex_lock(&g->mu);
    for (struct conn_info *c = g->head; c; c = c->next) n += front_same_host(&c->addr, addr);
    pthread_mutex_unlock(&g->mu);
    return n;
}

long guard_shut(struct guard *g) {
    pthread_mutex_lock(&g->mu);
    long n = g->shut;
    pthread_mutex_unlock(&g->mu);
    return n;
}
