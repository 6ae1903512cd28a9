/*
 * request.c - request body -> gen_request, with OpenAI-style validation
 * errors; see request.h. Every field is type-checked; unknown fields are
 * ignored as OpenAI's own server does. Must stay free of I/O and globals
 * (it is fuzzed).
 */
#include "server/request.h"

#include <jansson.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "server/sbuf.h"

int api_error_set(struct api_error *e, int status, const char *type, const char *param, const char *code,
                  const char *fmt, ...) {
    memset(e, 0, sizeof *e);
    e->status = status;
    e->type = type;
    e->code = code;
    snprintf(e->param, sizeof e->param, "%s", param ? param : "");
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(e->message, sizeof e->message, fmt, ap);
    va_end(ap);
    return -1;
}

#define BAD(param, ...) api_error_set(err, 400, "invalid_request_error", param, NULL, __VA_ARGS__)

int utf8_valid(const char *str, size_t n) {
    const unsigned char *s = (const unsigned char *)str;
    size_t i = 0;
    while (i < n) {
        unsigned c = s[i];
        if (c < 0x80) {
            i++;
            continue;
        }
        int len;
        unsigned cp, min;
        if ((c & 0xe0) == 0xc0) len = 2, cp = c & 0x1f, min = 0x80;
        else if ((c & 0xf0) == 0xe0) len = 3, cp = c & 0x0f, min = 0x800;
        else if ((c & 0xf8) == 0xf0) len = 4, cp = c & 0x07, min = 0x10000;
        else return 0;
        if (n - i < (size_t)len) return 0;
        for (int k = 1; k < len; k++) {
            if ((s[i + k] & 0xc0) != 0x80) return 0;
            cp = (cp << 6) | (s[i + k] & 0x3f);
        }
        if (cp < min || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff)) return 0;
        i += (size_t)len;
    }
    return 1;
}

static const char *json_kind(const json_t *v) {
    switch (json_typeof(v)) {
    case JSON_OBJECT:
        return "an object";
    case JSON_ARRAY:
        return "an array";
    case JSON_STRING:
        return "a string";
    case JSON_INTEGER:
    case JSON_REAL:
        return "a number";
    case JSON_TRUE:
    case JSON_FALSE:
        return "a boolean";
    default:
        return "null";
    }
}

/* Optional number field in [lo, hi]; 1 if set, 0 if absent or null, -1 on error. */
static int get_num(const json_t *root, const char *key, double lo, double hi, double *out, struct api_error *err) {
    const json_t *v = json_object_get(root, key);
    if (!v || json_is_null(v)) return 0;
    if (!json_is_number(v)) return BAD(key, "'%s' must be a number, not %s", key, json_kind(v));
    double x = json_number_value(v);
    if (!(x >= lo && x <= hi)) return BAD(key, "'%s' must be between %g and %g, got %g", key, lo, hi, x);
    *out = x;
    return 1;
}

/* Optional integer field in [lo, hi] (an integral real is accepted). */
static int get_int(const json_t *root, const char *key, double lo, double hi, double *out, struct api_error *err) {
    const json_t *v = json_object_get(root, key);
    if (!v || json_is_null(v)) return 0;
    if (!json_is_number(v) || (json_is_real(v) && json_real_value(v) != floor(json_real_value(v))))
        return BAD(key, "'%s' must be an integer, not %s", key, json_is_real(v) ? "a fraction" : json_kind(v));
    double x = json_is_integer(v) ? (double)json_integer_value(v) : json_real_value(v);
    if (!(x >= lo && x <= hi)) return BAD(key, "'%s' must be between %.0f and %.0f, got %.0f", key, lo, hi, x);
    *out = x;
    return 1;
}

static int get_bool(const json_t *root, const char *key, int *out, struct api_error *err) {
    const json_t *v = json_object_get(root, key);
    if (!v || json_is_null(v)) return 0;
    if (!json_is_boolean(v)) return BAD(key, "'%s' must be a boolean, not %s", key, json_kind(v));
    *out = json_is_true(v);
    return 1;
}

static char *dup_n(const char *s, size_t n) {
    char *d = malloc(n + 1);
    if (d) {
        memcpy(d, s, n);
        d[n] = 0;
    }
    return d;
}

