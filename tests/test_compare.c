/* driver/compare.c against SPEC section 6: tolerance edges, NaN and -inf, worst coordinates,
 * bf16 ulp distance, quantisation flips built with the real quantisers, selection near-ties. */
#include <math.h>
#include <string.h>

#include "driver/compare.h"
#include "ref/indexer.h"
#include "ref/numerics.h"
#include "ref/quant.h"
#include "tests/lib/harness.h"

static float *mkf(AsRun *r, AsTensorId id, int nd, int64_t d0, int64_t d1, int64_t d2)
{
    float *p = as_run_shape(r, id, nd, d0, d1, d2);
    REQUIRE(p, "allocating %s", as_tensor_desc[id].name);
    memset(p, 0, (size_t)as_ht_numel(&r->t[id]) * sizeof *p);
    return p;
}

static int32_t *mki(AsRun *r, AsTensorId id, int64_t d0, int64_t d1)
{
    int32_t *p = as_run_shape(r, id, 2, d0, d1, 0);
    REQUIRE(p, "allocating %s", as_tensor_desc[id].name);
    return p;
}

static void copy_run(AsRun *dst, const AsRun *src)
{
    as_run_init(dst);
    REQUIRE(as_run_copy(dst, src) == 0, "as_run_copy");
}

static AsTensorDiff cmp1(const AsRun *g, const AsRun *w, AsTensorId id)
{
    AsCompareOptions o;
    as_compare_options_default(&o);
    o.cand_block = 2;
    AsTensorDiff d;
    as_compare_tensor(g, w, id, &o, &d);
    return d;
}

TEST(compare_identical_runs_pass)
{
    AsRun w, g;
    as_run_init(&w);
    float *q = mkf(&w, AS_T_Q, 3, 2, 3, 4);
    for (int i = 0; i < 24; i++)
        q[i] = as_bf16((float)i * 0.37f - 3);
    float *sc = mkf(&w, AS_T_ISCORE, 2, 2, 4, 0);
    sc[0] = 1, sc[1] = -INFINITY, sc[5] = -INFINITY;
    int32_t *idx = mki(&w, AS_T_IDX, 2, 3);
    for (int i = 0; i < 6; i++)
        idx[i] = i % 3 == 2 ? -1 : i;
    copy_run(&g, &w);
    AsCompareOptions o;
    as_compare_options_default(&o);
    AsLayerDiff ld;
    as_compare_layer(&g, &w, &o, &ld);
    CHECK(ld.verdict == AS_V_PASS, "identical runs: layer verdict %s, want pass", as_verdict_name(ld.verdict));
    CHECK(ld.t[AS_T_Q].verdict == AS_V_PASS && ld.t[AS_T_Q].worst == -1 && ld.t[AS_T_Q].max_abs == 0,
          "q identical: %s worst %lld", as_verdict_name(ld.t[AS_T_Q].verdict), (long long)ld.t[AS_T_Q].worst);
    CHECK(ld.t[AS_T_OUT].verdict == AS_V_ABSENT, "out absent on both sides: %s", as_verdict_name(ld.t[AS_T_OUT].verdict));
    CHECK(as_verdict_ok(ld.verdict), "pass is ok");
    as_run_free(&w);
    as_run_free(&g);
}

TEST(compare_tolerance_edges)
{
    AsRun w, g;
    as_run_init(&w);
    float *o = mkf(&w, AS_T_OUT, 2, 1, 4, 0);
    o[0] = 1.0f, o[1] = -0.5f, o[2] = 0.25f, o[3] = 0;
    copy_run(&g, &w);
    float *go = g.t[AS_T_OUT].data;
    double tol = 1.0 * 0x1p-7 + 1e-4; /* 0.0079125 */
    go[2] = (float)(0.25 + tol * 0.99);
    AsTensorDiff d = cmp1(&g, &w, AS_T_OUT);
    CHECK(d.verdict == AS_V_PASS, "just inside tolerance (%.6g <= %.6g): %s", tol * 0.99, d.tol, as_verdict_name(d.verdict));
    CHECK(fabs(d.tol - tol) < 1e-12, "tol %.9g, want %.9g", d.tol, tol);
    CHECK(d.worst == 2 && d.n_bad == 0, "worst %lld n_bad %lld", (long long)d.worst, (long long)d.n_bad);
    go[2] = (float)(0.25 + tol * 1.01);
    d = cmp1(&g, &w, AS_T_OUT);
    CHECK(d.verdict == AS_V_MISMATCH && d.n_bad == 1, "just outside tolerance: %s, n_bad %lld", as_verdict_name(d.verdict),
          (long long)d.n_bad);
    CHECK(fabs(d.max_rel - d.max_abs / 1.0) < 1e-12 && d.want_max == 1.0, "max_rel %g want_max %g", d.max_rel, d.want_max);
    as_run_free(&w);
    as_run_free(&g);
}

