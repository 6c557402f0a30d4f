/* The decode schedule: a captured decode step's layer (engine/graph.c) runs forward.c's steps in this
 * order, so that the graph's branches overlap and its chain of dependent launches is short. Every choice
 * here leaves every output bit as the uncaptured step's (tests/gpu_graph.c compares them after every
 * step, under several knob settings):
 *   - the kv branch (wkv's GEMV, its row pipeline into the ring) forks onto e->st_kv after x and joins
 *     after q's RoPE; with the kvidx / kvsel fusions the layer's selection (window, compressed branch,
 *     idx) goes on the branch too, an index source's once q_norm has made qr (ev_qr);
 *   - with room (knobs.sel_room) a compressor / indexer layer's selection part that reads x only (the
 *     compressor, the index keys, the latents' cache rows, the head weights) runs on the branch beside
 *     wq_a, the index queries are projected before wq_b, and wq_b's one-wave grid leaves room blocks free;
 *     the top-k then writes idx's compressed part itself (its window part goes beside wq_a);
 *   - fusions (knobs.fusions): q_norm in wq_a's GEMV, q's RoPE in wq_b's, o_back in the one-query
 *     attention's combine, the residual in wo_b's GEMV, and the next layer's attn_norm in wo_b's last block;
 *   - the attention stages its rows before its PDL wait when the node before it is wq_b's alone (early
 *     rows: the kv branch's edges into it are made full dependencies, then checked). */
#include <stdio.h>

#include "engine/check.h"
#include "engine/forward.h"

typedef struct {
    bool fork;           /* the kv branch on e->st_kv */
    bool sel_on_branch;  /* the layer's selection on the kv branch */
    bool late_sel;       /* ... and it waits for qr (an index source) */
    int room;            /* wq_b's blocks left free; > 0: the selection's x part beside wq_a */
    bool idx_fused;      /* the top-k writes idx's compressed part */
    bool fuse_q_norm, fuse_rope, fuse_oback, fuse_residual, fuse_next_norm;
} Schedule;

/* Whether a GEMV of w can normalise its own output row: bf16 or fp8-form weights, with the fusion (and,
 * with a residual, only when the residual is in the GEMV's store too). */
static bool norm_fuses(const AsFwd *f, const AsDevWeight *w, bool residual)
{
    const unsigned fuse = f->e->knobs.fusions;
    return f->s == 1 && (fuse & AS_FUSE_NORM) && (w->type == AS_DW_BF16 || w->type == AS_DW_FP8) &&
           (!residual || (fuse & AS_FUSE_RESIDUAL));
}

/* Whether a compressor / indexer layer's selection takes no projection through the shared scratch (a
 * Q2_K projection quantises its input there): only then may it run on the kv branch beside wq_a / wq_b,
 * which may use the scratch themselves. */
static bool sel_without_scratch(const AsDevLayerWeights *W)
{
    const AsDevWeight *ws[] = {&W->c_wkv, &W->c_wgate, &W->i_wq_b, &W->i_wproj, &W->i_wk};
    for (size_t i = 0; i < sizeof ws / sizeof ws[0]; i++)
        if (ws[i]->d && ws[i]->type == AS_DW_Q2K)
            return false;
    return true;
}

static Schedule schedule_of(const AsFwd *f)
{
    const AsEngine *e = f->e;
    const unsigned fuse = e->knobs.fusions;
    const AsLayerRole *role = &e->cfg.role[f->l];
    Schedule sc = {0};
    /* the kv branch forks with a bf16 or fp8-form wkv (the GEMVs use no shared scratch) */
    sc.fork = f->s <= 8 && (f->W->wkv.type == AS_DW_BF16 || f->W->wkv.type == AS_DW_FP8) && e->st_kv;
    const bool plain = !role->kv_source && !role->index_source; /* a reuse layer's selection needs no GEMV */
    sc.sel_on_branch = sc.fork && (plain ? (fuse & AS_FUSE_KV_IDX) : (fuse & AS_FUSE_KV_SEL) && sel_without_scratch(f->W));
    sc.late_sel = sc.sel_on_branch && role->index_source;
    sc.room = sc.late_sel && e->knobs.sel_room > 0 && f->p.indexes ? e->knobs.sel_room : 0;
    sc.idx_fused = sc.room > 0 && f->s == 1 && as_dev_select_on_device(e, f->p.keys_cap);
    sc.fuse_q_norm = norm_fuses(f, &f->W->wq_a, false);
    sc.fuse_rope = (fuse & AS_FUSE_ROPE) != 0;
    sc.fuse_oback = (fuse & AS_FUSE_OBACK) != 0;
    sc.fuse_residual = (fuse & AS_FUSE_RESIDUAL) != 0;
    sc.fuse_next_norm = f->l + 1 < e->cfg.n_layers && norm_fuses(f, &f->W->wo_b, true);
    return sc;
}

