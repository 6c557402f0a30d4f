// attnscope_kbench: micro-benchmark of the heavy kernels (kernels/gemv.cu, index_scores.cu,
// sparse_attn.cu + attn_decode.cu, topk_select.cu, and the Q2_K projections q8_1.cu, q2k_mmvq.cu,
// q2k_mmq.cu) at the DeepSeek-V4.1
// Flash shapes, against the measured ceilings of the device
// (device-to-device copy bandwidth, cuBLAS bf16 GEMM rate) and against cuBLAS at the same shapes.
//
//   make BUILD=build kbench && ./build/attnscope_kbench [--quick] [--attn: ceilings + sparse attention only]
//     [--fp8: ceilings + the fp8 projections only (bench/kernels_bench_fp8.cuh)]
//
// Method (METHOD.md): CUDA events; warm-up launches first; each timing is the median over `reps`
// batches of `batch` back-to-back launches (per-launch time = batch time / batch, so launch gaps
// are included, as in the engine); inputs rotate over enough buffer sets to exceed the L2 (60 MB)
// wherever one set would fit in it; random data everywhere (never zeros). For each kernel the two
// numbers: minimal bytes (every input read once, every output written once) and useful FLOPs; the
// report gives achieved GB/s and TFLOP/s and their fraction of the measured ceilings. The summary
// table closes the output.
#include <cublasLt.h>
#include <cublas_v2.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "kernels/common.cuh"
#include "kernels/e4m3.cuh"
#include "kernels/kernels.h"
#include "model/ggml_blocks.h"
#include "tests/lib/kernel_shapes.h"

extern "C" {
int as_k_gemv_bf16_cfg(const as_bf16_t *W, int64_t ldw, int64_t strideW, int n_out, int n_in, const as_bf16_t *x,
                       int64_t ldx, int64_t strideX, int m, void *y, int64_t ldy, int64_t strideY, int y_f32, int batch,
                       int R, int Wn, cudaStream_t st);
int as_k_gemv_f32w_cfg(const float *W, int64_t ldw, int n_out, int n_in, const as_bf16_t *x, int64_t ldx, int m,
                       float *y, int64_t ldy, int R, int Wn, cudaStream_t st);
void as_k_gemv_pick_config(int n_out, int n_in, int batch, int *R, int *W);
int as_k_index_scores_path(const as_bf16_t *iq, const as_bf16_t *keys, const as_bf16_t *w, int s, int nh, int ihd,
                           int width, int start_pos, int ratio, as_bf16_t *score, int force_scalar, cudaStream_t st);
int as_k_q2k_mmvq_cfg(const void *W, int64_t ldw, int64_t strideW, int n_out, int n_in, const void *xq, int64_t ldx,
                      int64_t strideX, int m, void *y, int64_t ldy, int64_t strideY, int y_f32, int batch, int R,
                      int Wn, cudaStream_t st);
void as_k_q2k_mmvq_pick_config(int n_out, int n_in, int batch, int *R, int *W);
int as_k_sparse_attn_path(const as_bf16_t *q, const as_bf16_t *rows_a, int na, const as_bf16_t *rows_b, int nb,
                          const int32_t *idx, int topk, const float *sink, as_bf16_t *o, int s, int nh, int hd,
                          float scale, int path, int split, cudaStream_t st);
}

namespace {

void ck(cudaError_t e, const char *what, int line)
{
    if (e != cudaSuccess) {
        fprintf(stderr, "kbench:%d: %s: %s\n", line, what, cudaGetErrorString(e));
        exit(1);
    }
}
#define CK(x) ck((x), #x, __LINE__)
// Launchers return an int cudaError_t.
#define CKL(x) ck((cudaError_t)(x), #x, __LINE__)

bool ckb(cublasStatus_t s, const char *what)
{
    if (s != CUBLAS_STATUS_SUCCESS) {
        printf("  (cuBLAS %s failed: status %d)\n", what, (int)s);
        return false;
    }
    return true;
}

__device__ __forceinline__ uint64_t hash64(uint64_t z)
{
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}
// Uniform in [-a, a], never exactly zero, rounded to bf16 (RNE).
__device__ __forceinline__ float urand(uint64_t seed, int64_t i, float a)
{
    uint64_t h = hash64(seed * 0x9e3779b97f4a7c15ull + (uint64_t)i);
    float u = ((float)(h >> 40) + 0.5f) / 16777216.0f;
    return (2.0f * u - 1.0f) * a;
}
__global__ void fill_bf16_kernel(uint16_t *p, int64_t n, uint64_t seed, float a)
{
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n; i += (int64_t)gridDim.x * blockDim.x) {
        uint32_t u = __float_as_uint(urand(seed, i, a));
        u += 0x7fffu + ((u >> 16) & 1u);
        p[i] = (uint16_t)(u >> 16);
    }
}
__global__ void fill_f32_kernel(float *p, int64_t n, uint64_t seed, float a)
{
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n; i += (int64_t)gridDim.x * blockDim.x)
        p[i] = urand(seed, i, a);
}
void fill_bf16(void *p, int64_t n, uint64_t seed, float a)
{
    fill_bf16_kernel<<<1024, 256>>>((uint16_t *)p, n, seed, a);
    CK(cudaGetLastError());
}
void fill_f32(float *p, int64_t n, uint64_t seed, float a)
{
    fill_f32_kernel<<<1024, 256>>>(p, n, seed, a);
    CK(cudaGetLastError());
}

