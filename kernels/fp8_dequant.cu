// An fp8-form weight dequantised to bf16 (twin: as_wt_rows_f32 of the weight, model/wtensor.c; test:
// tests/gpu_gemv_e4m3.c): out[o][i] = bf16(e4m3(w[o][i]) * ws[o / 32][i / 32]), exact (4 significant
// bits times a power of two), a prefill's weight for cuBLAS in the codes form (engine/fp8_proj.c).
// A stream: each thread widens 16 codes (one 16-byte load, kernels/e4m3.cuh) into two 16-byte stores.
#include <stdio.h>

#include "kernels/common.cuh"
#include "kernels/e4m3.cuh"
#include "kernels/kernels.h"

namespace {

__global__ void fp8_dequant_kernel(AsFp8Weight w, int64_t rows, uint16_t *out, int64_t ldo)
{
    as_d_pdl_wait();
    const int64_t per_row = w.n_in / 16, n = rows * per_row;
    for (int64_t e = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; e < n; e += (int64_t)gridDim.x * blockDim.x) {
        const int64_t o = e / per_row, c = e - o * per_row;
        const uint4 q = as_d_ld_stream16(w.w + o * w.ldw + 16 * c);
        const float s256 = w.ws[(o >> 5) * w.ldws + (c >> 1)] * 256.0f;
        const uint32_t words[4] = {q.x, q.y, q.z, q.w};
        float f[16];
#pragma unroll
        for (int k = 0; k < 4; k++)
            ase4m3::e4m3x4_scaled(words[k], s256, f + 4 * k);
        uint32_t p[8];
#pragma unroll
        for (int k = 0; k < 8; k++) // exact values: the bf16 bits are the f32's top half
            p[k] = (__float_as_uint(f[2 * k]) >> 16) | (__float_as_uint(f[2 * k + 1]) & 0xffff0000u);
        uint4 *dst = (uint4 *)(out + o * ldo + 16 * c);
        dst[0] = make_uint4(p[0], p[1], p[2], p[3]);
        dst[1] = make_uint4(p[4], p[5], p[6], p[7]);
    }
}

} // namespace

extern "C" int as_k_fp8_dequant_bf16(const AsFp8Weight *w, as_bf16_t *out, int64_t ldo, cudaStream_t st)
{
    if (!w || !w->w || !w->ws || !out || w->n_out < 0 || w->n_in < 0 || w->n_in % 32 || w->batch < 1 ||
        ldo < w->n_in || (w->batch > 1 && w->stride_rows < w->n_out))
        return (int)cudaErrorInvalidValue;
    if (!as_aligned16(w->w) || w->ldw % 16 || !as_aligned16(out) || ldo % 8)
        return (int)cudaErrorInvalidValue; // whole 16-byte loads and stores
    const int64_t rows = (int64_t)(w->batch - 1) * w->stride_rows + w->n_out;
    if (rows == 0 || w->n_in == 0)
        return 0;
    as_launch(fp8_dequant_kernel, as_grid_1d(rows * (w->n_in / 16), 256), 256, 0, st, *w, rows, out, ldo);
    return AS_LAUNCH_RESULT();
}
