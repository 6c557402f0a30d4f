/* Sparse attention with the sink and the compressor's softmax pooling (ref/attention), against
 * a straightforward double-precision loop. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "ref/attention.h"
#include "ref/linear.h"
#include "ref/numerics.h"
#include "tests/lib/harness.h"

static float rnd(uint32_t *seed, float lo, float hi)
{
    *seed = *seed * 1664525u + 1013904223u;
    return as_bf16(lo + (hi - lo) * (float)(*seed >> 8) / 16777216.0f);
}

/* kernel.py's sparse_attn written out literally, one entry at a time, in f32 (SPEC 3 step 7): the
 * independent formulation the reference is held to. It differs from ref/attention.c only in the
 * summation order inside the dot products (scalar here, BLAS there). */
static void attention_literal(const float *q, const float *rows, int64_t nrows, const int32_t *idx, int64_t topk,
                              const float *sink, float *o, int64_t s, int nh, int hd, float scale)
{
    float *acc = malloc(sizeof(float) * (size_t)hd), *blk = malloc(sizeof(float) * (size_t)hd);
    REQUIRE(acc && blk, "out of memory");
    for (int64_t t = 0; t < s; t++)
        for (int h = 0; h < nh; h++) {
            const float *qh = q + (t * nh + h) * hd;
            float m = -1e30f, den = 0.0f, z[64];
            int valid = 0;
            memset(acc, 0, sizeof(float) * (size_t)hd);
            for (int64_t b0 = 0; b0 < topk; b0 += 64) {
                int64_t nb = topk - b0 < 64 ? topk - b0 : 64;
                float m_new = m;
                for (int64_t i = 0; i < nb; i++) {
                    int32_t j = idx[t * topk + b0 + i];
                    z[i] = -INFINITY;
                    if (j < 0 || j >= nrows)
                        continue;
                    float d = 0.0f;
                    for (int c = 0; c < hd; c++)
                        d += qh[c] * rows[(int64_t)j * hd + c];
                    z[i] = d * scale;
                    m_new = fmaxf(m_new, z[i]);
                    valid++;
                }
                float c = expf(m - m_new), sum = 0.0f;
                memset(blk, 0, sizeof(float) * (size_t)hd);
                for (int64_t i = 0; i < nb; i++) {
                    float p = expf(z[i] - m_new);
                    sum += p;
                    int32_t j = idx[t * topk + b0 + i];
                    if (j < 0 || j >= nrows)
                        continue;
                    for (int d = 0; d < hd; d++)
                        blk[d] += as_bf16(p) * rows[(int64_t)j * hd + d];
                }
                den = den * c + sum;
                for (int d = 0; d < hd; d++)
                    acc[d] = acc[d] * c + blk[d];
                m = m_new;
            }
            den += expf(sink[h] - m);
            for (int d = 0; d < hd; d++)
                o[(t * nh + h) * hd + d] = valid ? as_bf16(acc[d] / den) : 0.0f;
        }
    free(acc);
    free(blk);
}

/* got against the literal form: at most one bf16 step of the element apart (summation order moves
 * a probability across a bf16 rounding boundary now and then), and mostly the same bits. */
static void check_literal(const char *what, const float *got, const float *want, int64_t n)
{
    int64_t exact = 0, bad = 0;
    for (int64_t i = 0; i < n; i++) {
        double err = fabs((double)got[i] - want[i]), tol = fabs(want[i]) * 0x1p-8 + 1e-6;
        exact += got[i] == want[i];
        if (err > tol && bad++ < 3)
            as_test_fail(__FILE__, __LINE__, "%s: element %lld: got %.9g, literal %.9g", what, (long long)i, got[i],
                         want[i]);
        if (got[i] != as_bf16(got[i]) && bad++ < 3)
            as_test_fail(__FILE__, __LINE__, "%s: element %lld is not a bf16 value", what, (long long)i);
    }
    CHECK(exact * 10 >= n * 9, "%s: only %lld of %lld elements bit-exact with the literal form", what,
          (long long)exact, (long long)n);
    as_test_note("%s: %lld of %lld elements bit-exact with the literal form", what, (long long)exact, (long long)n);
}

