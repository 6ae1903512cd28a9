/*
 * front.c - the accept loop in front of libmicrohttpd: it owns the
 * listening socket, holds each new connection until its first request's
 * head (request line and headers) has arrived, checks that head, and only
 * then hands the connection to the daemon (MHD_add_connection). So a
 * garbage request line, a negative or doubled Content-Length, a head over
 * the size limit, or a head that takes longer than the deadline get a JSON
 * error at once (libmicrohttpd would answer its own HTML page, or wait),
 * and connections that never finish their head cost no daemon thread and
 * are limited per client address. When as many of them wait as
 * --max-conns allows, a new connection takes the place of the oldest one of
 * the address that holds the most (that one gets a 503): slow clients
 * cannot keep out a client that sends its request promptly.
 *
 * The head is read with MSG_PEEK: the daemon reads the same bytes again.
 * One thread, poll(2) over the listening socket and the waiting
 * connections; it never blocks on a client.
 */
#include "server/front.h"

#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "util/util.h"

#define HEAD_MAX 16384 /* bytes of a request head; more gets 431 */
#define POLL_MS 100

struct pend {
    int fd;
    struct sockaddr_storage addr;
    socklen_t alen;
    double start, last; /* accepted; last new byte */
    long seen;          /* bytes of head seen so far */
};

struct front {
    int lfd, wake[2];
    struct MHD_Daemon *d;
    struct front_opts o;
    pthread_t thread;
    int started;
    atomic_int stop; /* front_stop's thread sets it, the loop reads it */
    struct pend *p;  /* (max_pending) */
    int n;
    char *buf; /* (HEAD_MAX + 1) */
};

int front_same_host(const struct sockaddr_storage *a, const struct sockaddr_storage *b) {
    if (a->ss_family != b->ss_family) return 0;
    if (a->ss_family == AF_INET)
        return ((const struct sockaddr_in *)a)->sin_addr.s_addr == ((const struct sockaddr_in *)b)->sin_addr.s_addr;
    if (a->ss_family == AF_INET6)
        return !memcmp(&((const struct sockaddr_in6 *)a)->sin6_addr, &((const struct sockaddr_in6 *)b)->sin6_addr,
                       sizeof(struct in6_addr));
    return 0;
}

/* Answer an error as JSON and close (what the client sent is read first,
 * so that the close does not turn into a reset that loses the answer). */
static void refuse(int fd, int status, const char *reason, const char *type, const char *msg) {
    char body[512], resp[1024];
    int bl = snprintf(body, sizeof body,
                      "{\"error\":{\"message\":\"%s\",\"type\":\"%s\",\"param\":null,\"code\":null}}", msg, type);
    int rl = snprintf(resp, sizeof resp,
                      "HTTP/1.1 %d %s\r\nContent-Type: application/json\r\nContent-Length: %d\r\n"
                      "Connection: close\r\n\r\n%s",
                      status, reason, bl, body);
    char sink[4096];
    for (int k = 0; k < 16 && recv(fd, sink, sizeof sink, MSG_DONTWAIT) > 0; k++) { /* at most 64 KiB */
    }
    if (send(fd, resp, (size_t)rl, MSG_NOSIGNAL | MSG_DONTWAIT) < 0) { /* nothing more to do */
    }
    shutdown(fd, SHUT_WR);
    close(fd);
}

static int is_tchar(char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || strchr("!#$%&'*+-.^_`|~", c);
}

/* Verdict on the head bytes b[0..n): 0 wait for more, 1 complete and sound,
 * -1 malformed (400, *why says what), -2 too large (431). */
