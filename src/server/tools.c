/*
 * tools.c - function calling in chat requests, in the form the Qwen2.5 /
 * Hermes templates use (and the R1 distills and Llama 3.x models follow
 * when told): the tools are described in the system message inside
 * <tools></tools>, the model answers a call as
 *   <tool_call>
 *   {"name": "get_weather", "arguments": {"city": "Paris"}}
 *   </tool_call>
 * and a tool's result comes back as a user turn inside <tool_response>.
 *
 * Parsing (req_parse_tools, part of req_parse: pure, no I/O): tools,
 * tool_choice, role "tool" messages and assistant messages with tool_calls
 * (rendered into the text the template sees); tool_choice "required" or a
 * named function sets the grammar of one call. After generation,
 * tools_extract turns the calls in an answer into OpenAI tool_calls.
 */
#include <jansson.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "server/request.h"
#include "server/sbuf.h"

#define BAD(param, ...) api_error_set(err, 400, "invalid_request_error", param, NULL, __VA_ARGS__)
#define OOM() api_error_set(err, 500, "server_error", NULL, NULL, "out of memory")
#define MAX_TOOLS 128

static const char *TOOLS_HEAD = "# Tools\n\nYou may call one or more functions to assist with the user query.\n\n"
                                "You are provided with function signatures within <tools></tools> XML tags:\n<tools>";
static const char *TOOLS_TAIL =
    "\n</tools>\n\nFor each function call, return a json object with function name and arguments within "
    "<tool_call></tool_call> XML tags:\n<tool_call>\n{\"name\": <function-name>, \"arguments\": "
    "<args-json-object>}\n</tool_call>";

static int valid_name(const char *s) {
    size_t n = strlen(s);
    if (!n || n > 64) return 0;
    for (size_t i = 0; i < n; i++)
        if (!((s[i] >= 'a' && s[i] <= 'z') || (s[i] >= 'A' && s[i] <= 'Z') || (s[i] >= '0' && s[i] <= '9') ||
              s[i] == '_' || s[i] == '-'))
            return 0;
    return 1;
}

/* Replace message i's text with (prefix, text, suffix). */
static int wrap(struct req_msg *m, const char *prefix, const char *suffix) {
    size_t a = strlen(prefix), b = strlen(m->content), c = strlen(suffix);
    char *t = malloc(a + b + c + 1);
    if (!t) return -1;
    memcpy(t, prefix, a);
    memcpy(t + a, m->content, b);
    memcpy(t + a + b, suffix, c + 1);
    free(m->content);
    m->content = t;
    return 0;
}

/* Earlier turns: tool results and the assistant's calls, as the model wrote them. */
static int render_messages(const json_t *root, struct gen_request *r, struct api_error *err) {
    const json_t *msgs = json_object_get(root, "messages");
    for (int i = 0; i < r->n_msgs; i++) {
        const json_t *m = json_array_get(msgs, (size_t)i);
        char param[64];
        if (!strcmp(r->msgs[i].role, "tool")) {
            free(r->msgs[i].role);
            if (!(r->msgs[i].role = strdup("user")) || wrap(&r->msgs[i], "<tool_response>\n", "\n</tool_response>"))
                return OOM();
            continue;
        }
        const json_t *calls = json_object_get(m, "tool_calls");
        if (!calls || json_is_null(calls)) continue;
        snprintf(param, sizeof param, "messages[%d].tool_calls", i);
        if (strcmp(r->msgs[i].role, "assistant") || !json_is_array(calls))
            return BAD(param, "'%s' must be an array, on an assistant message", param);
        struct sbuf b = {0};
        sbuf_adds(&b, r->msgs[i].content);
        size_t k;
        const json_t *call;
        json_array_foreach(calls, k, call) {
            const json_t *fn = json_object_get(call, "function");
            const json_t *name = json_object_get(fn, "name"), *args = json_object_get(fn, "arguments");
            if (!json_is_string(name) || (args && !json_is_string(args) && !json_is_object(args))) {
                sbuf_free(&b);
                return BAD(param,
                           "'%s[%zu]' must be {\"type\": \"function\", \"function\": {\"name\": ..., "
                           "\"arguments\": \"{...}\"}}",
                           param, k);
            }
            json_t *a = json_is_string(args) ? json_loads(json_string_value(args), JSON_DECODE_ANY, NULL)
                                             : json_incref((json_t *)args);
            json_t *obj = json_pack("{s:O, s:o}", "name", name, "arguments", a ? a : json_object());
            char *s = obj ? json_dumps(obj, JSON_COMPACT | JSON_PRESERVE_ORDER) : NULL;
            json_decref(obj);
            if (!s) {
                sbuf_free(&b);
                return OOM();
            }
            sbuf_adds(&b, b.len ? "\n<tool_call>\n" : "<tool_call>\n");
            sbuf_adds(&b, s);
            sbuf_adds(&b, "\n</tool_call>");
            free(s);
        }
        if (b.failed) {
            sbuf_free(&b);
            return OOM();
        }
        free(r->msgs[i].content);
        r->msgs[i].content = b.p;
    }
    return 0;
}

