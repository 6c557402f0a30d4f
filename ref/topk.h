/* torch's CPU topk(v, k, largest=True) index set, ties included (SPEC section 5): libstdc++'s
 * nth_element (k * 64 > n) or partial_sort (k * 64 <= n) over (value, index) pairs, emulated
 * step by step so that equal values (the many -inf) come out exactly as torch leaves them. */
#ifndef AS_TOPK_H
#define AS_TOPK_H

#include <stdbool.h>
#include <stdint.h>

typedef struct {
    float value;
    int32_t index;
} AsTopkPair;

/* true when torch takes the partial_sort branch. */
static inline bool as_topk_uses_partial_sort(int64_t n, int64_t k) { return k * 64 <= n; }

/* The indices in the order torch.topk(..., sorted=False) returns them. scratch holds n pairs
 * (NULL: allocated here). 0 <= k <= n. */
void as_topk_torch_order(const float *v, int64_t n, int64_t k, int32_t *out, AsTopkPair *scratch);
/* How many times introselect has reached its depth limit and fallen back to heap_select (SPEC 5),
 * since the process started: for the test that reaches it. */
long long as_topk_depth_limit_hits(void);
/* The index set, sorted ascending (what the model uses). */
void as_topk_torch_set(const float *v, int64_t n, int64_t k, int32_t *out, AsTopkPair *scratch);

#endif
