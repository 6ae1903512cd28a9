/*
 * logprob.c - log-probabilities of a logits row: log-sum-exp in double,
 * and top-k (the argmax is util.h's r1_argmax). The one place both
 * `r1infer perplexity` and the server's logprobs turn logits into
 * log-probabilities, so their values agree. Must not modify the logits
 * (the sampler works on them after).
 */
#include <math.h>

#include "eval/eval.h"

double eval_logsumexp(const float *x, int n) {
    float mx = x[0];
    for (int i = 1; i < n; i++)
        if (x[i] > mx) mx = x[i];
    double sum = 0;
    for (int i = 0; i < n; i++) sum += exp((double)x[i] - (double)mx);
    return (double)mx + log(sum);
}

int eval_top_k(const float *x, int n, int k, int32_t *ids) {
    if (k > n) k = n;
    if (k <= 0) return 0;
    int have = 0;
    for (int i = 0; i < n; i++) {
        /* ids[0..have) sorted descending; strictly greater moves ahead, so
         * among equal values the lower index stays first */
        if (have == k && !(x[i] > x[ids[k - 1]])) continue;
        int at = have < k ? have++ : k - 1;
        while (at > 0 && x[i] > x[ids[at - 1]]) {
            ids[at] = ids[at - 1];
            at--;
        }
        ids[at] = i;
    }
    return k;
}
