/* The decode step as one CUDA graph: every layer of a decode step captured once and replayed per
 * token, computing what the uncaptured step computes, bit for bit.
 *
 * Step parameters. Nothing that depends on the position is baked into a graph. The host plans each
 * step (ref/plan.h, every layer in turn from the shared state's provenance: the same plan the forward
 * follows) and writes the plan's per-layer scalars into a pinned AsStepParams (start_pos; per layer the
 * latent position, the cache row, the index width, k, rows_b_len, topk and the attended row count); the
 * graph's first node copies it to the device, the second the token's input row. The kernels whose
 * by-value arguments would carry these have *_decode variants (or an optional pointer) that read them
 * there: RoPE (q, kv, index queries, keys, latents, o: the position), the ring store (slot), the
 * compressor's pooling (which state row, whether a group completes), the cache writes (row), the index
 * scores (width: launched for the cache's capacity, tiles past the width exit), the window selection +
 * idx (k, row count: launched for window + index_topk), the sparse attention (topk, rows_b_len: launched
 * for window + index_topk, splits past the live ones exit, and its workspace is this object's).
 *
 * Step shapes. What the plan decides per layer and the capture bakes into the launches is: how many
 * latents complete (a ratio-2 kv source completes a group when (start_pos + 1) % 2 == 0), whether the
 * indexer scores, whether a reused selection is copied, and which layer's index keys and compressed
 * cache are read (the aliasing quirk: a ratio-2 owner that completes no group scores against the keys
 * published last, layer 20's of the previous step in the released geometry). These plus the work
 * buffers' addresses are a graph's signature; a step whose signature matches a held graph replays it,
 * any other is captured (and kept, AS_GRAPH_SLOTS at most). In the released geometry and in tiny there
 * are two shapes, by the parity of start_pos: two graphs, captured on the first even and odd steps. (Two
 * graphs rather than device-side conditionals: the parity changes launch counts and which key cache is
 * read, and capturing each shape keeps every kernel unconditional.) A capture records each layer in the
 * order of engine/decode_schedule.c.
 *
 * Top-k. On the device by default (engine/select_device.c: the candidate-block and top-k kernels
 * launched for the keys' capacity, reading the live width and k from the step parameters). With
 * host_select, or a row wider than AS_TOPK_MAX_WIDTH, on the host with the reference's code
 * (ref/indexer.c as_index_topk, ref/candidates.c), in a host node: a memcpy node brings the score row
 * down into pinned memory (sized for the cache's capacity), the host node runs as_dev_select_compute
 * over the live width, two memcpy nodes take the selection (index_topk entries) up to the layer's
 * selection and the shared one.
 *
 * Provenance. The plan carries the shared state after the step and the caches' filled rows; it is
 * applied to the engine before each replay, so as_engine_layer_run after a graph step returns the last
 * layer's run as after as_engine_finish_step. */
#include <omp.h>
#include <stdlib.h>
#include <string.h>

#include "engine/check.h"
#include "engine/forward.h"
#include "ref/numerics.h"

#define AS_GRAPH_SLOTS 4

/* What a captured graph baked in, per layer, besides the step parameters. */
typedef struct {
    int n_new;            /* latents completed (rows of the latent launches) */
    int indexer;          /* the indexer scored */
    int reuse;            /* a reused selection was copied */
    int keys_layer;       /* whose index keys were scored against, and their rows */
    int keys_cap;
    int rows_b_layer;     /* whose compressed cache was attended, and its rows */
    int rows_b_cap;
} GLayerSig;

typedef struct {
    int start_pos, step;
    AsLayerPlan layer[AS_MAX_LAYERS];
    GLayerSig sig[AS_MAX_LAYERS];
    AsSharedProv sh; /* after the step */
    int ccache_rows[AS_MAX_LAYERS], ikcache_rows[AS_MAX_LAYERS];
} GPlan;

typedef struct {
    bool used;
    cudaGraph_t graph;
    cudaGraphExec_t exec;
    GLayerSig sig[AS_MAX_LAYERS];
    unsigned char wk[sizeof(AsDevWork)];  /* the work buffers, byte for byte */
    const void *sel_d, *cand_d, *scratch, *scratch_dec; /* the projections' scratch (gemm.c) */
    int nodes, kernels, memcpys, memsets, hosts, others;
} GSlot;

