/*
 * engine.c - the engine thread of the server: continuous batching. Every
 * slot is one sequence of the shared r1_batch (one KV pool). A slot's worker
 * (sched.c) sends its forward passes here as requests; each step is built
 * from every waiting slot: one row per decoding slot first, then prompt
 * chunks within --batch-tokens (chunked prefill: a long prompt takes several
 * steps between the others' decode rows). A request of a cancelled job is
 * dropped at the next step, so a client that hangs up frees its rows at
 * once. Also the Prometheus text of the counters. Holds sched.mu except
 * during the forward pass; never allocates per step.
 */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "server/sched_impl.h"
#include "util/util.h"

static const double STEP_BUCKETS[N_BUCKETS] = {0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5}; /* seconds */

static void req_finish_locked(struct sched *s, struct slot *sl, const char *err) {
    if (err) {
        sl->req.failed = 1;
        snprintf(sl->req.err, sizeof sl->req.err, "%s", err);
    }
    sl->req.pending = 0;
    s->n_pending--;
    pthread_cond_signal(&sl->cv);
}

static const float *request(struct sched *s, struct slot *sl, const int32_t *ids, int n, float *all, int verify,
                            int *done) {
    pthread_mutex_lock(&s->mu);
    sl->req = (struct fwd_req){.ids = ids, .n = n, .all = all, .last = sl->out, .verify = verify, .pending = 1};
    s->n_pending++;
    pthread_cond_signal(&s->engine_cv);
    while (sl->req.pending) pthread_cond_wait(&sl->cv, &s->mu);
    char msg[256];
    int failed = sl->req.failed;
    if (done) *done = sl->req.n;
    if (failed) snprintf(msg, sizeof msg, "%s", sl->req.err);
    pthread_mutex_unlock(&s->mu);
    if (failed) {
        r1_err("%s", msg);
        return NULL;
    }
    return sl->out;
}

const float *engine_forward(struct sched *s, struct slot *sl, const int32_t *ids, int n, float *all) {
    return request(s, sl, ids, n, all, 0, NULL);
}

const float *engine_verify(struct sched *s, struct slot *sl, const int32_t *ids, int n, float *all, int *done) {
    return request(s, sl, ids, n, all, 1, done);
}

static void deadline_after(struct timespec *ts, long us) {
    clock_gettime(CLOCK_REALTIME, ts);
    ts->tv_nsec += us * 1000L;
    while (ts->tv_nsec >= 1000000000L) ts->tv_sec++, ts->tv_nsec -= 1000000000L;
}

/* The paged KV pool. Each slot's rows in a step need blocks (r1_batch_seq_need);
 * when the free ones do not suffice, the caches of idle slots are emptied,
 * least recently used first (the prefixes they keep for later requests are
 * worth less than a running conversation), then the slot takes the rows
 * that fit: fewer prompt rows, or none, and waits for blocks while the
 * others go on. Only when no slot can step (every busy slot waits for
 * blocks) is the youngest preempted, or, alone, ended (plan_step_locked). */

/* Empty the least recently used idle cache (a kept one or an idle slot's)
 * that holds blocks of its own; 0 when there is none. */
static int evict_locked(struct sched *s, int *free_left) {
    struct slot *best = NULL;
    struct kept *kbest = NULL;
    unsigned long used = 0;
    int best_own = 0;
    for (int i = 0; i < s->n_kept; i++) {
        struct kept *k = &s->kept[i];
        if (!k->n || k->pinned) continue;
        int own = r1_batch_seq_own(s->batch, k->seq);
        if (own > 0 && (!kbest || k->last_used < used)) kbest = k, used = k->last_used, best_own = own;
    }
    for (int i = 0; i < s->o.n_slots; i++) {
        struct slot *o = &s->slots[i];
        if (o->job || o->pinned || !o->n_cache) continue;
        int own = r1_batch_seq_own(s->batch, i);
        if (own > 0 && ((!best && !kbest) || o->last_used < used))
            best = o, kbest = NULL, used = o->last_used, best_own = own;
    }
    if (kbest) {
        kbest->n = 0;
        if (r1_batch_seq_truncate(s->batch, kbest->seq, 0)) return 0;
    } else if (best) {
        best->stable = 0, best->n_cache = 0;
        if (r1_batch_seq_truncate(s->batch, best->index, 0)) return 0;
    } else {
        return 0;
    }
    *free_left += best_own;
    s->pool_evictions++;
    return 1;
}

