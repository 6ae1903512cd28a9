/*
 * grammar_bench.c - what grammar-constrained sampling costs per token
 * (build/tools/grammar_bench MODEL SCHEMA.json [STEPS]): generates from the
 * model under the JSON schema (the chat template, a fixed prompt, seed 1),
 * recording each step's logits and timing the decode step (one thread);
 * then samples the recorded logits again, plainly and under the grammar
 * (the same seed, so the same path), and prints the sampler's CPU time per
 * token of each (best of 5) beside the step, and how many steps needed the
 * whole vocabulary's mask. CPU time, so a busy machine skews it less.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "r1infer.h"
#include "util/util.h"

static double cpu_s(void) {
    struct timespec t;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

int main(int argc, char **argv) {
    if (argc < 3) {
        fprintf(stderr, "usage: grammar_bench MODEL SCHEMA.json [STEPS (default 100)]\n");
        return 2;
    }
    const int max_steps = argc > 3 ? atoi(argv[3]) : 100;
    struct r1_load_opts lo = {.dtype = R1_DTYPE_AUTO};
    r1_model_t *m = r1_model_load(argv[1], &lo);
    struct r1_session_opts so = {.n_ctx = 1024, .n_threads = 1, .kv_dtype = R1_DTYPE_AUTO};
    r1_session_t *s = m ? r1_session_new(m, &so) : NULL;
    r1_tokenizer_t *t = m ? r1_tokenizer_load(argv[1]) : NULL;
    size_t len = 0;
    char *schema = r1_file_read(argv[2], &len), err[320] = "";
    char *text = schema ? r1_grammar_json_schema(schema, len, 0, err, sizeof err) : NULL;
    r1_grammar_t *g = text ? r1_grammar_parse(text, strlen(text), err, sizeof err) : NULL;
    if (!s || !t || !g || max_steps < 1) {
        fprintf(stderr, "grammar_bench: %s\n", err[0] ? err : r1_last_error());
        return 1;
    }
    const int V = r1_model_config(m)->vocab;
    int32_t ends[2] = {r1_tokenizer_eos(t), r1_tokenizer_token_id(t, "<|im_end|>")};
    r1_gvocab_t *gv = r1_gvocab_new(t, V, ends, 2);
    struct r1_chat_msg msg = {"user", "Describe a person who lives in Paris, in JSON."};
    char *prompt = r1_chat_apply(t, &msg, 1, 1);
    int32_t *ids = NULL;
    int n = prompt ? r1_tokenizer_encode(t, prompt, strlen(prompt), 0, &ids) : -1;
    const float *l = n > 0 ? r1_session_forward(s, ids, n, NULL) : NULL;
    float *rec = malloc((size_t)max_steps * V * sizeof *rec), *w = malloc((size_t)V * sizeof *w);
    if (!gv || !l || !rec || !w) {
        fprintf(stderr, "grammar_bench: %s\n", r1_last_error());
        return 1;
    }
    struct r1_sampler_params sp = r1_sampler_defaults();
    sp.seed = 1;
    r1_sampler_t *smp = r1_sampler_new(&sp, V);
    r1_gmatch_t *gm = r1_gmatch_new(g, gv);
    int steps = 0;
    double step_s = 0;
    while (steps < max_steps) {
        memcpy(rec + (size_t)steps * V, l, (size_t)V * sizeof *l);
        memcpy(w, l, (size_t)V * sizeof *l);
        steps++;
        int32_t id = r1_sampler_sample_grammar(smp, w, gm);
        if (id < 0 || id == ends[0] || id == ends[1] || r1_gmatch_accept(gm, id) || r1_gmatch_finished(gm)) break;
        double t0 = r1_now();
        l = r1_session_forward(s, &id, 1, NULL);
        step_s += r1_now() - t0;
        if (!l) break;
    }
    double step_ms = 1e3 * step_s / (steps > 1 ? steps - 1 : 1);
    printf("%d steps, decode step %.2f ms (one thread)\n", steps, step_ms);
    double ms[2];
    long misses = 0;
    for (int mode = 0; mode < 2; mode++) {
        double best = 1e30;
        for (int rep = 0; rep < 5; rep++) {
            r1_sampler_t *s2 = r1_sampler_new(&sp, V);
            r1_gmatch_t *g2 = r1_gmatch_new(g, gv);
            double c = 0;
            for (int k = 0; k < steps; k++) {
                memcpy(w, rec + (size_t)k * V, (size_t)V * sizeof *w);
                double t0 = cpu_s();
                int32_t id = mode ? r1_sampler_sample_grammar(s2, w, g2) : r1_sampler_sample(s2, w);
                c += cpu_s() - t0;
                if (mode && (id < 0 || r1_gmatch_accept(g2, id))) break;
            }
            if (c < best) best = c;
            if (mode) r1_gmatch_stats(g2, NULL, &misses);
            r1_gmatch_free(g2);
            r1_sampler_free(s2);
        }
        ms[mode] = 1e3 * best / steps;
    }
    printf("sampling: plain %.3f ms/token, grammar %.3f ms/token (%ld of %d steps masked whole): "
           "+%.3f ms = %.2f%% of a decode step\n",
           ms[0], ms[1], misses, steps, ms[1] - ms[0], 100 * (ms[1] - ms[0]) / step_ms);
    return 0;
}
