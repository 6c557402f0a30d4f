// bench/kernels_bench.cu's fp8 part, included inside its namespace: the fp8 projections'
// kernels at the flash shapes.
//   decode: act_quant (kernels/act_quant.cu) and the fp8 GEMV (kernels/fp8_gemv.cu) at m = 1 and 8, bytes
//     against the copy bandwidth and against a read of the same weight bytes (bench_read), with a sweep of
//     the warps per group (W) and the bf16 GEMV at the same shape for comparison; the grouped wo_a in fp8
//     form (bf16 activations).
//   prefill: the wgmma fp8 GEMM (kernels/fp8_gemm.cu) at 512 and 4096 tokens against cuBLASLt's fp8 GEMM
//     at the same shape with per-tensor scales (e4m3 in, bf16 out, f32 accumulation): the dense fp8
//     tensor-core rate this device reaches, measured in the same run; the fp8 figure reported is the
//     fraction of that rate.
// Weights: random e4m3 codes (no NaN code) and scales 2^-7; activations random bf16 quantised by act_quant.
// Included inside kernels_bench.cu's anonymous namespace, which includes <cublasLt.h> at file scope.

extern "C" int as_k_fp8_gemv_cfg(const AsFp8Weight *w, const AsFp8Act *x, const as_bf16_t *xb, int64_t ldx,
                                 int64_t stride_x, int m, void *y, int64_t ldy, int64_t stride_y, int y_f32, int Wn,
                                 int portable, cudaStream_t st);
extern "C" int as_k_fp8_gemv_warps(int n_out, int n_in, int batch);

__global__ void fill_e4m3_kernel(uint8_t *p, int64_t n, uint64_t seed)
{
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n; i += (int64_t)gridDim.x * blockDim.x) {
        const uint8_t c = (uint8_t)(hash64(seed * 0x9e3779b97f4a7c15ull + (uint64_t)i) >> 56);
        p[i] = (c & 0x7f) == 0x7f ? 0x7e : c;
    }
}
__global__ void fill_value_kernel(float *p, int64_t n, float v)
{
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n; i += (int64_t)gridDim.x * blockDim.x)
        p[i] = v;
}

// One fp8-form weight of rows x cols on the device (codes, then f32 scales of 32 x 32 blocks).
struct Fp8Buf {
    uint8_t *codes = nullptr;
    float *ws = nullptr;
    AsFp8Weight w{};
};
Fp8Buf fp8_weight(int rows, int cols, uint64_t seed)
{
    Fp8Buf b;
    const int64_t ldws = (cols / 32 + 3) / 4 * 4, srows = (rows + 31) / 32;
    b.codes = (uint8_t *)dalloc((size_t)rows * cols);
    b.ws = (float *)dalloc(sizeof(float) * (size_t)(srows * ldws));
    fill_e4m3_kernel<<<1024, 256>>>(b.codes, (int64_t)rows * cols, seed);
    fill_value_kernel<<<256, 256>>>(b.ws, srows * ldws, 0x1p-7f);
    CK(cudaGetLastError());
    b.w = AsFp8Weight{b.codes, cols, b.ws, ldws, rows, cols, 1, 0};
    return b;
}
void fp8_free(Fp8Buf &b)
{
    CK(cudaFree(b.codes));
    CK(cudaFree(b.ws));
}

// act_quant of `rows` random rows of n: the codes and scales in one buffer (kernels.h's act8 layout).
AsFp8Act fp8_act(int rows, int n, void **buf, void **xbf)
{
    *xbf = dalloc(2 * (size_t)rows * n);
    fill_bf16(*xbf, (int64_t)rows * n, 71, 1.0f);
    *buf = dalloc((size_t)as_act8_bytes(rows, n));
    const AsFp8Act a = as_act8_view(*buf, rows, n);
    CKL(as_k_act_quant((const as_bf16_t *)*xbf, n, rows, n, (uint8_t *)*buf, a.ldq, (float *)a.s, a.lds, 0));
    CK(cudaDeviceSynchronize());
    return a;
}

#include "bench/e4m3_gemv_variants.cuh"

