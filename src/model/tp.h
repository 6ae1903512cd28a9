/*
 * tp.h - tensor parallelism: which share of a model one rank of N holds,
 * the cut that leaves only that share resident, and the three exchanges
 * the forward pass makes (runtime/comm.h carries them). Rank r holds whole
 * KV heads with their group of Q heads (uneven shares when N does not
 * divide them), those heads' rows of Q|K|V and columns of o_proj, a run of
 * FFN columns (gate|up rows, down columns), a run of the vocabulary (LM
 * head rows) and, through the session, the KV cache of its own heads.
 * Embedding and norms are replicated. Nothing here runs a kernel.
 */
#ifndef R1_MODEL_TP_H
#define R1_MODEL_TP_H

#include <stddef.h>

#include "r1infer.h"

struct r1_model;

struct r1_tp {
    int rank, size;
    struct r1_config full;    /* the whole model's shape (the model's cfg is this rank's share) */
    int kv0, kv1;             /* KV heads [kv0, kv1) */
    int q0, q1;               /* Q heads [q0, q1): the groups of those KV heads */
    int f0, f1;               /* FFN columns [f0, f1) */
    int v0, v1;               /* vocabulary rows [v0, v1) of the LM head */
    int *v_counts, *v_displs; /* (size) every rank's vocabulary share, for the gather */
};

/* [lo, hi) of n units for rank r of N: n / N each, one more for the first
 * n % N ranks. */
void r1_tp_share(int n, int r, int N, int *lo, int *hi);

/* The share of rank `rank` of `size` for a model of shape c whose o_proj
 * columns come in blocks of wo_block weights and down_proj columns in blocks
 * of down_block (a cut inside a quantization block would need requantizing).
 * Fills tp (v_counts/v_displs left NULL); -1 with an error that says what
 * to change when the model cannot be cut so (more ranks than KV heads, a
 * head group not a whole number of blocks). */
int r1_tp_plan(const struct r1_config *c, int rank, int size, int wo_block, int down_block, struct r1_tp *tp);

/* Replace m's weights with rank `rank`'s share of `size` ranks (one new
 * arena; the old one is freed), set m->cfg to the share's shape (n_head,
 * n_kv_head, ffn; vocab stays whole) and m->tp. Every rank checks every
 * rank's cut, so all fail alike. 0, or -1 with an error. The exchanges of
 * the forward pass are runtime's (runtime/tp_comm.h). */
int r1_tp_apply(struct r1_model *m, int rank, int size);
void r1_tp_free(struct r1_tp *tp);

#endif
