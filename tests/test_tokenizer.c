/*
 * test_tokenizer.c - the tokenizer against the oracle: every encode vector in
 * data/tokenizers/deepseek-r1-distill-qwen/encode-vectors.jsonl must give the
 * exact ids; decode(encode(x)) must give NFC(x); the streaming decoder must
 * add up to the batch decode; invalid UTF-8 must encode and round-trip bytes;
 * broken tokenizer.json files must give errors that name the file.
 * tests/fixtures/tok_llama3 (tools/make_tokenizer_fixtures.py: a Llama-3-style
 * tokenizer.json made with Hugging Face tokenizers: Llama 3's split regex,
 * ignore_merges, BOS from the post-processor, the R1 distill's specials) must
 * give Hugging Face's ids, from its tokenizer.json and from a GGUF written
 * from it (tokenizer.ggml.pre = llama-bpe).
 * Run from the repository root.
 */
#include <jansson.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <utf8proc.h>

#include "r1infer.h"
#include "test.h"
#include "gguf/gguf.h"
#include "tokenizer/gguf_tok.h"
#include "tokenizer/tokenizer_internal.h"
#include "util/util.h"

#define DIR "data/tokenizers/deepseek-r1-distill-qwen"

/* decode(ids) through the streaming decoder, one id at a time */
static char *stream_decode(const r1_tokenizer_t *t, const int32_t *ids, int n, int skip) {
    r1_detok_t *d = r1_detok_new(t, skip);
    size_t cap = 64, len = 0;
    char *s = malloc(cap);
    s[0] = 0;
    for (int i = 0; i <= n; i++) {
        const char *p = i < n ? r1_detok_push(d, ids[i]) : r1_detok_flush(d);
        if (!p) {
            free(s);
            r1_detok_free(d);
            return NULL;
        }
        size_t k = strlen(p);
        while (len + k + 1 > cap) s = realloc(s, cap *= 2);
        memcpy(s + len, p, k + 1);
        len += k;
    }
    r1_detok_free(d);
    return s;
}

static void print_ids(const char *what, const int32_t *v, int n, int around) {
    fprintf(stderr, "  %s (%d ids):", what, n);
    int lo = around > 4 ? around - 4 : 0;
    for (int i = lo; i < n && i < around + 6; i++) fprintf(stderr, " %d", v[i]);
    fprintf(stderr, "%s\n", around + 6 < n ? " ..." : "");
}

static void test_vectors(const r1_tokenizer_t *t) {
    FILE *f = fopen(DIR "/encode-vectors.jsonl", "r");
    CHECK(f != NULL, "cannot open %s/encode-vectors.jsonl", DIR);
    if (!f) return;
    char *line = NULL;
    size_t cap = 0;
    int nvec = 0, exact = 0, shown = 0;
    while (getline(&line, &cap, f) > 0) {
        json_error_t err;
        json_t *j = json_loads(line, 0, &err);
        if (!j) continue;
        nvec++;
        json_t *jt = json_object_get(j, "text"), *jids = json_object_get(j, "ids");
        const char *text = json_string_value(jt);
        size_t tlen = json_string_length(jt);
        int roundtrip = json_is_true(json_object_get(j, "roundtrip"));
        int ne = (int)json_array_size(jids);
        int32_t *ids;
        int n = r1_tokenizer_encode(t, text, tlen, 0, &ids);
        int first = -1;
        for (int i = 0; i < (n > ne ? n : ne); i++) {
            if (i >= n || i >= ne || ids[i] != json_integer_value(json_array_get(jids, i))) {
                first = i;
                break;
            }
        }
        CHECK(first < 0, "vector %d: ids differ at index %d (got %d ids, expected %d)", nvec, first, n, ne);
        if (first >= 0 && shown++ < 3) {
            char *js = json_dumps(jt, JSON_ENCODE_ANY);
            fprintf(stderr, "  text: %s\n", js);
            free(js);
            print_ids("got", ids, n, first);
            int32_t *e = malloc(sizeof(int32_t) * (ne + 1));
            for (int i = 0; i < ne; i++) e[i] = (int32_t)json_integer_value(json_array_get(jids, i));
            print_ids("expected", e, ne, first);
            free(e);
        }
        if (first < 0) exact++;
        /* decode(encode(x)) == NFC(x), and == x when the vector says it round-trips */
        char *dec = NULL;
        long dn = r1_tokenizer_decode(t, ids, (size_t)(n > 0 ? n : 0), 0, &dec);
        char *nfc = (char *)utf8proc_NFC((const utf8proc_uint8_t *)text);
        CHECK(dn >= 0 && nfc && (size_t)dn == strlen(nfc) && !memcmp(dec, nfc, (size_t)dn),
              "vector %d: decode(encode(x)) != NFC(x)", nvec);
        if (roundtrip)
            CHECK(dn >= 0 && (size_t)dn == tlen && !memcmp(dec, text, tlen), "vector %d: decode(encode(x)) != x", nvec);
        char *sd = stream_decode(t, ids, n, 0);
        CHECK(sd && dec && !strcmp(sd, dec), "vector %d: streaming decode != batch decode", nvec);
        free(sd);
        free(nfc);
        free(dec);
        free(ids);
        json_decref(j);
    }
    free(line);
    fclose(f);
    CHECK(nvec == 523, "expected 523 vectors, read %d", nvec);
    printf("encode vectors: %d/%d exact\n", exact, nvec);
}

