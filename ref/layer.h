/* One layer's attention forward (SPEC section 3), its persistent state, and the shared state
 * that threads through the layers (`SharedV41`), on the CPU, value-faithful to DeepSeek's
 * reference in bf16 mode, quirks included. */
#ifndef AS_REF_LAYER_H
#define AS_REF_LAYER_H

#include <stdint.h>

#include "model/weights.h"
#include "ref/convention.h"
#include "ref/faults.h"
#include "ref/plan.h"
#include "ref/rope.h"
#include "ref/run.h"

/* Per-layer state, persisting across calls. Zero at start (a fresh prefill). */
typedef struct {
    float *ring;               /* [window][hd] bf16 values */
    float *part_kv, *part_sc;  /* [ratio][hd] f32, ratio-2 kv sources; score starts at -inf */
    float *ccache;             /* [cap][hd] compressed cache (kv sources) */
    int ccache_rows;           /* rows written so far */
    float *ikcache;            /* [cap][ihd] index-key cache (key owners) */
    int ikcache_rows;
    int cap;                   /* max_seq / ratio (as_plan_cache_rows) */
} AsRefLayerState;

/* The shared state: who published each slot (ref/plan.h; the caches are the publishers' own, as in the
 * reference, where the shared slot holds the same tensor) and copies of the selection and the mask. */
typedef struct {
    AsSharedProv prov;
    int32_t *sel;              /* [prov.sel_s][prov.sel_k] latest index source's selection (offset added) */
    uint8_t *cand;             /* [prov.cand_s][prov.cand_width] candidate mask */
} AsRefShared;

/* What the reference precomputes once per model: f32 copies of the small f32 tensors and
 * the RoPE tables of both layer kinds. Weights themselves stay in the file mapping. */
typedef struct {
    const AsModel *m;
    AsRopeTable rope_plain;    /* ratio-0 layers */
    AsRopeTable rope_yarn;     /* ratio > 0 layers */
    float *attn_norm[AS_MAX_LAYERS], *q_norm[AS_MAX_LAYERS], *kv_norm[AS_MAX_LAYERS];
    float *c_norm[AS_MAX_LAYERS], *k_norm[AS_MAX_LAYERS], *sink[AS_MAX_LAYERS];
    float *no_sink;            /* [n_heads] of -inf, for the sink-ignored convention */
    AsFault fault;             /* AS_FAULT_NONE: the faithful reference */
    AsConvention conv;         /* a twin's planted convention (ref/convention.h); AS_CONV_NONE: its fault's */
} AsRefModel;

typedef struct {
    AsRefLayerState layer[AS_MAX_LAYERS];
    AsRefShared shared;
} AsRefState;

int as_ref_model_init(AsRefModel *rm, const AsModel *m, AsError *err);
void as_ref_model_free(AsRefModel *rm);

int as_ref_state_init(AsRefState *st, const AsConfig *cfg, AsError *err);
void as_ref_state_reset(AsRefState *st, const AsConfig *cfg);   /* back to zero / -inf */
void as_ref_state_free(AsRefState *st, const AsConfig *cfg);

/* attention(x, start_pos) of layer l, step number `step` (for provenance). x: [s][dim]. Fills
 * run with every tensor of ref/run.h and the layer state after the call. Returns 0, or
 * AS_EREFUSED (SPEC 3.6) / AS_EBADINPUT / AS_ERUNTIME with a message naming the layer. */
int as_ref_layer_forward(const AsRefModel *rm, AsRefState *st, int l, int step, const float *x,
                         int start_pos, int s, AsRun *run, AsError *err);

/* The tail of the forward as separate steps (the driver re-runs them on another engine's inputs
 * to tell its own errors from differences it inherited): step 7 (rows_b may be NULL when nb is 0),
 * step 8, step 9 (out may be NULL). Return 0, or -1 when out of memory. */
int as_ref_attend(const AsRefModel *rm, int l, const float *q, const float *rows_a, int na, const float *rows_b,
                  int nb, const int32_t *idx, int topk, int s, float *o);
void as_ref_rotate_back(const AsRefModel *rm, int l, const float *o, int s, int start_pos, float *o_back);
int as_ref_project_out(const AsRefModel *rm, int l, const float *o_back, int s, float *og, float *out);
/* out = wo_b's projection of og, in the model's precision (the last half of step 9). */
void as_ref_project_wo_b(const AsRefModel *rm, int l, const float *og, int s, float *out);

#endif
