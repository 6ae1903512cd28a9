/*
 * gguf.c - see gguf.h: the GGUF parser and the ggml type table. A pure
 * function of (pointer, size): every read goes through the cursor, which
 * checks the remaining length first; every count is bounded by the bytes
 * left before anything is allocated. No I/O, no copies of file data.
 */
#include "gguf/gguf.h"

#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util/util.h"

#define MAX_NAME 65535                                    /* longest key or tensor name accepted */
#define MAX_DEPTH 8                                       /* nesting of arrays */
#define SHOW(x) (int)((x).len > 80 ? 80 : (x).len), (x).s /* a name for %.*s */

/* ------------------------------------------------------------ type table */

static const struct r1_ggml_type TYPES[] = {
    [0] = {"f32", 1, 4, R1_DTYPE_F32},
    [1] = {"f16", 1, 2, R1_DTYPE_F16},
    [2] = {"q4_0", 32, 18, R1_DTYPE_Q4_0},
    [3] = {"q4_1", 32, 20, R1_DTYPE_Q4_1},
    [6] = {"q5_0", 32, 22, R1_DTYPE_Q5_0},
    [7] = {"q5_1", 32, 24, R1_DTYPE_Q5_1},
    [8] = {"q8_0", 32, 34, R1_DTYPE_Q8_0},
    [9] = {"q8_1", 32, 36, -1},
    [10] = {"q2_K", 256, 84, -1},
    [11] = {"q3_K", 256, 110, -1},
    [12] = {"q4_K", 256, 144, R1_DTYPE_Q4_K},
    [13] = {"q5_K", 256, 176, R1_DTYPE_Q5_K},
    [14] = {"q6_K", 256, 210, R1_DTYPE_Q6_K},
    [15] = {"q8_K", 256, 292, -1},
    [16] = {"iq2_xxs", 256, 66, -1},
    [17] = {"iq2_xs", 256, 74, -1},
    [18] = {"iq3_xxs", 256, 98, -1},
    [19] = {"iq1_s", 256, 50, -1},
    [20] = {"iq4_nl", 32, 18, -1},
    [21] = {"iq3_s", 256, 110, -1},
    [22] = {"iq2_s", 256, 82, -1},
    [23] = {"iq4_xs", 256, 136, -1},
    [24] = {"i8", 1, 1, -1},
    [25] = {"i16", 1, 2, -1},
    [26] = {"i32", 1, 4, -1},
    [27] = {"i64", 1, 8, -1},
    [28] = {"f64", 1, 8, -1},
    [29] = {"iq1_m", 256, 56, -1},
    [30] = {"bf16", 1, 2, R1_DTYPE_BF16},
    [34] = {"tq1_0", 256, 54, -1},
    [35] = {"tq2_0", 256, 66, -1},
    [39] = {"mxfp4", 32, 17, -1},
    [40] = {"nvfp4", 64, 36, -1},
    [41] = {"q1_0", 128, 18, -1},
};

const struct r1_ggml_type *r1_ggml_type_info(uint32_t id) {
    if (id >= sizeof TYPES / sizeof TYPES[0] || !TYPES[id].name) return NULL;
    return &TYPES[id];
}

uint32_t r1_ggml_type_of(enum r1_dtype t) {
    for (uint32_t i = 0; i < sizeof TYPES / sizeof TYPES[0]; i++)
        if (TYPES[i].name && TYPES[i].dtype == (int)t) return i;
    R1_ASSERT(!"dtype without a ggml type");
    return 0;
}

/* ---------------------------------------------------------------- cursor */

struct cur {
    const uint8_t *base, *p, *end;
    const char *path;
};

static size_t left(const struct cur *c) { return (size_t)(c->end - c->p); }
static size_t at(const struct cur *c) { return (size_t)(c->p - c->base); }

static uint64_t le(const uint8_t *p, int n) {
    uint64_t v = 0;
    for (int i = n - 1; i >= 0; i--) v = v << 8 | p[i];
    return v;
}