void *dalloc(size_t bytes)
{
    void *p = nullptr;
    CK(cudaMalloc(&p, bytes ? bytes : 1));
    return p;
}

// Median per-launch microseconds of `reps` batches of `batch` launches; launch(i) gets a running
// index (rotate buffers with it).
template <class F> double time_us(F launch, int batch, int reps, int warm = 3)
{
    cudaEvent_t e0, e1;
    CK(cudaEventCreate(&e0));
    CK(cudaEventCreate(&e1));
    int i = 0;
    for (int w = 0; w < warm; w++)
        launch(i++);
    CK(cudaDeviceSynchronize());
    std::vector<double> ts;
    for (int r = 0; r < reps; r++) {
        CK(cudaEventRecord(e0));
        for (int b = 0; b < batch; b++)
            launch(i++);
        CK(cudaEventRecord(e1));
        CK(cudaEventSynchronize(e1));
        float ms = 0;
        CK(cudaEventElapsedTime(&ms, e0, e1));
        ts.push_back(1000.0 * ms / batch);
    }
    CK(cudaGetLastError());
    CK(cudaEventDestroy(e0));
    CK(cudaEventDestroy(e1));
    std::sort(ts.begin(), ts.end());
    return ts[ts.size() / 2];
}

struct Ceil {
    double copy_gbs = 0;  // device-to-device copy, bytes read + written per second
    double gemm_tfs = 0;  // cuBLAS bf16 GEMM 8192^3, random data
} g_ceil;

struct Row {
    std::string kernel, shape;
    double us, gbs, tfs, pct_bw, pct_mma;
    double cublas_us;
};
std::vector<Row> g_rows;

void report(const std::string &kernel, const std::string &shape, double us, double bytes, double flops,
            double cublas_us)
{
    Row r{kernel, shape, us, bytes / us * 1e-3, flops / us * 1e-6, 0, 0, cublas_us};
    r.pct_bw = g_ceil.copy_gbs > 0 ? 100.0 * r.gbs / g_ceil.copy_gbs : 0;
    r.pct_mma = g_ceil.gemm_tfs > 0 ? 100.0 * r.tfs / g_ceil.gemm_tfs : 0;
    const double floor_us = std::max(bytes / (g_ceil.copy_gbs * 1e3), flops / (g_ceil.gemm_tfs * 1e6));
    printf("  %-28s %-44s %10.2f us  %8.1f GB/s (%5.1f%%)  %7.1f TFLOP/s (%5.1f%%)  floor %9.2f us (x%.2f)", kernel.c_str(),
           shape.c_str(), us, r.gbs, r.pct_bw, r.tfs, r.pct_mma, floor_us, us / floor_us);
    if (cublas_us > 0)
        printf("  cuBLAS %9.2f us", cublas_us);
    printf("\n");
    g_rows.push_back(r);
}

// ---------------------------------------------------------------- ceilings

void measure_ceilings(cublasHandle_t cb, bool quick)
{
    const size_t bytes = (size_t)1 << 30;
    void *a = dalloc(bytes), *b = dalloc(bytes);
    fill_bf16(a, (int64_t)(bytes / 2), 1, 1.0f);
    double us = time_us([&](int) { CK(cudaMemcpyAsync(b, a, bytes, cudaMemcpyDeviceToDevice)); }, 1, quick ? 5 : 15);
    g_ceil.copy_gbs = 2.0 * bytes / us * 1e-3;
    CK(cudaFree(a));
    CK(cudaFree(b));

    const int n = 8192;
    void *A = dalloc((size_t)n * n * 2), *B = dalloc((size_t)n * n * 2), *C = dalloc((size_t)n * n * 2);
    fill_bf16(A, (int64_t)n * n, 2, 1.0f);
    fill_bf16(B, (int64_t)n * n, 3, 1.0f);
    const float one = 1.0f, zero = 0.0f;
    bool ok = true;
    us = time_us(
        [&](int) {
            ok = ok && ckb(cublasGemmEx(cb, CUBLAS_OP_T, CUBLAS_OP_N, n, n, n, &one, A, CUDA_R_16BF, n, B, CUDA_R_16BF, n,
                                        &zero, C, CUDA_R_16BF, n, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT),
                           "gemm ceiling");
        },
        1, quick ? 5 : 10);
    g_ceil.gemm_tfs = ok ? 2.0 * n * n * (double)n / us * 1e-6 : 790.0;
    CK(cudaFree(A));
    CK(cudaFree(B));
    CK(cudaFree(C));
    printf("ceilings: device-to-device copy %.1f GB/s (read + write), cuBLAS bf16 GEMM 8192^3 %.1f TFLOP/s%s\n",
           g_ceil.copy_gbs, g_ceil.gemm_tfs, ok ? "" : " (cuBLAS failed: 790 assumed)");
}

// How many copies of a weight buffer of `bytes` a timed batch rotates through: 256 MiB of them in all (far
// beyond the 60 MiB L2, so every launch reads HBM), at least 2 and at most 64.
static int rotating_sets(size_t bytes)
{
    return (int)std::min<size_t>(64, std::max<size_t>(2, (size_t)(256u << 20) / bytes + 1));
}

// ---------------------------------------------------------------- read ceiling

// A pure stream of 16-byte loads: the decode GEMV's weight access without its arithmetic. One wave of
// resident blocks loops over the buffer with kReadIn loads in flight a thread; the first pass goes out
// before the PDL wait, as the GEMV's does. Timed at each GEMV's weight size, it is what a weight read of
// that size reaches here: a GEMV's distance to it is the GEMV's own loss, the read's distance to the copy
// floor its ramp and tail (and reading against copying).
constexpr int kReadThreads = 256, kReadIn = 8;

