/*
 * sched.h - slots and the scheduler of the HTTP server.
 *
 * A slot is one sequence of a shared r1_batch (its KV cache in the pool) with
 * a worker thread; one engine thread runs every slot's next rows in one
 * forward pass (continuous batching, chunked prefill within batch_tokens). Requests are turned
 * into jobs (tokenized on the caller's thread), run at once on a free slot
 * or wait in a bounded FIFO queue; beyond the bound they are refused (503).
 * A job goes to the free slot whose cached tokens share the longest prefix
 * with its prompt, and only the rest of the prompt is computed.
 *
 * A job is shared by the connection that submitted it and the scheduler
 * (reference counted). The connection reads the job's output (SSE bytes, or
 * the final JSON) and releases it; releasing an unfinished job cancels it,
 * which frees its slot within one decode step.
 *
 * Nothing here knows HTTP: a connection is only a socket descriptor that
 * the waiting functions poll to notice a client that went away.
 */
#ifndef R1_SERVER_SCHED_H
#define R1_SERVER_SCHED_H

#include <sys/types.h>

#include "r1infer.h"
#include "server/request.h"

struct sched;
struct job;

struct sched_opts {
    int n_slots;         /* parallel conversations (>= 1) */
    int queue_cap;       /* jobs that may wait for a slot (>= 0) */
    int n_ctx;           /* per-slot context; 0 = the session default */
    long pool_pos;       /* positions of the KV pool all slots share (host backends); 0 = n_slots x n_ctx */
    int n_keep;          /* caches kept beyond the slots for their prefixes (a paged pool: they cost blocks only) */
    int n_threads;       /* of the engine, all slots together (>= 1) */
    int batch_tokens;    /* rows in one engine step (>= n_slots): decode rows + prompt chunks */
    const char *backend; /* NULL = best */
    int lead;            /* rank 0 of a tensor-parallel job: the batch leads the other ranks */
    enum r1_dtype kv_dtype;
    const char *model_name; /* the id reported in responses when the request names none */
    int seed_set;           /* the server was given --seed: requests without a seed use it */
    /* speculative decoding (r1_spec) of every request without logprobs:
     * n-gram lookup (spec_lookup > 0) or a draft model (draft, with a
     * session per slot of draft_threads threads); spec_k drafts at most per
     * step (0 = r1_spec's default), within --batch-tokens */
    int spec_lookup, spec_k, draft_threads;
    int spec_fixed_k; /* tests: always draft spec_k (r1_spec_opts.fixed_k), no adaptation */
    r1_model_t *draft;
    int reasoning_budget; /* thinking tokens of a request that names none (--reasoning-budget); -1 = no limit */
};

/* Create the slots (one session each) and start their workers. NULL on error
 * (r1_last_error says why). The model and tokenizer must outlive it. */
struct sched *sched_new(r1_model_t *m, const r1_tokenizer_t *tok, const struct sched_opts *o);
/* Refuse new jobs and cancel all: waiting readers return, workers stop at
 * their next step. Call before stopping the HTTP daemon. */
void sched_stop(struct sched *s);
/* Join the workers and free everything (after sched_stop and after every
 * job was released). */
void sched_free(struct sched *s);
int sched_n_ctx(const struct sched *s);
const r1_tokenizer_t *sched_tokenizer(const struct sched *s);

struct sched_stats {
    int slots, busy, queued, queue_cap;
    long served, cancelled, rejected;
};
void sched_stats(struct sched *s, struct sched_stats *st);
/* The counters in the Prometheus text format (GET /metrics): requests,
 * tokens in and out, queue length, slots busy, a histogram of step times.
 * malloc'ed; NULL when out of memory. */
char *sched_metrics_text(struct sched *s);

/* Tokenize req, check it against the context and queue it. Takes ownership
 * of *req (emptied). Returns the job (held by the caller until job_release)
 * or NULL with *err filled: 400 for a prompt that does not fit, 503 when the
 * queue is full, 500 on internal failure. */
struct job *sched_submit(struct sched *s, struct gen_request *req, struct api_error *err);

/* Streaming: copy up to max bytes of SSE output into buf, waiting for them.
 * Returns the byte count, 0 at the end of the stream, -1 if the client
 * closed fd (the job is cancelled) or the server is stopping. */
ssize_t job_read(struct job *j, char *buf, size_t max, int fd);
/* Non-streaming: wait for the result. Returns 0 with *body (malloc'ed JSON,
 * the caller frees) and *status set, or -1 if the client closed fd first or
 * the server is stopping. */
int job_wait(struct job *j, int fd, char **body, int *status);
/* The caller is done with the job; an unfinished job is cancelled (a
 * queued one leaves the queue at once). */
void job_release(struct job *j);

#endif
