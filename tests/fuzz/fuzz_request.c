/*
 * fuzz_request.c - libFuzzer target of the server's request parser and
 * validator (src/server/request.c, with response_format, grammars, logit_bias
 * and tools: structured.c, tools.c and the grammar compiler), plus the streamed-text pipeline that
 * sees model output (stop strings, <think> split). Build and run:
 *
 *   clang -g -O1 -fsanitize=fuzzer,address,undefined -Iinclude -Isrc -D_GNU_SOURCE \
 *     tests/fuzz/fuzz_request.c src/server/{request,structured,tools,stop,reasoning}.c src/grammar/*.c \
 *     build/libr1infer.a -ljansson -lpcre2-8 -lutf8proc -lm -o build-fuzz/fuzz_request
 *   (or scripts/fuzz.sh, which builds the whole library)
 *   build-fuzz/fuzz_request -max_total_time=60 -max_len=4096
 *
 * Invariants checked beyond "no crash, no leak": a rejected request carries
 * a 4xx/5xx status and a message; the text pipeline never emits more bytes
 * than it was fed, and what the stop matcher releases is a prefix of its input.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "server/reasoning.h"
#include "server/request.h"
#include "server/stop.h"

static void text_pipeline(const uint8_t *data, size_t size) {
    if (size < 2) return;
    /* byte 0: piece length and in_think; then up to 2 stop strings split at the first two NULs */
    size_t step = (data[0] & 7) + 1;
    int in_think = data[0] >> 7;
    const char *p = (const char *)data + 1, *end = (const char *)data + size;
    char *stops[2] = {0};
    int n_stops = 0;
    for (int k = 0; k < 2; k++) {
        const char *z = memchr(p, 0, (size_t)(end - p));
        if (!z) break;
        if (z > p && z - p <= 16) {
            stops[n_stops] = malloc((size_t)(z - p) + 1);
            memcpy(stops[n_stops], p, (size_t)(z - p));
            stops[n_stops][z - p] = 0;
            n_stops++;
        }
        p = z + 1;
    }
    size_t n = (size_t)(end - p);
    struct stop_match m;
    struct reasoning r;
    struct sbuf rel = {0}, think = {0}, answer = {0};
    stop_init(&m, stops, n_stops);
    reasoning_init(&r, in_think);
    int hit = 0;
    for (size_t i = 0; i < n && !hit; i += step) {
        size_t len = i + step <= n ? step : n - i;
        size_t before = rel.len;
        hit = stop_feed(&m, p + i, len, &rel);
        reasoning_feed(&r, rel.p + before, rel.len - before, &think, &answer);
    }
    if (!hit) {
        size_t before = rel.len;
        stop_flush(&m, &rel);
        reasoning_feed(&r, rel.p ? rel.p + before : "", rel.len - before, &think, &answer);
    }
    reasoning_finish(&r, &think, &answer);
    if (rel.len > n || (rel.len && memcmp(rel.p, p, rel.len))) abort();
    if (think.len + answer.len > rel.len) abort();
    stop_free(&m);
    reasoning_free(&r);
    sbuf_free(&rel);
    sbuf_free(&think);
    sbuf_free(&answer);
    for (int k = 0; k < n_stops; k++) free(stops[k]);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    struct r1_sampler_params defaults;
    memset(&defaults, 0, sizeof defaults);
    defaults.temperature = 0.6f;
    defaults.top_p = 0.95f;
    defaults.repeat_penalty = 1.0f;
    for (int kind = REQ_CHAT; kind <= REQ_COMPLETION; kind++) {
        struct gen_request r;
        struct api_error e;
        if (req_parse((const char *)data, size, (enum req_kind)kind, &defaults, &r, &e) == 0) {
            for (int i = 0; i < r.n_stops; i++)
                if (!r.stops[i][0]) abort();
            req_free(&r);
        } else if (e.status < 400 || e.status > 599 || !e.message[0]) {
            abort();
        }
    }
    text_pipeline(data, size);
    return 0;
}
