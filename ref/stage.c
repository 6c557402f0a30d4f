/* The stages of ref/stage.h: SPEC 3's steps with their roundings explicit, and each convention a flag of
 * the step it bends (chosen here from the convention, never from anything global). */
#include "ref/stage.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "model/precision.h"
#include "ref/attention.h"
#include "ref/candidates.h"
#include "ref/fp8_linear.h"
#include "ref/indexer.h"
#include "ref/linear.h"
#include "ref/quant.h"
#include "ref/rmsnorm.h"
#include "ref/window.h"

#define ROW(n) (sizeof(float) * (size_t)(n))

AsConvention as_ref_convention(const AsRefModel *rm)
{
    return rm->conv != AS_CONV_NONE ? rm->conv : as_conv_of_fault(rm->fault);
}

static const AsConfig *config(const AsStageCtx *c) { return &c->rm->m->cfg; }
static const AsLayerWeights *weights(const AsStageCtx *c) { return &c->rm->m->layer[c->p->layer]; }

/* ---- the projections ---- */

/* How an fp8 projection reads its weight's scales under a convention. */
static AsFp8Way fp8_way(AsConvention conv, const AsWTensor *w)
{
    AsFp8Way way = {0, conv == AS_CONV_E8M0_AS_F32};
    if (conv == AS_CONV_FP8_SCALE_32_AS_128 && w->block == 32)
        way.block_as = 128;
    if (conv == AS_CONV_FP8_SCALE_128_AS_32 && w->block == 128)
        way.block_as = 32;
    return way;
}

/* One of the five fp8 projections (wq_a, wq_b, wkv, wo_b, indexer.wq_b): the fp8 linear in fp8 precision,
 * else (and under bf16-no-act-quant) the bf16 linear (model/precision.h). */
static void project(const AsRefModel *rm, AsConvention conv, const float *x, int s, const AsWTensor *w, float *y)
{
    if (!as_proj_fp8(rm->m, w) || conv == AS_CONV_BF16_NO_ACT_QUANT) {
        as_linear(x, s, w, y, true);
        return;
    }
    const AsFp8Way way = fp8_way(conv, w);
    as_fp8_linear_rows_in(x, s, w, 0, -1, y, -1, &way);
}

bool as_stage_conv_projects(AsConvention conv)
{
    return conv == AS_CONV_BF16_NO_ACT_QUANT || conv == AS_CONV_FP8_SCALE_32_AS_128 ||
           conv == AS_CONV_FP8_SCALE_128_AS_32 || conv == AS_CONV_E8M0_AS_F32;
}

/* Whether one of the layer's fp8 projections has fp8 weights this convention reads differently. */
static bool fp8_weight_read_differently(const AsRefModel *rm, int layer, AsConvention conv)
{
    const AsLayerWeights *w = &rm->m->layer[layer];
    const AsWTensor *proj[] = {w->wq_a, w->wq_b, w->wkv, w->wo_b, w->i_wq_b};
    for (size_t i = 0; i < sizeof proj / sizeof proj[0]; i++) {
        const AsWTensor *t = proj[i];
        if (!t || !as_proj_fp8(rm->m, t))
            continue;
        const AsFp8Way way = fp8_way(conv, t);
        if (conv == AS_CONV_BF16_NO_ACT_QUANT || way.block_as || (way.e8m0_byte && t->scale->dtype == AS_DT_F8_E8M0))
            return true;
    }
    return false;
}

bool as_stage_conv_applies(const AsRefModel *rm, int layer, AsConvention conv)
{
    const int ratio = rm->m->cfg.role[layer].ratio;
    if (as_stage_conv_projects(conv))
        return fp8_weight_read_differently(rm, layer, conv);
    if (conv == AS_CONV_NO_YARN)
        return ratio > 0;
    if (conv == AS_CONV_YARN_RATIO0)
        return ratio == 0;
    return true;
}

/* ---- RoPE ---- */

