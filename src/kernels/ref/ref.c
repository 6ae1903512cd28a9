/*
 * ref.c - the reference backend: every kernel of the suite in plain C, f32
 * accumulation, no SIMD. It is the oracle for every other backend, so it
 * stays obviously correct; speed is not its job. Rows are split by
 * (ith, nth) so it can also run on the thread pool when a single kernel is
 * forced back to ref.
 */
#include <math.h>
#include <string.h>

#include "kernels/kernels.h"
#include "util/util.h"

#define CHUNK 256 /* weights dequantized at a time (multiple of every block) */
#define TB 64     /* tokens accumulated at a time in batched matmuls */

/* out[t*ostride + r] (=|+=) w[r,:]·x[t,:] (+ bias[r]) for rows [r0, r1) */
static void matmul_rows(const struct r1_mat *w, const float *x, int T, float *out, int ostride, const float *bias,
                        int accumulate, int r0, int r1) {
    float buf[CHUNK], acc[TB];
    const int K = w->cols;
    for (int r = r0; r < r1; r++) {
        const uint8_t *row = (const uint8_t *)w->data + (size_t)r * w->row_bytes;
        for (int t0 = 0; t0 < T; t0 += TB) {
            int tn = T - t0 < TB ? T - t0 : TB;
            for (int t = 0; t < tn; t++) acc[t] = 0.0f;
            for (int c = 0; c < K; c += CHUNK) {
                int cn = K - c < CHUNK ? K - c : CHUNK;
                const struct r1_dtype_traits *tr = &r1_dtype_traits[w->dtype];
                tr->to_f32(row + (size_t)(c / tr->block) * tr->block_size, buf, cn);
                for (int t = 0; t < tn; t++) {
                    const float *xt = x + (size_t)(t0 + t) * K + c;
                    float s = 0.0f;
                    for (int i = 0; i < cn; i++) s += buf[i] * xt[i];
                    acc[t] += s;
                }
            }
            for (int t = 0; t < tn; t++) {
                float *o = out + (size_t)(t0 + t) * ostride + r;
                float v = acc[t] + (bias ? bias[r] : 0.0f);
                *o = accumulate ? *o + v : v;
            }
        }
    }
}

static void k_embedding(const struct r1_op *op, int ith, int nth) {
    int lo, hi;
    r1_split(op->T, ith, nth, &lo, &hi);
    for (int t = lo; t < hi; t++) r1_mat_row_f32(op->w, op->ids[t], op->out + (size_t)t * op->w->cols);
}

static void k_rms_norm(const struct r1_op *op, int ith, int nth) {
    int lo, hi, n = op->n;
    r1_split(op->T, ith, nth, &lo, &hi);
    for (int t = lo; t < hi; t++) {
        const float *x = op->x + (size_t)t * n;
        float *o = op->out + (size_t)t * n;
        float ss = 0.0f;
        for (int i = 0; i < n; i++) ss += x[i] * x[i];
        float inv = 1.0f / sqrtf(ss / (float)n + op->eps);
        for (int i = 0; i < n; i++) o[i] = x[i] * inv * op->b[i];
    }
}

static void k_qkv_bias(const struct r1_op *op, int ith, int nth) {
    int lo, hi;
    r1_split(op->w->rows, ith, nth, &lo, &hi);
    matmul_rows(op->w, op->x, op->T, op->out, op->w->rows, op->b, 0, lo, hi);
}

static void k_matvec_add(const struct r1_op *op, int ith, int nth) {
    int lo, hi;
    r1_split(op->w->rows, ith, nth, &lo, &hi);
    matmul_rows(op->w, op->x, op->T, op->out, op->w->rows, NULL, 1, lo, hi);
}

static void k_lm_head(const struct r1_op *op, int ith, int nth) {
    int lo, hi;
    r1_split(op->w->rows, ith, nth, &lo, &hi);
    matmul_rows(op->w, op->x, op->T, op->out, op->w->rows, NULL, 0, lo, hi);
}

static void k_gate_up_silu(const struct r1_op *op, int ith, int nth) {
    const int F = op->w->rows / 2, K = op->w->cols;
    float buf[CHUNK];
    int lo, hi;
    r1_split(F, ith, nth, &lo, &hi);
    for (int j = lo; j < hi; j++) {
        for (int t = 0; t < op->T; t++) {
            const float *xt = op->x + (size_t)t * K;
            float g = 0.0f, u = 0.0f;
            for (int half = 0; half < 2; half++) {
                const uint8_t *row = (const uint8_t *)op->w->data + (size_t)(j + half * F) * op->w->row_bytes;
                const struct r1_dtype_traits *tr = &r1_dtype_traits[op->w->dtype];
                float acc = 0.0f;
                for (int c = 0; c < K; c += CHUNK) {
                    int cn = K - c < CHUNK ? K - c : CHUNK;
                    tr->to_f32(row + (size_t)(c / tr->block) * tr->block_size, buf, cn);
                    float s = 0.0f;
                    for (int i = 0; i < cn; i++) s += buf[i] * xt[c + i];
                    acc += s;
                }
                if (half == 0) g = acc;
                else u = acc;
            }
            op->out[(size_t)t * F + j] = g / (1.0f + expf(-g)) * u;
        }
    }
}

