/* Engine set-up: device choice, weights uploaded once per layer, layer and shared state
 * allocated, RoPE tables (the reference's own) uploaded; reset and tear-down. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine/check.h"
#include "engine/internal.h"
#include "model/ggml_blocks.h"
#include "model/precision.h"
#include "ref/rope.h"

const char *as_cublas_status_name(cublasStatus_t s)
{
    switch (s) {
    case CUBLAS_STATUS_SUCCESS: return "success";
    case CUBLAS_STATUS_NOT_INITIALIZED: return "not initialized";
    case CUBLAS_STATUS_ALLOC_FAILED: return "allocation failed";
    case CUBLAS_STATUS_INVALID_VALUE: return "invalid value";
    case CUBLAS_STATUS_ARCH_MISMATCH: return "architecture mismatch";
    case CUBLAS_STATUS_MAPPING_ERROR: return "mapping error";
    case CUBLAS_STATUS_EXECUTION_FAILED: return "execution failed";
    case CUBLAS_STATUS_INTERNAL_ERROR: return "internal error";
    case CUBLAS_STATUS_NOT_SUPPORTED: return "not supported";
    default: return "unknown status";
    }
}

/* cudaMalloc with the out-of-memory message: asked vs what the device has. */
static int dev_alloc(AsEngine *e, void **p, size_t bytes, const char *what, AsError *err)
{
    cudaError_t rc = as_dev_malloc(&e->mem, p, bytes ? bytes : 1);
    if (rc == cudaSuccess)
        return 0;
    *p = NULL;
    return as_dev_oom(&e->mem, err, what, bytes, e->device, rc);
}

/* Raw GGUF Q2_K blocks, byte for byte ([out][in / 256] blocks of 84 bytes): the Q2_K kernels read
 * them as they are (kernels/q2k_mmvq.cu, q2k_mmq.cu). */
static int upload_q2k(AsEngine *e, const AsWTensor *t, AsDevWeight *dw, AsError *err)
{
    const int64_t rows = as_wt_rows(t), cols = as_wt_cols(t);
    const size_t bytes = (size_t)as_dtype_bytes(AS_DT_Q2_K, rows * cols);
    if (cols % AS_QK_K || t->nbytes != (int64_t)bytes)
        return as_err(err, AS_EBADINPUT, "%s: Q2_K tensor [%ld, %ld] of %ld bytes (rows must be whole 256-value "
                      "super-blocks: %zu bytes)", t->name, (long)rows, (long)cols, (long)t->nbytes, bytes);
    dw->type = AS_DW_Q2K;
    TRY(dev_alloc(e, &dw->d, bytes, t->name, err));
    e->weight_bytes += bytes;
    CU(err, cudaMemcpy(dw->d, t->data, bytes, cudaMemcpyHostToDevice), "uploading %s (%zu bytes of Q2_K blocks)",
       t->name, bytes);
    return 0;
}

/* Uploads one weight: bf16 for projections stored as bf16 / fp8+scale; raw blocks for Q2_K (unless
 * keep_f32); f32 otherwise: f32 and f16 keep their exact values, and so do Q8_0 blocks and a Q2_K
 * tensor that must stay f32 (the ratio-2 compressor), dequantised exactly by as_wt_rows_f32 (the
 * reference's weights): these then take the f32-weight paths of engine/gemm.c, whose output is rounded
 * where SPEC does. */
