#include "ref/indexer.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "ref/cancel.h"
#include "ref/gemm.h"
#include "ref/numerics.h"
#include "ref/topk.h"

void as_index_weights_scale(float *w, int s, int nh, int ihd)
{
    /* One f32 constant, as torch multiplies a bf16 tensor by a Python float: one rounding. */
    const float c = (float)(1.0 / sqrt((double)ihd) * (1.0 / sqrt((double)nh)));
    for (int64_t i = 0; i < (int64_t)s * nh; i++)
        w[i] = as_bf16(w[i] * c);
}

int as_index_scores(const float *iq, const float *k, const float *w, int s, int nh, int ihd, int width,
                    float *score)
{
    if (width == 0)
        return 0;
    /* dots[t*nh + h][p] = iq[t][h] . k[p] in f32 (summation order is free). */
    float *dots = malloc(sizeof(float) * (size_t)s * nh * width);
    if (!dots)
        return -1;
    as_sgemm_nt((int64_t)s * nh, width, ihd, iq, ihd, k, ihd, dots, width);
#pragma omp parallel for schedule(static)
    for (int t = 0; t < s; t++) {
        if (as_ref_cancelled()) { /* zeros: what follows in the cancelled layer stays finite */
            memset(score + (size_t)t * width, 0, sizeof *score * (size_t)width);
            continue;
        }
        for (int p = 0; p < width; p++) {
            float acc = 0.0f;
            for (int h = 0; h < nh; h++) {
                float d = as_bf16(dots[((size_t)t * nh + h) * width + p]);
                float relu = d > 0.0f ? d : 0.0f;
                acc += as_bf16(relu * w[(size_t)t * nh + h]);
            }
            score[(size_t)t * width + p] = as_bf16(acc);
        }
    }
    free(dots);
    return 0;
}

void as_index_visibility(float *score, int s, int width, const int *compress_lens)
{
    for (int t = 0; t < s; t++)
        for (int p = compress_lens[t] < 0 ? 0 : compress_lens[t]; p < width; p++)
            score[(size_t)t * width + p] = -INFINITY;
}

int as_index_topk(const float *score, int s, int width, int k, const int *compress_lens, int offset,
                  int32_t *sel)
{
    return as_index_topk_ties(score, s, width, k, compress_lens, offset, sel, as_topk_reference_ties());
}

int as_index_topk_ties(const float *score, int s, int width, int k, const int *compress_lens, int offset,
                       int32_t *sel, AsTieOrder ties)
{
    int fail = 0;
#pragma omp parallel reduction(| : fail)
    {
        AsTopkPair *scratch = malloc(sizeof(AsTopkPair) * (size_t)(width > 0 ? width : 1));
        if (!scratch)
            fail = 1;
#pragma omp for schedule(dynamic, 4)
        for (int t = 0; t < s; t++) {
            if (!scratch)
                continue;
            int32_t *row = sel + (size_t)t * k;
            as_topk_set_ties(score + (size_t)t * width, width, k, row, scratch, ties);
            for (int j = 0; j < k; j++)
                row[j] = row[j] < compress_lens[t] ? row[j] + offset : -1;
        }
        free(scratch);
    }
    return fail ? -1 : 0;
}
