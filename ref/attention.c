/* sparse_attn with the attention sink as kernel.py computes it (SPEC 3 step 7), and the ratio-2
 * compressor's softmax pooling (step 5a). Threads take queries (or, with fewer queries than threads,
 * groups of a query's heads). The selection row is walked in blocks of 64 consecutive entries, in
 * the order of idx; per block the valid rows are gathered into a dense [n][hd] block and the two
 * dot-product stages are matrix products over the heads (serial BLAS sgemm: the f32 summation order
 * inside a dot product is free), with the online softmax between them in scalar f32:
 *   z_i = (q . row_i) * scale;  m' = max(m, max z);  c = exp(m - m');  p_i = exp(z_i - m');
 *   den = den * c + sum p_i;  acc = acc * c + sum bf16(p_i) * row_i;  m = m'   (m starts at -1e30)
 * and after the last block den += exp(sink - m), o = bf16(acc / den). The probabilities are rounded
 * to bf16 against the running max of the blocks so far, so where the block boundaries fall is part
 * of the numerics. */
#include "ref/attention.h"

#include <cblas.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ref/alloc.h"
#include "ref/cancel.h"
#include "ref/gemm.h"
#include "ref/linear.h"
#include "ref/numerics.h"

/* The online-softmax state of one (query, head) between blocks. */
typedef struct {
    float m, den;
    float *acc; /* [hd] */
} RunningSoftmax;

/* One block for one head: z[0..n) holds q . row_i on entry (the block's valid rows only: a skipped
 * entry has p = 0 and adds nothing); on return z holds bf16(p_i), ready to weight the rows. Returns
 * the factor c that the accumulator must be scaled by before the block's rows are added. */
static float softmax_block(RunningSoftmax *rs, float *z, int64_t n, float scale, bool probs_f32)
{
    float m_new = rs->m;
    for (int64_t i = 0; i < n; i++) {
        z[i] = z[i] * scale;
        m_new = fmaxf(m_new, z[i]);
    }
    const float c = expf(rs->m - m_new);
    float sum = 0.0f;
    for (int64_t i = 0; i < n; i++) {
        const float p = expf(z[i] - m_new);
        sum += p;
        z[i] = probs_f32 ? p : as_bf16(p);
    }
    rs->den = rs->den * c + sum;
    rs->m = m_new;
    return c;
}

/* Copies the valid rows of one block of selection entries into k (-1 and out-of-range entries are
 * skipped, so a bad selection can never read outside rows); returns how many. */
static int64_t gather_rows(const float *rows, int64_t nrows, const int32_t *sel, int64_t n_sel,
                           int hd, float *k)
{
    int64_t n = 0;
    for (int64_t c = 0; c < n_sel; c++) {
        int32_t j = sel[c];
        if (j < 0 || j >= nrows)
            continue;
        memcpy(k + n * hd, rows + (int64_t)j * hd, (size_t)hd * sizeof *k);
        n++;
    }
    return n;
}