static int upload_weight(AsEngine *e, const AsWTensor *t, AsDevWeight *dw, bool keep_f32, AsError *err)
{
    memset(dw, 0, sizeof *dw);
    if (!t)
        return 0;
    int64_t rows = as_wt_rows(t), cols = as_wt_cols(t);
    dw->out = (int)rows;
    dw->in = (int)cols;
    if (t->dtype == AS_DT_Q2_K && !keep_f32)
        return upload_q2k(e, t, dw, err);
    const bool f32 = keep_f32 || t->dtype == AS_DT_F32 || t->dtype == AS_DT_F16 || t->dtype == AS_DT_Q8_0 ||
                     t->dtype == AS_DT_Q2_K;
    dw->type = f32 ? AS_DW_F32 : AS_DW_BF16;
    size_t esz = f32 ? 4 : 2;
    TRY(dev_alloc(e, &dw->d, (size_t)rows * cols * esz, t->name, err));
    e->weight_bytes += (size_t)rows * cols * esz;
    /* decode on the host in panels of ~32 MiB, then copy */
    int64_t panel = (32 << 20) / (cols * (int64_t)esz);
    if (panel < 1)
        panel = 1;
    void *stage = NULL;
    CU(err, cudaMallocHost(&stage, (size_t)panel * cols * esz), "pinned staging for %s", t->name);
    int rc = 0;
    for (int64_t r0 = 0; r0 < rows && !rc; r0 += panel) {
        int64_t n = rows - r0 < panel ? rows - r0 : panel;
        if (f32)
            as_wt_rows_f32(t, r0, n, stage);
        else
            as_wt_rows_bf16(t, r0, n, stage);
        cudaError_t cr = cudaMemcpy((char *)dw->d + (size_t)r0 * cols * esz, stage, (size_t)n * cols * esz,
                                    cudaMemcpyHostToDevice);
        if (cr != cudaSuccess)
            rc = as_err(err, AS_ERUNTIME, "uploading %s rows %ld..%ld: %s", t->name, (long)r0, (long)(r0 + n),
                        cudaGetErrorString(cr));
    }
    cudaFreeHost(stage);
    return rc;
}

/* A vector weight as f32; norm: a norm weight, a bf16 parameter in model.py, so rounded to bf16 first
 * (as_wt_norm_f32, as the reference holds it); attn_sink stays f32. */
static int upload_vec(AsEngine *e, const AsWTensor *t, bool norm, float **d, AsError *err)
{
    *d = NULL;
    if (!t)
        return 0;
    float *h = norm ? as_wt_norm_f32(t) : as_wt_vec_f32(t);
    if (!h)
        return as_err(err, AS_ERUNTIME, "out of host memory reading %s", t->name);
    int64_t n = as_wt_cols(t);
    int rc = dev_alloc(e, (void **)d, sizeof(float) * (size_t)n, t->name, err);
    if (!rc && cudaMemcpy(*d, h, sizeof(float) * (size_t)n, cudaMemcpyHostToDevice) != cudaSuccess)
        rc = as_err(err, AS_ERUNTIME, "uploading %s (%ld floats)", t->name, (long)n);
    free(h);
    return rc;
}

/* A weight in fp8 form (fp8_form: engine/fp8_proj.c), else as upload_weight. */
static int upload_proj(AsEngine *e, const AsWTensor *t, AsDevWeight *dw, bool fp8_form, AsError *err)
{
    return fp8_form ? as_dev_upload_fp8(e, t, dw, err) : upload_weight(e, t, dw, false, err);
}

static int upload_layer(AsEngine *e, int l, AsError *err)
{
    const AsLayerWeights *lw = &e->m->layer[l];
    AsDevLayerWeights *dw = &e->w[l];
    bool r2 = e->cfg.role[l].ratio >= 2;
    /* fp8 precision: the five fp8 projections' inputs are act_quant's QDQ; their weights stay e4m3 codes where
     * the engine takes the fp8 form (e->fp8_form) and the codes give the bf16 upload's values exactly, else
     * they are the bf16 upload (bf16(fp8 * scale)): the same numbers either way; GGUF models are always bf16
     * precision */
    const AsWTensor *fp8w[] = {lw->wq_a, lw->wq_b, lw->wkv, lw->wo_b, lw->i_wq_b};
    AsDevWeight *fp8d[] = {&dw->wq_a, &dw->wq_b, &dw->wkv, &dw->wo_b, &dw->i_wq_b};
    bool is_fp8[5];
    for (size_t i = 0; i < 5; i++)
        is_fp8[i] = fp8w[i] && as_proj_fp8(e->m, fp8w[i]);
    TRY(upload_proj(e, lw->wq_a, &dw->wq_a, is_fp8[0] && as_dev_codes_form(e, lw->wq_a), err));
    TRY(upload_proj(e, lw->wq_b, &dw->wq_b, is_fp8[1] && as_dev_codes_form(e, lw->wq_b), err));
    TRY(upload_proj(e, lw->wkv, &dw->wkv, is_fp8[2] && as_dev_codes_form(e, lw->wkv), err));
    TRY(upload_proj(e, lw->wo_a, &dw->wo_a, lw->wo_a && as_dev_wo_a_fp8_form(e, lw->wo_a), err));
    TRY(upload_proj(e, lw->wo_b, &dw->wo_b, is_fp8[3] && as_dev_codes_form(e, lw->wo_b), err));
    TRY(upload_weight(e, lw->c_wkv, &dw->c_wkv, r2, err));
    TRY(upload_weight(e, lw->c_wgate, &dw->c_wgate, r2, err));
    TRY(upload_proj(e, lw->i_wq_b, &dw->i_wq_b, is_fp8[4] && as_dev_codes_form(e, lw->i_wq_b), err));
    TRY(upload_weight(e, lw->i_weights_proj, &dw->i_wproj, false, err));
    TRY(upload_weight(e, lw->i_wk, &dw->i_wk, false, err));
    for (size_t i = 0; i < sizeof fp8w / sizeof fp8w[0]; i++) {
        fp8d[i]->fp8 = is_fp8[i];
        if (fp8d[i]->fp8 && ((fp8d[i]->type != AS_DW_FP8 && fp8d[i]->type != AS_DW_BF16) || fp8d[i]->in % 32))
            return as_err(err, AS_EBADINPUT, "%s: an fp8 projection of %d inputs that is not uploaded as fp8 codes or "
                          "bf16, or not in whole blocks of 32", fp8w[i]->name, fp8d[i]->in);
        e->fp8 |= fp8d[i]->fp8;
    }
    TRY(upload_vec(e, lw->attn_norm, true, &dw->attn_norm, err));
    TRY(upload_vec(e, lw->q_norm, true, &dw->q_norm, err));
    TRY(upload_vec(e, lw->kv_norm, true, &dw->kv_norm, err));
    TRY(upload_vec(e, lw->c_norm, true, &dw->c_norm, err));
    TRY(upload_vec(e, lw->i_k_norm, true, &dw->k_norm, err));
    TRY(upload_vec(e, lw->attn_sink, false, &dw->sink, err));
    return 0;
}

