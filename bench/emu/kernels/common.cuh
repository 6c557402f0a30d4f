// Emulator shadow of kernels/common.cuh: the same device helpers, on the host.
#pragma once

#include "emu.h"

#define AS_HD inline

AS_HD float as_d_bf16_to_f32(uint16_t b) { return __uint_as_float((uint32_t)b << 16); }
inline uint16_t as_d_f32_to_bf16(float x)
{
    uint32_t u = __float_as_uint(x);
    if ((u & 0x7fffffffu) > 0x7f800000u)
        return (uint16_t)((u >> 16) | 0x40u);
    u += 0x7fffu + ((u >> 16) & 1u);
    return (uint16_t)(u >> 16);
}
inline float as_d_bf16(float x) { return as_d_bf16_to_f32(as_d_f32_to_bf16(x)); }
inline float as_d_warp_sum(float v)
{
    for (int o = 16; o > 0; o >>= 1)
        v += __shfl_xor_sync(0xffffffffu, v, o);
    return v;
}
inline float as_d_warp_max(float v)
{
    for (int o = 16; o > 0; o >>= 1)
        v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
    return v;
}
