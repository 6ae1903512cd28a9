/*
 * r1infer.h - the public API of r1infer, an inference engine for the
 * DeepSeek-R1 distills (Qwen2 and Llama architectures).
 *
 * Conventions:
 *  - Functions that can fail return NULL or a negative value and set a
 *    thread-local message readable with r1_last_error(). The message is a
 *    sentence for the user: it names the file, the field or the tensor.
 *  - Memory returned through an out-pointer (char **, int32_t **) is owned by
 *    the caller and released with free().
 *  - Objects (_t types) are opaque; each has a matching _free/_close.
 *  - Nothing here prints, except where a function says so (progress on load).
 */
#ifndef R1INFER_H
#define R1INFER_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* ---------------------------------------------------------------- errors */

/* The last error message set on this thread (never NULL; "" when none). */
const char *r1_last_error(void);

/* ----------------------------------------------------------------- dtypes */

/* Weight / cache element types. The block layouts of the quantized types are
 * GGUF's (ggml's), so files can be mapped as they are. */
enum r1_dtype {
    R1_DTYPE_F32 = 0,
    R1_DTYPE_F16,
    R1_DTYPE_BF16,
    R1_DTYPE_Q8_0, /* 32 weights: f16 scale + 32 x int8 */
    R1_DTYPE_Q4_0, /* 32 weights: f16 scale + 16 bytes of nibbles */
    R1_DTYPE_Q4_1,
    R1_DTYPE_Q5_0,
    R1_DTYPE_Q5_1,
    R1_DTYPE_Q4_K, /* 256-weight super-blocks */
    R1_DTYPE_Q5_K,
    R1_DTYPE_Q6_K,
    R1_DTYPE_COUNT,    /* the backends may keep private layouts past this value */
    R1_DTYPE_AUTO = -1 /* "the checkpoint's own dtype" */
};

/* Name such as "bf16" or "q8_0"; "?" for an invalid value. */
const char *r1_dtype_name(enum r1_dtype t);
/* Parse a name ("f32", "bf16", "q4_0", ...); returns -1 if unknown. */
int r1_dtype_parse(const char *name);

/* ------------------------------------------------------------------ model */

typedef struct r1_model r1_model_t;

/* The architectures r1infer runs. They share one forward pass; where they
 * differ is a field of struct r1_config (qkv_bias, rope scaling, head_dim). */
enum r1_arch {
    R1_ARCH_QWEN2 = 0, /* Qwen2ForCausalLM: R1-Distill-Qwen, Qwen2.5 */
    R1_ARCH_LLAMA,     /* LlamaForCausalLM: R1-Distill-Llama, SmolLM2 */
    R1_ARCH_COUNT
};
/* "qwen2" or "llama" ("?" for an invalid value). */
const char *r1_arch_name(enum r1_arch a);

/* Hyper-parameters, read from config.json or GGUF metadata. */
struct r1_config {
    enum r1_arch arch;
    int dim;          /* hidden_size */
    int n_layer;      /* num_hidden_layers */
    int n_head;       /* num_attention_heads */
    int n_kv_head;    /* num_key_value_heads */
    int head_dim;     /* head_dim when given, else dim / n_head */
    int ffn;          /* intermediate_size */
    int vocab;        /* vocab_size (rows of the embedding) */
    int max_pos;      /* max_position_embeddings */
    int tied;         /* tie_word_embeddings */
    float eps;        /* rms_norm_eps */
    float rope_theta; /* rope_theta */
    int qkv_bias;     /* q/k/v projections have a bias (qwen2; llama attention_bias) */
    /* llama3 rope scaling (rope_scaling.rope_type "llama3"); rope_factor 0 = none.
     * In GGUF the same frequencies come as the tensor rope_freqs.weight. */
    float rope_factor, rope_low_freq_factor, rope_high_freq_factor;
    int rope_orig_ctx;        /* original_max_position_embeddings */
    enum r1_dtype file_dtype; /* torch_dtype / dominant GGUF type */
    int bos_id, eos_id;       /* -1 when unknown */
};