/* A tensor of many chunks (the comparison runs them on all threads): the counts are every element's,
 * the worst is the first of the largest difference even when a later chunk holds an equal one, and the
 * tolerance comes from the largest reference value wherever it is. */
TEST(compare_chunks_keep_the_sequential_answer)
{
    AsRun w, g;
    as_run_init(&w);
    const int64_t rows = 40, cols = 5000, n = rows * cols; /* 200000 values: 4 chunks of 65536 */
    float *o = mkf(&w, AS_T_OUT, 2, rows, cols, 0);
    for (int64_t i = 0; i < n; i++)
        o[i] = as_bf16((float)((i * 7919) % 1001 - 500) / 256.0f);
    o[n - 3] = 64.0f; /* the largest |want|: in the last chunk */
    copy_run(&g, &w);
    float *go = g.t[AS_T_OUT].data;
    const int64_t bad[] = {70000, 140000, 199000}, small[] = {5, 65536 * 2 + 17};
    for (size_t k = 0; k < sizeof bad / sizeof bad[0]; k++)
        go[bad[k]] = o[bad[k]] + 3.0f; /* beyond tol: equal differences, the first must be the worst */
    for (size_t k = 0; k < sizeof small / sizeof small[0]; k++)
        go[small[k]] = o[small[k]] + 0.125f; /* within tol = 64 * 2^-7 + 1e-4 */
    AsTensorDiff d = cmp1(&g, &w, AS_T_OUT);
    CHECK(d.want_max == 64.0 && fabs(d.tol - (64.0 * 0x1p-7 + 1e-4)) < 1e-12, "want_max %g tol %g", d.want_max, d.tol);
    CHECK(d.n_bad == 3 && d.n_flips == 0, "n_bad %lld n_flips %lld, want 3 and 0", (long long)d.n_bad,
          (long long)d.n_flips);
    CHECK(d.worst == 70000 && d.max_abs == 3.0, "worst %lld (max_abs %g), want the first of the equal largest, 70000",
          (long long)d.worst, d.max_abs);
    CHECK(d.worst_coord[0] == 70000 / cols && d.worst_coord[1] == 70000 % cols, "worst at token %lld channel %lld",
          (long long)d.worst_coord[0], (long long)d.worst_coord[1]);
    as_run_free(&w);
    as_run_free(&g);
}

TEST(compare_nan_and_inf)
{
    AsRun w, g;
    as_run_init(&w);
    float *s = mkf(&w, AS_T_ISCORE, 2, 1, 4, 0);
    s[0] = -INFINITY, s[1] = 2, s[2] = -INFINITY, s[3] = NAN;
    copy_run(&g, &w);
    AsTensorDiff d = cmp1(&g, &w, AS_T_ISCORE);
    CHECK(d.verdict == AS_V_PASS, "-inf == -inf and NaN at the same element on both sides: %s", as_verdict_name(d.verdict));
    CHECK(d.want_max == 2, "want_max ignores -inf: %g", d.want_max);
    float *gs = g.t[AS_T_ISCORE].data;
    gs[1] = NAN;
    d = cmp1(&g, &w, AS_T_ISCORE);
    CHECK(d.verdict == AS_V_MISMATCH && d.worst == 1 && d.n_bad == 1, "NaN in got: %s worst %lld",
          as_verdict_name(d.verdict), (long long)d.worst);
    gs[1] = 2, gs[0] = -3e38f;
    d = cmp1(&g, &w, AS_T_ISCORE);
    CHECK(d.verdict == AS_V_MISMATCH && d.worst == 0 && isinf(d.max_abs), "finite against -inf: %s worst %lld",
          as_verdict_name(d.verdict), (long long)d.worst);
    as_run_free(&w);
    as_run_free(&g);
}

TEST(compare_worst_coordinates_3d)
{
    AsRun w, g;
    as_run_init(&w);
    float *q = mkf(&w, AS_T_Q, 3, 2, 3, 4);
    for (int i = 0; i < 24; i++)
        q[i] = (float)i / 8;
    copy_run(&g, &w);
    float *gq = g.t[AS_T_Q].data;
    int64_t at = (1 * 3 + 2) * 4 + 3; /* token 1, head 2, channel 3 */
    gq[at] = q[at] + 0.5f;
    gq[5] = q[5] + 0.001f; /* inside tolerance, smaller */
    AsTensorDiff d = cmp1(&g, &w, AS_T_Q);
    CHECK(d.verdict == AS_V_MISMATCH && d.worst == at, "worst %lld, want %lld", (long long)d.worst, (long long)at);
    CHECK(d.worst_coord[0] == 1 && d.worst_coord[1] == 2 && d.worst_coord[2] == 3, "coords %lld,%lld,%lld",
          (long long)d.worst_coord[0], (long long)d.worst_coord[1], (long long)d.worst_coord[2]);
    char buf[128];
    as_format_coord(AS_T_Q, d.worst_coord, 3, buf, sizeof buf);
    CHECK(!strcmp(buf, "token 1, head 2, channel 3"), "as_format_coord: '%s'", buf);
    CHECK(d.worst_got == q[at] + 0.5f && d.worst_want == q[at], "got %g want %g", d.worst_got, d.worst_want);
    CHECK(d.worst_ulp == as_bf16_ulp_distance(gq[at], q[at]) && d.worst_ulp > 0, "ulp %lld", (long long)d.worst_ulp);
    CHECK(d.n_bad == 1, "n_bad %lld", (long long)d.n_bad);
    char line[256];
    as_tensor_diff_line(AS_T_Q, &d, line, sizeof line);
    CHECK(strstr(line, "MISMATCH") && strstr(line, "token 1, head 2, channel 3"), "report line: %s", line);
    as_run_free(&w);
    as_run_free(&g);
}

