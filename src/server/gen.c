/*
 * gen.c - the generation loop of the server: one choice of a job on its
 * slot. Reuses the slot's cached prefix (or another's: prefix.c), prefills the rest of the prompt in
 * chunks through the engine thread (engine.c), then decodes (speculatively
 * when the server drafts: each check of drafted tokens is one engine
 * request) and streams the text out through the job's buffer, with stop
 * strings, the <think> split and logprobs. Slots, queue and workers are
 * sched.c; the structs they share are sched_impl.h.
 */
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "server/logprobs.h"
#include "server/reasoning.h"
#include "server/response.h"
#include "server/sbuf.h"
#include "server/sched_impl.h"
#include "server/stop.h"
#include "server/tool_scan.h"
#include "util/util.h"

/* -------------------------------------------------------- generation */

struct gen_ctx {
    struct sched *s;
    struct slot *sl;
    struct job *j;
    struct resp_meta meta;
    struct stop_match stop;
    struct reasoning rs;
    struct sbuf piece, think, answer;  /* scratch: released text, its two parts */
    struct sbuf all_think, all_answer; /* non-streaming: the whole result */
    struct sbuf ev;                    /* streaming: events to hand over */
    struct lp_list lp;                 /* the request's logprobs (meta.lp points here when asked) */
    float *lp_raw;                     /* (vocab) the raw logits of the step, before sampling */
    float *lp_rows;                    /* (PREFILL_CHUNK, vocab) prompt logits, for echo + logprobs */
    r1_gmatch_t *gm;                   /* the request's grammar, NULL without one */
    int gram_on;                       /* the grammar applies (the answer began: after </think> for R1) */
    char tail[16];                     /* the last bytes of output while looking for </think> */
    struct sbuf tool_hold;             /* streaming with tools: answer text that may begin a call */
    int tool_sent, tool_buffering;     /* some answer went out as content / a call began: the rest is read
                                          by scan (in all_answer) */
    int tool_bare;                     /* the call is a bare JSON object: sent whole at the end */
    int tool_rest_calls;               /* calls found at the end in text scan did not read */
    struct tool_scan scan;
    r1_think_t *budget; /* the request's reasoning budget, or NULL */
    int cut;            /* the KV pool ended this request (a prompt: 503) */
};

/* Streaming with tools, once a call began: what scan reads in the text so
 * far goes out (a call's head, its arguments in pieces, text between
 * calls); final: the end of the answer (text scan could not read goes out
 * through resp_chunk_tools). */
static void tool_pump(struct gen_ctx *g, int final) {
    for (;;) {
        struct tool_ev ev = tool_scan_next(&g->scan, g->all_answer.p, g->all_answer.len, final);
        if (ev.kind == TOOL_EV_NONE) return;
        if (ev.kind == TOOL_EV_CONTENT) resp_chunk(&g->ev, &g->meta, NULL, NULL, 0, ev.p, ev.n, NULL);
        else if (ev.kind == TOOL_EV_HEAD) resp_chunk_call(&g->ev, &g->meta, ev.index, ev.p, ev.n, "", 0);
        else if (ev.kind == TOOL_EV_ARGS) resp_chunk_call(&g->ev, &g->meta, ev.index, NULL, 0, ev.p, ev.n);
        else g->tool_rest_calls += resp_chunk_tools(&g->ev, &g->meta, ev.p, ev.n, ev.index);
    }
}

/* Streaming with tools: answer text goes out as content until a call may
 * begin ("<tool_call>", or a "{" opening the answer); from there on
 * tool_pump reads it as it comes (a bare "{" call waits for the end).
 * Text that could be the start of "<tool_call>" is held back until it is
 * decided. */
