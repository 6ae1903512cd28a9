/*
 * model.h - the resident model: config + weights in the layout the kernels
 * read. Loaders (hf.c for safetensors directories, gguf_load.c for GGUF)
 * fill it; the runtime only reads it. Nothing here runs a kernel.
 */
#ifndef R1_MODEL_H
#define R1_MODEL_H

#include <stddef.h>

#include "kernels/dtype.h"
#include "kernels/kernels.h"
#include "r1infer.h"
#include "util/util.h"

struct r1_layer {
    float *attn_norm;    /* (dim) */
    struct r1_mat wqkv;  /* (q_dim + 2*kv_dim, dim): rows Q | K | V */
    float *bqkv;         /* (q_dim + 2*kv_dim) */
    struct r1_mat wo;    /* (dim, q_dim) */
    float *ffn_norm;     /* (dim) */
    struct r1_mat wgu;   /* (2*ffn, dim): rows gate | up */
    struct r1_mat wdown; /* (dim, ffn) */
};

struct r1_model {
    struct r1_config cfg;
    enum r1_dtype dtype; /* dtype of the big matrices */
    struct r1_mat emb;   /* (vocab, dim) */
    struct r1_layer *layers;
    float *out_norm;       /* (dim) */
    struct r1_mat lm_head; /* (vocab, dim); shares emb's data when tied */
    float *rope_inv_freq;  /* (head_dim/2): rotation speed of each pair (i, i + head_dim/2) */
    void *arena;           /* pages (r1_pages_alloc) holding every converted weight */
    size_t arena_size;
    struct r1_file *maps; /* the files (mapped, or read with --no-mmap) that the
                             matrices used in place point into */
    int n_maps;
    size_t in_place_bytes; /* bytes of the matrices that point into maps */
    char *path;            /* what it was loaded from */
    struct r1_tp *tp;      /* this rank's share when tensor parallel (model/tp.h); NULL alone */
    int layout_cache;      /* enum r1_layout_cache_state: where the arena came from */
    /* the backend the layouts were chosen for (r1_load_opts.backend); NULL:
     * the cpu's (models built in memory) */
    const struct r1_backend *layout_for;
    /* build keeps the file's layout whatever the backend: a tensor-parallel
     * rank, whose cut (tp.c) regroups only its own share */
    int file_layout;
};

/* Fill cfg from a parsed config.json; checks every size. -1 with an error. */
struct json_t;
int r1_config_from_json(struct r1_config *cfg, const char *path);
/* Check a config's sizes (also for GGUF); names `src` in errors. */
int r1_config_check(const struct r1_config *cfg, const char *src);
/* RoPE inverse frequencies (head_dim/2 floats into out) from theta and the
 * llama3 scaling of cfg, or divided by `factors` (GGUF rope_freqs) if given. */
void r1_rope_inv_freq(const struct r1_config *cfg, const float *factors, float *out);

/* A source tensor, wherever it came from (safetensors or GGUF). */
struct r1_src_tensor {
    const char *name;
    enum r1_dtype dtype;
    int ndim;
    int64_t shape[4]; /* outermost first (rows, cols) as in safetensors */
    const uint8_t *data;
    size_t size;
    /* > 0: the rows are in llama.cpp's order for its interleaved rope, head
     * by head over this many heads (GGUF llama Q and K); the loader undoes it */
    int interleaved_heads;
};

/* Optional source tensor (not a Hugging Face name): GGUF's rope_freqs.weight,
 * the llama3 divisors of the rope frequencies, (head_dim/2) f32. */
#define R1_ROPE_FREQS_NAME "rope_freqs.weight"

/* Source of tensors by name: a loader implements lookup. */
struct r1_tensor_source {
    void *ctx;
    const char *path; /* for messages */
    /* returns NULL (no error set) if absent */
    const struct r1_src_tensor *(*find)(void *ctx, const char *name);
    /* optional: the file's own name of a tensor (GGUF "blk.0.attn_q.weight"),
     * for messages; 0 on success */
    int (*file_name)(const char *name, char *out, size_t cap);
    /* nonzero: tensor data lives in memory the model will own (the loader
     * moves its files into m->maps): a matrix stored in the kernels' layout
     * is used where it lies, and the pages of a tensor that is converted are
     * given back once it is (r1_mem_release) */
    int in_place;
    /* nonzero: that memory is private (read with --no-mmap), so the pages
     * given back after a conversion are memory freed for the next */
    int private_pages;
    /* the directory of the layout cache (layout_cache.c), NULL: none; and
     * the identity of the files the tensors come from (r1_layout_file_key) */
    const char *layout_cache;
    uint64_t file_key;
};

/* Build the kernel layout (fused QKV + bias, fused gate|up) from a source
 * whose tensors use Hugging Face names ("model.layers.0.self_attn.q_proj.weight").
 * Q/K/V biases are read when cfg.qkv_bias, else left zero (llama). The rope
 * frequencies come from cfg, or from R1_ROPE_FREQS_NAME when the source has it.
 * Converts to `dtype`; with R1_DTYPE_AUTO each matrix keeps its source type,
 * except fused matrices whose parts differ (quantized mixes become q8_0, float
 * mixes the widest float). m->dtype is then the gate|up matrix's type.
 * Progress on stderr if progress. Fills m->emb, layers, out_norm, lm_head, arena.
 * With src->in_place, a matrix made of one tensor already in the layout the
 * kernels read (its dtype kept, no regrouping, rows in order, 32-byte
 * aligned) points into the source instead of being copied (in_place_bytes);
 * the arena is sized for the rest, checked against the memory available,
 * and each converted tensor's source pages are given back after it. */
