#include "ref/candidates.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "ref/topk.h"

int as_select_candidate_blocks(const float *score, int s, int width, const int *compress_lens, int bs,
                               int topk_blocks, uint8_t *mask)
{
    return as_select_candidate_blocks_ties(score, s, width, compress_lens, bs, topk_blocks, mask,
                                           as_topk_reference_ties());
}

int as_select_candidate_blocks_ties(const float *score, int s, int width, const int *compress_lens, int bs,
                                    int topk_blocks, uint8_t *mask, AsTieOrder ties)
{
    int nblocks = (width + bs - 1) / bs;
    int kb = topk_blocks < nblocks ? topk_blocks : nblocks;
    float *blk = malloc(sizeof(float) * (size_t)(nblocks > 0 ? nblocks : 1));
    int32_t *kept = malloc(sizeof(int32_t) * (size_t)(kb > 0 ? kb : 1));
    AsTopkPair *scratch = malloc(sizeof(AsTopkPair) * (size_t)(nblocks > 0 ? nblocks : 1));
    if (!blk || !kept || !scratch) {
        free(blk), free(kept), free(scratch);
        return -1;
    }
    memset(mask, 0, (size_t)s * width);
    for (int t = 0; t < s; t++) {
        const float *row = score + (size_t)t * width;
        for (int b = 0; b < nblocks; b++) {
            int end = (b + 1) * bs < width ? (b + 1) * bs : width;
            float m = row[b * bs];
            for (int p = b * bs + 1; p < end; p++)
                m = row[p] > m ? row[p] : m; /* bf16 values: max is exact */
            blk[b] = m;
        }
        int pin = as_pinned_block(compress_lens[t], bs);
        if (pin >= 0 && pin < nblocks)
            blk[pin] = INFINITY;
        as_topk_set_ties(blk, nblocks, kb, kept, scratch, ties);
        uint8_t *mrow = mask + (size_t)t * width;
        for (int j = 0; j < kb; j++) {
            int b = kept[j];
            if (blk[b] == -INFINITY)
                continue; /* a kept block with nothing visible is dropped */
            int end = (b + 1) * bs < width ? (b + 1) * bs : width;
            memset(mrow + (size_t)b * bs, 1, (size_t)(end - b * bs));
        }
    }
    free(blk), free(kept), free(scratch);
    return 0;
}
