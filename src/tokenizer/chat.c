/*
 * chat.c - chat templates. The Jinja in tokenizer_config.json is recognised,
 * not interpreted: "<｜Assistant｜>" means the DeepSeek-R1 template, "<|im_start|>"
 * ChatML (Qwen2.5's). Each is reproduced in C, byte for byte, for the system,
 * user and assistant roles; other roles (tool calls) are refused.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tokenizer/tokenizer_internal.h"
#include "util/util.h"

#define R1_USER "<\xEF\xBD\x9CUser\xEF\xBD\x9C>"
#define R1_ASSISTANT "<\xEF\xBD\x9C" "Assistant\xEF\xBD\x9C>"
#define R1_EOS "<\xEF\xBD\x9C" "end\xE2\x96\x81of\xE2\x96\x81sentence\xEF\xBD\x9C>"
#define CHATML_DEFAULT_SYSTEM "You are Qwen, created by Alibaba Cloud. You are a helpful assistant."

enum r1_chat_kind r1_chat_detect(const char *jinja, const char *source) {
    if (jinja && strstr(jinja, R1_ASSISTANT)) return R1_CHAT_KIND_DEEPSEEK_R1;
    if (jinja && strstr(jinja, "<|im_start|>")) return R1_CHAT_KIND_CHATML;
    fprintf(stderr, "warning: %s: %s chat_template; using chatml\n", source,
            jinja ? "unrecognised" : "no");
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
            return r1_err("chat message %zu: unsupported role \"%s\" (system, user, assistant)", i,
                          r ? r : "(null)");
        if (!m[i].content) return r1_err("chat message %zu (%s) has no content", i, r);
    }
    return 0;
}

static void render_r1(const r1_tokenizer_t *t, const struct r1_chat_msg *m, size_t n, int gen,
                      struct sbuf *b) {
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

static void render_chatml(const struct r1_chat_msg *m, size_t n, int gen, struct sbuf *b) {
    size_t i = 0;
    if (n && !strcmp(m[0].role, "system")) {
        puts_(b, "<|im_start|>system\n");
        puts_(b, m[0].content);
        puts_(b, "<|im_end|>\n");
        i = 1;
    } else {
        puts_(b, "<|im_start|>system\n" CHATML_DEFAULT_SYSTEM "<|im_end|>\n");
    }
    for (; i < n; i++) {
        puts_(b, "<|im_start|>");
        puts_(b, m[i].role);
        puts_(b, "\n");
        puts_(b, m[i].content);
        puts_(b, "<|im_end|>\n");
    }
    if (gen) puts_(b, "<|im_start|>assistant\n");
}

char *r1_chat_apply(const r1_tokenizer_t *t, const struct r1_chat_msg *msgs, size_t n,
                    int add_generation_prompt) {
    if (n && !msgs) {
        r1_err("chat: no messages given");
        return NULL;
    }
    if (check_msgs(msgs, n)) return NULL;
    struct sbuf b = {0};
    put(&b, "", 0);
    if (t->chat == R1_CHAT_KIND_DEEPSEEK_R1) render_r1(t, msgs, n, add_generation_prompt, &b);
    else render_chatml(msgs, n, add_generation_prompt, &b);
    if (b.oom) {
        free(b.p);
        r1_err("out of memory rendering the chat template");
        return NULL;
    }
    return b.p;
}
