/* Weight decoding (model/wtensor): each storage type to exact f32, fp8 block scales, bf16 view. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "model/weights.h"
#include "ref/numerics.h"
#include "tests/lib/harness.h"

static AsWTensor tensor(AsDType dt, int64_t rows, int64_t cols, const void *data)
{
    AsWTensor t;
    memset(&t, 0, sizeof t);
    snprintf(t.name, sizeof t.name, "test.%s", as_dtype_name(dt));
    t.dtype = dt;
    t.ndim = rows > 0 ? 2 : 1;
    t.shape[0] = rows > 0 ? rows : cols;
    t.shape[1] = cols;
    t.data = data;
    t.nbytes = as_dtype_bytes(dt, (rows > 0 ? rows : 1) * cols);
    return t;
}

TEST(wtensor_dtype_names_and_sizes)
{
    CHECK(!strcmp(as_dtype_name(AS_DT_BF16), "BF16") && !strcmp(as_dtype_name(AS_DT_F8_E4M3), "F8_E4M3") &&
          !strcmp(as_dtype_name(AS_DT_Q2_K), "Q2_K") && !strcmp(as_dtype_name(AS_DT_F32), "F32"), "names");
    CHECK(as_dtype_bytes(AS_DT_F32, 10) == 40 && as_dtype_bytes(AS_DT_BF16, 10) == 20 &&
          as_dtype_bytes(AS_DT_F16, 10) == 20 && as_dtype_bytes(AS_DT_F8_E4M3, 10) == 10 &&
          as_dtype_bytes(AS_DT_F8_E8M0, 10) == 10, "plain sizes");
    CHECK(as_dtype_bytes(AS_DT_Q8_0, 64) == 68 && as_dtype_bytes(AS_DT_Q2_K, 512) == 168, "ggml block sizes");
}

TEST(wtensor_plain_types)
{
    /* bf16 (at an odd address: the mapping gives no alignment) */
    uint8_t raw[1 + 2 * 6];
    const uint16_t bf[6] = {0x3f80, 0xc000, 0x0001, 0x7f80, 0xff80, 0x3eab};
    memcpy(raw + 1, bf, sizeof bf);
    AsWTensor t = tensor(AS_DT_BF16, 2, 3, raw + 1);
    float out[6];
    as_wt_rows_f32(&t, 0, 2, out);
    for (int i = 0; i < 6; i++)
        CHECK(as_f32_bits(out[i]) == (uint32_t)bf[i] << 16, "bf16 [%d]: %a", i, out[i]);
    as_wt_rows_f32(&t, 1, 1, out);
    CHECK(out[0] == INFINITY && out[1] == -INFINITY, "row 1 alone: %g %g", out[0], out[1]);

    /* f16: 1, -2, 65504, smallest subnormal 2^-24, inf, NaN */
    const uint16_t h[6] = {0x3c00, 0xc000, 0x7bff, 0x0001, 0x7c00, 0x7e00};
    t = tensor(AS_DT_F16, 0, 6, h);
    as_wt_rows_f32(&t, 0, 1, out);
    CHECK(out[0] == 1 && out[1] == -2 && out[2] == 65504 && out[3] == 0x1p-24f && isinf(out[4]) && isnan(out[5]),
          "f16: %g %g %g %a %g %g", out[0], out[1], out[2], out[3], out[4], out[5]);

    /* e8m0: 2^(e - 127) */
    const uint8_t e[4] = {127, 0, 254, 255};
    t = tensor(AS_DT_F8_E8M0, 0, 4, e);
    as_wt_rows_f32(&t, 0, 1, out);
    CHECK(out[0] == 1 && out[1] == 0x1p-127f && out[2] == 0x1p127f && isnan(out[3]), "e8m0: %a %a %a %g",
          out[0], out[1], out[2], out[3]);

    /* f32 1-D vector */
    const float v[3] = {0.1f, -3, 1e-30f};
    t = tensor(AS_DT_F32, 0, 3, v);
    float *vec = as_wt_vec_f32(&t);
    REQUIRE(vec, "out of memory");
    CHECK(vec[0] == 0.1f && vec[1] == -3 && vec[2] == 1e-30f, "f32 vector");
    free(vec);

    /* bf16 view: f32 rounds, bf16 copies */
    uint16_t b[3];
    as_wt_rows_bf16(&t, 0, 1, b);
    CHECK(b[0] == as_bf16_bits(0.1f) && b[1] == 0xc040, "f32 -> bf16 view: %04x %04x", b[0], b[1]);
    t = tensor(AS_DT_BF16, 2, 3, raw + 1);
    uint16_t b6[6];
    as_wt_rows_bf16(&t, 0, 2, b6);
    CHECK(memcmp(b6, bf, sizeof bf) == 0, "bf16 view of bf16 is a copy");
}

