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
 * Decode (T = 1) splits the context into n_split ranges of `chunk` keys (at
 * least ATT_MIN_CHUNK, at most ATT_MAX_SPLIT ranges) so that even short
 * contexts give many short blocks, and runs attention_decode_kernel below
 * where the cache rows are whole 16-byte vectors; each split writes
 * (max, sum, unnormalized out) to scratch and a second kernel merges them.
 * The plan depends only on n_ctx, not on the position, so a captured graph
 * stays valid: splits past the current length exit at once, and the merge
 * reads the position from device memory. With one split (short contexts,
 * and T > 1 where the T rows already fill the GPU) the output is written
 * directly. A q8_0 cache (rows of 34-byte blocks, not 16-byte vectors) always
 * takes attention_kernel, with the same plan and merge.
 * TODO(perf): a tensor-core (mma) prefill kernel for long prompts.
 */
#include "kernels/cuda/common.cuh"
#include "kernels/cuda/cuda_kernels.h"

#define ATT_THREADS 128
#define ATT_WARPS (ATT_THREADS / 32)
#define ATT_TILE 128
#define ATT_MAXG 8   /* query heads per block */
#define ATT_DSLOT 4  /* head_dim <= ATT_DSLOT * ATT_THREADS = 512 */
#define ATT_MAX_SPLIT 128
#define ATT_MIN_CHUNK 32 /* decode keys per split, at least (R1_CUDA_ATT_CHUNK: 32, 64 or 128) */

/* R1_CUDA_ATT_CHUNK, set by the backend's init (0: ATT_MIN_CHUNK). On an H200,
 * 1.5b/7b bf16 decode at 704 tokens of context: 32 -> 460 / 206 tok/s, 64 ->
 * 450 / 204, 128 -> 440 / 202 (one run, 2026-12-04). */
int r1cu_att_chunk;

