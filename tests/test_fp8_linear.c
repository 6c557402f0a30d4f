/* act_quant and the fp8 linear of SPEC 2 (ref/quant.c, ref/fp8_linear.c): hand-computed values,
 * then random weights and rows against a literal loop, on the decode path (every GEMV variant this
 * CPU has) and the prefill path, with scales of 32 x 32 and 128 x 128 blocks. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "ref/fp8_linear.h"
#include "ref/gemv.h"
#include "ref/numerics.h"
#include "ref/quant.h"
#include "tests/lib/harness.h"

static uint32_t lcg(uint32_t *s) { return *s = *s * 1664525u + 1013904223u; }
static float rnd(uint32_t *s, float lo, float hi) { return lo + (hi - lo) * (float)(lcg(s) >> 8) / 16777216.0f; }

TEST(fp8_linear_act_quant_hand)
{
    float x[64], xq[64], sx[2];
    /* block 0: amax 56 = 448 / 8, s = 1/8 exactly: 56 -> 448 (the grid's top), 1 -> 8, 0.3 -> 2.4 -> 2.5 */
    for (int i = 0; i < 32; i++)
        x[i] = 1.0f;
    x[0] = 56.0f, x[1] = -56.0f, x[2] = 0.3f;
    /* block 1: every |x| below 1e-4: the amax floor, s = pow2_ceil(1e-4 / 448) = 2^-22; 1e-5 / 2^-22 = 41.9 -> 40 */
    for (int i = 32; i < 64; i++)
        x[i] = 1e-5f;
    as_act_quant(x, 64, xq, sx);
    CHECK(sx[0] == 0.125f && xq[0] == 448.0f && xq[1] == -448.0f && xq[2] == 2.5f && xq[3] == 8.0f,
          "block 0: s %g, xq %g %g %g %g (want 0.125, 448 -448 2.5 8)", sx[0], xq[0], xq[1], xq[2], xq[3]);
    CHECK(sx[1] == 0x1p-22f && xq[32] == 40.0f, "block 1: s %g (want 2^-22), xq %g (want 40)", sx[1], xq[32]);
    /* the same values as the fp8 KV quantiser leaves in place: bf16(xq * s) */
    float kv[64];
    memcpy(kv, x, sizeof kv);
    as_fp8_quant(kv, 64, 32);
    int same = 0;
    for (int i = 0; i < 64; i++)
        same += kv[i] == as_bf16(xq[i] * sx[i / 32]);
    CHECK(same == 64, "act_quant and the KV quantiser agree on %d of 64 values", same);
}

/* An F8_E4M3 weight [rows][cols] with random codes (no NaN code) and e8m0 scales of block B. */
typedef struct {
    uint8_t *codes, *scale_bytes;
    AsWTensor w, scale;
} Fp8Weight;

static void make_fp8(Fp8Weight *f, int64_t rows, int64_t cols, int B, uint32_t seed)
{
    memset(f, 0, sizeof *f);
    int64_t sr = (rows + B - 1) / B, sc = (cols + B - 1) / B;
    f->codes = malloc((size_t)(rows * cols));
    f->scale_bytes = malloc((size_t)(sr * sc));
    for (int64_t i = 0; i < rows * cols; i++) {
        uint8_t c = (uint8_t)(lcg(&seed) >> 24);
        f->codes[i] = (c & 0x7f) == 0x7f ? 0x7e : c;
    }
    for (int64_t i = 0; i < sr * sc; i++)
        f->scale_bytes[i] = (uint8_t)(120 + lcg(&seed) % 8); /* 2^-7 .. 2^0 */
    f->scale = (AsWTensor){.dtype = AS_DT_F8_E8M0, .ndim = 2, .shape = {sr, sc}, .data = f->scale_bytes};
    f->w = (AsWTensor){.dtype = AS_DT_F8_E4M3, .ndim = 2, .shape = {rows, cols}, .data = f->codes,
                       .scale = &f->scale, .block = B};
    snprintf(f->w.name, sizeof f->w.name, "test.fp8.b%d", B);
}

/* The definition, one product at a time in f32 (only the order inside a 32-wide block differs
 * from ref/fp8_linear.c); mag (when not NULL) gets sum |p_k * sx * ws| per output, the scale of
 * the f32 rounding that a different order inside the blocks may move. */
static void fp8_literal_mag(const float *x, int64_t s, const AsWTensor *w, int64_t o0, int64_t nout, float *y,
                            float *mag)
{
    int64_t in = as_wt_cols(w), nk = in / 32;
    float *xq = malloc(sizeof(float) * (size_t)in), *sx = malloc(sizeof(float) * (size_t)nk);
    float *srow = malloc(sizeof(float) * (size_t)as_wt_cols(w->scale));
    for (int64_t t = 0; t < s; t++) {
        as_act_quant(x + t * in, in, xq, sx);
        for (int64_t o = o0; o < o0 + nout; o++) {
            as_wt_rows_f32(w->scale, o / w->block, 1, srow);
            const uint8_t *codes = (const uint8_t *)w->data + o * in;
            float acc = 0.0f, m = 0.0f;
            for (int64_t k = 0; k < nk; k++) {
                float p = 0.0f, pm = 0.0f;
                for (int i = 0; i < 32; i++) {
                    p += xq[k * 32 + i] * as_e4m3_from_bits(codes[k * 32 + i]);
                    pm += fabsf(xq[k * 32 + i] * as_e4m3_from_bits(codes[k * 32 + i]));
                }
                acc += p * sx[k] * srow[k * 32 / w->block];
                m += pm * sx[k] * srow[k * 32 / w->block];
            }
            y[t * nout + (o - o0)] = as_bf16(acc);
            if (mag)
                mag[t * nout + (o - o0)] = m;
        }
    }
    free(xq), free(sx), free(srow);
}

