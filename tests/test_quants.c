/* model/quants: fp16 and nearest_int, ggml's Q8_0 / Q2_K on hand-checked blocks and against the
 * digests of ggml's own outputs (tests/lib/oracle/ggml_oracle.c), the round-trip bounds, q8_1 and the
 * GPU-path dot products against exact arithmetic. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "model/digest.h"
#include "model/quants.h"
#include "ref/numerics.h"
#include "tests/lib/harness.h"
#include "tests/lib/quants_inputs.h"

static void digest_hex(const void *p, size_t n, char hex[65])
{
    AsSha256 s;
    uint8_t d[32];
    as_sha256_init(&s);
    as_sha256_update(&s, p, n);
    as_sha256_final(&s, d);
    as_sha256_hex(d, hex);
}

TEST(quants_fp16_conversion)
{
    /* every half code goes to f32 and back unchanged (NaNs stay NaN) */
    int bad = 0;
    for (uint32_t h = 0; h < 65536; h++) {
        float f = as_fp16_to_fp32((uint16_t)h);
        uint16_t back = as_fp32_to_fp16(f);
        bool nan = ((h >> 10) & 0x1f) == 0x1f && (h & 0x3ff);
        if (nan ? !isnan(f) || ((back >> 10) & 0x1f) != 0x1f || !(back & 0x3ff) : back != h)
            if (bad++ < 5)
                CHECK(false, "half %04x -> %a -> %04x", h, f, back);
    }
    CHECK(bad == 0, "%d half codes do not round-trip", bad);
    /* rounding: ties to even, overflow, subnormals */
    struct {
        float f;
        uint16_t h;
    } cases[] = {
        {1.0f, 0x3c00},          {1.0f + 0x1p-11f, 0x3c00}, {1.0f + 0x3p-11f, 0x3c02}, {1.0f + 0x1.8p-11f, 0x3c01},
        {65504.0f, 0x7bff},      {65519.99f, 0x7bff},       {65520.0f, 0x7c00},         {-1e9f, 0xfc00},
        {0x1p-24f, 0x0001},      {0x1p-25f, 0x0000},        {0x1.0002p-25f, 0x0001},    {0x3p-25f, 0x0002},
        {0x1p-14f, 0x0400},      {0x1.ffcp-15f, 0x0400},    {-0.0f, 0x8000},            {1.0f / 15.0f, 0x2c44},
        {2.0f / 15.0f, 0x3044},  {INFINITY, 0x7c00},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
        CHECK(as_fp32_to_fp16(cases[i].f) == cases[i].h, "fp16(%a) = %04x, want %04x", cases[i].f,
              as_fp32_to_fp16(cases[i].f), cases[i].h);
#ifdef __FLT16_MAX__
    /* against the compiler's own conversion over a sweep of f32 patterns */
    int diff = 0;
    for (uint64_t u = 0; u < 0x100000000ull; u += 0x10003ull) {
        float f = as_bits_f32((uint32_t)u);
        if (isnan(f))
            continue;
        _Float16 v = (_Float16)f;
        uint16_t want;
        memcpy(&want, &v, 2);
        if (as_fp32_to_fp16(f) != want && diff++ < 5)
            CHECK(false, "fp16(%a): %04x, _Float16 gives %04x", f, as_fp32_to_fp16(f), want);
    }
    CHECK(diff == 0, "%d conversions differ from _Float16", diff);
#endif
}

TEST(quants_nearest_int)
{
    const float in[] = {0.5f, 1.5f, 2.5f, -0.5f, -1.5f, 3.49f, -3.51f, 4194303.0f, 0.0f, -0.0f};
    const int want[] = {0, 2, 2, 0, -2, 3, -4, 4194303, 0, 0};
    for (size_t i = 0; i < sizeof in / sizeof in[0]; i++)
        CHECK(as_nearest_int(in[i]) == want[i], "nearest_int(%g) = %d, want %d", in[i], as_nearest_int(in[i]),
              want[i]);
}

