/* attention(x, start_pos) of one layer, SPEC section 3, step by step. Each step writes its
 * result straight into the run (the run's tensors are the working buffers), so what the
 * driver diffs is exactly what the next step consumed. */
#include "ref/layer.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "model/precision.h"
#include "ref/attention.h"
#include "ref/candidates.h"
#include "ref/compressor.h"
#include "ref/fp8_linear.h"
#include "ref/indexer.h"
#include "ref/linear.h"
#include "ref/quant.h"
#include "ref/rmsnorm.h"
#include "ref/window.h"

#define ROW(n) (sizeof(float) * (size_t)(n))

/* One of the five fp8 projections (wq_a, wq_b, wkv, wo_b, indexer.wq_b): the fp8 linear in fp8
 * precision, else the bf16 linear (model/precision.h). */
static void project(const AsRefModel *rm, const float *x, int s, const AsWTensor *w, float *y)
{
    if (as_proj_fp8(rm->m, w))
        as_fp8_linear(x, s, w, y);
    else
        as_linear(x, s, w, y, true);
}

int as_ref_model_init(AsRefModel *rm, const AsModel *m, AsError *err)
{
    memset(rm, 0, sizeof *rm);
    rm->m = m;
    const AsConfig *cfg = &m->cfg;
    if (as_rope_init_for_ratio(&rm->rope_plain, cfg, 0) || as_rope_init_for_ratio(&rm->rope_yarn, cfg, 1))
        goto oom;
    if (!(rm->no_sink = malloc(sizeof(float) * (size_t)cfg->n_heads)))
        goto oom;
    for (int h = 0; h < cfg->n_heads; h++)
        rm->no_sink[h] = -INFINITY;
    for (int l = 0; l < cfg->n_layers; l++) {
        const AsLayerWeights *w = &m->layer[l];
        /* the norms are bf16 parameters in model.py (an f32 weight is rounded as it is loaded); the sink is f32 */
        const AsWTensor *norms[] = {w->attn_norm, w->q_norm, w->kv_norm, w->c_norm, w->i_k_norm};
        float **dst[] = {&rm->attn_norm[l], &rm->q_norm[l], &rm->kv_norm[l], &rm->c_norm[l], &rm->k_norm[l]};
        for (int i = 0; i < 5; i++)
            if (norms[i] && !(*dst[i] = as_wt_norm_f32(norms[i])))
                goto oom;
        if (w->attn_sink && !(rm->sink[l] = as_wt_vec_f32(w->attn_sink)))
            goto oom;
    }
    return 0;
oom:
    as_ref_model_free(rm);
    return as_err(err, AS_ERUNTIME, "reference: out of memory preparing norms and RoPE tables");
}

void as_ref_model_free(AsRefModel *rm)
{
    as_rope_free(&rm->rope_plain);
    as_rope_free(&rm->rope_yarn);
    free(rm->no_sink);
    for (int l = 0; l < AS_MAX_LAYERS; l++) {
        free(rm->attn_norm[l]), free(rm->q_norm[l]), free(rm->kv_norm[l]);
        free(rm->c_norm[l]), free(rm->k_norm[l]), free(rm->sink[l]);
    }
    memset(rm, 0, sizeof *rm);
}

int as_ref_state_init(AsRefState *st, const AsConfig *cfg, AsError *err)
{
    memset(st, 0, sizeof *st);
    for (int l = 0; l < cfg->n_layers; l++) {
        const AsLayerRole *role = &cfg->role[l];
        AsRefLayerState *ls = &st->layer[l];
        ls->ring = calloc((size_t)cfg->window * cfg->head_dim, sizeof(float));
        if (!ls->ring)
            goto oom;
        if (!role->kv_source)
            continue;
        ls->cap = cfg->max_seq / role->ratio;
        ls->ccache = calloc((size_t)ls->cap * cfg->head_dim, sizeof(float));
        if (!ls->ccache)
            goto oom;
        if (role->ratio >= 2) {
            ls->part_kv = calloc((size_t)role->ratio * cfg->head_dim, sizeof(float));
            ls->part_sc = calloc((size_t)role->ratio * cfg->head_dim, sizeof(float));
            if (!ls->part_kv || !ls->part_sc)
                goto oom;
        }
        if (role->key_owner && !(ls->ikcache = calloc((size_t)ls->cap * cfg->index_head_dim, sizeof(float))))
            goto oom;
    }
    as_ref_state_reset(st, cfg);
    return 0;
oom:
    as_ref_state_free(st, cfg);
    return as_err(err, AS_ERUNTIME, "reference: out of memory allocating the layer caches (max_seq %d)",
                  cfg->max_seq);
}

