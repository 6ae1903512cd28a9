/*
 * ctx.c - the context a session or batch gets when none is asked for: the
 * model's trained length (max_position_embeddings), capped where the KV
 * caches would not fit in the free memory. It reads /proc/meminfo and
 * allocates nothing; the session allocates what it says.
 */
#include <stdio.h>
#include <string.h>

#include "kernels/kernels.h"
#include "r1infer.h"
#include "model/model.h"
#include "runtime/session.h"

#define CTX_DEVICE_DEFAULT 4096 /* device backends: their memory is not the host's */
#define CTX_STEP 256            /* a capped context is a multiple of this */
#define CTX_MIN 256             /* ... and at least this (or the model's length) */

/* MemAvailable in bytes, 0 if unknown. */
static unsigned long long mem_available(void) {
    FILE *f = fopen("/proc/meminfo", "r");
    if (!f) return 0;
    char line[256];
    unsigned long long kb = 0;
    while (fgets(line, sizeof line, f))
        if (sscanf(line, "MemAvailable: %llu kB", &kb) == 1) break;
    fclose(f);
    return kb * 1024ull;
}

/* What the KV caches may take of avail free bytes: a quarter of it, at
 * least 1 GiB, is left to the rest of the process (scratch, the server's
 * buffers) and to the machine. */
static unsigned long long kv_room(unsigned long long avail) {
    unsigned long long head = avail / 4 > (1ull << 30) ? avail / 4 : (1ull << 30);
    return avail > head ? avail - head : 0;
}

int r1_ctx_pick(int max_pos, size_t pos_bytes, unsigned long long avail, int *capped) {
    *capped = 0;
    if (max_pos < 1) max_pos = 1;
    if (!avail || !pos_bytes) return max_pos;
    unsigned long long fit = kv_room(avail) / pos_bytes;
    if (fit >= (unsigned long long)max_pos) return max_pos;
    *capped = 1;
    int n = (int)(fit / CTX_STEP * CTX_STEP);
    int floor = max_pos < CTX_MIN ? max_pos : CTX_MIN;
    return n < floor ? floor : n;
}

size_t r1_kv_pos_bytes(const struct r1_config *c, enum r1_dtype kv) {
    return 2 * (size_t)c->n_layer * c->n_kv_head * r1_dtype_row_bytes(kv, c->head_dim);
}

int r1_ctx_default(const r1_model_t *m, int n_seq, enum r1_dtype kv_dtype, const char *backend, char *note,
                   size_t cap) {
    const struct r1_config *c = &m->cfg;
    const struct r1_backend *be = r1_backend_find(backend ? backend : "cpu");
    char scratch[8];
    if (!note) note = scratch, cap = sizeof scratch;
    if (n_seq < 1) n_seq = 1;
    if (be && be->dev) {
        int n = c->max_pos < CTX_DEVICE_DEFAULT ? c->max_pos : CTX_DEVICE_DEFAULT;
        snprintf(note, cap, "context %d tokens (the %s backend's default; --ctx N for up to the model's %d)", n,
                 be->name, c->max_pos);
        return n;
    }
    enum r1_dtype kvt = kv_dtype != R1_DTYPE_AUTO ? kv_dtype : be ? be->kv_dtype : R1_DTYPE_F16;
    size_t pos_bytes = r1_kv_pos_bytes(c, kvt) * (size_t)n_seq;
    unsigned long long avail = mem_available();
    int capped;
    int n = r1_ctx_pick(c->max_pos, pos_bytes, avail, &capped);
    const char *per = n_seq > 1 ? " per sequence" : "";
    char pool[64] = "";
    if (n_seq > 1) snprintf(pool, sizeof pool, " for %d sequences", n_seq);
    if (capped)
        snprintf(note, cap,
                 "context %d tokens%s, not the model's %d: a longer %s KV cache%s would not fit in the %.1f GB "
                 "of free memory (--ctx N to choose)",
                 n, per, c->max_pos, r1_dtype_name(kvt), pool, avail / 1e9);
    else
        snprintf(note, cap, "context %d tokens%s, the model's max_position_embeddings (%s KV cache%s: %.2f GB)", n, per,
                 r1_dtype_name(kvt), pool, (double)pos_bytes * n / 1e9);
    return n;
}

long r1_kv_pool_default(const r1_model_t *m, int n_seq, int n_ctx, enum r1_dtype kv_dtype, const char *backend,
                        unsigned long long budget, char *note, size_t cap) {
    const struct r1_config *c = &m->cfg;
    const struct r1_backend *be = r1_backend_find(backend ? backend : "cpu");
    char scratch[8];
    if (!note) note = scratch, cap = sizeof scratch;
    if (n_seq < 1) n_seq = 1;
    if (n_ctx < 1) n_ctx = c->max_pos;
    if (be && be->dev) {
        snprintf(note, cap,
                 "KV caches of %d positions for each of %d conversations (the %s backend has no shared pool)", n_ctx,
                 n_seq, be->name);
        return 0;
    }
    enum r1_dtype kvt = kv_dtype != R1_DTYPE_AUTO ? kv_dtype : be ? be->kv_dtype : R1_DTYPE_F16;
    const size_t pos_bytes = r1_kv_pos_bytes(c, kvt);
    const long want = (long)n_seq * ((n_ctx + R1_KV_PAGE - 1) / R1_KV_PAGE * R1_KV_PAGE); /* whole blocks each */
    long n;
    if (budget) {
        n = (long)(budget / pos_bytes) / R1_KV_PAGE * R1_KV_PAGE;
        if (n > want) n = (want + R1_KV_PAGE - 1) / R1_KV_PAGE * R1_KV_PAGE;
        snprintf(note, cap,
                 "KV pool of %ld positions (%s, %.2f GB of --kv-budget %.2f GB) shared by %d conversations of up to %d",
                 n, r1_dtype_name(kvt), (double)n * pos_bytes / 1e9, budget / 1e9, n_seq, n_ctx);
        return n;
    }
    unsigned long long avail = mem_available();
    int capped = 0;
    n = want;
    if (avail) { /* the rule of r1_ctx_pick, in positions of the whole pool */
        unsigned long long fit = kv_room(avail) / pos_bytes;
        if (fit < (unsigned long long)want) n = (long)fit, capped = 1;
    }
    n = n / R1_KV_PAGE * R1_KV_PAGE;
    if (n < 4 * R1_KV_PAGE) n = 4 * R1_KV_PAGE;
    snprintf(note, cap,
             "KV pool of %ld positions (%s, %.2f GB, committed as used) shared by %d conversations of up to %d%s", n,
             r1_dtype_name(kvt), (double)n * pos_bytes / 1e9, n_seq, n_ctx,
             capped ? ": what fits in the free memory (--kv-budget to choose)" : "");
    return n;
}
