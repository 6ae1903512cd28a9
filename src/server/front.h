/*
 * front.h - the accept loop in front of libmicrohttpd (see front.c): new
 * connections wait here until their request head is complete and sound,
 * then go to the daemon; bad heads get a JSON error.
 */
#ifndef R1_SERVER_FRONT_H
#define R1_SERVER_FRONT_H

#include <microhttpd.h>

#include <sys/socket.h>

struct front_opts {
    unsigned max_pending; /* connections waiting for their head, all together */
    unsigned per_ip;      /* connections of one address, waiting or with the daemon (0 = no limit) */
    /* the connections of an address the daemon holds (NULL: none counted) */
    int (*active)(void *ctx, const struct sockaddr_storage *addr);
    void *ctx;
    double deadline_s; /* a head must arrive within this (0 = no limit): 408 */
    double idle_s;     /* dropped after this long without a byte (0 = never) */
};

struct front;

/* Accept on the listening socket lfd (bound and listening) and hand sound
 * connections to d (started with MHD_USE_NO_LISTEN_SOCKET). NULL on error. */
struct front *front_start(int lfd, struct MHD_Daemon *d, const struct front_opts *o);
/* Whether a and b are the same IPv4 or IPv6 host. */
int front_same_host(const struct sockaddr_storage *a, const struct sockaddr_storage *b);
/* Stop accepting and close the connections still waiting (not lfd). */
void front_stop(struct front *f);

#endif