/* The channel layout a stage rotates in. */
static AsRopeLayout rope_layout(AsConvention conv, AsStageId site)
{
    switch (conv) {
    case AS_CONV_ROPE_FIRST_CHANNELS: return AS_ROPE_FIRST_PAIRS;
    case AS_CONV_ROPE_HALVES_Q: return site == AS_STG_Q ? AS_ROPE_HALVES : AS_ROPE_PAIRS;
    case AS_CONV_ROPE_HALVES_KV: return site == AS_STG_KV ? AS_ROPE_HALVES : AS_ROPE_PAIRS;
    case AS_CONV_ROPE_HALVES_LATENT: return site == AS_STG_LATENT ? AS_ROPE_HALVES : AS_ROPE_PAIRS;
    case AS_CONV_ROPE_HALVES_IK: return site == AS_STG_IK ? AS_ROPE_HALVES : AS_ROPE_PAIRS;
    case AS_CONV_ROPE_HALVES_IQ: return site == AS_STG_IQ ? AS_ROPE_HALVES : AS_ROPE_PAIRS;
    case AS_CONV_NO_INVERSE_ROPE: return site == AS_STG_O_BACK ? AS_ROPE_NONE : AS_ROPE_PAIRS;
    default: return AS_ROPE_PAIRS;
    }
}

/* The frequencies a layer of this kind rotates with: the model's own table (ratio 0: plain rope_theta;
 * ratio > 0: YaRN on compress_rope_theta), or, under a frequency convention, *tmp built for it (its
 * angles computed on the fly; NULL when out of memory). The caller frees tmp (as_rope_free). */
static const AsRopeTable *rope_table(const AsRefModel *rm, AsConvention conv, int ratio, AsRopeTable *tmp)
{
    memset(tmp, 0, sizeof *tmp);
    bool compress_theta = ratio > 0, yarn = ratio > 0;
    if (conv == AS_CONV_NO_YARN && ratio > 0)
        yarn = false;
    else if (conv == AS_CONV_YARN_RATIO0 && ratio == 0)
        yarn = true;
    else if (conv == AS_CONV_OTHER_THETA)
        compress_theta = !compress_theta;
    if (compress_theta == (ratio > 0) && yarn == (ratio > 0))
        return ratio == 0 ? &rm->rope_plain : &rm->rope_yarn;
    return as_rope_init_kind(tmp, &rm->m->cfg, 0, compress_theta, yarn) ? NULL : tmp;
}

/* Rows x[t][h][width] of the plan's tokens rotated by a stage (inverse: back). */
static int rope_heads(const AsStageCtx *c, AsStageId site, float *x, int heads, int width, bool inverse)
{
    AsRopeTable tmp;
    const AsRopeTable *t = rope_table(c->rm, c->conv, c->p->ratio, &tmp);
    if (!t)
        return -1;
    as_rope_heads_in(x, c->p->s, heads, width, c->p->start_pos, t, inverse, rope_layout(c->conv, site));
    as_rope_free(&tmp);
    return 0;
}

/* The plan's new latents (or their index keys), rows of width at their groups' positions. */
static int rope_latents(const AsStageCtx *c, AsStageId site, float *x, int width)
{
    const AsLayerPlan *p = c->p;
    int *pos = malloc(sizeof(int) * (size_t)(p->n_new + 1));
    AsRopeTable tmp;
    const AsRopeTable *t = pos ? rope_table(c->rm, c->conv, p->ratio, &tmp) : NULL;
    if (!t) {
        free(pos);
        return -1;
    }
    for (int i = 0; i < p->n_new; i++)
        pos[i] = p->latent_pos0 + i * p->latent_pos_step;
    as_rope_rows_in(x, p->n_new, width, width, pos, t, false, rope_layout(c->conv, site));
    as_rope_free(&tmp);
    free(pos);
    return 0;
}

/* ---- steps 1-3 ---- */

/* A projection the context holds, copied into y (n floats): 0; -1 when it must be computed (none held,
 * or the convention bends the projection itself). */
static int held(const AsStageCtx *c, const float *have, float *y, int64_t n)
{
    if (!have || as_stage_conv_projects(c->conv))
        return -1;
    memcpy(y, have, ROW(n));
    return 0;
}

int as_stage_proj_make(const AsRefModel *rm, const AsLayerPlan *p, const AsRun *run, AsStageProj *out)
{
    const AsConfig *cfg = &rm->m->cfg;
    const AsLayerWeights *w = &rm->m->layer[p->layer];
    const int s = p->s, hd = cfg->head_dim;
    memset(out, 0, sizeof *out);
    out->q = malloc(ROW((size_t)s * cfg->n_heads * hd));
    out->kv = malloc(ROW((size_t)s * hd));
    if (p->indexes)
        out->iq = malloc(ROW((size_t)s * cfg->index_n_heads * cfg->index_head_dim));
    if (!out->q || !out->kv || (p->indexes && !out->iq)) {
        as_stage_proj_free(out);
        return -1;
    }
    const float *x = run->t[AS_T_X].data, *qr = run->t[AS_T_QR].data;
    project(rm, AS_CONV_NONE, qr, s, w->wq_b, out->q);
    project(rm, AS_CONV_NONE, x, s, w->wkv, out->kv);
    as_rmsnorm(out->kv, rm->kv_norm[p->layer], out->kv, s, hd, cfg->norm_eps);
    if (out->iq)
        project(rm, AS_CONV_NONE, qr, s, w->i_wq_b, out->iq);
    return 0;
}

