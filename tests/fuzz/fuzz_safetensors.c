/*
 * fuzz_safetensors.c - libFuzzer target for the safetensors header parser:
 * any byte string must parse or be rejected with an error, never crash or
 * read out of bounds.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "model/safetensors.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    /* copy so the parser's reads past the end are caught by ASan */
    uint8_t *buf = malloc(size ? size : 1);
    if (!buf) return 0;
    memcpy(buf, data, size);
    struct r1_st st;
    if (r1_st_parse(&st, buf, size, "fuzz") == 0) {
        volatile uint8_t sink = 0;
        for (int i = 0; i < st.n; i++)
            if (st.tensors[i].size) sink ^= st.tensors[i].data[st.tensors[i].size - 1];
        (void)sink;
        r1_st_free(&st);
    }
    free(buf);
    return 0;
}
