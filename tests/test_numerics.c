/* The scalar roundings (ref/numerics): every value of torch's rounding fixture, then the edges
 * by hand. */
#include <float.h>
#include <math.h>

#include "ref/numerics.h"
#include "tests/lib/fixtures.h"
#include "tests/lib/harness.h"

TEST(numerics_bf16_e4m3_torch_fixture)
{
    AsRoundingFixture f;
    char err[512];
    REQUIRE(as_fixture_load_rounding(&f, err, sizeof err) == 0, "%s", err);
    int64_t bad_bf16 = 0, bad_e4m3 = 0, bad_clamp = 0;
    for (int64_t i = 0; i < f.n; i++) {
        float x = as_bits_f32(f.f32_bits[i]);
        uint16_t b = as_bf16_bits(x);
        if (b != f.bf16_bits[i] && bad_bf16++ == 0)
            as_test_fail(__FILE__, __LINE__, "bf16: value %lld: f32 0x%08x (%.9g): got 0x%04x, torch 0x%04x",
                         (long long)i, f.f32_bits[i], x, b, f.bf16_bits[i]);
        /* the fixture's clamp is the quantiser's clamp */
        float c = x < -448.0f ? -448.0f : x > 448.0f ? 448.0f : x;
        if (as_f32_bits(c) != f.clamped_f32_bits[i] && bad_clamp++ == 0)
            as_test_fail(__FILE__, __LINE__, "clamp: value %lld: 0x%08x -> 0x%08x, fixture 0x%08x",
                         (long long)i, f.f32_bits[i], as_f32_bits(c), f.clamped_f32_bits[i]);
        float cf = as_bits_f32(f.clamped_f32_bits[i]);
        uint8_t e = as_e4m3_bits(cf);
        if (e != f.e4m3_bits[i] && bad_e4m3++ == 0)
            as_test_fail(__FILE__, __LINE__, "e4m3: value %lld: f32 0x%08x (%.9g): got 0x%02x, torch 0x%02x",
                         (long long)i, f.clamped_f32_bits[i], cf, e, f.e4m3_bits[i]);
    }
    as_test_note("rounding fixture (%s): bf16 %lld/%lld exact, e4m3 %lld/%lld exact", f.source,
                 (long long)(f.n - bad_bf16), (long long)f.n, (long long)(f.n - bad_e4m3), (long long)f.n);
    CHECK(bad_bf16 == 0 && bad_e4m3 == 0 && bad_clamp == 0, "%lld bf16, %lld e4m3, %lld clamp mismatches",
          (long long)bad_bf16, (long long)bad_e4m3, (long long)bad_clamp);
    CHECK(f.n > 10000, "fixture holds only %lld values", (long long)f.n);
    as_fixture_free_rounding(&f);
}

TEST(numerics_bf16_ties_and_nan)
{
    /* 1 + 2^-8 is halfway between 1 and 1 + 2^-7: even (1). 1 + 3*2^-8 halfway between
     * 1 + 2^-7 (odd) and 1 + 2^-6 (even): 1 + 2^-6. */
    CHECK(as_bf16(1.0f + 0x1p-8f) == 1.0f, "1 + 2^-8");
    CHECK(as_bf16(1.0f + 3 * 0x1p-8f) == 1.0f + 0x1p-6f, "1 + 3*2^-8");
    CHECK(as_bf16(1.0f + 0x1p-8f + 0x1p-20f) == 1.0f + 0x1p-7f, "just above the tie rounds up");
    CHECK(as_bf16(-0.0f) == 0.0f && signbit(as_bf16(-0.0f)), "-0 stays -0");
    CHECK(isnan(as_bf16(NAN)), "NaN stays NaN");
    CHECK(isinf(as_bf16(FLT_MAX)), "FLT_MAX rounds to inf (as torch)");
}

static void check_e4m3(float x, uint8_t want, const char *why)
{
    uint8_t got = as_e4m3_bits(x);
    CHECK(got == want, "e4m3(%a) [%s]: got 0x%02x, want 0x%02x", x, why, got, want);
}

