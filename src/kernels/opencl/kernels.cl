/*
 * kernels.cl - the decode-step kernel suite in OpenCL C 1.2, compiled at run
 * time by the device's driver (embedded in the binary at build time, cached
 * on disk per device by backend.c). Needs nothing beyond OpenCL 1.2 core:
 * f16 data is read and written with vload_half / vstore_half (core; no
 * cl_khr_fp16 arithmetic), everything is computed in f32.
 *
 * Every buffer argument is a (buffer, byte offset) pair, PTR(type, name),
 * since the host hands out addresses inside its buffers (backend.c).
 * Weight layouts are runtime/device.h's: 16-byte aligned rows for f32 / f16 /
 * bf16, planar q8_0 and q4_0 (quants, then the f16 scales).
 * Matmuls: one work-group of WG items per weight row and group of NT tokens,
 * each item a strided share of the row with vector loads, then a work-group
 * tree reduction.
 */
#define WG 64      /* matmul work-group size (also in backend.c) */
#define NT 4       /* tokens per matmul work-group */
#define NORM_WG 256
#define ATT_WG 64  /* attention: positions per tile (also in backend.c) */
#define ATT_G 8    /* at most this many query heads per work-group */

#define PTR(T, n) __global T *n##_b, ulong n##_o
#define AT(T, n) ((__global T *)((__global uchar *)n##_b + n##_o))

inline float sum8(float8 v) {
    float4 a = v.lo + v.hi;
    return a.x + a.y + a.z + a.w;
}
inline float sum16(float16 v) { return sum8(v.lo + v.hi); }

inline float8 bf16x8(__global const ushort *p) {
    uint8 u = convert_uint8(vload8(0, p)) << 16;
    return as_float8(u);
}

/* ---- per-dtype partial dot products of row r with NT tokens of x ----
 * acc.sN: token t0 + N (tokens past T read row T - 1 and are not stored).
 * One loop per layout family; a dtype adds only its decoder. */
#define XROW(i) (x + (size_t)min(t0 + (i), T - 1) * K)

/* f32 / f16 / bf16 rows: item lid takes 8 weights at a time, strided by ns,
 * then single weights past the last full 8. W is the stored element type,
 * LOAD8(p) the 8 weights at p as a float8, LOAD1(p, c) weight c as a float. */
#define PART_FLOAT(name, W, LOAD8, LOAD1)                                                                          \
    inline float4 name(__global const uchar *w, ulong rb, int r, __global const float *x, int K, int t0, int T,     \
                       int lid, int ns) {                                                                          \
        __global const W *wr = (__global const W *)(w + (size_t)r * rb);                                          \
        __global const float *x0 = XROW(0), *x1 = XROW(1), *x2 = XROW(2), *x3 = XROW(3);                          \
        float4 acc = 0;                                                                                            \
        int K8 = K & ~7;                                                                                           \
        for (int c = lid * 8; c < K8; c += ns * 8) {                                                               \
            float8 wv = LOAD8(wr + c);                                                                             \
            acc.x += sum8(wv * vload8(0, x0 + c));                                                                 \
            acc.y += sum8(wv * vload8(0, x1 + c));                                                                 \
            acc.z += sum8(wv * vload8(0, x2 + c));                                                                 \
            acc.w += sum8(wv * vload8(0, x3 + c));                                                                 \
        }                                                                                                          \
        for (int c = K8 + lid; c < K; c += ns) {                                                                   \
            float wv = LOAD1(wr, c);                                                                               \
            acc += wv * (float4)(x0[c], x1[c], x2[c], x3[c]);                                                      \
        }                                                                                                          \
        return acc;                                                                                                \
    }

#define F32_LOAD8(p) vload8(0, p)
#define F32_LOAD1(p, c) (p)[c]
#define F16_LOAD8(p) vload_half8(0, p)
#define F16_LOAD1(p, c) vload_half(c, p)
#define BF16_LOAD8(p) bf16x8(p)
#define BF16_LOAD1(p, c) as_float((uint)(p)[c] << 16)
PART_FLOAT(part_f32, float, F32_LOAD8, F32_LOAD1)
PART_FLOAT(part_f16, half, F16_LOAD8, F16_LOAD1)
PART_FLOAT(part_bf16, ushort, BF16_LOAD8, BF16_LOAD1)

