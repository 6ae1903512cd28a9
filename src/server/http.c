/*
 * http.c - routes, authentication, request bodies and streaming responses
 * on libmicrohttpd; see server.h. Each connection has its own thread, so a
 * handler may block while its job runs; it polls its socket meanwhile so a
 * client that leaves cancels its job. Must not parse request JSON itself
 * (request.c) nor run the model (sched.c).
 */
#include "server/server.h"

#include <jansson.h>
#include <microhttpd.h>
#include <netdb.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <arpa/inet.h>

#include "server/front.h"
#include "server/guard.h"
#include "server/request.h"
#include "server/response.h"
#include "server/sbuf.h"
#include "util/util.h"

struct server {
    struct MHD_Daemon *d;
    struct sched *sched;
    struct server_opts o;
    long started;
    int port;
    struct guard *guard; /* request deadlines, the access log's status */
    struct front *front; /* accepts, and vets each connection's first request head */
    int lfd;             /* the listening socket */
    _Atomic long conns;  /* connections accepted (/metrics r1_http_connections_total) */
};

enum route {
    ROUTE_NONE,
    ROUTE_PAGE,
    ROUTE_HEALTH,
    ROUTE_METRICS,
    ROUTE_MODELS,
    ROUTE_MODEL, /* /v1/models/{id} (matched by prefix) */
    ROUTE_CHAT,
    ROUTE_COMPLETIONS,
    ROUTE_TOKENIZE,
    ROUTE_DETOKENIZE
};

static const struct {
    const char *path;
    enum route route;
    int post; /* POST (else GET/HEAD) */
    int auth; /* needs the API key */
} routes[] = {
    {"/", ROUTE_PAGE, 0, 0},
    {"/index.html", ROUTE_PAGE, 0, 0},
    {"/health", ROUTE_HEALTH, 0, 0},
    {"/metrics", ROUTE_METRICS, 0, 0},
    {"/tokenize", ROUTE_TOKENIZE, 1, 1},
    {"/detokenize", ROUTE_DETOKENIZE, 1, 1},
    {"/v1/models", ROUTE_MODELS, 0, 1},
    {"/v1/models/", ROUTE_MODEL, 0, 1},
    {"/v1/chat/completions", ROUTE_CHAT, 1, 1},
    {"/v1/completions", ROUTE_COMPLETIONS, 1, 1},
};

/* Per-request state (MHD's con_cls). */
struct req_ctx {
    struct sbuf body;
    int route_index;
    int too_large;   /* the body passed --max-body: drained, then 413 */
    int responded;   /* a response was queued: a body that follows is dropped */
    int deferred;    /* no body: routed in the final call (see on_request) */
    int timeout_off; /* the idle timeout is off while a job runs */
    double t0;       /* when the request's headers were complete (access log) */
    char method[8];
    char path[96];
};

static struct conn_info *conn_of(struct MHD_Connection *c) {
    const union MHD_ConnectionInfo *ci = MHD_get_connection_info(c, MHD_CONNECTION_INFO_SOCKET_CONTEXT);
    return ci ? ci->socket_context : NULL;
}

static void note_status(struct MHD_Connection *c, unsigned status) {
    struct conn_info *ci = conn_of(c);
    if (ci) ci->status = (int)status;
}

/* ------------------------------------------------------------ responses */

static enum MHD_Result send_body(struct MHD_Connection *c, unsigned status, const char *ctype, char *body, size_t len,
                                 enum MHD_ResponseMemoryMode mode, const char *hname, const char *hvalue) {
    struct MHD_Response *r = MHD_create_response_from_buffer(len, body, mode);
    if (!r) {
        if (mode == MHD_RESPMEM_MUST_FREE) free(body);
        return MHD_NO;
    }
    MHD_add_response_header(r, MHD_HTTP_HEADER_CONTENT_TYPE, ctype);
    MHD_add_response_header(r, MHD_HTTP_HEADER_ACCESS_CONTROL_ALLOW_ORIGIN, "*");
    if (hname) MHD_add_response_header(r, hname, hvalue);
    note_status(c, status);
    enum MHD_Result ret = MHD_queue_response(c, status, r);
    MHD_destroy_response(r);
    return ret;
}

