// One element through the KV / index quantiser (SPEC 2; twin: ref/quant.c). Shared by the
// quantiser kernel (quant.cu) and the fused row pipeline (row_pipe.cu), which must round alike.
// A quantiser block is an aligned group of 32 lanes (16 for fp4 e4m3) of one warp: every lane of
// the warp calls it (the block's max is a shuffle), lanes with nothing to quantise with 0.
#pragma once

#include "kernels/common.cuh"
#include "kernels/kernels.h"

// The reference's ternary clamp: NaN passes through.
__device__ __forceinline__ float as_d_clampf(float v, float lo, float hi) { return v < lo ? lo : v > hi ? hi : v; }

template <int Kind> __device__ __forceinline__ uint16_t as_d_quant_elem(uint16_t bits)
{
    constexpr int block = Kind == AS_KQ_FP4_E4M3 ? 16 : 32;
    const float v = as_d_bf16_to_f32(bits);
    const float amax = as_d_group_max(fabsf(v), block);
    float s, lim;
    if (Kind == AS_KQ_FP8) {
        s = as_d_pow2_ceil(__fdiv_rn(fmaxf(amax, 1e-4f), 448.0f));
        lim = 448.0f;
    } else if (Kind == AS_KQ_FP4_E8M0) {
        s = as_d_pow2_ceil(__fdiv_rn(fmaxf(amax, 0x1.8p-124f /* 6 * 2^-126 */), 6.0f));
        lim = 6.0f;
    } else {
        s = as_d_e4m3(__fdiv_rn(fmaxf(amax, 0x1.8p-7f /* 6 * 2^-9 */), 6.0f));
        lim = 6.0f;
    }
    const float y = as_d_clampf(__fdiv_rn(v, s), -lim, lim);
    const float g = Kind == AS_KQ_FP8 ? as_d_e4m3(y) : as_d_e2m1(y);
    return as_d_f32_to_bf16(__fmul_rn(g, s));
}