/* planar quants: the quants of each 32-weight block (rows, rb), then f16
 * scales (rows, K/32) */
#define Q_SCALES(w, rows, rb) ((__global const half *)((w) + (size_t)(rows) * (rb)))

/* planar 32-weight blocks: item lid takes blocks strided by ns. Q is the
 * stored quant type, QB its bytes per block, DECODE(p, lo, hi) the block at
 * p as weights 0..15 (lo) and 16..31 (hi), unscaled. */
#define PART_BLOCK(name, Q, QB, DECODE)                                                                            \
    inline float4 name(__global const uchar *w, ulong rb, int rows, int r, __global const float *x, int K, int t0,  \
                       int T, int lid, int ns) {                                                                   \
        const int nb = K / 32;                                                                                     \
        __global const Q *q = (__global const Q *)(w + (size_t)r * rb);                                            \
        __global const half *sc = Q_SCALES(w, rows, rb) + (size_t)r * nb;                                          \
        __global const float *x0 = XROW(0), *x1 = XROW(1), *x2 = XROW(2), *x3 = XROW(3);                          \
        float4 acc = 0;                                                                                            \
        for (int b = lid; b < nb; b += ns) {                                                                       \
            float d = vload_half(b, sc);                                                                           \
            float16 lo, hi;                                                                                        \
            DECODE(q + b * QB, lo, hi);                                                                            \
            int c = b * 32;                                                                                        \
            float4 s;                                                                                              \
            s.x = sum16(lo * vload16(0, x0 + c) + hi * vload16(0, x0 + c + 16));                                   \
            s.y = sum16(lo * vload16(0, x1 + c) + hi * vload16(0, x1 + c + 16));                                   \
            s.z = sum16(lo * vload16(0, x2 + c) + hi * vload16(0, x2 + c + 16));                                   \
            s.w = sum16(lo * vload16(0, x3 + c) + hi * vload16(0, x3 + c + 16));                                   \
            acc += d * s;                                                                                          \
        }                                                                                                          \
        return acc;                                                                                                \
    }

/* q8_0: 32 int8 quants a block */
#define Q8_DECODE(p, lo, hi) (lo = convert_float16(vload16(0, (p))), hi = convert_float16(vload16(0, (p) + 16)))
/* q4_0: GGUF nibbles, 16 bytes a block: low nibbles weights 0..15, high
 * 16..31, value q - 8 */
#define Q4_DECODE(p, lo, hi)                                                                                       \
    do {                                                                                                           \
        uchar16 v = vload16(0, (p));                                                                               \
        lo = convert_float16(v & (uchar)15) - 8.0f, hi = convert_float16(v >> (uchar)4) - 8.0f;                    \
    } while (0)
PART_BLOCK(part_q8, char, 32, Q8_DECODE)
PART_BLOCK(part_q4, uchar, 16, Q4_DECODE)

/* dtype codes: the host's enum r1_dtype values are passed as DT_* below */
#define DT_F32 0
#define DT_F16 1
#define DT_BF16 2
#define DT_Q8_0 3
#define DT_Q4_0 4

/* item lid of ns items sharing the row */
inline float4 part(int dt, __global const uchar *w, ulong rb, int rows, int r, __global const float *x, int K,
                   int t0, int T, int lid, int ns) {
    switch (dt) {
    case DT_F32: return part_f32(w, rb, r, x, K, t0, T, lid, ns);
    case DT_F16: return part_f16(w, rb, r, x, K, t0, T, lid, ns);
    case DT_BF16: return part_bf16(w, rb, r, x, K, t0, T, lid, ns);
    case DT_Q8_0: return part_q8(w, rb, rows, r, x, K, t0, T, lid, ns);
    default: return part_q4(w, rb, rows, r, x, K, t0, T, lid, ns);
    }
}

/* sum of v over the work-group (every item gets it) */
inline float4 wg_sum4(float4 v, __local float4 *red, int lid) {
    red[lid] = v;
    barrier(CLK_LOCAL_MEM_FENCE);
    for (int s = WG / 2; s > 0; s >>= 1) {
        if (lid < s) red[lid] += red[lid + s];
        barrier(CLK_LOCAL_MEM_FENCE);
    }
    float4 r = red[0];
    barrier(CLK_LOCAL_MEM_FENCE);
    return r;
}

