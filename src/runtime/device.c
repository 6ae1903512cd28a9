/*
 * device.c - device copies of weights for device backends (see device.h):
 * per-matrix conversion to the device layout, uploaded in row chunks so the
 * host never holds a second copy of a large matrix, and one reference-counted
 * device model per (model, backend). It knows nothing of CUDA: it only calls
 * the backend's struct r1_device_ops.
 */
#include "runtime/device.h"

#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "model/model.h"

#define CHUNK_BYTES ((size_t)64 << 20) /* host staging per upload */
#define MAX_ARENAS 64

static int dev_dtype_ok(enum r1_dtype t) {
    return t == R1_DTYPE_F32 || t == R1_DTYPE_F16 || t == R1_DTYPE_BF16 || t == R1_DTYPE_Q8_0 || t == R1_DTYPE_Q4_0;
}
/* The dtype of the device copy: the plain format of a cpu-regrouped layout
 * (lossless, r1_dtype_regroup); every other quantized format (q4_1, q5_*,
 * K-quants and their regroupings) is requantized to q8_0 at upload. */
static enum r1_dtype plain(enum r1_dtype t) {
    if (t == R1_DTYPE_Q8_0X8) return R1_DTYPE_Q8_0;
    if (t == R1_DTYPE_Q4_0X8) return R1_DTYPE_Q4_0;
    if ((int)t >= 0 && (int)t < R1_DTYPE_ALL && !dev_dtype_ok(t) && r1_dtype_traits[t].to_f32) return R1_DTYPE_Q8_0;
    return t;
}
enum r1_dtype r1_device_dtype(enum r1_dtype t) { return plain(t); }
static int is_quant(enum r1_dtype t) { return t == R1_DTYPE_Q8_0 || t == R1_DTYPE_Q4_0; }
/* quant bytes per 32-weight block in the planar layout */
static size_t quant_bytes(enum r1_dtype t) { return t == R1_DTYPE_Q8_0 ? R1_QK : R1_QK / 2; }

static size_t esize(enum r1_dtype t) { return t == R1_DTYPE_F32 ? 4 : 2; }

size_t r1_device_mat_bytes(const struct r1_mat *src) {
    const enum r1_dtype t = plain(src->dtype);
    if (!dev_dtype_ok(t) || src->rows <= 0 || src->cols <= 0) return 0;
    if (is_quant(t)) {
        if (src->cols % R1_QK) return 0;
        return r1_align16(r1_device_quant_scales_offset(t, src->rows, src->cols) +
                          (size_t)src->rows * (src->cols / R1_QK) * 2);
    }
    return (size_t)src->rows * r1_align16((size_t)src->cols * esize(t));
}