TEST(numerics_e4m3_edges)
{
    check_e4m3(0.0f, 0x00, "+0");
    check_e4m3(-0.0f, 0x80, "-0 keeps its sign");
    check_e4m3(0x1p-9f, 0x01, "smallest subnormal");
    check_e4m3(-0x1p-9f, 0x81, "negative subnormal");
    check_e4m3(0x1p-10f, 0x00, "half the smallest subnormal: tie to even 0");
    check_e4m3(0x1.000002p-10f, 0x01, "just above that tie");
    check_e4m3(3 * 0x1p-10f, 0x02, "1.5 * 2^-9: tie between codes 1 and 2 -> 2");
    check_e4m3(7 * 0x1p-9f, 0x07, "largest subnormal");
    check_e4m3(7.5f * 0x1p-9f, 0x08, "tie between 7*2^-9 and 2^-6 -> 2^-6 (even)");
    check_e4m3(0x1p-6f, 0x08, "smallest normal");
    check_e4m3(1.0f, 0x38, "1");
    check_e4m3(1.0625f, 0x38, "1 + 1/16: tie between 1 (000) and 1.125 (001) -> 1");
    check_e4m3(1.1875f, 0x3a, "1.125 + 1/16: tie between 001 and 010 -> 1.25");
    check_e4m3(448.0f, 0x7e, "max");
    check_e4m3(-448.0f, 0xfe, "-max");
    check_e4m3(449.0f, 0x7e, "449 rounds to 448");
    check_e4m3(464.0f, 0x7e, "464: tie between 448 and 480 (no such value) -> even mantissa, 448");
    check_e4m3(nextafterf(464.0f, 1000.0f), 0x7f, "above 464: NaN, as torch");
    check_e4m3(480.0f, 0x7f, "480: NaN");
    check_e4m3(-1000.0f, 0xff, "-1000: NaN with the sign");
    check_e4m3(INFINITY, 0x7f, "inf: NaN (no inf in e4m3fn)");
    check_e4m3(NAN, 0x7f, "NaN");
    check_e4m3(1e-30f, 0x00, "tiny: 0");

    CHECK(as_e4m3_from_bits(0x7e) == 448.0f, "0x7e is 448");
    CHECK(as_e4m3_from_bits(0x01) == 0x1p-9f, "0x01 is 2^-9");
    CHECK(as_e4m3_from_bits(0x08) == 0x1p-6f, "0x08 is 2^-6");
    CHECK(as_e4m3_from_bits(0xb8) == -1.0f, "0xb8 is -1");
    CHECK(isnan(as_e4m3_from_bits(0x7f)) && isnan(as_e4m3_from_bits(0xff)), "0x7f, 0xff are NaN");
    CHECK(signbit(as_e4m3_from_bits(0x80)) && as_e4m3_from_bits(0x80) == 0.0f, "0x80 is -0");
    /* every code survives the round trip */
    int bad = 0;
    for (int b = 0; b < 256; b++) {
        if ((b & 0x7f) == 0x7f)
            continue;
        if (as_e4m3_bits(as_e4m3_from_bits((uint8_t)b)) != b && bad++ < 3)
            as_test_fail(__FILE__, __LINE__, "code 0x%02x does not round-trip", b);
    }
    CHECK(as_e4m3(300.0f) == 288.0f, "300 -> 288 (step 32 in [256, 448]: 288 nearer than 320)");
    CHECK(as_e4m3(304.0f) == 320.0f, "304: tie between 288 (001) and 320 (010) -> 320");
}

TEST(numerics_e2m1_ties)
{
    static const struct { float x, want; } cases[] = {
        /* the ties of SPEC 2: the even code wins (0, 1, 2, 4 are codes 0, 2, 4, 6) */
        {0.25f, 0.0f}, {0.75f, 1.0f}, {1.25f, 1.0f}, {1.75f, 2.0f}, {2.5f, 2.0f}, {3.5f, 4.0f}, {5.0f, 4.0f},
        {-0.25f, -0.0f}, {-0.75f, -1.0f}, {-1.25f, -1.0f}, {-1.75f, -2.0f}, {-2.5f, -2.0f}, {-3.5f, -4.0f}, {-5.0f, -4.0f},
        /* nearest otherwise */
        {0.26f, 0.5f}, {0.74f, 0.5f}, {0.76f, 1.0f}, {1.3f, 1.5f}, {1.7f, 1.5f}, {2.6f, 3.0f}, {3.4f, 3.0f},
        {4.9f, 4.0f}, {5.1f, 6.0f}, {6.0f, 6.0f}, {7.0f, 6.0f}, {-100.0f, -6.0f}, {0.1f, 0.0f},
        /* the grid maps to itself */
        {0.0f, 0.0f}, {0.5f, 0.5f}, {1.0f, 1.0f}, {1.5f, 1.5f}, {2.0f, 2.0f}, {3.0f, 3.0f}, {4.0f, 4.0f},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        float got = as_e2m1(cases[i].x);
        CHECK(got == cases[i].want && signbit(got) == signbit(cases[i].want), "e2m1(%g) = %g, want %g",
              cases[i].x, got, cases[i].want);
    }
    CHECK(isnan(as_e2m1(NAN)), "NaN stays NaN");
}

TEST(numerics_pow2_ceil)
{
    static const struct { float v, want; const char *why; } cases[] = {
        {1.0f, 1.0f, "exact power: itself"},
        {2.0f, 2.0f, "exact power"},
        {0.5f, 0.5f, "exact power"},
        {0x1p-126f, 0x1p-126f, "smallest normal: itself"},
        {0x1p127f, 0x1p127f, "largest power"},
        {1.5f, 2.0f, "mantissa != 0: next power"},
        {3.0f, 4.0f, "3 -> 4"},
        {0x1.000002p+0f, 2.0f, "1 + ulp -> 2"},
        {0x1.fffffep-1f, 1.0f, "1 - ulp/2 -> 1"},
        {1e-4f / 448.0f, 0x1p-22f, "the fp8 amax floor: 2.23e-7 -> 2^-22"},
        {7.0f / 6.0f, 2.0f, "amax 7 of fp4: 7/6 -> 2"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        float got = as_pow2_ceil(cases[i].v);
        CHECK(got == cases[i].want, "pow2_ceil(%a) = %a, want %a (%s)", cases[i].v, got, cases[i].want, cases[i].why);
    }
    /* outside the contract, documented in numerics.c */
    CHECK(as_pow2_ceil(0.0f) == 0.0f, "0 -> 0");
    CHECK(as_pow2_ceil(0x1p-140f) == 0x1p-126f, "subnormal -> 2^-126");
    CHECK(isinf(as_pow2_ceil(INFINITY)), "inf -> inf");
    CHECK(isinf(as_pow2_ceil(FLT_MAX)), "FLT_MAX -> inf");
    CHECK(isnan(as_pow2_ceil(NAN)), "NaN -> NaN");
}
