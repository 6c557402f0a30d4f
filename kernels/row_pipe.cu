// The row pipeline: what follows a projection on its way into a cache, fused into one
// launch. Per sub-row (a row's `heads` slices of n channels), each stage optional, in this order and
// with the separate kernels' roundings, bit for bit (twins: rmsnorm.cu, rope.cu, quant.cu,
// window.cu's ring store, elementwise.cu's scale; test: tests/gpu_row_pipe.c, emulator:
// tools/emu/emu_decode.cpp):
//   1. rmsnorm(norm_w): rmsnorm.cu's reduction exactly (256 threads, the same per-thread strided f32
//      sums, warp xor tree, the 8 warp partials added in order), y = bf16(w * (x * inv))
//   2. RoPE on the last rd channels at the row's position (pos[row], else pos0 + row; a negative
//      position leaves the row unrotated): rope.cu's complex multiply, each step rounded, then bf16
//   3. pre receives the value entering the quantiser ([rows][heads * n], contiguous)
//   4. quantiser (AS_KQ_*): quant.cuh's per-block amax, scale and grid (quant.cu's own); the blocks
//      are aligned to the sub-row (n a multiple of the block), as they are in the flat tensor quant.cu
//      sees
//   5. post_scale != 1: y = bf16(y * post_scale) (as_k_scale_bf16: the fp4-scale fault)
//   6. y written (y may alias x: every read of x precedes the first barrier); the same values go to
//      a cache row when store is set: AS_STORE_ROWS: row (*row0_d or row0) + row; AS_STORE_RING: slot
//      (pos + ring_shift) % ring for the last `ring` rows of the call (as_k_ring_store's rule).
// The intermediate values are bf16 bits in shared memory (n <= 12288), so a stage that does not run
// passes its input on unchanged, NaN payloads included, as the separate kernels would.
// Launch: one block of 256 threads per sub-row; grid = rows * heads.
#include "kernels/common.cuh"
#include "kernels/kernels.h"
#include "kernels/quant.cuh"
#include "kernels/rmsnorm_row.cuh"
#include "kernels/rope_pair.cuh"

#include <limits.h>

namespace {

constexpr int kThreads = 256;
static_assert(kThreads == kRmsThreads, "the RMSNorm's block sum (as_d_rms_inv) takes kRmsThreads partials");
constexpr int kMaxN = 12288;

template <int Q> __global__ void __launch_bounds__(kThreads) row_pipe_kernel(AsRowPipe p)
{
    as_d_pdl_wait();
    extern __shared__ __align__(16) uint8_t smem[];
    float *part = (float *)smem;                  // [8] warp partials of the rmsnorm
    uint16_t *v = (uint16_t *)(smem + 64);        // [n] the sub-row, bf16 bits
    const int tid = threadIdx.x;
    const int n = p.n;
    const int64_t sub = blockIdx.x;
    const int row = (int)(sub / p.heads), h = (int)(sub % p.heads);
    const uint16_t *xr = p.x + (int64_t)row * p.ldx + (int64_t)h * n;
    uint16_t *yr = p.y + (int64_t)row * p.ldy + (int64_t)h * n;

    // 1. rmsnorm (rmsnorm.cu: ms = sum / n, inv = 1 / sqrt(ms + eps), y = bf16(w * (x * inv)))
    if (p.norm_w) {
        float acc = 0.0f;
        for (int i = tid; i < n; i += kThreads) {
            const float xv = as_d_bf16_to_f32(xr[i]);
            acc = __fadd_rn(acc, __fmul_rn(xv, xv));
        }
        const float inv = as_d_rms_inv(acc, part, n, p.eps); // rmsnorm_row.cuh: kThreads = kRmsThreads
        for (int i = tid; i < n; i += kThreads) {
            const float r = __fmul_rn(as_d_bf16_to_f32(xr[i]), inv);
            v[i] = as_d_f32_to_bf16(__fmul_rn(p.norm_w[i], r));
        }
    } else {
        for (int i = tid; i < n; i += kThreads)
            v[i] = xr[i];
    }
    const int pos = p.pos ? p.pos[row] : p.pos0 + row;
    __syncthreads();

    // 2. RoPE (rope.cu: re = x0 c - x1 s, im = x0 s + x1 c, s negated when inverse)
    if (p.rd > 0 && pos >= 0) {
        const int half = p.rd / 2, base = n - p.rd;
        for (int k = tid; k < half; k += kThreads) {
            const float c = p.cos_t[(int64_t)pos * half + k];
            float s = p.sin_t[(int64_t)pos * half + k];
            if (p.inverse)
                s = -s; // the conjugate
            uint16_t x0 = v[base + 2 * k], x1 = v[base + 2 * k + 1];
            as_d_rope_pair(x0, x1, c, s);
            v[base + 2 * k] = x0;
            v[base + 2 * k + 1] = x1;
        }
        __syncthreads();
    }

    // 6. where the row goes besides y
    uint16_t *sr = nullptr;
    if (p.store_mode == AS_STORE_ROWS) {
        const int64_t slot = (int64_t)(p.row0_d ? *p.row0_d : p.row0) + row;
        if (slot >= 0)
            sr = p.store + slot * p.store_ld + (int64_t)h * n;
    } else if (p.store_mode == AS_STORE_RING) {
        if (row >= p.rows - p.ring && pos >= 0)
            sr = p.store + (((int64_t)pos + p.ring_shift) % p.ring) * p.store_ld + (int64_t)h * n;
    }
    uint16_t *pr = p.pre ? p.pre + (int64_t)row * p.heads * n + (int64_t)h * n : nullptr;

    // 3-6. a whole warp walks 32 consecutive channels (the quantiser's blocks are lane groups)
    for (int b = 0; b < n; b += kThreads) {
        const int i = b + tid;
        const bool valid = i < n;
        const uint16_t bits = valid ? v[i] : (uint16_t)0;
        if (valid && pr)
            pr[i] = bits;
        uint16_t o = bits;
        if constexpr (Q != 0)
            o = as_d_quant_elem<Q>(bits); // all 32 lanes (the lanes past n take part with 0, as in quant.cu)
        if (p.post_scale != 1.0f)
            o = as_d_f32_to_bf16(__fmul_rn(as_d_bf16_to_f32(o), p.post_scale));
        if (valid) {
            yr[i] = o;
            if (sr)
                sr[i] = o;
        }
    }
}

} // namespace