/* Hand-checked Q8_0 block: amax 127 makes d = 1 exactly. */
TEST(quants_q8_0_hand_block)
{
    float x[32] = {127.0f, -127.0f, 63.5f, -63.5f, 0.49f, -0.5f, 2.5f, 1e-3f};
    AsBlockQ8_0 b;
    as_quantize_row_q8_0(x, &b, 32);
    const int want[8] = {127, -127, 64, -64, 0, -1, 3, 0}; /* roundf: halves away from zero */
    CHECK(b.d == 0x3c00, "d = %04x, want fp16(1) = 3c00", b.d);
    for (int i = 0; i < 8; i++)
        CHECK(b.qs[i] == want[i], "q[%d] = %d, want %d", i, b.qs[i], want[i]);
    float y[32];
    as_dequantize_row_q8_0(&b, y, 32);
    CHECK(y[2] == 64.0f && y[5] == -1.0f, "dequant: %g %g", y[2], y[5]);
    /* all zero: d = 0, q = 0 */
    memset(x, 0, sizeof x);
    as_quantize_row_q8_0(x, &b, 32);
    CHECK(b.d == 0 && b.qs[0] == 0 && b.qs[31] == 0, "zero block");
    /* amax below ~1.2e-38: 1/d overflows, ggml's cast is undefined; attnscope gives 0 */
    x[0] = 1e-39f;
    as_quantize_row_q8_0(x, &b, 32);
    CHECK(b.qs[0] == 0, "tiny amax: q = %d", b.qs[0]);
}

/* Two Q2_K super-blocks derived by hand from the algorithm (and checked against ggml):
 * A: every sub-block {0, 15, 30, 45} repeated: the first fit is exact (error 0), scale 15, min 0,
 *    so d = fp16(15 / 15) = 1, dmin = 0, every scale nibble 15, codes k = x / 15, exact.
 * B: every sub-block {-2, -1, 0, 1}: scale 1, min 2 in every sub-block, so d = fp16(1/15) = 0x2c44
 *    (0.066650390625), dmin = fp16(2/15) = 0x3044 (0.13330078125), nibbles 15 | 15 << 4, codes
 *    x + 2; dequantised d*15*k - dmin*15 = 0.999755859375 k - 1.99951171875. */
TEST(quants_q2_K_hand_blocks)
{
    float x[256], y[256];
    AsBlockQ2K b;
    for (int i = 0; i < 256; i++)
        x[i] = (float)(i % 4) * 15.0f;
    as_quantize_row_q2_K(x, &b, 256);
    CHECK(b.d == 0x3c00 && b.dmin == 0x0000, "A: d %04x dmin %04x", b.d, b.dmin);
    int bad = 0;
    for (int j = 0; j < 16; j++)
        bad += b.scales[j] != 0x0f;
    for (int l = 0; l < 64; l++)
        bad += b.qs[l] != (uint8_t)((l % 4) * 0x55); /* codes of i, i+32, i+64, i+96 are all i % 4 */
    CHECK(bad == 0, "A: %d scale / code bytes differ", bad);
    as_dequantize_row_q2_K(&b, y, 256);
    CHECK(memcmp(x, y, sizeof x) == 0, "A: dequantised values are not the input");

    for (int i = 0; i < 256; i++)
        x[i] = (float)(i % 4) - 2.0f;
    as_quantize_row_q2_K(x, &b, 256);
    CHECK(b.d == 0x2c44 && b.dmin == 0x3044, "B: d %04x dmin %04x", b.d, b.dmin);
    bad = 0;
    for (int j = 0; j < 16; j++)
        bad += b.scales[j] != 0xff;
    for (int l = 0; l < 64; l++)
        bad += b.qs[l] != (uint8_t)((l % 4) * 0x55);
    CHECK(bad == 0, "B: %d scale / code bytes differ", bad);
    as_dequantize_row_q2_K(&b, y, 256);
    const float want[4] = {-1.99951171875f, -0.999755859375f, 0.0f, 0.999755859375f};
    for (int i = 0; i < 256; i++)
        if (y[i] != want[i % 4] && bad++ < 3)
            CHECK(false, "B: y[%d] = %.12g, want %.12g", i, y[i], want[i % 4]);

    /* all zero: every field zero */
    memset(x, 0, sizeof x);
    as_quantize_row_q2_K(x, &b, 256);
    AsBlockQ2K z;
    memset(&z, 0, sizeof z);
    CHECK(memcmp(&b, &z, sizeof b) == 0, "zero super-block is not all zero bytes");
}

/* ggml's own outputs on the fixed inputs (tests/lib/quants_inputs.h): the digests printed by
 * tests/lib/oracle/ggml_oracle.c running libggml-base's quantize_row_q2_K_ref, quantize_row_q8_0_ref,
 * dequantize_row_q2_K and dequantize_row_q8_0 (which also compared 300000 random super-blocks of
 * eight distributions byte for byte). */