/* The <tools> block, into the system message (a new one first if none). */
static int describe_tools(const json_t *tools, struct gen_request *r, struct api_error *err) {
    struct sbuf b = {0};
    size_t i;
    const json_t *t;
    sbuf_adds(&b, TOOLS_HEAD);
    json_array_foreach(tools, i, t) {
        char *s = json_dumps(t, JSON_COMPACT | JSON_PRESERVE_ORDER);
        if (!s) break;
        sbuf_adds(&b, "\n");
        sbuf_adds(&b, s);
        free(s);
    }
    sbuf_adds(&b, TOOLS_TAIL);
    if (b.failed) {
        sbuf_free(&b);
        return OOM();
    }
    if (r->n_msgs && !strcmp(r->msgs[0].role, "system")) {
        size_t n = strlen(r->msgs[0].content);
        char *c = malloc(n + 2 + b.len + 1);
        if (!c) {
            sbuf_free(&b);
            return OOM();
        }
        memcpy(c, r->msgs[0].content, n);
        memcpy(c + n, n ? "\n\n" : "", n ? 2 : 0);
        memcpy(c + n + (n ? 2 : 0), b.p, b.len + 1);
        free(r->msgs[0].content);
        r->msgs[0].content = c;
        sbuf_free(&b);
        return 0;
    }
    struct req_msg *m = realloc(r->msgs, (size_t)(r->n_msgs + 1) * sizeof *m);
    if (!m) {
        sbuf_free(&b);
        return OOM();
    }
    r->msgs = m;
    memmove(m + 1, m, (size_t)r->n_msgs * sizeof *m);
    m[0].role = strdup("system");
    m[0].content = b.p;
    r->n_msgs++;
    return m[0].role ? 0 : OOM();
}

int req_parse_tools(const json_t *root, struct gen_request *r, struct api_error *err) {
    if (r->kind == REQ_CHAT && render_messages(root, r, err)) return -1;
    const json_t *tools = json_object_get(root, "tools"), *tc = json_object_get(root, "tool_choice");
    const json_t *ptc = json_object_get(root, "parallel_tool_calls");
    if (ptc && !json_is_null(ptc) && !json_is_boolean(ptc))
        return BAD("parallel_tool_calls", "'parallel_tool_calls' must be a boolean");
    if (tools && json_is_null(tools)) tools = NULL;
    if (tools && !json_is_array(tools)) return BAD("tools", "'tools' must be an array of functions");
    size_t n = tools ? json_array_size(tools) : 0;
    if (n > MAX_TOOLS) return BAD("tools", "'tools' has %zu entries; at most %d are allowed", n, MAX_TOOLS);
    if (n && r->kind != REQ_CHAT) return BAD("tools", "'tools' works with /v1/chat/completions only");
    const char *names[MAX_TOOLS];
    char *schemas[MAX_TOOLS] = {0};
    for (size_t i = 0; i < n; i++) {
        const json_t *t = json_array_get(tools, i), *fn = json_object_get(t, "function");
        const json_t *type = json_object_get(t, "type"), *name = json_object_get(fn, "name");
        const json_t *params = json_object_get(fn, "parameters");
        if (!json_is_object(t) || !json_is_string(type) || strcmp(json_string_value(type), "function") ||
            !json_is_object(fn) || !json_is_string(name) || !valid_name(json_string_value(name)) ||
            (params && !json_is_null(params) && !json_is_object(params)))
            return BAD("tools",
                       "'tools[%zu]' must be {\"type\": \"function\", \"function\": {\"name\": "
                       "\"[A-Za-z0-9_-]{1,64}\", \"description\": ..., \"parameters\": {schema}}}",
                       i);
        names[i] = json_string_value(name);
        for (size_t k = 0; k < i; k++)
            if (!strcmp(names[k], names[i])) return BAD("tools", "two tools are named '%s'", names[i]);
    }
    /* tool_choice: none, auto (the default with tools), required, or one function */
    const char *forced = NULL; /* NULL: not forced; "": any of the tools */
    int none = !n;
    if (tc && !json_is_null(tc)) {
        if (json_is_string(tc) && !strcmp(json_string_value(tc), "none")) none = 1;
        else if (json_is_string(tc) && !strcmp(json_string_value(tc), "auto")) {
        } else if (json_is_string(tc) && !strcmp(json_string_value(tc), "required")) forced = "";
        else if (json_is_object(tc) && json_is_string(json_object_get(json_object_get(tc, "function"), "name")))
            forced = json_string_value(json_object_get(json_object_get(tc, "function"), "name"));
        else
            return BAD("tool_choice", "'tool_choice' must be none, auto, required or {\"type\": \"function\", "
                                      "\"function\": {\"name\": ...}}");
        if (forced && !n) return BAD("tool_choice", "'tool_choice' asks for a call but there are no 'tools'");
    }
    if (none) return 0; /* the tools are not described: the model cannot call them */
    if (r->gram) return BAD("tools", "'tools' and 'response_format' / 'grammar' cannot be used together");
    if (describe_tools(tools, r, err)) return -1;
    r->tools = 1;
    r->tool_max = ptc && json_is_false(ptc) ? 1 : TOOL_MAX_CALLS;
    if (!forced) return 0;
    int k = 0, rc = 0;
    const char *pick[MAX_TOOLS];
    for (size_t i = 0; i < n && !rc; i++) {
        if (*forced && strcmp(forced, names[i])) continue;
        const json_t *params = json_object_get(json_object_get(json_array_get(tools, i), "function"), "parameters");
        schemas[k] = params && !json_is_null(params) ? json_dumps(params, JSON_COMPACT) : NULL;
        if (params && !json_is_null(params) && !schemas[k]) rc = OOM();
        pick[k++] = names[i];
    }
    if (!rc && !k) rc = BAD("tool_choice", "'tool_choice' names '%.64s', which is not in 'tools'", forced);
    char msg[256];
    char *text = rc ? NULL : r1_grammar_tool_call(pick, (const char *const *)schemas, k, r->tool_max, msg, sizeof msg);
    for (int i = 0; i < k; i++) free(schemas[i]);
    if (rc) return rc;
    if (!text) return BAD("tools", "%s", msg);
    r->gram = r1_grammar_parse(text, strlen(text), msg, sizeof msg);
    if (!r->gram) {
        free(text);
        return BAD("tools", "the tools' grammar: %s", msg);
    }
    r->grammar = text;
    return 0;
}

