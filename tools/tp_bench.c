/*
 * tp_bench.c - decode speed of a synthetic model under tensor parallelism,
 * and the share of it spent communicating. Run it alone and under
 * `mpirun -np N` with the same flags: every rank generates the same random
 * weights, keeps its share (model/tp.c), prefills the same ids and decodes
 * greedily; rank 0 prints one line. Not a test: numbers for docs/.
 *
 *   build/tools/tp_bench [--synthetic 7b] [--dtype q4_K] [--threads 1]
 *                        [--tokens 16] [--prompt 16] [--layers N]
 * --layers keeps the shape's widths with fewer layers (the time to
 * generate the weights falls with them; per token, weights and exchanges
 * both scale with the layers, only the LM head does not).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "model/model.h"
#include "runtime/job.h"
#include "runtime/comm.h"
#include "runtime/session.h"

int main(int argc, char **argv) {
    if (r1_comm_init(&argc, &argv)) {
        fprintf(stderr, "tp_bench: %s\n", r1_last_error());
        return 1;
    }
    const char *shape = "7b";
    int dtype = R1_DTYPE_Q4_K, threads = 1, tokens = 16, prompt = 16, layers = 0;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!v) {
            fprintf(stderr, "tp_bench: %s needs a value\n", a);
            return 2;
        }
        if (!strcmp(a, "--synthetic")) shape = v;
        else if (!strcmp(a, "--dtype") && (dtype = r1_dtype_parse(v)) < 0) {
            fprintf(stderr, "tp_bench: unknown dtype %s\n", v);
            return 2;
        } else if (!strcmp(a, "--threads")) threads = atoi(v);
        else if (!strcmp(a, "--tokens")) tokens = atoi(v);
        else if (!strcmp(a, "--prompt")) prompt = atoi(v);
        else if (!strcmp(a, "--layers")) layers = atoi(v);
        else if (strcmp(a, "--dtype")) {
            fprintf(stderr, "tp_bench: unknown flag %s\n", a);
            return 2;
        }
        i++;
    }
    if (tokens < 1 || prompt < 1 || threads < 1) {
        fprintf(stderr, "tp_bench: --tokens, --prompt and --threads must be at least 1\n");
        return 2;
    }
    struct r1_config cfg;
    if (r1_synth_config(shape, &cfg)) {
        fprintf(stderr, "tp_bench: %s\n", r1_last_error());
        return 2;
    }
    if (layers > 0 && layers < cfg.n_layer) cfg.n_layer = layers;
    const struct r1_config full = cfg;
    double t0 = r1_now();
    r1_model_t *m = r1_model_synthetic(&cfg, (enum r1_dtype)dtype, 1, 0);
    struct r1_session_opts so = {.n_ctx = prompt + tokens + 8, .n_threads = threads, .kv_dtype = R1_DTYPE_AUTO};
    r1_session_t *s = m ? r1_session_new(m, &so) : NULL;
    if (!s) {
        fprintf(stderr, "tp_bench: rank %d: %s\n", r1_comm_rank(), r1_last_error());
        r1_comm_abort(1);
    }
    double t_load = r1_now() - t0;
    int32_t *ids = malloc((size_t)prompt * sizeof *ids);
    for (int i = 0; i < prompt; i++) ids[i] = (int32_t)((i * 7919 + 13) % full.vocab);
    t0 = r1_now();
    int32_t id = r1_session_forward_argmax(s, ids, prompt);
    double t_prefill = r1_now() - t0;
    id = r1_session_forward_argmax(s, &id, 1); /* one step not timed: first touch of the KV pages */
    double c0 = r1_comm_seconds();
    t0 = r1_now();
    uint32_t hash = 2166136261u;
    for (int i = 0; i < tokens && id >= 0; i++) {
        id = r1_session_forward_argmax(s, &id, 1);
        hash = (hash ^ (uint32_t)id) * 16777619u;
    }
    double t_dec = r1_now() - t0, t_comm = r1_comm_seconds() - c0;
    if (id < 0) {
        fprintf(stderr, "tp_bench: %s\n", r1_last_error());
        r1_comm_abort(1);
    }
    double comm_max = t_comm; /* the slowest rank's wait tells the imbalance */
    float cm = (float)t_comm;
    float all[64] = {0};
    if (r1_comm_size() <= 64) {
        all[r1_comm_rank()] = cm;
        r1_comm_allreduce_sum_f32(all, 64);
        for (int r = 0; r < r1_comm_size(); r++)
            if (all[r] > comm_max) comm_max = all[r];
    }
    /* the exchange alone: all-reduces of one hidden vector back to back */
    float *h = calloc((size_t)full.dim, sizeof *h);
    double a0 = r1_now();
    for (int i = 0; i < 200 && h; i++) r1_comm_allreduce_sum_f32(h, (size_t)full.dim);
    double us_ar = (r1_now() - a0) / 200 * 1e6;
    free(h);
    if (r1_comm_rank() == 0)
        printf("%s (%d layers) %s | ranks %d (%s) x %d threads | %.2f GB weights/rank | load %.0f s | prefill %d: %.2f "
               "tok/s | "
               "decode %d: %.2f tok/s (%.1f ms/token) | comm rank 0 %.2f ms/token (%.1f%%), max %.2f | all-reduce of "
               "%d floats alone: %.0f us | ids hash %08x\n",
               shape, full.n_layer, r1_dtype_name((enum r1_dtype)dtype), r1_comm_size(), r1_comm_name(), threads,
               r1_model_decode_bytes(m) / 1e9, t_load, prompt, prompt / t_prefill, tokens, tokens / t_dec,
               1e3 * t_dec / tokens, 1e3 * t_comm / tokens, 100.0 * t_comm / t_dec, 1e3 * comm_max / tokens, full.dim,
               us_ar, hash);
    free(ids);
    r1_session_free(s);
    r1_model_free(m);
    return 0;
}
