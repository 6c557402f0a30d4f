/* Sparse attention with the sink and the compressor's softmax pooling (ref/attention), against
 * a straightforward double-precision loop. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "ref/attention.h"
#include "ref/linear.h"
#include "ref/numerics.h"
#include "tests/harness.h"

static float rnd(uint32_t *seed, float lo, float hi)
{
    *seed = *seed * 1664525u + 1013904223u;
    return as_bf16(lo + (hi - lo) * (float)(*seed >> 8) / 16777216.0f);
}

/* The SPEC formula in double: o = sum_i exp(z_i - m) / den * row_i. */
static void attention_double(const float *q, const float *rows, int64_t nrows, const int32_t *idx,
                             int64_t topk, const float *sink, double *o, int64_t s, int nh, int hd,
                             double scale)
{
    for (int64_t t = 0; t < s; t++)
        for (int h = 0; h < nh; h++) {
            const float *qh = q + (t * nh + h) * hd;
            double m = sink ? sink[h] : -INFINITY, z[4096];
            for (int64_t c = 0; c < topk; c++) {
                int32_t j = idx[t * topk + c];
                z[c] = -INFINITY;
                if (j < 0 || j >= nrows)
                    continue;
                double d = 0;
                for (int i = 0; i < hd; i++)
                    d += (double)qh[i] * rows[(int64_t)j * hd + i];
                z[c] = d * scale;
                m = fmax(m, z[c]);
            }
            double den = sink ? exp(sink[h] - m) : 0;
            for (int64_t c = 0; c < topk; c++)
                den += exp(z[c] - m);
            double *oh = o + (t * nh + h) * hd;
            for (int i = 0; i < hd; i++)
                oh[i] = 0;
            for (int64_t c = 0; c < topk; c++) {
                int32_t j = idx[t * topk + c];
                if (j < 0 || j >= nrows)
                    continue;
                double p = exp(z[c] - m) / den;
                for (int i = 0; i < hd; i++)
                    oh[i] += p * rows[(int64_t)j * hd + i];
            }
        }
}

/* got is bf16 of something within f32 noise of want: at most one bf16 step apart. */
static int check_close(const char *what, const float *got, const double *want, int64_t n)
{
    int bad = 0;
    for (int64_t i = 0; i < n; i++) {
        double err = fabs(got[i] - want[i]), tol = fabs(want[i]) * 0x1p-8 + 1e-6;
        if (err > tol && bad++ < 3)
            as_test_fail(__FILE__, __LINE__, "%s: element %lld: got %.9g, double %.9g", what, (long long)i,
                         got[i], want[i]);
        if (got[i] != as_bf16(got[i]) && bad++ < 3)
            as_test_fail(__FILE__, __LINE__, "%s: element %lld is not a bf16 value", what, (long long)i);
    }
    return bad;
}

TEST(attention_sparse_vs_double)
{
    enum { S = 3, NH = 4, HD = 72, NROWS = 20, TOPK = 9 };
    float q[S * NH * HD], rows[NROWS * HD], sink[NH], o[S * NH * HD];
    double want[S * NH * HD];
    int32_t idx[S * TOPK] = {
        0, 5, -1, 19, 7, 7, -1, 3, 12,     /* a duplicate counts twice */
        -1, -1, -1, -1, 2, -1, -1, -1, -1, /* one row */
        1, 2, 3, 4, 5, 6, 7, 8, 9,
    };
    uint32_t seed = 1;
    for (int i = 0; i < S * NH * HD; i++)
        q[i] = rnd(&seed, -1, 1);
    for (int i = 0; i < NROWS * HD; i++)
        rows[i] = rnd(&seed, -2, 2);
    for (int h = 0; h < NH; h++)
        sink[h] = rnd(&seed, -1, 1);
    float scale = 1.0f / sqrtf((float)HD);
    as_sparse_attention(q, rows, NROWS, idx, TOPK, sink, o, S, NH, HD, scale);
    attention_double(q, rows, NROWS, idx, TOPK, sink, want, S, NH, HD, scale);
    check_close("sparse attention", o, want, S * NH * HD);

    /* -1 entries are skipped: the same rows compacted give the same bits */
    int32_t packed[S * TOPK];
    for (int t = 0; t < S; t++) {
        int n = 0;
        for (int c = 0; c < TOPK; c++)
            if (idx[t * TOPK + c] >= 0)
                packed[t * TOPK + n++] = idx[t * TOPK + c];
        while (n < TOPK)
            packed[t * TOPK + n++] = -1;
    }
    float o2[S * NH * HD];
    as_sparse_attention(q, rows, NROWS, packed, TOPK, sink, o2, S, NH, HD, scale);
    CHECK(memcmp(o, o2, sizeof o) == 0, "moving the -1 entries changes the result");
}

