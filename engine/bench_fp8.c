/* bench-engine's fp8 prefill figure (engine/bench_fp8.h). */
#include "engine/bench_fp8.h"

#include <cublasLt.h>
#include <stdlib.h>

#include "engine/check.h"
#include "engine/internal.h"
#include "engine/stats.h"

enum { REPS = 10, WARM = 2 };

/* Median ms of REPS launches of run(i) on e's stream, after WARM untimed ones. */
typedef int (*RunFn)(void *ctx, AsError *err);
static int time_ms(AsEngine *e, RunFn run, void *ctx, double *ms_out, AsError *err)
{
    cudaEvent_t t0, t1;
    CU(err, cudaEventCreate(&t0), "bench: event");
    CU(err, cudaEventCreate(&t1), "bench: event");
    double v[REPS];
    int rc = 0;
    for (int i = 0; i < WARM + REPS && !rc; i++) {
        cudaEventRecord(t0, e->st);
        rc = run(ctx, err);
        cudaEventRecord(t1, e->st);
        if (!rc && cudaEventSynchronize(t1) != cudaSuccess)
            rc = as_err(err, AS_ERUNTIME, "bench: fp8 projection timing: %s", cudaGetErrorString(cudaGetLastError()));
        float ms = 0;
        cudaEventElapsedTime(&ms, t0, t1);
        if (i >= WARM)
            v[i - WARM] = ms;
    }
    cudaEventDestroy(t0), cudaEventDestroy(t1);
    if (!rc)
        *ms_out = as_median(v, REPS);
    return rc;
}

typedef struct {
    AsEngine *e;
    const AsDevWeight *w;
    int tokens;
    const as_bf16_t *x;
    void *act;
    as_bf16_t *y;
} Ours;

/* The engine's fp8 prefill projection: act_quant's QDQ of the rows, then the projection of the codes
 * (dequantised, then cuBLAS's bf16 GEMM). */
static int run_ours(void *ctx, AsError *err)
{
    Ours *o = ctx;
    TRY(as_dev_qdq_fp8(o->e, o->x, o->w->in, o->tokens, o->w->in, o->act, "bench: fp8 projection", err));
    return as_dev_proj_fp8(o->e, o->act, o->w->in, o->tokens, o->w, o->y, o->w->out, "bench: fp8 projection", err);
}

typedef struct {
    cublasLtHandle_t lt;
    cublasLtMatmulDesc_t op;
    cublasLtMatrixLayout_t la, lb, lc;
    cublasLtMatmulAlgo_t algo;
    const void *w, *x;
    void *y, *ws;
    size_t ws_bytes;
    cudaStream_t st;
} Lt;

static int run_lt(void *ctx, AsError *err)
{
    Lt *l = ctx;
    const float alpha = 1.0f, beta = 0.0f;
    CB(err,
       cublasLtMatmul(l->lt, l->op, &alpha, l->w, l->la, l->x, l->lb, &beta, l->y, l->lc, l->y, l->lc, &l->algo, l->ws,
                      l->ws_bytes, l->st),
       "bench: cuBLASLt fp8 GEMM");
    return 0;
}

/* cuBLASLt's fp8 GEMM at (tokens, out, in): y^T = W . x^T in column-major TN form (the one fp8 takes on
 * sm_90), random e4m3 operands (the weight's own codes for W), per-tensor scales of 1, bf16 out. */
