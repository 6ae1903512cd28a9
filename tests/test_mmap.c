/*
 * test_mmap.c - loading a GGUF maps it: matrices the file stores as the
 * kernels read them point into the file's mapping (checked against
 * /proc/self/maps), fused q|k|v and gate|up too when their parts lie one
 * after the other; the pages of tensors that are converted are given back
 * after the load (checked page by page with /proc/self/pagemap); --no-mmap
 * holds the weights in private memory; all three give the same logits;
 * a truncated or corrupt file and a model that cannot fit in the memory
 * left are refused with errors that say so. The weights' layout follows the
 * backend they are loaded for: a q8_0 file is regrouped for cpu and used in
 * place for the backends that read the file's layout, with the same
 * logits either way. The files are small qwen2 GGUFs of bf16 (and q8_0)
 * weights written here.
 */
#include <fcntl.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

#include "kernels/cpu/cpu.h"
#include "gguf/gguf.h"
#include "model/model.h"
#include "r1infer.h"
#include "test.h"

enum { DIM = 1024, HEADS = 8, KV = 2, HD = 128, FFN = 1024, LAYERS = 2, VOCAB = 512 };

/* ---- a qwen2 GGUF of bf16 matrices ---- */
struct spec {
    char name[64];
    int64_t shape[2];
    int ndim;
    enum r1_dtype dt;
};
struct file {
    struct spec t[64];
    int n;
    enum r1_dtype wdt; /* the matrices' */
};

static void add(struct file *f, const char *name, int64_t rows, int64_t cols) {
    struct spec *s = &f->t[f->n++];
    snprintf(s->name, sizeof s->name, "%s", name);
    s->shape[0] = rows, s->shape[1] = cols;
    s->ndim = cols ? 2 : 1;
    s->dt = cols ? f->wdt : R1_DTYPE_F32;
}

static int fill(void *ctx, int index, uint8_t *dst, size_t size) {
    const struct file *f = ctx;
    const struct spec *s = &f->t[index];
    /* the same tensor gets the same numbers whatever the file's order */
    uint64_t st = 0x9e3779b97f4a7c15ull;
    for (const char *p = s->name; *p; p++) st = (st ^ (uint8_t)*p) * 0x100000001b3ull;
    if (s->dt == R1_DTYPE_F32) {
        float *v = (float *)dst;
        for (size_t i = 0; i < size / 4; i++) v[i] = strstr(s->name, "norm") ? 1.0f : 0.02f * r1_frand_normal(&st);
    } else if (s->dt == R1_DTYPE_Q8_0) {
        const size_t n = (size_t)s->shape[0] * s->shape[1];
        float *v = malloc(n * sizeof *v);
        if (!v) return -1;
        for (size_t i = 0; i < n; i++) v[i] = 0.05f * r1_frand_normal(&st);
        r1_dtype_traits[R1_DTYPE_Q8_0].from_f32(v, dst, (int64_t)n);
        free(v);
    } else {
        uint16_t *v = (uint16_t *)dst;
        for (size_t i = 0; i < size / 2; i++) v[i] = r1_f32_to_bf16(0.05f * r1_frand_normal(&st));
    }
    return 0;
}

/* fused_order: q|k|v and gate|up weights adjacent (r1infer convert's order);
 * else each weight followed by its bias (llama.cpp's order from a
 * checkpoint's alphabetical one), so q|k|v must be copied. */
