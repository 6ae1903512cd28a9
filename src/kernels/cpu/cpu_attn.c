/*
 * cpu_attn.c - the cpu backend's KV append and grouped-query attention:
 * blocked attention with an online softmax (each K/V row converted once and
 * used by every query of its group), one head at a time on ISAs without the
 * block helpers, and runs of several sequences (continuous batching) as
 * causal blocks of their own. A q8_0 cache is read directly by the ISA's
 * q8_0 helpers, or else a chunk of rows at a time into f32 (the same values
 * as the reference's either way), never the whole cache. The kernel table
 * is in cpu.c.
 */
#include <math.h>
#include <string.h>

#include "kernels/cpu/cpu.h"
#include "util/util.h"

/* The element index of position pos of (layer, h) in an f32 or f16 cache. */
static size_t kv_index(const struct r1_kv_cache *kv, int layer, int h, int pos) {
    return r1_kv_row(kv, layer, h, pos) * kv->head_dim;
}

/* Row pos of (layer, h) in base (kv->k or kv->v), any cache dtype. */
static const uint8_t *kv_row(const struct r1_kv_cache *kv, const void *base, int layer, int h, int pos) {
    return (const uint8_t *)base + r1_kv_row(kv, layer, h, pos) * r1_dtype_row_bytes(kv->dtype, kv->head_dim);
}

/* n values (whole q8_0 blocks) of a q8_0 cache to f32. */
static void q8_to_f32(const struct r1_cpu_isa *isa, const uint8_t *x, float *y, int n) {
    if (isa->q8_0_to_f32) isa->q8_0_to_f32(x, y, n);
    else r1_dtype_traits[R1_DTYPE_Q8_0].to_f32(x, y, n);
}

void r1_cpu_k_kv_append(const struct r1_op *op, int ith, int nth) {
    const struct r1_cpu_isa *isa = r1_cpu_current();
    const int hd = op->head_dim, nkv = op->n_kv_head;
    const int stride = (op->n_head + 2 * nkv) * hd;
    int lo, hi;
    r1_split(op->T * nkv, ith, nth, &lo, &hi);
    for (int i = lo; i < hi; i++) {
        int t = i / nkv, h = i % nkv;
        const float *k = op->x + (size_t)t * stride + (size_t)(op->n_head + h) * hd;
        const float *v = k + (size_t)nkv * hd;
        const struct r1_kv_cache *kv = r1_op_kv(op, t);
        size_t idx = kv_index(kv, op->layer, h, r1_op_pos(op, t));
        if (kv->dtype == R1_DTYPE_Q8_0) { /* the reference's quantizer: the same bytes */
            const r1_from_f32_fn q = r1_dtype_traits[R1_DTYPE_Q8_0].from_f32;
            q(k, (void *)kv_row(kv, kv->k, op->layer, h, r1_op_pos(op, t)), hd);
            q(v, (void *)kv_row(kv, kv->v, op->layer, h, r1_op_pos(op, t)), hd);
        } else if (kv->dtype == R1_DTYPE_F16) {
            isa->f32_to_f16(k, (uint16_t *)kv->k + idx, hd);
            isa->f32_to_f16(v, (uint16_t *)kv->v + idx, hd);
        } else {
            memcpy((float *)kv->k + idx, k, (size_t)hd * sizeof(float));
            memcpy((float *)kv->v + idx, v, (size_t)hd * sizeof(float));
        }
    }
}

static void prefetch_bytes(const void *p, size_t n) {
    for (size_t b = 0; b < n; b += 64) __builtin_prefetch((const char *)p + b);
}

