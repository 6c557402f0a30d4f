/* kernels/rope.cu against ref/rope.c, bit for bit. The cos / sin tables are the reference's own
 * (as_rope_init_for_ratio on the flash and tiny presets, ratio 0 = plain, ratio 2 = YaRN),
 * uploaded as they are, so only the complex multiply is under test: re = x0*c - x1*s,
 * im = x0*s + x1*c, each step rounded in f32, then bf16. The whole buffer is compared (the
 * non-rotated channels and the row padding must come back untouched). Positions 0, 1, max_seq-1,
 * positions from an array (out of order), inverse rotation, heads with a row stride. */
#include <cuda_runtime_api.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "model/config.h"
#include "ref/numerics.h"
#include "ref/rope.h"
#include "tests/lib/gpu_util.h"
#include "tests/lib/harness.h"

/* ---- helpers ---- */

/* ---- tables ---- */

typedef struct {
    const char *name; /* "flash r0" ... */
    AsRopeTable t;
    float *dcos, *dsin;
} Tables;

static void tables_init(Tables *tb, const char *preset, int ratio, int max_seq, const char *name)
{
    AsConfig cfg;
    AsError err;
    memset(&err, 0, sizeof err);
    REQUIRE(as_config_preset(preset, &cfg, &err) == 0, "preset %s: %s", preset, err.msg);
    cfg.max_seq = max_seq;
    REQUIRE(as_rope_init_for_ratio(&tb->t, &cfg, ratio) == 0, "as_rope_init_for_ratio(%s, %d) failed", preset, ratio);
    int64_t n = (int64_t)max_seq * (tb->t.rd / 2);
    tb->dcos = as_gpu_f32(tb->t.cos, n);
    tb->dsin = as_gpu_f32(tb->t.sin, n);
    tb->name = name;
}

static void tables_free(Tables *tb)
{
    as_gpu_free(tb->dcos);
    as_gpu_free(tb->dsin);
    as_rope_free(&tb->t);
}

/* ---- one case ---- */

#define PAD_BITS 0xdeadu /* a finite bf16 (-6.3e18): padding must come back as it went */

/* rows of `heads` sub-rows of `width`, row stride ld; positions pos[] when given (use_pos), else
 * pos0 + row. wide: inputs over 2^-30 .. 2^30 instead of [-4, 4]. */