static void tool_stream(struct gen_ctx *g, const char *text, size_t n) {
    static const char OPEN[] = "<tool_call>";
    if (g->tool_buffering) {
        sbuf_add(&g->all_answer, text, n);
        if (!g->tool_bare) tool_pump(g, 0);
        return;
    }
    sbuf_add(&g->tool_hold, text, n);
    const char *h = g->tool_hold.p;
    size_t len = g->tool_hold.len, lead = 0;
    while (lead < len && (h[lead] == ' ' || h[lead] == '\n')) lead++;
    const char *o = memmem(h, len, OPEN, sizeof OPEN - 1);
    size_t cut = len; /* what may go out as content */
    if (o) cut = (size_t)(o - h);
    else if (!g->tool_sent && lead < len && h[lead] == '{') cut = 0; /* a bare JSON call? */
    else
        for (size_t k = len > sizeof OPEN - 1 ? len - (sizeof OPEN - 2) : 0; k < len; k++)
            if (!memcmp(h + k, OPEN, len - k)) {
                cut = k;
                break;
            }
    if (!g->tool_sent && (lead == len || (cut <= lead && (o || h[lead] == '{')))) cut = 0; /* white space only so far */
    if (cut) {
        resp_chunk(&g->ev, &g->meta, NULL, NULL, 0, h, cut, NULL);
        g->tool_sent = 1;
    }
    if (o || (!g->tool_sent && cut == 0 && lead < len && h[lead] == '{')) {
        g->tool_buffering = 1;
        g->tool_bare = !o;
        tool_scan_init(&g->scan, g->meta.tool_max);
        sbuf_add(&g->all_answer, h + cut, len - cut);
        sbuf_clear(&g->tool_hold);
        if (!g->tool_bare) tool_pump(g, 0);
        return;
    }
    sbuf_consume(&g->tool_hold, cut);
}

/* ---------------------------------------------- grammar, bias, checks */

/* Whether every logit is a number (NaN or Inf comes from broken weights or
 * an overflow; sampling would give garbage without a word). */
static int logits_finite(const float *x, int n) {
    float acc = 0;
    for (int i = 0; i < n; i++) acc += x[i] * 0.0f; /* NaN or Inf makes it NaN */
    return acc == 0;
}

/* R1 thinks first: the grammar starts after "</think>" in the output. */
static void watch_think(struct gen_ctx *g, const char *text) {
    size_t tl = strlen(g->tail), n = strlen(text);
    char buf[sizeof g->tail + 64];
    while (n && !g->gram_on) {
        size_t take = n < 64 ? n : 64;
        memcpy(buf, g->tail, tl);
        memcpy(buf + tl, text, take);
        buf[tl + take] = 0;
        if (strstr(buf, "</think>")) g->gram_on = 1;
        size_t keep = tl + take < sizeof g->tail - 1 ? tl + take : sizeof g->tail - 1;
        memmove(g->tail, buf + tl + take - keep, keep);
        g->tail[keep] = 0, tl = keep;
        text += take, n -= take;
    }
}

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
        if (g->answer.len && g->meta.tools) tool_stream(g, g->answer.p, g->answer.len);
        else if (g->answer.len) resp_chunk(&g->ev, &g->meta, NULL, NULL, 0, g->answer.p, g->answer.len, NULL);
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

/* Whether the engine ended this slot's last forward request for want of
 * KV blocks (and forget it): 1 cut (the request ends), 2 preempted (give
 * the blocks back, wait, compute the cache again: park). */
static int pool_cut(struct gen_ctx *g) {
    pthread_mutex_lock(&g->s->mu);
    int c = g->sl->pool_cut;
    g->sl->pool_cut = 0;
    pthread_mutex_unlock(&g->s->mu);
    if (c == 1) g->cut = 1;
    return c;
}

/* Preempted: this slot's blocks go back to the pool (its ids stay in
 * sl->cache), and it waits until another request ends (or a second has
 * passed, or no other slot is running) before computing them again. */
static void park(struct gen_ctx *g) {
    struct sched *s = g->s;
    struct slot *sl = g->sl;
    slot_claim(s, sl, 0); /* no copy reads its blocks */
    r1_batch_seq_truncate(s->batch, sl->index, 0);
    pthread_mutex_lock(&s->mu);
    s->n_parked++;
    s->pool_preempts++;
    const long seen = s->n_finished;
    const double until = r1_now() + 1.0;
    while (s->n_finished == seen && s->n_busy > s->n_parked && !g->j->cancelled && !s->stopping && r1_now() < until) {
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        ts.tv_nsec += 50 * 1000000L;
        if (ts.tv_nsec >= 1000000000L) ts.tv_sec++, ts.tv_nsec -= 1000000000L;
        pthread_cond_timedwait(&s->idle_cv, &s->mu, &ts);
    }
    s->n_parked--;
    pthread_cond_signal(&s->engine_cv);
    pthread_mutex_unlock(&s->mu);
}