typedef struct {
    struct AsDecodeGraph *g;
    int l;
} GSelArg;

struct AsDecodeGraph {
    AsEngine *e;
    AsDecodeGraphOptions opt;
    AsCapture cap;
    AsStepParams *dP, *hP;        /* device / pinned host */
    size_t params_bytes;
    uint16_t *h0_h;               /* pinned [dim] */
    int *bad_h;                   /* pinned [AS_MAX_LAYERS] */
    void *attn_ws;
    size_t attn_ws_bytes;
    unsigned *norm_ctr; /* AsCapture's */
    cudaEvent_t lev[AS_MAX_LAYERS + 1]; /* layer_events: recorded before each layer and after the last */
    int n_lev;
    as_bf16_t *outs;              /* [n_layers][dim] (keep_layer_outs) */
    GSelArg sel_arg[AS_MAX_LAYERS];
    GSlot slot[AS_GRAPH_SLOTS];
    int victim;
    GPlan plan, next;             /* the step's plan; next: planned, not yet accepted */
    bool stepped;                 /* a step has run (plan is its) */
    int host_rc;                  /* set by a failing host node */
    char host_msg[600];
    cudaEvent_t ev0, ev1;
    AsDecodeGraphInfo info;
    const void *zeroed_score, *zeroed_sel; /* buffers cleared once (their tails are copied whole) */
};

/* ---- the plan of a decode step: every layer's (ref/plan.h), the signature, the caches' rows after ---- */

static int plan_step(AsEngine *e, int sp, int step, GPlan *p, AsError *err)
{
    const AsConfig *c = &e->cfg;
    p->start_pos = sp;
    p->step = step;
    p->sh = e->sh.prov;
    for (int l = 0; l < c->n_layers; l++) {
        const AsLayerPlan *L = &p->layer[l];
        TRY(as_plan_layer(c, l, step, sp, 1, &p->sh, e->fault, &p->layer[l], &p->sh, err));
        p->sig[l] = (GLayerSig){.n_new = L->n_new, .indexer = L->indexes, .reuse = L->reuses && L->k > 0,
                                .keys_layer = L->indexes ? L->keys_from.layer : -1, .keys_cap = L->keys_cap,
                                .rows_b_layer = L->rows_b_from.layer, .rows_b_cap = L->rows_b_cap};
        const int rows = L->cache_row0 + L->n_new;
        p->ccache_rows[l] = L->stores_latents && rows > e->ls[l].ccache_rows ? rows : e->ls[l].ccache_rows;
        p->ikcache_rows[l] = L->stores_keys && rows > e->ls[l].ikcache_rows ? rows : e->ls[l].ikcache_rows;
    }
    return 0;
}

/* The plan's scalars into the pinned step parameters. */
static void fill_params(AsDecodeGraph *g)
{
    const AsConfig *c = &g->e->cfg;
    const GPlan *p = &g->plan;
    AsStepParams *P = g->hP;
    P->start_pos = p->start_pos;
    for (int l = 0; l < c->n_layers; l++) {
        const AsLayerPlan *L = &p->layer[l];
        P->layer[l] = (AsLayerStep){.lpos = L->latent_pos0, .row0 = L->cache_row0, .width = L->width, .k = L->k,
                                    .nb = L->rows_b_len, .topk = L->topk, .nrows = L->rows_a_len + L->rows_b_len};
    }
}

/* The plan's bookkeeping into the engine: what as_engine_begin_step + as_engine_finish_step leave. */
static void apply_plan(AsDecodeGraph *g)
{
    AsEngine *e = g->e;
    const AsConfig *c = &e->cfg;
    const GPlan *p = &g->plan;
    e->s = 1;
    e->start_pos = p->start_pos;
    e->step = p->step;
    e->next_layer = c->n_layers;
    e->sh.prov = p->sh;
    for (int l = 0; l < c->n_layers; l++) {
        e->ls[l].ccache_rows = p->ccache_rows[l];
        e->ls[l].ikcache_rows = p->ikcache_rows[l];
    }
    as_run_free(&e->last);
    as_plan_to_run(&p->layer[c->n_layers - 1], &e->last);
    e->last_layer = c->n_layers - 1;
}