TEST(compare_bf16_ulp_distance)
{
    float one = 1.0f, next = as_bf16_to_f32(0x3f81); /* 1.0078125 */
    CHECK(as_bf16_ulp_distance(one, next) == 1, "1 -> next bf16: %lld", (long long)as_bf16_ulp_distance(one, next));
    CHECK(as_bf16_ulp_distance(next, one) == 1, "symmetric");
    CHECK(as_bf16_ulp_distance(0.0f, -0.0f) == 0, "+0 and -0 are the same point");
    float tiny = as_bf16_to_f32(0x0001), ntiny = as_bf16_to_f32(0x8001);
    CHECK(as_bf16_ulp_distance(tiny, 0.0f) == 1 && as_bf16_ulp_distance(-0.0f, tiny) == 1, "smallest subnormal is 1 ulp from 0");
    CHECK(as_bf16_ulp_distance(tiny, ntiny) == 2, "across zero: %lld", (long long)as_bf16_ulp_distance(tiny, ntiny));
    CHECK(as_bf16_ulp_distance(-1.0f, 1.0f) == 2 * 0x3f80, "-1 to 1: %lld", (long long)as_bf16_ulp_distance(-1.0f, 1.0f));
    CHECK(as_bf16_ulp_distance(-INFINITY, -INFINITY) == 0, "-inf == -inf");
    CHECK(as_bf16_ulp_distance(NAN, 1.0f) == INT64_MAX, "NaN is infinitely far");
}

/* kv_pre [1][32] on both sides with one element one bf16 ulp apart; kv from the real fp8
 * quantiser. Element 0 = 448 pins the block scale to 1, so element 1 sits on the e4m3 grid
 * 96, 104 (step 8, beyond the tensor tolerance 448 * 2^-7). */
static void fp8_pair(AsRun *g, AsRun *w, float want_pre, float got_pre)
{
    as_run_init(w);
    as_run_init(g);
    AsRun *side[2] = {w, g};
    for (int s = 0; s < 2; s++) {
        float *pre = mkf(side[s], AS_T_KV_PRE, 2, 1, 32, 0), *kv = mkf(side[s], AS_T_KV, 2, 1, 32, 0);
        for (int i = 0; i < 32; i++)
            pre[i] = as_bf16((float)(i % 7) - 3);
        pre[0] = 448;
        pre[1] = s ? got_pre : want_pre;
        memcpy(kv, pre, 32 * sizeof *kv);
        as_fp8_quant(kv, 32, AS_FP8_BLOCK);
    }
}

