/*
 * test_loader.c - the loader refuses bad input with one clear message that
 * names the file (and the tensor or field), and never crashes: missing files,
 * malformed config.json, unsupported settings, truncated or corrupt
 * safetensors headers, offsets past the end, wrong shapes and dtypes, broken
 * shard indexes. Also: the session refuses a full context and bad ids.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "kernels/cpu/cpu.h"
#include "kernels/dtype.h"
#include "util/util.h"
#include "model/model.h"
#include "runtime/job.h"
#include "test.h"

static char tmp[256];

static void write_file(const char *name, const void *data, size_t len) {
    char p[512];
    snprintf(p, sizeof p, "%s/%s", tmp, name);
    FILE *f = fopen(p, "wb");
    fwrite(data, 1, len, f);
    fclose(f);
}

static void write_str(const char *name, const char *s) { write_file(name, s, strlen(s)); }

static const char *good_config =
    "{\"model_type\":\"qwen2\",\"hidden_size\":32,\"num_hidden_layers\":1,\"num_attention_heads\":2,"
    "\"num_key_value_heads\":1,\"intermediate_size\":64,\"vocab_size\":64,\"max_position_embeddings\":"
    "128,\"rms_norm_eps\":1e-6,\"rope_theta\":10000.0,\"tie_word_embeddings\":false,\"torch_dtype\":"
    "\"float32\"}";

/* A safetensors file with a given header and `data_len` bytes of data. */
static void write_st(const char *name, const char *hdr, size_t data_len) {
    size_t hl = strlen(hdr), total = 8 + hl + data_len;
    unsigned char *b = calloc(1, total);
    for (int i = 0; i < 8; i++) b[i] = (unsigned char)((uint64_t)hl >> (8 * i));
    memcpy(b + 8, hdr, hl);
    write_file(name, b, total);
    free(b);
}

/* Expect loading tmp to fail with an error containing every needle. */
static void expect_fail(const char *what, const char *n1, const char *n2) {
    struct r1_load_opts lo = {.dtype = R1_DTYPE_AUTO};
    r1_model_t *m = r1_model_load(tmp, &lo);
    const char *e = r1_last_error();
    CHECK(m == NULL, "%s: load should fail", what);
    CHECK(n1 == NULL || strstr(e, n1), "%s: error '%s' should mention '%s'", what, e, n1);
    CHECK(n2 == NULL || strstr(e, n2), "%s: error '%s' should mention '%s'", what, e, n2);
    printf("  %-34s -> %s\n", what, e);
    r1_model_free(m);
}

static void fresh_dir(void) {
    char cmd[300];
    snprintf(cmd, sizeof cmd, "rm -rf %s/*", tmp);
    if (system(cmd)) {}
}

/* The loader regroups q4_0, q4_1, q8_0 and the K-quants (where the best
 * ISA reads q4_0x8, q4_1x8, q8_0x8, q4_Kx8, ...) without loss: every weight dequantizes to the same value as the
 * plain format (cpu tunings q4_0_plain, plain), ref gives bit-identical
 * logits on both, and cpu logits agree within LOGIT_TOL_REGROUP (only the
 * float summation order differs). q4_1 and q8_0 run at SmolLM2-135M's
 * widths (576 and 1536 columns: rows with a tail of plain blocks). The
 * logits are compared on two-part activations (R1_CPU_ACT=q8x2): on one
 * part (the K-quants' default on AVX-512) a summation-order difference of
 * 1e-7 upstream can move a value across an int8 rounding boundary, a step
 * of 1/127 of its block, which the next layers carry (measured: 1e-2 of
 * the logits on q4_K, 2e-7 on q6_K); the kernels' one-part sums are checked
 * against ref by test_matmul. */