extern "C" void r1cu_attention_plan(int T, int n_ctx, int *n_split, int *chunk) {
    if (T > 1) {
        *n_split = 1;
        *chunk = n_ctx;
        return;
    }
    const int min_chunk = r1cu_att_chunk > 0 ? r1cu_att_chunk : ATT_MIN_CHUNK;
    const int unit = min_chunk < ATT_TILE ? min_chunk : ATT_TILE;
    int ns = (n_ctx + min_chunk - 1) / min_chunk;
    if (ns > ATT_MAX_SPLIT) ns = ATT_MAX_SPLIT;
    int ch = (n_ctx + ns - 1) / ns;
    ch = (ch + unit - 1) / unit * unit;
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

/* 1: every step through attention_kernel (R1_CUDA_ATT=plain; the A/B of the decode kernel) */
int r1cu_attention_plain;

/* Cache dtypes: KV_F32, KV_F16, KV_Q8 (rows of hd / 32 q8_0 blocks, 34
 * bytes each; a value is d x q rounded once, as the reference's). */
enum { KV_F32, KV_F16, KV_Q8 };
template <int KVT>
__device__ __forceinline__ float kv_load(const void *base, size_t row, int c, int hd) {
    if constexpr (KVT == KV_Q8) {
        const uint8_t *blk = (const uint8_t *)base + (row * (hd / 32) + c / 32) * 34;
        const __half d = __ushort_as_half((unsigned short)(blk[0] | blk[1] << 8));
        return __fmul_rn(__half2float(d), (float)(int8_t)blk[2 + c % 32]);
    } else if constexpr (KVT == KV_F16) {
        return __half2float(((const __half *)base)[row * hd + c]);
    } else {
        return ((const float *)base)[row * hd + c];
    }
}

/* A block's share of the work: kv head kvh, its G query heads from h0, keys
 * [p0, p1) of query row t. att_block_start fills it, loads the G query rows
 * into q_s and resets the running max and sum; false (nothing loaded) when the
 * block's split lies past the current length (graph replays). */
struct att_block {
    int kvh, G, h0, p0, p1;
};
__device__ __forceinline__ bool att_block_start(const att_args &a, int t, float *q_s, float *m_run, float *l_run,
                                                att_block &b) {
    const int g0 = (blockIdx.x % a.n_gc) * ATT_MAXG, hd = a.hd, tid = threadIdx.x;
    b.kvh = blockIdx.x / a.n_gc;
    b.G = min(ATT_MAXG, a.group - g0);
    b.h0 = b.kvh * a.group + g0;
    b.p0 = blockIdx.y * a.chunk;
    b.p1 = min(b.p0 + a.chunk, r1cu_pos(a.pos0, a.pos_dev) + t + 1);
    if (b.p0 >= b.p1) return false;
    for (int i = tid; i < b.G * hd; i += ATT_THREADS)
        q_s[i] = a.qkv[(size_t)t * a.stride + (size_t)(b.h0 + i / hd) * hd + i % hd];
    if (tid < ATT_MAXG) m_run[tid] = -INFINITY, l_run[tid] = 0.0f;
    return true;
}

/* Online softmax over a tile's n scores s_s (G, ATT_TILE), a warp per head:
 * the scores become exp(s - m_new), and each head's running max and sum are
 * updated, with corr[g] the factor its earlier output must be scaled by. */
__device__ __forceinline__ void tile_softmax(float *s_s, int n, int G, float *m_run, float *l_run, float *corr) {
    const int lane = threadIdx.x & 31, warp = threadIdx.x / 32;
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
}

template <int KVT>
__global__ void __launch_bounds__(ATT_THREADS) attention_kernel(att_args a) {
    extern __shared__ float sm[];
    float *q_s = sm;                            /* (G, hd) */
    float *s_s = q_s + ATT_MAXG * a.hd;         /* (G, ATT_TILE) */
    __shared__ float m_run[ATT_MAXG], l_run[ATT_MAXG], corr[ATT_MAXG];

    const int split = blockIdx.y, t = blockIdx.z;
    att_block b;
    if (!att_block_start(a, t, q_s, m_run, l_run, b)) return;
    const int kvh = b.kvh, G = b.G, h0 = b.h0, p0 = b.p0, p1 = b.p1;
    const int tid = threadIdx.x, lane = tid & 31, warp = tid / 32, hd = a.hd;
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
            const size_t krow = head_base + tile0 + i;
            float d[ATT_MAXG];
#pragma unroll
            for (int g = 0; g < ATT_MAXG; g++) d[g] = 0.0f;
            for (int c = lane; c < hd; c += 32) {
                const float k = kv_load<KVT>(a.kc, krow, c, hd);
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
        tile_softmax(s_s, n, G, m_run, l_run, corr);
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
                const float v = kv_load<KVT>(a.vc, head_base + tile0 + i, dd, hd);
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

/*
 * The decode step (T = 1) when a K/V row is whole 16-byte vectors (head_dim a
 * multiple of 8 for an f16 cache, of 4 for f32). attention_kernel above walks
 * its keys one dependent load after another (a warp per key for the scores, a
 * thread per dimension over every key for p V): at short contexts a step is a
 * handful of blocks, and each paid ~70 us of latency on an H200. Here:
 * - scores: a thread per key of the tile, its K row in 16-byte loads, the
 *   query heads from shared memory (broadcast), no reductions;
 * - p V: the tile's keys dealt out to groups of head_dim / VEC threads, each
 *   thread VEC dimensions of a row, every load in flight at once; the groups'
 *   sums meet in shared memory once, at the end.
 * Same online softmax and split plan as attention_kernel, so the merge and
 * the scratch layout are shared.
 */
template <bool F16>
__global__ void __launch_bounds__(ATT_THREADS) attention_decode_kernel(att_args a) {
    constexpr int VEC = F16 ? 8 : 4; /* elements per 16-byte load */
    static_assert(ATT_THREADS == ATT_TILE, "a thread per key of a tile");
    extern __shared__ float sm[];
    const int hd = a.hd, nv = hd / VEC, ngrp = ATT_THREADS / nv;
    float *q_s = sm;                    /* (G, hd) */
    float *s_s = q_s + ATT_MAXG * hd;   /* (G, ATT_TILE) */
    float *r_s = s_s + ATT_MAXG * ATT_TILE; /* (ngrp, G, hd): the groups' sums */
    __shared__ float m_run[ATT_MAXG], l_run[ATT_MAXG], corr[ATT_MAXG];

    const int split = blockIdx.y;
    att_block b;
    if (!att_block_start(a, 0, q_s, m_run, l_run, b)) return;
    const int kvh = b.kvh, G = b.G, h0 = b.h0, p0 = b.p0, p1 = b.p1;
    const int tid = threadIdx.x;
    const int vi = tid % nv, grp = tid / nv; /* p V: vector vi of the rows of group grp */
    float acc[VEC][ATT_MAXG];
#pragma unroll
    for (int j = 0; j < VEC; j++)
#pragma unroll
        for (int g = 0; g < ATT_MAXG; g++) acc[j][g] = 0.0f;
    const size_t head_base = ((size_t)a.layer * a.nkv + kvh) * a.n_ctx;
    const uint4 *kvec = reinterpret_cast<const uint4 *>(a.kc) + head_base * nv;
    const uint4 *vvec = reinterpret_cast<const uint4 *>(a.vc) + head_base * nv;
    __syncthreads();

    for (int tile0 = p0; tile0 < p1; tile0 += ATT_TILE) {
        const int n = min(ATT_TILE, p1 - tile0);
        if (tid < n) { /* the score of key tile0 + tid for each query head */
            float d[ATT_MAXG];
#pragma unroll
            for (int g = 0; g < ATT_MAXG; g++) d[g] = 0.0f;
            const uint4 *kr = kvec + (size_t)(tile0 + tid) * nv;
#pragma unroll 4
            for (int v = 0; v < nv; v++) {
                float kf[VEC];
                dequant16<F16 ? DT_F16 : DT_F32>(kr[v], 1.0f, kf);
#pragma unroll
                for (int g = 0; g < ATT_MAXG; g++) {
                    if (g >= G) break;
                    const float *q = q_s + g * hd + v * VEC;
#pragma unroll
                    for (int j = 0; j < VEC; j++) d[g] += q[j] * kf[j];
                }
            }
#pragma unroll
            for (int g = 0; g < ATT_MAXG; g++)
                if (g < G) s_s[g * ATT_TILE + tid] = d[g] * a.scale;
        }
        __syncthreads();
        tile_softmax(s_s, n, G, m_run, l_run, corr);
        __syncthreads();
        if (grp < ngrp) {
#pragma unroll
            for (int g = 0; g < ATT_MAXG; g++)
                if (g < G)
#pragma unroll
                    for (int j = 0; j < VEC; j++) acc[j][g] *= corr[g];
#pragma unroll 4
            for (int i = grp; i < n; i += ngrp) {
                float vf[VEC];
                dequant16<F16 ? DT_F16 : DT_F32>(vvec[(size_t)(tile0 + i) * nv + vi], 1.0f, vf);
#pragma unroll
                for (int g = 0; g < ATT_MAXG; g++) {
                    if (g >= G) break;
                    const float pg = s_s[g * ATT_TILE + i];
#pragma unroll
                    for (int j = 0; j < VEC; j++) acc[j][g] += pg * vf[j];
                }
            }
        }
        __syncthreads(); /* s_s and corr are rewritten by the next tile */
    }

    if (grp < ngrp)
#pragma unroll
        for (int g = 0; g < ATT_MAXG; g++)
            if (g < G)
#pragma unroll
                for (int j = 0; j < VEC; j++) r_s[((size_t)grp * G + g) * hd + vi * VEC + j] = acc[j][g];
    __syncthreads();
    for (int i = tid; i < G * hd; i += ATT_THREADS) {
        const int g = i / hd, dd = i % hd, h = h0 + g;
        float o = 0.0f;
        for (int k = 0; k < ngrp; k++) o += r_s[(size_t)k * G * hd + i];
        if (a.n_split == 1) {
            a.out[(size_t)h * hd + dd] = o / l_run[g];
        } else {
            float *p = a.part + ((size_t)h * a.n_split + split) * (hd + 2);
            p[2 + dd] = o;
            if (dd == 0) p[0] = m_run[g], p[1] = l_run[g];
        }
    }
}

/* merge the splits of one (t, head): grid (n_head, T), ATT_THREADS threads;
 * the splits' maxima and weights are reduced across the block, then a thread
 * per dimension sums the splits' outputs */
__global__ void __launch_bounds__(ATT_THREADS) attention_merge_kernel(att_args a) {
    __shared__ float e_s[ATT_MAX_SPLIT], red[ATT_WARPS];
    const int h = blockIdx.x, t = blockIdx.y, hd = a.hd, tid = threadIdx.x, lane = tid & 31, warp = tid / 32;
    const int n_keys = r1cu_pos(a.pos0, a.pos_dev) + t + 1;
    const int used = min(a.n_split, (n_keys + a.chunk - 1) / a.chunk);
    const float *p = a.part + ((size_t)t * a.n_head + h) * a.n_split * (hd + 2);
    auto block_reduce = [&](float v, bool is_max) {
        v = is_max ? warp_max(v) : warp_sum(v);
        __syncthreads(); /* red is reused */
        if (lane == 0) red[warp] = v;
        __syncthreads();
        v = red[0];
        for (int w = 1; w < ATT_WARPS; w++) v = is_max ? fmaxf(v, red[w]) : v + red[w];
        return v;
    };
    float m = -INFINITY;
    for (int s = tid; s < used; s += ATT_THREADS) m = fmaxf(m, p[(size_t)s * (hd + 2)]);
    const float M = block_reduce(m, true);
    float l = 0.0f;
    for (int s = tid; s < used; s += ATT_THREADS) {
        const float e = expf(p[(size_t)s * (hd + 2)] - M);
        e_s[s] = e;
        l += p[(size_t)s * (hd + 2) + 1] * e;
    }
    const float L = block_reduce(l, false); /* its barriers also publish e_s */
    for (int d = tid; d < hd; d += ATT_THREADS) {
        float o = 0.0f;
        for (int s = 0; s < used; s++) o += p[(size_t)s * (hd + 2) + 2 + d] * e_s[s];
        a.out[(size_t)t * a.n_head * hd + (size_t)h * hd + d] = o / L;
    }
}

static size_t att_smem(int hd) { return (size_t)(ATT_MAXG * hd + ATT_MAXG * ATT_TILE) * sizeof(float); }
/* + the groups' sums: (ATT_THREADS / (hd / VEC)) * G * hd <= ATT_THREADS * VEC * ATT_MAXG floats */
static size_t dec_smem(int hd, int vec) {
    return att_smem(hd) + (size_t)(ATT_THREADS / (hd / vec)) * ATT_MAXG * hd * sizeof(float);
}
static bool dec_fits(int hd, int vec) { return hd % vec == 0 && hd / vec <= ATT_THREADS; }

/* Called once by the backend's init: allow > 48 KB of shared memory. */
extern "C" int r1cu_attention_init(void) {
    const int hd = ATT_DSLOT * ATT_THREADS; /* the largest head_dim */
    const cudaFuncAttribute a = cudaFuncAttributeMaxDynamicSharedMemorySize;
    if (CUDA_CHECK(cudaFuncSetAttribute(attention_kernel<KV_F16>, a, (int)att_smem(hd))) ||
        CUDA_CHECK(cudaFuncSetAttribute(attention_kernel<KV_F32>, a, (int)att_smem(hd))) ||
        CUDA_CHECK(cudaFuncSetAttribute(attention_kernel<KV_Q8>, a, (int)att_smem(hd))) ||
        CUDA_CHECK(cudaFuncSetAttribute(attention_decode_kernel<true>, a, (int)dec_smem(hd, 8))) ||
        CUDA_CHECK(cudaFuncSetAttribute(attention_decode_kernel<false>, a, (int)dec_smem(hd, 4))))
        return -1;
    return 0;
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
    const bool f16 = kv->dtype == R1_DTYPE_F16, q8 = kv->dtype == R1_DTYPE_Q8_0;
    const int vec = f16 ? 8 : 4;
    if (q8 && a.hd % 32) {
        r1cu_fail("cuda attention: a q8_0 cache needs head_dim %% 32 == 0, not %d", a.hd);
        return;
    }
    /* q8_0 rows (34-byte blocks) are not whole 16-byte vectors: attention_kernel */
    if (op->T == 1 && !q8 && dec_fits(a.hd, vec) && !r1cu_attention_plain) {
        const size_t smem = dec_smem(a.hd, vec);
        if (f16) attention_decode_kernel<true><<<grid, ATT_THREADS, smem, st>>>(a);
        else attention_decode_kernel<false><<<grid, ATT_THREADS, smem, st>>>(a);
        if (CUDA_LAUNCHED("attention_decode_kernel")) return;
    } else {
        const size_t smem = att_smem(a.hd);
        if (q8) attention_kernel<KV_Q8><<<grid, ATT_THREADS, smem, st>>>(a);
        else if (f16) attention_kernel<KV_F16><<<grid, ATT_THREADS, smem, st>>>(a);
        else attention_kernel<KV_F32><<<grid, ATT_THREADS, smem, st>>>(a);
        if (CUDA_LAUNCHED("attention_kernel")) return;
    }
    if (a.n_split > 1) {
        attention_merge_kernel<<<dim3(a.n_head, op->T), ATT_THREADS, 0, st>>>(a);
        CUDA_LAUNCHED("attention_merge_kernel");
    }
}
