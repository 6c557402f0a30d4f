/* The Indexer's scores (SPEC 3 step 5c): bf16-staged head-weighted ReLU dot products, the
 * visibility mask, and the per-query top-k with offsets. */
#ifndef AS_INDEXER_H
#define AS_INDEXER_H

#include <stdint.h>

#include "ref/topk.h"

/* w[t][h] = bf16(w[t][h] * ihd^-0.5 * nh^-0.5), in place (the linear's rounding already applied). */
void as_index_weights_scale(float *w, int s, int nh, int ihd);

/* score[t][p] = bf16( sum_h bf16( relu(bf16(iq[t][h] . k[p])) * w[t][h] ) ) for p < width.
 * iq: [s][nh][ihd], k: [width][ihd], w: [s][nh]. Returns 0, -1 on OOM. */
int as_index_scores(const float *iq, const float *k, const float *w, int s, int nh, int ihd, int width,
                    float *score);

/* Prefill: compress_lens[t] = (start_pos + t + 1) / r; decode: width. Scores at p >= compress_lens[t]
 * become -inf. */
void as_index_visibility(float *score, int s, int width, const int *compress_lens);

/* Per query: the index set of torch's CPU topk(k) over the row, ascending; each p becomes
 * p + offset when p < compress_lens[t], else -1. sel: [s][k]. Returns 0, -1 on OOM. Exact ties
 * are broken by the reference's convention (ref/topk.h: torch's CPU order unless a command set
 * another). */
int as_index_topk(const float *score, int s, int width, int k, const int *compress_lens, int offset,
                  int32_t *sel);
/* The same under a given tie convention. */
int as_index_topk_ties(const float *score, int s, int width, int k, const int *compress_lens, int offset,
                       int32_t *sel, AsTieOrder ties);

#endif