TEST(attention_sink_effects)
{
    enum { NH = 2, HD = 16, NROWS = 4, TOPK = 4 };
    float q[NH * HD], rows[NROWS * HD], o[NH * HD];
    double want[NH * HD];
    int32_t idx[TOPK] = {0, 1, 2, 3};
    uint32_t seed = 5;
    for (int i = 0; i < NH * HD; i++)
        q[i] = rnd(&seed, -1, 1);
    for (int i = 0; i < NROWS * HD; i++)
        rows[i] = rnd(&seed, -1, 1);
    /* a huge sink takes all the mass: o ~ exp(z - 100) ~ 0 */
    float big[NH] = {100, 100};
    as_sparse_attention(q, rows, NROWS, idx, TOPK, big, o, 1, NH, HD, 0.25f);
    for (int i = 0; i < NH * HD; i++)
        CHECK(fabsf(o[i]) < 1e-30f, "huge sink: o[%d] = %g", i, o[i]);
    /* sink -inf: plain softmax */
    float none[NH] = {-INFINITY, -INFINITY};
    as_sparse_attention(q, rows, NROWS, idx, TOPK, none, o, 1, NH, HD, 0.25f);
    attention_double(q, rows, NROWS, idx, TOPK, NULL, want, 1, NH, HD, 0.25);
    check_close("sink -inf", o, want, NH * HD);
    /* every entry -1: only the sink, o = 0 */
    int32_t empty[TOPK] = {-1, -1, -1, -1};
    float zero[NH] = {0, 0};
    as_sparse_attention(q, rows, NROWS, empty, TOPK, zero, o, 1, NH, HD, 0.25f);
    for (int i = 0; i < NH * HD; i++)
        CHECK(o[i] == 0.0f, "no rows: o[%d] = %g", i, o[i]);
    /* one row, sink 0, z = 0 (q orthogonal): p = 1/2, o = row/2 */
    float qz[NH * HD] = {0}, o1[NH * HD];
    int32_t one[TOPK] = {2, -1, -1, -1};
    as_sparse_attention(qz, rows, NROWS, one, TOPK, zero, o1, 1, NH, HD, 0.25f);
    for (int i = 0; i < HD; i++)
        CHECK(o1[i] == as_bf16(rows[2 * HD + i] * 0.5f), "z 0, sink 0: o = row / 2 at %d", i);
}

/* The flash geometry per query: 64 heads, hd 512, 640 selected rows (2 queries, as a size
 * check on the BLAS path). */
TEST(attention_flash_shape_vs_double)
{
    enum { S = 2, NH = 64, HD = 512, NROWS = 700, TOPK = 640 };
    float *q = malloc(sizeof(float) * S * NH * HD), *rows = malloc(sizeof(float) * NROWS * HD);
    float *o = malloc(sizeof(float) * S * NH * HD), sink[NH];
    double *want = malloc(sizeof(double) * S * NH * HD);
    int32_t *idx = malloc(sizeof(int32_t) * S * TOPK);
    REQUIRE(q && rows && o && want && idx, "out of memory");
    uint32_t seed = 11;
    for (int i = 0; i < S * NH * HD; i++)
        q[i] = rnd(&seed, -0.2f, 0.2f);
    for (int i = 0; i < NROWS * HD; i++)
        rows[i] = rnd(&seed, -1, 1);
    for (int h = 0; h < NH; h++)
        sink[h] = rnd(&seed, -2, 2);
    for (int t = 0; t < S; t++)
        for (int c = 0; c < TOPK; c++)
            idx[t * TOPK + c] = (c * 7 + t) % 11 == 0 ? -1 : (c * 13 + t * 5) % NROWS;
    float scale = 1.0f / sqrtf((float)HD);
    as_sparse_attention(q, rows, NROWS, idx, TOPK, sink, o, S, NH, HD, scale);
    attention_double(q, rows, NROWS, idx, TOPK, sink, want, S, NH, HD, scale);
    check_close("flash shape", o, want, (int64_t)S * NH * HD);
    free(q);
    free(rows);
    free(o);
    free(want);
    free(idx);
}