TEST(compare_fp8_flip)
{
    AsRun w, g;
    fp8_pair(&g, &w, 100.0f, 100.5f); /* 100 is a tie -> 96 (even); 100.5 -> 104 */
    const float *wk = w.t[AS_T_KV].data, *gk = g.t[AS_T_KV].data;
    REQUIRE(wk[1] == 96 && gk[1] == 104, "quantiser: want 96 / got 104, have %g / %g", wk[1], gk[1]);
    REQUIRE(as_bf16_ulp_distance(100.0f, 100.5f) == 1, "pre values one ulp apart");
    AsTensorDiff d = cmp1(&g, &w, AS_T_KV);
    CHECK(d.verdict == AS_V_FLIPS && d.n_flips == 1 && d.n_bad == 0, "adjacent e4m3 points: %s, %lld flips, %lld bad",
          as_verdict_name(d.verdict), (long long)d.n_flips, (long long)d.n_bad);
    CHECK(d.max_abs == 0 && d.worst == -1, "a flip is kept out of max_abs: %g", d.max_abs);
    /* the same outputs without a pre twin (window rows): (b) alone, scale from the values */
    AsRun w2, g2;
    as_run_init(&w2);
    as_run_init(&g2);
    memcpy(mkf(&w2, AS_T_ROWS_A, 2, 1, 32, 0), wk, 32 * sizeof(float));
    memcpy(mkf(&g2, AS_T_ROWS_A, 2, 1, 32, 0), gk, 32 * sizeof(float));
    d = cmp1(&g2, &w2, AS_T_ROWS_A);
    CHECK(d.verdict == AS_V_FLIPS && d.n_flips == 1, "rows_a, no twin: %s, %lld flips", as_verdict_name(d.verdict),
          (long long)d.n_flips);
    /* two grid steps apart (104 -> 112) with the pre values still one ulp apart: bad */
    ((float *)g.t[AS_T_KV].data)[1] = 112;
    ((float *)g2.t[AS_T_ROWS_A].data)[1] = 112;
    d = cmp1(&g, &w, AS_T_KV);
    CHECK(d.verdict == AS_V_MISMATCH && d.n_bad == 1 && d.n_flips == 0, "two steps: %s, %lld bad",
          as_verdict_name(d.verdict), (long long)d.n_bad);
    d = cmp1(&g2, &w2, AS_T_ROWS_A);
    CHECK(d.verdict == AS_V_MISMATCH && d.n_bad == 1, "two steps, no twin: %s", as_verdict_name(d.verdict));
    /* off the grid (a value the quantiser cannot produce) is never a flip */
    ((float *)g2.t[AS_T_ROWS_A].data)[1] = 100;
    d = cmp1(&g2, &w2, AS_T_ROWS_A);
    CHECK(d.verdict == AS_V_MISMATCH, "off-grid value: %s", as_verdict_name(d.verdict));
    as_run_free(&w);
    as_run_free(&g);
    as_run_free(&w2);
    as_run_free(&g2);
    /* pre values two ulps apart but within kv_pre's own bf16 rule (448 * 2^-7): a wide flip */
    fp8_pair(&g, &w, 100.0f, 101.0f);
    d = cmp1(&g, &w, AS_T_KV);
    CHECK(d.verdict == AS_V_FLIPS && d.n_flips == 1 && d.n_flips_wide == 1, "pre two ulps apart: %s, %lld wide",
          as_verdict_name(d.verdict), (long long)d.n_flips_wide);
    as_run_free(&w);
    as_run_free(&g);
    /* pre values 5 apart, beyond kv_pre's rule (3.5), outputs still adjacent (96, 104): not benign */
    fp8_pair(&g, &w, 100.0f, 105.0f);
    REQUIRE(((float *)g.t[AS_T_KV].data)[1] == 104, "105 quantises to 104");
    d = cmp1(&g, &w, AS_T_KV);
    CHECK(d.verdict == AS_V_MISMATCH && d.n_bad == 1, "pre beyond its tolerance: %s", as_verdict_name(d.verdict));
    as_run_free(&w);
    as_run_free(&g);
}

TEST(compare_fp4_flips)
{
    /* e8m0 scales, block 32 (index keys): element 0 = 6 gives scale 1; 2.5 is a tie -> 2,
     * the next bf16 (2.515625) -> 3: adjacent e2m1 points one step (1) apart */
    AsRun w, g;
    as_run_init(&w);
    as_run_init(&g);
    AsRun *side[2] = {&w, &g};
    for (int s = 0; s < 2; s++) {
        float *pre = mkf(side[s], AS_T_IK_PRE, 2, 1, 32, 0), *k = mkf(side[s], AS_T_IK, 2, 1, 32, 0);
        for (int i = 0; i < 32; i++)
            pre[i] = as_bf16((float)(i % 5) * 0.25f);
        pre[0] = 6;
        pre[1] = s ? 2.515625f : 2.5f;
        memcpy(k, pre, 32 * sizeof *k);
        as_fp4_quant_e8m0(k, 32, AS_FP4_E8M0_BLOCK);
    }
    const float *wk = w.t[AS_T_IK].data, *gk = g.t[AS_T_IK].data;
    REQUIRE(wk[1] == 2 && gk[1] == 3, "quantiser: want 2 / got 3, have %g / %g", wk[1], gk[1]);
    AsTensorDiff d = cmp1(&g, &w, AS_T_IK);
    CHECK(d.verdict == AS_V_FLIPS && d.n_flips == 1 && d.n_bad == 0, "fp4-e8m0 adjacent points: %s, %lld flips",
          as_verdict_name(d.verdict), (long long)d.n_flips);
    ((float *)g.t[AS_T_IK].data)[1] = 4; /* two steps from 2 */
    d = cmp1(&g, &w, AS_T_IK);
    CHECK(d.verdict == AS_V_MISMATCH && d.n_bad == 1, "fp4-e8m0 two steps: %s", as_verdict_name(d.verdict));
    as_run_free(&w);
    as_run_free(&g);

    /* e4m3 scales, block 16 (latents): amax 6.75 gives scale e4m3(1.125) = 1.125; 2.8125 / 1.125
     * = 2.5 ties to 2 (2.25), one ulp above rounds to 3 (3.375) */
    as_run_init(&w);
    as_run_init(&g);
    for (int s = 0; s < 2; s++) {
        float *pre = mkf(side[s], AS_T_LATENT_PRE, 2, 1, 16, 0), *k = mkf(side[s], AS_T_LATENT_Q, 2, 1, 16, 0);
        for (int i = 0; i < 16; i++)
            pre[i] = as_bf16((float)(i % 3) * 0.5f);
        pre[0] = 6.75f;
        pre[1] = s ? 2.828125f : 2.8125f;
        memcpy(k, pre, 16 * sizeof *k);
        as_fp4_quant_e4m3(k, 16, AS_FP4_E4M3_BLOCK);
    }
    wk = w.t[AS_T_LATENT_Q].data, gk = g.t[AS_T_LATENT_Q].data;
    REQUIRE(wk[1] == 2.25f && gk[1] == 3.375f, "quantiser: want 2.25 / got 3.375, have %g / %g", wk[1], gk[1]);
    d = cmp1(&g, &w, AS_T_LATENT_Q);
    CHECK(d.verdict == AS_V_FLIPS && d.n_flips == 1, "fp4-e4m3 adjacent points: %s, %lld flips, %lld bad",
          as_verdict_name(d.verdict), (long long)d.n_flips, (long long)d.n_bad);
    ((float *)g.t[AS_T_LATENT_Q].data)[1] = 4.5f; /* 4 * 1.125: two steps from 2.25 */
    d = cmp1(&g, &w, AS_T_LATENT_Q);
    CHECK(d.verdict == AS_V_MISMATCH && d.n_bad == 1, "fp4-e4m3 two steps: %s", as_verdict_name(d.verdict));
    as_run_free(&w);
    as_run_free(&g);
}

