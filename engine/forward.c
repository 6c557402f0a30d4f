/* One layer's forward on the device: SPEC 3's steps in ref/layer.c's order, on the engine's stream,
 * with the heavy lifting in cuBLAS and kernels/. The plan (ref/plan.h) says what each step sizes and
 * which shared slots it reads and publishes; the work buffers keep this layer's intermediates until the
 * next layer runs. What follows a projection on its way into a cache is one launch (kernels/row_pipe.cu:
 * kv's rmsnorm, RoPE, fp8 and ring store; the index keys' and latents' chains with their cache writes;
 * the index queries' RoPE and fp4; o's copy and inverse RoPE), and a decode assembles the window
 * selection with idx (as_k_build_idx_decode). A captured decode (e->cap) runs these steps in the order
 * of engine/decode_schedule.c, its position-dependent scalars read from the step parameters on the device
 * (f->dL, f->sp_d) through the kernels' *_decode variants; the host bookkeeping is the plan either way. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "engine/check.h"
#include "engine/forward.h"

int as_fwd_begin(AsEngine *e, int l, AsFwd *f, AsError *err)
{
    const AsConfig *c = &e->cfg;
    memset(f, 0, sizeof *f);
    TRY(as_plan_layer(c, l, e->step, e->start_pos, e->s, &e->sh.prov, e->fault, &f->p, &f->after, err));
    f->e = e;
    f->l = l;
    f->s = e->s;
    f->sp = e->start_pos;
    f->W = &e->w[l];
    f->ls = &e->ls[l];
    f->cos_t = f->p.ratio == 0 ? e->cos_plain : e->cos_yarn;
    f->sin_t = f->p.ratio == 0 ? e->sin_plain : e->sin_yarn;
    f->rows_b = f->p.ratio > 0 ? e->ls[f->p.rows_b_from.layer].ccache : NULL;
    f->keys = f->p.indexes ? e->ls[f->p.keys_from.layer].ikcache : NULL;
    if (e->cap) { /* a decode graph is captured only for decode steps */
        f->cap = e->cap;
        f->dL = &e->cap->dP->layer[l];
        f->sp_d = &e->cap->dP->start_pos;
    }
    as_run_free(&e->last);
    as_plan_to_run(&f->p, &e->last);
    e->last_layer = l;
    return 0;
}

void as_fwd_end(AsFwd *f)
{
    const AsLayerPlan *p = &f->p;
    AsDevLayerState *ls = f->ls;
    if (p->stores_latents && p->cache_row0 + p->n_new > ls->ccache_rows)
        ls->ccache_rows = p->cache_row0 + p->n_new;
    if (p->stores_keys && p->cache_row0 + p->n_new > ls->ikcache_rows)
        ls->ikcache_rows = p->cache_row0 + p->n_new;
    f->e->sh.prov = f->after;
}

/* x's rows normalised in place; yq (or NULL) gets their fp8 QDQ in the same launch */
static int rmsnorm_rows(AsFwd *f, as_bf16_t *x, int64_t ld, const float *w, as_bf16_t *yq, int rows, int n,
                        const char *what, AsError *err)
{
    if (rows == 0)
        return 0;
    KL(err, as_k_rmsnorm_qdq(x, ld, w, x, ld, yq, n, rows, n, f->e->cfg.norm_eps, f->e->st),
       "layer %d: rmsnorm(%s)%s %dx%d", f->l, what, yq ? " + fp8 QDQ" : "", rows, n);
    return 0;
}

/* fp8 precision: x's QDQ, x_q, for wq_a and wkv (the kv branch reads it too) */
static as_bf16_t *x_q_of(AsEngine *e, const AsDevLayerWeights *W)
{
    return W->wq_a.fp8 || W->wkv.fp8 ? e->wk.x_q : NULL;
}

/* A prefill's rows are normalised and QDQ'd in one launch (a block a row); a decode row's QDQ is a
 * launch of its own (as_k_rmsnorm_qdq says why). */
static bool qdq_in_norm(const AsFwd *f) { return f->s > 1; }

