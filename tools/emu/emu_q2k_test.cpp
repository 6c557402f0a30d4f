// tests/gpu_q2k.c on the emulator: the GPU test's own logic (layouts, strides, guards, the twin and
// reference checks, its messages) run against the emulated kernels, with host memory standing in
// for device memory. The launchers' argument checks are the device build's (not compiled here), so
// gpu_q2k_refuses_nonsense is meaningless on the emulator and is not run; the engine test is compiled
// out (AS_Q2K_KERNELS_ONLY).
// Built and run by `make emu` (under AS_KTEST_SMALL=1, the small cases only, with the tests it names).
#include "emu.h"

#include <cstdio>
#include <cstdlib>
#include <vector>

#undef __shared__
#define __shared__ static
#include "kernels/q2k_mmq.cu"
#include "kernels/q2k_mmvq.cu"
#include "kernels/q8_1.cu"

#include <mutex>

static std::mutex g_launch; // the test's OpenMP threads never launch, but keep the emulator serial

extern "C" {
int as_engine_device_count(void) { return 1; }
const char *cudaGetErrorString(cudaError_t e) { return e == cudaSuccess ? "no error" : "emulated error"; }
cudaError_t cudaMemset(void *p, int v, size_t n)
{
    memset(p, v, n);
    return cudaSuccess;
}
void *as_gpu_alloc(size_t bytes) { return malloc(bytes ? bytes : 1); }
void as_gpu_free(void *p) { free(p); }
void *as_gpu_bytes(const void *host, size_t bytes)
{
    void *p = as_gpu_alloc(bytes);
    memcpy(p, host, bytes);
    return p;
}
void as_gpu_get_bytes(void *host, const void *dev, size_t bytes) { memcpy(host, dev, bytes); }
void as_gpu_sync(const char *) {}
void as_gpu_check_launch(int rc, const char *what)
{
    if (rc) {
        fprintf(stderr, "%s: launch refused (%d)\n", what, rc);
        abort();
    }
}

int as_k_quantize_q8_1(const uint16_t *x, int64_t ldx, int rows, int n, void *y, int64_t ldy, cudaStream_t)
{
    if (rows <= 0 || n <= 0)
        return 0;
    std::lock_guard<std::mutex> lk(g_launch);
    const int64_t blocks = (int64_t)rows * (n / 32);
    emu::launch(dim3((unsigned)((blocks + 7) / 8)), dim3(kQ8Threads),
                [&] { q8_1_kernel(x, ldx, rows, n / 32, (AsBlockQ8_1 *)y, ldy); });
    return 0;
}

int as_k_q2k_mmvq_cfg(const void *W, int64_t ldw, int64_t strideW, int n_out, int n_in, const void *xq, int64_t ldx,
                      int64_t strideX, int m, void *y, int64_t ldy, int64_t strideY, int y_f32, int batch, int R,
                      int Wn, cudaStream_t)
{
    if (n_out == 0 || m == 0 || batch == 0)
        return 0;
    if (m > 8 || n_in % 256)
        return (int)cudaErrorInvalidValue;
    std::lock_guard<std::mutex> lk(g_launch);
    const int r = R ? R : (n_out >= 64 ? 4 : 1), w = Wn ? Wn : 1; // small shapes: the device picks by SM count
    const q2k::Args a{(const AsBlockQ2K *)W, ldw, strideW, n_out, n_in, (const AsBlockQ8_1 *)xq, ldx, strideX, m, y,
                      ldy, strideY, y_f32 ? 1 : 0, 0};
    const int gpb = kWarps / w, groups = (n_out + r - 1) / r;
    const dim3 grid((unsigned)((groups + gpb - 1) / gpb), (unsigned)batch);
    const int M = m <= 1 ? 1 : m <= 2 ? 2 : m <= 4 ? 4 : 8;
    auto go = [&](auto kern) { emu::launch(grid, dim3(kThreads), [&] { kern(a, w); }); };
#define CASE(rr, mm)                                                                                               \
    if (r == rr && M == mm)                                                                                        \
        go(q2k_mmvq_kernel<rr, mm>);
    CASE(1, 1) CASE(1, 2) CASE(1, 4) CASE(1, 8) CASE(2, 1) CASE(2, 2) CASE(2, 4) CASE(2, 8)
    CASE(4, 1) CASE(4, 2) CASE(4, 4) CASE(4, 8)
#undef CASE
    return 0;
}

int as_k_q2k_mmq(const void *W, int64_t ldw, int64_t strideW, int n_out, int n_in, const void *xq, int64_t ldx,
                 int64_t strideX, int m, void *y, int64_t ldy, int64_t strideY, int y_f32, int batch, cudaStream_t)
{
    if (n_out == 0 || m == 0 || batch == 0)
        return 0;
    if (n_in % 256)
        return (int)cudaErrorInvalidValue;
    std::lock_guard<std::mutex> lk(g_launch);
    const q2k::Args a{(const AsBlockQ2K *)W, ldw, strideW, n_out, n_in, (const AsBlockQ8_1 *)xq, ldx, strideX, m, y,
                    ldy, strideY, y_f32 ? 1 : 0, mmq_b16(xq, ldx, strideX, batch) ? 1 : 0};
    emu::launch(dim3((unsigned)((n_out + kBM - 1) / kBM), (unsigned)((m + kBN - 1) / kBN), (unsigned)batch),
                dim3(kMqThreads), [&] { q2k_mmq_kernel(a); });
    return 0;
}
int as_k_q2k_mmvq(const void *W, int64_t ldw, int64_t strideW, int n_out, int n_in, const void *xq, int64_t ldx,
                  int64_t strideX, int m, void *y, int64_t ldy, int64_t strideY, int y_f32, int batch, cudaStream_t st)
{
    return as_k_q2k_mmvq_cfg(W, ldw, strideW, n_out, n_in, xq, ldx, strideX, m, y, ldy, strideY, y_f32, batch, 0, 0,
                             st);
}
}
