/*
 * cmd_tokenize.c - `r1infer tokenize`: encode text to ids, decode ids to
 * text, one-shot or as JSON lines, and an encoding benchmark (MB/s).
 * Only argument handling and I/O here; the tokenizer lives in src/tokenizer/.
 */
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"
#include "cli/opts.h"
#include "r1infer.h"
#include "util/util.h"

static void usage(FILE *f) {
    fprintf(f, "usage: r1infer tokenize [-m MODEL] [options] [TEXT | IDS]\n"
               "  MODEL is a directory with tokenizer.json (+ tokenizer_config.json) or a .gguf file;\n"
               "  without -m: $R1INFER_MODEL, else the default model in models/ (only its tokenizer is read).\n"
               "  r1infer tokenize -m DIR \"text\"         print the ids as a JSON array\n"
               "  r1infer tokenize -m DIR < file.txt     encode all of stdin\n"
               "  r1infer tokenize -m DIR --decode \"[1,2,3]\"   print the text of ids\n"
               "  r1infer tokenize -m DIR --jsonl < in > out\n"
               "        each input line a JSON string -> each output line a JSON array of ids\n"
               "  r1infer tokenize -m DIR --jsonl --decode < in > out\n"
               "        each input line a JSON array of ids -> each output line a JSON string\n"
               "  r1infer tokenize -m DIR --bench FILE   encoding speed in MB/s\n"
               "options:\n"
               "  --special        add the post-processor's special tokens (BOS) when encoding\n"
               "  --skip-special   leave special tokens out when decoding\n"
               "  --chat           encode TEXT as one user turn through the chat template\n"
               "  -h, --help       this text\n");
}

static void print_ids(FILE *f, const int32_t *ids, int n) {
    fputc('[', f);
    for (int i = 0; i < n; i++) fprintf(f, i ? ",%d" : "%d", (int)ids[i]);
    fputs("]\n", f);
}

/* JSON string of arbitrary bytes: invalid UTF-8 becomes U+FFFD. */
static void print_json_string(FILE *f, const char *s, size_t n) {
    const uint8_t *p = (const uint8_t *)s;
    fputc('"', f);
    for (size_t i = 0; i < n;) {
        uint8_t c = p[i];
        if (c < 0x80) {
            if (c == '"' || c == '\\') fprintf(f, "\\%c", c);
            else if (c == '\n') fputs("\\n", f);
            else if (c == '\r') fputs("\\r", f);
            else if (c == '\t') fputs("\\t", f);
            else if (c < 0x20 || c == 0x7f) fprintf(f, "\\u%04x", c);
            else fputc(c, f);
            i++;
            continue;
        }
        int k = c >= 0xC2 && c < 0xE0 ? 2 : c >= 0xE0 && c < 0xF0 ? 3 : c >= 0xF0 && c < 0xF5 ? 4 : 0;
        int ok = k && i + (size_t)k <= n;
        for (int j = 1; ok && j < k; j++) ok = (p[i + j] & 0xC0) == 0x80;
        if (ok && k >= 3) {
            ok = !(c == 0xE0 && p[i + 1] < 0xA0) && !(c == 0xED && p[i + 1] >= 0xA0) &&
                 !(c == 0xF0 && p[i + 1] < 0x90) && !(c == 0xF4 && p[i + 1] >= 0x90);
        }
        if (ok) {
            fwrite(p + i, 1, (size_t)k, f);
            i += (size_t)k;
        } else {
            fputs("\\ufffd", f);
            i++;
        }
    }
    fputs("\"\n", f);
}