__global__ void __launch_bounds__(kReadThreads) read_stream_kernel(const uint4 *p, int64_t n, unsigned *sink)
{
    const int64_t stride = (int64_t)gridDim.x * kReadThreads;
    int64_t i = blockIdx.x * (int64_t)kReadThreads + threadIdx.x;
    uint4 v[kReadIn];
    const uint4 zero = make_uint4(0, 0, 0, 0);
#pragma unroll
    for (int u = 0; u < kReadIn; u++)
        v[u] = i + u * stride < n ? as_d_ld_stream16(p + i + u * stride) : zero;
    as_d_pdl_wait();
    uint32_t acc = 0;
    for (;;) {
#pragma unroll
        for (int u = 0; u < kReadIn; u++)
            acc ^= v[u].x ^ v[u].y ^ v[u].z ^ v[u].w;
        i += kReadIn * stride;
        if (i >= n)
            break;
#pragma unroll
        for (int u = 0; u < kReadIn; u++)
            v[u] = i + u * stride < n ? as_d_ld_stream16(p + i + u * stride) : zero;
    }
    if (acc == 0x9e3779b9u) // never, in practice: keeps the loads
        atomicAdd(sink, 1u);
}

void bench_read(const char *name, size_t bytes, bool quick)
{
    const int nset = rotating_sets(bytes);
    std::vector<void *> buf(nset);
    for (int i = 0; i < nset; i++) {
        buf[i] = dalloc(bytes);
        fill_bf16(buf[i], (int64_t)(bytes / 2), 40 + i, 1.0f);
    }
    unsigned *sink = (unsigned *)dalloc(sizeof(unsigned));
    int per_sm = 0;
    CK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, read_stream_kernel, kReadThreads, 0));
    const int64_t n = (int64_t)(bytes / 16);
    const int64_t all = (int64_t)per_sm * as_sm_count(), need = (n + kReadThreads - 1) / kReadThreads;
    const int grid = (int)std::max<int64_t>(1, std::min(all, need));
    const double us = time_us(
        [&](int i) {
            as_launch(read_stream_kernel, grid, kReadThreads, 0, 0, (const uint4 *)buf[i % nset], n, sink);
            CK(cudaGetLastError());
        },
        20, quick ? 5 : 15);
    char shape[96];
    snprintf(shape, sizeof shape, "%s: %.1f MB, %d blocks x %d", name, bytes / 1e6, grid, kReadThreads);
    report("read stream (no arithmetic)", shape, us, (double)bytes, 0, -1);
    for (void *b : buf)
        CK(cudaFree(b));
    CK(cudaFree(sink));
}

// ---------------------------------------------------------------- GEMV

struct GemvShape {
    const char *name;
    int n_out, n_in, batch;
    int64_t ldx, strideX, ldy, strideY;
    bool f32w;
};

