// The arguments of a sparse-attention launch (kernels/sparse_attn.cu's kernels and
// kernels/sparse_attn_wgmma.cu's, which reads the first block only: it never splits and has no
// decode variant), and the pieces of kernel.py's blockwise softmax (SPEC 3 step 7) that all three
// attention files share (kernels/attn_decode.cu too).
#pragma once

#include <stdint.h>

#include "kernels/common.cuh"

namespace asattn {

// kernel.py's block: the selection is taken in blocks of this many consecutive entries (entry j in
// block j / 64); within a block the running max moves once, and bf16(p) is rounded against it.
constexpr int kBlock = 64;
// The running max starts finite (kernel.py's -1e30): a block of skipped entries (z = -inf) gives
// exp(-inf + 1e30) = 0 and c = exp(0) = 1, never -inf - -inf.
constexpr float kMaxInit = -1e30f;

// The end of the softmax: den = l + exp(sink - m) (the sink enlarges the denominator only; it is
// not part of the running max), o = acc * attn_inv(den). kernel.py divides; the product with the
// reciprocal is within an f32 ulp of the quotient, and a division per output element costs several
// times a multiply in the kernels' epilogues. den is 0 only when nothing was selected and the sink is
// -inf (acc is 0 then): o = 0, not 0 / 0. Where nothing was selected and the sink is finite,
// den = exp(sink + 1e30) = inf and o = 0 * 0 = 0, as kernel.py gives.
__device__ __forceinline__ float attn_den(float l, float m, float sink) { return l + expf(sink - m); }
__device__ __forceinline__ float attn_inv(float den) { return den > 0.0f ? 1.0f / den : 0.0f; }

struct AttnArgs {
    const uint16_t *q;
    const uint16_t *rows_a;
    int na;
    const uint16_t *rows_b;
    int nb;
    const int32_t *idx;
    int topk;
    const float *sink;
    uint16_t *o;
    int nh;
    float scale;
    int tiles_per_split; // kBlock-entry tiles (kernel.py's blocks) per split of the selection
    float *ws_o;  // [s][nsplit][nh][HD], or null (one split)
    float *ws_ml; // [s][nsplit][nh][2]
    // The decode graph's variant: the live selection width and compressed row count, read
    // on the device (clamped to topk / nb above, which size the launch and idx's row stride); null:
    // topk / nb as given. The result is the by-value one's at the live values (see the launcher).
    const int32_t *topk_d = nullptr;
    const int32_t *nb_d = nullptr;
};

} // namespace asattn
