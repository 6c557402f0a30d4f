/* Selection on the host (the first, simple path): the index scores are downloaded in one
 * stream-ordered copy, and the candidate blocks and per-query top-k come from the reference's
 * own code, so the sets and torch's tie order are the reference's by construction. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "engine/check.h"
#include "engine/internal.h"
#include "ref/candidates.h"
#include "ref/indexer.h"
#include "ref/numerics.h"

static int publish_selection(AsEngine *e, int l, int s, int k, AsError *err)
{
    AsDevShared *sh = &e->sh;
    size_t n = (size_t)s * k;
    if ((int)n > sh->sel_cap) {
        int32_t *h = realloc(sh->sel_h, sizeof(int32_t) * (n + 1));
        if (!h)
            return as_err(err, AS_ERUNTIME, "out of host memory for a %dx%d selection", s, k);
        sh->sel_h = h;
        cudaFree(sh->sel_d);
        sh->sel_d = NULL;
        CU(err, cudaMalloc((void **)&sh->sel_d, sizeof(int32_t) * (n + 1)), "shared selection %dx%d", s, k);
        sh->sel_cap = (int)n;
    }
    memcpy(sh->sel_h, e->wk.csel_h, sizeof(int32_t) * n);
    if (n)
        CU(err, cudaMemcpyAsync(sh->sel_d, sh->sel_h, sizeof(int32_t) * n, cudaMemcpyHostToDevice, e->st),
           "layer %d: publish selection %dx%d", l, s, k);
    sh->sel_present = true;
    sh->sel_s = s;
    sh->sel_k = k;
    sh->sel_from = (AsProvenance){l, e->step};
    return 0;
}

int as_dev_select_host(AsEngine *e, int l, int s, int width, int start_pos, AsRun *meta, AsError *err)
{
    const AsConfig *c = &e->cfg;
    const AsLayerRole *role = &c->role[l];
    AsDevWork *wk = &e->wk;
    AsDevShared *sh = &e->sh;
    size_t n = (size_t)s * width;
    CU(err, cudaMemcpyAsync(wk->score_h, wk->score, sizeof(uint16_t) * n, cudaMemcpyDeviceToHost, e->st),
       "layer %d: download index scores %dx%d", l, s, width);
    CU(err, cudaStreamSynchronize(e->st), "layer %d: index scores %dx%d", l, s, width);
    for (size_t i = 0; i < n; i++)
        wk->score_f[i] = as_bf16_to_f32(wk->score_h[i]);
    int *clens = malloc(sizeof(int) * (size_t)s);
    if (!clens)
        return as_err(err, AS_ERUNTIME, "out of host memory");
    for (int t = 0; t < s; t++)
        clens[t] = start_pos == 0 ? (start_pos + t + 1) / role->ratio : width;

    int rc = 0;
    if (role->candidate_source) {
        if (n > sh->cand_cap) {
            uint8_t *m = realloc(sh->cand_h, n + 1);
            if (!m) {
                free(clens);
                return as_err(err, AS_ERUNTIME, "out of host memory for a %dx%d candidate mask", s, width);
            }
            sh->cand_h = m;
            sh->cand_cap = n;
        }
        if (as_select_candidate_blocks(wk->score_f, s, width, clens, c->candidate_block_size, c->candidate_topk_blocks,
                                       sh->cand_h))
            rc = as_err(err, AS_ERUNTIME, "out of host memory selecting candidate blocks");
        sh->cand_s = s;
        sh->cand_width = width;
        sh->cand_from = (AsProvenance){l, e->step};
        meta->cand_from = sh->cand_from;
    } else if (role->uses_candidates && e->fault != AS_FAULT_CAND_MASK_OFF) {
        if (sh->cand_s != s || sh->cand_width != width || !sh->cand_h) {
            free(clens);
            return as_err(err, AS_EREFUSED, "layer %d: candidate mask is %dx%d (layer %d, step %d) but the scores are %dx%d",
                          l, sh->cand_s, sh->cand_width, sh->cand_from.layer, sh->cand_from.step, s, width);
        }
        for (size_t i = 0; i < n; i++)
            if (!sh->cand_h[i])
                wk->score_f[i] = -INFINITY;
        meta->cand_from = sh->cand_from;
    }
    int k = c->index_topk < width ? c->index_topk : width;
    int offset = e->fault == AS_FAULT_NO_OFFSET ? 0 : meta->rows_a_len;
    if (!rc && as_index_topk(wk->score_f, s, width, k, clens, offset, wk->csel_h))
        rc = as_err(err, AS_ERUNTIME, "out of host memory in top-k");
    free(clens);
    if (rc)
        return rc;
    if (k)
        CU(err, cudaMemcpyAsync(wk->csel, wk->csel_h, sizeof(int32_t) * (size_t)s * k, cudaMemcpyHostToDevice, e->st),
           "layer %d: upload the selection %dx%d", l, s, k);
    meta->k = k;
    meta->width = width;
    meta->indexer_ran = true;
    TRY(publish_selection(e, l, s, k, err));
    meta->sel_from = sh->sel_from;
    return 0;
}
