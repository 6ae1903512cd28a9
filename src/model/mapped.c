/*
 * mapped.c - the files a loaded model points into: opening a model file
 * (mapped, or read into private pages with --no-mmap), then, once the
 * builder has chosen which matrices it uses in place, keeping the files
 * they lie in, giving back every other page of them, asking for huge pages
 * where decode streams them, and --mlock. No parsing and no conversion here.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "model/model.h"

int r1_model_open_file(struct r1_file *f, const char *path, const struct r1_load_opts *opts) {
    if (!opts->no_mmap) return r1_file_map(f, path);
    /* the whole file in private memory first: it must fit */
    struct stat st;
    uint64_t avail = r1_mem_available();
    if (stat(path, &st) == 0 && (uint64_t)st.st_size > avail)
        return r1_err("%s: reading the model into memory (--no-mmap) needs %.2f GiB, but only %.2f GiB "
                      "is available; load it mapped (without --no-mmap) or free memory",
                      path, (double)st.st_size / (1u << 30), (double)avail / (1u << 30));
    return r1_file_read_private(f, path);
}

static size_t mat_bytes(const struct r1_mat *w) { return (size_t)w->rows * w->row_bytes; }

/* Whether p lies in [base, base + n). */
static int inside(const void *p, const void *base, size_t n) {
    return (uintptr_t)p >= (uintptr_t)base && (uintptr_t)p < (uintptr_t)base + n;
}

/* A matrix used in place: not in the arena. */
static int in_place(const struct r1_model *m, const struct r1_mat *w) {
    return w->data && !inside(w->data, m->arena, m->arena_size);
}

/* Call fn on every matrix of m that points into a file (the tied lm_head once). */
static int each_in_place(const struct r1_model *m, int (*fn)(const struct r1_mat *w)) {
    const struct r1_mat *top[2] = {&m->emb, m->cfg.tied ? NULL : &m->lm_head};
    for (int i = 0; i < 2; i++)
        if (top[i] && in_place(m, top[i]) && fn(top[i])) return -1;
    for (int l = 0; l < m->cfg.n_layer; l++) {
        const struct r1_layer *L = &m->layers[l];
        const struct r1_mat *w[4] = {&L->wqkv, &L->wo, &L->wgu, &L->wdown};
        for (int i = 0; i < 4; i++)
            if (in_place(m, w[i]) && fn(w[i])) return -1;
    }
    return 0;
}

/* the file the callbacks below look at */
static _Thread_local const struct r1_file *file_in_use;

/* each_in_place callback: nonzero (stop) when w lies in file_in_use */
static int points_into_file(const struct r1_mat *w) { return inside(w->data, file_in_use->data, file_in_use->size); }

/* madvise [lo, hi) of a mapping, rounded out to whole pages. */
static void advise(const uint8_t *lo, const uint8_t *hi, int advice) {
    uintptr_t ps = (uintptr_t)sysconf(_SC_PAGESIZE), a = (uintptr_t)lo & ~(ps - 1);
    if ((uintptr_t)hi > a) madvise((void *)a, (uintptr_t)hi - a, advice);
}

/* each_in_place callback: the span of the matrices in file_in_use that
 * decode streams (all but an untied embedding table) */
static _Thread_local const uint8_t *span_lo, *span_hi;
static _Thread_local const struct r1_model *span_model;
static int add_to_span(const struct r1_mat *w) {
    const uint8_t *lo = w->data, *hi = lo + mat_bytes(w);
    if (w == &span_model->emb && !span_model->cfg.tied) return 0;
    if (!inside(lo, file_in_use->data, file_in_use->size)) return 0;
    if (!span_lo || lo < span_lo) span_lo = lo;
    if (!span_hi || hi > span_hi) span_hi = hi;
    return 0;
}

/* The matrices of file f that decode streams come in 2 MiB folios where the
 * file system can, mapped as huge pages: fewer TLB misses. One range over
 * them all, as a huge page cannot straddle two. An untied embedding table is
 * read a row a token: small pages, or each row would map 2 MiB. */
