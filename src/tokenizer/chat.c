/*
 * chat.c - chat templates. The Jinja in tokenizer_config.json (or GGUF's
 * tokenizer.chat_template) is recognised, not interpreted: "<｜Assistant｜>"
 * means the DeepSeek-R1 template (Qwen and Llama distills alike: only the BOS
 * text differs), "<|im_start|>" ChatML (Qwen2.5, SmolLM2). A ChatML template
 * that writes a literal system block when the conversation has none carries
 * its default system prompt ("You are Qwen, ..." for Qwen2.5, "You are a
 * helpful AI assistant named SmolLM, ..." for SmolLM2); it is read out of the
 * template text. Each template is reproduced in C, byte for byte, for the
 * system, user and assistant roles; other roles (tool calls) are refused.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tokenizer/tokenizer_internal.h"
#include "util/util.h"

#define R1_USER "<\xEF\xBD\x9CUser\xEF\xBD\x9C>"
#define R1_ASSISTANT                                                                                                   \
    "<\xEF\xBD\x9C"                                                                                                    \
    "Assistant\xEF\xBD\x9C>"
#define R1_EOS                                                                                                         \
    "<\xEF\xBD\x9C"                                                                                                    \
    "end\xE2\x96\x81of\xE2\x96\x81sentence\xEF\xBD\x9C>"
#define IM_SYSTEM "<|im_start|>system"

/* The default system prompt of a ChatML template: the first Jinja string
 * literal that reads "<|im_start|>system\n<text><|im_end|>" with <text> a
 * plain literal (no quote: not "... + messages[0]['content']"). A newline is
 * either written as such or as the escape \n. malloc'ed, or NULL if none. */
static char *chatml_default_system(const char *jinja) {
    for (const char *p = jinja; (p = strstr(p, IM_SYSTEM)); p++) {
        const char *q = p + strlen(IM_SYSTEM);
        if (*q == '\n') q++;
        else if (q[0] == '\\' && q[1] == 'n') q += 2;
        else continue;
        const char *end = strstr(q, "<|im_end|>");
        if (!end || end == q || memchr(q, '\'', (size_t)(end - q)) || memchr(q, '"', (size_t)(end - q)) ||
            memchr(q, '{', (size_t)(end - q)))
            continue;
        char *out = malloc((size_t)(end - q) + 1), *o = out;
        if (!out) return NULL;
        for (const char *c = q; c < end; c++) {
            if (c[0] == '\\' && c + 1 < end) { /* Jinja string escapes */
                c++;
                *o++ = *c == 'n' ? '\n' : *c == 't' ? '\t' : *c;
            } else {
                *o++ = *c;
            }
        }
        *o = 0;
        return out;
    }
    return NULL;
}

enum r1_chat_kind r1_chat_detect(const char *jinja, const char *source, char **default_system) {
    *default_system = NULL;
    if (jinja && strstr(jinja, R1_ASSISTANT)) return R1_CHAT_KIND_DEEPSEEK_R1;
    if (jinja && strstr(jinja, "<|im_start|>")) {
        *default_system = chatml_default_system(jinja);
        return R1_CHAT_KIND_CHATML;
    }
    fprintf(stderr, "warning: %s: %s chat_template; using chatml\n", source, jinja ? "unrecognised" : "no");
    return R1_CHAT_KIND_CHATML;
}

const char *r1_chat_template_name(const r1_tokenizer_t *t) {
    return t->chat == R1_CHAT_KIND_DEEPSEEK_R1 ? "deepseek-r1" : "chatml";
}

struct sbuf {
    char *p;
    size_t n, cap;
    int oom;
};

static void put(struct sbuf *b, const char *s, size_t n) {
    if (b->oom) return;
    if (b->n + n + 1 > b->cap) {
        size_t c = b->cap ? b->cap : 256;
        while (c < b->n + n + 1) c *= 2;
        char *q = realloc(b->p, c);
        if (!q) {
            b->oom = 1;
            return;
        }
        b->p = q;
        b->cap = c;
    }
    memcpy(b->p + b->n, s, n);
    b->n += n;
    b->p[b->n] = 0;
}

static void puts_(struct sbuf *b, const char *s) { put(b, s, strlen(s)); }

/* Checks roles and contents; returns -1 with an error naming the message. */
static int check_msgs(const struct r1_chat_msg *m, size_t n) {
    for (size_t i = 0; i < n; i++) {
        const char *r = m[i].role;
        if (!r || (strcmp(r, "system") && strcmp(r, "user") && strcmp(r, "assistant")))
            return r1_err("chat message %zu: unsupported role \"%s\" (system, user, assistant)", i, r ? r : "(null)");
        if (!m[i].content) return r1_err("chat message %zu (%s) has no content", i, r);
    }
    return 0;
}

static void render_r1(const r1_tokenizer_t *t, const struct r1_chat_msg *m, size_t n, int gen, struct sbuf *b) {
    const char *system = "";
    for (size_t i = 0; i < n; i++)
        if (!strcmp(m[i].role, "system")) system = m[i].content; /* the last one wins */
    puts_(b, t->bos_text ? t->bos_text : "");
    puts_(b, system);
    for (size_t i = 0; i < n; i++) {
        if (!strcmp(m[i].role, "user")) {
            puts_(b, R1_USER);
            puts_(b, m[i].content);
        } else if (!strcmp(m[i].role, "assistant")) {
            const char *c = m[i].content, *p; /* keep what follows the last </think> */
            while ((p = strstr(c, "</think>"))) c = p + strlen("</think>");
            puts_(b, R1_ASSISTANT);
            puts_(b, c);
            puts_(b, R1_EOS);
        }
    }
    if (gen) puts_(b, R1_ASSISTANT "<think>\n");
}

static void render_chatml(const r1_tokenizer_t *t, const struct r1_chat_msg *m, size_t n, int gen, struct sbuf *b) {
    if (t->chat_system && n && strcmp(m[0].role, "system")) { /* as "loop.first and not system" */
        puts_(b, IM_SYSTEM "\n");
        puts_(b, t->chat_system);
        puts_(b, "<|im_end|>\n");
    }
    for (size_t i = 0; i < n; i++) {
        puts_(b, "<|im_start|>");
        puts_(b, m[i].role);
        puts_(b, "\n");
        puts_(b, m[i].content);
        puts_(b, "<|im_end|>\n");
    }
    if (gen) puts_(b, "<|im_start|>assistant\n");
}

char *r1_chat_apply(const r1_tokenizer_t *t, const struct r1_chat_msg *msgs, size_t n, int add_generation_prompt) {
    if (n && !msgs) {
        r1_err("chat: no messages given");
        return NULL;
    }
    if (check_msgs(msgs, n)) return NULL;
    struct sbuf b = {0};
    put(&b, "", 0);
    if (t->chat == R1_CHAT_KIND_DEEPSEEK_R1) render_r1(t, msgs, n, add_generation_prompt, &b);
    else render_chatml(t, msgs, n, add_generation_prompt, &b);
    if (b.oom) {
        free(b.p);
        r1_err("out of memory rendering the chat template");
        return NULL;
    }
    return b.p;
}