TEST(attention_softmax_pool_hand)
{
    /* r = 2, hd = 4. Channel 0: scores equal -> 1/2 each: (1 + 3) / 2 = 2.
     * Channel 1: scores (ln 3, 0) -> 3/4, 1/4: 0.75 * 2 + 0.25 * 6 = 3.
     * Channel 2: scores (1, -inf) -> 1, 0: 4. Channel 3: scores (0, 1000) -> 0, 1: -5. */
    const float kv[2 * 4] = {1, 2, 4, 7, 3, 6, -4, -5};
    const float score[2 * 4] = {0.5f, logf(3.0f), 1, 0, 0.5f, 0, -INFINITY, 1000};
    const float want[4] = {2, 3, 4, -5};
    float out[4];
    as_softmax_pool(kv, score, 2, 4, out);
    for (int d = 0; d < 4; d++)
        CHECK(out[d] == want[d], "channel %d: %.9g, want %g", d, out[d], want[d]);
    /* r = 1: the row itself, bf16 */
    const float kv1[3] = {0.1f, -2, 5}, sc1[3] = {-7, 0, 3};
    float o1[3];
    as_softmax_pool(kv1, sc1, 1, 3, o1);
    for (int d = 0; d < 3; d++)
        CHECK(o1[d] == as_bf16(kv1[d]), "r 1 channel %d: %g", d, o1[d]);
}

/* The split of work over threads must not change a bit (a debugger compares runs). */
TEST(attention_same_bits_for_any_thread_count)
{
    enum { NH = 64, HD = 512, NROWS = 300, TOPK = 256 };
    const int64_t ss[] = {1, 3, 20};
    float *q = malloc(sizeof(float) * 20 * NH * HD), *rows = malloc(sizeof(float) * NROWS * HD);
    float *o1 = malloc(sizeof(float) * 20 * NH * HD), *o2 = malloc(sizeof(float) * 20 * NH * HD), sink[NH];
    int32_t *idx = malloc(sizeof(int32_t) * 20 * TOPK);
    REQUIRE(q && rows && o1 && o2 && idx, "out of memory");
    uint32_t seed = 21;
    for (int i = 0; i < 20 * NH * HD; i++)
        q[i] = rnd(&seed, -0.3f, 0.3f);
    for (int i = 0; i < NROWS * HD; i++)
        rows[i] = rnd(&seed, -1, 1);
    for (int h = 0; h < NH; h++)
        sink[h] = rnd(&seed, -1, 1);
    for (int i = 0; i < 20 * TOPK; i++)
        idx[i] = (i * 31) % NROWS;
    int before = as_ref_threads();
    for (int k = 0; k < 3; k++) {
        as_ref_set_threads(1);
        as_sparse_attention(q, rows, NROWS, idx, TOPK, sink, o1, ss[k], NH, HD, 0.0441941738f);
        as_ref_set_threads(2);
        as_sparse_attention(q, rows, NROWS, idx, TOPK, sink, o2, ss[k], NH, HD, 0.0441941738f);
        CHECK(memcmp(o1, o2, sizeof(float) * ss[k] * NH * HD) == 0, "s %lld: 1 and 2 threads differ",
              (long long)ss[k]);
    }
    as_ref_set_threads(before);
    free(q);
    free(rows);
    free(o1);
    free(o2);
    free(idx);
}
