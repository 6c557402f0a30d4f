/* The quantisers of SPEC 2 on blocks with a known amax, expected values worked by hand. */
#include <math.h>
#include <string.h>

#include "ref/numerics.h"
#include "ref/quant.h"
#include "tests/lib/harness.h"

static void check_block(const char *what, const float *got, const float *want, int n)
{
    for (int i = 0; i < n; i++)
        CHECK(got[i] == want[i], "%s: element %d: got %a (%.9g), want %a (%.9g)", what, i, got[i],
              got[i], want[i], want[i]);
}

TEST(quant_fp8_known_amax)
{
    float x[64] = {0}, want[64] = {0};
    /* Block 0: amax = 3; 3 / 448 = 0.0067 -> s = pow2_ceil = 2^-7; x / s = 128 x. */
    x[0] = 3.0f;              want[0] = 3.0f;          /* 384 is on the grid */
    x[1] = 1.0f;              want[1] = 1.0f;          /* 128 */
    x[2] = as_bf16(0.1f);     want[2] = 13.0f / 128;   /* 0.10009765625 * 128 = 12.8125; step 1 in [8,16): 13 */
    x[3] = as_bf16(-0.3f);    want[3] = -40.0f / 128;  /* -0.30078125 * 128 = -38.5; step 4 in [32,64): -40 */
    x[4] = 17.0f / 256;       want[4] = 8.0f / 128;    /* 8.5: tie between 8 (000) and 9 (001) -> 8 */
    x[5] = as_bf16(1e-3f);    want[5] = 0x1p-10f;      /* 0.12805; step 2^-6 in [2^-3, 2^-2): 0.125 */
    x[6] = as_bf16(1e-5f);    want[6] = 0x1p-16f;      /* 0.00128; subnormal step 2^-9: 1 step */
    x[7] = -2.9f;             want[7] = -384.0f / 128; /* -371.2; step 32 in [256,512): -384 */
    /* Block 1: all zero: amax floor 1e-4 -> s = pow2_ceil(2.23e-7) = 2^-22; zeros stay 0. */
    float s0 = as_fp8_block_scale(x, AS_FP8_BLOCK), s1 = as_fp8_block_scale(x + 32, AS_FP8_BLOCK);
    CHECK(s0 == 0x1p-7f, "block 0 scale %a, want 2^-7", s0);
    CHECK(s1 == 0x1p-22f, "all-zero block scale %a, want 2^-22 (amax floor 1e-4)", s1);
    as_fp8_quant(x, 64, AS_FP8_BLOCK);
    check_block("fp8 block 0", x, want, 32);
    check_block("fp8 zero block", x + 32, want + 32, 32);

    /* The floor active on a non-zero block: 1e-6 < 1e-4, s = 2^-22: 1e-6 / 2^-22 = 4.19 -> 4
     * (step 0.5 in [4, 8)), back 4 * 2^-22 = 2^-20. */
    float t[32] = {0};
    t[0] = as_bf16(1e-6f);
    as_fp8_quant(t, 32, AS_FP8_BLOCK);
    CHECK(t[0] == 0x1p-20f, "floored block: got %a, want 2^-20", t[0]);

    /* The largest element of a block lands on <= 448 * s: amax = 448 exactly gives s = 1. */
    float u[32] = {448.0f, -448.0f, 447.0f, 0.0f};
    as_fp8_quant(u, 32, AS_FP8_BLOCK);
    CHECK(u[0] == 448.0f && u[1] == -448.0f && u[2] == 448.0f, "amax 448: %g %g %g", u[0], u[1], u[2]);
}

TEST(quant_fp4_e8m0_known_amax)
{
    float x[96] = {0}, want[96] = {0};
    /* Block 0: amax = 6 -> 6 / 6 = 1 -> s = 1: the e2m1 grid itself. */
    const float b0[] = {6, 2.5f, -1.25f, 0.3f, 5, 3.5f, 0.25f, -0.75f};
    const float w0[] = {6, 2, -1, 0.5f, 4, 4, 0, -1};
    /* Block 1: amax = 7 -> 7/6 = 1.17 -> s = 2; x / 2 then grid then * 2. */
    const float b1[] = {7, 1, as_bf16(0.7f), -3, 5, 2.5f};
    const float w1[] = {8 /* 3.5 -> 4 */, 1 /* 0.5 */, 1 /* 0.3496 -> 0.5 */, -3 /* -1.5 */,
                        4 /* 2.5 -> 2 */, 2 /* 1.25 -> 1 */};
    memcpy(x, b0, sizeof b0);
    memcpy(want, w0, sizeof w0);
    memcpy(x + 32, b1, sizeof b1);
    memcpy(want + 32, w1, sizeof w1);
    /* Block 2: all zero: amax floor 6 * 2^-126 -> s = 2^-126. */
    CHECK(as_fp4_e8m0_block_scale(x, 32) == 1.0f, "block 0 scale %a", as_fp4_e8m0_block_scale(x, 32));
    CHECK(as_fp4_e8m0_block_scale(x + 32, 32) == 2.0f, "block 1 scale %a", as_fp4_e8m0_block_scale(x + 32, 32));
    CHECK(as_fp4_e8m0_block_scale(x + 64, 32) == 0x1p-126f, "zero block scale %a, want 2^-126",
          as_fp4_e8m0_block_scale(x + 64, 32));
    as_fp4_quant_e8m0(x, 96, AS_FP4_E8M0_BLOCK);
    check_block("fp4-e8m0 block 0", x, want, 32);
    check_block("fp4-e8m0 block 1", x + 32, want + 32, 32);
    check_block("fp4-e8m0 zero block", x + 64, want + 64, 32);
    for (int i = 64; i < 96; i++)
        CHECK(!isnan(x[i]), "zero block must not produce NaN");
}

