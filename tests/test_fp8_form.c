/* model/fp8_form.c: the fp8 form's scales against the weight's own decoding (every element of
 * as_wt_rows_f32, bf16(e4m3 * scale), must be e4m3 * ws[o / 32][i / 32] exactly), for 32- and 128-blocks,
 * rows and columns that end inside a block, e8m0 and f32 scales; the padding of a scale row; which scales
 * are powers of two; when the codes give the bf16 values exactly. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "model/fp8_form.h"
#include "ref/numerics.h"
#include "tests/lib/fp8_cases.h"
#include "tests/lib/harness.h"

static void check_form(const AsWTensor *w, const char *what)
{
    const int64_t rows = as_wt_rows(w), cols = as_wt_cols(w), ldws = as_fp8_form_ldws(cols);
    const int64_t srows = as_fp8_form_scale_rows(rows);
    CHECK(ldws % 4 == 0 && ldws >= cols / 32 && ldws < cols / 32 + 4, "%s: ldws %lld for %lld columns", what,
          (long long)ldws, (long long)cols);
    float *ws = malloc(sizeof(float) * (size_t)(srows * ldws)), *row = malloc(sizeof(float) * (size_t)cols);
    REQUIRE(ws && row, "out of host memory");
    for (int64_t i = 0; i < srows * ldws; i++)
        ws[i] = -1.0f;
    REQUIRE(as_fp8_form_scales(w, ws) == 0, "%s: as_fp8_form_scales failed", what);
    int64_t bad = 0, pad = 0;
    for (int64_t o = 0; o < rows; o++) {
        as_wt_rows_f32(w, o, 1, row);
        for (int64_t i = 0; i < cols; i++) {
            const float v = as_e4m3_from_bits(((const uint8_t *)w->data)[o * cols + i]) * ws[(o / 32) * ldws + i / 32];
            if (v != row[i] && bad++ < 3)
                as_test_note("%s: [%lld][%lld]: e4m3 * ws = %.9g, the weight %.9g", what, (long long)o, (long long)i, v,
                             row[i]);
        }
    }
    for (int64_t rb = 0; rb < srows; rb++)
        for (int64_t k = cols / 32; k < ldws; k++)
            pad += ws[rb * ldws + k] != 0.0f;
    CHECK(bad == 0, "%s: %lld weights are not e4m3 times their fp8-form scale", what, (long long)bad);
    CHECK(pad == 0, "%s: %lld padding scales are not 0", what, (long long)pad);
    free(ws), free(row);
}

TEST(fp8_form_scales_match_the_weight)
{
    const struct {
        int64_t rows, cols;
        int B;
    } shapes[] = {{64, 64, 32}, {77, 160, 32}, {200, 384, 128}, {130, 160, 128}, {1, 32, 32}, {33, 96, 128}};
    for (size_t i = 0; i < sizeof shapes / sizeof shapes[0]; i++) {
        AsTestFp8W f;
        as_test_fp8w_make(&f, shapes[i].rows, shapes[i].cols, shapes[i].B, 0, 3 + i);
        check_form(&f.w, f.w.name);
        CHECK(as_fp8_scales_pow2(&f.w), "%s: e8m0 scales not taken as powers of two", f.w.name);
        as_test_fp8w_free(&f);
    }
}

/* f32 scales: powers of two are exact in the fp8 form; 0.75 is not a power of two (the bf16 linear's
 * weight bf16(e4m3 * 0.75) may differ from e4m3 * 0.75, so wo_a cannot be streamed in fp8 form). */
TEST(fp8_form_f32_scales_and_powers_of_two)
{
    AsTestFp8W f;
    as_test_fp8w_make(&f, 64, 96, 32, 1, 9);
    float sc[2 * 3] = {0.5f, 0x1p-12f, 4.0f, 1.0f, 0x1p-7f, 0x1p-130f};
    AsWTensor s32 = {.dtype = AS_DT_F32, .ndim = 2, .shape = {2, 3}, .data = sc, .nbytes = sizeof sc};
    AsWTensor w = f.w;
    w.scale = &s32;
    check_form(&w, "f32 powers of two");
    CHECK(as_fp8_scales_pow2(&w), "f32 powers of two (one subnormal) not taken as powers of two");
    sc[4] = 0.75f;
    check_form(&w, "f32 with 0.75");
    CHECK(!as_fp8_scales_pow2(&w), "a scale of 0.75 taken as a power of two");
    sc[4] = 0.0f;
    CHECK(!as_fp8_scales_pow2(&w), "a scale of 0 taken as a power of two");
    as_test_fp8w_free(&f);
}

/* as_fp8_codes_exact: the codes form is taken for e8m0 and f32 power-of-two scales in [2^-100, 2^100] over
 * codes without NaN; refused for a NaN code anywhere (the first, the last, one past a multiple of 8), a
 * scale that is not a power of two, one outside the range (e8m0 and f32), columns not in whole blocks. */
TEST(fp8_form_codes_exact_when_the_bf16_values_are)
{
    AsTestFp8W f;
    as_test_fp8w_make(&f, 64, 96, 32, 0, 21);
    CHECK(as_fp8_codes_exact(&f.w), "e8m0 scales 2^-10..2^-3, no NaN code: refused");
    const int64_t n = f.w.nbytes, at[] = {0, n - 1, 8 * 37 + 1};
    for (size_t k = 0; k < sizeof at / sizeof at[0]; k++) {
        for (uint8_t nan = 0x7f; nan; nan = nan == 0x7f ? 0xff : 0) {
            const uint8_t keep = f.codes[at[k]];
            f.codes[at[k]] = nan;
            CHECK(!as_fp8_codes_exact(&f.w), "a NaN code 0x%02x at %lld taken", nan, (long long)at[k]);
            f.codes[at[k]] = keep;
        }
    }
    CHECK(as_fp8_codes_exact(&f.w), "the codes restored: refused");
    const uint8_t keep = f.scale_bytes[1];
    f.scale_bytes[1] = 26; /* 2^-101 */
    CHECK(!as_fp8_codes_exact(&f.w), "an e8m0 scale of 2^-101 taken");
    f.scale_bytes[1] = 228; /* 2^101 */
    CHECK(!as_fp8_codes_exact(&f.w), "an e8m0 scale of 2^101 taken");
    f.scale_bytes[1] = 27; /* 2^-100 */
    CHECK(as_fp8_codes_exact(&f.w), "an e8m0 scale of 2^-100 refused");
    f.scale_bytes[1] = keep;
    float sc[2 * 3] = {0.5f, 0x1p-12f, 4.0f, 1.0f, 0x1p-7f, 0x1p100f};
    AsWTensor s32 = {.dtype = AS_DT_F32, .ndim = 2, .shape = {2, 3}, .data = sc, .nbytes = sizeof sc};
    AsWTensor w = f.w;
    w.scale = &s32;
    CHECK(as_fp8_codes_exact(&w), "f32 powers of two up to 2^100 refused");
    sc[5] = 0x1p101f;
    CHECK(!as_fp8_codes_exact(&w), "an f32 scale of 2^101 taken");
    sc[5] = 0.75f;
    CHECK(!as_fp8_codes_exact(&w), "an f32 scale of 0.75 taken");
    sc[5] = 0x1p-130f;
    CHECK(!as_fp8_codes_exact(&w), "a subnormal f32 scale taken");
    w.scale = NULL;
    CHECK(!as_fp8_codes_exact(&w), "no scale tensor taken");
    as_test_fp8w_free(&f);
}