/* One query head at a time (ISAs without the attention block helpers). */
static void attention_heads(const struct r1_cpu_isa *isa, const struct r1_op *op, int ith, int nth) {
    const struct r1_kv_cache *kv = op->kv;
    const int hd = op->head_dim, nh = op->n_head, group = nh / op->n_kv_head;
    const int stride = (nh + 2 * op->n_kv_head) * hd;
    const int f16 = kv->dtype == R1_DTYPE_F16, q8 = kv->dtype == R1_DTYPE_Q8_0;
    const float scale = 1.0f / sqrtf((float)hd);
    float *att = op->scratch + (size_t)ith * op->scratch_stride;
    float row[512]; /* a q8_0 row in f32; head_dim <= 512, checked at load */
    int lo, hi;
    r1_split(op->T * nh, ith, nth, &lo, &hi);
    for (int i = lo; i < hi; i++) {
        int t = i / nh, h = i % nh, kvh = h / group, n = op->pos0 + t + 1;
        const float *q = op->x + (size_t)t * stride + (size_t)h * hd;
        float *o = op->out + (size_t)t * nh * hd + (size_t)h * hd;
        float mx = -INFINITY;
        for (int p = 0; p < n; p++) {
            size_t at = kv_index(kv, op->layer, kvh, p);
            float s;
            if (q8) {
                q8_to_f32(isa, kv_row(kv, kv->k, op->layer, kvh, p), row, hd);
                s = isa->dot_f32(q, row, hd);
            } else {
                s = f16 ? isa->dot_f16(q, (const uint16_t *)kv->k + at, hd)
                        : isa->dot_f32(q, (const float *)kv->k + at, hd);
            }
            att[p] = s * scale;
            if (att[p] > mx) mx = att[p];
        }
        float sum = 0.0f;
        for (int p = 0; p < n; p++) {
            att[p] = expf(att[p] - mx);
            sum += att[p];
        }
        float inv = 1.0f / sum;
        memset(o, 0, (size_t)hd * sizeof(float));
        for (int p = 0; p < n; p++) {
            size_t at = kv_index(kv, op->layer, kvh, p);
            if (q8) {
                q8_to_f32(isa, kv_row(kv, kv->v, op->layer, kvh, p), row, hd);
                isa->axpy_f32(att[p] * inv, row, o, hd);
            } else if (f16) isa->axpy_f16(att[p] * inv, (const uint16_t *)kv->v + at, o, hd);
            else isa->axpy_f32(att[p] * inv, (const float *)kv->v + at, o, hd);
        }
    }
}

/* Blocked attention: a unit is a block of up to tq query rows (tokens) times
 * the heads of one KV head's group (or a slice of them when there are fewer
 * units than threads), M = rows x heads query vectors in all. The unit walks
 * the cache in chunks of ATT_P positions: each K and V row is converted to
 * f32 once and used by all M queries, with an online softmax (running max
 * and sum per query row). Units are split between threads by their cost
 * (positions x queries), as causal rows further on read more of the cache.
 *
 * Decode at depth (a few rows, several threads, more than ATT_SPLIT_L
 * positions) splits the context as well (flash decoding): a unit is one KV
 * head's whole group for all the rows over one span of ATT_SPLIT_L
 * positions, the threads claim units as they go, each unit leaves its
 * partial result (unnormalized output, running max and sum per query) in
 * op->scratch, and the thread that completes the last unit merges the spans
 * of every query in order (log-sum-exp). The spans start at multiples of
 * ATT_SPLIT_L (twice that, or more, where op->scratch is too short for the
 * partial results: long prompts' verification, many heads on 2 threads),
 * whichever thread ran which span, so a row's result does not depend on
 * the scheduling. */
#define ATT_P 64             /* cache positions per chunk (a multiple of 4) */
#define ATT_M 96             /* query vectors a unit aims for */
#define ATT_Q8_DIRECT_M 8    /* most query vectors a unit reads a q8_0 cache directly for */
#define ATT_SPLIT_L 2048     /* positions per span of a split (a multiple of ATT_P) */
#define ATT_SPLIT_T 16       /* most rows (decode, verification) a split serves */
#define ATT_SPLIT_UNITS 4096 /* most units of a split (they are counted in 16 bits) */
_Static_assert(R1_KV_PAGE % ATT_P == 0, "a chunk's positions must lie in one block of a paged cache");

/* A unit's working memory (thread-local scratch slot 3) for mmax queries. */
struct att_buf {
    float *Q, *O, *S, *Kc, *Vc, *mr, *lr;
};

