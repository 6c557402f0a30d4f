// e4m3 codes widened to f32 in registers, exactly (kernels/gemv.cu's e4m3 weights, the dequantiser of
// kernels/fp8_dequant.cu). Host code under the CPU emulator (tools/emu) as well.
#pragma once

#include <stdint.h>
#include <string.h>
#ifdef __CUDACC__
#include <cuda_fp16.h>
#endif

#include "kernels/common.cuh"

namespace ase4m3 {

__device__ __forceinline__ uint32_t byte_perm(uint32_t x, uint32_t sel)
{
#ifdef __CUDA_ARCH__
    return __byte_perm(x, 0u, sel);
#else
    uint32_t r = 0;
    for (int i = 0; i < 4; i++) {
        const uint32_t n = (sel >> (4 * i)) & 7u;
        r |= (n < 4 ? (x >> (8 * n)) & 0xffu : 0u) << (8 * i);
    }
    return r;
#endif
}

// Two f16 (bits, the lower in the low half) as f32, exactly.
__device__ __forceinline__ float2 f16x2_to_float2(uint32_t p)
{
#ifdef __CUDA_ARCH__
    __half2_raw r;
    r.x = (unsigned short)(p & 0xffffu), r.y = (unsigned short)(p >> 16);
    return __half22float2(__half2(r));
#else
    auto one = [](uint32_t h) { // sign, then the value: the 15 bits are a subnormal's or a normal's
        const float v = (h & 0x7c00u) ? ldexpf((float)(1024 + (h & 0x3ffu)), (int)((h >> 10) & 0x1fu) - 25)
                                      : ldexpf((float)(h & 0x3ffu), -24);
        return (h & 0x8000u) ? -v : v;
    };
    return float2{one(p & 0xffffu), one(p >> 16)};
#endif
}

// Four e4m3 codes (the bytes of u, the lowest first) times s256 / 256, exactly: a code's f16 bits are its
// sign and its seven exponent-mantissa bits one place lower (f16's exponent bias is 8 more than e4m3's, so
// the f16 is the code's value times 2^-8, subnormals included), and s256 carries the 2^8 back. With s256
// the block scale times 256 (a power of two), each weight is bf16(code * scale), the bf16 upload's value.
__device__ __forceinline__ void e4m3x4_scaled(uint32_t u, float s256, float *f)
{
    const uint32_t h0 = byte_perm(u, 0x1404u), h1 = byte_perm(u, 0x3424u); // [0 b0 0 b1], [0 b2 0 b3]
    const uint32_t p0 = (h0 & 0x80008000u) | ((h0 >> 1) & 0x3f803f80u);
    const uint32_t p1 = (h1 & 0x80008000u) | ((h1 >> 1) & 0x3f803f80u);
    const float2 a = f16x2_to_float2(p0), b = f16x2_to_float2(p1);
    f[0] = a.x * s256, f[1] = a.y * s256, f[2] = b.x * s256, f[3] = b.y * s256;
}

// Four e4m3 codes (the bytes of u, the lowest first) times the block scale s, exactly: each pair of codes
// goes to two f16 on the conversion unit (exact: every e4m3 value is an f16) and each f16 to f32, then
// times s (a power of two, so each weight is bf16(code * s), the bf16 upload's value). NaN codes give NaN
// here and 480 in e4m3x4_scaled; the fp8 form has none (model/fp8_form.h). Before sm_89, and on the
// host: e4m3x4_scaled.
__device__ __forceinline__ void e4m3x4_cvt(uint32_t u, float s, float *f)
{
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 890
    float a, b, c, d;
    asm("{\n\t.reg .b16 a, b, h0, h1, h2, h3;\n\t.reg .b32 lo, hi;\n\tmov.b32 {a, b}, %4;\n\t"
        "cvt.rn.f16x2.e4m3x2 lo, a;\n\tcvt.rn.f16x2.e4m3x2 hi, b;\n\tmov.b32 {h0, h1}, lo;\n\t"
        "mov.b32 {h2, h3}, hi;\n\tcvt.f32.f16 %0, h0;\n\tcvt.f32.f16 %1, h1;\n\tcvt.f32.f16 %2, h2;\n\t"
        "cvt.f32.f16 %3, h3;\n\t}"
        : "=f"(a), "=f"(b), "=f"(c), "=f"(d)
        : "r"(u));
    f[0] = a * s, f[1] = b * s, f[2] = c * s, f[3] = d * s;
#else
    e4m3x4_scaled(u, s * 256.0f, f);
#endif
}

// 8 bytes of a stream read once (weights), as as_d_ld_stream16: not kept in L1.
__device__ __forceinline__ uint2 ld_stream8(const void *p)
{
    uint2 v;
#ifdef __CUDA_ARCH__
    asm volatile("ld.global.nc.L1::no_allocate.v2.u32 {%0, %1}, [%2];" : "=r"(v.x), "=r"(v.y) : "l"(p));
#else
    memcpy(&v, p, 8);
#endif
    return v;
}

// One code's value times s256 / 256 (e4m3x4_scaled's widening, for one code).
__device__ __forceinline__ float e4m3_scaled(uint8_t b, float s256)
{
    return f16x2_to_float2(((uint32_t)(b & 0x80u) << 8) | ((uint32_t)(b & 0x7fu) << 7)).x * s256;
}

} // namespace ase4m3