/* ---- the selection as graph nodes ---- */

static void CUDART_CB select_node(void *arg)
{
    const GSelArg *a = arg;
    AsDecodeGraph *g = a->g;
    AsEngine *e = g->e;
    if (g->host_rc)
        return; /* an earlier node failed: the step is reported failed */
    const AsLayerStep *S = &g->hP->layer[a->l];
    AsError err = {0};
    omp_set_num_threads(1); /* one row: no thread team (this thread is CUDA's callback thread) */
    int rc = as_dev_select_compute(e, &g->plan.layer[a->l], S->width, S->k, &err);
    if (!rc) {
        memcpy(e->sh.sel_h, e->wk.csel_h, sizeof(int32_t) * (size_t)S->k); /* the host mirror */
        return;
    }
    snprintf(g->host_msg, sizeof g->host_msg, "layer %d: %s", a->l, err.msg);
    g->host_rc = rc;
}

int as_dev_select_graph(AsEngine *e, const AsLayerPlan *p, bool fuse_idx, AsError *err)
{
    const AsConfig *c = &e->cfg;
    AsDecodeGraph *g = e->cap->g;
    AsDevWork *wk = &e->wk;
    AsDevShared *sh = &e->sh;
    const int l = p->layer, max_width = p->keys_cap;
    if (as_dev_select_on_device(e, max_width))
        return as_dev_select_device(e, p, fuse_idx, err);
    if (fuse_idx)
        return as_err(err, AS_ERUNTIME, "layer %d: idx fused into a top-k that runs on the host", l);
    TRY(as_dev_cand_reserve(e, p, err));
    if (max_width > wk->cap_w || (size_t)p->width > sh->cand_cap || c->index_topk > sh->sel_cap)
        return as_err(err, AS_ERUNTIME, "layer %d: decode graph buffers too small (scores %d of %d, mask %zu, "
                      "selection %d of %d)", l, max_width, wk->cap_w, sh->cand_cap, c->index_topk, sh->sel_cap);
    CU(err, cudaMemcpyAsync(wk->score_h, wk->score, sizeof(uint16_t) * (size_t)max_width, cudaMemcpyDeviceToHost, e->st),
       "layer %d: decode graph: index scores to the host (up to %d)", l, max_width);
    g->sel_arg[l] = (GSelArg){g, l};
    CU(err, cudaLaunchHostFunc(e->st, select_node, &g->sel_arg[l]), "layer %d: decode graph: the top-k host node", l);
    CU(err, cudaMemcpyAsync(wk->csel, wk->csel_h, sizeof(int32_t) * (size_t)c->index_topk, cudaMemcpyHostToDevice,
                            e->st),
       "layer %d: decode graph: upload the selection (%d)", l, c->index_topk);
    CU(err, cudaMemcpyAsync(sh->sel_d, wk->csel_h, sizeof(int32_t) * (size_t)c->index_topk, cudaMemcpyHostToDevice,
                            e->st),
       "layer %d: decode graph: publish the selection (%d)", l, c->index_topk);
    sh->sel_on_device = false;
    return 0;
}

/* ---- capture, replay ---- */

static void slot_free(GSlot *sl)
{
    if (sl->exec)
        cudaGraphExecDestroy(sl->exec);
    if (sl->graph)
        cudaGraphDestroy(sl->graph);
    memset(sl, 0, sizeof *sl);
}

static bool slot_matches(const AsDecodeGraph *g, const GSlot *sl)
{
    const AsEngine *e = g->e;
    return sl->used && !memcmp(sl->sig, g->plan.sig, sizeof(GLayerSig) * (size_t)e->cfg.n_layers) &&
           !memcmp(sl->wk, &e->wk, sizeof(AsDevWork)) && sl->sel_d == e->sh.sel_d && sl->cand_d == e->sh.cand_d &&
           sl->scratch == e->scratch &&
           sl->scratch_dec == e->scratch_dec;
}