/* out[t, r] = (mode 1: out[t, r] +) w[r,:]·x[t,:] (+ bias[r] when has_bias).
 * Work-group g: rows g*rpg .. of tokens NT*get_group_id(1) .. (rpg > 1 on
 * CPU devices, where a work-group costs more than a row).
 * Global (ceil(rows / rpg) * WG, ceil(T / NT)), local (WG, 1). */
__kernel __attribute__((reqd_work_group_size(WG, 1, 1))) void matmul(
    int dt, PTR(uchar, w), ulong rb, int rows, int K, PTR(float, x), int T, PTR(float, out), int ostride,
    PTR(float, bias), int has_bias, int mode, int rpg) {
    __local float4 red[WG];
    const int lid = get_local_id(0), t0 = get_group_id(1) * NT, r1 = min(rows, (int)(get_group_id(0) + 1) * rpg);
    for (int r = get_group_id(0) * rpg; r < r1; r++) {
        float4 acc = part(dt, AT(uchar, w), rb, rows, r, AT(float, x), K, t0, T, lid, WG);
        acc = wg_sum4(acc, red, lid);
        if (lid < NT && t0 + lid < T) {
            float v = lid == 0 ? acc.x : lid == 1 ? acc.y : lid == 2 ? acc.z : acc.w;
            if (has_bias) v += AT(float, bias)[r];
            __global float *o = AT(float, out) + (size_t)(t0 + lid) * ostride + r;
            *o = mode ? *o + v : v;
        }
    }
}

/* w = [gate; up] (2F, K): out[t, j] = silu(gate_j·x_t) * (up_j·x_t).
 * Global (ceil(F / rpg) * WG, ceil(T / NT)). */
__kernel __attribute__((reqd_work_group_size(WG, 1, 1))) void gate_up_silu(
    int dt, PTR(uchar, w), ulong rb, int rows, int K, PTR(float, x), int T, PTR(float, out), int rpg) {
    __local float4 red[WG];
    const int F = rows / 2, lid = get_local_id(0), t0 = get_group_id(1) * NT;
    const int j1 = min(F, (int)(get_group_id(0) + 1) * rpg);
    for (int j = get_group_id(0) * rpg; j < j1; j++) {
        float4 g = part(dt, AT(uchar, w), rb, rows, j, AT(float, x), K, t0, T, lid, WG);
        float4 u = part(dt, AT(uchar, w), rb, rows, j + F, AT(float, x), K, t0, T, lid, WG);
        g = wg_sum4(g, red, lid);
        u = wg_sum4(u, red, lid);
        if (lid < NT && t0 + lid < T) {
            float gv = lid == 0 ? g.x : lid == 1 ? g.y : lid == 2 ? g.z : g.w;
            float uv = lid == 0 ? u.x : lid == 1 ? u.y : lid == 2 ? u.z : u.w;
            AT(float, out)[(size_t)(t0 + lid) * F + j] = gv / (1.0f + exp(-gv)) * uv;
        }
    }
}

/* The same two kernels with one work-item per row (and group of NT tokens),
 * no local memory: for CPU devices (PoCL), where a work-group reduction
 * costs more than the row. Global (rows, ceil(T / NT)). */
__kernel void matmul_item(int dt, PTR(uchar, w), ulong rb, int rows, int K, PTR(float, x), int T, PTR(float, out),
                          int ostride, PTR(float, bias), int has_bias, int mode) {
    const int r = get_global_id(0), t0 = get_global_id(1) * NT;
    if (r >= rows) return;
    float4 acc = part(dt, AT(uchar, w), rb, rows, r, AT(float, x), K, t0, T, 0, 1);
    const float b = has_bias ? AT(float, bias)[r] : 0.0f;
    float a[NT] = {acc.x, acc.y, acc.z, acc.w};
    for (int i = 0; i < NT && t0 + i < T; i++) {
        __global float *o = AT(float, out) + (size_t)(t0 + i) * ostride + r;
        *o = mode ? *o + a[i] + b : a[i] + b;
    }
}