static enum MHD_Result send_json(struct MHD_Connection *c, unsigned status, char *json) {
    if (!json) return MHD_NO;
    return send_body(c, status, "application/json", json, strlen(json), MHD_RESPMEM_MUST_FREE, NULL, NULL);
}

static enum MHD_Result send_error(struct MHD_Connection *c, const struct api_error *e, const char *hname,
                                  const char *hvalue) {
    char *json = resp_error(e);
    if (!json) return MHD_NO;
    return send_body(c, (unsigned)e->status, "application/json", json, strlen(json), MHD_RESPMEM_MUST_FREE, hname,
                     hvalue);
}

static enum MHD_Result fail(struct MHD_Connection *c, int status, const char *type, const char *code, const char *hname,
                            const char *hvalue, const char *fmt, ...) __attribute__((format(printf, 7, 8)));
static enum MHD_Result fail(struct MHD_Connection *c, int status, const char *type, const char *code, const char *hname,
                            const char *hvalue, const char *fmt, ...) {
    struct api_error e;
    api_error_set(&e, status, type, NULL, code, "%s", "");
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(e.message, sizeof e.message, fmt, ap);
    va_end(ap);
    return send_error(c, &e, hname, hvalue);
}

/* --------------------------------------------------------------- helpers */

/* Constant-time: the time depends on the lengths, not on where they differ. */
static int key_matches(const char *got, const char *want) {
    size_t gl = strlen(got), wl = strlen(want);
    unsigned char diff = (unsigned char)(gl != wl);
    for (size_t i = 0; i < wl; i++) diff |= (unsigned char)(want[i] ^ (i < gl ? got[i] : 0));
    return diff == 0;
}

static int authorized(const struct server *srv, struct MHD_Connection *c) {
    if (!srv->o.api_key) return 1;
    const char *h = MHD_lookup_connection_value(c, MHD_HEADER_KIND, MHD_HTTP_HEADER_AUTHORIZATION);
    if (!h || strncasecmp(h, "Bearer ", 7)) return 0;
    h += 7;
    while (*h == ' ') h++;
    return key_matches(h, srv->o.api_key);
}

static int conn_fd(struct MHD_Connection *c) {
    const union MHD_ConnectionInfo *ci = MHD_get_connection_info(c, MHD_CONNECTION_INFO_CONNECTION_FD);
    return ci ? ci->connect_fd : -1;
}

static void set_timeout(struct MHD_Connection *c, unsigned secs) {
    MHD_set_connection_option(c, MHD_CONNECTION_OPTION_TIMEOUT, secs);
}

/* ------------------------------------------------------------ endpoints */

static enum MHD_Result do_health(struct server *srv, struct MHD_Connection *c) {
    struct sched_stats st;
    sched_stats(srv->sched, &st);
    json_t *j =
        json_pack("{s:s, s:i, s:i, s:i, s:i, s:i, s:I, s:I, s:I}", "status", "ok", "slots", st.slots, "slots_idle",
                  st.slots - st.busy, "slots_busy", st.busy, "queued", st.queued, "queue_cap", st.queue_cap, "served",
                  (json_int_t)st.served, "cancelled", (json_int_t)st.cancelled, "rejected", (json_int_t)st.rejected);
    char *s = j ? json_dumps(j, JSON_COMPACT) : NULL;
    json_decref(j);
    return send_json(c, 200, s);
}

static enum MHD_Result do_models(struct server *srv, struct MHD_Connection *c) {
    json_t *j = json_pack("{s:s, s:[{s:s, s:s, s:I, s:s, s:{s:i}}]}", "object", "list", "data", "id", srv->o.model_name,
                          "object", "model", "created", (json_int_t)srv->started, "owned_by", "r1infer", "meta",
                          "n_ctx", sched_n_ctx(srv->sched));
    char *s = j ? json_dumps(j, JSON_COMPACT) : NULL;
    json_decref(j);
    return send_json(c, 200, s);
}