int r1_device_mat_upload(const struct r1_device_ops *d, void *dst, const struct r1_mat *src, struct r1_mat *out) {
    if (!r1_device_mat_bytes(src))
        return r1_err("a %d x %d %s matrix cannot be held on the device (f32, f16, bf16, q8_0 "
                      "and q4_0 can)",
                      src->rows, src->cols, r1_dtype_name(src->dtype));
    const int rows = src->rows, cols = src->cols;
    const enum r1_dtype t = plain(src->dtype);
    const uint8_t *s = src->data;
    uint8_t *o = dst;
    *out = (struct r1_mat){.data = dst, .dtype = t, .rows = rows, .cols = cols};
    if (!is_quant(t)) {
        size_t rb = r1_align16((size_t)cols * esize(src->dtype)), used = (size_t)cols * esize(src->dtype);
        out->row_bytes = rb;
        if (rb == src->row_bytes) return d->upload(dst, s, (size_t)rows * rb);
        size_t per = CHUNK_BYTES / rb ? CHUNK_BYTES / rb : 1;
        uint8_t *buf = r1_alloc(per * rb, "the weight upload buffer");
        if (!buf) return -1;
        int rc = 0;
        for (int r0 = 0; r0 < rows && !rc; r0 += (int)per) {
            int n = rows - r0 < (int)per ? rows - r0 : (int)per;
            for (int r = 0; r < n; r++) memcpy(buf + (size_t)r * rb, s + (size_t)(r0 + r) * src->row_bytes, used);
            rc = d->upload(o + (size_t)r0 * rb, buf, (size_t)n * rb);
        }
        free(buf);
        return rc;
    }
    /* q8_0 / q4_0: split each block into its quants and its scale */
    const int nb = cols / R1_QK;
    const size_t qb = quant_bytes(t), bsz = r1_dtype_traits[t].block_size;
    size_t qrb = r1_align16((size_t)nb * qb);
    out->row_bytes = qrb;
    size_t per = CHUNK_BYTES / qrb ? CHUNK_BYTES / qrb : 1;
    uint8_t *qbuf = r1_alloc(per * qrb, "the weight upload buffer");
    uint16_t *dbuf = r1_alloc(per * nb * 2, "the weight upload buffer");
    int rc = qbuf && dbuf ? 0 : -1;
    uint8_t *scales = o + r1_device_quant_scales_offset(t, rows, cols);
    uint8_t *plain_row = t != src->dtype ? r1_alloc((size_t)nb * bsz, "the weight upload buffer") : NULL;
    float *frow = t != src->dtype ? r1_alloc((size_t)cols * sizeof(float), "the weight upload buffer") : NULL;
    if (t != src->dtype && (!plain_row || !frow)) rc = -1;
    for (int r0 = 0; r0 < rows && !rc; r0 += (int)per) {
        int n = rows - r0 < (int)per ? rows - r0 : (int)per;
        for (int r = 0; r < n; r++) {
            const uint8_t *row = s + (size_t)(r0 + r) * src->row_bytes;
            if (plain_row) { /* the cpu's regrouped layout back to GGUF blocks, or requantized */
                if (r1_dtype_regroup(src->dtype, t, row, plain_row, cols)) {
                    r1_dtype_traits[src->dtype].to_f32(row, frow, cols);
                    r1_dtype_traits[t].from_f32(frow, plain_row, cols);
                }
                row = plain_row;
            }
            for (int k = 0; k < nb; k++) { /* both block types start with the f16 scale */
                memcpy(qbuf + (size_t)r * qrb + (size_t)k * qb, row + k * bsz + 2, qb);
                memcpy(&dbuf[(size_t)r * nb + k], row + k * bsz, 2);
            }
        }
        if (!rc) rc = d->upload(o + (size_t)r0 * qrb, qbuf, (size_t)n * qrb);
        if (!rc) rc = d->upload(scales + (size_t)r0 * nb * 2, dbuf, (size_t)n * nb * 2);
    }
    free(qbuf);
    free(dbuf);
    free(plain_row);
    free(frow);
    return rc;
}

/* ---- the shared device model ---- */

struct dev_model {
    struct r1_model view; /* must stay first: callers hold &view */
    const struct r1_model *host;
    const struct r1_backend *be;
    int refs;
    int n_arena;
    void *arenas[MAX_ARENAS]; /* arenas[0] is view.arena */
    size_t sizes[MAX_ARENAS];
    struct dev_model *next;
};

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static struct dev_model *models;

static size_t vec_bytes(int n) { return r1_align16((size_t)n * 4); }

static void dev_model_free(struct dev_model *dm) {
    for (int i = 0; i < dm->n_arena; i++) dm->be->dev->free(dm->arenas[i]);
    free(dm->view.layers);
    free(dm);
}

/* Walk every tensor in a fixed order: sizes into dm->sizes / n_arena when
 * upload is 0, else upload into dm->arenas. A tensor that would take an arena
 * past max bytes starts the next arena. */
