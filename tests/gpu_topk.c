/* kernels/topk_select.cu against its CPU twins: torch's top-k set (ref/topk.c) on every case of the
 * torch fixture and on rows built to stress the tie order; the indexer's selection (ref/indexer.c
 * after select_host.c's candidate mask) at the flash and tiny shapes, prefill and decode (width and
 * k from device parameters); the candidate blocks (ref/candidates.c) at the flash geometry and at
 * narrowing ones. Every set must be identical; a row wider than the kernel's limit is refused. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "ref/candidates.h"
#include "ref/indexer.h"
#include "ref/numerics.h"
#include "ref/topk.h"
#include "tests/lib/fixtures.h"
#include "tests/lib/gpu_util.h"
#include "tests/lib/harness.h"
#include "tests/lib/rand.h"


/* rows x n values on the device through as_k_topk_rows, each row's set against want(row). */
static int64_t rows_against_ref(const float *v, int rows, int n, int k, const int32_t *want_or_null,
                                unsigned long long stats[AS_TOPK_NSTATS], const char *what)
{
    float *dv = as_gpu_bytes(v, sizeof(float) * (size_t)rows * n);
    int32_t *ds = as_gpu_alloc(sizeof(int32_t) * ((size_t)rows * k + 1));
    const unsigned long long zero[AS_TOPK_NSTATS] = {0};
    unsigned long long *dst = as_gpu_bytes(zero, sizeof zero);
    as_gpu_check_launch(as_k_topk_rows(dv, rows, n, k, ds, dst, 0), "topk rows");
    int32_t *got = malloc(sizeof(int32_t) * ((size_t)rows * k + 1)), *want = malloc(sizeof(int32_t) * ((size_t)k + 1));
    as_gpu_get_bytes(got, ds, sizeof(int32_t) * (size_t)rows * k);
    as_gpu_get_bytes(stats, dst, sizeof(unsigned long long) * AS_TOPK_NSTATS);
    int64_t bad = 0;
    for (int t = 0; t < rows; t++) {
        if (want_or_null)
            memcpy(want, want_or_null, sizeof(int32_t) * (size_t)k);
        else
            as_topk_torch_set(v + (size_t)t * n, n, k, want, NULL);
        for (int j = 0; j < k; j++)
            if (got[(size_t)t * k + j] != want[j]) {
                if (bad++ < 3)
                    as_test_note("%s: n %d k %d row %d: [%d] = %d, torch %d", what, n, k, t, j, got[(size_t)t * k + j],
                                 want[j]);
                break;
            }
    }
    free(got), free(want);
    as_gpu_free(dv), as_gpu_free(ds), as_gpu_free(dst);
    return bad;
}

GPU_TEST(gpu_topk_torch_fixture)
{
    AsTopkFixture f;
    char err[512];
    REQUIRE(as_fixture_load_topk(&f, err, sizeof err) == 0, "%s (carry the fixtures; ATTNSCOPE_FIXTURES)", err);
    int ok = 0, ran = 0, tied = 0;
    for (int c = 0; c < f.n_cases; c++) {
        const AsTopkCase *tc = &f.cases[c];
        if (tc->k == 0 || tc->n > AS_TOPK_MAX_WIDTH)
            continue; /* k = 0 selects nothing; wider rows take the host path */
        ran++;
        unsigned long long st[AS_TOPK_NSTATS];
        int64_t bad = rows_against_ref(tc->values, 1, (int)tc->n, (int)tc->k, tc->set, st, tc->note);
        CHECK(bad == 0, "fixture case %d (%s): n %lld k %lld: the device set differs from torch's", c, tc->note,
              (long long)tc->n, (long long)tc->k);
        ok += bad == 0;
        tied += (int)st[1];
    }
    as_test_note("torch fixture (%s): %d of %d cases identical on the device (%d tied at the cut; %d more with k = 0 "
                 "or wider than %d columns, not run)", f.source, ok, ran, tied, f.n_cases - ran, AS_TOPK_MAX_WIDTH);
    CHECK(ran > 0, "no fixture case ran");
    as_fixture_free_topk(&f);
}

/* AS_KTEST_SMALL=1 (runs under compute-sanitizer): widths up to 4096, two rows each. */
static bool small_run(void)
{
    const char *e = getenv("AS_KTEST_SMALL");
    return e && *e == '1';
}

/* Rows where the tie order decides: bf16 values on a narrow range, runs of -inf, NaN, all equal, sorted;
 * widths from 1 to the kernel's limit, k on both of torch's branches. */
