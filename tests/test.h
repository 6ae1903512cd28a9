/*
 * test.h - the tiny test harness: CHECK counts assertions, each failure prints
 * file:line and a message, TEST_DONE prints "name: P passed, F failed" and
 * returns the exit code. scripts/run-tests.sh adds the counts up.
 */
#ifndef R1_TEST_H
#define R1_TEST_H
#include <stdio.h>

static int test_passed, test_failed;

#define CHECK(cond, ...)                                                                                               \
    do {                                                                                                               \
        if (cond) {                                                                                                    \
            test_passed++;                                                                                             \
        } else {                                                                                                       \
            test_failed++;                                                                                             \
            fprintf(stderr, "FAIL %s:%d: ", __FILE__, __LINE__);                                                       \
            fprintf(stderr, __VA_ARGS__);                                                                              \
            fputc('\n', stderr);                                                                                       \
        }                                                                                                              \
    } while (0)

#define TEST_DONE(name) (printf("%s: %d passed, %d failed\n", name, test_passed, test_failed), test_failed ? 1 : 0)

#endif
