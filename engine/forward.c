/* One layer's forward on the device: the order and the shared-state rules of ref/layer.c,
 * with the heavy lifting in cuBLAS and kernels/. The work buffers keep this layer's
 * intermediates until the next layer runs.
 * What follows a projection on its way into a cache is one launch (kernels/row_pipe.cu: kv's rmsnorm,
 * RoPE, fp8 and ring store; the index keys' and latents' chains with their cache writes; the index
 * queries' RoPE and fp4; o's copy and inverse RoPE), and a decode assembles the window selection with
 * idx (as_k_build_idx_decode). While a decode graph is captured (e->cap, engine/graph.c) the
 * position-dependent scalars come from the step parameters on the device (f->dL, f->sp_d) through
 * the kernels' *_decode variants, launched for the most they can be, and the selection is recorded
 * as graph nodes; the host bookkeeping is the same either way. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "engine/check.h"
#include "engine/internal.h"
#include "ref/window.h"

typedef struct {
    AsEngine *e;
    int l, s, sp, end;
    bool prefill;
    const AsLayerRole *role;
    AsDevLayerWeights *W;
    AsDevLayerState *ls;
    const float *cos_t, *sin_t;
    AsRun *m;          /* scalars and provenance of this layer's run */
    int lpos0;                 /* latent positions: lpos0 + i, or lpos_d[i] when set */
    const int32_t *lpos_d;
    /* capturing a decode graph (never a prefill): the step parameters on the device, else NULL */
    const AsCapture *cap;
    const AsLayerStep *dL;     /* this layer's */
    const int32_t *sp_d;       /* start_pos */
    /* steps 3-6 (window, shared selection, idx) run on the kv branch, off the queries' path: a reuse
     * layer's (AS_FUSE_KV_IDX), and with AS_FUSE_KV_SEL a compressor / indexer layer's (the indexer once
     * q_norm has made qr) */
    bool idx_on_kv_branch;
    bool x_ready; /* the previous layer's wo_b made x (AS_FUSE_NORM) */
    /* ATTNSCOPE_SEL_ROOM (a compressor / indexer layer with room): the compressor, the index keys, the
     * latents' cache rows and the indexer's head weights, which read x only, ran on the kv branch beside
     * wq_a (compressed_pre), and the indexer's queries were projected before wq_b */
    bool early_sel;
    /* with the room in a decode graph whose top-k runs on the device: the top-k writes idx's compressed
     * part and the window's part goes beside wq_a, so no build_idx follows the top-k on the chain */
    bool idx_fused;
    /* a captured decode with the kv branch forked: the node that writes q (wq_b's), which the attention
     * may overlap programmatically while it stages its rows (AsEngine.attn_early); else NULL */
    cudaGraphNode_t q_node;
} Fwd;

static int indexer_queries(Fwd *f, AsError *err);
static int compressed_pre(Fwd *f, AsError *err);

static int select_rows(Fwd *f, AsError *err);

static int rmsnorm_rows(Fwd *f, as_bf16_t *x, int64_t ld, const float *w, int rows, int n, const char *what,
                        AsError *err)
{
    if (rows == 0)
        return 0;
    KL(err, as_k_rmsnorm(x, ld, w, x, ld, rows, n, f->e->cfg.norm_eps, f->e->st), "layer %d: rmsnorm(%s) %dx%d",
       f->l, what, rows, n);
    return 0;
}

/* Step 2's kv: kv = fp8(rope(rmsnorm(x wkv^T))), kv_pre before the fp8, and step 3's ring store
 * (prefill: the last min(s, win) rows, token p into slot p % win; decode: slot start_pos % win). */
static int project_kv(Fwd *f, AsError *err)
{
    AsEngine *e = f->e;
    const AsConfig *c = &e->cfg;
    AsDevWork *wk = &e->wk;
    int s = f->s, hd = c->head_dim, rd = c->rope_head_dim;
    char what[64];
    snprintf(what, sizeof what, "layer %d wkv", f->l);
    TRY(as_dev_proj(e, f->W->wkv.fp8 ? wk->x_q : wk->x, c->dim, s, &f->W->wkv, wk->kv, hd, what, err));
    AsRowPipe p = {.x = wk->kv, .ldx = hd, .y = wk->kv, .ldy = hd, .pre = wk->kv_pre, .rows = s, .heads = 1, .n = hd,
                   .norm_w = f->W->kv_norm, .eps = c->norm_eps, .rd = rd, .pos0 = f->sp, .pos = f->sp_d,
                   .cos_t = f->cos_t, .sin_t = f->sin_t, .quant = AS_KQ_FP8, .post_scale = 1.0f,
                   .store_mode = AS_STORE_RING, .store = f->ls->ring, .store_ld = hd, .ring = c->window,
                   .ring_shift = !f->prefill && e->fault == AS_FAULT_RING_SLOT};
    KL(err, as_k_row_pipe(&p, e->st), "layer %d: kv rmsnorm + rope + fp8 quant + ring store %dx%d (pos %d)", f->l, s,
       hd, f->sp);
    return 0;
}

