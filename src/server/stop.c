/*
 * stop.c - stop-string matcher with hold-back; see stop.h. Must not assume
 * that pieces end on stop-string or UTF-8 boundaries.
 */
#include "server/stop.h"

#include <string.h>

void stop_init(struct stop_match *m, char *const *stops, int n) {
    memset(m, 0, sizeof *m);
    m->stops = stops;
    m->n = n;
}

void stop_free(struct stop_match *m) { sbuf_free(&m->hold); }

/* Length of the longest proper prefix of some stop string that ends buf. */
static size_t held_tail(const struct stop_match *m, const char *buf, size_t len) {
    size_t best = 0;
    for (int i = 0; i < m->n; i++) {
        size_t sl = strlen(m->stops[i]);
        size_t k = sl - 1 < len ? sl - 1 : len;
        for (; k > best; k--)
            if (!memcmp(buf + len - k, m->stops[i], k)) {
                best = k;
                break;
            }
    }
    return best;
}

int stop_feed(struct stop_match *m, const char *text, size_t n, struct sbuf *out) {
    if (m->hit) return 1;
    if (m->n == 0) {
        sbuf_add(out, text, n);
        return 0;
    }
    sbuf_add(&m->hold, text, n);
    const char *b = m->hold.p;
    size_t len = m->hold.len;
    if (!b) return 0;
    /* the earliest match of any stop string wins */
    const char *first = NULL;
    for (int i = 0; i < m->n; i++) {
        const char *p = memmem(b, len, m->stops[i], strlen(m->stops[i]));
        if (p && (!first || p < first)) first = p;
    }
    if (first) {
        sbuf_add(out, b, (size_t)(first - b));
        sbuf_clear(&m->hold);
        m->hit = 1;
        return 1;
    }
    size_t keep = held_tail(m, b, len);
    sbuf_add(out, b, len - keep);
    sbuf_consume(&m->hold, len - keep);
    return 0;
}

void stop_flush(struct stop_match *m, struct sbuf *out) {
    if (!m->hit && m->hold.len) sbuf_add(out, m->hold.p, m->hold.len);
    sbuf_clear(&m->hold);
}
