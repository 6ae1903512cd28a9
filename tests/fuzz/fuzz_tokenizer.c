/*
 * fuzz_tokenizer.c - libFuzzer target for the tokenizer. Built by
 * scripts/fuzz.sh; run from the repository root (the real tokenizer is read
 * from data/tokenizers/deepseek-r1-distill-qwen, or $R1_FUZZ_TOKENIZER).
 *   input starting with '{': written as tokenizer.json of a temp directory and
 *                            loaded (the parser must fail cleanly or load)
 *   anything else:           encoded; decode must give the bytes back when NFC
 *                            cannot change them; the stream must add up.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "r1infer.h"

static r1_tokenizer_t *tok;
static char tmpdir[] = "/tmp/r1fuzz.XXXXXX";

int LLVMFuzzerInitialize(int *argc, char ***argv) {
    (void)argc;
    (void)argv;
    const char *dir = getenv("R1_FUZZ_TOKENIZER");
    tok = r1_tokenizer_load(dir ? dir : "data/tokenizers/deepseek-r1-distill-qwen");
    if (!tok) {
        fprintf(stderr, "fuzz_tokenizer: %s (run from the repository root)\n", r1_last_error());
        abort();
    }
    if (!mkdtemp(tmpdir)) abort();
    return 0;
}

static void fuzz_json(const uint8_t *data, size_t size) {
    char path[64];
    snprintf(path, sizeof path, "%s/tokenizer.json", tmpdir);
    FILE *f = fopen(path, "wb");
    if (!f) return;
    fwrite(data, 1, size, f);
    fclose(f);
    r1_tokenizer_t *t = r1_tokenizer_load(tmpdir);
    if (t) {
        int32_t *ids;
        int n = r1_tokenizer_encode(t, "Hello, world! 123 \xff", 19, 1, &ids);
        if (n >= 0) {
            char *s;
            if (r1_tokenizer_decode(t, ids, (size_t)n, 1, &s) >= 0) free(s);
            free(ids);
        }
        r1_tokenizer_free(t);
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size > 0 && data[0] == '{') {
        fuzz_json(data, size);
        return 0;
    }
    int32_t *ids;
    int n = r1_tokenizer_encode(tok, (const char *)data, size, 0, &ids);
    if (n < 0) abort(); /* any bytes must encode */
    char *out;
    long k = r1_tokenizer_decode(tok, ids, (size_t)n, 0, &out);
    if (k < 0) abort();
    int stable = 1; /* below U+0300 NFC changes nothing */
    for (size_t i = 0; i < size; i++) stable &= data[i] < 0xCC;
    if (stable && ((size_t)k != size || memcmp(out, data, size))) abort();
    if (!memchr(out, 0, (size_t)k)) {
        r1_detok_t *d = r1_detok_new(tok, 0);
        size_t at = 0;
        for (int i = 0; i <= n; i++) {
            const char *p = i < n ? r1_detok_push(d, ids[i]) : r1_detok_flush(d);
            size_t m = strlen(p);
            if (at + m > (size_t)k || memcmp(out + at, p, m)) abort();
            at += m;
        }
        if (at != (size_t)k) abort();
        r1_detok_free(d);
    }
    free(out);
    free(ids);
    return 0;
}
