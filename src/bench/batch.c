/*
 * batch.c - `r1infer bench --batch 1,2,4,8,16`: aggregate decode throughput
 * of continuous batching. For each batch size B, B sequences decode together
 * through one r1_batch (one row each per step: the weights are read once per
 * step for all of them); the report gives the step time, the aggregate and
 * per-sequence tok/s, the speed-up over B = 1 and the weight bytes read per
 * second, next to the bandwidth probe of the same run. Writes the CSV
 * (kernel_id decode_batch, batch_size B) and an SVG of aggregate tok/s.
 * The batch sizes take turns, round after round (a few steps each), and
 * each figure is the median over rounds; "x batch1" is the median of each
 * round's ratio to that round's batch 1: on a shared machine whose memory
 * speed drifts by the minute, sizes timed one after another compared
 * minutes apart (batch 8 once came out 8.5x batch 1 that way).
 * With --depth D1,D2 every batch size also decodes D positions deep: each
 * of its B sequences holds D cached positions (fast-forwarded, zero K/V, as
 * bench --depth does), so a step reads the weights once and every
 * sequence's cache; "share" is those bytes per second over the probe.
 * It must not assert speed: it measures.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench/bench.h"
#include "runtime/session.h"
#include "util/util.h"

#define GB 1e9

#define MAX_ROUNDS 9

struct batch_row {
    int B, depth, steps;
    double step_ms, tok_s, seq_tok_s, speedup, gbps;
    double step_bytes, share;            /* bytes a step reads (weights once, every sequence's cache) */
    double round_ms[MAX_ROUNDS], lo, hi; /* per round; the range of the rounds' ratios */
    double kus[BENCH_MAX_KERNELS];       /* --profile: each kernel's us over the timed steps */
};

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}
static double median(const double *v, int n) {
    double s[MAX_ROUNDS];
    memcpy(s, v, (size_t)n * sizeof *s);
    qsort(s, (size_t)n, sizeof *s, cmp_double);
    return n % 2 ? s[n / 2] : 0.5 * (s[n / 2 - 1] + s[n / 2]);
}

/* Decode `steps` timed steps (after one untimed) of B sequences from
 * position depth (cached positions past it dropped, missing ones
 * fast-forwarded); ms per step into *ms, 0 or -1 with an error. */
static int run_one(r1_batch_t *b, int B, int depth, int steps, int vocab, float *logits, double *ms, double *kus) {
    int32_t ids[BENCH_MAX_BATCH], seq[BENCH_MAX_BATCH];
    for (int q = 0; q < B; q++) {
        const int n = r1_batch_seq_n_past(b, q);
        if (n > depth ? r1_batch_seq_truncate(b, q, depth) : r1_batch_seq_skip(b, q, depth - n)) return -1;
        ids[q] = (int32_t)(1 + 37 * q) % vocab, seq[q] = q;
    }
    double t0 = 0;
    for (int s = 0; s <= steps; s++) {
        if (s == 1) {
            if (kus) r1_batch_profile_reset(b); /* the timed steps only */
            t0 = r1_now();
        }
        if (r1_batch_step(b, B, ids, seq, NULL, logits) != B) return -1;
        for (int q = 0; q < B; q++) ids[q] = r1_argmax(logits + (size_t)q * vocab, vocab);
    }
    *ms = (r1_now() - t0) / steps * 1e3;
    if (kus) {
        const char *names[BENCH_MAX_KERNELS];
        double us[BENCH_MAX_KERNELS];
        long calls[BENCH_MAX_KERNELS];
        int nk = r1_batch_profile(b, names, us, calls, BENCH_MAX_KERNELS);
        for (int k = 0; k < nk; k++) kus[k] += us[k];
    }
    return 0;
}

/* --profile: each kernel's ms per timed step (the mean over all rounds; the
 * profiled steps also wait for every kernel, so they add to more than
 * ms/step above) and its share of the step, one column per batch size. */