int as_fwd_attn_norm(AsFwd *f, AsError *err)
{
    const AsConfig *c = &f->e->cfg;
    AsDevWork *wk = &f->e->wk;
    as_bf16_t *xq = qdq_in_norm(f) ? x_q_of(f->e, f->W) : NULL;
    KL(err, as_k_rmsnorm_qdq(wk->h, c->dim, f->W->attn_norm, wk->x, c->dim, xq, c->dim, f->s, c->dim, c->norm_eps,
                             f->e->st),
       "layer %d: rmsnorm(h, attn_norm)%s %dx%d", f->l, xq ? " + fp8 QDQ" : "", f->s, c->dim);
    return 0;
}

int as_fwd_act_quant_x(AsFwd *f, AsError *err)
{
    as_bf16_t *xq = x_q_of(f->e, f->W);
    if (!xq || qdq_in_norm(f)) /* none, or made with x */
        return 0;
    const int dim = f->e->cfg.dim;
    char what[64];
    snprintf(what, sizeof what, "layer %d wq_a + wkv input", f->l);
    return as_dev_qdq_fp8(f->e, f->e->wk.x, dim, f->s, dim, xq, what, err);
}

int as_fwd_q_lora(AsFwd *f, bool fuse_norm, AsError *err)
{
    AsEngine *e = f->e;
    const AsConfig *c = &e->cfg;
    AsDevWork *wk = &e->wk;
    const int s = f->s, qlr = c->q_lora_rank;
    const as_bf16_t *x = f->W->wq_a.fp8 ? wk->x_q : wk->x;
    char what[64];
    snprintf(what, sizeof what, "layer %d wq_a", f->l);
    /* qr's QDQ once for wq_b and indexer.wq_b: a prefill's with the norm, a decode row's after it */
    as_bf16_t *qr_q = f->W->wq_b.fp8 || f->W->i_wq_b.fp8 ? wk->qr_q : NULL;
    if (fuse_norm) {
        TRY(as_dev_proj_norm(e, x, &f->W->wq_a, wk->qr, NULL, f->W->q_norm, wk->qr, f->cap->norm_ctr, what, err));
    } else {
        TRY(as_dev_proj(e, x, c->dim, s, &f->W->wq_a, wk->qr, qlr, what, err));
        TRY(rmsnorm_rows(f, wk->qr, qlr, f->W->q_norm, qdq_in_norm(f) ? qr_q : NULL, s, qlr, "qr", err));
    }
    if (!qr_q || (!fuse_norm && qdq_in_norm(f)))
        return 0;
    snprintf(what, sizeof what, "layer %d wq_b input", f->l);
    return as_dev_qdq_fp8(e, wk->qr, qlr, s, qlr, qr_q, what, err);
}

int as_fwd_queries(AsFwd *f, bool fuse_rope, int room, AsError *err)
{
    AsEngine *e = f->e;
    const AsConfig *c = &e->cfg;
    AsDevWork *wk = &e->wk;
    char what[64];
    snprintf(what, sizeof what, "layer %d wq_b + rope(q)", f->l);
    const AsDevRope rope = {.hd = c->head_dim, .rd = c->rope_head_dim, .pos0 = f->sp, .pos = f->sp_d,
                            .cos_t = f->cos_t, .sin_t = f->sin_t, .inverse = e->fault == AS_FAULT_ROPE_BACKWARDS};
    return as_dev_proj_rope(e, f->W->wq_b.fp8 ? wk->qr_q : wk->qr, c->q_lora_rank, f->s, &f->W->wq_b, wk->q,
                            (int64_t)c->n_heads * c->head_dim, &rope, fuse_rope, room, what, err);
}

/* kv = fp8(rope(rmsnorm(x wkv^T))), kv_pre before the fp8, and step 3's ring store (prefill: the last
 * min(s, win) rows, token p into slot p % win; decode: slot start_pos % win). */
