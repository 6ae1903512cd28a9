/*
 * test_request.c - the server's request parser and validator
 * (src/server/request.c): accepted shapes, every rejected one with its
 * status and param, and the UTF-8 checker.
 */
#include <stdio.h>
#include <string.h>

#include <jansson.h>
#include <stdlib.h>

#include "server/request.h"
#include "server/sbuf.h"
#include "server/tool_scan.h"
#include "test.h"

static struct r1_sampler_params defaults;

static int parse(const char *body, enum req_kind kind, struct gen_request *r, struct api_error *e) {
    return req_parse(body, strlen(body), kind, &defaults, r, e);
}

/* Expect a 400 naming `param` (NULL: no param). */
static void bad(const char *body, enum req_kind kind, const char *param) {
    struct gen_request r;
    struct api_error e;
    int rc = parse(body, kind, &r, &e);
    CHECK(rc == -1 && e.status == 400, "accepted bad request %s", body);
    if (rc == -1) {
        CHECK(!strcmp(e.param, param ? param : ""), "%s: param '%s', want '%s'", body, e.param, param ? param : "");
        CHECK(e.message[0] && e.type && !strcmp(e.type, "invalid_request_error"), "%s: message/type missing", body);
    } else {
        req_free(&r);
    }
}

static void test_chat_ok(void) {
    struct gen_request r;
    struct api_error e;
    int rc = parse(
        "{\"model\":\"m\",\"messages\":[{\"role\":\"system\",\"content\":\"be brief\"},"
        "{\"role\":\"user\",\"content\":[{\"type\":\"text\",\"text\":\"hi \"},{\"type\":\"text\",\"text\":\"there\"}]},"
        "{\"role\":\"assistant\",\"content\":null},{\"role\":\"developer\",\"content\":\"x\"}],"
        "\"max_tokens\":10,\"temperature\":0,\"top_p\":0.5,\"top_k\":3,\"min_p\":0.1,\"seed\":42,"
        "\"stop\":[\"a\",\"\",\"bc\"],\"repetition_penalty\":1.1,\"frequency_penalty\":0.5,"
        "\"presence_penalty\":-0.5,\"n\":1,\"stream\":true,\"stream_options\":{\"include_usage\":true},"
        "\"unknown_field\":[1,2,3]}",
        REQ_CHAT, &r, &e);
    CHECK(rc == 0, "full chat request rejected: %s", e.message);
    if (rc) return;
    CHECK(r.n_msgs == 4 && !strcmp(r.msgs[1].content, "hi there") && !strcmp(r.msgs[2].content, "") &&
              !strcmp(r.msgs[3].role, "system"),
          "messages parsed wrong");
    CHECK(!strcmp(r.model, "m") && r.max_tokens == 10 && r.sp.temperature == 0 && r.sp.top_p == 0.5f &&
              r.sp.top_k == 3 && r.sp.min_p == 0.1f && r.seed_set && r.sp.seed == 42,
          "sampler fields parsed wrong");
    CHECK(r.n_stops == 2 && !strcmp(r.stops[0], "a") && !strcmp(r.stops[1], "bc"), "stop parsed wrong (%d)", r.n_stops);
    CHECK(r.stream && r.include_usage, "stream flags parsed wrong");
    CHECK(r.sp.repeat_penalty == 1.1f && r.sp.frequency_penalty == 0.5f && r.sp.presence_penalty == -0.5f,
          "penalties parsed wrong");
    req_free(&r);

    rc = parse("{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],\"max_completion_tokens\":7,\"stop\":\"END\"}",
               REQ_CHAT, &r, &e);
    CHECK(rc == 0 && r.max_tokens == 7 && r.n_stops == 1 && !r.stream && r.sp.temperature == defaults.temperature &&
              !r.seed_set && !r.model,
          "minimal chat request: rc %d", rc);
    if (!rc) req_free(&r);
}