struct r1_load_opts {
    enum r1_dtype dtype; /* weight dtype to convert to; R1_DTYPE_AUTO keeps the file's
                            (R1_DTYPE_F32 is 0: set AUTO explicitly) */
    int progress;        /* print a progress line on stderr while loading */
    /* The file is mapped and matrices already in the kernels' layout are used
     * where they lie (shared with other processes mapping it); the rest is
     * converted a tensor at a time, the file's pages given back after each. */
    int no_mmap; /* read the file into private memory instead of mapping it */
    int mlock;   /* lock the weights in memory (fails naming the limit) */
    /* The layout cache: the weights converted for the kernels (the cpu's
     * regrouped quantizations) kept in a file under this directory, written
     * on the first load and mapped read-only and shared by later ones, which
     * then convert nothing. "auto": $XDG_CACHE_HOME/r1infer/layouts (else
     * ~/.cache/r1infer/layouts); NULL or "off": none. Not with no_mmap. A
     * cache file that does not match the model is reported and rebuilt. */
    const char *layout_cache;
    /* The backend the weights are for ("cpu", "ref", "cuda", "opencl"; NULL:
     * "cpu"). It picks their layout: the cpu's regroupings of the quantized
     * types, where the others keep the file's and read it in place. A model
     * loaded for one backend runs on any other, at that backend's speed for
     * the layout it got. */
    const char *backend;
};

/* Load a model: a Hugging Face directory (config.json + *.safetensors) or a
 * .gguf file. Every tensor is looked up by name and checked against the
 * shape the config implies; weights are converted once into the layout the
 * kernels read (fused Q|K|V + bias, fused gate|up), or used in place in the
 * mapped file where they are stored in it. Peak memory is the model plus one
 * tensor; a model that cannot fit in the memory available is refused with an
 * error naming the size it needs. Returns NULL on error. */
r1_model_t *r1_model_load(const char *path, const struct r1_load_opts *opts);
void r1_model_free(r1_model_t *m);
const struct r1_config *r1_model_config(const r1_model_t *m);
/* Bytes of weights a decode step reads (all but the embedding table). */
size_t r1_model_decode_bytes(const r1_model_t *m);
/* The dtype the big matrices are held in. */
enum r1_dtype r1_model_dtype(const r1_model_t *m);

/* --------------------------------------------------------------- sessions */

typedef struct r1_session r1_session_t;

struct r1_session_opts {
    int n_ctx;              /* KV cache length; 0 = r1_ctx_default's */
    const char *backend;    /* "ref", "cpu", "cuda"; NULL = best available */
    int n_threads;          /* 0 = physical cores */
    enum r1_dtype kv_dtype; /* R1_DTYPE_F32, R1_DTYPE_F16 or R1_DTYPE_Q8_0 (host backends,
                               head_dim % 32 == 0); R1_DTYPE_AUTO = the backend's
                               default (f16 on cpu). Note R1_DTYPE_F32 is 0. */
    int profile;            /* time every kernel (see r1_session_profile) */
};

/* The context a session (n_seq 1) or a batch of n_seq sequences gets with
 * n_ctx 0, for KV caches of kv_dtype (R1_DTYPE_AUTO: the backend's) on the
 * named backend (NULL: cpu): on a host backend the model's
 * max_position_embeddings, or, where n_seq caches that long would not fit in
 * the free memory (MemAvailable less a headroom), the most that fit; on a
 * device backend min(4096, max_pos). If note is not NULL it receives (cap
 * bytes, NUL-terminated) one line saying what was chosen and why. Reads
 * /proc/meminfo each call: pass the result on as n_ctx to keep it. */
int r1_ctx_default(const r1_model_t *m, int n_seq, enum r1_dtype kv_dtype, const char *backend, char *note, size_t cap);