int as_fwd_kv(AsFwd *f, AsError *err)
{
    AsEngine *e = f->e;
    const AsConfig *c = &e->cfg;
    AsDevWork *wk = &e->wk;
    int s = f->s, hd = c->head_dim;
    char what[64];
    snprintf(what, sizeof what, "layer %d wkv", f->l);
    TRY(as_dev_proj(e, f->W->wkv.fp8 ? wk->x_q : wk->x, c->dim, s, &f->W->wkv, wk->kv, hd, what, err));
    AsRowPipe p = {.x = wk->kv, .ldx = hd, .y = wk->kv, .ldy = hd, .pre = wk->kv_pre, .rows = s, .heads = 1, .n = hd,
                   .norm_w = f->W->kv_norm, .eps = c->norm_eps, .rd = c->rope_head_dim, .pos0 = f->sp,
                   .pos = f->sp_d, .cos_t = f->cos_t, .sin_t = f->sin_t, .quant = AS_KQ_FP8, .post_scale = 1.0f,
                   .store_mode = AS_STORE_RING, .store = f->ls->ring, .store_ld = hd, .ring = c->window,
                   .ring_shift = !f->p.prefill && e->fault == AS_FAULT_RING_SLOT};
    KL(err, as_k_row_pipe(&p, e->st), "layer %d: kv rmsnorm + rope + fp8 quant + ring store %dx%d (pos %d)", f->l, s,
       hd, f->sp);
    return 0;
}

int as_fwd_window(AsFwd *f, AsError *err)
{
    if (f->p.prefill)
        KL(err, as_k_window_select(f->e->wk.widx, f->s, f->e->cfg.window, f->sp, f->e->st),
           "layer %d: window select s=%d", f->l, f->s);
    return 0;
}

/* The latents' positions (a group's first token), on the device where the launch needs them: a ratio-2
 * prefill's table of g * 2, or the step parameters' under a capture. */
static const int32_t *latent_pos_d(const AsFwd *f)
{
    if (f->cap)
        return &f->dL->lpos; /* the plan's latent_pos0, read at replay */
    return f->p.ratio >= 2 && f->p.prefill ? f->e->group_pos : NULL;
}