static void test_completion_ok(void) {
    struct gen_request r;
    struct api_error e;
    int rc = parse("{\"prompt\":\"Once upon\"}", REQ_COMPLETION, &r, &e);
    CHECK(rc == 0 && r.prompt && !strcmp(r.prompt, "Once upon") && r.max_tokens == -1, "string prompt");
    if (!rc) req_free(&r);
    rc = parse("{\"prompt\":[\"only one\"]}", REQ_COMPLETION, &r, &e);
    CHECK(rc == 0 && r.prompt && !strcmp(r.prompt, "only one"), "one-string array prompt");
    if (!rc) req_free(&r);
    rc = parse("{\"prompt\":[1,2,3],\"n\":null,\"stream\":null}", REQ_COMPLETION, &r, &e);
    CHECK(rc == 0 && r.n_prompt_ids == 3 && r.prompt_ids[2] == 3 && r.logprobs == -1 && !r.echo, "token prompt");
    if (!rc) req_free(&r);
    rc = parse("{\"prompt\":\"a\",\"max_tokens\":0,\"echo\":true,\"logprobs\":5}", REQ_COMPLETION, &r, &e);
    CHECK(rc == 0 && r.max_tokens == 0 && r.echo && r.logprobs == 5, "echo, max_tokens 0, logprobs 5");
    if (!rc) req_free(&r);
    rc = parse("{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],\"logprobs\":true}", REQ_CHAT, &r, &e);
    CHECK(rc == 0 && r.logprobs == 0, "chat logprobs without top_logprobs");
    if (!rc) req_free(&r);
    rc = parse("{\"prompt\":[[5,6]]}", REQ_COMPLETION, &r, &e);
    CHECK(rc == 0 && r.n_prompt_ids == 2 && r.prompt_ids[1] == 6, "a batch of one token prompt: [[5,6]]");
    if (!rc) req_free(&r);
    bad("{\"prompt\":[[5,6],[7]]}", REQ_COMPLETION, "prompt");
    bad("{\"prompt\":[[]]}", REQ_COMPLETION, "prompt");
    bad("{\"prompt\":\"a\",\"logprobs\":6}", REQ_COMPLETION, "logprobs");
    bad("{\"prompt\":\"a\",\"logprobs\":true}", REQ_COMPLETION, "logprobs");
    bad("{\"prompt\":\"a\",\"echo\":1}", REQ_COMPLETION, "echo");
    bad("{\"prompt\":\"a\",\"max_tokens\":0}", REQ_COMPLETION, "max_tokens");
}

static void test_rejects(void) {
    bad("", REQ_CHAT, NULL);
    bad("{", REQ_CHAT, NULL);
    bad("{\"messages\": [}", REQ_CHAT, NULL);
    bad("[1,2]", REQ_CHAT, NULL);
    bad("\"str\"", REQ_CHAT, NULL);
    bad("{}", REQ_CHAT, "messages");
    bad("{\"messages\":[]}", REQ_CHAT, "messages");
    bad("{\"messages\":\"hi\"}", REQ_CHAT, "messages");
    bad("{\"messages\":[\"hi\"]}", REQ_CHAT, "messages[0]");
    bad("{\"messages\":[{\"role\":\"function\",\"content\":\"x\"}]}", REQ_CHAT, "messages[0].role");
    bad("{\"messages\":[{\"role\":\"wizard\",\"content\":\"x\"}]}", REQ_CHAT, "messages[0].role");
    bad("{\"messages\":[{\"role\":5,\"content\":\"x\"}]}", REQ_CHAT, "messages[0].role");
    bad("{\"messages\":[{\"content\":\"x\"}]}", REQ_CHAT, "messages[0].role");
    bad("{\"messages\":[{\"role\":\"user\"}]}", REQ_CHAT, "messages[0].content");
    bad("{\"messages\":[{\"role\":\"user\",\"content\":7}]}", REQ_CHAT, "messages[0].content");
    bad("{\"messages\":[{\"role\":\"user\",\"content\":[{\"type\":\"image_url\"}]}]}", REQ_CHAT, "messages[0].content");
    const char *m = "\"messages\":[{\"role\":\"user\",\"content\":\"x\"}]";
    char buf[512];
    static const char *const fields[][2] = {
        {"\"max_tokens\":\"10\"", "max_tokens"},
        {"\"max_tokens\":0", "max_tokens"},
        {"\"max_tokens\":1.5", "max_tokens"},
        {"\"max_completion_tokens\":-1", "max_completion_tokens"},
        {"\"temperature\":\"hot\"", "temperature"},
        {"\"temperature\":3", "temperature"},
        {"\"top_p\":1.5", "top_p"},
        {"\"top_k\":-1", "top_k"},
        {"\"min_p\":true", "min_p"},
        {"\"seed\":1.5", "seed"},
        {"\"stop\":5", "stop"},
        {"\"stop\":[\"a\",5]", "stop"},
        {"\"stop\":[\"1\",\"2\",\"3\",\"4\",\"5\",\"6\",\"7\",\"8\",\"9\",\"10\",\"11\",\"12\",\"13\",\"14\",\"15\","
         "\"16\",\"17\"]",
         "stop"},
        {"\"n\":17", "n"},
        {"\"n\":\"1\"", "n"},
        {"\"stream\":\"yes\"", "stream"},
        {"\"stream\":1", "stream"},
        {"\"stream_options\":[]", "stream_options"},
        {"\"model\":5", "model"},
        {"\"repetition_penalty\":0", "repetition_penalty"},
        {"\"frequency_penalty\":3", "frequency_penalty"},
        {"\"presence_penalty\":\"x\"", "presence_penalty"},
        {"\"logprobs\":true,\"top_logprobs\":21", "top_logprobs"},
        {"\"top_logprobs\":2", "top_logprobs"},
        {"\"logprobs\":true,\"top_logprobs\":-1", "top_logprobs"},
        {"\"logprobs\":1", "logprobs"},
        {"\"max_tokens\":0", "max_tokens"},
    };
    for (size_t i = 0; i < sizeof fields / sizeof fields[0]; i++) {
        snprintf(buf, sizeof buf, "{%s,%s}", m, fields[i][0]);
        bad(buf, REQ_CHAT, fields[i][1]);
    }
    bad("{\"prompt\":5}", REQ_COMPLETION, "prompt");
    bad("{\"prompt\":[]}", REQ_COMPLETION, "prompt");
    bad("{\"prompt\":[\"a\",\"b\"]}", REQ_COMPLETION, "prompt");
    bad("{\"prompt\":[1,-2]}", REQ_COMPLETION, "prompt");
    bad("{\"prompt\":[1,\"a\"]}", REQ_COMPLETION, "prompt");
    bad("{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}]}", REQ_COMPLETION, "prompt");
    /* bytes that are not UTF-8, and escapes JSON forbids */
    bad("{\"messages\":[{\"role\":\"user\",\"content\":\"\xff\xfe\"}]}", REQ_CHAT, NULL);
    bad("{\"messages\":[{\"role\":\"user\",\"content\":\"\xc0\xaf\"}]}", REQ_CHAT, NULL);
    bad("{\"messages\":[{\"role\":\"user\",\"content\":\"\\ud800\"}]}", REQ_CHAT, NULL);
    bad("{\"messages\":[{\"role\":\"user\",\"content\":\"a\\u0000b\"}]}", REQ_CHAT, NULL);
    /* a NUL byte inside the body */
    struct gen_request r;
    struct api_error e;
    const char nul[] = "{\"prompt\":\"a\"}\0garbage";
    CHECK(req_parse(nul, sizeof nul - 1, REQ_COMPLETION, &defaults, &r, &e) == -1 && e.status == 400,
          "body with a NUL byte accepted");
}