/* Rows of slot i's take of them that the pool has blocks for (0: none), the blocks counted off free_left. */
static int fit_pool_locked(struct sched *s, int i, int take, int *free_left) {
    if (!s->pool_page || take <= 0) return take;
    for (;;) {
        int need = r1_batch_seq_need(s->batch, i, take);
        if (need >= 0 && need <= *free_left) {
            *free_left -= need;
            return take;
        }
        if (need >= 0 && evict_locked(s, free_left)) continue;
        if (take == 1 || need < 0) return 0;
        take = take > s->pool_page ? take - s->pool_page : 1; /* a block less, down to one row */
    }
}

/* Rows of each waiting slot in the next step: one for every request with
 * one row left (decoding slots), then the verifications of speculating
 * slots (whole, or cut to a fair share of SPEC_ROWS: fewer drafts
 * verified, no wait), then prompt chunks within the budget; all within the
 * KV pool's free blocks. */
static int plan_step_locked(struct sched *s) {
    int rows = 0, all_rows = 0, free_left = 0, starved = 0;
    if (s->pool_page) r1_batch_pool(s->batch, NULL, &free_left);
    for (int i = 0; i < s->o.n_slots; i++) {
        struct slot *sl = &s->slots[i];
        s->st_take[i] = 0;
        if (!sl->req.pending) continue;
        if (s->stopping || !sl->job || sl->job->cancelled) {
            req_finish_locked(s, sl, "cancelled");
            continue;
        }
        int past = r1_batch_seq_n_past(s->batch, i);
        if (past + sl->req.n - sl->req.done > s->n_ctx) { /* fails alone, not the whole step */
            char msg[160];
            snprintf(msg, sizeof msg, "the conversation is full: %d tokens cached + %d new > --ctx %d", past,
                     sl->req.n - sl->req.done, s->n_ctx);
            req_finish_locked(s, sl, msg);
            continue;
        }
        if (sl->req.n - sl->req.done == 1 && rows < s->o.batch_tokens && (!sl->req.all || all_rows < ALL_ROWS_MAX)) {
            if (!fit_pool_locked(s, i, 1, &free_left)) {
                starved++;
                continue;
            }
            s->st_take[i] = 1, rows++;
            if (sl->req.all) all_rows++;
        }
    }
    int n_ver = 0;
    for (int i = 0; i < s->o.n_slots; i++) n_ver += s->slots[i].req.pending && !s->st_take[i] && s->slots[i].req.verify;
    const int ver_cap = s->o.batch_tokens < SPEC_ROWS ? s->o.batch_tokens : SPEC_ROWS;
    for (int i = 0; i < s->o.n_slots && n_ver; i++) {
        struct slot *sl = &s->slots[i];
        if (!sl->req.pending || s->st_take[i] || !sl->req.verify) continue;
        int share = (ver_cap > rows ? ver_cap - rows : 0) / n_ver--;
        if (share < 1) share = 1; /* at least the slot's last token, as a plain decode row */
        if (share > s->o.batch_tokens - rows) share = s->o.batch_tokens - rows;
        if (share > ALL_ROWS_MAX - all_rows) share = ALL_ROWS_MAX - all_rows;
        int take = sl->req.n - sl->req.done < share ? sl->req.n - sl->req.done : share;
        if (take > 0 && !(take = fit_pool_locked(s, i, take, &free_left))) starved++;
        if (take <= 0) continue;         /* the next step */
        sl->req.n = sl->req.done + take; /* the drafts beyond are not verified */
        s->st_take[i] = take, rows += take, all_rows += take;
    }
    /* prompt rows beside answers' rows: at most PREFILL_BESIDE_DECODE, so a
     * long prompt does not hold every answer's next token for a whole
     * 512-row step (the prompt goes on in the steps after) */
    const int prompt_max = rows ? PREFILL_BESIDE_DECODE : s->o.batch_tokens;
    int prompt_rows = 0;
    for (int i = 0; i < s->o.n_slots; i++) {
        struct slot *sl = &s->slots[i];
        if (!sl->req.pending || s->st_take[i] || sl->req.verify) continue;
        int take = sl->req.n - sl->req.done, cap = s->o.batch_tokens - rows;
        if (cap > prompt_max - prompt_rows) cap = prompt_max - prompt_rows;
        if (sl->req.all && cap > ALL_ROWS_MAX - all_rows) cap = ALL_ROWS_MAX - all_rows;
        if (take > cap) take = cap;
        if (take > 0 && !(take = fit_pool_locked(s, i, take, &free_left))) starved++;
        if (take <= 0) continue;
        s->st_take[i] = take, rows += take, prompt_rows += take;
        if (sl->req.all) all_rows += take;
    }
    if (!rows && starved && s->n_pending + s->n_parked >= s->n_busy) {
        /* every running slot waits for blocks only they could give back:
         * the youngest (the latest dispatched) is preempted, its blocks go
         * to the others and it computes its cache again once one of them
         * ends; alone, it ends (a prompt fails with 503, an answer so far
         * ends with finish_reason "length") */
        struct slot *young = NULL;
        for (int i = 0; i < s->o.n_slots; i++) {
            struct slot *sl = &s->slots[i];
            if (sl->req.pending && (!young || sl->last_used > young->last_used)) young = sl;
        }
        if (young) {
            char msg[200];
            int nfree = 0, alone = s->n_busy - s->n_parked <= 1;
            r1_batch_pool(s->batch, NULL, &nfree);
            snprintf(msg, sizeof msg,
                     "the KV pool is full: %d blocks of %d positions, %d free, all held by running conversations "
                     "(--kv-budget)",
                     s->pool_blocks, s->pool_page, nfree);
            young->pool_cut = alone ? 1 : 2;
            if (alone) s->pool_cuts++;
            req_finish_locked(s, young, msg);
        }
    }
    int n = 0;
    for (int i = 0; i < s->o.n_slots; i++) {
        struct slot *sl = &s->slots[i];
        for (int k = 0; k < s->st_take[i]; k++, n++) {
            int at = sl->req.done + k;
            s->st_ids[n] = sl->req.ids[at], s->st_seq[n] = i, s->st_owner[n] = sl;
            s->st_want[n] = sl->req.all || at == sl->req.n - 1;
        }
    }
    return n;
}

