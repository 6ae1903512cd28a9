/*
 * report.c - the bench reporters: the terminal report (stdout), leaderboard
 * CSV rows and the full result as JSON. Pure functions of a bench_result;
 * the SVG chart is in svg.c.
 */
#include <jansson.h>
#include <stdio.h>
#include <string.h>

#include "bench/bench.h"

#define GB 1e9

static void text_e2e(FILE *f, const struct bench_e2e *e) {
    fprintf(f, "  backend %s, %d thread%s\n", e->backend, e->threads, e->threads == 1 ? "" : "s");
    for (int i = 0; i < e->n_prefill; i++) {
        const struct bench_row *r = &e->prefill[i];
        if (r->skipped) fprintf(f, "    prefill %5d tokens   skipped: %s\n", r->tokens, r->note);
        else fprintf(f, "    prefill %5d tokens   %9.2f tok/s  %9.2f ms/token\n", r->tokens, r->tok_s, r->ms_tok);
    }
    for (int i = 0; i < e->n_decode; i++) {
        const struct bench_row *r = &e->decode[i];
        if (r->skipped) {
            fprintf(f, "    decode  ctx %5d      skipped: %s\n", r->ctx, r->note);
            continue;
        }
        fprintf(f,
                "    decode  ctx %5d      %9.2f tok/s  %9.2f ms/token  %7.3f GB/token  ceiling %7.2f tok/s  %5.1f%% "
                "(%d tokens)\n",
                r->ctx, r->tok_s, r->ms_tok, r->bytes_tok / GB, r->ceiling_tok_s, 100 * r->frac, r->tokens);
    }
    fprintf(f, "    logits hash %08x (after the first prefill)\n", e->logits_hash);
    if (e->note[0]) fprintf(f, "    note: %s\n", e->note);
}

void bench_report_text(FILE *f, const struct bench_result *R) {
    const struct bench_machine *M = &R->mach;
    const struct r1_config *c = R->cfg;
    fprintf(f, "r1infer bench: %s (dim %d, %d layers, %d/%d heads, ffn %d, vocab %d), %s weights, %s KV cache\n",
            R->model_name, c->dim, c->n_layer, c->n_head, c->n_kv_head, c->ffn, c->vocab, r1_dtype_name(R->dtype),
            r1_dtype_name(R->kv_dtype));
    fprintf(f, "model ready in %.1f s; a decode step reads %.3f GB of weights\n\n", R->gen_s, R->decode_bytes / GB);
    fprintf(f, "machine\n  cpu       %s (%s)\n  cores     %d thread%s on %d online CPU%s, L3 %zu MiB\n", M->cpu,
            M->slug, M->threads, M->threads == 1 ? "" : "s", M->n_cpus, M->n_cpus == 1 ? "" : "s", M->l3_bytes >> 20);
    fprintf(f, "  isa       %s%s%s\n", M->isa[0] ? M->isa : "n/a (only the cpu backend picks one)",
            M->features[0] ? "; cpu has " : "", M->features);
    if (M->device[0]) fprintf(f, "  device    %s\n", M->device);
    fprintf(f, "  software  %s, %s, git %s\n", M->os, M->toolchain, M->git_sha);
    fprintf(f, "  bandwidth %.2f GB/s best, %.2f GB/s median: read %zu MiB x %d with %d threads (the pool)\n",
            R->bw.best_gbps, R->bw.median_gbps, R->bw.bytes >> 20, R->bw.runs, M->threads);
    fprintf(f, "            best on 4 KiB pages %.2f GB/s, on 2 MiB pages (MADV_HUGEPAGE) %.2f GB/s; reader: %s\n\n",
            R->bw.best_4k_gbps, R->bw.best_huge_gbps, R->bw.reader ? R->bw.reader : "-");

    const struct bench_suite *S = &R->suite;
    fprintf(f,
            "kernel suite: each kernel alone, T=1, attention at ctx %d; median of %d runs after 2 warm-up,\n"
            "caches flushed before every run (%zu MiB read, not timed), per-layer kernels rotate over layers\n",
            S->ctx, S->runs, R->bw.flush_bytes >> 20);
    fprintf(f, "  %-21s %-34s %-5s %10s %10s %11s %8s %7s\n", "kernel", "shape", "dtype", "us (med)", "us (min)",
            "bytes", "GB/s", "% bw");
    for (int i = 0; i < S->n; i++) {
        const struct bench_kernel *k = &S->k[i];
        fprintf(f, "  %-21s %-34s %-5s %10.1f %10.1f %11.0f %8.2f %6.1f%%\n", k->id, k->shape, k->dtype, k->us_median,
                k->us_min, k->bytes, k->gbps, 100 * k->frac);
    }

    const struct bench_insitu *I = &R->insitu;
    double iso = 0, ins = 0;
    fprintf(f, "\nin situ: %d real decode steps at ctx %d (session profile), next to the isolated view\n", I->steps,
            I->ctx);
    fprintf(f, "  %-15s %10s %14s %7s %18s %9s\n", "kernel", "calls/step", "in-situ us", "share", "isolated us x calls",
            "iso/situ");
    for (int i = 0; i < I->n; i++) {
        const struct bench_insitu_row *r = &I->r[i];
        if (r->calls_step == 0 && r->isolated_us_step == 0) continue;
        ins += r->us_step;
        iso += r->isolated_us_step;
        fprintf(f, "  %-15s %10.0f %14.1f %6.1f%% %18.1f %9.2f\n", r->name, r->calls_step, r->us_step, 100 * r->share,
                r->isolated_us_step, r->us_step > 0 ? r->isolated_us_step / r->us_step : 0);
    }
    fprintf(f, "  %-15s %10s %14.1f %7s %18.1f %9.2f   (measured step %.1f us)\n", "total", "", ins, "", iso,
            ins > 0 ? iso / ins : 0, I->step_us);

    fprintf(f, "  (isolated runs start cold: weights, KV and activations come from memory, and each pays a pool\n"
               "  wake-up; in situ the activations are in cache and small kernels run back to back)\n");
    for (int i = 0; i < I->n; i++) {
        const struct bench_insitu_row *r = &I->r[i];
        if (!strcmp(r->name, "sample") && r->us_step > 10 * r->isolated_us_step && r->share > 0.02)
            fprintf(f, "  sample: in situ the logits are flat (as a random-weight model's are), so the top-p step\n"
                       "  sorts every candidate; the isolated run uses the peaked logits of a confident model\n");
    }
    fprintf(f, "\nend to end (decode = forward + sample; ceiling = %.2f GB/s / bytes per token)\n", R->bw.best_gbps);
    text_e2e(f, &R->e2e);
    if (R->have_cmp) text_e2e(f, &R->cmp);
    fprintf(f, "\nbench finished in %.1f s\n", R->total_s);
}