/* GET /v1/models/{id}: the served model, or 404 for any other id */
static enum MHD_Result do_model(struct server *srv, struct MHD_Connection *c, const char *id) {
    if (strcmp(id, srv->o.model_name))
        return fail(c, 404, "invalid_request_error", "model_not_found", NULL, NULL,
                    "The model '%.200s' does not exist; this server serves '%s'.", id, srv->o.model_name);
    json_t *j = json_pack("{s:s, s:s, s:I, s:s, s:{s:i}}", "id", srv->o.model_name, "object", "model", "created",
                          (json_int_t)srv->started, "owned_by", "r1infer", "meta", "n_ctx", sched_n_ctx(srv->sched));
    char *s = j ? json_dumps(j, JSON_COMPACT) : NULL;
    json_decref(j);
    return send_json(c, 200, s);
}

/* A browser's CORS preflight (OPTIONS) for a known path: 204 with what a
 * cross-origin page may send (the API is open to any origin, as the
 * responses' Access-Control-Allow-Origin says; the key still guards it) */
static enum MHD_Result do_preflight(struct MHD_Connection *c) {
    struct MHD_Response *r = MHD_create_response_from_buffer(0, "", MHD_RESPMEM_PERSISTENT);
    if (!r) return MHD_NO;
    MHD_add_response_header(r, MHD_HTTP_HEADER_ACCESS_CONTROL_ALLOW_ORIGIN, "*");
    MHD_add_response_header(r, "Access-Control-Allow-Methods", "GET, POST, HEAD, OPTIONS");
    MHD_add_response_header(r, "Access-Control-Allow-Headers", "Authorization, Content-Type");
    MHD_add_response_header(r, "Access-Control-Max-Age", "86400");
    note_status(c, 204);
    enum MHD_Result ret = MHD_queue_response(c, 204, r);
    MHD_destroy_response(r);
    return ret;
}

struct stream_ctx {
    struct job *job;
    int fd;
};

static ssize_t stream_read(void *cls, uint64_t pos, char *buf, size_t max) {
    (void)pos;
    struct stream_ctx *sc = cls;
    ssize_t n = job_read(sc->job, buf, max, sc->fd);
    if (n > 0) return n;
    return n == 0 ? MHD_CONTENT_READER_END_OF_STREAM : MHD_CONTENT_READER_END_WITH_ERROR;
}

static void stream_free(void *cls) {
    struct stream_ctx *sc = cls;
    job_release(sc->job);
    free(sc);
}

static enum MHD_Result do_generate(struct server *srv, struct MHD_Connection *c, struct req_ctx *rc,
                                   enum req_kind kind) {
    struct gen_request req;
    struct api_error err;
    if (req_parse(rc->body.p ? rc->body.p : "", rc->body.len, kind, &srv->o.sp, &req, &err))
        return send_error(c, &err, NULL, NULL);
    int stream = req.stream;
    struct job *j = sched_submit(srv->sched, &req, &err);
    if (!j) return send_error(c, &err, err.status == 503 ? MHD_HTTP_HEADER_RETRY_AFTER : NULL, "1");
    /* a queued or long generation is not an idle client */
    set_timeout(c, 0);
    rc->timeout_off = 1;
    int fd = conn_fd(c);
    if (stream) {
        struct stream_ctx *sc = malloc(sizeof *sc);
        struct MHD_Response *r =
            sc ? MHD_create_response_from_callback(MHD_SIZE_UNKNOWN, 16384, stream_read, sc, stream_free) : NULL;
        if (!r) {
            free(sc);
            job_release(j);
            return MHD_NO;
        }
        sc->job = j;
        sc->fd = fd;
        MHD_add_response_header(r, MHD_HTTP_HEADER_CONTENT_TYPE, "text/event-stream");
        MHD_add_response_header(r, MHD_HTTP_HEADER_CACHE_CONTROL, "no-cache");
        MHD_add_response_header(r, "X-Accel-Buffering", "no");
        MHD_add_response_header(r, MHD_HTTP_HEADER_ACCESS_CONTROL_ALLOW_ORIGIN, "*");
        note_status(c, 200);
        enum MHD_Result ret = MHD_queue_response(c, 200, r);
        MHD_destroy_response(r);
        return ret;
    }
    char *body = NULL;
    int status = 500;
    int rc_wait = job_wait(j, fd, &body, &status);
    job_release(j);
    if (rc_wait) return MHD_NO; /* the client left (or we are stopping): close */
    const char *ct = body ? strstr(body, "\"completion_tokens\":") : NULL;
    struct conn_info *ci = conn_of(c);
    if (ci && ct) ci->tokens = strtol(ct + 20, NULL, 10);
    return send_json(c, (unsigned)status, body);
}

