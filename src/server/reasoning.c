/*
 * reasoning.c - the <think>...</think> splitter; see reasoning.h. A state
 * machine over a hold buffer; it must not lose or duplicate a byte that is
 * not tag or trimmed whitespace.
 */
#include "server/reasoning.h"

#include <string.h>

static const char OPEN[] = "<think>", CLOSE[] = "</think>";
#define OPEN_LEN (sizeof OPEN - 1)
#define CLOSE_LEN (sizeof CLOSE - 1)

static int is_ws(char c) { return c == ' ' || c == '\n' || c == '\r' || c == '\t'; }

void reasoning_init(struct reasoning *r, int in_think) {
    memset(r, 0, sizeof *r);
    r->state = REASONING_LEAD;
    r->thinking = in_think;
}

void reasoning_free(struct reasoning *r) { sbuf_free(&r->hold); }

/* Longest k < tag_len such that buf ends with the first k bytes of tag. */
static size_t partial_tag(const char *buf, size_t len, const char *tag, size_t tag_len) {
    size_t k = tag_len - 1 < len ? tag_len - 1 : len;
    for (; k > 0; k--)
        if (!memcmp(buf + len - k, tag, k)) return k;
    return 0;
}

/* Process the hold buffer as far as it can be decided. */
static void step(struct reasoning *r, struct sbuf *think, struct sbuf *answer) {
    for (;;) {
        char *b = r->hold.p;
        size_t len = r->hold.len;
        if (!b || !len) return;
        switch (r->state) {
        case REASONING_LEAD: {
            size_t i = 0;
            while (i < len && is_ws(b[i])) i++;
            sbuf_consume(&r->hold, i);
            b = r->hold.p, len = r->hold.len;
            if (!len) return;
            if (!r->tag_seen) {
                size_t k = len < OPEN_LEN ? len : OPEN_LEN;
                if (!memcmp(b, OPEN, k)) {
                    if (k < OPEN_LEN) return; /* could still become "<think>" */
                    sbuf_consume(&r->hold, OPEN_LEN);
                    r->tag_seen = 1;
                    r->thinking = 1;
                    continue;
                }
            }
            r->state = r->thinking ? REASONING_THINK : REASONING_ANSWER;
            continue;
        }
        case REASONING_THINK: {
            char *p = memmem(b, len, CLOSE, CLOSE_LEN);
            if (p) {
                size_t e = (size_t)(p - b);
                while (e > 0 && is_ws(b[e - 1])) e--;
                sbuf_add(think, b, e);
                sbuf_consume(&r->hold, (size_t)(p - b) + CLOSE_LEN);
                r->state = REASONING_ANSWER0;
                continue;
            }
            /* keep a possible tag start and the whitespace before it */
            size_t e = len - partial_tag(b, len, CLOSE, CLOSE_LEN);
            while (e > 0 && is_ws(b[e - 1])) e--;
            sbuf_add(think, b, e);
            sbuf_consume(&r->hold, e);
            return;
        }
        case REASONING_ANSWER0: {
            size_t i = 0;
            while (i < len && is_ws(b[i])) i++;
            sbuf_consume(&r->hold, i);
            if (!r->hold.len) return;
            r->state = REASONING_ANSWER;
            continue;
        }
        case REASONING_ANSWER:
            sbuf_add(answer, b, len);
            sbuf_clear(&r->hold);
            return;
        }
    }
}

void reasoning_feed(struct reasoning *r, const char *text, size_t n, struct sbuf *think, struct sbuf *answer) {
    sbuf_add(&r->hold, text, n);
    step(r, think, answer);
}

void reasoning_finish(struct reasoning *r, struct sbuf *think, struct sbuf *answer) {
    char *b = r->hold.p;
    size_t len = r->hold.len;
    if (b && len) {
        if (r->state == REASONING_THINK || (r->state == REASONING_LEAD && r->thinking)) {
            while (len > 0 && is_ws(b[len - 1])) len--;
            sbuf_add(think, b, len);
        } else if (r->state != REASONING_ANSWER0) {
            sbuf_add(answer, b, len);
        }
    }
    sbuf_clear(&r->hold);
}
