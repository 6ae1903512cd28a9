/*
 * e2e.c - end-to-end figures through the public session API: prefill tok/s
 * at a few batch sizes, decode tok/s (forward + sample, as `run` does it) at
 * a few cache lengths, each decode figure against the ceiling bandwidth /
 * bytes per token; and the in-situ per-kernel profile of real decode steps.
 *
 * Long contexts: cache positions that only need to exist are skipped with
 * r1_session_skip -- n_past advances and zeros are written there (so every
 * page is real memory, as after a prefill). A decode step at
 * that context then reads exactly the bytes it would read after a real
 * prefill. plan->full_fill computes them instead (minutes on a small CPU for
 * 4096 positions).
 */
#include <stdlib.h>
#include <string.h>

#include "bench/bench.h"
#include "runtime/session.h"

double bench_decode_bytes(const struct r1_model *m, enum r1_dtype kvt, int ctx) {
    const struct r1_config *c = &m->cfg;
    double kv_pos = (double)r1_kv_pos_bytes(c, kvt);
    /* weights, then K and V of ctx cached positions plus the new one read, the new one written */
    return (double)r1_model_decode_bytes(m) + kv_pos * (ctx + 1) + kv_pos;
}

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static unsigned fnv1a(const float *x, size_t n) {
    const unsigned char *p = (const unsigned char *)x;
    unsigned h = 2166136261u;
    for (size_t i = 0; i < n * sizeof(float); i++) h = (h ^ p[i]) * 16777619u;
    return h;
}

struct run {
    r1_session_t *s;
    const int32_t *ids; /* n_ids random tokens */
    int n_ids, full_fill;
    char *note;
    size_t note_cap;
};

/* Bring the cache to exactly `target` positions. */
static int reach(struct run *r, int target, const char *who) {
    int n = r1_session_n_past(r->s), n0 = n;
    if (n > target) return r1_session_truncate(r->s, target);
    if (n == target) return 0;
    int fast = !r->full_fill;
    bench_progress("%s: %s cache positions %d..%d", who, fast ? "fast-forward" : "fill", n, target - 1);
    if (fast) {
        if (r1_session_skip(r->s, target - n)) return -1;
        n = target;
    }
    while (n < target) {
        int k = target - n < r->n_ids ? target - n : r->n_ids;
        if (!r1_session_forward(r->s, r->ids, k, NULL)) return -1;
        n += k;
    }
    if (fast) {
        size_t len = strlen(r->note);
        snprintf(r->note + len, r->note_cap - len, "%scache positions %d..%d skipped (zero K/V, not computed)",
                 len ? "; " : "", n0, target - 1);
    }
    return 0;
}

