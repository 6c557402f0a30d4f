// L2 prefetch of weight bytes a later kernel of the decode graph reads (engine/l2_plan.h: why and
// when). No value is read into a register or written: on sm_90 each item is one TMA bulk prefetch
// (cp.async.bulk.prefetch.L2: fire and forget, the block may exit before the bytes arrive); before
// sm_90, one prefetch.global.L2 per 128-byte line. as_k_l2_warm asks for the same bytes by loads (an
// A/B of the mechanism). Twin: the items' byte ranges (kernels/
// l2_prefetch_item.h, tests/test_l2_prefetch.c); GPU test: tests/gpu_l2_prefetch.c.
#include "kernels/common.cuh"
#include "kernels/kernels.h"
#include "kernels/l2_prefetch_item.h"

namespace {

constexpr int kThreads = 128;

__global__ void __launch_bounds__(kThreads) l2_prefetch_kernel(const char *p, int64_t items, int64_t n_seg,
                                                               int64_t stride, int64_t seg_bytes, int64_t chunk)
{
    as_d_pdl_wait();
    for (int64_t i = (int64_t)blockIdx.x * kThreads + threadIdx.x; i < items; i += (int64_t)gridDim.x * kThreads) {
        int64_t off, len;
        as_l2_prefetch_item(i, n_seg, stride, seg_bytes, chunk, &off, &len);
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
        asm volatile("cp.async.bulk.prefetch.L2.global [%0], %1;" ::"l"(p + off), "r"((unsigned)len) : "memory");
#else
        for (int64_t b = 0; b < len; b += 128)
            asm volatile("prefetch.global.L2 [%0];" ::"l"(p + off + b));
#endif
    }
}

// The same bytes brought in by loads: one 4-byte load with the 256-byte L2 fill hint per 256 bytes
// (item = 256 bytes), 8 issued a thread before any is waited for; the values are folded into a word
// stored only through a sink pointer the launcher passes as NULL (the loads stay, nothing is written).
constexpr int kWarmAhead = 8;

__global__ void __launch_bounds__(kThreads) l2_warm_kernel(const char *p, int64_t items, int64_t n_seg, int64_t stride,
                                                           int64_t seg_bytes, unsigned *sink)
{
    as_d_pdl_wait();
    unsigned fold = 0;
    const int64_t step = (int64_t)gridDim.x * kThreads;
    for (int64_t i0 = (int64_t)blockIdx.x * kThreads + threadIdx.x; i0 < items; i0 += kWarmAhead * step) {
#pragma unroll
        for (int u = 0; u < kWarmAhead; u++) {
            const int64_t i = i0 + u * step;
            if (i < items) {
                int64_t off, len;
                as_l2_prefetch_item(i, n_seg, stride, seg_bytes, 256, &off, &len);
                unsigned v;
                asm volatile("ld.global.nc.L1::no_allocate.L2::256B.u32 %0, [%1];" : "=r"(v) : "l"(p + off));
                fold ^= v;
            }
        }
    }
    if (sink) // NULL from the launcher: the values are discarded
        *sink = fold;
}

} // namespace

extern "C" int as_k_l2_prefetch(const void *p, int64_t n_seg, int64_t stride, int64_t seg_bytes, int64_t chunk,
                                cudaStream_t st)
{
    if (n_seg < 0 || seg_bytes < 0 || chunk < 16 || chunk % 16 || chunk > (1 << 30) || seg_bytes % 16 ||
        (n_seg > 1 && (stride < seg_bytes || stride % 16)))
        return (int)cudaErrorInvalidValue;
    if (!n_seg || !seg_bytes)
        return 0;
    if (!p || (uintptr_t)p % 16)
        return (int)cudaErrorInvalidValue;
    const int64_t items = n_seg * as_l2_prefetch_chunks(seg_bytes, chunk);
    const int64_t want = (items + kThreads - 1) / kThreads, cap = 2 * (int64_t)as_sm_count();
    // without the PDL attribute: the branch's order is its events', and it overlaps by running beside
    l2_prefetch_kernel<<<(unsigned)(want < cap ? want : cap), kThreads, 0, st>>>((const char *)p, items, n_seg, stride,
                                                                                 seg_bytes, chunk);
    return AS_LAUNCH_RESULT();
}

extern "C" int as_k_l2_warm(const void *p, int64_t n_seg, int64_t stride, int64_t seg_bytes, cudaStream_t st)
{
    if (n_seg < 0 || seg_bytes < 0 || seg_bytes % 16 || (n_seg > 1 && (stride < seg_bytes || stride % 16)))
        return (int)cudaErrorInvalidValue;
    if (!n_seg || !seg_bytes)
        return 0;
    if (!p || (uintptr_t)p % 16)
        return (int)cudaErrorInvalidValue;
    const int64_t items = n_seg * as_l2_prefetch_chunks(seg_bytes, 256);
    const int64_t want = (items + kThreads - 1) / kThreads, cap = 2 * (int64_t)as_sm_count();
    l2_warm_kernel<<<(unsigned)(want < cap ? want : cap), kThreads, 0, st>>>((const char *)p, items, n_seg, stride,
                                                                             seg_bytes, nullptr);
    return AS_LAUNCH_RESULT();
}