void as_stage_proj_free(AsStageProj *pj)
{
    free(pj->q), free(pj->kv), free(pj->iq);
    memset(pj, 0, sizeof *pj);
}

int as_stage_qr(const AsStageCtx *c, AsRun *run)
{
    const AsConfig *cfg = config(c);
    const int l = c->p->layer, s = c->p->s;
    float *qr = as_run_shape(run, AS_T_QR, 2, s, cfg->q_lora_rank, 0);
    if (!qr)
        return -1;
    project(c->rm, c->conv, run->t[AS_T_X].data, s, weights(c)->wq_a, qr);
    as_rmsnorm(qr, c->rm->q_norm[l], qr, s, cfg->q_lora_rank, cfg->norm_eps);
    return 0;
}

int as_stage_q(const AsStageCtx *c, AsRun *run)
{
    const AsConfig *cfg = config(c);
    float *q = as_run_shape(run, AS_T_Q, 3, c->p->s, cfg->n_heads, cfg->head_dim);
    if (!q)
        return -1;
    if (held(c, c->proj ? c->proj->q : NULL, q, (int64_t)c->p->s * cfg->n_heads * cfg->head_dim))
        project(c->rm, c->conv, run->t[AS_T_QR].data, c->p->s, weights(c)->wq_b, q);
    return rope_heads(c, AS_STG_Q, q, cfg->n_heads, cfg->head_dim, c->conv == AS_CONV_ROPE_BACKWARDS);
}

int as_stage_kv(const AsStageCtx *c, AsRun *run)
{
    const AsConfig *cfg = config(c);
    const int l = c->p->layer, s = c->p->s, hd = cfg->head_dim;
    float *kv_pre = as_run_shape(run, AS_T_KV_PRE, 2, s, hd, 0);
    float *kv = as_run_shape(run, AS_T_KV, 2, s, hd, 0);
    if (!kv_pre || !kv)
        return -1;
    if (held(c, c->proj ? c->proj->kv : NULL, kv_pre, (int64_t)s * hd)) {
        project(c->rm, c->conv, run->t[AS_T_X].data, s, weights(c)->wkv, kv_pre);
        as_rmsnorm(kv_pre, c->rm->kv_norm[l], kv_pre, s, hd, cfg->norm_eps);
    }
    if (rope_heads(c, AS_STG_KV, kv_pre, 1, hd, false))
        return -1;
    memcpy(kv, kv_pre, ROW((size_t)s * hd));
    as_fp8_quant(kv, (int64_t)s * hd, AS_FP8_BLOCK);
    return 0;
}

int as_stage_window(const AsStageCtx *c, float *ring, AsRun *run)
{
    const AsConfig *cfg = config(c);
    const AsLayerPlan *p = c->p;
    const int hd = cfg->head_dim, win = cfg->window, s = p->s;
    const bool all = c->conv == AS_CONV_MINUS1_ATTENDED;
    const float *kv = run->t[AS_T_KV].data;
    float *rows_a = as_run_shape(run, AS_T_ROWS_A, 2, p->rows_a_len, hd, 0);
    int32_t *widx = as_run_shape(run, AS_T_WIDX, 2, s, p->cols, 0);
    if (!rows_a || !widx)
        return -1;
    if (p->prefill) {
        as_window_store_prefill(ring, win, hd, kv, s);
        memcpy(rows_a, kv, ROW((size_t)s * hd));
        as_window_select_prefill_in(widx, s, win, all);
    } else {
        as_window_store_decode(ring, win, hd, kv, p->start_pos + (c->conv == AS_CONV_RING_SLOT));
        memcpy(rows_a, ring, ROW((size_t)win * hd));
        as_window_select_decode_in(widx, win, p->start_pos, all);
    }
    return 0;
}

/* ---- step 5: latents, index keys and queries, scores, selection ---- */