/* The nodes of one step, recorded from the engine's stream. */
static int record_step(AsDecodeGraph *g, AsError *err)
{
    AsEngine *e = g->e;
    const AsConfig *c = &e->cfg;
    CU(err, cudaMemcpyAsync(g->dP, g->hP, g->params_bytes, cudaMemcpyHostToDevice, e->st),
       "decode graph: step parameters (%zu bytes)", g->params_bytes);
    CU(err, cudaMemcpyAsync(e->wk.h, g->h0_h, sizeof(uint16_t) * (size_t)c->dim, cudaMemcpyHostToDevice, e->st),
       "decode graph: the token's input row");
    CU(err, cudaMemsetAsync(e->wk.bad, 0, sizeof(int) * AS_MAX_LAYERS, e->st), "decode graph: clearing the refusal flags");
    CU(err, cudaMemsetAsync(e->wk.valid, 0, sizeof(unsigned long long) * AS_MAX_LAYERS, e->st),
       "decode graph: clearing the selection counts");
    for (int l = 0; l < c->n_layers; l++) {
        if (g->n_lev) /* External: an event node of the graph, not a fork / join within the capture */
            CU(err, cudaEventRecordWithFlags(g->lev[l], e->st, cudaEventRecordExternal),
               "decode graph: the event before layer %d", l);
        TRY(as_dev_layer_scheduled(e, l, err));
        if (g->outs)
            CU(err, cudaMemcpyAsync(g->outs + (size_t)l * c->dim, e->wk.out, sizeof(uint16_t) * (size_t)c->dim,
                                    cudaMemcpyDeviceToDevice, e->st),
               "decode graph: keep layer %d's out", l);
    }
    if (g->n_lev)
        CU(err, cudaEventRecordWithFlags(g->lev[c->n_layers], e->st, cudaEventRecordExternal),
           "decode graph: the event after the last layer");
    CU(err, cudaMemcpyAsync(g->bad_h, e->wk.bad, sizeof(int) * (size_t)c->n_layers, cudaMemcpyDeviceToHost, e->st),
       "decode graph: the refusal flags to the host");
    return 0;
}

static void count_nodes(GSlot *sl)
{
    size_t n = 0;
    if (cudaGraphGetNodes(sl->graph, NULL, &n) != cudaSuccess) {
        cudaGetLastError();
        return;
    }
    cudaGraphNode_t *nodes = malloc(sizeof *nodes * (n ? n : 1));
    if (!nodes)
        return;
    if (cudaGraphGetNodes(sl->graph, nodes, &n) == cudaSuccess) {
        sl->nodes = (int)n;
        for (size_t i = 0; i < n; i++) {
            enum cudaGraphNodeType t;
            if (cudaGraphNodeGetType(nodes[i], &t) != cudaSuccess)
                continue;
            switch (t) {
            case cudaGraphNodeTypeKernel: sl->kernels++; break;
            case cudaGraphNodeTypeMemcpy: sl->memcpys++; break;
            case cudaGraphNodeTypeMemset: sl->memsets++; break;
            case cudaGraphNodeTypeHost: sl->hosts++; break;
            default: sl->others++; break;
            }
        }
    }
    cudaGetLastError();
    free(nodes);
}

/* The engine's host bookkeeping, kept across a capture that fails (the forward advances it as it
 * records, and nothing ran). e->last holds scalars only (its tensors stay in the work buffers). */
typedef struct {
    AsDevShared sh;
    int ccache_rows[AS_MAX_LAYERS], ikcache_rows[AS_MAX_LAYERS];
    int s, start_pos, step, next_layer, last_layer;
    AsRun last;
} GBook;

static void book_save(const AsEngine *e, GBook *b)
{
    b->sh = e->sh;
    for (int l = 0; l < e->cfg.n_layers; l++) {
        b->ccache_rows[l] = e->ls[l].ccache_rows;
        b->ikcache_rows[l] = e->ls[l].ikcache_rows;
    }
    b->s = e->s, b->start_pos = e->start_pos, b->step = e->step, b->next_layer = e->next_layer;
    b->last_layer = e->last_layer;
    b->last = e->last;
}

