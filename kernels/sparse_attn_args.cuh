// The arguments of a sparse-attention launch (kernels/sparse_attn.cu's kernels and
// kernels/sparse_attn_wgmma.cu's, which reads the first block only: it never splits and has no
// decode variant).
#pragma once

#include <stdint.h>

namespace asattn {

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
    int tiles_per_split;
    float *ws_o;  // [s][nsplit][nh][HD], or null (one split)
    float *ws_ml; // [s][nsplit][nh][2]
    // The decode graph's variant (issue 8): the live selection width and compressed row count, read
    // on the device (clamped to topk / nb above, which size the launch and idx's row stride); null:
    // topk / nb as given. The result is the by-value one's at the live values (see the launcher).
    const int32_t *topk_d = nullptr;
    const int32_t *nb_d = nullptr;
};

} // namespace asattn
