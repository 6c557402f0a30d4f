/* The stages of one layer's forward (SPEC 3), each under a convention (ref/convention.h): the layer
 * forward (ref/layer.c) runs them with the reference's own (AS_CONV_NONE, or the convention a twin was
 * planted with), and a diagnosis (driver/diagnose.h) re-runs the ones a wrong convention bends from a
 * layer's recorded tensors. Each reads its inputs from the run's tensors and writes its outputs there;
 * the plan (ref/plan.h) gives the sizes. A convention reaches the step it bends as a flag of that step
 * (the RoPE layout and table, the fp8 scale reading, the fp4 rounding, the softmax's sink). Functions
 * return 0, or -1 when out of memory. */
#ifndef AS_REF_STAGE_H
#define AS_REF_STAGE_H

#include "ref/convention.h"
#include "ref/layer.h"
#include "ref/plan.h"

/* The reference's own projections of a layer's recorded inputs, before their RoPE (NULL: not held):
 * q = wq_b(qr), kv = rmsnorm(wkv(x)), iq = indexer.wq_b(qr). A diagnosis re-runs many conventions that
 * only rotate or round differently: they take these instead of projecting again. */
typedef struct {
    float *q, *kv, *iq;
} AsStageProj;

typedef struct {
    const AsRefModel *rm;
    const AsLayerPlan *p;
    AsConvention conv;
    const AsStageProj *proj; /* NULL (the forward): every stage projects its own input */
} AsStageCtx;

/* Whether a convention changes the projections themselves (the fp8 GEMM, its scales, the precision). */
bool as_stage_conv_projects(AsConvention conv);
/* Whether a convention can change anything in layer p->layer of this model (a YaRN convention on a layer
 * kind it does not touch, a scale-block reading of weights whose blocks are the other size, fp8 readings
 * in bf16 precision cannot). */
bool as_stage_conv_applies(const AsRefModel *rm, int layer, AsConvention conv);
/* The reference's projections of run's x and qr for the plan's layer (iq for an indexing layer), into
 * out (as_stage_proj_free frees them). -1 when out of memory. */
int as_stage_proj_make(const AsRefModel *rm, const AsLayerPlan *p, const AsRun *run, AsStageProj *out);
void as_stage_proj_free(AsStageProj *pj);

/* The convention a reference model runs with: the one it was planted with, else its fault's. */
AsConvention as_ref_convention(const AsRefModel *rm);

int as_stage_qr(const AsStageCtx *c, AsRun *run);                     /* x -> qr */
int as_stage_q(const AsStageCtx *c, AsRun *run);                      /* qr -> q */
int as_stage_kv(const AsStageCtx *c, AsRun *run);                     /* x -> kv_pre, kv */
/* kv -> rows_a, widx; ring ([window][hd]) is the layer's and takes the step's rows. */
int as_stage_window(const AsStageCtx *c, float *ring, AsRun *run);
int as_stage_latent(const AsStageCtx *c, AsRun *run);                 /* latent -> latent_pre, latent_q */
int as_stage_ik(const AsStageCtx *c, AsRun *run);                     /* latent -> ik_pre, ik */
/* Whether the new index keys are written into the owner's cache (not under stale-keys in a decode). */
bool as_stage_keys_written(const AsStageCtx *c);
int as_stage_iq(const AsStageCtx *c, AsRun *run);                     /* qr -> iq_pre, iq */
int as_stage_w(const AsStageCtx *c, AsRun *run);                      /* x -> w */
/* iq, keys, w -> iscore with its visibility mask; the candidate source's mask into cand, a candidate
 * user's (shared_cand, [s][width]) applied and copied there. */
int as_stage_scores(const AsStageCtx *c, const uint8_t *shared_cand, AsRun *run);
int as_stage_csel(const AsStageCtx *c, AsRun *run);                   /* iscore -> csel (an index source's) */
int as_stage_idx(const AsStageCtx *c, AsRun *run);                    /* widx, csel -> idx */
int as_stage_o(const AsStageCtx *c, AsRun *run);                      /* q, rows_a, rows_b, idx -> o */
int as_stage_o_back(const AsStageCtx *c, AsRun *run);                 /* o -> o_back */
int as_stage_og(const AsStageCtx *c, AsRun *run);                     /* o_back -> og */
int as_stage_out(const AsStageCtx *c, AsRun *run);                    /* og -> out */

/* The visibility lengths of the plan's queries (SPEC 3 step 5c): prefill (t + 1) / r, decode width.
 * Caller frees; NULL when out of memory. */
int *as_stage_compress_lens(const AsLayerPlan *p);

/* Steps 7-9 on plain arrays (the explanation of inherited differences re-runs them on another engine's
 * tensors, driver/explain.c): sparse attention (rows_b may be NULL when nb is 0), the inverse rotation,
 * wo_a then wo_b (out may be NULL), wo_b alone. */
int as_stage_attend(const AsRefModel *rm, int l, AsConvention conv, const float *q, const float *rows_a, int na,
                    const float *rows_b, int nb, const int32_t *idx, int topk, int s, float *o);
void as_stage_rotate_back(const AsRefModel *rm, int l, AsConvention conv, const float *o, int s, int start_pos,
                          float *o_back);
int as_stage_project_out(const AsRefModel *rm, int l, const float *o_back, int s, float *og);
void as_stage_project_wo_b(const AsRefModel *rm, int l, AsConvention conv, const float *og, int s, float *out);

#endif