TEST(quants_bit_identical_to_ggml)
{
    enum { N = AS_QI_CASES * AS_QI_N };
    float *x = malloc(N * sizeof *x), *y = malloc(N * sizeof *y);
    AsBlockQ2K *q2 = malloc(N / 256 * sizeof *q2);
    AsBlockQ8_0 *q8 = malloc(N / 32 * sizeof *q8);
    REQUIRE(x && y && q2 && q8, "out of memory");
    for (int c = 0; c < AS_QI_CASES; c++)
        for (int i = 0; i < AS_QI_N; i++)
            x[c * AS_QI_N + i] = as_qi_value(c, i);
    char hex[65];
    as_quantize_row_q2_K(x, q2, N);
    digest_hex(q2, N / 256 * sizeof *q2, hex);
    CHECK(!strcmp(hex, "c9a664b01f5e275e1348f1c3367c84c9daa619c71c3df542b1582eaf2604e19e"), "Q2_K blocks: %s", hex);
    as_dequantize_row_q2_K(q2, y, N);
    digest_hex(y, N * sizeof *y, hex);
    CHECK(!strcmp(hex, "75b5a091af148d8a45c86ad80e2d9957d60de81be76c7453835f7ace1b590712"), "Q2_K dequant: %s", hex);
    as_quantize_row_q8_0(x, q8, N);
    digest_hex(q8, N / 32 * sizeof *q8, hex);
    CHECK(!strcmp(hex, "08572fdaf877612de40c6482d8e1ad68634941ce4cb328caf0cb508f5203dfd7"), "Q8_0 blocks: %s", hex);
    as_dequantize_row_q8_0(q8, y, N);
    digest_hex(y, N * sizeof *y, hex);
    CHECK(!strcmp(hex, "7a7f1647e3875f258a72866574c5d96bca3cc486b0a06582da4ef31b69a54d71"), "Q8_0 dequant: %s", hex);
    free(x), free(y), free(q2), free(q8);
}

/* Round-trip bounds, per weight:
 * Q8_0: q = round(x / d) within 1/2 (x * (1/d) is x / d within 2 ulps, far below 1/2), and d is
 *   stored as fp16: |x - q fp16(d)| <= d / 2 + 127 |d - fp16(d)| + (f32 rounding, amax 2^-20).
 * Q2_K: with d_j = fp16(d) * (sc & 15) != 0 and m_j = fp16(dmin) * (sc >> 4), each value takes the
 *   nearest of its sub-block's four levels k d_j - m_j (nearest_int then clamp to 0..3), so
 *   |x - x^| <= d_j / 2 inside [-m_j, 3 d_j - m_j] and = the distance to the nearer end outside;
 *   with d_j == 0 every value is -m_j. (Slack: f32 rounding of the level and of (x + m_j) / d_j.) */
TEST(quants_round_trip_bounds)
{
    float x[AS_QI_N], y[AS_QI_N];
    AsBlockQ8_0 q8[AS_QI_N / 32];
    AsBlockQ2K q2[AS_QI_N / 256];
    int64_t worst8 = 0, worst2 = 0, clamped = 0;
    double rms_num = 0, rms_den = 0;
    for (int c = 0; c < AS_QI_CASES; c++) {
        for (int i = 0; i < AS_QI_N; i++)
            x[i] = as_qi_value(c, i);
        as_quantize_row_q8_0(x, q8, AS_QI_N);
        as_dequantize_row_q8_0(q8, y, AS_QI_N);
        for (int b = 0; b < AS_QI_N / 32; b++) {
            float amax = 0;
            for (int j = 0; j < 32; j++)
                amax = fmaxf(amax, fabsf(x[32 * b + j]));
            double d = amax / 127.0f, dh = as_fp16_to_fp32(q8[b].d);
            double bound = d / 2 + 127 * fabs(d - dh) + amax * 0x1p-20;
            for (int j = 0; j < 32; j++)
                if (fabs((double)x[32 * b + j] - y[32 * b + j]) > bound && worst8++ < 3)
                    CHECK(false, "Q8_0 case %d [%d]: x %g -> %g, bound %g", c, 32 * b + j, x[32 * b + j],
                          y[32 * b + j], bound);
        }
        as_quantize_row_q2_K(x, q2, AS_QI_N);
        as_dequantize_row_q2_K(q2, y, AS_QI_N);
        for (int sb = 0; sb < AS_QI_N / 256; sb++)
            for (int j = 0; j < 16; j++) {
                const uint8_t sc = q2[sb].scales[j];
                const float dj = as_fp16_to_fp32(q2[sb].d) * (sc & 0xF);
                const float mj = as_fp16_to_fp32(q2[sb].dmin) * (sc >> 4);
                for (int k = 0; k < 16; k++) {
                    int i = 256 * sb + 16 * j + k;
                    double xv = x[i], yv = y[i], err = fabs(xv - yv);
                    rms_num += err * err;
                    rms_den += xv * xv;
                    double lo = -mj, hi = 3.0 * dj - mj, slack = 1e-6 * (fabs(xv) + dj + mj) + 1e-30;
                    double bound = dj == 0 ? 0 : dj / 2;
                    if (xv < lo || xv > hi) {
                        bound += xv < lo ? lo - xv : xv - hi;
                        clamped++;
                    }
                    if (dj == 0 && yv != -mj)
                        bound = -1; /* a zero scale leaves every value at -m_j */
                    if (err > bound + slack && worst2++ < 3)
                        CHECK(false, "Q2_K case %d [%d]: x %g -> %g (d_j %g, m_j %g), bound %g", c, i, xv, yv,
                              (double)dj, (double)mj, bound);
                }
            }
    }
    CHECK(worst8 == 0 && worst2 == 0, "%lld Q8_0 and %lld Q2_K values beyond their bound", (long long)worst8,
          (long long)worst2);
    as_test_note("Q2_K over all cases: rms error / rms value %.3f, %lld of %d values outside their levels' span",
                 sqrt(rms_num / rms_den), (long long)clamped, AS_QI_CASES * AS_QI_N);
}