static void book_restore(AsEngine *e, const GBook *b)
{
    e->sh = b->sh;
    for (int l = 0; l < e->cfg.n_layers; l++) {
        e->ls[l].ccache_rows = b->ccache_rows[l];
        e->ls[l].ikcache_rows = b->ikcache_rows[l];
    }
    e->s = b->s, e->start_pos = b->start_pos, e->step = b->step, e->next_layer = b->next_layer;
    e->last_layer = b->last_layer;
    e->last = b->last;
}

static int capture(AsDecodeGraph *g, GSlot *sl, AsError *err)
{
    AsEngine *e = g->e;
    const GPlan *p = &g->plan;
    slot_free(sl);
    GBook *book = malloc(sizeof *book);
    if (!book)
        return as_err(err, AS_ERUNTIME, "out of host memory");
    book_save(e, book);
    /* the forward reads the step from the engine, as after as_engine_begin_step */
    e->s = 1;
    e->start_pos = p->start_pos;
    e->step = p->step;
    e->next_layer = 0;
    AsProfile *prof = e->prof;
    e->prof = NULL; /* no event records inside a graph */
    g->cap = (AsCapture){
        .dP = g->dP, .attn_ws = g->attn_ws, .attn_ws_bytes = g->attn_ws_bytes, .norm_ctr = g->norm_ctr, .g = g};
    cudaError_t bc = cudaStreamBeginCapture(e->st, cudaStreamCaptureModeThreadLocal);
    if (bc != cudaSuccess) {
        e->prof = prof;
        book_restore(e, book);
        free(book);
        cudaGetLastError();
        return as_err(err, AS_ERUNTIME, "decode graph: beginning the capture (step %d, position %d): %s", p->step,
                      p->start_pos, cudaGetErrorString(bc));
    }
    e->cap = &g->cap;
    int rc = record_step(g, err);
    cudaGraph_t graph = NULL;
    cudaError_t ec = cudaStreamEndCapture(e->st, &graph);
    e->cap = NULL;
    e->x_ready = false; /* only a captured wo_b sets it: none is left for an uncaptured layer or the next capture */
    e->prof = prof;
    if (rc || ec != cudaSuccess) {
        if (graph)
            cudaGraphDestroy(graph);
        cudaGetLastError();
        book_restore(e, book);
        free(book);
        if (rc)
            return as_err_wrap(err, "decode graph: capturing step %d (position %d)", p->step, p->start_pos);
        return as_err(err, AS_ERUNTIME, "decode graph: ending the capture of step %d (position %d): %s (a call of the "
                      "step cannot be captured)", p->step, p->start_pos, cudaGetErrorString(ec));
    }
    cudaGraphExec_t exec = NULL;
    cudaError_t ic = cudaGraphInstantiate(&exec, graph, 0);
    if (ic != cudaSuccess) {
        cudaGraphDestroy(graph);
        cudaGetLastError();
        book_restore(e, book);
        free(book);
        return as_err(err, AS_ERUNTIME, "decode graph: instantiating the graph of step %d (position %d): %s", p->step,
                      p->start_pos, cudaGetErrorString(ic));
    }
    free(book);
    sl->used = true;
    sl->graph = graph;
    sl->exec = exec;
    memcpy(sl->sig, p->sig, sizeof sl->sig);
    memcpy(sl->wk, &e->wk, sizeof(AsDevWork));
    sl->sel_d = e->sh.sel_d;
    sl->cand_d = e->sh.cand_d;
    sl->scratch = e->scratch;
    sl->scratch_dec = e->scratch_dec;
    count_nodes(sl);
    g->info.captures++;
    return 0;
}

/* ---- the API ---- */

void as_decode_graph_destroy(AsDecodeGraph *g)
{
    if (!g)
        return;
    if (g->e && g->e->st)
        cudaStreamSynchronize(g->e->st);
    for (int i = 0; i < AS_GRAPH_SLOTS; i++)
        slot_free(&g->slot[i]);
    if (g->ev0)
        cudaEventDestroy(g->ev0);
    if (g->ev1)
        cudaEventDestroy(g->ev1);
    cudaFree(g->dP);
    cudaFree(g->attn_ws);
    cudaFree(g->norm_ctr);
    for (int i = 0; i < g->n_lev; i++)
        cudaEventDestroy(g->lev[i]);
    cudaFree(g->outs);
    cudaFreeHost(g->hP);
    cudaFreeHost(g->h0_h);
    cudaFreeHost(g->bad_h);
    cudaGetLastError();
    free(g);
}

