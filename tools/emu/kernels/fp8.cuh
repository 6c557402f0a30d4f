// Emulator shadow of kernels/fp8.cuh: the same names on the host. The tensor-core products follow the
// PTX ISA's fragment layouts: mma.m16n8k32 with e4m3 operands (kernels/fp8.cuh's header), and wgmma
// m64n128k32 from two K-major 128-byte-swizzled shared-memory operands, each thread computing its own
// accumulator fragment (warp w of the warpgroup: rows 16 w + g, + 8; columns 8 j + 2 c, + 1) from the
// bytes the descriptors address. The sums are exact f32 sums in k order (the hardware's may keep fewer
// bits inside a block: the tests on the device allow for that).
#pragma once

#include "emu.h"

#include <cstring>

extern "C" float as_e4m3_from_bits(uint8_t b);
extern "C" uint16_t as_bf16_bits(float x);

#define AS_FP8_MMA 1
#define AS_FP8_WGMMA_EMU 1

namespace asfp8 {

inline uint2 ld_stream8(const void *p)
{
    uint2 v;
    memcpy(&v, p, 8);
    return v;
}

inline float e4m3_value(uint8_t b) { return as_e4m3_from_bits(b); }

inline uint32_t e4m3x2_to_bf16x2(uint32_t w, int h)
{
    const uint8_t lo = (uint8_t)(w >> (16 * h)), hi = (uint8_t)(w >> (16 * h + 8));
    return (uint32_t)as_bf16_bits(e4m3_value(lo)) | (uint32_t)as_bf16_bits(e4m3_value(hi)) << 16;
}

// d += a . b: every lane's fragments gathered by exchange, then this lane's four outputs.
inline void mma_e4m3(float (&d)[4], const uint32_t (&a)[4], uint32_t b0, uint32_t b1)
{
    uint32_t A[32][4], B[32][2];
    for (int L = 0; L < 32; L++) {
        for (int r = 0; r < 4; r++)
            A[L][r] = emu::xchg_u32(a[r], L);
        B[L][0] = emu::xchg_u32(b0, L);
        B[L][1] = emu::xchg_u32(b1, L);
    }
    float Am[16][32], Bm[32][8];
    for (int L = 0; L < 32; L++) {
        const int g = L / 4, c = L % 4;
        for (int j = 0; j < 4; j++) {
            Am[g][4 * c + j] = e4m3_value((uint8_t)(A[L][0] >> (8 * j)));
            Am[g + 8][4 * c + j] = e4m3_value((uint8_t)(A[L][1] >> (8 * j)));
            Am[g][16 + 4 * c + j] = e4m3_value((uint8_t)(A[L][2] >> (8 * j)));
            Am[g + 8][16 + 4 * c + j] = e4m3_value((uint8_t)(A[L][3] >> (8 * j)));
            Bm[4 * c + j][g] = e4m3_value((uint8_t)(B[L][0] >> (8 * j)));
            Bm[16 + 4 * c + j][g] = e4m3_value((uint8_t)(B[L][1] >> (8 * j)));
        }
    }
    const int l = (int)(threadIdx.x & 31), g = l / 4, c = l % 4;
    const int rows[4] = {g, g, g + 8, g + 8}, cols[4] = {2 * c, 2 * c + 1, 2 * c, 2 * c + 1};
    for (int e = 0; e < 4; e++) {
        float acc = d[e];
        for (int k = 0; k < 32; k++)
            acc = fmaf(Am[rows[e]][k], Bm[k][cols[e]], acc);
        d[e] = acc;
    }
}

// The byte at (row, kbyte) of a K-major 128-byte-swizzle operand: the descriptor's start address and
// stride-dimension offset, the swizzle's XOR of address bits 4-6 with bits 7-9.
inline uint8_t desc_byte(uint64_t desc, int row, int kbyte)
{
    const uint32_t start = (uint32_t)(desc & 0x3FFFu) << 4, sbo = (uint32_t)((desc >> 32) & 0x3FFFu) << 4;
    const uint32_t lin = start + (uint32_t)(row / 8) * sbo + (uint32_t)(row % 8) * 128 + (uint32_t)kbyte;
    return emu::smem_base[lin ^ (((lin >> 7) & 7u) << 4)];
}

inline void wgmma_m64n128k32_e4m3(float (&d)[64], uint64_t desc_a, uint64_t desc_b)
{
    const int t = (int)(threadIdx.x & 127), wi = t / 32, l = t % 32, g = l / 4, c = l % 4;
    for (int j = 0; j < 16; j++)
        for (int e = 0; e < 4; e++) {
            const int r = 16 * wi + g + (e >= 2 ? 8 : 0), n = 8 * j + 2 * c + (e & 1);
            float acc = 0.0f;
            for (int k = 0; k < 32; k++)
                acc = fmaf(e4m3_value(desc_byte(desc_a, r, k)), e4m3_value(desc_byte(desc_b, n, k)), acc);
            d[4 * j + e] = acc;
        }
}

} // namespace asfp8