GPU_TEST(gpu_topk_ties_and_shapes)
{
    const int ns[] = {1, 2, 3, 4, 5, 17, 64, 65, 129, 1000, 2048, 4096, 8192, AS_TOPK_MAX_WIDTH};
    int64_t cases = 0, bad = 0;
    unsigned long long tied = 0, partial = 0, rows_sel = 0;
    const bool small = small_run();
    g_rs = 12345;
    for (size_t ni = 0; ni < sizeof ns / sizeof ns[0]; ni++) {
        const int n = ns[ni];
        if (small && n > 4096)
            continue;
        const int rows = small ? 2 : n >= 8192 ? 3 : 8;
        float *v = malloc(sizeof(float) * (size_t)rows * n);
        for (int dist = 0; dist < 6; dist++) {
            for (int t = 0; t < rows; t++)
                for (int i = 0; i < n; i++) {
                    float x;
                    switch (dist) {
                    case 0: x = urnd(4.0f); break;
                    case 1: x = as_bf16(1.0f + urnd(0.05f)); break;
                    case 2: x = (rnd() & 3) ? -INFINITY : as_bf16(urnd(1.0f)); break;
                    case 3: x = rnd() % 7 == 0 ? NAN : as_bf16(urnd(1.0f)); break;
                    case 4: x = -INFINITY; break;
                    default: x = as_bf16((float)(i / 3)); break;
                    }
                    v[(size_t)t * n + i] = x;
                }
            const int ks[] = {1, n / 64, n / 64 + 1, n / 8, n / 2, 512, n - 1, n};
            for (size_t ki = 0; ki < sizeof ks / sizeof ks[0]; ki++) {
                const int k = ks[ki];
                if (k < 1 || k > n)
                    continue;
                unsigned long long st[AS_TOPK_NSTATS];
                int64_t b = rows_against_ref(v, rows, n, k, NULL, st, "stress");
                CHECK(b == 0, "n %d k %d distribution %d: %ld rows differ", n, k, dist, (long)b);
                bad += b;
                cases += rows;
                rows_sel += st[0], tied += st[1], partial += st[2];
            }
        }
        free(v);
    }
    as_test_note("%ld rows, %ld differ; %llu needed an algorithm, %llu of them tied at the cut, %llu partial_sort",
                 (long)cases, (long)bad, rows_sel, tied, partial);
    float one = 1.0f;
    float *d1 = as_gpu_bytes(&one, sizeof one);
    int32_t *ds = as_gpu_alloc(sizeof(int32_t) * 2);
    CHECK(as_k_topk_rows(d1, 1, AS_TOPK_MAX_WIDTH + 1, 1, ds, NULL, 0) != 0, "a row wider than the limit is refused");
    as_gpu_free(d1), as_gpu_free(ds);
}

/* The profile's counters (bench-engine's "A row's top-k" line) on rows whose introselect is worked out by
 * hand: n equal values (all -inf), nth = k - 1 = 511. Each unguarded partition of [first + 1, last)
 * swaps pairs from both ends until they meet, so the cut is the range's middle: the ranges are 4096,
 * 2048, 1024, 512 (cut 256 <= 511: the right half), 256, 128, 64, 32, 16, 8, 4: 11 passes ranking
 * sum(len - 1) = 8177 columns, split between the block and one warp by the warp range. k = 64 (k * 64
 * <= n) takes partial_sort: no pass. */