/* ---------------------------------------------------------------- CSV */

static void csv_field(FILE *f, const char *s, int last) {
    if (strpbrk(s, ",\"\n\r")) {
        fputc('"', f);
        for (const char *p = s; *p; p++) {
            if (*p == '"') fputc('"', f);
            fputc(*p, f);
        }
        fputc('"', f);
    } else {
        fputs(s, f);
    }
    fputc(last ? '\n' : ',', f);
}

static void csv_row(FILE *f, const struct bench_machine *M, const char *kernel, const char *dtype, const char *shape,
                    double us, double gbps) {
    char lat[32], thr[32];
    snprintf(lat, sizeof lat, "%.3f", us);
    snprintf(thr, sizeof thr, "%.3f", gbps);
    csv_field(f, M->slug, 0);
    csv_field(f, kernel, 0);
    csv_field(f, dtype, 0);
    csv_field(f, shape, 0);
    csv_field(f, "1", 0);
    csv_field(f, M->impl_lang[0] ? M->impl_lang : "c", 0);
    csv_field(f, lat, 0);
    csv_field(f, thr, 0);
    csv_field(f, M->os, 0);
    csv_field(f, M->toolchain, 0);
    csv_field(f, M->git_sha, 0);
    csv_field(f, M->submitter, 1);
}

/* The decode row the step figures come from: the in-situ context, else the first run. */
static const struct bench_row *step_row(const struct bench_result *R) {
    const struct bench_row *best = NULL;
    for (int i = 0; i < R->e2e.n_decode; i++) {
        const struct bench_row *r = &R->e2e.decode[i];
        if (r->skipped) continue;
        if (!best || r->ctx == R->insitu.ctx) best = r;
    }
    return best;
}

int bench_write_csv(const char *path, const struct bench_result *R) {
    FILE *f = fopen(path, "w");
    if (!f) return r1_err("cannot write %s", path);
    fputs("device_id,kernel_id,dtype,input_shape,batch_size,impl_lang,latency_us,throughput_gbps,driver_version,"
          "toolchain,git_sha,submitter\n",
          f);
    for (int i = 0; i < R->suite.n; i++) {
        const struct bench_kernel *k = &R->suite.k[i];
        csv_row(f, &R->mach, k->id, k->dtype, k->shape, k->us_median, k->gbps);
    }
    const struct bench_row *r = step_row(R);
    if (r) {
        char shape[160];
        snprintf(shape, sizeof shape, "%s ctx %d", R->model_name, r->ctx);
        double us = r->ms_tok * 1e3;
        csv_row(f, &R->mach, "decode_step", r1_dtype_name(R->dtype), shape, us, us > 0 ? r->bytes_tok / (us * 1e3) : 0);
    }
    if (fclose(f)) return r1_err("cannot write %s", path);
    return 0;
}

/* --------------------------------------------------------------- JSON */

