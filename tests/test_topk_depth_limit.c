/* SPEC 5's depth-0 fallback of introselect (heap_select, then iter_swap(first, nth)), reached on
 * purpose. A row that drives libstdc++'s median-of-three introselect past its depth limit is built
 * by McIlroy's adversary ("A Killer Adversary for Quicksort", 1999): the algorithm of
 * ref/topk_algo.h runs over element ids whose values are decided only when a comparison needs
 * them, always so that the pivot turns out as bad as possible. The values fixed that way form a
 * row the reference then meets for real: it must take the fallback and still return the k largest. */
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "ref/topk.h"
#include "tests/lib/harness.h"

/* ---- the adversary: ids compared through lazily frozen values ---- */
static int *adv_val;      /* per id: a frozen value, or ADV_GAS */
static int adv_solid;     /* the next frozen value */
static int adv_candidate; /* the gas id most recently compared, frozen first next time */
static int adv_depth_hits;
#define ADV_GAS 1000000

static void adv_freeze(int id) { adv_val[id] = adv_solid++; }

/* "a before b" for a largest-first ordering whose values are the negated frozen ones: a before b
 * when a's frozen value is the smaller. Gas is larger than every frozen value. */
static bool adv_comp(const int *a, const int *b)
{
    if (adv_val[*a] == ADV_GAS && adv_val[*b] == ADV_GAS)
        adv_freeze(*a == adv_candidate ? *a : *b);
    if (adv_val[*a] == ADV_GAS)
        adv_candidate = *a;
    else if (adv_val[*b] == ADV_GAS)
        adv_candidate = *b;
    return adv_val[*a] < adv_val[*b];
}

#define TK_T int
#define TK_COMP(a, b) adv_comp(a, b)
#define TK_ON_DEPTH_LIMIT() (adv_depth_hits++)
#include "ref/topk_algo.h"

/* partial_sort's branch never reaches introselect: the adversary has no use for it */
static void (*const unused_partial_sort)(int *, int64_t, int64_t) __attribute__((unused)) = partial_sort;

/* The row of n values that makes nth_element(n, k - 1) reach the depth limit as the adversary
 * steered it: v[id] = -(frozen value), the ids never compared frozen last. Returns the adversary's
 * own count of depth-limit hits. */
static int adversarial_row(int n, int k, float *v)
{
    int *ids = malloc(sizeof(int) * (size_t)n);
    adv_val = malloc(sizeof(int) * (size_t)n);
    REQUIRE(ids && adv_val, "out of memory");
    for (int i = 0; i < n; i++)
        ids[i] = i, adv_val[i] = ADV_GAS;
    adv_solid = 0, adv_candidate = -1, adv_depth_hits = 0;
    nth_element(ids, n, k - 1);
    for (int i = 0; i < n; i++) {
        if (adv_val[i] == ADV_GAS)
            adv_freeze(i);
        v[i] = -(float)adv_val[i];
    }
    free(ids);
    free(adv_val);
    return adv_depth_hits;
}

TEST(topk_depth_limit_fallback_reached)
{
    /* the nth_element branch (k * 64 > n) at a few sizes, the released index_topk among them */
    const int cases[][2] = {{64, 32}, {256, 128}, {1024, 512}, {600, 590}};
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        const int n = cases[c][0], k = cases[c][1];
        float *v = malloc(sizeof(float) * (size_t)n);
        int32_t *set = malloc(sizeof(int32_t) * (size_t)k);
        REQUIRE(v && set, "out of memory");
        int steered = adversarial_row(n, k, v);
        long long before = as_topk_depth_limit_hits();
        as_topk_torch_set(v, n, k, set, NULL);
        long long hits = as_topk_depth_limit_hits() - before;
        CHECK(steered > 0 && hits == steered, "n %d, k %d: the adversary reached the depth limit %d times, the "
              "reference %lld times (want the same, > 0)", n, k, steered, hits);
        /* the values are a permutation of 0 .. -(n - 1): the k largest are exactly those > -k */
        int wrong = 0;
        for (int i = 0; i < k; i++)
            wrong += !(v[set[i]] > -(float)k);
        CHECK(wrong == 0, "n %d, k %d: %d of the %d picks are not among the k largest", n, k, wrong, k);
        as_test_note("n %d, k %d: introselect fell back to heap_select %lld time(s); the set is the k largest", n, k,
                     hits);
        free(v);
        free(set);
    }
}