void as_ref_state_reset(AsRefState *st, const AsConfig *cfg)
{
    for (int l = 0; l < cfg->n_layers; l++) {
        AsRefLayerState *ls = &st->layer[l];
        const AsLayerRole *role = &cfg->role[l];
        memset(ls->ring, 0, ROW((size_t)cfg->window * cfg->head_dim));
        if (ls->ccache)
            memset(ls->ccache, 0, ROW((size_t)ls->cap * cfg->head_dim));
        if (ls->ikcache)
            memset(ls->ikcache, 0, ROW((size_t)ls->cap * cfg->index_head_dim));
        if (ls->part_kv) {
            memset(ls->part_kv, 0, ROW((size_t)role->ratio * cfg->head_dim));
            for (int i = 0; i < role->ratio * cfg->head_dim; i++)
                ls->part_sc[i] = -INFINITY;
        }
        ls->ccache_rows = ls->ikcache_rows = 0;
    }
    AsRefShared *sh = &st->shared;
    free(sh->sel);
    free(sh->cand);
    memset(sh, 0, sizeof *sh);
    sh->compress_kv_from = sh->index_k_from = sh->sel_from = sh->cand_from = (AsProvenance){-1, -1};
}

void as_ref_state_free(AsRefState *st, const AsConfig *cfg)
{
    for (int l = 0; l < cfg->n_layers; l++) {
        AsRefLayerState *ls = &st->layer[l];
        free(ls->ring), free(ls->part_kv), free(ls->part_sc), free(ls->ccache), free(ls->ikcache);
    }
    free(st->shared.sel);
    free(st->shared.cand);
    memset(st, 0, sizeof *st);
}

/* Copies the layer state after the call into the run (the rows filled so far). */
static int snapshot_state(const AsConfig *cfg, const AsLayerRole *role, const AsRefLayerState *ls, AsRun *run)
{
    int hd = cfg->head_dim, win = cfg->window;
    float *p = as_run_shape(run, AS_T_ST_RING, 2, win, hd, 0);
    if (!p)
        return -1;
    memcpy(p, ls->ring, ROW((size_t)win * hd));
    if (ls->part_kv) {
        float *a = as_run_shape(run, AS_T_ST_PART_KV, 2, role->ratio, hd, 0);
        float *b = as_run_shape(run, AS_T_ST_PART_SC, 2, role->ratio, hd, 0);
        if (!a || !b)
            return -1;
        memcpy(a, ls->part_kv, ROW((size_t)role->ratio * hd));
        memcpy(b, ls->part_sc, ROW((size_t)role->ratio * hd));
    }
    if (ls->ccache) {
        float *c = as_run_shape(run, AS_T_ST_CCACHE, 2, ls->ccache_rows, hd, 0);
        if (!c)
            return -1;
        memcpy(c, ls->ccache, ROW((size_t)ls->ccache_rows * hd));
    }
    if (ls->ikcache) {
        int ihd = cfg->index_head_dim;
        float *k = as_run_shape(run, AS_T_ST_IKCACHE, 2, ls->ikcache_rows, ihd, 0);
        if (!k)
            return -1;
        memcpy(k, ls->ikcache, ROW((size_t)ls->ikcache_rows * ihd));
    }
    return 0;
}

