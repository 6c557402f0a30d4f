/* The engine's projections, by weight type:
 *   bf16: cuBLAS GEMMs (bf16 in, f32 accumulate, bf16 out) for prefill, the decode GEMV kernel for up
 *         to 8 token rows;
 *   f32:  the ratio-2 compressor (f32 out), and f32-stored weights with bf16 semantics (f32 / f16
 *         files, GGUF Q8_0 dequantised exactly at upload): the f32 GEMV or SGEMM, output rounded;
 *   Q2_K: raw GGUF blocks: the activations quantised to q8_1 into the scratch
 *         (kernels/q8_1.cu), then the Q2_K matrix-vector kernel for up to 8 rows or the tiled int8
 *         tensor-core kernel above (kernels/q2k_mmvq.cu, q2k_mmq.cu): f32 accumulation, bf16 out;
 *   fp8 form: engine/fp8_proj.c (act_quant's codes, the fp8 GEMV and GEMM). */
#include <stdio.h>

#include "engine/check.h"
#include "engine/internal.h"
#include "engine/mem_limit.h"
#include "model/ggml_blocks.h"


/* Row-major y[s][out] = x[s][in] W[out][in]^T is, column-major, Y^T = op_T(W) * X^T. */
static int proj_f32(AsEngine *e, const as_bf16_t *x, int64_t ldx, int s, const AsDevWeight *w, float *y,
                    const char *what, AsError *err);
static int proj_bf16(AsEngine *e, const as_bf16_t *x, int64_t ldx, int s, const AsDevWeight *w, as_bf16_t *y,
                     int64_t ldy, const char *what, AsError *err);

/* The growable scratch holds at least `bytes` afterwards: grown (with headroom, never shrunk) after
 * draining the stream, so that no queued kernel still uses the old buffer. Never while the stream is
 * being captured into a graph (the graph would keep the old address). */
static int scratch_reserve(AsEngine *e, size_t bytes, const char *what, AsError *err)
{
    if (bytes <= e->scratch_bytes)
        return 0;
    enum cudaStreamCaptureStatus cs = cudaStreamCaptureStatusNone;
    if (cudaStreamIsCapturing(e->st, &cs) == cudaSuccess && cs != cudaStreamCaptureStatusNone)
        return as_err(err, AS_ERUNTIME, "%s: the projection scratch (%.1f MiB) would grow to %.1f MiB while a graph "
                      "is captured", what, (double)e->scratch_bytes / 1048576.0, (double)bytes / 1048576.0);
    CU(err, cudaStreamSynchronize(e->st), "%s: draining the stream to grow the projection scratch", what);
    cudaFree(e->scratch);
    e->scratch = NULL;
    e->scratch_bytes = 0;
    const size_t want = bytes + bytes / 4;
    cudaError_t rc = as_dev_malloc(&e->mem, &e->scratch, want);
    if (rc != cudaSuccess) {
        cudaGetLastError();
        e->scratch = NULL;
        return as_err(err, AS_ERUNTIME, "%s: out of GPU memory for the projection scratch (%.1f MiB): %s", what,
                      (double)want / 1048576.0, cudaGetErrorString(rc));
    }
    e->scratch_bytes = want;
    return 0;
}

/* Scratch for `bytes` of a projection of s rows: the fixed decode scratch up to AS_DEV_GEMV_MAX_ROWS rows
 * (sized for every projection at that size), the growable one above. */
int as_dev_scratch(AsEngine *e, int s, size_t bytes, void **p, const char *what, AsError *err)
{
    if (s <= AS_DEV_GEMV_MAX_ROWS && bytes <= e->scratch_dec_bytes) {
        *p = e->scratch_dec;
        return 0;
    }
    TRY(scratch_reserve(e, bytes, what, err));
    *p = e->scratch;
    return 0;
}

/* The decode scratch: AS_DEV_GEMV_MAX_ROWS rows of q8_1 blocks of the widest projection input (the o rows of
 * wo_a), or of wo_a's f32 output (the f32 path), whichever is larger. */
