/* attention(x, start_pos) of one layer, SPEC section 3, step by step. Each step writes its
 * result straight into the run (the run's tensors are the working buffers), so what the
 * driver diffs is exactly what the next step consumed. */
#include "ref/layer.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "model/precision.h"
#include "ref/cancel.h"
#include "ref/compressor.h"
#include "ref/plan.h"
#include "ref/stage.h"

#define ROW(n) (sizeof(float) * (size_t)(n))

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

/* Step 5a: the compressor's latents (pre-RoPE) and their positions; -1 when out of memory. */
static int compress(const AsRefModel *rm, AsRefLayerState *ls, const AsLayerPlan *p, const float *x, AsRun *run,
                    AsError *err)
{
    const AsConfig *cfg = &rm->m->cfg;
    const AsLayerWeights *w = &rm->m->layer[p->layer];
    int hd = cfg->head_dim, r = p->ratio, s = p->s;
    float *latent = as_run_shape(run, AS_T_LATENT, 2, p->n_new, hd, 0);
    int *lpos = malloc(sizeof(int) * (size_t)(p->n_new + 1));
    if (!latent || !lpos) {
        free(lpos);
        return -1;
    }
    int n = r == 1 ? as_compress_ratio1(x, s, w->c_wkv, rm->c_norm[p->layer], cfg->norm_eps, hd, p->start_pos, latent,
                                        lpos)
                   : as_compress_pooled(x, s, r, w->c_wkv, w->c_wgate, rm->c_norm[p->layer], cfg->norm_eps, hd,
                                        p->start_pos, ls->part_kv, ls->part_sc, latent, lpos);
    free(lpos); /* the plan has the positions too (ref/stage.c rotates at them) */
    if (n < 0)
        return -1;
    if (n != p->n_new)
        return as_err(err, AS_ERUNTIME, "layer %d: the compressor completed %d latents, the plan %d", p->layer, n,
                      p->n_new);
    return 0;
}

/* Step 5c, key owners with new latents: index keys written to the layer's cache (published by the plan). */
static int store_index_keys(const AsStageCtx *c, AsRefLayerState *ls, AsRun *run)
{
    const AsLayerPlan *p = c->p;
    int n = p->n_new, ihd = c->rm->m->cfg.index_head_dim;
    if (as_stage_ik(c, run))
        return -1;
    if (as_stage_keys_written(c))
        memcpy(ls->ikcache + (size_t)p->cache_row0 * ihd, run->t[AS_T_IK].data, ROW((size_t)n * ihd));
    if (p->cache_row0 + n > ls->ikcache_rows)
        ls->ikcache_rows = p->cache_row0 + n;
    return 0;
}

/* The shared selection becomes sel ([s][k], owned by the shared state from here). */
static void publish_selection(AsRefShared *sh, int32_t *sel)
{
    free(sh->sel);
    sh->sel = sel;
}

/* A copy of n bytes (at least one allocated); NULL when out of memory. */
static void *dup_bytes(const void *src, size_t n)
{
    void *d = malloc(n + 1);
    if (d && n)
        memcpy(d, src, n);
    return d;
}

/* Step 5c: the indexer's queries, scores against the keys the plan names, masks and top-k; publishes
 * the selection (and, the candidate source, its mask). -1 when out of memory. */
