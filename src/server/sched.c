/*
 * sched.c - slots, queue and workers; see sched.h. The generation loop is
 * gen.c, the engine thread that runs the forward passes engine.c.
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
#define POLL_MS 100 /* how often a waiting connection checks its client */

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

static void *worker_main(void *arg) {
    struct slot *sl = arg;
    struct sched *s = sl->sched;
    pthread_mutex_lock(&s->mu);
    for (;;) {
        while (!sl->job && !s->stopping) pthread_cond_wait(&sl->cv, &s->mu);
        struct job *j = sl->job;
        if (!j) break;
        pthread_mutex_unlock(&s->mu);
        sched_run_job(s, sl, j);
        pthread_mutex_lock(&s->mu);
        if (j->running == 0) j->state = JOB_DONE;
        sl->job = NULL;
        sl->stable = sl->n_cache; /* idle: its whole cache may be taken */
        s->n_busy--;
        s->n_finished++;
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
    if (s->o.n_keep < 0) s->o.n_keep = 0;
    struct r1_batch_opts bo = {.n_seq = s->o.n_slots + s->o.n_keep,
                               .n_ctx = o->n_ctx,
                               .n_batch = s->o.batch_tokens,
                               .backend = o->backend,
                               .n_threads = o->n_threads,
                               .kv_dtype = o->kv_dtype,
                               .pool_pos = o->pool_pos,
                               .lead = o->lead};
    if (!(s->batch = r1_batch_new(m, &bo))) goto fail;
    s->n_ctx = r1_batch_n_ctx(s->batch);
    s->pool_page = r1_batch_pool(s->batch, &s->pool_blocks, NULL);
    if (s->o.n_keep && !(s->kept = calloc((size_t)s->o.n_keep, sizeof *s->kept))) {
        r1_err("out of memory for the kept caches");
        goto fail;
    }
    s->n_kept = s->o.n_keep;
    for (int i = 0; i < s->n_kept; i++) s->kept[i].seq = s->o.n_slots + i;
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
            int dmax = r1_model_config(o->draft)->max_pos; /* drafts while its context lasts */
            struct r1_session_opts dso = {.n_ctx = s->n_ctx < dmax ? s->n_ctx : dmax,
                                          .backend = o->backend,
                                          .n_threads = o->draft_threads > 0 ? o->draft_threads : 1,
                                          .kv_dtype = o->kv_dtype};
            sl->draft_ids = malloc((size_t)s->n_ctx * sizeof(int32_t));
            if (!sl->draft_ids || !(sl->draft = r1_session_new(o->draft, &dso))) {
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
        free(s->slots[i].draft_ids);
    }
    free(s->slots);
    for (int i = 0; i < s->n_kept; i++) free(s->kept[i].ids);
    free(s->kept);
    r1_batch_free(s->batch);
    free(s->st_ids);
    free(s->st_seq);
    free(s->st_want);
    free(s->st_owner);
    free(s->st_take);
    free(s->st_logits);
    r1_gvocab_free(s->gvocab);
    pthread_cond_destroy(&s->engine_cv);
    pthread_cond_destroy(&s->idle_cv);
    pthread_mutex_destroy(&s->mu);
    free(s);
}

int sched_n_ctx(const struct sched *s) { return s->n_ctx; }
const r1_tokenizer_t *sched_tokenizer(const struct sched *s) { return s->tok; }

void sched_stats(struct sched *s, struct sched_stats *st) {
    pthread_mutex_lock(&s->mu);
    *st = (struct sched_stats){.slots = s->o.n_slots,
                               .busy = s->n_busy,
                               .queued = s->n_queued,
                               .queue_cap = s->o.queue_cap,
                               .served = s->served,
                               .cancelled = s->cancelled,
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
            if (j->in_think && r->no_think) { /* an empty, closed think block: the answer comes at once */
                char *t2 = malloc(len + 16);
                if (!t2) {
                    free(text);
                    return api_error_set(err, 500, "server_error", NULL, NULL, "out of memory");
                }
                memcpy(t2, text, len);
                memcpy(t2 + len, "\n\n</think>\n\n", 13); /* with the NUL */
                free(text);
                text = t2;
                j->in_think = 0;
            }
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
    for (int i = 0; i < r->n_bias; i++)
        if (r->bias_ids[i] >= s->vocab)
            return api_error_set(err, 400, "invalid_request_error", "logit_bias", NULL,
                                 "'logit_bias' names token id %d; the vocabulary has %d", r->bias_ids[i], s->vocab);
    if (r->gram) { /* the token bytes, once per server (built outside the lock: the engine runs on) */
        pthread_mutex_lock(&s->mu);
        int have = s->gvocab != NULL;
        pthread_mutex_unlock(&s->mu);
        r1_gvocab_t *v = have ? NULL : r1_gvocab_new(s->tok, s->vocab, s->stop_ids, s->n_stop_ids);
        pthread_mutex_lock(&s->mu);
        if (!s->gvocab) s->gvocab = v, v = NULL;
        int ok = s->gvocab != NULL;
        pthread_mutex_unlock(&s->mu);
        r1_gvocab_free(v); /* another request built it first */
        if (!ok) return api_error_set(err, 500, "server_error", NULL, NULL, "grammar: %s", r1_last_error());
    }
    if (j->n_ids == 0) return api_error_set(err, 400, "invalid_request_error", param, NULL, "the prompt is empty");
    if (j->n_ids >= s->n_ctx)
        return api_error_set(err, 400, "invalid_request_error", param, "context_length_exceeded",
                             "This model's maximum context length is %d tokens, but the prompt has %d tokens "
                             "(and at least one must be generated). Shorten the prompt or start the server "
                             "with a larger --ctx.",
                             s->n_ctx, j->n_ids);
    if (s->pool_page && (long)j->n_ids >= (long)s->pool_page * s->pool_blocks)
        return api_error_set(err, 400, "invalid_request_error", param, "context_length_exceeded",
                             "The prompt has %d tokens, but the server's KV pool holds %ld positions for all "
                             "conversations together. Shorten the prompt or start the server with a larger "
                             "--kv-budget.",
                             j->n_ids, (long)s->pool_page * s->pool_blocks);
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