static int place_all(struct dev_model *dm, const struct r1_model *m, int upload, size_t max) {
    const struct r1_device_ops *d = dm->be->dev;
    const struct r1_config *c = &m->cfg;
    size_t off = 0;
    int rc = 0, seg = 0;
    uint8_t *base = upload ? dm->arenas[0] : NULL;
#define PLACE_SEG(need)                                                                                                \
    do {                                                                                                               \
        if (off && off + (need) > max) {                                                                               \
            if (!upload) dm->sizes[seg] = off;                                                                         \
            if (++seg >= MAX_ARENAS)                                                                                   \
                return r1_err("the weights need more than %d device allocations of %zu bytes", MAX_ARENAS, max);       \
            off = 0;                                                                                                   \
            if (upload) base = dm->arenas[seg];                                                                        \
        }                                                                                                              \
    } while (0)
#define PLACE_MAT(dstmat, srcmat)                                                                                      \
    do {                                                                                                               \
        size_t nb = r1_device_mat_bytes(&(srcmat));                                                                    \
        if (!nb) return r1_device_mat_upload(d, NULL, &(srcmat), &(dstmat));                                           \
        if (nb > max)                                                                                                  \
            return r1_err("a %d x %d weight matrix needs %zu bytes in one device allocation; "                         \
                          "the device allows %zu",                                                                     \
                          (srcmat).rows, (srcmat).cols, nb, max);                                                      \
        PLACE_SEG(r1_align16(nb) + 256);                                                                               \
        if (base && !rc) rc = r1_device_mat_upload(d, base + off, &(srcmat), &(dstmat));                               \
        off += r1_align16(nb) + 256;                                                                                   \
    } while (0)
#define PLACE_VEC(dstp, srcp, n)                                                                                       \
    do {                                                                                                               \
        PLACE_SEG(vec_bytes(n));                                                                                       \
        if (base && !rc) {                                                                                             \
            (dstp) = (float *)(base + off);                                                                            \
            rc = d->upload(base + off, (srcp), (size_t)(n)*4);                                                         \
        }                                                                                                              \
        off += vec_bytes(n);                                                                                           \
    } while (0)
    PLACE_MAT(dm->view.emb, m->emb);
    if (m->lm_head.data == m->emb.data) {
        if (base) dm->view.lm_head = dm->view.emb;
    } else {
        PLACE_MAT(dm->view.lm_head, m->lm_head);
    }
    PLACE_VEC(dm->view.out_norm, m->out_norm, c->dim);
    for (int l = 0; l < c->n_layer; l++) {
        const struct r1_layer *L = &m->layers[l];
        struct r1_layer *D = &dm->view.layers[l];
        PLACE_VEC(D->attn_norm, L->attn_norm, c->dim);
        PLACE_VEC(D->ffn_norm, L->ffn_norm, c->dim);
        PLACE_VEC(D->bqkv, L->bqkv, L->wqkv.rows);
        PLACE_MAT(D->wqkv, L->wqkv);
        PLACE_MAT(D->wo, L->wo);
        PLACE_MAT(D->wgu, L->wgu);
        PLACE_MAT(D->wdown, L->wdown);
    }
#undef PLACE_SEG
#undef PLACE_MAT
#undef PLACE_VEC
    if (!upload) dm->sizes[seg] = off, dm->n_arena = seg + 1;
    return rc;
}

const struct r1_model *r1_device_model_get(const struct r1_model *m, const struct r1_backend *be) {
    const struct r1_device_ops *d = be->dev;
    R1_ASSERT(d);
    pthread_mutex_lock(&mu);
    for (struct dev_model *p = models; p; p = p->next)
        if (p->host == m && p->be == be) {
            p->refs++;
            pthread_mutex_unlock(&mu);
            return &p->view;
        }
    struct dev_model *dm = calloc(1, sizeof *dm);
    if (!dm || !(dm->view.layers = calloc((size_t)m->cfg.n_layer, sizeof *dm->view.layers))) {
        free(dm);
        pthread_mutex_unlock(&mu);
        r1_err("out of memory");
        return NULL;
    }
    dm->host = m, dm->be = be, dm->refs = 1;
    dm->view.cfg = m->cfg;
    dm->view.dtype = plain(m->dtype);
    size_t max = d->max_alloc ? d->max_alloc() : SIZE_MAX;
    int rc = d->weights_ok(dm->view.dtype);
    if (!rc) rc = place_all(dm, m, 0, max);
    if (!rc) {
        int n = dm->n_arena;
        dm->n_arena = 0;
        for (int i = 0; i < n && !rc; i++) {
            dm->arenas[i] = d->alloc(dm->sizes[i], "the model weights");
            if (!dm->arenas[i]) rc = -1;
            else dm->n_arena++, dm->view.arena_size += dm->sizes[i];
        }
        dm->view.arena = dm->arenas[0];
        if (!rc) rc = place_all(dm, m, 1, max);
    }
    if (!rc) rc = d->sync();
    if (rc) {
        r1_err_prefix("copying the weights to the '%s' device", be->name);
        dev_model_free(dm);
        pthread_mutex_unlock(&mu);
        return NULL;
    }
    dm->next = models;
    models = dm;
    pthread_mutex_unlock(&mu);
    return &dm->view;
}

void r1_device_model_put(const struct r1_model *view) {
    if (!view) return;
    pthread_mutex_lock(&mu);
    for (struct dev_model **pp = &models; *pp; pp = &(*pp)->next) {
        struct dev_model *p = *pp;
        if (&p->view != view) continue;
        if (--p->refs == 0) {
            *pp = p->next;
            dev_model_free(p);
        }
        break;
    }
    pthread_mutex_unlock(&mu);
}
