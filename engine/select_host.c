/* Selection on the host (the first, simple path): the index scores are downloaded in one
 * stream-ordered copy, and the candidate blocks and per-query top-k come from the reference's
 * own code, so the sets and torch's tie order are the reference's by construction. The host work
 * (as_dev_select_compute) makes no CUDA call and no bookkeeping: the decode graph runs it as a host
 * node (engine/graph.c) between a copy of the score row down and a copy of the selection up. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "engine/check.h"
#include "engine/internal.h"
#include "ref/candidates.h"
#include "ref/indexer.h"
#include "ref/numerics.h"

int as_dev_sel_reserve(AsEngine *e, size_t n, AsError *err)
{
    AsDevShared *sh = &e->sh;
    if ((int)n <= sh->sel_cap)
        return 0;
    int32_t *h = realloc(sh->sel_h, sizeof(int32_t) * (n + 1));
    if (!h)
        return as_err(err, AS_ERUNTIME, "out of host memory for a selection of %zu entries", n);
    sh->sel_h = h;
    cudaFree(sh->sel_d);
    sh->sel_d = NULL;
    CU(err, cudaMalloc((void **)&sh->sel_d, sizeof(int32_t) * (n + 1)), "shared selection of %zu entries", n);
    sh->sel_cap = (int)n;
    return 0;
}

static int publish_selection(AsEngine *e, int l, int s, int k, AsError *err)
{
    AsDevShared *sh = &e->sh;
    size_t n = (size_t)s * k;
    TRY(as_dev_sel_reserve(e, n, err));
    memcpy(sh->sel_h, e->wk.csel_h, sizeof(int32_t) * n);
    if (n)
        CU(err, cudaMemcpyAsync(sh->sel_d, sh->sel_h, sizeof(int32_t) * n, cudaMemcpyHostToDevice, e->st),
           "layer %d: publish selection %dx%d", l, s, k);
    return 0;
}

int as_dev_cand_reserve(AsEngine *e, const AsLayerPlan *p, AsError *err)
{
    AsDevShared *sh = &e->sh;
    const size_t n = (size_t)p->s * p->width;
    if (!p->makes_cand || n <= sh->cand_cap)
        return 0;
    uint8_t *m = realloc(sh->cand_h, n + 1);
    if (!m)
        return as_err(err, AS_ERUNTIME, "out of host memory for a %dx%d candidate mask", p->s, p->width);
    sh->cand_h = m;
    sh->cand_cap = n;
    return 0;
}

int as_dev_select_compute(AsEngine *e, const AsLayerPlan *p, int width, int k, AsError *err)
{
    const AsConfig *c = &e->cfg;
    AsDevWork *wk = &e->wk;
    AsDevShared *sh = &e->sh;
    const int s = p->s;
    size_t n = (size_t)s * width;
    for (size_t i = 0; i < n; i++)
        wk->score_f[i] = as_bf16_to_f32(wk->score_h[i]);
    int *clens = malloc(sizeof(int) * (size_t)(s > 0 ? s : 1));
    if (!clens)
        return as_err(err, AS_ERUNTIME, "out of host memory");
    for (int t = 0; t < s; t++)
        clens[t] = p->prefill ? (t + 1) / p->ratio : width;
    int rc = 0;
    if (p->makes_cand) {
        if (n > sh->cand_cap || !sh->cand_h)
            rc = as_err(err, AS_ERUNTIME, "layer %d: the candidate mask holds %zu entries, the scores %zu", p->layer,
                        sh->cand_cap, n);
        else if (as_select_candidate_blocks(wk->score_f, s, width, clens, c->candidate_block_size,
                                            c->candidate_topk_blocks, sh->cand_h))
            rc = as_err(err, AS_ERUNTIME, "out of host memory selecting candidate blocks");
    } else if (p->applies_cand) {
        for (size_t i = 0; i < n; i++)
            if (!sh->cand_h[i])
                wk->score_f[i] = -INFINITY;
    }
    if (!rc && as_index_topk(wk->score_f, s, width, k, clens, p->sel_offset, wk->csel_h))
        rc = as_err(err, AS_ERUNTIME, "out of host memory in top-k");
    free(clens);
    return rc;
}

int as_dev_select_host(AsEngine *e, const AsLayerPlan *p, AsError *err)
{
    AsDevWork *wk = &e->wk;
    const int l = p->layer, s = p->s, width = p->width, k = p->k;
    size_t n = (size_t)s * width;
    CU(err, cudaMemcpyAsync(wk->score_h, wk->score, sizeof(uint16_t) * n, cudaMemcpyDeviceToHost, e->st),
       "layer %d: download index scores %dx%d", l, s, width);
    CU(err, cudaStreamSynchronize(e->st), "layer %d: index scores %dx%d", l, s, width);
    TRY(as_dev_cand_reserve(e, p, err));
    TRY(as_dev_select_compute(e, p, width, k, err));
    if (k)
        CU(err, cudaMemcpyAsync(wk->csel, wk->csel_h, sizeof(int32_t) * (size_t)s * k, cudaMemcpyHostToDevice, e->st),
           "layer %d: upload the selection %dx%d", l, s, k);
    TRY(publish_selection(e, l, s, k, err));
    e->sh.sel_on_device = false;
    return 0;
}
