/* torch's CPU topk(v, k, largest=True) (aten TopKImpl.h, topk_impl_loop), reproduced step by
 * step: (value, index) pairs in index order, comp(a, b) = (isnan(a) && !isnan(b)) || a > b, then
 *   k * 64 <= n: std::partial_sort(first, first + k, last, comp)
 *   otherwise:   std::nth_element(first, first + k - 1, last, comp)
 * and the first k pairs, in the order the algorithm leaves them (ref/topk_algo.h: libstdc++'s
 * algorithms step by step, which decide where equal values, the many -inf, end up). */
#include "ref/topk.h"

#include <math.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef AsTopkPair Pair;

/* a before b: NaN first (largest), then larger values. A strict weak ordering. */
static inline bool comp(const Pair *a, const Pair *b)
{
    return (isnan(a->value) && !isnan(b->value)) || a->value > b->value;
}

static atomic_llong depth_limit_hits;

#define TK_T Pair
#define TK_COMP(a, b) comp(a, b)
#define TK_ON_DEPTH_LIMIT() atomic_fetch_add_explicit(&depth_limit_hits, 1, memory_order_relaxed)
#include "ref/topk_algo.h"

long long as_topk_depth_limit_hits(void) { return atomic_load(&depth_limit_hits); }

/* ---- torch ---- */

/* (value, index) pairs in index order, in scratch (n pairs) or a new array. */
static Pair *index_pairs(const float *v, int64_t n, AsTopkPair *scratch)
{
    Pair *p = scratch ? scratch : malloc((size_t)n * sizeof *p);
    if (!p) {
        fprintf(stderr, "attnscope: topk: out of memory for %lld pairs\n", (long long)n);
        abort();
    }
    for (int64_t j = 0; j < n; j++)
        p[j] = (Pair){v[j], (int32_t)j};
    return p;
}

void as_topk_torch_order(const float *v, int64_t n, int64_t k, int32_t *out, AsTopkPair *scratch)
{
    if (k <= 0 || n <= 0)
        return; /* torch returns an empty result for k == 0 */
    if (k > n)
        k = n;
    Pair *p = index_pairs(v, n, scratch);
    if (as_topk_uses_partial_sort(n, k))
        partial_sort(p, n, k);
    else
        nth_element(p, n, k - 1);
    for (int64_t j = 0; j < k; j++)
        out[j] = p[j].index;
    if (!scratch)
        free(p);
}

static int cmp_i32(const void *a, const void *b)
{
    int32_t x = *(const int32_t *)a, y = *(const int32_t *)b;
    return (x > y) - (x < y);
}

void as_topk_torch_set(const float *v, int64_t n, int64_t k, int32_t *out, AsTopkPair *scratch)
{
    as_topk_torch_order(v, n, k, out, scratch);
    if (k > n)
        k = n;
    if (k > 0)
        qsort(out, (size_t)k, sizeof *out, cmp_i32);
}

/* ---- other tie conventions ---- */

const char *as_tie_order_name(AsTieOrder t)
{
    static const char *const n[AS_TIES_COUNT] = {"cpu", "lowest", "highest"};
    return (unsigned)t < AS_TIES_COUNT ? n[t] : "?";
}

const char *as_tie_order_what(AsTieOrder t)
{
    static const char *const n[AS_TIES_COUNT] = {"the CPU's libstdc++ order", "lowest index first",
                                                 "highest index first"};
    return (unsigned)t < AS_TIES_COUNT ? n[t] : "?";
}

int as_tie_order_parse(const char *s, AsTieOrder *out)
{
    for (int i = 0; s && i < AS_TIES_COUNT; i++)
        if (!strcmp(s, as_tie_order_name((AsTieOrder)i))) {
            *out = (AsTieOrder)i;
            return 0;
        }
    return -1;
}

/* a before b: NaN first, larger values, then among equal values the lower (or higher) index. */
static int cmp_lowest(const void *x, const void *y)
{
    const Pair *a = x, *b = y;
    if (comp(a, b))
        return -1;
    if (comp(b, a))
        return 1;
    return (a->index > b->index) - (a->index < b->index);
}

static int cmp_highest(const void *x, const void *y)
{
    const Pair *a = x, *b = y;
    if (comp(a, b))
        return -1;
    if (comp(b, a))
        return 1;
    return (a->index < b->index) - (a->index > b->index);
}

void as_topk_set_ties(const float *v, int64_t n, int64_t k, int32_t *out, AsTopkPair *scratch, AsTieOrder ties)
{
    if (ties == AS_TIES_CPU) {
        as_topk_torch_set(v, n, k, out, scratch);
        return;
    }
    if (k <= 0 || n <= 0)
        return;
    if (k > n)
        k = n;
    Pair *p = index_pairs(v, n, scratch);
    /* a total order (value, then index), so any sort gives the one answer */
    qsort(p, (size_t)n, sizeof *p, ties == AS_TIES_LOWEST ? cmp_lowest : cmp_highest);
    for (int64_t j = 0; j < k; j++)
        out[j] = p[j].index;
    if (!scratch)
        free(p);
    qsort(out, (size_t)k, sizeof *out, cmp_i32);
}

static _Atomic int reference_ties = AS_TIES_CPU;

void as_topk_set_reference_ties(AsTieOrder t) { atomic_store(&reference_ties, (int)t); }
AsTieOrder as_topk_reference_ties(void) { return (AsTieOrder)atomic_load(&reference_ties); }

void as_topk_reference_set(const float *v, int64_t n, int64_t k, int32_t *out, AsTopkPair *scratch)
{
    as_topk_set_ties(v, n, k, out, scratch, as_topk_reference_ties());
}