static void test_utf8(void) {
    CHECK(utf8_valid("", 0) && utf8_valid("abc", 3), "ascii");
    CHECK(utf8_valid("ü思考✓😀", strlen("ü思考✓😀")), "multi-byte");
    CHECK(!utf8_valid("\xc3", 1), "truncated 2-byte");
    CHECK(!utf8_valid("\xe2\x9c", 2), "truncated 3-byte");
    CHECK(!utf8_valid("\xc0\x80", 2), "overlong NUL");
    CHECK(!utf8_valid("\xed\xa0\x80", 3), "surrogate");
    CHECK(!utf8_valid("\xf4\x90\x80\x80", 4), "beyond U+10FFFF");
    CHECK(!utf8_valid("\x80", 1), "lone continuation");
}

/* response_format, grammar, logit_bias and tools (structured.c, tools.c). */
static void test_structured(void) {
    struct gen_request r;
    struct api_error e;
    const char *U = "{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],";
    char body[2048];
    snprintf(body, sizeof body,
             "%s\"logit_bias\":{\"5\":-100,\"17\":2.5},\"response_format\":{\"type\":"
             "\"json_schema\",\"json_schema\":{\"name\":\"p\",\"schema\":{\"type\":\"object\",\"properties\":"
             "{\"a\":{\"type\":\"integer\"}},\"required\":[\"a\"]}}}}",
             U);
    int rc = parse(body, REQ_CHAT, &r, &e);
    CHECK(rc == 0 && r.gram && r.grammar && r.n_bias == 2 && r.bias_ids[0] == 5 && r.bias[0] == -100.0f &&
              r.bias_ids[1] == 17 && r.bias[1] == 2.5f,
          "response_format + logit_bias: rc %d %s", rc, e.message);
    if (!rc) req_free(&r);
    snprintf(body, sizeof body,
             "%s\"tools\":[{\"type\":\"function\",\"function\":{\"name\":\"f\",\"parameters\":"
             "{\"type\":\"object\",\"properties\":{\"q\":{\"type\":\"string\"}}}}}],\"tool_choice\":\"required\"}",
             U);
    rc = parse(body, REQ_CHAT, &r, &e);
    CHECK(rc == 0 && r.tools && r.gram && r.n_msgs == 2 && !strcmp(r.msgs[0].role, "system") &&
              strstr(r.msgs[0].content, "<tools>") && strstr(r.msgs[0].content, "\"name\":\"f\""),
          "tools required: rc %d %s", rc, e.message);
    if (!rc) req_free(&r);
    rc = parse(
        "{\"messages\":[{\"role\":\"assistant\",\"tool_calls\":[{\"id\":\"c\",\"type\":\"function\","
        "\"function\":{\"name\":\"f\",\"arguments\":\"{\\\"q\\\":1}\"}}]},{\"role\":\"tool\",\"content\":\"42\"}]}",
        REQ_CHAT, &r, &e);
    CHECK(rc == 0 && r.n_msgs == 2 &&
              strstr(r.msgs[0].content, "<tool_call>\n{\"name\":\"f\",\"arguments\":{\"q\":1}}") &&
              !strcmp(r.msgs[1].role, "user") && !strcmp(r.msgs[1].content, "<tool_response>\n42\n</tool_response>"),
          "tool turns: rc %d %s / %s", rc, e.message, rc ? "" : r.msgs[0].content);
    if (!rc) req_free(&r);
    /* a tool result answers the calls of the assistant message right before it */
    bad("{\"messages\":[{\"role\":\"user\",\"content\":\"hi\"},{\"role\":\"tool\",\"content\":\"42\"}]}", REQ_CHAT,
        "messages[1].role");
    bad("{\"messages\":[{\"role\":\"assistant\",\"tool_calls\":[{\"id\":\"c\",\"type\":\"function\","
        "\"function\":{\"name\":\"f\",\"arguments\":\"{}\"}}]},{\"role\":\"user\",\"content\":\"x\"},"
        "{\"role\":\"tool\",\"content\":\"42\"}]}",
        REQ_CHAT, "messages[2].role");
    bad("{\"messages\":[{\"role\":\"assistant\",\"tool_calls\":[{\"id\":\"c\",\"type\":\"function\","
        "\"function\":{\"name\":\"f\",\"arguments\":\"{}\"}}]},{\"role\":\"tool\",\"tool_call_id\":\"d\","
        "\"content\":\"42\"}]}",
        REQ_CHAT, "messages[1].tool_call_id");
    rc = parse("{\"messages\":[{\"role\":\"assistant\",\"tool_calls\":[{\"id\":\"a\",\"type\":\"function\","
               "\"function\":{\"name\":\"f\",\"arguments\":\"{}\"}},{\"id\":\"b\",\"type\":\"function\","
               "\"function\":{\"name\":\"g\",\"arguments\":\"{}\"}}]},{\"role\":\"tool\",\"tool_call_id\":\"a\","
               "\"content\":\"1\"},{\"role\":\"tool\",\"tool_call_id\":\"b\",\"content\":\"2\"}]}",
               REQ_CHAT, &r, &e);
    CHECK(rc == 0, "two tool results for two calls: rc %d %s", rc, e.message);
    if (!rc) req_free(&r);
    static const char *bad_fields[][2] = {
        {"\"response_format\":{\"type\":\"json_schema\",\"json_schema\":{\"schema\":{\"type\":\"string\",\"format\":"
         "\"email\"}}}}",
         "response_format"},
        {"\"response_format\":{\"type\":\"xml\"}}", "response_format"},
        {"\"grammar\":\"root ::= (\"}", "grammar"},
        {"\"logit_bias\":{\"-1\":1}}", "logit_bias"},
        {"\"logit_bias\":[1]}", "logit_bias"},
        {"\"tool_choice\":\"required\"}", "tool_choice"},
        {"\"tools\":[{\"type\":\"function\",\"function\":{\"name\":\"\"}}]}", "tools"},
        {"\"functions\":[]}", "functions"},
        {"\"best_of\":3}", "best_of"},
        {"\"chat_template_kwargs\":{\"enable_thinking\":1}}", "chat_template_kwargs"},
    };
    for (size_t i = 0; i < sizeof bad_fields / sizeof *bad_fields; i++) {
        snprintf(body, sizeof body, "%s%s", U, bad_fields[i][0]);
        bad(body, REQ_CHAT, bad_fields[i][1]);
    }
}