/* A message's content: a string, or an array of {"type": "text", "text": ...}. */
static int parse_content(const json_t *c, const char *param, char **out, struct api_error *err) {
    if (json_is_string(c)) {
        *out = dup_n(json_string_value(c), json_string_length(c));
        return *out ? 0 : api_error_set(err, 500, "server_error", NULL, NULL, "out of memory");
    }
    if (json_is_null(c)) {
        *out = dup_n("", 0);
        return *out ? 0 : api_error_set(err, 500, "server_error", NULL, NULL, "out of memory");
    }
    if (!json_is_array(c))
        return BAD(param, "'%s' must be a string or an array of text parts, not %s", param, json_kind(c));
    struct sbuf b = {0};
    size_t i;
    const json_t *part;
    json_array_foreach(c, i, part) {
        const json_t *type = json_object_get(part, "type"), *text = json_object_get(part, "text");
        if (!json_is_object(part) || !json_is_string(type) || strcmp(json_string_value(type), "text") ||
            !json_is_string(text)) {
            sbuf_free(&b);
            return BAD(param,
                       "'%s[%zu]' must be a text part {\"type\": \"text\", \"text\": \"...\"}; "
                       "only text is supported",
                       param, i);
        }
        sbuf_add(&b, json_string_value(text), json_string_length(text));
    }
    if (b.failed) {
        sbuf_free(&b);
        return api_error_set(err, 500, "server_error", NULL, NULL, "out of memory");
    }
    *out = b.p ? b.p : dup_n("", 0);
    return 0;
}

static int parse_messages(const json_t *root, struct gen_request *r, struct api_error *err) {
    const json_t *msgs = json_object_get(root, "messages");
    if (!msgs || json_is_null(msgs)) return BAD("messages", "'messages' is required");
    if (!json_is_array(msgs)) return BAD("messages", "'messages' must be an array, not %s", json_kind(msgs));
    size_t n = json_array_size(msgs);
    if (n == 0) return BAD("messages", "'messages' must not be empty");
    if (n > 100000) return BAD("messages", "'messages' has %zu entries; at most 100000 are allowed", n);
    r->msgs = calloc(n, sizeof *r->msgs);
    if (!r->msgs) return api_error_set(err, 500, "server_error", NULL, NULL, "out of memory");
    /* the tool_calls that tool messages may answer: the last assistant
     * message's, while only tool messages have come after it */
    const json_t *calls = NULL;
    size_t calls_at = 0;
    for (size_t i = 0; i < n; i++) {
        const json_t *m = json_array_get(msgs, i);
        char param[64];
        snprintf(param, sizeof param, "messages[%zu]", i);
        if (!json_is_object(m)) return BAD(param, "'%s' must be an object, not %s", param, json_kind(m));
        const json_t *role = json_object_get(m, "role");
        snprintf(param, sizeof param, "messages[%zu].role", i);
        if (!json_is_string(role)) return BAD(param, "'%s' must be a string", param);
        const char *rs = json_string_value(role);
        if (!strcmp(rs, "developer")) rs = "system";
        if (strcmp(rs, "system") && strcmp(rs, "user") && strcmp(rs, "assistant") && strcmp(rs, "tool"))
            return BAD(param, "'%s' is '%.40s'; it must be one of system, developer, user, assistant, tool", param, rs);
        if (!strcmp(rs, "tool")) {
            if (!calls)
                return BAD(param,
                           "'messages[%zu]' is a tool result, but no assistant message with 'tool_calls' "
                           "comes right before it (only other tool results may be in between)",
                           i);
            const json_t *tid = json_object_get(m, "tool_call_id");
            if (tid && !json_is_null(tid)) {
                snprintf(param, sizeof param, "messages[%zu].tool_call_id", i);
                if (!json_is_string(tid)) return BAD(param, "'%s' must be a string", param);
                int found = 0;
                for (size_t c = 0; c < json_array_size(calls) && !found; c++) {
                    const json_t *id = json_object_get(json_array_get(calls, c), "id");
                    found = json_is_string(id) && json_equal(id, tid);
                }
                if (!found)
                    return BAD(param, "'%s' is '%.64s', the id of no call in messages[%zu].tool_calls", param,
                               json_string_value(tid), calls_at);
            }
        } else {
            const json_t *tc = json_object_get(m, "tool_calls");
            calls = !strcmp(rs, "assistant") && json_is_array(tc) && json_array_size(tc) ? tc : NULL;
            calls_at = i;
        }
        snprintf(param, sizeof param, "messages[%zu].content", i);
        const json_t *content = json_object_get(m, "content");
        if (!content && json_object_get(m, "tool_calls")) content = json_null(); /* tools.c renders the calls */
        if (!content) return BAD(param, "'%s' is required", param);
        r->msgs[i].role = strdup(rs);
        r->n_msgs = (int)i + 1;
        if (!r->msgs[i].role) return api_error_set(err, 500, "server_error", NULL, NULL, "out of memory");
        if (parse_content(content, param, &r->msgs[i].content, err)) return -1;
    }
    return 0;
}

