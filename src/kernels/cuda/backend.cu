/*
 * backend.cu - the CUDA backend: the r1_backend_cuda table, its device hooks
 * (struct r1_device_ops), device selection, the stream, the cuBLAS handle,
 * the prefill workspace, decode-step graphs and the sticky error that
 * void kernels report through the next sync or download.
 *
 * One device and one stream per process; every launch goes to that stream.
 * The environment names this backend reads are checked here, in one place:
 *   R1_GPU=N            device index (set by --gpu N), default 0
 *   R1_CUDA_GRAPH=0|1   capture and replay the decode step (default 1)
 *   R1_CUDA_PREFILL=fast|exact   prefill GEMM precision (gemm.cu)
 * It must not be used from two threads at once (one stream, one workspace).
 */
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/cuda/common.cuh"
#include "kernels/cuda/cuda.h"
#include "kernels/cuda/cuda_kernels.h"
#include "kernels/device_common.h"

extern "C" int r1cu_attention_init(void);
extern int r1cu_attention_plain; /* attention_gqa.cu: R1_CUDA_ATT=plain */
extern int r1cu_att_chunk;       /* attention_gqa.cu: R1_CUDA_ATT_CHUNK */

static struct {
    int ready, device, graphs, exact;
    cudaStream_t stream;
    cublasHandle_t blas;
    void *ws[R1CU_WS_COUNT];
    size_t ws_size[R1CU_WS_COUNT];
} g;
static struct r1_device_error errs = R1_DEVICE_ERROR_INIT; /* first failure since the last report */

/* ---------------------------------------------------------------- errors */

int r1cu_check(cudaError_t e, const char *what, const char *file, int line) {
    if (e == cudaSuccess) return 0;
    return r1_device_error_set(&errs, "CUDA error %s (%s) in %s at %s:%d", cudaGetErrorName(e),
                               cudaGetErrorString(e), what, file, line);
}

int r1cu_check_blas(cublasStatus_t e, const char *what, const char *file, int line) {
    if (e == CUBLAS_STATUS_SUCCESS) return 0;
    return r1_device_error_set(&errs, "cuBLAS error %s (%s) in %s at %s:%d", cublasGetStatusName(e),
                               cublasGetStatusString(e), what, file, line);
}

int r1cu_fail(const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    int rc = r1_device_error_vset(&errs, fmt, ap);
    va_end(ap);
    return rc;
}

/* Report (and clear) a failure recorded since the last call. */
static int take_failure(void) { return r1_device_error_take(&errs); }

/* -------------------------------------------------------------- services */

cudaStream_t r1cu_stream(void) { return g.stream; }
cublasHandle_t r1cu_blas(void) { return g.blas; }
int r1cu_prefill_exact(void) { return g.exact; }

void *r1cu_workspace(int slot, size_t bytes) {
    if (bytes <= g.ws_size[slot]) return g.ws[slot];
    size_t want = bytes + bytes / 4; /* grow with headroom: few reallocations */
    if (g.ws[slot]) {
        if (CUDA_CHECK(cudaStreamSynchronize(g.stream))) return nullptr;
        CUDA_CHECK(cudaFree(g.ws[slot]));
        g.ws[slot] = nullptr, g.ws_size[slot] = 0;
    }
    if (CUDA_CHECK(cudaMalloc(&g.ws[slot], want))) {
        g.ws[slot] = nullptr;
        return nullptr;
    }
    g.ws_size[slot] = want;
    return g.ws[slot];
}

/* ------------------------------------------------------------------ init */

extern "C" int r1_cuda_device_count(void) {
    int n = 0;
    if (cudaGetDeviceCount(&n) != cudaSuccess) {
        cudaGetLastError(); /* clear: no driver is not an error here */
        return 0;
    }
    return n;
}

static pthread_mutex_t init_mu = PTHREAD_MUTEX_INITIALIZER;