static int write_model(const char *path, int fused_order, enum r1_dtype wdt) {
    struct file f = {.n = 0, .wdt = wdt};
    char n[64];
    add(&f, "token_embd.weight", VOCAB, DIM);
    for (int l = 0; l < LAYERS; l++) {
#define L(s) (snprintf(n, sizeof n, "blk.%d.%s", l, s), n)
        add(&f, L("attn_norm.weight"), DIM, 0);
        static const char *const qkv[3] = {"attn_q", "attn_k", "attn_v"};
        const int rows[3] = {HEADS * HD, KV * HD, KV * HD};
        char w[32], b[32];
        for (int i = 0; i < 3; i++) {
            snprintf(w, sizeof w, "%s.weight", qkv[i]);
            add(&f, L(w), rows[i], DIM);
            if (!fused_order) snprintf(b, sizeof b, "%s.bias", qkv[i]), add(&f, L(b), rows[i], 0);
        }
        for (int i = 0; i < 3 && fused_order; i++) snprintf(b, sizeof b, "%s.bias", qkv[i]), add(&f, L(b), rows[i], 0);
        add(&f, L("attn_output.weight"), DIM, HEADS * HD);
        add(&f, L("ffn_norm.weight"), DIM, 0);
        if (!fused_order) add(&f, L("ffn_down.weight"), DIM, FFN);
        add(&f, L("ffn_gate.weight"), FFN, DIM);
        if (!fused_order) add(&f, L("ffn_norm_pad.weight"), 64, 0); /* not a model tensor: a gap */
        add(&f, L("ffn_up.weight"), FFN, DIM);
        if (fused_order) add(&f, L("ffn_down.weight"), DIM, FFN);
#undef L
    }
    add(&f, "output_norm.weight", DIM, 0);
    add(&f, "output.weight", VOCAB, DIM);
    struct r1_gguf_writer *w = r1_gguf_writer_new();
    int rc = !w || r1_gguf_w_str(w, "general.architecture", "qwen2") ||
             r1_gguf_w_u32(w, "qwen2.embedding_length", DIM) || r1_gguf_w_u32(w, "qwen2.block_count", LAYERS) ||
             r1_gguf_w_u32(w, "qwen2.feed_forward_length", FFN) ||
             r1_gguf_w_u32(w, "qwen2.attention.head_count", HEADS) ||
             r1_gguf_w_u32(w, "qwen2.attention.head_count_kv", KV) || r1_gguf_w_u32(w, "qwen2.context_length", 64);
    for (int i = 0; i < f.n && !rc; i++) rc = r1_gguf_w_tensor(w, f.t[i].name, f.t[i].dt, f.t[i].ndim, f.t[i].shape);
    rc = rc || r1_gguf_w_write(w, path, fill, &f, 0);
    r1_gguf_writer_free(w);
    return rc ? -1 : 0;
}

/* ---- where memory is ---- */
/* The path of the mapping holding p ("" for anonymous memory), or NULL. */
static const char *mapping_of(const void *p, char *out, size_t cap) {
    FILE *fp = fopen("/proc/self/maps", "r");
    if (!fp) return NULL;
    char line[4096];
    const char *r = NULL;
    while (!r && fgets(line, sizeof line, fp)) {
        unsigned long lo, hi;
        int off = 0;
        if (sscanf(line, "%lx-%lx %*s %*s %*s %*s %n", &lo, &hi, &off) < 2) continue;
        if ((uintptr_t)p < lo || (uintptr_t)p >= hi) continue;
        snprintf(out, cap, "%s", line + off);
        out[strcspn(out, "\n")] = 0;
        r = out;
    }
    fclose(fp);
    return r;
}

static int in_file(const void *p, const char *path) {
    char m[4096];
    return mapping_of(p, m, sizeof m) && !strcmp(m, path);
}

/* Fraction of the pages of [p, p + n) in this process's page tables. */
static double resident(const void *p, size_t n) {
    long ps = sysconf(_SC_PAGESIZE);
    int fd = open("/proc/self/pagemap", O_RDONLY);
    if (fd < 0) return -1;
    uintptr_t lo = ((uintptr_t)p + (uintptr_t)ps - 1) / (uintptr_t)ps, hi = ((uintptr_t)p + n) / (uintptr_t)ps;
    long in = 0, all = 0;
    for (uintptr_t v = lo; v < hi; v++, all++) {
        uint64_t e = 0;
        if (pread(fd, &e, 8, (off_t)(v * 8)) == 8 && (e >> 63)) in++;
    }
    close(fd);
    return all ? (double)in / (double)all : 0;
}

static size_t mat_bytes(const struct r1_mat *w) { return (size_t)w->rows * w->row_bytes; }

