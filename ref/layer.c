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
#include "ref/plan.h"
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
        ls->cap = as_plan_cache_rows(cfg, l);
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
    sh->sel = NULL;
    sh->cand = NULL;
    as_shared_prov_init(&sh->prov);
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
static int window_step(const AsRefModel *rm, AsRefLayerState *ls, const AsLayerPlan *p, AsRun *run)
{
    const AsConfig *cfg = &rm->m->cfg;
    int hd = cfg->head_dim, win = cfg->window, s = p->s;
    const float *kv = run->t[AS_T_KV].data;
    float *rows_a = as_run_shape(run, AS_T_ROWS_A, 2, p->rows_a_len, hd, 0);
    int32_t *widx = as_run_shape(run, AS_T_WIDX, 2, s, p->cols, 0);
    if (!rows_a || !widx)
        return -1;
    if (p->prefill) {
        as_window_store_prefill(ls->ring, win, hd, kv, s);
        memcpy(rows_a, kv, ROW((size_t)s * hd));
        as_window_select_prefill(widx, s, win);
    } else {
        as_window_store_decode(ls->ring, win, hd, kv, p->start_pos + (rm->fault == AS_FAULT_RING_SLOT));
        memcpy(rows_a, ls->ring, ROW((size_t)win * hd));
        as_window_select_decode(widx, win, p->start_pos);
    }
    return 0;
}

/* Step 5a: the compressor's latents (pre-RoPE) and their positions; -1 when out of memory. */
static int compress(const AsRefModel *rm, AsRefLayerState *ls, const AsLayerPlan *p, const float *x, int *lpos,
                    AsRun *run, AsError *err)
{
    const AsConfig *cfg = &rm->m->cfg;
    const AsLayerWeights *w = &rm->m->layer[p->layer];
    int hd = cfg->head_dim, r = p->ratio, s = p->s;
    float *latent = as_run_shape(run, AS_T_LATENT, 2, p->n_new, hd, 0);
    if (!latent)
        return -1;
    int n = r == 1 ? as_compress_ratio1(x, s, w->c_wkv, rm->c_norm[p->layer], cfg->norm_eps, hd, p->start_pos, latent,
                                        lpos)
                   : as_compress_pooled(x, s, r, w->c_wkv, w->c_wgate, rm->c_norm[p->layer], cfg->norm_eps, hd,
                                        p->start_pos, ls->part_kv, ls->part_sc, latent, lpos);
    if (n < 0)
        return -1;
    if (n != p->n_new)
        return as_err(err, AS_ERUNTIME, "layer %d: the compressor completed %d latents, the plan %d", p->layer, n,
                      p->n_new);
    return 0;
}

/* Step 5c, key owners with new latents: index keys written to the layer's cache (published by the plan). */
static int store_index_keys(const AsRefModel *rm, AsRefLayerState *ls, const AsLayerPlan *p, const int *lpos,
                            AsRun *run)
{
    const AsConfig *cfg = &rm->m->cfg;
    const AsLayerWeights *w = &rm->m->layer[p->layer];
    int n = p->n_new, ihd = cfg->index_head_dim;
    float *ik_pre = as_run_shape(run, AS_T_IK_PRE, 2, n, ihd, 0);
    float *ik = as_run_shape(run, AS_T_IK, 2, n, ihd, 0);
    if (!ik_pre || !ik)
        return -1;
    as_linear(run->t[AS_T_LATENT].data, n, w->i_wk, ik_pre, true);
    as_rmsnorm(ik_pre, rm->k_norm[p->layer], ik_pre, n, ihd, cfg->norm_eps);
    as_rope_rows(ik_pre, n, ihd, ihd, lpos, &rm->rope_yarn, false);
    memcpy(ik, ik_pre, ROW((size_t)n * ihd));
    as_fp4_quant_e8m0(ik, (int64_t)n * ihd, AS_FP4_E8M0_BLOCK);
    if (!(rm->fault == AS_FAULT_STALE_KEYS && !p->prefill))
        memcpy(ls->ikcache + (size_t)p->cache_row0 * ihd, ik, ROW((size_t)n * ihd));
    if (p->cache_row0 + n > ls->ikcache_rows)
        ls->ikcache_rows = p->cache_row0 + n;
    return 0;
}