#define LOGIT_TOL_REGROUP 1e-4
static void test_regroup(enum r1_dtype dt, const char *plain, int dim, int ffn) {
    struct r1_config c = {.dim = dim,
                          .n_layer = 2,
                          .n_head = dim / 64,
                          .n_kv_head = dim / 192,
                          .head_dim = 64,
                          .ffn = ffn,
                          .vocab = 300,
                          .max_pos = 64,
                          .eps = 1e-6f,
                          .rope_theta = 10000.0f,
                          .file_dtype = R1_DTYPE_F32,
                          .bos_id = -1,
                          .eos_id = -1};
    const char *name = r1_dtype_name(dt);
    enum r1_dtype want = r1_cpu_layout(dt, dim);
    r1_model_t *m[2];
    for (int i = 0; i < 2; i++) {
        r1_cpu_tune(plain, i);
        m[i] = r1_model_synthetic(&c, dt, 11, 0);
        CHECK(m[i] != NULL, "synthetic %s model: %s", name, r1_last_error());
        if (!m[i]) return;
    }
    r1_cpu_tune(plain, 0);
    CHECK(r1_model_dtype(m[0]) == want && r1_model_dtype(m[1]) == dt, "%s held as %s (want %s here), as %s with %s=1",
          name, r1_dtype_name(r1_model_dtype(m[0])), r1_dtype_name(want), name, plain);
    printf("regroup: %s weights held as %s\n", name, r1_dtype_name(r1_model_dtype(m[0])));
    const struct r1_mat *wa[] = {&m[0]->layers[1].wgu, &m[0]->layers[0].wqkv, &m[0]->lm_head};
    const struct r1_mat *wb[] = {&m[1]->layers[1].wgu, &m[1]->layers[0].wqkv, &m[1]->lm_head};
    float *ra = malloc((size_t)ffn * 4), *rb = malloc((size_t)ffn * 4);
    int diff = 0;
    for (int i = 0; i < 3; i++)
        for (int r = 0; r < wa[i]->rows; r += 7) {
            r1_mat_row_f32(wa[i], r, ra);
            r1_mat_row_f32(wb[i], r, rb);
            diff += memcmp(ra, rb, (size_t)wa[i]->cols * 4) != 0;
        }
    CHECK(diff == 0, "regrouped rows dequantize like %s: %d rows differ", name, diff);
    free(ra), free(rb);
    int32_t ids[5] = {3, 141, 59, 26, 5};
    const char *backends[] = {"ref", "cpu"};
    r1_cpu_set_act_parts(2);
    for (int bi = 0; bi < 2; bi++) {
        float *lg[2];
        for (int i = 0; i < 2; i++) {
            r1_session_t *s = r1_session_new(
                m[i], &(struct r1_session_opts){
                          .n_ctx = 16, .backend = backends[bi], .n_threads = 2, .kv_dtype = R1_DTYPE_F32});
            CHECK(s != NULL, "session: %s", r1_last_error());
            if (!s) return;
            r1_session_forward(s, ids, 4, NULL); /* prefill, then one decode step */
            const float *l = r1_session_forward(s, ids + 4, 1, NULL);
            lg[i] = malloc((size_t)c.vocab * 4);
            memcpy(lg[i], l, (size_t)c.vocab * 4);
            r1_session_free(s);
        }
        double err = 0, mx = 0;
        for (int v = 0; v < c.vocab; v++) {
            double d = fabs((double)lg[0][v] - lg[1][v]);
            if (d > err) err = d;
            if (fabs(lg[1][v]) > mx) mx = fabs(lg[1][v]);
        }
        if (bi == 0) CHECK(err == 0, "ref: regrouped and plain %s logits bit-identical (max diff %.3g)", name, err);
        else
            CHECK(err / mx <= LOGIT_TOL_REGROUP, "cpu: regrouped vs plain %s logits %.3g > %g", name, err / mx,
                  LOGIT_TOL_REGROUP);
        printf("regroup: %s logits, regrouped vs plain %s: max |diff| / max |logit| = %.3g\n", backends[bi], name,
               err / mx);
        free(lg[0]), free(lg[1]);
    }
    r1_cpu_set_act_parts(-1);
    r1_model_free(m[0]), r1_model_free(m[1]);
}

/* The load-time f16 conversions (F16C where the CPU has it) give the same bits
 * as the plain C ones: every non-NaN half, and f32 patterns around the f16
 * range edges, subnormals and rounding ties. */
static void test_f16_conversions(void) {
    enum { N = 65536 };
    uint16_t *h = malloc(N * 2), *back = malloc(N * 2);
    float *f = malloc(N * 4);
    for (int i = 0; i < N; i++) h[i] = (uint16_t)i;
    r1_dtype_traits[R1_DTYPE_F16].to_f32(h, f, N);
    int bad = 0;
    for (int i = 0; i < N; i++) {
        if ((i & 0x7c00) == 0x7c00 && (i & 0x3ff)) continue; /* NaN */
        float want = r1_f16_to_f32((uint16_t)i);
        bad += memcmp(&f[i], &want, 4) != 0;
    }
    CHECK(bad == 0, "f16 -> f32 of all 65536 halves: %d differ from the C conversion", bad);
    uint32_t x = 12345;
    for (int i = 0; i < N; i++) {
        uint32_t u;
        if (i < 4096) u = 0x33000000u + (uint32_t)i * 0x1000u;             /* subnormal range and its ties */
        else if (i < 8192) u = 0x477fe000u + (uint32_t)(i - 4096) * 0x10u; /* around 65504..65520 */
        else {
            x = x * 1664525u + 1013904223u;
            u = x;
        }
        if ((u & 0x7fffffffu) > 0x7f800000u) u &= 0xff7fffffu; /* no NaNs */
        memcpy(&f[i], &u, 4);
    }
    r1_dtype_traits[R1_DTYPE_F16].from_f32(f, back, N);
    bad = 0;
    for (int i = 0; i < N; i++) bad += back[i] != r1_f32_to_f16(f[i]);
    CHECK(bad == 0, "f32 -> f16 of 65536 patterns: %d differ from the C conversion", bad);
    free(h), free(back), free(f);
}

