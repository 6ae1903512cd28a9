/*
 * reasoning.h - splits an R1 model's output into reasoning and answer.
 *
 * The R1 chat template's generation prompt ends in "<think>\n", so the
 * output is usually "reasoning...</think>\n\nanswer". Everything before
 * "</think>" is reasoning (reasoning_content), the rest is the answer
 * (content). Output that itself opens with "<think>" is handled, and output
 * with no "</think>" at all is all reasoning when the prompt opened <think>
 * (all answer otherwise). Whitespace around the tags is dropped: leading
 * whitespace of both parts and trailing whitespace of the reasoning.
 *
 * Works on streamed pieces: text that could still be the start of a tag is
 * held back until it is decided. Pure text processing, no I/O.
 */
#ifndef R1_SERVER_REASONING_H
#define R1_SERVER_REASONING_H

#include "server/sbuf.h"

enum reasoning_state {
    REASONING_LEAD,    /* start of output: skip whitespace, look for "<think>" */
    REASONING_THINK,   /* inside the reasoning, looking for "</think>" */
    REASONING_ANSWER0, /* after "</think>": skip whitespace */
    REASONING_ANSWER   /* the answer: pass everything */
};

struct reasoning {
    enum reasoning_state state;
    int thinking;     /* LEAD: the text after the lead is reasoning */
    int tag_seen;     /* LEAD: an opening "<think>" was already consumed */
    struct sbuf hold; /* undecided text */
};

/* in_think: the prompt ended inside an open <think> block. */
void reasoning_init(struct reasoning *r, int in_think);
void reasoning_free(struct reasoning *r);
/* Feed n bytes of output; reasoning text is appended to think, answer text to
 * answer (within one call, all reasoning precedes all answer). */
void reasoning_feed(struct reasoning *r, const char *text, size_t n, struct sbuf *think, struct sbuf *answer);
/* End of output: release what is still held. */
void reasoning_finish(struct reasoning *r, struct sbuf *think, struct sbuf *answer);

#endif