/* Steps 1-2: queries and the window KV rows. */
static int project_q_kv(const AsRefModel *rm, int l, const float *x, int s, const AsRopeTable *rope, int start_pos,
                        AsRun *run)
{
    const AsConfig *cfg = &rm->m->cfg;
    const AsLayerWeights *w = &rm->m->layer[l];
    int nh = cfg->n_heads, hd = cfg->head_dim;
    float *qr = as_run_shape(run, AS_T_QR, 2, s, cfg->q_lora_rank, 0);
    float *q = as_run_shape(run, AS_T_Q, 3, s, nh, hd);
    float *kv_pre = as_run_shape(run, AS_T_KV_PRE, 2, s, hd, 0);
    float *kv = as_run_shape(run, AS_T_KV, 2, s, hd, 0);
    if (!qr || !q || !kv_pre || !kv)
        return -1;
    project(rm, x, s, w->wq_a, qr);
    as_rmsnorm(qr, rm->q_norm[l], qr, s, cfg->q_lora_rank, cfg->norm_eps);
    project(rm, qr, s, w->wq_b, q);
    as_rope_heads(q, s, nh, hd, start_pos, rope, rm->fault == AS_FAULT_ROPE_BACKWARDS);

    project(rm, x, s, w->wkv, kv_pre);
    as_rmsnorm(kv_pre, rm->kv_norm[l], kv_pre, s, hd, cfg->norm_eps);
    as_rope_heads(kv_pre, s, 1, hd, start_pos, rope, false);
    memcpy(kv, kv_pre, ROW((size_t)s * hd));
    as_fp8_quant(kv, (int64_t)s * hd, AS_FP8_BLOCK);
    return 0;
}

/* Step 3: the ring update, rows_a and the window selection. */
static int window_step(const AsRefModel *rm, AsRefLayerState *ls, int s, int start_pos, AsRun *run)
{
    const AsConfig *cfg = &rm->m->cfg;
    int hd = cfg->head_dim, win = cfg->window;
    const float *kv = run->t[AS_T_KV].data;
    bool prefill = start_pos == 0;
    int rows_a_len = prefill ? s : win;
    int cols = prefill ? (s < win ? s : win) : win;
    float *rows_a = as_run_shape(run, AS_T_ROWS_A, 2, rows_a_len, hd, 0);
    int32_t *widx = as_run_shape(run, AS_T_WIDX, 2, s, cols, 0);
    if (!rows_a || !widx)
        return -1;
    if (prefill) {
        as_window_store_prefill(ls->ring, win, hd, kv, s);
        memcpy(rows_a, kv, ROW((size_t)s * hd));
        as_window_select_prefill(widx, s, win);
    } else {
        as_window_store_decode(ls->ring, win, hd, kv, start_pos + (rm->fault == AS_FAULT_RING_SLOT));
        memcpy(rows_a, ls->ring, ROW((size_t)win * hd));
        as_window_select_decode(widx, win, start_pos);
    }
    run->rows_a_len = rows_a_len;
    run->cols = cols;
    return 0;
}

/* Step 5c, key owners with new latents: index keys written to the layer's cache and published. */
static int publish_index_keys(const AsRefModel *rm, AsRefState *st, int l, int step, const int *lpos,
                              int start_pos, AsRun *run)
{
    const AsConfig *cfg = &rm->m->cfg;
    const AsLayerWeights *w = &rm->m->layer[l];
    AsRefLayerState *ls = &st->layer[l];
    int n = run->n_new, ihd = cfg->index_head_dim, r = cfg->role[l].ratio;
    float *ik_pre = as_run_shape(run, AS_T_IK_PRE, 2, n, ihd, 0);
    float *ik = as_run_shape(run, AS_T_IK, 2, n, ihd, 0);
    if (!ik_pre || !ik)
        return -1;
    as_linear(run->t[AS_T_LATENT].data, n, w->i_wk, ik_pre, true);
    as_rmsnorm(ik_pre, rm->k_norm[l], ik_pre, n, ihd, cfg->norm_eps);
    as_rope_rows(ik_pre, n, ihd, ihd, lpos, &rm->rope_yarn, false);
    memcpy(ik, ik_pre, ROW((size_t)n * ihd));
    as_fp4_quant_e8m0(ik, (int64_t)n * ihd, AS_FP4_E8M0_BLOCK);
    int row0 = start_pos / r;
    if (!(rm->fault == AS_FAULT_STALE_KEYS && start_pos > 0))
        memcpy(ls->ikcache + (size_t)row0 * ihd, ik, ROW((size_t)n * ihd));
    if (row0 + n > ls->ikcache_rows)
        ls->ikcache_rows = row0 + n;
    st->shared.index_k = ls->ikcache;
    st->shared.index_k_cap = ls->cap;
    st->shared.index_k_from = (AsProvenance){l, step};
    return 0;
}