/* q8_0 quantization against the formula with libm's roundf/fmaxf: random
 * blocks and a block whose scale is exactly 1, full of halves (ties). */
static void test_q8_0_quant(void) {
    enum { NB = 512 };
    float *x = malloc(NB * 32 * 4);
    uint32_t r = 7;
    for (int i = 0; i < NB * 32; i++) {
        r = r * 1664525u + 1013904223u;
        x[i] = ((float)(r >> 8) / 16777216.0f - 0.5f) * (float)(1 + i % 7);
    }
    for (int j = 0; j < 32; j++) x[j] = j == 0 ? 127.0f : (float)(j % 2 ? 1 : -1) * ((float)(j * 3 % 120) + 0.5f);
    struct r1_block_q8_0 *b = malloc(NB * sizeof *b);
    r1_dtype_traits[R1_DTYPE_Q8_0].from_f32(x, b, NB * 32);
    int bad = 0;
    for (int i = 0; i < NB; i++) {
        float amax = 0;
        for (int j = 0; j < 32; j++) amax = fmaxf(amax, fabsf(x[i * 32 + j]));
        float d = amax / 127.0f, id = d ? 1.0f / d : 0.0f;
        bad += b[i].d != r1_f32_to_f16(d);
        for (int j = 0; j < 32; j++) bad += b[i].qs[j] != (int8_t)roundf(x[i * 32 + j] * id);
    }
    CHECK(bad == 0, "q8_0 quantization: %d values differ from roundf/fmaxf", bad);
    free(x), free(b);
}

