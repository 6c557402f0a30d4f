/* The engine's projections: cuBLAS GEMMs (bf16 in, f32 accumulate, bf16 out) for prefill, the
 * decode GEMV kernel for up to 8 token rows, f32 paths for the ratio-2 compressor. */
#include <stdio.h>

#include "engine/check.h"
#include "engine/internal.h"

#define GEMV_MAX_ROWS 8

/* Row-major y[s][out] = x[s][in] W[out][in]^T is, column-major, Y^T = op_T(W) * X^T. */
static int proj_f32(AsEngine *e, const as_bf16_t *x, int s, const AsDevWeight *w, float *y, const char *what,
                    AsError *err);
static int proj_bf16(AsEngine *e, const as_bf16_t *x, int64_t ldx, int s, const AsDevWeight *w, as_bf16_t *y,
                     int64_t ldy, const char *what, AsError *err);

/* Work and minimal bytes of an [s x in] by [out x in]^T projection (for the profile). */
static int prof_proj(AsEngine *e, int s, const AsDevWeight *w)
{
    if (!e->prof)
        return -1;
    double esz = w->f32 ? 4 : 2;
    return as_prof_begin(e, AS_OP_PROJ, e->last_layer, 2.0 * s * w->out * w->in,
                         esz * w->out * w->in + 2.0 * s * (w->in + w->out));
}

int as_dev_proj(AsEngine *e, const as_bf16_t *x, int64_t ldx, int s, const AsDevWeight *w, as_bf16_t *y,
                int64_t ldy, const char *what, AsError *err)
{
    int slot = prof_proj(e, s, w);
    int rc = proj_bf16(e, x, ldx, s, w, y, ldy, what, err);
    as_prof_end(e, slot);
    return rc;
}

static int proj_bf16(AsEngine *e, const as_bf16_t *x, int64_t ldx, int s, const AsDevWeight *w, as_bf16_t *y,
                     int64_t ldy, const char *what, AsError *err)
{
    if (w->f32) {
        /* f32/f16-stored projection with bf16 semantics: exact f32 weights, output rounded */
        float *yf = NULL; /* a rare path (f16/f32 files): stream-ordered scratch */
        CU(err, cudaMallocAsync((void **)&yf, sizeof(float) * (size_t)s * w->out, e->st), "%s: f32 scratch %dx%d",
           what, s, w->out);
        int rc = proj_f32(e, x, s, w, yf, what, err);
        for (int t = 0; t < s && !rc; t++)
            if (as_k_f32_to_bf16(yf + (size_t)t * w->out, y + (size_t)t * ldy, w->out, e->st))
                rc = as_err(err, AS_ERUNTIME, "%s: rounding %d outputs of row %d", what, w->out, t);
        cudaFreeAsync(yf, e->st);
        return rc;
    }
    if (s <= GEMV_MAX_ROWS) {
        KL(err, as_k_gemv_bf16(w->d, w->in, 0, w->out, w->in, x, ldx, 0, s, y, ldy, 0, 0, 1, e->st),
           "%s: gemv %dx%d, %d rows", what, w->out, w->in, s);
        return 0;
    }
    const float one = 1.0f, zero = 0.0f;
    CB(err,
       cublasGemmEx(e->cublas, CUBLAS_OP_T, CUBLAS_OP_N, w->out, s, w->in, &one, w->d, CUDA_R_16BF, w->in, x,
                    CUDA_R_16BF, (int)ldx, &zero, y, CUDA_R_16BF, (int)ldy, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT),
       "%s: bf16 GEMM m=%d n=%d k=%d", what, w->out, s, w->in);
    return 0;
}

int as_dev_proj_f32(AsEngine *e, const as_bf16_t *x, int s, const AsDevWeight *w, float *y, const char *what,
                    AsError *err)
{
    int slot = prof_proj(e, s, w);
    int rc = proj_f32(e, x, s, w, y, what, err);
    as_prof_end(e, slot);
    return rc;
}

static int proj_f32(AsEngine *e, const as_bf16_t *x, int s, const AsDevWeight *w, float *y, const char *what,
                    AsError *err)
{
    if (s <= GEMV_MAX_ROWS && w->f32) {
        KL(err, as_k_gemv_f32w(w->d, w->in, w->out, w->in, x, w->in, s, y, w->out, e->st), "%s: f32 gemv %dx%d",
           what, w->out, w->in);
        return 0;
    }
    KL(err, as_k_bf16_to_f32(x, e->wk.xf, (int64_t)s * w->in, e->st), "%s: widening %dx%d input", what, s, w->in);
    const float one = 1.0f, zero = 0.0f;
    CB(err,
       cublasSgemm(e->cublas, CUBLAS_OP_T, CUBLAS_OP_N, w->out, s, w->in, &one, w->d, w->in, e->wk.xf, w->in, &zero,
                   y, w->out),
       "%s: f32 GEMM m=%d n=%d k=%d", what, w->out, s, w->in);
    return 0;
}

static int proj_grouped(AsEngine *e, const as_bf16_t *o, int s, const AsDevWeight *w, as_bf16_t *og, AsError *err);

int as_dev_proj_grouped(AsEngine *e, const as_bf16_t *o, int s, const AsDevWeight *w, as_bf16_t *og, AsError *err)
{
    int slot = prof_proj(e, s, w); /* out x in is the whole wo_a: the groups' total work */
    int rc = proj_grouped(e, o, s, w, og, err);
    as_prof_end(e, slot);
    return rc;
}

static int proj_grouped(AsEngine *e, const as_bf16_t *o, int s, const AsDevWeight *w, as_bf16_t *og, AsError *err)
{
    const AsConfig *c = &e->cfg;
    int G = c->o_groups, olr = c->o_lora_rank, gw = c->gw, ldo = c->n_heads * c->head_dim;
    if (w->f32)
        return as_err(err, AS_EBADINPUT, "wo_a stored as f32/f16: the grouped projection needs bf16 weights");
    if (s <= GEMV_MAX_ROWS) {
        KL(err,
           as_k_gemv_bf16(w->d, gw, (int64_t)olr * gw, olr, gw, o, ldo, gw, s, og, (int64_t)G * olr, olr, 0, G, e->st),
           "wo_a: grouped gemv %d groups of %dx%d, %d rows", G, olr, gw, s);
        return 0;
    }
    const float one = 1.0f, zero = 0.0f;
    CB(err,
       cublasGemmStridedBatchedEx(e->cublas, CUBLAS_OP_T, CUBLAS_OP_N, olr, s, gw, &one, w->d, CUDA_R_16BF, gw,
                                  (long long)olr * gw, o, CUDA_R_16BF, ldo, gw, &zero, og, CUDA_R_16BF, G * olr, olr, G,
                                  CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT),
       "wo_a: batched bf16 GEMM %d groups m=%d n=%d k=%d", G, olr, s, gw);
    return 0;
}
