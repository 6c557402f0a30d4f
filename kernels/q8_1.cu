// Activation quantisation to ggml's q8_1 blocks (twin: as_quantize_row_q8_1 in model/quants.c,
// test: tests/gpu_q2k.c), the input of the Q2_K projections (kernels/q2k_mmvq.cu, q2k_mmq.cu).
//
// Per block of 32 consecutive values of a row (bf16, widened exactly):
//   amax = max |x|                       (exact, any order)
//   d    = amax / 127                    (f32 division, __fdiv_rn)
//   q    = amax == 0 ? 0 : round(x / d)  (__fdiv_rn, then roundf: halves away from zero)
//   s    = d * sum q                     (integer sum, exact; one f32 product)
// d and s are stored as IEEE fp16 (round to nearest even). Launch: one warp per block, a lane
// per value, 8 blocks per 256-thread CTA; the integer sum goes through float shuffles, exact
// (|sum q| <= 32 * 127 < 2^24).
#include "kernels/kernels.h"
#include "kernels/q2k.cuh"

namespace {

constexpr int kQ8Threads = 256;

__global__ void __launch_bounds__(kQ8Threads) q8_1_kernel(const uint16_t *x, int64_t ldx, int rows, int nblk,
                                                        AsBlockQ8_1 *y, int64_t ldy)
{
    as_d_pdl_wait();
    const int64_t blk = (int64_t)blockIdx.x * (kQ8Threads / 32) + (threadIdx.x >> 5);
    const int lane = threadIdx.x & 31;
    if (blk >= (int64_t)rows * nblk) // whole warps leave together: the shuffles below stay full
        return;
    const int64_t r = blk / nblk, c = blk % nblk;
    const float v = as_d_bf16_to_f32(x[r * ldx + c * 32 + lane]);
    const float amax = as_d_warp_max(fabsf(v));
    const float d = q2k::fdiv_rn(amax, 127.0f);
    const int q = q2k::q8_round(v, d, amax);
    const float sumq = as_d_warp_sum((float)q); // integers below 2^24: exact in any order
    AsBlockQ8_1 *yb = y + r * ldy + c;
    yb->qs[lane] = (int8_t)q;
    if (lane == 0) {
        const uint32_t ds = (uint32_t)q2k::f2h(d) | (uint32_t)q2k::f2h(__fmul_rn(d, sumq)) << 16;
        *(uint32_t *)yb = ds; // d then s, little endian (the block is 4-byte aligned)
    }
}

} // namespace

#ifndef AS_EMU
extern "C" int as_k_quantize_q8_1(const as_bf16_t *x, int64_t ldx, int rows, int n, void *y, int64_t ldy,
                                  cudaStream_t st)
{
    if (rows < 0 || n < 0 || n % AS_QK8_1)
        return (int)cudaErrorInvalidValue;
    if (rows == 0 || n == 0)
        return 0;
    if (!x || !y || ldx < n || ldy < n / AS_QK8_1 || ((uintptr_t)y & 3))
        return (int)cudaErrorInvalidValue;
    const int64_t blocks = (int64_t)rows * (n / AS_QK8_1);
    const int64_t grid = (blocks + kQ8Threads / 32 - 1) / (kQ8Threads / 32);
    if (grid > 0x7fffffff)
        return (int)cudaErrorInvalidValue;
    as_launch(q8_1_kernel, (unsigned)grid, kQ8Threads, 0, st, x, ldx, rows, n / AS_QK8_1, (AsBlockQ8_1 *)y, ldy);
    return AS_LAUNCH_RESULT();
}
#endif