static int rd(struct cur *c, int n, uint64_t *v, const char *what) {
    *v = 0;
    if (left(c) < (size_t)n)
        return r1_err("%s: truncated GGUF file: %s at byte %zu runs past the end (%zu bytes)", c->path, what, at(c),
                      (size_t)(c->end - c->base));
    *v = le(c->p, n);
    c->p += n;
    return 0;
}

static int rd_str(struct cur *c, struct r1_gguf_str *s, size_t max, const char *what) {
    uint64_t n;
    if (rd(c, 8, &n, what)) return -1;
    if (n > left(c))
        return r1_err("%s: corrupt GGUF file: %s at byte %zu claims %llu bytes but only %zu "
                      "remain (truncated or corrupt)",
                      c->path, what, at(c) - 8, (unsigned long long)n, left(c));
    if (n > max)
        return r1_err("%s: corrupt GGUF file: %s at byte %zu is %llu bytes long (at most %zu)", c->path, what,
                      at(c) - 8, (unsigned long long)n, max);
    s->s = (const char *)c->p;
    s->len = (size_t)n;
    c->p += n;
    return 0;
}

static const int SCALAR_SIZE[R1_GGUF_VTYPE_COUNT] = {
    [R1_GGUF_U8] = 1,  [R1_GGUF_I8] = 1,   [R1_GGUF_U16] = 2, [R1_GGUF_I16] = 2, [R1_GGUF_U32] = 4, [R1_GGUF_I32] = 4,
    [R1_GGUF_F32] = 4, [R1_GGUF_BOOL] = 1, [R1_GGUF_U64] = 8, [R1_GGUF_I64] = 8, [R1_GGUF_F64] = 8,
};

/* Skip (and validate) one value of `type`; `key` names it in errors. */
static int skip_value(struct cur *c, uint32_t type, int depth, struct r1_gguf_str key) {
    if (type >= R1_GGUF_VTYPE_COUNT)
        return r1_err("%s: corrupt GGUF file: key '%.*s' has unknown value type %u", c->path, SHOW(key), type);
    if (type == R1_GGUF_STRING) {
        struct r1_gguf_str s;
        char what[128];
        snprintf(what, sizeof what, "string value of key '%.*s'", SHOW(key));
        return rd_str(c, &s, SIZE_MAX, what);
    }
    if (type != R1_GGUF_ARRAY) {
        if (left(c) < (size_t)SCALAR_SIZE[type])
            return r1_err("%s: truncated GGUF file: value of key '%.*s' runs past the end", c->path, SHOW(key));
        c->p += SCALAR_SIZE[type];
        return 0;
    }
    if (depth >= MAX_DEPTH)
        return r1_err("%s: corrupt GGUF file: key '%.*s' nests arrays deeper than %d", c->path, SHOW(key), MAX_DEPTH);
    uint64_t et, n;
    if (rd(c, 4, &et, "array type") || rd(c, 8, &n, "array length")) return -1;
    if (et >= R1_GGUF_VTYPE_COUNT)
        return r1_err("%s: corrupt GGUF file: array '%.*s' has unknown element type %llu", c->path, SHOW(key),
                      (unsigned long long)et);
    /* the smallest encoding of an element bounds the count before any loop */
    size_t min = et == R1_GGUF_STRING ? 8 : et == R1_GGUF_ARRAY ? 12 : (size_t)SCALAR_SIZE[et];
    if (n > left(c) / min)
        return r1_err("%s: corrupt GGUF file: array '%.*s' claims %llu elements but only %zu "
                      "bytes remain",
                      c->path, SHOW(key), (unsigned long long)n, left(c));
    if (et != R1_GGUF_STRING && et != R1_GGUF_ARRAY) {
        c->p += (size_t)n * min;
        return 0;
    }
    for (uint64_t i = 0; i < n; i++)
        if (skip_value(c, (uint32_t)et, depth + 1, key)) return -1;
    return 0;
}

/* ----------------------------------------------------------------- parse */

static _Thread_local const struct r1_gguf *sort_ctx; /* qsort has no context argument */