static int parse_prompt(const json_t *root, struct gen_request *r, struct api_error *err) {
    const json_t *p = json_object_get(root, "prompt");
    if (!p || json_is_null(p)) return BAD("prompt", "'prompt' is required");
    /* one prompt in a batch of one: ["text"] or [[ids]] (lm-evaluation-harness sends the latter) */
    if (json_is_array(p) && json_array_size(p) == 1 &&
        (json_is_string(json_array_get(p, 0)) || json_is_array(json_array_get(p, 0))))
        p = json_array_get(p, 0);
    if (json_is_string(p)) {
        r->prompt = dup_n(json_string_value(p), json_string_length(p));
        return r->prompt ? 0 : api_error_set(err, 500, "server_error", NULL, NULL, "out of memory");
    }
    if (!json_is_array(p))
        return BAD("prompt", "'prompt' must be a string or an array of token ids, not %s", json_kind(p));
    size_t n = json_array_size(p);
    if (n == 0) return BAD("prompt", "'prompt' must not be empty");
    if (json_is_string(json_array_get(p, 0)) || json_is_array(json_array_get(p, 0)))
        return BAD("prompt", "only one prompt per request is supported (got %zu)", n);
    if (n > (1u << 24)) return BAD("prompt", "'prompt' has too many tokens");
    r->prompt_ids = malloc(n * sizeof(int32_t));
    if (!r->prompt_ids) return api_error_set(err, 500, "server_error", NULL, NULL, "out of memory");
    for (size_t i = 0; i < n; i++) {
        const json_t *v = json_array_get(p, i);
        if (!json_is_integer(v) || json_integer_value(v) < 0 || json_integer_value(v) > INT32_MAX)
            return BAD("prompt", "'prompt[%zu]' must be a token id (a non-negative integer)", i);
        r->prompt_ids[i] = (int32_t)json_integer_value(v);
    }
    r->n_prompt_ids = (int)n;
    return 0;
}

static int add_stop(struct gen_request *r, const json_t *s, struct api_error *err) {
    if (!json_is_string(s)) return BAD("stop", "'stop' must be a string or an array of strings, not %s", json_kind(s));
    size_t n = json_string_length(s);
    if (n == 0) return 0; /* an empty stop string would stop at once: ignore it */
    if (n > REQ_MAX_STOP_LEN)
        return BAD("stop", "a stop string is %zu bytes; at most %d are allowed", n, REQ_MAX_STOP_LEN);
    if (memchr(json_string_value(s), 0, n)) return BAD("stop", "a stop string must not contain NUL");
    if (r->n_stops >= REQ_MAX_STOPS) return BAD("stop", "at most %d stop strings are allowed", REQ_MAX_STOPS);
    if (!(r->stops[r->n_stops] = dup_n(json_string_value(s), n)))
        return api_error_set(err, 500, "server_error", NULL, NULL, "out of memory");
    r->n_stops++;
    return 0;
}

/* logprobs / top_logprobs (chat), logprobs / echo (completions). */
static int parse_logprobs(const json_t *root, struct gen_request *r, struct api_error *err) {
    double x;
    int k, on = 0;
    r->logprobs = -1;
    if (r->kind == REQ_CHAT) {
        if (get_bool(root, "logprobs", &on, err) < 0) return -1;
        if ((k = get_int(root, "top_logprobs", 0, 20, &x, err)) < 0) return -1;
        if (k && !on) return BAD("top_logprobs", "'top_logprobs' needs 'logprobs': true");
        if (on) r->logprobs = k ? (int)x : 0;
        return 0;
    }
    if (get_bool(root, "echo", &r->echo, err) < 0) return -1;
    const json_t *v = json_object_get(root, "logprobs");
    if (v && json_is_boolean(v))
        return BAD("logprobs", "'logprobs' of /v1/completions is the number of alternatives (0-5), not a boolean");
    if ((k = get_int(root, "logprobs", 0, 5, &x, err)) < 0) return -1;
    if (k) r->logprobs = (int)x;
    return 0;
}

