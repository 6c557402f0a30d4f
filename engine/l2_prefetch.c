/* The L2 prefetch branch of a captured decode (engine/l2_plan.h says why): a fork from the main stream
 * to st_pf per prefetch, and one join after the step's last layer. */
#include "engine/check.h"
#include "engine/internal.h"

int as_dev_l2_prefetch(AsEngine *e, const AsDevWeight *w, int groups, double mb, const char *what, AsError *err)
{
    if (!e->st_pf || !e->cap || !(mb > 0) || !w->d || w->type != AS_DW_BF16)
        return 0;
    const AsL2Ranges r = as_l2_prefetch_ranges((int64_t)w->out * w->in * (int64_t)sizeof(as_bf16_t), groups, mb);
    if (!r.seg_bytes)
        return 0;
    CU(err, cudaEventRecord(e->ev_pf, e->st), "%s: fork the L2 prefetch branch", what);
    CU(err, cudaStreamWaitEvent(e->st_pf, e->ev_pf, 0), "%s: fork the L2 prefetch branch", what);
    if (e->l2pf.by_loads)
        KL(err, as_k_l2_warm(w->d, r.n_seg, r.stride, r.seg_bytes, e->st_pf),
           "%s: L2 warm-up loads of %lld x %lld bytes (%lld apart)", what, (long long)r.n_seg, (long long)r.seg_bytes,
           (long long)r.stride);
    else
        KL(err, as_k_l2_prefetch(w->d, r.n_seg, r.stride, r.seg_bytes, (int64_t)e->l2pf.chunk_kb * 1024, e->st_pf),
           "%s: L2 prefetch of %lld x %lld bytes (%lld apart) in %d KB items", what, (long long)r.n_seg,
           (long long)r.seg_bytes, (long long)r.stride, e->l2pf.chunk_kb);
    e->pf_open = true;
    return 0;
}

int as_dev_l2_prefetch_join(AsEngine *e, AsError *err)
{
    if (!e->pf_open)
        return 0;
    e->pf_open = false;
    CU(err, cudaEventRecord(e->ev_pf_end, e->st_pf), "decode graph: the L2 prefetch branch's end");
    CU(err, cudaStreamWaitEvent(e->st, e->ev_pf_end, 0), "decode graph: join the L2 prefetch branch");
    return 0;
}