static int roundtrip_bytes(const r1_tokenizer_t *t, const char *s, size_t n) {
    int32_t *ids;
    int k = r1_tokenizer_encode(t, s, n, 0, &ids);
    if (k < 0) return 0;
    char *dec;
    long dn = r1_tokenizer_decode(t, ids, (size_t)k, 0, &dec);
    int ok = dn == (long)n && !memcmp(dec, s, n);
    /* the stream must add up to the same bytes (compare without NULs) */
    if (ok && !memchr(s, 0, n)) {
        char *sd = stream_decode(t, ids, k, 0);
        ok = sd && !strcmp(sd, dec);
        free(sd);
    }
    free(dec);
    free(ids);
    return ok;
}

static void test_invalid_utf8(const r1_tokenizer_t *t) {
    static const char *cases[] = {
        "\xff",
        "\xc3",
        "abc\xe2\x82",
        "\x80\x80\x80",
        "\xed\xa0\x80 surrogate",
        "\xc0\xaf overlong",
        "\xf4\x90\x80\x80 too big",
        "caf\xc3\xa9 \xff\xfe <\xef\xbd\x9cUser\xef\xbd\x9c\xff",
        "e\xcc\x81\xff"
        "e\xcc\x81",
        "\xe4\xbd\xa0\xe5\xa5",
        " \xf0\x9f\x98 \r\n\xf0\x9f\x98\x80",
    };
    int ok = 1;
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        const char *s = cases[i];
        size_t n = strlen(s);
        /* NFC leaves text with invalid bytes alone only where it is already NFC;
         * "e + U+0301" composes, so that case is checked for non-crash only */
        if (strstr(s, "e\xcc\x81")) {
            int32_t *ids;
            int k = r1_tokenizer_encode(t, s, n, 0, &ids);
            CHECK(k > 0, "invalid UTF-8 case %zu does not encode: %s", i, r1_last_error());
            free(ids);
            continue;
        }
        ok = roundtrip_bytes(t, s, n);
        CHECK(ok, "invalid UTF-8 case %zu does not round-trip", i);
    }
    uint64_t x = 88172645463325252ull; /* xorshift: random bytes, fixed seed */
    int bad = 0;
    for (int r = 0; r < 200; r++) {
        char buf[300];
        size_t n = 1 + r % 299;
        for (size_t i = 0; i < n; i++) {
            x ^= x << 13, x ^= x >> 7, x ^= x << 17;
            buf[i] = (char)(x >> 24);
            if ((x >> 8) % 3 == 0) buf[i] &= 0x7f; /* mix in ASCII */
        }
        /* no combining marks: keep the bytes NFC-stable so they must round-trip */
        for (size_t i = 0; i < n; i++)
            if ((uint8_t)buf[i] >= 0xCC && (uint8_t)buf[i] <= 0xCD) buf[i] = 'x';
        bad += !roundtrip_bytes(t, buf, n);
    }
    CHECK(bad == 0, "%d random byte strings did not round-trip", bad);
    /* a long run of spaces and one of newlines: no regex stack trouble */
    size_t big = 1 << 20;
    char *s = malloc(big);
    memset(s, ' ', big);
    CHECK(roundtrip_bytes(t, s, big), "1 MiB of spaces does not round-trip");
    memset(s, '\n', big);
    CHECK(roundtrip_bytes(t, s, big), "1 MiB of newlines does not round-trip");
    for (size_t i = 0; i < big; i++) s[i] = "a\xff"[i & 1];
    CHECK(roundtrip_bytes(t, s, big), "1 MiB of a\\xff does not round-trip");
    free(s);
    int32_t *ids;
    CHECK(r1_tokenizer_encode(t, "", 0, 0, &ids) == 0, "empty text gives ids");
    free(ids);
    CHECK(r1_tokenizer_encode(t, "", 0, 1, &ids) == 1 && ids[0] == 151646, "empty text + special != [bos]");
    free(ids);
}

