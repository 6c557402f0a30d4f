/* kernels/index_scores.cu (as_k_index_scores) against its CPU twins as_index_scores +
 * as_index_visibility (ref/indexer.c).
 *
 * With fp4-e8m0-quantised index queries and keys, as the model has them, every dot product is exact
 * in f32 whatever the summation order, so the scores must be BIT-EXACT (every staging rounding,
 * the head order of the sum and the -inf mask included). With unquantised bf16 data the dots can
 * differ in their last f32 bits between the tensor cores and the CPU's sgemm, which can flip a
 * bf16(dot) near a rounding tie: there the check counts the bit-exact scores (>= 99% required),
 * allows at most 2 bf16 ulps, and requires the -inf mask to be exact.
 * Outputs are poisoned before every launch. The first mismatches print (t, p), both bit patterns,
 * and the reference's 32 per-head dots (f64) of that score. */
#include <cuda_runtime_api.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "ref/indexer.h"
#include "ref/numerics.h"
#include "ref/quant.h"
#include "tests/lib/gpu_util.h"
#include "tests/lib/harness.h"

/* Not in kernels.h: force_scalar = 1 takes the scalar kernel whatever the geometry. */
int as_k_index_scores_path(const as_bf16_t *iq, const as_bf16_t *keys, const as_bf16_t *w, int s, int nh, int ihd,
                           int width, int start_pos, int ratio, as_bf16_t *score, int force_scalar, cudaStream_t st);

static void *xmalloc(size_t bytes)
{
    void *p = malloc(bytes ? bytes : 1);
    REQUIRE(p, "out of host memory (%zu bytes)", bytes);
    return p;
}

static int64_t ordered16(uint16_t b) { return b & 0x8000 ? -(int64_t)(b & 0x7fff) : (int64_t)b; }
static int is_nan16(uint16_t b) { return (b & 0x7f80) == 0x7f80 && (b & 0x7f); }

typedef struct {
    const char *name;
    int s, nh, ihd, width, start_pos, ratio;
    int quantised;    /* fp4-e8m0 iq and keys (exact dots) */
    int force_scalar;
} ScoreCase;

/* AS_KTEST_SMALL=1 (for runs under compute-sanitizer): only the small cases. */
static int small_only(void)
{
    const char *e = getenv("AS_KTEST_SMALL");
    return e && *e && *e != '0';
}