static int parse_fields(const json_t *root, struct gen_request *r, struct api_error *err) {
    const json_t *v = json_object_get(root, "model");
    if (v && !json_is_null(v)) {
        if (!json_is_string(v)) return BAD("model", "'model' must be a string, not %s", json_kind(v));
        if (!(r->model = dup_n(json_string_value(v), json_string_length(v))))
            return api_error_set(err, 500, "server_error", NULL, NULL, "out of memory");
    }
    if (r->kind == REQ_CHAT ? parse_messages(root, r, err) : parse_prompt(root, r, err)) return -1;

    double x;
    int k;
    r->n = 1;
    if ((k = get_int(root, "n", 1, 16, &x, err)) < 0) return -1;
    if (k) r->n = (int)x;
    if (parse_logprobs(root, r, err)) return -1;
    if (r->n > 1 && r->echo) return BAD("n", "'echo' works with n = 1 only");
    if ((k = get_int(root, "max_tokens", 0, 1 << 30, &x, err)) < 0) return -1;
    if (k) r->max_tokens = (int)x;
    if ((k = get_int(root, "max_completion_tokens", 0, 1 << 30, &x, err)) < 0) return -1;
    if (k) r->max_tokens = (int)x;
    if (r->max_tokens == 0 && !r->echo)
        return BAD("max_tokens", "'max_tokens' 0 generates nothing; it is allowed only with 'echo': true "
                                 "(completions), to score the prompt");
    /* llama.cpp's name, and Qwen's; -1 = no limit */
    if ((k = get_int(root, "reasoning_budget_tokens", -1, 1 << 30, &x, err)) < 0) return -1;
    if (k) r->reasoning_budget = (int)x;
    if ((k = get_int(root, "thinking_budget", -1, 1 << 30, &x, err)) < 0) return -1;
    if (k) r->reasoning_budget = (int)x;
    if ((k = get_num(root, "temperature", 0, 2, &x, err)) < 0) return -1;
    if (k) r->sp.temperature = (float)x;
    if ((k = get_num(root, "top_p", 0, 1, &x, err)) < 0) return -1;
    if (k) {
        if (x > 0) r->sp.top_p = (float)x;
        else r->sp.temperature = 0; /* top_p 0 keeps only the best token */
    }
    if ((k = get_int(root, "top_k", 0, 1 << 30, &x, err)) < 0) return -1;
    if (k) r->sp.top_k = (int)x;
    if ((k = get_num(root, "min_p", 0, 1, &x, err)) < 0) return -1;
    if (k) r->sp.min_p = (float)x;
    if ((k = get_num(root, "repetition_penalty", 1e-3, 10, &x, err)) < 0) return -1;
    if (k) r->sp.repeat_penalty = (float)x;
    if ((k = get_num(root, "frequency_penalty", -2, 2, &x, err)) < 0) return -1;
    if (k) r->sp.frequency_penalty = (float)x;
    if ((k = get_num(root, "presence_penalty", -2, 2, &x, err)) < 0) return -1;
    if (k) r->sp.presence_penalty = (float)x;
    v = json_object_get(root, "seed");
    if (v && !json_is_null(v)) {
        if (!json_is_integer(v)) return BAD("seed", "'seed' must be an integer, not %s", json_kind(v));
        r->sp.seed = (uint64_t)json_integer_value(v);
        r->seed_set = 1;
    }
    v = json_object_get(root, "stop");
    if (v && !json_is_null(v)) {
        if (json_is_array(v)) {
            size_t i;
            const json_t *s;
            json_array_foreach(v, i, s) if (add_stop(r, s, err)) return -1;
        } else if (add_stop(r, v, err)) return -1;
    }
    if (get_bool(root, "stream", &r->stream, err) < 0) return -1;
    v = json_object_get(root, "stream_options");
    if (v && !json_is_null(v)) {
        if (!json_is_object(v)) return BAD("stream_options", "'stream_options' must be an object");
        if (get_bool(v, "include_usage", &r->include_usage, err) < 0) return -1;
    }
    return req_parse_structured(root, r, err);
}

int req_parse(const char *body, size_t len, enum req_kind kind, const struct r1_sampler_params *defaults,
              struct gen_request *out, struct api_error *err) {
    memset(out, 0, sizeof *out);
    memset(err, 0, sizeof *err);
    out->kind = kind;
    out->max_tokens = -1;
    out->reasoning_budget = REQ_BUDGET_DEFAULT;
    out->logprobs = -1;
    out->sp = *defaults;
    if (!utf8_valid(body, len)) return BAD(NULL, "the request body is not valid UTF-8");
    json_error_t jerr;
    json_t *root = json_loadb(body, len, 0, &jerr);
    if (!root)
        return BAD(NULL, "the request body is not valid JSON: %s (line %d, column %d)", jerr.text, jerr.line,
                   jerr.column);
    int rc;
    if (!json_is_object(root)) rc = BAD(NULL, "the request body must be a JSON object, not %s", json_kind(root));
    else rc = parse_fields(root, out, err);
    json_decref(root);
    if (rc) req_free(out);
    return rc;
}

void req_free(struct gen_request *r) {
    for (int i = 0; i < r->n_msgs; i++) {
        free(r->msgs[i].role);
        free(r->msgs[i].content);
    }
    free(r->msgs);
    free(r->model);
    free(r->prompt);
    free(r->prompt_ids);
    for (int i = 0; i < r->n_stops; i++) free(r->stops[i]);
    req_free_structured(r);
    enum req_kind kind = r->kind;
    memset(r, 0, sizeof *r);
    r->kind = kind;
}