static void test_specials(const r1_tokenizer_t *t) {
    CHECK(r1_tokenizer_vocab_size(t) == 151665, "vocab size %d", r1_tokenizer_vocab_size(t));
    CHECK(r1_tokenizer_bos(t) == 151646, "bos %d", r1_tokenizer_bos(t));
    CHECK(r1_tokenizer_eos(t) == 151643, "eos %d", r1_tokenizer_eos(t));
    CHECK(r1_tokenizer_token_id(t, "<think>") == 151648, "<think> id");
    CHECK(r1_tokenizer_token_id(t, "\xc4\xa0the") == 279, "\"Gthe\" id %d", r1_tokenizer_token_id(t, "\xc4\xa0the"));
    CHECK(r1_tokenizer_token_id(t, " the") == 279, "\" the\" id");
    CHECK(r1_tokenizer_token_id(t, "no such token ever") == -1, "unknown token id");
    CHECK(r1_tokenizer_is_special(t, 151643) && !r1_tokenizer_is_special(t, 151648) && !r1_tokenizer_is_special(t, 279),
          "is_special");
    const char *s = "<｜User｜>Hi<think>x</think><｜end▁of▁sentence｜>";
    int32_t *ids;
    int n = r1_tokenizer_encode(t, s, strlen(s), 1, &ids);
    CHECK(n == 7 && ids[0] == 151646 && ids[1] == 151644 && ids[3] == 151648 && ids[5] == 151649 && ids[6] == 151643,
          "added tokens in text: n=%d", n);
    char *out;
    long k = r1_tokenizer_decode(t, ids, (size_t)n, 0, &out);
    CHECK(k > 0 && !strcmp(out, "<｜begin▁of▁sentence｜><｜User｜>Hi<think>x</think><｜end▁of▁sentence｜>"),
          "decode with specials: %s", out);
    free(out);
    k = r1_tokenizer_decode(t, ids, (size_t)n, 1, &out);
    CHECK(k > 0 && !strcmp(out, "<｜User｜>Hi<think>x</think>"), "decode skip_special: %s", out);
    free(out);
    int32_t bad = 999999;
    CHECK(r1_tokenizer_decode(t, &bad, 1, 0, &out) == -1, "unknown id decodes");
    free(ids);
    CHECK(!strcmp(r1_chat_template_name(t), "deepseek-r1"), "template %s", r1_chat_template_name(t));
}

static void write_file(const char *dir, const char *name, const char *text) {
    char *p = r1_path_join(dir, name);
    FILE *f = fopen(p, "w");
    fputs(text, f);
    fclose(f);
    free(p);
}

static void expect_error(const char *dir, const char *json, const char *what, const char *needle) {
    write_file(dir, "tokenizer.json", json);
    r1_tokenizer_t *t = r1_tokenizer_load(dir);
    const char *e = r1_last_error();
    CHECK(!t && strstr(e, dir) && strstr(e, "tokenizer.json") && strstr(e, needle),
          "%s: expected an error naming the file and \"%s\", got \"%s\"", what, needle, e);
    r1_tokenizer_free(t);
}

