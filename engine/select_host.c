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

void as_dev_sel_published(AsEngine *e, int l, int s, int k, int width, bool on_device, AsRun *meta)
{
    AsDevShared *sh = &e->sh;
    meta->k = k;
    meta->width = width;
    meta->indexer_ran = true;
    sh->sel_on_device = on_device;
    sh->sel_present = true;
    sh->sel_s = s;
    sh->sel_k = k;
    sh->sel_from = (AsProvenance){l, e->step};
    meta->sel_from = sh->sel_from;
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

int as_dev_select_book(AsEngine *e, int l, int s, int width, AsRun *meta, AsError *err)
{
    const AsLayerRole *role = &e->cfg.role[l];
    AsDevShared *sh = &e->sh;
    size_t n = (size_t)s * width;
    if (role->candidate_source) {
        if (n > sh->cand_cap) {
            uint8_t *m = realloc(sh->cand_h, n + 1);
            if (!m)
                return as_err(err, AS_ERUNTIME, "out of host memory for a %dx%d candidate mask", s, width);
            sh->cand_h = m;
            sh->cand_cap = n;
        }
        sh->cand_s = s;
        sh->cand_width = width;
        sh->cand_from = (AsProvenance){l, e->step};
        meta->cand_from = sh->cand_from;
    } else if (role->uses_candidates && e->fault != AS_FAULT_CAND_MASK_OFF) {
        if (sh->cand_s != s || sh->cand_width != width || !sh->cand_h)
            return as_err(err, AS_EREFUSED, "layer %d: candidate mask is %dx%d (layer %d, step %d) but the scores are %dx%d",
                          l, sh->cand_s, sh->cand_width, sh->cand_from.layer, sh->cand_from.step, s, width);
        meta->cand_from = sh->cand_from;
    }
    return 0;
}

int as_dev_select_compute(AsEngine *e, int l, int s, int width, int start_pos, int k, int offset, AsError *err)
{
    const AsConfig *c = &e->cfg;
    const AsLayerRole *role = &c->role[l];
    AsDevWork *wk = &e->wk;
    AsDevShared *sh = &e->sh;
    size_t n = (size_t)s * width;
    for (size_t i = 0; i < n; i++)
        wk->score_f[i] = as_bf16_to_f32(wk->score_h[i]);
    int *clens = malloc(sizeof(int) * (size_t)(s > 0 ? s : 1));
    if (!clens)
        return as_err(err, AS_ERUNTIME, "out of host memory");
    for (int t = 0; t < s; t++)
        clens[t] = start_pos == 0 ? (start_pos + t + 1) / role->ratio : width;
    int rc = 0;
    if (role->candidate_source) {
        if (n > sh->cand_cap || !sh->cand_h)
            rc = as_err(err, AS_ERUNTIME, "layer %d: the candidate mask holds %zu entries, the scores %zu", l,
                        sh->cand_cap, n);
        else if (as_select_candidate_blocks(wk->score_f, s, width, clens, c->candidate_block_size,
                                            c->candidate_topk_blocks, sh->cand_h))
            rc = as_err(err, AS_ERUNTIME, "out of host memory selecting candidate blocks");
    } else if (role->uses_candidates && e->fault != AS_FAULT_CAND_MASK_OFF) {
        for (size_t i = 0; i < n; i++)
            if (!sh->cand_h[i])
                wk->score_f[i] = -INFINITY;
    }
    if (!rc && as_index_topk(wk->score_f, s, width, k, clens, offset, wk->csel_h))
        rc = as_err(err, AS_ERUNTIME, "out of host memory in top-k");
    free(clens);
    return rc;
}

int as_dev_select_host(AsEngine *e, int l, int s, int width, int start_pos, AsRun *meta, AsError *err)
{
    const AsConfig *c = &e->cfg;
    AsDevWork *wk = &e->wk;
    size_t n = (size_t)s * width;
    CU(err, cudaMemcpyAsync(wk->score_h, wk->score, sizeof(uint16_t) * n, cudaMemcpyDeviceToHost, e->st),
       "layer %d: download index scores %dx%d", l, s, width);
    CU(err, cudaStreamSynchronize(e->st), "layer %d: index scores %dx%d", l, s, width);
    TRY(as_dev_select_book(e, l, s, width, meta, err));
    int k = c->index_topk < width ? c->index_topk : width;
    int offset = e->fault == AS_FAULT_NO_OFFSET ? 0 : meta->rows_a_len;
    TRY(as_dev_select_compute(e, l, s, width, start_pos, k, offset, err));
    if (k)
        CU(err, cudaMemcpyAsync(wk->csel, wk->csel_h, sizeof(int32_t) * (size_t)s * k, cudaMemcpyHostToDevice, e->st),
           "layer %d: upload the selection %dx%d", l, s, k);
    TRY(publish_selection(e, l, s, k, err));
    as_dev_sel_published(e, l, s, k, width, false, meta);
    return 0;
}