static int name_cmp(struct r1_gguf_str a, struct r1_gguf_str b) {
    size_t n = a.len < b.len ? a.len : b.len;
    int r = memcmp(a.s, b.s, n);
    return r ? r : (a.len > b.len) - (a.len < b.len);
}
static int kv_cmp(const void *a, const void *b) {
    return name_cmp(sort_ctx->kv[*(const size_t *)a].key, sort_ctx->kv[*(const size_t *)b].key);
}
static int tensor_cmp(const void *a, const void *b) {
    return name_cmp(sort_ctx->tensors[*(const size_t *)a].name, sort_ctx->tensors[*(const size_t *)b].name);
}

static int parse_kvs(struct r1_gguf *g, struct cur *c) {
    for (size_t i = 0; i < g->n_kv; i++) {
        struct r1_gguf_kv *kv = &g->kv[i];
        char what[64];
        snprintf(what, sizeof what, "key %zu", i);
        uint64_t type;
        if (rd_str(c, &kv->key, MAX_NAME, what)) return -1;
        if (rd(c, 4, &type, "value type")) return -1;
        kv->type = (uint32_t)type;
        if (type >= R1_GGUF_VTYPE_COUNT)
            return r1_err("%s: corrupt GGUF file: key '%.*s' has unknown value type %llu", c->path, SHOW(kv->key),
                          (unsigned long long)type);
        const uint8_t *start = c->p;
        if (skip_value(c, kv->type, 0, kv->key)) return -1;
        kv->val = start;
        if (kv->type == R1_GGUF_ARRAY) {
            kv->arr_type = (uint32_t)le(start, 4);
            kv->arr_n = le(start + 4, 8);
            kv->val = start + 12;
        }
        kv->val_size = (size_t)(c->p - kv->val);
    }
    return 0;
}

static int parse_tensor_infos(struct r1_gguf *g, struct cur *c) {
    for (size_t i = 0; i < g->n_tensors; i++) {
        struct r1_gguf_tensor *t = &g->tensors[i];
        char what[64];
        snprintf(what, sizeof what, "name of tensor %zu", i);
        uint64_t nd, v;
        if (rd_str(c, &t->name, MAX_NAME, what) || rd(c, 4, &nd, "tensor dimension count")) return -1;
        if (nd < 1 || nd > R1_GGUF_MAX_DIMS)
            return r1_err("%s: corrupt GGUF file: tensor '%.*s' has %llu dimensions (1 to %d)", c->path, SHOW(t->name),
                          (unsigned long long)nd, R1_GGUF_MAX_DIMS);
        t->n_dims = (int)nd;
        for (int d = 0; d < R1_GGUF_MAX_DIMS; d++) t->ne[d] = 1;
        for (int d = 0; d < t->n_dims; d++)
            if (rd(c, 8, &t->ne[d], "tensor dimension")) return -1;
        if (rd(c, 4, &v, "tensor type")) return -1;
        t->ggml_type = (uint32_t)v;
        if (rd(c, 8, &t->offset, "tensor offset")) return -1;
        const struct r1_ggml_type *ti = r1_ggml_type_info(t->ggml_type);
        if (!ti)
            return r1_err("%s: tensor '%.*s' has unknown ggml type %u (not a type this build "
                          "knows; the file is corrupt or newer than r1infer)",
                          c->path, SHOW(t->name), t->ggml_type);
        if (t->ne[0] % (uint64_t)ti->block)
            return r1_err("%s: corrupt GGUF file: tensor '%.*s' has %llu columns, not a multiple "
                          "of the %s block (%d)",
                          c->path, SHOW(t->name), (unsigned long long)t->ne[0], ti->name, ti->block);
        size_t bytes = (size_t)(t->ne[0] / (uint64_t)ti->block);
        int ok = t->ne[0] <= SIZE_MAX && r1_mul_ok(bytes, (size_t)ti->block_bytes, &bytes);
        for (int d = 1; d < R1_GGUF_MAX_DIMS && ok; d++)
            ok = t->ne[d] <= SIZE_MAX && r1_mul_ok(bytes, (size_t)t->ne[d], &bytes);
        if (!ok || bytes > (size_t)INT64_MAX)
            return r1_err("%s: corrupt GGUF file: the shape of tensor '%.*s' overflows", c->path, SHOW(t->name));
        t->size = bytes;
    }
    return 0;
}