static int alloc_state(AsEngine *e, AsError *err)
{
    const AsConfig *c = &e->cfg;
    for (int l = 0; l < c->n_layers; l++) {
        const AsLayerRole *r = &c->role[l];
        AsDevLayerState *ls = &e->ls[l];
        char what[64];
        snprintf(what, sizeof what, "layer %d window ring", l);
        TRY(dev_alloc(e, (void **)&ls->ring, sizeof(as_bf16_t) * (size_t)c->window * c->head_dim, what, err));
        e->state_bytes += sizeof(as_bf16_t) * (size_t)c->window * c->head_dim;
        if (!r->kv_source)
            continue;
        ls->cap = as_plan_cache_rows(c, l);
        snprintf(what, sizeof what, "layer %d compressed cache", l);
        TRY(dev_alloc(e, (void **)&ls->ccache, sizeof(as_bf16_t) * (size_t)ls->cap * c->head_dim, what, err));
        e->state_bytes += sizeof(as_bf16_t) * (size_t)ls->cap * c->head_dim;
        if (r->ratio >= 2) {
            snprintf(what, sizeof what, "layer %d partial group", l);
            TRY(dev_alloc(e, (void **)&ls->part_kv, sizeof(float) * (size_t)r->ratio * c->head_dim, what, err));
            TRY(dev_alloc(e, (void **)&ls->part_sc, sizeof(float) * (size_t)r->ratio * c->head_dim, what, err));
        }
        if (r->key_owner) {
            snprintf(what, sizeof what, "layer %d index-key cache", l);
            TRY(dev_alloc(e, (void **)&ls->ikcache, sizeof(as_bf16_t) * (size_t)ls->cap * c->index_head_dim, what,
                          err));
            e->state_bytes += sizeof(as_bf16_t) * (size_t)ls->cap * c->index_head_dim;
        }
    }
    return 0;
}

static int upload_rope(AsEngine *e, AsError *err)
{
    AsRopeTable t[2];
    float **dst[2][2] = {{&e->cos_plain, &e->sin_plain}, {&e->cos_yarn, &e->sin_yarn}};
    for (int k = 0; k < 2; k++) {
        if (as_rope_init_for_ratio(&t[k], &e->cfg, k))
            return as_err(err, AS_ERUNTIME, "out of host memory for the RoPE tables (max_seq %d)", e->cfg.max_seq);
        size_t bytes = sizeof(float) * (size_t)t[k].max_seq * (t[k].rd / 2);
        int rc = dev_alloc(e, (void **)dst[k][0], bytes, "RoPE cos table", err);
        if (!rc)
            rc = dev_alloc(e, (void **)dst[k][1], bytes, "RoPE sin table", err);
        if (!rc && (cudaMemcpy(*dst[k][0], t[k].cos, bytes, cudaMemcpyHostToDevice) != cudaSuccess ||
                    cudaMemcpy(*dst[k][1], t[k].sin, bytes, cudaMemcpyHostToDevice) != cudaSuccess))
            rc = as_err(err, AS_ERUNTIME, "uploading the RoPE tables (%zu bytes)", bytes);
        as_rope_free(&t[k]);
        if (rc)
            return rc;
    }
    return 0;
}