static json_t *rows_json(const struct bench_row *rows, int n, int decode) {
    json_t *a = json_array();
    for (int i = 0; i < n; i++) {
        const struct bench_row *r = &rows[i];
        json_t *o = json_pack("{s:i, s:b}", "tokens", r->tokens, "skipped", r->skipped);
        if (decode) json_object_set_new(o, "ctx", json_integer(r->ctx));
        if (!r->skipped) {
            json_object_set_new(o, "tok_s", json_real(r->tok_s));
            json_object_set_new(o, "ms_per_token", json_real(r->ms_tok));
            if (decode) {
                json_object_set_new(o, "bytes_per_token", json_real(r->bytes_tok));
                json_object_set_new(o, "ceiling_tok_s", json_real(r->ceiling_tok_s));
                json_object_set_new(o, "fraction_of_ceiling", json_real(r->frac));
            }
        }
        if (r->note[0]) json_object_set_new(o, "note", json_string(r->note));
        json_array_append_new(a, o);
    }
    return a;
}

static json_t *e2e_json(const struct bench_e2e *e) {
    char hash[16];
    snprintf(hash, sizeof hash, "%08x", e->logits_hash);
    json_t *o = json_pack("{s:s, s:i, s:s}", "backend", e->backend, "threads", e->threads, "logits_hash", hash);
    json_object_set_new(o, "prefill", rows_json(e->prefill, e->n_prefill, 0));
    json_object_set_new(o, "decode", rows_json(e->decode, e->n_decode, 1));
    if (e->note[0]) json_object_set_new(o, "note", json_string(e->note));
    return o;
}

int bench_write_json(const char *path, const struct bench_result *R) {
    const struct bench_machine *M = &R->mach;
    const struct r1_config *c = R->cfg;
    json_t *root = json_object();
    json_object_set_new(root, "machine",
                        json_pack("{s:s, s:s, s:s, s:s, s:i, s:i, s:I, s:s, s:s, s:s, s:s}", "cpu", M->cpu, "device_id",
                                  M->slug, "isa", M->isa, "features", M->features, "threads", M->threads, "online_cpus",
                                  M->n_cpus, "l3_bytes", (json_int_t)M->l3_bytes, "os", M->os, "toolchain",
                                  M->toolchain, "git_sha", M->git_sha, "submitter", M->submitter));
    json_object_set_new(root, "bandwidth",
                        json_pack("{s:I, s:i, s:f, s:f, s:f, s:f, s:I, s:s}", "bytes", (json_int_t)R->bw.bytes, "runs",
                                  R->bw.runs, "best_gbps", R->bw.best_gbps, "median_gbps", R->bw.median_gbps,
                                  "best_4k_pages_gbps", R->bw.best_4k_gbps, "best_2m_pages_gbps", R->bw.best_huge_gbps,
                                  "flush_bytes", (json_int_t)R->bw.flush_bytes, "reader",
                                  R->bw.reader ? R->bw.reader : "-"));
    json_object_set_new(root, "model",
                        json_pack("{s:s, s:i, s:i, s:i, s:i, s:i, s:i, s:i, s:s, s:s, s:f, s:f}", "name", R->model_name,
                                  "dim", c->dim, "n_layer", c->n_layer, "n_head", c->n_head, "n_kv_head", c->n_kv_head,
                                  "head_dim", c->head_dim, "ffn", c->ffn, "vocab", c->vocab, "dtype",
                                  r1_dtype_name(R->dtype), "kv_dtype", r1_dtype_name(R->kv_dtype), "decode_bytes",
                                  R->decode_bytes, "ready_s", R->gen_s));
    json_t *ks = json_array();
    for (int i = 0; i < R->suite.n; i++) {
        const struct bench_kernel *k = &R->suite.k[i];
        json_array_append_new(ks,
                              json_pack("{s:s, s:s, s:s, s:s, s:i, s:f, s:f, s:f, s:f, s:f}", "kernel", k->id,
                                        "profile_name", k->insitu, "shape", k->shape, "dtype", k->dtype,
                                        "calls_per_step", k->per_step, "us_median", k->us_median, "us_min", k->us_min,
                                        "bytes", k->bytes, "gbps", k->gbps, "fraction_of_bandwidth", k->frac));
    }
    json_object_set_new(root, "kernel_suite",
                        json_pack("{s:i, s:i, s:o}", "runs", R->suite.runs, "ctx", R->suite.ctx, "kernels", ks));
    json_t *is = json_array();
    for (int i = 0; i < R->insitu.n; i++) {
        const struct bench_insitu_row *r = &R->insitu.r[i];
        json_array_append_new(is, json_pack("{s:s, s:f, s:f, s:f, s:f}", "kernel", r->name, "calls_per_step",
                                            r->calls_step, "us_per_step", r->us_step, "share", r->share,
                                            "isolated_us_per_step", r->isolated_us_step));
    }
    json_object_set_new(root, "in_situ",
                        json_pack("{s:i, s:i, s:f, s:o}", "steps", R->insitu.steps, "ctx", R->insitu.ctx, "step_us",
                                  R->insitu.step_us, "kernels", is));
    json_object_set_new(root, "end_to_end", e2e_json(&R->e2e));
    if (R->have_cmp) json_object_set_new(root, "compare", e2e_json(&R->cmp));
    json_object_set_new(root, "total_s", json_real(R->total_s));
    int rc = json_dump_file(root, path, JSON_INDENT(2) | JSON_REAL_PRECISION(6));
    json_decref(root);
    if (rc) return r1_err("cannot write %s", path);
    return 0;
}
