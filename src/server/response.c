/*
 * response.c - JSON builders; see response.h. Generated text is not
 * guaranteed to be valid UTF-8 (a model can emit a lone byte token), so
 * every text goes through json_text, which replaces bad bytes with U+FFFD.
 */
#include "server/response.h"

#include <jansson.h>
#include <stdlib.h>
#include <string.h>

/* A JSON string of s[0..n), invalid UTF-8 replaced by U+FFFD. */
static json_t *json_text(const char *s, size_t n) {
    if (!s) return json_string("");
    if (utf8_valid(s, n)) return json_stringn(s, n);
    struct sbuf b = {0};
    size_t i = 0;
    while (i < n) {
        size_t k = 1;
        unsigned char c = (unsigned char)s[i];
        if (c >= 0x80) {
            k = (c & 0xe0) == 0xc0 ? 2 : (c & 0xf0) == 0xe0 ? 3 : (c & 0xf8) == 0xf0 ? 4 : 1;
            if (k > n - i || !utf8_valid(s + i, k)) {
                sbuf_adds(&b, "\xef\xbf\xbd");
                i++;
                continue;
            }
        }
        sbuf_add(&b, s + i, k);
        i += k;
    }
    json_t *j = b.failed ? NULL : json_stringn(b.p ? b.p : "", b.len);
    sbuf_free(&b);
    return j;
}

/* ------------------------------------------------------------ logprobs */

/* token text (invalid UTF-8 replaced) and its exact bytes */
static void token_json(const struct lp_list *l, int32_t id, json_t **text, json_t **bytes, long *len) {
    char *b = lp_token_bytes(l, id, len);
    if (!b) *len = 0;
    *text = json_text(b ? b : "", (size_t)*len);
    if (bytes) {
        *bytes = json_array();
        for (long i = 0; i < *len; i++) json_array_append_new(*bytes, json_integer((unsigned char)b[i]));
    }
    free(b);
}

/* chat: {"content": [{"token", "logprob", "bytes", "top_logprobs": [...]}], "refusal": null} */
static json_t *chat_logprobs(const struct lp_list *l, int from, int to) {
    json_t *content = json_array();
    for (int i = from; i < to; i++) {
        const struct lp_entry *e = &l->e[i];
        json_t *t, *b, *top = json_array();
        long len;
        for (int k = 0; k < e->n_top; k++) {
            token_json(l, e->top_id[k], &t, &b, &len);
            json_array_append_new(
                top, json_pack("{s:o, s:f, s:o}", "token", t, "logprob", (double)e->top_lp[k], "bytes", b));
        }
        token_json(l, e->id, &t, &b, &len);
        json_array_append_new(content, json_pack("{s:o, s:f, s:o, s:o}", "token", t, "logprob", (double)e->logprob,
                                                 "bytes", b, "top_logprobs", top));
    }
    return json_pack("{s:o, s:n}", "content", content, "refusal");
}

/* completions: {"tokens", "token_logprobs", "top_logprobs", "text_offset"};
 * offsets in bytes of the returned text, counted from *offset */
static json_t *completion_logprobs(const struct lp_list *l, int from, int to, long *offset) {
    json_t *tokens = json_array(), *lps = json_array(), *tops = json_array(), *offs = json_array();
    for (int i = from; i < to; i++) {
        const struct lp_entry *e = &l->e[i];
        json_t *t;
        long len;
        token_json(l, e->id, &t, NULL, &len);
        json_array_append_new(tokens, t);
        json_array_append_new(offs, json_integer(*offset));
        *offset += len;
        if (!e->has_logprob) {
            json_array_append_new(lps, json_null());
            json_array_append_new(tops, json_null());
            continue;
        }
        json_array_append_new(lps, json_real(e->logprob));
        json_t *top = json_object();
        for (int k = 0; k < e->n_top; k++) { /* most likely first; it keeps a key two tokens share */
            char *b = lp_token_bytes(l, e->top_id[k], &len);
            json_t *key = json_text(b ? b : "", b ? (size_t)len : 0);
            if (key && !json_object_get(top, json_string_value(key)))
                json_object_set_new(top, json_string_value(key), json_real(e->top_lp[k]));
            json_decref(key);
            free(b);
        }
        json_array_append_new(tops, top);
    }
    return json_pack("{s:o, s:o, s:o, s:o}", "tokens", tokens, "token_logprobs", lps, "top_logprobs", tops,
                     "text_offset", offs);
}

