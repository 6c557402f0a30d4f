/* fp8 precision's projections in the checkpoint's form: the five fp8 projections' weights
 * stay e4m3 codes with one f32 scale per 32 x 32 block on the device (model/fp8_form.h), and run as
 * act_quant (kernels/act_quant.cu) + the fp8 GEMV (decode, up to 8 rows: kernels/fp8_gemv.cu) or the
 * wgmma fp8 GEMM (prefill: kernels/fp8_gemm.cu); a checkpoint's fp8 wo_a (power-of-two scales) streams
 * its codes too, as the bf16 linear of the exactly dequantised weight. Taken on a compute capability 9.0
 * device (the sm_90a code) when the engine's fp8_form knob asks for it (--fp8-form); otherwise fp8
 * precision keeps act_quant's QDQ and
 * the bf16 kernels (engine/gemm.c, as_dev_qdq_fp8).
 *
 * The fp8 linear's input buffers (AsDevWork.x_q, qr_q, og_q) then hold act_quant's output for s rows of n
 * values in one piece (kernels.h, as_act8_view: codes, then scales) instead of the QDQ'd bf16 rows; the
 * projections that read them are the fp8-form ones, which view them that way. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine/check.h"
#include "engine/internal.h"
#include "model/fp8_form.h"
#include "model/precision.h"

bool as_dev_fp8_form_wanted(const AsEngine *e)
{
    if (e->m->precision != AS_PREC_FP8)
        return false;
    if (!e->knobs.fp8_form)
        return false;
    int major = 0, minor = 0;
    if (cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, e->device) != cudaSuccess ||
        cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, e->device) != cudaSuccess) {
        cudaGetLastError();
        return false;
    }
    return major == 9 && minor == 0;
}

bool as_dev_wo_a_fp8_form(const AsEngine *e, const AsWTensor *t)
{
    return e->fp8_form && as_wt_is_fp8(t) && as_wt_cols(t) % 32 == 0 && e->cfg.o_lora_rank % 8 == 0 &&
           as_fp8_scales_pow2(t);
}

int as_dev_upload_fp8(AsEngine *e, const AsWTensor *t, AsDevWeight *dw, AsError *err)
{
    memset(dw, 0, sizeof *dw);
    const int64_t rows = as_wt_rows(t), cols = as_wt_cols(t);
    const int64_t ldws = as_fp8_form_ldws(cols), srows = as_fp8_form_scale_rows(rows);
    if (cols % 32 || t->nbytes != rows * cols || (t->block != 32 && t->block != 128))
        return as_err(err, AS_EBADINPUT, "%s: an fp8 weight [%lld, %lld] of %lld bytes with %d-blocks cannot be read "
                      "in fp8 form (whole 32-wide blocks, one byte a weight, 32 or 128 blocks)", t->name, (long long)rows,
                      (long long)cols, (long long)t->nbytes, t->block);
    dw->type = AS_DW_FP8;
    dw->out = (int)rows;
    dw->in = (int)cols;
    dw->ldws = ldws;
    dw->form_bytes = (double)t->nbytes + (double)t->scale->nbytes;
    const size_t wbytes = (size_t)(rows * cols), sbytes = sizeof(float) * (size_t)(srows * ldws);
    cudaError_t rc = as_dev_malloc(&e->mem, &dw->d, wbytes);
    if (rc != cudaSuccess) {
        dw->d = NULL;
        return as_dev_oom(&e->mem, err, t->name, wbytes, e->device, rc);
    }
    rc = as_dev_malloc(&e->mem, (void **)&dw->ws, sbytes);
    if (rc != cudaSuccess) {
        dw->ws = NULL;
        return as_dev_oom(&e->mem, err, t->name, sbytes, e->device, rc);
    }
    e->weight_bytes += wbytes + sbytes;
    float *ws = malloc(sbytes);
    if (!ws || as_fp8_form_scales(t, ws)) {
        free(ws);
        return as_err(err, AS_ERUNTIME, "out of host memory for the block scales of %s", t->name);
    }
    rc = cudaMemcpy(dw->ws, ws, sbytes, cudaMemcpyHostToDevice);
    free(ws);
    CU(err, rc, "uploading the block scales of %s", t->name);
    CU(err, cudaMemcpy(dw->d, t->data, wbytes, cudaMemcpyHostToDevice), "uploading %s (%zu bytes of e4m3 codes)", t->name,
       wbytes);
    return 0;
}

static AsFp8Weight fp8_weight(const AsDevWeight *w)
{
    return (AsFp8Weight){.w = w->d, .ldw = w->in, .ws = w->ws, .ldws = w->ldws, .n_out = w->out, .n_in = w->in,
                         .batch = 1, .stride_rows = 0};
}

/* The act_quant view of a projection's input x (s rows of w->in values), with the check that the caller
 * passed one of the fp8 linear's input buffers in its compact layout. */
