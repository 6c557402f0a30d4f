/* select_candidate_blocks (SPEC 3): block maxima of the scores, the newest visible block
 * pinned to +inf, torch's topk over blocks, kept -inf blocks dropped, positions marked. */
#ifndef AS_CANDIDATES_H
#define AS_CANDIDATES_H

#include <stdint.h>

#include "ref/topk.h"

/* score: [s][width]; mask: [s][width] (1 = candidate). Returns 0, -1 on OOM. Exact ties among
 * block maxima are broken by the reference's convention (ref/topk.h). */
int as_select_candidate_blocks(const float *score, int s, int width, const int *compress_lens, int bs,
                               int topk_blocks, uint8_t *mask);
/* The same under a given tie convention. */
int as_select_candidate_blocks_ties(const float *score, int s, int width, const int *compress_lens, int bs,
                                    int topk_blocks, uint8_t *mask, AsTieOrder ties);

/* Floor division: the pinned block of a query (-1 when compress_len == 0: nothing pinned). */
static inline int as_pinned_block(int compress_len, int bs)
{
    int a = compress_len - 1;
    return a >= 0 ? a / bs : -((-a + bs - 1) / bs);
}

#endif