static void k_rope_qk(const struct r1_op *op, int ith, int nth) {
    const int hd = op->head_dim, half = hd / 2, nh = op->n_head + op->n_kv_head;
    const int stride = (op->n_head + 2 * op->n_kv_head) * hd;
    int lo, hi;
    r1_split(op->T * nh, ith, nth, &lo, &hi);
    for (int i = lo; i < hi; i++) {
        int t = i / nh, h = i % nh;
        float *v = op->out + (size_t)t * stride + (size_t)h * hd;
        const float *c = op->rope_cos + (size_t)r1_op_pos(op, t) * half;
        const float *s = op->rope_sin + (size_t)r1_op_pos(op, t) * half;
        for (int k = 0; k < half; k++) {
            float a = v[k], b = v[k + half];
            v[k] = a * c[k] - b * s[k];
            v[k + half] = b * c[k] + a * s[k];
        }
    }
}

static void *kv_ptr(const struct r1_kv_cache *kv, void *base, int layer, int h, int pos) {
    size_t row = r1_kv_row(kv, layer, h, pos);
    return (uint8_t *)base + row * r1_dtype_row_bytes(kv->dtype, kv->head_dim);
}

/* A cache row in the cache's dtype (f32, f16, q8_0) to f32 and back. */
static void load_row(const struct r1_kv_cache *kv, const void *p, float *dst) {
    r1_dtype_traits[kv->dtype].to_f32(p, dst, kv->head_dim);
}

static void store_row(const struct r1_kv_cache *kv, void *p, const float *src) {
    r1_dtype_traits[kv->dtype].from_f32(src, p, kv->head_dim);
}

static void k_kv_append(const struct r1_op *op, int ith, int nth) {
    const int hd = op->head_dim, nkv = op->n_kv_head;
    const int stride = (op->n_head + 2 * nkv) * hd;
    int lo, hi;
    r1_split(op->T * nkv, ith, nth, &lo, &hi);
    for (int i = lo; i < hi; i++) {
        int t = i / nkv, h = i % nkv;
        const float *k = op->x + (size_t)t * stride + (size_t)(op->n_head + h) * hd;
        const float *v = k + (size_t)nkv * hd;
        const struct r1_kv_cache *kv = r1_op_kv(op, t);
        store_row(kv, kv_ptr(kv, kv->k, op->layer, h, r1_op_pos(op, t)), k);
        store_row(kv, kv_ptr(kv, kv->v, op->layer, h, r1_op_pos(op, t)), v);
    }
}

static void k_attention_gqa(const struct r1_op *op, int ith, int nth) {
    const int hd = op->head_dim, nh = op->n_head, group = nh / op->n_kv_head;
    const int stride = (nh + 2 * op->n_kv_head) * hd;
    const float scale = 1.0f / sqrtf((float)hd);
    float *att = op->scratch + (size_t)ith * op->scratch_stride;
    float row[512]; /* head_dim <= 512, checked at load */
    int lo, hi;
    r1_split(op->T * nh, ith, nth, &lo, &hi);
    for (int i = lo; i < hi; i++) {
        int t = i / nh, h = i % nh, kvh = h / group, n = r1_op_pos(op, t) + 1;
        const struct r1_kv_cache *kv = r1_op_kv(op, t);
        const float *q = op->x + (size_t)t * stride + (size_t)h * hd;
        float *o = op->out + (size_t)t * nh * hd + (size_t)h * hd;
        float mx = -INFINITY;
        for (int p = 0; p < n; p++) {
            load_row(kv, kv_ptr(kv, kv->k, op->layer, kvh, p), row);
            float s = 0.0f;
            for (int k = 0; k < hd; k++) s += q[k] * row[k];
            att[p] = s * scale;
            if (att[p] > mx) mx = att[p];
        }
        float sum = 0.0f;
        for (int p = 0; p < n; p++) {
            att[p] = expf(att[p] - mx);
            sum += att[p];
        }
        for (int k = 0; k < hd; k++) o[k] = 0.0f;
        for (int p = 0; p < n; p++) {
            load_row(kv, kv_ptr(kv, kv->v, op->layer, kvh, p), row);
            float a = att[p] / sum;
            for (int k = 0; k < hd; k++) o[k] += a * row[k];
        }
    }
}

static void k_argmax(const struct r1_op *op, int ith, int nth) {
    (void)nth;
    if (ith != 0) return;
    int best = 0;
    for (int i = 1; i < op->n; i++)
        if (op->x[i] > op->x[best]) best = i;
    *op->out_id = best;
}

const r1_kernel_fn r1_ref_kernels[R1_K_COUNT] = {
    [R1_K_EMBEDDING] = k_embedding,   [R1_K_RMS_NORM] = k_rms_norm,         [R1_K_QKV_BIAS] = k_qkv_bias,
    [R1_K_ROPE_QK] = k_rope_qk,       [R1_K_KV_APPEND] = k_kv_append,       [R1_K_ATTENTION_GQA] = k_attention_gqa,
    [R1_K_MATVEC_ADD] = k_matvec_add, [R1_K_GATE_UP_SILU] = k_gate_up_silu, [R1_K_LM_HEAD] = k_lm_head,
    [R1_K_ARGMAX] = k_argmax,
};

/* Its table is left empty: r1_backend_resolve fills every NULL entry from
 * r1_ref_kernels, so the list above is the only one. */
const struct r1_backend r1_backend_ref = {
    .name = "ref",
    .init = NULL,
    .kv_dtype = R1_DTYPE_F32,
};
