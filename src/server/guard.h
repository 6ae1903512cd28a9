/*
 * guard.h - per-connection bookkeeping of the HTTP server: the deadline for
 * a request's headers and body (slow clients are cut off), and the status
 * and token count of the request for the access log. See guard.c.
 */
#ifndef R1_SERVER_GUARD_H
#define R1_SERVER_GUARD_H

#include <sys/socket.h>

struct conn_info {
    int fd;
    double start;                 /* when the request being read began (r1_now) */
    int reading;                  /* the deadline applies: the request is not complete */
    int status;                   /* of the response queued last (the access log) */
    long tokens;                  /* completion tokens of that response, -1 unknown */
    struct sockaddr_storage addr; /* the client's */
    struct conn_info *prev, *next;
};

struct guard;

/* A guard whose watchdog cuts off connections reading one request longer
 * than deadline_s seconds (0: no watchdog, bookkeeping only). NULL on error. */
struct guard *guard_new(double deadline_s);
void guard_free(struct guard *g);
/* A connection opened (fd) / closed; guard_open returns NULL when out of memory. */
struct conn_info *guard_open(struct guard *g, int fd, const struct sockaddr *addr, socklen_t alen);
void guard_close(struct guard *g, struct conn_info *c);
/* The connection starts reading a request (reading 1: the clock restarts)
 * or has read it all (0: no deadline while it is answered). */
void guard_reading(struct guard *g, struct conn_info *c, int reading);
/* Open connections of addr's host (front_same_host). */
int guard_count_host(struct guard *g, const struct sockaddr_storage *addr);
/* Connections cut off so far. */
long guard_shut(struct guard *g);

#endif