/* POST /tokenize {"content": "...", "add_special": false, "with_pieces": false}
 *   -> {"tokens": [ids]} or, with pieces, {"tokens": [{"id": 1, "piece": "..."}]}
 * POST /detokenize {"tokens": [ids]} -> {"content": "..."}  (as llama-server) */
static enum MHD_Result do_tokens(struct server *srv, struct MHD_Connection *c, struct req_ctx *rc, int encode) {
    json_error_t je;
    json_t *in = json_loadb(rc->body.p ? rc->body.p : "", rc->body.len, 0, &je);
    const r1_tokenizer_t *tok = sched_tokenizer(srv->sched);
    if (!json_is_object(in)) {
        json_decref(in);
        return fail(c, 400, "invalid_request_error", NULL, NULL, NULL, "The body must be a JSON object.");
    }
    json_t *out = NULL;
    if (encode) {
        json_t *content = json_object_get(in, "content"), *as = json_object_get(in, "add_special"),
               *wp = json_object_get(in, "with_pieces");
        if (!json_is_string(content) || (as && !json_is_boolean(as)) || (wp && !json_is_boolean(wp))) {
            json_decref(in);
            return fail(c, 400, "invalid_request_error", NULL, NULL, NULL,
                        "'content' must be a string ('add_special' and 'with_pieces' booleans).");
        }
        int32_t *ids = NULL;
        int n =
            r1_tokenizer_encode(tok, json_string_value(content), json_string_length(content), json_is_true(as), &ids);
        json_t *arr = n >= 0 ? json_array() : NULL;
        for (int i = 0; arr && i < n; i++) {
            if (!json_is_true(wp)) {
                json_array_append_new(arr, json_integer(ids[i]));
                continue;
            }
            char *piece = NULL;
            long len = r1_tokenizer_decode(tok, &ids[i], 1, 0, &piece);
            json_array_append_new(
                arr, json_pack("{s:i, s:s%}", "id", ids[i], "piece", piece ? piece : "", (size_t)(len > 0 ? len : 0)));
            free(piece);
        }
        free(ids);
        if (arr) out = json_pack("{s:o}", "tokens", arr);
    } else {
        json_t *arr = json_object_get(in, "tokens");
        size_t n = json_is_array(arr) ? json_array_size(arr) : 0;
        int32_t *ids = malloc((n ? n : 1) * sizeof *ids);
        int bad = !json_is_array(arr) || !ids;
        for (size_t i = 0; !bad && i < n; i++) {
            json_t *v = json_array_get(arr, i);
            bad = !json_is_integer(v) || json_integer_value(v) < 0 ||
                  json_integer_value(v) >= r1_tokenizer_vocab_size(tok);
            if (!bad) ids[i] = (int32_t)json_integer_value(v);
        }
        if (bad) {
            free(ids);
            json_decref(in);
            return fail(c, 400, "invalid_request_error", NULL, NULL, NULL,
                        "'tokens' must be an array of token ids from 0 to %d.", r1_tokenizer_vocab_size(tok) - 1);
        }
        char *text = NULL;
        long len = r1_tokenizer_decode(tok, ids, n, 0, &text);
        free(ids);
        if (len >= 0) out = json_pack("{s:s%}", "content", text ? text : "", (size_t)len);
        free(text);
    }
    json_decref(in);
    if (!out) return fail(c, 500, "server_error", NULL, NULL, NULL, "tokenization failed: %s", r1_last_error());
    char *s = json_dumps(out, JSON_COMPACT);
    json_decref(out);
    return send_json(c, 200, s);
}

/* ------------------------------------------------------------- dispatch */

/* The checks every request passes, and the endpoints that need no body:
 * either queues a response (rc->responded) or leaves rc to collect a body. */