/* The logprobs of entries [l->sent, l->n) (all of them when all), or null. */
static json_t *logprobs_json(const struct resp_meta *m, int all) {
    struct lp_list *l = m->lp;
    if (!l) return json_null();
    int from = all ? 0 : l->sent;
    if (!all && from == l->n) return json_null();
    long off = all ? 0 : l->text_offset;
    json_t *j = m->kind == REQ_CHAT ? chat_logprobs(l, from, l->n) : completion_logprobs(l, from, l->n, &off);
    if (!all) {
        l->sent = l->n;
        l->text_offset = off;
    }
    return j ? j : json_null();
}

static char *dump(json_t *j) {
    char *s = j ? json_dumps(j, JSON_COMPACT) : NULL;
    json_decref(j);
    return s;
}

static json_t *usage_json(const struct resp_usage *u) {
    json_t *j = json_pack("{s:i, s:i, s:i, s:{s:i}}", "prompt_tokens", u->prompt_tokens, "completion_tokens",
                          u->completion_tokens, "total_tokens", u->prompt_tokens + u->completion_tokens,
                          "prompt_tokens_details", "cached_tokens", u->cached_tokens);
    if (j && u->spec)
        json_object_set_new(j, "completion_tokens_details",
                            json_pack("{s:i, s:i}", "accepted_prediction_tokens", u->accepted_tokens,
                                      "rejected_prediction_tokens", u->drafted_tokens - u->accepted_tokens));
    return j;
}

static json_t *head(const struct resp_meta *m, int chunk) {
    const char *object =
        m->kind == REQ_CHAT ? (chunk ? "chat.completion.chunk" : "chat.completion") : "text_completion";
    return json_pack("{s:s, s:s, s:I, s:s, s:s}", "id", m->id, "object", object, "created", (json_int_t)m->created,
                     "model", m->model, "system_fingerprint", "r1infer");
}

char *resp_error(const struct api_error *e) {
    json_t *err = json_pack("{s:s, s:s}", "message", e->message, "type", e->type ? e->type : "server_error");
    if (!err) return NULL;
    json_object_set_new(err, "param", e->param[0] ? json_string(e->param) : json_null());
    json_object_set_new(err, "code", e->code ? json_string(e->code) : json_null());
    return dump(json_pack("{s:o}", "error", err));
}

char *resp_final(const struct resp_meta *m, const char *reasoning, size_t reasoning_len, const char *content,
                 size_t content_len, const char *finish, const struct resp_usage *u) {
    json_t *root = head(m, 0), *choice;
    if (!root) return NULL;
    struct sbuf rest = {0};
    json_t *calls =
        m->kind == REQ_CHAT && m->tools ? tools_extract(content, content_len, m->id, 0, m->tool_max, &rest) : NULL;
    if (calls) { /* the text around the calls is the content (null when only white space) */
        size_t a = 0, b = rest.len;
        while (a < b && (rest.p[a] == ' ' || rest.p[a] == '\n')) a++;
        while (b > a && (rest.p[b - 1] == ' ' || rest.p[b - 1] == '\n')) b--;
        content = rest.p ? rest.p + a : "", content_len = b - a;
        if (!strcmp(finish, "stop")) finish = "tool_calls";
    }
    if (m->kind == REQ_CHAT) {
        json_t *msg = json_pack("{s:s, s:o}", "role", "assistant", "content",
                                calls && !content_len ? json_null() : json_text(content, content_len));
        if (msg && calls) json_object_set_new(msg, "tool_calls", calls);
        if (msg && reasoning_len) json_object_set_new(msg, "reasoning_content", json_text(reasoning, reasoning_len));
        choice = json_pack("{s:i, s:o, s:o, s:s}", "index", m->index, "message", msg, "logprobs", logprobs_json(m, 1),
                           "finish_reason", finish);
    } else {
        choice = json_pack("{s:i, s:o, s:o, s:s}", "index", m->index, "text", json_text(content, content_len),
                           "logprobs", logprobs_json(m, 1), "finish_reason", finish);
    }
    json_object_set_new(root, "choices", json_pack("[o]", choice));
    json_object_set_new(root, "usage", usage_json(u));
    sbuf_free(&rest);
    return dump(root);
}

static void event(struct sbuf *out, json_t *j) {
    char *s = dump(j);
    if (!s) {
        out->failed = 1;
        return;
    }
    sbuf_adds(out, "data: ");
    sbuf_adds(out, s);
    sbuf_adds(out, "\n\n");
    free(s);
}