void *engine_main(void *arg) {
    struct sched *s = arg;
    const int V = s->vocab;
    pthread_mutex_lock(&s->mu);
    for (;;) {
        while (!s->n_pending && !s->engine_stop) pthread_cond_wait(&s->engine_cv, &s->mu);
        if (s->engine_stop) break;
        /* let the slots still sampling their last token join this step */
        struct timespec dl;
        deadline_after(&dl, GATHER_US);
        while (s->n_pending < s->n_busy && !s->engine_stop && !s->stopping)
            if (pthread_cond_timedwait(&s->engine_cv, &s->mu, &dl) == ETIMEDOUT) break;
        int n = plan_step_locked(s);
        if (!n) continue;
        pthread_mutex_unlock(&s->mu);
        double t0 = r1_now();
        int r = r1_batch_step(s->batch, n, s->st_ids, s->st_seq, s->st_want, s->st_logits);
        double dt = r1_now() - t0;
        char err[256] = "";
        if (r < 0) snprintf(err, sizeof err, "%s", r1_last_error());
        pthread_mutex_lock(&s->mu);
        s->steps++, s->step_rows += n, s->step_sum += dt;
        int b = 0;
        while (b < N_BUCKETS && dt > STEP_BUCKETS[b]) b++;
        s->step_hist[b]++;
        int k = 0; /* logits row */
        for (int t = 0; t < n; t++) {
            struct slot *sl = s->st_owner[t];
            struct fwd_req *q = &sl->req;
            if (r >= 0 && s->st_want[t]) {
                const float *row = s->st_logits + (size_t)k++ * V;
                if (q->all) memcpy(q->all + (size_t)(q->done) * V, row, (size_t)V * sizeof(float));
                if (q->done == q->n - 1) memcpy(q->last, row, (size_t)V * sizeof(float));
            }
            q->done++;
            if (t == n - 1 || s->st_owner[t + 1] != sl) { /* the slot's last row in this step */
                if (r < 0) req_finish_locked(s, sl, err);
                else if (q->done == q->n) req_finish_locked(s, sl, NULL);
            }
        }
    }
    /* stopping: nobody may wait for a step any more */
    for (int i = 0; i < s->o.n_slots; i++)
        if (s->slots[i].req.pending) req_finish_locked(s, &s->slots[i], "the server is stopping");
    pthread_mutex_unlock(&s->mu);
    return NULL;
}