GPU_TEST(gpu_topk_profile_counters)
{
    const int n = 4096, rows = 3;
    float *v = malloc(sizeof(float) * (size_t)rows * n);
    for (int i = 0; i < rows * n; i++)
        v[i] = -INFINITY;
    unsigned long long st[AS_TOPK_NSTATS];
    CHECK(rows_against_ref(v, rows, n, 512, NULL, st, "equal values") == 0, "the equal rows' sets differ");
    const unsigned long long passes = st[AS_TOPK_PASSES_BLOCK] + st[AS_TOPK_PASSES_WARP];
    const unsigned long long ranked = st[AS_TOPK_RANKED_BLOCK] + st[AS_TOPK_RANKED_WARP];
    as_test_note("%d equal rows: %llu passes (%llu on the block), %llu columns ranked; cycles: load %llu, block %llu, "
                 "warp %llu, check %llu, emit %llu", rows, passes, st[AS_TOPK_PASSES_BLOCK], ranked, st[AS_TOPK_CYC_LOAD],
                 st[AS_TOPK_CYC_BLOCK], st[AS_TOPK_CYC_WARP], st[AS_TOPK_CYC_CHECK], st[AS_TOPK_CYC_EMIT]);
    CHECK(st[AS_TOPK_ROWS] == rows && st[AS_TOPK_TIED] == rows && st[AS_TOPK_PARTIAL] == 0,
          "rows %llu tied %llu partial %llu, want %d %d 0", st[AS_TOPK_ROWS], st[AS_TOPK_TIED], st[AS_TOPK_PARTIAL], rows,
          rows);
    CHECK(passes == 11ull * rows && ranked == 8177ull * rows, "passes %llu, ranked %llu: want %d and %d", passes, ranked,
          11 * rows, 8177 * rows);
    CHECK(st[AS_TOPK_CYC_LOAD] > 0 && st[AS_TOPK_CYC_CHECK] > 0 && st[AS_TOPK_CYC_EMIT] > 0 &&
              st[AS_TOPK_CYC_BLOCK] + st[AS_TOPK_CYC_WARP] > 0,
          "a part of the row took no cycles");
    CHECK(st[AS_TOPK_PASSES_BLOCK] == 0 || st[AS_TOPK_CYC_BLOCK] > 0, "the block's passes took no cycles");
    CHECK(rows_against_ref(v, 1, n, 64, NULL, st, "partial_sort") == 0, "the partial_sort row's set differs");
    CHECK(st[AS_TOPK_ROWS] == 1 && st[AS_TOPK_PARTIAL] == 1 && st[AS_TOPK_PASSES_BLOCK] + st[AS_TOPK_PASSES_WARP] == 0,
          "partial_sort: rows %llu partial %llu passes %llu", st[AS_TOPK_ROWS], st[AS_TOPK_PARTIAL],
          st[AS_TOPK_PASSES_BLOCK] + st[AS_TOPK_PASSES_WARP]);
    free(v);
}

/* The indexer's selection and the candidate mask, as the engine launches them. */
static void index_case(int s, int width, int k, int ratio, bool prefill, bool masked, int offset, bool from_device)
{
    const size_t n = (size_t)s * width;
    uint16_t *score = malloc(sizeof(uint16_t) * n), *got_score = malloc(sizeof(uint16_t) * n);
    uint8_t *cand = malloc(n);
    float *ref = malloc(sizeof(float) * n);
    int *clens = malloc(sizeof(int) * (size_t)s);
    int32_t *want = malloc(sizeof(int32_t) * ((size_t)s * k + 1)), *got = malloc(sizeof(int32_t) * ((size_t)s * k + 1)),
            *got2 = malloc(sizeof(int32_t) * ((size_t)s * k + 1));
    for (int t = 0; t < s; t++) {
        clens[t] = prefill ? (t + 1) / ratio : width;
        for (int p = 0; p < width; p++) {
            const float x = p >= clens[t] ? -INFINITY : as_bf16(urnd(0.1f));
            score[(size_t)t * width + p] = as_bf16_bits(x);
            cand[(size_t)t * width + p] = (uint8_t)((p / 8 + t) % 3 != 0);
            ref[(size_t)t * width + p] = masked && !cand[(size_t)t * width + p] ? -INFINITY : x;
        }
    }
    as_index_topk(ref, s, width, k, clens, offset, want);
    uint16_t *dsc = as_gpu_bytes(score, sizeof(uint16_t) * n);
    uint8_t *dc = as_gpu_bytes(cand, n);
    int32_t *dsel = as_gpu_alloc(sizeof(int32_t) * ((size_t)s * k + 1)), *dsel2 = as_gpu_alloc(sizeof(int32_t) * ((size_t)s * k + 1));
    int32_t params[2] = {width, k};
    int32_t *dp = as_gpu_bytes(params, sizeof params);
    AsTopkLaunch a = {.score = dsc, .ld = width, .s = s, .width = from_device ? -1 : width, .max_width = width,
                      .k = from_device ? -1 : k, .max_k = k, .ratio = ratio, .prefill = prefill, .offset = offset,
                      .width_d = from_device ? dp : NULL, .k_d = from_device ? dp + 1 : NULL,
                      .cand = masked ? dc : NULL, .cand_ld = width, .sel = dsel, .sel2 = dsel2, .ldsel = k};
    as_gpu_check_launch(as_k_index_topk(&a, 0), "index topk");
    as_gpu_get_bytes(got, dsel, sizeof(int32_t) * (size_t)s * k);
    as_gpu_get_bytes(got2, dsel2, sizeof(int32_t) * (size_t)s * k);
    as_gpu_get_bytes(got_score, dsc, sizeof(uint16_t) * n);
    int64_t bad = 0, bad_score = 0;
    for (size_t i = 0; i < (size_t)s * k; i++)
        if ((got[i] != want[i] || got2[i] != want[i]) && bad++ < 3)
            as_test_note("index topk s %d width %d k %d: [%zu][%zu] = %d / %d, want %d", s, width, k, i / k, i % k,
                         got[i], got2[i], want[i]);
    for (size_t i = 0; i < n; i++)
        bad_score += as_bf16_to_f32(got_score[i]) != ref[i];
    CHECK(bad == 0 && bad_score == 0, "index topk s %d width %d k %d ratio %d %s%s%s: %ld selections, %ld masked scores "
          "differ", s, width, k, ratio, prefill ? "prefill" : "decode", masked ? " masked" : "",
          from_device ? " (width, k on the device)" : "", (long)bad, (long)bad_score);
    as_gpu_free(dsc), as_gpu_free(dc), as_gpu_free(dsel), as_gpu_free(dsel2), as_gpu_free(dp);
    free(score), free(got_score), free(cand), free(ref), free(clens), free(want), free(got), free(got2);
}