/* One query, 8 compressed positions, k = 2, rows_a_len 3 (so csel holds p + 3). */
static void sel_run(AsRun *r, const float scores[8], const int32_t picks[2])
{
    as_run_init(r);
    r->rows_a_len = 3, r->cols = 3, r->k = 2, r->topk = 5, r->width = 8, r->start_pos = 9, r->s = 1, r->ratio = 1;
    memcpy(mkf(r, AS_T_ISCORE, 2, 1, 8, 0), scores, 8 * sizeof(float));
    int32_t *cs = mki(r, AS_T_CSEL, 1, 2), *idx = mki(r, AS_T_IDX, 1, 5), *wi = mki(r, AS_T_WIDX, 1, 3);
    for (int c = 0; c < 3; c++)
        wi[c] = idx[c] = c;
    for (int c = 0; c < 2; c++)
        cs[c] = idx[3 + c] = picks[c] + 3;
}

TEST(compare_selection_near_tie_and_real)
{
    const float lo = 2.984375f; /* one bf16 ulp below 3 */
    REQUIRE(as_bf16_ulp_distance(lo, 3.0f) == 1, "2.984375 is one ulp below 3");
    float ws[8] = {5, 3, lo, 1, 1, 1, 1, 1}, gs[8] = {5, lo, 3, 1, 1, 1, 1, 1};
    AsRun w, g;
    sel_run(&w, ws, (int32_t[]){0, 1});
    sel_run(&g, gs, (int32_t[]){0, 2});
    AsTensorDiff d = cmp1(&g, &w, AS_T_CSEL);
    CHECK(d.verdict == AS_V_NEAR_TIE && d.n_rows_differ == 1 && d.n_near_tie == 1 && d.n_real == 0,
          "boundary scores one ulp apart: %s (%lld near-tie, %lld real)", as_verdict_name(d.verdict),
          (long long)d.n_near_tie, (long long)d.n_real);
    CHECK(d.n_seldiffs == 1 && d.seldiff[0].n_only_got == 1 && d.seldiff[0].only_got[0] == 5 &&
              d.seldiff[0].n_only_want == 1 && d.seldiff[0].only_want[0] == 4 && d.seldiff[0].margin == 1,
          "set difference: only got %d only want %d margin %g", d.seldiff[0].only_got[0], d.seldiff[0].only_want[0],
          d.seldiff[0].margin);
    d = cmp1(&g, &w, AS_T_IDX);
    CHECK(d.verdict == AS_V_NEAR_TIE, "idx with the same window part: %s", as_verdict_name(d.verdict));
    AsLayerDiff ld;
    AsCompareOptions o;
    as_compare_options_default(&o);
    as_compare_layer(&g, &w, &o, &ld);
    CHECK(ld.verdict == AS_V_NEAR_TIE && ld.worst_tensor == AS_T_CSEL, "layer: %s worst %d", as_verdict_name(ld.verdict),
          (int)ld.worst_tensor);
    /* a window difference in idx is never a near-tie */
    ((int32_t *)g.t[AS_T_IDX].data)[0] = 7;
    d = cmp1(&g, &w, AS_T_IDX);
    CHECK(d.verdict == AS_V_MISMATCH && d.n_real == 1, "idx window column differs: %s", as_verdict_name(d.verdict));
    as_run_free(&g);

    /* scores far apart: got picks position 2 with score 4 while position 1 has 3 */
    float far[8] = {5, 3, 4, 1, 1, 1, 1, 1};
    sel_run(&g, far, (int32_t[]){0, 2});
    d = cmp1(&g, &w, AS_T_CSEL);
    CHECK(d.verdict == AS_V_MISMATCH && d.n_real == 1 && d.seldiff[0].margin > 1, "scores far apart: %s margin %g",
          as_verdict_name(d.verdict), d.seldiff[0].margin);
    as_run_free(&g);

    /* identical scores, different selection: tie order is deterministic, so it is real */
    sel_run(&g, ws, (int32_t[]){0, 2});
    d = cmp1(&g, &w, AS_T_CSEL);
    CHECK(d.verdict == AS_V_MISMATCH && d.n_real == 1, "identical scores, different picks: %s", as_verdict_name(d.verdict));
    as_run_free(&g);

    /* -inf ties: the picks among -inf differ, at scores exactly equal to the k-th on both sides: a
     * tie-order difference (SPEC 5, 6), whether the rows differ elsewhere (one ulp at position 0) or
     * are identical */
    float ninf = -INFINITY;
    float wi[8] = {5, ninf, ninf, ninf, ninf, ninf, ninf, ninf}, gi[8] = {5.03125f, ninf, ninf, ninf, ninf, ninf, ninf, ninf};
    REQUIRE(as_bf16_ulp_distance(5.0f, 5.03125f) == 1, "5.03125 is one ulp above 5");
    AsRun w2;
    sel_run(&w2, wi, (int32_t[]){0, 1});
    sel_run(&g, gi, (int32_t[]){0, 2});
    d = cmp1(&g, &w2, AS_T_CSEL);
    CHECK(d.verdict == AS_V_TIE_ORDER && d.seldiff[0].margin == 0 && d.seldiff[0].tie_order && d.n_tie_order == 1,
          "-inf tie with rows that differ: %s margin %g", as_verdict_name(d.verdict), d.seldiff[0].margin);
    as_run_free(&g);
    sel_run(&g, wi, (int32_t[]){0, 2});
    d = cmp1(&g, &w2, AS_T_CSEL);
    CHECK(d.verdict == AS_V_TIE_ORDER && d.cause == AS_CAUSE_TIE_ORDER, "-inf tie with identical rows: %s",
          as_verdict_name(d.verdict));
    as_run_free(&g);
    as_run_free(&w2);

    /* widx: always exact */
    sel_run(&g, ws, (int32_t[]){0, 1});
    ((int32_t *)g.t[AS_T_WIDX].data)[2] = -1;
    d = cmp1(&g, &w, AS_T_WIDX);
    CHECK(d.verdict == AS_V_MISMATCH && d.n_real == 1 && d.worst_coord[1] == 2, "widx difference: %s at col %lld",
          as_verdict_name(d.verdict), (long long)d.worst_coord[1]);
    as_run_free(&g);
    as_run_free(&w);
}

