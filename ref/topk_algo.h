/* libstdc++'s (GCC 12, bits/stl_algo.h and bits/stl_heap.h) nth_element and partial_sort, on
 * indices into an array of TK_T instead of iterators, each helper named after the libstdc++
 * function it mirrors; the order of comparisons and moves is theirs, which is what decides where
 * equal values end up. A template: the includer defines
 *   TK_T                the element type,
 *   TK_COMP(a, b)       whether *a goes before *b (pointers to TK_T), a strict weak ordering,
 *   TK_ON_DEPTH_LIMIT() what happens when introselect reaches its depth limit (a statement),
 * and gets static functions nth_element(p, n, nth) and partial_sort(p, n, middle). ref/topk.c is
 * the includer that matters; tests/test_topk.c includes it with an adversarial comparator that
 * builds a row reaching the depth limit. */
#include <stdint.h>

static inline void iter_swap(TK_T *p, int64_t a, int64_t b)
{
    TK_T t = p[a];
    p[a] = p[b];
    p[b] = t;
}

/* ---- heap (stl_heap.h): a heap whose top is the element that compares last ---- */

static void push_heap(TK_T *p, int64_t hole, int64_t top, TK_T value)
{
    int64_t parent = (hole - 1) / 2;
    while (hole > top && TK_COMP(&p[parent], &value)) {
        p[hole] = p[parent];
        hole = parent;
        parent = (hole - 1) / 2;
    }
    p[hole] = value;
}

/* Moves the hole down to a leaf along the larger children, then pushes value up from there. */
static void adjust_heap(TK_T *p, int64_t hole, int64_t len, TK_T value)
{
    const int64_t top = hole;
    int64_t second = hole;
    while (second < (len - 1) / 2) {
        second = 2 * (second + 1);
        if (TK_COMP(&p[second], &p[second - 1]))
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

static void make_heap(TK_T *p, int64_t len)
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
static void pop_heap(TK_T *p, int64_t last, int64_t result)
{
    TK_T value = p[result];
    p[result] = p[0];
    adjust_heap(p, 0, last, value);
}

static void sort_heap(TK_T *p, int64_t last)
{
    while (last > 1) {
        --last;
        pop_heap(p, last, last);
    }
}

/* [first, middle) ends up holding the middle - first pairs that compare first (as a heap). */
static void heap_select(TK_T *p, int64_t first, int64_t middle, int64_t last)
{
    make_heap(p + first, middle - first);
    for (int64_t i = middle; i < last; i++)
        if (TK_COMP(&p[i], &p[first]))
            pop_heap(p + first, middle - first, i - first);
}

/* ---- introselect (stl_algo.h) ---- */

static void move_median_to_first(TK_T *p, int64_t result, int64_t a, int64_t b, int64_t c)
{
    if (TK_COMP(&p[a], &p[b])) {
        if (TK_COMP(&p[b], &p[c]))
            iter_swap(p, result, b);
        else if (TK_COMP(&p[a], &p[c]))
            iter_swap(p, result, c);
        else
            iter_swap(p, result, a);
    } else if (TK_COMP(&p[a], &p[c]))
        iter_swap(p, result, a);
    else if (TK_COMP(&p[b], &p[c]))
        iter_swap(p, result, c);
    else
        iter_swap(p, result, b);
}

/* Hoare partition around p[pivot] without bound checks: the median-of-three guarantees a
 * stopper on each side. */
static int64_t unguarded_partition(TK_T *p, int64_t first, int64_t last, int64_t pivot)
{
    for (;;) {
        while (TK_COMP(&p[first], &p[pivot]))
            ++first;
        --last;
        while (TK_COMP(&p[pivot], &p[last]))
            --last;
        if (!(first < last))
            return first;
        iter_swap(p, first, last);
        ++first;
    }
}

static int64_t unguarded_partition_pivot(TK_T *p, int64_t first, int64_t last)
{
    int64_t mid = first + (last - first) / 2;
    move_median_to_first(p, first, first + 1, mid, last - 1);
    return unguarded_partition(p, first + 1, last, first);
}

static void unguarded_linear_insert(TK_T *p, int64_t last)
{
    TK_T val = p[last];
    int64_t next = last - 1;
    while (TK_COMP(&val, &p[next])) {
        p[last] = p[next];
        last = next;
        --next;
    }
    p[last] = val;
}

static void insertion_sort(TK_T *p, int64_t first, int64_t last)
{
    if (first == last)
        return;
    for (int64_t i = first + 1; i != last; ++i) {
        if (TK_COMP(&p[i], &p[first])) {
            TK_T val = p[i];
            for (int64_t j = i; j > first; j--) /* move_backward(first, i, i + 1) */
                p[j] = p[j - 1];
            p[first] = val;
        } else
            unguarded_linear_insert(p, i);
    }
}

static int64_t lg(int64_t n) { return 63 - __builtin_clzll((unsigned long long)n); }

static void introselect(TK_T *p, int64_t first, int64_t nth, int64_t last, int64_t depth_limit)
{
    while (last - first > 3) {
        if (depth_limit == 0) {
            TK_ON_DEPTH_LIMIT();
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

static void nth_element(TK_T *p, int64_t n, int64_t nth)
{
    if (n == 0 || nth == n)
        return;
    introselect(p, 0, nth, n, 2 * lg(n));
}

static void partial_sort(TK_T *p, int64_t n, int64_t middle)
{
    heap_select(p, 0, middle, n);
    sort_heap(p, middle);
}