/* The selection's part that reads x only, in the compressed branch's order less the indexer's scores
 * (which touch neither the latents nor the compressed cache), and with idx_fused idx's window part. */
static int selection_x_part(AsFwd *f, const Schedule *sc, AsError *err)
{
    const AsLayerPlan *p = &f->p;
    if (p->compresses)
        TRY(as_fwd_compressor(f, err));
    if (p->stores_keys)
        TRY(as_fwd_index_keys(f, err));
    if (p->stores_latents)
        TRY(as_fwd_store_latents(f, err));
    if (p->indexes)
        TRY(as_fwd_index_weights(f, err));
    if (sc->idx_fused)
        TRY(as_fwd_build_idx(f, true, err));
    return 0;
}

/* Steps 3-6 (window, compressed branch, idx), what the x part left. */
static int selection(AsFwd *f, const Schedule *sc, AsError *err)
{
    const AsLayerPlan *p = &f->p;
    TRY(as_fwd_window(f, err));
    if (p->ratio > 0 && sc->room == 0) {
        TRY(as_fwd_compressed_branch(f, err));
    } else if (p->ratio > 0) {
        if (p->indexes)
            TRY(as_fwd_index_select(f, sc->idx_fused, err));
        else if (p->reuses)
            TRY(as_fwd_reuse_selection(f, err));
    }
    return sc->idx_fused ? 0 : as_fwd_build_idx(f, false, err);
}

enum { BRANCH_KV = 1, BRANCH_X_PART = 2, BRANCH_SELECTION = 4, BRANCH_END = 8 };

/* Runs part of the kv branch on its stream once the main stream reaches here (event ready): the kv rows,
 * the selection's x part, the selection; with BRANCH_END the branch's end (ev_kv, which the main stream
 * joins after wq_b). The launches inside take e->st, pointed at the kv stream meanwhile. */
static int on_kv_branch(AsFwd *f, const Schedule *sc, cudaEvent_t ready, unsigned what, const char *why,
                        AsError *err)
{
    AsEngine *e = f->e;
    CU(err, cudaEventRecord(ready, e->st), "layer %d: %s", f->l, why);
    CU(err, cudaStreamWaitEvent(e->st_kv, ready, 0), "layer %d: %s", f->l, why);
    cudaStream_t main_st = e->st;
    e->st = e->st_kv;
    int rc = what & BRANCH_KV ? as_fwd_kv(f, err) : 0;
    if (!rc && (what & BRANCH_X_PART))
        rc = selection_x_part(f, sc, err);
    if (!rc && (what & BRANCH_SELECTION))
        rc = selection(f, sc, err);
    e->st = main_st;
    TRY(rc);
    if (what & BRANCH_END)
        CU(err, cudaEventRecord(e->ev_kv, e->st_kv), "layer %d: the kv branch's end", f->l);
    return 0;
}

/* The one node the capturing e->st now ends with (*node; NULL where it ends with more or none). */
static int capture_end(AsFwd *f, cudaGraphNode_t *node, AsError *err)
{
    enum cudaStreamCaptureStatus cs = cudaStreamCaptureStatusNone;
    const cudaGraphNode_t *deps = NULL;
    size_t nd = 0;
    *node = NULL;
    CU(err, cudaStreamGetCaptureInfo(f->e->st, &cs, NULL, NULL, &deps, NULL, &nd),
       "layer %d: the capture's end after wq_b", f->l);
    if (cs == cudaStreamCaptureStatusActive && nd == 1)
        *node = deps[0];
    return 0;
}