static void run_scores(const ScoreCase *c, uint64_t seed)
{
    if (small_only() && (c->s > 64 || c->width > 1024)) {
        as_test_note("%s: skipped (AS_KTEST_SMALL)", c->name);
        return;
    }
    const int s = c->s, nh = c->nh, ihd = c->ihd, width = c->width;
    const int64_t niq = (int64_t)s * nh * ihd, nk = (int64_t)width * ihd, nw = (int64_t)s * nh,
                  ns = (int64_t)s * width;
    float *iq = xmalloc(sizeof(float) * (size_t)niq), *k = xmalloc(sizeof(float) * (size_t)(nk + 1));
    float *w = xmalloc(sizeof(float) * (size_t)nw), *want = xmalloc(sizeof(float) * (size_t)(ns + 1));
    as_fill_uniform(iq, niq, 3.0f, seed, 1);
    as_fill_uniform(k, nk, 3.0f, seed + 1, 1);
    as_fill_uniform(w, nw, 0.25f, seed + 2, 1); /* signed weights */
    /* a few exact zeros: a zero query head, a zero key row, zero weights */
    if (s > 1)
        memset(iq + ((int64_t)1 * nh + nh / 2) * ihd, 0, sizeof(float) * (size_t)ihd);
    if (width > 2)
        memset(k + (int64_t)2 * ihd, 0, sizeof(float) * (size_t)ihd);
    for (int64_t i = 0; i < nw; i += 7)
        w[i] = 0.0f;
    if (c->quantised) {
        as_fp4_quant_e8m0(iq, niq, AS_FP4_E8M0_BLOCK);
        as_fp4_quant_e8m0(k, nk, AS_FP4_E8M0_BLOCK);
    }
    int *clen = xmalloc(sizeof(int) * (size_t)s);
    for (int t = 0; t < s; t++) {
        int cl = c->start_pos == 0 ? (t + 1) / c->ratio : width;
        clen[t] = cl > width ? width : cl;
    }
    REQUIRE(as_index_scores(iq, k, w, s, nh, ihd, width, want) == 0, "as_index_scores: out of memory");
    as_index_visibility(want, s, width, clen);

    as_bf16_t *diq = as_gpu_bf16(iq, niq), *dk = as_gpu_bf16(k, nk), *dw = as_gpu_bf16(w, nw);
    as_bf16_t *dsc = as_gpu_alloc(sizeof(uint16_t) * (size_t)(ns + 64)); /* + guard */
    REQUIRE(cudaMemset(dsc, 0x7f, sizeof(uint16_t) * (size_t)(ns + 64)) == cudaSuccess, "poison");
    char what[256];
    snprintf(what, sizeof what, "%s: s=%d nh=%d ihd=%d width=%d start_pos=%d ratio=%d%s%s", c->name, s, nh, ihd, width,
             c->start_pos, c->ratio, c->quantised ? " fp4 data" : " bf16 data",
             c->force_scalar ? " [scalar kernel]" : "");
    as_gpu_check_launch(
        as_k_index_scores_path(diq, dk, dw, s, nh, ihd, width, c->start_pos, c->ratio, dsc, c->force_scalar, 0), what);
    uint16_t *got = xmalloc(sizeof(uint16_t) * (size_t)(ns + 64));
    as_gpu_get_bytes(got, dsc, sizeof(uint16_t) * (size_t)(ns + 64));

    int64_t exact = 0, near = 0, bad = 0, masked = 0, mask_bad = 0;
    for (int64_t i = 0; i < ns; i++) {
        const int t = (int)(i / width), p = (int)(i % width);
        const uint16_t g = got[i], wb = as_bf16_bits(want[i]);
        const int want_masked = p >= clen[t];
        masked += want_masked;
        if (g == wb || (is_nan16(g) && is_nan16(wb))) {
            exact++;
            continue;
        }
        const int64_t ulp = is_nan16(g) || is_nan16(wb) ? 1 << 20 : llabs(ordered16(g) - ordered16(wb));
        const int mask_wrong = want_masked || g == 0xff80;
        mask_bad += mask_wrong;
        if (!c->quantised && !mask_wrong && ulp <= 2) {
            near++;
            continue;
        }
        if (bad < 4) {
            as_test_note("%s: score[t=%d][p=%d]: got 0x%04x (%.9g), want 0x%04x (%.9g), %lld ulp%s", what, t, p, g,
                         as_bf16_to_f32(g), wb, want[i], (long long)ulp, is_nan16(g) ? " (NaN: not written?)" : "");
            if (!want_masked) {
                char line[1024];
                int len = 0;
                for (int h = 0; h < nh && len < 900; h++) {
                    double d = 0;
                    for (int j = 0; j < ihd; j++)
                        d += (double)iq[((int64_t)t * nh + h) * ihd + j] * k[(int64_t)p * ihd + j];
                    len += snprintf(line + len, sizeof line - (size_t)len, " %.6g", d);
                }
                as_test_note("  reference dots over heads 0..%d:%s", nh - 1, line);
            }
        }
        bad++;
    }
    int64_t guard_bad = 0;
    for (int64_t i = ns; i < ns + 64; i++)
        guard_bad += got[i] != 0x7f7f;
    CHECK(guard_bad == 0, "%s: %lld scores written past the end", what, (long long)guard_bad);
    CHECK(mask_bad == 0, "%s: %lld positions where the -inf visibility mask differs", what, (long long)mask_bad);
    CHECK(bad == 0, "%s: %lld of %lld scores differ%s", what, (long long)bad, (long long)ns,
          c->quantised ? " (fp4 data: must be bit-exact)" : " by more than 2 bf16 ulps");
    if (!c->quantised)
        CHECK(exact * 100 >= ns * 99, "%s: only %lld of %lld scores bit-exact (< 99%%)", what, (long long)exact,
              (long long)ns);
    as_test_note("%s: %lld/%lld bit-exact (%lld of them -inf), %lld within 2 ulps, %lld bad", what, (long long)exact,
                 (long long)ns, (long long)masked, (long long)near, (long long)bad);
    free(iq), free(k), free(w), free(want), free(clen), free(got);
    as_gpu_free(diq), as_gpu_free(dk), as_gpu_free(dw), as_gpu_free(dsc);
}