/* The positions of the KV pool n_seq sequences of up to n_ctx positions
 * share (r1_batch_opts.pool_pos) on a host backend: budget bytes' worth
 * when budget is not 0, else n_seq x n_ctx or, where that would not fit in
 * the free memory (as r1_ctx_default), the most that fit; a multiple of
 * 64 (the pool's block), at most n_seq x n_ctx (rounded up). 0 on a device backend
 * (no shared pool). note as in r1_ctx_default. */
long r1_kv_pool_default(const r1_model_t *m, int n_seq, int n_ctx, enum r1_dtype kv_dtype, const char *backend,
                        unsigned long long budget, char *note, size_t cap);

/* A session owns the KV cache and the scratch buffers of one conversation.
 * Everything the forward pass needs is allocated here, none per token. */
r1_session_t *r1_session_new(r1_model_t *m, const struct r1_session_opts *opts);
void r1_session_free(r1_session_t *s);
int r1_session_n_ctx(const r1_session_t *s);
/* Tokens currently in the KV cache. */
int r1_session_n_past(const r1_session_t *s);
/* Drop cached positions from n onwards (0 <= n <= n_past): prompt-cache reuse. */
int r1_session_truncate(r1_session_t *s, int n);
/* Name of the backend in use. */
const char *r1_session_backend(const r1_session_t *s);
/* Logits per row: the model's vocab_size. */
int r1_session_vocab(const r1_session_t *s);

/* Run n tokens at positions n_past..n_past+n-1 as one batch (prefill).
 * Returns the logits of the last token (vocab floats, owned by the session,
 * valid until the next call), or NULL on error (e.g. context full).
 * If all_logits is non-NULL it receives n*vocab floats (caller-provided). */
const float *r1_session_forward(r1_session_t *s, const int32_t *ids, int n, float *all_logits);

/* Per-kernel time of the profiled steps: fills up to cap entries of names
 * and microseconds, returns the number of kernels. */
int r1_session_profile(const r1_session_t *s, const char **names, double *us, long *calls, int cap);
void r1_session_profile_reset(r1_session_t *s);

/* ---------------------------------------------------------------- batches */

/* Continuous batching: one forward pass over rows of many sequences. A batch
 * owns a KV pool of n_seq caches of n_ctx positions each, allocated once
 * here (none per step), plus the scratch of a session. Each step is a list of
 * rows (token id, sequence); the rows of one sequence are contiguous and
 * continue it at its cached length, so a step can hold a prompt chunk of one
 * sequence and the next token of others. The matmuls run once over all rows;
 * rope, KV append and attention use each row's own sequence and position.
 * Greedy tokens of a sequence are those it gets alone in a session (the
 * oracle is the ref backend; tests/test_batch.c). Device backends (cuda) run
 * each sequence's rows as a forward of its own. */
typedef struct r1_batch r1_batch_t;

struct r1_batch_opts {
    int n_seq;   /* sequences (KV caches) in the pool, >= 1 (--parallel) */
    int n_ctx;   /* positions per sequence; 0 = r1_ctx_default's (--ctx) */
    int n_batch; /* most rows in one step; 0 = 512 (--batch-tokens) */
    /* Host backends (cpu, ref): the sequences share one KV pool of this
     * many positions, taken in blocks of 64 (R1_KV_PAGE) as they grow, up
     * to n_ctx each; memory is committed as blocks are first used.
     * 0 = n_seq x n_ctx. Device backends give each sequence n_ctx. */
    long pool_pos;
    const char *backend; /* as in r1_session_opts */
    int n_threads;
    enum r1_dtype kv_dtype;
    int profile;
    /* In a tensor-parallel job (mpirun), rank 0's batch leads: every call
     * that changes the pool goes to the other ranks first, which run
     * r1_batch_follow (a server: only rank 0 knows the requests). Without
     * it every rank makes the same calls itself (run, bench). */
    int lead;
};

/* Allocate the pool and scratch. NULL with an error (e.g. out of memory:
 * the message names the pool's size). */
