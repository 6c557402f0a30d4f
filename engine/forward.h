/* One layer's forward on the device, step by step (SPEC 3, in ref/layer.c's names): engine/forward.c
 * runs the steps in the SPEC's order on the engine's stream; engine/decode_schedule.c runs the same steps
 * in a captured decode's order (the kv branch forked, fusions, early staging). The plan (ref/plan.h)
 * decides every size and every shared slot read or published, for both. */
#ifndef AS_ENGINE_FORWARD_H
#define AS_ENGINE_FORWARD_H

#include "engine/internal.h"
#include "ref/plan.h"

typedef struct {
    AsEngine *e;
    AsLayerPlan p;               /* the layer's plan */
    AsSharedProv after;          /* the shared state once the layer has run (as_fwd_end) */
    int l, s, sp;
    AsDevLayerWeights *W;
    AsDevLayerState *ls;
    const float *cos_t, *sin_t;  /* the layer kind's RoPE tables */
    const as_bf16_t *rows_b;     /* the compressed cache attended (ratio > 0): its publisher's */
    const as_bf16_t *keys;       /* the index keys scored (p.indexes): their publisher's */
    /* capturing a decode graph: the step parameters on the device, read by the kernels' *_decode
     * variants, which launch for the most the scalars can be; NULL otherwise */
    const AsCapture *cap;
    const AsLayerStep *dL;
    const int32_t *sp_d;
} AsFwd;

/* The layer's plan (refused here, before any launch, as the reference refuses), its run's scalars into
 * e->last; as_fwd_end publishes what the plan says once the layer's launches are made. */
int as_fwd_begin(AsEngine *e, int l, AsFwd *f, AsError *err);
void as_fwd_end(AsFwd *f);

/* The layer's input: x = rmsnorm(h, attn_norm); in fp8 precision x's act_quant (QDQ) for wq_a and wkv,
 * x_q: a prefill's in the norm's launch, a decode row's by as_fwd_act_quant_x (a no-op otherwise). */
int as_fwd_attn_norm(AsFwd *f, AsError *err);
int as_fwd_act_quant_x(AsFwd *f, AsError *err);
/* Step 1: qr = rmsnorm(x wq_a^T, q_norm) (fuse_norm: by the GEMV's last block), then its act_quant for
 * wq_b and indexer.wq_b (a prefill's in the norm's launch); q = rope(qr wq_b^T) (fuse_rope: in the
 * GEMV's store, room blocks left free). */
int as_fwd_q_lora(AsFwd *f, bool fuse_norm, AsError *err);
int as_fwd_queries(AsFwd *f, bool fuse_rope, int room, AsError *err);
/* Steps 2-3: kv = fp8(rope(rmsnorm(x wkv^T))) and its ring store; the window selection of a prefill (a
 * decode's is built with idx). */
int as_fwd_kv(AsFwd *f, AsError *err);
int as_fwd_window(AsFwd *f, AsError *err);
/* Step 5, piece by piece: the compressor's latents (5a), the index keys (5c, key owners), the indexer's
 * queries and head weights, its scores, masks and top-k (fuse_idx, a captured decode's: the top-k also
 * writes idx's compressed part), the reused selection (5d), the latents into the cache (5e); and all of
 * it in the SPEC's order. */
int as_fwd_compressor(AsFwd *f, AsError *err);
int as_fwd_index_keys(AsFwd *f, AsError *err);
int as_fwd_index_queries(AsFwd *f, AsError *err);
int as_fwd_index_weights(AsFwd *f, AsError *err);
int as_fwd_index_select(AsFwd *f, bool fuse_idx, AsError *err);
int as_fwd_reuse_selection(AsFwd *f, AsError *err);
int as_fwd_store_latents(AsFwd *f, AsError *err);
int as_fwd_compressed_branch(AsFwd *f, AsError *err);
/* idx = widx followed by the compressed selection (a decode: the window selection with it); window_only:
 * the window's part alone, the top-k writing the rest (fuse_idx). Entries beyond the attended rows raise
 * the layer's refusal flag. */
int as_fwd_build_idx(AsFwd *f, bool window_only, AsError *err);
/* Step 7 (ob: a captured decode's one-query combine writes o_back too; early_rows: it stages its rows
 * before its PDL wait, engine/decode_schedule.c vouching for the kernel before it), step 8 (o_back, unless
 * step 7 wrote it), step 9 with the residual (fuse_residual: in wo_b's GEMV store; fuse_next_norm: wo_b's
 * last block also makes the next layer's x, which then skips its attn_norm). */
int as_fwd_sparse_attention(AsFwd *f, const AsOBack *ob, bool early_rows, AsError *err);
int as_fwd_rotate_back(AsFwd *f, AsError *err);
int as_fwd_project_out(AsFwd *f, bool fuse_residual, bool fuse_next_norm, AsError *err);
/* o_back's rotation for this layer (into the work buffer), for the one-query combine or as_k_o_back. */
AsOBack as_fwd_o_back(const AsFwd *f);

/* engine/decode_schedule.c: layer l of the decode step being captured (e->cap), in the schedule's order. */
int as_dev_layer_scheduled(AsEngine *e, int l, AsError *err);

#endif