int as_dev_proj_init(AsEngine *e, AsError *err)
{
    const AsConfig *c = &e->cfg;
    int64_t in = c->dim;
    const int64_t ins[] = {c->q_lora_rank, c->head_dim, (int64_t)c->n_heads * c->head_dim,
                           (int64_t)c->o_groups * c->o_lora_rank};
    for (size_t i = 0; i < sizeof ins / sizeof ins[0]; i++)
        in = ins[i] > in ? ins[i] : in;
    size_t q8 = sizeof(AsBlockQ8_1) * (size_t)AS_DEV_GEMV_MAX_ROWS * (size_t)(in / AS_QK8_1 + 1);
    size_t f32 = sizeof(float) * (size_t)AS_DEV_GEMV_MAX_ROWS * (size_t)c->o_groups * (size_t)c->o_lora_rank;
    const size_t bytes = q8 > f32 ? q8 : f32;
    cudaError_t rc = as_dev_malloc(&e->mem, &e->scratch_dec, bytes);
    if (rc != cudaSuccess) {
        cudaGetLastError();
        e->scratch_dec = NULL;
        return as_err(err, AS_ERUNTIME, "out of GPU memory for the decode projection scratch (%.2f MiB): %s",
                      (double)bytes / 1048576.0, cudaGetErrorString(rc));
    }
    e->scratch_dec_bytes = bytes;
    return 0;
}

void as_dev_proj_free(AsEngine *e)
{
    cudaFree(e->scratch);
    cudaFree(e->scratch_dec);
    e->scratch = e->scratch_dec = NULL;
    e->scratch_bytes = e->scratch_dec_bytes = 0;
}