/* The candidate source's mask of its scores, published (a copy) into the shared state. */
static int make_candidates(const AsRefModel *rm, AsRefShared *sh, const AsLayerPlan *p, const int *clens,
                           AsRun *run)
{
    const AsConfig *cfg = &rm->m->cfg;
    int s = p->s, width = p->width;
    uint8_t *cand = as_run_shape(run, AS_T_CAND, 2, s, width, 0);
    uint8_t *pub = malloc((size_t)s * width + 1);
    if (!cand || !pub || as_select_candidate_blocks(run->t[AS_T_ISCORE].data, s, width, clens,
                                                    cfg->candidate_block_size, cfg->candidate_topk_blocks, cand)) {
        free(pub);
        return -1;
    }
    memcpy(pub, cand, (size_t)s * width);
    free(sh->cand);
    sh->cand = pub;
    return 0;
}

/* A candidate user's scores where the shared mask is false become -inf. */
static int apply_candidates(const AsRefShared *sh, const AsLayerPlan *p, AsRun *run)
{
    const int64_t n = (int64_t)p->s * p->width;
    uint8_t *cand = as_run_shape(run, AS_T_CAND, 2, p->s, p->width, 0);
    if (!cand)
        return -1;
    memcpy(cand, sh->cand, (size_t)n);
    float *score = run->t[AS_T_ISCORE].data;
    for (int64_t i = 0; i < n; i++)
        if (!cand[i])
            score[i] = -INFINITY;
    return 0;
}

/* The shared selection becomes sel ([s][k], owned by the shared state from here). */
static void publish_selection(AsRefShared *sh, int32_t *sel)
{
    free(sh->sel);
    sh->sel = sel;
}

/* Step 5c: the indexer's queries, scores against the keys the plan names, masks and top-k; publishes
 * the selection (and, the candidate source, its mask). -1 when out of memory. */
static int run_indexer(const AsRefModel *rm, AsRefState *st, const AsLayerPlan *p, const float *x, AsRun *run)
{
    const AsConfig *cfg = &rm->m->cfg;
    const AsLayerWeights *w = &rm->m->layer[p->layer];
    AsRefShared *sh = &st->shared;
    int s = p->s, nhi = cfg->index_n_heads, ihd = cfg->index_head_dim, width = p->width, k = p->k;
    const float *index_k = st->layer[p->keys_from.layer].ikcache;
    float *keys = as_run_shape(run, AS_T_KEYS, 2, width, ihd, 0);
    float *iq_pre = as_run_shape(run, AS_T_IQ_PRE, 3, s, nhi, ihd);
    float *iq = as_run_shape(run, AS_T_IQ, 3, s, nhi, ihd);
    float *wt = as_run_shape(run, AS_T_W, 2, s, nhi, 0);
    float *score = as_run_shape(run, AS_T_ISCORE, 2, s, width, 0);
    int32_t *csel = as_run_shape(run, AS_T_CSEL, 2, s, k, 0);
    int *clens = malloc(sizeof(int) * (size_t)s);
    int32_t *sel = malloc(sizeof(int32_t) * (size_t)s * k + 1);
    int rc = -1;
    if (!keys || !iq_pre || !iq || !wt || !score || !csel || !clens || !sel)
        goto out;
    memcpy(keys, index_k, ROW((size_t)width * ihd));
    project(rm, run->t[AS_T_QR].data, s, w->i_wq_b, iq_pre);
    as_rope_heads(iq_pre, s, nhi, ihd, p->start_pos, &rm->rope_yarn, false);
    memcpy(iq, iq_pre, ROW((size_t)s * nhi * ihd));
    as_fp4_quant_e8m0(iq, (int64_t)s * nhi * ihd, AS_FP4_E8M0_BLOCK);
    as_linear(x, s, w->i_weights_proj, wt, true);
    as_index_weights_scale(wt, s, nhi, ihd);
    if (as_index_scores(iq, index_k, wt, s, nhi, ihd, width, score))
        goto out;
    for (int t = 0; t < s; t++)
        clens[t] = p->prefill ? (t + 1) / p->ratio : width;
    as_index_visibility(score, s, width, clens);
    if ((p->makes_cand && make_candidates(rm, sh, p, clens, run)) || (p->applies_cand && apply_candidates(sh, p, run)))
        goto out;
    if (as_index_topk(score, s, width, k, clens, p->sel_offset, sel))
        goto out;
    memcpy(csel, sel, sizeof(int32_t) * (size_t)s * k);
    publish_selection(sh, sel);
    sel = NULL;
    rc = 0;
out:
    free(sel);
    free(clens);
    return rc;
}

/* Step 5d: a layer that is no index source uses what the latest index source published, unchanged
 * (the stale-selection quirk included). */
static int reuse_selection(const AsRefShared *sh, const AsLayerPlan *p, AsRun *run)
{
    int32_t *csel = as_run_shape(run, AS_T_CSEL, 2, p->s, p->k, 0);
    if (!csel)
        return -1;
    if (p->k)
        memcpy(csel, sh->sel, sizeof(int32_t) * (size_t)p->s * p->k);
    return 0;
}