__kernel void gate_up_silu_item(int dt, PTR(uchar, w), ulong rb, int rows, int K, PTR(float, x), int T,
                                PTR(float, out)) {
    const int F = rows / 2, j = get_global_id(0), t0 = get_global_id(1) * NT;
    if (j >= F) return;
    float4 g4 = part(dt, AT(uchar, w), rb, rows, j, AT(float, x), K, t0, T, 0, 1);
    float4 u4 = part(dt, AT(uchar, w), rb, rows, j + F, AT(float, x), K, t0, T, 0, 1);
    float g[NT] = {g4.x, g4.y, g4.z, g4.w}, u[NT] = {u4.x, u4.y, u4.z, u4.w};
    for (int i = 0; i < NT && t0 + i < T; i++)
        AT(float, out)[(size_t)(t0 + i) * F + j] = g[i] / (1.0f + exp(-g[i])) * u[i];
}

/* weight (r, c) of w, dequantized */
inline float deq(int dt, __global const uchar *w, ulong rb, int rows, int K, int r, int c) {
    __global const uchar *row = w + (size_t)r * rb;
    switch (dt) {
    case DT_F32: return ((__global const float *)row)[c];
    case DT_F16: return vload_half(c, (__global const half *)row);
    case DT_BF16: return as_float((uint)((__global const ushort *)row)[c] << 16);
    case DT_Q8_0:
        return vload_half((size_t)r * (K / 32) + c / 32, Q_SCALES(w, rows, rb)) * ((__global const char *)row)[c];
    default: {
        uchar b = row[c / 32 * 16 + c % 16];
        int q = (c % 32 < 16 ? b & 15 : b >> 4) - 8;
        return vload_half((size_t)r * (K / 32) + c / 32, Q_SCALES(w, rows, rb)) * (float)q;
    }
    }
}

/* out[t, :] = row ids[t] of w, dequantized. Global (cols rounded up, T). */
__kernel void embedding(int dt, PTR(uchar, w), ulong rb, int rows, int K, PTR(int, ids), PTR(float, out)) {
    const int c = get_global_id(0), t = get_global_id(1);
    if (c >= K) return;
    AT(float, out)[(size_t)t * K + c] = deq(dt, AT(uchar, w), rb, rows, K, AT(int, ids)[t], c);
}

/* out (rows, K) f32 = w dequantized (CLBlast prefill). Global (K rounded up, rows). */
__kernel void dequant_f32(int dt, PTR(uchar, w), ulong rb, int rows, int K, PTR(float, out)) {
    const int c = get_global_id(0), r = get_global_id(1);
    if (c < K) AT(float, out)[(size_t)r * K + c] = deq(dt, AT(uchar, w), rb, rows, K, r, c);
}

/* out[t, r] = bias[r]. Global (rows rounded up to 64, T). */
__kernel void bias_rows(PTR(float, out), PTR(float, bias), int rows) {
    const int r = get_global_id(0), t = get_global_id(1);
    if (r >= rows) return;
    AT(float, out)[(size_t)t * rows + r] = AT(float, bias)[r];
}

/* out[t, j] = silu(gu[t, j]) * gu[t, F + j]. Global (F rounded up to 64, T). */
__kernel void silu_mul(PTR(float, gu), int F, PTR(float, out)) {
    const int j = get_global_id(0), t = get_global_id(1);
    if (j >= F) return;
    const float g = AT(float, gu)[(size_t)t * 2 * F + j], u = AT(float, gu)[(size_t)t * 2 * F + F + j];
    AT(float, out)[(size_t)t * F + j] = g / (1.0f + exp(-g)) * u;
}

/* out[t,:] = x[t,:] / rms(x[t,:]) * g[:]. Global (NORM_WG, T). */
__kernel __attribute__((reqd_work_group_size(NORM_WG, 1, 1))) void rms_norm(PTR(float, x), PTR(float, g),
                                                                             PTR(float, out), int n, float eps) {
    __local float red[NORM_WG];
    const int t = get_group_id(1), lid = get_local_id(0);
    __global const float *x = AT(float, x) + (size_t)t * n;
    __global float *o = AT(float, out) + (size_t)t * n;
    __global const float *g = AT(float, g);
    float ss = 0;
    for (int i = lid; i < n; i += NORM_WG) ss += x[i] * x[i];
    red[lid] = ss;
    barrier(CLK_LOCAL_MEM_FENCE);
    for (int s = NORM_WG / 2; s > 0; s >>= 1) {
        if (lid < s) red[lid] += red[lid + s];
        barrier(CLK_LOCAL_MEM_FENCE);
    }
    const float inv = 1.0f / sqrt(red[0] / (float)n + eps);
    for (int i = lid; i < n; i += NORM_WG) o[i] = x[i] * inv * g[i];
}