/* Work and minimal bytes of an [s x in] by [out x in]^T projection (for the profile). */
static int prof_proj(AsEngine *e, int s, const AsDevWeight *w)
{
    if (!e->prof)
        return -1;
    double esz = w->type == AS_DW_F32 ? 4 : w->type == AS_DW_Q2K ? (double)sizeof(AsBlockQ2K) / AS_QK_K
               : w->type == AS_DW_FP8 ? w->form_bytes / ((double)w->out * w->in) : 2;
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

int as_dev_qdq_fp8(AsEngine *e, const as_bf16_t *x, int64_t ldx, int s, int n, as_bf16_t *y, const char *what,
                   AsError *err)
{
    if (n <= 0 || n % 32)
        return as_err(err, AS_EBADINPUT, "%s: act_quant of rows of %d values (not whole blocks of 32)", what, n);
    /* each row as sub-rows of up to 256 values (one a thread), whole quantiser blocks each: the row pipe's
     * blocks are aligned to the sub-row, so this is the flat quantiser's result, spread over more blocks */
    int sub = n < 256 ? n : 256;
    while (n % sub)
        sub -= 32;
    AsRowPipe p = {.x = x, .ldx = ldx, .y = y, .ldy = n, .rows = s, .heads = n / sub, .n = sub, .quant = AS_KQ_FP8,
                   .post_scale = 1.0f};
    KL(err, as_k_row_pipe(&p, e->st), "%s: act_quant (fp8 e4m3, blocks of 32, QDQ) of the %dx%d input", what, s, n);
    return 0;
}

/* y = x W^T, then the residual h = bf16(h + y) (rows of c->dim: h, y rows w->out apart). Fused, a bf16
 * decode GEMV does both in one launch (as_k_gemv_bf16_residual: the same roundings); the rest project,
 * then add (as_k_residual_add). */
int as_dev_proj_residual(AsEngine *e, const as_bf16_t *x, int64_t ldx, int s, const AsDevWeight *w, as_bf16_t *y,
                         as_bf16_t *h, bool fused, const char *what, AsError *err)
{
    if (w->type == AS_DW_FP8) {
        int slot = prof_proj(e, s, w);
        int rc = as_dev_proj_fp8_residual(e, x, ldx, s, w, y, h, fused, what, err);
        as_prof_end(e, slot);
        return rc;
    }
    if (fused && w->type == AS_DW_BF16 && s <= AS_DEV_GEMV_MAX_ROWS) {
        int slot = prof_proj(e, s, w);
        int rc = as_k_gemv_bf16_residual(w->d, w->out, w->in, x, ldx, s, y, w->out, h, w->out, e->st);
        as_prof_end(e, slot);
        KL(err, rc, "%s: gemv %dx%d + residual, %d rows", what, w->out, w->in, s);
        return 0;
    }
    TRY(as_dev_proj(e, x, ldx, s, w, y, w->out, what, err));
    KL(err, as_k_residual_add(h, y, (int64_t)s * w->out, e->st), "%s: residual %dx%d", what, s, w->out);
    return 0;
}

int as_dev_proj_norm(AsEngine *e, const as_bf16_t *x, const AsDevWeight *w, as_bf16_t *y, as_bf16_t *h,
                     const float *norm_w, as_bf16_t *y_norm, unsigned *ctr, const char *what, AsError *err)
{
    int slot = prof_proj(e, 1, w);
    if (w->type == AS_DW_FP8) {
        int rc = as_dev_proj_fp8_norm(e, x, w, y, h, norm_w, y_norm, ctr, what, err);
        as_prof_end(e, slot);
        return rc;
    }
    int rc = as_k_gemv_bf16_norm(w->d, w->out, w->in, x, y, h, norm_w, e->cfg.norm_eps, y_norm, ctr, e->st);
    as_prof_end(e, slot);
    KL(err, rc, "%s: gemv %dx%d%s + rmsnorm, 1 row", what, w->out, w->in, h ? " + residual" : "");
    return 0;
}

/* y = x W^T, then RoPE of its heads (as_k_rope(y, ldy, s, heads, hd, rd, pos0, pos, ...)): q after
 * wq_b. Fused, a bf16 decode GEMV rotates before its store (as_k_gemv_bf16_rope: the same roundings);
 * the rest project, then rotate. */
int as_dev_proj_rope(AsEngine *e, const as_bf16_t *x, int64_t ldx, int s, const AsDevWeight *w, as_bf16_t *y,
                     int64_t ldy, const AsDevRope *r, bool fused, int room, const char *what, AsError *err)
{
    const int heads = w->out / r->hd;
    if (w->type == AS_DW_FP8) {
        int slot = prof_proj(e, s, w);
        int rc = as_dev_proj_fp8_rope(e, x, ldx, s, w, y, ldy, r, fused, room, what, err);
        as_prof_end(e, slot);
        return rc;
    }
    if (fused && w->type == AS_DW_BF16 && s <= AS_DEV_GEMV_MAX_ROWS && ldy == w->out) {
        int slot = prof_proj(e, s, w);
        int rc = as_k_gemv_bf16_rope(w->d, w->out, w->in, x, ldx, s, y, ldy, heads, r->hd, r->rd, r->pos0, r->pos,
                                     r->cos_t, r->sin_t, r->inverse, room, e->st);
        as_prof_end(e, slot);
        KL(err, rc, "%s: gemv %dx%d + rope (%d heads x %d, rd %d, pos %d), %d rows, %d blocks left free", what, w->out,
           w->in, heads, r->hd, r->rd, r->pos0, s, room);
        return 0;
    }
    TRY(as_dev_proj(e, x, ldx, s, w, y, ldy, what, err));
    KL(err, as_k_rope(y, ldy, s, heads, r->hd, r->rd, r->pos0, r->pos, r->cos_t, r->sin_t, r->inverse, e->st),
       "%s: rope %dx%dx%d (pos %d)", what, s, heads, r->hd, r->pos0);
    return 0;
}

/* Q2_K: the s rows of x quantised to q8_1 (in / 32 blocks each) into the scratch, then mmvq (s <= 8)
 * or mmq. The q8_1 quantisation is the documented difference from the reference (SPEC 6). */
static int proj_q2k(AsEngine *e, const as_bf16_t *x, int64_t ldx, int s, const AsDevWeight *w, as_bf16_t *y,
                    int64_t ldy, const char *what, AsError *err)
{
    const int64_t nq = w->in / AS_QK8_1, ldw = w->in / AS_QK_K;
    void *xq;
    TRY(as_dev_scratch(e, s, sizeof(AsBlockQ8_1) * (size_t)s * (size_t)nq, &xq, what, err));
    KL(err, as_k_quantize_q8_1(x, ldx, s, w->in, xq, nq, e->st), "%s: q8_1 of the %dx%d input", what, s, w->in);
    if (s <= AS_DEV_GEMV_MAX_ROWS)
        KL(err, as_k_q2k_mmvq(w->d, ldw, 0, w->out, w->in, xq, nq, 0, s, y, ldy, 0, 0, 1, e->st),
           "%s: Q2_K mmvq %dx%d, %d rows", what, w->out, w->in, s);
    else
        KL(err, as_k_q2k_mmq(w->d, ldw, 0, w->out, w->in, xq, nq, 0, s, y, ldy, 0, 0, 1, e->st),
           "%s: Q2_K mmq %dx%d, %d rows", what, w->out, w->in, s);
    return 0;
}

static int proj_bf16(AsEngine *e, const as_bf16_t *x, int64_t ldx, int s, const AsDevWeight *w, as_bf16_t *y,
                     int64_t ldy, const char *what, AsError *err)
{
    if (w->type == AS_DW_FP8)
        return as_dev_proj_fp8(e, x, ldx, s, w, y, ldy, what, err);
    if (w->type == AS_DW_Q2K)
        return proj_q2k(e, x, ldx, s, w, y, ldy, what, err);
    if (w->type == AS_DW_F32) {
        /* f32/f16/Q8_0-stored projection with bf16 semantics: exact f32 weights, output rounded */
        float *yf = NULL; /* stream-ordered output scratch (proj_f32 may use e->scratch for its input) */
        CU(err, cudaMallocAsync((void **)&yf, sizeof(float) * (size_t)s * w->out, e->st), "%s: f32 scratch %dx%d",
           what, s, w->out);
        int rc = proj_f32(e, x, ldx, s, w, yf, what, err);
        for (int t = 0; t < s && !rc; t++)
            if (as_k_f32_to_bf16(yf + (size_t)t * w->out, y + (size_t)t * ldy, w->out, e->st))
                rc = as_err(err, AS_ERUNTIME, "%s: rounding %d outputs of row %d", what, w->out, t);
        cudaFreeAsync(yf, e->st);
        return rc;
    }
    if (s <= AS_DEV_GEMV_MAX_ROWS) {
        KL(err, as_k_gemv_bf16(w->d, w->in, 0, w->out, w->in, x, ldx, 0, s, y, ldy, 0, 0, 1, e->st),
           "%s: gemv %dx%d, %d rows", what, w->out, w->in, s);
        return 0;
    }
    return as_dev_gemm_bf16(e, w->d, w, x, ldx, s, y, ldy, "", what, err);
}

int as_dev_gemm_bf16(AsEngine *e, const void *wd, const AsDevWeight *w, const as_bf16_t *x, int64_t ldx, int s,
                     as_bf16_t *y, int64_t ldy, const char *note, const char *what, AsError *err)
{
    const float one = 1.0f, zero = 0.0f;
    CB(err,
       cublasGemmEx(e->cublas, CUBLAS_OP_T, CUBLAS_OP_N, w->out, s, w->in, &one, wd, CUDA_R_16BF, w->in, x,
                    CUDA_R_16BF, (int)ldx, &zero, y, CUDA_R_16BF, (int)ldy, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT),
       "%s: bf16 GEMM m=%d n=%d k=%d%s", what, w->out, s, w->in, note);
    return 0;
}

int as_dev_proj_f32(AsEngine *e, const as_bf16_t *x, int s, const AsDevWeight *w, float *y, const char *what,
                    AsError *err)
{
    int slot = prof_proj(e, s, w);
    int rc = proj_f32(e, x, w->in, s, w, y, what, err);
    as_prof_end(e, slot);
    return rc;
}

/* f32 weights, f32 output y[s][out]; x bf16 rows ldx apart. Above 8 rows the rows are widened into the
 * scratch (sized for this input: the work buffer xf only holds dim columns). */
static int proj_f32(AsEngine *e, const as_bf16_t *x, int64_t ldx, int s, const AsDevWeight *w, float *y,
                    const char *what, AsError *err)
{
    if (w->type != AS_DW_F32)
        return as_err(err, AS_EBADINPUT, "%s: the f32 projection path needs f32 weights", what);
    if (s <= AS_DEV_GEMV_MAX_ROWS) {
        KL(err, as_k_gemv_f32w(w->d, w->in, w->out, w->in, x, ldx, s, y, w->out, e->st), "%s: f32 gemv %dx%d",
           what, w->out, w->in);
        return 0;
    }
    const int64_t nx = (int64_t)(s - 1) * ldx + w->in; /* the rows as they lie, ldx apart */
    TRY(scratch_reserve(e, sizeof(float) * (size_t)nx, what, err));
    KL(err, as_k_bf16_to_f32(x, e->scratch, nx, e->st), "%s: widening %dx%d input", what, s, w->in);
    const float one = 1.0f, zero = 0.0f;
    CB(err,
       cublasSgemm(e->cublas, CUBLAS_OP_T, CUBLAS_OP_N, w->out, s, w->in, &one, w->d, w->in, e->scratch, (int)ldx,
                   &zero, y, w->out),
       "%s: f32 GEMM m=%d n=%d k=%d", what, w->out, s, w->in);
    return 0;
}

static int proj_grouped(AsEngine *e, const as_bf16_t *o, int s, const AsDevWeight *w, as_bf16_t *og, const char *what, AsError *err);

int as_dev_proj_grouped(AsEngine *e, const as_bf16_t *o, int s, const AsDevWeight *w, as_bf16_t *og, const char *what, AsError *err)
{
    int slot = prof_proj(e, s, w); /* out x in is the whole wo_a: the groups' total work */
    int rc = proj_grouped(e, o, s, w, og, what, err);
    as_prof_end(e, slot);
    return rc;
}

/* f32 wo_a (f32 / f16 files, GGUF Q8_0): f32 out [s][G * olr] in the scratch, then rounded into og.
 * Up to 8 rows one f32 GEMV per group (o read in place); above, the o rows widened into the scratch
 * and one strided-batched SGEMM. */
static int proj_grouped_f32(AsEngine *e, const as_bf16_t *o, int s, const AsDevWeight *w, as_bf16_t *og,
                            const char *what, AsError *err)
{
    const AsConfig *c = &e->cfg;
    const int G = c->o_groups, olr = c->o_lora_rank, gw = c->gw, ldo = c->n_heads * c->head_dim;
    const size_t ny = (size_t)s * G * olr, nx = s > AS_DEV_GEMV_MAX_ROWS ? (size_t)s * ldo : 0;
    void *buf;
    TRY(as_dev_scratch(e, s, sizeof(float) * (ny + nx), &buf, "wo_a (f32 weights)", err));
    float *yf = buf, *xf = yf + ny;
    if (s <= AS_DEV_GEMV_MAX_ROWS) {
        for (int g = 0; g < G; g++)
            KL(err,
               as_k_gemv_f32w((const float *)w->d + (size_t)g * olr * gw, gw, olr, gw, o + (size_t)g * gw, ldo, s,
                              yf + (size_t)g * olr, (int64_t)G * olr, e->st),
               "%s: f32 gemv, group %d of %d, %dx%d, %d rows", what, g, G, olr, gw, s);
    } else {
        KL(err, as_k_bf16_to_f32(o, xf, (int64_t)nx, e->st), "%s: widening %dx%d o rows", what, s, ldo);
        const float one = 1.0f, zero = 0.0f;
        CB(err,
           cublasSgemmStridedBatched(e->cublas, CUBLAS_OP_T, CUBLAS_OP_N, olr, s, gw, &one, w->d, gw,
                                     (long long)olr * gw, xf, ldo, gw, &zero, yf, G * olr, olr, G),
           "%s: batched f32 GEMM %d groups m=%d n=%d k=%d", what, G, olr, s, gw);
    }
    KL(err, as_k_f32_to_bf16(yf, og, (int64_t)ny, e->st), "%s: rounding %dx%d outputs", what, s, G * olr);
    return 0;
}

/* Q2_K wo_a: the whole o rows quantised to q8_1 once (group g's input is q8_1 blocks g * gw / 32 ..,
 * the same blocks as quantising each group's slice: gw is a multiple of 32), then one launch for all
 * groups (grid.y / grid.z = group). */
static int proj_grouped_q2k(AsEngine *e, const as_bf16_t *o, int s, const AsDevWeight *w, as_bf16_t *og,
                            const char *what, AsError *err)
{
    const AsConfig *c = &e->cfg;
    const int G = c->o_groups, olr = c->o_lora_rank, gw = c->gw, ldo = c->n_heads * c->head_dim;
    if (ldo % AS_QK8_1 || gw % AS_QK_K || ldo != G * gw)
        return as_err(err, AS_EBADINPUT, "%s: Q2_K groups of %d inputs (o rows of %d) are not whole blocks", what, gw,
                      ldo);
    const int64_t nq = ldo / AS_QK8_1, ldw = gw / AS_QK_K, strideW = (int64_t)olr * ldw, strideX = gw / AS_QK8_1;
    void *xq;
    TRY(as_dev_scratch(e, s, sizeof(AsBlockQ8_1) * (size_t)s * (size_t)nq, &xq, "wo_a", err));
    KL(err, as_k_quantize_q8_1(o, ldo, s, ldo, xq, nq, e->st), "%s: q8_1 of the %dx%d o rows", what, s, ldo);
    if (s <= AS_DEV_GEMV_MAX_ROWS)
        KL(err, as_k_q2k_mmvq(w->d, ldw, strideW, olr, gw, xq, nq, strideX, s, og, (int64_t)G * olr, olr, 0, G, e->st),
           "%s: Q2_K mmvq, %d groups of %dx%d, %d rows", what, G, olr, gw, s);
    else
        KL(err, as_k_q2k_mmq(w->d, ldw, strideW, olr, gw, xq, nq, strideX, s, og, (int64_t)G * olr, olr, 0, G, e->st),
           "%s: Q2_K mmq, %d groups of %dx%d, %d rows", what, G, olr, gw, s);
    return 0;
}

static int proj_grouped(AsEngine *e, const as_bf16_t *o, int s, const AsDevWeight *w, as_bf16_t *og, const char *what, AsError *err)
{
    const AsConfig *c = &e->cfg;
    int G = c->o_groups, olr = c->o_lora_rank, gw = c->gw, ldo = c->n_heads * c->head_dim;
    if (w->type == AS_DW_Q2K)
        return proj_grouped_q2k(e, o, s, w, og, what, err);
    if (w->type == AS_DW_FP8)
        return as_dev_proj_grouped_fp8(e, o, s, w, og, what, err);
    if (w->type == AS_DW_F32)
        return proj_grouped_f32(e, o, s, w, og, what, err);
    if (s <= AS_DEV_GEMV_MAX_ROWS) {
        KL(err,
           as_k_gemv_bf16(w->d, gw, (int64_t)olr * gw, olr, gw, o, ldo, gw, s, og, (int64_t)G * olr, olr, 0, G, e->st),
           "%s: grouped gemv %d groups of %dx%d, %d rows", what, G, olr, gw, s);
        return 0;
    }
    return as_dev_gemm_grouped_bf16(e, w->d, o, s, og, "", what, err);
}

int as_dev_gemm_grouped_bf16(AsEngine *e, const void *wd, const as_bf16_t *o, int s, as_bf16_t *og, const char *note,
                             const char *what, AsError *err)
{
    const AsConfig *c = &e->cfg;
    const int G = c->o_groups, olr = c->o_lora_rank, gw = c->gw, ldo = c->n_heads * c->head_dim;
    const float one = 1.0f, zero = 0.0f;
    CB(err,
       cublasGemmStridedBatchedEx(e->cublas, CUBLAS_OP_T, CUBLAS_OP_N, olr, s, gw, &one, wd, CUDA_R_16BF, gw,
                                  (long long)olr * gw, o, CUDA_R_16BF, ldo, gw, &zero, og, CUDA_R_16BF, G * olr, olr, G,
                                  CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT),
       "%s: batched bf16 GEMM %d groups m=%d n=%d k=%d%s", what, G, olr, s, gw, note);
    return 0;
}
