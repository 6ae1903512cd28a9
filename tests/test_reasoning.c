/*
 * test_reasoning.c - the server's text pipeline on crafted strings: the
 * <think> splitter (reasoning vs answer) and the stop-string matcher, each
 * fed whole and in every split into pieces, as tokens arrive.
 */
#include <stdlib.h>
#include <string.h>

#include "server/reasoning.h"
#include "server/stop.h"
#include "test.h"

/* Split `out` with the splitter, fed in pieces of `step` bytes (0 = whole). */
static void split(const char *out, int in_think, size_t step, struct sbuf *think, struct sbuf *answer) {
    struct reasoning r;
    reasoning_init(&r, in_think);
    size_t n = strlen(out);
    if (!step) step = n ? n : 1;
    for (size_t i = 0; i < n; i += step) reasoning_feed(&r, out + i, i + step <= n ? step : n - i, think, answer);
    reasoning_finish(&r, think, answer);
    reasoning_free(&r);
}

static void check_split(const char *out, int in_think, const char *want_think, const char *want_answer) {
    size_t n = strlen(out);
    for (size_t step = 0; step <= n + 1; step++) {
        struct sbuf t = {0}, a = {0};
        split(out, in_think, step, &t, &a);
        const char *gt = t.p ? t.p : "", *ga = a.p ? a.p : "";
        CHECK(!strcmp(gt, want_think) && !strcmp(ga, want_answer),
              "split(%s, in_think=%d, step=%zu): reasoning '%s' answer '%s', want '%s' / '%s'", out, in_think, step, gt,
              ga, want_think, want_answer);
        sbuf_free(&t);
        sbuf_free(&a);
    }
}

static void test_reasoning(void) {
    /* the usual R1 case: the prompt opened <think> */
    check_split("Let me think.\n</think>\n\nThe answer is 4.", 1, "Let me think.", "The answer is 4.");
    check_split("a\n\nb\n</think>\n\nc\n\nd\n", 1, "a\n\nb", "c\n\nd\n");
    /* output that opens <think> itself, with or without the prompt having done so */
    check_split("<think>\nhmm\n</think>\n\nyes", 0, "hmm", "yes");
    check_split("<think>\nhmm\n</think>\n\nyes", 1, "hmm", "yes");
    check_split("\n<think>x</think>y", 0, "x", "y");
    /* no </think>: all reasoning when the prompt opened it, all answer otherwise */
    check_split("still thinking about it", 1, "still thinking about it", "");
    check_split("plain answer", 0, "", "plain answer");
    check_split("still thinking\n\n", 1, "still thinking", "");
    /* partial tags that are not tags */
    check_split("a </thin b</think>c", 1, "a </thin b", "c");
    check_split("<thi", 0, "", "<thi");
    check_split("<thinking>x", 0, "", "<thinking>x");
    check_split("x </th", 1, "x </th", "");
    check_split("a < b", 1, "a < b", "");
    /* empty parts */
    check_split("</think>answer", 1, "", "answer");
    check_split("reason</think>", 1, "reason", "");
    check_split("", 1, "", "");
    check_split("", 0, "", "");
    /* only the first </think> splits; later tags belong to the answer */
    check_split("r</think>a</think>b", 1, "r", "a</think>b");
    /* multi-byte text survives every split point */
    check_split("ü思考\n</think>\n答え ✓", 1, "ü思考", "答え ✓");
}

/* Run the matcher over `out` in pieces of `step` bytes; returns the released text. */
static char *stop_run(const char *out, char *const *stops, int n_stops, size_t step, int *hit) {
    struct stop_match m;
    struct sbuf rel = {0};
    stop_init(&m, stops, n_stops);
    size_t n = strlen(out);
    if (!step) step = n ? n : 1;
    *hit = 0;
    for (size_t i = 0; i < n && !*hit; i += step) *hit = stop_feed(&m, out + i, i + step <= n ? step : n - i, &rel);
    if (!*hit) stop_flush(&m, &rel);
    stop_free(&m);
    char *s = strdup(rel.p ? rel.p : "");
    sbuf_free(&rel);
    return s;
}

static void check_stop(const char *out, const char *s1, const char *s2, const char *want, int want_hit) {
    char *stops[2] = {(char *)s1, (char *)s2};
    int n = s2 ? 2 : s1 ? 1 : 0;
    size_t len = strlen(out);
    for (size_t step = 0; step <= len + 1; step++) {
        int hit;
        char *got = stop_run(out, stops, n, step, &hit);
        CHECK(!strcmp(got, want) && hit == want_hit, "stop(%s | %s, %s, step=%zu): got '%s' hit %d, want '%s' hit %d",
              out, s1 ? s1 : "-", s2 ? s2 : "-", step, got, hit, want, want_hit);
        free(got);
    }
}

/* The matcher never releases text that a later piece turns into a stop string. */
static void check_holdback(void) {
    char *stops[1] = {"STOP"};
    struct stop_match m;
    struct sbuf rel = {0};
    stop_init(&m, stops, 1);
    stop_feed(&m, "abcST", 5, &rel);
    CHECK(rel.len == 3 && !memcmp(rel.p, "abc", 3), "after 'abcST' released '%s', want 'abc'", rel.p ? rel.p : "");
    stop_feed(&m, "O", 1, &rel);
    CHECK(rel.len == 3, "a prefix of the stop string was released early: '%s'", rel.p);
    int hit = stop_feed(&m, "Pxyz", 4, &rel);
    CHECK(hit && rel.len == 3, "STOP across pieces: hit %d released '%s'", hit, rel.p);
    stop_free(&m);
    sbuf_free(&rel);
}

static void test_stop(void) {
    check_stop("hello world", NULL, NULL, "hello world", 0);
    check_stop("hello world", "wor", NULL, "hello ", 1);
    check_stop("hello world", "xyz", NULL, "hello world", 0);
    check_stop("abcabd", "abd", NULL, "abc", 1);
    check_stop("aaab", "aab", NULL, "a", 1);
    check_stop("one\n\ntwo", "\n\n", "two", "one", 1);
    check_stop("x two y\n\n", "\n\n", "two", "x ", 1);
    check_stop("ends with a partial sto", "stop", NULL, "ends with a partial sto", 0);
    check_stop("STOP", "STOP", NULL, "", 1);
    check_stop("日本語です。終わり", "。", NULL, "日本語です", 1);
    check_stop("ab</think>cd", "</think>", NULL, "ab", 1);
    check_holdback();
}

int main(void) {
    test_reasoning();
    test_stop();
    return TEST_DONE("test_reasoning");
}