r1_batch_t *r1_batch_new(r1_model_t *m, const struct r1_batch_opts *o);
/* A rank after 0 of a tensor-parallel job whose rank 0 leads a batch
 * (opts.lead): make the same pool (opts gives this rank's backend and
 * threads; the shape comes from rank 0) and run rank 0's commands until it
 * frees its batch. 0, or -1 with an error. */
int r1_batch_follow(r1_model_t *m, const struct r1_batch_opts *opts);
void r1_batch_free(r1_batch_t *b);
int r1_batch_n_seq(const r1_batch_t *b);
int r1_batch_n_ctx(const r1_batch_t *b);
int r1_batch_n_batch(const r1_batch_t *b);
const char *r1_batch_backend(const r1_batch_t *b);
/* The paged pool: its blocks in all and free; returns the positions per
 * block, or 0 when the batch has no paged pool (a device backend). */
int r1_batch_pool(r1_batch_t *b, int *total, int *free_blocks);
/* Blocks sequence seq would take from the pool to append n positions (0
 * without a paged pool), or -1 with an error. */
int r1_batch_seq_need(r1_batch_t *b, int seq, int n);
/* Blocks that emptying seq would give back (those no other sequence
 * shares), or -1 with an error. */
int r1_batch_seq_own(r1_batch_t *b, int seq);
/* Positions cached for sequence seq, or -1 with an error. */
int r1_batch_seq_n_past(const r1_batch_t *b, int seq);
/* Keep only the first n cached positions of seq (0 empties it). */
int r1_batch_seq_truncate(r1_batch_t *b, int seq, int n);
/* Advance seq by n positions without computing them (zero K and V written):
 * a decode step then reads what it would after an n-token prefill, for
 * measuring speed at depth (bench --batch --depth). */
int r1_batch_seq_skip(r1_batch_t *b, int seq, int n);
/* Make dst's cache the first n positions of src's (a shared prompt: several
 * choices prefilled once, or a prefix computed by another slot). With a
 * paged pool the blocks are shared, not copied: a shared block is copied
 * only when one of its holders writes into it. */
int r1_batch_seq_copy(r1_batch_t *b, int dst, int src, int n);
/* One forward pass over n rows (1..n_batch): row t is token ids[t] of
 * sequence seq[t]. Logits (vocab floats each, caller-provided) of the rows
 * with want[t] != 0 go to logits in row order; want NULL means the last row
 * of each sequence's run. Returns the number of logits rows written, or -1
 * with an error: a sequence that would pass n_ctx ("sequence 3 is full"), a
 * pool without the free blocks the rows need ("the KV pool is full"),
 * rows of one sequence that are not contiguous, a bad id. On error no
 * sequence advances. */
int r1_batch_step(r1_batch_t *b, int n, const int32_t *ids, const int32_t *seq, const uint8_t *want, float *logits);
/* With opts.profile: per-kernel time of the steps since the last reset, as
 * r1_session_profile. */
int r1_batch_profile(const r1_batch_t *b, const char **names, double *us, long *calls, int cap);
void r1_batch_profile_reset(r1_batch_t *b);

/* ---------------------------------------------------------------- sampler */

struct r1_sampler_params {
    float temperature;                         /* 0 = greedy */
    int top_k;                                 /* 0 = off */
    float top_p;                               /* 1 = off */
    float min_p;                               /* 0 = off */
    float repeat_penalty;                      /* 1 = off */
    int repeat_last_n;                         /* how many recent tokens the penalty sees */
    float presence_penalty, frequency_penalty; /* 0 = off */
    uint64_t seed;
};

/* R1 defaults: temperature 0.6, top-p 0.95, the rest off. */
struct r1_sampler_params r1_sampler_defaults(void);

typedef struct r1_sampler r1_sampler_t;
r1_sampler_t *r1_sampler_new(const struct r1_sampler_params *p, int vocab);
void r1_sampler_free(r1_sampler_t *s);
/* Choose the next id from logits (modified in place by penalties).
 * Remembers the id for the repetition penalty. */
