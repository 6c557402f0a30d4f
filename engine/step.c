/* Stepping the engine (prefill / decode, one layer at a time) and copying a layer's run back
 * to the host in the reference's AsRun form. */
#include <stdlib.h>
#include <string.h>

#include "engine/check.h"
#include "engine/internal.h"
#include "ref/cancel.h"
#include "ref/numerics.h"

int as_engine_begin_step(AsEngine *e, const float *h0, int start_pos, int s, AsError *err)
{
    const AsConfig *c = &e->cfg;
    TRY(as_plan_begin_step(c, start_pos, s, e->started, err));
    int width = s == 1 ? c->max_seq : start_pos + s;
    TRY(as_dev_work_reserve(e, s, width, c->window + c->index_topk, err));
    if (start_pos == 0) {
        as_engine_reset(e);
        e->started = true;
    } else {
        e->step++;
    }
    uint16_t *tmp = malloc(sizeof(uint16_t) * (size_t)s * c->dim);
    if (!tmp)
        return as_err(err, AS_ERUNTIME, "out of host memory for %d input rows", s);
    for (int64_t i = 0; i < (int64_t)s * c->dim; i++)
        tmp[i] = as_bf16_bits(h0[i]);
    cudaError_t rc = cudaMemcpyAsync(e->wk.h, tmp, sizeof(uint16_t) * (size_t)s * c->dim, cudaMemcpyHostToDevice, e->st);
    if (rc == cudaSuccess)
        rc = cudaStreamSynchronize(e->st);
    free(tmp);
    CU(err, rc, "uploading %dx%d token inputs", s, c->dim);
    CU(err, cudaMemsetAsync(e->wk.bad, 0, sizeof(int) * AS_MAX_LAYERS, e->st), "clearing the refusal flags");
    CU(err, cudaMemsetAsync(e->wk.valid, 0, sizeof(unsigned long long) * AS_MAX_LAYERS, e->st),
       "clearing the selection counts");
    e->s = s;
    e->start_pos = start_pos;
    e->next_layer = 0;
    return 0;
}

int as_dev_refuse_idx(AsError *err, int l)
{
    return as_err(err, AS_EREFUSED, "layer %d: a selection entry names a row beyond the attended rows (the shared "
                  "selection was published by another step or layer kind)", l);
}

int as_dev_check_refusals(AsEngine *e, AsError *err)
{
    int bad[AS_MAX_LAYERS];
    CU(err, cudaMemcpyAsync(bad, e->wk.bad, sizeof bad, cudaMemcpyDeviceToHost, e->st), "reading the refusal flags");
    CU(err, cudaStreamSynchronize(e->st), "step %d", e->step);
    for (int l = 0; l < e->cfg.n_layers; l++)
        if (bad[l])
            return as_dev_refuse_idx(err, l);
    return 0;
}

int as_engine_next_layer(AsEngine *e, int *layer, AsError *err)
{
    *layer = -1;
    if (e->next_layer >= e->cfg.n_layers)
        return as_err(err, AS_EBADINPUT, "the step is finished: no next layer");
    int l = e->next_layer;
    const int pdl = as_k_pdl_use(e->knobs.pdl);
    int rc = as_dev_layer_forward(e, l, err);
    as_k_pdl_use(pdl);
    TRY(rc);
    CU(err, cudaGetLastError(), "layer %d", l);
    e->next_layer = l + 1;
    *layer = l;
    return 0;
}

int as_engine_finish_step(AsEngine *e, AsError *err)
{
    int l;
    while (e->next_layer < e->cfg.n_layers)
        TRY(as_engine_next_layer(e, &l, err));
    return as_dev_check_refusals(e, err);
}

int as_engine_residual(AsEngine *e, float *h, AsError *err)
{
    size_t n = (size_t)e->s * e->cfg.dim;
    uint16_t *tmp = malloc(sizeof(uint16_t) * n + 2);
    if (!tmp)
        return as_err(err, AS_ERUNTIME, "out of host memory");
    cudaError_t rc = cudaMemcpyAsync(tmp, e->wk.h, sizeof(uint16_t) * n, cudaMemcpyDeviceToHost, e->st);
    if (rc == cudaSuccess)
        rc = cudaStreamSynchronize(e->st);
    for (size_t i = 0; rc == cudaSuccess && i < n; i++)
        h[i] = as_bf16_to_f32(tmp[i]);
    free(tmp);
    CU(err, rc, "downloading the residual %dx%d", e->s, e->cfg.dim);
    return 0;
}

/* A tensor a cancel cut short is dropped (absent), not zero-filled: writing zeros into gigabytes of fresh
 * pages took as long as the copy. The driver throws the layer away. */