TEST(quant_fp4_e4m3_known_amax)
{
    float x[48] = {0}, want[48] = {0};
    /* Block 0: amax = 7 -> 7/6 = 1.1667 -> e4m3 (step 1/8 in [1, 2)) -> s = 1.125. */
    const float b0[] = {7, 1, -2, as_bf16(0.3f), 3.9375f, 0.1f};
    const float w0[] = {
        6.75f,   /* 6.22 -> clamp 6 -> 6 * 1.125 */
        1.125f,  /* 0.889 -> 1 */
        -2.25f,  /* -1.778 -> -2 */
        0.5625f, /* 0.30078125 / 1.125 = 0.267 -> 0.5 */
        4.5f,    /* exactly 3.5: tie -> 4 */
        0.0f,    /* 0.0889 -> 0 */
    };
    memcpy(x, b0, sizeof b0);
    memcpy(want, w0, sizeof w0);
    CHECK(as_fp4_e4m3_block_scale(x, 16) == 1.125f, "block 0 scale %a, want 1.125", as_fp4_e4m3_block_scale(x, 16));
    /* Block 1 (16..31): all zero: amax floor 6 * 2^-9 -> s = e4m3(2^-9) = 2^-9. */
    CHECK(as_fp4_e4m3_block_scale(x + 16, 16) == 0x1p-9f, "zero block scale %a, want 2^-9",
          as_fp4_e4m3_block_scale(x + 16, 16));
    /* Block 2 (32..47): tiny values under the floor, s = 2^-9: 0.75 * 2^-9 -> 0.75 -> 1 (tie) -> 2^-9;
     * 1e-4 -> 0.0512 -> 0. */
    x[32] = 0.75f * 0x1p-9f;  want[32] = 0x1p-9f;
    x[33] = as_bf16(1e-4f);   want[33] = 0.0f;
    x[34] = -0x1p-9f;         want[34] = -0x1p-9f;
    as_fp4_quant_e4m3(x, 48, AS_FP4_E4M3_BLOCK);
    check_block("fp4-e4m3 block 0", x, want, 16);
    check_block("fp4-e4m3 zero block", x + 16, want + 16, 16);
    check_block("fp4-e4m3 floored block", x + 32, want + 32, 16);
}

/* Every output of each quantiser is a bf16 value on its block's grid times its scale. */
TEST(quant_outputs_on_grid)
{
    float x[256], y[256];
    uint32_t seed = 12345;
    for (int i = 0; i < 256; i++) {
        seed = seed * 1664525u + 1013904223u;
        x[i] = as_bf16(((float)(seed >> 8) / 16777216.0f - 0.5f) * 10.0f);
    }
    memcpy(y, x, sizeof x);
    as_fp8_quant(y, 256, AS_FP8_BLOCK);
    for (int b = 0; b < 256; b += 32) {
        float s = as_fp8_block_scale(x + b, 32);
        for (int i = b; i < b + 32; i++)
            CHECK(y[i] == as_bf16(y[i]) && as_e4m3(y[i] / s) == y[i] / s, "fp8 %d not on grid: %g", i, y[i]);
    }
    memcpy(y, x, sizeof x);
    as_fp4_quant_e4m3(y, 256, AS_FP4_E4M3_BLOCK);
    for (int b = 0; b < 256; b += 16) {
        float s = as_fp4_e4m3_block_scale(x + b, 16);
        for (int i = b; i < b + 16; i++)
            CHECK(as_e2m1(y[i] / s) == y[i] / s, "fp4-e4m3 %d not on grid: %g (s %g)", i, y[i], s);
    }
}