int as_decode_graph_create(AsEngine *e, const AsDecodeGraphOptions *opt, AsDecodeGraph **out, AsError *err)
{
    const AsConfig *c = &e->cfg;
    *out = NULL;
    AsDecodeGraph *g = calloc(1, sizeof *g);
    if (!g)
        return as_err(err, AS_ERUNTIME, "out of host memory for the decode graph");
    g->e = e;
    if (opt)
        g->opt = *opt;
    g->params_bytes = offsetof(AsStepParams, layer) + sizeof(AsLayerStep) * (size_t)c->n_layers;
    int rc = 0;
#define STEP(call, ...)                                                                                          \
    do {                                                                                                         \
        cudaError_t r_ = (call);                                                                                 \
        if (r_ != cudaSuccess) {                                                                                 \
            cudaGetLastError();                                                                                  \
            char w_[160];                                                                                        \
            snprintf(w_, sizeof w_, __VA_ARGS__);                                                                \
            rc = as_err(err, AS_ERUNTIME, "decode graph: %s: %s", w_, cudaGetErrorString(r_));                  \
            goto fail;                                                                                           \
        }                                                                                                        \
    } while (0)
    STEP(cudaSetDevice(e->device), "cudaSetDevice(%d)", e->device);
    STEP(as_dev_malloc(&e->mem, (void **)&g->dP, sizeof(AsStepParams)), "device step parameters (%zu bytes)", sizeof(AsStepParams));
    STEP(cudaMallocHost((void **)&g->hP, sizeof(AsStepParams)), "pinned step parameters");
    memset(g->hP, 0, sizeof(AsStepParams));
    STEP(cudaMallocHost((void **)&g->h0_h, sizeof(uint16_t) * (size_t)c->dim), "pinned input row (%d)", c->dim);
    STEP(cudaMallocHost((void **)&g->bad_h, sizeof(int) * AS_MAX_LAYERS), "pinned refusal flags");
    STEP(cudaEventCreate(&g->ev0), "event");
    STEP(cudaEventCreate(&g->ev1), "event");
    {
        /* the sparse attention's split plan for the widest decode selection: one tile per split, as
         * the uncaptured launches of every narrower selection split (their results are then equal) */
        int mma = 0, tps = 0;
        size_t wsb = 0;
        const int topk_max = c->window + c->index_topk;
        STEP((cudaError_t)as_k_sparse_attn_decode_plan(1, c->n_heads, c->head_dim, topk_max, as_dev_attn_path(e), &mma,
                                                        &tps, &wsb),
             "sparse attention plan (%d heads x %d, topk %d)", c->n_heads, c->head_dim, topk_max);
        if (mma == 1 && tps != 1) {
            rc = as_err(err, AS_EREFUSED, "decode graph: a decode selection of up to %d entries would be split %d "
                        "tiles per split, and narrower ones otherwise: the graph would not equal the uncaptured step",
                        topk_max, tps);
            goto fail;
        }
        if (wsb)
            STEP(as_dev_malloc(&e->mem, &g->attn_ws, wsb), "sparse attention workspace (%zu bytes)", wsb);
        g->attn_ws_bytes = wsb;
    }
    if (g->opt.layer_events)
        for (; g->n_lev <= c->n_layers; g->n_lev++)
            STEP(cudaEventCreate(&g->lev[g->n_lev]), "the event before layer %d", g->n_lev);
    STEP(as_dev_malloc(&e->mem, (void **)&g->norm_ctr, 2 * sizeof(unsigned)), "the GEMV + RMSNorm counters");
    STEP(cudaMemset(g->norm_ctr, 0, 2 * sizeof(unsigned)), "the GEMV + RMSNorm counters");
    STEP((cudaError_t)as_k_index_scores_prepare(c->index_head_dim), "index scores kernel set-up");
    if (g->opt.keep_layer_outs)
        STEP(as_dev_malloc(&e->mem, (void **)&g->outs, sizeof(uint16_t) * (size_t)c->n_layers * c->dim), "layer outs (%d x %d)",
             c->n_layers, c->dim);
#undef STEP
    *out = g;
    return 0;
fail:
    as_decode_graph_destroy(g);
    return rc;
}