static int cuda_init_locked(void) {
    if (g.ready) return cudaSetDevice(g.device) == cudaSuccess ? 0 : r1_err("cudaSetDevice(%d) failed", g.device);
    int n = 0;
    cudaError_t e = cudaGetDeviceCount(&n);
    if (e != cudaSuccess || n == 0) {
        const char *why = e != cudaSuccess ? cudaGetErrorString(e) : "no device found";
        cudaGetLastError();
        return r1_err("backend 'cuda': no usable CUDA device (%s). Run on a machine with an NVIDIA GPU "
                      "and its driver, or choose --backend cpu",
                      why);
    }
    const int dev = r1_device_env_index("R1_GPU", "--gpu", n, "CUDA", "");
    static const char *const onoff[] = {"0", "1"}, *const prec[] = {"fast", "exact"};
    static const char *const att[] = {"fast", "plain"}, *const chunks[] = {"32", "64", "128"};
    if (dev < 0) return -1;
    int graphs = r1_env_choice("R1_CUDA_GRAPH", onoff, 2, 1);
    int exact = r1_env_choice("R1_CUDA_PREFILL", prec, 2, 0);
    int plain = r1_env_choice("R1_CUDA_ATT", att, 2, 0);
    int chunk = r1_env_choice("R1_CUDA_ATT_CHUNK", chunks, 3, 0);
    if (graphs < 0 || exact < 0 || plain < 0 || chunk < 0) return -1;
    r1cu_attention_plain = plain, r1cu_att_chunk = 32 << chunk;
    if (CUDA_CHECK(cudaSetDevice(dev))) return take_failure(), -1;
    cudaDeviceProp p;
    if (CUDA_CHECK(cudaGetDeviceProperties(&p, dev))) return take_failure(), -1;
    if (p.major < 8)
        return r1_err("backend 'cuda': %s has compute capability %d.%d; this build needs 8.0 or newer (bf16)",
                      p.name, p.major, p.minor);
    if (CUDA_CHECK(cudaStreamCreateWithFlags(&g.stream, cudaStreamNonBlocking))) return take_failure(), -1;
    if (CUBLAS_CHECK(cublasCreate(&g.blas)) || CUBLAS_CHECK(cublasSetStream(g.blas, g.stream)) ||
        r1cu_attention_init())
        return take_failure(), -1;
    g.device = dev, g.graphs = graphs, g.exact = exact;
    g.ready = 1;
    return 0;
}

static int cuda_init(void) {
    pthread_mutex_lock(&init_mu);
    int rc = cuda_init_locked();
    pthread_mutex_unlock(&init_mu);
    return rc;
}

extern "C" int r1_cuda_device_info(char *name, size_t cap, int *sms, size_t *mem, int *cc) {
    if (!g.ready) return r1_err("the cuda backend is not initialized");
    cudaDeviceProp p;
    if (CUDA_CHECK(cudaGetDeviceProperties(&p, g.device))) return take_failure();
    if (name && cap) snprintf(name, cap, "%s", p.name);
    if (sms) *sms = p.multiProcessorCount;
    if (mem) *mem = p.totalGlobalMem;
    if (cc) *cc = p.major * 10 + p.minor;
    return 0;
}

extern "C" void r1_cuda_set_prefill_exact(int exact) { g.exact = exact != 0; }
extern "C" void r1_cuda_set_graphs(int on) { g.graphs = on != 0; }

extern "C" double r1_cuda_copy_gbps(size_t bytes, int reps) {
    if (!g.ready) return r1_err("the cuda backend is not initialized");
    void *a = nullptr, *b = nullptr;
    cudaEvent_t e0, e1;
    double best = 0;
    if (CUDA_CHECK(cudaMalloc(&a, bytes)) || CUDA_CHECK(cudaMalloc(&b, bytes))) goto fail;
    CUDA_CHECK(cudaMemsetAsync(a, 1, bytes, g.stream));
    CUDA_CHECK(cudaEventCreate(&e0));
    CUDA_CHECK(cudaEventCreate(&e1));
    for (int i = 0; i < reps + 1; i++) { /* the first is a warm-up */
        CUDA_CHECK(cudaEventRecord(e0, g.stream));
        CUDA_CHECK(cudaMemcpyAsync(b, a, bytes, cudaMemcpyDeviceToDevice, g.stream));
        CUDA_CHECK(cudaEventRecord(e1, g.stream));
        float ms = 0;
        if (CUDA_CHECK(cudaEventSynchronize(e1)) || CUDA_CHECK(cudaEventElapsedTime(&ms, e0, e1))) break;
        double gbps = 2.0 * (double)bytes / (ms * 1e-3) / 1e9;
        if (i > 0 && gbps > best) best = gbps;
    }
    cudaEventDestroy(e0);
    cudaEventDestroy(e1);
fail:
    cudaFree(a);
    cudaFree(b);
    return take_failure() ? -1.0 : best;
}

/* ----------------------------------------------------------- device ops */

static void *dev_alloc(size_t bytes, const char *what) {
    void *p = nullptr;
    if (bytes == 0) bytes = 16;
    cudaError_t e = cudaMalloc(&p, bytes);
    if (e != cudaSuccess) {
        cudaGetLastError();
        size_t free_b = 0, total = 0;
        cudaMemGetInfo(&free_b, &total);
        r1_err("out of GPU memory: %s needs %.2f GiB, %.2f GiB of %.2f GiB free (try a smaller --ctx or "
               "--dtype q8_0)",
               what, bytes / 1073741824.0, free_b / 1073741824.0, total / 1073741824.0);
        return nullptr;
    }
    if (CUDA_CHECK(cudaMemsetAsync(p, 0, bytes, g.stream))) {
        cudaFree(p);
        take_failure();
        return nullptr;
    }
    return p;
}