void bench_gemv(cublasHandle_t cb, const GemvShape &g, int m, bool sweep, bool quick)
{
    const size_t wsz = g.f32w ? 4 : 2;
    const size_t wbytes = wsz * (size_t)g.batch * g.n_out * g.n_in;
    const int nset = rotating_sets(wbytes);
    std::vector<void *> W(nset);
    for (int i = 0; i < nset; i++) {
        W[i] = dalloc(wbytes);
        if (g.f32w)
            fill_f32((float *)W[i], (int64_t)(wbytes / 4), 10 + i, 0.05f);
        else
            fill_bf16(W[i], (int64_t)(wbytes / 2), 10 + i, 0.05f);
    }
    const int64_t xn = (int64_t)(m - 1) * g.ldx + (int64_t)(g.batch - 1) * g.strideX + g.n_in;
    void *x = dalloc(2 * (size_t)xn);
    fill_bf16(x, xn, 5, 1.0f);
    const int64_t yn = (int64_t)(m - 1) * g.ldy + (int64_t)(g.batch - 1) * g.strideY + g.n_out;
    void *y = dalloc(4 * (size_t)yn);
    const bool yf32 = g.f32w;
    const double bytes = (double)wbytes + 2.0 * m * g.batch * g.n_in + (yf32 ? 4.0 : 2.0) * m * g.batch * g.n_out;
    const double flops = 2.0 * m * g.batch * g.n_out * (double)g.n_in;
    const int batch = 20, reps = quick ? 5 : 15;

    auto run = [&](int R, int Wn, int i) {
        if (g.f32w)
            CKL(as_k_gemv_f32w_cfg((const float *)W[i % nset], g.n_in, g.n_out, g.n_in, (const as_bf16_t *)x, g.ldx,
                                   m, (float *)y, g.ldy, R, Wn, 0));
        else
            CKL(as_k_gemv_bf16_cfg((const as_bf16_t *)W[i % nset], g.n_in, (int64_t)g.n_out * g.n_in, g.n_out, g.n_in,
                                   (const as_bf16_t *)x, g.ldx, g.strideX, m, y, g.ldy, g.strideY, 0, g.batch, R, Wn,
                                   0));
    };
    // cuBLAS at the same shape: y^T = W x^T (column-major: op_T(W) [n_out x n_in] * X [n_in x m]).
    double cub = -1;
    {
        const float one = 1.0f, zero = 0.0f;
        bool ok = true;
        float *xf = nullptr;
        if (g.f32w) {
            xf = (float *)dalloc(4 * (size_t)xn);
            fill_f32(xf, xn, 6, 1.0f);
        }
        cub = time_us(
            [&](int i) {
                if (!ok)
                    return;
                if (g.f32w)
                    ok = ckb(cublasSgemm(cb, CUBLAS_OP_T, CUBLAS_OP_N, g.n_out, m, g.n_in, &one,
                                         (const float *)W[i % nset], g.n_in, xf, (int)g.ldx, &zero, (float *)y,
                                         (int)g.ldy),
                             "sgemm");
                else if (g.batch == 1)
                    ok = ckb(cublasGemmEx(cb, CUBLAS_OP_T, CUBLAS_OP_N, g.n_out, m, g.n_in, &one, W[i % nset],
                                          CUDA_R_16BF, g.n_in, x, CUDA_R_16BF, (int)g.ldx, &zero, y, CUDA_R_16BF,
                                          (int)g.ldy, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT),
                             "gemmEx");
                else
                    ok = ckb(cublasGemmStridedBatchedEx(cb, CUBLAS_OP_T, CUBLAS_OP_N, g.n_out, m, g.n_in, &one,
                                                        W[i % nset], CUDA_R_16BF, g.n_in, (long long)g.n_out * g.n_in,
                                                        x, CUDA_R_16BF, (int)g.ldx, g.strideX, &zero, y, CUDA_R_16BF,
                                                        (int)g.ldy, g.strideY, g.batch, CUBLAS_COMPUTE_32F,
                                                        CUBLAS_GEMM_DEFAULT),
                             "gemmStridedBatchedEx");
            },
            batch, reps);
        if (!ok)
            cub = -1;
        if (xf)
            CK(cudaFree(xf));
    }
    int aR = 0, aW = 0;
    as_k_gemv_pick_config(g.n_out, g.n_in, g.batch, &aR, &aW);
    char shape[128];
    snprintf(shape, sizeof shape, "%s %dx%d%s m=%d", g.name, g.n_out, g.n_in,
             g.batch > 1 ? (std::string(" x") + std::to_string(g.batch)).c_str() : "", m);
    const double us = time_us([&](int i) { run(0, 0, i); }, batch, reps);
    char kname[64];
    snprintf(kname, sizeof kname, "gemv auto R%d W%d", aR, aW);
    report(kname, shape, us, bytes, flops, cub);
    if (sweep) {
        const int Rs[] = {1, 2, 4}, Ws[] = {1, 2, 4, 8};
        double best = 1e30;
        int bR = 0, bW = 0;
        printf("    sweep:");
        for (int R : Rs)
            for (int Wn : Ws) {
                double t = time_us([&](int i) { run(R, Wn, i); }, batch, quick ? 3 : 7);
                printf(" R%dW%d %.2f", R, Wn, t);
                if (t < best)
                    best = t, bR = R, bW = Wn;
            }
        printf("\n    best R%d W%d %.2f us (%.1f GB/s) vs auto %.2f us\n", bR, bW, best, bytes / best * 1e-3, us);
    }
    for (void *p : W)
        CK(cudaFree(p));
    CK(cudaFree(x));
    CK(cudaFree(y));
}

// ---------------------------------------------------------------- Q2_K projections

// Random Q2_K blocks: random scale / min nibbles and 2-bit codes, fp16 d and dmin in [1e-3, 2e-2].
__global__ void fill_q2k_kernel(AsBlockQ2K *w, int64_t n, uint64_t seed)
{
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n; i += (int64_t)gridDim.x * blockDim.x) {
        uint32_t *words = (uint32_t *)&w[i];
        for (int k = 0; k < 20; k++) // scales and qs
            words[k] = (uint32_t)hash64(seed * 0x9e3779b97f4a7c15ull + (uint64_t)(i * 21 + k));
        const float d = 1e-3f + 1.9e-2f * (0.5f + 0.5f * urand(seed + 1, i, 1.0f));
        const float dm = 1e-3f + 1.9e-2f * (0.5f + 0.5f * urand(seed + 2, i, 1.0f));
        words[20] = (uint32_t)__half_as_ushort(__float2half_rn(d)) |
                    (uint32_t)__half_as_ushort(__float2half_rn(dm)) << 16;
    }
}

