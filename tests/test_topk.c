/* torch's CPU topk (ref/topk): every case of the torch fixture, set and unsorted order exact,
 * then the edges (k == 0, k == n, n == 1, all -inf, NaN) and a property check on random rows. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "ref/topk.h"
#include "tests/lib/fixtures.h"
#include "tests/lib/harness.h"

/* "[3] got 17, torch 12" for the first differing position. */
static int first_diff(const int32_t *a, const int32_t *b, int64_t k)
{
    for (int64_t i = 0; i < k; i++)
        if (a[i] != b[i])
            return (int)i;
    return -1;
}

TEST(topk_torch_fixture)
{
    AsTopkFixture f;
    char err[512];
    REQUIRE(as_fixture_load_topk(&f, err, sizeof err) == 0, "%s", err);
    int set_ok = 0, order_ok = 0, n_nth = 0, n_ps = 0;
    for (int c = 0; c < f.n_cases; c++) {
        const AsTopkCase *tc = &f.cases[c];
        bool ps = as_topk_uses_partial_sort(tc->n, tc->k);
        n_ps += ps;
        n_nth += !ps;
        CHECK(ps == tc->partial_sort, "case %d (%s): n %lld k %lld: branch differs from the fixture's", c,
              tc->note, (long long)tc->n, (long long)tc->k);
        int32_t *order = malloc((size_t)(tc->k + 1) * sizeof *order);
        int32_t *set = malloc((size_t)(tc->k + 1) * sizeof *set);
        REQUIRE(order && set, "out of memory");
        as_topk_torch_order(tc->values, tc->n, tc->k, order, NULL);
        as_topk_torch_set(tc->values, tc->n, tc->k, set, NULL);
        int ds = first_diff(set, tc->set, tc->k), dord = first_diff(order, tc->unsorted_order, tc->k);
        set_ok += ds < 0;
        order_ok += dord < 0;
        if (ds >= 0)
            as_test_fail(__FILE__, __LINE__,
                         "case %d (%s, %s): n %lld k %lld: set differs at [%d]: got %d, torch %d", c, tc->note,
                         ps ? "partial_sort" : "nth_element", (long long)tc->n, (long long)tc->k, ds, set[ds],
                         tc->set[ds]);
        if (dord >= 0)
            as_test_fail(__FILE__, __LINE__,
                         "case %d (%s, %s): n %lld k %lld: unsorted order differs at [%d]: got %d, torch %d",
                         c, tc->note, ps ? "partial_sort" : "nth_element", (long long)tc->n, (long long)tc->k,
                         dord, order[dord], tc->unsorted_order[dord]);
        free(order);
        free(set);
    }
    as_test_note("topk fixtures (%s): %d cases: set exact %d/%d, unsorted order exact %d/%d (nth_element %d, "
                 "partial_sort %d)", f.source, f.n_cases, set_ok, f.n_cases, order_ok, f.n_cases, n_nth, n_ps);
    CHECK(f.n_cases > 0 && n_nth > 0 && n_ps > 0, "the fixture should exercise both branches");
    as_fixture_free_topk(&f);
}

TEST(topk_edges)
{
    const float v[5] = {1.0f, 5.0f, 3.0f, 5.0f, -INFINITY};
    int32_t out[8];
    for (int i = 0; i < 8; i++)
        out[i] = -7;
    as_topk_torch_set(v, 5, 0, out, NULL);
    CHECK(out[0] == -7, "k == 0 writes nothing");

    as_topk_torch_set(v, 5, 5, out, NULL);
    for (int i = 0; i < 5; i++)
        CHECK(out[i] == i, "k == n: set is everything, [%d] = %d", i, out[i]);

    const float one = 2.0f;
    as_topk_torch_set(&one, 1, 1, out, NULL);
    CHECK(out[0] == 0, "n == 1");

    /* two equal maxima: both kept */
    as_topk_torch_set(v, 5, 2, out, NULL);
    CHECK(out[0] == 1 && out[1] == 3, "k 2: {%d, %d}, want {1, 3}", out[0], out[1]);

    /* all -inf: a set of k distinct valid indices */
    float ninf[40];
    for (int i = 0; i < 40; i++)
        ninf[i] = -INFINITY;
    int32_t s40[40];
    as_topk_torch_set(ninf, 40, 7, s40, NULL);
    for (int i = 0; i < 7; i++)
        CHECK(s40[i] >= 0 && s40[i] < 40 && (i == 0 || s40[i] > s40[i - 1]), "all -inf: bad set entry %d", s40[i]);

    /* NaN counts as the largest (torch's comparator), on both branches */
    const float nanrow[6] = {1.0f, NAN, 3.0f, NAN, 2.0f, -1.0f};
    as_topk_torch_set(nanrow, 6, 3, out, NULL);
    CHECK(out[0] == 1 && out[1] == 2 && out[2] == 3, "NaN row k 3: {%d %d %d}, want {1 2 3}", out[0], out[1], out[2]);
    float big[640];
    for (int i = 0; i < 640; i++)
        big[i] = (float)(i % 97);
    big[5] = NAN;
    big[600] = NAN;
    as_topk_torch_set(big, 640, 3, out, NULL); /* 3 * 64 <= 640: partial_sort */
    CHECK(as_topk_uses_partial_sort(640, 3), "branch");
    CHECK(out[0] == 5 && out[2] == 600, "NaN row partial_sort: {%d %d %d} should hold 5 and 600", out[0], out[1], out[2]);
}

static int cmp_desc(const void *x, const void *y)
{
    float a = *(const float *)x, b = *(const float *)y;
    return (a < b) - (a > b);
}

/* Random rows with many ties and -inf: the picked values are the k largest (as a multiset),
 * on both branches; scratch or not gives the same order. */
TEST(topk_random_rows_select_the_largest)
{
    uint32_t seed = 99;
    float v[3000], sorted[3000];
    int32_t a[3000], b[3000];
    AsTopkPair *scratch = malloc(3000 * sizeof *scratch);
    REQUIRE(scratch, "out of memory");
    int rows = 0;
    for (int n = 1; n <= 3000; n = n * 3 + 1) {
        for (int64_t k = 0; k <= n; k = k * 2 + 1) {
            for (int i = 0; i < n; i++) {
                seed = seed * 1664525u + 1013904223u;
                unsigned r = seed >> 24;
                v[i] = r < 64 ? -INFINITY : (float)(r % 13);
            }
            as_topk_torch_order(v, n, k, a, scratch);
            as_topk_torch_order(v, n, k, b, NULL);
            CHECK(first_diff(a, b, k) < 0, "n %d k %lld: scratch changes the order", n, (long long)k);
            memcpy(sorted, v, (size_t)n * sizeof *v);
            qsort(sorted, (size_t)n, sizeof *sorted, cmp_desc); /* the k largest, plainly */
            for (int64_t i = 0; i < k; i++)
                for (int64_t j = 0; j < i; j++)
                    CHECK(a[i] != a[j], "n %d k %lld: index %d picked twice", n, (long long)k, a[i]);
            double sum_got = 0, sum_want = 0;
            int ninf_got = 0, ninf_want = 0;
            for (int64_t i = 0; i < k; i++) {
                float g = v[a[i]];
                if (isinf(g)) ninf_got++; else sum_got += g;
                if (isinf(sorted[i])) ninf_want++; else sum_want += sorted[i];
            }
            CHECK(sum_got == sum_want && ninf_got == ninf_want, "n %d k %lld: picked values are not the top k", n,
                  (long long)k);
            rows++;
        }
    }
    as_test_note("%d random rows (n up to 3000, both branches): top-k values right", rows);
    free(scratch);
}
