/* One layer's forward on the device: the order and the shared-state rules of ref/layer.c,
 * with the heavy lifting in cuBLAS and kernels/. The work buffers keep this layer's
 * intermediates until the next layer runs. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "engine/check.h"
#include "engine/internal.h"
#include "ref/window.h"

#define B16 sizeof(as_bf16_t)

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
} Fwd;

static int rmsnorm_rows(Fwd *f, as_bf16_t *x, int64_t ld, const float *w, int rows, int n, const char *what,
                        AsError *err)
{
    if (rows == 0)
        return 0;
    KL(err, as_k_rmsnorm(x, ld, w, x, ld, rows, n, f->e->cfg.norm_eps, f->e->st), "layer %d: rmsnorm(%s) %dx%d",
       f->l, what, rows, n);
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
    KL(err, as_k_rmsnorm(wk->h, c->dim, f->W->attn_norm, wk->x, c->dim, s, c->dim, c->norm_eps, e->st),
       "layer %d: rmsnorm(h, attn_norm) %dx%d", f->l, s, c->dim);
    snprintf(what, sizeof what, "layer %d wq_a", f->l);
    TRY(as_dev_proj(e, wk->x, c->dim, s, &f->W->wq_a, wk->qr, qlr, what, err));
    TRY(rmsnorm_rows(f, wk->qr, qlr, f->W->q_norm, s, qlr, "qr", err));
    snprintf(what, sizeof what, "layer %d wq_b", f->l);
    TRY(as_dev_proj(e, wk->qr, qlr, s, &f->W->wq_b, wk->q, (int64_t)nh * hd, what, err));
    KL(err, as_k_rope(wk->q, (int64_t)nh * hd, s, nh, hd, rd, f->sp, NULL, f->cos_t, f->sin_t,
                      e->fault == AS_FAULT_ROPE_BACKWARDS, e->st),
       "layer %d: rope(q) %dx%dx%d", f->l, s, nh, hd);
    snprintf(what, sizeof what, "layer %d wkv", f->l);
    TRY(as_dev_proj(e, wk->x, c->dim, s, &f->W->wkv, wk->kv, hd, what, err));
    TRY(rmsnorm_rows(f, wk->kv, hd, f->W->kv_norm, s, hd, "kv", err));
    KL(err, as_k_rope(wk->kv, hd, s, 1, hd, rd, f->sp, NULL, f->cos_t, f->sin_t, 0, e->st), "layer %d: rope(kv) %dx%d",
       f->l, s, hd);
    KL(err, as_k_quant(wk->kv, wk->kv_pre, (int64_t)s * hd, AS_KQ_FP8, e->st), "layer %d: fp8 quant kv %dx%d", f->l,
       s, hd);
    return 0;
}

/* Step 3: ring store and window selection. */
static int window_step(Fwd *f, AsError *err)
{
    AsEngine *e = f->e;
    const AsConfig *c = &e->cfg;
    int win = c->window, hd = c->head_dim;
    int slot_pos = f->sp + (!f->prefill && e->fault == AS_FAULT_RING_SLOT);
    KL(err, as_k_ring_store(f->ls->ring, win, hd, e->wk.kv, f->s, slot_pos, e->st), "layer %d: ring store s=%d pos=%d",
       f->l, f->s, f->sp);
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
        KL(err, as_k_compress_pool(wk->ckv, wk->csc, s, r, hd, f->sp, f->ls->part_kv, f->ls->part_sc, wk->latent, e->st),
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
    TRY(rmsnorm_rows(f, wk->ik, ihd, f->W->k_norm, n, ihd, "index keys", err));
    KL(err, as_k_rope(wk->ik, ihd, n, 1, ihd, c->rope_head_dim, f->lpos0, f->lpos_d, e->cos_yarn, e->sin_yarn, 0, e->st),
       "layer %d: rope(index keys) %dx%d", f->l, n, ihd);
    KL(err, as_k_quant(wk->ik, wk->ik_pre, (int64_t)n * ihd, AS_KQ_FP4_E8M0, e->st), "layer %d: fp4 quant keys %dx%d",
       f->l, n, ihd);
    int row0 = f->sp / r;
    if (!(e->fault == AS_FAULT_STALE_KEYS && !f->prefill)) {
        CU(err, cudaMemcpyAsync(f->ls->ikcache + (size_t)row0 * ihd, wk->ik, B16 * (size_t)n * ihd,
                                cudaMemcpyDeviceToDevice, e->st),
           "layer %d: index-key cache write rows %d..%d", f->l, row0, row0 + n);
    }
    if (row0 + n > f->ls->ikcache_rows)
        f->ls->ikcache_rows = row0 + n;
    e->sh.index_k = f->ls->ikcache;
    e->sh.index_k_cap = f->ls->cap;
    e->sh.index_k_from = (AsProvenance){f->l, e->step};
    return 0;
}

static int indexer(Fwd *f, int width, AsError *err)
{
    AsEngine *e = f->e;
    const AsConfig *c = &e->cfg;
    AsDevWork *wk = &e->wk;
    int s = f->s, nhi = c->index_n_heads, ihd = c->index_head_dim;
    char what[64];
    if (!e->sh.index_k)
        return as_err(err, AS_EREFUSED, "layer %d: index source scores with no published index keys", f->l);
    if (width > e->sh.index_k_cap)
        return as_err(err, AS_EREFUSED, "layer %d: index width %d exceeds the %d rows of the index keys published by "
                      "layer %d", f->l, width, e->sh.index_k_cap, e->sh.index_k_from.layer);
    f->m->keys_from = e->sh.index_k_from;
    snprintf(what, sizeof what, "layer %d indexer.wq_b", f->l);
    TRY(as_dev_proj(e, wk->qr, c->q_lora_rank, s, &f->W->i_wq_b, wk->iq, (int64_t)nhi * ihd, what, err));
    KL(err, as_k_rope(wk->iq, (int64_t)nhi * ihd, s, nhi, ihd, c->rope_head_dim, f->sp, NULL, e->cos_yarn, e->sin_yarn,
                      0, e->st),
       "layer %d: rope(index queries) %dx%dx%d", f->l, s, nhi, ihd);
    KL(err, as_k_quant(wk->iq, wk->iq_pre, (int64_t)s * nhi * ihd, AS_KQ_FP4_E8M0, e->st),
       "layer %d: fp4 quant index queries", f->l);
    snprintf(what, sizeof what, "layer %d indexer.weights_proj", f->l);
    TRY(as_dev_proj(e, wk->x, c->dim, s, &f->W->i_wproj, wk->w, nhi, what, err));
    KL(err, as_k_scale_bf16(wk->w, (int64_t)s * nhi, (float)(1.0 / sqrt((double)ihd) * (1.0 / sqrt((double)nhi))),
                            e->st),
       "layer %d: index weights scale", f->l);
    int slot = as_prof_begin(e, AS_OP_ISCORE, f->l, 2.0 * s * width * nhi * ihd,
                             2.0 * ((double)s * nhi * ihd + (double)width * ihd + (double)s * width));
    KL(err, as_k_index_scores(wk->iq, e->sh.index_k, wk->w, s, nhi, ihd, width, f->sp, f->role->ratio, wk->score,
                              e->st),
       "layer %d: index scores %dx%d (%d heads x %d)", f->l, s, width, nhi, ihd);
    as_prof_end(e, slot);
    slot = as_prof_begin(e, AS_OP_SELECT, f->l, 0, 2.0 * s * width);
    int rc = as_dev_select_host(e, f->l, s, width, f->sp, f->m, err);
    as_prof_end(e, slot);
    return rc;
}

static int store_latents(Fwd *f, AsError *err)
{
    AsEngine *e = f->e;
    const AsConfig *c = &e->cfg;
    AsDevWork *wk = &e->wk;
    int n = f->m->n_new, hd = c->head_dim, r = f->role->ratio;
    CU(err, cudaMemcpyAsync(wk->latent_q, wk->latent, B16 * (size_t)n * hd, cudaMemcpyDeviceToDevice, e->st),
       "layer %d: copy latents", f->l);
    KL(err, as_k_rope(wk->latent_q, hd, n, 1, hd, c->rope_head_dim, f->lpos0, f->lpos_d, e->cos_yarn, e->sin_yarn, 0, e->st),
       "layer %d: rope(latents) %dx%d", f->l, n, hd);
    KL(err, as_k_quant(wk->latent_q, wk->latent_pre, (int64_t)n * hd, AS_KQ_FP4_E4M3, e->st),
       "layer %d: fp4 quant latents %dx%d", f->l, n, hd);
    if (e->fault == AS_FAULT_FP4_SCALE)
        KL(err, as_k_scale_bf16(wk->latent_q, (int64_t)n * hd, 2.0f, e->st), "layer %d: fault fp4-scale", f->l);
    int row0 = f->sp / r;
    CU(err, cudaMemcpyAsync(f->ls->ccache + (size_t)row0 * hd, wk->latent_q, B16 * (size_t)n * hd,
                            cudaMemcpyDeviceToDevice, e->st),
       "layer %d: compressed cache write rows %d..%d", f->l, row0, row0 + n);
    if (row0 + n > f->ls->ccache_rows)
        f->ls->ccache_rows = row0 + n;
    e->sh.compress_kv = f->ls->ccache;
    e->sh.compress_kv_cap = f->ls->cap;
    e->sh.compress_kv_from = (AsProvenance){f->l, e->step};
    return 0;
}

/* Step 5: the compressed branch of a ratio > 0 layer. */
static int compressed_branch(Fwd *f, AsError *err)
{
    AsEngine *e = f->e;
    int r = f->role->ratio;
    int compress_len = f->end / r;
    f->m->compress_len = compress_len;
    if (f->role->kv_source)
        TRY(compressor(f, err));
    if (f->role->index_source && compress_len > 0) {
        if (f->role->key_owner && f->m->n_new > 0)
            TRY(index_keys(f, err));
        TRY(indexer(f, compress_len, err));
    } else if (f->role->index_source) {
        f->m->k = 0;
    } else if (e->sh.sel_present) {
        if (e->sh.sel_s != f->s)
            return as_err(err, AS_EREFUSED, "layer %d: the shared selection (layer %d, step %d) has %d rows, the step %d",
                          f->l, e->sh.sel_from.layer, e->sh.sel_from.step, e->sh.sel_s, f->s);
        f->m->k = e->sh.sel_k;
        f->m->sel_from = e->sh.sel_from;
        if (e->sh.sel_k)
            CU(err, cudaMemcpyAsync(e->wk.csel, e->sh.sel_d, sizeof(int32_t) * (size_t)f->s * e->sh.sel_k,
                                    cudaMemcpyDeviceToDevice, e->st),
               "layer %d: reuse the shared selection %dx%d", f->l, f->s, e->sh.sel_k);
    }
    if (f->role->kv_source && f->m->n_new > 0)
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
    int cols = f->m->cols, k = f->m->k;
    KL(err, as_k_build_idx(wk->widx, cols, wk->csel, k, f->s, f->m->rows_a_len + f->m->rows_b_len, wk->idx,
                           wk->bad + f->l, wk->valid + f->l, e->st),
       "layer %d: build idx %dx(%d+%d)", f->l, f->s, cols, k);
    f->m->topk = cols + k;
    return 0;
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
    char what[64];
    /* work: QK and PV over the rows actually selected (counted on the device: per valid entry) */
    int slot = as_prof_begin(e, AS_OP_ATTN, f->l, -4.0 * nh * hd,
                             2.0 * ((double)s * f->m->topk * hd + 2.0 * s * nh * hd));
    KL(err, as_k_sparse_attn(wk->q, rows_a, f->m->rows_a_len, e->sh.compress_kv, f->m->rows_b_len, wk->idx, f->m->topk,
                             sink, wk->o, s, nh, hd, (float)(1.0 / sqrt((double)hd)), e->st),
       "layer %d: sparse attention s=%d heads=%d rows=%d+%d topk=%d", f->l, s, nh, f->m->rows_a_len, f->m->rows_b_len,
       f->m->topk);
    as_prof_end(e, slot);
    CU(err, cudaMemcpyAsync(wk->o_back, wk->o, B16 * (size_t)s * nh * hd, cudaMemcpyDeviceToDevice, e->st),
       "layer %d: copy o", f->l);
    KL(err, as_k_rope(wk->o_back, (int64_t)nh * hd, s, nh, hd, c->rope_head_dim, f->sp, NULL, f->cos_t, f->sin_t, 1,
                      e->st),
       "layer %d: inverse rope(o) %dx%dx%d", f->l, s, nh, hd);
    TRY(as_dev_proj_grouped(e, wk->o_back, s, &f->W->wo_a, wk->og, err));
    snprintf(what, sizeof what, "layer %d wo_b", f->l);
    TRY(as_dev_proj(e, wk->og, (int64_t)c->o_groups * c->o_lora_rank, s, &f->W->wo_b, wk->out, c->dim, what, err));
    KL(err, as_k_residual_add(wk->h, wk->out, (int64_t)s * c->dim, e->st), "layer %d: residual %dx%d", f->l, s, c->dim);
    return 0;
}

int as_dev_layer_forward(AsEngine *e, int l, AsError *err)
{
    const AsConfig *c = &e->cfg;
    AsRun *m = &e->last;
    as_run_free(m);
    Fwd f = {.e = e, .l = l, .s = e->s, .sp = e->start_pos, .end = e->start_pos + e->s, .prefill = e->start_pos == 0,
             .role = &c->role[l], .W = &e->w[l], .ls = &e->ls[l], .m = m};
    f.cos_t = f.role->ratio == 0 ? e->cos_plain : e->cos_yarn;
    f.sin_t = f.role->ratio == 0 ? e->sin_plain : e->sin_yarn;
    m->layer = l;
    m->step = e->step;
    m->start_pos = f.sp;
    m->s = f.s;
    m->ratio = f.role->ratio;
    e->last_layer = l;
    int slot = as_prof_begin(e, AS_OP_LAYER, l, 0, 0);
    TRY(project_q_kv(&f, err));
    TRY(window_step(&f, err));
    if (f.role->ratio > 0)
        TRY(compressed_branch(&f, err));
    TRY(build_idx(&f, err));
    TRY(attend_and_project(&f, err));
    as_prof_end(e, slot);
    return 0;
}
