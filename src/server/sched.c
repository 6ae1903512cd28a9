/*
 * sched.c - slots, queue, workers and the generation loop; see sched.h. The
 * engine thread that runs the forward passes is engine.c.
 *
 * Continuous batching: every slot is one sequence of a shared r1_batch (one
 * KV pool). A slot's worker runs the generation loop of its job, but its
 * forward passes are requests to the engine thread, which builds each step
 * from every waiting slot: one row per decoding slot first, then prompt
 * chunks within --batch-tokens (chunked prefill: a long prompt takes several
 * steps and never stalls the others). A request of a cancelled job is
 * dropped at the next step, so a client that hangs up frees its rows at
 * once.
 *
 * One mutex (sched.mu) guards the queue, the slot assignments, the engine
 * requests and every job's shared fields; nobody holds it during a forward
 * pass. Must not block on a client: output is buffered in the job and the
 * connection thread drains it.
 */
#include "server/sched.h"

#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>

#include "server/logprobs.h"
#include "server/reasoning.h"
#include "server/response.h"
#include "server/sbuf.h"
#include "server/stop.h"
#include "server/sched_impl.h"
#include "util/util.h"
#define PREFILL_CHUNK 256 /* prompt tokens per forward request (the engine splits it further) */
#define POLL_MS 100       /* how often a waiting connection checks its client */

