// The ratio >= 2 compressor's partial-group state and softmax pooling (twin: ref/compressor.c
// as_compress_pooled around ref/attention.c as_softmax_pool, test: tests/gpu_compress_pool.c).
// Per group of r rows and channel d, in the reference's order (j ascending, each step rounded):
//   m = max_j score[j][d]                                  fmaxf, from -inf
//   sum = 0 + e_0 + e_1 + ...,  e_j = expf(score[j][d] - m)   __fsub_rn, as_d_expf, __fadd_rn
//   acc = 0 + kv[0][d] * (e_0 / sum) + ...                 __fdiv_rn, __fmul_rn, __fadd_rn
//   latent[d] = bf16(acc)
// The only departure from the host is expf itself (see as_d_expf in common.cuh).
// Prefill (start_pos 0): groups g < s / r pool rows g*r .. g*r + r - 1 into latent row g; the
// s % r trailing rows t go to state row t % r. Decode (s 1): state row start_pos % r <- row 0;
// when (start_pos + 1) % r == 0 the whole state pools into latent row 0 (the fresh row is taken
// from the input, the others from the state: the same values the reference reads).
// Launch: one thread per (output row, channel), 256 threads, grid-stride (grid capped at 2^16);
// prefill output rows are the groups then the trailing rows, decode has one row of hd channels.
#include "kernels/common.cuh"
#include "kernels/kernels.h"

namespace {

constexpr int kThreads = 256;

// One channel of one group: rows j of kv / score at kv[j * ld], score[j * ld] (ld = hd), except
// row `fresh_j` (if >= 0), whose values are fresh_kv / fresh_sc.
__device__ float pool_channel(const float *kv, const float *sc, int r, int64_t ld, int fresh_j, float fresh_kv,
                              float fresh_sc)
{
    float m = -INFINITY;
    for (int j = 0; j < r; j++)
        m = fmaxf(m, j == fresh_j ? fresh_sc : sc[j * ld]);
    float sum = 0.0f;
    for (int j = 0; j < r; j++)
        sum = __fadd_rn(sum, as_d_expf(__fsub_rn(j == fresh_j ? fresh_sc : sc[j * ld], m)));
    float acc = 0.0f;
    for (int j = 0; j < r; j++) {
        const float e = as_d_expf(__fsub_rn(j == fresh_j ? fresh_sc : sc[j * ld], m)); // same e_j as above
        const float p = __fdiv_rn(e, sum);
        acc = __fadd_rn(acc, __fmul_rn(j == fresh_j ? fresh_kv : kv[j * ld], p));
    }
    return acc;
}

__global__ void pool_prefill_kernel(const float *ckv, const float *csc, int s, int r, int hd, float *part_kv,
                                    float *part_sc, uint16_t *latent)
{
    as_d_pdl_wait();
    const int groups = s / r;
    const int rest = s - groups * r;
    const int64_t total = (int64_t)(groups + rest) * hd;
    for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < total; i += (int64_t)gridDim.x * blockDim.x) {
        const int row = (int)(i / hd);
        const int d = (int)(i - (int64_t)row * hd);
        if (row < groups) {
            const int64_t base = (int64_t)row * r * hd + d;
            latent[(int64_t)row * hd + d] = as_d_f32_to_bf16(pool_channel(ckv + base, csc + base, r, hd, -1, 0.0f, 0.0f));
        } else {
            const int64_t t = (int64_t)groups * r + (row - groups);
            const int64_t slot = t % r;
            part_kv[slot * hd + d] = ckv[t * hd + d];
            part_sc[slot * hd + d] = csc[t * hd + d];
        }
    }
}

// start_pos from sp_d when given (the decode graph's step parameters), else by value.
__global__ void pool_decode_kernel(const float *ckv, const float *csc, int r, int hd, int start_pos, float *part_kv,
                                   float *part_sc, uint16_t *latent, const int32_t *sp_d = nullptr)
{
    as_d_pdl_wait();
    if (sp_d)
        start_pos = *sp_d;
    const int slot = start_pos % r;
    const bool complete = (start_pos % r) == r - 1; // (start_pos + 1) % r == 0, without the overflow
    for (int64_t d = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; d < hd; d += (int64_t)gridDim.x * blockDim.x) {
        const float kv = ckv[d], sc = csc[d];
        part_kv[(int64_t)slot * hd + d] = kv;
        part_sc[(int64_t)slot * hd + d] = sc;
        if (complete)
            latent[d] = as_d_f32_to_bf16(pool_channel(part_kv + d, part_sc + d, r, hd, slot, kv, sc));
    }
}

__global__ void state_reset_kernel(float *part_kv, float *part_sc, int n)
{
    as_d_pdl_wait();
    for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (int64_t)gridDim.x * blockDim.x) {
        part_kv[i] = 0.0f;
        part_sc[i] = -INFINITY;
    }
}

} // namespace

extern "C" int as_k_compress_pool(const float *ckv, const float *csc, int s, int r, int hd, int start_pos,
                                  float *part_kv, float *part_sc, as_bf16_t *latent, cudaStream_t st)
{
    if (r < 2 || hd <= 0 || s <= 0 || start_pos < 0 || (start_pos > 0 && s != 1))
        return (int)cudaErrorInvalidValue;
    if (!ckv || !csc || !part_kv || !part_sc)
        return (int)cudaErrorInvalidValue;
    if (start_pos == 0) {
        const int groups = s / r, rest = s % r;
        if (groups > 0 && !latent) // latent may be NULL only when no group completes
            return (int)cudaErrorInvalidValue;
        as_launch(pool_prefill_kernel, as_grid_1d((int64_t)(groups + rest) * hd, kThreads), kThreads, 0, st,
                  ckv, csc, s, r, hd, part_kv, part_sc, latent);
    } else {
        if (start_pos % r == r - 1 && !latent)
            return (int)cudaErrorInvalidValue;
        as_launch(pool_decode_kernel, as_grid_1d(hd, kThreads), kThreads, 0, st, ckv, csc, r, hd, start_pos, part_kv,
                  part_sc, latent, nullptr);
    }
    return AS_LAUNCH_RESULT();
}

// The decode variant: start_pos read from sp_d on the device; latent must be given (whether
// a group completes is known only there).
extern "C" int as_k_compress_pool_decode(const float *ckv, const float *csc, int r, int hd, const int32_t *sp_d,
                                         float *part_kv, float *part_sc, as_bf16_t *latent, cudaStream_t st)
{
    if (r < 2 || hd <= 0 || !sp_d || !ckv || !csc || !part_kv || !part_sc || !latent)
        return (int)cudaErrorInvalidValue;
    as_launch(pool_decode_kernel, as_grid_1d(hd, kThreads), kThreads, 0, st, ckv, csc, r, hd, 0, part_kv, part_sc, latent,
              sp_d);
    return AS_LAUNCH_RESULT();
}

extern "C" int as_k_compress_state_reset(float *part_kv, float *part_sc, int n, cudaStream_t st)
{
    if (n < 0 || (n > 0 && (!part_kv || !part_sc)))
        return (int)cudaErrorInvalidValue;
    if (n == 0)
        return 0;
    as_launch(state_reset_kernel, as_grid_1d(n, kThreads), kThreads, 0, st, part_kv, part_sc, n);
    return AS_LAUNCH_RESULT();
}