/* q8_1 on a hand-checked block: amax 127 gives d = 1, q = roundf(x), s = sum q. */
TEST(quants_q8_1_hand_block)
{
    float x[64] = {127.0f, 2.5f, -2.5f, 0.5f, -126.6f, 3.0f};
    AsBlockQ8_1 b[2];
    as_quantize_row_q8_1(x, b, 64);
    CHECK(b[0].d == 0x3c00, "d = %04x", b[0].d);
    const int want[6] = {127, 3, -3, 1, -127, 3};
    int sum = 0;
    for (int i = 0; i < 6; i++) {
        CHECK(b[0].qs[i] == want[i], "q[%d] = %d, want %d", i, b[0].qs[i], want[i]);
        sum += want[i];
    }
    CHECK(b[0].s == as_fp32_to_fp16((float)sum), "s = %04x, want fp16(%d)", b[0].s, sum);
    CHECK(b[1].d == 0 && b[1].s == 0 && b[1].qs[0] == 0, "all-zero block");
    /* per value |x - q d| <= d / 2, plus the rounding of x / d (half an ulp of a quotient below 128,
     * at most 2^-17 d) that can turn a value just below a half into one */
    float v[AS_QI_N];
    AsBlockQ8_1 q[AS_QI_N / 32];
    int bad = 0;
    for (int c = 0; c < AS_QI_CASES; c++) {
        for (int i = 0; i < AS_QI_N; i++)
            v[i] = as_qi_value(c, i);
        as_quantize_row_q8_1(v, q, AS_QI_N);
        for (int i = 0; i < AS_QI_N; i++) {
            float amax = 0;
            for (int j = 0; j < 32; j++)
                amax = fmaxf(amax, fabsf(v[i / 32 * 32 + j]));
            double d = amax / 127.0f;
            if (fabs(v[i] - q[i / 32].qs[i % 32] * d) > d / 2 + d * 0x1p-16 && bad++ < 3)
                CHECK(false, "case %d [%d]: %g -> %d * %g", c, i, v[i], q[i / 32].qs[i % 32], d);
        }
    }
}

/* The dot products against exact arithmetic on the same quantised operands: the twin only adds
 * f32 rounding (a few ulps of the sum of |terms|). Then the exact values of the fixed inputs pin
 * the operation order the GPU kernels mirror. */