/* The shared selection becomes sel ([s][k], owned by the shared state from here), published by layer l. */
static void publish_selection(AsRefShared *sh, int32_t *sel, int s, int k, int l, int step, AsRun *run)
{
    free(sh->sel);
    sh->sel = sel;
    sh->sel_s = s;
    sh->sel_k = k;
    sh->sel_from = (AsProvenance){l, step};
    run->sel_from = sh->sel_from;
    run->k = k;
}

/* Step 5c: the indexer's queries, scores, masks and top-k; publishes the selection. */
static int run_indexer(const AsRefModel *rm, AsRefState *st, int l, int step, const float *x, int s, int start_pos,
                       int compress_len, AsRun *run, AsError *err)
{
    const AsConfig *cfg = &rm->m->cfg;
    const AsLayerRole *role = &cfg->role[l];
    const AsLayerWeights *w = &rm->m->layer[l];
    AsRefShared *sh = &st->shared;
    int nhi = cfg->index_n_heads, ihd = cfg->index_head_dim, r = role->ratio;
    int width = compress_len;

    if (!sh->index_k)
        return as_err(err, AS_EREFUSED, "layer %d: index source scores with no published index keys", l);
    if (width > sh->index_k_cap)
        return as_err(err, AS_EREFUSED,
                      "layer %d: index width %d exceeds the %d rows of the index keys published by layer %d", l,
                      width, sh->index_k_cap, sh->index_k_from.layer);
    run->keys_from = sh->index_k_from;
    float *keys = as_run_shape(run, AS_T_KEYS, 2, width, cfg->index_head_dim, 0);
    if (!keys)
        return as_err(err, AS_ERUNTIME, "layer %d: out of memory for %d index keys", l, width);
    memcpy(keys, sh->index_k, ROW((size_t)width * cfg->index_head_dim));

    float *iq_pre = as_run_shape(run, AS_T_IQ_PRE, 3, s, nhi, ihd);
    float *iq = as_run_shape(run, AS_T_IQ, 3, s, nhi, ihd);
    float *wt = as_run_shape(run, AS_T_W, 2, s, nhi, 0);
    float *score = as_run_shape(run, AS_T_ISCORE, 2, s, width, 0);
    int *clens = malloc(sizeof(int) * (size_t)s);
    if (!iq_pre || !iq || !wt || !score || !clens)
        goto oom;
    project(rm, run->t[AS_T_QR].data, s, w->i_wq_b, iq_pre);
    as_rope_heads(iq_pre, s, nhi, ihd, start_pos, &rm->rope_yarn, false);
    memcpy(iq, iq_pre, ROW((size_t)s * nhi * ihd));
    as_fp4_quant_e8m0(iq, (int64_t)s * nhi * ihd, AS_FP4_E8M0_BLOCK);
    as_linear(x, s, w->i_weights_proj, wt, true);
    as_index_weights_scale(wt, s, nhi, ihd);
    if (as_index_scores(iq, sh->index_k, wt, s, nhi, ihd, width, score))
        goto oom;
    for (int t = 0; t < s; t++)
        clens[t] = start_pos == 0 ? (start_pos + t + 1) / r : width;
    as_index_visibility(score, s, width, clens);

    if (role->candidate_source) {
        uint8_t *cand = as_run_shape(run, AS_T_CAND, 2, s, width, 0);
        uint8_t *pub = malloc((size_t)s * width + 1);
        if (!cand || !pub) {
            free(pub);
            goto oom;
        }
        if (as_select_candidate_blocks(score, s, width, clens, cfg->candidate_block_size,
                                       cfg->candidate_topk_blocks, cand)) {
            free(pub);
            goto oom;
        }
        memcpy(pub, cand, (size_t)s * width);
        free(sh->cand);
        sh->cand = pub;
        sh->cand_s = s;
        sh->cand_width = width;
        sh->cand_from = (AsProvenance){l, step};
        run->cand_from = sh->cand_from;
    } else if (role->uses_candidates && rm->fault != AS_FAULT_CAND_MASK_OFF) {
        if (!sh->cand || sh->cand_s != s || sh->cand_width != width) {
            free(clens);
            return as_err(err, AS_EREFUSED,
                          "layer %d: candidate mask is %dx%d (layer %d, step %d) but the scores are %dx%d", l,
                          sh->cand_s, sh->cand_width, sh->cand_from.layer, sh->cand_from.step, s, width);
        }
        uint8_t *cand = as_run_shape(run, AS_T_CAND, 2, s, width, 0);
        if (!cand)
            goto oom;
        memcpy(cand, sh->cand, (size_t)s * width);
        for (int64_t i = 0; i < (int64_t)s * width; i++)
            if (!cand[i])
                score[i] = -INFINITY;
        run->cand_from = sh->cand_from;
    }

    int k = cfg->index_topk < width ? cfg->index_topk : width;
    int32_t *sel = malloc(sizeof(int32_t) * (size_t)s * k + 1);
    int32_t *csel = as_run_shape(run, AS_T_CSEL, 2, s, k, 0);
    if (!sel || !csel || as_index_topk(score, s, width, k, clens, rm->fault == AS_FAULT_NO_OFFSET ? 0 : run->rows_a_len, sel)) {
        free(sel);
        goto oom;
    }
    memcpy(csel, sel, sizeof(int32_t) * (size_t)s * k);
    publish_selection(sh, sel, s, k, l, step, run);
    run->width = width;
    run->indexer_ran = true;
    free(clens);
    return 0;
oom:
    free(clens);
    return as_err(err, AS_ERUNTIME, "layer %d: out of memory in the indexer (s %d, width %d)", l, s, width);
}

