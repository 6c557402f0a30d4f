/* Scalar roundings of SPEC section 2, each explicit: bf16 RNE, float8_e4m3fn RNE, e2m1 RNE,
 * pow2_ceil from the IEEE fields. Values are carried in float; a "bf16 value" is a float whose
 * low 16 bits are zero. */
#ifndef AS_NUMERICS_H
#define AS_NUMERICS_H

#include <stdint.h>
#include <string.h>

static inline uint32_t as_f32_bits(float x) { uint32_t u; memcpy(&u, &x, 4); return u; }
static inline float as_bits_f32(uint32_t u) { float x; memcpy(&x, &u, 4); return x; }

/* f32 -> bf16 bit pattern, round to nearest even; NaN stays NaN (quieted). */
static inline uint16_t as_bf16_bits(float x)
{
    uint32_t u = as_f32_bits(x);
    if ((u & 0x7fffffffu) > 0x7f800000u)
        return (uint16_t)((u >> 16) | 0x40u);
    u += 0x7fffu + ((u >> 16) & 1u);
    return (uint16_t)(u >> 16);
}
static inline float as_bf16_to_f32(uint16_t b) { return as_bits_f32((uint32_t)b << 16); }
/* bf16(x): x rounded to the nearest bf16 value, kept in a float. */
static inline float as_bf16(float x) { return as_bf16_to_f32(as_bf16_bits(x)); }

/* Nearest float8_e4m3fn value (ties to even, subnormals down to 2^-9); |x| beyond the grid's
 * rounding range (> 464; 464 itself ties to even, 448), inf and NaN give NaN as torch's cast
 * does: callers clamp to [-448, 448] first. */
float as_e4m3(float x);
uint8_t as_e4m3_bits(float x);
float as_e4m3_from_bits(uint8_t b);

/* Nearest of {0, 0.5, 1, 1.5, 2, 3, 4, 6} in magnitude, sign kept, ties to the even code
 * (0.25->0, 0.75->1, 1.25->1, 1.75->2, 2.5->2, 3.5->4, 5->4); |x| > 6 gives 6. */
float as_e2m1(float x);
/* The same grid with ties rounded away from zero (0.25->0.5, 0.75->1, 1.25->1.5, 1.75->2, 2.5->3, 3.5->4,
 * 5->6): a convention engines get wrong (ref/convention.h), never the reference's. */
float as_e2m1_ties_away(float x);

/* 2^(e + (mantissa != 0)) for a positive normal float, from the IEEE fields. */
float as_pow2_ceil(float v);

#endif