/* The options' knobs (the defaults without), each checked: a bad value is one line, AS_EBADINPUT. */
static int take_knobs(AsEngine *e, const AsEngineKnobs *k, AsError *err)
{
    if (!k)
        as_engine_knobs_default(&e->knobs);
    else
        e->knobs = *k;
    k = &e->knobs;
    if (k->attn_path < AS_ATTN_AUTO || k->attn_path > AS_ATTN_WGMMA)
        return as_err(err, AS_EBADINPUT, "attention path %d: not auto, warp, mma or wgmma", (int)k->attn_path);
    if (k->fusions & ~(unsigned)AS_FUSE_ALL)
        return as_err(err, AS_EBADINPUT, "decode fusions %#x: not AS_FUSE_* bits", k->fusions);
    if (k->sel_room != AS_SEL_ROOM_AUTO && (k->sel_room < 0 || k->sel_room > AS_SEL_ROOM_MAX))
        return as_err(err, AS_EBADINPUT, "selection room %d: not auto or 0 to %d blocks", k->sel_room, AS_SEL_ROOM_MAX);
    if (k->gpu_mem_limit_mb < 0 || k->gpu_mem_limit_mb > AS_GPU_MEM_LIMIT_MAX_MB)
        return as_err(err, AS_EBADINPUT, "GPU memory limit %d MiB: not 0 (none) to %d", k->gpu_mem_limit_mb,
                      AS_GPU_MEM_LIMIT_MAX_MB);
    /* a forced tensor-core attention where the geometry cannot take it fails every launch: refused now */
    const AsConfig *c = &e->cfg;
    const bool mma_ok = c->n_heads % 16 == 0 &&
                        (c->head_dim == 64 || c->head_dim == 128 || c->head_dim == 256 || c->head_dim == 512);
    if ((k->attn_path == AS_ATTN_MMA && !mma_ok) || (k->attn_path == AS_ATTN_WGMMA && !(mma_ok && c->head_dim == 512)))
        return as_err(err, AS_EBADINPUT, "--attn-path %s: this model's %d heads of %d do not fit the kernel (heads a "
                      "multiple of 16; head_dim 64, 128, 256 or 512 for mma, 512 for wgmma)",
                      as_attn_path_name(k->attn_path), c->n_heads, c->head_dim);
    return 0;
}

/* The knobs that depend on the device: sel_room's auto (wq_b keeps one block an SM: its GEMV streams at
 * about the same rate while the selection runs beside). */
static int knobs_for_device(AsEngine *e, AsError *err)
{
    if (e->knobs.sel_room == AS_SEL_ROOM_AUTO) {
        int sms = 0;
        if (cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, e->device))
            return as_err(err, AS_ERUNTIME, "cudaDeviceGetAttribute(multiprocessors, device %d)", e->device);
        e->knobs.sel_room = as_sel_room_default(as_k_gemv_bf16_resident_blocks(), sms);
    }
    return 0;
}

