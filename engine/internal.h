/* The engine's private state: weights, per-layer state and shared state on the device, and
 * the work buffers of one layer's forward (they hold the last layer's run until the next). */
#ifndef AS_ENGINE_INTERNAL_H
#define AS_ENGINE_INTERNAL_H

#include <cublas_v2.h>
#include <cuda_runtime_api.h>
#include <stdbool.h>
#include <stdint.h>

#include "engine/engine.h"
#include "engine/knobs.h"
#include "engine/mem_limit.h"
#include "engine/profile.h"
#include "kernels/kernels.h"
#include "ref/faults.h"
#include "ref/plan.h"
#include "ref/run.h"

/* A projection weight on the device: bf16 (bf16 / fp8 files), f32 (the ratio-2 compressor; f32 / f16
 * files; GGUF Q8_0, dequantised exactly), raw GGUF Q2_K blocks [out][in / 256], or in fp8 form
 * (engine/fp8_proj.c): e4m3 codes [out][in] in d and f32 scales of 32 x 32 blocks in ws. */
/* a projection of up to this many rows runs as a GEMV, above as a GEMM */
#define AS_DEV_GEMV_MAX_ROWS 8

typedef enum { AS_DW_BF16, AS_DW_F32, AS_DW_Q2K, AS_DW_FP8 } AsDevWType;
typedef struct {
    void *d;
    float *ws;      /* AS_DW_FP8: [ceil(out / 32)][ldws] (model/fp8_form.h) */
    int64_t ldws;
    double form_bytes; /* AS_DW_FP8: the checkpoint's bytes of it, codes and scale tensor (the decode's floor) */
    int out, in;
    AsDevWType type;
    /* fp8 precision's fp8 linear (as_proj_fp8): the input row is quantised to e4m3 in blocks of 32 and
     * dequantised (as_dev_qdq_fp8) before this bf16 projection of the exactly dequantised weights reads it;
     * every scale is a power of two and e4m3 products are exact in f32, so it is act_quant + fp8_gemm up
     * to the f32 summation order (docs/ENGINE.md, "Precision") */
    bool fp8;
} AsDevWeight;

typedef struct {
    AsDevWeight wq_a, wq_b, wkv, wo_a, wo_b, c_wkv, c_wgate, i_wq_b, i_wproj, i_wk;
    float *attn_norm, *q_norm, *kv_norm, *c_norm, *k_norm, *sink;
} AsDevLayerWeights;

typedef struct {
    as_bf16_t *ring;              /* [window][hd] */
    float *part_kv, *part_sc;     /* [ratio][hd] (ratio-2 kv sources) */
    as_bf16_t *ccache;            /* [cap][hd] */
    int ccache_rows;
    as_bf16_t *ikcache;           /* [cap][ihd] */
    int ikcache_rows;
    int cap;
} AsDevLayerState;

/* The shared state: who published each slot (ref/plan.h; the caches are the publishers' own, e->ls[]),
 * device copies of the selection and mask with host mirrors (the host selection path reads them). */
typedef struct {
    AsSharedProv prov;
    int32_t *sel_d, *sel_h;       /* [prov.sel_s][prov.sel_k], room for sel_cap entries */
    int sel_cap;
    bool sel_on_device;           /* the latest selection ran on the device (select_device.c) */
    uint8_t *cand_h;              /* [prov.cand_s][prov.cand_width] (host path), cand_cap entries */
    size_t cand_cap;
    uint8_t *cand_d;              /* [prov.cand_s][prov.cand_width] (device path), cand_dcap entries */
    size_t cand_dcap;
    unsigned long long *sel_stats; /* device, profiling engines only: AS_TOPK_NSTATS counters (kernels.h) */
} AsDevShared;

/* Work buffers, sized for `cap_s` tokens and `cap_w` index-score columns. */
typedef struct {
    int cap_s, cap_w, cap_topk;
    as_bf16_t *h, *x, *qr, *q, *kv_pre, *kv, *latent, *latent_pre, *latent_q, *ik_pre, *ik;
    as_bf16_t *iq_pre, *iq, *w, *score, *o, *o_back, *og, *out;
    /* fp8 precision (AsEngine.fp8, else NULL): the fp8 linears' inputs after act_quant's QDQ, x for wq_a and
     * wkv, qr for wq_b and indexer.wq_b, og for wo_b; the tensors a run exposes stay the unquantised ones */
    as_bf16_t *x_q, *qr_q, *og_q;
    float *xf, *ckv, *csc;
    int32_t *widx, *csel, *idx;
    uint8_t *cand;
    int *bad;                      /* [AS_MAX_LAYERS] set by build_idx: a refused selection */
    unsigned long long *valid;     /* [AS_MAX_LAYERS] selected rows per layer this step (profile) */
    /* pinned host staging */
    uint16_t *score_h;
    float *score_f;
    int32_t *csel_h;
} AsDevWork;

