/*
 * sched_impl.h - what sched.c (slots, queue, workers), gen.c (generation) and
 * engine.c (the engine thread: continuous batching) share: the job, slot and
 * scheduler structs. Private to src/server/; nothing else includes it.
 */
#ifndef R1_SERVER_SCHED_IMPL_H
#define R1_SERVER_SCHED_IMPL_H

#include <pthread.h>
#include <stdint.h>

#include "r1infer.h"
#include "server/request.h"
#include "server/response.h"
#include "server/sbuf.h"
#include "server/sched.h"

#define GATHER_US 2000  /* the engine waits this long for busy slots to send their next row */
#define ALL_ROWS_MAX 64 /* rows of a request that wants every row's logits, per step */
/* Prompt rows of a step that also carries answers' next tokens: a
 * 512-row chunk of a long prompt would hold them for seconds on a CPU */
#define PREFILL_BESIDE_DECODE 128
#define N_BUCKETS 9 /* step-time histogram buckets (engine.c STEP_BUCKETS) */
/* Verification rows (speculative decoding) of all slots together in one
 * step: R1_SPEC_MAX_K + 1, the batch the cpu kernels compute bit for bit
 * like single decode steps, so a slot's tokens do not depend on speculation */
#define SPEC_ROWS (R1_SPEC_MAX_K + 1)

enum job_state { JOB_QUEUED, JOB_RUNNING, JOB_DONE };

struct job {
    struct sched *sched;
    /* set by sched_submit, read-only afterwards */
    struct gen_request req;
    int32_t *ids; /* (n_ids) the prompt */
    int n_ids;
    int in_think; /* the prompt opened <think> (chat with the R1 template) */
    char id[48];
    char *model;
    long created;
    /* guarded by sched.mu */
    enum job_state state;
    int cancelled;
    int refs;
    struct job *next; /* queue link */
    struct sbuf out;  /* streaming: SSE bytes not yet read */
    char *result;     /* non-streaming: the final JSON */
    int status;
    /* n > 1: one slot per choice; choice 0's slot prefills the prompt once and
     * copies its KV cache and last logits to the others */
    int *slots;              /* (req.n) slot index of each choice */
    int running;             /* choices not finished */
    int prefill_state;       /* 0 waiting, 1 done, -1 failed */
    float *prompt_logits;    /* (vocab) the prompt's last logits, for choices > 0 */
    char **finals;           /* (req.n) non-streaming: each choice's result */
    struct resp_usage usage; /* all choices */
    int n_cancelled, n_failed;
};

/* A slot's forward request to the engine (guarded by sched.mu). */
struct fwd_req {
    const int32_t *ids; /* (n) tokens continuing the slot's sequence */
    int n, done;        /* rows computed so far */
    float *all;         /* NULL, or (n, vocab): every row's logits */
    float *last;        /* (vocab): the last row's logits */
    int verify;         /* speculative verification: taken in one step, n cut to the rows it got */
    int pending, failed;
    char err[256];
};

struct slot {
    struct sched *sched;
    int index;  /* also its sequence in sched.batch */
    int choice; /* of its job (n > 1) */
    struct fwd_req req;
    float *out;     /* (vocab) the last row's logits of the latest request */
    int32_t *cache; /* (n_ctx) ids in the KV cache, n_cache of them */
    int n_cache;
    float *logits;       /* (vocab) the sampler's working copy */
    r1_session_t *draft; /* --draft: this slot's session of the draft model, else NULL */
    int32_t *draft_ids;  /* (n_ctx) the ids in the draft's cache after the last job, n_draft_ids
                            of them: the next job's decoder keeps their common prefix */
    int n_draft_ids;
    pthread_t thread;
    pthread_cond_t cv;
    struct job *job; /* guarded by sched.mu */
    unsigned long last_used;
    /* Prefix sharing between slots (gen.c), guarded by sched.mu: the first
     * `stable` positions of this slot's cache stay as they are while
     * `pinned` copies read them (an idle slot: its whole cache; a running
     * one: its prompt as far as it is computed). Whoever writes this
     * slot's KV below `stable` first waits for pinned == 0 and lowers it. */
    int stable, pinned;
    /* The engine refused this slot's forward request for want of KV
     * blocks (guarded by sched.mu; gen.c reads it after a failed forward):
     * 2 preempted (its blocks go back; it computes its cache again once
     * another request ends), 1 cut (a prompt fails with 503, an answer
     * ends with "length"). */
    int pool_cut;
};

/* A conversation's cache kept beyond the slots (a retained prefix): when a
 * slot moves on to a prompt with another start, the blocks of what it held
 * stay in sequence seq of the batch for later requests (shared, not
 * copied). Guarded by sched.mu; n is 0 while it is empty or being written,
 * pinned counts the copies reading it. */