static void check_case(const Tables *tb, const char *what_tensor, int rows, int heads, int width, int64_t ld,
                       int pos0, const int *pos, int inverse, int wide, uint64_t seed)
{
    const AsRopeTable *t = &tb->t;
    char what[200];
    if (pos)
        snprintf(what, sizeof what, "rope %s %s rows=%d heads=%d width=%d ld=%lld pos[]=%d..%s", tb->name,
                 what_tensor, rows, heads, width, (long long)ld, pos[0], inverse ? " inverse" : "");
    else
        snprintf(what, sizeof what, "rope %s %s rows=%d heads=%d width=%d ld=%lld pos0=%d%s", tb->name, what_tensor,
                 rows, heads, width, (long long)ld, pos0, inverse ? " inverse" : "");
    int *p = as_test_xmalloc(sizeof(int) * (size_t)rows);
    for (int r = 0; r < rows; r++) {
        p[r] = pos ? pos[r] : pos0 + r;
        REQUIRE(p[r] >= 0 && p[r] < t->max_seq, "%s: test bug: position %d outside the table (%d)", what, p[r],
                t->max_seq);
    }

    int64_t n = (int64_t)rows * ld;
    float *x = as_test_xmalloc(sizeof(float) * (size_t)n);
    as_fill_uniform(x, n, 4.0f, seed, 1);
    if (wide) /* scale each value by 2^k, k in [-30, 30]: exact, keeps bf16 values */
        for (int64_t i = 0; i < n; i++)
            x[i] = ldexpf(x[i], (int)((uint64_t)(i * 2654435761u + seed) % 61) - 30);
    for (int r = 0; r < rows; r++)
        for (int64_t i = (int64_t)heads * width; i < ld; i++)
            x[(int64_t)r * ld + i] = as_bf16_to_f32(PAD_BITS);

    as_bf16_t *dx = as_gpu_bf16(x, n);
    int32_t *dpos = NULL;
    if (pos)
        dpos = as_gpu_bytes(p, sizeof(int32_t) * (size_t)rows);
    as_gpu_check_launch(as_k_rope(dx, ld, rows, heads, width, t->rd, pos0, dpos, tb->dcos, tb->dsin, inverse, 0),
                        what);

    /* the reference: as_rope_heads for contiguous heads at pos0 + row, else as_rope_rows per head */
    if (!pos && ld == (int64_t)heads * width) {
        as_rope_heads(x, rows, heads, width, pos0, t, inverse != 0);
    } else {
        for (int h = 0; h < heads; h++)
            as_rope_rows(x + (int64_t)h * width, rows, ld, width, p, t, inverse != 0);
    }

    uint16_t *got = as_test_xmalloc(sizeof(uint16_t) * (size_t)n), *want = as_test_xmalloc(sizeof(uint16_t) * (size_t)n);
    as_gpu_get_bytes(got, dx, sizeof(uint16_t) * (size_t)n);
    for (int64_t i = 0; i < n; i++)
        want[i] = as_bf16_bits(x[i]);
    AsBf16Diff d = as_diff_bf16(what, got, want, rows, ld, 0);
    for (int64_t i = 0; i < n && d.bad; i++) /* the first mismatch in the model's terms */
        if (got[i] != want[i]) {
            int64_t r = i / ld, ch = i % ld, h = ch / width, c = ch % width, k = (c - (width - t->rd)) / 2;
            if (h >= heads)
                as_test_note("%s: first mismatch: row %lld, row padding channel %lld (must stay untouched)", what,
                             (long long)r, (long long)(ch - (int64_t)heads * width));
            else if (c < width - t->rd)
                as_test_note("%s: first mismatch: row %lld head %lld channel %lld: not a RoPE channel (must stay "
                             "untouched)", what, (long long)r, (long long)h, (long long)c);
            else
                as_test_note("%s: first mismatch: row %lld head %lld channel %lld = pair %lld %s, position %d, "
                             "cos %a sin %a", what, (long long)r, (long long)h, (long long)c, (long long)k,
                             c % 2 == (width - t->rd) % 2 ? "re" : "im", p[r],
                             (double)t->cos[(int64_t)p[r] * (t->rd / 2) + k], (double)t->sin[(int64_t)p[r] * (t->rd / 2) + k]);
            break;
        }
    CHECK(d.bad == 0, "%s: %lld of %lld elements differ (coordinates [row][channel within ld] above)", what,
          (long long)d.bad, (long long)n);
    if (d.bad == 0)
        as_test_note("%s: %lld/%lld bit-exact", what, (long long)n, (long long)n);
    free(p), free(x), free(got), free(want);
    as_gpu_free(dx);
    if (dpos)
        as_gpu_free(dpos);
}

/* The flash geometry: q [s][64][512], kv / latents [s][512], index q [s][32][128]; rd 64. */
static void flash_cases(const Tables *tb)
{
    const int last = tb->t.max_seq - 1;
    /* q, positions 0, 1, max_seq - 1; chunks starting at 0 and ending at max_seq - 1 */
    check_case(tb, "q", 1, 64, 512, 64 * 512, 0, NULL, 0, 0, 1);
    check_case(tb, "q", 1, 64, 512, 64 * 512, 1, NULL, 0, 0, 2);
    check_case(tb, "q", 1, 64, 512, 64 * 512, last, NULL, 0, 0, 3);
    check_case(tb, "q", 7, 64, 512, 64 * 512, 0, NULL, 0, 0, 4);
    check_case(tb, "q", 7, 64, 512, 64 * 512, last - 6, NULL, 0, 0, 5);
    check_case(tb, "q", 512, 64, 512, 64 * 512, 0, NULL, 0, 0, 6);
    check_case(tb, "q", 512, 64, 512, 64 * 512, last - 511, NULL, 0, 0, 7);
    /* o rotated back */
    check_case(tb, "o", 1, 64, 512, 64 * 512, last, NULL, 1, 0, 8);
    check_case(tb, "o", 7, 64, 512, 64 * 512, 3, NULL, 1, 0, 9);
    check_case(tb, "o", 512, 64, 512, 64 * 512, 0, NULL, 1, 0, 10);
    /* kv rows, one head per row; wide exponents */
    check_case(tb, "kv", 512, 1, 512, 512, 0, NULL, 0, 1, 11);
    check_case(tb, "kv", 1, 1, 512, 512, 4097, NULL, 0, 1, 12);
    /* latents at their groups' first positions (ratio 2: even), out of order, from an array */
    const int lat_pos[] = {0, 2, last - 1, 4, 1000, last - 1, 6};
    check_case(tb, "latent", 7, 1, 512, 512, 0, lat_pos, 0, 0, 13);
    /* index q: 32 heads of 128 inside a row padded by 64 (row stride > heads * width) */
    check_case(tb, "index q", 7, 32, 128, 32 * 128 + 64, 100, NULL, 0, 0, 14);
    check_case(tb, "index q", 1, 32, 128, 32 * 128 + 8, last, NULL, 0, 0, 15);
    const int iq_pos[] = {last, 0, 1, 513, 7, 8000, 2, 4096, 9};
    check_case(tb, "index q", 9, 32, 128, 32 * 128 + 64, 0, iq_pos, 0, 0, 16);
    /* q heads inside a wider row, inverse, positions from an array */
    check_case(tb, "o", 9, 64, 512, 64 * 512 + 128, 0, iq_pos, 1, 0, 17);
}

