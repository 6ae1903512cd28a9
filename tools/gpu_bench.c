/*
 * gpu_bench.c - decode and prefill speed of the cuda backend on synthetic
 * models of real shapes (scripts/gpu-check.sh runs it). Weights are random
 * bits of the right dtype filled in memory by all cores (r1_model_synthetic
 * draws proper normal weights but takes minutes for a 7B on one core; speed
 * does not depend on the values). Prints, per model x dtype: decode tok/s
 * after a short prompt, prefill tok/s of a 512-token prompt, the GB/s the
 * decode implies (r1_model_decode_bytes x tok/s) and its fraction of the
 * device-to-device copy bandwidth measured in the same run; a table last.
 *
 *   gpu_bench [--models 1.5b,7b] [--dtypes bf16,q8_0] [--gen 128] [--prompt 512] [--profile]
 *
 * --profile adds each kernel's time per decode step, every launch synced on
 * its own (so launch gaps are in it and graphs are off).
 *
 * Not a test: it checks nothing but that the runs complete. --backend cpu runs
 * the same plan on the CPU (slowly), to check the tool itself without a GPU.
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "model/model.h"
#include "r1infer.h"

#ifdef R1_CUDA
#include "kernels/cuda/cuda.h"
#endif
#include "kernels/kernels.h"
#include "runtime/session.h"

/* ---- fast random fill ---- */
struct fill_job {
    uint8_t *p;
    size_t n;
    uint64_t seed;
    enum r1_dtype dt;
};
static void tame(uint8_t *d, size_t n, enum r1_dtype dt);
static uint64_t xs(uint64_t *s) {
    *s ^= *s << 13, *s ^= *s >> 7, *s ^= *s << 17;
    return *s;
}
static void *fill_bytes(void *arg) {
    struct fill_job *j = arg;
    uint64_t s = j->seed | 1;
    size_t i = 0;
    for (; i + 8 <= j->n; i += 8) {
        uint64_t r = xs(&s);
        memcpy(j->p + i, &r, 8);
    }
    for (; i < j->n; i++) j->p[i] = (uint8_t)xs(&s);
    tame(j->p, j->n, j->dt);
    return NULL;
}
/* chunks are whole q8_0 blocks (34 bytes) and whole 16-bit values */
static void par_fill(uint8_t *p, size_t n, uint64_t seed, enum r1_dtype dt) {
    enum { NT = 16, ALIGN = 34 * 32 };
    pthread_t th[NT];
    struct fill_job jobs[NT];
    size_t per = (n / NT + ALIGN - 1) / ALIGN * ALIGN;
    int k = 0;
    for (; k < NT && (size_t)k * per < n; k++) {
        size_t off = (size_t)k * per, len = n - off < per ? n - off : per;
        jobs[k] = (struct fill_job){p + off, len, seed * 1000003u + (uint64_t)k * 7919u, dt};
        pthread_create(&th[k], NULL, fill_bytes, &jobs[k]);
    }
    for (int i = 0; i < k; i++) pthread_join(th[i], NULL);
}

/* Turn random bytes into sane weights in place: small magnitudes, no NaN. */
static void tame(uint8_t *d, size_t n, enum r1_dtype dt) {
    if (dt == R1_DTYPE_BF16) {
        uint16_t *h = (uint16_t *)d; /* exponent 2^-8..2^-5, random sign and mantissa */
        for (size_t i = 0; i < n / 2; i++)
            h[i] = (uint16_t)((h[i] & 0x807f) | ((uint16_t)(119 + ((h[i] >> 7) & 3)) << 7));
    } else if (dt == R1_DTYPE_Q8_0) {
        uint16_t dscale = r1_f32_to_f16(0.0004f);
        for (size_t i = 0; i + sizeof(struct r1_block_q8_0) <= n; i += sizeof(struct r1_block_q8_0))
            memcpy(d + i, &dscale, 2);
    }
}

static void fill_mat(struct r1_mat *m, enum r1_dtype dt, int rows, int cols, uint8_t **cur, uint64_t seed) {
    *m = (struct r1_mat){
        .data = *cur, .dtype = dt, .rows = rows, .cols = cols, .row_bytes = r1_dtype_row_bytes(dt, cols)};
    par_fill(*cur, (size_t)rows * m->row_bytes, seed, dt);
    *cur += ((size_t)rows * m->row_bytes + 63) & ~(size_t)63;
}

