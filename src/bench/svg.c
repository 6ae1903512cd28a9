/*
 * svg.c - the bench chart, hand-written SVG 1.1 (no library): the in-situ
 * share of each kernel in a decode step as horizontal bars, and each isolated
 * kernel's achieved GB/s as columns against a line at the measured bandwidth.
 * Every text node is XML-escaped.
 */
#include <stdio.h>
#include <string.h>

#include "bench/bench.h"

#define W 960
#define LEFT 170 /* label column of the share bars */

static void esc(FILE *f, const char *s) {
    for (; *s; s++) {
        switch (*s) {
        case '<':
            fputs("&lt;", f);
            break;
        case '>':
            fputs("&gt;", f);
            break;
        case '&':
            fputs("&amp;", f);
            break;
        case '"':
            fputs("&quot;", f);
            break;
        case '\'':
            fputs("&apos;", f);
            break;
        default:
            if ((unsigned char)*s >= 0x20 || *s == '\t') fputc(*s, f);
        }
    }
}

static void text(FILE *f, double x, double y, const char *anchor, int size, const char *extra, const char *s) {
    fprintf(f, "<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"%s\" font-size=\"%d\"%s%s>", x, y, anchor, size,
            extra ? " " : "", extra ? extra : "");
    esc(f, s);
    fputs("</text>\n", f);
}

