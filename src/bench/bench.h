/*
 * bench.h - `r1infer bench`: machine probe, memory-bandwidth probe, the
 * decode-step kernel suite (each kernel alone, caches flushed), the in-situ
 * per-kernel profile of real decode steps, end-to-end prefill/decode, and
 * the reporters (terminal text, leaderboard CSV, JSON, SVG chart).
 *
 * Every figure is tied to an explicit model of the bytes a kernel moves, and
 * is reported against the measured bandwidth. Nothing here is used by the
 * inference path; bench only drives the public API, the backend table and
 * the thread pool the engine itself uses.
 */
#ifndef R1_BENCH_H
#define R1_BENCH_H

#include <stddef.h>
#include <stdio.h>

#include "kernels/kernels.h"
#include "model/model.h"
#include "r1infer.h"
#include "runtime/pool.h"

#define BENCH_MAX_KERNELS 16
#define BENCH_MAX_ROWS 8
#define BENCH_MAX_BATCH 64 /* --batch: the largest batch size */
#define MAX_SPEC_SETTINGS 16

struct bench_opts {
    const char *model;     /* -m PATH, or NULL with synthetic */
    const char *synthetic; /* "1.5b", "tiny", ... */
    const char *backend;   /* "cpu" (default) or "ref" */
    const char *compare;   /* NULL or "ref": end-to-end figures for it too */
    enum r1_dtype dtype, kv_dtype;
    int n_threads; /* 0 = the session default */
    int runs;      /* timed runs per kernel (median) */
    int quick;     /* small buffers, few tokens: for tests */
    int full_fill; /* compute every cache position before the long-context decode */
    const char *csv, *json, *svg;
    struct r1_sampler_params sp;
    int batch[BENCH_MAX_ROWS], n_batch;     /* --batch 1,2,4: aggregate decode per batch size */
    int profile;                            /* --batch with --profile: each kernel's ms per step */
    int depth[BENCH_MAX_ROWS - 3], n_depth; /* --depth 8192,16384: decode rows at those contexts too */
    int no_mmap, mlock;                     /* --no-mmap, --mlock (struct r1_load_opts) */
    const char *layout_cache;               /* --layout-cache (struct r1_load_opts) */
};

struct bench_machine {
    char cpu[256];      /* /proc/cpuinfo model name */
    char slug[128];     /* device_id: "intel-xeon-processor" */
    char isa[32];       /* the cpu backend's kernel set, "" if not exposed */
    char impl_lang[16]; /* CSV impl_lang: "c", or the device backend's ("opencl", "cuda") */
    char device[320];   /* the device backend's device, "" on host backends */
    char features[256]; /* what the CPU supports, for the record */
    char os[128];       /* uname -sr */
    char toolchain[64]; /* "gcc 12.2.0" */
    char git_sha[48];   /* git rev-parse --short HEAD, or "unknown" */
    char submitter[64]; /* $USER or "r1infer" */
    int n_cpus;         /* online CPUs */
    int threads;        /* threads the benchmark runs with */
    size_t l3_bytes;    /* 0 if unknown */
};

/* The probe buffer doubles as the cache-flush buffer. */
struct bench_bw {
    float *buf; /* 2 MiB aligned, inside map */
    void *map;
    size_t map_len;
    size_t bytes;       /* probe size */
    size_t flush_bytes; /* read between timed kernel runs */
    int runs;
    double best_gbps, median_gbps;       /* the better page size: the ceiling */
    double best_4k_gbps, best_huge_gbps; /* each page size's best */
    const char *reader;                  /* the reader that gave best_gbps (bandwidth.c) */
};

struct bench_kernel {
    char id[32];        /* "qkv_bias", "matvec_add.o_proj", "sample" */
    const char *insitu; /* name in the session profile ("matvec_add"), or "sample" */
    char shape[96];
    const char *dtype;
    int per_step; /* calls in one decode step */
    double us_median, us_min;
    double bytes;      /* traffic model of one call */
    double gbps, frac; /* bytes / median, and that over the best bandwidth */
};

struct bench_suite {
    int n, runs, ctx;
    struct bench_kernel k[BENCH_MAX_KERNELS];
};

struct bench_insitu_row {
    const char *name;
    double calls_step, us_step, share;
    double isolated_us_step; /* sum over the suite rows of this kernel: median x per_step */
};

struct bench_insitu {
    int n, steps, ctx;
    double step_us; /* mean measured decode step (forward + sample) */
    struct bench_insitu_row r[BENCH_MAX_KERNELS];
};

struct bench_row {
    int tokens;  /* prefill: batch size; decode: tokens timed */
    int ctx;     /* decode: cached positions before the first timed token */
    int skipped; /* not run (note says why) */
    double tok_s, ms_tok;
    double bytes_tok, ceiling_tok_s, frac; /* decode only */
    char note[128];
};

