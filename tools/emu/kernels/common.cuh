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
inline uint4 as_d_ld_stream16(const void *p)
{
    uint4 v;
    memcpy(&v, p, 16);
    return v;
}
inline float as_d_warp_max(float v)
{
    for (int o = 16; o > 0; o >>= 1)
        v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
    return v;
}
// The quantisers' grids and scale, through the reference's own functions (kernels/common.cuh's are
// bit-for-bit the same: tests/gpu_quant.c).
extern "C" float as_e4m3(float x);
extern "C" float as_e2m1(float x);
extern "C" float as_pow2_ceil(float v);
inline float as_d_pow2_ceil(float v) { return as_pow2_ceil(v); }
inline float as_d_e4m3(float x) { return as_e4m3(x); }
inline float as_d_e2m1(float x) { return as_e2m1(x); }
inline float as_d_group_max(float v, int width)
{
    for (int o = width >> 1; o > 0; o >>= 1)
        v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
    return v;
}
inline float as_d_expf(float x) { return (float)std::exp((double)x); }
inline void as_d_pdl_wait() {}
