/*
 * bench.c - one `r1infer bench` run, in order: machine, model (loaded or
 * synthesized in memory), bandwidth probe, kernel suite, end to end on the
 * chosen backend (its decode at ctx 512 doubles as the in-situ profile),
 * end to end on the --compare backend with a reduced plan, then the reports.
 * Sizes are chosen here so the default run on the 1.5B shape stays within
 * a few minutes on a 2-core machine.
 */
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "bench/bench.h"
#include "runtime/job.h"
#ifdef R1_OPENCL
#include "kernels/opencl/opencl.h"
#endif

#define MiB ((size_t)1 << 20)

static void plan_add(int *arr, int *n, int v) {
    if (*n < BENCH_MAX_ROWS) arr[(*n)++] = v;
}

int bench_run(const struct bench_opts *o) {
    double t_start = r1_now();
    struct bench_result *R = calloc(1, sizeof *R);
    if (!R) {
        fprintf(stderr, "r1infer bench: out of memory\n");
        return 1;
    }
    int rc = 1;
    r1_model_t *m = NULL;
    struct r1_pool *pool = NULL;
    const char *bname = o->backend ? o->backend : "cpu";
    const struct r1_backend *be = r1_backend_find(bname);
    r1_kernel_fn fn[R1_K_COUNT];
    if (!be || r1_backend_resolve(be, fn)) goto fail;
    enum r1_dtype kvt = o->kv_dtype == R1_DTYPE_AUTO ? be->kv_dtype : o->kv_dtype;
    int threads = o->n_threads > 0 ? o->n_threads : (!strcmp(be->name, "ref") ? 1 : r1_physical_cores());
    bench_machine_probe(&R->mach, be->name, threads);

    /* ---- model ---- */
    double t0 = r1_now();
    if (o->model) {
        struct r1_load_opts lo = {.dtype = o->dtype,
                                  .progress = isatty(2),
                                  .backend = be->name,
                                  .no_mmap = o->no_mmap,
                                  .mlock = o->mlock,
                                  .layout_cache = o->layout_cache};
        m = r1_model_load(o->model, &lo);
        snprintf(R->model_name, sizeof R->model_name, "%s", o->model);
    } else {
        struct r1_config cfg;
        if (r1_synth_config(o->synthetic, &cfg)) goto fail;
        bench_progress("generating the synthetic %s model in memory", o->synthetic);
        m = r1_model_synthetic(&cfg, o->dtype, 1, isatty(2));
        snprintf(R->model_name, sizeof R->model_name, "synthetic %s", o->synthetic);
    }
    if (!m) goto fail;
    bench_progress_done();
    R->gen_s = r1_now() - t0;
    R->cfg = r1_model_config(m);
    R->dtype = r1_model_dtype(m);
    R->kv_dtype = kvt;
    R->decode_bytes = (double)r1_model_decode_bytes(m);

    /* ---- bandwidth: a buffer several times the last-level cache ---- */
    pool = r1_pool_new(threads);
    if (!pool) goto fail;
    size_t l3 = R->mach.l3_bytes ? R->mach.l3_bytes : 64 * MiB;
    size_t probe = o->quick ? 64 * MiB : (4 * l3 > 1024 * MiB ? 4 * l3 : 1024 * MiB);
    size_t flush = o->quick ? 32 * MiB : (2 * l3 > 640 * MiB ? 2 * l3 : 640 * MiB);
    if (bench_bw_measure(&R->bw, pool, probe, flush, o->quick ? 3 : 5)) goto fail;
#ifdef R1_OPENCL
    /* an OpenCL GPU: the ceiling is its own memory's (device copy), not the host's */
    if (!strcmp(be->name, "opencl") && !r1_opencl_is_cpu()) {
        double g = r1_opencl_copy_gbps(probe, o->quick ? 3 : 5);
        if (g <= 0) goto fail;
        R->bw.best_gbps = R->bw.median_gbps = g;
        R->bw.reader = "clEnqueueCopyBuffer (device memory)";
    }
#endif
    if (o->n_batch) { /* bench --batch: aggregate decode per batch size, nothing else */
        bench_bw_free(&R->bw);
        r1_pool_free(pool);
        pool = NULL;
        if (o->json) fprintf(stderr, "r1infer bench: --json is not written with --batch (see --csv)\n");
        rc = bench_batch_run(o, R, m, threads, kvt);
        goto out;
    }

    /* ---- kernel suite ---- */
    int ctx = R->cfg->max_pos < 512 ? R->cfg->max_pos : 512;
    if (bench_suite_run(&R->suite, m, be, fn, kvt, pool, &R->bw, o->runs, ctx, &o->sp)) goto fail;
    bench_bw_free(&R->bw); /* keep the figures, drop the 1 GiB */
    r1_pool_free(pool);
    pool = NULL;

    /* ---- end to end + in situ ---- */
    struct bench_plan plan = {
        .decode_tokens = o->quick ? 3 : 4, .warmup = 1, .full_fill = o->full_fill, .insitu_ctx = ctx};
    plan_add(plan.prefill, &plan.n_prefill, 64);
    plan_add(plan.prefill, &plan.n_prefill, 512);
    plan_add(plan.decode_ctx, &plan.n_decode, 0);
    plan_add(plan.decode_ctx, &plan.n_decode, ctx);
    plan_add(plan.decode_ctx, &plan.n_decode, 4096);
    for (int i = 0; i < o->n_depth; i++) /* long reasoning: the KV cache read as much as the weights */
        if (o->depth[i] != 4096 && o->depth[i] != ctx) plan_add(plan.decode_ctx, &plan.n_decode, o->depth[i]);
    if (bench_e2e_run(&R->e2e, &R->insitu, m, be->name, o->n_threads, kvt, &plan, &o->sp, R->bw.best_gbps)) goto fail;
    for (int i = 0; i < R->insitu.n; i++) {
        struct bench_insitu_row *row = &R->insitu.r[i];
        for (int k = 0; k < R->suite.n; k++)
            if (!strcmp(R->suite.k[k].insitu, row->name))
                row->isolated_us_step += R->suite.k[k].us_median * R->suite.k[k].per_step;
    }

    if (o->compare) {
        struct bench_plan cp = plan;
        if (!strcmp(o->compare, "ref")) {
            /* the oracle runs single-threaded scalar code: seconds per token at 1.5B */
            int small = R->decode_bytes < 512.0 * MiB;
            cp = (struct bench_plan){.decode_tokens = small ? 3 : 2, .warmup = 0, .full_fill = 0, .insitu_ctx = -1};
            plan_add(cp.prefill, &cp.n_prefill, small ? 64 : 4);
            plan_add(cp.decode_ctx, &cp.n_decode, 0);
            if (small) plan_add(cp.decode_ctx, &cp.n_decode, ctx);
        }
        if (bench_e2e_run(&R->cmp, NULL, m, o->compare, o->n_threads, o->kv_dtype, &cp, &o->sp, R->bw.best_gbps))
            goto fail;
        if (!strcmp(o->compare, "ref")) {
            size_t len = strlen(R->cmp.note);
            snprintf(R->cmp.note + len, sizeof R->cmp.note - len,
                     "%sreduced plan for the single-threaded scalar oracle: prefill %d, decode %d tokens, "
                     "%s skipped",
                     len ? "; " : "", cp.prefill[0], cp.decode_tokens,
                     cp.n_decode > 1 ? "ctx 4096" : "ctx 512 and 4096");
        }
        R->have_cmp = 1;
    }
    bench_progress_done();
    R->total_s = r1_now() - t_start;

    bench_report_text(stdout, R);
    fflush(stdout);
    rc = 0;
    if (o->csv && bench_write_csv(o->csv, R)) rc = 1;
    if (o->json && bench_write_json(o->json, R)) rc = 1;
    if (o->svg && bench_write_svg(o->svg, R)) rc = 1;
    if (rc) fprintf(stderr, "r1infer bench: %s\n", r1_last_error());
    goto out;
fail:
    bench_progress_done();
    fprintf(stderr, "r1infer bench: %s\n", r1_last_error());
out:
    if (pool) r1_pool_free(pool);
    bench_bw_free(&R->bw);
    r1_model_free(m);
    free(R);
    return rc;
}