static struct att_buf att_buf_get(int mmax, int hd) {
    const size_t need = (size_t)2 * mmax * hd + (size_t)mmax * ATT_P + (size_t)2 * ATT_P * hd + (size_t)2 * mmax;
    struct att_buf b;
    b.Q = (float *)r1_cpu_scratch(3, need * sizeof(float));
    b.O = b.Q + (size_t)mmax * hd, b.S = b.O + (size_t)mmax * hd;
    b.Kc = b.S + (size_t)mmax * ATT_P, b.Vc = b.Kc + (size_t)ATT_P * hd;
    b.mr = b.Vc + (size_t)ATT_P * hd, b.lr = b.mr + mmax;
    return b;
}

/* One unit: rows [t0, t0 + tc) x heads [h0, h0 + hc) of KV head kvh over
 * cache positions [c_lo, c_hi) (c_lo a multiple of ATT_P; each row reads
 * only the positions before its own). Leaves in b the unnormalized output
 * O (M x hd), the running max mr and sum lr of each query m = ti * hc + hj
 * (a query with no position in the span: mr -inf, lr 0, O 0). direct: read
 * an f16 or q8_0 cache without an f32 copy. */
static void att_unit(const struct r1_cpu_isa *isa, const struct r1_op *op, const struct att_buf *b, int direct, int kvh,
                     int t0, int tc, int h0, int hc, int c_lo, int c_hi) {
    const struct r1_kv_cache *kv = op->kv;
    const int hd = op->head_dim, nh = op->n_head;
    const int stride = (nh + 2 * op->n_kv_head) * hd, pos0 = op->pos0;
    const int f16 = kv->dtype == R1_DTYPE_F16, q8 = kv->dtype == R1_DTYPE_Q8_0;
    const float scale = 1.0f / sqrtf((float)hd);
    float *Q = b->Q, *O = b->O, *S = b->S, *Kc = b->Kc, *Vc = b->Vc, *mr = b->mr, *lr = b->lr;
    const int M = tc * hc, Mp = (M + 3) & ~3;
    for (int ti = 0; ti < tc; ti++)
        for (int hj = 0; hj < hc; hj++)
            memcpy(Q + (size_t)(ti * hc + hj) * hd, op->x + (size_t)(t0 + ti) * stride + (size_t)(h0 + hj) * hd,
                   (size_t)hd * sizeof(float));
    memset(Q + (size_t)M * hd, 0, (size_t)(Mp - M) * hd * sizeof(float));
    memset(O, 0, (size_t)Mp * hd * sizeof(float));
    for (int m = 0; m < Mp; m++) mr[m] = -INFINITY, lr[m] = 0.0f;
    for (int c0 = c_lo; c0 < c_hi; c0 += ATT_P) {
        const int P = c_hi - c0 < ATT_P ? c_hi - c0 : ATT_P, Pp = (P + 3) & ~3;
        const size_t at = kv_index(kv, op->layer, kvh, c0); /* the chunk's rows follow (one block if paged) */
        if (direct && q8) {                                 /* as f16 below, from the q8_0 rows */
            const uint8_t *kr = kv_row(kv, kv->k, op->layer, kvh, c0);
            prefetch_bytes(kv_row(kv, kv->v, op->layer, kvh, c0), (size_t)P * r1_dtype_row_bytes(R1_DTYPE_Q8_0, hd));
            isa->attn_qk_q8(Q, M, kr, P, hd, S, ATT_P);
        } else if (direct) {
            /* the chunk's V rows, fetched while its scores are computed
             * (the K rows stream in order and need no help: fetching the
             * next chunk's K as well was slower) */
            prefetch_bytes((const uint16_t *)kv->v + at, (size_t)P * hd * 2);
            isa->attn_qk_f16(Q, M, (const uint16_t *)kv->k + at, P, hd, S, ATT_P);
        } else if (q8) { /* the chunk's rows in f32, never the whole cache */
            q8_to_f32(isa, kv_row(kv, kv->k, op->layer, kvh, c0), Kc, P * hd);
            q8_to_f32(isa, kv_row(kv, kv->v, op->layer, kvh, c0), Vc, P * hd);
        } else if (f16) {
            isa->f16_to_f32((const uint16_t *)kv->k + at, Kc, P * hd);
            isa->f16_to_f32((const uint16_t *)kv->v + at, Vc, P * hd);
        } else {
            memcpy(Kc, (const float *)kv->k + at, (size_t)P * hd * sizeof(float));
            memcpy(Vc, (const float *)kv->v + at, (size_t)P * hd * sizeof(float));
        }
        if (!direct) {
            memset(Kc + (size_t)P * hd, 0, (size_t)(Pp - P) * hd * sizeof(float));
            memset(Vc + (size_t)P * hd, 0, (size_t)(Pp - P) * hd * sizeof(float));
            isa->attn_qk(Q, M, Kc, Pp, hd, S, ATT_P);
        }
        for (int m = 0; m < Mp; m++) {
            float *sr = S + (size_t)m * ATT_P;
            int n = m < M ? pos0 + t0 + m / hc + 1 - c0 : 0;
            if (n > P) n = P;
            if (n <= 0) {
                memset(sr, 0, (size_t)Pp * sizeof(float));
                continue;
            }
            float mold = mr[m];
            float sum = isa->attn_softmax(sr, n, scale, &mr[m]);
            for (int p = n; p < Pp; p++) sr[p] = 0.0f;
            if (mr[m] != mold) {
                float corr = expf(mold - mr[m]);
                lr[m] *= corr;
                float *o = O + (size_t)m * hd;
                for (int d = 0; d < hd; d += 16) /* hd % 16 == 0: vectorized */
                    for (int j = 0; j < 16; j++) o[d + j] *= corr;
            }
            lr[m] += sum;
        }
        if (direct && q8) isa->attn_pv_q8(S, ATT_P, M, kv_row(kv, kv->v, op->layer, kvh, c0), P, hd, O);
        else if (direct) isa->attn_pv_f16(S, ATT_P, M, (const uint16_t *)kv->v + at, P, hd, O);
        else isa->attn_pv(S, ATT_P, M, Vc, Pp, hd, O);
    }
}