/* ---- the decode graph (engine/graph.c) ----
 * One layer's position-dependent scalars in a decode step, on the device: the decode graph's first
 * node writes them each replay (from the host's plan of the step), the kernels' *_decode variants
 * read them. */
typedef struct {
    int32_t lpos;    /* position of the latent completed in this step (kv sources) */
    int32_t row0;    /* compressed / index-key cache row written: start_pos / ratio */
    int32_t width;   /* index-score columns (index sources that score) */
    int32_t k;       /* compressed selection entries */
    int32_t nb;      /* rows_b_len */
    int32_t topk;    /* cols + k */
    int32_t nrows;   /* rows_a_len + rows_b_len */
    int32_t pad;
} AsLayerStep;

typedef struct {
    int32_t start_pos;
    int32_t pad[7];
    AsLayerStep layer[AS_MAX_LAYERS];
} AsStepParams;

/* Set (e->cap) while a decode graph is captured: the forward takes the *_decode variants reading dP,
 * sizes launches and copies for the most they can be, and records each selection as graph nodes
 * around a host node (as_dev_select_graph). NULL otherwise (the uncaptured path). */
typedef struct AsCapture {
    const AsStepParams *dP;
    void *attn_ws;              /* the sparse attention's split workspace */
    size_t attn_ws_bytes;
    unsigned *norm_ctr;         /* [2], at 0: wq_a's and wo_b's GEMV + RMSNorm (AS_FUSE_NORM) */
    struct AsDecodeGraph *g;
} AsCapture;

struct AsEngine {
    const AsModel *m;
    AsConfig cfg;
    AsEngineOptions opt;
    AsFault fault;
    int device;
    cudaStream_t st;
    /* a decode's kv branch (wkv GEMV, then its row pipeline into the ring) runs on st_kv, forked from
     * st after x (ev_x) and joined after q's RoPE (ev_kv), so that it overlaps the q branch; a graph
     * captures the two as parallel branches */
    cudaStream_t st_kv;
    /* the options' knobs (engine/knobs.h), sel_room's AS_SEL_ROOM_AUTO resolved for the device */
    AsEngineKnobs knobs;
    AsMemLimit mem;         /* knobs.gpu_mem_limit_mb's accounting (engine/mem_limit.h) */
    /* a captured layer's wo_b normalised h into x for the next layer (AS_FUSE_NORM): that layer skips its
     * attn_norm */
    bool x_ready;
    /* some projection runs as the fp8 linear (AsDevWeight.fp8): the work buffers hold the QDQ'd inputs */
    bool fp8;
    /* fp8 precision in the checkpoint's form (engine/fp8_proj.c): the fp8 weights whose codes give the bf16
     * upload's values exactly are AS_DW_FP8 (e4m3 codes and block scales) */
    bool fp8_form;
    cudaEvent_t ev_x, ev_kv, ev_qr; /* ev_qr: q_norm done, the kv branch's indexer may start (decode_schedule.c) */
    cublasHandle_t cublas;
    AsDevLayerWeights w[AS_MAX_LAYERS];
    AsDevLayerState ls[AS_MAX_LAYERS];
    AsDevShared sh;
    AsDevWork wk;
    float *cos_plain, *sin_plain, *cos_yarn, *sin_yarn;  /* the reference's RoPE tables */
    float *no_sink;                                       /* [n_heads] of -inf (fault) */
    int32_t *group_pos;                                   /* [max_seq / 2] of 2g: ratio-2 latent positions */
    size_t weight_bytes, state_bytes;
    /* the current step */
    int s, start_pos, step, next_layer;
    bool started;
    /* the last layer's run: scalars and provenance (tensors stay in the work buffers) */
    AsRun last;
    int last_layer;
    AsProfile *prof;     /* stage timing for bench-engine, NULL otherwise */
    /* engine/gemm.c's scratch: the q8_1 activations of a Q2_K projection, the f32 input / output of
     * the f32-weight paths (one projection at a time, in stream order). scratch_dec is sized once at
     * creation for up to 8 rows (a decode never allocates, and its address never changes: decode
     * graphs may bake it in); scratch grows on demand for more rows (never while a graph is captured). */
    void *scratch, *scratch_dec;
    size_t scratch_bytes, scratch_dec_bytes;
    const AsCapture *cap;   /* a decode graph being captured (engine/graph.c), else NULL */
    uint16_t *fetch_stage;  /* pinned, AS_FETCH_CHUNK values: a layer's bf16 tensors on their way to the host */
};

/* The values a layer's bf16 tensor is copied to the host in at a time (engine/step.c): a cancel waits
 * for one chunk, not for a whole [4096][64][512] tensor. */