TEST(attention_sparse_vs_literal)
{
    enum { S = 3, NH = 4, HD = 72, NROWS = 20, TOPK = 9 };
    float q[S * NH * HD], rows[NROWS * HD], sink[NH], o[S * NH * HD], want[S * NH * HD];
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
    attention_literal(q, rows, NROWS, idx, TOPK, sink, want, S, NH, HD, scale);
    check_literal("sparse attention", o, want, S * NH * HD);

    /* inside one block of 64 the -1 entries may move: the same rows compacted give the same bits */
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
    CHECK(memcmp(o, o2, sizeof o) == 0, "moving the -1 entries inside a block changes the result");
}

/* Hand-computed: hd 2, q = (1, 0), scale 1, so z_i = rows[i][0] exactly. 65 entries: 64 rows
 * (0, 1) with z = 0, then one row (4, 0) with z = 4, no sink (-inf). Block 0: m = 0, p = 1 each,
 * den = 64, acc = (0, 64). Block 1: m = 4, c = exp(-4), p = 1: den = 64 c + 1, acc = (4, 64 c).
 * o = bf16(acc / den). An exact softmax gives the same here (every p is 1 or rescaled exactly). */
TEST(attention_blocks_hand_computed)
{
    enum { TOPK = 65 };
    float q[2] = {1, 0}, rows[2 * 2] = {0, 1, 4, 0}, none[1] = {-INFINITY}, o[2];
    int32_t idx[TOPK];
    for (int i = 0; i < 64; i++)
        idx[i] = 0;
    idx[64] = 1;
    as_sparse_attention(q, rows, 2, idx, TOPK, none, o, 1, 1, 2, 1.0f);
    float c = expf(-4.0f), den = 64.0f * c + 1.0f;
    CHECK(o[0] == as_bf16(4.0f / den) && o[1] == as_bf16(64.0f * c / den), "65 entries: o = (%.9g, %.9g), want "
          "(%.9g, %.9g)", o[0], o[1], as_bf16(4.0f / den), as_bf16(64.0f * c / den));
    /* exactly 64 entries: one block, o = (0, 64 / 64) */
    as_sparse_attention(q, rows, 2, idx, 64, none, o, 1, 1, 2, 1.0f);
    CHECK(o[0] == 0.0f && o[1] == 1.0f, "64 entries: o = (%g, %g), want (0, 1)", o[0], o[1]);
    /* one entry: o = row */
    as_sparse_attention(q, rows, 2, idx + 64, 1, none, o, 1, 1, 2, 1.0f);
    CHECK(o[0] == 4.0f && o[1] == 0.0f, "1 entry: o = (%g, %g), want (4, 0)", o[0], o[1]);
}

/* Where the block boundaries fall is part of the numerics: a row's probability is rounded to bf16
 * against the running max of the blocks up to its own, and the sink is added once at the end,
 * outside that max. With dots that are exact (hd 2, q = (1, 0)) the reference must equal the
 * literal form bit for bit, and over a sweep of scores some results must differ from a one-pass
 * softmax (every p rounded against the final max), and from a softmax with the sink in the max. */
TEST(attention_block_rounding_is_kernels)
{
    float q[2] = {1, 0}, rows[2 * 2], o[2], want[2];
    int32_t idx[65];
    for (int i = 0; i < 65; i++)
        idx[i] = i == 0 ? 0 : i == 64 ? 1 : -1; /* row 0 in block 0, row 1 in block 1 */
    int differs_one_pass = 0, differs_sink_in_max = 0, n = 0;
    for (int k = 1; k <= 64; k++, n++) {
        float z1 = 0.011f * (float)k, sink[1] = {0.013f * (float)k};
        rows[0] = 0.0f, rows[1] = 8.0f, rows[2] = z1, rows[3] = 1.0f;
        as_sparse_attention(q, rows, 2, idx, 65, sink, o, 1, 1, 2, 1.0f);
        attention_literal(q, rows, 2, idx, 65, sink, want, 1, 1, 2, 1.0f);
        CHECK(o[0] == want[0] && o[1] == want[1], "z1 %g: (%.9g, %.9g), literal (%.9g, %.9g)", z1, o[0], o[1],
              want[0], want[1]);
        /* one pass: p0 = bf16(exp(0 - z1)) against the final max z1 */
        float p0 = expf(-z1), den = p0 + 1.0f + expf(sink[0] - z1);
        differs_one_pass += o[1] != as_bf16((as_bf16(p0) * 8.0f + 1.0f) / den);
        /* the sink in the running max: every p against max(sink, z) */
        float m = fmaxf(sink[0], z1), e0 = expf(0.0f - m), e1 = expf(z1 - m), ds = e0 + e1 + expf(sink[0] - m);
        differs_sink_in_max += o[1] != as_bf16((as_bf16(e0) * 8.0f + as_bf16(e1)) / ds);
    }
    CHECK(differs_one_pass > 0, "no score of the sweep tells the blocks from one pass (%d cases)", n);
    CHECK(differs_sink_in_max > 0, "no score of the sweep tells the sink at the end from the sink in the max");
    as_test_note("of %d cases, %d differ from a one-pass softmax, %d from the sink in the max", n, differs_one_pass,
                 differs_sink_in_max);
}