/* fp8 with 128 x 128 block scales: 130 x 260 weight -> 2 x 3 scale blocks (short last ones). */
TEST(wtensor_fp8_block_scales)
{
    enum { R = 130, C = 260 };
    uint8_t *w = malloc(R * C);
    REQUIRE(w, "out of memory");
    for (int i = 0; i < R * C; i++) {
        w[i] = (uint8_t)(i * 37 % 256);
        if ((w[i] & 0x7f) == 0x7f)
            w[i] = 0x38; /* no NaN codes */
    }
    w[129 * C + 130] = 0x38; /* 1.0 in scale block [1][1] */
    w[0] = 0x7e;             /* 448 in block [0][0] */
    const float sf[6] = {0.125f, 0.1f, 3.0f, 0.5f, 0.0173f, 1e-3f};
    AsWTensor scale_f32 = tensor(AS_DT_F32, 2, 3, sf);
    uint16_t sb[6];
    for (int i = 0; i < 6; i++)
        sb[i] = as_bf16_bits(sf[i]);
    AsWTensor scale_bf16 = tensor(AS_DT_BF16, 2, 3, sb);
    const uint8_t se[6] = {124, 120, 128, 126, 130, 100}; /* 2^-3, 2^-7, 2, 2^-1, 8, 2^-27 */
    AsWTensor scale_e8m0 = tensor(AS_DT_F8_E8M0, 2, 3, se);
    const AsWTensor *scales[3] = {&scale_f32, &scale_bf16, &scale_e8m0};
    float *out = malloc(sizeof(float) * R * C);
    REQUIRE(out, "out of memory");
    for (int k = 0; k < 3; k++) {
        AsWTensor t = tensor(AS_DT_F8_E4M3, R, C, w);
        t.scale = scales[k];
        as_wt_rows_f32(&t, 0, R, out);
        float s00 = k == 0 ? 0.125f : k == 1 ? as_bf16(0.125f) : 0x1p-3f;
        float s11 = k == 0 ? 0.0173f : k == 1 ? as_bf16(0.0173f) : 8.0f;
        CHECK(out[0] == 448.0f * s00, "%s scale: [0][0] = %g, want 448 * %g", as_dtype_name(scales[k]->dtype),
              out[0], s00);
        CHECK(out[129 * C + 130] == as_bf16(1.0f * s11), "%s scale: [129][130] uses block [1][1]: %.9g, want %.9g",
              as_dtype_name(scales[k]->dtype), out[129 * C + 130], as_bf16(s11));
        int bad = 0;
        for (int r = 0; r < R; r++)
            for (int c = 0; c < C; c++) {
                float row[3]; /* the scale tensor's row for this block row */
                as_wt_rows_f32(scales[k], r / 128, 1, row);
                float s = row[c / 128];
                float want = as_bf16(as_e4m3_from_bits(w[r * C + c]) * s);
                if (out[r * C + c] != want && bad++ < 3)
                    as_test_fail(__FILE__, __LINE__, "%s scale: [%d][%d] = %g, want %g",
                                 as_dtype_name(scales[k]->dtype), r, c, out[r * C + c], want);
            }
        /* a sub-range of rows decodes the same values */
        as_wt_rows_f32(&t, 128, 2, out);
        CHECK(out[C + 130] == as_bf16(s11), "rows 128..129 sub-range: %g", out[C + 130]);
    }
    free(w);
    free(out);
}

/* 32 x 32 and 128 x 128 block scales, each value worked out by hand. A 64 x 160 weight:
 *   32-blocks: scale [2][5]; 128-blocks: scale [1][2].
 * e4m3 codes: 0x38 = 1.0, 0x7e = 448, 0xb8 = -1.0, 0x01 = 2^-9 (the smallest subnormal),
 * 0x3c = 1.5, 0x39 = 1.125. */