/* No f32 copy of K/V: an f16 cache always; a q8_0 cache for a few query
 * vectors (decode, verification), where converting each row once per 4 of
 * them costs less than writing and reading back an f32 chunk. */
static int att_direct(const struct r1_cpu_isa *isa, const struct r1_kv_cache *kv, int mmax) {
    return (kv->dtype == R1_DTYPE_F16 && isa->attn_qk_f16 && isa->attn_pv_f16) ||
           (kv->dtype == R1_DTYPE_Q8_0 && isa->attn_qk_q8 && isa->attn_pv_q8 && mmax <= ATT_Q8_DIRECT_M);
}

/* The span length of a split of op over threads nth, or 0 for none: a few
 * rows, claimed units (op->claim), the attn_split tuning on, and more than
 * one span; the span doubles while the partial results would not fit in
 * op->scratch (nth x scratch_stride floats). */
static int att_split_len(const struct r1_op *op, int nth) {
    const int T = op->T, nmax = op->pos0 + T, nkv = op->n_kv_head;
    if (nth < 2 || T > ATT_SPLIT_T || !op->claim || !op->scratch || !r1_cpu_tuning.attn_split) return 0;
    const size_t room = (size_t)nth * op->scratch_stride;
    const size_t rec = (size_t)T * op->n_head * (op->head_dim + 2);
    for (int L = ATT_SPLIT_L; L < nmax; L *= 2) {
        int spans = (nmax + L - 1) / L;
        if ((size_t)spans * rec <= room && spans * nkv <= ATT_SPLIT_UNITS) return L;
    }
    return 0;
}

/* The split (see above): unit u = kvh * spans + span; a partial record of
 * query m of unit u is hd floats of output, then its max and its sum, at
 * op->scratch + (u * M + m) * (hd + 2). op->claim counts claimed units in
 * its low 16 bits and completed ones in the bits above. */