static int vet(const char *b, long n, const char **why) {
    const char *eol = memchr(b, '\n', (size_t)n);
    /* the request line: METHOD SP TARGET SP HTTP/1.x (checked as far as it has come) */
    long ll = eol ? (long)(eol - b) : n;
    if (ll > 0 && b[ll - 1] == '\r' && eol) ll--;
    long i = 0;
    while (i < ll && is_tchar(b[i])) i++;
    if ((i < ll && b[i] != ' ') || i > 16 || (eol && (i == 0 || i == ll))) {
        *why = "The request line is malformed: expected METHOD /path HTTP/1.1.";
        return -1;
    }
    if (i < ll) {
        long t = ++i;
        while (i < ll && b[i] > ' ' && b[i] != 0x7f) i++;
        if ((i < ll && b[i] != ' ') || (eol && (i == t || i == ll))) {
            *why = "The request line is malformed: expected METHOD /path HTTP/1.1.";
            return -1;
        }
        if (i < ll) {
            long v = i + 1, vl = ll - v;
            if (vl > 8 || (memcmp(b + v, "HTTP/1.1", (size_t)vl) && memcmp(b + v, "HTTP/1.0", (size_t)vl)) ||
                (eol && vl != 8)) {
                *why = "Only HTTP/1.0 and HTTP/1.1 are spoken here.";
                return -1;
            }
        }
    }
    if (!eol) return n >= HEAD_MAX ? -2 : 0;
    /* the end of the head */
    const char *end = NULL;
    for (const char *p = eol; p && p < b + n; p = memchr(p + 1, '\n', (size_t)(b + n - p - 1))) {
        const char *q = p + 1;
        if (q < b + n && *q == '\r') q++;
        if (q < b + n && *q == '\n') {
            end = q + 1;
            break;
        }
    }
    if (!end) return n >= HEAD_MAX ? -2 : 0;
    /* the headers: name: value; one Content-Length of digits; not with Transfer-Encoding */
    int n_cl = 0, te = 0;
    unsigned long long cl = 0;
    for (const char *p = eol + 1; p < end;) {
        const char *e = memchr(p, '\n', (size_t)(end - p));
        long len = (long)(e - p);
        if (len > 0 && p[len - 1] == '\r') len--;
        if (len == 0) break;
        long k = 0;
        while (k < len && is_tchar(p[k])) k++;
        if (k == 0 || k == len || p[k] != ':') {
            *why = "A header line is malformed: expected 'Name: value'.";
            return -1;
        }
        const char *v = p + k + 1, *ve = p + len;
        while (v < ve && (*v == ' ' || *v == '\t')) v++;
        while (ve > v && (ve[-1] == ' ' || ve[-1] == '\t')) ve--;
        if (k == 14 && !strncasecmp(p, "Content-Length", 14)) {
            unsigned long long x = 0;
            if (v == ve || ve - v > 18) {
                *why = "Content-Length must be a non-negative integer of at most 18 digits.";
                return -1;
            }
            for (const char *d = v; d < ve; d++) {
                if (*d < '0' || *d > '9') {
                    *why = "Content-Length must be a non-negative integer.";
                    return -1;
                }
                x = x * 10 + (unsigned)(*d - '0');
            }
            if (n_cl++ && x != cl) {
                *why = "Two different Content-Length headers.";
                return -1;
            }
            cl = x;
        } else if (k == 17 && !strncasecmp(p, "Transfer-Encoding", 17)) {
            te = 1;
        }
        p = e + 1;
    }
    if (te && n_cl) {
        *why = "Content-Length and Transfer-Encoding must not both be sent.";
        return -1;
    }
    return 1;
}

static void drop(struct front *f, int i) { f->p[i] = f->p[--f->n]; }

static void accept_new(struct front *f) {
    for (;;) {
        struct pend q = {0};
        q.alen = sizeof q.addr;
        q.fd = accept4(f->lfd, (struct sockaddr *)&q.addr, &q.alen, SOCK_NONBLOCK | SOCK_CLOEXEC);
        if (q.fd < 0) return;
        int same = f->o.active ? f->o.active(f->o.ctx, &q.addr) : 0;
        for (int i = 0; i < f->n; i++) same += front_same_host(&f->p[i].addr, &q.addr);
        if (f->n >= (int)f->o.max_pending) {
            /* full of connections whose head is still coming: the oldest of
             * the address that holds the most of them makes room, so slow
             * clients cannot lock out one that sends its request at once */
            int victim = 0, most = 0;
            for (int i = 0; i < f->n; i++) {
                int c = 0;
                for (int k = 0; k < f->n; k++) c += front_same_host(&f->p[k].addr, &f->p[i].addr);
                if (c > most || (c == most && f->p[i].start < f->p[victim].start)) victim = i, most = c;
            }
            refuse(f->p[victim].fd, 503, "Service Unavailable", "server_error",
                   "Too many connections are opening: this one, the oldest of its address, made room for a new "
                   "one. Send the request promptly or retry later.");
            if (front_same_host(&f->p[victim].addr, &q.addr)) same--;
            drop(f, victim);
        }
        if (f->o.per_ip && same >= (int)f->o.per_ip) {
            refuse(q.fd, 429, "Too Many Requests", "rate_limit_error",
                   "Too many connections from this address (--max-conns-per-ip).");
            continue;
        }
        q.start = q.last = r1_now();
        f->p[f->n++] = q;
    }
}