/* What a client puts together from the scanner's events: the calls' names
 * and argument texts, the content, and the text left for the end. */
struct scanned {
    char names[4][32], args[4][256], content[256], rest[256];
    int heads, rest_index;
};

static void scan_in_pieces(const char *text, size_t piece, int max_calls, struct scanned *out) {
    memset(out, 0, sizeof *out);
    out->rest_index = -1;
    struct tool_scan t;
    tool_scan_init(&t, max_calls);
    size_t len = strlen(text);
    for (size_t have = 0; have < len || have == len;) {
        have = have + piece < len ? have + piece : len;
        const int final = have == len;
        for (;;) {
            struct tool_ev ev = tool_scan_next(&t, text, have, final);
            if (ev.kind == TOOL_EV_NONE) break;
            if (ev.kind == TOOL_EV_HEAD && ev.index < 4)
                snprintf(out->names[ev.index], 32, "%.*s", (int)ev.n, ev.p), out->heads++;
            if (ev.kind == TOOL_EV_ARGS && ev.index < 4) strncat(out->args[ev.index], ev.p, ev.n);
            if (ev.kind == TOOL_EV_CONTENT) strncat(out->content, ev.p, ev.n);
            if (ev.kind == TOOL_EV_REST) snprintf(out->rest, 256, "%.*s", (int)ev.n, ev.p), out->rest_index = ev.index;
        }
        if (final) break;
    }
}