/* Rotate-half RoPE of the Q and K heads of the qkv buffer, in place.
 * Position of row t: pos0 + t, pos0 read from pos when use_pos.
 * Global: (hd / 2) * (n_head + n_kv_head) * T items rounded up to 64. */
__kernel void rope_qk(PTR(float, qkv), PTR(float, cs), PTR(float, sn), int n_head, int n_kv, int hd, int T, int pos0,
                      PTR(int, pos), int use_pos) {
    const int half_ = hd / 2, nh = n_head + n_kv, id = get_global_id(0);
    if (id >= half_ * nh * T) return;
    const int k = id % half_, h = id / half_ % nh, t = id / half_ / nh;
    const int p = (use_pos ? AT(int, pos)[0] : pos0) + t;
    __global float *v = AT(float, qkv) + (size_t)t * (n_head + 2 * n_kv) * hd + (size_t)h * hd;
    const float c = AT(float, cs)[(size_t)p * half_ + k], s = AT(float, sn)[(size_t)p * half_ + k];
    const float a = v[k], b = v[k + half_];
    v[k] = a * c - b * s;
    v[k + half_] = b * c + a * s;
}

/* K and V rows of the qkv buffer into the cache at layer, positions pos0 + t.
 * f16 caches round to nearest even. Global: hd * n_kv * T rounded up to 64. */
__kernel void kv_append(PTR(float, qkv), PTR(uchar, kc), PTR(uchar, vc), int f16, int n_head, int n_kv, int hd,
                        int n_ctx, int layer, int T, int pos0, PTR(int, pos), int use_pos) {
    const int id = get_global_id(0);
    if (id >= hd * n_kv * T) return;
    const int k = id % hd, h = id / hd % n_kv, t = id / hd / n_kv;
    const int p = (use_pos ? AT(int, pos)[0] : pos0) + t;
    __global const float *src = AT(float, qkv) + (size_t)t * (n_head + 2 * n_kv) * hd + (size_t)(n_head + h) * hd;
    const size_t idx = (((size_t)layer * n_kv + h) * n_ctx + p) * hd + k;
    const float kv = src[k], vv = src[(size_t)n_kv * hd + k];
    if (f16) {
        vstore_half_rte(kv, idx, (__global half *)AT(uchar, kc));
        vstore_half_rte(vv, idx, (__global half *)AT(uchar, vc));
    } else {
        ((__global float *)AT(uchar, kc))[idx] = kv;
        ((__global float *)AT(uchar, vc))[idx] = vv;
    }
}

/* The same into a q8_0 cache: a row is hd / 32 GGUF blocks (f16 scale d,
 * then 32 int8), and one item quantizes 32 values of a K or V row with the
 * reference's quantizer (d = amax / 127, q = x * (1 / d) rounded half away
 * from zero, d stored rounded to nearest even), so the bytes are the host
 * backends'. Global: (hd / 32) * n_kv * T * 2 rounded up to 64. */
__kernel void kv_append_q8(PTR(float, qkv), PTR(uchar, kc), PTR(uchar, vc), int n_head, int n_kv, int hd,
                           int n_ctx, int layer, int T, int pos0, PTR(int, pos), int use_pos) {
#pragma OPENCL FP_CONTRACT OFF /* x * inv rounded before its fraction is taken, as on the host */
    const int nb = hd / 32, id = get_global_id(0);
    if (id >= nb * n_kv * T * 2) return;
    const int b = id % nb, h = id / nb % n_kv, t = id / nb / n_kv % T, is_v = id / nb / n_kv / T;
    const int p = (use_pos ? AT(int, pos)[0] : pos0) + t;
    __global const float *x = AT(float, qkv) + (size_t)t * (n_head + 2 * n_kv) * hd +
                              (size_t)(n_head + is_v * n_kv + h) * hd + b * 32;
    __global uchar *dst =
        (is_v ? AT(uchar, vc) : AT(uchar, kc)) + ((((size_t)layer * n_kv + h) * n_ctx + p) * nb + b) * 34;
    float amax = 0;
    for (int j = 0; j < 32; j++) {
        const float a = fabs(x[j]);
        amax = a > amax ? a : amax;
    }
    const float d = amax / 127.0f, inv = d != 0.0f ? 1.0f / d : 0.0f;
    vstore_half_rte(d, 0, (__global half *)dst);
    for (int j = 0; j < 32; j++) {
        const float v = x[j] * inv;
        const int i = (int)v; /* toward zero, exact for |v| <= 128 */
        const float fr = v - (float)i;
        ((__global char *)dst)[2 + j] = (char)(i + (fr >= 0.5f) - (fr <= -0.5f));
    }
}