/* Step 5d: a layer that is no index source (or whose indexer had nothing to do) uses what
 * the latest index source published, unchanged (the stale-selection quirk included). */
static int reuse_selection(const AsRefShared *sh, int l, int s, AsRun *run, AsError *err)
{
    if (!sh->sel) {
        run->k = 0;
        return as_run_shape(run, AS_T_CSEL, 2, s, 0, 0) ? 0 : -1;
    }
    if (sh->sel_s != s)
        return as_err(err, AS_EREFUSED, "layer %d: the shared selection (layer %d, step %d) has %d rows, the step %d",
                      l, sh->sel_from.layer, sh->sel_from.step, sh->sel_s, s);
    int32_t *csel = as_run_shape(run, AS_T_CSEL, 2, s, sh->sel_k, 0);
    if (!csel)
        return -1;
    memcpy(csel, sh->sel, sizeof(int32_t) * (size_t)s * sh->sel_k);
    run->k = sh->sel_k;
    run->sel_from = sh->sel_from;
    return 0;
}

/* Step 5e: the new latents rotated, fp4-e4m3 quantised, written at row start_pos / r. */
static int store_latents(const AsRefModel *rm, AsRefState *st, int l, int step, const int *lpos, int start_pos,
                         AsRun *run)
{
    const AsConfig *cfg = &rm->m->cfg;
    AsRefLayerState *ls = &st->layer[l];
    int n = run->n_new, hd = cfg->head_dim, r = cfg->role[l].ratio;
    float *pre = as_run_shape(run, AS_T_LATENT_PRE, 2, n, hd, 0);
    float *lq = as_run_shape(run, AS_T_LATENT_Q, 2, n, hd, 0);
    if (!pre || !lq)
        return -1;
    memcpy(pre, run->t[AS_T_LATENT].data, ROW((size_t)n * hd));
    as_rope_rows(pre, n, hd, hd, lpos, &rm->rope_yarn, false);
    memcpy(lq, pre, ROW((size_t)n * hd));
    as_fp4_quant_e4m3(lq, (int64_t)n * hd, AS_FP4_E4M3_BLOCK);
    if (rm->fault == AS_FAULT_FP4_SCALE)
        for (int64_t i = 0; i < (int64_t)n * hd; i++)
            lq[i] *= 2.0f;
    int row0 = start_pos / r;
    memcpy(ls->ccache + (size_t)row0 * hd, lq, ROW((size_t)n * hd));
    if (row0 + n > ls->ccache_rows)
        ls->ccache_rows = row0 + n;
    st->shared.compress_kv = ls->ccache;
    st->shared.compress_kv_cap = ls->cap;
    st->shared.compress_kv_from = (AsProvenance){l, step};
    return 0;
}

