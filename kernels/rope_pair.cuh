// One RoPE pair, the reference's arithmetic (ref/rope.c): re = x0 c - x1 s, im = x0 s + x1 c, each
// product, sum and difference rounded to f32, then both to bf16. The caller passes s negated for the
// inverse rotation. Shared by rope.cu, row_pipe.cu, attn_decode.cu (o_back) and the GEMV epilogue
// (q's RoPE after wq_b). Not in common.cuh: tools/emu shadows that file, and the emulator must run
// this code itself.
#pragma once

#include "kernels/common.cuh"

__device__ __forceinline__ void as_d_rope_pair(uint16_t &x0, uint16_t &x1, float c, float s)
{
    const float a = as_d_bf16_to_f32(x0), b = as_d_bf16_to_f32(x1);
    x0 = as_d_f32_to_bf16(__fsub_rn(__fmul_rn(a, c), __fmul_rn(b, s)));
    x1 = as_d_f32_to_bf16(__fadd_rn(__fmul_rn(a, s), __fmul_rn(b, c)));
}