/* Step 5e: the new latents rotated, fp4-e4m3 quantised, written at row start_pos / r. */
static int store_latents(const AsRefModel *rm, AsRefLayerState *ls, const AsLayerPlan *p, const int *lpos,
                         AsRun *run)
{
    const AsConfig *cfg = &rm->m->cfg;
    int n = p->n_new, hd = cfg->head_dim;
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
    memcpy(ls->ccache + (size_t)p->cache_row0 * hd, lq, ROW((size_t)n * hd));
    if (p->cache_row0 + n > ls->ccache_rows)
        ls->ccache_rows = p->cache_row0 + n;
    return 0;
}

/* Step 5f: rows_b, the first compress_len rows of the compressed cache the plan names. */
static int gather_rows_b(const AsRefState *st, const AsLayerPlan *p, int hd, AsRun *run)
{
    float *rows_b = as_run_shape(run, AS_T_ROWS_B, 2, p->rows_b_len, hd, 0);
    if (!rows_b)
        return -1;
    memcpy(rows_b, st->layer[p->rows_b_from.layer].ccache, ROW((size_t)p->rows_b_len * hd));
    return 0;
}

/* Step 5 for ratio > 0, as the plan says: compressor, indexer (or an empty selection, or reuse), cache
 * write, rows_b. */
static int compressed_branch(const AsRefModel *rm, AsRefState *st, const AsLayerPlan *p, const float *x, AsRun *run,
                             AsError *err)
{
    AsRefLayerState *ls = &st->layer[p->layer];
    int *lpos = malloc(sizeof(int) * (size_t)(p->n_new + 1));
    int rc = lpos ? 0 : -1;
    if (!rc && p->compresses)
        rc = compress(rm, ls, p, x, lpos, run, err);
    if (!rc && p->stores_keys)
        rc = store_index_keys(rm, ls, p, lpos, run);
    if (!rc && p->indexes)
        rc = run_indexer(rm, st, p, x, run);
    else if (!rc && p->reuses)
        rc = reuse_selection(&st->shared, p, run);
    else if (!rc && !as_run_shape(run, AS_T_CSEL, 2, p->s, 0, 0))
        rc = -1;
    if (!rc && p->stores_latents)
        rc = store_latents(rm, ls, p, lpos, run);
    if (!rc)
        rc = gather_rows_b(st, p, rm->m->cfg.head_dim, run);
    free(lpos);
    if (rc == -1)
        return as_err(err, AS_ERUNTIME, "layer %d: out of memory in the compressed branch (s %d)", p->layer, p->s);
    return rc;
}

/* idx = widx followed by the compressed selection; every entry must name an attended row (a selection
 * published by another step or layer kind may not: refused, SPEC 3.6). */
static int build_idx(const AsLayerPlan *p, AsRun *run, AsError *err)
{
    int s = p->s, cols = p->cols, k = p->k, topk = p->topk;
    int nrows = p->rows_a_len + p->rows_b_len;
    int32_t *idx = as_run_shape(run, AS_T_IDX, 2, s, topk, 0);
    if (!idx)
        return as_err(err, AS_ERUNTIME, "layer %d: out of memory for idx", p->layer);
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
                          p->layer, idx[i], (long)(i / topk), nrows, p->sel_from.layer, p->sel_from.step);
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
    AsLayerPlan p;
    AsSharedProv after;
    int rc = as_plan_layer(cfg, l, step, start_pos, s, &st->shared.prov, rm->fault, &p, &after, err);
    if (rc)
        return rc;
    const AsRopeTable *rope = p.ratio == 0 ? &rm->rope_plain : &rm->rope_yarn;
    as_run_free(run);
    as_plan_to_run(&p, run);

    float *xc = as_run_shape(run, AS_T_X, 2, s, cfg->dim, 0);
    if (!xc || project_q_kv(rm, l, x, s, rope, start_pos, run) || window_step(rm, &st->layer[l], &p, run))
        return as_err(err, AS_ERUNTIME, "layer %d: out of memory (s %d)", l, s);
    memcpy(xc, x, ROW((size_t)s * cfg->dim));
    if (p.ratio > 0 && (rc = compressed_branch(rm, st, &p, x, run, err)))
        return rc;
    st->shared.prov = after;
    if ((rc = build_idx(&p, run, err)))
        return rc;
    if (attend_and_project(rm, l, s, start_pos, run) || snapshot_state(cfg, &cfg->role[l], &st->layer[l], run))
        return as_err(err, AS_ERUNTIME, "layer %d: out of memory (s %d)", l, s);
    return 0;
}
