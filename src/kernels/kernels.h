/*
 * kernels.h - the decode-step kernel suite and the backend table.
 *
 * One forward pass is a fixed sequence of kernel calls. Each call is an
 * r1_op (a flat record of pointers and sizes; which fields a kernel reads is
 * listed below) handed to the backend's function for that kernel, once per
 * thread with (ith, nth): a kernel splits its rows by thread and must not
 * assume anything about how many threads there are. Kernels never allocate.
 *
 * Layouts (row-major, T = tokens in the batch, 1 for decode):
 *   activations  x, out          (T, cols), contiguous rows
 *   qkv buffer                   (T, (n_head + 2*n_kv_head) * head_dim): Q | K | V
 *   weights      r1_mat          (rows, cols) in op->w->dtype
 *   KV cache     k, v            (layer, n_kv_head, n_ctx, head_dim) in kv->dtype
 *   rope tables  cos, sin        (n_ctx, head_dim/2)
 *
 * Rows of a batch may belong to different sequences (continuous batching):
 * op->seq[t] picks row t's KV cache in the array op->kv and op->pos[t] its
 * position. Rows of one sequence are contiguous and at consecutive
 * positions, so a prompt chunk is still a causal block; matmuls see only
 * rows. With seq and pos NULL every row is of op->kv[0] at pos0 + t.
 */
#ifndef R1_KERNELS_H
#define R1_KERNELS_H

#include <stddef.h>
#include <stdint.h>

#include "kernels/dtype.h"