TEST(wtensor_fp8_block_32_and_128_hand_values)
{
    enum { R = 64, C = 160 };
    static uint8_t w[R * C];
    memset(w, 0x38, sizeof w);
    w[0 * C + 0] = 0x7e;     /* block32 (0,0), block128 (0,0) */
    w[33 * C + 40] = 0xb8;   /* block32 (1,1), block128 (0,0) */
    w[63 * C + 159] = 0x01;  /* block32 (1,4), block128 (0,1): the last column, a short 128-block */
    w[10 * C + 130] = 0x3c;  /* block32 (0,4), block128 (0,1) */
    w[40 * C + 100] = 0x39;  /* block32 (1,3), block128 (0,0) */
    /* e8m0 32-block scales, codes e -> 2^(e-127) */
    static const uint8_t s32[2 * 5] = {127 - 2, 127, 127, 127, 127 + 3,   /* 2^-2, 1, 1, 1, 2^3 */
                                       127, 127 + 1, 127, 127 - 4, 127 - 1}; /* 1, 2, 1, 2^-4, 2^-1 */
    AsWTensor sc32 = tensor(AS_DT_F8_E8M0, 2, 5, s32);
    AsWTensor t = tensor(AS_DT_F8_E4M3, R, C, w);
    t.scale = &sc32;
    t.block = 32;
    static float out[R * C];
    as_wt_rows_f32(&t, 0, R, out);
    CHECK(out[0] == 112.0f, "32: 448 * 2^-2 = 112, got %g", out[0]);
    CHECK(out[33 * C + 40] == -2.0f, "32: -1 * 2 = -2, got %g", out[33 * C + 40]);
    CHECK(out[63 * C + 159] == 0x1p-10f, "32: 2^-9 * 2^-1 = 2^-10, got %a", out[63 * C + 159]);
    CHECK(out[10 * C + 130] == 12.0f, "32: 1.5 * 2^3 = 12, got %g", out[10 * C + 130]);
    CHECK(out[40 * C + 100] == 0.0703125f, "32: 1.125 * 2^-4 = 0.0703125, got %g", out[40 * C + 100]);
    CHECK(out[5 * C + 31] == 0.25f && out[5 * C + 32] == 1.0f && out[31 * C + 0] == 0.25f && out[32 * C + 0] == 1.0f,
          "32: block edges at column 32 and row 32: %g %g %g %g", out[5 * C + 31], out[5 * C + 32], out[31 * C + 0],
          out[32 * C + 0]);
    /* the same tensor built without a block (as a caller by hand would): the scale's shape says 32 */
    t.block = 0;
    float row[C];
    as_wt_rows_f32(&t, 33, 1, row);
    CHECK(row[40] == -2.0f && row[0] == 1.0f && row[159] == 0.5f, "block 0: inferred 32 from [2, 5]: %g %g %g",
          row[40], row[0], row[159]);

    /* 128-blocks: scale [1][2], F32 this time (2^-1 and 0.1: the product is rounded to bf16) */
    static const float s128[2] = {0.5f, 0.1f};
    AsWTensor sc128 = tensor(AS_DT_F32, 1, 2, s128);
    t.scale = &sc128;
    t.block = 128;
    as_wt_rows_f32(&t, 0, R, out);
    CHECK(out[0] == 224.0f && out[33 * C + 40] == -0.5f && out[40 * C + 100] == 0.5625f,
          "128: 448 * 0.5 = 224, -1 * 0.5, 1.125 * 0.5 = 0.5625: %g %g %g", out[0], out[33 * C + 40],
          out[40 * C + 100]);
    /* 1.5 * f32(0.1) = 0.150000006 -> bf16 0.150390625 (0x3e1a); 1.0 * f32(0.1) -> bf16 0.10009765625 */
    CHECK(out[10 * C + 130] == 0.150390625f && out[0 * C + 128] == 0.10009765625f,
          "128: bf16(1.5 * 0.1) = 0.150390625, bf16(0.1) = 0.10009765625: %.11g %.11g", out[10 * C + 130],
          out[0 * C + 128]);
    /* 2^-9 * f32(0.1): bf16 of 1.953125e-4 * 1.00000001 = 1.95503235e-4 (0x394d) */
    CHECK(out[63 * C + 159] == as_bf16_to_f32(0x394d), "128: bf16(2^-9 * 0.1) = %.9g, got %.9g",
          as_bf16_to_f32(0x394d), out[63 * C + 159]);
    CHECK(out[5 * C + 127] == 0.5f && out[5 * C + 128] == as_bf16(0.1f), "128: the block edge at column 128");
    t.block = 0;
    as_wt_rows_f32(&t, 63, 1, row);
    CHECK(row[159] == as_bf16_to_f32(0x394d) && row[0] == 0.5f, "block 0: inferred 128 from [1, 2]");

    /* a scale whose shape fits neither block size: NaN, nothing read beyond it */
    static const uint8_t s_bad[3] = {127, 127, 127};
    AsWTensor sc_bad = tensor(AS_DT_F8_E8M0, 1, 3, s_bad);
    t.scale = &sc_bad;
    as_wt_rows_f32(&t, 0, 1, row);
    CHECK(isnan(row[0]) && isnan(row[C - 1]), "a [1, 3] scale for [64, 160]: the row decodes to NaN");
}
