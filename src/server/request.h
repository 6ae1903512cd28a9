/*
 * request.h - parsing and validation of OpenAI-style request bodies
 * (/v1/chat/completions and /v1/completions) into a gen_request, and the
 * OpenAI-style error they produce on bad input.
 *
 * req_parse is a pure function of (bytes, length): it never trusts the
 * input, never crashes on it, and is the libFuzzer target of
 * tests/fuzz/fuzz_request.c. Tokenization and the context-length check
 * happen later, where the tokenizer is.
 */
#ifndef R1_SERVER_REQUEST_H
#define R1_SERVER_REQUEST_H

#include <stddef.h>
#include <stdint.h>

#include "r1infer.h"

#define REQ_MAX_STOPS 16     /* stop strings per request */
#define REQ_MAX_STOP_LEN 256 /* bytes per stop string */

enum req_kind { REQ_CHAT, REQ_COMPLETION };

/* An error for the client: HTTP status and the fields of
 * {"error": {"message", "type", "param", "code"}}. */
struct api_error {
    int status;
    char message[320];
    const char *type; /* "invalid_request_error", ... */
    char param[64];   /* "" = null */
    const char *code; /* NULL = null */
};

/* Fill e and return -1 (printf-style message). */
int api_error_set(struct api_error *e, int status, const char *type, const char *param, const char *code,
                  const char *fmt, ...) __attribute__((format(printf, 6, 7)));

struct req_msg {
    char *role;    /* "system", "user" or "assistant" ("developer" maps to "system") */
    char *content; /* text parts joined */
};

struct gen_request {
    enum req_kind kind;
    char *model;          /* as sent (echoed back), NULL if absent */
    struct req_msg *msgs; /* (n_msgs) chat */
    int n_msgs;
    char *prompt;        /* completion: text prompt, or NULL when ids are given */
    int32_t *prompt_ids; /* completion: (n_prompt_ids) token ids */
    int n_prompt_ids;
    int max_tokens;              /* -1 = until the context is full; 0 only with echo */
    struct r1_sampler_params sp; /* the defaults with the request's fields applied */
    int seed_set;                /* the request gave a seed */
    char *stops[REQ_MAX_STOPS];  /* (n_stops) non-empty, valid UTF-8 */
    int n_stops;
    int stream;
    int include_usage; /* stream_options.include_usage */
    int logprobs;      /* -1 = off; else the alternatives per token: chat top_logprobs
                          (0-20, with logprobs true), completions logprobs (0-5) */
    int echo;          /* completions: the prompt is returned before the completion
                          (with its log-probabilities when logprobs is on) */
    int n;             /* choices from the one prompt (1..16), prefilled once */
    /* structured.c: response_format / grammar, logit_bias */
    char *grammar;      /* GBNF text the answer must follow, NULL = free text */
    r1_grammar_t *gram; /* grammar compiled */
    int32_t *bias_ids;  /* (n_bias) logit_bias token ids (checked against the vocabulary later) */
    float *bias;        /* (n_bias) added to their logits; -100 bans the token */
    int n_bias;
    int no_think;         /* chat_template_kwargs.enable_thinking false: the think block is closed empty */
    int tools;            /* tools.c: the tools are in the prompt; calls in the answer become tool_calls */
    int tool_max;         /* the calls taken from one answer: 1 with parallel_tool_calls false,
                             else TOOL_MAX_CALLS */
    int reasoning_budget; /* reasoning_budget_tokens (or thinking_budget): thinking tokens
                             before </think> is emitted, 0 = no thinking, -1 = no limit;
                             REQ_BUDGET_DEFAULT when absent: the server's */
};
#define REQ_BUDGET_DEFAULT (-2)

/* Parse body (len bytes, need not be NUL-terminated) as a request of the
 * given kind, starting the sampler fields from *defaults. On success fills
 * *out (release with req_free) and returns 0; on bad input fills *err (a 400
 * with the offending field in param) and returns -1, with *out empty. */
int req_parse(const char *body, size_t len, enum req_kind kind, const struct r1_sampler_params *defaults,
              struct gen_request *out, struct api_error *err);
void req_free(struct gen_request *r);

/* structured.c: response_format, grammar, logit_bias and the refused fields
 * of root into r; 0, or -1 with *err (400). */
struct json_t;
int req_parse_structured(const struct json_t *root, struct gen_request *r, struct api_error *err);
void req_free_structured(struct gen_request *r);

/* tools.c: tools, tool_choice and the tool turns of the messages (called by
 * req_parse_structured, after response_format and grammar). */
int req_parse_tools(const struct json_t *root, struct gen_request *r, struct api_error *err);
#define TOOL_MAX_CALLS 16
/* The tool calls in an answer (<tool_call>{...}</tool_call> blocks, or a
 * bare {"name", "parameters"} object) as an array of OpenAI tool_calls,
 * at most max_calls (the text after the last one taken is dropped), ids
 * made from id_seed and the index (the first is first); the text around
 * them appended to rest; NULL when the answer holds no call. */
struct sbuf;
struct json_t *tools_extract(const char *text, size_t len, const char *id_seed, int first, int max_calls,
                             struct sbuf *rest);
/* The id of call index of a response ("call_" and 16 hex digits). */
void tools_call_id(const char *id_seed, int index, char id[40]);

/* Whether s[0..n) is well-formed UTF-8 (no overlongs, no surrogates, <= U+10FFFF). */
int utf8_valid(const char *s, size_t n);

#endif