// One Q2_K projection shape (the engine's layout: x rows of batch * n_in values, group b at b * n_in;
// y rows of batch * n_out): the q8_1 quantiser, mmvq (m <= 8) or mmq, and the bf16 path at the same
// shape for comparison (the decode GEMV up to 8 rows, cuBLAS above). Bytes: the Q2_K blocks + the q8_1
// input + the bf16 output.
void bench_q2k(cublasHandle_t cb, const GemvShape &g, int m, bool sweep, bool quick)
{
    const int nb = g.n_in / AS_QK_K, nx = g.n_in / AS_QK8_1;
    const int64_t wblocks = (int64_t)g.batch * g.n_out * nb;
    const size_t wbytes = sizeof(AsBlockQ2K) * (size_t)wblocks;
    const int nset = rotating_sets(wbytes);
    std::vector<void *> W(nset);
    for (int i = 0; i < nset; i++) {
        W[i] = dalloc(wbytes);
        fill_q2k_kernel<<<1024, 256>>>((AsBlockQ2K *)W[i], wblocks, 40 + i);
        CK(cudaGetLastError());
    }
    const int64_t X = (int64_t)g.batch * g.n_in, ldq = X / AS_QK8_1;
    void *x = dalloc(2 * (size_t)(m * X)), *xq = dalloc(sizeof(AsBlockQ8_1) * (size_t)(m * ldq));
    fill_bf16(x, m * X, 5, 1.0f);
    const int64_t ldy = (int64_t)g.batch * g.n_out;
    void *y = dalloc(2 * (size_t)(m * ldy));
    const double qbytes = sizeof(AsBlockQ8_1) * (double)m * ldq;
    const double bytes = (double)wbytes + qbytes + 2.0 * m * ldy;
    const double flops = 2.0 * m * g.batch * g.n_out * (double)g.n_in;
    const int batch = m >= 512 ? 3 : 20, reps = quick ? 5 : 15;
    char shape[128];
    snprintf(shape, sizeof shape, "%s %dx%d%s m=%d", g.name, g.n_out, g.n_in,
             g.batch > 1 ? (std::string(" x") + std::to_string(g.batch)).c_str() : "", m);

    const double uq = time_us([&](int) { CKL(as_k_quantize_q8_1((const as_bf16_t *)x, X, m, (int)X, xq, ldq, 0)); },
                              batch, reps);
    report("q8_1 quantise", shape, uq, 2.0 * m * X + qbytes, 0, -1);

    // the bf16 path at the same shape: decode GEMV (m <= 8) or cuBLAS (above), random bf16 weights
    double ref_us = -1;
    {
        void *wb = dalloc(2 * (size_t)g.batch * g.n_out * g.n_in);
        fill_bf16(wb, (int64_t)g.batch * g.n_out * g.n_in, 9, 0.05f);
        const float one = 1.0f, zero = 0.0f;
        bool ok = true;
        ref_us = time_us(
            [&](int) {
                if (m <= 8)
                    CKL(as_k_gemv_bf16((const as_bf16_t *)wb, g.n_in, (int64_t)g.n_out * g.n_in, g.n_out, g.n_in,
                                       (const as_bf16_t *)x, X, g.n_in, m, y, ldy, g.n_out, 0, g.batch, 0));
                else if (ok)
                    ok = ckb(cublasGemmStridedBatchedEx(cb, CUBLAS_OP_T, CUBLAS_OP_N, g.n_out, m, g.n_in, &one, wb,
                                                        CUDA_R_16BF, g.n_in, (long long)g.n_out * g.n_in, x,
                                                        CUDA_R_16BF, (int)X, g.n_in, &zero, y, CUDA_R_16BF, (int)ldy,
                                                        g.n_out, g.batch, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT),
                             "gemmStridedBatchedEx");
            },
            batch, reps);
        if (!ok)
            ref_us = -1;
        CK(cudaFree(wb));
    }
    auto run = [&](int R, int Wn, int i) {
        if (m <= 8)
            CKL(as_k_q2k_mmvq_cfg(W[i % nset], nb, (int64_t)g.n_out * nb, g.n_out, g.n_in, xq, ldq, nx, m, y, ldy,
                                  g.n_out, 0, g.batch, R, Wn, 0));
        else
            CKL(as_k_q2k_mmq(W[i % nset], nb, (int64_t)g.n_out * nb, g.n_out, g.n_in, xq, ldq, nx, m, y, ldy, g.n_out,
                             0, g.batch, 0));
    };
    const double us = time_us([&](int i) { run(0, 0, i); }, batch, reps);
    char kname[64];
    if (m <= 8) {
        int aR = 0, aW = 0;
        as_k_q2k_mmvq_pick_config(g.n_out, g.n_in, g.batch, &aR, &aW);
        snprintf(kname, sizeof kname, "q2k mmvq auto R%d W%d", aR, aW);
    } else {
        snprintf(kname, sizeof kname, "q2k mmq 128x32 tiles");
    }
    report(kname, shape, us, bytes, flops, ref_us);
    printf("    (the last column: the bf16 %s at this shape; q8_1 + Q2_K together %.2f us)\n",
           m <= 8 ? "decode GEMV" : "cuBLAS GEMM", us + uq);
    if (sweep && m <= 8) {
        printf("    sweep:");
        for (int R : {1, 2, 4})
            for (int Wn : {1, 2, 4})
                printf(" R%dW%d %.2f", R, Wn, time_us([&](int i) { run(R, Wn, i); }, batch, quick ? 3 : 7));
        printf("  (W > 1: not the twin's order)\n");
    }
    for (void *p : W)
        CK(cudaFree(p));
    CK(cudaFree(x));
    CK(cudaFree(xq));
    CK(cudaFree(y));
}

// ---------------------------------------------------------------- index scores