static void dev_free(void *p) {
    if (p) cudaFree(p); /* implicitly waits for work using it */
}

static int dev_upload(void *dst, const void *src, size_t bytes) {
    if (CUDA_CHECK(cudaSetDevice(g.device))) return take_failure();
    if (CUDA_CHECK(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyHostToDevice, g.stream))) return take_failure();
    return 0;
}

static int dev_sync(void) {
    CUDA_CHECK(cudaStreamSynchronize(g.stream));
    return take_failure();
}

static int dev_download(void *dst, const void *src, size_t bytes) {
    CUDA_CHECK(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToHost, g.stream));
    return dev_sync();
}

static int dev_weights_ok(enum r1_dtype t) {
    static const enum r1_dtype held[] = {R1_DTYPE_F32, R1_DTYPE_F16, R1_DTYPE_BF16, R1_DTYPE_Q8_0};
    return r1_device_weights_check("cuda", t, held, sizeof held / sizeof held[0],
                                   "load with --dtype bf16 or --dtype q8_0");
}

static size_t dev_scratch_floats(int n_batch, int n_head, int head_dim, int n_ctx) {
    (void)n_batch; /* batches of T > 1 write the output directly */
    int n_split, chunk;
    r1cu_attention_plan(1, n_ctx, &n_split, &chunk);
    return (size_t)n_head * n_split * (head_dim + 2);
}

static int dev_graph_begin(void) {
    if (!g.graphs) return 1; /* R1_CUDA_GRAPH=0 or r1_cuda_set_graphs(0): the session launches directly */
    if (take_failure()) return -1;
    return CUDA_CHECK(cudaStreamBeginCapture(g.stream, cudaStreamCaptureModeThreadLocal)) ? take_failure() : 0;
}

static void *dev_graph_end(void) {
    cudaGraph_t graph = nullptr;
    cudaGraphExec_t exec = nullptr;
    int bad = CUDA_CHECK(cudaStreamEndCapture(g.stream, &graph));
    bad = bad || take_failure(); /* a launch failed during the capture */
    if (!bad) bad = CUDA_CHECK(cudaGraphInstantiate(&exec, graph, 0));
    if (graph) cudaGraphDestroy(graph);
    if (bad) {
        take_failure();
        r1_err_prefix("capturing the decode step as a CUDA graph (R1_CUDA_GRAPH=0 turns graphs off)");
        return nullptr;
    }
    return exec;
}

static int dev_graph_launch(void *gr) {
    return CUDA_CHECK(cudaGraphLaunch((cudaGraphExec_t)gr, g.stream)) ? take_failure() : 0;
}

static void dev_graph_free(void *gr) {
    if (gr) cudaGraphExecDestroy((cudaGraphExec_t)gr);
}


static const struct r1_device_ops cuda_dev = {
    dev_alloc,      dev_free,           dev_upload,      dev_download,  dev_sync,
    dev_weights_ok, dev_scratch_floats, dev_graph_begin, dev_graph_end, dev_graph_launch,
    dev_graph_free, nullptr, /* max_alloc: no limit */
};

extern "C" const struct r1_backend r1_backend_cuda = {
    "cuda",
    {
        r1cu_embedding,     /* R1_K_EMBEDDING */
        r1cu_rms_norm,      /* R1_K_RMS_NORM */
        r1cu_qkv_bias,      /* R1_K_QKV_BIAS */
        r1cu_rope_qk,       /* R1_K_ROPE_QK */
        r1cu_kv_append,     /* R1_K_KV_APPEND */
        r1cu_attention_gqa, /* R1_K_ATTENTION_GQA */
        r1cu_matvec_add,    /* R1_K_MATVEC_ADD */
        r1cu_gate_up_silu,  /* R1_K_GATE_UP_SILU */
        r1cu_lm_head,       /* R1_K_LM_HEAD */
        r1cu_argmax,        /* R1_K_ARGMAX */
    },
    cuda_init,
    R1_DTYPE_F16,
    &cuda_dev,
    nullptr, /* weight_layout: the file's (the upload reads it in place) */
};

static_assert(R1_K_EMBEDDING == 0 && R1_K_RMS_NORM == 1 && R1_K_QKV_BIAS == 2 && R1_K_ROPE_QK == 3 &&
                  R1_K_KV_APPEND == 4 && R1_K_ATTENTION_GQA == 5 && R1_K_MATVEC_ADD == 6 &&
                  R1_K_GATE_UP_SILU == 7 && R1_K_LM_HEAD == 8 && R1_K_ARGMAX == 9 && R1_K_COUNT == 10,
              "r1_backend_cuda's table lists the kernels in enum order");
