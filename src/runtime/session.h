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

#endif