int32_t r1_sampler_sample(r1_sampler_t *s, float *logits);
/* Tell the sampler about prompt tokens (for the repetition penalty). */
void r1_sampler_accept(r1_sampler_t *s, int32_t id);
/* The parameters the sampler was made with. */
struct r1_sampler_params r1_sampler_get_params(const r1_sampler_t *s);
/* 1 if the sampler picks the argmax (temperature 0 or top-k 1). */
int r1_sampler_greedy(const r1_sampler_t *s);
/* The distribution r1_sampler_sample would draw the next id from: the
 * penalties applied to logits (in place), then probs[i] for every id of the
 * vocabulary (caller-provided, vocab floats), summing to 1; one-hot at the
 * argmax when greedy. Draws nothing and remembers nothing. */
void r1_sampler_probs(r1_sampler_t *s, float *logits, float *probs);
/* A uniform number in [0, 1) from the sampler's seeded generator. */
double r1_sampler_uniform(r1_sampler_t *s);
/* An index i < n drawn with probability w[i] / sum(w) (w >= 0, not
 * necessarily normalized) from the sampler's generator; -1 if all are 0.
 * Remembers nothing (call r1_sampler_accept for the id kept). */
int32_t r1_sampler_draw(r1_sampler_t *s, const float *w, int n);

/* -------------------------------------------------------------- tokenizer */

typedef struct r1_tokenizer r1_tokenizer_t;

/* Load tokenizer.json (+ tokenizer_config.json when present) from a model
 * directory, or the tokenizer stored in a .gguf file. NULL on error. */
r1_tokenizer_t *r1_tokenizer_load(const char *path);
void r1_tokenizer_free(r1_tokenizer_t *t);

/* Encode UTF-8 (or arbitrary bytes) text. add_special adds what the
 * post-processor adds (BOS). Added tokens in the text are matched.
 * *ids is malloc'ed; returns the number of ids or -1. */
int r1_tokenizer_encode(const r1_tokenizer_t *t, const char *text, size_t len, int add_special, int32_t **ids);
/* Decode ids to bytes (NUL-terminated, *out malloc'ed); skip_special hides
 * special added tokens. Returns the byte length or -1 (unknown id). */
long r1_tokenizer_decode(const r1_tokenizer_t *t, const int32_t *ids, size_t n, int skip_special, char **out);
int r1_tokenizer_vocab_size(const r1_tokenizer_t *t);
int r1_tokenizer_bos(const r1_tokenizer_t *t); /* -1 if none */
int r1_tokenizer_eos(const r1_tokenizer_t *t); /* -1 if none */
/* Id of a token given its text (vocab or added token), or -1. */
int r1_tokenizer_token_id(const r1_tokenizer_t *t, const char *text);
/* Whether id is an added token marked special. */
int r1_tokenizer_is_special(const r1_tokenizer_t *t, int32_t id);

/* Streaming decoder: push ids one at a time, get back only complete UTF-8. */
typedef struct r1_detok r1_detok_t;
r1_detok_t *r1_detok_new(const r1_tokenizer_t *t, int skip_special);
void r1_detok_free(r1_detok_t *d);
/* Append the text of id; returns a NUL-terminated string of the complete
 * UTF-8 characters now available (owned by d, valid until the next call),
 * or NULL for an unknown id. */
const char *r1_detok_push(r1_detok_t *d, int32_t id);
/* Whatever bytes are still pending (an incomplete sequence), then reset. */
const char *r1_detok_flush(r1_detok_t *d);

/* Chat templates, picked from tokenizer_config.json's chat_template. */
struct r1_chat_msg {
    const char *role; /* "system", "user", "assistant" */
    const char *content;
};
/* Render messages; add_generation_prompt appends the assistant opener
 * ("<｜Assistant｜><think>\n" for R1). Returns a malloc'ed string or NULL. */
char *r1_chat_apply(const r1_tokenizer_t *t, const struct r1_chat_msg *msgs, size_t n, int add_generation_prompt);
/* "deepseek-r1" or "chatml". */
const char *r1_chat_template_name(const r1_tokenizer_t *t);

/* ---------------------------------------------------- speculative decoding */