int as_fwd_compressor(AsFwd *f, AsError *err)
{
    AsEngine *e = f->e;
    const AsConfig *c = &e->cfg;
    AsDevWork *wk = &e->wk;
    int r = f->p.ratio, hd = c->head_dim, s = f->s;
    char what[64];
    snprintf(what, sizeof what, "layer %d compressor.wkv", f->l);
    if (r == 1) {
        TRY(as_dev_proj(e, wk->x, c->dim, s, &f->W->c_wkv, wk->latent, hd, what, err));
    } else {
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
    return rmsnorm_rows(f, wk->latent, hd, f->W->c_norm, NULL, f->p.n_new, hd, "latent", err);
}

/* ik = fp4(rope(rmsnorm(latent indexer.wk^T))) at the latent positions, ik_pre before the fp4, written
 * into the index-key cache at row start_pos / r onwards (not with the stale-keys fault in a decode). */
int as_fwd_index_keys(AsFwd *f, AsError *err)
{
    AsEngine *e = f->e;
    const AsConfig *c = &e->cfg;
    AsDevWork *wk = &e->wk;
    int n = f->p.n_new, ihd = c->index_head_dim, row0 = f->p.cache_row0;
    char what[64];
    snprintf(what, sizeof what, "layer %d indexer.wk", f->l);
    TRY(as_dev_proj(e, wk->latent, c->head_dim, n, &f->W->i_wk, wk->ik, ihd, what, err));
    bool store = !(e->fault == AS_FAULT_STALE_KEYS && !f->p.prefill);
    AsRowPipe p = {.x = wk->ik, .ldx = ihd, .y = wk->ik, .ldy = ihd, .pre = wk->ik_pre, .rows = n, .heads = 1,
                   .n = ihd, .norm_w = f->W->k_norm, .eps = c->norm_eps, .rd = c->rope_head_dim,
                   .pos0 = f->p.latent_pos0, .pos = latent_pos_d(f), .cos_t = e->cos_yarn, .sin_t = e->sin_yarn,
                   .quant = AS_KQ_FP4_E8M0, .post_scale = 1.0f, .store_mode = store ? AS_STORE_ROWS : AS_STORE_NONE,
                   .store = store ? f->ls->ikcache : NULL, .store_ld = ihd, .row0 = row0,
                   .row0_d = f->cap ? &f->dL->row0 : NULL};
    KL(err, as_k_row_pipe(&p, e->st), "layer %d: index keys rmsnorm + rope + fp4 quant + cache rows %d..%d (%dx%d)",
       f->l, row0, row0 + n, n, ihd);
    return 0;
}

/* iq = fp4(rope(qr indexer.wq_b^T)), iq_pre before the fp4. */
int as_fwd_index_queries(AsFwd *f, AsError *err)
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

/* w = (x indexer.weights_proj^T) / sqrt(ihd * nhi): x only. */
int as_fwd_index_weights(AsFwd *f, AsError *err)
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

/* The scores against the keys the plan names (a captured decode's launch covers the keys' capacity),
 * then the candidate mask and top-k on the device, or on the host, or in the graph's host node. */
int as_fwd_index_select(AsFwd *f, bool fuse_idx, AsError *err)
{
    AsEngine *e = f->e;
    const AsConfig *c = &e->cfg;
    AsDevWork *wk = &e->wk;
    const AsLayerPlan *p = &f->p;
    int s = f->s, nhi = c->index_n_heads, ihd = c->index_head_dim, width = p->width;
    int slot = as_prof_begin(e, AS_OP_ISCORE, f->l, 2.0 * s * width * nhi * ihd,
                             2.0 * ((double)s * nhi * ihd + (double)width * ihd + (double)s * width));
    if (f->cap)
        KL(err, as_k_index_scores_decode(wk->iq, f->keys, wk->w, s, nhi, ihd, p->keys_cap, &f->dL->width, p->ratio,
                                         wk->score, e->st),
           "layer %d: index scores (decode graph) up to %dx%d (%d heads x %d)", f->l, s, p->keys_cap, nhi, ihd);
    else
        KL(err, as_k_index_scores(wk->iq, f->keys, wk->w, s, nhi, ihd, width, f->sp, p->ratio, wk->score, e->st),
           "layer %d: index scores %dx%d (%d heads x %d)", f->l, s, width, nhi, ihd);
    as_prof_end(e, slot);
    if (f->cap)
        return as_dev_select_graph(e, p, fuse_idx, err);
    slot = as_prof_begin(e, AS_OP_SELECT, f->l, 0, 2.0 * s * width);
    int rc = as_dev_select_on_device(e, width) ? as_dev_select_device(e, p, false, err) : as_dev_select_host(e, p, err);
    as_prof_end(e, slot);
    return rc;
}

/* 5d: the shared selection, unchanged (a graph copies the most a selection can hold: build_idx reads the
 * live k). */
int as_fwd_reuse_selection(AsFwd *f, AsError *err)
{
    AsEngine *e = f->e;
    const int kc = f->cap ? e->cfg.index_topk : f->p.k;
    if (f->p.k)
        CU(err, cudaMemcpyAsync(e->wk.csel, e->sh.sel_d, sizeof(int32_t) * (size_t)f->s * kc, cudaMemcpyDeviceToDevice,
                                e->st),
           "layer %d: reuse the shared selection %dx%d", f->l, f->s, kc);
    return 0;
}

/* latent_q = fp4_e4m3(rope(latent)) (x2 with the fp4-scale fault), latent_pre before the fp4, written
 * into the compressed cache at row start_pos / r onwards. */
int as_fwd_store_latents(AsFwd *f, AsError *err)
{
    AsEngine *e = f->e;
    const AsConfig *c = &e->cfg;
    AsDevWork *wk = &e->wk;
    int n = f->p.n_new, hd = c->head_dim, row0 = f->p.cache_row0;
    AsRowPipe p = {.x = wk->latent, .ldx = hd, .y = wk->latent_q, .ldy = hd, .pre = wk->latent_pre, .rows = n,
                   .heads = 1, .n = hd, .rd = c->rope_head_dim, .pos0 = f->p.latent_pos0, .pos = latent_pos_d(f),
                   .cos_t = e->cos_yarn, .sin_t = e->sin_yarn, .quant = AS_KQ_FP4_E4M3,
                   .post_scale = e->fault == AS_FAULT_FP4_SCALE ? 2.0f : 1.0f, .store_mode = AS_STORE_ROWS,
                   .store = f->ls->ccache, .store_ld = hd, .row0 = row0, .row0_d = f->cap ? &f->dL->row0 : NULL};
    KL(err, as_k_row_pipe(&p, e->st), "layer %d: latents rope + fp4 quant + cache rows %d..%d (%dx%d)", f->l, row0,
       row0 + n, n, hd);
    return 0;
}

/* Step 5 as ref/layer.c's compressed_branch: compressor, index keys, indexer (or reuse), cache write. */
int as_fwd_compressed_branch(AsFwd *f, AsError *err)
{
    const AsLayerPlan *p = &f->p;
    if (p->compresses)
        TRY(as_fwd_compressor(f, err));
    if (p->stores_keys)
        TRY(as_fwd_index_keys(f, err));
    if (p->indexes) {
        TRY(as_fwd_index_queries(f, err));
        TRY(as_fwd_index_weights(f, err));
        TRY(as_fwd_index_select(f, false, err));
    } else if (p->reuses) {
        TRY(as_fwd_reuse_selection(f, err));
    }
    if (p->stores_latents)
        TRY(as_fwd_store_latents(f, err));
    return 0;
}

int as_fwd_build_idx(AsFwd *f, bool window_only, AsError *err)
{
    AsEngine *e = f->e;
    AsDevWork *wk = &e->wk;
    const AsLayerPlan *p = &f->p;
    int cols = p->cols, k = p->k, nrows = p->rows_a_len + p->rows_b_len;
    if (p->prefill) {
        KL(err, as_k_build_idx(wk->widx, cols, wk->csel, k, f->s, nrows, wk->idx, wk->bad + f->l, wk->valid + f->l,
                               e->st),
           "layer %d: build idx %dx(%d+%d)", f->l, f->s, cols, k);
        return 0;
    }
    if (window_only) { /* idx's window part (kmax 0); the top-k writes the rest */
        KL(err, as_k_build_idx_decode(wk->widx, e->cfg.window, f->sp, f->sp_d, wk->csel, 0, NULL, 0, 0, &f->dL->nrows,
                                      wk->idx, wk->bad + f->l, wk->valid + f->l, e->st),
           "layer %d: window select + idx's window part %d (pos %d)", f->l, e->cfg.window, f->sp);
        return 0;
    }
    /* the window selection with idx; a graph launches for the widest selection */
    const bool g = f->cap != NULL;
    const int kmax = g ? (p->ratio > 0 ? e->cfg.index_topk : 0) : k;
    KL(err, as_k_build_idx_decode(wk->widx, cols, f->sp, f->sp_d, wk->csel, k, g ? &f->dL->k : NULL, kmax, nrows,
                                  g ? &f->dL->nrows : NULL, wk->idx, wk->bad + f->l, wk->valid + f->l, e->st),
       "layer %d: window select + build idx %d+%d (pos %d)", f->l, cols, k, f->sp);
    return 0;
}

AsOBack as_fwd_o_back(const AsFwd *f)
{
    return (AsOBack){.o_back = f->e->wk.o_back, .cos_t = f->cos_t, .sin_t = f->sin_t,
                     .rd = f->e->cfg.rope_head_dim, .pos0 = f->sp, .pos_d = f->sp_d};
}

int as_fwd_sparse_attention(AsFwd *f, const AsOBack *ob, bool early_rows, AsError *err)
{
    AsEngine *e = f->e;
    const AsConfig *c = &e->cfg;
    AsDevWork *wk = &e->wk;
    const AsLayerPlan *p = &f->p;
    int s = f->s, nh = c->n_heads, hd = c->head_dim;
    const as_bf16_t *rows_a = p->prefill ? wk->kv : f->ls->ring;
    const float *sink = e->fault == AS_FAULT_SINK_IGNORED ? e->no_sink : f->W->sink;
    const int path = as_dev_attn_path(e);
    /* work: QK and PV over the rows actually selected (counted on the device: per valid entry) */
    int slot = as_prof_begin(e, AS_OP_ATTN, f->l, -4.0 * nh * hd, 2.0 * ((double)s * p->topk * hd + 2.0 * s * nh * hd));
    const float scale = (float)(1.0 / sqrt((double)hd));
    if (f->cap) {
        int kmax = p->ratio > 0 ? c->index_topk : 0, nb_max = p->ratio > 0 ? p->rows_b_cap : 0;
        KL(err, as_k_sparse_attn_decode(wk->q, rows_a, p->rows_a_len, f->rows_b, nb_max, &f->dL->nb, wk->idx,
                                        p->cols + kmax, &f->dL->topk, sink, wk->o, s, nh, hd, scale, f->cap->attn_ws,
                                        f->cap->attn_ws_bytes, ob, early_rows, path, e->st),
           "layer %d: sparse attention%s (decode graph) heads=%d rows=%d+%d up to topk=%d%s", f->l,
           ob ? " + o_back" : "", nh, p->rows_a_len, nb_max, p->cols + kmax, early_rows ? ", rows staged early" : "");
    } else {
        KL(err, as_k_sparse_attn_path(wk->q, rows_a, p->rows_a_len, f->rows_b, p->rows_b_len, wk->idx, p->topk, sink,
                                      wk->o, s, nh, hd, scale, path, 0, e->st),
           "layer %d: sparse attention s=%d heads=%d rows=%d+%d topk=%d", f->l, s, nh, p->rows_a_len, p->rows_b_len,
           p->topk);
    }
    as_prof_end(e, slot);
    return 0;
}

int as_fwd_rotate_back(AsFwd *f, AsError *err)
{
    const AsConfig *c = &f->e->cfg;
    const AsOBack ob = as_fwd_o_back(f);
    KL(err, as_k_o_back(f->e->wk.o, f->s, c->n_heads, c->head_dim, &ob, f->e->st),
       "layer %d: o copy + inverse rope %dx%dx%d", f->l, f->s, c->n_heads, c->head_dim);
    return 0;
}

/* og[t][g] = o_back[t][g] wo_a[g]^T, out = og wo_b^T, h = bf16(h + out). */
int as_fwd_project_out(AsFwd *f, bool fuse_residual, bool fuse_next_norm, AsError *err)
{
    AsEngine *e = f->e;
    const AsConfig *c = &e->cfg;
    AsDevWork *wk = &e->wk;
    char what[64];
    snprintf(what, sizeof what, "layer %d wo_a", f->l);
    TRY(as_dev_proj_grouped(e, wk->o_back, f->s, &f->W->wo_a, wk->og, what, err));
    const int ogw = c->o_groups * c->o_lora_rank;
    const as_bf16_t *og = wk->og;
    if (f->W->wo_b.fp8) { /* og's QDQ: wo_b's fused stores (residual, the next layer's x) are unchanged */
        snprintf(what, sizeof what, "layer %d wo_b input", f->l);
        TRY(as_dev_qdq_fp8(e, wk->og, ogw, f->s, ogw, wk->og_q, what, err));
        og = wk->og_q;
    }
    snprintf(what, sizeof what, "layer %d wo_b", f->l);
    if (fuse_next_norm) /* the next layer's x = rmsnorm(h, its attn_norm), made by this GEMV's last block */
        return as_dev_proj_norm(e, og, &f->W->wo_b, wk->out, wk->h, e->w[f->l + 1].attn_norm, wk->x,
                                f->cap->norm_ctr + 1, what, err);
    return as_dev_proj_residual(e, og, ogw, f->s, &f->W->wo_b, wk->out, wk->h, fuse_residual, what, err);
}

int as_dev_layer_forward(AsEngine *e, int l, AsError *err)
{
    AsFwd f;
    TRY(as_fwd_begin(e, l, &f, err));
    int slot = as_prof_begin(e, AS_OP_LAYER, l, 0, 0);
    TRY(as_fwd_attn_norm(&f, err));
    TRY(as_fwd_act_quant_x(&f, err));
    TRY(as_fwd_q_lora(&f, false, err));       /* step 1 */
    TRY(as_fwd_queries(&f, false, 0, err));
    TRY(as_fwd_kv(&f, err));                  /* step 2, and step 3's ring store */
    TRY(as_fwd_window(&f, err));              /* step 3 */
    if (f.p.ratio > 0)
        TRY(as_fwd_compressed_branch(&f, err)); /* step 5 */
    TRY(as_fwd_build_idx(&f, false, err));
    TRY(as_fwd_sparse_attention(&f, NULL, false, err)); /* step 7 */
    TRY(as_fwd_rotate_back(&f, err));                   /* step 8 */
    TRY(as_fwd_project_out(&f, false, false, err));     /* step 9, and the residual */
    as_prof_end(e, slot);
    as_fwd_end(&f);
    return 0;
}