static enum MHD_Result route_head(struct server *srv, struct MHD_Connection *c, struct req_ctx *rc, const char *url,
                                  const char *method) {
    for (size_t i = 0; i < sizeof routes / sizeof routes[0]; i++)
        if (routes[i].route == ROUTE_MODEL
                ? !strncmp(url, routes[i].path, strlen(routes[i].path)) && url[strlen(routes[i].path)]
                : !strcmp(url, routes[i].path))
            rc->route_index = (int)i;
    int is_get = !strcmp(method, "GET") || !strcmp(method, "HEAD"), is_post = !strcmp(method, "POST");
    int ri = rc->route_index;
    rc->responded = 1; /* unless we wait for a body below */
    if (ri < 0)
        return fail(c, 404, "invalid_request_error", "not_found", NULL, NULL, "Unknown path: %s %.200s", method, url);
    if (!strcmp(method, "OPTIONS")) return do_preflight(c);
    if (routes[ri].post ? !is_post : !is_get)
        return fail(c, 405, "invalid_request_error", "method_not_allowed", MHD_HTTP_HEADER_ALLOW,
                    routes[ri].post ? "POST" : "GET, HEAD", "%s is not allowed on %s; use %s", method, routes[ri].path,
                    routes[ri].post ? "POST" : "GET");
    if (routes[ri].auth && !authorized(srv, c))
        return fail(c, 401, "invalid_request_error", "invalid_api_key", MHD_HTTP_HEADER_WWW_AUTHENTICATE, "Bearer",
                    "Missing or wrong API key: send the header 'Authorization: Bearer KEY' "
                    "with the key given to --api-key.");
    switch (routes[ri].route) {
    case ROUTE_PAGE:
        return send_body(c, 200, "text/html; charset=utf-8", (char *)server_page_html, strlen(server_page_html),
                         MHD_RESPMEM_PERSISTENT, NULL, NULL);
    case ROUTE_HEALTH:
        return do_health(srv, c);
    case ROUTE_METRICS: {
        char *t = sched_metrics_text(srv->sched);
        if (!t) return MHD_NO;
        char line[160];
        int n = snprintf(line, sizeof line,
                         "# HELP r1_http_connections_total TCP connections accepted.\n"
                         "# TYPE r1_http_connections_total counter\nr1_http_connections_total %ld\n",
                         (long)srv->conns);
        size_t tl = strlen(t);
        char *all = realloc(t, tl + (size_t)n + 1);
        if (!all) {
            free(t);
            return MHD_NO;
        }
        memcpy(all + tl, line, (size_t)n + 1);
        return send_body(c, 200, "text/plain; version=0.0.4; charset=utf-8", all, tl + (size_t)n, MHD_RESPMEM_MUST_FREE,
                         NULL, NULL);
    }
    case ROUTE_MODELS:
        return do_models(srv, c);
    case ROUTE_MODEL:
        return do_model(srv, c, url + strlen(routes[ri].path));
    default:
        break;
    }
    const char *cl = MHD_lookup_connection_value(c, MHD_HEADER_KIND, MHD_HTTP_HEADER_CONTENT_LENGTH);
    if (cl && strtoull(cl, NULL, 10) > srv->o.max_body)
        return fail(c, 413, "invalid_request_error", "request_too_large", NULL, NULL,
                    "The request body is %s bytes; the limit is %zu (--max-body).", cl, srv->o.max_body);
    rc->responded = 0;
    return MHD_YES; /* read the body */
}

/* A request with a body is routed in the first call, so that a refusal
 * comes before the body is read (libmicrohttpd then discards the body and
 * closes). One without is routed in the final call: libmicrohttpd closes
 * every connection whose response was queued in the first call, so only
 * then does keep-alive work. */