/* Integers in s ("[1,2,3]" or "1 2 3"); returns the count or -1. */
static long parse_ids(const char *s, int32_t **out) {
    size_t cap = 16, n = 0;
    int32_t *v = malloc(cap * sizeof *v);
    while (v && *s) {
        if (*s == '-' || (*s >= '0' && *s <= '9')) {
            char *end;
            long x = strtol(s, &end, 10);
            if (end == s || x < 0 || x > INT32_MAX) {
                free(v);
                return -1;
            }
            if (n == cap) {
                int32_t *q = realloc(v, (cap *= 2) * sizeof *v);
                if (!q) break;
                v = q;
            }
            v[n++] = (int32_t)x;
            s = end;
        } else if (strchr("[], \t\r\n", *s)) {
            s++;
        } else {
            free(v);
            return -1;
        }
    }
    *out = v;
    return v ? (long)n : -1;
}

static char *read_all(FILE *f, size_t *len) {
    size_t cap = 1 << 16, n = 0;
    char *buf = malloc(cap);
    while (buf) {
        n += fread(buf + n, 1, cap - n - 1, f);
        if (n + 1 < cap) break;
        char *q = realloc(buf, cap *= 2);
        if (!q) {
            free(buf);
            return NULL;
        }
        buf = q;
    }
    if (buf) buf[n] = 0;
    *len = n;
    return buf;
}

static int jsonl(r1_tokenizer_t *t, int decode, int special, int skip) {
    char *line = NULL;
    size_t cap = 0;
    long lineno = 0;
    int rc = 0;
    while (getline(&line, &cap, stdin) > 0) {
        lineno++;
        json_error_t e;
        json_t *j = json_loads(line, JSON_DECODE_ANY, &e);
        if (!j || (decode ? !json_is_array(j) : !json_is_string(j))) {
            fprintf(stderr, "r1infer tokenize: stdin line %ld: expected a JSON %s\n", lineno,
                    decode ? "array of ids" : "string");
            json_decref(j);
            rc = 1;
            break;
        }
        if (decode) {
            size_t n = json_array_size(j), i;
            int32_t *ids = malloc((n + 1) * sizeof *ids);
            json_t *v;
            int bad = 0;
            json_array_foreach(j, i, v) {
                if (!json_is_integer(v) || json_integer_value(v) < 0 || json_integer_value(v) > INT32_MAX) bad = 1;
                else ids[i] = (int32_t)json_integer_value(v);
            }
            char *text = NULL;
            long k = bad ? r1_err("not an id") : r1_tokenizer_decode(t, ids, n, skip, &text);
            free(ids);
            if (k < 0) {
                fprintf(stderr, "r1infer tokenize: stdin line %ld: %s\n", lineno, r1_last_error());
                json_decref(j);
                rc = 1;
                break;
            }
            print_json_string(stdout, text, (size_t)k);
            free(text);
        } else {
            int32_t *ids;
            int n = r1_tokenizer_encode(t, json_string_value(j), json_string_length(j), special, &ids);
            if (n < 0) {
                fprintf(stderr, "r1infer tokenize: stdin line %ld: %s\n", lineno, r1_last_error());
                json_decref(j);
                rc = 1;
                break;
            }
            print_ids(stdout, ids, n);
            free(ids);
        }
        json_decref(j);
    }
    free(line);
    return rc;
}

static int bench(r1_tokenizer_t *t, const char *path) {
    size_t len;
    char *text = r1_file_read(path, &len);
    if (!text) {
        fprintf(stderr, "r1infer tokenize: %s\n", r1_last_error());
        return 1;
    }
    if (len == 0) {
        fprintf(stderr, "r1infer tokenize: %s is empty\n", path);
        free(text);
        return 1;
    }
    int32_t *ids;
    double t0 = r1_now();
    int n = r1_tokenizer_encode(t, text, len, 0, &ids); /* cold piece cache */
    double cold = r1_now() - t0;
    free(ids);
    int reps = 0;
    t0 = r1_now();
    double el;
    do {
        n = r1_tokenizer_encode(t, text, len, 0, &ids);
        free(ids);
        reps++;
    } while ((el = r1_now() - t0) < 1.0 && n >= 0);
    if (n < 0) {
        fprintf(stderr, "r1infer tokenize: %s\n", r1_last_error());
        free(text);
        return 1;
    }
    double mb = (double)len / 1e6;
    printf("bench: %s: %.3f MB, %d tokens (%.2f bytes/token)\n", path, mb, n, (double)len / n);
    printf("encode, first pass (cold cache): %.1f MB/s\n", mb / cold);
    printf("encode, %d passes (warm cache):  %.1f MB/s, %.0f tokens/s\n", reps, mb * reps / el, (double)n * reps / el);
    free(text);
    return 0;
}