static float *g_mag; /* the literal's magnitudes for compare() */

static void fp8_literal(const float *x, int64_t s, const AsWTensor *w, int64_t o0, int64_t nout, float *y)
{
    fp8_literal_mag(x, s, w, o0, nout, y, g_mag);
}

/* Hand-computed: one row of 64 weights, all 1.0 (code 0x38), scales 2^-1 (block 0) and 2^2 (block
 * 1). x = 0.5 in block 0: s = 2^-9, xq = 256, p0 = 32 * 256 = 8192, acc = 8192 * 2^-9 * 2^-1 = 8.
 * x = 0.3 in block 1: s = 2^-10, 0.3 / 2^-10 = 307.2 -> xq = 320, p1 = 10240, acc += 10240 * 2^-10
 * * 4 = 40: y = 48, where the bf16 linear of the dequantised weights gives 46.4 -> 46.5. */
TEST(fp8_linear_hand_computed)
{
    uint8_t codes[64], sc[2] = {126, 129};
    memset(codes, 0x38, sizeof codes);
    AsWTensor scale = {.dtype = AS_DT_F8_E8M0, .ndim = 2, .shape = {1, 2}, .data = sc};
    AsWTensor w = {.dtype = AS_DT_F8_E4M3, .ndim = 2, .shape = {1, 64}, .data = codes, .scale = &scale, .block = 32};
    float x[64], y = 0;
    for (int i = 0; i < 64; i++)
        x[i] = i < 32 ? 0.5f : 0.3f;
    x[63] = as_bf16(0.3f); /* a bf16 row, as every projection input is */
    for (int i = 32; i < 64; i++)
        x[i] = as_bf16(0.3f);
    as_fp8_linear(x, 1, &w, &y);
    CHECK(y == 48.0f, "decode: y = %.9g, want 48", y);
    float x2[2 * 64], y2[2];
    memcpy(x2, x, sizeof x), memcpy(x2 + 64, x, sizeof x);
    as_fp8_linear(x2, 2, &w, y2);
    CHECK(y2[0] == 48.0f && y2[1] == 48.0f, "prefill: y = %.9g %.9g, want 48", y2[0], y2[1]);
}

/* One bf16 step at v: the distance to the next bf16 value away from zero. */
static float bf16_step(float v) { return fabsf(as_bf16_to_f32((uint16_t)(as_bf16_bits(fabsf(v)) + 1)) - fabsf(v)); }

/* Counts elements of got further from want than one bf16 step plus the f32 reordering noise of the
 * sum (2^-20 of its magnitude); notes how many are bit-exact. */
static int compare(const char *what, const float *got, const float *want, int64_t n)
{
    int bad = 0;
    int64_t exact = 0;
    for (int64_t i = 0; i < n; i++) {
        exact += got[i] == want[i];
        if (fabsf(got[i] - want[i]) > bf16_step(want[i]) + g_mag[i] * 0x1p-20f && bad++ < 3)
            as_test_fail(__FILE__, __LINE__, "%s: element %lld: %.9g, literal %.9g", what, (long long)i, got[i],
                         want[i]);
    }
    CHECK(exact * 20 >= n * 19, "%s: only %lld of %lld bit-exact with the literal loop", what, (long long)exact,
          (long long)n);
    return bad;
}

