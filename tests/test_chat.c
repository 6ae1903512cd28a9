/*
 * test_chat.c - chat templates rendered byte for byte. The expectations in
 * tests/fixtures/chat/NAME.json were produced by rendering the real Jinja
 * templates with jinja2 (tools/make_chat_fixtures.py): the DeepSeek-R1
 * distill template (data/tokenizers/deepseek-r1-distill-qwen) and SmolLM2's
 * ChatML with its default system prompt (the default model's GGUF). A ChatML
 * template without a default system prompt renders none.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <jansson.h>

#include "r1infer.h"
#include "test.h"
#include "util/util.h"

#define DIR "data/tokenizers/deepseek-r1-distill-qwen"
#define BOS "<｜begin▁of▁sentence｜>"
#define EOS "<｜end▁of▁sentence｜>"

static void expect(const r1_tokenizer_t *t, const char *name, const struct r1_chat_msg *m, size_t n, int gen,
                   const char *want) {
    char *got = r1_chat_apply(t, m, n, gen);
    CHECK(got && !strcmp(got, want), "%s:\n  got:  %s\n  want: %s", name, got ? got : r1_last_error(), want);
    free(got);
}

static void test_r1(const r1_tokenizer_t *t) {
    CHECK(!strcmp(r1_chat_template_name(t), "deepseek-r1"), "template name");
    struct r1_chat_msg single[] = {{"user", "What is 2+2?"}};
    expect(t, "r1 single", single, 1, 1, BOS "<｜User｜>What is 2+2?<｜Assistant｜><think>\n");
    struct r1_chat_msg sys[] = {{"system", "You are terse."}, {"user", "Hi"}};
    expect(t, "r1 system", sys, 2, 1, BOS "You are terse.<｜User｜>Hi<｜Assistant｜><think>\n");
    struct r1_chat_msg multi[] = {{"system", "S1"},
                                  {"user", "Q1"},
                                  {"assistant", "<think>\nhmm\n</think>\n\nA1"},
                                  {"system", "S2"},
                                  {"user", "Q2"}};
    expect(t, "r1 multi-turn", multi, 5, 1,
           BOS "S2<｜User｜>Q1<｜Assistant｜>\n\nA1" EOS "<｜User｜>Q2<｜Assistant｜><think>\n");
    struct r1_chat_msg two[] = {{"user", "Q"}, {"assistant", "x</think>a</think>b"}};
    expect(t, "r1 last </think>, no generation prompt", two, 2, 0, BOS "<｜User｜>Q<｜Assistant｜>b" EOS);
    expect(t, "r1 no messages", NULL, 0, 1, BOS "<｜Assistant｜><think>\n");
    struct r1_chat_msg tool[] = {{"tool", "{}"}};
    char *s = r1_chat_apply(t, tool, 1, 1);
    CHECK(!s && strstr(r1_last_error(), "unsupported role"), "tool role: %s", r1_last_error());
    free(s);
    struct r1_chat_msg nul[] = {{"user", NULL}};
    s = r1_chat_apply(t, nul, 1, 1);
    CHECK(!s, "NULL content accepted");
    free(s);
    /* the rendered prompt tokenizes with the added tokens recognised */
    s = r1_chat_apply(t, single, 1, 1);
    int32_t *ids;
    int n = r1_tokenizer_encode(t, s, strlen(s), 0, &ids);
    CHECK(n > 4 && ids[0] == 151646 && ids[1] == 151644 && ids[n - 3] == 151645 && ids[n - 2] == 151648,
          "rendered prompt ids");
    free(ids);
    free(s);
}

/* A copy of the tokenizer with a ChatML template (or none) in its config. */
static r1_tokenizer_t *with_config(const char *dir, const char *config) {
    char *src = realpath(DIR "/tokenizer.json", NULL);
    char *dst = r1_path_join(dir, "tokenizer.json");
    unlink(dst);
    CHECK(src && symlink(src, dst) == 0, "symlink tokenizer.json");
    char *cf = r1_path_join(dir, "tokenizer_config.json");
    unlink(cf);
    if (config) {
        FILE *f = fopen(cf, "w");
        fputs(config, f);
        fclose(f);
    }
    r1_tokenizer_t *t = r1_tokenizer_load(dir);
    CHECK(t != NULL, "load with config: %s", r1_last_error());
    free(src);
    free(dst);
    free(cf);
    return t;
}