int bench_write_svg(const char *path, const struct bench_result *R) {
    FILE *f = fopen(path, "w");
    if (!f) return r1_err("cannot write %s", path);
    const struct bench_insitu *I = &R->insitu;
    const struct bench_suite *S = &R->suite;
    int rows = 0;
    for (int i = 0; i < I->n; i++)
        if (I->r[i].calls_step > 0) rows++;
    const int bar_h = 22, top1 = 100, h1 = rows * bar_h;
    const int top2 = top1 + h1 + 80, plot_h = 260, label_h = 130;
    const int H = top2 + plot_h + label_h + 20;
    char buf[512];

    fprintf(f,
            "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n"
            "<svg xmlns=\"http://www.w3.org/2000/svg\" version=\"1.1\" width=\"%d\" height=\"%d\" "
            "viewBox=\"0 0 %d %d\" font-family=\"DejaVu Sans, Helvetica, Arial, sans-serif\">\n"
            "<rect x=\"0\" y=\"0\" width=\"%d\" height=\"%d\" fill=\"#ffffff\"/>\n",
            W, H, W, H, W, H);
    snprintf(buf, sizeof buf, "r1infer bench: %s, %s weights, backend %s", R->model_name, r1_dtype_name(R->dtype),
             R->e2e.backend ? R->e2e.backend : "?");
    text(f, 20, 28, "start", 18, "font-weight=\"bold\"", buf);
    snprintf(buf, sizeof buf, "%s, %d threads, %.2f GB/s measured read bandwidth, git %s", R->mach.cpu, R->mach.threads,
             R->bw.best_gbps, R->mach.git_sha);
    text(f, 20, 48, "start", 12, "fill=\"#555555\"", buf);

    /* ---- panel 1: in-situ share ---- */
    snprintf(buf, sizeof buf, "In situ: share of a decode step at ctx %d (%d steps, %.1f ms per step)", I->ctx,
             I->steps, I->step_us / 1e3);
    text(f, 20, top1 - 12, "start", 14, "font-weight=\"bold\"", buf);
    double maxs = 0;
    for (int i = 0; i < I->n; i++)
        if (I->r[i].share > maxs) maxs = I->r[i].share;
    if (maxs <= 0) maxs = 1;
    const double span = W - LEFT - 120;
    int y = top1;
    for (int i = 0; i < I->n; i++) {
        const struct bench_insitu_row *r = &I->r[i];
        if (r->calls_step <= 0) continue;
        double w = span * r->share / maxs;
        text(f, LEFT - 8, y + 15, "end", 12, NULL, r->name);
        fprintf(f, "<rect x=\"%d\" y=\"%d\" width=\"%.1f\" height=\"%d\" fill=\"#4477aa\"/>\n", LEFT, y + 3,
                w < 0.5 ? 0.5 : w, bar_h - 6);
        snprintf(buf, sizeof buf, "%.1f%%  (%.0f us)", 100 * r->share, r->us_step);
        text(f, LEFT + w + 6, y + 15, "start", 11, NULL, buf);
        y += bar_h;
    }

    /* ---- panel 2: isolated GB/s against the bandwidth line ---- */
    snprintf(buf, sizeof buf, "Isolated kernels (caches flushed): achieved GB/s, median of %d runs", S->runs);
    text(f, 20, top2 - 24, "start", 14, "font-weight=\"bold\"", buf);
    double maxg = R->bw.best_gbps;
    for (int i = 0; i < S->n; i++)
        if (S->k[i].gbps > maxg) maxg = S->k[i].gbps;
    if (maxg <= 0) maxg = 1;
    maxg *= 1.15;
    const int px0 = 70, pw = W - px0 - 30, base = top2 + plot_h;
    fprintf(f, "<line x1=\"%d\" y1=\"%d\" x2=\"%d\" y2=\"%d\" stroke=\"#333333\"/>\n", px0, top2, px0, base);
    fprintf(f, "<line x1=\"%d\" y1=\"%d\" x2=\"%d\" y2=\"%d\" stroke=\"#333333\"/>\n", px0, base, px0 + pw, base);
    for (int t = 0; t <= 4; t++) { /* y ticks */
        double v = maxg * t / 4, yy = base - plot_h * t / 4.0;
        fprintf(f, "<line x1=\"%d\" y1=\"%.1f\" x2=\"%d\" y2=\"%.1f\" stroke=\"#dddddd\"/>\n", px0, yy, px0 + pw, yy);
        snprintf(buf, sizeof buf, "%.1f", v);
        text(f, px0 - 6, yy + 4, "end", 11, NULL, buf);
    }
    fprintf(f,
            "<text x=\"18\" y=\"%.1f\" font-size=\"12\" transform=\"rotate(-90 18 %.1f)\" "
            "text-anchor=\"middle\">GB/s</text>\n",
            top2 + plot_h / 2.0, top2 + plot_h / 2.0);
    double slot = S->n ? (double)pw / S->n : pw;
    for (int i = 0; i < S->n; i++) {
        const struct bench_kernel *k = &S->k[i];
        double h = plot_h * k->gbps / maxg, x = px0 + slot * i + slot * 0.15;
        fprintf(f, "<rect x=\"%.1f\" y=\"%.1f\" width=\"%.1f\" height=\"%.1f\" fill=\"%s\"/>\n", x, base - h,
                slot * 0.7, h, k->frac >= 0.5 ? "#228833" : "#ee6677");
        snprintf(buf, sizeof buf, "%.0f%%", 100 * k->frac);
        text(f, x + slot * 0.35, base - h - 4, "middle", 10, NULL, buf);
        double lx = x + slot * 0.35, ly = base + 12;
        char tr[96];
        snprintf(tr, sizeof tr, "transform=\"rotate(-40 %.1f %.1f)\"", lx, ly);
        text(f, lx, ly, "end", 11, tr, k->id);
    }
    double by = base - plot_h * R->bw.best_gbps / maxg;
    fprintf(f,
            "<line x1=\"%d\" y1=\"%.1f\" x2=\"%d\" y2=\"%.1f\" stroke=\"#000000\" stroke-width=\"1.5\" "
            "stroke-dasharray=\"6,4\"/>\n",
            px0, by, px0 + pw, by);
    snprintf(buf, sizeof buf, "measured bandwidth %.2f GB/s", R->bw.best_gbps);
    text(f, px0 + pw, by - 5, "end", 11, NULL, buf);
    fputs("</svg>\n", f);
    if (fclose(f)) return r1_err("cannot write %s", path);
    return 0;
}
