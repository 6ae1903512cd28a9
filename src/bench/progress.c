/*
 * progress.c - the bench status line: rewritten in place with \r on stderr
 * while a terminal is attached, silent otherwise (logs and pipes stay clean).
 */
#include <stdarg.h>
#include <stdio.h>
#include <unistd.h>

#include "bench/bench.h"

static int shown;

void bench_progress(const char *fmt, ...) {
    if (!isatty(2)) return;
    char line[160];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(line, sizeof line, fmt, ap);
    va_end(ap);
    fprintf(stderr, "\r\033[K[bench] %s", line);
    fflush(stderr);
    shown = 1;
}

void bench_progress_done(void) {
    if (!shown) return;
    fputs("\r\033[K", stderr);
    fflush(stderr);
    shown = 0;
}