void bench_fp8_gemv(const GemvShape &g, int m, bool sweep, bool quick)
{
    const size_t wbytes = (size_t)g.batch * g.n_out * g.n_in, sbytes = 4 * (size_t)g.batch * ((g.n_out + 31) / 32) *
                                                                      ((g.n_in / 32 + 3) / 4 * 4);
    const int nset = rotating_sets(wbytes);
    std::vector<Fp8Buf> W(nset);
    for (int i = 0; i < nset; i++)
        W[i] = fp8_weight(g.batch * g.n_out, g.n_in, 80 + i);
    const bool bf16x = g.batch > 1; // the grouped wo_a: bf16 activations
    void *buf = nullptr, *xbf = nullptr;
    const AsFp8Act xa = bf16x ? AsFp8Act{} : fp8_act(m, g.n_in, &buf, &xbf);
    if (bf16x) {
        xbf = dalloc(2 * (size_t)m * g.ldx);
        fill_bf16(xbf, (int64_t)m * g.ldx, 72, 1.0f);
    }
    void *y = dalloc(2 * (size_t)m * g.batch * g.n_out);
    const double bytes = (double)wbytes + sbytes + (bf16x ? 2.0 : 1.0) * m * g.batch * g.n_in + 2.0 * m * g.batch * g.n_out;
    const double flops = 2.0 * m * g.batch * g.n_out * (double)g.n_in;
    const int batch = 20, reps = quick ? 5 : 15;
    auto run = [&](int Wn, int i) {
        AsFp8Weight w = W[i % nset].w;
        if (bf16x)
            w.n_out = g.n_out, w.batch = g.batch, w.stride_rows = g.n_out;
        CKL(as_k_fp8_gemv_cfg(&w, bf16x ? nullptr : &xa, bf16x ? (const as_bf16_t *)xbf : nullptr, g.ldx, g.strideX, m,
                              y, bf16x ? g.ldy : g.n_out, bf16x ? g.strideY : 0, 0, Wn, 0, 0));
    };
    char shape[128];
    snprintf(shape, sizeof shape, "%s %dx%d%s m=%d", g.name, g.n_out, g.n_in,
             g.batch > 1 ? (std::string(" x") + std::to_string(g.batch)).c_str() : "", m);
    if (!bf16x) {
        const double uq = time_us(
            [&](int) {
                CKL(as_k_act_quant((const as_bf16_t *)xbf, g.n_in, m, g.n_in, (uint8_t *)buf, xa.ldq, (float *)xa.s,
                                   xa.lds, 0));
            },
            batch, reps);
        report("act_quant", shape, uq, 2.0 * m * g.n_in + (double)as_act8_bytes(m, g.n_in), 0, -1);
    }
    const double us = time_us([&](int i) { run(0, i); }, batch, reps);
    char kname[64];
    snprintf(kname, sizeof kname, "fp8 gemv%s auto W%d", bf16x ? " bf16 x" : "",
             as_k_fp8_gemv_warps(g.n_out, g.n_in, g.batch));
    report(kname, shape, us, bytes, flops, -1);
    if (sweep) {
        double best = 1e30;
        int bW = 0;
        printf("    sweep:");
        for (int Wn : {1, 2, 4, 8}) {
            const double t = time_us([&](int i) { run(Wn, i); }, batch, quick ? 3 : 7);
            printf(" W%d %.2f", Wn, t);
            if (t < best)
                best = t, bW = Wn;
        }
        printf("\n    best W%d %.2f us (%.1f GB/s) vs auto %.2f us\n", bW, best, bytes / best * 1e-3, us);
    }
    // the engine's decode form: kernels/gemv.cu on the codes, bf16 x (act_quant's QDQ values: any bf16 time
    // the same), the bf16 GEMV's W; R swept (R changes no bit)
    {
        auto run8 = [&](int R, int i) {
            AsFp8Weight w = W[i % nset].w;
            if (bf16x)
                w.n_out = g.n_out, w.batch = g.batch, w.stride_rows = g.n_out;
            CKL(as_k_gemv_e4m3_cfg(&w, (const as_bf16_t *)xbf, bf16x ? g.ldx : g.n_in, bf16x ? g.strideX : 0, m, y,
                                   bf16x ? g.ldy : g.n_out, bf16x ? g.strideY : 0, 0, R, 0, 0));
        };
        const double bytes8 = (double)wbytes + sbytes + 2.0 * m * g.batch * g.n_in + 2.0 * m * g.batch * g.n_out;
        const double u8 = time_us([&](int i) { run8(0, i); }, batch, reps);
        report("e4m3 gemv auto", shape, u8, bytes8, flops, -1);
        if (sweep && !bf16x)
            bench_e4m3_variants(g, W, xbf, quick);
        if (sweep) {
            printf("    R sweep:");
            for (int R : {1, 2, 4})
                printf(" R%d %.2f", R, time_us([&](int i) { run8(R, i); }, batch, quick ? 3 : 7));
            printf("\n");
        }
    }
    for (Fp8Buf &b : W)
        fp8_free(b);
    CK(cudaFree(xbf));
    if (buf)
        CK(cudaFree(buf));
    CK(cudaFree(y));
}

