/*
 * gguf_write.c - a GGUF v3 writer: metadata is collected in memory in the
 * order given, tensors are registered by name/dtype/shape, and the file is
 * written in one pass, each tensor's bytes produced by a callback just
 * before they are written (so a converter never holds the whole model).
 * Little-endian only, alignment 32. Knows nothing about Qwen2.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "gguf/gguf.h"
#include "util/util.h"

struct buf {
    uint8_t *p;
    size_t n, cap;
};

struct wtensor {
    char *name;
    enum r1_dtype dtype;
    int ndim;
    int64_t shape[R1_GGUF_MAX_DIMS];
    size_t size, offset;
};

struct r1_gguf_writer {
    struct buf kv;
    uint64_t n_kv;
    struct wtensor *t;
    size_t n_t, cap_t, data_size;
    int oom;
};

static int put(struct r1_gguf_writer *w, const void *p, size_t n) {
    struct buf *b = &w->kv;
    if (w->oom) return -1;
    if (b->n + n > b->cap) {
        size_t cap = b->cap ? b->cap : 4096;
        while (cap < b->n + n) cap *= 2;
        uint8_t *np = realloc(b->p, cap);
        if (!np) {
            w->oom = 1;
            return r1_err("out of memory building GGUF metadata");
        }
        b->p = np;
        b->cap = cap;
    }
    memcpy(b->p + b->n, p, n);
    b->n += n;
    return 0;
}

static int put_u32(struct r1_gguf_writer *w, uint32_t v) {
    uint8_t b[4] = {(uint8_t)v, (uint8_t)(v >> 8), (uint8_t)(v >> 16), (uint8_t)(v >> 24)};
    return put(w, b, 4);
}

static int put_u64(struct r1_gguf_writer *w, uint64_t v) {
    uint8_t b[8];
    for (int i = 0; i < 8; i++) b[i] = (uint8_t)(v >> (8 * i));
    return put(w, b, 8);
}

static int put_str(struct r1_gguf_writer *w, const char *s) {
    size_t n = strlen(s);
    return put_u64(w, n) || put(w, s, n) ? -1 : 0;
}

static int key(struct r1_gguf_writer *w, const char *k, uint32_t type) {
    w->n_kv++;
    return put_str(w, k) || put_u32(w, type) ? -1 : 0;
}

struct r1_gguf_writer *r1_gguf_writer_new(void) {
    struct r1_gguf_writer *w = calloc(1, sizeof *w);
    if (!w) r1_err("out of memory");
    return w;
}

void r1_gguf_writer_free(struct r1_gguf_writer *w) {
    if (!w) return;
    for (size_t i = 0; i < w->n_t; i++) free(w->t[i].name);
    free(w->t);
    free(w->kv.p);
    free(w);
}

int r1_gguf_w_str(struct r1_gguf_writer *w, const char *k, const char *val) {
    return key(w, k, R1_GGUF_STRING) || put_str(w, val) ? -1 : 0;
}

int r1_gguf_w_u32(struct r1_gguf_writer *w, const char *k, uint32_t val) {
    return key(w, k, R1_GGUF_U32) || put_u32(w, val) ? -1 : 0;
}

int r1_gguf_w_f32(struct r1_gguf_writer *w, const char *k, float val) {
    uint32_t u;
    memcpy(&u, &val, 4);
    return key(w, k, R1_GGUF_F32) || put_u32(w, u) ? -1 : 0;
}

int r1_gguf_w_bool(struct r1_gguf_writer *w, const char *k, int val) {
    uint8_t b = val != 0;
    return key(w, k, R1_GGUF_BOOL) || put(w, &b, 1) ? -1 : 0;
}

int r1_gguf_w_copy(struct r1_gguf_writer *w, const struct r1_gguf_kv *kv) {
    w->n_kv++;
    if (put_u64(w, kv->key.len) || put(w, kv->key.s, kv->key.len) || put_u32(w, kv->type)) return -1;
    if (kv->type == R1_GGUF_ARRAY && (put_u32(w, kv->arr_type) || put_u64(w, kv->arr_n))) return -1;
    return put(w, kv->val, kv->val_size);
}

int r1_gguf_w_arr_str(struct r1_gguf_writer *w, const char *k, const char *const *vals, size_t n) {
    if (key(w, k, R1_GGUF_ARRAY) || put_u32(w, R1_GGUF_STRING) || put_u64(w, n)) return -1;
    for (size_t i = 0; i < n; i++)
        if (put_str(w, vals[i])) return -1;
    return 0;
}

int r1_gguf_w_arr_i32(struct r1_gguf_writer *w, const char *k, const int32_t *vals, size_t n) {
    if (key(w, k, R1_GGUF_ARRAY) || put_u32(w, R1_GGUF_I32) || put_u64(w, n)) return -1;
    for (size_t i = 0; i < n; i++)
        if (put_u32(w, (uint32_t)vals[i])) return -1;
    return 0;
}

#define ALIGN R1_GGUF_DEFAULT_ALIGNMENT

static size_t align_up(size_t x) { return (x + ALIGN - 1) & ~(size_t)(ALIGN - 1); }

/* The ggml type that holds dtype t, or NULL (the kernels' private layouts). */
static const struct r1_ggml_type *ggml_type_for(enum r1_dtype t) {
    for (uint32_t i = 0; i < 64; i++) {
        const struct r1_ggml_type *g = r1_ggml_type_info(i);
        if (g && g->dtype == (int)t) return g;
    }
    return NULL;
}