int as_stage_latent(const AsStageCtx *c, AsRun *run)
{
    const int n = c->p->n_new, hd = config(c)->head_dim;
    float *pre = as_run_shape(run, AS_T_LATENT_PRE, 2, n, hd, 0);
    float *lq = as_run_shape(run, AS_T_LATENT_Q, 2, n, hd, 0);
    if (!pre || !lq)
        return -1;
    memcpy(pre, run->t[AS_T_LATENT].data, ROW((size_t)n * hd));
    if (rope_latents(c, AS_STG_LATENT, pre, hd))
        return -1;
    memcpy(lq, pre, ROW((size_t)n * hd));
    as_fp4_quant_e4m3_ties(lq, (int64_t)n * hd, AS_FP4_E4M3_BLOCK, c->conv == AS_CONV_FP4_TIES_AWAY);
    if (c->rm->fault == AS_FAULT_FP4_SCALE)
        for (int64_t i = 0; i < (int64_t)n * hd; i++)
            lq[i] *= 2.0f;
    return 0;
}

int as_stage_ik(const AsStageCtx *c, AsRun *run)
{
    const AsConfig *cfg = config(c);
    const int n = c->p->n_new, ihd = cfg->index_head_dim;
    float *ik_pre = as_run_shape(run, AS_T_IK_PRE, 2, n, ihd, 0);
    float *ik = as_run_shape(run, AS_T_IK, 2, n, ihd, 0);
    if (!ik_pre || !ik)
        return -1;
    as_linear(run->t[AS_T_LATENT].data, n, weights(c)->i_wk, ik_pre, true);
    as_rmsnorm(ik_pre, c->rm->k_norm[c->p->layer], ik_pre, n, ihd, cfg->norm_eps);
    if (rope_latents(c, AS_STG_IK, ik_pre, ihd))
        return -1;
    memcpy(ik, ik_pre, ROW((size_t)n * ihd));
    as_fp4_quant_e8m0_ties(ik, (int64_t)n * ihd, AS_FP4_E8M0_BLOCK, c->conv == AS_CONV_FP4_TIES_AWAY);
    return 0;
}

bool as_stage_keys_written(const AsStageCtx *c) { return !(c->conv == AS_CONV_STALE_KEYS && !c->p->prefill); }

int as_stage_iq(const AsStageCtx *c, AsRun *run)
{
    const AsConfig *cfg = config(c);
    const int s = c->p->s, nhi = cfg->index_n_heads, ihd = cfg->index_head_dim;
    float *iq_pre = as_run_shape(run, AS_T_IQ_PRE, 3, s, nhi, ihd);
    float *iq = as_run_shape(run, AS_T_IQ, 3, s, nhi, ihd);
    if (!iq_pre || !iq)
        return -1;
    if (held(c, c->proj ? c->proj->iq : NULL, iq_pre, (int64_t)s * nhi * ihd))
        project(c->rm, c->conv, run->t[AS_T_QR].data, s, weights(c)->i_wq_b, iq_pre);
    if (rope_heads(c, AS_STG_IQ, iq_pre, nhi, ihd, false))
        return -1;
    memcpy(iq, iq_pre, ROW((size_t)s * nhi * ihd));
    as_fp4_quant_e8m0_ties(iq, (int64_t)s * nhi * ihd, AS_FP4_E8M0_BLOCK, c->conv == AS_CONV_FP4_TIES_AWAY);
    return 0;
}

int as_stage_w(const AsStageCtx *c, AsRun *run)
{
    const AsConfig *cfg = config(c);
    const int s = c->p->s, nhi = cfg->index_n_heads;
    float *wt = as_run_shape(run, AS_T_W, 2, s, nhi, 0);
    if (!wt)
        return -1;
    as_linear(run->t[AS_T_X].data, s, weights(c)->i_weights_proj, wt, true);
    if (c->conv != AS_CONV_NO_INDEX_SCALE)
        as_index_weights_scale(wt, s, nhi, cfg->index_head_dim);
    return 0;
}

int *as_stage_compress_lens(const AsLayerPlan *p)
{
    int *cl = malloc(sizeof(int) * (size_t)(p->s > 0 ? p->s : 1));
    for (int t = 0; cl && t < p->s; t++)
        cl[t] = p->prefill ? (t + 1) / p->ratio : p->width;
    return cl;
}

