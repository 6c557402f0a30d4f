// RoPE in place on the last rd channels of every sub-row (twin: ref/rope.c rope_row, test:
// tests/gpu_rope.c). Pair k of a sub-row at position p, with c = cos_t[p][k], s = sin_t[p][k]
// (the reference's own tables, uploaded), s = -s when inverse:
//   re = x0*c - x1*s,  im = x0*s + x1*c     each product, the sum and the difference rounded in
//                                           f32 (__fmul_rn / __fadd_rn / __fsub_rn), then bf16
// Launch: one thread per (row, head, pair), 256 threads, grid-stride (grid capped at 2^16).
// Positions must lie in [0, max_seq) of the uploaded tables: the launcher checks pos0 >= 0 and
// pos0 + rows - 1 cannot overflow; it cannot see max_seq (kernels.h passes none), so pos[] and
// the upper bound are the caller's contract (the engine's positions are < max_seq by design).
// A negative pos[row] leaves that row untouched (never reads before the table).
#include "kernels/common.cuh"
#include "kernels/kernels.h"
#include "kernels/rope_pair.cuh"

namespace {

constexpr int kThreads = 256;

__global__ void rope_kernel(uint16_t *x, int64_t ld, int rows, int heads, int width, int rd, int pos0,
                            const int32_t *pos, const float *cos_t, const float *sin_t, int inverse)
{
    as_d_pdl_wait();
    const int half = rd / 2;
    const int64_t per_row = (int64_t)heads * half;
    const int64_t total = (int64_t)rows * per_row;
    for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < total; i += (int64_t)gridDim.x * blockDim.x) {
        const int row = (int)(i / per_row);
        const int64_t rem = i - (int64_t)row * per_row;
        const int h = (int)(rem / half);
        const int k = (int)(rem - (int64_t)h * half);
        const int p = pos ? pos[row] : pos0 + row;
        if (p < 0)
            continue;
        uint16_t *z = x + (int64_t)row * ld + (int64_t)h * width + (width - rd) + 2 * k;
        const float c = cos_t[(int64_t)p * half + k];
        float s = sin_t[(int64_t)p * half + k];
        if (inverse)
            s = -s; // the conjugate
        uint16_t x0 = z[0], x1 = z[1];
        as_d_rope_pair(x0, x1, c, s);
        z[0] = x0;
        z[1] = x1;
    }
}

} // namespace

extern "C" int as_k_rope(as_bf16_t *x, int64_t ld, int rows, int heads, int width, int rd, int pos0,
                         const int32_t *pos, const float *cos_t, const float *sin_t, int inverse, cudaStream_t st)
{
    if (!as_rope_shape_ok(rows, heads, width, rd, pos0, pos) || ld < (int64_t)heads * width)
        return (int)cudaErrorInvalidValue;
    if (rows == 0)
        return 0;
    if (!x || !cos_t || !sin_t)
        return (int)cudaErrorInvalidValue;
    const int64_t total = (int64_t)rows * heads * (rd / 2);
    as_launch(rope_kernel, as_grid_1d(total, kThreads), kThreads, 0, st, x, ld, rows, heads, width, rd, pos0, pos, cos_t,
              sin_t, inverse);
    return AS_LAUNCH_RESULT();
}
