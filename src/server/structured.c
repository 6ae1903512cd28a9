/*
 * structured.c - the request fields that constrain or bias what is
 * generated: response_format (text, json_object, json_schema), the
 * extension field "grammar" (GBNF text), logit_bias, enable_thinking, then
 * the tools (tools.c), and the refusal of
 * fields the server does not implement but that would change the answer's
 * meaning if ignored. Part of req_parse: pure, no I/O, fuzzed with it.
 */
#include <jansson.h>
#include <stdlib.h>
#include <string.h>

#include "server/request.h"

#define BAD(param, ...) api_error_set(err, 400, "invalid_request_error", param, NULL, __VA_ARGS__)
#define MAX_BIAS 1024 /* logit_bias entries */

/* Fields refused outright: they change what the answer means. */
static int refuse_unsupported(const json_t *root, struct gen_request *r, struct api_error *err) {
    static const char *refused[] = {"functions", "function_call", "audio", "prediction", "suffix", NULL};
    for (int i = 0; refused[i]; i++) {
        const json_t *v = json_object_get(root, refused[i]);
        if (v && !json_is_null(v)) return BAD(refused[i], "'%s' is not supported by this server", refused[i]);
    }
    const json_t *v = json_object_get(root, "modalities");
    if (v && !json_is_null(v)) {
        size_t i;
        const json_t *m;
        if (!json_is_array(v)) return BAD("modalities", "'modalities' must be an array");
        json_array_foreach(v, i, m) if (!json_is_string(m) || strcmp(json_string_value(m), "text")) return BAD(
            "modalities", "only the 'text' modality is supported");
    }
    v = json_object_get(root, "best_of");
    if (v && !json_is_null(v) && !(json_is_integer(v) && json_integer_value(v) == 1))
        return BAD("best_of", "'best_of' other than 1 is not supported; use 'n'");
    (void)r;
    return 0;
}

static int set_grammar(struct gen_request *r, char *text, const char *param, struct api_error *err) {
    char msg[256];
    if (!text) return api_error_set(err, 500, "server_error", NULL, NULL, "out of memory");
    r1_grammar_t *g = r1_grammar_parse(text, strlen(text), msg, sizeof msg);
    if (!g) {
        free(text);
        return BAD(param, "'%s' is not a usable grammar: %s", param, msg);
    }
    r1_grammar_free(r->gram);
    free(r->grammar);
    r->gram = g;
    r->grammar = text;
    return 0;
}

static int parse_response_format(const json_t *root, struct gen_request *r, struct api_error *err) {
    const json_t *rf = json_object_get(root, "response_format");
    if (!rf || json_is_null(rf)) return 0;
    if (!json_is_object(rf)) return BAD("response_format", "'response_format' must be an object");
    const json_t *type = json_object_get(rf, "type");
    if (!json_is_string(type)) return BAD("response_format", "'response_format.type' must be a string");
    const char *t = json_string_value(type);
    char msg[256];
    if (!strcmp(t, "text")) return 0;
    if (!strcmp(t, "json_object")) {
        char *text = r1_grammar_json_schema(NULL, 0, 0, msg, sizeof msg);
        return set_grammar(r, text, "response_format", err);
    }
    if (strcmp(t, "json_schema"))
        return BAD("response_format",
                   "'response_format.type' is '%.40s'; it must be text, json_object or "
                   "json_schema",
                   t);
    const json_t *js = json_object_get(rf, "json_schema");
    if (!json_is_object(js))
        return BAD("response_format", "'response_format.json_schema' must be an object "
                                      "{\"name\": ..., \"schema\": {...}, \"strict\": true}");
    const json_t *schema = json_object_get(js, "schema");
    if (!schema || json_is_null(schema)) {
        char *text = r1_grammar_json_schema(NULL, 0, 0, msg, sizeof msg);
        return set_grammar(r, text, "response_format", err);
    }
    if (!json_is_object(schema) && !json_is_boolean(schema))
        return BAD("response_format", "'response_format.json_schema.schema' must be a JSON schema (an object)");
    char *s = json_dumps(schema, JSON_COMPACT | JSON_ENCODE_ANY);
    if (!s) return api_error_set(err, 500, "server_error", NULL, NULL, "out of memory");
    /* strict: the answer is valid, or the schema is refused; otherwise a
     * pattern the grammar cannot express is left unenforced */
    const int lenient = !json_is_true(json_object_get(js, "strict"));
    char *text = r1_grammar_json_schema(s, strlen(s), lenient ? R1_SCHEMA_LENIENT : 0, msg, sizeof msg);
    free(s);
    if (!text) return BAD("response_format", "'response_format.json_schema.schema': %s", msg);
    return set_grammar(r, text, "response_format", err);
}