/* Cache dtypes (kvt): 0 f32, 1 f16, 2 q8_0. Values k .. k + 3 (k % 4 == 0)
 * and value k of row `row` (rows of hd values); a q8_0 value is d x q
 * rounded once, as the reference's. */
inline float4 kv_load4(__global const uchar *base, int kvt, size_t row, int k, int hd) {
    if (kvt == 2) {
        __global const uchar *blk = base + (row * (hd / 32) + k / 32) * 34;
        const float d = vload_half(0, (__global const half *)blk);
        return d * convert_float4(vload4(0, (__global const char *)blk + 2 + k % 32));
    }
    const size_t idx = row * hd + k;
    return kvt ? vload_half4(0, (__global const half *)base + idx) : vload4(0, (__global const float *)base + idx);
}
inline float kv_load(__global const uchar *base, int kvt, size_t row, int k, int hd) {
    if (kvt == 2) {
        __global const uchar *blk = base + (row * (hd / 32) + k / 32) * 34;
        return vload_half(0, (__global const half *)blk) * (float)((__global const char *)blk)[2 + k % 32];
    }
    const size_t idx = row * hd + k;
    return kvt ? vload_half(idx, (__global const half *)base) : ((__global const float *)base)[idx];
}

/* Causal GQA attention, decode (T = 1) and prompt (T > 1) alike. A
 * work-group takes up to ATT_G query rows of one kv head: ng of its query
 * heads (a slice of at most ATT_G) for tq consecutive tokens (tq > 1 in the
 * prompt when the group is small), and walks the cache positions
 * 0..pos0+t in tiles of ATT_WG with an online softmax, reading each K and V
 * row once for all its rows; row (token t) masks the positions past pos0+t.
 * hd % 4 == 0, hd <= 4 * ATT_WG (q8_0: hd % 32 == 0). Local: q (ng * tq * hd floats).
 * Global (ATT_WG * n_kv * n_slices, ceil(T / tq)). */
