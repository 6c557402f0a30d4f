// Emulator shadow of kernels/mma.cuh (same names and semantics, on the host).
#pragma once

#include "emu.h"

// A kernel's dynamic shared memory: a buffer the emulator program defines (in the kernel's namespace)
// and points emu::smem_base at, so that smem_u32 offsets are relative to it.
#define AS_DYNAMIC_SMEM(name) extern uint8_t name[]

namespace asmma {

inline uint32_t smem_u32(const void *p) { return (uint32_t)((const uint8_t *)p - emu::smem_base); }
inline void cp_async16(uint32_t dst, const void *src, int src_bytes)
{
    if (src_bytes == 16)
        memcpy(emu::smem_base + dst, src, 16);
    else
        memset(emu::smem_base + dst, 0, 16);
}
inline void cp_async_commit() {}
template <int N> inline void cp_async_wait() {}
inline void ldmatrix_x4(uint32_t &r0, uint32_t &r1, uint32_t &r2, uint32_t &r3, uint32_t addr)
{
    uint32_t r[4];
    emu::ldmatrix(r, addr, false);
    r0 = r[0], r1 = r[1], r2 = r[2], r3 = r[3];
}
inline void ldmatrix_x4_trans(uint32_t &r0, uint32_t &r1, uint32_t &r2, uint32_t &r3, uint32_t addr)
{
    uint32_t r[4];
    emu::ldmatrix(r, addr, true);
    r0 = r[0], r1 = r[1], r2 = r[2], r3 = r[3];
}
inline void bar_named(int id, int count) { emu::sync_named(id, count); }
inline void mma_bf16(float (&d)[4], const uint32_t (&a)[4], uint32_t b0, uint32_t b1) { emu::mma(d, a, b0, b1); }
inline uint32_t pack_bf16x2(float lo, float hi)
{
    auto rne = [](float x) -> uint32_t {
        uint32_t u = __float_as_uint(x);
        if ((u & 0x7fffffffu) > 0x7f800000u)
            return 0x7fffu;
        u += 0x7fffu + ((u >> 16) & 1u);
        return u >> 16;
    };
    return rne(lo) | (rne(hi) << 16);
}
inline float bf16lo(uint32_t u) { return __uint_as_float(u << 16); }
inline float bf16hi(uint32_t u) { return __uint_as_float(u & 0xffff0000u); }

} // namespace asmma