struct bench_e2e {
    const char *backend;
    int threads;
    int n_prefill, n_decode;
    struct bench_row prefill[BENCH_MAX_ROWS], decode[BENCH_MAX_ROWS];
    unsigned logits_hash; /* FNV-1a of the logits after the first prefill */
    char note[256];
};

struct bench_result {
    struct bench_machine mach;
    struct bench_bw bw;
    char model_name[128];
    const struct r1_config *cfg;
    enum r1_dtype dtype, kv_dtype;
    double decode_bytes; /* r1_model_decode_bytes */
    double gen_s;        /* model load / generation time */
    struct bench_suite suite;
    struct bench_insitu insitu;
    struct bench_e2e e2e, cmp;
    int have_cmp;
    double total_s;
};

/* bench.c: the whole run; prints the report on stdout. Returns the exit code. */
int bench_run(const struct bench_opts *o);

/* machine.c */
void bench_machine_probe(struct bench_machine *m, const char *backend, int threads);

/* progress.c: a \r-updated status line on stderr, only on a terminal. */
void bench_progress(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
void bench_progress_done(void);

/* bandwidth.c: allocate bytes (touched), measure read bandwidth with the
 * pool, `runs` times. -1 with an error if the buffer cannot be had. */
int bench_bw_measure(struct bench_bw *bw, struct r1_pool *pool, size_t bytes, size_t flush_bytes, int runs);
/* Read bw->flush_bytes of the buffer through the pool (evicts the caches). */
void bench_flush(const struct bench_bw *bw, struct r1_pool *pool);
void bench_bw_free(struct bench_bw *bw);
/* For tests: every reader the probe runs on this CPU, each summing p[0..n)
 * (n % 256 == 0, p 64-byte aligned): names[i] and sums[i] for i below the
 * count returned (at most 3). */
int bench_bw_reader_sums(const float *p, size_t n, const char **names, float *sums);

/* suite.c: time every kernel of a decode step alone. */
/* On a device backend (be->dev) the buffers and weights are the device's
 * (runtime/device.c) and each timed run waits for the device. */
int bench_suite_run(struct bench_suite *s, const struct r1_model *m, const struct r1_backend *be,
                    const r1_kernel_fn fn[R1_K_COUNT], enum r1_dtype kv_dtype, struct r1_pool *pool,
                    const struct bench_bw *bw, int runs, int ctx, const struct r1_sampler_params *sp);

/* e2e.c: prefill / decode through r1_session_*; fills the in-situ profile
 * (from the decode at ctx insitu_ctx) when insitu is non-NULL. */
struct bench_plan {
    int prefill[BENCH_MAX_ROWS], n_prefill;
    int decode_ctx[BENCH_MAX_ROWS], n_decode;
    int decode_tokens; /* timed per context */
    int warmup;        /* one untimed step first */
    int full_fill;
    int insitu_ctx; /* -1: none */
};
int bench_e2e_run(struct bench_e2e *e, struct bench_insitu *insitu, r1_model_t *m, const char *backend, int n_threads,
                  enum r1_dtype kv_dtype, const struct bench_plan *plan, const struct r1_sampler_params *sp,
                  double bandwidth_gbps);
/* Bytes one decode step reads at context ctx (weights + KV read + KV written). */
double bench_decode_bytes(const struct r1_model *m, enum r1_dtype kv_dtype, int ctx);

/* batch.c: bench --batch (after the model and the bandwidth probe). Prints
 * the table, writes o->csv / o->svg; returns the exit code. */
int bench_batch_run(const struct bench_opts *o, struct bench_result *R, r1_model_t *m, int threads, enum r1_dtype kvt);

/* report.c / svg.c */
void bench_report_text(FILE *f, const struct bench_result *r);
int bench_write_csv(const char *path, const struct bench_result *r);
int bench_write_json(const char *path, const struct bench_result *r);
int bench_write_svg(const char *path, const struct bench_result *r);

/* `r1infer bench --spec` (spec_bench.c): plain against speculative decoding. */
struct spec_bench_opts {
    const char *model, *synthetic;       /* the target: a path, or a synthetic shape */
    const char *draft, *draft_synthetic; /* a draft model (path or shape), or NULL: lookup */
    const char *backend;
    enum r1_dtype dtype, kv_dtype;
    int n_threads, n, ignore_eos;
    int runs;                                    /* each timing the fastest of runs (default 1) */
    int lookup;                                  /* n-gram length (default 3) */
    int settings[MAX_SPEC_SETTINGS], n_settings; /* k > 0: fixed k; -k: adaptive up to k; 0: adaptive */
    int oracle, oracle_wrong;                    /* force the drafts right (or wrong) */
    int wrong[MAX_SPEC_SETTINGS];                /* this setting's drafts forced wrong */
    const char *prompt_files[16];
    int n_prompt_files;
    struct r1_sampler_params sp;
};
int bench_spec_run(const struct spec_bench_opts *o);

#endif