static void attention_split(const struct r1_cpu_isa *isa, const struct r1_op *op, int L) {
    const int hd = op->head_dim, nh = op->n_head, nkv = op->n_kv_head, group = nh / nkv, T = op->T, nmax = op->pos0 + T;
    const int spans = (nmax + L - 1) / L, nu = nkv * spans, M = T * group;
    const size_t rec = (size_t)hd + 2;
    const int mmax = (M + 3) & ~3, direct = att_direct(isa, op->kv, mmax);
    struct att_buf b = {0};
    int done = 0;
    for (;;) {
        int u = __atomic_fetch_add(op->claim, 1, __ATOMIC_RELAXED) & 0xffff;
        if (u >= nu) break;
        if (!b.Q) b = att_buf_get(mmax, hd);
        const int kvh = u / spans, c_lo = (u % spans) * L;
        const int c_hi = c_lo + L < nmax ? c_lo + L : nmax;
        att_unit(isa, op, &b, direct, kvh, 0, T, kvh * group, group, c_lo, c_hi);
        float *p = op->scratch + (size_t)u * M * rec;
        for (int m = 0; m < M; m++, p += rec) {
            memcpy(p, b.O + (size_t)m * hd, (size_t)hd * sizeof(float));
            p[hd] = b.mr[m], p[hd + 1] = b.lr[m];
        }
        int c = __atomic_add_fetch(op->claim, 1 << 16, __ATOMIC_ACQ_REL) >> 16;
        done = c == nu;
    }
    if (!done) return;
    /* the last unit in: merge every query's spans, in order */
    for (int kvh = 0; kvh < nkv; kvh++)
        for (int m = 0; m < M; m++) {
            const int t = m / group, h = kvh * group + m % group;
            const float *p0 = op->scratch + ((size_t)kvh * spans * M + m) * rec;
            float mx = -INFINITY, sum = 0.0f;
            for (int s = 0; s < spans; s++) {
                float ms = p0[(size_t)s * M * rec + hd];
                if (ms > mx) mx = ms;
            }
            float *dst = op->out + (size_t)t * nh * hd + (size_t)h * hd;
            memset(dst, 0, (size_t)hd * sizeof(float));
            for (int s = 0; s < spans; s++) {
                const float *p = p0 + (size_t)s * M * rec;
                if (p[hd + 1] == 0.0f) /* a span past this row's positions */
                    continue;
                float w = expf(p[hd] - mx);
                sum += p[hd + 1] * w;
                for (int d = 0; d < hd; d += 16)
                    for (int j = 0; j < 16; j++) dst[d + j] += p[d + j] * w;
            }
            float inv = 1.0f / sum;
            for (int d = 0; d < hd; d += 16)
                for (int j = 0; j < 16; j++) dst[d + j] *= inv;
        }
}