static void advise_file(const struct r1_model *m, const struct r1_file *f) {
    file_in_use = f, span_model = m, span_lo = span_hi = NULL;
    each_in_place(m, add_to_span);
#if defined(MADV_HUGEPAGE) && defined(MADV_NOHUGEPAGE)
    if (span_lo) advise(span_lo, span_hi, MADV_HUGEPAGE);
    if (!m->cfg.tied && inside(m->emb.data, f->data, f->size))
        advise(m->emb.data, (const uint8_t *)m->emb.data + mat_bytes(&m->emb), MADV_NOHUGEPAGE);
#endif
}

static int lock_mat(const struct r1_mat *w) { return r1_mem_lock(w->data, (size_t)w->rows * w->row_bytes); }

/* each_in_place callback: collect the ranges of the matrices in file_in_use */
static _Thread_local const uint8_t *(*ranges)[2];
static _Thread_local int n_ranges, cap_ranges;
static int add_range(const struct r1_mat *w) {
    if (inside(w->data, file_in_use->data, file_in_use->size) && n_ranges < cap_ranges) {
        ranges[n_ranges][0] = w->data;
        ranges[n_ranges][1] = (const uint8_t *)w->data + mat_bytes(w);
        n_ranges++;
    }
    return 0;
}
static int cmp_range(const void *a, const void *b) {
    const uint8_t *x = ((const uint8_t *const *)a)[0], *y = ((const uint8_t *const *)b)[0];
    return x < y ? -1 : x > y;
}

/* Give back every page of file f that no matrix used in place lies on
 * (header, tokenizer, vectors, the tensors converted): what a load left
 * mapped at the edges of what it read. */
static void release_unused(const struct r1_model *m, const struct r1_file *f) {
    int cap = 2 + 4 * m->cfg.n_layer; /* embedding, lm_head, 4 per layer */
    const uint8_t *(*r)[2] = calloc((size_t)cap, sizeof *r);
    if (!r) return;
    file_in_use = f, ranges = r, n_ranges = 0, cap_ranges = cap;
    each_in_place(m, add_range);
    qsort(r, (size_t)n_ranges, sizeof *r, cmp_range);
    const uint8_t *at = f->data;
    for (int i = 0; i <= n_ranges; i++) {
        const uint8_t *next = i < n_ranges ? r[i][0] : f->data + f->size;
        if (next > at) r1_mem_release(at, (size_t)(next - at)); /* whole pages only */
        if (i < n_ranges && r[i][1] > at) at = r[i][1];
    }
    free(r);
}

int r1_model_keep_files(struct r1_model *m, struct r1_file *files, int n, const struct r1_load_opts *opts) {
    m->maps = calloc((size_t)(n > 0 ? n : 1), sizeof *m->maps);
    for (int i = 0; i < n && !m->maps; i++) r1_file_unmap(&files[i]);
    if (!m->maps) return r1_err("out of memory");
    for (int i = 0; i < n; i++) {
        file_in_use = &files[i];
        if (each_in_place(m, points_into_file)) {
            release_unused(m, &files[i]);
            if (!files[i].anon) advise_file(m, &files[i]);
            m->maps[m->n_maps++] = files[i];
        } else {
            r1_file_unmap(&files[i]);
        }
        memset(&files[i], 0, sizeof files[i]);
        files[i].fd = -1;
    }
    if (!opts->mlock) return 0;
    uint64_t avail = r1_mem_available();
    if (m->in_place_bytes > avail) /* the arena is resident already */
        return r1_err("%s: --mlock needs %.2f GiB more memory to lock the weights used from the file, "
                      "but only %.2f GiB is available",
                      m->path ? m->path : "the model", (double)m->in_place_bytes / (1u << 30),
                      (double)avail / (1u << 30));
    if (r1_mem_lock(m->arena, m->arena_size) || each_in_place(m, lock_mat))
        return r1_err_prefix("%s: --mlock", m->path ? m->path : "the model");
    return 0;
}
