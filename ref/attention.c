/* sparse_attn with the attention sink (SPEC 3 step 7) and the ratio-2 compressor's softmax
 * pooling (step 5a). Threads take queries (or, with fewer queries than threads, groups of a
 * query's heads); the selected rows are gathered into a dense [n][hd] block; the two
 * dot-product stages are then matrix products over the heads (serial BLAS sgemm: the f32
 * summation order inside a dot product is free), and the softmax between them is scalar f32
 * with every rounding in the order of the SPEC:
 *   z_i = (q . row_i) * scale;  m = max(sink, max z);  e_i = exp(z_i - m);
 *   den = exp(sink - m) + sum e_i;  p_i = e_i / den;  o = bf16( sum_i p_i * row_i ). */
#include "ref/attention.h"

#include <cblas.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ref/gemm.h"
#include "ref/linear.h"
#include "ref/numerics.h"

static void *xmalloc(size_t n)
{
    void *p = malloc(n ? n : 1);
    if (!p) {
        fprintf(stderr, "attnscope: attention: out of memory (%zu bytes)\n", n);
        abort();
    }
    return p;
}

/* z[0..n) holds q . row_i; on return it holds p_i. */
static void softmax_with_sink(float *z, int64_t n, float sink, float scale)
{
    float m = sink;
    for (int64_t i = 0; i < n; i++) {
        z[i] = z[i] * scale;
        m = fmaxf(m, z[i]);
    }
    float sum = 0.0f;
    for (int64_t i = 0; i < n; i++) {
        z[i] = expf(z[i] - m);
        sum += z[i];
    }
    float den = expf(sink - m) + sum;
    for (int64_t i = 0; i < n; i++)
        z[i] = z[i] / den;
}

/* Copies the selected rows of query t into k (-1 and out-of-range entries are skipped, so a bad
 * selection can never read outside rows); returns how many. */
static int64_t gather_rows(const float *rows, int64_t nrows, const int32_t *sel, int64_t topk,
                           int hd, float *k)
{
    int64_t n = 0;
    for (int64_t c = 0; c < topk; c++) {
        int32_t j = sel[c];
        if (j < 0 || j >= nrows)
            continue;
        memcpy(k + n * hd, rows + (int64_t)j * hd, (size_t)hd * sizeof *k);
        n++;
    }
    return n;
}

void as_sparse_attention(const float *q, const float *rows, int64_t nrows, const int32_t *idx,
                         int64_t topk, const float *sink, float *o, int64_t s, int nh, int hd,
                         float scale)
{
    if (s <= 0 || nh <= 0 || hd <= 0)
        return;
    as_blas_serial();
    const int nt = as_ref_threads();
    /* Work items are (query, group of heads): whole queries when there are many, else groups of
     * 16 heads so that a few queries (decode: s == 1) still feed every thread. The split depends
     * on s only, never on the thread count, so the bits do not either. */
    const int hpg = s >= 16 || nh < 16 ? nh : 16;
    const int groups = (nh + hpg - 1) / hpg;
    const int64_t cap = topk > 0 ? topk : 1;
#pragma omp parallel num_threads(nt)
    {
        float *k = xmalloc((size_t)cap * (size_t)hd * sizeof *k);
        float *z = xmalloc((size_t)hpg * (size_t)cap * sizeof *z);
#pragma omp for schedule(dynamic)
        for (int64_t item = 0; item < s * groups; item++) {
            const int64_t t = item / groups;
            const int h0 = (int)(item % groups) * hpg, nhg = nh - h0 < hpg ? nh - h0 : hpg;
            if (nhg <= 0)
                continue;
            const float *qt = q + (t * nh + h0) * hd;
            float *ot = o + (t * nh + h0) * hd;
            int64_t n = gather_rows(rows, nrows, idx + t * topk, topk, hd, k);
            if (n == 0) { /* only the sink: o = bf16(0) */
                memset(ot, 0, (size_t)nhg * (size_t)hd * sizeof *ot);
                continue;
            }
            /* z[h][i] = q[t][h] . k[i] */
            cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, nhg, (int)n, hd, 1.0f, qt, hd, k, hd, 0.0f,
                        z, (int)n);
            for (int h = 0; h < nhg; h++)
                softmax_with_sink(z + (int64_t)h * n, n, sink[h0 + h], scale);
            /* o[t][h] = sum_i p[h][i] * k[i] */
            cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, nhg, hd, (int)n, 1.0f, z, (int)n, k, hd,
                        0.0f, ot, hd);
            for (int64_t i = 0; i < (int64_t)nhg * hd; i++)
                ot[i] = as_bf16(ot[i]);
        }
        free(k);
        free(z);
    }
}

/* Per channel d: softmax over the group's r scores (m = max, e_j = exp(score_j - m),
 * p_j = e_j / sum e), then bf16 of the weighted sum of the r kv values. A channel whose scores
 * are all -inf gives NaN, as torch's softmax does. */
void as_softmax_pool(const float *kv, const float *score, int r, int hd, float *out)
{
    for (int d = 0; d < hd; d++) {
        float m = -INFINITY;
        for (int j = 0; j < r; j++)
            m = fmaxf(m, score[(int64_t)j * hd + d]);
        float sum = 0.0f;
        for (int j = 0; j < r; j++)
            sum += expf(score[(int64_t)j * hd + d] - m);
        float acc = 0.0f;
        for (int j = 0; j < r; j++) {
            float p = expf(score[(int64_t)j * hd + d] - m) / sum; /* same e_j as above */
            acc += kv[(int64_t)j * hd + d] * p;
        }
        out[d] = as_bf16(acc);
    }
}
