/* The work buffers of one layer's forward, grown when a step needs more tokens or score
 * columns than any step before (they keep the last layer's run for as_engine_layer_run). */
#include <stdlib.h>
#include <string.h>

#include "engine/check.h"
#include "engine/internal.h"
#include "engine/mem_limit.h"

void as_dev_work_free(AsEngine *e)
{
    AsDevWork *w = &e->wk;
    void *dev[] = {w->h, w->x, w->qr, w->q, w->kv_pre, w->kv, w->latent, w->latent_pre, w->latent_q, w->ik_pre,
                   w->ik, w->iq_pre, w->iq, w->w, w->score, w->o, w->o_back, w->og, w->out, w->x_q, w->qr_q, w->og_q,
                   w->xf, w->ckv, w->csc, w->widx, w->csel, w->idx, w->cand, w->bad, w->valid};
    for (size_t i = 0; i < sizeof dev / sizeof dev[0]; i++)
        cudaFree(dev[i]);
    void *pinned[] = {w->score_h, w->csel_h};
    for (size_t i = 0; i < sizeof pinned / sizeof pinned[0]; i++)
        cudaFreeHost(pinned[i]);
    free(w->score_f);
    memset(w, 0, sizeof *w);
}

#define DEV(ptr, count, type)                                                                         \
    do {                                                                                              \
        size_t b_ = sizeof(type) * (size_t)(count) + 16;                                              \
        cudaError_t r_ = as_dev_malloc(&e->mem, (void **)&(ptr), b_);                                         \
        if (r_ != cudaSuccess) {                                                                      \
            char what_[96];                                                                           \
            snprintf(what_, sizeof what_, "the work buffer " #ptr " (%d tokens)", s);                  \
            return as_dev_oom(&e->mem, err, what_, b_, e->device, r_);                                       \
        }                                                                                             \
    } while (0)

#define PIN(ptr, count, type)                                                                         \
    CU(err, cudaMallocHost((void **)&(ptr), sizeof(type) * (size_t)(count) + 16),                     \
       "pinned host buffer " #ptr " (%d tokens)", s)

int as_dev_work_reserve(AsEngine *e, int s, int width, int topk, AsError *err)
{
    AsDevWork *w = &e->wk;
    if (s <= w->cap_s && width <= w->cap_w && topk <= w->cap_topk)
        return 0;
    const AsConfig *c = &e->cfg;
    if (s < w->cap_s)
        s = w->cap_s;
    if (width < w->cap_w)
        width = w->cap_w;
    if (topk < w->cap_topk)
        topk = w->cap_topk;
    cudaStreamSynchronize(e->st);
    as_dev_work_free(e);
    int64_t S = s, hd = c->head_dim, nh = c->n_heads, ihd = c->index_head_dim, nhi = c->index_n_heads;
    DEV(w->h, S * c->dim, as_bf16_t);
    DEV(w->x, S * c->dim, as_bf16_t);
    DEV(w->out, S * c->dim, as_bf16_t);
    DEV(w->qr, S * c->q_lora_rank, as_bf16_t);
    DEV(w->q, S * nh * hd, as_bf16_t);
    DEV(w->o, S * nh * hd, as_bf16_t);
    DEV(w->o_back, S * nh * hd, as_bf16_t);
    DEV(w->og, S * c->o_groups * c->o_lora_rank, as_bf16_t);
    if (e->fp8) { /* the fp8 linears' QDQ'd inputs, as many rows as every other work buffer */
        DEV(w->x_q, S * c->dim, as_bf16_t);
        DEV(w->qr_q, S * c->q_lora_rank, as_bf16_t);
        DEV(w->og_q, S * c->o_groups * c->o_lora_rank, as_bf16_t);
    }
    DEV(w->kv_pre, S * hd, as_bf16_t);
    DEV(w->kv, S * hd, as_bf16_t);
    DEV(w->latent, S * hd, as_bf16_t);
    DEV(w->latent_pre, S * hd, as_bf16_t);
    DEV(w->latent_q, S * hd, as_bf16_t);
    DEV(w->ik_pre, S * ihd, as_bf16_t);
    DEV(w->ik, S * ihd, as_bf16_t);
    DEV(w->iq_pre, S * nhi * ihd, as_bf16_t);
    DEV(w->iq, S * nhi * ihd, as_bf16_t);
    DEV(w->w, S * nhi, as_bf16_t);
    DEV(w->score, S * width, as_bf16_t);
    DEV(w->cand, S * width, uint8_t);
    DEV(w->xf, S * c->dim, float);
    DEV(w->ckv, S * hd, float);
    DEV(w->csc, S * hd, float);
    DEV(w->widx, S * c->window, int32_t);
    DEV(w->csel, S * c->index_topk, int32_t);
    DEV(w->idx, S * topk, int32_t);
    DEV(w->bad, AS_MAX_LAYERS, int);
    DEV(w->valid, AS_MAX_LAYERS, unsigned long long);
    PIN(w->score_h, S * width, uint16_t);
    PIN(w->csel_h, S * c->index_topk, int32_t);
    w->score_f = malloc(sizeof(float) * (size_t)(S * width) + 16);
    if (!w->score_f)
        return as_err(err, AS_ERUNTIME, "out of host memory for %ldx%d index scores", (long)S, width);
    w->cap_s = s;
    w->cap_w = width;
    w->cap_topk = topk;
    return 0;
}