/* tiny: q [s][4][64], kv [s][64], index q [s][4][32]; rd 16, max_seq 512. */
static void tiny_cases(const Tables *tb)
{
    const int last = tb->t.max_seq - 1;
    check_case(tb, "q", 1, 4, 64, 4 * 64, 0, NULL, 0, 0, 31);
    check_case(tb, "q", 1, 4, 64, 4 * 64, 1, NULL, 0, 0, 32);
    check_case(tb, "q", 1, 4, 64, 4 * 64, last, NULL, 0, 0, 33);
    check_case(tb, "q", 7, 4, 64, 4 * 64, 0, NULL, 0, 0, 34);
    check_case(tb, "q", 20, 4, 64, 4 * 64, last - 19, NULL, 0, 0, 35);
    check_case(tb, "o", 7, 4, 64, 4 * 64, 5, NULL, 1, 0, 36);
    check_case(tb, "kv", 20, 1, 64, 64, 0, NULL, 0, 1, 37);
    check_case(tb, "index q", 7, 4, 32, 4 * 32 + 3, 9, NULL, 0, 0, 38); /* odd row stride */
    const int pos[] = {0, 2, 4, last - 1, 6};
    check_case(tb, "latent", 5, 1, 64, 64, 0, pos, 0, 0, 39);
}

GPU_TEST(gpu_rope_flash_plain_and_yarn)
{
    Tables r0, r2;
    tables_init(&r0, "flash", 0, 8192, "flash r0");
    tables_init(&r2, "flash", 2, 8192, "flash r2 (YaRN)");
    flash_cases(&r0);
    flash_cases(&r2);
    tables_free(&r0);
    tables_free(&r2);
}

GPU_TEST(gpu_rope_tiny_plain_and_yarn)
{
    Tables r0, r2;
    tables_init(&r0, "tiny", 0, 512, "tiny r0");
    tables_init(&r2, "tiny", 2, 512, "tiny r2 (YaRN)");
    tiny_cases(&r0);
    tiny_cases(&r2);
    tables_free(&r0);
    tables_free(&r2);
}

GPU_TEST(gpu_rope_refuses_bad_sizes)
{
    float *c = (float *)(uintptr_t)16; /* never dereferenced: every call below is refused */
    as_bf16_t *x = (as_bf16_t *)(uintptr_t)16;
    CHECK(as_k_rope(x, 512, 1, 1, 512, 63, 0, NULL, c, c, 0, 0) == (int)cudaErrorInvalidValue, "odd rd refused");
    CHECK(as_k_rope(x, 512, 1, 1, 32, 64, 0, NULL, c, c, 0, 0) == (int)cudaErrorInvalidValue, "width < rd refused");
    CHECK(as_k_rope(x, 1000, 1, 2, 512, 64, 0, NULL, c, c, 0, 0) == (int)cudaErrorInvalidValue,
          "ld < heads * width refused");
    CHECK(as_k_rope(x, 512, 1, 1, 512, 64, -1, NULL, c, c, 0, 0) == (int)cudaErrorInvalidValue,
          "negative pos0 refused");
    CHECK(as_k_rope(x, 512, 1, 0, 512, 64, 0, NULL, c, c, 0, 0) == (int)cudaErrorInvalidValue, "heads = 0 refused");
    CHECK(as_k_rope(x, 512, 0, 1, 512, 64, 0, NULL, c, c, 0, 0) == 0, "rows = 0 is a no-op");
}
