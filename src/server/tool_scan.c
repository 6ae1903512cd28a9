/*
 * tool_scan.c - a streamed answer's tool calls read as they are written
 * (see tool_scan.h). The form read as it streams is the one the templates
 * ask for and the tool grammar writes:
 *   <tool_call> {"name": "NAME", "arguments": {...}} </tool_call>
 * (white space allowed between the parts, "parameters" for "arguments").
 * Anything else from a "<tool_call>" on (another key order, arguments as a
 * string, a name with escapes) is handed over whole at the end
 * (TOOL_EV_REST), as the non-streaming answer reads it.
 */
#include "server/tool_scan.h"

#include <string.h>

enum { TS_SEEK, TS_HEAD, TS_ARGS, TS_TAIL, TS_REST, TS_DONE };

static const char OPEN[] = "<tool_call>", CLOSE[] = "</tool_call>";

void tool_scan_init(struct tool_scan *t, int max_calls) {
    memset(t, 0, sizeof *t);
    t->max_calls = max_calls < 1 ? 1 : max_calls;
}

static int is_ws(char c) { return c == ' ' || c == '\n' || c == '\t' || c == '\r'; }

/* Whether s[0..n) begins with lit (1), is a prefix of it (0: more text
 * decides), or neither (-1). */
static int starts(const char *s, size_t n, const char *lit) {
    size_t k = strlen(lit);
    if (n >= k) return memcmp(s, lit, k) ? -1 : 1;
    return memcmp(s, lit, n) ? -1 : 0;
}

/* The head of a call after "<tool_call>": ws { ws "name" ws : ws "NAME" ws ,
 * ws "arguments" ws : ws, up to the arguments' first byte. 1: read (*name,
 * *name_n; *used bytes), 0: more text needed, -1: not this form. */
static int head(const char *s, size_t n, const char **name, size_t *name_n, size_t *used) {
    static const char *const parts[] = {"{", "\"name\"", ":", NULL, ",", "\"arguments\"", ":"};
    size_t i = 0;
    for (int k = 0; k < 7; k++) {
        while (i < n && is_ws(s[i])) i++;
        if (i == n) return 0;
        if (!parts[k]) { /* the name: a JSON string without escapes */
            if (s[i] != '"') return -1;
            size_t e = i + 1;
            while (e < n && s[e] != '"' && s[e] != '\\' && (unsigned char)s[e] >= 0x20) e++;
            if (e == n) return 0;
            if (s[e] != '"' || e == i + 1) return -1;
            *name = s + i + 1, *name_n = e - i - 1;
            i = e + 1;
            continue;
        }
        int r = starts(s + i, n - i, parts[k]);
        if (r < 0 && k == 5) r = starts(s + i, n - i, "\"parameters\"");
        if (r <= 0) return r;
        i += k == 5 && s[i + 1] == 'p' ? strlen("\"parameters\"") : strlen(parts[k]);
    }
    while (i < n && is_ws(s[i])) i++;
    if (i == n) return 0;
    if (s[i] != '{') return -1;
    *used = i;
    return 1;
}

struct tool_ev tool_scan_next(struct tool_scan *t, const char *text, size_t len, int final) {
    struct tool_ev ev = {TOOL_EV_NONE, t->calls, NULL, 0};
    for (;;) {
        const char *s = text + t->pos;
        size_t n = len - t->pos;
        switch (t->state) {
        case TS_SEEK: { /* white space, text outside the calls (sent without the white space at its
                         * ends), or the next call */
            size_t i = 0;
            if (!t->in_text)
                while (i < n && is_ws(s[i])) i++;
            const char *o = memmem(s + i, n - i, OPEN, sizeof OPEN - 1);
            size_t upto = o ? (size_t)(o - s) : n;
            if (!o && !final) /* a "<tool_call>" may be arriving: hold back its possible start */
                for (size_t k = n > sizeof OPEN - 1 ? n - (sizeof OPEN - 2) : i; k < n; k++)
                    if (!memcmp(s + k, OPEN, n - k)) {
                        upto = k;
                        break;
                    }
            size_t end = upto; /* white space before a call, or not followed by text yet, waits */
            while (end > i && is_ws(s[end - 1])) end--;
            if (end > i && t->calls < t->max_calls) {
                ev.kind = TOOL_EV_CONTENT, ev.p = s + i, ev.n = end - i;
                t->pos += end;
                t->in_text = 1;
                return ev;
            }
            if (!o) { /* after the last call taken, or white space: nothing to send */
                t->pos += t->calls >= t->max_calls || final ? n : i;
                return ev;
            }
            if (t->calls >= t->max_calls) {
                t->state = TS_DONE;
                continue;
            }
            t->call_at = t->pos + upto;
            t->pos += upto + sizeof OPEN - 1;
            t->state = TS_HEAD;
            t->in_text = 0;
            continue;
        }
        case TS_HEAD: {
            const char *name = NULL;
            size_t name_n = 0, used = 0;
            int r = head(s, n, &name, &name_n, &used);
            if (r == 0 && !final) return ev;
            if (r <= 0) {
                t->state = TS_REST;
                continue;
            }
            ev.kind = TOOL_EV_HEAD, ev.index = t->calls++, ev.p = name, ev.n = name_n;
            t->pos += used;
            t->state = TS_ARGS, t->depth = 0, t->in_str = 0, t->esc = 0;
            return ev;
        }
        case TS_ARGS: { /* the object's text up to its closing brace, as it comes */
            size_t i = 0;
            for (; i < n; i++) {
                const char c = s[i];
                if (t->in_str) {
                    if (t->esc) t->esc = 0;
                    else if (c == '\\') t->esc = 1;
                    else if (c == '"') t->in_str = 0;
                } else if (c == '"') t->in_str = 1;
                else if (c == '{' || c == '[') t->depth++;
                else if ((c == '}' || c == ']') && --t->depth == 0) {
                    i++;
                    t->state = TS_TAIL;
                    break;
                }
            }
            if (!i) return ev;
            ev.kind = TOOL_EV_ARGS, ev.index = t->calls - 1, ev.p = s, ev.n = i;
            t->pos += i;
            return ev;
        }
        case TS_TAIL: { /* ws } ws </tool_call> */
            size_t i = 0;
            while (i < n && is_ws(s[i])) i++;
            if (i < n && s[i] == '}') i++;
            while (i < n && is_ws(s[i])) i++;
            int r = starts(s + i, n - i, CLOSE);
            if (r == 0 && !final) return ev;
            t->pos += r > 0 ? i + sizeof CLOSE - 1 : i;
            t->state = TS_SEEK;
            continue;
        }
        case TS_REST:
            if (!final) return ev;
            ev.kind = TOOL_EV_REST, ev.index = t->calls, ev.p = text + t->call_at, ev.n = len - t->call_at;
            t->state = TS_DONE;
            return ev;
        default:
            t->pos = len;
            return ev;
        }
    }
}
