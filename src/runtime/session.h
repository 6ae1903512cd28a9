/*
 * session.h - internal session calls beyond the public API (r1infer.h).
 */
#ifndef R1_RUNTIME_SESSION_H
#define R1_RUNTIME_SESSION_H

#include <stdint.h>

#include "r1infer.h"

/* Run n tokens like r1_session_forward and return the argmax of the last
 * row's logits (the lowest index on ties): greedy decoding. On a device
 * backend the argmax runs there and only the id is copied back; the host
 * logits buffer is then not updated. Returns -1 with an error. */
int32_t r1_session_forward_argmax(r1_session_t *s, const int32_t *ids, int n);

/* Benchmarks only: count n more positions as cached without computing them.
 * Their K/V hold whatever the cache memory holds (zeros in a new session),
 * so a later decode step reads exactly the bytes it would after a real
 * prefill. Returns -1 with an error if the context would overflow. */
int r1_session_skip(r1_session_t *s, int n);

#endif