/* A decode with a bf16 or fp8-form wkv forks the kv branch onto its own stream (no shared scratch: the
 * GEMVs use none); the profiled benchmark keeps one stream so that its events time each stage. */
static bool kv_forks(const Fwd *f)
{
    return !f->prefill && f->s <= 8 && (f->W->wkv.type == AS_DW_BF16 || f->W->wkv.type == AS_DW_FP8) &&
           !f->e->prof && f->e->st_kv;
}

/* Whether a captured decode's GEMV of w normalises its own output row (AS_FUSE_NORM): bf16 or fp8-form
 * weights, one row; with a residual, only when the residual is in the GEMV's store too. */
static bool norm_fuses(const Fwd *f, const AsDevWeight *w, bool residual)
{
    const unsigned fuse = f->e->fuse;
    return f->cap && f->s == 1 && (fuse & AS_FUSE_NORM) && (w->type == AS_DW_BF16 || w->type == AS_DW_FP8) &&
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

/* Runs part of a decode's kv branch on its stream once the main stream reaches here (event `ready`):
 * the kv rows (kv), the selection's part that reads x only (pre), the selection (sel); with end, the
 * branch's end (ev_kv, which the main stream joins after wq_b). The launches inside take e->st, pointed
 * at the kv stream meanwhile. */
static int on_kv_branch(Fwd *f, cudaEvent_t ready, bool kv, bool pre, bool sel, bool end, const char *why,
                        AsError *err)
{
    AsEngine *e = f->e;
    CU(err, cudaEventRecord(ready, e->st), "layer %d: %s", f->l, why);
    CU(err, cudaStreamWaitEvent(e->st_kv, ready, 0), "layer %d: %s", f->l, why);
    cudaStream_t main_st = e->st;
    e->st = e->st_kv;
    int rc = kv ? project_kv(f, err) : 0;
    if (!rc && pre)
        rc = compressed_pre(f, err);
    if (!rc && sel)
        rc = select_rows(f, err);
    e->st = main_st;
    TRY(rc);
    if (end)
        CU(err, cudaEventRecord(e->ev_kv, e->st_kv), "layer %d: the kv branch's end", f->l);
    return 0;
}

/* The one node a capturing e->st now ends with (*node; NULL where it ends with more or none). */
static int capture_end(Fwd *f, cudaGraphNode_t *node, AsError *err)
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

/* Staging the attention's rows before its PDL wait (early_rows) is sound only while the kernel it overlaps
 * writes q alone: every other node it follows (the kv branch's end: the ring row, idx) must be a full
 * dependency. A capture makes every edge into a programmatic launch programmatic (CUDA 13.0), so the attention is captured after q's node alone (early_rows_begin) and the kv branch's
 * edges are added back as full ones (early_rows_join), then checked: a graph that breaks the rule is
 * refused rather than run with a race. */
typedef struct {
    cudaGraph_t graph;
    cudaGraphNode_t before[8]; /* the stream's capture dependencies before the attention */
    size_t n_before;
} EarlyRows;

/* Whether the attention may stage early (f->q_node is among the stream's dependencies: nothing was captured
 * on it since wq_b); if so, the stream's dependencies become q's node alone. */
static int early_rows_begin(Fwd *f, EarlyRows *er, bool *early, AsError *err)
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
        er->before[i] = deps[i], after_q |= deps[i] == f->q_node;
    er->n_before = nd;
    if (!after_q)
        return 0; /* the kernel before the attention is not wq_b's: its rows after the wait */
    CU(err, cudaStreamUpdateCaptureDependencies(f->e->st, &f->q_node, NULL, 1, cudaStreamSetCaptureDependencies),
       "layer %d: the attention after wq_b's node alone (%zu dependencies before)", f->l, nd);
    *early = true;
    return 0;
}

/* The nodes the attention's launch added that follow q's node (its first ones): up to 4 into first. */
static int early_rows_first(Fwd *f, cudaGraphNode_t *first, int *n_first, AsError *err)
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
        if (visited || n == f->q_node)
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
            if (deps[j] == f->q_node && *n_first < 4)
                first[(*n_first)++] = n;
            else if (deps[j] != f->q_node && top < 16)
                stack[top++] = deps[j];
        }
    }
    if (*n_first == 0)
        return as_err(err, AS_ERUNTIME, "layer %d: the captured attention does not follow wq_b's node", f->l);
    return 0;
}