#define AS_FETCH_CHUNK ((int64_t)1 << 22)

/* engine/gemm.c: y[s][out] = x[s][in] W^T (bf16, rounded) through cuBLAS or the decode GEMV; Q2_K
 * weights through the q8_1 kernels (mmvq up to 8 rows, mmq above). */
int as_dev_proj(AsEngine *e, const as_bf16_t *x, int64_t ldx, int s, const AsDevWeight *w, as_bf16_t *y,
                int64_t ldy, const char *what, AsError *err);
/* RoPE of a projection's heads of hd channels (the last rd of each) at pos ? pos[row] : pos0 + row */
typedef struct {
    int hd, rd, pos0;
    const int32_t *pos;
    const float *cos_t, *sin_t;
    int inverse;
} AsDevRope;
/* y = x W^T, then RoPE of its heads; fused: a bf16 decode GEMV rotates before its store (the same
 * roundings), room blocks of its one-wave grid left free for the kernels beside it (0: none). */
int as_dev_proj_rope(AsEngine *e, const as_bf16_t *x, int64_t ldx, int s, const AsDevWeight *w, as_bf16_t *y,
                     int64_t ldy, const AsDevRope *r, bool fused, int room, const char *what, AsError *err);
/* y = x W^T, then the residual h = bf16(h + y); fused: a bf16 decode GEMV adds in its store. */
int as_dev_proj_residual(AsEngine *e, const as_bf16_t *x, int64_t ldx, int s, const AsDevWeight *w, as_bf16_t *y,
                         as_bf16_t *h, bool fused, const char *what, AsError *err);
/* f32 weights and f32 output (the ratio-2 compressor); x bf16. */
int as_dev_proj_f32(AsEngine *e, const as_bf16_t *x, int s, const AsDevWeight *w, float *y, const char *what,
                    AsError *err);
/* One token row: y = x W^T (then h = bf16(h + y) when h is given), then y_norm = rmsnorm(h or y, norm_w)
 * in the same launch (as_k_gemv_bf16_norm; bf16 weights, the caller checks). */
int as_dev_proj_norm(AsEngine *e, const as_bf16_t *x, const AsDevWeight *w, as_bf16_t *y, as_bf16_t *h,
                     const float *norm_w, as_bf16_t *y_norm, unsigned *ctr, const char *what, AsError *err);
/* The fp8 linear's input (act_quant, then back to bf16: QDQ): y[t] = bf16(e4m3(clamp(x[t] / s)) * s) per
 * block of 32 of the s rows of n values (x rows ldx apart, y rows n apart), the fp8 KV quantiser's rule
 * (as_k_row_pipe with AS_KQ_FP8 only). */
int as_dev_qdq_fp8(AsEngine *e, const as_bf16_t *x, int64_t ldx, int s, int n, as_bf16_t *y, const char *what,
                   AsError *err);
/* The projection scratch for `bytes` of a projection of s rows (the fixed decode one up to 8 rows, the
 * growable one above; never grown while a graph is captured). */
int as_dev_scratch(AsEngine *e, int s, size_t bytes, void **p, const char *what, AsError *err);
/* wo_a: og[t][g][c] = o_back[t][g*gw:(g+1)*gw] . wo_a[g*olr + c], all groups in one call (what: the
 * messages' name, e.g. "layer 3 wo_a"). */
int as_dev_proj_grouped(AsEngine *e, const as_bf16_t *o, int s, const AsDevWeight *w, as_bf16_t *og,
                        const char *what, AsError *err);
/* gemm.c's scratch: the decode part allocated (engine creation), both freed (tear-down). */
int as_dev_proj_init(AsEngine *e, AsError *err);
void as_dev_proj_free(AsEngine *e);

/* engine/fp8_proj.c: fp8 precision in the checkpoint's form (AsEngine.fp8_form): whether the engine takes it
 * (fp8 precision, the fp8_qdq knob off); whether a weight streams its codes (as_fp8_codes_exact: the bf16
 * upload's values exactly; wo_a's groups on whole blocks of scales); one weight uploaded in it (codes as they
 * lie, scales per 32 x 32 block). */
bool as_dev_fp8_form_wanted(const AsEngine *e);
bool as_dev_codes_form(const AsEngine *e, const AsWTensor *t);
bool as_dev_wo_a_fp8_form(const AsEngine *e, const AsWTensor *t);
int as_dev_upload_fp8(AsEngine *e, const AsWTensor *t, AsDevWeight *dw, AsError *err);
/* as_dev_proj and its fused forms for an AS_DW_FP8 weight, x the QDQ'd input (bf16): the e4m3 GEMV up to
 * 8 rows, above the weight dequantised into the scratch and cuBLAS; bit for bit the bf16 upload's results. */