int as_engine_create(const AsModel *m, const AsEngineOptions *opt, AsEngine **out, AsError *err)
{
    *out = NULL;
    AsEngine *e = calloc(1, sizeof *e);
    if (!e)
        return as_err(err, AS_ERUNTIME, "out of host memory");
    e->m = m;
    e->cfg = m->cfg;
    if (opt)
        e->opt = *opt;
    e->device = e->opt.device;
    e->fault = AS_FAULT_NONE;
    e->last_layer = -1;
    as_run_init(&e->last);
    int rc = 0;
    if (e->opt.inject && (e->fault = as_fault_by_name(e->opt.inject)) == AS_FAULT_COUNT) {
        rc = as_err(err, AS_EBADINPUT, "unknown fault '%s'", e->opt.inject);
        goto fail;
    }
    if ((rc = take_knobs(e, e->opt.knobs, err)))
        goto fail;
    int count = as_engine_device_count();
    if (e->device < 0 || e->device >= count) {
        rc = as_err(err, AS_ERUNTIME, "CUDA device %d not present (%d visible)", e->device, count);
        goto fail;
    }
#define STEP(x)           \
    if ((rc = (x)))       \
        goto fail;
    STEP(cudaSetDevice(e->device) ? as_err(err, AS_ERUNTIME, "cudaSetDevice(%d)", e->device) : 0);
    STEP(cudaStreamCreateWithFlags(&e->st, cudaStreamNonBlocking) ? as_err(err, AS_ERUNTIME, "cudaStreamCreate") : 0);
    STEP(knobs_for_device(e, err));
    if (e->knobs.kv_fork) /* else no second stream: a captured decode's kv branch runs in line */
        STEP(cudaStreamCreateWithFlags(&e->st_kv, cudaStreamNonBlocking)
                 ? as_err(err, AS_ERUNTIME, "cudaStreamCreate (kv)")
                 : 0);
    STEP(cudaEventCreateWithFlags(&e->ev_x, cudaEventDisableTiming) ||
                 cudaEventCreateWithFlags(&e->ev_kv, cudaEventDisableTiming) ||
                 cudaEventCreateWithFlags(&e->ev_qr, cudaEventDisableTiming)
             ? as_err(err, AS_ERUNTIME, "cudaEventCreate (the kv branch's fork and join)")
             : 0);
    STEP(cublasCreate(&e->cublas) ? as_err(err, AS_ERUNTIME, "cublasCreate failed on device %d", e->device) : 0);
    STEP(cublasSetStream(e->cublas, e->st) ? as_err(err, AS_ERUNTIME, "cublasSetStream") : 0);
    /* f32 GEMMs must stay f32: no TF32 */
    STEP(cublasSetMathMode(e->cublas, CUBLAS_DEFAULT_MATH) ? as_err(err, AS_ERUNTIME, "cublasSetMathMode") : 0);
    if (e->opt.profile && as_prof_create(&e->prof))
        STEP(as_err(err, AS_ERUNTIME, "creating %d CUDA events for the profile", 2 * AS_PROF_MAX_EVENTS));
    e->fp8_form = as_dev_fp8_form_wanted(e);
    STEP(as_mem_limit_init(&e->mem, e->knobs.gpu_mem_limit_mb)
             ? as_err(err, AS_ERUNTIME, "cudaMemGetInfo on device %d (the GPU memory limit)", e->device)
             : 0);
    for (int l = 0; l < e->cfg.n_layers; l++)
        STEP(upload_layer(e, l, err));
    STEP(as_dev_proj_init(e, err));
    STEP(alloc_state(e, err));
    STEP(upload_rope(e, err));
    STEP(dev_alloc(e, (void **)&e->no_sink, sizeof(float) * (size_t)e->cfg.n_heads, "no-sink vector", err));
    {
        float *ns = malloc(sizeof(float) * (size_t)e->cfg.n_heads);
        if (!ns)
            STEP(as_err(err, AS_ERUNTIME, "out of host memory"));
        for (int h = 0; h < e->cfg.n_heads; h++)
            ns[h] = -INFINITY;
        cudaError_t cr = cudaMemcpy(e->no_sink, ns, sizeof(float) * (size_t)e->cfg.n_heads, cudaMemcpyHostToDevice);
        free(ns);
        STEP(cr ? as_err(err, AS_ERUNTIME, "uploading the no-sink vector") : 0);
    }
    {
        /* the ratio-2 latents of a prefill sit at positions 0, 2, 4, ... */
        int n = e->cfg.max_seq / 2 + 1;
        int32_t *gp = malloc(sizeof(int32_t) * (size_t)n);
        if (!gp)
            STEP(as_err(err, AS_ERUNTIME, "out of host memory"));
        for (int i = 0; i < n; i++)
            gp[i] = 2 * i;
        int arc = dev_alloc(e, (void **)&e->group_pos, sizeof(int32_t) * (size_t)n, "ratio-2 latent positions", err);
        if (!arc && cudaMemcpy(e->group_pos, gp, sizeof(int32_t) * (size_t)n, cudaMemcpyHostToDevice) != cudaSuccess)
            arc = as_err(err, AS_ERUNTIME, "uploading %d latent positions", n);
        free(gp);
        STEP(arc);
    }
    /* the uploads above ran on the legacy stream, which the engine's (non-blocking) stream does not
     * wait for, and a pageable cudaMemcpy may return before its DMA lands: settle them all here */
    {
        cudaError_t sc = cudaDeviceSynchronize();
        STEP(sc ? as_err(err, AS_ERUNTIME, "waiting for the weight and table uploads (%d layers): %s", e->cfg.n_layers,
                         cudaGetErrorString(sc))
                : 0);
    }
#undef STEP
    as_engine_reset(e);
    *out = e;
    return 0;
fail:
    as_engine_destroy(e);
    return rc;
}