static int act_view(const as_bf16_t *x, int64_t ldx, int s, const AsDevWeight *w, AsFp8Act *a, const char *what,
                    AsError *err)
{
    if (ldx != w->in)
        return as_err(err, AS_ERUNTIME, "%s: the fp8 projection's input has rows %lld apart, not %d (act_quant's "
                      "buffer is compact)", what, (long long)ldx, w->in);
    *a = as_act8_view(x, s, w->in);
    return 0;
}

int as_dev_act_quant(AsEngine *e, const as_bf16_t *x, int64_t ldx, int s, int n, as_bf16_t *y, const char *what,
                     AsError *err)
{
    if ((int64_t)as_act8_bytes(s, n) > 2 * (int64_t)s * n)
        return as_err(err, AS_ERUNTIME, "%s: act_quant of %dx%d does not fit its buffer", what, s, n);
    const AsFp8Act a = as_act8_view(y, s, n);
    KL(err, as_k_act_quant(x, ldx, s, n, (uint8_t *)y, a.ldq, (float *)a.s, a.lds, e->st),
       "%s: act_quant (e4m3 codes and ue8m0 scales, blocks of 32) of the %dx%d input", what, s, n);
    return 0;
}

int as_dev_proj_fp8(AsEngine *e, const as_bf16_t *x, int64_t ldx, int s, const AsDevWeight *w, as_bf16_t *y,
                    int64_t ldy, const char *what, AsError *err)
{
    AsFp8Act a;
    TRY(act_view(x, ldx, s, w, &a, what, err));
    const AsFp8Weight fw = fp8_weight(w);
    if (s <= 8) {
        KL(err, as_k_fp8_gemv(&fw, &a, s, y, ldy, 0, 0, e->st), "%s: fp8 gemv %dx%d, %d rows", what, w->out, w->in, s);
        return 0;
    }
    KL(err, as_k_fp8_gemm(&fw, &a, s, y, ldy, e->st), "%s: fp8 GEMM m=%d n=%d k=%d%s", what, s, w->out, w->in,
       as_k_fp8_gemm_applies(&fw, &a) ? "" : " (the GEMV fallback)");
    return 0;
}

int as_dev_proj_fp8_residual(AsEngine *e, const as_bf16_t *x, int64_t ldx, int s, const AsDevWeight *w, as_bf16_t *y,
                             as_bf16_t *h, bool fused, const char *what, AsError *err)
{
    if (fused && s <= 8) {
        AsFp8Act a;
        TRY(act_view(x, ldx, s, w, &a, what, err));
        const AsFp8Weight fw = fp8_weight(w);
        KL(err, as_k_fp8_gemv_residual(&fw, &a, s, y, w->out, h, w->out, e->st), "%s: fp8 gemv %dx%d + residual, %d rows",
           what, w->out, w->in, s);
        return 0;
    }
    TRY(as_dev_proj_fp8(e, x, ldx, s, w, y, w->out, what, err));
    KL(err, as_k_residual_add(h, y, (int64_t)s * w->out, e->st), "%s: residual %dx%d", what, s, w->out);
    return 0;
}