#ifdef __cplusplus
extern "C" {
#endif

enum r1_kernel {
    R1_K_EMBEDDING,     /* out[t,:] = row ids[t] of w (dequantized)                   */
    R1_K_RMS_NORM,      /* out[t,:] = x[t,:] / rms(x[t,:]) * b[:], n = dim, eps       */
    R1_K_QKV_BIAS,      /* out[t,r] = w[r,:]·x[t,:] + b[r]   (fused Q|K|V + bias)      */
    R1_K_ROPE_QK,       /* rotate Q and K heads of out (qkv buffer) in place, rotate-half,
                           position pos0+t, tables rope_cos/rope_sin                   */
    R1_K_KV_APPEND,     /* copy K,V of x (qkv buffer) into kv at layer, pos0..pos0+T-1 */
    R1_K_ATTENTION_GQA, /* out[t, h*hd:] = softmax(q·K/sqrt(hd)) V over cache positions
                           0..pos0+t (causal); q from x (qkv buffer); head h reads kv head
                           h / (n_head/n_kv_head); scratch: per-thread score buffer       */
    R1_K_MATVEC_ADD,    /* out[t,r] += w[r,:]·x[t,:]   (o_proj, down_proj + residual)  */
    R1_K_GATE_UP_SILU,  /* w = [gate; up] (2F, dim): out[t,j] = silu(g_j) * u_j, F cols */
    R1_K_LM_HEAD,       /* out[t,r] = w[r,:]·x[t,:], r < vocab                        */
    R1_K_ARGMAX,        /* *out_id = argmax of x[0..n), the lowest index on ties       */
    R1_K_COUNT
};

/* "embedding", "rms_norm", ... as used by R1_KERNEL_<name>=ref and --profile. */
extern const char *const r1_kernel_names[R1_K_COUNT];

/* Positions per block of a paged cache (a multiple of every kernel's chunk
 * of positions, so a chunk never straddles two blocks). */
#define R1_KV_PAGE 64

struct r1_kv_cache {
    enum r1_dtype dtype; /* R1_DTYPE_F32, R1_DTYPE_F16, or R1_DTYPE_Q8_0 (host backends) */
    int n_layer, n_kv_head, n_ctx, head_dim;
    /* (n_layer, n_kv_head, n_ctx, head_dim); a row of head_dim is
     * r1_dtype_row_bytes(dtype, head_dim) bytes (q8_0: head_dim / 32 blocks) */
    void *k, *v;
    /* NULL: position p is row p above. Else the cache is one sequence's view
     * of a pool shared by several (host backends): n_ctx counts the pool's
     * rows, and position p lies in row pages[p / R1_KV_PAGE] * R1_KV_PAGE +
     * p % R1_KV_PAGE, so R1_KV_PAGE positions from a multiple of it are
     * consecutive rows. */
    const int32_t *pages;
};

/* The row (in rows of head_dim) of position pos of (layer, kv head h). */
static inline size_t r1_kv_row(const struct r1_kv_cache *kv, int layer, int h, int pos) {
    size_t p = kv->pages ? (size_t)kv->pages[pos / R1_KV_PAGE] * R1_KV_PAGE + (size_t)(pos % R1_KV_PAGE) : (size_t)pos;
    return ((size_t)layer * kv->n_kv_head + h) * (size_t)kv->n_ctx + p;
}

struct r1_op {
    enum r1_kernel kernel;
    int T;    /* rows (tokens) in the batch */
    int pos0; /* position of row 0 (when pos is NULL) */
    /* Per-row sequence and position (NULL: kv[0] and pos0 + t); see the top.
     * Host backends only; device backends run one sequence per op. */
    const int32_t *seq; /* (T) index into kv */
    const int32_t *pos; /* (T) */
    float *out;
    const float *x;
    const struct r1_mat *w;
    const float *b; /* bias (qkv_bias) or norm weight (rms_norm) */
    float eps;
    int n;              /* dim for rms_norm, length for argmax */
    const int32_t *ids; /* embedding */
    int32_t *out_id;    /* argmax */
    int n_head, n_kv_head, head_dim, layer;
    struct r1_kv_cache *kv; /* one cache, or (when seq is set) one per sequence */
    const float *rope_cos, *rope_sin;
    float *scratch;        /* attention: thread ith uses scratch + ith * scratch_stride */
    size_t scratch_stride; /* >= kv->n_ctx floats */
    /* Device backends only: pos0 in device memory, so a captured decode step
     * (CUDA graph) can be replayed at any position. NULL: use pos0. */
    const int32_t *pos_dev;
    /* CPU matmuls: NULL, or a counter at 0 shared by the threads of this op,
     * from which they claim ever smaller runs of rows (guided scheduling,
     * __atomic builtins) instead of taking the fixed share (ith, nth): on a
     * shared machine one core often runs 10-20% slower than the other for
     * seconds, and every kernel would wait for it. Set and zeroed by the
     * session for each op. */
    int *claim;
};

typedef void (*r1_kernel_fn)(const struct r1_op *op, int ith, int nth);

/* Hooks of a backend whose kernels read and write device memory (cuda).
 * A session on such a backend allocates activations, KV cache, rope tables
 * and scratch with alloc, keeps a device copy of the weights (runtime/
 * device.c, through upload), runs every op on the calling thread (kernels
 * are queued asynchronously on one stream) and downloads only the logits or
 * the argmax id. Functions that can fail return -1 / NULL with r1_err set. */
struct r1_device_ops {
    void *(*alloc)(size_t bytes, const char *what);            /* zeroed */
    void (*free)(void *p);                                     /* NULL is a no-op */
    int (*upload)(void *dst, const void *src, size_t bytes);   /* queued in order */
    int (*download)(void *dst, const void *src, size_t bytes); /* waits for the queue */
    int (*sync)(void);                                         /* waits; -1 if any queued kernel failed */
    /* 0 if weights of this dtype can be held on the device, else -1 + error. */
    int (*weights_ok)(enum r1_dtype t);
    /* Floats of op->scratch attention needs for batches of up to n_batch rows. */
    size_t (*scratch_floats)(int n_batch, int n_head, int head_dim, int n_ctx);
    /* Decode-step graphs (NULL: launch directly): begin capturing the queued
     * launches (0; 1: graphs are turned off, launch directly; -1 + error),
     * end to get a replayable handle, launch it, free it. */
    int (*graph_begin)(void);
    void *(*graph_end)(void);
    int (*graph_launch)(void *g);
    void (*graph_free)(void *g);
    /* Largest single alloc in bytes (NULL: no limit); the weights are then
     * placed in several arenas (runtime/device.c). */
    size_t (*max_alloc)(void);
};

struct r1_backend {
    const char *name;
    r1_kernel_fn fn[R1_K_COUNT]; /* NULL entries fall back to ref */
    /* Called once before use (CPU feature detection etc.); 0 = usable. */
    int (*init)(void);
    /* Preferred KV cache dtype. */
    enum r1_dtype kv_dtype;
    /* NULL for host backends (ref, cpu); see struct r1_device_ops. */
    const struct r1_device_ops *dev;
    /* The layout its matmuls read fastest for weights stored as dt with cols
     * columns (the cpu's x8 regroupings); the loader converts to it
     * (r1_load_opts.backend). NULL: the file's own, so the weights stay
     * where they lie in the mapping. Every backend reads every layout. */
    enum r1_dtype (*weight_layout)(enum r1_dtype dt, int cols);
};

extern const struct r1_backend r1_backend_ref;
extern const struct r1_backend r1_backend_cpu; /* kernels/cpu/ */
#ifdef R1_CUDA
extern const struct r1_backend r1_backend_cuda; /* kernels/cuda/ (make CUDA=1) */
#endif
#ifdef R1_OPENCL
extern const struct r1_backend r1_backend_opencl; /* kernels/opencl/ (make OPENCL=1) */
#endif

/* Find a backend by name ("ref", "cpu"); NULL with an error if unknown or
 * not usable on this machine. */
const struct r1_backend *r1_backend_find(const char *name);

/* Resolve the table a session runs: the backend's kernels, with NULL entries
 * and every kernel named in R1_KERNEL_<name>=ref replaced by the reference.
 * Returns -1 with an error for a bad R1_KERNEL_* value or unknown name. */
int r1_backend_resolve(const struct r1_backend *be, r1_kernel_fn out[R1_K_COUNT]);

/* Reference kernels (kernels/ref/), exposed for conformance tests. */
extern const r1_kernel_fn r1_ref_kernels[R1_K_COUNT];

/* Row t's position and KV cache (see struct r1_op). */
static inline int r1_op_pos(const struct r1_op *op, int t) { return op->pos ? op->pos[t] : op->pos0 + t; }
static inline struct r1_kv_cache *r1_op_kv(const struct r1_op *op, int t) {
    return op->seq ? &op->kv[op->seq[t]] : op->kv;
}
/* The end of the run of rows from t0 that share one sequence at
 * consecutive positions (a causal block): rows [t0, end). */
static inline int r1_op_run_end(const struct r1_op *op, int t0) {
    int t = t0 + 1;
    while (t < op->T && r1_op_kv(op, t) == r1_op_kv(op, t0) && r1_op_pos(op, t) == r1_op_pos(op, t0) + (t - t0)) t++;
    return t;
}

/* Split n items over nth threads: [*lo, *hi) for thread ith. */
static inline void r1_split(int n, int ith, int nth, int *lo, int *hi) {
    int per = (n + nth - 1) / nth;
    *lo = ith * per < n ? ith * per : n;
    *hi = *lo + per < n ? *lo + per : n;
}

#ifdef __cplusplus
}
#endif
#endif