static void test_bad_files(void) {
    char dir[] = "/tmp/r1tok.XXXXXX";
    if (!mkdtemp(dir)) {
        CHECK(0, "mkdtemp failed");
        return;
    }
    r1_tokenizer_t *t = r1_tokenizer_load(dir);
    CHECK(!t && strstr(r1_last_error(), "tokenizer.json"), "missing file: %s", r1_last_error());
    expect_error(dir, "{\"model\": {", "malformed", "malformed JSON");
    expect_error(dir, "[1,2]", "not an object", "not a JSON object");
    expect_error(dir, "{\"model\": {\"type\": \"Unigram\", \"vocab\": []}}", "unknown model", "model.type");
    expect_error(dir, "{}", "no model", "\"model\"");
    expect_error(dir, "{\"model\": {\"type\": \"BPE\", \"vocab\": [], \"merges\": []}}", "vocab array", "model.vocab");
    expect_error(dir, "{\"model\": {\"type\": \"BPE\", \"vocab\": {\"a\": 0, \"b\": 1}, \"merges\": [\"a c\"]}}",
                 "unknown merge token", "unknown token \"c\"");
    expect_error(dir, "{\"model\": {\"type\": \"BPE\", \"vocab\": {\"a\": 0, \"b\": 1}, \"merges\": [\"a b\"]}}",
                 "merge result not in vocab", "not in the vocab");
    expect_error(dir, "{\"model\": {\"type\": \"BPE\", \"vocab\": {\"a\": 0}, \"merges\": [7]}}", "merge type",
                 "model.merges[0]");
    expect_error(dir, "{\"model\": {\"type\": \"BPE\", \"vocab\": {\"a\": -3}, \"merges\": []}}", "bad id",
                 "model.vocab");
    expect_error(
        dir,
        "{\"model\": {\"type\": \"BPE\", \"vocab\": {\"a\": 0}, \"merges\": []},"
        " \"pre_tokenizer\": {\"type\": \"Split\", \"pattern\": {\"Regex\": \"(\"}, \"behavior\": \"Isolated\"}}",
        "bad regex", "regex");
    expect_error(dir,
                 "{\"model\": {\"type\": \"BPE\", \"vocab\": {\"a\": 0}, \"merges\": []},"
                 " \"normalizer\": {\"type\": \"Lowercase\"}}",
                 "unknown normalizer", "normalizer");
    /* a tiny valid byte-level tokenizer: merges in both formats, config as an object */
    write_file(
        dir, "tokenizer.json",
        "{\"model\": {\"type\": \"BPE\", \"vocab\": {\"a\": 0, \"b\": 1, \"ab\": 2, \"\xc4\xa0\": 3, "
        "\"\xc4\xa0"
        "ab\": 4, \"c\": 5}, \"merges\": [\"a b\", [\"\xc4\xa0\", \"ab\"]]},"
        " \"added_tokens\": [{\"id\": 6, \"content\": \"<s>\", \"special\": true}],"
        " \"pre_tokenizer\": {\"type\": \"ByteLevel\", \"add_prefix_space\": false},"
        " \"post_processor\": {\"type\": \"TemplateProcessing\", \"single\": [{\"SpecialToken\": {\"id\": \"<s>\"}},"
        " {\"Sequence\": {\"id\": \"A\"}}], \"special_tokens\": {\"<s>\": {\"ids\": [6]}}},"
        " \"decoder\": {\"type\": \"ByteLevel\"}}");
    write_file(dir, "tokenizer_config.json",
               "{\"bos_token\": {\"content\": \"<s>\"}, \"chat_template\": \"<|im_start|>\"}");
    t = r1_tokenizer_load(dir);
    CHECK(t != NULL, "tiny tokenizer: %s", r1_last_error());
    if (t) {
        int32_t *ids;
        int n = r1_tokenizer_encode(t, "ab abc", 6, 1, &ids);
        CHECK(n == 4 && ids[0] == 6 && ids[1] == 2 && ids[2] == 4 && ids[3] == 5, "tiny encode n=%d", n);
        free(ids);
        CHECK(r1_tokenizer_bos(t) == 6 && !strcmp(r1_chat_template_name(t), "chatml"), "tiny bos/template");
        r1_tokenizer_free(t);
    }
    write_file(dir, "tokenizer_config.json", "{\"bos_token\": ");
    t = r1_tokenizer_load(dir);
    CHECK(!t && strstr(r1_last_error(), "tokenizer_config.json"), "bad config: %s", r1_last_error());
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    CHECK(system(cmd) == 0, "cleanup");
    t = r1_tokenizer_load("/nonexistent/model.gguf");
    CHECK(!t && strstr(r1_last_error(), "/nonexistent/model.gguf"), "a missing .gguf is named: %s", r1_last_error());
}