static void free_weight(AsDevWeight *w)
{
    cudaFree(w->d);
    cudaFree(w->ws);
}

void as_engine_destroy(AsEngine *e)
{
    if (!e)
        return;
    if (e->st)
        cudaStreamSynchronize(e->st);
    for (int l = 0; l < AS_MAX_LAYERS; l++) {
        AsDevLayerWeights *w = &e->w[l];
        AsDevWeight *ws[] = {&w->wq_a, &w->wq_b, &w->wkv, &w->wo_a, &w->wo_b, &w->c_wkv, &w->c_wgate, &w->i_wq_b,
                             &w->i_wproj, &w->i_wk};
        for (size_t i = 0; i < sizeof ws / sizeof ws[0]; i++)
            free_weight(ws[i]);
        float *vs[] = {w->attn_norm, w->q_norm, w->kv_norm, w->c_norm, w->k_norm, w->sink};
        for (size_t i = 0; i < sizeof vs / sizeof vs[0]; i++)
            cudaFree(vs[i]);
        AsDevLayerState *ls = &e->ls[l];
        cudaFree(ls->ring), cudaFree(ls->part_kv), cudaFree(ls->part_sc), cudaFree(ls->ccache), cudaFree(ls->ikcache);
    }
    cudaFree(e->cos_plain), cudaFree(e->sin_plain), cudaFree(e->cos_yarn), cudaFree(e->sin_yarn);
    cudaFree(e->no_sink);
    cudaFree(e->group_pos);
    cudaFree(e->sh.sel_d);
    cudaFree(e->sh.cand_d);
    cudaFree(e->sh.sel_stats);
    free(e->sh.sel_h);
    free(e->sh.cand_h);
    as_dev_work_free(e);
    as_dev_proj_free(e);
    as_prof_destroy(e->prof);
    as_run_free(&e->last);
    cudaFreeHost(e->fetch_stage);
    if (e->cublas)
        cublasDestroy(e->cublas);
    if (e->st)
        cudaStreamDestroy(e->st);
    if (e->st_kv)
        cudaStreamDestroy(e->st_kv);
    if (e->ev_x)
        cudaEventDestroy(e->ev_x);
    if (e->ev_kv)
        cudaEventDestroy(e->ev_kv);
    if (e->ev_qr)
        cudaEventDestroy(e->ev_qr);
    free(e);
}

void as_engine_reset(AsEngine *e)
{
    const AsConfig *c = &e->cfg;
    const int pdl = as_k_pdl_use(e->knobs.pdl);
    for (int l = 0; l < c->n_layers; l++) {
        AsDevLayerState *ls = &e->ls[l];
        cudaMemsetAsync(ls->ring, 0, sizeof(as_bf16_t) * (size_t)c->window * c->head_dim, e->st);
        if (ls->ccache)
            cudaMemsetAsync(ls->ccache, 0, sizeof(as_bf16_t) * (size_t)ls->cap * c->head_dim, e->st);
        if (ls->ikcache)
            cudaMemsetAsync(ls->ikcache, 0, sizeof(as_bf16_t) * (size_t)ls->cap * c->index_head_dim, e->st);
        if (ls->part_kv)
            as_k_compress_state_reset(ls->part_kv, ls->part_sc, c->role[l].ratio * c->head_dim, e->st);
        ls->ccache_rows = ls->ikcache_rows = 0;
    }
    as_k_pdl_use(pdl);
    as_shared_prov_init(&e->sh.prov);
    e->started = false;
    e->step = 0;
    e->s = 0;
    e->start_pos = 0;
    e->next_layer = c->n_layers;
    e->last_layer = -1;
    cudaStreamSynchronize(e->st);
}
