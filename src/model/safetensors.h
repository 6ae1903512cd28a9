/*
 * safetensors.h - parser for the safetensors format: a pure function of
 * (pointer, size) that checks every offset, shape and size. No I/O here.
 */
#ifndef R1_SAFETENSORS_H
#define R1_SAFETENSORS_H

#include "model/model.h"

struct r1_st {
    struct r1_src_tensor *tensors; /* names point into `names` */
    int n;
    char *names;
};

/* Parse a whole safetensors file image. F32, F16, BF16 tensors are accepted;
 * other dtypes are an error naming the tensor. `path` is used in errors.
 * Data pointers point into `data`. Returns -1 with an error. */
int r1_st_parse(struct r1_st *st, const uint8_t *data, size_t size, const char *path);
void r1_st_free(struct r1_st *st);

#endif