int main(void) {
    snprintf(tmp, sizeof tmp, "/tmp/r1-loader-XXXXXX");
    if (!mkdtemp(tmp)) return 1;

    /* a valid small checkpoint to corrupt */
    struct r1_config c = {.dim = 32,
                          .n_layer = 1,
                          .n_head = 2,
                          .n_kv_head = 1,
                          .head_dim = 16,
                          .ffn = 64,
                          .vocab = 64,
                          .max_pos = 128,
                          .eps = 1e-6f,
                          .rope_theta = 10000.0f,
                          .qkv_bias = 1,
                          .file_dtype = R1_DTYPE_F32,
                          .bos_id = -1,
                          .eos_id = -1};
    CHECK(r1_synth_write(tmp, &c, R1_DTYPE_F32, 3, NULL, 0) == 0, "synth_write: %s", r1_last_error());
    struct r1_load_opts lo = {.dtype = R1_DTYPE_AUTO};
    r1_model_t *m = r1_model_load(tmp, &lo);
    CHECK(m != NULL, "valid model loads: %s", r1_last_error());
    if (m) {
        CHECK(r1_model_config(m)->dim == 32 && r1_model_config(m)->n_kv_head == 1, "config read");
        struct r1_session_opts so = {.n_ctx = 8, .backend = "ref", .kv_dtype = R1_DTYPE_F32};
        r1_session_t *s = r1_session_new(m, &so);
        CHECK(s != NULL, "session: %s", r1_last_error());
        int32_t ids[9] = {1, 2, 3, 4, 5, 6, 7, 8, 9};
        CHECK(r1_session_forward(s, ids, 9, NULL) == NULL && strstr(r1_last_error(), "context full"),
              "9 tokens into --ctx 8 refused: %s", r1_last_error());
        int32_t bad = 64;
        CHECK(r1_session_forward(s, &bad, 1, NULL) == NULL && strstr(r1_last_error(), "vocabulary"),
              "id outside the vocabulary refused: %s", r1_last_error());
        CHECK(r1_session_forward(s, ids, 8, NULL) != NULL, "8 tokens fit");
        CHECK(r1_session_forward(s, ids, 1, NULL) == NULL, "the 9th is refused");
        CHECK(r1_session_truncate(s, 9) != 0, "truncate past n_past refused");
        CHECK(r1_session_truncate(s, 4) == 0 && r1_session_n_past(s) == 4, "truncate");
        r1_session_free(s);
        so.n_ctx = 4096;
        CHECK(r1_session_new(m, &so) == NULL && strstr(r1_last_error(), "max_position_embeddings"),
              "ctx beyond max_position_embeddings refused: %s", r1_last_error());
        so.n_ctx = 8;
        so.backend = "nosuch";
        CHECK(r1_session_new(m, &so) == NULL && strstr(r1_last_error(), "nosuch"), "unknown backend");
        so.backend = "ref";
        setenv("R1_KERNEL_nosuch", "ref", 1);
        CHECK(r1_session_new(m, &so) == NULL && strstr(r1_last_error(), "nosuch"), "misspelt R1_KERNEL_ refused: %s",
              r1_last_error());
        unsetenv("R1_KERNEL_nosuch");
        setenv("R1_KERNEL_rms_norm", "fast", 1);
        CHECK(r1_session_new(m, &so) == NULL, "R1_KERNEL_rms_norm=fast refused");
        unsetenv("R1_KERNEL_rms_norm");
        /* conversion at load: every column count here is a multiple of 32 */
        r1_model_free(m);
        lo.dtype = R1_DTYPE_Q8_0;
        m = r1_model_load(tmp, &lo);
        CHECK(m != NULL && (r1_model_dtype(m) == R1_DTYPE_Q8_0 || r1_model_dtype(m) == R1_DTYPE_Q8_0X8),
              "--dtype q8_0 converts (held as q8_0 or regrouped): %s", r1_last_error());
        lo.dtype = R1_DTYPE_AUTO;
    }
    r1_model_free(m);

    printf("bad input:\n");
    fresh_dir();
    expect_fail("missing directory contents", "config.json", NULL);
    write_str("config.json", "{\"hidden_size\": 32,");
    expect_fail("malformed config.json", "config.json", "line");
    write_str("config.json", "{\"model_type\":\"qwen2\",\"hidden_size\":0,\"num_hidden_layers\":1,"
                             "\"num_attention_heads\":2,\"intermediate_size\":64,\"vocab_size\":64}");
    expect_fail("zero hidden_size", "config.json", "hidden_size");
    write_str("config.json", "{\"model_type\":\"qwen2\",\"hidden_size\":32,\"num_hidden_layers\":-3,"
                             "\"num_attention_heads\":2,\"intermediate_size\":64,\"vocab_size\":64}");
    expect_fail("negative num_hidden_layers", "config.json", "num_hidden_layers");
    write_str("config.json", "{\"model_type\":\"qwen2\",\"hidden_size\":32,\"num_hidden_layers\":1,"
                             "\"num_attention_heads\":3,\"intermediate_size\":64,\"vocab_size\":64}");
    expect_fail("heads not dividing hidden", "config.json", "multiple");
    write_str("config.json", "{\"model_type\":\"gpt_neox\",\"hidden_size\":32}");
    expect_fail("wrong model_type", "config.json", "gpt_neox");
    char cfg[1024];
    snprintf(cfg, sizeof cfg, "%.*s,\"use_sliding_window\":true}", (int)strlen(good_config) - 1, good_config);
    write_str("config.json", cfg);
    expect_fail("use_sliding_window=true", "config.json", "use_sliding_window");
    snprintf(cfg, sizeof cfg, "%.*s,\"rope_scaling\":{\"type\":\"yarn\"}}", (int)strlen(good_config) - 1, good_config);
    write_str("config.json", cfg);
    expect_fail("rope_scaling", "config.json", "rope_scaling");
    /* llama: the settings r1infer refuses, by name */
#define LLAMA_CFG                                                                                                      \
    "{\"model_type\":\"llama\",\"hidden_size\":32,\"num_hidden_layers\":1,"                                            \
    "\"num_attention_heads\":2,\"intermediate_size\":64,\"vocab_size\":64"
    write_str("config.json", LLAMA_CFG ",\"attention_bias\":true}");
    expect_fail("llama attention_bias=true", "config.json", "attention_bias");
    write_str("config.json", LLAMA_CFG ",\"mlp_bias\":true}");
    expect_fail("llama mlp_bias=true", "config.json", "mlp_bias");
    write_str("config.json", LLAMA_CFG ",\"rope_scaling\":{\"rope_type\":\"yarn\",\"factor\":4}}");
    expect_fail("llama rope_scaling yarn", "config.json", "'yarn'");
    write_str("config.json", LLAMA_CFG ",\"rope_scaling\":{\"rope_type\":\"llama3\",\"factor\":8}}");
    expect_fail("llama3 scaling without its fields", "config.json", "low_freq_factor");
    write_str("config.json", "{\"model_type\":\"llama\",\"hidden_size\":30,\"num_hidden_layers\":1,"
                             "\"num_attention_heads\":4,\"intermediate_size\":64,\"vocab_size\":64}");
    expect_fail("llama head_dim does not divide", "config.json", "num_attention_heads 4");
    write_str("config.json", LLAMA_CFG ",\"head_dim\":7}");
    expect_fail("llama odd head_dim", "config.json", "head_dim 7");
#undef LLAMA_CFG

    write_str("config.json", good_config);
    expect_fail("missing model.safetensors", "model.safetensors", NULL);
    write_file("model.safetensors", "\x10\x00", 2);
    expect_fail("2-byte safetensors", "model.safetensors", "short");
    write_st("model.safetensors", "{\"a\":", 0);
    expect_fail("corrupt JSON header", "model.safetensors", "header");
    {
        unsigned char b[16] = {0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0, 0, '{', '}'};
        write_file("model.safetensors", b, sizeof b);
        expect_fail("header length past the end", "model.safetensors", "length");
    }
    write_st("model.safetensors",
             "{\"model.embed_tokens.weight\":{\"dtype\":\"F32\",\"shape\":[64,32],\"data_offsets\":[0,8192]}}", 100);
    expect_fail("offset past the end (truncated)", "model.embed_tokens.weight", "past the end");
    write_st("model.safetensors",
             "{\"model.embed_tokens.weight\":{\"dtype\":\"F32\",\"shape\":[64,32],\"data_offsets\":[0,100]}}", 100);
    expect_fail("shape vs offsets mismatch", "model.embed_tokens.weight", "bytes");
    write_st("model.safetensors",
             "{\"model.embed_tokens.weight\":{\"dtype\":\"I8\",\"shape\":[64,32],\"data_offsets\":[0,2048]}}", 2048);
    expect_fail("unsupported dtype", "model.embed_tokens.weight", "I8");
    write_st("model.safetensors",
             "{\"model.embed_tokens.weight\":{\"dtype\":\"F32\",\"shape\":[64,16],\"data_offsets\":[0,4096]}}", 4096);
    expect_fail("wrong shape", "model.embed_tokens.weight", "expected [64, 32]");
    write_st("model.safetensors",
             "{\"model.embed_tokens.weight\":{\"dtype\":\"F32\",\"shape\":[64,32],\"data_offsets\":[0,8192]}}", 8192);
    expect_fail("missing tensor", "model.layers.0.self_attn.q_proj.weight", "missing");
    write_st("model.safetensors",
             "{\"x\":{\"dtype\":\"F32\",\"shape\":[4611686018427387904,8],\"data_offsets\":[0,0]}}", 0);
    expect_fail("shape overflow", "overflow", NULL);
    write_st("model.safetensors", "{\"x\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[8,4]}}", 8);
    expect_fail("reversed data_offsets", "data_offsets", NULL);

    write_str("model.safetensors.index.json", "{\"weight_map\":{\"a\":\"../../etc/passwd\"}}");
    expect_fail("index naming a path", "index.json", "plain file name");
    write_str("model.safetensors.index.json", "{\"weight_map\":{\"a\":\"model-00001.safetensors\"}}");
    expect_fail("index naming a missing shard", "model-00001.safetensors", NULL);
    write_str("model.safetensors.index.json", "{\"weight_map\": 3}");
    expect_fail("index without weight_map", "weight_map", NULL);

    CHECK(r1_model_load("/nonexistent/model.bin", NULL) == NULL && strstr(r1_last_error(), "/nonexistent"),
          "a missing path is named: %s", r1_last_error());

    char cmd[300];
    snprintf(cmd, sizeof cmd, "rm -rf %s", tmp);
    if (system(cmd)) {}
    test_regroup(R1_DTYPE_Q4_0, "q4_0_plain", 256, 512);
    test_regroup(R1_DTYPE_Q4_1, "plain", 576, 1536);
    test_regroup(R1_DTYPE_Q8_0, "plain", 576, 1536);
    test_regroup(R1_DTYPE_Q4_K, "plain", 768, 1536);
    test_regroup(R1_DTYPE_Q6_K, "plain", 768, 1536);
    test_f16_conversions();
    test_q8_0_quant();
    return TEST_DONE("test_loader");
}