int as_dev_proj_fp8(AsEngine *e, const as_bf16_t *x, int64_t ldx, int s, const AsDevWeight *w, as_bf16_t *y,
                    int64_t ldy, const char *what, AsError *err);
int as_dev_proj_fp8_residual(AsEngine *e, const as_bf16_t *x, int64_t ldx, int s, const AsDevWeight *w, as_bf16_t *y,
                             as_bf16_t *h, bool fused, const char *what, AsError *err);
int as_dev_proj_fp8_rope(AsEngine *e, const as_bf16_t *x, int64_t ldx, int s, const AsDevWeight *w, as_bf16_t *y,
                         int64_t ldy, const AsDevRope *r, bool fused, int room, const char *what, AsError *err);
int as_dev_proj_fp8_norm(AsEngine *e, const as_bf16_t *x, const AsDevWeight *w, as_bf16_t *y, as_bf16_t *h,
                         const float *norm_w, as_bf16_t *y_norm, unsigned *ctr, const char *what, AsError *err);
/* engine/gemm.c's cuBLAS calls of a bf16 weight wd (w's shape; the bf16 upload's, or fp8 codes dequantised
 * into the scratch: the same call, the same bits): y = x wd^T, and wo_a's grouped form; note ends the
 * error message. */
int as_dev_gemm_bf16(AsEngine *e, const void *wd, const AsDevWeight *w, const as_bf16_t *x, int64_t ldx, int s,
                     as_bf16_t *y, int64_t ldy, const char *note, const char *what, AsError *err);
int as_dev_gemm_grouped_bf16(AsEngine *e, const void *wd, const as_bf16_t *o, int s, as_bf16_t *og, const char *note,
                             const char *what, AsError *err);
/* wo_a in fp8 form, x the bf16 o rows: the grouped e4m3 GEMV up to 8 rows; above, dequantised and cuBLAS. */
int as_dev_proj_grouped_fp8(AsEngine *e, const as_bf16_t *o, int s, const AsDevWeight *w, as_bf16_t *og,
                            const char *what, AsError *err);

/* engine/work.c: grow the work buffers to hold s tokens and width score columns. */
int as_dev_work_reserve(AsEngine *e, int s, int width, int topk, AsError *err);
void as_dev_work_free(AsEngine *e);

/* engine/forward.c: layer l of the current step, uncaptured (engine/forward.h has its steps). */
int as_dev_layer_forward(AsEngine *e, int l, AsError *err);

/* The refusal of a selection entry beyond the attended rows, flagged on the device by build_idx. */
int as_dev_refuse_idx(AsError *err, int l);
/* Reports a selection refused on the device since the step began (syncs the stream). */
int as_dev_check_refusals(AsEngine *e, AsError *err);

/* The sparse attention's kernel path for kernels/sparse_attn.cu (AsAttnPath's values are its own). */
static inline int as_dev_attn_path(const AsEngine *e) { return (int)e->knobs.attn_path; }

/* engine/select_host.c: candidate blocks and top-k on the host with the reference's code, for the plan's
 * indexer (p->indexes). Its pieces, shared with the decode graph: the candidate source's host mask grown
 * for its scores; the host work itself (wk.score_h -> score_f -> mask -> top-k of p->k with the plan's
 * offset into wk.csel_h over width columns; no CUDA call, no bookkeeping: it also runs as a host node);
 * the shared selection's buffers grown to n entries. */
int as_dev_select_host(AsEngine *e, const AsLayerPlan *p, AsError *err);
int as_dev_cand_reserve(AsEngine *e, const AsLayerPlan *p, AsError *err);
int as_dev_select_compute(AsEngine *e, const AsLayerPlan *p, int width, int k, AsError *err);
int as_dev_sel_reserve(AsEngine *e, size_t n, AsError *err);

/* engine/select_device.c: the selection on the device (the default; the host path where the row is
 * wider than AS_TOPK_MAX_WIDTH or opt.host_select). Under a capture it launches for the widest row
 * (the keys' capacity) and reads the live width and k from the step parameters. */
bool as_dev_select_on_device(const AsEngine *e, int max_width);
/* fuse_idx (under a capture, s == 1): the top-k also writes idx's compressed part (wk.idx from the
 * window's columns on, build_idx_decode's rule), so that the layer launches no build_idx after it */
int as_dev_select_device(AsEngine *e, const AsLayerPlan *p, bool fuse_idx, AsError *err);
/* The device mask grown to mask_entries, the counters allocated (never under a capture). */
int as_dev_select_reserve(AsEngine *e, size_t mask_entries, AsError *err);

/* engine/graph.c: the plan's selection as nodes of the graph being captured (score row down, top-k in
 * a host node, the selection up), or on the device. */
int as_dev_select_graph(AsEngine *e, const AsLayerPlan *p, bool fuse_idx, AsError *err);

#endif