GPU_TEST(gpu_topk_index_selection)
{
    g_rs = 23456;
    /* flash decode (ratio 2 at 4K, ratio 1 at 4K and 8K with the candidate mask), flash-like prefills,
     * tiny (k 4 of up to 40: partial_sort), one token, a width below k */
    index_case(1, 2048, 512, 2, false, false, 128, true);
    index_case(1, 4096, 512, 1, false, true, 128, true);
    index_case(1, 8192, 512, 1, false, true, 128, false);
    index_case(512, 256, 256, 2, true, false, 512, false);
    index_case(600, 600, 512, 1, true, true, 600, false);
    index_case(40, 40, 4, 1, true, true, 8, false);
    index_case(1, 300, 4, 1, false, true, 8, true);
    index_case(1, 1, 1, 1, true, false, 1, false);
    index_case(1, 5, 5, 1, false, false, 8, true);
}

/* A decode row whose top-k also writes the attention's idx (AsTopkLaunch.idx): entries against
 * build_idx_decode's rule on the reference's selection (-1 past k up to idx_len, entries >= nrows -1
 * and flagged, the count of entries >= 0 added to valid), the selection itself as index_case checks it. */
static void index_idx_case(int width, int k, int ratio, bool masked, int offset, int idx_len, int nrows)
{
    uint16_t *score = malloc(sizeof(uint16_t) * (size_t)width);
    uint8_t *cand = malloc((size_t)width);
    float *ref = malloc(sizeof(float) * (size_t)width);
    int32_t *want = malloc(sizeof(int32_t) * (size_t)k), *got = malloc(sizeof(int32_t) * (size_t)idx_len + 8);
    for (int p = 0; p < width; p++) {
        const float x = as_bf16(urnd(0.1f));
        score[p] = as_bf16_bits(x);
        cand[p] = (uint8_t)((p * 5) % 3 != 0);
        ref[p] = masked && !cand[p] ? -INFINITY : x;
    }
    const int clen = width;
    as_index_topk(ref, 1, width, k, &clen, offset, want);
    uint16_t *dsc = as_gpu_bytes(score, sizeof(uint16_t) * (size_t)width);
    uint8_t *dc = as_gpu_bytes(cand, (size_t)width);
    int32_t *dsel = as_gpu_alloc(sizeof(int32_t) * (size_t)k), *didx = as_gpu_alloc(sizeof(int32_t) * (size_t)idx_len);
    int32_t params[3] = {width, k, nrows};
    int32_t *dp = as_gpu_bytes(params, sizeof params);
    int zero = 0;
    int *dbad = as_gpu_bytes(&zero, sizeof zero);
    unsigned long long zv = 0, valid = 0;
    unsigned long long *dvalid = as_gpu_bytes(&zv, sizeof zv);
    AsTopkLaunch a = {.score = dsc, .ld = width, .s = 1, .width = -1, .max_width = width, .k = -1, .max_k = idx_len,
                      .ratio = ratio, .offset = offset, .width_d = dp, .k_d = dp + 1, .cand = masked ? dc : NULL,
                      .cand_ld = width, .sel = dsel, .ldsel = idx_len, .idx = didx, .idx_len = idx_len, .nrows = -1,
                      .nrows_d = dp + 2, .bad = dbad, .valid = dvalid};
    as_gpu_check_launch(as_k_index_topk(&a, 0), "index topk + idx");
    as_gpu_get_bytes(got, didx, sizeof(int32_t) * (size_t)idx_len);
    int flag = 0;
    as_gpu_get_bytes(&flag, dbad, sizeof flag);
    as_gpu_get_bytes(&valid, dvalid, sizeof valid);
    int want_flag = 0;
    unsigned long long want_valid = 0;
    int64_t wrong = 0;
    for (int j = 0; j < idx_len; j++) {
        int32_t v = j < k ? want[j] : -1;
        if (v >= nrows) {
            want_flag = 1;
            v = -1;
        }
        want_valid += v >= 0;
        if (got[j] != v && wrong++ < 3)
            as_test_note("idx width %d k %d nrows %d: [%d] = %d, want %d", width, k, nrows, j, got[j], v);
    }
    CHECK(wrong == 0 && flag == want_flag && valid == want_valid,
          "index topk + idx width %d k %d of %d nrows %d%s: %ld entries differ, flag %d (want %d), valid %llu (want "
          "%llu)", width, k, idx_len, nrows, masked ? " masked" : "", (long)wrong, flag, want_flag, valid, want_valid);
    as_gpu_free(dsc), as_gpu_free(dc), as_gpu_free(dsel), as_gpu_free(didx), as_gpu_free(dp), as_gpu_free(dbad),
        as_gpu_free(dvalid);
    free(score), free(cand), free(ref), free(want), free(got);
}

