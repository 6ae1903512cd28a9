/*
 * response.h - the JSON the server sends: OpenAI-shaped completion objects,
 * streaming chunks (as SSE events) and errors. Builders only: they return
 * malloc'ed text and never touch a connection.
 */
#ifndef R1_SERVER_RESPONSE_H
#define R1_SERVER_RESPONSE_H

#include <stddef.h>

#include "server/logprobs.h"
#include "server/request.h"
#include "server/sbuf.h"

/* What every object of one response shares. */
struct resp_meta {
    enum req_kind kind;
    const char *id;    /* "chatcmpl-..." / "cmpl-..." */
    long created;      /* unix seconds */
    const char *model; /* echoed model name */
    /* NULL, or the log-probabilities the request asked for: resp_final
     * reports all of them, resp_chunk those not yet sent (and marks them sent) */
    struct lp_list *lp;
    int index;    /* the choice (n > 1) */
    int tools;    /* chat with tools: calls in the answer become tool_calls (finish "tool_calls") */
    int tool_max; /* of them, the most taken (the request's tool_max) */
};

struct resp_usage {
    int prompt_tokens, completion_tokens, cached_tokens;
    /* speculative decoding (spec = 1): draft tokens verified, of them kept;
     * reported as completion_tokens_details accepted/rejected_prediction_tokens */
    int spec, drafted_tokens, accepted_tokens;
};

/* {"error": {...}} as malloc'ed text (NULL only when out of memory). */
char *resp_error(const struct api_error *e);
/* The non-streaming result: chat.completion or text_completion. finish is
 * "stop" or "length". reasoning (chat only) is left out when empty. */
char *resp_final(const struct resp_meta *m, const char *reasoning, size_t reasoning_len, const char *content,
                 size_t content_len, const char *finish, const struct resp_usage *u);

/* n > 1: the non-streaming results of each choice (resp_final texts, each
 * with its index) as one object whose choices are all of theirs, usage u.
 * malloc'ed; NULL when out of memory or a text is not a result. */
char *resp_merge(char *const *finals, int n, const struct resp_usage *u);

/* Append one SSE event "data: {chunk}\n\n" to out. role, reasoning, content
 * and finish may be NULL (left out of the delta; finish_reason null). */
void resp_chunk(struct sbuf *out, const struct resp_meta *m, const char *role, const char *reasoning,
                size_t reasoning_len, const char *content, size_t content_len, const char *finish);
/* Tools, streaming: text not read as it streamed (tool_scan.h) at the
 * answer's end, as a content delta or, when it holds calls, a tool_calls
 * delta (indexes from first on) and the text around them. Returns 1 when
 * it held calls (the finish reason is then "tool_calls"). */
int resp_chunk_tools(struct sbuf *out, const struct resp_meta *m, const char *content, size_t content_len, int first);
/* Tools, streaming: call index begins (name, its id, arguments "") when
 * name, else the next piece of its arguments' text. */
void resp_chunk_call(struct sbuf *out, const struct resp_meta *m, int index, const char *name, size_t name_len,
                     const char *args, size_t args_len);
/* The usage-only chunk (stream_options.include_usage): choices []. */
void resp_usage_chunk(struct sbuf *out, const struct resp_meta *m, const struct resp_usage *u);
/* "data: {error}\n\n" for a failure after the stream has started. */
void resp_error_event(struct sbuf *out, const struct api_error *e);
/* "data: [DONE]\n\n" */
void resp_done(struct sbuf *out);

#endif
