/*
 * safetensors.c - see safetensors.h. Layout: u64 little-endian header length
 * N, N bytes of JSON {name: {dtype, shape, data_offsets: [begin, end]}}, then
 * the data; offsets are relative to the end of the header.
 */
#include "model/safetensors.h"

#include <jansson.h>
#include <stdlib.h>
#include <string.h>

#define MAX_HEADER (100u << 20)

int r1_st_parse(struct r1_st *st, const uint8_t *data, size_t size, const char *path) {
    memset(st, 0, sizeof *st);
    if (size < 8) return r1_err("%s: too short to be a safetensors file (%zu bytes)", path, size);
    uint64_t hlen = 0;
    for (int i = 7; i >= 0; i--) hlen = (hlen << 8) | data[i];
    if (hlen > MAX_HEADER || hlen > size - 8)
        return r1_err("%s: corrupt safetensors header: length %llu but the file has %zu bytes", path,
                      (unsigned long long)hlen, size);
    const uint8_t *base = data + 8 + hlen;
    size_t dsize = size - 8 - (size_t)hlen;
    json_error_t je;
    json_t *root = json_loadb((const char *)data + 8, (size_t)hlen, JSON_REJECT_DUPLICATES, &je);
    if (!root) return r1_err("%s: corrupt safetensors header: %s (at byte %d)", path, je.text, je.position);
    if (!json_is_object(root)) {
        json_decref(root);
        return r1_err("%s: corrupt safetensors header: not a JSON object", path);
    }
    size_t cap = json_object_size(root), names_len = 0;
    const char *key;
    json_t *val;
    json_object_foreach(root, key, val) names_len += strlen(key) + 1;
    st->tensors = calloc(cap ? cap : 1, sizeof *st->tensors);
    st->names = malloc(names_len ? names_len : 1);
    if (!st->tensors || !st->names) {
        json_decref(root);
        r1_st_free(st);
        return r1_err("%s: out of memory reading the header", path);
    }
    size_t npos = 0;
    json_object_foreach(root, key, val) {
        if (!strcmp(key, "__metadata__")) continue;
        if (!json_is_object(val)) {
            r1_err("%s: tensor '%s': entry is not an object", path, key);
            goto fail;
        }
        struct r1_src_tensor *t = &st->tensors[st->n];
        size_t kl = strlen(key) + 1;
        memcpy(st->names + npos, key, kl);
        t->name = st->names + npos;
        npos += kl;
        json_t *dt = json_object_get(val, "dtype"), *shape = json_object_get(val, "shape"),
               *off = json_object_get(val, "data_offsets");
        if (!json_is_string(dt) || !json_is_array(shape) || !json_is_array(off) || json_array_size(off) != 2) {
            r1_err("%s: tensor '%s': needs dtype, shape and data_offsets [begin, end]", path, key);
            goto fail;
        }
        const char *d = json_string_value(dt);
        size_t esize;
        if (!strcmp(d, "F32")) t->dtype = R1_DTYPE_F32, esize = 4;
        else if (!strcmp(d, "F16")) t->dtype = R1_DTYPE_F16, esize = 2;
        else if (!strcmp(d, "BF16")) t->dtype = R1_DTYPE_BF16, esize = 2;
        else {
            r1_err("%s: tensor '%s': dtype %s is not supported (F32, F16, BF16)", path, key, d);
            goto fail;
        }
        t->ndim = (int)json_array_size(shape);
        if (t->ndim > 4) {
            r1_err("%s: tensor '%s': %d dimensions (at most 4)", path, key, t->ndim);
            goto fail;
        }
        size_t count = 1;
        for (int i = 0; i < t->ndim; i++) {
            json_t *e = json_array_get(shape, (size_t)i);
            if (!json_is_integer(e) || json_integer_value(e) < 0) {
                r1_err("%s: tensor '%s': bad shape", path, key);
                goto fail;
            }
            t->shape[i] = json_integer_value(e);
            if (!r1_mul_ok(count, (size_t)t->shape[i], &count)) {
                r1_err("%s: tensor '%s': shape overflows", path, key);
                goto fail;
            }
        }
        json_t *b = json_array_get(off, 0), *e = json_array_get(off, 1);
        if (!json_is_integer(b) || !json_is_integer(e) || json_integer_value(b) < 0 ||
            json_integer_value(e) < json_integer_value(b)) {
            r1_err("%s: tensor '%s': bad data_offsets", path, key);
            goto fail;
        }
        size_t begin = (size_t)json_integer_value(b), end = (size_t)json_integer_value(e), bytes;
        if (end > dsize) {
            r1_err("%s: tensor '%s': data ends at byte %zu, past the end of the file (%zu data "
                   "bytes; the file is truncated or corrupt)",
                   path, key, end, dsize);
            goto fail;
        }
        if (!r1_mul_ok(count, esize, &bytes) || bytes != end - begin) {
            r1_err("%s: tensor '%s': shape needs %zu bytes but data_offsets span %zu", path, key, count * esize,
                   end - begin);
            goto fail;
        }
        t->data = base + begin;
        t->size = bytes;
        st->n++;
    }
    json_decref(root);
    return 0;
fail:
    json_decref(root);
    r1_st_free(st);
    return -1;
}

void r1_st_free(struct r1_st *st) {
    free(st->tensors);
    free(st->names);
    memset(st, 0, sizeof *st);
}