/* The builder API the GGUF loader will use. */
static void test_builder(void) {
    static char names[256][4];
    const char *toks[260];
    int32_t types[260];
    for (int b = 0; b < 256; b++) {
        uint32_t cp = r1_bytelevel_char((uint8_t)b);
        utf8proc_encode_char((utf8proc_int32_t)cp, (utf8proc_uint8_t *)names[b]);
        toks[b] = names[b];
        types[b] = R1_TOK_TYPE_BYTE;
    }
    toks[256] = "he", types[256] = R1_TOK_TYPE_NORMAL;
    toks[257] = "hel", types[257] = R1_TOK_TYPE_NORMAL;
    toks[258] = "<|x|>", types[258] = R1_TOK_TYPE_CONTROL;
    toks[259] = "\xc4\xa0h", types[259] = R1_TOK_TYPE_NORMAL;
    const char *merges[] = {"h e", "he l", "\xc4\xa0 h"};
    struct r1_tok_spec s = {.tokens = toks,
                            .types = types,
                            .n_tokens = 260,
                            .merges = merges,
                            .n_merges = 3,
                            .bos = 258,
                            .eos = 258,
                            .add_bos = 1,
                            .pre = "qwen2",
                            .chat_template = "<|im_start|>",
                            .source = "builder"};
    r1_tokenizer_t *t = r1_tokenizer_build(&s);
    CHECK(t != NULL, "builder: %s", r1_last_error());
    if (!t) return;
    int32_t *ids;
    int n = r1_tokenizer_encode(t, "hello h<|x|>", 12, 1, &ids);
    CHECK(n == 6 && ids[0] == 258 && ids[1] == 257 && ids[2] == 'l' && ids[3] == 'o' && ids[4] == 259 && ids[5] == 258,
          "builder encode n=%d", n);
    free(ids);
    r1_tokenizer_free(t);
}

/* The CLI (build/r1infer tokenize), when run-tests.sh says where it is. */
static char *run(const char *cmd, int *status) {
    FILE *p = popen(cmd, "r");
    if (!p) return NULL;
    static char buf[4096];
    size_t n = fread(buf, 1, sizeof buf - 1, p);
    buf[n] = 0;
    *status = pclose(p);
    return buf;
}

static void test_cli(void) {
    const char *bin = getenv("R1_BIN");
    if (!bin || access(bin, X_OK) != 0) {
        printf("R1_BIN not set: CLI checks skipped\n");
        return;
    }
    char cmd[1024];
    int st;
    snprintf(cmd, sizeof cmd, "%s tokenize -m " DIR " 'Hello world<think>' 2>&1", bin);
    char *out = run(cmd, &st);
    CHECK(out && st == 0 && !strcmp(out, "[9707,1879,151648]\n"), "cli encode: %s", out);
    snprintf(cmd, sizeof cmd, "%s tokenize -m " DIR " --special --decode '[151646,9707]' 2>&1", bin);
    out = run(cmd, &st);
    CHECK(out && st == 0 && !strcmp(out, "<｜begin▁of▁sentence｜>Hello\n"), "cli decode: %s", out);
    snprintf(cmd, sizeof cmd, "printf '\"a b\"\\n\"\\\\u00e9\"\\n' | %s tokenize -m " DIR " --jsonl 2>&1", bin);
    out = run(cmd, &st);
    CHECK(out && st == 0 && !strcmp(out, "[64,293]\n[963]\n"), "cli jsonl: %s", out);
    snprintf(cmd, sizeof cmd, "printf '[64,293]\\n[963]\\n' | %s tokenize -m " DIR " --jsonl --decode 2>&1", bin);
    out = run(cmd, &st);
    CHECK(out && st == 0 && !strcmp(out, "\"a b\"\n\"é\"\n"), "cli jsonl decode: %s", out);
    snprintf(cmd, sizeof cmd, "%s tokenize -m /nonexistent/dir x 2>&1", bin);
    out = run(cmd, &st);
    CHECK(out && st != 0 && strstr(out, "/nonexistent/dir"), "cli missing model: %s", out);
}

#define LLAMA3_DIR "tests/fixtures/tok_llama3"

/* Every vector of tests/fixtures/tok_llama3: ids without and with BOS, and
 * decode(encode(x)) == x (no normalizer). Returns the exact count. */