static enum MHD_Result on_request(void *cls, struct MHD_Connection *c, const char *url, const char *method,
                                  const char *version, const char *upload_data, size_t *upload_size, void **con_cls) {
    (void)version;
    struct server *srv = cls;
    struct req_ctx *rc = *con_cls;
    if (!rc) {
        if (!(rc = calloc(1, sizeof *rc))) return MHD_NO;
        *con_cls = rc;
        rc->route_index = -1;
        rc->t0 = r1_now();
        snprintf(rc->method, sizeof rc->method, "%s", method);
        snprintf(rc->path, sizeof rc->path, "%s", url);
        struct conn_info *ci = conn_of(c);
        if (ci) ci->status = 0, ci->tokens = -1;
        if (strcmp(method, "POST")) guard_reading(srv->guard, ci, 0); /* no body to wait for */
        const char *cl = MHD_lookup_connection_value(c, MHD_HEADER_KIND, MHD_HTTP_HEADER_CONTENT_LENGTH);
        const char *te = MHD_lookup_connection_value(c, MHD_HEADER_KIND, MHD_HTTP_HEADER_TRANSFER_ENCODING);
        if (!te && (!cl || !strtoull(cl, NULL, 10))) {
            rc->deferred = 1;
            return MHD_YES;
        }
        return route_head(srv, c, rc, url, method);
    }
    if (*upload_size) {
        if (!rc->responded && !rc->too_large) {
            if (rc->body.len + *upload_size > srv->o.max_body) {
                rc->too_large = 1;
                sbuf_free(&rc->body);
            } else if (sbuf_add(&rc->body, upload_data, *upload_size)) {
                return MHD_NO;
            }
        }
        *upload_size = 0;
        return MHD_YES;
    }
    guard_reading(srv->guard, conn_of(c), 0); /* the whole request is in */
    if (rc->deferred) {
        rc->deferred = 0;
        enum MHD_Result ret = route_head(srv, c, rc, url, method);
        if (rc->responded) return ret;
    }
    if (rc->responded) return MHD_YES;
    rc->responded = 1;
    if (rc->too_large)
        return fail(c, 413, "invalid_request_error", "request_too_large", NULL, NULL,
                    "The request body is larger than %zu bytes (--max-body).", srv->o.max_body);
    enum route rt = routes[rc->route_index].route;
    if (rt == ROUTE_TOKENIZE || rt == ROUTE_DETOKENIZE) return do_tokens(srv, c, rc, rt == ROUTE_TOKENIZE);
    return do_generate(srv, c, rc, rt == ROUTE_CHAT ? REQ_CHAT : REQ_COMPLETION);
}

static void on_completed(void *cls, struct MHD_Connection *c, void **con_cls, enum MHD_RequestTerminationCode toe) {
    struct server *srv = cls;
    struct req_ctx *rc = *con_cls;
    if (!rc) return;
    if (rc->timeout_off) set_timeout(c, srv->o.timeout_s); /* back to the idle limit for keep-alive */
    struct conn_info *ci = conn_of(c);
    if (srv->o.access_log) {
        char addr[64] = "-";
        const union MHD_ConnectionInfo *ai = MHD_get_connection_info(c, MHD_CONNECTION_INFO_CLIENT_ADDRESS);
        const struct sockaddr *sa = ai ? ai->client_addr : NULL;
        if (sa && sa->sa_family == AF_INET)
            inet_ntop(AF_INET, &((const struct sockaddr_in *)sa)->sin_addr, addr, sizeof addr);
        else if (sa && sa->sa_family == AF_INET6)
            inet_ntop(AF_INET6, &((const struct sockaddr_in6 *)sa)->sin6_addr, addr, sizeof addr);
        char tokens[24] = "-";
        if (ci && ci->tokens >= 0) snprintf(tokens, sizeof tokens, "%ld", ci->tokens);
        fprintf(stderr, "r1infer serve: access: %s %s %s %d tokens=%s %.0f ms%s\n", addr, rc->method, rc->path,
                ci ? ci->status : 0, tokens, 1e3 * (r1_now() - rc->t0),
                toe == MHD_REQUEST_TERMINATED_COMPLETED_OK ? "" : " (not completed)");
    }
    guard_reading(srv->guard, ci, 1); /* a keep-alive connection's next request */
    sbuf_free(&rc->body);
    free(rc);
    *con_cls = NULL;
}

static void on_connection(void *cls, struct MHD_Connection *c, void **socket_context,
                          enum MHD_ConnectionNotificationCode code) {
    struct server *srv = cls;
    if (code == MHD_CONNECTION_NOTIFY_STARTED) {
        srv->conns++;
        const union MHD_ConnectionInfo *ai = MHD_get_connection_info(c, MHD_CONNECTION_INFO_CLIENT_ADDRESS);
        const struct sockaddr *sa = ai ? ai->client_addr : NULL;
        socklen_t len = !sa ? 0 : sa->sa_family == AF_INET6 ? sizeof(struct sockaddr_in6) : sizeof(struct sockaddr_in);
        *socket_context = guard_open(srv->guard, conn_fd(c), sa, len);
    } else guard_close(srv->guard, *socket_context), *socket_context = NULL;
}

static int active_of_host(void *ctx, const struct sockaddr_storage *addr) {
    return guard_count_host(((struct server *)ctx)->guard, addr);
}

