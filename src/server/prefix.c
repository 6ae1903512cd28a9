/*
 * prefix.c - prefix sharing between the server's slots: a request's slot
 * keeps what its cache shares with the prompt, or takes a longer prefix
 * from another slot or from a kept cache (retained beyond the slots when a
 * slot moves on to another prompt); with a paged KV pool the blocks are
 * shared, not copied. The pinning that keeps a source's positions as they
 * are while a copy reads them is here too.
 */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "server/sched_impl.h"

/* Before writing slot o's KV below its stable positions: wait until no
 * copy reads them, and offer only the first keep meanwhile. */
void slot_claim(struct sched *s, struct slot *o, int keep) {
    pthread_mutex_lock(&s->mu);
    while (o->pinned) pthread_cond_wait(&s->idle_cv, &s->mu);
    o->stable = keep;
    pthread_mutex_unlock(&s->mu);
}

void slot_stable(struct sched *s, struct slot *o, int n) {
    pthread_mutex_lock(&s->mu);
    o->stable = n;
    pthread_mutex_unlock(&s->mu);
}

#define PREFIX_COPY_MIN 16 /* tokens a copy must save over the slot's own cache */
#define KEEP_MIN 64        /* tokens of a slot's cache worth keeping when it moves on (a block) */

/* Before the slot's cache is cut to the keep tokens the new prompt shares:
 * what it held, when that is KEEP_MIN tokens more and no kept cache
 * already holds it, replaces a kept cache it extends, else the least
 * recently used one (its blocks shared, not copied). */
static void retain(struct sched *s, struct slot *sl, int keep) {
    const int n = sl->n_cache;
    if (!s->n_kept || n - keep < KEEP_MIN) return;
    struct kept *e = NULL;
    pthread_mutex_lock(&s->mu);
    for (int i = 0; i < s->n_kept; i++) {
        struct kept *k = &s->kept[i];
        if (k->n >= n && common_prefix(k->ids, k->n, sl->cache, n) == n) { /* held already */
            k->last_used = ++s->tick;
            pthread_mutex_unlock(&s->mu);
            return;
        }
        if (k->pinned) continue;
        if (k->n && common_prefix(k->ids, k->n, sl->cache, n) == k->n) { /* ours holds it: replace it */
            e = k;
            break;
        }
        if (!e || (k->n ? k->last_used : 0) < (e->n ? e->last_used : 0)) e = k;
    }
    if (e) e->n = 0, e->pinned++;
    pthread_mutex_unlock(&s->mu);
    if (!e) return;
    int ok = 1;
    if (e->cap < n) {
        int32_t *p = realloc(e->ids, (size_t)n * sizeof *p);
        if (p) e->ids = p, e->cap = n;
        else ok = 0;
    }
    ok = ok && !r1_batch_seq_copy(s->batch, e->seq, sl->index, n);
    if (ok) memcpy(e->ids, sl->cache, (size_t)n * sizeof(int32_t));
    else r1_batch_seq_truncate(s->batch, e->seq, 0);
    pthread_mutex_lock(&s->mu);
    e->n = ok ? n : 0;
    e->last_used = ++s->tick;
    e->pinned--;
    pthread_mutex_unlock(&s->mu);
}

/* The prompt's start as this slot keeps it (keep tokens of its own cache),
 * or, when another slot holds a longer common prefix (a shared system
 * prompt or tool list, a conversation that went on in another slot), that
 * prefix's KV copied over instead of computed. Returns the positions kept;
 * the slot's cache is truncated to them. */
int prefix_take(struct sched *s, struct slot *sl, const struct job *j, int keep) {
    struct slot *from = NULL;
    struct kept *kfrom = NULL;
    int got = keep;
    pthread_mutex_lock(&s->mu);
    while (sl->pinned) pthread_cond_wait(&s->idle_cv, &s->mu);
    pthread_mutex_unlock(&s->mu);
    retain(s, sl, keep);
    pthread_mutex_lock(&s->mu);
    for (int i = 0; i < s->o.n_slots; i++) {
        struct slot *o = &s->slots[i];
        if (o == sl || !o->stable) continue;
        int lcp = common_prefix(o->cache, o->stable, j->ids, j->n_ids - 1);
        if (lcp >= got + PREFIX_COPY_MIN) got = lcp, from = o;
    }
    for (int i = 0; i < s->n_kept; i++) {
        struct kept *k = &s->kept[i];
        int lcp = k->n ? common_prefix(k->ids, k->n, j->ids, j->n_ids - 1) : 0;
        if (lcp >= got + PREFIX_COPY_MIN) got = lcp, from = NULL, kfrom = k;
    }
    if (from) from->pinned++;
    if (kfrom) kfrom->pinned++;
    sl->stable = from || kfrom ? 0 : keep;
    pthread_mutex_unlock(&s->mu);
    int rc = r1_batch_seq_truncate(s->batch, sl->index, keep);
    if (rc) keep = 0, r1_batch_seq_truncate(s->batch, sl->index, 0);
    const int src = from ? from->index : kfrom ? kfrom->seq : -1;
    if (src >= 0 && !r1_batch_seq_copy(s->batch, sl->index, src, got)) {
        memcpy(sl->cache, from ? from->cache : kfrom->ids, (size_t)got * sizeof(int32_t));
    } else {
        if (src >= 0) r1_batch_seq_truncate(s->batch, sl->index, keep); /* a failed copy changed nothing */
        got = keep;
    }
    pthread_mutex_lock(&s->mu);
    if (from || kfrom) {
        if (from) from->pinned--;
        if (kfrom) kfrom->pinned--, kfrom->last_used = ++s->tick;
        pthread_cond_broadcast(&s->idle_cv);
        if (got > keep) s->prefix_copies++, s->prefix_copied += got - keep;
    }
    sl->stable = got;
    pthread_mutex_unlock(&s->mu);
    return got;
}