/* Step 5 for ratio > 0: compressor, publication, indexer or reuse, cache write. */
static int compressed_branch(const AsRefModel *rm, AsRefState *st, int l, int step, const float *x, int s,
                             int start_pos, AsRun *run, AsError *err)
{
    const AsConfig *cfg = &rm->m->cfg;
    const AsLayerRole *role = &cfg->role[l];
    const AsLayerWeights *w = &rm->m->layer[l];
    AsRefLayerState *ls = &st->layer[l];
    int hd = cfg->head_dim, r = role->ratio;
    int compress_len = (start_pos + s) / r;
    int *lpos = NULL;
    int rc = 0;
    run->compress_len = compress_len;

    if (role->kv_source) {
        int most = r == 1 ? s : (start_pos == 0 ? s / r : 1);
        float *latent = as_run_shape(run, AS_T_LATENT, 2, most, hd, 0);
        lpos = malloc(sizeof(int) * (size_t)(most + 1));
        if (!latent || !lpos)
            goto oom;
        int n = r == 1 ? as_compress_ratio1(x, s, w->c_wkv, rm->c_norm[l], cfg->norm_eps, hd, start_pos, latent, lpos)
                       : as_compress_pooled(x, s, r, w->c_wkv, w->c_wgate, rm->c_norm[l], cfg->norm_eps, hd,
                                            start_pos, ls->part_kv, ls->part_sc, latent, lpos);
        if (n < 0)
            goto oom;
        run->t[AS_T_LATENT].shape[0] = n;
        run->n_new = n;
        if (start_pos / r + n > ls->cap) {
            free(lpos);
            return as_err(err, AS_EREFUSED, "layer %d: compressed cache full (%d rows, max_seq %d)", l, ls->cap,
                          cfg->max_seq);
        }
        /* 5b: published even when no group completed */
        st->shared.compress_kv = ls->ccache;
        st->shared.compress_kv_cap = ls->cap;
        st->shared.compress_kv_from = (AsProvenance){l, step};
    }

    if (role->index_source && compress_len > 0) {
        if (role->key_owner && run->n_new > 0 && publish_index_keys(rm, st, l, step, lpos, start_pos, run))
            goto oom;
        if ((rc = run_indexer(rm, st, l, step, x, s, start_pos, compress_len, run, err)))
            goto out;
    } else if (role->index_source) {
        /* compress_len == 0: the indexer does not run and the selection published is empty ([s][0]),
         * so the layers reusing it attend no compressed position (model.py's _compress_topk_idxs) */
        int32_t *empty = malloc(sizeof(int32_t));
        if (!empty || !as_run_shape(run, AS_T_CSEL, 2, s, 0, 0)) {
            free(empty);
            goto oom;
        }
        publish_selection(&st->shared, empty, s, 0, l, step, run);
    } else if ((rc = reuse_selection(&st->shared, l, s, run, err))) {
        goto out;
    }

    if (role->kv_source && run->n_new > 0 && store_latents(rm, st, l, step, lpos, start_pos, run))
        goto oom;

    /* 5f: rows_b from the shared compressed cache */
    const AsRefShared *sh = &st->shared;
    if (!sh->compress_kv) {
        rc = as_err(err, AS_EREFUSED, "layer %d (ratio %d): no compressed cache has been published: it must not attend",
                    l, r);
        goto out;
    }
    if (compress_len > sh->compress_kv_cap) {
        rc = as_err(err, AS_EREFUSED, "layer %d: compress_len %d exceeds the %d rows of layer %d's cache", l,
                    compress_len, sh->compress_kv_cap, sh->compress_kv_from.layer);
        goto out;
    }
    float *rows_b = as_run_shape(run, AS_T_ROWS_B, 2, compress_len, hd, 0);
    if (!rows_b)
        goto oom;
    memcpy(rows_b, sh->compress_kv, ROW((size_t)compress_len * hd));
    run->rows_b_len = compress_len;
    run->rows_b_from = sh->compress_kv_from;
out:
    free(lpos);
    return rc;
oom:
    free(lpos);
    return as_err(err, AS_ERUNTIME, "layer %d: out of memory in the compressed branch (s %d)", l, s);
}