/* Scores at positions a mask leaves out become -inf. */
static void apply_mask(float *score, const uint8_t *mask, int64_t n)
{
    for (int64_t i = 0; i < n; i++)
        if (!mask[i])
            score[i] = -INFINITY;
}

/* The raw index scores (no mask) of the run's iq, keys and w, into score ([s][width]). */
static int raw_scores(const AsStageCtx *c, const AsRun *run, float *score)
{
    const AsConfig *cfg = config(c);
    return as_index_scores(run->t[AS_T_IQ].data, run->t[AS_T_KEYS].data, run->t[AS_T_W].data, c->p->s,
                           cfg->index_n_heads, cfg->index_head_dim, c->p->width, score);
}

int as_stage_scores(const AsStageCtx *c, const uint8_t *shared_cand, AsRun *run)
{
    const AsConfig *cfg = config(c);
    const AsLayerPlan *p = c->p;
    const int s = p->s, width = p->width;
    const int64_t n = (int64_t)s * width;
    float *score = as_run_shape(run, AS_T_ISCORE, 2, s, width, 0);
    int *clens = as_stage_compress_lens(p);
    int rc = -1;
    if (!score || !clens || raw_scores(c, run, score))
        goto out;
    as_index_visibility(score, s, width, clens);
    if (p->makes_cand) {
        uint8_t *cand = as_run_shape(run, AS_T_CAND, 2, s, width, 0);
        if (!cand || as_select_candidate_blocks(score, s, width, clens, cfg->candidate_block_size,
                                                cfg->candidate_topk_blocks, cand))
            goto out;
        if (c->conv == AS_CONV_CAND_AT_SOURCE)
            apply_mask(score, cand, n);
    } else if (p->applies_cand && c->conv != AS_CONV_CAND_MASK_OFF) {
        uint8_t *cand = as_run_shape(run, AS_T_CAND, 2, s, width, 0);
        if (!cand)
            goto out;
        memcpy(cand, shared_cand, (size_t)n);
        apply_mask(score, cand, n);
    }
    rc = 0;
out:
    free(clens);
    return rc;
}

int as_stage_csel(const AsStageCtx *c, AsRun *run)
{
    const AsLayerPlan *p = c->p;
    int32_t *csel = as_run_shape(run, AS_T_CSEL, 2, p->s, p->k, 0);
    int *clens = as_stage_compress_lens(p);
    float *raw = NULL;
    const float *score = run->t[AS_T_ISCORE].data;
    int rc = -1;
    if (!csel || !clens)
        goto out;
    if (c->conv == AS_CONV_TOPK_UNMASKED) {
        if (!(raw = malloc(sizeof(float) * ((size_t)p->s * p->width + 1))) || raw_scores(c, run, raw))
            goto out;
        score = raw;
    }
    rc = as_index_topk(score, p->s, p->width, p->k, clens, c->conv == AS_CONV_NO_OFFSET ? 0 : p->sel_offset, csel);
out:
    free(raw);
    free(clens);
    return rc;
}

int as_stage_idx(const AsStageCtx *c, AsRun *run)
{
    const AsLayerPlan *p = c->p;
    const int s = p->s, cols = p->cols, k = p->k, topk = p->topk;
    int32_t *idx = as_run_shape(run, AS_T_IDX, 2, s, topk, 0);
    if (!idx)
        return -1;
    const int32_t *widx = run->t[AS_T_WIDX].data;
    const int32_t *csel = k ? run->t[AS_T_CSEL].data : NULL;
    for (int t = 0; t < s; t++) {
        memcpy(idx + (size_t)t * topk, widx + (size_t)t * cols, sizeof(int32_t) * (size_t)cols);
        if (k)
            memcpy(idx + (size_t)t * topk + cols, csel + (size_t)t * k, sizeof(int32_t) * (size_t)k);
    }
    return 0;
}

/* ---- steps 7-9 ---- */

int as_stage_attend(const AsRefModel *rm, int l, AsConvention conv, const float *q, const float *rows_a, int na,
                    const float *rows_b, int nb, const int32_t *idx, int topk, int s, float *o)
{
    const AsConfig *cfg = &rm->m->cfg;
    const int hd = cfg->head_dim;
    float *rows = malloc(ROW((size_t)(na + nb) * hd + 1));
    if (!rows)
        return -1;
    memcpy(rows, rows_a, ROW((size_t)na * hd));
    if (nb)
        memcpy(rows + (size_t)na * hd, rows_b, ROW((size_t)nb * hd));
    const AsSoftmaxWay way = {conv == AS_CONV_SINK_IN_MAX, conv == AS_CONV_SINK_UNSHIFTED, conv == AS_CONV_PROBS_F32};
    const float scale = conv == AS_CONV_NO_SOFTMAX_SCALE ? 1.0f : (float)(1.0 / sqrt((double)hd));
    as_sparse_attention_in(q, rows, na + nb, idx, topk, conv == AS_CONV_SINK_IGNORED ? rm->no_sink : rm->sink[l], o,
                           s, cfg->n_heads, hd, scale, &way);
    free(rows);
    return 0;
}