/* Query t, heads h0 .. h0 + nhg: every block of its selection row, then the sink. */
static void attend_query(const float *qt, const float *rows, int64_t nrows, const int32_t *sel, int64_t topk,
                         const float *sink, float *ot, int nhg, int hd, float scale, float *k, float *z,
                         float *pv, RunningSoftmax *rs, const AsSoftmaxWay *way)
{
    for (int h = 0; h < nhg; h++) {
        rs[h].m = way->sink_in_max ? sink[h] : AS_ATTN_M_INIT;
        rs[h].den = way->sink_in_max ? 1.0f : 0.0f; /* exp(sink - sink) */
        memset(rs[h].acc, 0, (size_t)hd * sizeof(float));
    }
    int64_t seen = 0;
    for (int64_t b0 = 0; b0 < topk; b0 += AS_ATTN_BLOCK) {
        const int64_t nb = topk - b0 < AS_ATTN_BLOCK ? topk - b0 : AS_ATTN_BLOCK;
        const int64_t n = gather_rows(rows, nrows, sel + b0, nb, hd, k);
        if (n == 0)
            continue; /* a block of skipped entries: m, den and acc stay as they are (c = 1) */
        seen += n;
        /* z[h][i] = q[t][h] . k[i] */
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, nhg, (int)n, hd, 1.0f, qt, hd, k, hd, 0.0f, z, (int)n);
        float c[AS_ATTN_MAX_HEADS_PER_ITEM];
        for (int h = 0; h < nhg; h++)
            c[h] = softmax_block(&rs[h], z + (int64_t)h * n, n, scale, way->probs_f32);
        /* pv[h] = sum_i bf16(p[h][i]) * k[i]; acc = acc * c + pv */
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, nhg, hd, (int)n, 1.0f, z, (int)n, k, hd, 0.0f, pv, hd);
        for (int h = 0; h < nhg; h++)
            for (int d = 0; d < hd; d++)
                rs[h].acc[d] = rs[h].acc[d] * c[h] + pv[(int64_t)h * hd + d];
    }
    for (int h = 0; h < nhg; h++) {
        float *oh = ot + (int64_t)h * hd;
        if (seen == 0) { /* only the sink: o = bf16(0) */
            memset(oh, 0, (size_t)hd * sizeof *oh);
            continue;
        }
        const float den = way->sink_in_max      ? rs[h].den
                          : way->sink_unshifted ? rs[h].den + expf(sink[h])
                                                : rs[h].den + expf(sink[h] - rs[h].m);
        for (int d = 0; d < hd; d++)
            oh[d] = as_bf16(rs[h].acc[d] / den);
    }
}

void as_sparse_attention(const float *q, const float *rows, int64_t nrows, const int32_t *idx,
                         int64_t topk, const float *sink, float *o, int64_t s, int nh, int hd,
                         float scale)
{
    const AsSoftmaxWay kernel_py = {false, false, false};
    as_sparse_attention_in(q, rows, nrows, idx, topk, sink, o, s, nh, hd, scale, &kernel_py);
}

void as_sparse_attention_in(const float *q, const float *rows, int64_t nrows, const int32_t *idx, int64_t topk,
                            const float *sink, float *o, int64_t s, int nh, int hd, float scale,
                            const AsSoftmaxWay *way)
{
    if (s <= 0 || nh <= 0 || hd <= 0)
        return;
    as_blas_serial();
    const int nt = as_ref_threads();
    /* Work items are (query, group of heads): whole queries when there are many, else groups of
     * 16 heads so that a few queries (decode: s == 1) still feed every thread (at most 64 heads an
     * item). The split depends on s only, never on the thread count, so the bits do not either. */
    int hpg = s >= 16 ? AS_ATTN_MAX_HEADS_PER_ITEM : 16;
    hpg = hpg < nh ? hpg : nh;
    const int groups = (nh + hpg - 1) / hpg;
#pragma omp parallel num_threads(nt)
    {
        float *k = as_ref_xmalloc((size_t)AS_ATTN_BLOCK * (size_t)hd * sizeof *k, "attention");
        float *z = as_ref_xmalloc((size_t)hpg * AS_ATTN_BLOCK * sizeof *z, "attention");
        float *pv = as_ref_xmalloc((size_t)hpg * (size_t)hd * sizeof *pv, "attention");
        float *acc = as_ref_xmalloc((size_t)hpg * (size_t)hd * sizeof *acc, "attention");
        RunningSoftmax rs[AS_ATTN_MAX_HEADS_PER_ITEM];
        for (int h = 0; h < hpg; h++)
            rs[h].acc = acc + (int64_t)h * hd;
#pragma omp for schedule(dynamic)
        for (int64_t item = 0; item < s * groups; item++) {
            const int64_t t = item / groups;
            const int h0 = (int)(item % groups) * hpg, nhg = nh - h0 < hpg ? nh - h0 : hpg;
            if (nhg <= 0)
                continue;
            if (as_ref_cancelled()) { /* zeros: what follows in the cancelled layer stays finite */
                memset(o + (t * nh + h0) * hd, 0, sizeof *o * (size_t)nhg * (size_t)hd);
                continue;
            }
            attend_query(q + (t * nh + h0) * hd, rows, nrows, idx + t * topk, topk, sink + h0, o + (t * nh + h0) * hd,
                         nhg, hd, scale, k, z, pv, rs, way);
        }
        free(k);
        free(z);
        free(pv);
        free(acc);
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