/* The buffers a step fills, at their largest (a host node cannot grow them). The score row and the
 * shared selection are copied whole (up to the cache's capacity, index_topk entries) while only the
 * live part is ever written: they are cleared once, so that no copy reads memory nothing wrote. */
static int reserve(AsDecodeGraph *g, AsError *err)
{
    AsEngine *e = g->e;
    const AsConfig *c = &e->cfg;
    TRY(as_dev_work_reserve(e, 1, c->max_seq, c->window + c->index_topk, err));
    TRY(as_dev_sel_reserve(e, (size_t)c->index_topk, err));
    if (g->zeroed_score != e->wk.score) {
        CU(err, cudaMemsetAsync(e->wk.score, 0, sizeof(uint16_t) * (size_t)e->wk.cap_s * e->wk.cap_w, e->st),
           "decode graph: clearing the score buffer");
        g->zeroed_score = e->wk.score;
    }
    if (g->zeroed_sel != e->sh.sel_d) { /* past the selection published now */
        const AsSharedProv *pv = &e->sh.prov;
        const size_t live = pv->sel_from.layer >= 0 ? (size_t)pv->sel_s * pv->sel_k : 0;
        if (live < (size_t)e->sh.sel_cap)
            CU(err, cudaMemsetAsync(e->sh.sel_d + live, 0, sizeof(int32_t) * ((size_t)e->sh.sel_cap - live), e->st),
               "decode graph: clearing the shared selection past its %zu entries", live);
        g->zeroed_sel = e->sh.sel_d;
    }
    AsDevShared *sh = &e->sh;
    TRY(as_dev_select_reserve(e, (size_t)c->max_seq, err));
    if (sh->cand_cap < (size_t)c->max_seq) {
        uint8_t *m = realloc(sh->cand_h, (size_t)c->max_seq + 1);
        if (!m)
            return as_err(err, AS_ERUNTIME, "out of host memory for a candidate mask of %d", c->max_seq);
        sh->cand_h = m;
        sh->cand_cap = (size_t)c->max_seq;
    }
    return 0;
}