static void test_chatml(void) {
    char dir[] = "/tmp/r1chat.XXXXXX";
    if (!mkdtemp(dir)) return;
    r1_tokenizer_t *t = with_config(
        dir, "{\"eos_token\": \"" EOS "\", \"chat_template\": \"{% for message in messages %}"
             "{{'<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>' + '\\n'}}{% endfor %}\"}");
    if (t) {
        CHECK(!strcmp(r1_chat_template_name(t), "chatml"), "chatml name");
        struct r1_chat_msg single[] = {{"user", "Hello"}};
        expect(t, "chatml without a default system prompt", single, 1, 1,
               "<|im_start|>user\nHello<|im_end|>\n<|im_start|>assistant\n");
        struct r1_chat_msg multi[] = {{"system", "Be brief."}, {"user", "Q1"}, {"assistant", "A1"}, {"user", "Q2"}};
        expect(t, "chatml multi-turn", multi, 4, 1,
               "<|im_start|>system\nBe brief.<|im_end|>\n<|im_start|>user\nQ1<|im_end|>\n"
               "<|im_start|>assistant\nA1<|im_end|>\n<|im_start|>user\nQ2<|im_end|>\n<|im_start|>assistant\n");
        expect(t, "chatml no generation prompt", multi, 3, 0,
               "<|im_start|>system\nBe brief.<|im_end|>\n<|im_start|>user\nQ1<|im_end|>\n"
               "<|im_start|>assistant\nA1<|im_end|>\n");
        r1_tokenizer_free(t);
    }
    /* no config at all: chatml with a warning, still loads */
    t = with_config(dir, NULL);
    if (t) {
        CHECK(!strcmp(r1_chat_template_name(t), "chatml"), "missing config -> chatml");
        r1_tokenizer_free(t);
    }
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    CHECK(system(cmd) == 0, "cleanup");
}

/* Every case of tests/fixtures/chat/NAME.json against the C rendering of a
 * tokenizer whose tokenizer_config.json carries that template. */
static void test_fixture(const char *name) {
    char path[256];
    snprintf(path, sizeof path, "tests/fixtures/chat/%s.json", name);
    json_error_t je;
    json_t *fx = json_load_file(path, 0, &je);
    CHECK(fx != NULL, "%s: %s", path, je.text);
    if (!fx) return;
    char dir[] = "/tmp/r1chat.XXXXXX";
    if (!mkdtemp(dir)) return;
    json_t *tmpl = json_object_get(fx, "template");
    json_t *cfg = json_pack("{s:O}", "chat_template", tmpl);
    if (strstr(json_string_value(tmpl), "bos_token")) /* only the template's BOS matters here */
        json_object_set(cfg, "bos_token", json_object_get(fx, "bos_token"));
    char *cfgs = json_dumps(cfg, 0);
    r1_tokenizer_t *t = with_config(dir, cfgs);
    size_t i, j;
    json_t *c, *m;
    json_array_foreach(json_object_get(fx, "cases"), i, c) {
        json_t *msgs = json_object_get(c, "messages");
        struct r1_chat_msg mm[16];
        size_t n = json_array_size(msgs);
        CHECK(n <= 16, "too many messages");
        json_array_foreach(msgs, j, m) {
            mm[j].role = json_string_value(json_object_get(m, "role"));
            mm[j].content = json_string_value(json_object_get(m, "content"));
        }
        char what[64];
        snprintf(what, sizeof what, "%s case %zu", name, i);
        if (t)
            expect(t, what, mm, n, json_is_true(json_object_get(c, "add_generation_prompt")),
                   json_string_value(json_object_get(c, "expected")));
    }
    r1_tokenizer_free(t);
    free(cfgs);
    json_decref(cfg);
    json_decref(fx);
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    CHECK(system(cmd) == 0, "cleanup");
}

int main(void) {
    r1_tokenizer_t *t = r1_tokenizer_load(DIR);
    CHECK(t != NULL, "load: %s", r1_last_error());
    if (t) test_r1(t);
    r1_tokenizer_free(t);
    test_chatml();
    test_fixture("r1-qwen");
    test_fixture("smollm2");
    return TEST_DONE("test_chat");
}