/* Staging the attention's rows before its PDL wait (early rows) is sound only while the kernel it overlaps
 * writes q alone: every other node it follows (the kv branch's end: the ring row, idx) must be a full
 * dependency. A capture makes every edge into a programmatic launch programmatic, so the attention is
 * captured after q's node alone (early_rows_begin) and the kv branch's edges are added back as full ones
 * (early_rows_join), then checked: a graph that breaks the rule is refused rather than run with a race. */
typedef struct {
    cudaGraph_t graph;
    cudaGraphNode_t q_node;     /* wq_b's node */
    cudaGraphNode_t before[8];  /* the stream's capture dependencies before the attention */
    size_t n_before;
} EarlyRows;

/* Whether the attention may stage early (q's node is among the stream's dependencies: nothing was captured
 * on it since wq_b); if so, the stream's dependencies become q's node alone. */
static int early_rows_begin(AsFwd *f, EarlyRows *er, bool *early, AsError *err)
{
    enum cudaStreamCaptureStatus cs = cudaStreamCaptureStatusNone;
    const cudaGraphNode_t *deps = NULL;
    size_t nd = 0;
    bool after_q = false;
    *early = false;
    CU(err, cudaStreamGetCaptureInfo(f->e->st, &cs, NULL, &er->graph, &deps, NULL, &nd),
       "layer %d: the capture's end before the attention", f->l);
    if (cs != cudaStreamCaptureStatusActive || nd > 8)
        return 0;
    for (size_t i = 0; i < nd; i++)
        er->before[i] = deps[i], after_q |= deps[i] == er->q_node;
    er->n_before = nd;
    if (!after_q)
        return 0; /* the kernel before the attention is not wq_b's: its rows after the wait */
    CU(err, cudaStreamUpdateCaptureDependencies(f->e->st, &er->q_node, NULL, 1, cudaStreamSetCaptureDependencies),
       "layer %d: the attention after wq_b's node alone (%zu dependencies before)", f->l, nd);
    *early = true;
    return 0;
}

/* The nodes the attention's launch added that follow q's node (its first ones): up to 4 into first. */
static int early_rows_first(AsFwd *f, const EarlyRows *er, cudaGraphNode_t *first, int *n_first, AsError *err)
{
    enum cudaStreamCaptureStatus cs = cudaStreamCaptureStatusNone;
    const cudaGraphNode_t *end = NULL;
    size_t n_end = 0;
    CU(err, cudaStreamGetCaptureInfo(f->e->st, &cs, NULL, NULL, &end, NULL, &n_end),
       "layer %d: the capture's end after the attention", f->l);
    cudaGraphNode_t stack[16], seen[16];
    int top = 0, n_seen = 0;
    *n_first = 0;
    for (size_t i = 0; i < n_end && top < 16; i++)
        stack[top++] = end[i];
    while (top > 0) {
        cudaGraphNode_t n = stack[--top];
        bool visited = false;
        for (int i = 0; i < n_seen && !visited; i++)
            visited = seen[i] == n;
        if (visited || n == er->q_node)
            continue;
        if (n_seen == 16)
            return as_err(err, AS_ERUNTIME, "layer %d: the attention's launch added more than 16 graph nodes", f->l);
        seen[n_seen++] = n;
        cudaGraphNode_t deps[16];
        cudaGraphEdgeData edges[16];
        size_t nd = 16;
        CU(err, cudaGraphNodeGetDependencies(n, deps, edges, &nd), "layer %d: the attention node's dependencies",
           f->l);
        for (size_t j = 0; j < nd && j < 16; j++) {
            if (deps[j] == er->q_node && *n_first < 4)
                first[(*n_first)++] = n;
            else if (deps[j] != er->q_node && top < 16)
                stack[top++] = deps[j];
        }
    }
    if (*n_first == 0)
        return as_err(err, AS_ERUNTIME, "layer %d: the captured attention does not follow wq_b's node", f->l);
    return 0;
}