/* The last token's logits after a short prompt (malloc'ed), NULL on error. */
static float *logits(struct r1_model *m) {
    struct r1_session_opts so = {.n_ctx = 16, .backend = "cpu", .n_threads = 1, .kv_dtype = R1_DTYPE_F32};
    r1_session_t *s = r1_session_new(m, &so);
    const int32_t ids[4] = {1, 7, 300, 42};
    const float *l = s ? r1_session_forward(s, ids, 4, NULL) : NULL;
    float *out = l ? malloc(VOCAB * sizeof *out) : NULL;
    if (out) memcpy(out, l, VOCAB * sizeof *out);
    r1_session_free(s);
    return out;
}

static float max_diff(const float *a, const float *b) {
    float d = a && b ? 0 : 1e30f;
    for (int i = 0; a && b && i < VOCAB; i++)
        if (fabsf(a[i] - b[i]) > d || a[i] != a[i]) d = a[i] != a[i] ? 1e30f : fabsf(a[i] - b[i]);
    return d;
}

#define IDENTICAL 0.0f /* the same bytes through the same kernels */
#define LAYOUT_TOL                                                                                                     \
    5e-3f /* q8_0 through the x8 tiles or the plain ones: two int8 forms of the                                        \
             activations, each within the kernels' tolerance of the reference                                          \
             (logits here reach about 5) */
#define MAX_RESIDENT                                                                                                   \
    0.30 /* of a converted tensor's pages after the load: the kernel's                                                 \
            fault-around may map back up to 64 KiB at each edge */