/* idx = widx followed by the compressed selection; every entry must name an attended row. */
static int build_idx(int l, int s, AsRun *run, AsError *err)
{
    int cols = run->cols, k = run->k, topk = cols + k;
    int nrows = run->rows_a_len + run->rows_b_len;
    int32_t *idx = as_run_shape(run, AS_T_IDX, 2, s, topk, 0);
    if (!idx)
        return as_err(err, AS_ERUNTIME, "layer %d: out of memory for idx", l);
    const int32_t *widx = run->t[AS_T_WIDX].data;
    const int32_t *csel = k ? run->t[AS_T_CSEL].data : NULL;
    for (int t = 0; t < s; t++) {
        memcpy(idx + (size_t)t * topk, widx + (size_t)t * cols, sizeof(int32_t) * (size_t)cols);
        if (k)
            memcpy(idx + (size_t)t * topk + cols, csel + (size_t)t * k, sizeof(int32_t) * (size_t)k);
    }
    for (int64_t i = 0; i < (int64_t)s * topk; i++)
        if (idx[i] >= nrows)
            return as_err(err, AS_EREFUSED,
                          "layer %d: selection entry %d (token %ld) names a row beyond the %d attended rows "
                          "(selection published by layer %d, step %d)",
                          l, idx[i], (long)(i / topk), nrows, run->sel_from.layer, run->sel_from.step);
    run->topk = topk;
    return 0;
}

/* Steps 7-9: sparse attention with the sink, inverse rotation, grouped wo_a, wo_b. */
int as_ref_attend(const AsRefModel *rm, int l, const float *q, const float *rows_a, int na, const float *rows_b,
                  int nb, const int32_t *idx, int topk, int s, float *o)
{
    const AsConfig *cfg = &rm->m->cfg;
    int hd = cfg->head_dim;
    float *rows = malloc(ROW((size_t)(na + nb) * hd + 1));
    if (!rows)
        return -1;
    memcpy(rows, rows_a, ROW((size_t)na * hd));
    if (nb)
        memcpy(rows + (size_t)na * hd, rows_b, ROW((size_t)nb * hd));
    as_sparse_attention(q, rows, na + nb, idx, topk, rm->fault == AS_FAULT_SINK_IGNORED ? rm->no_sink : rm->sink[l], o,
                        s, cfg->n_heads, hd, (float)(1.0 / sqrt((double)hd)));
    free(rows);
    return 0;
}

void as_ref_rotate_back(const AsRefModel *rm, int l, const float *o, int s, int start_pos, float *o_back)
{
    const AsConfig *cfg = &rm->m->cfg;
    memcpy(o_back, o, ROW((size_t)s * cfg->n_heads * cfg->head_dim));
    as_rope_heads(o_back, s, cfg->n_heads, cfg->head_dim, start_pos,
                  cfg->role[l].ratio == 0 ? &rm->rope_plain : &rm->rope_yarn, true);
}