int as_engine_decode_graph(AsDecodeGraph *g, const float *h0, int start_pos, AsError *err)
{
    AsEngine *e = g->e;
    const AsConfig *c = &e->cfg;
    if (e->cap)
        return as_err(err, AS_EBADINPUT, "decode graph: a capture is in progress");
    if (!e->started)
        return as_err(err, AS_EBADINPUT, "decode before any prefill");
    if (start_pos <= 0)
        return as_err(err, AS_EBADINPUT, "the decode graph runs decode steps (start_pos > 0), not position %d",
                      start_pos);
    if (e->next_layer < c->n_layers)
        return as_err(err, AS_EBADINPUT, "decode graph: the current step is not finished (layer %d next)",
                      e->next_layer);
    TRY(as_plan_step(c, start_pos, 1, err));
    TRY(reserve(g, err));
    TRY(plan_step(e, start_pos, e->step + 1, &g->next, err));
    g->plan = g->next;
    fill_params(g);
    for (int i = 0; i < c->dim; i++)
        g->h0_h[i] = as_bf16_bits(h0[i]);
    GSlot *sl = NULL;
    for (int i = 0; i < AS_GRAPH_SLOTS && !sl; i++)
        if (slot_matches(g, &g->slot[i]))
            sl = &g->slot[i];
    bool captured = false;
    if (!sl) {
        for (int i = 0; i < AS_GRAPH_SLOTS && !sl; i++)
            if (!g->slot[i].used)
                sl = &g->slot[i];
        if (!sl) {
            sl = &g->slot[g->victim];
            g->victim = (g->victim + 1) % AS_GRAPH_SLOTS;
        }
        const int pdl = as_k_pdl_use(e->knobs.pdl); /* the launches captured carry the engine's setting */
        const int rc = capture(g, sl, err);
        as_k_pdl_use(pdl);
        TRY(rc);
        captured = true;
    }
    apply_plan(g);
    g->stepped = true;
    g->host_rc = 0;
    g->host_msg[0] = 0;
    CU(err, cudaEventRecord(g->ev0, e->st), "decode graph: timing event");
    CU(err, cudaGraphLaunch(sl->exec, e->st), "decode graph: launching step %d (position %d)", e->step, start_pos);
    CU(err, cudaEventRecord(g->ev1, e->st), "decode graph: timing event");
    CU(err, cudaStreamSynchronize(e->st), "decode graph: step %d (position %d)", e->step, start_pos);
    if (g->host_rc)
        return as_err(err, g->host_rc, "decode graph, step %d (position %d): the selection's host node failed: %s",
                      e->step, start_pos, g->host_msg);
    float ms = 0;
    if (cudaEventElapsedTime(&ms, g->ev0, g->ev1) != cudaSuccess)
        cudaGetLastError();
    g->info.last_ms = ms;
    if (!captured)
        g->info.replays++;
    g->info.nodes = sl->nodes;
    g->info.kernels = sl->kernels;
    g->info.memcpys = sl->memcpys;
    g->info.memsets = sl->memsets;
    g->info.hosts = sl->hosts;
    g->info.others = sl->others;
    int held = 0;
    for (int i = 0; i < AS_GRAPH_SLOTS; i++)
        held += g->slot[i].used;
    g->info.graphs = held;
    for (int l = 0; l < c->n_layers; l++)
        if (g->bad_h[l])
            return as_dev_refuse_idx(err, l);
    return 0;
}

void as_decode_graph_info(const AsDecodeGraph *g, AsDecodeGraphInfo *out) { *out = g->info; }

int as_decode_graph_layer_meta(const AsDecodeGraph *g, int l, AsRun *out, AsError *err)
{
    if (l < 0 || l >= g->e->cfg.n_layers)
        return as_err(err, AS_EBADINPUT, "decode graph: no layer %d", l);
    if (!g->stepped)
        return as_err(err, AS_EBADINPUT, "decode graph: no step has run yet");
    as_run_free(out);
    as_plan_to_run(&g->plan.layer[l], out);
    return 0;
}

int as_decode_graph_layer_outs(AsDecodeGraph *g, float *outs, AsError *err)
{
    const AsConfig *c = &g->e->cfg;
    if (!g->outs)
        return as_err(err, AS_EBADINPUT, "decode graph: created without keep_layer_outs");
    const size_t n = (size_t)c->n_layers * c->dim;
    uint16_t *tmp = malloc(sizeof(uint16_t) * n);
    if (!tmp)
        return as_err(err, AS_ERUNTIME, "out of host memory");
    /* on the engine's stream: it does not block on the legacy one */
    cudaError_t rc = cudaMemcpyAsync(tmp, g->outs, sizeof(uint16_t) * n, cudaMemcpyDeviceToHost, g->e->st);
    if (rc == cudaSuccess)
        rc = cudaStreamSynchronize(g->e->st);
    for (size_t i = 0; rc == cudaSuccess && i < n; i++)
        outs[i] = as_bf16_to_f32(tmp[i]);
    free(tmp);
    CU(err, rc, "decode graph: copying the layer outs (%d x %d)", c->n_layers, c->dim);
    return 0;
}

int as_decode_graph_layer_ms(const AsDecodeGraph *g, double *ms, AsError *err)
{
    const AsConfig *c = &g->e->cfg;
    if (!g->n_lev)
        return as_err(err, AS_EBADINPUT, "decode graph: created without layer_events");
    CU(err, cudaEventSynchronize(g->lev[c->n_layers]), "decode graph: waiting for the last layer's event");
    for (int l = 0; l < c->n_layers; l++) {
        float t = 0;
        CU(err, cudaEventElapsedTime(&t, g->lev[l], g->lev[l + 1]), "decode graph: layer %d's time", l);
        ms[l] = t;
    }
    return 0;
}