struct kept {
    int seq, n, cap, pinned;
    int32_t *ids; /* (cap) the cached ids, n of them */
    unsigned long last_used;
};

struct sched {
    r1_model_t *model;
    r1_batch_t *batch; /* the KV pool: slot i is sequence i */
    pthread_t engine;
    int engine_started;
    pthread_cond_t engine_cv; /* a request arrived, or a slot went idle */
    int n_pending;            /* slots with a request */
    int32_t *st_ids, *st_seq; /* (batch_tokens) a step's rows */
    uint8_t *st_want;
    struct slot **st_owner; /* (batch_tokens) whose row */
    int *st_take;           /* (n_slots) rows of each slot in the step */
    float *st_logits;       /* (n_slots + ALL_ROWS_MAX, vocab) */
    /* metrics */
    long tokens_in, tokens_out, steps, step_rows;
    long spec_drafted, spec_accepted, spec_steps; /* speculative decoding, all requests */
    long draft_prefilled, draft_reused;           /* prompt ids the draft models ran, and kept from their cache */
    double step_sum;
    long step_hist[N_BUCKETS + 1];
    const r1_tokenizer_t *tok;
    struct sched_opts o;
    int n_ctx, vocab;
    int32_t stop_ids[4];
    int n_stop_ids;
    struct slot *slots;
    int n_started;
    pthread_mutex_t mu;
    pthread_cond_t idle_cv;
    struct job *head, *tail;
    int n_queued, n_busy, stopping, engine_stop;
    unsigned long tick, counter;
    long served, cancelled, rejected;
    long prefix_copies, prefix_copied; /* prompts that took another slot's prefix; the tokens so taken */
    /* the paged KV pool (host backends): positions per block (0: none),
     * blocks in all; idle caches emptied to make room; requests ended
     * because no block could be had */
    int pool_page, pool_blocks;
    long pool_evictions, pool_cuts, pool_preempts;
    int n_parked;      /* busy slots preempted, waiting to compute their caches again (gen.c park) */
    long n_finished;   /* jobs' choices ended: a parked slot waits for this to move */
    struct kept *kept; /* (n_kept) retained prefixes: sequences n_slots.. of the batch */
    int n_kept;
    r1_gvocab_t *gvocab; /* the token bytes for grammars, built at the first request with one (under mu) */
};

/* prefix.c */
/* Before writing slot o's KV below its stable positions: wait until no
 * copy reads them, and offer only the first keep meanwhile. */
void slot_claim(struct sched *s, struct slot *o, int keep);
/* The first n positions of slot o's cache are computed: others may take them. */
void slot_stable(struct sched *s, struct slot *o, int n);
/* The start of job j's prompt for slot sl: keep positions of its own cache,
 * or a longer prefix another slot or a kept cache holds (shared); what the
 * slot held beyond keep is kept for later requests first. Returns the
 * positions the slot now holds (its cache truncated to them). */
int prefix_take(struct sched *s, struct slot *sl, const struct job *j, int keep);

/* engine.c */
/* Worker side: n tokens continuing the slot's sequence, computed by the
 * engine over one or more steps. Returns the last row's logits (sl->out,
 * valid until the next call; every row's into all when non-NULL), or NULL
 * with an error (the job was cancelled, the sequence is full, ...). */
const float *engine_forward(struct sched *s, struct slot *sl, const int32_t *ids, int n, float *all);
/* Speculative verification: like engine_forward, but the rows are computed in
 * one step, cut to that step's share of SPEC_ROWS and --batch-tokens: *done
 * (>= 1) rows were computed, their logits in all (when non-NULL), the last
 * one's returned. */
const float *engine_verify(struct sched *s, struct slot *sl, const int32_t *ids, int n, float *all, int *done);
/* The engine thread (pthread_create(&s->engine, NULL, engine_main, s)); it
 * returns once s->engine_stop is set, failing requests still waiting. */
void *engine_main(void *arg);

#define PREFILL_CHUNK 256 /* prompt tokens per forward request (the engine splits it further) */

/* The generation loop of one choice of a job on a slot (gen.c), run by the
 * slot's worker thread (sched.c) without the scheduler's mutex. */
void sched_run_job(struct sched *s, struct slot *sl, struct job *j);

static inline int is_stop_id(const struct sched *s, int32_t id) {
    for (int i = 0; i < s->n_stop_ids; i++)
        if (s->stop_ids[i] == id) return 1;
    return 0;
}

static inline int common_prefix(const int32_t *a, int na, const int32_t *b, int nb) {
    int n = na < nb ? na : nb, i = 0;
    while (i < n && a[i] == b[i]) i++;
    return i;
}

#endif
