/*
 * stop.h - stop strings over streamed text. Generated text arrives in
 * pieces that do not respect stop-string boundaries, so the matcher holds
 * back any tail that could still grow into a stop string and releases it
 * only once it cannot. A matched stop string and everything after it are
 * never released. Pure text processing: no I/O, no model.
 */
#ifndef R1_SERVER_STOP_H
#define R1_SERVER_STOP_H

#include "server/sbuf.h"

struct stop_match {
    char *const *stops; /* (n) NUL-terminated, non-empty; not owned */
    int n;
    struct sbuf hold; /* text not yet released: a possible stop-string prefix */
    int hit;          /* a stop string matched; later input is ignored */
};

void stop_init(struct stop_match *m, char *const *stops, int n);
void stop_free(struct stop_match *m);
/* Feed n bytes of output; append what can be released to out. Returns 1 if
 * a stop string matched (the text before it is released, the rest dropped),
 * else 0. */
int stop_feed(struct stop_match *m, const char *text, size_t n, struct sbuf *out);
/* End of output without a match: release the held text. */
void stop_flush(struct stop_match *m, struct sbuf *out);

#endif