int bench_e2e_run(struct bench_e2e *e, struct bench_insitu *insitu, r1_model_t *m, const char *backend, int n_threads,
                  enum r1_dtype kvt, const struct bench_plan *plan, const struct r1_sampler_params *sp,
                  double bw_gbps) {
    const struct r1_config *c = &m->cfg;
    memset(e, 0, sizeof *e);
    const struct r1_backend *be = r1_backend_find(backend);
    if (!be) return -1;
    if (kvt == R1_DTYPE_AUTO) kvt = be->kv_dtype; /* what the session will pick */
    e->backend = be->name;
    e->threads = n_threads > 0 ? n_threads : (!strcmp(backend, "ref") ? 1 : r1_physical_cores());
    int need = 1;
    for (int i = 0; i < plan->n_prefill; i++)
        if (plan->prefill[i] > need) need = plan->prefill[i];
    for (int i = 0; i < plan->n_decode; i++)
        if (plan->decode_ctx[i] + plan->decode_tokens + 1 > need) need = plan->decode_ctx[i] + plan->decode_tokens + 1;
    int n_ctx = need < c->max_pos ? need : c->max_pos;

    struct r1_session_opts so = {
        .n_ctx = n_ctx, .backend = backend, .n_threads = n_threads, .kv_dtype = kvt, .profile = insitu != NULL};
    r1_session_t *s = r1_session_new(m, &so);
    if (!s) return -1;
    int n_ids = 512;
    int32_t *ids = malloc(sizeof(int32_t) * (size_t)n_ids);
    float *logits = malloc(sizeof(float) * (size_t)c->vocab);
    double *step = malloc(sizeof(double) * (size_t)(plan->decode_tokens + 1));
    r1_sampler_t *smp = r1_sampler_new(sp, c->vocab);
    int rc = -1;
    if (!ids || !logits || !step || !smp) {
        if (smp) r1_err("out of memory");
        goto out;
    }
    uint64_t x = 0x9e3779b97f4a7c15ull;
    for (int i = 0; i < n_ids; i++) {
        x ^= x << 13, x ^= x >> 7, x ^= x << 17;
        ids[i] = (int32_t)(x % (uint64_t)c->vocab);
    }
    struct run r = {
        .s = s, .ids = ids, .n_ids = n_ids, .full_fill = plan->full_fill, .note = e->note, .note_cap = sizeof e->note};
    if (plan->warmup) {
        bench_progress("%s: warm-up step", backend);
        if (!r1_session_forward(s, ids, 1, NULL) || r1_session_truncate(s, 0)) goto out;
    }
    /* decode rows at ctx 0 first, then the prefills (the last leaves its cache for the
     * next decode context), then the other decode rows in increasing context */
    int order[BENCH_MAX_ROWS * 2], n_order = 0;
    for (int i = 0; i < plan->n_decode; i++)
        if (plan->decode_ctx[i] == 0) order[n_order++] = BENCH_MAX_ROWS + i;
    for (int i = 0; i < plan->n_prefill; i++) order[n_order++] = i;
    for (int pass = 0; pass < plan->n_decode; pass++) { /* selection by context */
        int best = -1;
        for (int i = 0; i < plan->n_decode; i++) {
            if (plan->decode_ctx[i] == 0) continue;
            int used = 0;
            for (int j = 0; j < n_order; j++) used |= order[j] == BENCH_MAX_ROWS + i;
            if (!used && (best < 0 || plan->decode_ctx[i] < plan->decode_ctx[best])) best = i;
        }
        if (best >= 0) order[n_order++] = BENCH_MAX_ROWS + best;
    }
    e->n_prefill = plan->n_prefill;
    e->n_decode = plan->n_decode;
    int hashed = 0;
    for (int oi = 0; oi < n_order; oi++) {
        if (order[oi] < BENCH_MAX_ROWS) {
            struct bench_row *row = &e->prefill[order[oi]];
            int P = plan->prefill[order[oi]];
            row->tokens = P;
            if (P > n_ctx || P > n_ids) {
                row->skipped = 1;
                snprintf(row->note, sizeof row->note, "longer than the context (%d)", n_ctx);
                continue;
            }
            bench_progress("%s: prefill %d tokens", backend, P);
            if (r1_session_truncate(s, 0)) goto out;
            double t0 = r1_now();
            const float *l = r1_session_forward(s, ids, P, NULL);
            double dt = r1_now() - t0;
            if (!l) goto out;
            if (!hashed) e->logits_hash = fnv1a(l, (size_t)c->vocab), hashed = 1;
            row->tok_s = P / dt;
            row->ms_tok = dt * 1e3 / P;
            continue;
        }
        int di = order[oi] - BENCH_MAX_ROWS;
        struct bench_row *row = &e->decode[di];
        int ctx = plan->decode_ctx[di], n = plan->decode_tokens;
        if (ctx + n > n_ctx) ctx = n_ctx - n; /* a model with a short max_position_embeddings */
        row->tokens = n;
        row->ctx = ctx;
        if (ctx < 0) {
            row->skipped = 1;
            snprintf(row->note, sizeof row->note, "the context holds only %d positions", n_ctx);
            continue;
        }
        char who[64];
        snprintf(who, sizeof who, "%s decode at ctx %d", backend, ctx);
        if (reach(&r, ctx, who)) goto out;
        if (insitu) r1_session_profile_reset(s);
        int32_t id = ids[ctx % n_ids];
        double sample_us = 0, total = 0;
        for (int i = 0; i < n; i++) {
            bench_progress("%s: token %d/%d", who, i + 1, n);
            double t0 = r1_now();
            const float *l = r1_session_forward(s, &id, 1, NULL);
            if (!l) goto out;
            memcpy(logits, l, sizeof(float) * (size_t)c->vocab);
            double t1 = r1_now();
            id = r1_sampler_sample(smp, logits);
            double t2 = r1_now();
            sample_us += (t2 - t1) * 1e6;
            step[i] = t2 - t0;
            total += step[i];
        }
        qsort(step, (size_t)n, sizeof *step, cmp_double);
        double med = n % 2 ? step[n / 2] : 0.5 * (step[n / 2 - 1] + step[n / 2]);
        row->tok_s = n / total;
        row->ms_tok = med * 1e3;
        row->bytes_tok = bench_decode_bytes(m, kvt, ctx + n / 2);
        row->ceiling_tok_s = bw_gbps * 1e9 / row->bytes_tok;
        row->frac = row->ceiling_tok_s > 0 ? row->tok_s / row->ceiling_tok_s : 0;
        if (insitu && plan->decode_ctx[di] == plan->insitu_ctx) {
            const char *names[BENCH_MAX_KERNELS];
            double us[BENCH_MAX_KERNELS], tot = sample_us;
            long calls[BENCH_MAX_KERNELS];
            int k = r1_session_profile(s, names, us, calls, BENCH_MAX_KERNELS - 1);
            memset(insitu, 0, sizeof *insitu);
            insitu->steps = n;
            insitu->ctx = ctx;
            insitu->step_us = total * 1e6 / n;
            for (int j = 0; j < k; j++) {
                insitu->r[j] = (struct bench_insitu_row){
                    .name = names[j], .calls_step = (double)calls[j] / n, .us_step = us[j] / n};
                tot += us[j];
            }
            insitu->r[k] = (struct bench_insitu_row){.name = "sample", .calls_step = 1, .us_step = sample_us / n};
            insitu->n = k + 1;
            for (int j = 0; j < insitu->n; j++) insitu->r[j].share = tot > 0 ? insitu->r[j].us_step * n / tot : 0;
        }
    }
    rc = 0;
out:
    if (rc) r1_err_prefix("%s end to end", backend);
    r1_sampler_free(smp);
    free(step);
    free(logits);
    free(ids);
    r1_session_free(s);
    return rc;
}