/* Decoding that verifies several tokens per target step. A draft source
 * proposes up to k tokens: n-gram lookup over the prompt and the text so far
 * (no second model), or a draft model with the target's vocabulary. The
 * target runs the last token and the drafts as one batch (its prefill path;
 * up to 16 rows, which the cpu kernels compute bit for bit like single
 * steps), keeps the longest prefix it agrees with plus a token of its own,
 * and both KV caches are truncated to what was kept. Greedy sampling gives
 * exactly the tokens plain greedy decoding gives; with temperature > 0 a
 * draft token x is kept with probability min(1, p(x) / q(x)) and otherwise
 * replaced by a draw from max(0, p - q) normalized (for lookup q is 1 at x),
 * so the output follows the target's sampling distribution. */
typedef struct r1_spec r1_spec_t;

#define R1_SPEC_MAX_K 15 /* drafts per step: the batch of k + 1 rows stays <= 16 */

struct r1_spec_opts {
    int lookup;  /* n-gram lookup (> 0): what followed the earlier place matching the longest
                    end of the text, 1 to max(lookup, 32) tokens (the most recent of equals);
                    0 = off */
    int k;       /* most tokens drafted per step, 1..R1_SPEC_MAX_K; 0 = default
                    (15 for lookup, 5 for a draft model) */
    int fixed_k; /* 1: always draft k (no adaptation), for tests and benches */
    /* Tests and benches only: when oracle is set, each drafted token is
     * replaced by oracle[i] (oracle_wrong = 0: the token the target will
     * choose at that position i of the generated text, so every draft is
     * kept) or by a token different from it (oracle_wrong = 1: every draft
     * is rejected); the draft model still runs, so its cost is measured. */
    const int32_t *oracle;
    int n_oracle, oracle_wrong;
    /* The ids the draft session already holds at its first positions (an
     * earlier decoder's text on the same session, r1_spec_draft_held), or
     * NULL: r1_spec_begin keeps their longest common prefix with the prompt. */
    const int32_t *draft_held;
    int n_draft_held;
};

struct r1_spec_stats {
    long steps;                         /* target forwards while generating (verifications + plain steps) */
    long drafted;                       /* draft tokens sent to the target */
    long accepted;                      /* of those, kept */
    long generated;                     /* tokens produced */
    long draft_prefilled, draft_reused; /* prompt ids the draft model ran at r1_spec_begin, and
                                           those it kept from its cache instead */
    double draft_s, target_s;           /* wall time in the draft source and the target */
};

/* Checks that draft can draft for target: the same vocabulary (both
 * tokenizers, when given, hold the same token at every id; else the same
 * number of ids). Returns 0; or -1 with an error naming the first id that
 * differs. If the draft has more weight bytes per token than the target,
 * sets *warn (if non-NULL) to 1: it still works, but cannot be faster. */
int r1_spec_check_draft(const r1_model_t *target, const r1_tokenizer_t *target_tok, const r1_model_t *draft,
                        const r1_tokenizer_t *draft_tok, int *warn);

/* A speculative decoder over target (whose cache holds the prompt) and an
 * optional draft session (NULL for lookup; its cache is reset by
 * r1_spec_begin). smp is the sampler plain decoding would use (it receives
 * every kept token through r1_sampler_accept). The sessions and the sampler
 * stay the caller's and must outlive the decoder. NULL with an error on bad
 * options (no draft source, k out of range). */
r1_spec_t *r1_spec_new(r1_session_t *target, r1_session_t *draft, r1_sampler_t *smp, const struct r1_spec_opts *opts);
void r1_spec_free(r1_spec_t *sp);

/* A target that is not a session (the server's: one sequence of its KV pool,
 * whose forward passes its engine thread batches with other sequences'):
 * the calls r1_spec makes on it, each given ctx. forward runs ids[0..n)
 * continuing the cache and may compute only the first *done of them
 * (1 <= *done <= n, e.g. a step's row budget; set *done = n otherwise); it
 * returns the last computed row's logits (vocab floats, valid until the next
 * call) and, when all is non-NULL, every computed row's into all; NULL with
 * an error. Fewer rows than asked verify fewer drafts, nothing else. */