void resp_chunk(struct sbuf *out, const struct resp_meta *m, const char *role, const char *reasoning,
                size_t reasoning_len, const char *content, size_t content_len, const char *finish) {
    json_t *root = head(m, 1), *choice;
    if (!root) {
        out->failed = 1;
        return;
    }
    if (m->kind == REQ_CHAT) {
        json_t *delta = json_object();
        if (role) json_object_set_new(delta, "role", json_string(role));
        if (reasoning) json_object_set_new(delta, "reasoning_content", json_text(reasoning, reasoning_len));
        if (content) json_object_set_new(delta, "content", json_text(content, content_len));
        choice = json_pack("{s:i, s:o, s:o}", "index", m->index, "delta", delta, "logprobs", logprobs_json(m, 0));
    } else {
        choice = json_pack("{s:i, s:o, s:o}", "index", m->index, "text", json_text(content, content_len), "logprobs",
                           logprobs_json(m, 0));
    }
    if (choice) json_object_set_new(choice, "finish_reason", finish ? json_string(finish) : json_null());
    json_object_set_new(root, "choices", json_pack("[o]", choice));
    event(out, root);
}

void resp_chunk_call(struct sbuf *out, const struct resp_meta *m, int index, const char *name, size_t name_len,
                     const char *args, size_t args_len) {
    json_t *call = json_pack("{s:i, s:{s:o}}", "index", index, "function", "arguments", json_text(args, args_len));
    if (call && name) {
        char id[40];
        tools_call_id(m->id, index, id);
        json_object_set_new(call, "id", json_string(id));
        json_object_set_new(call, "type", json_string("function"));
        json_object_set_new(json_object_get(call, "function"), "name", json_text(name, name_len));
    }
    json_t *root = head(m, 1);
    json_t *choice = json_pack("{s:i, s:{s:[o]}, s:n, s:n}", "index", m->index, "delta", "tool_calls", call, "logprobs",
                               "finish_reason");
    if (!root || !choice) {
        json_decref(root);
        json_decref(choice);
        out->failed = 1;
        return;
    }
    json_object_set_new(root, "choices", json_pack("[o]", choice));
    event(out, root);
}

int resp_chunk_tools(struct sbuf *out, const struct resp_meta *m, const char *content, size_t content_len, int first) {
    struct sbuf rest = {0};
    json_t *calls =
        first < m->tool_max ? tools_extract(content, content_len, m->id, first, m->tool_max - first, &rest) : NULL;
    if (!calls) {
        if (content_len) resp_chunk(out, m, NULL, NULL, 0, content, content_len, NULL);
        return 0;
    }
    size_t i;
    json_t *c;
    json_array_foreach(calls, i, c) json_object_set_new(c, "index", json_integer((json_int_t)(first + (int)i)));
    json_t *root = head(m, 1), *delta = json_pack("{s:o}", "tool_calls", calls);
    size_t a = 0, b = rest.len;
    while (a < b && (rest.p[a] == ' ' || rest.p[a] == '\n')) a++;
    while (b > a && (rest.p[b - 1] == ' ' || rest.p[b - 1] == '\n')) b--;
    if (delta && b > a) json_object_set_new(delta, "content", json_text(rest.p + a, b - a));
    json_t *choice = json_pack("{s:i, s:o, s:n, s:n}", "index", m->index, "delta", delta, "logprobs", "finish_reason");
    if (!root || !choice) {
        json_decref(root);
        json_decref(choice);
        out->failed = 1;
    } else {
        json_object_set_new(root, "choices", json_pack("[o]", choice));
        event(out, root);
    }
    sbuf_free(&rest);
    return 1;
}

void resp_usage_chunk(struct sbuf *out, const struct resp_meta *m, const struct resp_usage *u) {
    json_t *root = head(m, 1);
    if (!root) {
        out->failed = 1;
        return;
    }
    json_object_set_new(root, "choices", json_array());
    json_object_set_new(root, "usage", usage_json(u));
    event(out, root);
}

void resp_error_event(struct sbuf *out, const struct api_error *e) {
    char *s = resp_error(e);
    if (!s) {
        out->failed = 1;
        return;
    }
    sbuf_adds(out, "data: ");
    sbuf_adds(out, s);
    sbuf_adds(out, "\n\n");
    free(s);
}

void resp_done(struct sbuf *out) { sbuf_adds(out, "data: [DONE]\n\n"); }

char *resp_merge(char *const *finals, int n, const struct resp_usage *u) {
    json_t *root = n > 0 && finals[0] ? json_loads(finals[0], 0, NULL) : NULL;
    json_t *choices = root ? json_object_get(root, "choices") : NULL;
    if (!json_is_array(choices)) {
        json_decref(root);
        return NULL;
    }
    for (int k = 1; k < n; k++) {
        json_t *o = finals[k] ? json_loads(finals[k], 0, NULL) : NULL;
        json_t *c = o ? json_array_get(json_object_get(o, "choices"), 0) : NULL;
        if (!c) {
            json_decref(o);
            json_decref(root);
            return NULL;
        }
        json_array_append(choices, c);
        json_decref(o);
    }
    json_object_set_new(root, "usage", usage_json(u));
    return dump(root);
}
