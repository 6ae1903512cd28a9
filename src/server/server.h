/*
 * server.h - the OpenAI-compatible HTTP front end of `r1infer serve`
 * (libmicrohttpd, a thread per connection). Routes, authentication, body
 * limits and response plumbing; generation is the scheduler's (sched.h).
 *
 *   POST /v1/chat/completions   POST /v1/completions   (stream true|false)
 *   GET  /v1/models             GET  /health           GET  /  (chat page)
 *   GET  /metrics (Prometheus)  POST /tokenize         POST /detokenize
 */
#ifndef R1_SERVER_SERVER_H
#define R1_SERVER_SERVER_H

#include <stddef.h>

#include "r1infer.h"
#include "server/sched.h"

struct server_opts {
    const char *host;            /* address to bind ("127.0.0.1") */
    int port;                    /* 0 = any free port (see server_port) */
    const char *api_key;         /* NULL = no authentication */
    size_t max_body;             /* request body limit in bytes (413 beyond) */
    unsigned timeout_s;          /* idle / slow-client limit per connection */
    unsigned max_conns;          /* simultaneous connections */
    const char *model_name;      /* id listed by /v1/models */
    struct r1_sampler_params sp; /* sampler defaults for requests */
    unsigned max_conns_per_ip;   /* simultaneous connections of one client address (0 = no limit) */
    double deadline_s;           /* a request's headers and body must arrive within this (0 = no limit) */
    int access_log;              /* a line on stderr per request */
};

struct server;

/* Bind and start serving; jobs go to s. NULL on error (message on stderr). */
struct server *server_start(const struct server_opts *o, struct sched *s);
/* The port actually bound. */
int server_port(const struct server *srv);
/* Stop accepting, close every connection and free the server (call
 * sched_stop first so that waiting connections return). */
void server_stop(struct server *srv);

/* The chat page served at "/" (page.c). */
extern const char server_page_html[];

#endif