void bench_scores(cublasHandle_t cb, int s, int width, int start_pos, int ratio, bool quick)
{
    const int nh = AS_FLASH_INDEX_HEADS, ihd = AS_FLASH_INDEX_HEAD_DIM;
    const size_t kbytes = 2 * (size_t)width * ihd, qbytes = 2 * (size_t)s * nh * ihd;
    const size_t set_bytes = kbytes + qbytes;
    const int nset = (int)std::min<size_t>(32, std::max<size_t>(1, (size_t)(192u << 20) / set_bytes + 1));
    std::vector<void *> iq(nset), keys(nset);
    for (int i = 0; i < nset; i++) {
        iq[i] = dalloc(qbytes);
        keys[i] = dalloc(kbytes);
        fill_bf16(iq[i], (int64_t)(qbytes / 2), 100 + i, 3.0f);
        fill_bf16(keys[i], (int64_t)(kbytes / 2), 200 + i, 3.0f);
    }
    void *w = dalloc(2 * (size_t)s * nh);
    fill_bf16(w, (int64_t)s * nh, 7, 0.2f);
    void *score = dalloc(2 * (size_t)s * width);
    double visible = 0;
    for (int t = 0; t < s; t++) {
        int c = start_pos == 0 ? (t + 1) / ratio : width;
        visible += std::min(c, width);
    }
    const double flops = 2.0 * nh * ihd * visible;
    const double bytes = (double)qbytes + kbytes + 2.0 * s * nh + 2.0 * s * width;
    const int batch = s >= 1024 ? 3 : 20, reps = quick ? 5 : 11;
    // cuBLAS: the dots alone, materialised (bf16 out): [s*nh][width] = iq . keys^T
    double cub = -1;
    {
        void *out = dalloc(2 * (size_t)s * nh * width);
        const float one = 1.0f, zero = 0.0f;
        bool ok = true;
        cub = time_us(
            [&](int i) {
                if (ok)
                    ok = ckb(cublasGemmEx(cb, CUBLAS_OP_T, CUBLAS_OP_N, width, s * nh, ihd, &one, keys[i % nset],
                                          CUDA_R_16BF, ihd, iq[i % nset], CUDA_R_16BF, ihd, &zero, out, CUDA_R_16BF,
                                          width, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT),
                             "scores gemm");
            },
            batch, reps);
        if (!ok)
            cub = -1;
        CK(cudaFree(out));
    }
    const double us = time_us(
        [&](int i) {
            CKL(as_k_index_scores((const as_bf16_t *)iq[i % nset], (const as_bf16_t *)keys[i % nset],
                                  (const as_bf16_t *)w, s, nh, ihd, width, start_pos, ratio, (as_bf16_t *)score, 0));
        },
        batch, reps);
    char shape[128];
    snprintf(shape, sizeof shape, "s=%d width=%d %s ratio %d", s, width, start_pos ? "decode" : "prefill", ratio);
    report("index_scores (mma)", shape, us, bytes, flops, cub);
    for (int i = 0; i < nset; i++) {
        CK(cudaFree(iq[i]));
        CK(cudaFree(keys[i]));
    }
    CK(cudaFree(w));
    CK(cudaFree(score));
}

// ---------------------------------------------------------------- sparse attention

__global__ void fill_idx_kernel(int32_t *idx, int64_t n, int topk, int nrows, uint64_t seed, int neg_every)
{
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n; i += (int64_t)gridDim.x * blockDim.x) {
        uint64_t h = hash64(seed * 0x9e3779b97f4a7c15ull + (uint64_t)i);
        idx[i] = neg_every > 0 && (h >> 48) % neg_every == 0 ? -1 : (int32_t)(h % (uint64_t)nrows);
    }
}

void bench_attn(cublasHandle_t cb, int s, int na, int nb, int topk, bool quick, bool variants)
{
    const int nh = AS_FLASH_HEADS, hd = AS_FLASH_HEAD_DIM;
    const size_t qbytes = 2 * (size_t)s * nh * hd, rbytes = 2 * (size_t)(na + nb) * hd,
                 ibytes = 4 * (size_t)s * topk;
    const size_t set_bytes = qbytes + rbytes + ibytes;
    const int nset = (int)std::min<size_t>(32, std::max<size_t>(1, (size_t)(192u << 20) / set_bytes + 1));
    std::vector<void *> q(nset), rows(nset), idx(nset);
    for (int i = 0; i < nset; i++) {
        q[i] = dalloc(qbytes);
        rows[i] = dalloc(rbytes);
        idx[i] = dalloc(ibytes);
        fill_bf16(q[i], (int64_t)(qbytes / 2), 300 + i, 2.0f);
        fill_bf16(rows[i], (int64_t)(rbytes / 2), 400 + i, 2.0f);
        fill_idx_kernel<<<1024, 256>>>((int32_t *)idx[i], (int64_t)s * topk, topk, na + nb, 500 + i, 0);
        CK(cudaGetLastError());
    }
    float *sink = (float *)dalloc(4 * nh);
    fill_f32(sink, nh, 8, 2.0f);
    void *o = dalloc(qbytes);
    const float scale = 1.0f / sqrtf((float)hd);
    const double flops = 4.0 * nh * hd * (double)s * topk; // every entry valid
    const double uniq_rows = std::min<double>(na + nb, (double)s * topk);
    const double bytes = 2.0 * qbytes + 2.0 * uniq_rows * hd + ibytes;
    const int batch = s >= 1024 ? 2 : s >= 256 ? 5 : 20, reps = quick ? 5 : 11;

    // cuBLAS: the same products on rows already gathered densely, batched over the queries:
    // S[t] = Q[t] (64 x 512) . K[t]^T (512 x topk), O[t] = P[t] (64 x topk) . K[t] (topk x 512).
    double cub = -1;
    {
        void *K = dalloc(2 * (size_t)s * topk * hd), *S = dalloc(2 * (size_t)s * nh * topk);
        fill_bf16(K, (int64_t)s * topk * hd, 9, 2.0f);
        fill_bf16(S, (int64_t)s * nh * topk, 10, 0.01f);
        const float one = 1.0f, zero = 0.0f;
        bool ok = true;
        cub = time_us(
            [&](int i) {
                if (!ok)
                    return;
                // column-major: S^T[t] (topk x 64) = K[t] (topk x hd) . Q[t]^T (hd x 64)
                ok = ckb(cublasGemmStridedBatchedEx(cb, CUBLAS_OP_T, CUBLAS_OP_N, topk, nh, hd, &one, K, CUDA_R_16BF,
                                                    hd, (long long)topk * hd, q[i % nset], CUDA_R_16BF, hd,
                                                    (long long)nh * hd, &zero, S, CUDA_R_16BF, topk,
                                                    (long long)nh * topk, s, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT),
                         "attn S");
                // O^T[t] (hd x 64) = K[t]^T (hd x topk) . P^T[t] (topk x 64)
                if (ok)
                    ok = ckb(cublasGemmStridedBatchedEx(cb, CUBLAS_OP_N, CUBLAS_OP_N, hd, nh, topk, &one, K,
                                                        CUDA_R_16BF, hd, (long long)topk * hd, S, CUDA_R_16BF, topk,
                                                        (long long)nh * topk, &zero, o, CUDA_R_16BF, hd,
                                                        (long long)nh * hd, s, CUBLAS_COMPUTE_32F,
                                                        CUBLAS_GEMM_DEFAULT),
                             "attn O");
            },
            batch, reps);
        if (!ok)
            cub = -1;
        CK(cudaFree(K));
        CK(cudaFree(S));
    }
    auto run = [&](int path, int split, int i) {
        CKL(as_k_sparse_attn_path((const as_bf16_t *)q[i % nset], (const as_bf16_t *)rows[i % nset], na,
                                  (const as_bf16_t *)rows[i % nset] + (size_t)na * hd, nb,
                                  (const int32_t *)idx[i % nset], topk, sink, (as_bf16_t *)o, s, nh, hd, scale, path,
                                  split, 0));
    };
    char shape[128];
    snprintf(shape, sizeof shape, "s=%d topk=%d rows=%d+%d", s, topk, na, nb);
    const double us = time_us([&](int i) { run(0, 0, i); }, batch, reps);
    report("sparse_attn auto", shape, us, bytes, flops, cub);
    // the kernels by name: variants (decode, short chunks), and at prefill sizes both tensor-core
    // kernels (auto takes wgmma there on sm_90)
    if (variants || s >= 512) {
        const double u1 = time_us([&](int i) { run(2, -1, i); }, batch, reps);
        report("sparse_attn mma, 1 split", shape, u1, bytes, flops, -1);
    }
    if (s >= 512 && as_k_sparse_attn_wgmma_applies(nh, hd, topk, q[0], o, rows[0], na, rows[0], nb)) {
        const double u3 = time_us([&](int i) { run(3, -1, i); }, batch, reps);
        report("sparse_attn wgmma", shape, u3, bytes, flops, -1);
    }
    if (variants && s <= 64) {
        const double u2 = time_us([&](int i) { run(1, 0, i); }, batch, reps);
        report("sparse_attn warp kernel", shape, u2, bytes, flops, -1);
    }
    for (int i = 0; i < nset; i++) {
        CK(cudaFree(q[i]));
        CK(cudaFree(rows[i]));
        CK(cudaFree(idx[i]));
    }
    CK(cudaFree(sink));
    CK(cudaFree(o));
}