static uint64_t mix64(uint64_t z) {
    z += 0x9e3779b97f4a7c15ull;
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

static uint64_t clock_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static void add_stop_id(struct sched *s, int id) {
    if (id < 0 || s->n_stop_ids >= 4) return;
    for (int i = 0; i < s->n_stop_ids; i++)
        if (s->stop_ids[i] == id) return;
    s->stop_ids[s->n_stop_ids++] = id;
}

static int is_stop_id(const struct sched *s, int32_t id) {
    for (int i = 0; i < s->n_stop_ids; i++)
        if (s->stop_ids[i] == id) return 1;
    return 0;
}

/* ------------------------------------------------------------ job refs */

static void job_unref_locked(struct job *j) {
    if (--j->refs > 0) return;
    for (int k = 0; j->finals && k < j->req.n; k++) free(j->finals[k]);
    free(j->finals);
    free(j->slots);
    free(j->prompt_logits);
    req_free(&j->req);
    free(j->ids);
    free(j->model);
    sbuf_free(&j->out);
    free(j->result);
    free(j);
}

static void queue_remove_locked(struct sched *s, struct job *j) {
    struct job **pp = &s->head, *prev = NULL;
    while (*pp && *pp != j) prev = *pp, pp = &(*pp)->next;
    if (!*pp) return;
    *pp = j->next;
    if (s->tail == j) s->tail = prev;
    j->next = NULL;
    s->n_queued--;
}

/* ------------------------------------------------------------ dispatch */

static int common_prefix(const int32_t *a, int na, const int32_t *b, int nb) {
    int n = na < nb ? na : nb, i = 0;
    while (i < n && a[i] == b[i]) i++;
    return i;
}

/* Give queued jobs (in order) to free slots: the slot with the longest
 * common prefix, then the least recently used. */
static void dispatch_locked(struct sched *s) {
    while (s->head && s->o.n_slots - s->n_busy >= s->head->req.n) {
        struct job *j = s->head;
        queue_remove_locked(s, j);
        j->state = JOB_RUNNING;
        j->running = j->req.n;
        j->refs += j->req.n - 1; /* the scheduler holds one per choice */
        for (int k = 0; k < j->req.n; k++) {
            struct slot *best = NULL;
            int best_lcp = -1;
            for (int i = 0; i < s->o.n_slots; i++) {
                struct slot *sl = &s->slots[i];
                if (sl->job) continue;
                int lcp = k == 0 ? common_prefix(sl->cache, sl->n_cache, j->ids, j->n_ids) : 0;
                if (lcp > best_lcp || (lcp == best_lcp && sl->last_used < best->last_used)) best = sl, best_lcp = lcp;
            }
            R1_ASSERT(best);
            best->job = j;
            best->choice = k;
            best->last_used = ++s->tick;
            j->slots[k] = best->index;
            s->n_busy++;
            pthread_cond_signal(&best->cv);
        }
    }
}

/* -------------------------------------------------------- generation */

struct gen_ctx {
    struct sched *s;
    struct slot *sl;
    struct job *j;
    struct resp_meta meta;
    struct stop_match stop;
    struct reasoning rs;
    struct sbuf piece, think, answer; /* scratch: released text, its two parts */
    struct sbuf all_think, all_answer; /* non-streaming: the whole result */
    struct sbuf ev;                   /* streaming: events to hand over */
    struct lp_list lp;                /* the request's logprobs (meta.lp points here when asked) */
    float *lp_raw;                    /* (vocab) the raw logits of the step, before sampling */
    float *lp_rows;                   /* (PREFILL_CHUNK, vocab) prompt logits, for echo + logprobs */
};

/* ---------------------------------------------------- logprobs hooks */

static void flush_events(struct gen_ctx *g);

/* Buffers for the logprobs the job asked for; 0, or -1 out of memory. */
static int lp_begin(struct gen_ctx *g) {
    const struct gen_request *r = &g->j->req;
    if (r->logprobs < 0) return 0;
    lp_init(&g->lp, g->s->tok, r->logprobs);
    g->meta.lp = &g->lp;
    g->lp_raw = malloc((size_t)g->s->vocab * sizeof(float));
    if (r->echo) g->lp_rows = malloc((size_t)PREFILL_CHUNK * g->s->vocab * sizeof(float));
    return g->lp_raw && (!r->echo || g->lp_rows) ? 0 : -1;
}

static void lp_end(struct gen_ctx *g) {
    lp_free(&g->lp);
    free(g->lp_raw);
    free(g->lp_rows);
}

/* Echo: the prompt's text goes out before the completion, with the
 * prompt's log-probabilities (gathered during the prefill) when asked. */
static void echo_prompt(struct gen_ctx *g) {
    const struct gen_request *r = &g->j->req;
    if (!r->echo) return;
    char *dec = NULL;
    const char *text = r->prompt;
    long len = text ? (long)strlen(text) : r1_tokenizer_decode(g->s->tok, g->j->ids, (size_t)g->j->n_ids, 0, &dec);
    if (!text) text = dec ? dec : "";
    if (len < 0) len = 0;
    if (r->stream) {
        resp_chunk(&g->ev, &g->meta, NULL, NULL, 0, text, (size_t)len, NULL);
        flush_events(g);
    } else {
        sbuf_add(&g->all_answer, text, (size_t)len);
    }
    free(dec);
}

/* Hand the buffered events to the connection. */
static void flush_events(struct gen_ctx *g) {
    if (!g->ev.len) return;
    struct sched *s = g->s;
    pthread_mutex_lock(&s->mu);
    sbuf_add(&g->j->out, g->ev.p, g->ev.len);
    pthread_cond_broadcast(&s->idle_cv);
    pthread_mutex_unlock(&s->mu);
    sbuf_clear(&g->ev);
}

/* Route released text through the reasoning split to the stream or the result. */
static void route(struct gen_ctx *g, int final) {
    sbuf_clear(&g->think);
    sbuf_clear(&g->answer);
    if (g->j->req.kind == REQ_CHAT) {
        if (g->piece.len) reasoning_feed(&g->rs, g->piece.p, g->piece.len, &g->think, &g->answer);
        if (final) reasoning_finish(&g->rs, &g->think, &g->answer);
    } else if (g->piece.len) {
        sbuf_add(&g->answer, g->piece.p, g->piece.len);
    }
    sbuf_clear(&g->piece);
    if (g->j->req.stream) {
        if (g->think.len) resp_chunk(&g->ev, &g->meta, NULL, g->think.p, g->think.len, NULL, 0, NULL);
        if (g->answer.len) resp_chunk(&g->ev, &g->meta, NULL, NULL, 0, g->answer.p, g->answer.len, NULL);
        flush_events(g);
    } else {
        if (g->think.len) sbuf_add(&g->all_think, g->think.p, g->think.len);
        if (g->answer.len) sbuf_add(&g->all_answer, g->answer.p, g->answer.len);
    }
}

static int is_cancelled(struct gen_ctx *g) {
    pthread_mutex_lock(&g->s->mu);
    int c = g->j->cancelled || g->s->stopping;
    pthread_mutex_unlock(&g->s->mu);
    return c;
}

/* n > 1, choice 0: the prompt is in this slot's cache; copy it (KV and the
 * last logits) to the other choices' slots and let them start. */
static int share_prompt(struct gen_ctx *g) {
    struct sched *s = g->s;
    struct job *j = g->j;
    for (int k = 1; k < j->req.n; k++) {
        struct slot *o = &s->slots[j->slots[k]];
        if (r1_batch_seq_copy(s->batch, o->index, g->sl->index, j->n_ids)) return -1;
        memcpy(o->cache, j->ids, (size_t)j->n_ids * sizeof(int32_t));
        o->n_cache = j->n_ids;
    }
    pthread_mutex_lock(&s->mu);
    memcpy(j->prompt_logits, g->sl->logits, (size_t)s->vocab * sizeof(float));
    j->prefill_state = 1;
    pthread_cond_broadcast(&s->idle_cv);
    pthread_mutex_unlock(&s->mu);
    return 0;
}

/* n > 1, choices > 0: wait for choice 0's prefill; 1 when shared, else 0. */
static int wait_prompt(struct gen_ctx *g) {
    struct sched *s = g->s;
    pthread_mutex_lock(&s->mu);
    while (!g->j->prefill_state && !g->j->cancelled && !s->stopping) pthread_cond_wait(&s->idle_cv, &s->mu);
    int st = g->j->prefill_state;
    pthread_mutex_unlock(&s->mu);
    return st == 1;
}

/* ------------------------------------------- speculative decoding */

/* The slot's sequence in the KV pool as the target of an r1_spec: its
 * forward passes are verifications the engine batches with the others'. */
static int tgt_n_past(void *c) {
    struct gen_ctx *g = c;
    return r1_batch_seq_n_past(g->s->batch, g->sl->index);
}
static int tgt_n_ctx(void *c) { return ((struct gen_ctx *)c)->s->n_ctx; }
static int tgt_truncate(void *c, int n) {
    struct gen_ctx *g = c;
    return r1_batch_seq_truncate(g->s->batch, g->sl->index, n);
}
static const float *tgt_forward(void *c, const int32_t *ids, int n, float *all, int *done) {
    struct gen_ctx *g = c;
    return engine_verify(g->s, g->sl, ids, n, all, done);
}

/* The speculative decoder of this job (after its prompt is cached and
 * sl->logits holds the prompt's last logits), or NULL when the server does
 * not speculate or the job asks for logprobs (they need every position's
 * raw logits); *err set when it cannot be made. */
static r1_spec_t *spec_open(struct gen_ctx *g, r1_sampler_t *smp, int *err) {
    struct sched *s = g->s;
    *err = 0;
    if ((!s->o.spec_lookup && !s->o.draft) || g->lp_raw) return NULL;
    int k = s->o.spec_k ? s->o.spec_k : s->o.draft ? 5 : R1_SPEC_MAX_K;
    if (k > s->o.batch_tokens - 1) k = s->o.batch_tokens - 1;
    if (k < 1) k = 1;
    struct r1_spec_target t = {.ctx = g, .vocab = s->vocab, .n_past = tgt_n_past, .n_ctx = tgt_n_ctx,
                               .forward = tgt_forward, .truncate = tgt_truncate};
    struct r1_spec_opts so = {.lookup = s->o.spec_lookup, .k = k, .fixed_k = s->o.spec_fixed_k};
    r1_spec_t *sp = r1_spec_new_target(&t, g->sl->draft, smp, &so);
    if (sp && r1_spec_begin(sp, g->j->ids, g->j->n_ids, g->sl->logits)) {
        r1_spec_free(sp);
        sp = NULL;
    }
    *err = !sp;
    return sp;
}

/* Run one job on a slot. Returns the finish reason ("stop", "length"),
 * NULL when cancelled, or "error" with *err filled. */
static const char *generate(struct gen_ctx *g, struct resp_usage *u, struct api_error *err) {
    struct sched *s = g->s;
    struct slot *sl = g->sl;
    struct job *j = g->j;
    if (sl->choice > 0) { /* the prompt comes from choice 0's slot */
        if (!wait_prompt(g)) {
            if (is_cancelled(g)) return NULL;
            api_error_set(err, 500, "server_error", NULL, NULL, "generation failed: the shared prompt failed");
            return "error";
        }
        u->prompt_tokens = u->cached_tokens = j->n_ids;
        memcpy(sl->logits, j->prompt_logits, (size_t)s->vocab * sizeof(float));
        goto sample;
    }
    /* prompt cache: keep the common prefix, compute the rest (at least one token) */
    int keep = common_prefix(sl->cache, sl->n_cache, j->ids, j->n_ids);
    if (keep > j->n_ids - 1) keep = j->n_ids - 1;
    if (g->lp_rows) keep = 0; /* echo with logprobs scores every prompt position */
    if (r1_batch_seq_truncate(s->batch, sl->index, keep)) keep = 0, r1_batch_seq_truncate(s->batch, sl->index, 0);
    sl->n_cache = keep;
    u->prompt_tokens = j->n_ids;
    u->cached_tokens = keep;
    const float *logits = NULL;
    for (int at = keep; at < j->n_ids; at += PREFILL_CHUNK) {
        if (is_cancelled(g)) return NULL;
        int n = j->n_ids - at < PREFILL_CHUNK ? j->n_ids - at : PREFILL_CHUNK;
        logits = engine_forward(s, sl, j->ids + at, n, g->lp_rows);
        if (!logits && is_cancelled(g)) return NULL;
        if (!logits) goto fail;
        if (g->lp_rows) {
            if (at == 0) lp_push_none(&g->lp, j->ids[0]);
            lp_push_rows(&g->lp, g->lp_rows, n, s->vocab, j->ids, at, j->n_ids);
        }
        memcpy(sl->cache + at, j->ids + at, (size_t)n * sizeof(int32_t));
        sl->n_cache = at + n;
    }
    memcpy(sl->logits, logits, (size_t)s->vocab * sizeof(float));
    if (j->req.n > 1 && share_prompt(g)) goto fail;

sample:;
    struct r1_sampler_params sp = j->req.sp;
    sp.seed += (uint64_t)sl->choice; /* n > 1: each choice its own draw */
    r1_sampler_t *smp = r1_sampler_new(&sp, s->vocab);
    r1_detok_t *dt = r1_detok_new(s->tok, 1);
    const char *finish = NULL;
    if (!smp || !dt) {
        r1_sampler_free(smp);
        r1_detok_free(dt);
        goto fail;
    }
    for (int i = 0; i < j->n_ids; i++) r1_sampler_accept(smp, j->ids[i]);
    if (j->req.stream && j->req.kind == REQ_CHAT) {
        resp_chunk(&g->ev, &g->meta, "assistant", NULL, 0, "", 0, NULL);
        flush_events(g);
    }
    echo_prompt(g);
    int hit = 0, spec_err = 0;
    r1_spec_t *spec = j->req.max_tokens != 0 ? spec_open(g, smp, &spec_err) : NULL;
    const int32_t *spec_ids = NULL;
    int spec_n = 0, spec_at = 0, n_gen = 0; /* the step's ids, the next to take, ids taken */
    if (spec_err) {
        r1_sampler_free(smp);
        r1_detok_free(dt);
        goto fail;
    }
    if (j->req.max_tokens == 0) finish = "length"; /* echo only: the prompt scored, nothing generated */
    while (!finish) {
        if (is_cancelled(g)) break;
        int32_t id;
        if (spec) { /* the ids of one speculative step: the last one is not cached yet, as in plain decoding */
            if (spec_at == spec_n) {
                spec_n = r1_spec_step(spec, &spec_ids);
                spec_at = 0;
                if (spec_n <= 0) break; /* below: cancelled or failed */
                for (int t = 0; t < spec_n; t++)
                    if (j->n_ids + n_gen + t < s->n_ctx) sl->cache[j->n_ids + n_gen + t] = spec_ids[t];
                sl->n_cache = r1_batch_seq_n_past(s->batch, sl->index);
            }
            id = spec_ids[spec_at++];
        } else {
            if (g->lp_raw) memcpy(g->lp_raw, sl->logits, (size_t)s->vocab * sizeof(float));
            id = r1_sampler_sample(smp, sl->logits);
        }
        n_gen++;
        if (is_stop_id(s, id)) {
            finish = "stop";
            break;
        }
        if (g->lp_raw) lp_push(&g->lp, g->lp_raw, s->vocab, id); /* the end token gets none, as in OpenAI's */
        u->completion_tokens++;
        const char *text = r1_detok_push(dt, id);
        if (text && *text && stop_feed(&g->stop, text, strlen(text), &g->piece)) hit = 1;
        if (g->piece.len) route(g, 0);
        if (hit) {
            finish = "stop";
            break;
        }
        if (j->req.max_tokens > 0 && u->completion_tokens >= j->req.max_tokens) {
            finish = "length";
            break;
        }
        /* the cache is full once it would hold id (speculating: id's position, as it may hold more) */
        if (spec ? j->n_ids + n_gen - 1 >= s->n_ctx : r1_batch_seq_n_past(s->batch, sl->index) >= s->n_ctx) {
            finish = "length";
            break;
        }
        if (spec) continue;
        const float *l = engine_forward(s, sl, &id, 1, NULL);
        if (!l) {
            r1_sampler_free(smp);
            r1_detok_free(dt);
            if (is_cancelled(g)) {
                r1_batch_seq_truncate(s->batch, sl->index, 0); /* the row may or may not be in the cache */
                sl->n_cache = 0;
                return NULL;
            }
            goto fail;
        }
        sl->cache[sl->n_cache++] = id;
        memcpy(sl->logits, l, (size_t)s->vocab * sizeof(float));
    }
    if (spec) {
        struct r1_spec_stats st;
        r1_spec_get_stats(spec, &st);
        r1_spec_free(spec);
        u->spec = 1, u->drafted_tokens = (int)st.drafted, u->accepted_tokens = (int)st.accepted;
        pthread_mutex_lock(&s->mu);
        s->spec_drafted += st.drafted, s->spec_accepted += st.accepted, s->spec_steps += st.steps;
        pthread_mutex_unlock(&s->mu);
        if (!finish) { /* cancelled, or a step failed */
            r1_sampler_free(smp);
            r1_detok_free(dt);
            if (!is_cancelled(g)) goto fail;
            r1_batch_seq_truncate(s->batch, sl->index, 0); /* a step's rows may or may not be cached */
            sl->n_cache = 0;
            return NULL;
        }
    }
    if (finish && !hit) {
        const char *rest = r1_detok_flush(dt);
        if (rest && *rest && stop_feed(&g->stop, rest, strlen(rest), &g->piece)) hit = 1;
        if (!hit) stop_flush(&g->stop, &g->piece);
    }
    if (finish) route(g, 1);
    r1_sampler_free(smp);
    r1_detok_free(dt);
    return finish;
fail:
    /* the cache no longer matches what we know: start the slot afresh */
    r1_batch_seq_truncate(s->batch, sl->index, 0);
    sl->n_cache = 0;
    api_error_set(err, 500, "server_error", NULL, NULL, "generation failed: %s", r1_last_error());
    return "error";
}

static void run_job(struct sched *s, struct slot *sl, struct job *j) {
    struct gen_ctx g;
    memset(&g, 0, sizeof g);
    g.s = s, g.sl = sl, g.j = j;
    g.meta = (struct resp_meta){.kind = j->req.kind, .id = j->id, .created = j->created, .model = j->model,
                                .index = sl->choice};
    stop_init(&g.stop, j->req.stops, j->req.n_stops);
    reasoning_init(&g.rs, j->in_think);
    struct resp_usage u = {0};
    struct api_error err;
    const char *finish = "error";
    if (lp_begin(&g)) api_error_set(&err, 500, "server_error", NULL, NULL, "out of memory for logprobs");
    else finish = generate(&g, &u, &err);
    char *result = NULL;
    int status = 200;
    if (finish && !strcmp(finish, "error")) {
        status = err.status;
        if (j->req.stream) resp_error_event(&g.ev, &err);
        else result = resp_error(&err);
    } else if (finish && j->req.stream) {
        resp_chunk(&g.ev, &g.meta, NULL, NULL, 0, j->req.kind == REQ_CHAT ? NULL : "",
                   0, finish);
    } else if (finish) {
        result = resp_final(&g.meta, g.all_think.p, g.all_think.len, g.all_answer.p, g.all_answer.len, finish, &u);
        if (!result || g.all_think.failed || g.all_answer.failed) {
            free(result);
            api_error_set(&err, 500, "server_error", NULL, NULL, "out of memory building the response");
            result = resp_error(&err);
            status = 500;
        }
    }
    pthread_mutex_lock(&s->mu);
    if (sl->choice == 0 && !j->prefill_state) { /* choices > 0 must not wait for a prompt that will not come */
        j->prefill_state = -1;
        pthread_cond_broadcast(&s->idle_cv);
    }
    if (g.ev.len) sbuf_add(&j->out, g.ev.p, g.ev.len);
    j->usage.completion_tokens += u.completion_tokens;
    j->usage.spec |= u.spec, j->usage.drafted_tokens += u.drafted_tokens, j->usage.accepted_tokens += u.accepted_tokens;
    if (sl->choice == 0) j->usage.prompt_tokens = u.prompt_tokens, j->usage.cached_tokens = u.cached_tokens;
    if (!finish) j->n_cancelled++;
    else if (status != 200 && !j->n_failed++) j->status = status;
    if (!j->req.stream) j->finals[sl->choice] = result;
    s->tokens_in += u.prompt_tokens - u.cached_tokens;
    s->tokens_out += u.completion_tokens;
    if (--j->running == 0) { /* the job's last choice: what ends the response */
        if (j->n_cancelled) s->cancelled++;
        else s->served++;
        if (j->req.stream && !j->n_cancelled) {
            sbuf_clear(&g.ev);
            if (j->req.include_usage && !j->n_failed) resp_usage_chunk(&g.ev, &g.meta, &j->usage);
            resp_done(&g.ev);
            sbuf_add(&j->out, g.ev.p, g.ev.len);
        } else if (!j->req.stream && !j->n_cancelled) {
            int pick = -1;
            for (int k = 0; k < j->req.n && j->n_failed && pick < 0; k++)
                if (j->finals[k] && strstr(j->finals[k], "\"error\"") == j->finals[k] + 1) pick = k;
            if (pick >= 0 || j->req.n == 1) { /* an error, or the one choice */
                j->result = j->finals[pick >= 0 ? pick : 0];
                j->finals[pick >= 0 ? pick : 0] = NULL;
            } else {
                j->result = resp_merge(j->finals, j->req.n, &j->usage);
                j->status = 200;
                if (!j->result) {
                    api_error_set(&err, 500, "server_error", NULL, NULL, "out of memory building the response");
                    j->result = resp_error(&err);
                    j->status = 500;
                }
            }
            if (!j->n_failed && j->req.n == 1) j->status = 200;
        }
    }
    pthread_mutex_unlock(&s->mu);
    lp_end(&g);
    stop_free(&g.stop);
    reasoning_free(&g.rs);
    sbuf_free(&g.piece);
    sbuf_free(&g.think);
    sbuf_free(&g.answer);
    sbuf_free(&g.all_think);
    sbuf_free(&g.all_answer);
    sbuf_free(&g.ev);
}

static void *worker_main(void *arg) {
    struct slot *sl = arg;
    struct sched *s = sl->sched;
    pthread_mutex_lock(&s->mu);
    for (;;) {
        while (!sl->job && !s->stopping) pthread_cond_wait(&sl->cv, &s->mu);
        struct job *j = sl->job;
        if (!j) break;
        pthread_mutex_unlock(&s->mu);
        run_job(s, sl, j);
        pthread_mutex_lock(&s->mu);
        if (j->running == 0) j->state = JOB_DONE;
        sl->job = NULL;
        s->n_busy--;
        job_unref_locked(j);
        pthread_cond_broadcast(&s->idle_cv);
        pthread_cond_signal(&s->engine_cv);
        dispatch_locked(s);
    }
    pthread_mutex_unlock(&s->mu);
    return NULL;
}

/* ------------------------------------------------------------ lifecycle */

struct sched *sched_new(r1_model_t *m, const r1_tokenizer_t *tok, const struct sched_opts *o) {
    struct sched *s = calloc(1, sizeof *s);
    if (!s) return r1_err("out of memory"), NULL;
    s->model = m;
    s->tok = tok;
    s->o = *o;
    if (s->o.n_slots < 1) s->o.n_slots = 1;
    if (s->o.queue_cap < 0) s->o.queue_cap = 0;
    s->vocab = r1_model_config(m)->vocab;
    if (s->o.batch_tokens < s->o.n_slots) s->o.batch_tokens = s->o.n_slots; /* a row for every slot */
    pthread_mutex_init(&s->mu, NULL);
    pthread_cond_init(&s->idle_cv, NULL);
    pthread_cond_init(&s->engine_cv, NULL);
    add_stop_id(s, r1_model_config(m)->eos_id);
    add_stop_id(s, r1_tokenizer_eos(tok));
    add_stop_id(s, r1_tokenizer_token_id(tok, "<|im_end|>"));
    add_stop_id(s, r1_tokenizer_token_id(tok, "<|endoftext|>"));
    s->slots = calloc((size_t)s->o.n_slots, sizeof *s->slots);
    if (!s->slots) goto fail;
    struct r1_batch_opts bo = {.n_seq = s->o.n_slots, .n_ctx = o->n_ctx, .n_batch = s->o.batch_tokens,
                               .backend = o->backend, .n_threads = o->n_threads, .kv_dtype = o->kv_dtype};
    if (!(s->batch = r1_batch_new(m, &bo))) goto fail;
    s->n_ctx = r1_batch_n_ctx(s->batch);
    const size_t nb = (size_t)s->o.batch_tokens;
    s->st_ids = malloc(nb * sizeof(int32_t));
    s->st_seq = malloc(nb * sizeof(int32_t));
    s->st_want = malloc(nb);
    s->st_owner = malloc(nb * sizeof *s->st_owner);
    s->st_take = calloc((size_t)s->o.n_slots, sizeof(int));
    s->st_logits = malloc(((size_t)s->o.n_slots + ALL_ROWS_MAX) * s->vocab * sizeof(float));
    if (!s->st_ids || !s->st_seq || !s->st_want || !s->st_owner || !s->st_take || !s->st_logits) {
        r1_err("out of memory for the engine's step buffers");
        goto fail;
    }
    if (pthread_create(&s->engine, NULL, engine_main, s)) {
        r1_err("cannot start the engine thread: %s", strerror(errno));
        goto fail;
    }
    s->engine_started = 1;
    for (int i = 0; i < s->o.n_slots; i++) {
        struct slot *sl = &s->slots[i];
        sl->sched = s;
        sl->index = i;
        sl->cache = malloc((size_t)s->n_ctx * sizeof(int32_t));
        sl->logits = malloc((size_t)s->vocab * sizeof(float));
        sl->out = malloc((size_t)s->vocab * sizeof(float));
        if (!sl->cache || !sl->logits || !sl->out) {
            r1_err("out of memory for slot %d", i);
            goto fail;
        }
        if (o->draft) {
            struct r1_session_opts dso = {.n_ctx = s->n_ctx, .backend = o->backend,
                                          .n_threads = o->draft_threads > 0 ? o->draft_threads : 1,
                                          .kv_dtype = o->kv_dtype};
            if (!(sl->draft = r1_session_new(o->draft, &dso))) {
                char msg[256];
                snprintf(msg, sizeof msg, "%s", r1_last_error());
                r1_err("the draft model's session for slot %d: %s", i, msg);
                goto fail;
            }
        }
        pthread_cond_init(&sl->cv, NULL);
        if (pthread_create(&sl->thread, NULL, worker_main, sl)) {
            pthread_cond_destroy(&sl->cv);
            r1_err("cannot start a worker thread: %s", strerror(errno));
            goto fail;
        }
        s->n_started++;
    }
    return s;
fail:
    sched_stop(s);
    sched_free(s);
    return NULL;
}

void sched_stop(struct sched *s) {
    pthread_mutex_lock(&s->mu);
    s->stopping = 1;
    while (s->head) {
        struct job *j = s->head;
        queue_remove_locked(s, j);
        j->state = JOB_DONE;
        j->cancelled = 1;
        job_unref_locked(j);
    }
    for (int i = 0; i < s->n_started; i++) {
        if (s->slots[i].job) s->slots[i].job->cancelled = 1;
        pthread_cond_signal(&s->slots[i].cv);
    }
    pthread_cond_broadcast(&s->idle_cv);
    pthread_cond_broadcast(&s->engine_cv);
    pthread_mutex_unlock(&s->mu);
}

void sched_free(struct sched *s) {
    if (!s) return;
    for (int i = 0; i < s->n_started; i++) {
        pthread_join(s->slots[i].thread, NULL);
        pthread_cond_destroy(&s->slots[i].cv);
    }
    if (s->engine_started) {
        pthread_mutex_lock(&s->mu);
        s->engine_stop = 1;
        pthread_cond_broadcast(&s->engine_cv);
        pthread_mutex_unlock(&s->mu);
        pthread_join(s->engine, NULL);
    }
    for (int i = 0; s->slots && i < s->o.n_slots; i++) {
        free(s->slots[i].cache);
        free(s->slots[i].logits);
        free(s->slots[i].out);
        r1_session_free(s->slots[i].draft);
    }
    free(s->slots);
    r1_batch_free(s->batch);
    free(s->st_ids);
    free(s->st_seq);
    free(s->st_want);
    free(s->st_owner);
    free(s->st_take);
    free(s->st_logits);
    pthread_cond_destroy(&s->engine_cv);
    pthread_cond_destroy(&s->idle_cv);
    pthread_mutex_destroy(&s->mu);
    free(s);
}

int sched_n_ctx(const struct sched *s) { return s->n_ctx; }
const r1_tokenizer_t *sched_tokenizer(const struct sched *s) { return s->tok; }

void sched_stats(struct sched *s, struct sched_stats *st) {
    pthread_mutex_lock(&s->mu);
    *st = (struct sched_stats){.slots = s->o.n_slots, .busy = s->n_busy, .queued = s->n_queued,
                               .queue_cap = s->o.queue_cap, .served = s->served, .cancelled = s->cancelled,
                               .rejected = s->rejected};
    pthread_mutex_unlock(&s->mu);
}

/* ------------------------------------------------------------- submit */

static int build_prompt(struct sched *s, struct job *j, struct api_error *err) {
    const struct gen_request *r = &j->req;
    const char *param = r->kind == REQ_CHAT ? "messages" : "prompt";
    if (r->kind == REQ_COMPLETION && r->prompt_ids) {
        for (int i = 0; i < r->n_prompt_ids; i++)
            if (r->prompt_ids[i] >= s->vocab)
                return api_error_set(err, 400, "invalid_request_error", "prompt", NULL,
                                     "'prompt[%d]' is token id %d; the vocabulary has %d", i, r->prompt_ids[i],
                                     s->vocab);
        if (!(j->ids = malloc((size_t)r->n_prompt_ids * sizeof(int32_t))))
            return api_error_set(err, 500, "server_error", NULL, NULL, "out of memory");
        memcpy(j->ids, r->prompt_ids, (size_t)r->n_prompt_ids * sizeof(int32_t));
        j->n_ids = r->n_prompt_ids;
    } else {
        char *text;
        int add_special = 1;
        if (r->kind == REQ_CHAT) {
            struct r1_chat_msg *msgs = malloc((size_t)r->n_msgs * sizeof *msgs);
            if (!msgs) return api_error_set(err, 500, "server_error", NULL, NULL, "out of memory");
            for (int i = 0; i < r->n_msgs; i++) msgs[i] = (struct r1_chat_msg){r->msgs[i].role, r->msgs[i].content};
            text = r1_chat_apply(s->tok, msgs, (size_t)r->n_msgs, 1);
            free(msgs);
            if (!text)
                return api_error_set(err, 500, "server_error", NULL, NULL, "the chat template failed: %s",
                                     r1_last_error());
            add_special = 0; /* the template holds BOS */
            size_t len = strlen(text);
            while (len && (text[len - 1] == '\n' || text[len - 1] == ' ')) len--;
            j->in_think = len >= 7 && !memcmp(text + len - 7, "<think>", 7);
        } else {
            text = strdup(r->prompt);
            if (!text) return api_error_set(err, 500, "server_error", NULL, NULL, "out of memory");
        }
        j->n_ids = r1_tokenizer_encode(s->tok, text, strlen(text), add_special, &j->ids);
        free(text);
        if (j->n_ids < 0) {
            j->ids = NULL;
            return api_error_set(err, 500, "server_error", NULL, NULL, "tokenization failed: %s", r1_last_error());
        }
    }
    if (j->n_ids == 0) return api_error_set(err, 400, "invalid_request_error", param, NULL, "the prompt is empty");
    if (j->n_ids >= s->n_ctx)
        return api_error_set(err, 400, "invalid_request_error", param, "context_length_exceeded",
                             "This model's maximum context length is %d tokens, but the prompt has %d tokens "
                             "(and at least one must be generated). Shorten the prompt or start the server "
                             "with a larger --ctx.",
                             s->n_ctx, j->n_ids);
    return 0;
}

struct job *sched_submit(struct sched *s, struct gen_request *req, struct api_error *err) {
    struct job *j = calloc(1, sizeof *j);
    if (!j) {
        api_error_set(err, 500, "server_error", NULL, NULL, "out of memory");
        req_free(req);
        return NULL;
    }
    j->sched = s;
    j->req = *req;
    memset(req, 0, sizeof *req);
    j->refs = 1;
    j->created = (long)time(NULL);
    j->model = strdup(j->req.model && j->req.model[0] ? j->req.model : s->o.model_name);
    pthread_mutex_lock(&s->mu);
    unsigned long n = ++s->counter;
    pthread_mutex_unlock(&s->mu);
    uint64_t r = mix64(clock_ns() ^ mix64(n));
    snprintf(j->id, sizeof j->id, "%s-%016llx%08lx", j->req.kind == REQ_CHAT ? "chatcmpl" : "cmpl",
             (unsigned long long)r, n & 0xffffffffUL);
    if (!j->req.seed_set && !s->o.seed_set) j->req.sp.seed = mix64(r);
    if (!j->model) {
        api_error_set(err, 500, "server_error", NULL, NULL, "out of memory");
        goto fail;
    }
    if (build_prompt(s, j, err)) goto fail;
    if (j->req.n < 1) j->req.n = 1;
    if (j->req.n > s->o.n_slots) {
        api_error_set(err, 400, "invalid_request_error", "n", NULL,
                      "n = %d choices need as many slots; the server runs %d (--parallel)", j->req.n, s->o.n_slots);
        goto fail;
    }
    j->slots = calloc((size_t)j->req.n, sizeof *j->slots);
    j->finals = calloc((size_t)j->req.n, sizeof *j->finals);
    if (j->req.n > 1) j->prompt_logits = malloc((size_t)s->vocab * sizeof(float));
    if (!j->slots || !j->finals || (j->req.n > 1 && !j->prompt_logits)) {
        api_error_set(err, 500, "server_error", NULL, NULL, "out of memory");
        goto fail;
    }

    pthread_mutex_lock(&s->mu);
    int can_start = !s->head && s->o.n_slots - s->n_busy >= j->req.n;
    if (s->stopping || (!can_start && s->n_queued >= s->o.queue_cap)) {
        s->rejected++;
        pthread_mutex_unlock(&s->mu);
        api_error_set(err, 503, "server_error", NULL, "server_busy",
                      "The server is busy: all %d slots are generating and %d requests are waiting (--queue). "
                      "Retry later.",
                      s->o.n_slots, s->o.queue_cap);
        goto fail;
    }
    j->refs = 2; /* the caller and the scheduler */
    j->state = JOB_QUEUED;
    if (s->tail) s->tail->next = j;
    else s->head = j;
    s->tail = j;
    s->n_queued++;
    dispatch_locked(s);
    pthread_mutex_unlock(&s->mu);
    return j;
fail:
    free(j->slots);
    free(j->finals);
    free(j->prompt_logits);
    req_free(&j->req);
    free(j->ids);
    free(j->model);
    free(j);
    return NULL;
}

/* ------------------------------------------------------ connection side */

/* Whether the peer of fd closed its end (a read would return EOF or fail). */
static int client_gone(int fd) {
    if (fd < 0) return 0;
    struct pollfd p = {.fd = fd, .events = POLLIN | POLLRDHUP};
    if (poll(&p, 1, 0) <= 0) return 0;
    if (p.revents & (POLLHUP | POLLERR | POLLNVAL | POLLRDHUP)) return 1;
    if (p.revents & POLLIN) {
        char c;
        ssize_t r = recv(fd, &c, 1, MSG_PEEK | MSG_DONTWAIT);
        return r == 0 || (r < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR);
    }
    return 0;
}

static void timed_wait(struct sched *s) {
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    ts.tv_nsec += POLL_MS * 1000000L;
    if (ts.tv_nsec >= 1000000000L) ts.tv_sec++, ts.tv_nsec -= 1000000000L;
    pthread_cond_timedwait(&s->idle_cv, &s->mu, &ts);
}

ssize_t job_read(struct job *j, char *buf, size_t max, int fd) {
    struct sched *s = j->sched;
    pthread_mutex_lock(&s->mu);
    for (;;) {
        if (j->out.len) {
            size_t n = j->out.len < max ? j->out.len : max;
            memcpy(buf, j->out.p, n);
            sbuf_consume(&j->out, n);
            pthread_mutex_unlock(&s->mu);
            return (ssize_t)n;
        }
        if (j->state == JOB_DONE) {
            pthread_mutex_unlock(&s->mu);
            return 0;
        }
        if (s->stopping) break;
        timed_wait(s);
        if (j->out.len || j->state == JOB_DONE) continue;
        pthread_mutex_unlock(&s->mu);
        int gone = client_gone(fd);
        pthread_mutex_lock(&s->mu);
        if (gone) break;
    }
    if (j->state != JOB_DONE) j->cancelled = 1;
    pthread_mutex_unlock(&s->mu);
    return -1;
}

int job_wait(struct job *j, int fd, char **body, int *status) {
    struct sched *s = j->sched;
    pthread_mutex_lock(&s->mu);
    while (j->state != JOB_DONE) {
        if (s->stopping) break;
        timed_wait(s);
        if (j->state == JOB_DONE) break;
        pthread_mutex_unlock(&s->mu);
        int gone = client_gone(fd);
        pthread_mutex_lock(&s->mu);
        if (gone) break;
    }
    int rc = -1;
    if (j->state == JOB_DONE && j->result) {
        *body = j->result;
        *status = j->status;
        j->result = NULL;
        rc = 0;
    }
    pthread_mutex_unlock(&s->mu);
    return rc;
}

void job_release(struct job *j) {
    struct sched *s = j->sched;
    pthread_mutex_lock(&s->mu);
    if (j->state == JOB_QUEUED) {
        queue_remove_locked(s, j);
        j->state = JOB_DONE;
        j->cancelled = 1;
        s->cancelled++;
        R1_ASSERT(j->refs == 2);
        j->refs--; /* the scheduler's reference; the caller's is dropped below */
    } else if (j->state == JOB_RUNNING) {
        j->cancelled = 1;
    }
    job_unref_locked(j);
    pthread_mutex_unlock(&s->mu);
}