static void attention_blocked(const struct r1_cpu_isa *isa, const struct r1_op *op, int ith, int nth, int may_split) {
    const int L = may_split ? att_split_len(op, nth) : 0;
    if (L) {
        attention_split(isa, op, L);
        return;
    }
    const int nh = op->n_head, nkv = op->n_kv_head, group = nh / nkv;
    const int T = op->T, pos0 = op->pos0;
    int tq = ATT_M / group;
    if (tq < 1) tq = 1;
    if (tq > T) tq = T;
    /* a few rows (speculative verification) and fewer KV heads than twice
     * the threads: blocks of fewer rows, so the units spread evenly (3 units
     * on 2 threads left one thread half idle); a row's result does not
     * depend on which rows share its unit */
    if (T > 1 && ((T + tq - 1) / tq) * nkv < 2 * nth) {
        int want = (2 * nth + nkv - 1) / nkv;
        if (want > T) want = T;
        tq = (T + want - 1) / want;
    }
    const int nqb = (T + tq - 1) / tq;
    int hs = 1;
    if (nqb * nkv < nth) {
        hs = (nth + nqb * nkv - 1) / (nqb * nkv);
        if (hs > group) hs = group;
    }
    const int gh = (group + hs - 1) / hs, nu = nqb * nkv * hs;
    /* cost of unit u: its queries x the positions its last row reads */
#define UNIT_COST(u, hc_, tc_, c_)                                                                                     \
    do {                                                                                                               \
        int qb_ = (u) / (nkv * hs), hsi_ = (u) % hs;                                                                   \
        hc_ = group - hsi_ * gh < gh ? group - hsi_ * gh : gh;                                                         \
        tc_ = T - qb_ * tq < tq ? T - qb_ * tq : tq;                                                                   \
        c_ = hc_ > 0 ? (double)hc_ * tc_ * (pos0 + qb_ * tq + tc_) : 0.0;                                              \
    } while (0)
    double total = 0;
    for (int u = 0; u < nu; u++) {
        int hc, tc;
        double c;
        UNIT_COST(u, hc, tc, c);
        total += c;
    }
    const int mmax = (tq * gh + 3) & ~3, hd = op->head_dim;
    const int direct = att_direct(isa, op->kv, mmax);
    struct att_buf b = {0};
    double pre = 0;
    for (int u = 0; u < nu; u++) {
        int hc, tc;
        double c;
        UNIT_COST(u, hc, tc, c);
        double mid = pre + c / 2;
        pre += c;
        if (hc <= 0) continue;
        int owner = (int)(mid * nth / total);
        if (owner >= nth) owner = nth - 1;
        if (owner != ith) continue;
        if (!b.Q) b = att_buf_get(mmax, hd);
        const int qb = u / (nkv * hs), kvh = (u / hs) % nkv, hsi = u % hs;
        const int t0 = qb * tq, h0 = kvh * group + hsi * gh;
        att_unit(isa, op, &b, direct, kvh, t0, tc, h0, hc, 0, pos0 + t0 + tc);
        for (int ti = 0; ti < tc; ti++)
            for (int hj = 0; hj < hc; hj++) {
                int m = ti * hc + hj;
                float inv = 1.0f / b.lr[m];
                const float *o = b.O + (size_t)m * hd;
                float *dst = op->out + (size_t)(t0 + ti) * nh * hd + (size_t)(h0 + hj) * hd;
                for (int d = 0; d < hd; d += 16)
                    for (int j = 0; j < 16; j++) dst[d + j] = o[d + j] * inv;
            }
    }
#undef UNIT_COST
}

/* may_split: op is the rows of one sequence, the whole op (the split's
 * claim counter and scratch are the op's). */
static void attention_one(const struct r1_cpu_isa *isa, const struct r1_op *op, int ith, int nth, int may_split) {
    if (isa->attn_qk && isa->attn_pv && isa->attn_softmax && isa->f16_to_f32 && op->head_dim % 16 == 0)
        attention_blocked(isa, op, ith, nth, may_split);
    else attention_heads(isa, op, ith, nth);
}

/* Rows of several sequences (continuous batching): each run of one
 * sequence is a causal block of its own, computed by all threads in turn
 * (without the context split: the runs share no barrier). */
void r1_cpu_k_attention_gqa(const struct r1_op *op, int ith, int nth) {
    const struct r1_cpu_isa *isa = r1_cpu_current();
    if (!op->seq && !op->pos) {
        attention_one(isa, op, ith, nth, 1);
        return;
    }
    const int hd = op->head_dim, nh = op->n_head, stride = (nh + 2 * op->n_kv_head) * hd;
    const int one = r1_op_run_end(op, 0) == op->T;
    for (int t0 = 0; t0 < op->T;) {
        int t1 = r1_op_run_end(op, t0);
        struct r1_op sub = *op;
        sub.T = t1 - t0, sub.pos0 = r1_op_pos(op, t0), sub.kv = r1_op_kv(op, t0);
        sub.seq = NULL, sub.pos = NULL;
        sub.x = op->x + (size_t)t0 * stride;
        sub.out = op->out + (size_t)t0 * nh * hd;
        attention_one(isa, &sub, ith, nth, one);
        t0 = t1;
    }
}