__kernel __attribute__((reqd_work_group_size(ATT_WG, 1, 1))) void attention(
    PTR(float, qkv), PTR(uchar, kc), PTR(uchar, vc), PTR(float, out), int kvt, int n_head, int n_kv, int hd,
    int n_ctx, int layer, int T, int pos0, PTR(int, pos), int use_pos, int group, int n_slices, int tq,
    __local float *q) {
    __local float sc[ATT_G][ATT_WG];
    __local float mnew[ATT_G], scale[ATT_G];
    const int lid = get_local_id(0), grp = get_group_id(0), t0 = get_group_id(1) * tq;
    const int kvh = grp / n_slices, slice = grp % n_slices;
    const int h0 = kvh * group + slice * ATT_G, ng = min(ATT_G, group - slice * ATT_G);
    const int nr = ng * min(tq, T - t0); /* rows: r -> head h0 + r % ng, token t0 + r / ng */
    const int p0s = use_pos ? AT(int, pos)[0] : pos0;
    const int nmax = p0s + t0 + nr / ng; /* positions the last token sees */
    const int stride = (n_head + 2 * n_kv) * hd;
    const float qscale = 1.0f / sqrt((float)hd);
    for (int i = lid; i < nr * hd; i += ATT_WG) {
        const int r = i / hd, k = i % hd;
        q[i] = AT(float, qkv)[(size_t)(t0 + r / ng) * stride + (size_t)(h0 + r % ng) * hd + k] * qscale;
    }
    const size_t row0 = ((size_t)layer * n_kv + kvh) * n_ctx; /* the cache row of position 0 */
    __global const uchar *K = AT(uchar, kc), *V = AT(uchar, vc);
    float m[ATT_G], l[ATT_G], acc[ATT_G][4]; /* item: output dims lid, lid + ATT_WG, ... */
    for (int r = 0; r < ATT_G; r++) {
        m[r] = -INFINITY, l[r] = 0;
        for (int j = 0; j < 4; j++) acc[r][j] = 0;
    }
    barrier(CLK_LOCAL_MEM_FENCE);
    for (int p0 = 0; p0 < nmax; p0 += ATT_WG) {
        const int p = p0 + lid, tn = min(ATT_WG, nmax - p0);
        /* scores of position p for every row; -inf past the row's token */
        if (p < nmax) {
            float s[ATT_G];
            for (int r = 0; r < ATT_G; r++) s[r] = 0;
            for (int k = 0; k < hd; k += 4) {
                float4 kv = kv_load4(K, kvt, row0 + p, k, hd);
                for (int r = 0; r < nr; r++) s[r] += dot(kv, vload4(0, q + r * hd + k));
            }
            for (int r = 0; r < nr; r++) sc[r][lid] = p <= p0s + t0 + r / ng ? s[r] : -INFINITY;
        }
        barrier(CLK_LOCAL_MEM_FENCE);
        if (lid < nr) {
            float mx = m[lid];
            for (int j = 0; j < tn; j++) mx = fmax(mx, sc[lid][j]);
            mnew[lid] = mx;
            scale[lid] = mx == -INFINITY ? 1.0f : exp(m[lid] - mx);
        }
        barrier(CLK_LOCAL_MEM_FENCE);
        if (p < nmax)
            for (int r = 0; r < nr; r++) sc[r][lid] = mnew[r] == -INFINITY ? 0.0f : exp(sc[r][lid] - mnew[r]);
        barrier(CLK_LOCAL_MEM_FENCE);
        for (int r = 0; r < nr; r++) {
            float ts = 0;
            for (int j = 0; j < tn; j++) ts += sc[r][j];
            l[r] = l[r] * scale[r] + ts;
            m[r] = mnew[r];
            for (int j = 0; j < 4; j++) acc[r][j] *= scale[r];
        }
        for (int j = 0; j < 4; j++) {
            const int k = lid + j * ATT_WG;
            if (k >= hd) break;
            for (int i = 0; i < tn; i++) {
                float v = kv_load(V, kvt, row0 + p0 + i, k, hd);
                for (int r = 0; r < nr; r++) acc[r][j] += sc[r][i] * v;
            }
        }
        barrier(CLK_LOCAL_MEM_FENCE);
    }
    for (int r = 0; r < nr; r++) {
        __global float *o = AT(float, out) + (size_t)(t0 + r / ng) * n_head * hd + (size_t)(h0 + r % ng) * hd;
        for (int j = 0; j < 4; j++) {
            const int k = lid + j * ATT_WG;
            if (k < hd) o[k] = acc[r][j] / l[r];
        }
    }
}

/* *out = argmax of x[0..n), the lowest index on ties. One work-group of NORM_WG. */
__kernel __attribute__((reqd_work_group_size(NORM_WG, 1, 1))) void argmax(PTR(float, x), int n, PTR(int, out)) {
    __local float bv[NORM_WG];
    __local int bi[NORM_WG];
    const int lid = get_local_id(0);
    __global const float *x = AT(float, x);
    float best = -INFINITY;
    int idx = n; /* none yet */
    for (int i = lid; i < n; i += NORM_WG)
        if (x[i] > best || idx == n) best = x[i], idx = i;
    bv[lid] = best, bi[lid] = idx;
    barrier(CLK_LOCAL_MEM_FENCE);
    for (int s = NORM_WG / 2; s > 0; s >>= 1) {
        if (lid < s) {
            float ov = bv[lid + s];
            int oi = bi[lid + s];
            if (oi < n && (bi[lid] == n || ov > bv[lid] || (ov == bv[lid] && oi < bi[lid]))) bv[lid] = ov, bi[lid] = oi;
        }
        barrier(CLK_LOCAL_MEM_FENCE);
    }
    if (lid == 0) AT(int, out)[0] = bi[0] < n ? bi[0] : 0;
}