static void *loop(void *arg) {
    struct front *f = arg;
    struct pollfd *pf = malloc(((size_t)f->o.max_pending + 2) * sizeof *pf);
    if (!pf) return NULL;
    while (!f->stop) {
        pf[0] = (struct pollfd){.fd = f->lfd, .events = POLLIN};
        pf[1] = (struct pollfd){.fd = f->wake[0], .events = POLLIN};
        for (int i = 0; i < f->n; i++) pf[i + 2] = (struct pollfd){.fd = f->p[i].fd, .events = POLLIN};
        int n = f->n;
        if (poll(pf, (nfds_t)n + 2, POLL_MS) < 0 && errno != EINTR) break;
        if (f->stop) break;
        double now = r1_now();
        for (int i = n - 1; i >= 0; i--) { /* backwards: drop() moves the last entry into i */
            struct pend *q = &f->p[i];
            if (pf[i + 2].revents) {
                long r = recv(q->fd, f->buf, HEAD_MAX, MSG_PEEK | MSG_DONTWAIT);
                if (r == 0 || (r < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)) {
                    close(q->fd);
                    drop(f, i);
                    continue;
                }
                if (r > q->seen) q->seen = r, q->last = now;
                const char *why = "";
                int v = r > 0 ? vet(f->buf, r, &why) : 0;
                if (v == 1) {
                    int busy = f->o.active ? f->o.active(f->o.ctx, &q->addr) : 0;
                    if (f->o.per_ip && busy >= (int)f->o.per_ip)
                        refuse(q->fd, 429, "Too Many Requests", "rate_limit_error",
                               "Too many connections from this address (--max-conns-per-ip).");
                    else /* on failure the daemon has closed the socket itself */
                        MHD_add_connection(f->d, q->fd, (const struct sockaddr *)&q->addr, q->alen);
                    drop(f, i);
                    continue;
                }
                if (v < 0) {
                    if (v == -2)
                        refuse(q->fd, 431, "Request Header Fields Too Large", "invalid_request_error",
                               "The request head is larger than 16384 bytes.");
                    else refuse(q->fd, 400, "Bad Request", "invalid_request_error", why);
                    drop(f, i);
                    continue;
                }
            }
            if (f->o.deadline_s > 0 && now - q->start > f->o.deadline_s) {
                refuse(q->fd, 408, "Request Timeout", "invalid_request_error",
                       "The request head did not arrive within the deadline (--request-deadline).");
                drop(f, i);
            } else if (f->o.idle_s > 0 && now - q->last > f->o.idle_s) {
                close(q->fd); /* idle: dropped without a word, as the daemon's --timeout does */
                drop(f, i);
            }
        }
        if (pf[0].revents) accept_new(f);
    }
    for (int i = 0; i < f->n; i++) close(f->p[i].fd);
    f->n = 0;
    free(pf);
    return NULL;
}

struct front *front_start(int lfd, struct MHD_Daemon *d, const struct front_opts *o) {
    struct front *f = calloc(1, sizeof *f);
    if (!f) return NULL;
    f->lfd = lfd, f->d = d, f->o = *o;
    if (f->o.max_pending < 1) f->o.max_pending = 1;
    f->p = calloc(f->o.max_pending, sizeof *f->p);
    f->buf = malloc(HEAD_MAX + 1);
    f->wake[0] = f->wake[1] = -1;
    int fl = fcntl(lfd, F_GETFL);
    if (!f->p || !f->buf || pipe(f->wake) || fl < 0 || fcntl(lfd, F_SETFL, fl | O_NONBLOCK) ||
        pthread_create(&f->thread, NULL, loop, f)) {
        front_stop(f);
        return NULL;
    }
    f->started = 1;
    return f;
}

void front_stop(struct front *f) {
    if (!f) return;
    if (f->started) {
        f->stop = 1;
        if (write(f->wake[1], "x", 1) < 0) { /* the poll times out anyway */
        }
        pthread_join(f->thread, NULL);
    }
    if (f->wake[0] >= 0) close(f->wake[0]), close(f->wake[1]);
    free(f->p);
    free(f->buf);
    free(f);
}