static void print_profile(const r1_batch_t *b, const struct batch_row *rows, int n) {
    const char *names[BENCH_MAX_KERNELS];
    double us[BENCH_MAX_KERNELS];
    long calls[BENCH_MAX_KERNELS];
    const int nk = r1_batch_profile(b, names, us, calls, BENCH_MAX_KERNELS);
    printf("kernel profile: ms per step and share of the step\n  %-14s", "kernel");
    for (int i = 0; i < n; i++) printf("    batch %-7d", rows[i].B);
    printf("\n");
    double tot[BENCH_MAX_ROWS] = {0};
    for (int i = 0; i < n; i++)
        for (int k = 0; k < nk; k++) tot[i] += rows[i].kus[k];
    for (int k = 0; k < nk; k++) {
        int any = 0;
        for (int i = 0; i < n; i++) any |= rows[i].kus[k] > 0;
        if (!any) continue;
        printf("  %-14s", names[k]);
        for (int i = 0; i < n; i++)
            printf(" %8.3f %6.1f%%", rows[i].kus[k] / 1e3 / rows[i].steps,
                   tot[i] > 0 ? 100 * rows[i].kus[k] / tot[i] : 0);
        printf("\n");
    }
}

static void write_svg(FILE *f, const struct bench_result *R, const struct batch_row *rows, int n) {
    const int W = 720, H = 420, L = 80, T = 80, PW = 600, PH = 260;
    double mx = 0;
    for (int i = 0; i < n; i++)
        if (rows[i].tok_s > mx) mx = rows[i].tok_s;
    if (mx <= 0) mx = 1;
    fprintf(f,
            "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n"
            "<svg xmlns=\"http://www.w3.org/2000/svg\" version=\"1.1\" width=\"%d\" height=\"%d\" "
            "viewBox=\"0 0 %d %d\" font-family=\"DejaVu Sans, Helvetica, Arial, sans-serif\">\n"
            "<rect x=\"0\" y=\"0\" width=\"%d\" height=\"%d\" fill=\"#ffffff\"/>\n",
            W, H, W, H, W, H);
    /* model and cpu names are ours or /proc's; keep only safe characters */
    char name[160], cpu[256];
    snprintf(name, sizeof name, "%s", R->model_name);
    snprintf(cpu, sizeof cpu, "%s", R->mach.cpu);
    for (char *p = name; *p; p++)
        if (strchr("<>&\"'", *p) || (unsigned char)*p < 0x20) *p = '_';
    for (char *p = cpu; *p; p++)
        if (strchr("<>&\"'", *p) || (unsigned char)*p < 0x20) *p = '_';
    fprintf(
        f,
        "<text x=\"20\" y=\"28\" font-size=\"18\" font-weight=\"bold\">r1infer bench --batch: %s, %s weights</text>\n",
        name, r1_dtype_name(R->dtype));
    fprintf(f,
            "<text x=\"20\" y=\"48\" font-size=\"12\" fill=\"#555555\">%s, %d threads, %.2f GB/s measured read "
            "bandwidth; aggregate decode tok/s per batch size (one row per sequence per step)</text>\n",
            cpu, R->mach.threads, R->bw.best_gbps);
    fprintf(f, "<line x1=\"%d\" y1=\"%d\" x2=\"%d\" y2=\"%d\" stroke=\"#000\"/>\n", L, T + PH, L + PW, T + PH);
    fprintf(f, "<line x1=\"%d\" y1=\"%d\" x2=\"%d\" y2=\"%d\" stroke=\"#000\"/>\n", L, T, L, T + PH);
    const double bw = PW / (double)(n > 0 ? n : 1);
    for (int i = 0; i < n; i++) {
        double h = rows[i].tok_s / mx * PH, x = L + i * bw + bw * 0.15;
        fprintf(f, "<rect x=\"%.1f\" y=\"%.1f\" width=\"%.1f\" height=\"%.1f\" fill=\"#4a7ab5\"/>\n", x, T + PH - h,
                bw * 0.7, h);
        fprintf(f, "<text x=\"%.1f\" y=\"%.1f\" font-size=\"12\" text-anchor=\"middle\">%.2f (x%.2f)</text>\n",
                x + bw * 0.35, T + PH - h - 6, rows[i].tok_s, rows[i].speedup);
        if (rows[i].depth)
            fprintf(f, "<text x=\"%.1f\" y=\"%d\" font-size=\"12\" text-anchor=\"middle\">batch %d @%d</text>\n",
                    x + bw * 0.35, T + PH + 18, rows[i].B, rows[i].depth);
        else
            fprintf(f, "<text x=\"%.1f\" y=\"%d\" font-size=\"12\" text-anchor=\"middle\">batch %d</text>\n",
                    x + bw * 0.35, T + PH + 18, rows[i].B);
        fprintf(
            f,
            "<text x=\"%.1f\" y=\"%d\" font-size=\"10\" text-anchor=\"middle\" fill=\"#555555\">%.1f ms/step</text>\n",
            x + bw * 0.35, T + PH + 34, rows[i].step_ms);
    }
    fprintf(f,
            "<text x=\"20\" y=\"%d\" font-size=\"12\" transform=\"rotate(-90 20 %d)\">tok/s (all sequences)</text>\n",
            T + PH, T + PH);
    fputs("</svg>\n", f);
}

