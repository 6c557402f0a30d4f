/* The scalar roundings of SPEC section 2 that are not inline in numerics.h: float8_e4m3fn (as
 * torch's c10 cast computes it), e2m1 and pow2_ceil. */
#include "ref/numerics.h"

#include <math.h>

#define E4M3_NAN 0x7fu

/* float8_e4m3fn: s eeee mmm, bias 7, no inf, 0x7f / 0xff are NaN, max 448 = 0x7e.
 * Normal range (|x| >= 2^-6): keep the top 3 mantissa bits, round the 20 dropped bits to
 * nearest even, rebias the exponent from 127 to 7. Below 2^-6 the grid is uniform with step
 * 2^-9: adding 2^14 (whose ulp is 2^-9) makes the f32 adder round |x| to that grid, RNE,
 * and the code is what lands in the low mantissa bits.
 * Beyond the grid: 464 (halfway between 448 and the missing 480) rounds to even, i.e. 448;
 * anything above 464, inf and NaN give NaN, as torch's cast does (callers clamp first). */
uint8_t as_e4m3_bits(float x)
{
    uint32_t u = as_f32_bits(x);
    uint8_t sign = (uint8_t)((u >> 24) & 0x80u);
    uint32_t a = u & 0x7fffffffu;
    if (a >= 0x43f00000u) /* >= 480, inf, NaN */
        return sign | E4M3_NAN;
    if (a < (121u << 23)) { /* < 2^-6: subnormal grid */
        const float shift = 16384.0f; /* 2^14 */
        uint32_t r = as_f32_bits(as_bits_f32(a) + shift) - as_f32_bits(shift);
        return sign | (uint8_t)r; /* r <= 8: 8 means it rounded up to 2^-6 = 0x08 */
    }
    uint32_t odd = (a >> 20) & 1u;
    a += 0x7ffffu + odd;            /* round the 20 dropped bits, ties to even */
    a -= (uint32_t)(127 - 7) << 23; /* rebias */
    uint32_t code = a >> 20;        /* 464 < |x| < 480 rounds up into 0x7f: NaN, like torch */
    return sign | (uint8_t)code;
}

float as_e4m3_from_bits(uint8_t b)
{
    float sign = (b & 0x80u) ? -1.0f : 1.0f;
    unsigned e = (b >> 3) & 0xfu, m = b & 7u;
    if (e == 15 && m == 7)
        return sign * NAN;
    if (e == 0)
        return sign * ldexpf((float)m, -9);          /* m * 2^-9, exact */
    return sign * ldexpf((float)(8 + m), (int)e - 10); /* (1 + m/8) * 2^(e-7), exact */
}

float as_e4m3(float x) { return as_e4m3_from_bits(as_e4m3_bits(x)); }

/* Midpoints between the e2m1 magnitudes {0, 0.5, 1, 1.5, 2, 3, 4, 6}; at a midpoint the
 * value with the even code (0, 1, 2, 4 are codes 0, 2, 4, 6) wins, so the comparison is <=
 * when the lower neighbour has the even code and < otherwise. */
float as_e2m1(float x)
{
    if (isnan(x))
        return x;
    float a = fabsf(x), r;
    if (a <= 0.25f)
        r = 0.0f;
    else if (a < 0.75f)
        r = 0.5f;
    else if (a <= 1.25f)
        r = 1.0f;
    else if (a < 1.75f)
        r = 1.5f;
    else if (a <= 2.5f)
        r = 2.0f;
    else if (a < 3.5f)
        r = 3.0f;
    else if (a <= 5.0f)
        r = 4.0f;
    else
        r = 6.0f;
    return copysignf(r, x);
}

/* Every midpoint goes to the larger magnitude: the comparisons are all strict. */
float as_e2m1_ties_away(float x)
{
    if (isnan(x))
        return x;
    static const float up[] = {0.25f, 0.75f, 1.25f, 1.75f, 2.5f, 3.5f, 5.0f};
    static const float grid[] = {0.0f, 0.5f, 1.0f, 1.5f, 2.0f, 3.0f, 4.0f, 6.0f};
    float a = fabsf(x);
    int i = 0;
    while (i < 7 && a >= up[i])
        i++;
    return copysignf(grid[i], x);
}

/* 2^(e + (mantissa != 0)) from the IEEE fields, sign kept. Inputs outside the contract:
 * +-0 gives +-0; a subnormal gives 2^-126 (exponent field 0 plus one: the smallest normal);
 * inf gives inf; a normal above 2^127 gives inf; NaN gives NaN. */
float as_pow2_ceil(float v)
{
    uint32_t u = as_f32_bits(v);
    uint32_t sign = u & 0x80000000u, e = (u >> 23) & 0xffu, m = u & 0x7fffffu;
    if (e == 0xff)
        return v; /* inf, NaN */
    if (e == 0 && m == 0)
        return v; /* +-0 */
    e += (m != 0);
    return as_bits_f32(sign | (e << 23)); /* e == 255 here is inf */
}