TEST(attention_sink_effects)
{
    enum { NH = 2, HD = 16, NROWS = 4, TOPK = 4 };
    float q[NH * HD], rows[NROWS * HD], o[NH * HD], want[NH * HD];
    int32_t idx[TOPK] = {0, 1, 2, 3};
    uint32_t seed = 5;
    for (int i = 0; i < NH * HD; i++)
        q[i] = rnd(&seed, -1, 1);
    for (int i = 0; i < NROWS * HD; i++)
        rows[i] = rnd(&seed, -1, 1);
    /* a huge sink takes all the mass: exp(sink - m) overflows, o = 0 */
    float big[NH] = {100, 100};
    as_sparse_attention(q, rows, NROWS, idx, TOPK, big, o, 1, NH, HD, 0.25f);
    for (int i = 0; i < NH * HD; i++)
        CHECK(fabsf(o[i]) < 1e-30f, "huge sink: o[%d] = %g", i, o[i]);
    /* sink -inf: plain softmax */
    float none[NH] = {-INFINITY, -INFINITY};
    as_sparse_attention(q, rows, NROWS, idx, TOPK, none, o, 1, NH, HD, 0.25f);
    attention_literal(q, rows, NROWS, idx, TOPK, none, want, 1, NH, HD, 0.25f);
    check_literal("sink -inf", o, want, NH * HD);
    /* every entry -1: only the sink, o = 0 (also with no sink at all, where den would be 0) */
    int32_t empty[TOPK] = {-1, -1, -1, -1};
    float zero[NH] = {0, 0};
    as_sparse_attention(q, rows, NROWS, empty, TOPK, zero, o, 1, NH, HD, 0.25f);
    for (int i = 0; i < NH * HD; i++)
        CHECK(o[i] == 0.0f, "no rows: o[%d] = %g", i, o[i]);
    as_sparse_attention(q, rows, NROWS, empty, TOPK, none, o, 1, NH, HD, 0.25f);
    for (int i = 0; i < NH * HD; i++)
        CHECK(o[i] == 0.0f, "no rows, no sink: o[%d] = %g", i, o[i]);
    /* one row, sink 0, z = 0 (q orthogonal): p = 1, den = 1 + exp(0), o = row/2 */
    float qz[NH * HD] = {0}, o1[NH * HD];
    int32_t one[TOPK] = {2, -1, -1, -1};
    as_sparse_attention(qz, rows, NROWS, one, TOPK, zero, o1, 1, NH, HD, 0.25f);
    for (int i = 0; i < HD; i++)
        CHECK(o1[i] == as_bf16(rows[2 * HD + i] * 0.5f), "z 0, sink 0: o = row / 2 at %d", i);
}

/* The flash geometry per query: 64 heads, hd 512, 640 selected rows in 10 blocks (2 queries, as a
 * size check on the BLAS path), a whole block of -1 among them. */
TEST(attention_flash_shape_vs_literal)
{
    enum { S = 2, NH = 64, HD = 512, NROWS = 700, TOPK = 640 };
    float *q = malloc(sizeof(float) * S * NH * HD), *rows = malloc(sizeof(float) * NROWS * HD);
    float *o = malloc(sizeof(float) * S * NH * HD), sink[NH];
    float *want = malloc(sizeof(float) * S * NH * HD);
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
            idx[t * TOPK + c] = (c * 7 + t) % 11 == 0 || (c >= 128 && c < 192) ? -1 : (c * 13 + t * 5) % NROWS;
    float scale = 1.0f / sqrtf((float)HD);
    as_sparse_attention(q, rows, NROWS, idx, TOPK, sink, o, S, NH, HD, scale);
    attention_literal(q, rows, NROWS, idx, TOPK, sink, want, S, NH, HD, scale);
    check_literal("flash shape", o, want, (int64_t)S * NH * HD);
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