static int lt_ms(AsEngine *e, const AsDevWeight *w, int tokens, const void *xcodes, void *y, double *ms, AsError *err)
{
    Lt l = {.w = w->d, .x = xcodes, .y = y, .ws_bytes = (size_t)32 << 20, .st = e->st};
    float *one = NULL;
    cublasLtMatmulPreference_t pref = NULL;
    int rc = 0, found = 0;
    const cublasOperation_t ta = CUBLAS_OP_T, tb = CUBLAS_OP_N;
    const float h_one = 1.0f;
    cublasLtMatmulHeuristicResult_t heur;
    if (cudaMalloc((void **)&one, sizeof(float)) != cudaSuccess || cudaMalloc(&l.ws, l.ws_bytes) != cudaSuccess ||
        cudaMemcpy(one, &h_one, sizeof h_one, cudaMemcpyHostToDevice) != cudaSuccess)
        rc = as_err(err, AS_ERUNTIME, "bench: cuBLASLt fp8 buffers: %s", cudaGetErrorString(cudaGetLastError()));
    if (!rc && (cublasLtCreate(&l.lt) != CUBLAS_STATUS_SUCCESS ||
                cublasLtMatmulDescCreate(&l.op, CUBLAS_COMPUTE_32F, CUDA_R_32F) != CUBLAS_STATUS_SUCCESS ||
                cublasLtMatmulDescSetAttribute(l.op, CUBLASLT_MATMUL_DESC_TRANSA, &ta, sizeof ta) ||
                cublasLtMatmulDescSetAttribute(l.op, CUBLASLT_MATMUL_DESC_TRANSB, &tb, sizeof tb) ||
                cublasLtMatmulDescSetAttribute(l.op, CUBLASLT_MATMUL_DESC_A_SCALE_POINTER, &one, sizeof one) ||
                cublasLtMatmulDescSetAttribute(l.op, CUBLASLT_MATMUL_DESC_B_SCALE_POINTER, &one, sizeof one) ||
                cublasLtMatrixLayoutCreate(&l.la, CUDA_R_8F_E4M3, w->in, w->out, w->in) ||
                cublasLtMatrixLayoutCreate(&l.lb, CUDA_R_8F_E4M3, w->in, tokens, w->in) ||
                cublasLtMatrixLayoutCreate(&l.lc, CUDA_R_16BF, w->out, tokens, w->out) ||
                cublasLtMatmulPreferenceCreate(&pref) ||
                cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &l.ws_bytes,
                                                     sizeof l.ws_bytes) ||
                cublasLtMatmulAlgoGetHeuristic(l.lt, l.op, l.la, l.lb, l.lc, l.lc, pref, 1, &heur, &found) ||
                found < 1))
        rc = as_err(err, AS_ERUNTIME, "bench: cuBLASLt has no fp8 GEMM for m=%d n=%d k=%d", w->out, tokens, w->in);
    if (!rc) {
        l.algo = heur.algo;
        rc = time_ms(e, run_lt, &l, ms, err);
    }
    if (pref)
        cublasLtMatmulPreferenceDestroy(pref);
    if (l.la)
        cublasLtMatrixLayoutDestroy(l.la);
    if (l.lb)
        cublasLtMatrixLayoutDestroy(l.lb);
    if (l.lc)
        cublasLtMatrixLayoutDestroy(l.lc);
    if (l.op)
        cublasLtMatmulDescDestroy(l.op);
    if (l.lt)
        cublasLtDestroy(l.lt);
    cudaFree(one), cudaFree(l.ws);
    return rc;
}

int as_bench_fp8_projections(AsEngine *e, int tokens, double *ours_ms, double *lt_ms_out, double *flops, AsError *err)
{
    *ours_ms = *lt_ms_out = *flops = 0;
    const AsDevLayerWeights *W = &e->w[0];
    const AsDevWeight *ws[] = {&W->wq_a, &W->wq_b, &W->wkv, &W->wo_b, &W->i_wq_b};
    for (size_t i = 0; i < sizeof ws / sizeof ws[0]; i++) {
        const AsDevWeight *w = ws[i];
        if (!w->d || w->type != AS_DW_FP8)
            continue;
        as_bf16_t *x = NULL, *y = NULL;
        void *act = NULL;
        const size_t nx = (size_t)tokens * w->in;
        int rc = 0;
        if (cudaMalloc((void **)&x, 2 * nx) != cudaSuccess || cudaMalloc(&act, 2 * nx) != cudaSuccess ||
            cudaMalloc((void **)&y, 2 * (size_t)tokens * w->out) != cudaSuccess)
            rc = as_err(err, AS_ERUNTIME, "bench: fp8 projection %dx%d at %d tokens: out of GPU memory", w->out, w->in,
                        tokens);
        if (!rc)
            rc = as_bench_fill_random(x, nx, 11 + i, err);
        double ours = 0, lt = 0;
        Ours o = {e, w, tokens, x, act, y};
        if (!rc)
            rc = time_ms(e, run_ours, &o, &ours, err);
        if (!rc) /* the QDQ'd rows' bytes as cuBLASLt's e4m3 operand: any bytes time the same */
            rc = lt_ms(e, w, tokens, act, y, &lt, err);
        cudaFree(x), cudaFree(act), cudaFree(y);
        if (rc)
            return rc;
        *ours_ms += ours;
        *lt_ms_out += lt;
        *flops += 2.0 * tokens * (double)w->out * w->in;
    }
    return 0;
}