/* ------------------------------------------------------------ answers */

static int is_space(char c) { return c == ' ' || c == '\n' || c == '\t' || c == '\r'; }

void tools_call_id(const char *id_seed, int index, char id[40]) {
    uint64_t h = 1469598103934665603ull;
    for (const char *p = id_seed; *p; p++) h = (h ^ (unsigned char)*p) * 1099511628211ull;
    h = (h ^ (uint64_t)index) * 1099511628211ull;
    snprintf(id, 40, "call_%016llx", (unsigned long long)h);
}

/* One call's JSON ({"name", "arguments" or "parameters"}) as an OpenAI tool call. */
static json_t *make_call(const char *s, size_t n, const char *id_seed, int index) {
    json_t *obj = json_loadb(s, n, 0, NULL);
    const json_t *name = json_object_get(obj, "name"), *args = json_object_get(obj, "arguments");
    if (!args) args = json_object_get(obj, "parameters");
    json_t *call = NULL;
    if (json_is_string(name) && (!args || json_is_object(args) || json_is_string(args))) {
        char *a = !args                  ? strdup("{}")
                  : json_is_string(args) ? strdup(json_string_value(args))
                                         : json_dumps(args, JSON_COMPACT | JSON_PRESERVE_ORDER);
        char id[40];
        tools_call_id(id_seed, index, id);
        if (a)
            call = json_pack("{s:s, s:s, s:{s:O, s:s}}", "id", id, "type", "function", "function", "name", name,
                             "arguments", a);
        free(a);
    }
    json_decref(obj);
    return call;
}

json_t *tools_extract(const char *text, size_t len, const char *id_seed, int first, int max_calls, struct sbuf *rest) {
    json_t *calls = json_array();
    if (!calls) return NULL;
    static const char OPEN[] = "<tool_call>", CLOSE[] = "</tool_call>";
    size_t at = 0;
    while (at < len && (int)json_array_size(calls) < max_calls) {
        const char *o = memmem(text + at, len - at, OPEN, sizeof OPEN - 1);
        if (!o) break;
        size_t start = (size_t)(o - text) + sizeof OPEN - 1;
        const char *c = memmem(text + start, len - start, CLOSE, sizeof CLOSE - 1);
        size_t end = c ? (size_t)(c - text) : len;
        json_t *call = make_call(text + start, end - start, id_seed, first + (int)json_array_size(calls));
        if (!call) break; /* not a call after all: the text stays */
        sbuf_add(rest, text + at, (size_t)(o - text) - at);
        json_array_append_new(calls, call);
        at = c ? end + sizeof CLOSE - 1 : len;
    }
    if (!json_array_size(calls)) { /* a bare {"name": ..., "parameters": ...} answer (Llama 3.x style) */
        size_t a = 0, b = len;
        while (a < b && is_space(text[a])) a++;
        while (b > a && is_space(text[b - 1])) b--;
        json_t *obj = b > a && text[a] == '{' ? json_loadb(text + a, b - a, 0, NULL) : NULL;
        int looks = json_object_size(obj) == 2 && json_is_string(json_object_get(obj, "name")) &&
                    (json_object_get(obj, "parameters") || json_object_get(obj, "arguments"));
        json_decref(obj);
        json_t *call = looks ? make_call(text + a, b - a, id_seed, first) : NULL;
        if (call) {
            json_array_append_new(calls, call);
            return calls;
        }
        json_decref(calls);
        return NULL;
    }
    if ((int)json_array_size(calls) < max_calls)
        sbuf_add(rest, text + at, len - at); /* else: past the last call taken */
    return calls;
}