struct r1_spec_target {
    void *ctx;
    int vocab;
    int (*n_past)(void *ctx);
    int (*n_ctx)(void *ctx);
    const float *(*forward)(void *ctx, const int32_t *ids, int n, float *all, int *done);
    int (*truncate)(void *ctx, int n); /* keep the first n cached positions */
};
/* r1_spec_new over such a target (copied; ctx must outlive the decoder).
 * r1_spec_new(s, ...) is this with a target that calls r1_session_*(s). */
r1_spec_t *r1_spec_new_target(const struct r1_spec_target *target, r1_session_t *draft, r1_sampler_t *smp,
                              const struct r1_spec_opts *opts);

/* Start after a prefill: ids (n of them) are the tokens in the target's
 * cache, logits the target's last logits (vocab floats, copied). The draft
 * session, if any, keeps the longest prefix of ids it already holds from
 * this decoder's earlier text (a chat's next turn) and runs the rest. 0 or -1. */
int r1_spec_begin(r1_spec_t *sp, const int32_t *ids, int n, const float *logits);

/* Produce the next tokens: 1 or more ids in *out (owned by sp, valid until
 * the next call), the first one exactly what plain decoding would produce
 * next. Returns the count, or -1 with an error (context full: fewer than
 * 2 free positions; the caller stops there). The last id returned is not
 * yet in the target's cache, as after plain sampling. */
int r1_spec_step(r1_spec_t *sp, const int32_t **out);

/* The ids the draft session holds at its first positions (count returned,
 * *ids valid until the next call on sp): what a later decoder on the same
 * draft session takes as r1_spec_opts.draft_held. 0 without a draft model. */
int r1_spec_draft_held(const r1_spec_t *sp, const int32_t **ids);

/* Counters since r1_spec_new. */
void r1_spec_get_stats(const r1_spec_t *sp, struct r1_spec_stats *st);

/* ---------------------------------------------------------------- grammar */
/* Grammar-constrained sampling: a grammar (GBNF, or made from a JSON
 * schema) decides which tokens may come next; the sampler draws only among
 * them. r1_grammar_t is immutable once built (share it between matchers);
 * r1_gvocab_t is the tokenizer's token bytes in a trie, built once per
 * model; r1_gmatch_t is one generation's position in the grammar. */
typedef struct r1_grammar r1_grammar_t;
typedef struct r1_gvocab r1_gvocab_t;
typedef struct r1_gmatch r1_gmatch_t;

/* Compile GBNF text (len bytes; the start rule is "root"). NULL on error
 * with a sentence in err (errlen bytes, may be 0). Free with r1_grammar_free. */
r1_grammar_t *r1_grammar_parse(const char *text, size_t len, char *err, size_t errlen);
void r1_grammar_free(r1_grammar_t *g);
/* The GBNF text (malloc'ed, the caller frees) of a JSON schema (len bytes
 * of JSON); schema NULL gives any JSON object (JSON mode). NULL on error or
 * on an unsupported keyword, with a sentence in err. flags: 0 or
 * R1_SCHEMA_LENIENT. */
#define R1_SCHEMA_LENIENT                                                                                              \
    1 /* a pattern the grammar cannot express (lookarounds, backreferences, \b)                                        \
       * leaves its string unconstrained instead of an error */
char *r1_grammar_json_schema(const char *schema, size_t len, int flags, char *err, size_t errlen);
/* The GBNF text (malloc'ed) of 1 to max_calls function calls, each in the
 * form <tool_call>{"name": NAME, "arguments": ARGS}</tool_call> (white
 * space allowed between the parts), NAME one of names[0..n) and ARGS valid
 * against that function's parameters schema (schemas[i], NUL-terminated
 * JSON; NULL = any object). NULL on error with a sentence in err. */