char *sched_metrics_text(struct sched *s) {
    struct sbuf b = {0};
    char line[256];
    pthread_mutex_lock(&s->mu);
#define M(...) (snprintf(line, sizeof line, __VA_ARGS__), sbuf_add(&b, line, strlen(line)))
    M("# HELP r1_requests_total Requests by outcome.\n# TYPE r1_requests_total counter\n");
    M("r1_requests_total{outcome=\"served\"} %ld\n", s->served);
    M("r1_requests_total{outcome=\"cancelled\"} %ld\n", s->cancelled);
    M("r1_requests_total{outcome=\"rejected\"} %ld\n", s->rejected);
    M("# HELP r1_prompt_tokens_total Prompt tokens computed (cached prefixes not counted).\n"
      "# TYPE r1_prompt_tokens_total counter\nr1_prompt_tokens_total %ld\n",
      s->tokens_in);
    M("# HELP r1_prefix_copies_total Prompts that took a longer common prefix from another slot's cache "
      "(copied, not computed).\n# TYPE r1_prefix_copies_total counter\nr1_prefix_copies_total %ld\n",
      s->prefix_copies);
    M("# HELP r1_prefix_copied_tokens_total Prompt tokens so taken from other slots.\n"
      "# TYPE r1_prefix_copied_tokens_total counter\nr1_prefix_copied_tokens_total %ld\n",
      s->prefix_copied);
    if (s->pool_page) {
        int nfree = 0;
        r1_batch_pool(s->batch, NULL, &nfree);
        M("# HELP r1_kv_pool_blocks Blocks of the KV pool all conversations share (r1_kv_pool_block_positions "
          "positions each).\n# TYPE r1_kv_pool_blocks gauge\nr1_kv_pool_blocks %d\n",
          s->pool_blocks);
        M("# HELP r1_kv_pool_block_positions Positions per block.\n# TYPE r1_kv_pool_block_positions gauge\n"
          "r1_kv_pool_block_positions %d\n",
          s->pool_page);
        M("# HELP r1_kv_pool_blocks_free Blocks no cache holds.\n# TYPE r1_kv_pool_blocks_free gauge\n"
          "r1_kv_pool_blocks_free %d\n",
          nfree);
        M("# HELP r1_kv_pool_evictions_total Idle caches emptied to make room.\n"
          "# TYPE r1_kv_pool_evictions_total counter\nr1_kv_pool_evictions_total %ld\n",
          s->pool_evictions);
        M("# HELP r1_kv_pool_preemptions_total Conversations that gave their blocks back to the others and "
          "computed their caches again later.\n# TYPE r1_kv_pool_preemptions_total counter\n"
          "r1_kv_pool_preemptions_total %ld\n",
          s->pool_preempts);
        M("# HELP r1_kv_pool_full_total Requests ended because one conversation needed more than the whole "
          "pool.\n# TYPE r1_kv_pool_full_total counter\nr1_kv_pool_full_total %ld\n",
          s->pool_cuts);
    }
    if (s->n_kept) {
        int kept = 0;
        for (int i = 0; i < s->n_kept; i++) kept += s->kept[i].n > 0;
        M("# HELP r1_prefix_kept Caches of finished conversations kept beyond the slots for their prefixes.\n"
          "# TYPE r1_prefix_kept gauge\nr1_prefix_kept %d\n",
          kept);
    }
    M("# HELP r1_completion_tokens_total Tokens generated.\n# TYPE r1_completion_tokens_total counter\n"
      "r1_completion_tokens_total %ld\n",
      s->tokens_out);
    M("# HELP r1_queue_length Requests waiting for a slot.\n# TYPE r1_queue_length gauge\nr1_queue_length %d\n",
      s->n_queued);
    M("# HELP r1_queue_capacity Requests that may wait (--queue).\n# TYPE r1_queue_capacity gauge\n"
      "r1_queue_capacity %d\n",
      s->o.queue_cap);
    M("# HELP r1_slots_busy Slots generating.\n# TYPE r1_slots_busy gauge\nr1_slots_busy %d\n", s->n_busy);
    M("# HELP r1_slots Slots (--parallel).\n# TYPE r1_slots gauge\nr1_slots %d\n", s->o.n_slots);
    M("# HELP r1_spec_drafted_tokens_total Draft tokens verified by the target (speculative decoding).\n"
      "# TYPE r1_spec_drafted_tokens_total counter\nr1_spec_drafted_tokens_total %ld\n",
      s->spec_drafted);
    M("# HELP r1_spec_accepted_tokens_total Draft tokens kept (each one a token without its own step).\n"
      "# TYPE r1_spec_accepted_tokens_total counter\nr1_spec_accepted_tokens_total %ld\n",
      s->spec_accepted);
    M("# HELP r1_spec_draft_prompt_tokens_total Prompt ids the draft model ran (speculative decoding).\n"
      "# TYPE r1_spec_draft_prompt_tokens_total counter\nr1_spec_draft_prompt_tokens_total %ld\n",
      s->draft_prefilled);
    M("# HELP r1_spec_draft_cached_tokens_total Prompt ids the draft model kept from its cache (a "
      "slot's earlier request).\n# TYPE r1_spec_draft_cached_tokens_total counter\n"
      "r1_spec_draft_cached_tokens_total %ld\n",
      s->draft_reused);
    M("# HELP r1_spec_steps_total Target forwards of speculating requests (verifications and plain steps).\n"
      "# TYPE r1_spec_steps_total counter\nr1_spec_steps_total %ld\n",
      s->spec_steps);
    M("# HELP r1_step_rows_total Rows (tokens) computed by engine steps.\n# TYPE r1_step_rows_total counter\n"
      "r1_step_rows_total %ld\n",
      s->step_rows);
    M("# HELP r1_step_seconds Time of one engine step (a forward pass over every active slot).\n"
      "# TYPE r1_step_seconds histogram\n");
    long cum = 0;
    for (int i = 0; i < N_BUCKETS; i++) {
        cum += s->step_hist[i];
        M("r1_step_seconds_bucket{le=\"%g\"} %ld\n", STEP_BUCKETS[i], cum);
    }
    cum += s->step_hist[N_BUCKETS];
    M("r1_step_seconds_bucket{le=\"+Inf\"} %ld\nr1_step_seconds_sum %.6f\nr1_step_seconds_count %ld\n", cum,
      s->step_sum, s->steps);
#undef M
    pthread_mutex_unlock(&s->mu);
    if (b.failed) {
        sbuf_free(&b);
        return NULL;
    }
    char *out = malloc(b.len + 1);
    if (out) memcpy(out, b.p ? b.p : "", b.len), out[b.len] = 0;
    sbuf_free(&b);
    return out;
}
