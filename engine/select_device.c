/* Selection on the device (the default): the candidate blocks and the per-query top-k by
 * kernels/topk_select.cu, an exact emulation of torch's CPU top-k (libstdc++'s introselect / heap
 * select, tie order included), so a step never waits for the host. The candidate mask stays on the
 * device (sh.cand_d), the masked scores are written back into the score buffer (the run's iscore),
 * and the selection goes to the layer's csel and the shared selection in one launch. The host path
 * (select_host.c, --host-select) remains for rows wider than AS_TOPK_MAX_WIDTH and for comparison.
 * Both compute the same sets (tests/gpu_topk.c, tests/gpu_engine.c). */
#include <string.h>

#include "engine/check.h"
#include "engine/internal.h"

bool as_dev_select_on_device(const AsEngine *e, int max_width)
{
    return !e->opt.host_select && max_width <= AS_TOPK_MAX_WIDTH;
}

int as_dev_select_reserve(AsEngine *e, size_t mask_entries, AsError *err)
{
    AsDevShared *sh = &e->sh;
    if (e->prof && !sh->sel_stats) { /* the counters are the benchmark's: an extra pass over each row */
        CU(err, cudaMalloc((void **)&sh->sel_stats, sizeof(unsigned long long) * AS_TOPK_NSTATS), "selection counters");
        CU(err, cudaMemsetAsync(sh->sel_stats, 0, sizeof(unsigned long long) * AS_TOPK_NSTATS, e->st),
           "selection counters");
    }
    if (mask_entries <= sh->cand_dcap)
        return 0;
    CU(err, cudaStreamSynchronize(e->st), "candidate mask of %zu entries", mask_entries);
    cudaFree(sh->cand_d);
    sh->cand_d = NULL;
    sh->cand_dcap = 0;
    CU(err, cudaMalloc((void **)&sh->cand_d, mask_entries), "candidate mask of %zu entries", mask_entries);
    sh->cand_dcap = mask_entries;
    return 0;
}

int as_dev_select_device(AsEngine *e, const AsLayerPlan *p, bool fuse_idx, AsError *err)
{
    const AsConfig *c = &e->cfg;
    AsDevWork *wk = &e->wk;
    AsDevShared *sh = &e->sh;
    const int l = p->layer, s = p->s, width = p->width, k = p->k;
    const bool graph = e->cap != NULL;
    /* a graph launches for the widest row the keys allow and reads the live width and k per replay */
    const int max_width = graph ? p->keys_cap : width;
    const int max_k = graph ? c->index_topk : k;
    const int64_t ld = graph ? wk->cap_w : width;
    TRY(as_dev_cand_reserve(e, p, err));
    if (graph) {
        if ((size_t)max_width > sh->cand_dcap || (e->prof && !sh->sel_stats) || c->index_topk > sh->sel_cap ||
            max_width > wk->cap_w)
            return as_err(err, AS_ERUNTIME, "layer %d: decode graph buffers too small (mask %zu, selection %d of %d, "
                          "scores %d of %d)", l, sh->cand_dcap, c->index_topk, sh->sel_cap, max_width, wk->cap_w);
    } else {
        TRY(as_dev_select_reserve(e, p->makes_cand ? (size_t)s * width : 0, err));
        TRY(as_dev_sel_reserve(e, (size_t)s * k, err));
    }
    const AsLayerStep *dL = graph ? &e->cap->dP->layer[l] : NULL;
    if (p->makes_cand) {
        AsCandLaunch a = {.score = wk->score, .ld = ld, .s = s, .width = width, .max_width = max_width,
                          .ratio = p->ratio, .prefill = p->prefill, .bs = c->candidate_block_size,
                          .topk_blocks = c->candidate_topk_blocks, .width_d = dL ? &dL->width : NULL,
                          .mask = sh->cand_d, .mask_ld = ld};
        KL(err, as_k_candidate_blocks(&a, e->st), "layer %d: candidate blocks %dx%d (blocks of %d, keep %d)", l, s,
           width, c->candidate_block_size, c->candidate_topk_blocks);
    }
    AsTopkLaunch a = {.score = wk->score, .ld = ld, .s = s, .width = width, .max_width = max_width, .k = k,
                      .max_k = max_k, .ratio = p->ratio, .prefill = p->prefill, .offset = p->sel_offset,
                      .width_d = dL ? &dL->width : NULL, .k_d = dL ? &dL->k : NULL,
                      .cand = p->applies_cand ? sh->cand_d : NULL, .cand_ld = ld, .sel = wk->csel, .sel2 = sh->sel_d,
                      .ldsel = graph ? max_k : k, .stats = e->prof ? sh->sel_stats : NULL};
    if (fuse_idx) {
        if (!graph || s != 1 || k < 1)
            return as_err(err, AS_ERUNTIME, "layer %d: idx fused into the top-k outside a decode graph's row (s %d, k %d)",
                          l, s, k);
        a.idx = wk->idx + c->window; /* after the window's columns (a decode's cols) */
        a.idx_len = max_k;
        a.nrows_d = &dL->nrows;
        a.bad = wk->bad + l;
        a.valid = wk->valid + l;
    }
    if (k > 0)
        KL(err, as_k_index_topk(&a, e->st), "layer %d: top-%d of %dx%d index scores%s", l, k, s, width,
           fuse_idx ? " + idx" : "");
    sh->sel_on_device = true;
    return 0;
}

_Static_assert(AS_SEL_NSTATS == AS_TOPK_NSTATS, "engine.h's count of the selection counters");

int as_engine_select_stats(AsEngine *e, unsigned long long out[AS_SEL_NSTATS], AsError *err)
{
    memset(out, 0, sizeof(unsigned long long) * AS_SEL_NSTATS);
    if (!e->sh.sel_stats)
        return 0;
    CU(err, cudaMemcpyAsync(out, e->sh.sel_stats, sizeof(unsigned long long) * AS_SEL_NSTATS, cudaMemcpyDeviceToHost,
                            e->st),
       "selection counters");
    CU(err, cudaStreamSynchronize(e->st), "selection counters");
    return 0;
}
