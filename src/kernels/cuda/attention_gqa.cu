/*
 * attention_gqa.cu - causal GQA attention over the KV cache.
 *
 * One block = one KV head x (up to ATT_MAXG of) its query heads x one query
 * row t x one split of the key range, so every K and V row is read once for
 * all the query heads that share it. The block walks its keys in tiles of
 * ATT_TILE: warps compute the scores of a tile (lanes over head_dim, a warp
 * reduction per head) into shared memory, then the running max / sum of each
 * head are updated (online softmax) and each thread accumulates its output
 * dimensions over the tile's V rows.
 *
 * Decode (T = 1) splits the context into n_split ranges of `chunk` keys (a
 * multiple of ATT_TILE) so long contexts fill the GPU; each split writes
 * (max, sum, unnormalized out) to scratch and a second kernel merges them.
 * The plan depends only on n_ctx, not on the position, so a captured graph
 * stays valid: splits past the current length exit at once, and the merge
 * reads the position from device memory. With one split (short contexts,
 * and T > 1 where the T rows already fill the GPU) the output is written
 * directly. TODO(perf): a tensor-core (mma) prefill kernel for long prompts.
 */
#include "kernels/cuda/common.cuh"
#include "kernels/cuda/cuda_kernels.h"

#define ATT_THREADS 128
#define ATT_WARPS (ATT_THREADS / 32)
#define ATT_TILE 128
#define ATT_MAXG 8   /* query heads per block */
#define ATT_DSLOT 4  /* head_dim <= ATT_DSLOT * ATT_THREADS = 512 */
#define ATT_MAX_SPLIT 64
#define ATT_MIN_CHUNK 256

extern "C" void r1cu_attention_plan(int T, int n_ctx, int *n_split, int *chunk) {
    if (T > 1) {
        *n_split = 1;
        *chunk = n_ctx;
        return;
    }
    int ns = (n_ctx + ATT_MIN_CHUNK - 1) / ATT_MIN_CHUNK;
    if (ns > ATT_MAX_SPLIT) ns = ATT_MAX_SPLIT;
    int ch = (n_ctx + ns - 1) / ns;
    ch = (ch + ATT_TILE - 1) / ATT_TILE * ATT_TILE;
    *n_split = (n_ctx + ch - 1) / ch;
    *chunk = ch;
}

struct att_args {
    const float *qkv;
    const void *kc, *vc;
    float *out;  /* (T, n_head * hd) */
    float *part; /* (T, n_head, n_split, hd + 2) when n_split > 1 */
    int stride, n_head, nkv, hd, group, n_ctx, layer;
    int pos0;
    const int32_t *pos_dev;
    int chunk, n_split, n_gc;
    float scale;
};

template <bool F16>
__device__ __forceinline__ float kv_load(const void *base, size_t i) {
    if constexpr (F16) return __half2float(((const __half *)base)[i]);
    else return ((const float *)base)[i];
}

