/* act_quant / fp4_act_quant of SPEC section 2, block by block, in place. Order of operations,
 * each step rounded in f32: amax (max |x|, floored); scale (amax / grid_max is an f32
 * division); x / s (f32); clamp; round to the grid; times s (f32); bf16. A short last block
 * (n not a multiple of block) is quantised on its own, with its own amax. */
#include "ref/quant.h"

#include <math.h>

#include "ref/numerics.h"

#define FP8_MAX 448.0f
#define FP4_MAX 6.0f

static float block_amax(const float *x, int64_t n, float floor_)
{
    float amax = 0.0f;
    for (int64_t i = 0; i < n; i++)
        amax = fmaxf(amax, fabsf(x[i]));
    return fmaxf(amax, floor_);
}

static float clampf(float v, float lo, float hi) { return v < lo ? lo : v > hi ? hi : v; }

/* ue8m0 scale: the power of two at or above amax / 448. kernel.py multiplies by the f32 1/448
 * instead of dividing; over every positive normal f32 amax both give the same power of two (checked
 * exhaustively), and likewise 1/6 for the fp4 scale below. */
static float fp8_scale(const float *x, int64_t n)
{
    return as_pow2_ceil(block_amax(x, n, 1e-4f) / FP8_MAX);
}

/* e8m0 scale: the power of two at or above amax / 6; the floor 6 * 2^-126 keeps it normal. */
static float fp4_e8m0_scale(const float *x, int64_t n)
{
    return as_pow2_ceil(block_amax(x, n, ldexpf(6.0f, -126)) / FP4_MAX);
}

/* e4m3 scale: amax / 6 rounded to float8_e4m3fn; the floor 6 * 2^-9 keeps it >= 2^-9 (the
 * smallest e4m3 subnormal). amax / 6 above 464 would give NaN, as torch's cast does. */
static float fp4_e4m3_scale(const float *x, int64_t n)
{
    return as_e4m3(block_amax(x, n, ldexpf(6.0f, -9)) / FP4_MAX);
}

static void fp8_block(float *x, int64_t n)
{
    float s = fp8_scale(x, n);
    for (int64_t i = 0; i < n; i++) {
        float y = clampf(x[i] / s, -FP8_MAX, FP8_MAX);
        x[i] = as_bf16(as_e4m3(y) * s);
    }
}

static void fp4_block(float *x, int64_t n, float s, bool ties_away)
{
    for (int64_t i = 0; i < n; i++) {
        float y = clampf(x[i] / s, -FP4_MAX, FP4_MAX);
        x[i] = as_bf16((ties_away ? as_e2m1_ties_away(y) : as_e2m1(y)) * s);
    }
}

void as_act_quant(const float *x, int64_t n, float *xq, float *sx)
{
    for (int64_t b = 0; b < n / AS_FP8_BLOCK; b++) {
        const float *xb = x + b * AS_FP8_BLOCK;
        const float s = fp8_scale(xb, AS_FP8_BLOCK);
        for (int i = 0; i < AS_FP8_BLOCK; i++)
            xq[b * AS_FP8_BLOCK + i] = as_e4m3(clampf(xb[i] / s, -FP8_MAX, FP8_MAX));
        sx[b] = s;
    }
}

void as_fp8_quant(float *x, int64_t n, int block)
{
    if (block <= 0)
        return;
    for (int64_t b = 0; b < n; b += block)
        fp8_block(x + b, n - b < block ? n - b : block);
}

void as_fp4_quant_e8m0_ties(float *x, int64_t n, int block, bool ties_away)
{
    if (block <= 0)
        return;
    for (int64_t b = 0; b < n; b += block) {
        int64_t len = n - b < block ? n - b : block;
        fp4_block(x + b, len, fp4_e8m0_scale(x + b, len), ties_away);
    }
}

void as_fp4_quant_e4m3_ties(float *x, int64_t n, int block, bool ties_away)
{
    if (block <= 0)
        return;
    for (int64_t b = 0; b < n; b += block) {
        int64_t len = n - b < block ? n - b : block;
        fp4_block(x + b, len, fp4_e4m3_scale(x + b, len), ties_away);
    }
}

void as_fp4_quant_e8m0(float *x, int64_t n, int block) { as_fp4_quant_e8m0_ties(x, n, block, false); }
void as_fp4_quant_e4m3(float *x, int64_t n, int block) { as_fp4_quant_e4m3_ties(x, n, block, false); }

float as_fp8_block_scale(const float *x, int block) { return fp8_scale(x, block); }
float as_fp4_e8m0_block_scale(const float *x, int block) { return fp4_e8m0_scale(x, block); }
float as_fp4_e4m3_block_scale(const float *x, int block) { return fp4_e4m3_scale(x, block); }