int bench_batch_run(const struct bench_opts *o, struct bench_result *R, r1_model_t *m, int threads, enum r1_dtype kvt) {
    const int vocab = R->cfg->vocab;
    int maxb = 0, maxd = 0;
    for (int i = 0; i < o->n_batch; i++)
        if (o->batch[i] > maxb) maxb = o->batch[i];
    const int nd = o->n_depth ? o->n_depth : 1;
    int depth[BENCH_MAX_ROWS] = {0};
    for (int d = 0; d < o->n_depth; d++) {
        depth[d] = o->depth[d];
        if (depth[d] > maxd) maxd = depth[d];
    }
    const int steps = o->quick ? 2 : 3, rounds = o->quick ? 1 : 5;
    int n_ctx = maxd + steps + 2;
    if (n_ctx < 64) n_ctx = 64;
    if (n_ctx > R->cfg->max_pos) {
        fprintf(stderr, "r1infer bench: --depth %d and %d steps pass the model's %d positions\n", maxd, steps + 1,
                R->cfg->max_pos);
        return 1;
    }
    r1_batch_t *b = r1_batch_new(m, &(struct r1_batch_opts){.n_seq = maxb,
                                                            .n_ctx = n_ctx,
                                                            .n_batch = maxb,
                                                            .backend = o->backend,
                                                            .n_threads = threads,
                                                            .kv_dtype = kvt,
                                                            .profile = o->profile});
    float *logits = b ? malloc((size_t)maxb * vocab * sizeof(float)) : NULL;
    struct batch_row rows[BENCH_MAX_BATCH];
    int n = 0, rc = 1;
    memset(rows, 0, sizeof rows);
    if (!b || !logits) goto out;
    n = o->n_batch * nd;
    for (int r = 0; r < rounds; r++)
        for (int i = 0; i < n; i++) {
            const int B = o->batch[i % o->n_batch], D = depth[i / o->n_batch];
            if (D) bench_progress("decode round %d/%d, batch %d at depth %d", r + 1, rounds, B, D);
            else bench_progress("decode round %d/%d, batch %d", r + 1, rounds, B);
            rows[i].B = B, rows[i].depth = D, rows[i].steps = steps * rounds;
            double *kus = o->profile ? rows[i].kus : NULL;
            if (run_one(b, B, D, steps, vocab, logits, &rows[i].round_ms[r], kus)) goto out;
        }
    bench_progress_done();
    for (int i = 0; i < n; i++) {
        struct batch_row *w = &rows[i];
        int i1 = -1; /* batch 1 at the same depth: the ratios' base (else per sequence of the first row) */
        for (int j = 0; j < n; j++)
            if (rows[j].B == 1 && rows[j].depth == w->depth) i1 = j;
        const struct batch_row *base = &rows[i1 >= 0 ? i1 : i - i % o->n_batch];
        w->step_ms = median(w->round_ms, rounds);
        w->tok_s = w->B * 1e3 / w->step_ms, w->seq_tok_s = 1e3 / w->step_ms;
        w->gbps = R->decode_bytes / (w->step_ms * 1e-3) / GB;
        /* the weights once, each sequence's cache at its mean depth over the timed steps */
        const double kv = bench_decode_bytes(m, kvt, w->depth + 1 + steps / 2) - R->decode_bytes;
        w->step_bytes = R->decode_bytes + w->B * kv;
        w->share = R->bw.best_gbps > 0 ? w->step_bytes / (w->step_ms * 1e-3) / GB / R->bw.best_gbps : 0;
        double ratio[MAX_ROUNDS];
        for (int r = 0; r < rounds; r++)
            ratio[r] = w->B / w->round_ms[r] / (base->B / base->round_ms[r] / (i1 >= 0 ? 1 : base->B));
        w->speedup = median(ratio, rounds);
        qsort(ratio, (size_t)rounds, sizeof *ratio, cmp_double);
        w->lo = ratio[0], w->hi = ratio[rounds - 1];
    }
    printf("r1infer bench --batch: %s (dim %d, %d layers), %s weights, %s KV cache, backend %s, %d thread%s\n",
           R->model_name, R->cfg->dim, R->cfg->n_layer, r1_dtype_name(R->dtype), r1_dtype_name(kvt),
           r1_batch_backend(b), threads, threads == 1 ? "" : "s");
    printf("machine   %s (%s), git %s\n", R->mach.cpu, R->mach.isa[0] ? R->mach.isa : "-", R->mach.git_sha);
    printf("bandwidth %.2f GB/s best, %.2f GB/s median (%s); a decode step reads %.3f GB of weights: "
           "batch-1 ceiling %.2f tok/s\n",
           R->bw.best_gbps, R->bw.median_gbps, R->bw.reader ? R->bw.reader : "?", R->decode_bytes / GB,
           R->bw.best_gbps * GB / R->decode_bytes);
    printf("decode from position %s: %d round%s, each row in turn %d timed steps after one untimed\n"
           "(forward + greedy pick of every row); medians over rounds, x batch1 the median of each round's\n"
           "ratio to batch 1 at the same depth; share: the bytes a step reads (the weights once, every\n"
           "sequence's cache) per second over the best bandwidth\n",
           o->n_depth ? "depth (cache positions fast-forwarded: zero K/V)" : "0", rounds, rounds == 1 ? "" : "s",
           steps);
    printf("  %6s %5s %10s %12s %14s %9s %14s %7s %15s\n", "depth", "batch", "ms/step", "tok/s (all)", "tok/s per seq",
           "x batch1", "weights GB/s", "share", "rounds' x range");
    for (int i = 0; i < n; i++)
        printf("  %6d %5d %10.2f %12.2f %14.2f %9.2f %14.2f %6.1f%% %7.2f-%.2f\n", rows[i].depth, rows[i].B,
               rows[i].step_ms, rows[i].tok_s, rows[i].seq_tok_s, rows[i].speedup, rows[i].gbps, 100 * rows[i].share,
               rows[i].lo, rows[i].hi);
    if (o->profile) print_profile(b, rows, n);
    fflush(stdout);
    rc = 0;
    if (o->csv) {
        FILE *f = fopen(o->csv, "w");
        if (!f) {
            r1_err("cannot write %s", o->csv);
            rc = 1;
        } else {
            fputs("device_id,kernel_id,dtype,input_shape,batch_size,impl_lang,latency_us,throughput_gbps,"
                  "driver_version,toolchain,git_sha,submitter,tok_s\n",
                  f);
            for (int i = 0; i < n; i++)
                fprintf(f, "%s,decode_batch,%s,\"%s ctx %d-%d\",%d,c,%.3f,%.3f,\"%s\",\"%s\",%s,%s,%.3f\n",
                        R->mach.slug, r1_dtype_name(R->dtype), R->model_name, rows[i].depth, rows[i].depth + steps,
                        rows[i].B, rows[i].step_ms * 1e3, rows[i].gbps, R->mach.os, R->mach.toolchain, R->mach.git_sha,
                        R->mach.submitter, rows[i].tok_s);
            if (fclose(f)) rc = 1;
        }
    }
    if (o->svg) {
        FILE *f = fopen(o->svg, "w");
        if (!f) {
            r1_err("cannot write %s", o->svg);
            rc = 1;
        } else {
            write_svg(f, R, rows, n);
            if (fclose(f)) rc = 1;
        }
    }
out:
    bench_progress_done();
    if (rc) fprintf(stderr, "r1infer bench: %s\n", r1_last_error());
    free(logits);
    r1_batch_free(b);
    return rc;
}