#ifndef AS_EMU
extern "C" int as_k_row_pipe(const AsRowPipe *p, cudaStream_t st)
{
    if (!p || p->rows < 0 || p->heads <= 0 || p->n <= 0 || p->n > kMaxN)
        return (int)cudaErrorInvalidValue;
    const int64_t width = (int64_t)p->heads * p->n;
    if (p->ldx < width || p->ldy < width)
        return (int)cudaErrorInvalidValue;
    // y aliasing x is only meaningful sub-row for sub-row (same rows, same stride).
    if ((const void *)p->x == (const void *)p->y && p->ldx != p->ldy)
        return (int)cudaErrorInvalidValue;
    int block = 0;
    switch (p->quant) {
    case 0: break;
    case AS_KQ_FP8: block = 32; break;
    case AS_KQ_FP4_E8M0: block = 32; break;
    case AS_KQ_FP4_E4M3: block = 16; break;
    default: return (int)cudaErrorInvalidValue;
    }
    if (block && p->n % block)
        return (int)cudaErrorInvalidValue;
    if (p->rd < 0 || p->rd % 2 || p->rd > p->n)
        return (int)cudaErrorInvalidValue;
    if (p->rd > 0 && !p->pos && (p->pos0 < 0 || (p->rows > 0 && p->pos0 > INT_MAX - (p->rows - 1))))
        return (int)cudaErrorInvalidValue;
    if (p->store_mode == AS_STORE_ROWS && (p->row0 < 0 && !p->row0_d))
        return (int)cudaErrorInvalidValue;
    if (p->store_mode == AS_STORE_RING && (p->ring <= 0 || p->ring_shift < 0 || (!p->pos && p->pos0 < 0)))
        return (int)cudaErrorInvalidValue;
    if (p->store_mode != AS_STORE_NONE && p->store_mode != AS_STORE_ROWS && p->store_mode != AS_STORE_RING)
        return (int)cudaErrorInvalidValue;
    if (p->store_mode != AS_STORE_NONE && (!p->store || p->store_ld < width))
        return (int)cudaErrorInvalidValue;
    if (p->rows == 0)
        return 0;
    if (!p->x || !p->y || (p->rd > 0 && (!p->cos_t || !p->sin_t)))
        return (int)cudaErrorInvalidValue;
    const int64_t grid = (int64_t)p->rows * p->heads;
    if (grid > INT_MAX)
        return (int)cudaErrorInvalidValue;
    const size_t smem = 64 + sizeof(uint16_t) * (size_t)p->n;
    switch (p->quant) {
    case 0: as_launch(row_pipe_kernel<0>, (unsigned)grid, kThreads, smem, st, *p); break;
    case AS_KQ_FP8: as_launch(row_pipe_kernel<AS_KQ_FP8>, (unsigned)grid, kThreads, smem, st, *p); break;
    case AS_KQ_FP4_E8M0: as_launch(row_pipe_kernel<AS_KQ_FP4_E8M0>, (unsigned)grid, kThreads, smem, st, *p); break;
    default: as_launch(row_pipe_kernel<AS_KQ_FP4_E4M3>, (unsigned)grid, kThreads, smem, st, *p); break;
    }
    return AS_LAUNCH_RESULT();
}

extern "C" int as_k_o_back(const as_bf16_t *o, int rows, int nh, int hd, const AsOBack *ob, cudaStream_t st)
{
    if (!ob || !as_oback_ok(ob, hd))
        return (int)cudaErrorInvalidValue;
    AsRowPipe p{};
    p.x = o;
    p.ldx = (int64_t)nh * hd;
    p.y = ob->o_back;
    p.ldy = (int64_t)nh * hd;
    p.rows = rows;
    p.heads = nh;
    p.n = hd;
    p.rd = ob->rd;
    p.pos0 = ob->pos0;
    p.pos = ob->pos_d;
    p.cos_t = ob->cos_t;
    p.sin_t = ob->sin_t;
    p.inverse = 1;
    p.post_scale = 1.0f;
    return as_k_row_pipe(&p, st);
}
#endif // AS_EMU