int as_dev_proj_fp8_rope(AsEngine *e, const as_bf16_t *x, int64_t ldx, int s, const AsDevWeight *w, as_bf16_t *y,
                         int64_t ldy, const AsDevRope *r, bool fused, int room, const char *what, AsError *err)
{
    const int heads = w->out / r->hd;
    if (fused && s <= 8 && ldy == w->out) {
        AsFp8Act a;
        TRY(act_view(x, ldx, s, w, &a, what, err));
        const AsFp8Weight fw = fp8_weight(w);
        KL(err, as_k_fp8_gemv_rope(&fw, &a, s, y, ldy, heads, r->hd, r->rd, r->pos0, r->pos, r->cos_t, r->sin_t,
                                   r->inverse, room, e->st),
           "%s: fp8 gemv %dx%d + rope (%d heads x %d, rd %d, pos %d), %d rows, %d blocks left free", what, w->out, w->in,
           heads, r->hd, r->rd, r->pos0, s, room);
        return 0;
    }
    TRY(as_dev_proj_fp8(e, x, ldx, s, w, y, ldy, what, err));
    KL(err, as_k_rope(y, ldy, s, heads, r->hd, r->rd, r->pos0, r->pos, r->cos_t, r->sin_t, r->inverse, e->st),
       "%s: rope %dx%dx%d (pos %d)", what, s, heads, r->hd, r->pos0);
    return 0;
}

int as_dev_proj_fp8_norm(AsEngine *e, const as_bf16_t *x, const AsDevWeight *w, as_bf16_t *y, as_bf16_t *h,
                         const float *norm_w, as_bf16_t *y_norm, unsigned *ctr, const char *what, AsError *err)
{
    AsFp8Act a;
    TRY(act_view(x, w->in, 1, w, &a, what, err));
    const AsFp8Weight fw = fp8_weight(w);
    KL(err, as_k_fp8_gemv_norm(&fw, &a, y, h, norm_w, e->cfg.norm_eps, y_norm, ctr, e->st),
       "%s: fp8 gemv %dx%d%s + rmsnorm, 1 row", what, w->out, w->in, h ? " + residual" : "");
    return 0;
}

int as_dev_proj_grouped_fp8(AsEngine *e, const as_bf16_t *o, int s, const AsDevWeight *w, as_bf16_t *og,
                            const char *what, AsError *err)
{
    const AsConfig *c = &e->cfg;
    const int G = c->o_groups, olr = c->o_lora_rank, gw = c->gw, ldo = c->n_heads * c->head_dim;
    AsFp8Weight fw = fp8_weight(w);
    if (s <= 8) {
        fw.n_out = olr, fw.batch = G, fw.stride_rows = olr;
        KL(err, as_k_fp8_gemv_bf16x(&fw, o, ldo, gw, s, og, (int64_t)G * olr, olr, e->st),
           "%s: grouped fp8-form gemv %d groups of %dx%d, %d rows", what, G, olr, gw, s);
        return 0;
    }
    /* a prefill: the weight dequantised into the scratch (the bf16 upload's values exactly), then cuBLAS */
    void *wb;
    TRY(as_dev_scratch(e, s, sizeof(as_bf16_t) * (size_t)w->out * (size_t)w->in, &wb, what, err));
    KL(err, as_k_fp8_dequant_bf16(&fw, wb, w->in, e->st), "%s: dequantising %dx%d fp8 codes", what, w->out, w->in);
    const float one = 1.0f, zero = 0.0f;
    CB(err,
       cublasGemmStridedBatchedEx(e->cublas, CUBLAS_OP_T, CUBLAS_OP_N, olr, s, gw, &one, wb, CUDA_R_16BF, gw,
                                  (long long)olr * gw, o, CUDA_R_16BF, ldo, gw, &zero, og, CUDA_R_16BF, G * olr, olr, G,
                                  CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT),
       "%s: batched bf16 GEMM %d groups m=%d n=%d k=%d (dequantised fp8 form)", what, G, olr, s, gw);
    return 0;
}