static int llama3_vectors(const r1_tokenizer_t *t, const char *what) {
    FILE *f = fopen(LLAMA3_DIR "/encode-vectors.jsonl", "r");
    CHECK(f != NULL, "cannot open %s/encode-vectors.jsonl", LLAMA3_DIR);
    if (!f) return 0;
    char *line = NULL;
    size_t cap = 0;
    int nvec = 0, exact = 0;
    while (getline(&line, &cap, f) > 0) {
        json_error_t err;
        json_t *j = json_loads(line, 0, &err);
        if (!j) continue;
        nvec++;
        json_t *jt = json_object_get(j, "text");
        const char *text = json_string_value(jt);
        size_t tlen = json_string_length(jt);
        int ok = 1;
        for (int sp = 0; sp < 2; sp++) {
            json_t *jids = json_object_get(j, sp ? "ids_special" : "ids");
            int32_t *ids;
            int n = r1_tokenizer_encode(t, text, tlen, sp, &ids);
            int same = n == (int)json_array_size(jids);
            for (int i = 0; same && i < n; i++) same = ids[i] == json_integer_value(json_array_get(jids, (size_t)i));
            CHECK(same, "%s vector %d (%s): ids differ from Hugging Face's", what, nvec, sp ? "with BOS" : "plain");
            ok &= same;
            if (!sp) {
                char *dec = NULL;
                long dn = r1_tokenizer_decode(t, ids, (size_t)(n > 0 ? n : 0), 0, &dec);
                CHECK(dn == (long)tlen && !memcmp(dec, text, tlen), "%s vector %d: decode(encode(x)) != x", what, nvec);
                free(dec);
            }
            free(ids);
        }
        exact += ok;
        json_decref(j);
    }
    free(line);
    fclose(f);
    CHECK(nvec >= 30, "%s: only %d vectors", what, nvec);
    printf("llama3-style tokenizer (%s): %d/%d vectors exact\n", what, exact, nvec);
    return exact;
}

static void test_llama3(void) {
    r1_tokenizer_t *t = r1_tokenizer_load(LLAMA3_DIR);
    CHECK(t != NULL, "load %s: %s", LLAMA3_DIR, r1_last_error());
    if (!t) return;
    llama3_vectors(t, "tokenizer.json");
    /* the R1 distill template with this tokenizer's ids for the specials */
    struct r1_chat_msg m[] = {{"user", "Hi"}};
    char *s = r1_chat_apply(t, m, 1, 1);
    int32_t *ids = NULL;
    int n = s ? r1_tokenizer_encode(t, s, strlen(s), 0, &ids) : -1;
    int bos = r1_tokenizer_token_id(t, "<\xEF\xBD\x9C"
                                       "begin\xE2\x96\x81of\xE2\x96\x81sentence\xEF\xBD\x9C>");
    int user = r1_tokenizer_token_id(t, "<\xEF\xBD\x9CUser\xEF\xBD\x9C>");
    int asst = r1_tokenizer_token_id(t, "<\xEF\xBD\x9C"
                                        "Assistant\xEF\xBD\x9C>");
    int think = r1_tokenizer_token_id(t, "<think>");
    CHECK(n >= 5 && ids[0] == bos && ids[1] == user && ids[n - 3] == asst && ids[n - 2] == think &&
              bos == r1_tokenizer_bos(t),
          "R1 template ids with the llama3-style tokenizer (n %d, bos %d user %d asst %d think %d)", n, bos, user, asst,
          think);
    free(ids);
    free(s);
    int vocab = r1_tokenizer_vocab_size(t);
    r1_tokenizer_free(t);
    /* the same tokenizer through GGUF metadata, as convert writes it */
    char path[] = "/tmp/r1-tokl3-XXXXXX.gguf";
    int fd = mkstemps(path, 5);
    CHECK(fd >= 0, "mkstemps");
    if (fd < 0) return;
    close(fd);
    struct r1_gguf_writer *w = r1_gguf_writer_new();
    int rc = r1_gguf_w_str(w, "general.architecture", "llama") || r1_gguf_w_tokenizer(w, LLAMA3_DIR, vocab, -1, -1) ||
             r1_gguf_w_write(w, path, NULL, NULL, 0);
    r1_gguf_writer_free(w);
    CHECK(rc == 0, "write the tokenizer GGUF: %s", r1_last_error());
    t = rc ? NULL : r1_tokenizer_load(path);
    CHECK(t != NULL, "load the tokenizer GGUF: %s", r1_last_error());
    if (t) llama3_vectors(t, "GGUF, pre llama-bpe");
    r1_tokenizer_free(t);
    unlink(path);
}

int main(void) {
    double t0 = r1_now();
    r1_tokenizer_t *t = r1_tokenizer_load(DIR);
    CHECK(t != NULL, "load %s: %s", DIR, r1_last_error());
    if (!t) return TEST_DONE("test_tokenizer");
    printf("loaded %s in %.2fs\n", DIR, r1_now() - t0);
    test_vectors(t);
    test_specials(t);
    test_invalid_utf8(t);
    r1_tokenizer_free(t);
    t = r1_tokenizer_load(DIR "/tokenizer.json");
    CHECK(t != NULL, "load by tokenizer.json path: %s", r1_last_error());
    r1_tokenizer_free(t);
    test_bad_files();
    test_builder();
    test_cli();
    test_llama3();
    return TEST_DONE("test_tokenizer");
}
