/*
 * backend.c - the registry of backends and the per-kernel override
 * (R1_KERNEL_<name>=ref). Every environment name is checked here, in one
 * place, so a typo is an error rather than a silent no-op.
 */
#include <stdlib.h>
#include <string.h>

#include "kernels/kernels.h"
#include "util/env.h"
#include "util/util.h"

const char *const r1_kernel_names[R1_K_COUNT] = {
    [R1_K_EMBEDDING] = "embedding",   [R1_K_RMS_NORM] = "rms_norm",         [R1_K_QKV_BIAS] = "qkv_bias",
    [R1_K_ROPE_QK] = "rope_qk",       [R1_K_KV_APPEND] = "kv_append",       [R1_K_ATTENTION_GQA] = "attention_gqa",
    [R1_K_MATVEC_ADD] = "matvec_add", [R1_K_GATE_UP_SILU] = "gate_up_silu", [R1_K_LM_HEAD] = "lm_head",
    [R1_K_ARGMAX] = "argmax",
};

static const struct r1_backend *const backends[] = {
    &r1_backend_ref,
    &r1_backend_cpu,
#ifdef R1_CUDA
    &r1_backend_cuda,
#endif
#ifdef R1_OPENCL
    &r1_backend_opencl,
#endif
};

const struct r1_backend *r1_backend_find(const char *name) {
    for (size_t i = 0; i < sizeof backends / sizeof backends[0]; i++) {
        const struct r1_backend *be = backends[i];
        if (strcmp(be->name, name) != 0) continue;
        if (be->init && be->init() != 0) return NULL;
        return be;
    }
#ifndef R1_CUDA
    if (strcmp(name, "cuda") == 0) {
        r1_err("backend 'cuda' is not in this build: rebuild with 'make CUDA=1' on a machine "
               "with the CUDA toolkit");
        return NULL;
    }
#endif
#ifndef R1_OPENCL
    if (strcmp(name, "opencl") == 0) {
        r1_err("backend 'opencl' is not in this build: install the OpenCL headers and loader "
               "(ocl-icd-opencl-dev opencl-c-headers) and rebuild, or 'make OPENCL=1'");
        return NULL;
    }
#endif
    r1_err("unknown backend '%s' (choose ref, cpu%s%s)", name,
#ifdef R1_CUDA
           ", cuda",
#else
           "",
#endif
#ifdef R1_OPENCL
           ", opencl"
#else
           ""
#endif
    );
    return NULL;
}

struct resolve {
    const struct r1_backend *be;
    r1_kernel_fn *out;
    int rc;
};
/* R1_KERNEL_<name>=ref: kernel <name> on the reference backend */
static void resolve_one(const char *name, const char *value, void *ctx) {
    struct resolve *r = ctx;
    if (r->rc) return;
    int found = -1;
    for (int k = 0; k < R1_K_COUNT; k++)
        if (!strcmp(r1_kernel_names[k], name)) found = k;
    if (found < 0)
        r->rc = r1_err("environment R1_KERNEL_%s: no kernel named '%s' (kernels: embedding, "
                       "rms_norm, qkv_bias, rope_qk, kv_append, attention_gqa, matvec_add, "
                       "gate_up_silu, lm_head, argmax)",
                       name, name);
    else if (strcmp(value, "ref") == 0 && r->be->dev)
        r->rc = r1_err("environment R1_KERNEL_%s=%s: backend '%s' keeps its buffers in device memory, "
                       "where the reference kernels cannot run; unset it or use --backend cpu",
                       name, value, r->be->name);
    else if (strcmp(value, "ref") == 0) r->out[found] = r1_ref_kernels[found];
    else if (strcmp(value, r->be->name) != 0)
        r->rc = r1_err("environment R1_KERNEL_%s=%s: the only override is 'ref' (or the session's "
                       "backend '%s')",
                       name, value, r->be->name);
}

int r1_backend_resolve(const struct r1_backend *be, r1_kernel_fn out[R1_K_COUNT]) {
    for (int k = 0; k < R1_K_COUNT; k++) out[k] = be->fn[k] ? be->fn[k] : r1_ref_kernels[k];
    struct resolve r = {be, out, 0};
    r1_env_each("R1_KERNEL_", resolve_one, &r);
    return r.rc;
}