int r1_model_build(struct r1_model *m, const struct r1_tensor_source *src, enum r1_dtype dtype, int progress);
/* (mapped.c) Hand the files a build used in place to m (it unmaps them when freed);
 * files no matrix points into are closed now. Then --mlock (opts->mlock):
 * lock the arena and the matrices used in place. -1 with an error. */
int r1_model_keep_files(struct r1_model *m, struct r1_file *files, int n, const struct r1_load_opts *opts);
/* Map `path` (or read it into private pages when opts->no_mmap). */
int r1_model_open_file(struct r1_file *f, const char *path, const struct r1_load_opts *opts);

/* Loaders. */
int r1_model_load_hf(struct r1_model *m, const char *dir, const struct r1_load_opts *opts);
int r1_model_load_gguf(struct r1_model *m, const char *path, const struct r1_load_opts *opts);

/* ---- the layout cache (layout_cache.c): a model's arena in a file, mapped
 * read-only and shared by later loads instead of converting again ---- */
enum r1_layout_cache_state {
    R1_LC_OFF,     /* no cache: the arena is anonymous memory */
    R1_LC_HIT,     /* the arena is mapped from a cache file written before */
    R1_LC_WRITING, /* the arena is a new cache file's, being filled */
    R1_LC_WRITTEN, /* ...filled, and renamed into place */
};
struct r1_layout_cache {
    int state;
    int fd, lock_fd;  /* the cache file (or the one being written); the lock held */
    char *path, *tmp; /* its name; the temporary name while writing */
    char model[512];  /* the model's path */
    uint64_t file_key, plan_hash;
    size_t size; /* bytes of the arena */
};
/* FNV-1a over n bytes of p, continuing from h. */
uint64_t r1_hash64(uint64_t h, const void *p, size_t n);
/* key updated with the identity of the model file at path holding
 * [data, data + size): its size, inode, mtime and the bytes at its ends. */
uint64_t r1_layout_file_key(uint64_t key, const char *path, const uint8_t *data, size_t size);
/* The cache directory r1_load_opts.layout_cache names: itself, or for
 * "auto" $XDG_CACHE_HOME/r1infer/layouts, else $HOME/.cache/r1infer/layouts.
 * -1 for NULL, "" or "off", or "auto" with neither variable set. */
int r1_layout_cache_dir(char *out, size_t cap, const char *opt);
/* The arena (size bytes, 2 MiB-aligned) for the model at `model` whose
 * build plan hashes to plan_hash, from the cache under dir: mapped read-only
 * when a matching file is there (c->state R1_LC_HIT), else a new file's,
 * mapped writable (R1_LC_WRITING). A file that does not match is reported
 * in one line and rebuilt. NULL when no cache can be used (said why): the
 * caller allocates the arena itself. Close c after the build, whatever
 * happened. */
void *r1_layout_cache_open(struct r1_layout_cache *c, const char *dir, const char *model, uint64_t file_key,
                           uint64_t plan_hash, size_t size);
/* A mapped cache whose contents do not match the model (why): put a new
 * cache file's writable arena (or anonymous memory) over the same address
 * `at`, to be filled. NULL when nothing can be mapped there. */
void *r1_layout_cache_rebuild(struct r1_layout_cache *c, void *at, const char *why);
/* The arena of a cache being written is filled: make it read-only, write
 * the header and rename the file into place. A failure is said, not returned.
 * verbose: say that the file was written, or mapped. */
int r1_layout_cache_commit(struct r1_layout_cache *c, void *arena, int verbose);
/* Release the lock and the file; a file not committed is deleted. */
void r1_layout_cache_close(struct r1_layout_cache *c);

/* Synthetic models (synth.c). */
int r1_synth_config(const char *name, struct r1_config *c);
/* A random-weight model of config c in dtype; cut to rank `rank`'s share
 * when size > 1. r1_model_synthetic (runtime/job.h) passes this process's
 * place in its job. */
r1_model_t *r1_model_synthetic_ranks(const struct r1_config *c, enum r1_dtype dtype, uint64_t seed, int progress,
                                     int rank, int size);
/* r1_model_load (r1infer.h; runtime/job.c) for rank `rank` of `size`:
 * a rank of several keeps the file's layout and regroups only its share. */
r1_model_t *r1_model_load_ranks(const char *path, const struct r1_load_opts *opts, int rank, int size);
/* The same with the file's layout kept (struct r1_model.file_layout), as a
 * tensor-parallel rank loads; no cut is made. */
r1_model_t *r1_model_synthetic_file_layout(const struct r1_config *c, enum r1_dtype dtype, uint64_t seed);
int r1_synth_write(const char *dir, const struct r1_config *c, enum r1_dtype file_dtype, uint64_t seed,
                   const char *tokdir, int progress);

#endif