int as_ref_project_out(const AsRefModel *rm, int l, const float *o_back, int s, float *og, float *out)
{
    const AsConfig *cfg = &rm->m->cfg;
    const AsLayerWeights *w = &rm->m->layer[l];
    int nh = cfg->n_heads, hd = cfg->head_dim, G = cfg->o_groups, olr = cfg->o_lora_rank, gw = cfg->gw;
    float *slice = malloc(ROW((size_t)s * gw));
    if (!slice)
        return -1;
    for (int g = 0; g < G; g++) {
        for (int t = 0; t < s; t++)
            memcpy(slice + (size_t)t * gw, o_back + (size_t)t * nh * hd + (size_t)g * gw, ROW(gw));
        as_linear_rows(slice, s, w->wo_a, (int64_t)g * olr, olr, og + (size_t)g * olr, (int64_t)G * olr, true);
    }
    free(slice);
    if (out)
        as_ref_project_wo_b(rm, l, og, s, out);
    return 0;
}

void as_ref_project_wo_b(const AsRefModel *rm, int l, const float *og, int s, float *out)
{
    project(rm, og, s, rm->m->layer[l].wo_b, out);
}

/* Steps 7-9: sparse attention with the sink, inverse rotation, grouped wo_a, wo_b. */
static int attend_and_project(const AsRefModel *rm, int l, int s, int start_pos, AsRun *run)
{
    const AsConfig *cfg = &rm->m->cfg;
    int nh = cfg->n_heads, hd = cfg->head_dim;
    float *o = as_run_shape(run, AS_T_O, 3, s, nh, hd);
    float *ob = as_run_shape(run, AS_T_O_BACK, 3, s, nh, hd);
    float *og = as_run_shape(run, AS_T_OG, 3, s, cfg->o_groups, cfg->o_lora_rank);
    float *out = as_run_shape(run, AS_T_OUT, 2, s, cfg->dim, 0);
    if (!o || !ob || !og || !out)
        return -1;
    if (as_ref_attend(rm, l, run->t[AS_T_Q].data, run->t[AS_T_ROWS_A].data, run->rows_a_len,
                      run->rows_b_len ? run->t[AS_T_ROWS_B].data : NULL, run->rows_b_len, run->t[AS_T_IDX].data,
                      run->topk, s, o))
        return -1;
    as_ref_rotate_back(rm, l, o, s, start_pos, ob);
    return as_ref_project_out(rm, l, ob, s, og, out);
}

int as_ref_layer_forward(const AsRefModel *rm, AsRefState *st, int l, int step, const float *x, int start_pos,
                         int s, AsRun *run, AsError *err)
{
    const AsConfig *cfg = &rm->m->cfg;
    if (l < 0 || l >= cfg->n_layers)
        return as_err(err, AS_EBADINPUT, "layer %d out of range (0..%d)", l, cfg->n_layers - 1);
    if (s < 1 || start_pos < 0 || (start_pos > 0 && s != 1))
        return as_err(err, AS_EBADINPUT, "layer %d: a step is a prefill (start_pos 0, s >= 1) or a decode of one "
                      "token, not start_pos %d with s %d", l, start_pos, s);
    if (start_pos + s > cfg->max_seq)
        return as_err(err, AS_EREFUSED, "layer %d: position %d beyond max_seq %d", l, start_pos + s - 1,
                      cfg->max_seq);
    const AsLayerRole *role = &cfg->role[l];
    const AsRopeTable *rope = role->ratio == 0 ? &rm->rope_plain : &rm->rope_yarn;
    as_run_free(run);
    run->layer = l;
    run->step = step;
    run->start_pos = start_pos;
    run->s = s;
    run->ratio = role->ratio;

    float *xc = as_run_shape(run, AS_T_X, 2, s, cfg->dim, 0);
    if (!xc || project_q_kv(rm, l, x, s, rope, start_pos, run) || window_step(rm, &st->layer[l], s, start_pos, run))
        return as_err(err, AS_ERUNTIME, "layer %d: out of memory (s %d)", l, s);
    memcpy(xc, x, ROW((size_t)s * cfg->dim));
    int rc;
    if (role->ratio > 0 && (rc = compressed_branch(rm, st, l, step, x, s, start_pos, run, err)))
        return rc;
    if ((rc = build_idx(l, s, run, err)))
        return rc;
    if (attend_and_project(rm, l, s, start_pos, run) || snapshot_state(cfg, role, &st->layer[l], run))
        return as_err(err, AS_ERUNTIME, "layer %d: out of memory (s %d)", l, s);
    return 0;
}
