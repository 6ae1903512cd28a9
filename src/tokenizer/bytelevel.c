/*
 * bytelevel.c - the GPT-2 byte-level alphabet: every byte is written as one
 * printable code point in vocab strings (printable Latin-1 as itself, the rest
 * shifted to U+0100..). Pure tables, no state.
 */
#include <pthread.h>

#include "tokenizer/tokenizer_internal.h"

static int printable(int b) { return (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF); }

static uint16_t byte_char[256];     /* byte -> code point */
static int16_t char_byte[256 + 68]; /* code point -> byte, -1 if none */
static pthread_once_t tables_once = PTHREAD_ONCE_INIT;

static void tables_init(void) {
    int n = 0;
    for (int i = 0; i < 256 + 68; i++) char_byte[i] = -1;
    for (int b = 0; b < 256; b++) {
        uint16_t cp = printable(b) ? (uint16_t)b : (uint16_t)(256 + n++);
        byte_char[b] = cp;
        char_byte[cp] = (int16_t)b;
    }
}

uint32_t r1_bytelevel_char(uint8_t b) {
    pthread_once(&tables_once, tables_init);
    return byte_char[b];
}

int r1_bytelevel_byte(uint32_t cp) {
    pthread_once(&tables_once, tables_init);
    return cp < 256 + 68 ? char_byte[cp] : -1;
}

long r1_bytelevel_decode(const char *s, size_t len, uint8_t *out) {
    const uint8_t *p = (const uint8_t *)s;
    size_t i = 0;
    long n = 0;
    while (i < len) {
        uint32_t cp;
        if (p[i] < 0x80) {
            cp = p[i++];
        } else if ((p[i] & 0xE0) == 0xC0 && i + 1 < len && (p[i + 1] & 0xC0) == 0x80) {
            cp = ((uint32_t)(p[i] & 0x1F) << 6) | (p[i + 1] & 0x3F);
            i += 2;
        } else {
            return -1; /* the alphabet lies below U+0800 */
        }
        int b = r1_bytelevel_byte(cp);
        if (b < 0) return -1;
        out[n++] = (uint8_t)b;
    }
    return n;
}
