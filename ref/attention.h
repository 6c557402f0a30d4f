/* The softmax-weighted reductions of SPEC section 3: sparse attention with the sink (step 7)
 * and the ratio-2 compressor's softmax pooling over a group (step 5a). */
#ifndef AS_ATTENTION_H
#define AS_ATTENTION_H

#include <stdbool.h>
#include <stdint.h>

#define AS_ATTN_BLOCK 64        /* kernel.py's `block`: selection entries per online-softmax step */
#define AS_ATTN_M_INIT (-1e30f) /* the running max's start: finite, so an all -1 block gives p = 0 */
#define AS_ATTN_MAX_HEADS_PER_ITEM 64

/* kernel.py's sparse_attn: over the selection idx[t][0..topk) in blocks of 64 consecutive entries
 * (-1 and entries >= nrows skipped), z_i = (q[t][h] . rows[i]) * scale, an online softmax from
 * m = -1e30 whose probabilities are rounded to bf16 before they weight the rows (against the
 * running max after their block), f32 denominators, and the sink added once at the end:
 * o = bf16(acc / (den + exp(sink[h] - m))). A query with no valid entry gives 0.
 * q, o: [s][nh][hd]; rows: [nrows][hd]; idx: [s][topk]. */
void as_sparse_attention(const float *q, const float *rows, int64_t nrows, const int32_t *idx,
                         int64_t topk, const float *sink, float *o, int64_t s, int nh, int hd,
                         float scale);

/* How the online softmax treats the sink and the probabilities: all false is kernel.py's (the function
 * above); the others are conventions engines get wrong (ref/convention.h). */
typedef struct {
    bool sink_in_max;    /* the running max starts at the sink (m = sink, den = 1), nothing added at the end */
    bool sink_unshifted; /* the end adds exp(sink), not exp(sink - m) */
    bool probs_f32;      /* the rows are weighted by p, not bf16(p) */
} AsSoftmaxWay;

void as_sparse_attention_in(const float *q, const float *rows, int64_t nrows, const int32_t *idx, int64_t topk,
                            const float *sink, float *o, int64_t s, int nh, int hd, float scale,
                            const AsSoftmaxWay *way);

/* One group of r rows (kv, score: [r][hd] f32): out[d] = bf16( sum_j kv[j][d] * softmax_j(score[.][d]) ). */
void as_softmax_pool(const float *kv, const float *score, int r, int hd, float *out);

#endif