void as_stage_rotate_back(const AsRefModel *rm, int l, AsConvention conv, const float *o, int s, int start_pos,
                          float *o_back)
{
    const AsConfig *cfg = &rm->m->cfg;
    memcpy(o_back, o, ROW((size_t)s * cfg->n_heads * cfg->head_dim));
    AsRopeTable tmp;
    const AsRopeTable *t = rope_table(rm, conv, cfg->role[l].ratio, &tmp);
    if (!t) /* out of memory for a convention's frequencies: the model's own */
        t = cfg->role[l].ratio == 0 ? &rm->rope_plain : &rm->rope_yarn;
    as_rope_heads_in(o_back, s, cfg->n_heads, cfg->head_dim, start_pos, t, true, rope_layout(conv, AS_STG_O_BACK));
    as_rope_free(&tmp);
}

int as_stage_project_out(const AsRefModel *rm, int l, const float *o_back, int s, float *og)
{
    const AsConfig *cfg = &rm->m->cfg;
    const AsLayerWeights *w = &rm->m->layer[l];
    const int nh = cfg->n_heads, hd = cfg->head_dim, G = cfg->o_groups, olr = cfg->o_lora_rank, gw = cfg->gw;
    float *slice = malloc(ROW((size_t)s * gw));
    if (!slice)
        return -1;
    for (int g = 0; g < G; g++) {
        for (int t = 0; t < s; t++)
            memcpy(slice + (size_t)t * gw, o_back + (size_t)t * nh * hd + (size_t)g * gw, ROW(gw));
        as_linear_rows(slice, s, w->wo_a, (int64_t)g * olr, olr, og + (size_t)g * olr, (int64_t)G * olr, true);
    }
    free(slice);
    return 0;
}

void as_stage_project_wo_b(const AsRefModel *rm, int l, AsConvention conv, const float *og, int s, float *out)
{
    project(rm, conv, og, s, rm->m->layer[l].wo_b, out);
}

int as_stage_o(const AsStageCtx *c, AsRun *run)
{
    const AsConfig *cfg = config(c);
    const AsLayerPlan *p = c->p;
    float *o = as_run_shape(run, AS_T_O, 3, p->s, cfg->n_heads, cfg->head_dim);
    if (!o)
        return -1;
    return as_stage_attend(c->rm, p->layer, c->conv, run->t[AS_T_Q].data, run->t[AS_T_ROWS_A].data, p->rows_a_len,
                           p->rows_b_len ? run->t[AS_T_ROWS_B].data : NULL, p->rows_b_len, run->t[AS_T_IDX].data,
                           p->topk, p->s, o);
}

int as_stage_o_back(const AsStageCtx *c, AsRun *run)
{
    const AsConfig *cfg = config(c);
    float *ob = as_run_shape(run, AS_T_O_BACK, 3, c->p->s, cfg->n_heads, cfg->head_dim);
    if (!ob)
        return -1;
    as_stage_rotate_back(c->rm, c->p->layer, c->conv, run->t[AS_T_O].data, c->p->s, c->p->start_pos, ob);
    return 0;
}

int as_stage_og(const AsStageCtx *c, AsRun *run)
{
    const AsConfig *cfg = config(c);
    float *og = as_run_shape(run, AS_T_OG, 3, c->p->s, cfg->o_groups, cfg->o_lora_rank);
    return og ? as_stage_project_out(c->rm, c->p->layer, run->t[AS_T_O_BACK].data, c->p->s, og) : -1;
}

int as_stage_out(const AsStageCtx *c, AsRun *run)
{
    float *out = as_run_shape(run, AS_T_OUT, 2, c->p->s, config(c)->dim, 0);
    if (!out)
        return -1;
    as_stage_project_wo_b(c->rm, c->p->layer, c->conv, run->t[AS_T_OG].data, c->p->s, out);
    return 0;
}