static int drop_cut(AsRun *r, AsTensorId id)
{
    free(r->t[id].data);
    r->t[id].data = NULL;
    r->t[id].cap = 0;
    return 0;
}

/* Copies a device bf16 tensor into run tensor id, a chunk at a time through the pinned stage (widened by
 * all threads); a cancel (ref/cancel.h) stops it between chunks. */
static int get_bf16(AsEngine *e, AsRun *r, AsTensorId id, const as_bf16_t *d, int ndim, int64_t d0, int64_t d1,
                    int64_t d2, AsError *err)
{
    if (as_ref_cancelled())
        return drop_cut(r, id);
    float *h = as_run_shape(r, id, ndim, d0, d1, d2);
    if (!h)
        return as_err(err, AS_ERUNTIME, "out of host memory for %s", as_tensor_desc[id].name);
    int64_t n = as_ht_numel(&r->t[id]);
    if (n == 0)
        return 0;
    if (!e->fetch_stage)
        CU(err, cudaMallocHost((void **)&e->fetch_stage, sizeof(uint16_t) * (size_t)AS_FETCH_CHUNK),
           "pinned staging for a layer's tensors (%ld values)", (long)AS_FETCH_CHUNK);
    const uint16_t *stage = e->fetch_stage;
    for (int64_t at = 0; at < n; at += AS_FETCH_CHUNK) {
        const int64_t m = n - at < AS_FETCH_CHUNK ? n - at : AS_FETCH_CHUNK;
        if (as_ref_cancelled())
            return drop_cut(r, id);
        cudaError_t rc = cudaMemcpyAsync(e->fetch_stage, d + at, sizeof(uint16_t) * (size_t)m,
                                         cudaMemcpyDeviceToHost, e->st);
        if (rc == cudaSuccess)
            rc = cudaStreamSynchronize(e->st);
        CU(err, rc, "copying %s (values %ld to %ld of %ld) to the host", as_tensor_desc[id].name, (long)at,
           (long)(at + m), (long)n);
        float *hc = h + at;
#pragma omp parallel for schedule(static) if (m >= 65536)
        for (int64_t i = 0; i < m; i++)
            hc[i] = as_bf16_to_f32(stage[i]);
    }
    return 0;
}

static int get_raw(AsEngine *e, AsRun *r, AsTensorId id, const void *d, size_t esz, int ndim, int64_t d0, int64_t d1,
                   AsError *err)
{
    void *h = as_run_shape(r, id, ndim, d0, d1, 0);
    if (!h)
        return as_err(err, AS_ERUNTIME, "out of host memory for %s", as_tensor_desc[id].name);
    size_t bytes = esz * (size_t)as_ht_numel(&r->t[id]);
    if (bytes) { /* on the engine's stream (non-blocking: a legacy-stream copy would not wait for it) */
        cudaError_t rc = cudaMemcpyAsync(h, d, bytes, cudaMemcpyDeviceToHost, e->st);
        if (rc == cudaSuccess)
            rc = cudaStreamSynchronize(e->st);
        CU(err, rc, "copying %s (%zu bytes) to the host", as_tensor_desc[id].name, bytes);
    }
    return 0;
}

static int put_host(AsRun *r, AsTensorId id, const void *src, size_t esz, int64_t d0, int64_t d1, AsError *err)
{
    void *h = as_run_shape(r, id, 2, d0, d1, 0);
    if (!h)
        return as_err(err, AS_ERUNTIME, "out of host memory for %s", as_tensor_desc[id].name);
    if (d0 > 0 && d1 > 0)
        memcpy(h, src, esz * (size_t)(d0 * d1));
    return 0;
}