/* After park: sl->cache[0..n) computed again (the logits unused: the
 * caller's next forward is the one it was refused). 0, or -1 (cancelled,
 * cut, failed). */
static int recompute(struct gen_ctx *g, int n) {
    struct sched *s = g->s;
    for (int at = 0; at < n;) {
        if (is_cancelled(g)) return -1;
        int k = n - at < PREFILL_CHUNK ? n - at : PREFILL_CHUNK;
        if (engine_forward(s, g->sl, g->sl->cache + at, k, NULL)) {
            at += k;
            continue;
        }
        if (pool_cut(g) != 2) return -1;
        park(g);
        at = 0;
    }
    return 0;
}

/* n > 1, choice 0: the prompt is in this slot's cache; copy it (KV and the
 * last logits) to the other choices' slots and let them start. */
static int share_prompt(struct gen_ctx *g) {
    struct sched *s = g->s;
    struct job *j = g->j;
    for (int k = 1; k < j->req.n; k++) {
        struct slot *o = &s->slots[j->slots[k]];
        slot_claim(s, o, 0);
        if (r1_batch_seq_copy(s->batch, o->index, g->sl->index, j->n_ids)) return -1;
        memcpy(o->cache, j->ids, (size_t)j->n_ids * sizeof(int32_t));
        o->n_cache = j->n_ids;
        slot_stable(s, o, j->n_ids);
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
    if ((!s->o.spec_lookup && !s->o.draft) || g->lp_raw || g->gm || g->j->req.n_bias) return NULL;
    int k = s->o.spec_k ? s->o.spec_k : s->o.draft ? 5 : R1_SPEC_MAX_K;
    if (k > s->o.batch_tokens - 1) k = s->o.batch_tokens - 1;
    if (k < 1) k = 1;
    struct r1_spec_target t = {.ctx = g,
                               .vocab = s->vocab,
                               .n_past = tgt_n_past,
                               .n_ctx = tgt_n_ctx,
                               .forward = tgt_forward,
                               .truncate = tgt_truncate};
    struct r1_spec_opts so = {.lookup = s->o.spec_lookup,
                              .k = k,
                              .fixed_k = s->o.spec_fixed_k,
                              .draft_held = g->sl->draft_ids,
                              .n_draft_held = g->sl->n_draft_ids};
    g->sl->n_draft_ids = 0; /* unknown until this job ends well */
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
    pool_cut(g);          /* nothing left from an earlier request */
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
    if (g->lp_rows) { /* echo with logprobs scores every prompt position */
        slot_claim(s, sl, 0);
        r1_batch_seq_truncate(s->batch, sl->index, 0);
        keep = 0;
    } else {
        keep = prefix_take(s, sl, j, keep);
    }
    sl->n_cache = keep;
    u->prompt_tokens = j->n_ids;
    u->cached_tokens = keep;
    const float *logits = NULL;
    for (int at = keep, n; at < j->n_ids; at += n) {
        if (is_cancelled(g)) return NULL;
        n = j->n_ids - at < PREFILL_CHUNK ? j->n_ids - at : PREFILL_CHUNK;
        logits = engine_forward(s, sl, j->ids + at, n, g->lp_rows);
        if (!logits && is_cancelled(g)) return NULL;
        if (!logits && !g->lp_rows && pool_cut(g) == 2) { /* preempted: the prompt again once there is room */
            park(g);
            sl->n_cache = 0;
            sl->n_cache = prefix_take(s, sl, j, 0); /* a prefix another slot holds is still taken */
            at = sl->n_cache, n = 0;
            continue;
        }
        if (!logits) goto fail;
        if (g->lp_rows) {
            if (at == 0) lp_push_none(&g->lp, j->ids[0]);
            lp_push_rows(&g->lp, g->lp_rows, n, s->vocab, j->ids, at, j->n_ids);
        }
        memcpy(sl->cache + at, j->ids + at, (size_t)n * sizeof(int32_t));
        sl->n_cache = at + n;
        slot_stable(s, sl, at + n); /* computed: another slot may take it */
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
    if (j->req.gram && !(g->gm = r1_gmatch_new(j->req.gram, s->gvocab))) {
        r1_sampler_free(smp);
        r1_detok_free(dt);
        goto fail;
    }
    g->gram_on = !j->in_think;
    if (j->req.stream && j->req.kind == REQ_CHAT) {
        resp_chunk(&g->ev, &g->meta, "assistant", NULL, 0, "", 0, NULL);
        flush_events(g);
    }
    echo_prompt(g);
    int hit = 0, spec_err = 0;
    /* a reasoning budget forces ids between sampled ones: no speculation then */
    const int budget = j->req.reasoning_budget != REQ_BUDGET_DEFAULT ? j->req.reasoning_budget : s->o.reasoning_budget;
    if (budget >= 0 && !(g->budget = r1_think_new(s->tok, budget, j->in_think))) spec_err = 1;
    r1_spec_t *spec = j->req.max_tokens != 0 && !g->budget && !spec_err ? spec_open(g, smp, &spec_err) : NULL;
    const int32_t *spec_ids = NULL, *force = NULL; /* force: the ids that close a think block */
    int spec_n = 0, spec_at = 0, n_gen = 0;        /* the step's ids, the next to take, ids taken */
    int n_force = g->budget ? r1_think_start(g->budget, &force) : 0;
    if (spec_err) {
        r1_sampler_free(smp);
        r1_detok_free(dt);
        goto fail;
    }
    if (j->req.max_tokens == 0) finish = "length"; /* echo only: the prompt scored, nothing generated */
    while (!finish) {
        if (is_cancelled(g)) break;
        int32_t id;
        const int forced = n_force > 0;
        if (forced) { /* emitted like a sampled id; the sampler hears of it */
            if (g->lp_raw) memcpy(g->lp_raw, sl->logits, (size_t)s->vocab * sizeof(float));
            id = *force++;
            n_force--;
            r1_sampler_accept(smp, id);
        } else if (spec) { /* the ids of one speculative step: the last one is not cached yet, as in plain decoding */
            if (spec_at == spec_n) {
                spec_n = r1_spec_step(spec, &spec_ids);
                spec_at = 0;
                if (spec_n <= 0 && pool_cut(g)) { /* no KV block for more (cut or preempted): the answer so far */
                    sl->n_cache = r1_batch_seq_n_past(s->batch, sl->index);
                    finish = "length";
                }
                if (spec_n <= 0) break; /* below: cancelled or failed */
                for (int t = 0; t < spec_n; t++)
                    if (j->n_ids + n_gen + t < s->n_ctx) sl->cache[j->n_ids + n_gen + t] = spec_ids[t];
                sl->n_cache = r1_batch_seq_n_past(s->batch, sl->index);
            }
            id = spec_ids[spec_at++];
        } else {
            if (g->lp_raw) memcpy(g->lp_raw, sl->logits, (size_t)s->vocab * sizeof(float));
            if (!logits_finite(sl->logits, s->vocab)) {
                r1_err("the model's logits contain NaN or Inf (broken weights, or an overflow in this backend "
                       "or dtype): try another --dtype or --backend");
                r1_sampler_free(smp);
                r1_detok_free(dt);
                goto fail;
            }
            for (int b = 0; b < j->req.n_bias; b++) sl->logits[j->req.bias_ids[b]] += j->req.bias[b];
            id = g->gm && g->gram_on ? r1_sampler_sample_grammar(smp, sl->logits, g->gm)
                                     : r1_sampler_sample(smp, sl->logits);
            if (id < 0) { /* no token can go on (the matcher keeps only prefixes that can complete, so
                             this is a grammar no vocabulary token fits): the answer so far, cut short */
                fprintf(stderr,
                        "r1infer serve: the grammar allows no token after %d generated; ending the answer "
                        "(finish_reason length)\n",
                        n_gen);
                finish = "length";
                break;
            }
            if (g->gm && g->gram_on && !is_stop_id(s, id)) r1_gmatch_accept(g->gm, id);
        }
        n_gen++;
        if (!forced && is_stop_id(s, id)) {
            finish = "stop";
            break;
        }
        if (g->lp_raw) lp_push(&g->lp, g->lp_raw, s->vocab, id); /* the end token gets none, as in OpenAI's */
        u->completion_tokens++;
        const char *text = r1_detok_push(dt, id);
        if (g->gm && !g->gram_on && text) watch_think(g, text);
        if (text && *text && stop_feed(&g->stop, text, strlen(text), &g->piece)) hit = 1;
        if (g->piece.len) route(g, 0);
        if (hit || (g->gm && g->gram_on && r1_gmatch_finished(g->gm))) { /* the grammar's sentence is complete */
            finish = "stop";
            break;
        }
        if (g->budget && !forced && (n_force = r1_think_push(g->budget, text, &force)) < 0) {
            r1_sampler_free(smp);
            r1_detok_free(dt);
            goto fail;
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
        while (!l && !is_cancelled(g) && pool_cut(g) == 2) { /* preempted: the conversation again, then id */
            park(g);
            if (recompute(g, sl->n_cache)) break;
            l = engine_forward(s, sl, &id, 1, NULL);
        }
        if (!l && g->cut) { /* no KV block for it: the answer so far (the row was not computed) */
            fprintf(stderr, "r1infer serve: %s; ending an answer after %d tokens (finish_reason length)\n",
                    r1_last_error(), n_gen);
            finish = "length";
            break;
        }
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
        if (finish && sl->draft) { /* what the draft's cache holds, for the slot's next job */
            const int32_t *held;
            int n = r1_spec_draft_held(spec, &held);
            if (n > s->n_ctx) n = s->n_ctx;
            memcpy(sl->draft_ids, held, (size_t)n * sizeof(int32_t));
            sl->n_draft_ids = n;
        }
        r1_spec_free(spec);
        /* usage counts the drafted tokens that appear in the completion (as
         * OpenAI's accepted_prediction_tokens): a step's ids after the one
         * that ended the text were kept drafts (all but its last, the
         * target's own token) but never emitted, and an end token is not
         * part of completion_tokens */
        long acc = (long)st.accepted - (spec_n - spec_at > 1 ? spec_n - spec_at - 1 : 0);
        if (acc > u->completion_tokens) acc = u->completion_tokens;
        if (acc < 0) acc = 0;
        u->spec = 1, u->drafted_tokens = (int)st.drafted, u->accepted_tokens = (int)acc;
        pthread_mutex_lock(&s->mu);
        s->spec_drafted += st.drafted, s->spec_accepted += acc, s->spec_steps += st.steps;
        s->draft_prefilled += st.draft_prefilled, s->draft_reused += st.draft_reused;
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
    if (g->cut || pool_cut(g)) /* the prompt found no room: every block is held by running conversations */
        api_error_set(err, 503, "server_error", NULL, "server_busy", "%s. Retry later.", r1_last_error());
    else api_error_set(err, 500, "server_error", NULL, NULL, "generation failed: %s", r1_last_error());
    return "error";
}

void sched_run_job(struct sched *s, struct slot *sl, struct job *j) {
    struct gen_ctx g;
    memset(&g, 0, sizeof g);
    g.s = s, g.sl = sl, g.j = j;
    g.meta = (struct resp_meta){.kind = j->req.kind,
                                .id = j->id,
                                .created = j->created,
                                .model = j->model,
                                .index = sl->choice,
                                .tools = j->req.tools && j->req.kind == REQ_CHAT,
                                .tool_max = j->req.tool_max};
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
        if (g.meta.tools && g.tool_buffering && !g.tool_bare) { /* the calls went out as they came */
            tool_pump(&g, 1);
            if ((g.scan.calls || g.tool_rest_calls) && !strcmp(finish, "stop")) finish = "tool_calls";
        } else if (g.meta.tools) {
            if (g.tool_hold.len) sbuf_add(&g.all_answer, g.tool_hold.p, g.tool_hold.len);
            if (resp_chunk_tools(&g.ev, &g.meta, g.all_answer.p, g.all_answer.len, 0) && !strcmp(finish, "stop"))
                finish = "tool_calls";
        }
        resp_chunk(&g.ev, &g.meta, NULL, NULL, 0, j->req.kind == REQ_CHAT ? NULL : "", 0, finish);
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
    r1_gmatch_free(g.gm);
    r1_think_free(g.budget);
    stop_free(&g.stop);
    reasoning_free(&g.rs);
    sbuf_free(&g.piece);
    sbuf_free(&g.think);
    sbuf_free(&g.answer);
    sbuf_free(&g.all_think);
    sbuf_free(&g.all_answer);
    sbuf_free(&g.tool_hold);
    sbuf_free(&g.ev);
}