/* Decode, width 8, candidate blocks of 2: block 3 holds the newest position (pinned). */
static void cand_run(AsRun *r, const float scores[8], int keep)
{
    as_run_init(r);
    r->start_pos = 9, r->s = 1, r->ratio = 1, r->width = 8;
    memcpy(mkf(r, AS_T_ISCORE, 2, 1, 8, 0), scores, 8 * sizeof(float));
    uint8_t *m = as_run_shape(r, AS_T_CAND, 2, 1, 8, 0);
    REQUIRE(m, "cand");
    for (int p = 0; p < 8; p++)
        m[p] = p / 2 == 3 || p / 2 == keep;
}

TEST(compare_candidate_near_tie)
{
    const float lo = 1.9921875f; /* one bf16 ulp below 2 */
    float ws[8] = {2, 0, lo, 0, 1, 1, 0, 0}, gs[8] = {lo, 0, 2, 0, 1, 1, 0, 0};
    AsRun w, g;
    cand_run(&w, ws, 0);
    cand_run(&g, gs, 1);
    AsTensorDiff d = cmp1(&g, &w, AS_T_CAND);
    CHECK(d.verdict == AS_V_NEAR_TIE && d.n_near_tie == 1, "block maxima one ulp apart: %s", as_verdict_name(d.verdict));
    CHECK(d.seldiff[0].n_only_got == 2 && d.seldiff[0].only_got[0] == 2 && d.seldiff[0].only_want[0] == 0,
          "positions: only got %d.. only want %d..", d.seldiff[0].only_got[0], d.seldiff[0].only_want[0]);
    AsCompareOptions o;
    as_compare_options_default(&o); /* cand_block 0: unknown block size, every difference is real */
    as_compare_tensor(&g, &w, AS_T_CAND, &o, &d);
    CHECK(d.verdict == AS_V_MISMATCH, "without the block size: %s", as_verdict_name(d.verdict));
    as_run_free(&g);
    float far[8] = {2, 0, 3, 0, 1, 1, 0, 0};
    cand_run(&g, far, 1);
    d = cmp1(&g, &w, AS_T_CAND);
    CHECK(d.verdict == AS_V_MISMATCH && d.n_real == 1, "block maxima far apart: %s", as_verdict_name(d.verdict));
    as_run_free(&g);
    as_run_free(&w);
}