static r1_model_t *fast_model(const char *name, enum r1_dtype dt) {
    struct r1_model *m = calloc(1, sizeof *m);
    if (!m || r1_synth_config(name, &m->cfg)) return NULL;
    const struct r1_config *c = &m->cfg;
    m->dtype = dt;
    const int D = c->dim, hd = c->head_dim, nqkv = (c->n_head + 2 * c->n_kv_head) * hd;
    size_t rb = r1_dtype_row_bytes(dt, D), rbf = r1_dtype_row_bytes(dt, c->ffn),
           rbq = r1_dtype_row_bytes(dt, c->n_head * hd);
    size_t per_layer = (size_t)nqkv * rb + (size_t)D * rbq + (size_t)2 * c->ffn * rb + (size_t)D * rbf +
                       (size_t)(2 * D + nqkv) * 4 + 6 * 64;
    size_t total =
        (size_t)c->vocab * rb * 2 + (size_t)c->n_layer * per_layer + (size_t)D * 4 + (size_t)hd / 2 * 4 + 5 * 64;
    m->arena = aligned_alloc(64, (total + 63) & ~(size_t)63);
    m->layers = calloc((size_t)c->n_layer, sizeof *m->layers);
    if (!m->arena || !m->layers) return NULL;
    m->arena_size = total;
    uint8_t *cur = m->arena;
    uint64_t seed = 1;
    fill_mat(&m->emb, dt, c->vocab, D, &cur, seed++);
    fill_mat(&m->lm_head, dt, c->vocab, D, &cur, seed++);
    float *ones = (float *)cur;
    for (int i = 0; i < D; i++) ones[i] = 1.0f;
    m->out_norm = ones;
    cur += ((size_t)D * 4 + 63) & ~(size_t)63;
    m->rope_inv_freq = (float *)cur; /* the session's rope reads it (r1_model_load fills it the same way) */
    r1_rope_inv_freq(c, NULL, m->rope_inv_freq);
    cur += ((size_t)hd / 2 * 4 + 63) & ~(size_t)63;
    for (int l = 0; l < c->n_layer; l++) {
        struct r1_layer *L = &m->layers[l];
        L->attn_norm = L->ffn_norm = ones;
        L->bqkv = (float *)cur;
        for (int i = 0; i < nqkv; i++) L->bqkv[i] = 0.01f * (float)((i * 37) % 11 - 5);
        cur += ((size_t)nqkv * 4 + 63) & ~(size_t)63;
        fill_mat(&L->wqkv, dt, nqkv, D, &cur, seed++);
        fill_mat(&L->wo, dt, D, c->n_head * hd, &cur, seed++);
        fill_mat(&L->wgu, dt, 2 * c->ffn, D, &cur, seed++);
        fill_mat(&L->wdown, dt, D, c->ffn, &cur, seed++);
    }
    return m;
}

struct row {
    char model[16], dtype[8];
    double decode_tps, prefill_tps, gbps, frac, load_s;
    long checksum;
};

static const char *backend = "cuda";
static int profile; /* --profile: each kernel's time per decode step */

static int bench_one(const char *name, enum r1_dtype dt, int n_gen, int n_prompt, double copy_gbps, struct row *out) {
    memset(out, 0, sizeof *out);
    snprintf(out->model, sizeof out->model, "%s", name);
    snprintf(out->dtype, sizeof out->dtype, "%s", r1_dtype_name(dt));
    double t0 = r1_now();
    r1_model_t *m = fast_model(name, dt);
    if (!m) return fprintf(stderr, "gpu_bench: cannot build %s %s: %s\n", name, out->dtype, r1_last_error()), -1;
    const int V = m->cfg.vocab;
    r1_session_t *s = r1_session_new(
        m, &(struct r1_session_opts){.n_ctx = n_prompt + n_gen + 64, .backend = backend, .kv_dtype = R1_DTYPE_AUTO});
    out->load_s = r1_now() - t0;
    if (!s) {
        fprintf(stderr, "gpu_bench: %s %s: %s\n", name, out->dtype, r1_last_error());
        r1_model_free(m);
        return -1;
    }
    int32_t *ids = malloc(sizeof *ids * (size_t)n_prompt);
    uint64_t st = 12345;
    for (int i = 0; i < n_prompt; i++) ids[i] = (int32_t)(xs(&st) % (uint64_t)V);
    int rc = 0;
    /* prefill: one warm-up (cuBLAS heuristics, workspace), best of 3 */
    double best = 1e30;
    for (int rep = 0; rep < 4 && !rc; rep++) {
        r1_session_truncate(s, 0);
        double a = r1_now();
        if (r1_session_forward_argmax(s, ids, n_prompt) < 0) rc = -1;
        double dtm = r1_now() - a;
        if (rep > 0 && dtm < best) best = dtm;
    }
    out->prefill_tps = rc ? 0 : n_prompt / best;
    /* decode: 16-token prompt, then n_gen greedy steps; warm-up run first (graph capture) */
    for (int rep = 0; rep < 2 && !rc; rep++) {
        r1_session_truncate(s, 0);
        int32_t id = r1_session_forward_argmax(s, ids, 16);
        long sum = 0;
        double a = r1_now();
        for (int i = 0; i < n_gen && id >= 0; i++) {
            sum += id;
            id = r1_session_forward_argmax(s, &id, 1);
        }
        double dtm = r1_now() - a;
        if (id < 0) rc = -1;
        out->decode_tps = n_gen / dtm;
        out->checksum = sum;
    }
    if (!rc && profile) { /* each kernel synced on its own: launch gaps included, graphs off */
        r1_session_t *p =
            r1_session_new(m, &(struct r1_session_opts){
                                  .n_ctx = 64 + n_gen, .backend = backend, .kv_dtype = R1_DTYPE_AUTO, .profile = 1});
        int32_t id = p ? r1_session_forward_argmax(p, ids, 16) : -1;
        if (p) r1_session_profile_reset(p);
        for (int i = 0; i < n_gen && id >= 0; i++) id = r1_session_forward_argmax(p, &id, 1);
        const char *names[64];
        double us[64], tot = 0;
        long calls[64];
        int nk = p && id >= 0 ? r1_session_profile(p, names, us, calls, 64) : 0;
        for (int k = 0; k < nk; k++) tot += us[k];
        for (int k = 0; k < nk; k++)
            if (calls[k])
                printf("  profile %-5s %-5s %-16s %8.1f us/step  %5.1f%%  %6.2f us/call\n", name, out->dtype, names[k],
                       us[k] / n_gen, 100 * us[k] / tot, us[k] / calls[k]);
        if (!nk) fprintf(stderr, "gpu_bench: profile %s %s: %s\n", name, out->dtype, r1_last_error());
        r1_session_free(p);
    }
    if (rc) fprintf(stderr, "gpu_bench: %s %s: %s\n", name, out->dtype, r1_last_error());
    out->gbps = (double)r1_model_decode_bytes(m) * out->decode_tps / 1e9;
    out->frac = copy_gbps > 0 ? out->gbps / copy_gbps : 0;
    printf("%-5s %-5s  load+upload %.1fs  prefill %d: %.0f tok/s  decode %d: %.1f tok/s = %.0f GB/s (%.0f%% of "
           "copy)  ids checksum %ld\n",
           name, out->dtype, out->load_s, n_prompt, out->prefill_tps, n_gen, out->decode_tps, out->gbps,
           100 * out->frac, out->checksum);
    fflush(stdout);
    free(ids);
    r1_session_free(s);
    r1_model_free(m);
    return rc;
}