/* The kv branch's edges into the attention's first nodes, as full dependencies, then the rule checked. */
static int early_rows_join(Fwd *f, const EarlyRows *er, AsError *err)
{
    cudaGraphNode_t first[4];
    int n_first = 0;
    TRY(early_rows_first(f, first, &n_first, err));
    for (int k = 0; k < n_first; k++)
        for (size_t b = 0; b < er->n_before; b++)
            if (er->before[b] != f->q_node)
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
            if (deps[j] != f->q_node && !full)
                return as_err(err, AS_ERUNTIME,
                              "layer %d: the captured attention overlaps a kernel other than wq_b's (a "
                              "programmatic edge from the kv branch): ATTNSCOPE_ATTN_EARLY=0 stages its rows after "
                              "the wait",
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

/* Steps 1-2: x, queries and the window KV rows. */
static int project_q_kv(Fwd *f, AsError *err)
{
    AsEngine *e = f->e;
    const AsConfig *c = &e->cfg;
    AsDevWork *wk = &e->wk;
    int s = f->s, nh = c->n_heads, hd = c->head_dim, rd = c->rope_head_dim, qlr = c->q_lora_rank;
    char what[64];
    if (!f->x_ready)
        KL(err, as_k_rmsnorm(wk->h, c->dim, f->W->attn_norm, wk->x, c->dim, s, c->dim, c->norm_eps, e->st),
           "layer %d: rmsnorm(h, attn_norm) %dx%d", f->l, s, c->dim);
    /* fp8 precision: x's QDQ once for wq_a and wkv, before the fork (the kv branch reads it too) */
    if (f->W->wq_a.fp8 || f->W->wkv.fp8) {
        snprintf(what, sizeof what, "layer %d wq_a + wkv input", f->l);
        TRY(as_dev_qdq_fp8(e, wk->x, c->dim, s, c->dim, wk->x_q, what, err));
    }
    const as_bf16_t *x_a = f->W->wq_a.fp8 ? wk->x_q : wk->x;
    const bool fork = kv_forks(f);
    /* an indexer on the kv branch reads qr after q_norm: that part of the branch waits for it (ev_qr) */
    const bool late_sel = f->idx_on_kv_branch && f->role->index_source;
    /* ATTNSCOPE_SEL_ROOM: wq_b's one-wave grid takes every SM slot before the kv branch's selection
     * (it is launched ahead, programmatically, while wq_a finishes), so the selection's kernels would
     * wait for it; the selection's part that reads x only goes beside wq_a, its queries' GEMV before
     * wq_b, and wq_b leaves room for the rest */
    const int room = late_sel && e->sel_room > 0 && f->end / f->role->ratio > 0 ? e->sel_room : 0;
    f->early_sel = room > 0; /* late_sel: fork, so compressed_pre runs on the branch below */
    f->idx_fused = f->early_sel && f->cap && s == 1 && as_dev_select_on_device(e, e->sh.index_k_cap);
    if (fork)
        TRY(on_kv_branch(f, e->ev_x, true, f->early_sel, f->idx_on_kv_branch && !late_sel, !late_sel,
                         "fork the kv branch", err));
    snprintf(what, sizeof what, "layer %d wq_a", f->l);
    if (norm_fuses(f, &f->W->wq_a, false)) {
        TRY(as_dev_proj_norm(e, x_a, &f->W->wq_a, wk->qr, NULL, f->W->q_norm, wk->qr, f->cap->norm_ctr, what, err));
    } else {
        TRY(as_dev_proj(e, x_a, c->dim, s, &f->W->wq_a, wk->qr, qlr, what, err));
        TRY(rmsnorm_rows(f, wk->qr, qlr, f->W->q_norm, s, qlr, "qr", err));
    }
    /* qr's QDQ once for wq_b and indexer.wq_b, before either (and before the kv branch's indexer starts) */
    if (f->W->wq_b.fp8 || f->W->i_wq_b.fp8) {
        snprintf(what, sizeof what, "layer %d wq_b input", f->l);
        TRY(as_dev_qdq_fp8(e, wk->qr, qlr, s, qlr, wk->qr_q, what, err));
    }
    if (f->early_sel)
        TRY(indexer_queries(f, err));
    if (late_sel) /* the selection beside wq_b, from here on the kv branch */
        TRY(on_kv_branch(f, e->ev_qr, false, false, true, true, "qr ready (the kv branch's indexer)", err));
    snprintf(what, sizeof what, "layer %d wq_b + rope(q)", f->l);
    const AsDevRope rope = {.hd = hd, .rd = rd, .pos0 = f->sp, .pos = f->sp_d, .cos_t = f->cos_t, .sin_t = f->sin_t,
                            .inverse = e->fault == AS_FAULT_ROPE_BACKWARDS};
    TRY(as_dev_proj_rope(e, f->W->wq_b.fp8 ? wk->qr_q : wk->qr, qlr, s, &f->W->wq_b, wk->q, (int64_t)nh * hd, &rope,
                         room, what, err));
    if (fork && f->cap &&
        (e->attn_early == AS_EARLY_ALL || (e->attn_early == AS_EARLY_REUSE && !f->role->index_source)))
        TRY(capture_end(f, &f->q_node, err));
    if (fork)
        CU(err, cudaStreamWaitEvent(e->st, e->ev_kv, 0), "layer %d: join the kv branch", f->l);
    else
        TRY(project_kv(f, err));
    return 0;
}

/* Step 3: the window selection (the ring store went with kv's row pipeline; a decode's selection is
 * built with idx, build_idx). */
static int window_step(Fwd *f, AsError *err)
{
    AsEngine *e = f->e;
    const AsConfig *c = &e->cfg;
    int win = c->window;
    if (f->prefill)
        KL(err, as_k_window_select(e->wk.widx, f->s, win, f->sp, e->st), "layer %d: window select s=%d", f->l, f->s);
    f->m->rows_a_len = f->prefill ? f->s : win;
    f->m->cols = f->prefill ? (f->s < win ? f->s : win) : win;
    return 0;
}

/* Positions of the latents completed in this call (ratio 1: every token; r >= 2: the first token
 * of each group): pos0 + i, or, for a ratio-2 prefill, the device table of g * 2. */
static void latent_positions(Fwd *f, int r)
{
    f->lpos_d = NULL;
    if (r == 1)
        f->lpos0 = f->sp;
    else if (!f->prefill)
        f->lpos0 = f->sp + 1 - r;
    else {
        f->lpos0 = 0;
        f->lpos_d = f->e->group_pos;
    }
    if (f->cap)
        f->lpos_d = &f->dL->lpos; /* the same value, read at replay */
}

static int compressor(Fwd *f, AsError *err)
{
    AsEngine *e = f->e;
    const AsConfig *c = &e->cfg;
    AsDevWork *wk = &e->wk;
    int r = f->role->ratio, hd = c->head_dim, s = f->s;
    int n = r == 1 ? s : (f->prefill ? s / r : ((f->sp + 1) % r == 0));
    char what[64];
    if (f->sp / r + n > f->ls->cap)
        return as_err(err, AS_EREFUSED, "layer %d: compressed cache full (%d rows, max_seq %d)", f->l, f->ls->cap,
                      c->max_seq);
    if (r == 1) {
        snprintf(what, sizeof what, "layer %d compressor.wkv", f->l);
        TRY(as_dev_proj(e, wk->x, c->dim, s, &f->W->c_wkv, wk->latent, hd, what, err));
    } else {
        snprintf(what, sizeof what, "layer %d compressor.wkv", f->l);
        TRY(as_dev_proj_f32(e, wk->x, s, &f->W->c_wkv, wk->ckv, what, err));
        snprintf(what, sizeof what, "layer %d compressor.wgate", f->l);
        TRY(as_dev_proj_f32(e, wk->x, s, &f->W->c_wgate, wk->csc, what, err));
        if (f->cap)
            KL(err, as_k_compress_pool_decode(wk->ckv, wk->csc, r, hd, f->sp_d, f->ls->part_kv, f->ls->part_sc,
                                              wk->latent, e->st),
               "layer %d: compressor pooling (decode graph) r=%d", f->l, r);
        else
            KL(err, as_k_compress_pool(wk->ckv, wk->csc, s, r, hd, f->sp, f->ls->part_kv, f->ls->part_sc, wk->latent,
                                       e->st),
               "layer %d: compressor pooling s=%d r=%d", f->l, s, r);
    }
    TRY(rmsnorm_rows(f, wk->latent, hd, f->W->c_norm, n, hd, "latent", err));
    f->m->n_new = n;
    latent_positions(f, r);
    /* 5b: published even when no group completed */
    e->sh.compress_kv = f->ls->ccache;
    e->sh.compress_kv_cap = f->ls->cap;
    e->sh.compress_kv_from = (AsProvenance){f->l, e->step};
    return 0;
}

static int index_keys(Fwd *f, AsError *err)
{
    AsEngine *e = f->e;
    const AsConfig *c = &e->cfg;
    AsDevWork *wk = &e->wk;
    int n = f->m->n_new, ihd = c->index_head_dim, r = f->role->ratio;
    char what[64];
    snprintf(what, sizeof what, "layer %d indexer.wk", f->l);
    TRY(as_dev_proj(e, wk->latent, c->head_dim, n, &f->W->i_wk, wk->ik, ihd, what, err));
    /* ik = fp4(rope(rmsnorm(ik))) at the latent positions, ik_pre before the fp4, written into the
     * index-key cache at row start_pos / r onwards (not with the stale-keys fault in a decode) */
    int row0 = f->sp / r;
    bool store = !(e->fault == AS_FAULT_STALE_KEYS && !f->prefill);
    AsRowPipe p = {.x = wk->ik, .ldx = ihd, .y = wk->ik, .ldy = ihd, .pre = wk->ik_pre, .rows = n, .heads = 1,
                   .n = ihd, .norm_w = f->W->k_norm, .eps = c->norm_eps, .rd = c->rope_head_dim, .pos0 = f->lpos0,
                   .pos = f->lpos_d, .cos_t = e->cos_yarn, .sin_t = e->sin_yarn, .quant = AS_KQ_FP4_E8M0,
                   .post_scale = 1.0f, .store_mode = store ? AS_STORE_ROWS : AS_STORE_NONE,
                   .store = store ? f->ls->ikcache : NULL, .store_ld = ihd, .row0 = row0,
                   .row0_d = f->cap ? &f->dL->row0 : NULL};
    KL(err, as_k_row_pipe(&p, e->st), "layer %d: index keys rmsnorm + rope + fp4 quant + cache rows %d..%d (%dx%d)",
       f->l, row0, row0 + n, n, ihd);
    if (row0 + n > f->ls->ikcache_rows)
        f->ls->ikcache_rows = row0 + n;
    e->sh.index_k = f->ls->ikcache;
    e->sh.index_k_cap = f->ls->cap;
    e->sh.index_k_from = (AsProvenance){f->l, e->step};
    return 0;
}

/* The indexer's queries: iq = fp4(rope(qr indexer.wq_b^T)), iq_pre before the fp4. */
static int indexer_queries(Fwd *f, AsError *err)
{
    AsEngine *e = f->e;
    const AsConfig *c = &e->cfg;
    AsDevWork *wk = &e->wk;
    int s = f->s, nhi = c->index_n_heads, ihd = c->index_head_dim;
    char what[64];
    snprintf(what, sizeof what, "layer %d indexer.wq_b", f->l);
    TRY(as_dev_proj(e, f->W->i_wq_b.fp8 ? wk->qr_q : wk->qr, c->q_lora_rank, s, &f->W->i_wq_b, wk->iq,
                    (int64_t)nhi * ihd, what, err));
    AsRowPipe p = {.x = wk->iq, .ldx = (int64_t)nhi * ihd, .y = wk->iq, .ldy = (int64_t)nhi * ihd, .pre = wk->iq_pre,
                   .rows = s, .heads = nhi, .n = ihd, .rd = c->rope_head_dim, .pos0 = f->sp, .pos = f->sp_d,
                   .cos_t = e->cos_yarn, .sin_t = e->sin_yarn, .quant = AS_KQ_FP4_E8M0, .post_scale = 1.0f};
    KL(err, as_k_row_pipe(&p, e->st), "layer %d: index queries rope + fp4 quant %dx%dx%d", f->l, s, nhi, ihd);
    return 0;
}

/* The indexer's head weights, w = (x wproj^T) / sqrt(ihd * nhi): x only. */
static int index_weights(Fwd *f, AsError *err)
{
    AsEngine *e = f->e;
    const AsConfig *c = &e->cfg;
    AsDevWork *wk = &e->wk;
    int s = f->s, nhi = c->index_n_heads, ihd = c->index_head_dim;
    char what[64];
    snprintf(what, sizeof what, "layer %d indexer.weights_proj", f->l);
    TRY(as_dev_proj(e, wk->x, c->dim, s, &f->W->i_wproj, wk->w, nhi, what, err));
    KL(err, as_k_scale_bf16(wk->w, (int64_t)s * nhi, (float)(1.0 / sqrt((double)ihd) * (1.0 / sqrt((double)nhi))),
                            e->st),
       "layer %d: index weights scale", f->l);
    return 0;
}

static int indexer(Fwd *f, int width, AsError *err)
{
    AsEngine *e = f->e;
    const AsConfig *c = &e->cfg;
    AsDevWork *wk = &e->wk;
    int s = f->s, nhi = c->index_n_heads, ihd = c->index_head_dim;
    if (!e->sh.index_k)
        return as_err(err, AS_EREFUSED, "layer %d: index source scores with no published index keys", f->l);
    if (width > e->sh.index_k_cap)
        return as_err(err, AS_EREFUSED, "layer %d: index width %d exceeds the %d rows of the index keys published by "
                      "layer %d", f->l, width, e->sh.index_k_cap, e->sh.index_k_from.layer);
    f->m->keys_from = e->sh.index_k_from;
    if (!f->early_sel) {
        TRY(indexer_queries(f, err));
        TRY(index_weights(f, err));
    }
    int slot = as_prof_begin(e, AS_OP_ISCORE, f->l, 2.0 * s * width * nhi * ihd,
                             2.0 * ((double)s * nhi * ihd + (double)width * ihd + (double)s * width));
    if (f->cap)
        KL(err, as_k_index_scores_decode(wk->iq, e->sh.index_k, wk->w, s, nhi, ihd, e->sh.index_k_cap, &f->dL->width,
                                         f->role->ratio, wk->score, e->st),
           "layer %d: index scores (decode graph) up to %dx%d (%d heads x %d)", f->l, s, e->sh.index_k_cap, nhi, ihd);
    else
        KL(err, as_k_index_scores(wk->iq, e->sh.index_k, wk->w, s, nhi, ihd, width, f->sp, f->role->ratio, wk->score,
                                  e->st),
           "layer %d: index scores %dx%d (%d heads x %d)", f->l, s, width, nhi, ihd);
    as_prof_end(e, slot);
    if (f->cap)
        return as_dev_select_graph(e, f->l, width, e->sh.index_k_cap, f->idx_fused, f->m, err);
    slot = as_prof_begin(e, AS_OP_SELECT, f->l, 0, 2.0 * s * width);
    int rc = as_dev_select_on_device(e, width) ? as_dev_select_device(e, f->l, s, width, f->sp, false, f->m, err)
                                               : as_dev_select_host(e, f->l, s, width, f->sp, f->m, err);
    as_prof_end(e, slot);
    return rc;
}

static int store_latents(Fwd *f, AsError *err)
{
    AsEngine *e = f->e;
    const AsConfig *c = &e->cfg;
    AsDevWork *wk = &e->wk;
    int n = f->m->n_new, hd = c->head_dim, r = f->role->ratio;
    /* latent_q = fp4_e4m3(rope(latent)) (x2 with the fp4-scale fault), latent_pre before the fp4,
     * written into the compressed cache at row start_pos / r onwards */
    int row0 = f->sp / r;
    AsRowPipe p = {.x = wk->latent, .ldx = hd, .y = wk->latent_q, .ldy = hd, .pre = wk->latent_pre, .rows = n,
                   .heads = 1, .n = hd, .rd = c->rope_head_dim, .pos0 = f->lpos0, .pos = f->lpos_d,
                   .cos_t = e->cos_yarn, .sin_t = e->sin_yarn, .quant = AS_KQ_FP4_E4M3,
                   .post_scale = e->fault == AS_FAULT_FP4_SCALE ? 2.0f : 1.0f, .store_mode = AS_STORE_ROWS,
                   .store = f->ls->ccache, .store_ld = hd, .row0 = row0,
                   .row0_d = f->cap ? &f->dL->row0 : NULL};
    KL(err, as_k_row_pipe(&p, e->st), "layer %d: latents rope + fp4 quant + cache rows %d..%d (%dx%d)", f->l, row0,
       row0 + n, n, hd);
    if (row0 + n > f->ls->ccache_rows)
        f->ls->ccache_rows = row0 + n;
    e->sh.compress_kv = f->ls->ccache;
    e->sh.compress_kv_cap = f->ls->cap;
    e->sh.compress_kv_from = (AsProvenance){f->l, e->step};
    return 0;
}

/* The selection's part that reads x only, in compressed_branch's order less the indexer (which touches
 * neither the latents nor the compressed cache): the compressor, the index keys, the latents' cache rows,
 * then the indexer's head weights. */
static int compressed_pre(Fwd *f, AsError *err)
{
    if (f->role->kv_source)
        TRY(compressor(f, err));
    if (f->role->index_source && f->end / f->role->ratio > 0 && f->role->key_owner && f->m->n_new > 0)
        TRY(index_keys(f, err));
    if (f->role->kv_source && f->m->n_new > 0)
        TRY(store_latents(f, err));
    if (f->role->index_source && f->end / f->role->ratio > 0) /* (always, with room: the indexer runs) */
        TRY(index_weights(f, err));
    if (f->idx_fused) { /* idx's window part (kmax 0); the top-k writes the rest */
        AsEngine *e = f->e;
        KL(err, as_k_build_idx_decode(e->wk.widx, e->cfg.window, f->sp, f->sp_d, e->wk.csel, 0, NULL, 0, 0,
                                      &f->dL->nrows, e->wk.idx, e->wk.bad + f->l, e->wk.valid + f->l, e->st),
           "layer %d: window select + idx's window part %d (pos %d)", f->l, e->cfg.window, f->sp);
    }
    return 0;
}

/* Step 5: the compressed branch of a ratio > 0 layer. */
static int compressed_branch(Fwd *f, AsError *err)
{
    AsEngine *e = f->e;
    int r = f->role->ratio;
    int compress_len = f->end / r;
    f->m->compress_len = compress_len;
    if (f->role->kv_source && !f->early_sel)
        TRY(compressor(f, err));
    if (f->role->index_source && compress_len > 0) {
        if (f->role->key_owner && f->m->n_new > 0 && !f->early_sel)
            TRY(index_keys(f, err));
        TRY(indexer(f, compress_len, err));
    } else if (f->role->index_source) {
        /* compress_len == 0: the indexer does not run and the layer publishes an EMPTY selection ([s][0]) as
         * its own (model.py's _compress_topk_idxs), so the layers that reuse it attend no compressed row */
        f->m->k = 0;
        e->sh.sel_present = true;
        e->sh.sel_on_device = false;
        e->sh.sel_s = f->s;
        e->sh.sel_k = 0;
        e->sh.sel_from = (AsProvenance){f->l, e->step};
        f->m->sel_from = e->sh.sel_from;
    } else if (e->sh.sel_present) {
        if (e->sh.sel_s != f->s)
            return as_err(err, AS_EREFUSED, "layer %d: the shared selection (layer %d, step %d) has %d rows, the step %d",
                          f->l, e->sh.sel_from.layer, e->sh.sel_from.step, e->sh.sel_s, f->s);
        f->m->k = e->sh.sel_k;
        f->m->sel_from = e->sh.sel_from;
        /* a graph copies the most a selection can hold (build_idx reads the live k) */
        int kc = f->cap ? e->cfg.index_topk : e->sh.sel_k;
        if (e->sh.sel_k)
            CU(err, cudaMemcpyAsync(e->wk.csel, e->sh.sel_d, sizeof(int32_t) * (size_t)f->s * kc,
                                    cudaMemcpyDeviceToDevice, e->st),
               "layer %d: reuse the shared selection %dx%d", f->l, f->s, kc);
    }
    if (f->role->kv_source && f->m->n_new > 0 && !f->early_sel)
        TRY(store_latents(f, err));
    if (!e->sh.compress_kv)
        return as_err(err, AS_EREFUSED, "layer %d (ratio %d): no compressed cache has been published: it must not attend",
                      f->l, r);
    if (compress_len > e->sh.compress_kv_cap)
        return as_err(err, AS_EREFUSED, "layer %d: compress_len %d exceeds the %d rows of layer %d's cache", f->l,
                      compress_len, e->sh.compress_kv_cap, e->sh.compress_kv_from.layer);
    f->m->rows_b_len = compress_len;
    f->m->rows_b_from = e->sh.compress_kv_from;
    return 0;
}

/* idx = widx followed by the compressed selection, on the device; an entry beyond the attended
 * rows is refused (reported when the host next synchronises: as_dev_check_refusals). */
static int build_idx(Fwd *f, AsError *err)
{
    AsEngine *e = f->e;
    AsDevWork *wk = &e->wk;
    int cols = f->m->cols, k = f->m->k, nrows = f->m->rows_a_len + f->m->rows_b_len;
    if (f->prefill) {
        KL(err, as_k_build_idx(wk->widx, cols, wk->csel, k, f->s, nrows, wk->idx, wk->bad + f->l, wk->valid + f->l,
                               e->st),
           "layer %d: build idx %dx(%d+%d)", f->l, f->s, cols, k);
    } else {
        /* the window selection with idx; a graph launches for the widest selection */
        bool g = f->cap != NULL;
        int kmax = g ? (f->role->ratio > 0 ? e->cfg.index_topk : 0) : k;
        if (f->idx_fused) { /* written by compressed_pre (the window) and the top-k (the rest) */
            f->m->topk = cols + k;
            return 0;
        }
        KL(err, as_k_build_idx_decode(wk->widx, cols, f->sp, f->sp_d, wk->csel, k, g ? &f->dL->k : NULL, kmax, nrows,
                                      g ? &f->dL->nrows : NULL, wk->idx, wk->bad + f->l, wk->valid + f->l, e->st),
           "layer %d: window select + build idx %d+%d (pos %d)", f->l, cols, k, f->sp);
    }
    f->m->topk = cols + k;
    return 0;
}

/* Steps 3-6: the window, the compressed branch, idx: the rows the attention reads. */
static int select_rows(Fwd *f, AsError *err)
{
    TRY(window_step(f, err));
    if (f->role->ratio > 0)
        TRY(compressed_branch(f, err));
    return build_idx(f, err);
}

/* Steps 7-9 and the residual. */
static int attend_and_project(Fwd *f, AsError *err)
{
    AsEngine *e = f->e;
    const AsConfig *c = &e->cfg;
    AsDevWork *wk = &e->wk;
    int s = f->s, nh = c->n_heads, hd = c->head_dim;
    const as_bf16_t *rows_a = f->prefill ? wk->kv : f->ls->ring;
    const float *sink = e->fault == AS_FAULT_SINK_IGNORED ? e->no_sink : f->W->sink;
    /* o_back = o rotated back, out of place */
    const AsOBack ob = {.o_back = wk->o_back, .cos_t = f->cos_t, .sin_t = f->sin_t, .rd = c->rope_head_dim,
                        .pos0 = f->sp, .pos_d = f->sp_d};
    /* a decode graph's attention writes it too with the fusion (the one-query kernel's combine) */
    const bool with_o_back = f->cap && (e->fuse & AS_FUSE_OBACK);
    char what[64];
    /* work: QK and PV over the rows actually selected (counted on the device: per valid entry) */
    int slot = as_prof_begin(e, AS_OP_ATTN, f->l, -4.0 * nh * hd,
                             2.0 * ((double)s * f->m->topk * hd + 2.0 * s * nh * hd));
    const float scale = (float)(1.0 / sqrt((double)hd));
    if (f->cap) {
        int kmax = f->role->ratio > 0 ? c->index_topk : 0, nb_max = f->role->ratio > 0 ? e->sh.compress_kv_cap : 0;
        EarlyRows er = {0};
        bool early = false;
        if (f->q_node)
            TRY(early_rows_begin(f, &er, &early, err));
        KL(err, as_k_sparse_attn_decode(wk->q, rows_a, f->m->rows_a_len, e->sh.compress_kv, nb_max, &f->dL->nb, wk->idx,
                                        f->m->cols + kmax, &f->dL->topk, sink, wk->o, s, nh, hd, scale,
                                        f->cap->attn_ws, f->cap->attn_ws_bytes, with_o_back ? &ob : NULL, early, e->st),
           "layer %d: sparse attention%s (decode graph) heads=%d rows=%d+%d up to topk=%d%s", f->l,
           with_o_back ? " + o_back" : "", nh, f->m->rows_a_len, nb_max, f->m->cols + kmax,
           early ? ", rows staged early" : "");
        if (early)
            TRY(early_rows_join(f, &er, err));
    } else {
        KL(err, as_k_sparse_attn(wk->q, rows_a, f->m->rows_a_len, e->sh.compress_kv, f->m->rows_b_len, wk->idx,
                                 f->m->topk, sink, wk->o, s, nh, hd, scale, e->st),
           "layer %d: sparse attention s=%d heads=%d rows=%d+%d topk=%d", f->l, s, nh, f->m->rows_a_len,
           f->m->rows_b_len, f->m->topk);
    }
    as_prof_end(e, slot);
    if (!with_o_back)
        KL(err, as_k_o_back(wk->o, s, nh, hd, &ob, e->st), "layer %d: o copy + inverse rope %dx%dx%d", f->l, s, nh,
           hd);
    snprintf(what, sizeof what, "layer %d wo_a", f->l);
    TRY(as_dev_proj_grouped(e, wk->o_back, s, &f->W->wo_a, wk->og, what, err));
    const int ogw = c->o_groups * c->o_lora_rank;
    const as_bf16_t *og = wk->og;
    if (f->W->wo_b.fp8) { /* og's QDQ: wo_b's fused stores (residual, the next layer's x) are unchanged */
        snprintf(what, sizeof what, "layer %d wo_b input", f->l);
        TRY(as_dev_qdq_fp8(e, wk->og, ogw, s, ogw, wk->og_q, what, err));
        og = wk->og_q;
    }
    snprintf(what, sizeof what, "layer %d wo_b", f->l);
    if (f->l + 1 < c->n_layers && norm_fuses(f, &f->W->wo_b, true)) {
        /* the next layer's x = rmsnorm(h, its attn_norm), made by this GEMV's last block */
        TRY(as_dev_proj_norm(e, og, &f->W->wo_b, wk->out, wk->h, e->w[f->l + 1].attn_norm, wk->x,
                             f->cap->norm_ctr + 1, what, err));
        e->x_ready = true;
        return 0;
    }
    return as_dev_proj_residual(e, og, ogw, s, &f->W->wo_b, wk->out, wk->h, what, err);
}

int as_dev_layer_forward(AsEngine *e, int l, AsError *err)
{
    const AsConfig *c = &e->cfg;
    AsRun *m = &e->last;
    as_run_free(m);
    Fwd f = {.e = e, .l = l, .s = e->s, .sp = e->start_pos, .end = e->start_pos + e->s, .prefill = e->start_pos == 0,
             .role = &c->role[l], .W = &e->w[l], .ls = &e->ls[l], .m = m};
    if (e->cap && !f.prefill) {
        f.cap = e->cap;
        f.dL = &e->cap->dP->layer[l];
        f.sp_d = &e->cap->dP->start_pos;
    }
    f.cos_t = f.role->ratio == 0 ? e->cos_plain : e->cos_yarn;
    f.sin_t = f.role->ratio == 0 ? e->sin_plain : e->sin_yarn;
    m->layer = l;
    m->step = e->step;
    m->start_pos = f.sp;
    m->s = f.s;
    m->ratio = f.role->ratio;
    e->last_layer = l;
    int slot = as_prof_begin(e, AS_OP_LAYER, l, 0, 0);
    f.x_ready = e->x_ready && f.cap; /* only a captured step's layers follow each other unobserved */
    e->x_ready = false;
    const bool plain = !f.role->kv_source && !f.role->index_source; /* a reuse layer's selection needs no GEMV */
    f.idx_on_kv_branch = kv_forks(&f) && (plain ? (e->fuse & AS_FUSE_KV_IDX)
                                                : (e->fuse & AS_FUSE_KV_SEL) && sel_without_scratch(f.W));
    TRY(project_q_kv(&f, err));
    if (!f.idx_on_kv_branch)
        TRY(select_rows(&f, err));
    TRY(attend_and_project(&f, err));
    as_prof_end(e, slot);
    return 0;
}