int r1_gguf_w_tensor(struct r1_gguf_writer *w, const char *name, enum r1_dtype dtype, int ndim, const int64_t *shape) {
    if (ndim < 1 || ndim > R1_GGUF_MAX_DIMS) return r1_err("tensor '%s': %d dimensions", name, ndim);
    const struct r1_ggml_type *g = ggml_type_for(dtype);
    const int64_t cols = shape[ndim - 1];
    if (!g) return r1_err("tensor '%s': dtype %d has no GGUF type", name, (int)dtype);
    if (cols < 0 || cols % g->block)
        return r1_err("tensor '%s': %lld columns cannot be stored as %s", name, (long long)cols, g->name);
    size_t size = (size_t)(cols / g->block) * (size_t)g->block_bytes;
    for (int d = 0; d < ndim - 1; d++)
        if (shape[d] < 0 || !r1_mul_ok(size, (size_t)shape[d], &size))
            return r1_err("tensor '%s': shape overflows", name);
    if (w->n_t == w->cap_t) {
        size_t cap = w->cap_t ? 2 * w->cap_t : 64;
        struct wtensor *nt = realloc(w->t, cap * sizeof *nt);
        if (!nt) return r1_err("out of memory");
        w->t = nt;
        w->cap_t = cap;
    }
    struct wtensor *t = &w->t[w->n_t];
    memset(t, 0, sizeof *t);
    if (!(t->name = strdup(name))) return r1_err("out of memory");
    t->dtype = dtype;
    t->ndim = ndim;
    memcpy(t->shape, shape, (size_t)ndim * sizeof *shape);
    t->size = size;
    t->offset = w->data_size;
    w->data_size = align_up(w->data_size + size);
    w->n_t++;
    return 0;
}

static int write_all(FILE *f, const void *p, size_t n, const char *path) {
    if (n && fwrite(p, 1, n, f) != n) return r1_err("%s: write failed (disk full?)", path);
    return 0;
}

static int pad(FILE *f, size_t at, const char *path) {
    static const uint8_t zero[ALIGN];
    return write_all(f, zero, align_up(at) - at, path);
}

int r1_gguf_w_write(struct r1_gguf_writer *w, const char *path, r1_gguf_fill_fn fill, void *ctx, int progress) {
    if (w->oom) return -1;
    /* tensor infos go after the metadata in the same buffer */
    size_t kv_end = w->kv.n;
    for (size_t i = 0; i < w->n_t; i++) {
        const struct wtensor *t = &w->t[i];
        if (put_str(w, t->name) || put_u32(w, (uint32_t)t->ndim)) return -1;
        for (int d = t->ndim - 1; d >= 0; d--) /* innermost first */
            if (put_u64(w, (uint64_t)t->shape[d])) return -1;
        if (put_u32(w, r1_ggml_type_of(t->dtype)) || put_u64(w, t->offset)) return -1;
    }
    FILE *f = fopen(path, "wb");
    if (!f) {
        w->kv.n = kv_end;
        return r1_err("%s: cannot create the file", path);
    }
    uint8_t hdr[24];
    uint64_t fields[3] = {3, w->n_t, w->n_kv};
    memcpy(hdr, "GGUF", 4);
    for (int i = 0; i < 4; i++) hdr[4 + i] = (uint8_t)(fields[0] >> (8 * i));
    for (int i = 0; i < 8; i++) hdr[8 + i] = (uint8_t)(fields[1] >> (8 * i));
    for (int i = 0; i < 8; i++) hdr[16 + i] = (uint8_t)(fields[2] >> (8 * i));
    int rc = -1;
    uint8_t *tmp = NULL;
    size_t tmp_cap = 0, at = 24 + w->kv.n;
    if (write_all(f, hdr, 24, path) || write_all(f, w->kv.p, w->kv.n, path) || pad(f, at, path)) goto out;
    int tty = progress && isatty(2);
    for (size_t i = 0; i < w->n_t; i++) {
        struct wtensor *t = &w->t[i];
        if (t->size > tmp_cap) {
            free(tmp);
            tmp_cap = t->size;
            if (!(tmp = malloc(tmp_cap))) {
                r1_err("out of memory (%zu bytes for tensor '%s')", t->size, t->name);
                goto out;
            }
        }
        if (fill(ctx, (int)i, tmp, t->size) || write_all(f, tmp, t->size, path) || pad(f, t->size, path)) goto out;
        if (tty) fprintf(stderr, "\rwriting %s: tensor %zu/%zu", path, i + 1, w->n_t);
    }
    if (tty) fprintf(stderr, "\r\033[K");
    rc = 0;
out:
    free(tmp);
    if (fclose(f) && rc == 0) rc = r1_err("%s: write failed (disk full?)", path);
    w->kv.n = kv_end;
    return rc;
}