int main(int argc, char **argv) {
    const char *models = "1.5b,7b", *dtypes = "bf16,q8_0";
    int n_gen = 128, n_prompt = 512;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--models") && i + 1 < argc) models = argv[++i];
        else if (!strcmp(argv[i], "--dtypes") && i + 1 < argc) dtypes = argv[++i];
        else if (!strcmp(argv[i], "--gen") && i + 1 < argc) n_gen = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--prompt") && i + 1 < argc) n_prompt = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--backend") && i + 1 < argc) backend = argv[++i]; /* cpu: check the tool */
        else if (!strcmp(argv[i], "--profile")) profile = 1;
        else {
            fprintf(stderr,
                    "usage: gpu_bench [--models 1.5b,7b] [--dtypes bf16,q8_0] [--gen N] [--prompt N] [--profile]\n");
            return 2;
        }
    }
    if (n_gen < 1 || n_prompt < 16) return fprintf(stderr, "gpu_bench: --gen >= 1, --prompt >= 16\n"), 2;
    if (!r1_backend_find(backend)) {
        fprintf(stderr, "gpu_bench: %s\n", r1_last_error());
        return 1;
    }
    double copy = 0;
#ifdef R1_CUDA
    if (!strcmp(backend, "cuda")) {
        char dev[128];
        int sms = 0, cc = 0;
        size_t mem = 0;
        r1_cuda_device_info(dev, sizeof dev, &sms, &mem, &cc);
        copy = r1_cuda_copy_gbps((size_t)1 << 30, 5);
        printf("device %s, cc %d.%d, %d SMs, %.0f GiB; D2D copy (1 GiB, best of 5): %.0f GB/s read+write\n", dev,
               cc / 10, cc % 10, sms, mem / 1073741824.0, copy);
    }
#endif
    struct row rows[16];
    int nr = 0, fails = 0;
    char mb[128], db[128];
    snprintf(mb, sizeof mb, "%s", models);
    for (char *sm = NULL, *mname = strtok_r(mb, ",", &sm); mname; mname = strtok_r(NULL, ",", &sm)) {
        snprintf(db, sizeof db, "%s", dtypes);
        for (char *sd = NULL, *dname = strtok_r(db, ",", &sd); dname && nr < 16; dname = strtok_r(NULL, ",", &sd)) {
            int dt = r1_dtype_parse(dname);
            if (dt != R1_DTYPE_BF16 && dt != R1_DTYPE_Q8_0)
                return fprintf(stderr, "gpu_bench: --dtypes takes bf16 and q8_0, not %s\n", dname), 2;
            fails += bench_one(mname, (enum r1_dtype)dt, n_gen, n_prompt, copy, &rows[nr++]) != 0;
        }
    }
    printf("\n| model | dtype | decode tok/s | ms/token | GB/s | of copy BW | prefill %d tok/s |\n", n_prompt);
    printf("|---|---|---|---|---|---|---|\n");
    for (int i = 0; i < nr; i++)
        printf("| %s | %s | %.1f | %.2f | %.0f | %.0f%% | %.0f |\n", rows[i].model, rows[i].dtype, rows[i].decode_tps,
               rows[i].decode_tps > 0 ? 1000 / rows[i].decode_tps : 0, rows[i].gbps, 100 * rows[i].frac,
               rows[i].prefill_tps);
    printf("copy bandwidth (D2D, read+write): %.0f GB/s\n", copy);
    return fails ? 1 : 0;
}