int cmd_tokenize(int argc, char **argv) {
    const char *model = NULL, *bench_file = NULL, *arg = NULL;
    int decode = 0, use_jsonl = 0, special = 0, skip = 0, chat = 0;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
            usage(stdout);
            return 0;
        } else if ((!strcmp(a, "-m") || !strcmp(a, "--model")) && i + 1 < argc) {
            model = argv[++i];
        } else if (!strcmp(a, "--bench") && i + 1 < argc) {
            bench_file = argv[++i];
        } else if (!strcmp(a, "--decode")) {
            decode = 1;
        } else if (!strcmp(a, "--jsonl")) {
            use_jsonl = 1;
        } else if (!strcmp(a, "--special")) {
            special = 1;
        } else if (!strcmp(a, "--skip-special")) {
            skip = 1;
        } else if (!strcmp(a, "--chat")) {
            chat = 1;
        } else if ((!strcmp(a, "-m") || !strcmp(a, "--model") || !strcmp(a, "--bench")) && i + 1 == argc) {
            fprintf(stderr, "r1infer tokenize: %s needs a value\n", a);
            return 2;
        } else if (a[0] == '-' && a[1] && !arg) {
            static const char *const flags[] = {"-m",        "--model",        "--bench", "--decode", "--jsonl",
                                                "--special", "--skip-special", "--chat",  "--help",   NULL};
            return cli_unknown("tokenize", a, flags, 0);
        } else if (!arg) {
            arg = a;
        } else {
            fprintf(stderr, "r1infer tokenize: one TEXT argument only (quote it)\n");
            return 2;
        }
    }
    if (!model && !(model = cli_default_model("tokenize"))) return 2;
    r1_tokenizer_t *t = r1_tokenizer_load(model);
    if (!t) {
        fprintf(stderr, "r1infer tokenize: %s\n", r1_last_error());
        return 1;
    }
    int rc = 0;
    if (bench_file) {
        rc = bench(t, bench_file);
    } else if (use_jsonl) {
        rc = jsonl(t, decode, special, skip);
    } else if (decode) {
        size_t len = 0;
        char *in = arg ? strdup(arg) : read_all(stdin, &len);
        int32_t *ids = NULL;
        long n = in ? parse_ids(in, &ids) : -1;
        char *text = NULL;
        long k = n < 0 ? r1_err("expected ids like [1,2,3]") : r1_tokenizer_decode(t, ids, (size_t)n, skip, &text);
        if (k < 0) {
            fprintf(stderr, "r1infer tokenize: %s\n", r1_last_error());
            rc = 1;
        } else {
            fwrite(text, 1, (size_t)k, stdout);
            fputc('\n', stdout);
        }
        free(text);
        free(ids);
        free(in);
    } else {
        size_t len = 0;
        char *in = arg ? strdup(arg) : read_all(stdin, &len);
        if (in && arg) len = strlen(in);
        if (in && chat) {
            struct r1_chat_msg m = {"user", in};
            char *s = r1_chat_apply(t, &m, 1, 1);
            free(in);
            in = s;
            len = s ? strlen(s) : 0;
        }
        int32_t *ids = NULL;
        int n = in ? r1_tokenizer_encode(t, in, len, special, &ids) : -1;
        if (n < 0) {
            fprintf(stderr, "r1infer tokenize: %s\n", in ? r1_last_error() : "cannot read the text");
            rc = 1;
        } else {
            print_ids(stdout, ids, n);
        }
        free(ids);
        free(in);
    }
    r1_tokenizer_free(t);
    return rc;
}
