/* The softmax-weighted reductions of SPEC section 3: sparse attention with the sink (step 7)
 * and the ratio-2 compressor's softmax pooling over a group (step 5a). */
#ifndef AS_ATTENTION_H
#define AS_ATTENTION_H

#include <stdint.h>

/* o[t][h] = bf16( sum_i exp(z_i - m) / den * rows[i] ), z_i = (q[t][h] . rows[i]) * scale, over the
 * selected rows idx[t][0..topk) (-1 skipped), m = max(sink[h], max z), den = exp(sink[h]-m) + sum.
 * q, o: [s][nh][hd]; rows: [nrows][hd]; idx: [s][topk]. Every idx must be -1 or < nrows. */
void as_sparse_attention(const float *q, const float *rows, int64_t nrows, const int32_t *idx,
                         int64_t topk, const float *sink, float *o, int64_t s, int nh, int hd,
                         float scale);

/* One group of r rows (kv, score: [r][hd] f32): out[d] = bf16( sum_j kv[j][d] * softmax_j(score[.][d]) ). */
void as_softmax_pool(const float *kv, const float *score, int r, int hd, float *out);

#endif
