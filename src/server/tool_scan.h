/*
 * tool_scan.h - the tool calls of an answer read as its text arrives, for
 * streaming them as OpenAI does: a call's id and name as soon as its
 * arguments begin, then the arguments' text in pieces. Pure: it reads the
 * text and says what to send; gen.c sends it.
 */
#ifndef R1_SERVER_TOOL_SCAN_H
#define R1_SERVER_TOOL_SCAN_H

#include <stddef.h>

struct tool_scan {
    int state;              /* TS_* (tool_scan.c) */
    int calls;              /* calls begun (their heads sent) */
    int max_calls;          /* calls taken (parallel_tool_calls false: 1); the text after the last is dropped */
    size_t pos;             /* the next byte of the text to read */
    size_t call_at;         /* where the call being read began ("<tool_call>") */
    int depth, in_str, esc; /* inside the arguments object */
    int in_text;            /* text outside the calls is being sent (its white space counts) */
};

enum tool_ev_kind {
    TOOL_EV_NONE,    /* nothing to send until more text comes */
    TOOL_EV_CONTENT, /* text outside the calls: p[0..n) */
    TOOL_EV_HEAD,    /* a call begins: index, name p[0..n) (arguments follow) */
    TOOL_EV_ARGS,    /* a piece of the arguments' JSON text of call index: p[0..n) */
    TOOL_EV_REST,    /* the text from p on (to the end) is not read as it streams: tools_extract
                      * turns it into calls at the end (indexes from index on), or content */
};

struct tool_ev {
    enum tool_ev_kind kind;
    int index;
    const char *p;
    size_t n;
};

/* max_calls >= 1. */
void tool_scan_init(struct tool_scan *t, int max_calls);
/* The next thing to send for text[0..len) (the answer so far, from where
 * a call may begin; it only grows). final: no more text will come (held
 * back text is decided). Call until it gives TOOL_EV_NONE. */
struct tool_ev tool_scan_next(struct tool_scan *t, const char *text, size_t len, int final);

#endif