GPU_TEST(gpu_index_scores_flash)
{
    const ScoreCase cases[] = {
        /* name, s, nh, ihd, width, start_pos, ratio, quantised, force_scalar */
        {"decode", 1, 32, 128, 4096, 8191, 2, 1, 0},
        {"decode width 1", 1, 32, 128, 1, 2, 2, 1, 0},
        {"decode width 77 (not a tile multiple)", 1, 32, 128, 77, 154, 2, 1, 0},
        {"prefill ratio 1", 7, 32, 128, 7, 0, 1, 1, 0},
        {"prefill ratio 2", 64, 32, 128, 32, 0, 2, 1, 0},
        {"prefill ratio 1", 512, 32, 128, 512, 0, 1, 1, 0},
        {"prefill ratio 2", 512, 32, 128, 256, 0, 2, 1, 0},
        {"prefill ratio 1, width 100", 100, 32, 128, 100, 0, 1, 1, 0},
        {"prefill ratio 2", 1024, 32, 128, 512, 0, 2, 1, 0},
        {"prefill, width past the visibility", 64, 32, 128, 300, 0, 1, 1, 0},
        {"prefill s=3 ratio 4 (clen 0 rows)", 3, 32, 128, 1, 0, 4, 1, 0},
        {"ihd 64", 64, 32, 64, 64, 0, 1, 1, 0},
        {"scalar kernel on the flash geometry", 7, 32, 128, 7, 0, 1, 1, 1},
        {"unquantised bf16 data", 64, 32, 128, 64, 0, 1, 0, 0},
        {"unquantised bf16 data, decode", 1, 32, 128, 4096, 4096, 1, 0, 0},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
        run_scores(&cases[i], 7000 + 13 * i);
}

GPU_TEST(gpu_index_scores_tiny)
{
    const ScoreCase cases[] = {
        {"tiny decode", 1, 4, 32, 10, 20, 2, 1, 0},
        {"tiny prefill ratio 1", 7, 4, 32, 7, 0, 1, 1, 0},
        {"tiny prefill ratio 2", 64, 4, 32, 32, 0, 2, 1, 0},
        {"tiny unquantised", 64, 4, 32, 64, 0, 1, 0, 0},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
        run_scores(&cases[i], 9000 + 13 * i);
}

GPU_TEST(gpu_index_scores_refuses_nonsense)
{
    as_bf16_t *d = as_gpu_alloc(1 << 16);
    CHECK(as_k_index_scores(d, d, d, -1, 32, 128, 8, 0, 1, d, 0) == (int)cudaErrorInvalidValue, "s < 0 refused");
    CHECK(as_k_index_scores(d, d, d, 1, 0, 128, 8, 0, 1, d, 0) == (int)cudaErrorInvalidValue, "nh 0 refused");
    CHECK(as_k_index_scores(d, d, d, 1, 32, 0, 8, 0, 1, d, 0) == (int)cudaErrorInvalidValue, "ihd 0 refused");
    CHECK(as_k_index_scores(d, d, d, 1, 32, 128, 8, 0, 0, d, 0) == (int)cudaErrorInvalidValue, "ratio 0 refused");
    CHECK(as_k_index_scores(d, d, d, 1, 32, 128, -1, 0, 1, d, 0) == (int)cudaErrorInvalidValue, "width < 0 refused");
    CHECK(as_k_index_scores(d, d, d, 1, 32, 128, 0, 0, 1, d, 0) == 0, "width 0 is a no-op");
    CHECK(as_k_index_scores(NULL, d, d, 1, 32, 128, 8, 0, 1, d, 0) == (int)cudaErrorInvalidValue, "iq NULL refused");
    as_gpu_sync("index scores refusals");
    as_gpu_free(d);
}