template <bool F16>
__global__ void __launch_bounds__(ATT_THREADS) attention_kernel(att_args a) {
    extern __shared__ float sm[];
    float *q_s = sm;                            /* (G, hd) */
    float *s_s = q_s + ATT_MAXG * a.hd;         /* (G, ATT_TILE) */
    __shared__ float m_run[ATT_MAXG], l_run[ATT_MAXG], corr[ATT_MAXG];

    const int kvh = blockIdx.x / a.n_gc, g0 = (blockIdx.x % a.n_gc) * ATT_MAXG;
    const int G = min(ATT_MAXG, a.group - g0);
    const int split = blockIdx.y, t = blockIdx.z;
    const int n_keys = r1cu_pos(a.pos0, a.pos_dev) + t + 1;
    const int p0 = split * a.chunk, p1 = min(p0 + a.chunk, n_keys);
    if (p0 >= p1) return; /* past the current length (graph replays) */
    const int tid = threadIdx.x, lane = tid & 31, warp = tid / 32, hd = a.hd;
    const int h0 = kvh * a.group + g0; /* first query head of the block */

    for (int i = tid; i < G * hd; i += ATT_THREADS)
        q_s[i] = a.qkv[(size_t)t * a.stride + (size_t)(h0 + i / hd) * hd + i % hd];
    if (tid < ATT_MAXG) m_run[tid] = -INFINITY, l_run[tid] = 0.0f;
    float acc[ATT_DSLOT][ATT_MAXG];
#pragma unroll
    for (int ds = 0; ds < ATT_DSLOT; ds++)
#pragma unroll
        for (int g = 0; g < ATT_MAXG; g++) acc[ds][g] = 0.0f;
    const size_t head_base = ((size_t)a.layer * a.nkv + kvh) * a.n_ctx;
    __syncthreads();

    for (int tile0 = p0; tile0 < p1; tile0 += ATT_TILE) {
        const int n = min(ATT_TILE, p1 - tile0);
        /* scores: warp per key, lanes over head_dim */
        for (int i = warp; i < n; i += ATT_WARPS) {
            const size_t krow = (head_base + tile0 + i) * hd;
            float d[ATT_MAXG];
#pragma unroll
            for (int g = 0; g < ATT_MAXG; g++) d[g] = 0.0f;
            for (int c = lane; c < hd; c += 32) {
                const float k = kv_load<F16>(a.kc, krow + c);
#pragma unroll
                for (int g = 0; g < ATT_MAXG; g++)
                    if (g < G) d[g] += q_s[g * hd + c] * k;
            }
#pragma unroll
            for (int g = 0; g < ATT_MAXG; g++) {
                if (g >= G) break;
                const float v = warp_sum(d[g]);
                if (lane == 0) s_s[g * ATT_TILE + i] = v * a.scale;
            }
        }
        __syncthreads();
        /* online softmax: warp per head */
        for (int g = warp; g < G; g += ATT_WARPS) {
            float mx = -INFINITY;
            for (int i = lane; i < n; i += 32) mx = fmaxf(mx, s_s[g * ATT_TILE + i]);
            mx = warp_max(mx);
            const float m_new = fmaxf(m_run[g], mx);
            float sum = 0.0f;
            for (int i = lane; i < n; i += 32) {
                const float e = expf(s_s[g * ATT_TILE + i] - m_new);
                s_s[g * ATT_TILE + i] = e;
                sum += e;
            }
            sum = warp_sum(sum);
            if (lane == 0) {
                const float c = expf(m_run[g] - m_new); /* 0 on the first tile */
                corr[g] = c;
                l_run[g] = l_run[g] * c + sum;
                m_run[g] = m_new;
            }
        }
        __syncthreads();
        /* out += p V: thread per output dimension */
#pragma unroll
        for (int ds = 0; ds < ATT_DSLOT; ds++) {
            const int dd = tid + ds * ATT_THREADS;
            if (dd >= hd) break;
#pragma unroll
            for (int g = 0; g < ATT_MAXG; g++)
                if (g < G) acc[ds][g] *= corr[g];
            for (int i = 0; i < n; i++) {
                const float v = kv_load<F16>(a.vc, (head_base + tile0 + i) * hd + dd);
#pragma unroll
                for (int g = 0; g < ATT_MAXG; g++)
                    if (g < G) acc[ds][g] += s_s[g * ATT_TILE + i] * v;
            }
        }
        __syncthreads(); /* s_s and corr are rewritten by the next tile */
    }

#pragma unroll
    for (int ds = 0; ds < ATT_DSLOT; ds++) {
        const int dd = tid + ds * ATT_THREADS;
        if (dd >= hd) break;
#pragma unroll
        for (int g = 0; g < ATT_MAXG; g++) {
            if (g >= G) break;
            const int h = h0 + g;
            if (a.n_split == 1) {
                a.out[(size_t)t * a.n_head * hd + (size_t)h * hd + dd] = acc[ds][g] / l_run[g];
            } else {
                float *p = a.part + (((size_t)t * a.n_head + h) * a.n_split + split) * (hd + 2);
                p[2 + dd] = acc[ds][g];
                if (dd == 0) p[0] = m_run[g], p[1] = l_run[g];
            }
        }
    }
}