int r1_gguf_parse(struct r1_gguf *g, const uint8_t *data, size_t size, const char *path) {
    memset(g, 0, sizeof *g);
    g->path = path;
    struct cur c = {data, data, data + size, path};
    uint64_t version, nt, nkv;
    if (size < 4 || le(data, 4) != R1_GGUF_MAGIC) return r1_err("%s: not a GGUF file (no \"GGUF\" magic)", path);
    c.p += 4;
    if (rd(&c, 4, &version, "version")) return -1;
    if (version == 1)
        return r1_err("%s: GGUF version 1 is not supported (versions 2 and 3 are); re-convert the "
                      "model with a current converter",
                      path);
    if (version != 2 && version != 3) {
        if ((version & 0xffff) == 0) return r1_err("%s: big-endian GGUF files are not supported", path);
        return r1_err("%s: unknown GGUF version %llu (2 and 3 are supported)", path, (unsigned long long)version);
    }
    g->version = (uint32_t)version;
    if (rd(&c, 8, &nt, "tensor count") || rd(&c, 8, &nkv, "metadata count")) return -1;
    /* each key needs >= 13 bytes, each tensor info >= 32: bounds before calloc */
    if (nkv > left(&c) / 13)
        return r1_err("%s: corrupt GGUF file: %llu metadata entries cannot fit in %zu bytes", path,
                      (unsigned long long)nkv, left(&c));
    if (nt > left(&c) / 32)
        return r1_err("%s: corrupt GGUF file: %llu tensors cannot fit in %zu bytes", path, (unsigned long long)nt,
                      left(&c));
    g->n_kv = (size_t)nkv;
    g->n_tensors = (size_t)nt;
    g->kv = calloc(g->n_kv ? g->n_kv : 1, sizeof *g->kv);
    g->kv_sorted = calloc(g->n_kv ? g->n_kv : 1, sizeof *g->kv_sorted);
    g->tensors = calloc(g->n_tensors ? g->n_tensors : 1, sizeof *g->tensors);
    g->tensor_sorted = calloc(g->n_tensors ? g->n_tensors : 1, sizeof *g->tensor_sorted);
    if (!g->kv || !g->kv_sorted || !g->tensors || !g->tensor_sorted) {
        r1_err("%s: out of memory reading the GGUF header", path);
        goto fail;
    }
    if (parse_kvs(g, &c) || parse_tensor_infos(g, &c)) goto fail;

    /* sorted indices; duplicates are an error */
    sort_ctx = g;
    for (size_t i = 0; i < g->n_kv; i++) g->kv_sorted[i] = i;
    for (size_t i = 0; i < g->n_tensors; i++) g->tensor_sorted[i] = i;
    qsort(g->kv_sorted, g->n_kv, sizeof(size_t), kv_cmp);
    qsort(g->tensor_sorted, g->n_tensors, sizeof(size_t), tensor_cmp);
    sort_ctx = NULL;
    for (size_t i = 1; i < g->n_kv; i++)
        if (!name_cmp(g->kv[g->kv_sorted[i]].key, g->kv[g->kv_sorted[i - 1]].key)) {
            r1_err("%s: corrupt GGUF file: key '%.*s' appears twice", path, SHOW(g->kv[g->kv_sorted[i]].key));
            goto fail;
        }
    for (size_t i = 1; i < g->n_tensors; i++)
        if (!name_cmp(g->tensors[g->tensor_sorted[i]].name, g->tensors[g->tensor_sorted[i - 1]].name)) {
            r1_err("%s: corrupt GGUF file: tensor '%.*s' appears twice", path,
                   SHOW(g->tensors[g->tensor_sorted[i]].name));
            goto fail;
        }

    g->alignment = R1_GGUF_DEFAULT_ALIGNMENT;
    int64_t al;
    int r = r1_gguf_get_int(g, "general.alignment", 1, 1 << 30, &al);
    if (r < 0) goto fail;
    if (r > 0) {
        if (al & (al - 1)) {
            r1_err("%s: general.alignment = %lld is not a power of two", path, (long long)al);
            goto fail;
        }
        g->alignment = (size_t)al;
    }
    size_t pos = at(&c), data_off;
    if (!r1_add_ok(pos, g->alignment - 1, &data_off)) {
        r1_err("%s: corrupt GGUF file: header too large", path);
        goto fail;
    }
    data_off &= ~(g->alignment - 1);
    g->data_offset = data_off;
    size_t dsize = data_off <= size ? size - data_off : 0;
    for (size_t i = 0; i < g->n_tensors; i++) {
        struct r1_gguf_tensor *t = &g->tensors[i];
        if (t->offset % g->alignment) {
            r1_err("%s: corrupt GGUF file: tensor '%.*s' starts at data offset %llu, not a "
                   "multiple of the alignment %zu",
                   path, SHOW(t->name), (unsigned long long)t->offset, g->alignment);
            goto fail;
        }
        if (t->offset > dsize || t->size > dsize - (size_t)t->offset) {
            r1_err("%s: tensor '%.*s' (%zu bytes at data offset %llu) runs past the end of the "
                   "file (%zu data bytes): the file is truncated or corrupt",
                   path, SHOW(t->name), t->size, (unsigned long long)t->offset, dsize);
            goto fail;
        }
        t->data = data + data_off + (size_t)t->offset;
    }
    return 0;
fail:
    r1_gguf_free(g);
    return -1;
}

