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

/* How a top-k breaks exact ties (SPEC 5): AS_TIES_CPU is torch's CPU order above (the reference's,
 * always the default); AS_TIES_LOWEST keeps the lowest indices among equal values, AS_TIES_HIGHEST
 * the highest (conventions another engine may document: `attnscope check --tie-order`). NaN ranks
 * above every number in all three, as torch's comparator puts it. */
typedef enum { AS_TIES_CPU, AS_TIES_LOWEST, AS_TIES_HIGHEST, AS_TIES_COUNT } AsTieOrder;
const char *as_tie_order_name(AsTieOrder t);              /* "cpu", "lowest", "highest" */
const char *as_tie_order_what(AsTieOrder t);              /* "the CPU's libstdc++ order", ... */
int as_tie_order_parse(const char *s, AsTieOrder *out);   /* 0, or -1 for anything else */
/* The index set under a convention, sorted ascending (AS_TIES_CPU: as_topk_torch_set). */
void as_topk_set_ties(const float *v, int64_t n, int64_t k, int32_t *out, AsTopkPair *scratch, AsTieOrder ties);
/* The convention the reference's selections use (the index top-k and the candidate blocks):
 * AS_TIES_CPU unless a command sets another for its whole run, before any reference runs. */
void as_topk_set_reference_ties(AsTieOrder t);
AsTieOrder as_topk_reference_ties(void);
/* as_topk_set_ties under the reference's convention. */
void as_topk_reference_set(const float *v, int64_t n, int64_t k, int32_t *out, AsTopkPair *scratch);

#endif