/* merge the splits of one (t, head): grid (n_head, T) */
__global__ void attention_merge_kernel(att_args a) {
    const int h = blockIdx.x, t = blockIdx.y, hd = a.hd;
    const int n_keys = r1cu_pos(a.pos0, a.pos_dev) + t + 1;
    const int used = min(a.n_split, (n_keys + a.chunk - 1) / a.chunk);
    const float *p = a.part + ((size_t)t * a.n_head + h) * a.n_split * (hd + 2);
    float M = -INFINITY;
    for (int s = 0; s < used; s++) M = fmaxf(M, p[s * (hd + 2)]);
    float L = 0.0f;
    for (int s = 0; s < used; s++) L += p[s * (hd + 2) + 1] * expf(p[s * (hd + 2)] - M);
    for (int d = threadIdx.x; d < hd; d += blockDim.x) {
        float o = 0.0f;
        for (int s = 0; s < used; s++) o += p[s * (hd + 2) + 2 + d] * expf(p[s * (hd + 2)] - M);
        a.out[(size_t)t * a.n_head * hd + (size_t)h * hd + d] = o / L;
    }
}

static size_t att_smem(int hd) { return (size_t)(ATT_MAXG * hd + ATT_MAXG * ATT_TILE) * sizeof(float); }

/* Called once by the backend's init: allow > 48 KB of shared memory. */
extern "C" int r1cu_attention_init(void) {
    const int bytes = (int)att_smem(ATT_DSLOT * ATT_THREADS);
    if (CUDA_CHECK(cudaFuncSetAttribute(attention_kernel<true>, cudaFuncAttributeMaxDynamicSharedMemorySize, bytes)))
        return -1;
    return CUDA_CHECK(
        cudaFuncSetAttribute(attention_kernel<false>, cudaFuncAttributeMaxDynamicSharedMemorySize, bytes));
}

extern "C" void r1cu_attention_gqa(const struct r1_op *op, int ith, int nth) {
    (void)ith, (void)nth;
    const struct r1_kv_cache *kv = op->kv;
    att_args a;
    a.qkv = op->x, a.kc = kv->k, a.vc = kv->v, a.out = op->out, a.part = op->scratch;
    a.n_head = op->n_head, a.nkv = op->n_kv_head, a.hd = op->head_dim;
    a.stride = (a.n_head + 2 * a.nkv) * a.hd;
    a.group = a.n_head / a.nkv;
    a.n_ctx = kv->n_ctx, a.layer = op->layer, a.pos0 = op->pos0, a.pos_dev = op->pos_dev;
    a.scale = 1.0f / sqrtf((float)a.hd);
    a.n_gc = (a.group + ATT_MAXG - 1) / ATT_MAXG;
    if (a.hd > ATT_DSLOT * ATT_THREADS) {
        r1cu_fail("cuda attention: head_dim %d > %d", a.hd, ATT_DSLOT * ATT_THREADS);
        return;
    }
    /* keys the plan must cover: the whole cache for a replayable step, else pos0 + T */
    const int span = op->pos_dev ? kv->n_ctx : op->pos0 + op->T;
    r1cu_attention_plan(op->T, span, &a.n_split, &a.chunk);
    cudaStream_t st = r1cu_stream();
    const dim3 grid(a.nkv * a.n_gc, a.n_split, op->T);
    const size_t smem = att_smem(a.hd);
    if (kv->dtype == R1_DTYPE_F16) attention_kernel<true><<<grid, ATT_THREADS, smem, st>>>(a);
    else attention_kernel<false><<<grid, ATT_THREADS, smem, st>>>(a);
    if (CUDA_LAUNCHED("attention_kernel")) return;
    if (a.n_split > 1) {
        attention_merge_kernel<<<dim3(a.n_head, op->T), 128, 0, st>>>(a);
        CUDA_LAUNCHED("attention_merge_kernel");
    }
}