TEST(compare_absent_shape_and_layer_verdict)
{
    AsRun w, g;
    as_run_init(&w);
    mkf(&w, AS_T_X, 2, 2, 4, 0);
    mkf(&w, AS_T_OUT, 2, 2, 4, 0);
    copy_run(&g, &w);
    as_run_clear(&g, AS_T_OUT);
    AsTensorDiff d = cmp1(&g, &w, AS_T_OUT);
    CHECK(d.verdict == AS_V_MISMATCH && d.absent_got && !d.absent_want, "absent in got: %s", as_verdict_name(d.verdict));
    char line[256];
    as_tensor_diff_line(AS_T_OUT, &d, line, sizeof line);
    CHECK(strstr(line, "absent in got") != NULL, "line: %s", line);
    mkf(&g, AS_T_OUT, 2, 3, 4, 0);
    d = cmp1(&g, &w, AS_T_OUT);
    CHECK(d.verdict == AS_V_MISMATCH && d.shape_differs, "shape differs: %s", as_verdict_name(d.verdict));
    AsLayerDiff ld;
    as_compare_layer(&g, &w, NULL, &ld);
    CHECK(ld.verdict == AS_V_MISMATCH && ld.worst_tensor == AS_T_OUT, "layer: %s worst %d", as_verdict_name(ld.verdict),
          (int)ld.worst_tensor);
    CHECK(!as_verdict_ok(ld.verdict), "mismatch is not ok");
    as_run_free(&w);
    as_run_free(&g);
}

/* sel_run's selection of `scores` under a tie convention (k 2, offset 3, every position visible). */
static void ties_pick(const float scores[8], AsTieOrder t, int32_t out[2])
{
    int cl = 8;
    REQUIRE(as_index_topk_ties(scores, 1, 8, 2, &cl, 3, out, t) == 0, "topk");
    out[0] -= 3, out[1] -= 3;
}

/* Scores with exact ties at the k-th value: a selection that differs only among them is tie-order
 * (SPEC 5, 6), with the convention the checked side's choice fits; identical picks under the same
 * convention are exact. */