TEST(fp8_linear_vs_literal)
{
    /* 133 rows: blocks of 32 and 128 rows plus a tail; 320 columns: 10 K blocks, 2.5 blocks of 128;
     * 300 tokens: two of the prefill's work items */
    enum { ROWS = 133, COLS = 320, S = 300 };
    float *x = malloc(sizeof(float) * S * COLS), *y = malloc(sizeof(float) * S * ROWS);
    float *want = malloc(sizeof(float) * S * ROWS);
    g_mag = malloc(sizeof(float) * S * ROWS);
    uint32_t seed = 9;
    for (int t = 0; t < S; t++)
        for (int i = 0; i < COLS; i++) {
            /* magnitudes from 2^-16 to 2^6 by block, one block below the amax floor */
            float mag = ldexpf(1.0f, (t + i / 32) % 23 - 16);
            x[t * COLS + i] = as_bf16(rnd(&seed, -mag, mag));
        }
    const int blocks[2] = {32, 128};
    const AsIsa isas[] = {AS_ISA_PORTABLE, AS_ISA_AVX2, AS_ISA_AVX512};
    int cases = 0;
    for (int b = 0; b < 2; b++) {
        Fp8Weight f;
        make_fp8(&f, ROWS, COLS, blocks[b], 100u + (uint32_t)b);
        for (size_t i = 0; i < 3; i++) {
            if (as_gemv_force_isa(isas[i]) != 0)
                continue;
            char what[96];
            snprintf(what, sizeof what, "block %d, s 1, %s", blocks[b], as_isa_name(isas[i]));
            for (int t = 0; t < 3; t++) {
                as_fp8_linear(x + t * COLS, 1, &f.w, y);
                fp8_literal(x + t * COLS, 1, &f.w, 0, ROWS, want);
                compare(what, y, want, ROWS);
                cases++;
            }
            as_fp8_linear_rows(x, 1, &f.w, 31, 70, y, -1); /* rows across block edges */
            fp8_literal(x, 1, &f.w, 31, 70, want);
            compare(what, y, want, 70);
        }
        /* the prefill's tiles: 6 tokens (s 5, 7), work items of 256 tokens (S), 16 rows (133) */
        const int ss[] = {2, 5, 7, 37, S};
        for (size_t i = 0; i < 3; i++) {
            if (as_gemv_force_isa(isas[i]) != 0)
                continue;
            for (int k = 0; k < 5; k++) {
                char what[64];
                snprintf(what, sizeof what, "block %d, s %d, %s", blocks[b], ss[k], as_isa_name(isas[i]));
                as_fp8_linear(x, ss[k], &f.w, y);
                fp8_literal(x, ss[k], &f.w, 0, ROWS, want);
                compare(what, y, want, (int64_t)ss[k] * ROWS);
                cases++;
            }
        }
        /* AVX-512's tiles of 12 tokens are AVX2's sums in the same order: the same bits */
        if (as_gemv_force_isa(AS_ISA_AVX512) == 0) {
            float *y5 = malloc(sizeof(float) * S * ROWS);
            for (int k = 0; k < 5; k++) {
                as_fp8_linear(x, ss[k], &f.w, y5);
                as_gemv_force_isa(AS_ISA_AVX2);
                as_fp8_linear(x, ss[k], &f.w, y);
                as_gemv_force_isa(AS_ISA_AVX512);
                CHECK(!memcmp(y, y5, sizeof(float) * (size_t)ss[k] * ROWS), "block %d, s %d: AVX-512 and AVX2 differ",
                      blocks[b], ss[k]);
            }
            free(y5);
        }
        as_gemv_force_isa(AS_ISA_AUTO);
        /* a row subset with a wider output stride */
        float *ys = calloc((size_t)S * 80, sizeof(float));
        as_fp8_linear_rows(x, 5, &f.w, 60, 70, ys, 80);
        fp8_literal(x, 5, &f.w, 60, 70, want);
        int bad = 0;
        for (int t = 0; t < 5; t++)
            for (int o = 0; o < 80; o++)
                bad += o < 70 ? fabsf(ys[t * 80 + o] - want[t * 70 + o]) >
                                    bf16_step(want[t * 70 + o]) + g_mag[t * 70 + o] * 0x1p-20f
                              : ys[t * 80 + o] != 0.0f;
        CHECK(bad == 0, "block %d: row subset at stride 80: %d elements wrong or written past nout", blocks[b], bad);
        free(ys);
        free(f.codes), free(f.scale_bytes);
    }
    as_test_note("%d shapes (blocks 32 and 128; s 1, 2, 5, 7, 37, 300 on every variant; row subsets)", cases);
    free(x), free(y), free(want), free(g_mag);
}

/* 128 x 128 scales are 32 x 32 scales repeated: both forms give the same bits. */
TEST(fp8_linear_block_128_is_repeated_32)
{
    enum { ROWS = 256, COLS = 256 };
    Fp8Weight f128;
    make_fp8(&f128, ROWS, COLS, 128, 5);
    uint8_t s32[8 * 8];
    for (int r = 0; r < 8; r++)
        for (int c = 0; c < 8; c++)
            s32[r * 8 + c] = f128.scale_bytes[(r / 4) * 2 + c / 4];
    AsWTensor scale32 = {.dtype = AS_DT_F8_E8M0, .ndim = 2, .shape = {8, 8}, .data = s32};
    AsWTensor w32 = f128.w;
    w32.scale = &scale32;
    w32.block = 32;
    float x[3 * COLS], y1[3 * ROWS], y2[3 * ROWS];
    uint32_t seed = 3;
    for (int i = 0; i < 3 * COLS; i++)
        x[i] = as_bf16(rnd(&seed, -2, 2));
    for (int s = 1; s <= 3; s += 2) {
        as_fp8_linear(x, s, &f128.w, y1);
        as_fp8_linear(x, s, &w32, y2);
        CHECK(memcmp(y1, y2, sizeof(float) * (size_t)(s * ROWS)) == 0, "s %d: 128-blocks and repeated 32-blocks differ",
              s);
    }
    free(f128.codes), free(f128.scale_bytes);
}
