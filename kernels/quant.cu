// The KV / index quantisers in place (twin: ref/quant.c, test: tests/gpu_quant.c). Per block of
// B consecutive values, every step as ref/quant.c rounds it:
//   amax = fmaxf(max_i |x_i|, floor)                     exact (a max)
//   fp8      (B 32): s = pow2_ceil(amax / 448)           f32 division, IEEE exponent fields
//   fp4 e8m0 (B 32): s = pow2_ceil(amax / 6), floor 6 * 2^-126
//   fp4 e4m3 (B 16): s = e4m3(amax / 6),      floor 6 * 2^-9 (amax / 6 > 464 gives NaN, as torch)
//   y = clamp(x / s, -M, M)   (__fdiv_rn; the reference's ternary clamp, NaN passes through)
//   x = bf16(grid(y) * s)     (__fmul_rn; grid = e4m3 or e2m1, ties to even)
// Launch: one thread per value, 256 threads per block, grid = ceil(n / 256). A quantiser block
// is an aligned group of 32 (or 16) lanes of one warp (256 and the lane groups are multiples of
// the block, n a multiple of the block), reduced with xor shuffles inside the group; lanes past n
// take part in the shuffles with 0 and store nothing.
#include "kernels/quant.cuh"

#include <limits.h>

namespace {

constexpr int kThreads = 256;

template <int Kind>
__global__ void quant_kernel(uint16_t *x, uint16_t *pre, int64_t n)
{
    as_d_pdl_wait();
    const int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    const bool valid = i < n;
    const uint16_t bits = valid ? x[i] : (uint16_t)0;
    if (valid && pre)
        pre[i] = bits;
    const uint16_t q = as_d_quant_elem<Kind>(bits); // all 32 lanes call it
    if (valid)
        x[i] = q;
}

} // namespace

extern "C" int as_k_quant(as_bf16_t *x, as_bf16_t *pre, int64_t n, int kind, cudaStream_t st)
{
    int block;
    switch (kind) {
    case AS_KQ_FP8: block = 32; break;
    case AS_KQ_FP4_E8M0: block = 32; break;
    case AS_KQ_FP4_E4M3: block = 16; break;
    default: return (int)cudaErrorInvalidValue;
    }
    if (n < 0 || n % block)
        return (int)cudaErrorInvalidValue;
    if (n == 0)
        return 0;
    if (!x)
        return (int)cudaErrorInvalidValue;
    const int64_t blocks = (n + kThreads - 1) / kThreads;
    if (blocks > INT_MAX)
        return (int)cudaErrorInvalidValue;
    switch (kind) {
    case AS_KQ_FP8: as_launch(quant_kernel<AS_KQ_FP8>, (int)blocks, kThreads, 0, st, x, pre, n); break;
    case AS_KQ_FP4_E8M0: as_launch(quant_kernel<AS_KQ_FP4_E8M0>, (int)blocks, kThreads, 0, st, x, pre, n); break;
    default: as_launch(quant_kernel<AS_KQ_FP4_E4M3>, (int)blocks, kThreads, 0, st, x, pre, n); break;
    }
    return AS_LAUNCH_RESULT();
}