GPU_TEST(gpu_topk_index_selection_writes_idx)
{
    g_rs = 45678;
    index_idx_case(4096, 512, 1, true, 128, 512, 128 + 4096); /* flash ratio 1: every row attended */
    index_idx_case(2048, 512, 2, false, 128, 512, 128 + 1500); /* rows past nrows: -1 and flagged */
    index_idx_case(300, 300, 1, true, 128, 512, 128 + 300);    /* k short of the launch's most */
    index_idx_case(5, 4, 1, false, 8, 16, 13);                  /* tiny */
}

static void cand_case(int s, int width, int ratio, bool prefill, int bs, int topk_blocks, bool ties, bool from_device)
{
    const size_t n = (size_t)s * width;
    uint16_t *score = malloc(sizeof(uint16_t) * n);
    float *f = malloc(sizeof(float) * n);
    int *clens = malloc(sizeof(int) * (size_t)s);
    uint8_t *want = malloc(n), *got = malloc(n);
    for (int t = 0; t < s; t++) {
        clens[t] = prefill ? (t + 1) / ratio : width;
        for (int p = 0; p < width; p++) {
            const float x = p >= clens[t] ? -INFINITY : as_bf16(ties ? 1.0f + urnd(0.02f) : urnd(1.0f));
            score[(size_t)t * width + p] = as_bf16_bits(x);
            f[(size_t)t * width + p] = x;
        }
    }
    REQUIRE(as_select_candidate_blocks(f, s, width, clens, bs, topk_blocks, want) == 0, "reference candidate blocks");
    uint16_t *dsc = as_gpu_bytes(score, sizeof(uint16_t) * n);
    uint8_t *dm = as_gpu_alloc(n);
    int32_t wd = width;
    int32_t *dw = as_gpu_bytes(&wd, sizeof wd);
    AsCandLaunch a = {.score = dsc, .ld = width, .s = s, .width = from_device ? -1 : width, .max_width = width,
                      .ratio = ratio, .prefill = prefill, .bs = bs, .topk_blocks = topk_blocks,
                      .width_d = from_device ? dw : NULL, .mask = dm, .mask_ld = width};
    as_gpu_check_launch(as_k_candidate_blocks(&a, 0), "candidate blocks");
    as_gpu_get_bytes(got, dm, n);
    int64_t bad = 0;
    for (size_t i = 0; i < n; i++)
        bad += got[i] != want[i];
    CHECK(bad == 0, "candidate blocks s %d width %d bs %d keep %d %s: %ld mask entries differ", s, width, bs, topk_blocks,
          prefill ? "prefill" : "decode", (long)bad);
    as_gpu_free(dsc), as_gpu_free(dm), as_gpu_free(dw);
    free(score), free(f), free(clens), free(want), free(got);
}

GPU_TEST(gpu_topk_candidate_blocks)
{
    g_rs = 34567;
    cand_case(1, 4096, 1, false, 8, 2048, false, true); /* flash decode: every block kept */
    cand_case(256, 256, 1, true, 8, 2048, false, false);
    cand_case(1, 100, 1, false, 8, 4, true, true);       /* narrowing, tied maxima */
    cand_case(1, 101, 1, false, 8, 4, false, false);     /* a short last block */
    cand_case(40, 40, 1, true, 4, 3, true, false);
    cand_case(64, 64, 1, true, 2, 5, true, false);
    cand_case(20, 10, 2, true, 3, 2, false, false);
}