/* The kv branch's edges into the attention's first nodes, as full dependencies, then the rule checked. */
static int early_rows_join(AsFwd *f, const EarlyRows *er, AsError *err)
{
    cudaGraphNode_t first[4];
    int n_first = 0;
    TRY(early_rows_first(f, er, first, &n_first, err));
    for (int k = 0; k < n_first; k++)
        for (size_t b = 0; b < er->n_before; b++)
            if (er->before[b] != er->q_node)
                CU(err, cudaGraphAddDependencies(er->graph, &er->before[b], &first[k], NULL, 1),
                   "layer %d: the kv branch's full edge into the attention", f->l);
    for (int k = 0; k < n_first; k++) {
        cudaGraphNode_t deps[16];
        cudaGraphEdgeData edges[16];
        size_t nd = 16, joined = 0;
        CU(err, cudaGraphNodeGetDependencies(first[k], deps, edges, &nd), "layer %d: the attention's dependencies",
           f->l);
        for (size_t j = 0; j < nd && j < 16; j++) {
            const bool full = edges[j].type == cudaGraphDependencyTypeDefault &&
                              edges[j].from_port == cudaGraphKernelNodePortDefault;
            if (deps[j] != er->q_node && !full)
                return as_err(err, AS_ERUNTIME,
                              "layer %d: the captured attention overlaps a kernel other than wq_b's (a programmatic "
                              "edge from the kv branch): its rows cannot be staged before its wait",
                              f->l);
            for (size_t b = 0; b < er->n_before; b++)
                joined += deps[j] == er->before[b];
        }
        if (joined != er->n_before)
            return as_err(err, AS_ERUNTIME, "layer %d: the captured attention follows %zu of the %zu nodes before it",
                          f->l, joined, er->n_before);
    }
    return 0;
}

/* Step 7 with its rows staged early where the node before it is wq_b's (q_node), and o_back in its
 * combine with the fusion. */
static int attention(AsFwd *f, const Schedule *sc, cudaGraphNode_t q_node, AsError *err)
{
    EarlyRows er = {.q_node = q_node};
    bool early = false;
    if (q_node)
        TRY(early_rows_begin(f, &er, &early, err));
    const AsOBack ob = as_fwd_o_back(f);
    TRY(as_fwd_sparse_attention(f, sc->fuse_oback ? &ob : NULL, early, err));
    if (early)
        TRY(early_rows_join(f, &er, err));
    return sc->fuse_oback ? 0 : as_fwd_rotate_back(f, err);
}

int as_dev_layer_scheduled(AsEngine *e, int l, AsError *err)
{
    AsFwd f;
    TRY(as_fwd_begin(e, l, &f, err));
    if (!f.cap)
        return as_err(err, AS_ERUNTIME, "layer %d: the decode schedule runs inside a graph capture only", l);
    const Schedule sc = schedule_of(&f);
    const bool x_ready = e->x_ready; /* the previous layer's wo_b made x (a fused attn_norm) */
    e->x_ready = false;
    if (!x_ready)
        TRY(as_fwd_attn_norm(&f, err));
    TRY(as_fwd_act_quant_x(&f, err));
    if (sc.fork)
        TRY(on_kv_branch(&f, &sc, e->ev_x,
                         BRANCH_KV | (sc.room ? BRANCH_X_PART : 0) |
                             (sc.sel_on_branch && !sc.late_sel ? BRANCH_SELECTION : 0) | (sc.late_sel ? 0 : BRANCH_END),
                         "fork the kv branch", err));
    TRY(as_fwd_q_lora(&f, sc.fuse_q_norm, err));
    if (sc.room)
        TRY(as_fwd_index_queries(&f, err));
    if (sc.late_sel) /* the selection beside wq_b, from here on the kv branch */
        TRY(on_kv_branch(&f, &sc, e->ev_qr, BRANCH_SELECTION | BRANCH_END, "qr ready (the kv branch's indexer)", err));
    TRY(as_fwd_queries(&f, sc.fuse_rope, sc.room, err));
    cudaGraphNode_t q_node = NULL;
    if (sc.fork) {
        TRY(capture_end(&f, &q_node, err));
        CU(err, cudaStreamWaitEvent(e->st, e->ev_kv, 0), "layer %d: join the kv branch", l);
    } else {
        TRY(as_fwd_kv(&f, err));
    }
    if (!sc.sel_on_branch)
        TRY(selection(&f, &sc, err));
    TRY(attention(&f, &sc, q_node, err));
    TRY(as_fwd_project_out(&f, sc.fuse_residual, sc.fuse_next_norm, err));
    e->x_ready = sc.fuse_next_norm;
    as_fwd_end(&f);
    return 0;
}