/* Streamed tool calls (tool_scan.c) read in pieces of every size give the
 * calls of the whole text; parallel_tool_calls false keeps the first. */
static void test_tool_scan(void) {
    static const char *two =
        "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Pa}ris\\\"\", "
        "\"d\": [1, {\"x\": 2}]}}\n</tool_call>\nthen <tool_call>{\"name\":\"f\",\"parameters\":{}}"
        "</tool_call>";
    for (size_t piece = 1; piece <= 9; piece++) {
        struct scanned sc;
        scan_in_pieces(two, piece, 16, &sc);
        CHECK(sc.heads == 2 && !strcmp(sc.names[0], "get_weather") && !strcmp(sc.names[1], "f") &&
                  !strcmp(sc.args[0], "{\"city\": \"Pa}ris\\\"\", \"d\": [1, {\"x\": 2}]}") &&
                  !strcmp(sc.args[1], "{}") && !strcmp(sc.content, "then") && sc.rest_index < 0,
              "two calls in pieces of %zu: %d heads '%s' '%s' args '%s' '%s' content '%s'", piece, sc.heads,
              sc.names[0], sc.names[1], sc.args[0], sc.args[1], sc.content);
        scan_in_pieces(two, piece, 1, &sc);
        CHECK(sc.heads == 1 && !strcmp(sc.names[0], "get_weather") && !sc.content[0] && sc.rest_index < 0,
              "parallel_tool_calls false in pieces of %zu: %d heads, content '%s'", piece, sc.heads, sc.content);
        /* another key order: not read as it streams, handed over whole at the end */
        static const char *odd = "<tool_call>{\"arguments\": {\"a\": 1}, \"name\": \"g\"}</tool_call>";
        scan_in_pieces(odd, piece, 16, &sc);
        CHECK(sc.heads == 0 && sc.rest_index == 0 && !strcmp(sc.rest, odd),
              "other key order in pieces of %zu: rest '%s'", piece, sc.rest);
        /* cut by max_tokens inside the arguments: what came went out */
        scan_in_pieces("<tool_call>{\"name\": \"h\", \"arguments\": {\"q\": \"ab", piece, 16, &sc);
        CHECK(sc.heads == 1 && !strcmp(sc.args[0], "{\"q\": \"ab"), "a cut call in pieces of %zu: '%s'", piece,
              sc.args[0]);
    }
    /* the whole answer's calls (non-streaming), and the limit */
    struct sbuf rest = {0};
    json_t *calls = tools_extract(two, strlen(two), "chatcmpl-x", 0, 16, &rest);
    CHECK(json_array_size(calls) == 2, "two calls extracted: %zu", json_array_size(calls));
    char id[40];
    tools_call_id("chatcmpl-x", 1, id);
    CHECK(calls && !strcmp(json_string_value(json_object_get(json_array_get(calls, 1), "id")), id),
          "a call's id is the one streamed");
    json_decref(calls);
    sbuf_free(&rest);
    calls = tools_extract(two, strlen(two), "chatcmpl-x", 0, 1, &rest);
    CHECK(json_array_size(calls) == 1 && !rest.len, "one call taken: %zu calls, rest '%.*s'", json_array_size(calls),
          (int)rest.len, rest.p ? rest.p : "");
    json_decref(calls);
    sbuf_free(&rest);
}

int main(void) {
    defaults = r1_sampler_defaults();
    test_chat_ok();
    test_completion_ok();
    test_rejects();
    test_utf8();
    test_structured();
    test_tool_scan();
    return TEST_DONE("test_request");
}