// The selection (kernels/topk_select.cu): torch's top-k set of k of n per row, one warp a row, on
// scores drawn as the indexer's are (bf16 on a narrow range: the k-th value tied across the cut in
// most rows); bytes: the scores read once, the set written once.
void bench_topk(int rows, int n, int k, bool quick)
{
    const int nset = 4, batch = quick ? 4 : 20, reps = quick ? 3 : 7;
    std::vector<float> h((size_t)rows * n);
    uint64_t s = 0x1234 + (uint64_t)n;
    for (auto &v : h) {
        s = s * 6364136223846793005ull + 1442695040888963407ull;
        const float u = (float)(s >> 40) / 16777216.0f;
        uint32_t bits;
        const float x = 1.0f + 0.05f * u;
        memcpy(&bits, &x, 4);
        bits &= 0xffff0000u; // bf16 values
        memcpy(&v, &bits, 4);
    }
    void *v[nset];
    for (int i = 0; i < nset; i++) {
        v[i] = dalloc(sizeof(float) * h.size());
        CK(cudaMemcpy(v[i], h.data(), sizeof(float) * h.size(), cudaMemcpyHostToDevice));
    }
    int32_t *set = (int32_t *)dalloc(sizeof(int32_t) * (size_t)rows * k);
    const double us = time_us([&](int i) { CKL(as_k_topk_rows((const float *)v[i % nset], rows, n, k, set, nullptr, 0)); },
                              batch, reps);
    char shape[128];
    snprintf(shape, sizeof shape, "%d rows, top %d of %d", rows, k, n);
    report("topk (torch's tie order)", shape, us, 4.0 * rows * n + 4.0 * rows * k, 0, -1);
    for (int i = 0; i < nset; i++)
        CK(cudaFree(v[i]));
    CK(cudaFree(set));
}