void r1_gguf_free(struct r1_gguf *g) {
    free(g->kv);
    free(g->kv_sorted);
    free(g->tensors);
    free(g->tensor_sorted);
    memset(g, 0, sizeof *g);
}

/* --------------------------------------------------------------- lookups */

/* The element of base (n elements of size bytes, each with its name at
 * byte offset off) whose name is key, by binary search over the sorted
 * indices; NULL if none. */
static const void *find_sorted(const void *base, size_t size, size_t off, const size_t *sorted, size_t n,
                               const char *key) {
    const struct r1_gguf_str k = {key, strlen(key)};
    size_t lo = 0, hi = n;
    while (lo < hi) {
        const size_t mid = lo + (hi - lo) / 2;
        const char *e = (const char *)base + sorted[mid] * size;
        const int r = name_cmp(*(const struct r1_gguf_str *)(e + off), k);
        if (r == 0) return e;
        if (r < 0) lo = mid + 1;
        else hi = mid;
    }
    return NULL;
}

const struct r1_gguf_kv *r1_gguf_find_kv(const struct r1_gguf *g, const char *key) {
    return find_sorted(g->kv, sizeof *g->kv, offsetof(struct r1_gguf_kv, key), g->kv_sorted, g->n_kv, key);
}

const struct r1_gguf_tensor *r1_gguf_find_tensor(const struct r1_gguf *g, const char *name) {
    return find_sorted(g->tensors, sizeof *g->tensors, offsetof(struct r1_gguf_tensor, name), g->tensor_sorted,
                       g->n_tensors, name);
}

static const char *const VNAME[R1_GGUF_VTYPE_COUNT] = {
    "uint8", "int8",   "uint16", "int16",  "uint32", "int32",   "float32",
    "bool",  "string", "array",  "uint64", "int64",  "float64",
};

static int wrong_type(const struct r1_gguf *g, const struct r1_gguf_kv *kv, const char *want) {
    return r1_err("%s: metadata '%.*s' is %s, expected %s", g->path, SHOW(kv->key), VNAME[kv->type], want);
}