static void on_log(void *cls, const char *fmt, va_list ap) {
    (void)cls;
    char line[512];
    vsnprintf(line, sizeof line, fmt, ap);
    size_t n = strlen(line);
    while (n && line[n - 1] == '\n') line[--n] = 0;
    fprintf(stderr, "r1infer serve: http: %s\n", line);
}

/* ------------------------------------------------------------ lifecycle */

struct server *server_start(const struct server_opts *o, struct sched *s) {
    struct server *srv = calloc(1, sizeof *srv);
    if (!srv) return NULL;
    srv->o = *o;
    srv->sched = s;
    srv->started = (long)time(NULL);
    if (!(srv->guard = guard_new(o->deadline_s))) {
        fprintf(stderr, "r1infer serve: cannot start the request watchdog\n");
        free(srv);
        return NULL;
    }
    char port[16];
    snprintf(port, sizeof port, "%d", o->port);
    struct addrinfo hints = {.ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM, .ai_flags = AI_NUMERICSERV}, *ai;
    int gai = getaddrinfo(o->host, port, &hints, &ai);
    if (gai) {
        fprintf(stderr, "r1infer serve: cannot resolve --host '%s': %s\n", o->host, gai_strerror(gai));
        guard_free(srv->guard);
        free(srv);
        return NULL;
    }
    /* the listening socket is the front's (front.c): the daemon gets vetted connections */
    srv->lfd = socket(ai->ai_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
    int one = 1;
    if (srv->lfd < 0 || setsockopt(srv->lfd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one) ||
        bind(srv->lfd, ai->ai_addr, ai->ai_addrlen) || listen(srv->lfd, 1024)) {
        fprintf(stderr, "r1infer serve: cannot listen on %s:%d (in use? try another --port)\n", o->host, o->port);
        if (srv->lfd >= 0) close(srv->lfd);
        freeaddrinfo(ai);
        guard_free(srv->guard);
        free(srv);
        return NULL;
    }
    freeaddrinfo(ai);
    unsigned flags = MHD_USE_THREAD_PER_CONNECTION | MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_POLL |
                     MHD_USE_ERROR_LOG | MHD_USE_NO_LISTEN_SOCKET | MHD_USE_ITC;
    srv->d =
        MHD_start_daemon(flags, 0, NULL, NULL, on_request, srv, MHD_OPTION_EXTERNAL_LOGGER, on_log, NULL,
                         MHD_OPTION_CONNECTION_TIMEOUT, o->timeout_s, MHD_OPTION_CONNECTION_MEMORY_LIMIT,
                         (size_t)32 * 1024, MHD_OPTION_CONNECTION_LIMIT, o->max_conns, MHD_OPTION_NOTIFY_CONNECTION,
                         on_connection, srv, MHD_OPTION_NOTIFY_COMPLETED, on_completed, srv, MHD_OPTION_END);
    struct front_opts fo = {.max_pending = o->max_conns,
                            .per_ip = o->max_conns_per_ip,
                            .deadline_s = o->deadline_s,
                            .idle_s = o->timeout_s,
                            .active = active_of_host,
                            .ctx = srv};
    if (!srv->d || !(srv->front = front_start(srv->lfd, srv->d, &fo))) {
        fprintf(stderr, "r1infer serve: cannot start the HTTP daemon on %s:%d\n", o->host, o->port);
        if (srv->d) MHD_stop_daemon(srv->d);
        close(srv->lfd);
        guard_free(srv->guard);
        free(srv);
        return NULL;
    }
    struct sockaddr_storage sa;
    socklen_t sl = sizeof sa;
    srv->port = o->port;
    if (!getsockname(srv->lfd, (struct sockaddr *)&sa, &sl))
        srv->port = ntohs(sa.ss_family == AF_INET6 ? ((struct sockaddr_in6 *)&sa)->sin6_port
                                                   : ((struct sockaddr_in *)&sa)->sin_port);
    return srv;
}

int server_port(const struct server *srv) { return srv->port; }

void server_stop(struct server *srv) {
    if (!srv) return;
    front_stop(srv->front);
    close(srv->lfd);
    MHD_stop_daemon(srv->d);
    guard_free(srv->guard);
    free(srv);
}