int as_engine_layer_run(AsEngine *e, AsRun *out, AsError *err)
{
    if (e->last_layer < 0)
        return as_err(err, AS_EBADINPUT, "no layer has run yet");
    const AsConfig *c = &e->cfg;
    const AsRun *m = &e->last;
    const AsDevWork *wk = &e->wk;
    const AsLayerRole *role = &c->role[m->layer];
    const AsDevLayerState *ls = &e->ls[m->layer];
    int s = m->s, hd = c->head_dim, nh = c->n_heads, ihd = c->index_head_dim, nhi = c->index_n_heads;
    int n = m->n_new;
    bool prefill = m->start_pos == 0;
    TRY(as_dev_check_refusals(e, err));
    as_run_free(out);
    AsHostTensor keep[AS_T_COUNT];
    memcpy(keep, out->t, sizeof keep);
    *out = *m;
    memcpy(out->t, keep, sizeof keep);

    TRY(get_bf16(e, out, AS_T_X, wk->x, 2, s, c->dim, 0, err));
    TRY(get_bf16(e, out, AS_T_QR, wk->qr, 2, s, c->q_lora_rank, 0, err));
    TRY(get_bf16(e, out, AS_T_Q, wk->q, 3, s, nh, hd, err));
    TRY(get_bf16(e, out, AS_T_KV_PRE, wk->kv_pre, 2, s, hd, 0, err));
    TRY(get_bf16(e, out, AS_T_KV, wk->kv, 2, s, hd, 0, err));
    TRY(get_bf16(e, out, AS_T_ROWS_A, prefill ? wk->kv : ls->ring, 2, m->rows_a_len, hd, 0, err));
    TRY(get_raw(e, out, AS_T_WIDX, wk->widx, sizeof(int32_t), 2, s, m->cols, err));
    if (role->ratio > 0) {
        if (role->kv_source) {
            TRY(get_bf16(e, out, AS_T_LATENT, wk->latent, 2, n, hd, 0, err));
            if (n > 0) {
                TRY(get_bf16(e, out, AS_T_LATENT_PRE, wk->latent_pre, 2, n, hd, 0, err));
                TRY(get_bf16(e, out, AS_T_LATENT_Q, wk->latent_q, 2, n, hd, 0, err));
            }
        }
        if (m->indexer_ran) {
            if (role->key_owner && n > 0) {
                TRY(get_bf16(e, out, AS_T_IK_PRE, wk->ik_pre, 2, n, ihd, 0, err));
                TRY(get_bf16(e, out, AS_T_IK, wk->ik, 2, n, ihd, 0, err));
            }
            TRY(get_bf16(e, out, AS_T_IQ_PRE, wk->iq_pre, 3, s, nhi, ihd, err));
            TRY(get_bf16(e, out, AS_T_IQ, wk->iq, 3, s, nhi, ihd, err));
            TRY(get_bf16(e, out, AS_T_W, wk->w, 2, s, nhi, 0, err));
            TRY(get_bf16(e, out, AS_T_KEYS, e->ls[m->keys_from.layer].ikcache, 2, m->width, ihd, 0, err));
            const bool cand = m->cand_from.layer >= 0; /* a mask made or applied (the plan's) */
            if (e->sh.sel_on_device) { /* the masked scores are in the score buffer, the mask on the device */
                TRY(get_bf16(e, out, AS_T_ISCORE, wk->score, 2, s, m->width, 0, err));
                if (cand)
                    TRY(get_raw(e, out, AS_T_CAND, e->sh.cand_d, 1, 2, s, m->width, err));
            } else {
                TRY(put_host(out, AS_T_ISCORE, wk->score_f, sizeof(float), s, m->width, err));
                if (cand)
                    TRY(put_host(out, AS_T_CAND, e->sh.cand_h, 1, s, m->width, err));
            }
        }
        TRY(get_raw(e, out, AS_T_CSEL, wk->csel, sizeof(int32_t), 2, s, m->k, err));
        TRY(get_bf16(e, out, AS_T_ROWS_B, e->ls[m->rows_b_from.layer].ccache, 2, m->rows_b_len, hd, 0, err));
    }
    TRY(get_raw(e, out, AS_T_IDX, wk->idx, sizeof(int32_t), 2, s, m->topk, err));
    TRY(get_bf16(e, out, AS_T_O, wk->o, 3, s, nh, hd, err));
    TRY(get_bf16(e, out, AS_T_O_BACK, wk->o_back, 3, s, nh, hd, err));
    TRY(get_bf16(e, out, AS_T_OG, wk->og, 3, s, c->o_groups, c->o_lora_rank, err));
    TRY(get_bf16(e, out, AS_T_OUT, wk->out, 2, s, c->dim, 0, err));
    TRY(get_bf16(e, out, AS_T_ST_RING, ls->ring, 2, c->window, hd, 0, err));
    if (ls->part_kv) {
        TRY(get_raw(e, out, AS_T_ST_PART_KV, ls->part_kv, sizeof(float), 2, role->ratio, hd, err));
        TRY(get_raw(e, out, AS_T_ST_PART_SC, ls->part_sc, sizeof(float), 2, role->ratio, hd, err));
    }
    if (ls->ccache)
        TRY(get_bf16(e, out, AS_T_ST_CCACHE, ls->ccache, 2, ls->ccache_rows, hd, 0, err));
    if (ls->ikcache)
        TRY(get_bf16(e, out, AS_T_ST_IKCACHE, ls->ikcache, 2, ls->ikcache_rows, ihd, 0, err));
    return 0;
}