char *r1_grammar_tool_call(const char *const *names, const char *const *schemas, int n, int max_calls, char *err,
                           size_t errlen);

/* The bytes of every token id < vocab of t, for masking. Special tokens
 * are never allowed; the end_ids (n_end of them, at most 8: EOS and the
 * like) are allowed exactly where the grammar may end. NULL on error. The
 * tokenizer is read only here. */
r1_gvocab_t *r1_gvocab_new(const r1_tokenizer_t *t, int vocab, const int32_t *end_ids, int n_end);
void r1_gvocab_free(r1_gvocab_t *v);

/* A matcher at the start of g (g and v must outlive it). NULL on error
 * (a left-recursive grammar, out of memory). */
r1_gmatch_t *r1_gmatch_new(const r1_grammar_t *g, const r1_gvocab_t *v);
void r1_gmatch_free(r1_gmatch_t *m);
/* 1 if token id may come next, else 0. Changes nothing. */
int r1_gmatch_allows(r1_gmatch_t *m, int32_t id);
/* Take token id (an end id ends the match). 0, or -1 (the grammar does not
 * allow it; the state is unchanged). */
int r1_gmatch_accept(r1_gmatch_t *m, int32_t id);
/* Take raw bytes (text forced into the output). 0 or -1 as above. */
int r1_gmatch_accept_bytes(r1_gmatch_t *m, const char *s, size_t n);
/* 1 if the text so far is a complete sentence of the grammar. */
int r1_gmatch_done(const r1_gmatch_t *m);
/* 1 if nothing but an end id can follow (or an end id was taken). */
int r1_gmatch_finished(const r1_gmatch_t *m);
/* The tokens allowed next as a bitmap ((vocab + 63) / 64 words, bit id),
 * owned by m and valid until its next call; cached per grammar state. NULL
 * when out of memory. */
const uint64_t *r1_gmatch_mask(r1_gmatch_t *m);
/* Mask cache hits and misses since r1_gmatch_new. */
void r1_gmatch_stats(const r1_gmatch_t *m, long *hits, long *misses);

/* r1_sampler_sample constrained by m: the draw is made among the tokens m
 * allows (the sampler's cut first; when the cut keeps none of them, over
 * the allowed tokens alone). Does not advance m (call r1_gmatch_accept).
 * Returns the id, or -1 when the grammar allows no token at all. */
int32_t r1_sampler_sample_grammar(r1_sampler_t *s, float *logits, r1_gmatch_t *m);
/* ------------------------------------------------------ reasoning budget */

/* A budget of thinking tokens for an R1 model's <think>...</think> block
 * (--reasoning-budget N). The caller reports the text of every token it
 * samples; once the open block has held N tokens, the block is closed: the
 * caller emits the returned ids ("\n</think>\n\n" in the model's
 * tokenizer) as the next tokens instead of sampling (running them through
 * the model like sampled ones, without reporting them), and the answer
 * follows. Budget 0 turns thinking off: the block the prompt opened is closed
 * before the first token, and one the model opens is closed at once. */
typedef struct r1_think r1_think_t;

/* in_think: the prompt ends inside an open <think> (the R1 template's
 * generation prompt). NULL with an error for budget < 0 or no tokenizer. */
r1_think_t *r1_think_new(const r1_tokenizer_t *tok, int budget, int in_think);
void r1_think_free(r1_think_t *t);
/* Before the first token: the number of ids to emit first (0 or the close
 * sequence), *ids owned by t. */
int r1_think_start(r1_think_t *t, const int32_t **ids);
/* After a sampled token whose text is `text` (NULL or "" while a character
 * is incomplete): the number of ids to emit next (0, or the close sequence
 * in *ids, owned by t, valid until t is freed); -1 with an error when out of
 * memory. */
int r1_think_push(r1_think_t *t, const char *text, const int32_t **ids);
/* Tokens generated inside the open (or the last) block; whether one is open. */
int r1_think_used(const r1_think_t *t);
int r1_think_open(const r1_think_t *t);

#ifdef __cplusplus
}
#endif
#endif