// cuBLASLt's fp8 GEMM, y[t][o] = bf16(sum_i x[t][i] w[o][i]) with per-tensor scales of 1 (TN, the form fp8
// takes on sm_90): per-launch microseconds at (tokens, n_out, n_in), or -1 where cuBLASLt refuses.
double cublaslt_fp8_us(cublasLtHandle_t lt, int tokens, int n_out, int n_in, bool quick)
{
    const int nset = rotating_sets((size_t)n_out * n_in);
    std::vector<void *> W(nset);
    for (int i = 0; i < nset; i++) {
        W[i] = dalloc((size_t)n_out * n_in);
        fill_e4m3_kernel<<<1024, 256>>>((uint8_t *)W[i], (int64_t)n_out * n_in, 90 + i);
    }
    void *x = dalloc((size_t)tokens * n_in), *y = dalloc(2 * (size_t)tokens * n_out);
    fill_e4m3_kernel<<<1024, 256>>>((uint8_t *)x, (int64_t)tokens * n_in, 91);
    float *one_d = (float *)dalloc(sizeof(float));
    fill_value_kernel<<<1, 1>>>(one_d, 1, 1.0f);
    CK(cudaGetLastError());
    const size_t ws_bytes = (size_t)32 << 20;
    void *ws = dalloc(ws_bytes);
    cublasLtMatmulDesc_t op = nullptr;
    cublasLtMatrixLayout_t la = nullptr, lb = nullptr, lc = nullptr;
    cublasLtMatmulPreference_t pref = nullptr;
    cublasLtMatmulHeuristicResult_t heur{};
    int found = 0;
    const cublasOperation_t ta = CUBLAS_OP_T, tb = CUBLAS_OP_N;
    bool ok = cublasLtMatmulDescCreate(&op, CUBLAS_COMPUTE_32F, CUDA_R_32F) == CUBLAS_STATUS_SUCCESS &&
              cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_TRANSA, &ta, sizeof ta) == CUBLAS_STATUS_SUCCESS &&
              cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_TRANSB, &tb, sizeof tb) == CUBLAS_STATUS_SUCCESS &&
              cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_A_SCALE_POINTER, &one_d, sizeof one_d) ==
                  CUBLAS_STATUS_SUCCESS &&
              cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_B_SCALE_POINTER, &one_d, sizeof one_d) ==
                  CUBLAS_STATUS_SUCCESS &&
              // column-major: A = W^T stored K x N (op T: N x K), B = x^T K x M, C = y^T N x M
              cublasLtMatrixLayoutCreate(&la, CUDA_R_8F_E4M3, n_in, n_out, n_in) == CUBLAS_STATUS_SUCCESS &&
              cublasLtMatrixLayoutCreate(&lb, CUDA_R_8F_E4M3, n_in, tokens, n_in) == CUBLAS_STATUS_SUCCESS &&
              cublasLtMatrixLayoutCreate(&lc, CUDA_R_16BF, n_out, tokens, n_out) == CUBLAS_STATUS_SUCCESS &&
              cublasLtMatmulPreferenceCreate(&pref) == CUBLAS_STATUS_SUCCESS &&
              cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws_bytes,
                                                   sizeof ws_bytes) == CUBLAS_STATUS_SUCCESS &&
              cublasLtMatmulAlgoGetHeuristic(lt, op, la, lb, lc, lc, pref, 1, &heur, &found) == CUBLAS_STATUS_SUCCESS &&
              found > 0;
    double us = -1;
    if (ok) {
        const float alpha = 1.0f, beta = 0.0f;
        us = time_us(
            [&](int i) {
                if (ok)
                    ok = ckb(cublasLtMatmul(lt, op, &alpha, W[i % nset], la, x, lb, &beta, y, lc, y, lc, &heur.algo, ws,
                                            ws_bytes, 0),
                             "cublasLtMatmul fp8");
            },
            tokens >= 2048 ? 5 : 20, quick ? 5 : 11);
        if (!ok)
            us = -1;
    } else {
        printf("  (cuBLASLt fp8 GEMM %dx%dx%d: no algorithm)\n", tokens, n_out, n_in);
    }
    if (pref)
        cublasLtMatmulPreferenceDestroy(pref);
    if (la)
        cublasLtMatrixLayoutDestroy(la);
    if (lb)
        cublasLtMatrixLayoutDestroy(lb);
    if (lc)
        cublasLtMatrixLayoutDestroy(lc);
    if (op)
        cublasLtMatmulDescDestroy(op);
    for (void *p : W)
        CK(cudaFree(p));
    CK(cudaFree(x));
    CK(cudaFree(y));
    CK(cudaFree(ws));
    CK(cudaFree(one_d));
    return us;
}