// The decode GEMVs (bf16, then Q2_K) and the index scores.
void bench_projections_and_scores(cublasHandle_t cb, bool quick)
{
    printf("\n== decode GEMV (floor = bytes / copy bandwidth; target > 85%% of it)\n");
    // the flash projections (tests/lib/kernel_shapes.h) in the engine's layout: group b of x at
    // column b * n_in, of y at b * n_out
    std::vector<GemvShape> shapes;
    for (const AsProjShape &p : as_flash_projections) {
        const bool grouped = p.groups > 1;
        shapes.push_back({p.name, p.n_out, p.n_in, p.groups, p.ldx, grouped ? p.n_in : 0, (int64_t)p.groups * p.n_out,
                          grouped ? p.n_out : 0, p.f32_weights != 0});
    }
    for (const GemvShape &g : shapes) {
        bench_gemv(cb, g, 1, true, quick);
        bench_gemv(cb, g, 8, false, quick);
    }
    printf("\n== read ceiling: the GEMVs' weight bytes read with no arithmetic (same floor)\n");
    for (const GemvShape &g : shapes)
        bench_read(g.name, (g.f32w ? 4 : 2) * (size_t)g.batch * g.n_out * g.n_in, quick);
    bench_read("1 GiB", (size_t)1 << 30, quick);

    printf("\n== Q2_K projections (random blocks; mmvq floor = Q2_K + q8_1 bytes / copy bandwidth)\n");
    for (const GemvShape &g : shapes) {
        if (g.f32w)
            continue; // the ratio-2 compressor stays F32
        bench_q2k(cb, g, 1, true, quick);
        bench_q2k(cb, g, 8, false, quick);
        bench_q2k(cb, g, 512, false, quick);
        if (!quick)
            bench_q2k(cb, g, 4096, false, quick);
    }

    printf("\n== index scores (nh 32, ihd 128; FLOPs count visible positions only)\n");
    const int ctx = AS_FLASH_CONTEXT;
    bench_scores(cb, 1, ctx, 2 * ctx - 1, 2, quick);
    bench_scores(cb, 1, 32768, 32768, 1, quick);
    bench_scores(cb, 512, 512, 0, 1, quick);
    bench_scores(cb, ctx, ctx / 2, 0, 2, quick);
    bench_scores(cb, ctx, ctx, 0, 1, quick);
}

void bench_selection(bool quick)
{
    printf("\n== selection (torch's top-k set, ties at the cut)\n");
    const int ctx = AS_FLASH_CONTEXT, k = AS_FLASH_INDEX_TOPK;
    bench_topk(1, ctx / 2, k, quick); // ratio 2
    bench_topk(1, ctx, k, quick);
    bench_topk(ctx, ctx, k, quick);
}

#include "bench/kernels_bench_fp8.cuh"

void print_summary()
{
    printf("\n== summary (copy %.0f GB/s, bf16 GEMM %.0f TFLOP/s)\n", g_ceil.copy_gbs, g_ceil.gemm_tfs);
    printf("%-28s %-44s %10s %9s %6s %9s %6s %10s\n", "kernel", "shape", "us", "GB/s", "%bw", "TFLOP/s", "%mma",
           "cuBLAS us");
    for (const Row &r : g_rows)
        printf("%-28s %-44s %10.2f %9.1f %6.1f %9.1f %6.1f %10.2f\n", r.kernel.c_str(), r.shape.c_str(), r.us, r.gbs,
               r.pct_bw, r.tfs, r.pct_mma, r.cublas_us);
}

} // namespace

int main(int argc, char **argv)
{
    bool quick = false, attn_only = false, fp8_only = false;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--quick"))
            quick = true;
        else if (!strcmp(argv[i], "--attn"))
            attn_only = true; // the ceilings and the sparse attention only
        else if (!strcmp(argv[i], "--fp8"))
            fp8_only = true; // the ceilings and the fp8 projections only
    }
    cudaDeviceProp prop;
    CK(cudaGetDeviceProperties(&prop, 0));
    printf("device: %s, %d SMs, L2 %d MB, smem/block optin %zu KB, cc %d.%d\n", prop.name, prop.multiProcessorCount,
           prop.l2CacheSize >> 20, prop.sharedMemPerBlockOptin >> 10, prop.major, prop.minor);
    cublasHandle_t cb;
    if (cublasCreate(&cb) != CUBLAS_STATUS_SUCCESS) {
        fprintf(stderr, "kbench: cublasCreate failed\n");
        return 1;
    }
    measure_ceilings(cb, quick);

    if (!attn_only)
        bench_fp8(quick);
    if (fp8_only) {
        cublasDestroy(cb);
        print_summary();
        return 0;
    }
    if (!attn_only)
        bench_projections_and_scores(cb, quick);
    printf("\n== sparse attention (nh %d, hd %d; every selected entry valid)\n", AS_FLASH_HEADS, AS_FLASH_HEAD_DIM);
    const int win = AS_FLASH_WINDOW, ctx = AS_FLASH_CONTEXT, topk = AS_FLASH_ATTN_TOPK;
    bench_attn(cb, 1, win, ctx, topk, quick, true);
    {
        // The split path's workspace comes from cudaMallocAsync; with the default pool's release
        // threshold (0) the pool may hand memory back at every synchronisation. Once more with the
        // threshold raised (this process only) to see what that costs.
        cudaMemPool_t pool;
        int dev = 0;
        CK(cudaGetDevice(&dev));
        CK(cudaDeviceGetDefaultMemPool(&pool, dev));
        uint64_t thr = UINT64_MAX;
        CK(cudaMemPoolSetAttribute(pool, cudaMemPoolAttrReleaseThreshold, &thr));
        printf("  (default mem pool release threshold raised to UINT64_MAX:)\n");
        bench_attn(cb, 1, win, ctx, topk, quick, false);
        thr = 0;
        CK(cudaMemPoolSetAttribute(pool, cudaMemPoolAttrReleaseThreshold, &thr));
    }
    bench_attn(cb, 7, 7, ctx, topk, quick, true);
    bench_attn(cb, 64, 64, ctx, topk, quick, true);
    bench_attn(cb, 512, 512, 512, topk, quick, false);
    bench_attn(cb, ctx, ctx, ctx, topk, quick, false);

    if (!attn_only)
        bench_selection(quick);
    cublasDestroy(cb);
    print_summary();
    return 0;
}