static int run_indexer(const AsStageCtx *c, AsRefState *st, AsRun *run)
{
    const AsLayerPlan *p = c->p;
    AsRefShared *sh = &st->shared;
    int s = p->s, ihd = c->rm->m->cfg.index_head_dim, width = p->width;
    float *keys = as_run_shape(run, AS_T_KEYS, 2, width, ihd, 0);
    if (!keys)
        return -1;
    memcpy(keys, st->layer[p->keys_from.layer].ikcache, ROW((size_t)width * ihd));
    if (as_stage_iq(c, run) || as_stage_w(c, run) || as_stage_scores(c, sh->cand, run) || as_stage_csel(c, run))
        return -1;
    if (p->makes_cand) {
        uint8_t *pub = dup_bytes(run->t[AS_T_CAND].data, (size_t)s * width);
        if (!pub)
            return -1;
        free(sh->cand);
        sh->cand = pub;
    }
    int32_t *sel = dup_bytes(run->t[AS_T_CSEL].data, sizeof(int32_t) * (size_t)s * p->k);
    if (!sel)
        return -1;
    publish_selection(sh, sel);
    return 0;
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
static int store_latents(const AsStageCtx *c, AsRefLayerState *ls, AsRun *run)
{
    const AsLayerPlan *p = c->p;
    int n = p->n_new, hd = c->rm->m->cfg.head_dim;
    if (as_stage_latent(c, run))
        return -1;
    memcpy(ls->ccache + (size_t)p->cache_row0 * hd, run->t[AS_T_LATENT_Q].data, ROW((size_t)n * hd));
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

/* A stage's end: its out-of-memory failure, else a cancel its loops saw. A cancelled layer stops at the
 * stage boundary: the stages left would only write zeros into memory they first fault in, most of a
 * second at flash size. */
static int stage_end(bool failed, int l, AsError *err)
{
    if (failed)
        return as_err(err, AS_ERUNTIME, "layer %d: out of memory", l);
    return as_ref_cancelled() ? as_err(err, AS_ECANCELLED, "layer %d: cancelled", l) : 0;
}

/* Step 5 for ratio > 0, as the plan says: compressor, indexer (or an empty selection, or reuse), cache
 * write, rows_b. */
static int compressed_branch(const AsStageCtx *c, AsRefState *st, const float *x, AsRun *run, AsError *err)
{
    const AsLayerPlan *p = c->p;
    AsRefLayerState *ls = &st->layer[p->layer];
    int rc = 0;
    if (p->compresses && !(rc = compress(c->rm, ls, p, x, run, err)))
        rc = stage_end(false, p->layer, err);
    if (!rc && p->stores_keys)
        rc = store_index_keys(c, ls, run);
    if (!rc && p->indexes && !(rc = run_indexer(c, st, run)))
        rc = stage_end(false, p->layer, err);
    else if (!rc && p->reuses)
        rc = reuse_selection(&st->shared, p, run);
    else if (!rc && !as_run_shape(run, AS_T_CSEL, 2, p->s, 0, 0))
        rc = -1;
    if (!rc && p->stores_latents)
        rc = store_latents(c, ls, run);
    if (!rc)
        rc = gather_rows_b(st, p, c->rm->m->cfg.head_dim, run);
    if (rc == -1)
        return as_err(err, AS_ERUNTIME, "layer %d: out of memory in the compressed branch (s %d)", p->layer, p->s);
    return rc;
}

/* idx = widx followed by the compressed selection; every entry must name an attended row (a selection
 * published by another step or layer kind may not: refused, SPEC 3.6). */
static int build_idx(const AsStageCtx *c, AsRun *run, AsError *err)
{
    const AsLayerPlan *p = c->p;
    if (as_stage_idx(c, run))
        return as_err(err, AS_ERUNTIME, "layer %d: out of memory for idx", p->layer);
    const int32_t *idx = run->t[AS_T_IDX].data;
    const int nrows = p->rows_a_len + p->rows_b_len, topk = p->topk;
    for (int64_t i = 0; i < (int64_t)p->s * topk; i++)
        if (idx[i] >= nrows)
            return as_err(err, AS_EREFUSED,
                          "layer %d: selection entry %d (token %ld) names a row beyond the %d attended rows "
                          "(selection published by layer %d, step %d)",
                          p->layer, idx[i], (long)(i / topk), nrows, p->sel_from.layer, p->sel_from.step);
    return 0;
}

int as_ref_attend(const AsRefModel *rm, int l, const float *q, const float *rows_a, int na, const float *rows_b,
                  int nb, const int32_t *idx, int topk, int s, float *o)
{
    return as_stage_attend(rm, l, as_ref_convention(rm), q, rows_a, na, rows_b, nb, idx, topk, s, o);
}

void as_ref_rotate_back(const AsRefModel *rm, int l, const float *o, int s, int start_pos, float *o_back)
{
    as_stage_rotate_back(rm, l, as_ref_convention(rm), o, s, start_pos, o_back);
}

int as_ref_project_out(const AsRefModel *rm, int l, const float *o_back, int s, float *og, float *out)
{
    if (as_stage_project_out(rm, l, o_back, s, og))
        return -1;
    if (out)
        as_ref_project_wo_b(rm, l, og, s, out);
    return 0;
}

void as_ref_project_wo_b(const AsRefModel *rm, int l, const float *og, int s, float *out)
{
    as_stage_project_wo_b(rm, l, as_ref_convention(rm), og, s, out);
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
    const AsStageCtx c = {rm, &p, as_ref_convention(rm), NULL};
    as_run_free(run);
    as_plan_to_run(&p, run);

    float *xc = as_run_shape(run, AS_T_X, 2, s, cfg->dim, 0);
    if (!xc)
        return as_err(err, AS_ERUNTIME, "layer %d: out of memory (s %d)", l, s);
    memcpy(xc, x, ROW((size_t)s * cfg->dim));
    if ((rc = stage_end(as_stage_qr(&c, run), l, err)) || (rc = stage_end(as_stage_q(&c, run), l, err)) ||
        (rc = stage_end(as_stage_kv(&c, run) || as_stage_window(&c, st->layer[l].ring, run), l, err)))
        return rc;
    if (p.ratio > 0 && (rc = compressed_branch(&c, st, x, run, err)))
        return rc;
    st->shared.prov = after;
    if ((rc = build_idx(&c, run, err)))
        return rc;
    if ((rc = stage_end(as_stage_o(&c, run), l, err)) || (rc = stage_end(as_stage_o_back(&c, run), l, err)) ||
        (rc = stage_end(as_stage_og(&c, run), l, err)))
        return rc;
    return stage_end(as_stage_out(&c, run) || snapshot_state(cfg, &cfg->role[l], &st->layer[l], run), l, err);
}