TEST(quants_vec_dot_twins)
{
    enum { NB = 20, K = NB * 256 }; /* flash's dim: 5120 */
    float *w = malloc(K * sizeof *w), *a = malloc(K * sizeof *a), *wd = malloc(K * sizeof *wd);
    AsBlockQ2K *x2 = malloc(NB * sizeof *x2);
    AsBlockQ8_0 *x8 = malloc(K / 32 * sizeof *x8);
    AsBlockQ8_1 *y = malloc(K / 32 * sizeof *y);
    REQUIRE(w && a && wd && x2 && x8 && y, "out of memory");
    float pins2[4], pins8[4];
    for (int r = 0; r < 4; r++) {
        for (int i = 0; i < K; i++) {
            w[i] = 0.02f * as_qi_normal(as_qi_hash(1000u + (uint64_t)r * K + (uint64_t)i));
            a[i] = as_qi_bf16(as_qi_normal(as_qi_hash(900000u + (uint64_t)i)) * (r == 3 ? 1e-3f : 1.0f));
        }
        as_quantize_row_q8_1(a, y, K);
        as_quantize_row_q2_K(w, x2, K);
        as_quantize_row_q8_0(w, x8, K);
        for (int f = 0; f < 2; f++) {
            if (f == 0)
                as_dequantize_row_q2_K(x2, wd, K);
            else
                as_dequantize_row_q8_0(x8, wd, K);
            double exact = 0, mag = 0;
            for (int i = 0; i < K; i++) {
                double av = (double)y[i / 32].qs[i % 32] * as_fp16_to_fp32(y[i / 32].d);
                exact += (double)wd[i] * av;
                mag += fabs((double)wd[i] * av);
            }
            float got = f == 0 ? as_vec_dot_q2_K_q8_1(x2, y, NB) : as_vec_dot_q8_0_q8_1(x8, y, K / 32);
            (f == 0 ? pins2 : pins8)[r] = got;
            CHECK(fabs(got - exact) <= mag * 1e-5, "%s row %d: twin %.9g, exact %.9g (sum |terms| %g)",
                  f == 0 ? "Q2_K" : "Q8_0", r, got, exact, mag);
        }
    }
    /* the order pin: these f32 bit patterns change with any change to the lane / butterfly order */
    const uint32_t want2[4] = {0x4098697f, 0xbfa52a5e, 0xc00baf87, 0xbade6218};
    const uint32_t want8[4] = {0x40802af1, 0xbfb3926b, 0xbfef4b01, 0xba86d486};
    for (int r = 0; r < 4; r++) {
        CHECK(as_f32_bits(pins2[r]) == want2[r], "Q2_K pin %d: %a (0x%08x)", r, pins2[r], as_f32_bits(pins2[r]));
        CHECK(as_f32_bits(pins8[r]) == want8[r], "Q8_0 pin %d: %a (0x%08x)", r, pins8[r], as_f32_bits(pins8[r]));
    }
    free(w), free(a), free(wd), free(x2), free(x8), free(y);
}

/* The q8_1 error model behind the quantised tolerance (docs/GGUF.md, driver/compare.c): for
 * unit-variance activations and weights independent of them, one q8_1 dot product's error is at
 * most 0.0080 of the outputs' rms (amax <= 3.5 sigma per block), and its largest error at most
 * twice that of the largest output. Measured here against the exact product with the same
 * (dequantised) weights, for the flash dim and for tiny-q's. */
TEST(quants_q8_1_error_model)
{
    for (int sz = 0; sz < 2; sz++) {
        const int nb = sz ? 20 : 1, k = nb * 256, outs = 256;
        float *a = malloc((size_t)k * sizeof *a), *w = malloc((size_t)k * sizeof *w), *wd = malloc((size_t)k * sizeof *wd);
        AsBlockQ8_1 *y = malloc((size_t)k / 32 * sizeof *y);
        AsBlockQ2K *x = malloc((size_t)nb * sizeof *x);
        REQUIRE(a && w && wd && y && x, "out of memory");
        for (int i = 0; i < k; i++)
            a[i] = as_qi_bf16(as_qi_normal(as_qi_hash(77u + (uint64_t)i)));
        as_quantize_row_q8_1(a, y, k);
        double se = 0, sy = 0, max_e = 0, max_y = 0;
        for (int o = 0; o < outs; o++) {
            for (int i = 0; i < k; i++)
                w[i] = as_qi_normal(as_qi_hash(5000000u + (uint64_t)o * k + (uint64_t)i)) / sqrtf((float)k);
            as_quantize_row_q2_K(w, x, k);
            as_dequantize_row_q2_K(x, wd, k);
            double exact = 0;
            for (int i = 0; i < k; i++)
                exact += (double)wd[i] * a[i];
            double e = (double)as_vec_dot_q2_K_q8_1(x, y, nb) - exact;
            se += e * e;
            sy += exact * exact;
            max_e = fmax(max_e, fabs(e));
            max_y = fmax(max_y, fabs(exact));
        }
        double rms_rel = sqrt(se / sy), peak_rel = max_e / max_y;
        CHECK(rms_rel <= 0.0080, "k %d: rms error / rms output %.4f > 0.0080", k, rms_rel);
        CHECK(peak_rel <= 0.016, "k %d: max error / max output %.4f > 0.016", k, peak_rel);
        as_test_note("k %d: q8_1 dot error rms %.4f, peak %.4f of the outputs'", k, rms_rel, peak_rel);
        free(a), free(w), free(wd), free(y), free(x);
    }
}