TEST(compare_selection_tie_order_conventions)
{
    const float sc[8] = {5, 2, 2, 2, 1, 1, 1, 1}; /* k = 2: position 0, then one of 1, 2, 3 */
    int32_t pick[AS_TIES_COUNT][2];
    for (int t = 0; t < AS_TIES_COUNT; t++)
        ties_pick(sc, (AsTieOrder)t, pick[t]);
    CHECK(pick[AS_TIES_LOWEST][0] == 0 && pick[AS_TIES_LOWEST][1] == 1, "lowest index first: {0 1}, not {%d %d}",
          pick[AS_TIES_LOWEST][0], pick[AS_TIES_LOWEST][1]);
    CHECK(pick[AS_TIES_HIGHEST][0] == 0 && pick[AS_TIES_HIGHEST][1] == 3, "highest index first: {0 3}, not {%d %d}",
          pick[AS_TIES_HIGHEST][0], pick[AS_TIES_HIGHEST][1]);
    for (int ref = 0; ref < AS_TIES_COUNT; ref++) {
        AsRun w;
        sel_run(&w, sc, pick[ref]);
        for (int eng = 0; eng <= AS_TIES_COUNT; eng++) { /* AS_TIES_COUNT: the one no convention gives */
            int32_t mine[2] = {0, 2};
            const int32_t *p = eng < AS_TIES_COUNT ? pick[eng] : mine;
            bool fits_none = true;
            for (int t = 0; t < AS_TIES_COUNT; t++)
                fits_none &= memcmp(pick[t], mine, sizeof mine) != 0;
            if (eng == AS_TIES_COUNT && !fits_none)
                continue; /* the CPU's order happens to give {0 2} */
            AsRun g;
            sel_run(&g, sc, p);
            AsTensorDiff d = cmp1(&g, &w, AS_T_CSEL);
            bool same = !memcmp(p, pick[ref], sizeof mine);
            if (same) {
                CHECK(d.verdict == AS_V_PASS, "engine %d, reference %d, same picks: %s", eng, ref,
                      as_verdict_name(d.verdict));
            } else {
                /* the engine's convention fits (the CPU's order may give the same picks: it is named first) */
                const char *want = eng < AS_TIES_COUNT ? as_tie_order_name((AsTieOrder)eng) : "none";
                bool fits = eng < AS_TIES_COUNT ? (d.tie_fit >> eng) & 1 : d.tie_fit == 0;
                CHECK(d.verdict == AS_V_TIE_ORDER && d.cause == AS_CAUSE_TIE_ORDER && d.n_tie_order == 1 &&
                          d.seldiff[0].tie_order && fits && !((d.tie_fit >> ref) & 1),
                      "engine %d, reference %d: %s fitting %s (want tie-order fitting %s)", eng, ref,
                      as_verdict_name(d.verdict), as_tie_fit_name(d.tie_fit), want);
                d = cmp1(&g, &w, AS_T_IDX);
                fits = eng < AS_TIES_COUNT ? (d.tie_fit >> eng) & 1 : d.tie_fit == 0;
                CHECK(d.verdict == AS_V_TIE_ORDER && fits, "idx, engine %d, reference %d: %s fitting %s", eng, ref,
                      as_verdict_name(d.verdict), as_tie_fit_name(d.tie_fit));
            }
            as_run_free(&g);
        }
        as_run_free(&w);
    }
    /* a pick below the tie (position 4 scores 1) is not a tie: real */
    AsRun w, g;
    sel_run(&w, sc, pick[AS_TIES_LOWEST]);
    sel_run(&g, sc, (int32_t[]){0, 4});
    AsTensorDiff d = cmp1(&g, &w, AS_T_CSEL);
    CHECK(d.verdict == AS_V_MISMATCH && d.cause == AS_CAUSE_REAL, "a pick below the k-th score: %s",
          as_verdict_name(d.verdict));
    /* the checked side stores no scores: the reference's stand in for them */
    as_run_free(&g);
    sel_run(&g, sc, pick[AS_TIES_HIGHEST]);
    as_run_clear(&g, AS_T_ISCORE);
    d = cmp1(&g, &w, AS_T_CSEL);
    CHECK(d.verdict == AS_V_TIE_ORDER && !strcmp(as_tie_fit_name(d.tie_fit), "highest"),
          "no scores on the checked side: %s fitting %s", as_verdict_name(d.verdict), as_tie_fit_name(d.tie_fit));
    as_run_free(&g);
    as_run_free(&w);
    /* the convention names and the reference's switch */
    AsTieOrder t;
    CHECK(as_tie_order_parse("lowest", &t) == 0 && t == AS_TIES_LOWEST && as_tie_order_parse("random", &t) == -1,
          "parsing tie orders");
    CHECK(as_topk_reference_ties() == AS_TIES_CPU, "the reference breaks ties torch's CPU way by default");
}

/* Partial comparisons: a tensor the checked side does not store is absent (not judged) unless
 * required; stored on the checked side only, it is a mismatch unless the want side may be partial. */
TEST(compare_partial_absent_and_required)
{
    AsRun w, g;
    as_run_init(&w);
    as_run_init(&g);
    float *q = mkf(&w, AS_T_Q, 3, 1, 2, 4);
    for (int i = 0; i < 8; i++)
        q[i] = (float)i;
    mkf(&g, AS_T_OUT, 2, 1, 4, 0);
    AsCompareOptions o;
    as_compare_options_default(&o);
    AsTensorDiff d;
    as_compare_tensor(&g, &w, AS_T_Q, &o, &d);
    CHECK(d.verdict == AS_V_MISMATCH && d.absent_got, "absent on got, not partial: %s", as_verdict_name(d.verdict));
    o.got_partial = true;
    as_compare_tensor(&g, &w, AS_T_Q, &o, &d);
    CHECK(d.verdict == AS_V_ABSENT && d.absent_got && !d.absent_want, "absent on got, partial: %s",
          as_verdict_name(d.verdict));
    o.require = (uint64_t)1 << AS_T_Q;
    as_compare_tensor(&g, &w, AS_T_Q, &o, &d);
    CHECK(d.verdict == AS_V_MISMATCH && d.cause == AS_CAUSE_REAL, "required: %s", as_verdict_name(d.verdict));
    as_compare_tensor(&g, &w, AS_T_OUT, &o, &d);
    CHECK(d.verdict == AS_V_MISMATCH, "stored by got only: %s", as_verdict_name(d.verdict));
    o.want_partial = true;
    as_compare_tensor(&g, &w, AS_T_OUT, &o, &d);
    CHECK(d.verdict == AS_V_ABSENT && d.absent_want, "stored by got only, want partial: %s", as_verdict_name(d.verdict));
    AsLayerDiff ld;
    o.require = 0;
    as_compare_layer(&g, &w, &o, &ld);
    CHECK(ld.verdict == AS_V_ABSENT, "nothing compared: layer %s", as_verdict_name(ld.verdict));
    as_run_free(&w);
    as_run_free(&g);
}
