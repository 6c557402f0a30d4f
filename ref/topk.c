/* torch's CPU topk(v, k, largest=True) (aten TopKImpl.h, topk_impl_loop), reproduced step by
 * step: (value, index) pairs in index order, comp(a, b) = (isnan(a) && !isnan(b)) || a > b, then
 *   k * 64 <= n: std::partial_sort(first, first + k, last, comp)
 *   otherwise:   std::nth_element(first, first + k - 1, last, comp)
 * and the first k pairs, in the order the algorithm leaves them. Every helper below mirrors the
 * libstdc++ (GCC 12, bits/stl_algo.h and bits/stl_heap.h) function of the same name, on indices
 * into the pair array instead of iterators; the order of comparisons and moves is theirs, which
 * is what decides where equal values (the many -inf) end up. */
#include "ref/topk.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>

typedef AsTopkPair Pair;

/* a before b: NaN first (largest), then larger values. A strict weak ordering. */
static inline bool comp(const Pair *a, const Pair *b)
{
    return (isnan(a->value) && !isnan(b->value)) || a->value > b->value;
}

static inline void iter_swap(Pair *p, int64_t a, int64_t b)
{
    Pair t = p[a];
    p[a] = p[b];
    p[b] = t;
}

/* ---- heap (stl_heap.h): a heap whose top is the element that compares last ---- */

static void push_heap(Pair *p, int64_t hole, int64_t top, Pair value)
{
    int64_t parent = (hole - 1) / 2;
    while (hole > top && comp(&p[parent], &value)) {
        p[hole] = p[parent];
        hole = parent;
        parent = (hole - 1) / 2;
    }
    p[hole] = value;
}

/* Moves the hole down to a leaf along the larger children, then pushes value up from there. */
static void adjust_heap(Pair *p, int64_t hole, int64_t len, Pair value)
{
    const int64_t top = hole;
    int64_t second = hole;
    while (second < (len - 1) / 2) {
        second = 2 * (second + 1);
        if (comp(&p[second], &p[second - 1]))
            second--;
        p[hole] = p[second];
        hole = second;
    }
    if ((len & 1) == 0 && second == (len - 2) / 2) {
        second = 2 * (second + 1);
        p[hole] = p[second - 1];
        hole = second - 1;
    }
    push_heap(p, hole, top, value);
}

static void make_heap(Pair *p, int64_t len)
{
    if (len < 2)
        return;
    for (int64_t parent = (len - 2) / 2;; parent--) {
        adjust_heap(p, parent, len, p[parent]);
        if (parent == 0)
            return;
    }
}

/* Heap [0, last); the top goes to `result`, *result's old value is sifted in. */
static void pop_heap(Pair *p, int64_t last, int64_t result)
{
    Pair value = p[result];
    p[result] = p[0];
    adjust_heap(p, 0, last, value);
}

static void sort_heap(Pair *p, int64_t last)
{
    while (last > 1) {
        --last;
        pop_heap(p, last, last);
    }
}

/* [first, middle) ends up holding the middle - first pairs that compare first (as a heap). */
static void heap_select(Pair *p, int64_t first, int64_t middle, int64_t last)
{
    make_heap(p + first, middle - first);
    for (int64_t i = middle; i < last; i++)
        if (comp(&p[i], &p[first]))
            pop_heap(p + first, middle - first, i - first);
}

/* ---- introselect (stl_algo.h) ---- */

static void move_median_to_first(Pair *p, int64_t result, int64_t a, int64_t b, int64_t c)
{
    if (comp(&p[a], &p[b])) {
        if (comp(&p[b], &p[c]))
            iter_swap(p, result, b);
        else if (comp(&p[a], &p[c]))
            iter_swap(p, result, c);
        else
            iter_swap(p, result, a);
    } else if (comp(&p[a], &p[c]))
        iter_swap(p, result, a);
    else if (comp(&p[b], &p[c]))
        iter_swap(p, result, c);
    else
        iter_swap(p, result, b);
}

/* Hoare partition around p[pivot] without bound checks: the median-of-three guarantees a
 * stopper on each side. */
static int64_t unguarded_partition(Pair *p, int64_t first, int64_t last, int64_t pivot)
{
    for (;;) {
        while (comp(&p[first], &p[pivot]))
            ++first;
        --last;
        while (comp(&p[pivot], &p[last]))
            --last;
        if (!(first < last))
            return first;
        iter_swap(p, first, last);
        ++first;
    }
}

static int64_t unguarded_partition_pivot(Pair *p, int64_t first, int64_t last)
{
    int64_t mid = first + (last - first) / 2;
    move_median_to_first(p, first, first + 1, mid, last - 1);
    return unguarded_partition(p, first + 1, last, first);
}

static void unguarded_linear_insert(Pair *p, int64_t last)
{
    Pair val = p[last];
    int64_t next = last - 1;
    while (comp(&val, &p[next])) {
        p[last] = p[next];
        last = next;
        --next;
    }
    p[last] = val;
}

static void insertion_sort(Pair *p, int64_t first, int64_t last)
{
    if (first == last)
        return;
    for (int64_t i = first + 1; i != last; ++i) {
        if (comp(&p[i], &p[first])) {
            Pair val = p[i];
            for (int64_t j = i; j > first; j--) /* move_backward(first, i, i + 1) */
                p[j] = p[j - 1];
            p[first] = val;
        } else
            unguarded_linear_insert(p, i);
    }
}

static int64_t lg(int64_t n) { return 63 - __builtin_clzll((unsigned long long)n); }

static void introselect(Pair *p, int64_t first, int64_t nth, int64_t last, int64_t depth_limit)
{
    while (last - first > 3) {
        if (depth_limit == 0) {
            heap_select(p, first, nth + 1, last);
            iter_swap(p, first, nth); /* the nth largest to its final place */
            return;
        }
        --depth_limit;
        int64_t cut = unguarded_partition_pivot(p, first, last);
        if (cut <= nth)
            first = cut;
        else
            last = cut;
    }
    insertion_sort(p, first, last);
}

static void nth_element(Pair *p, int64_t n, int64_t nth)
{
    if (n == 0 || nth == n)
        return;
    introselect(p, 0, nth, n, 2 * lg(n));
}

static void partial_sort(Pair *p, int64_t n, int64_t middle)
{
    heap_select(p, 0, middle, n);
    sort_heap(p, middle);
}

/* ---- torch ---- */

void as_topk_torch_order(const float *v, int64_t n, int64_t k, int32_t *out, AsTopkPair *scratch)
{
    if (k <= 0 || n <= 0)
        return; /* torch returns an empty result for k == 0 */
    if (k > n)
        k = n;
    Pair *p = scratch ? scratch : malloc((size_t)n * sizeof *p);
    if (!p) {
        fprintf(stderr, "attnscope: topk: out of memory for %lld pairs\n", (long long)n);
        abort();
    }
    for (int64_t j = 0; j < n; j++)
        p[j] = (Pair){v[j], (int32_t)j};
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