static int parse_logit_bias(const json_t *root, struct gen_request *r, struct api_error *err) {
    const json_t *lb = json_object_get(root, "logit_bias");
    if (!lb || json_is_null(lb)) return 0;
    if (!json_is_object(lb)) return BAD("logit_bias", "'logit_bias' must be an object {\"token id\": bias}");
    size_t n = json_object_size(lb);
    if (n > MAX_BIAS) return BAD("logit_bias", "'logit_bias' has %zu entries; at most %d are allowed", n, MAX_BIAS);
    if (!n) return 0;
    r->bias_ids = malloc(n * sizeof *r->bias_ids);
    r->bias = malloc(n * sizeof *r->bias);
    if (!r->bias_ids || !r->bias) return api_error_set(err, 500, "server_error", NULL, NULL, "out of memory");
    const char *k;
    const json_t *v;
    json_object_foreach((json_t *)lb, k, v) {
        char *end;
        long id = strtol(k, &end, 10);
        if (!*k || *end || id < 0 || id > INT32_MAX)
            return BAD("logit_bias", "'logit_bias' keys must be token ids (non-negative integers), not '%.40s'", k);
        if (!json_is_number(v) || !(json_number_value(v) >= -100 && json_number_value(v) <= 100))
            return BAD("logit_bias", "'logit_bias[%s]' must be a number between -100 and 100", k);
        r->bias_ids[r->n_bias] = (int32_t)id;
        r->bias[r->n_bias++] = (float)json_number_value(v);
    }
    return 0;
}

int req_parse_structured(const json_t *root, struct gen_request *r, struct api_error *err) {
    if (refuse_unsupported(root, r, err) || parse_logit_bias(root, r, err) || parse_response_format(root, r, err))
        return -1;
    const json_t *kw = json_object_get(root, "chat_template_kwargs");
    if (kw && !json_is_null(kw)) {
        if (!json_is_object(kw)) return BAD("chat_template_kwargs", "'chat_template_kwargs' must be an object");
        const json_t *et = json_object_get(kw, "enable_thinking");
        if (et && !json_is_boolean(et))
            return BAD("chat_template_kwargs", "'chat_template_kwargs.enable_thinking' must be a boolean");
        r->no_think = et && json_is_false(et);
    }
    const json_t *g = json_object_get(root, "grammar");
    if (g && !json_is_null(g)) {
        if (!json_is_string(g)) return BAD("grammar", "'grammar' must be a string of GBNF rules");
        if (r->gram) return BAD("grammar", "'grammar' and 'response_format' cannot be used together");
        char *text = malloc(json_string_length(g) + 1);
        if (text) memcpy(text, json_string_value(g), json_string_length(g) + 1);
        if (text && memchr(text, 0, json_string_length(g))) {
            free(text);
            return BAD("grammar", "'grammar' must not contain NUL");
        }
        if (set_grammar(r, text, "grammar", err)) return -1;
    }
    return req_parse_tools(root, r, err);
}

void req_free_structured(struct gen_request *r) {
    r1_grammar_free(r->gram);
    free(r->grammar);
    free(r->bias_ids);
    free(r->bias);
}
