/*
 * gguf.h - the GGUF container (versions 2 and 3, little-endian): a parser
 * that is a pure function of (pointer, size), the ggml tensor-type table,
 * and a writer (gguf_write.c). The parser checks every count, length and
 * offset with overflow checks and never reads outside the buffer; it does
 * no I/O and copies nothing: strings and tensor data point into the buffer,
 * which must outlive the parsed struct.
 *
 * Layout: "GGUF" u32 version, u64 n_tensors, u64 n_kv; n_kv of (string key,
 * u32 type, value); n_tensors of (string name, u32 n_dims, u64 ne[n_dims]
 * innermost first, u32 ggml type, u64 offset); padding to general.alignment
 * (default 32); the data section. Strings are u64 length + bytes (no NUL).
 * Arrays are u32 element type, u64 count, elements (arrays may nest).
 */
#ifndef R1_GGUF_H
#define R1_GGUF_H

#include <stddef.h>
#include <stdint.h>

#include "r1infer.h"

#define R1_GGUF_MAGIC 0x46554747u /* "GGUF" little-endian */
#define R1_GGUF_DEFAULT_ALIGNMENT 32
#define R1_GGUF_MAX_DIMS 4

enum r1_gguf_vtype {
    R1_GGUF_U8 = 0,
    R1_GGUF_I8 = 1,
    R1_GGUF_U16 = 2,
    R1_GGUF_I16 = 3,
    R1_GGUF_U32 = 4,
    R1_GGUF_I32 = 5,
    R1_GGUF_F32 = 6,
    R1_GGUF_BOOL = 7,
    R1_GGUF_STRING = 8,
    R1_GGUF_ARRAY = 9,
    R1_GGUF_U64 = 10,
    R1_GGUF_I64 = 11,
    R1_GGUF_F64 = 12,
    R1_GGUF_VTYPE_COUNT
};

/* Bytes pointing into the file; not NUL-terminated. */
struct r1_gguf_str {
    const char *s;
    size_t len;
};

struct r1_gguf_kv {
    struct r1_gguf_str key;
    uint32_t type;      /* enum r1_gguf_vtype */
    const uint8_t *val; /* the value; for arrays, the first element */
    size_t val_size;    /* bytes from val to the end of the value */
    uint32_t arr_type;  /* arrays: element type */
    uint64_t arr_n;     /* arrays: element count */
};

struct r1_gguf_tensor {
    struct r1_gguf_str name;
    uint32_t ggml_type;
    int n_dims;
    uint64_t ne[R1_GGUF_MAX_DIMS]; /* innermost first: ne[0] = columns; unused = 1 */
    uint64_t offset;               /* from the start of the data section */
    const uint8_t *data;
    size_t size;
};

struct r1_gguf {
    uint32_t version;
    size_t n_kv, n_tensors;
    struct r1_gguf_kv *kv;
    struct r1_gguf_tensor *tensors;
    size_t *kv_sorted, *tensor_sorted; /* indices sorted by key / name */
    size_t alignment;
    size_t data_offset; /* file offset of the data section */
    const char *path;   /* borrowed, for messages */
};

/* ggml tensor types: id -> name, block geometry, r1 dtype (-1 if r1infer
 * cannot compute with it). NULL for an id that is not a ggml type. */
struct r1_ggml_type {
    const char *name;
    int block;       /* elements per block */
    int block_bytes; /* bytes per block */
    int dtype;       /* enum r1_dtype or -1 */
};
const struct r1_ggml_type *r1_ggml_type_info(uint32_t id);
/* ggml type id of an r1 dtype. */
uint32_t r1_ggml_type_of(enum r1_dtype t);

/* Parse a whole GGUF image. `path` (borrowed) names the file in errors.
 * Returns -1 with an error naming the file and the key or tensor. */
int r1_gguf_parse(struct r1_gguf *g, const uint8_t *data, size_t size, const char *path);
void r1_gguf_free(struct r1_gguf *g);

/* Lookups (binary search); NULL when absent. */
const struct r1_gguf_kv *r1_gguf_find_kv(const struct r1_gguf *g, const char *key);
const struct r1_gguf_tensor *r1_gguf_find_tensor(const struct r1_gguf *g, const char *name);

/* Typed getters. Each returns 1 when found, 0 when absent, -1 with an error
 * when present with the wrong type or out of range. Integers of any width
 * and signedness are accepted when the value fits. */
int r1_gguf_get_int(const struct r1_gguf *g, const char *key, int64_t lo, int64_t hi, int64_t *out);
int r1_gguf_get_float(const struct r1_gguf *g, const char *key, double *out);
int r1_gguf_get_bool(const struct r1_gguf *g, const char *key, int *out);
int r1_gguf_get_str(const struct r1_gguf *g, const char *key, struct r1_gguf_str *out);
/* An array of `type`: returns its kv (and count) or NULL (absent, or an
 * error when present with another element type: check r1_last_error). */
const struct r1_gguf_kv *r1_gguf_get_arr(const struct r1_gguf *g, const char *key, uint32_t type, int *bad);

/* Walk a validated string array: returns the position after the string. */
const uint8_t *r1_gguf_next_str(const uint8_t *p, struct r1_gguf_str *out);

/* ---- tensor names (gguf_load.c) ----
 * GGUF "blk.3.attn_q.weight" <-> Hugging Face "model.layers.3.self_attn.q_proj.weight".
 * Both return 0, or -1 (no error set) for a name outside the Qwen2 set. */
int r1_gguf_name_to_hf(const char *gguf, char *out, size_t cap);
int r1_gguf_name_from_hf(const char *hf, char *out, size_t cap);

/* ---- writer (gguf_write.c) ---- */

struct r1_gguf_writer;
struct r1_gguf_writer *r1_gguf_writer_new(void);
void r1_gguf_writer_free(struct r1_gguf_writer *w);
/* Metadata, in the order written. Keys and strings are copied. */
int r1_gguf_w_str(struct r1_gguf_writer *w, const char *key, const char *val);
int r1_gguf_w_u32(struct r1_gguf_writer *w, const char *key, uint32_t val);
int r1_gguf_w_f32(struct r1_gguf_writer *w, const char *key, float val);
int r1_gguf_w_bool(struct r1_gguf_writer *w, const char *key, int val);
int r1_gguf_w_arr_str(struct r1_gguf_writer *w, const char *key, const char *const *vals, size_t n);
int r1_gguf_w_arr_i32(struct r1_gguf_writer *w, const char *key, const int32_t *vals, size_t n);
/* A key-value pair copied as it is from a parsed GGUF (any type, arrays too). */
int r1_gguf_w_copy(struct r1_gguf_writer *w, const struct r1_gguf_kv *kv);
/* A tensor: shape outermost first (rows, cols) as everywhere else in
 * r1infer; stored innermost first. Data is produced at write time by
 * fill(ctx, index, dst, size), index = order of registration. */
typedef int (*r1_gguf_fill_fn)(void *ctx, int index, uint8_t *dst, size_t size);
int r1_gguf_w_tensor(struct r1_gguf_writer *w, const char *name, enum r1_dtype dtype, int ndim, const int64_t *shape);
/* Write the file (header, metadata, tensor infos, aligned data). */
int r1_gguf_w_write(struct r1_gguf_writer *w, const char *path, r1_gguf_fill_fn fill, void *ctx, int progress);

#endif
