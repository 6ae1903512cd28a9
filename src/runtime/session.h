/*
 * session.h - internal session calls beyond the public API (r1infer.h).
 */
#ifndef R1_RUNTIME_SESSION_H
#define R1_RUNTIME_SESSION_H

#include <stddef.h>
#include <stdint.h>

#include "r1infer.h"

/* Run n tokens like r1_session_forward and return the argmax of the last
 * row's logits (the lowest index on ties): greedy decoding. On a device
 * backend the argmax runs there and only the id is copied back; the host
 * logits buffer is then not updated. Returns -1 with an error. */
int32_t r1_session_forward_argmax(r1_session_t *s, const int32_t *ids, int n);

/* Benchmarks only: count n more positions as cached without computing them.
 * Their K/V are set to zeros (written, so their pages are real memory; a
 * device backend's hold whatever its zeroed allocation holds), so a later
 * decode step reads exactly the bytes it would after a real prefill.
 * Returns -1 with an error if the context would overflow. */
int r1_session_skip(r1_session_t *s, int n);

/* Bytes one position takes in a sequence's KV cache of dtype kv (keys and
 * values, every layer). */
size_t r1_kv_pos_bytes(const struct r1_config *c, enum r1_dtype kv);

/* The default context's rule (r1_ctx_default), as a pure function for tests:
 * max_pos, unless positions of pos_bytes each would not fit in avail bytes
 * of free memory less a headroom (a quarter of it, at least 1 GiB): then the
 * most that fit, in steps of 256, at least min(max_pos, 256), and *capped = 1.
 * avail or pos_bytes 0 (unknown): max_pos. */
int r1_ctx_pick(int max_pos, size_t pos_bytes, unsigned long long avail, int *capped);

/* For tests: a host session's rope tables (cos, sin: (n_ctx, head_dim/2)) and
 * how many of their rows are computed so far (they are filled as positions
 * are reached); the rows [p0, p1) computed afresh into c, s. */
int r1_session_rope_host(const r1_session_t *s, const float **cos_tab, const float **sin_tab);
void r1_rope_rows(const r1_model_t *m, float *c, float *s, int p0, int p1);

#endif
