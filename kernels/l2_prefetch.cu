// Warming the L2 with the head of weights that a later kernel streams (decode, engine/forward.c): the
// decode's latency-bound stretches (the norms, wq_a, the attention) leave HBM idle, so the head of the
// next big projection is fetched then, and its GEMV reads that part from the L2. No output: no value
// can change. sm_90: cp.async.bulk.prefetch.L2 (the TMA unit fetches, the thread does not wait);
// the portable PTX build: prefetch.global.L2 a 128-byte line at a time.
#include "kernels/common.cuh"
#include "kernels/kernels.h"

namespace {

constexpr int kThreads = 64;
constexpr int64_t kChunk = 4096; // one bulk prefetch; small enough that every SM's TMA unit takes a share
constexpr int kMaxBlocks = 1024;

__global__ void l2_prefetch_kernel(const char *p, int64_t bytes, int slices, int64_t stride)
{
    const int64_t per_slice = (bytes + kChunk - 1) / kChunk, total = per_slice * slices;
    for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < total; i += (int64_t)gridDim.x * blockDim.x) {
        const int64_t slice = i / per_slice, off = (i % per_slice) * kChunk;
        const char *a = p + slice * stride + off;
        const int64_t n = bytes - off < kChunk ? bytes - off : kChunk; // a multiple of 16: bytes is
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
        asm volatile("cp.async.bulk.prefetch.L2.global [%0], %1;" ::"l"(a), "r"((unsigned)n) : "memory");
#else
        for (int64_t k = 0; k < n; k += 128)
            asm volatile("prefetch.global.L2 [%0];" ::"l"(a + k));
#endif
    }
}

} // namespace

extern "C" int as_k_l2_prefetch(const void *p, int64_t bytes, int slices, int64_t stride, cudaStream_t st)
{
    if (bytes < 0 || slices < 0 || (slices > 1 && stride < bytes) || bytes % 16 || stride % 16 ||
        (bytes > 0 && slices > 0 && (!p || !as_aligned16(p))))
        return (int)cudaErrorInvalidValue;
    if (bytes == 0 || slices == 0)
        return 0;
    const int64_t chunks = (bytes + kChunk - 1) / kChunk * slices;
    const int64_t blocks = (chunks + kThreads - 1) / kThreads;
    as_launch(l2_prefetch_kernel, dim3((unsigned)(blocks < kMaxBlocks ? blocks : kMaxBlocks)), kThreads, 0, st,
              (const char *)p, bytes, slices, stride);
    return AS_LAUNCH_RESULT();
}