// The fp8 GEMM at one prefill shape; the report's %mma column is the fraction of cuBLASLt's fp8 rate at the
// same shape (printed beside it), not of the bf16 ceiling.
void bench_fp8_gemm(cublasLtHandle_t lt, const char *name, int tokens, int n_out, int n_in, bool quick, double *sum_us,
                    double *sum_lt_us)
{
    const size_t wbytes = (size_t)n_out * n_in;
    const int nset = rotating_sets(wbytes);
    std::vector<Fp8Buf> W(nset);
    for (int i = 0; i < nset; i++)
        W[i] = fp8_weight(n_out, n_in, 100 + i);
    void *buf, *xbf;
    const AsFp8Act xa = fp8_act(tokens, n_in, &buf, &xbf);
    void *y = dalloc(2 * (size_t)tokens * n_out);
    const double flops = 2.0 * tokens * (double)n_out * n_in;
    const double bytes = (double)wbytes + (double)as_act8_bytes(tokens, n_in) + 2.0 * tokens * n_out;
    const bool wgmma = as_k_fp8_gemm_applies(&W[0].w, &xa);
    const double us = time_us(
        [&](int i) { CKL(as_k_fp8_gemm(&W[i % nset].w, &xa, tokens, (as_bf16_t *)y, n_out, 0)); },
        tokens >= 2048 ? 5 : 20, quick ? 5 : 11);
    const double lt_us = cublaslt_fp8_us(lt, tokens, n_out, n_in, quick);
    char shape[128];
    snprintf(shape, sizeof shape, "%s s=%d %dx%d", name, tokens, n_out, n_in);
    report(wgmma ? "fp8 gemm wgmma" : "fp8 gemm (GEMV fallback)", shape, us, bytes, flops, lt_us);
    if (lt_us > 0)
        printf("    cuBLASLt fp8 (per-tensor scales) %.1f TFLOP/s; the block-scaled GEMM reaches %.1f%% of it\n",
               flops / lt_us * 1e-6, 100.0 * lt_us / us);
    *sum_us += us;
    *sum_lt_us += lt_us > 0 ? lt_us : 0;
    for (Fp8Buf &b : W)
        fp8_free(b);
    CK(cudaFree(buf));
    CK(cudaFree(xbf));
    CK(cudaFree(y));
}

// The fp8 projections of a flash layer (tests/lib/kernel_shapes.h) and wo_a (in fp8 form where a checkpoint
// stores it so: bf16 activations), in the engine's layout.
std::vector<GemvShape> fp8_shapes()
{
    std::vector<GemvShape> v;
    for (const AsProjShape &p : as_flash_projections) {
        const bool fp8 = !strcmp(p.name, "wq_a") || !strcmp(p.name, "wq_b") || !strcmp(p.name, "wkv") ||
                         !strcmp(p.name, "indexer.wq_b") || !strcmp(p.name, "wo_b");
        const bool grouped = p.groups > 1;
        if (fp8 || grouped)
            v.push_back({p.name, p.n_out, p.n_in, p.groups, p.ldx, grouped ? p.n_in : 0, (int64_t)p.groups * p.n_out,
                         grouped ? p.n_out : 0, false});
    }
    return v;
}

void bench_fp8(bool quick)
{
    printf("\n== fp8 projections: decode GEMV (floor = codes + scales + x + y bytes / copy bandwidth)\n");
    const std::vector<GemvShape> shapes = fp8_shapes();
    for (const GemvShape &g : shapes) {
        bench_fp8_gemv(g, 1, true, quick);
        bench_fp8_gemv(g, 8, false, quick);
    }
    printf("\n== read ceiling at the fp8 weights' sizes (codes only)\n");
    for (const GemvShape &g : shapes)
        bench_read(g.name, (size_t)g.batch * g.n_out * g.n_in, quick);

    printf("\n== fp8 prefill GEMM (32x32 block scales, wgmma) against cuBLASLt's fp8 GEMM (per-tensor scales) at the "
           "same shapes, in this run\n");
    cublasLtHandle_t lt;
    if (cublasLtCreate(&lt) != CUBLAS_STATUS_SUCCESS) {
        printf("  (cublasLtCreate failed)\n");
        return;
    }
    for (int tokens : {512, 4096}) {
        double us = 0, lt_us = 0, flops = 0;
        for (const GemvShape &g : shapes) {
            if (g.batch > 1) // wo_a: the bf16 linear (cuBLAS on the dequantised weight)
                continue;
            bench_fp8_gemm(lt, g.name, tokens, g.n_out, g.n_in, quick, &us, &lt_us);
            flops += 2.0 * tokens * (double)g.n_out * g.n_in;
        }
        printf("  the five fp8 projections at %d tokens: %.1f us, %.1f TFLOP/s; cuBLASLt fp8 at the same shapes %.1f us, "
               "%.1f TFLOP/s: %.1f%% of the dense fp8 rate (target >= 70%%)\n",
               tokens, us, flops / us * 1e-6, lt_us, lt_us > 0 ? flops / lt_us * 1e-6 : 0.0,
               lt_us > 0 ? 100.0 * lt_us / us : 0.0);
    }
    cublasLtDestroy(lt);
}