int r1_gguf_get_int(const struct r1_gguf *g, const char *key, int64_t lo, int64_t hi, int64_t *out) {
    const struct r1_gguf_kv *kv = r1_gguf_find_kv(g, key);
    if (!kv) return 0;
    const uint8_t *p = kv->val;
    int neg = 0;
    uint64_t u;
    switch (kv->type) {
    case R1_GGUF_U8:
        u = p[0];
        break;
    case R1_GGUF_U16:
        u = le(p, 2);
        break;
    case R1_GGUF_U32:
        u = le(p, 4);
        break;
    case R1_GGUF_U64:
        u = le(p, 8);
        break;
    case R1_GGUF_I8:
        u = (uint64_t)(int64_t)(int8_t)p[0];
        neg = (int8_t)p[0] < 0;
        break;
    case R1_GGUF_I16:
        u = (uint64_t)(int64_t)(int16_t)le(p, 2);
        neg = (int16_t)le(p, 2) < 0;
        break;
    case R1_GGUF_I32:
        u = (uint64_t)(int64_t)(int32_t)le(p, 4);
        neg = (int32_t)le(p, 4) < 0;
        break;
    case R1_GGUF_I64:
        u = le(p, 8);
        neg = (int64_t)u < 0;
        break;
    default:
        return wrong_type(g, kv, "an integer");
    }
    if (!neg && u > (uint64_t)INT64_MAX) u = (uint64_t)INT64_MAX; /* out of range below */
    int64_t v = (int64_t)u;
    if (v < lo || v > hi)
        return r1_err("%s: metadata '%s' = %lld is out of range (%lld to %lld)", g->path, key, (long long)v,
                      (long long)lo, (long long)hi);
    *out = v;
    return 1;
}

int r1_gguf_get_float(const struct r1_gguf *g, const char *key, double *out) {
    const struct r1_gguf_kv *kv = r1_gguf_find_kv(g, key);
    if (!kv) return 0;
    if (kv->type == R1_GGUF_F32) {
        uint32_t u = (uint32_t)le(kv->val, 4);
        float f;
        memcpy(&f, &u, 4);
        *out = f;
    } else if (kv->type == R1_GGUF_F64) {
        uint64_t u = le(kv->val, 8);
        memcpy(out, &u, 8);
    } else {
        int64_t v;
        int r = r1_gguf_get_int(g, key, INT64_MIN, INT64_MAX, &v);
        if (r < 0) return wrong_type(g, kv, "a number");
        *out = (double)v;
    }
    return 1;
}

int r1_gguf_get_bool(const struct r1_gguf *g, const char *key, int *out) {
    const struct r1_gguf_kv *kv = r1_gguf_find_kv(g, key);
    if (!kv) return 0;
    if (kv->type != R1_GGUF_BOOL) return wrong_type(g, kv, "a bool");
    *out = kv->val[0] != 0;
    return 1;
}

int r1_gguf_get_str(const struct r1_gguf *g, const char *key, struct r1_gguf_str *out) {
    const struct r1_gguf_kv *kv = r1_gguf_find_kv(g, key);
    if (!kv) return 0;
    if (kv->type != R1_GGUF_STRING) return wrong_type(g, kv, "a string");
    r1_gguf_next_str(kv->val, out);
    return 1;
}

const struct r1_gguf_kv *r1_gguf_get_arr(const struct r1_gguf *g, const char *key, uint32_t type, int *bad) {
    *bad = 0;
    const struct r1_gguf_kv *kv = r1_gguf_find_kv(g, key);
    if (!kv) return NULL;
    if (kv->type != R1_GGUF_ARRAY || kv->arr_type != type) {
        *bad = 1;
        r1_err("%s: metadata '%s' must be an array of %s", g->path, key,
               type < R1_GGUF_VTYPE_COUNT ? VNAME[type] : "?");
        return NULL;
    }
    return kv;
}

const uint8_t *r1_gguf_next_str(const uint8_t *p, struct r1_gguf_str *out) {
    out->len = (size_t)le(p, 8);
    out->s = (const char *)p + 8;
    return p + 8 + out->len;
}