int main(void) {
    char dir[] = "/tmp/r1_test_mmap_XXXXXX";
    if (!mkdtemp(dir)) return 1;
    char fused[128], split[128], trunc[128], quant[128];
    snprintf(fused, sizeof fused, "%s/fused.gguf", dir);
    snprintf(split, sizeof split, "%s/split.gguf", dir);
    snprintf(trunc, sizeof trunc, "%s/truncated.gguf", dir);
    snprintf(quant, sizeof quant, "%s/q8_0.gguf", dir);
    CHECK(write_model(fused, 1, R1_DTYPE_BF16) == 0 && write_model(split, 0, R1_DTYPE_BF16) == 0 &&
              write_model(quant, 1, R1_DTYPE_Q8_0) == 0,
          "writing the test models: %s", r1_last_error());
    struct r1_load_opts lo = {.dtype = R1_DTYPE_AUTO};

    /* mapped, every matrix in place (q|k|v and gate|up adjacent in the file) */
    struct r1_model *a = r1_model_load(fused, &lo);
    CHECK(a != NULL, "load %s: %s", fused, r1_last_error());
    size_t all = 0;
    if (a) {
        int outside = 0;
        const struct r1_mat *top[2] = {&a->emb, &a->lm_head};
        for (int i = 0; i < 2; i++) outside += !in_file(top[i]->data, fused), all += mat_bytes(top[i]);
        for (int l = 0; l < LAYERS; l++) {
            const struct r1_layer *L = &a->layers[l];
            const struct r1_mat *w[4] = {&L->wqkv, &L->wo, &L->wgu, &L->wdown};
            for (int i = 0; i < 4; i++) outside += !in_file(w[i]->data, fused), all += mat_bytes(w[i]);
        }
        CHECK(outside == 0, "%d of %d matrices are not in the mapping of %s", outside, 2 + 4 * LAYERS, fused);
        CHECK(a->in_place_bytes == all, "in_place_bytes %zu, the matrices hold %zu", a->in_place_bytes, all);
        CHECK(a->n_maps == 1, "the model keeps %d files, expected 1", a->n_maps);
    }

    /* mapped, q|k|v separated by their biases and gate|up by a gap: those
     * two are converted, the rest stays in place, and the converted
     * tensors' pages are no longer this process's */
    struct r1_model *b = r1_model_load(split, &lo);
    CHECK(b != NULL, "load %s: %s", split, r1_last_error());
    if (b) {
        const struct r1_layer *L = &b->layers[0];
        CHECK(!in_file(L->wqkv.data, split) && !in_file(L->wgu.data, split), "q|k|v and gate|up of %s are copies",
              split);
        CHECK(in_file(L->wo.data, split) && in_file(L->wdown.data, split) && in_file(b->emb.data, split),
              "o_proj, down_proj and the embedding of %s are used in place", split);
        /* the source pages of q_proj and gate_proj of layer 1 */
        struct r1_gguf g;
        const struct r1_file *f = &b->maps[0];
        if (b->n_maps == 1 && r1_gguf_parse(&g, f->data, f->size, split) == 0) {
            const char *names[2] = {"blk.1.attn_q.weight", "blk.1.ffn_gate.weight"};
            for (int i = 0; i < 2; i++) {
                const struct r1_gguf_tensor *t = r1_gguf_find_tensor(&g, names[i]);
                double r = t ? resident(t->data, t->size) : 1;
                printf("%s: %.1f%% of its pages resident after the load (limit MAX_RESIDENT %.0f%%)\n", names[i],
                       100 * r, 100 * MAX_RESIDENT);
                CHECK(t && r >= 0 && r <= MAX_RESIDENT, "%s: %.2f of the pages still mapped", names[i], r);
            }
            r1_gguf_free(&g);
        } else {
            CHECK(0, "the model keeps %d files of %s, expected 1", b->n_maps, split);
        }
    }

    /* --no-mmap: the weights in private memory, no mapping of the file */
    struct r1_load_opts nm = {.dtype = R1_DTYPE_AUTO, .no_mmap = 1};
    struct r1_model *c = r1_model_load(fused, &nm);
    CHECK(c != NULL, "load --no-mmap %s: %s", fused, r1_last_error());
    if (c) {
        char m[4096];
        const char *where = mapping_of(c->layers[1].wgu.data, m, sizeof m);
        CHECK(where && !strstr(where, ".gguf"), "--no-mmap: gate|up lies in '%s', expected private memory",
              where ? where : "?");
    }

    /* the same logits whichever way the weights are held */
    float *la = a ? logits(a) : NULL, *lb = b ? logits(b) : NULL, *lc = c ? logits(c) : NULL;
    float dab = max_diff(la, lb), dac = max_diff(la, lc);
    printf("logits: mapped in place vs converted max diff %g, vs --no-mmap %g (tolerance IDENTICAL %g)\n", dab, dac,
           IDENTICAL);
    CHECK(dab <= IDENTICAL && dac <= IDENTICAL, "logits differ: %g, %g", dab, dac);
    free(la), free(lb), free(lc);
    r1_model_free(b);
    r1_model_free(c);

    /* the layout follows the backend the weights are loaded for: q8_0 is
     * regrouped (q8_0x8) for cpu, kept where it lies in the file for ref */
    struct r1_load_opts for_cpu = {.dtype = R1_DTYPE_AUTO, .backend = "cpu"};
    struct r1_load_opts for_ref = {.dtype = R1_DTYPE_AUTO, .backend = "ref"};
    struct r1_model *qc = r1_model_load(quant, &for_cpu), *qr = r1_model_load(quant, &for_ref);
    CHECK(qc && qr, "load %s for cpu and ref: %s", quant, r1_last_error());
    if (qc && qr) {
        const struct r1_mat *wc = &qc->layers[1].wgu, *wr = &qr->layers[1].wgu;
        const int grouped = r1_cpu_layout(R1_DTYPE_Q8_0, DIM) != R1_DTYPE_Q8_0; /* not on every kernel set */
        printf("q8_0 gate|up: loaded for cpu as %s (%s), for ref as %s (%s)\n", r1_dtype_name(wc->dtype),
               in_file(wc->data, quant) ? "in place" : "converted", r1_dtype_name(wr->dtype),
               in_file(wr->data, quant) ? "in place" : "converted");
        CHECK(!grouped || (wc->dtype == R1_DTYPE_Q8_0X8 && !in_file(wc->data, quant)),
              "for cpu: gate|up is %s, expected the cpu's q8_0x8, converted", r1_dtype_name(wc->dtype));
        CHECK(wr->dtype == R1_DTYPE_Q8_0 && in_file(wr->data, quant) && in_file(qr->layers[0].wqkv.data, quant),
              "for ref: gate|up is %s, expected the file's q8_0 where it lies", r1_dtype_name(wr->dtype));
        CHECK(!grouped || qr->in_place_bytes > qc->in_place_bytes, "in place: %zu bytes for ref, %zu for cpu",
              qr->in_place_bytes, qc->in_place_bytes);
        /* either layout runs on the cpu backend: q8_0 in both, the same sums */
        float *l1 = logits(qc), *l2 = logits(qr);
        float d = max_diff(l1, l2), big = 0;
        for (int i = 0; l1 && i < VOCAB; i++) big = fabsf(l1[i]) > big ? fabsf(l1[i]) : big;
        printf("logits on cpu (largest %.3f), q8_0 regrouped vs in place: max diff %g (tolerance LAYOUT_TOL %g)\n", big,
               d, LAYOUT_TOL);
        CHECK(d <= LAYOUT_TOL, "the two layouts' logits differ by %g", d);
        free(l1), free(l2);
    }
    r1_model_free(qc);
    r1_model_free(qr);
    struct r1_load_opts for_none = {.dtype = R1_DTYPE_AUTO, .backend = "no-such-backend"};
    struct r1_model *qn = r1_model_load(quant, &for_none);
    CHECK(!qn && strstr(r1_last_error(), "no-such-backend"), "an unknown backend: got '%s'",
          qn ? "loaded" : r1_last_error());
    r1_model_free(qn);

    /* --mlock, as far as this process may lock */
    struct r1_load_opts ml = {.dtype = R1_DTYPE_AUTO, .mlock = 1};
    struct r1_model *d = r1_model_load(fused, &ml);
    CHECK(d != NULL || strstr(r1_last_error(), "--mlock"), "--mlock: %s", r1_last_error());
    r1_model_free(d);

    /* a truncated file: an error naming the file and what is missing */
    if (a && a->n_maps == 1) {
        FILE *fp = fopen(trunc, "wb");
        size_t half = a->maps[0].size / 2;
        int ok = fp && fwrite(a->maps[0].data, 1, half, fp) == half;
        if (fp) fclose(fp);
        CHECK(ok, "writing %s", trunc);
        for (int nmap = 0; nmap < 2; nmap++) {
            struct r1_load_opts o = {.dtype = R1_DTYPE_AUTO, .no_mmap = nmap};
            struct r1_model *t = r1_model_load(trunc, &o);
            const char *e = r1_last_error();
            CHECK(!t && strstr(e, trunc) && strstr(e, "truncated"), "truncated file%s: got '%s'",
                  nmap ? " --no-mmap" : "", t ? "loaded" : e);
            r1_model_free(t);
        }
    }

    /* more weights to convert than the memory left: refused, naming the size */
    struct rlimit old;
    if (getrlimit(RLIMIT_AS, &old) == 0) {
        size_t len = 0;
        char *st = r1_file_read("/proc/self/status", &len);
        const char *vm = st ? strstr(st, "VmSize:") : NULL;
        unsigned long long kb = vm ? strtoull(vm + 7, NULL, 10) : 0;
        free(st);
        /* room for the mapping and the loader's own small allocations, not
         * for all weights converted to f32 (twice the bf16 file) */
        struct rlimit lim = {(rlim_t)(kb * 1024 + all + (8u << 20)), old.rlim_max};
        struct r1_load_opts f32 = {.dtype = R1_DTYPE_F32};
        struct r1_model *t = NULL;
        if (kb && setrlimit(RLIMIT_AS, &lim) == 0) {
            t = r1_model_load(fused, &f32);
            setrlimit(RLIMIT_AS, &old);
            const char *e = r1_last_error();
            printf("with %.0f MiB of address space left: %s\n", (all + (8u << 20)) / 1048576.0, t ? "loaded" : e);
            CHECK(!t && strstr(e, "GiB") && strstr(e, "available") && strstr(e, fused),
                  "a model too big for the memory left: got '%s'", t ? "loaded" : e);
        }
        r1_model_free(t);
    }
    r1_model_free(a);
    unlink(fused), unlink(split), unlink(trunc), unlink(quant), rmdir(dir);
    return TEST_DONE("test_mmap");
}
