// Emulator shadow of kernels/wgmma.cuh: the descriptor as on the device, the fences, commits and waits
// as nothing (the emulated products are synchronous), pin as nothing. The products themselves are
// emulated where a kernel's operand types are (tools/emu/kernels/fp8.cuh: e4m3).
#pragma once

#include "emu.h"

#define AS_WGMMA 1

namespace aswg {

inline uint64_t desc_sw128(uint32_t saddr, uint32_t lbo, uint32_t sbo)
{
    return (uint64_t)((saddr & 0x3FFFFu) >> 4) | ((uint64_t)((lbo & 0x3FFFFu) >> 4) << 16) |
           ((uint64_t)((sbo & 0x3FFFFu) >> 4) << 32) | (1ull << 62);
}
inline void fence() {}
inline void commit() {}
template <int N> inline void wait() {}
inline void fence_proxy_async() {}
template <int N> inline void pin(float (&)[N]) {}
template <int N> inline void pin(uint32_t (&)[N]) {}

} // namespace aswg
