/* fp8 precision's projections in the checkpoint's form: the weights of the five fp8 projections (and a
 * checkpoint's fp8 wo_a) stay e4m3 codes, one byte a weight, with one f32 scale per 32 x 32 block on the
 * device (model/fp8_form.h), half the bytes of their bf16 upload. Their inputs are act_quant's QDQ (as
 * in the bf16 upload's fp8 precision: as_dev_qdq_fp8), and the projections compute exactly what the bf16
 * upload's do, bit for bit: a decode (up to 8 rows) is kernels/gemv.cu's GEMV reading the codes
 * (as_k_gemv_e4m3: each weight widened to bf16(code * scale) in the bf16 GEMV's lanes and order), a
 * prefill dequantises the weight into the scratch and runs the same cuBLAS call as a bf16 weight. A
 * weight whose codes would not give the bf16 upload's values exactly (as_fp8_codes_exact) is uploaded
 * in bf16. The fp8_qdq knob (--fp8-qdq) uploads every weight in bf16 instead. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine/check.h"
#include "engine/internal.h"
#include "model/fp8_form.h"
#include "model/precision.h"

bool as_dev_fp8_form_wanted(const AsEngine *e)
{
    return e->m->precision == AS_PREC_FP8 && !e->knobs.fp8_qdq;
}

bool as_dev_codes_form(const AsEngine *e, const AsWTensor *t)
{
    return e->fp8_form && t && as_wt_is_fp8(t) && as_fp8_codes_exact(t);
}

bool as_dev_wo_a_fp8_form(const AsEngine *e, const AsWTensor *t)
{
    /* the groups' rows start on a 32-row block of scales */
    return as_dev_codes_form(e, t) && e->cfg.o_lora_rank % 32 == 0;
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

/* A prefill's weight: dequantised into the scratch (the bf16 upload's values exactly), which it holds until
 * the next as_dev_scratch. */
static int dequant(AsEngine *e, int s, const AsDevWeight *w, AsFp8Weight fw, void **wb, const char *what, AsError *err)
{
    TRY(as_dev_scratch(e, s, sizeof(as_bf16_t) * (size_t)w->out * (size_t)w->in, wb, what, err));
    KL(err, as_k_fp8_dequant_bf16(&fw, *wb, w->in, e->st), "%s: dequantising %dx%d fp8 codes", what, w->out, w->in);
    return 0;
}

int as_dev_proj_fp8(AsEngine *e, const as_bf16_t *x, int64_t ldx, int s, const AsDevWeight *w, as_bf16_t *y,
                    int64_t ldy, const char *what, AsError *err)
{
    const AsFp8Weight fw = fp8_weight(w);
    if (s <= AS_DEV_GEMV_MAX_ROWS) {
        KL(err, as_k_gemv_e4m3(&fw, x, ldx, 0, s, y, ldy, 0, 0, e->st), "%s: e4m3 gemv %dx%d, %d rows", what, w->out,
           w->in, s);
        return 0;
    }
    void *wb;
    TRY(dequant(e, s, w, fw, &wb, what, err));
    return as_dev_gemm_bf16(e, wb, w, x, ldx, s, y, ldy, " (dequantised fp8 codes)", what, err);
}

int as_dev_proj_fp8_residual(AsEngine *e, const as_bf16_t *x, int64_t ldx, int s, const AsDevWeight *w, as_bf16_t *y,
                             as_bf16_t *h, bool fused, const char *what, AsError *err)
{
    if (fused && s <= AS_DEV_GEMV_MAX_ROWS) {
        const AsFp8Weight fw = fp8_weight(w);
        KL(err, as_k_gemv_e4m3_residual(&fw, x, ldx, s, y, w->out, h, w->out, e->st),
           "%s: e4m3 gemv %dx%d + residual, %d rows", what, w->out, w->in, s);
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
    if (fused && s <= AS_DEV_GEMV_MAX_ROWS && ldy == w->out) {
        const AsFp8Weight fw = fp8_weight(w);
        KL(err, as_k_gemv_e4m3_rope(&fw, x, ldx, s, y, ldy, heads, r->hd, r->rd, r->pos0, r->pos, r->cos_t, r->sin_t,
                                    r->inverse, room, e->st),
           "%s: e4m3 gemv %dx%d + rope (%d heads x %d, rd %d, pos %d), %d rows, %d blocks left free", what, w->out,
           w->in, heads, r->hd, r->rd, r->pos0, s, room);
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
    const AsFp8Weight fw = fp8_weight(w);
    KL(err, as_k_gemv_e4m3_norm(&fw, x, y, h, norm_w, e->cfg.norm_eps, y_norm, ctr, e->st),
       "%s: e4m3 gemv %dx%d%s + rmsnorm, 1 row", what, w->out, w->in, h ? " + residual" : "");
    return 0;
}

int as_dev_proj_grouped_fp8(AsEngine *e, const as_bf16_t *o, int s, const AsDevWeight *w, as_bf16_t *og,
                            const char *what, AsError *err)
{
    const AsConfig *c = &e->cfg;
    const int G = c->o_groups, olr = c->o_lora_rank, gw = c->gw, ldo = c->n_heads * c->head_dim;
    AsFp8Weight fw = fp8_weight(w);
    if (s <= AS_DEV_GEMV_MAX_ROWS) {
        fw.n_out = olr, fw.batch = G, fw.stride_rows = olr;
        KL(err, as_k_gemv_e4m3(&fw, o, ldo, gw, s, og, (int64_t)G * olr, olr, 0, e->st),
           "%s: grouped e4m3 gemv %d groups of %dx%d, %d rows", what, G, olr, gw, s);
        return 0;
    }
    void *wb;
    TRY(dequant(e, s, w, fw, &wb, what, err));
    return as_dev_gemm_grouped_bf16(e, wb, o, s, og, " (dequantised fp8 codes)", what, err);
}
