// idx = the window selection followed by the compressed selection (SPEC 3 step 5f), assembled on
// the device so that no layer waits for the host. Entries that name a row beyond the attended
// ones would be read out of bounds: they become -1 and raise *bad (the engine turns that into the
// reference's refusal when it next synchronises). valid[0] counts the selected rows (profile).
#include "kernels/common.cuh"
#include "kernels/kernels.h"

__global__ void build_idx_kernel(const int32_t *widx, int cols, const int32_t *csel, int k, int s, int nrows,
                                 int32_t *idx, int *bad, unsigned long long *valid)
{
    as_d_pdl_wait();
    int topk = cols + k;
    int64_t n = (int64_t)s * topk;
    unsigned long long mine = 0;
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n; i += (int64_t)gridDim.x * blockDim.x) {
        int64_t t = i / topk;
        int c = (int)(i % topk);
        int32_t v = c < cols ? widx[t * cols + c] : csel[t * k + (c - cols)];
        if (v >= nrows) {
            atomicOr(bad, 1);
            v = -1;
        }
        mine += v >= 0;
        idx[i] = v;
    }
    if (valid && mine)
        atomicAdd(valid, mine);
}

#ifndef AS_EMU // host side (tools/emu runs the kernels above on the CPU)
extern "C" int as_k_build_idx(const int32_t *widx, int cols, const int32_t *csel, int k, int s, int nrows,
                              int32_t *idx, int *bad, unsigned long long *valid, cudaStream_t st)
{
    if (s < 0 || cols < 0 || k < 0 || nrows < 0 || !bad || (cols && !widx) || (k && !csel) || !idx)
        return (int)cudaErrorInvalidValue;
    int64_t n = (int64_t)s * (cols + k);
    if (n == 0)
        return 0;
    int blocks = (int)((n + 255) / 256 < 2048 ? (n + 255) / 256 : 2048);
    as_launch(build_idx_kernel, blocks, 256, 0, st, widx, cols, csel, k, s, nrows, idx, bad, valid);
    return AS_LAUNCH_RESULT();
}
#endif // AS_EMU

// Decode (s = 1): the window selection and idx in one launch. For c < win: widx[c] = slot
// (sp % win + 1 + c) % win, -1 where that slot > sp (as_k_window_select's decode rule, window.cu),
// and idx[c] = widx[c]; then idx[win + j] = csel[j] for j < k, -1 for k <= j < kmax; every entry >= nrows
// becomes -1 and raises *bad, as in build_idx_kernel. sp, k, nrows come from sp_d / k_d / nrows_d when
// given (the decode graph's step parameters; the grid covers kmax, the most k can be), else by value.
__global__ void build_idx_decode_kernel(int32_t *widx, int win, int sp, const int32_t *sp_d, const int32_t *csel, int k,
                                        const int32_t *k_d, int kmax, int nrows, const int32_t *nrows_d, int32_t *idx,
                                        int *bad, unsigned long long *valid)
{
    as_d_pdl_wait();
    if (sp_d)
        sp = *sp_d;
    if (k_d)
        k = *k_d;
    k = k < 0 ? 0 : k > kmax ? kmax : k;
    if (nrows_d)
        nrows = *nrows_d;
    const int64_t newest = sp % win;
    unsigned long long mine = 0;
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < (int64_t)win + kmax;
         i += (int64_t)gridDim.x * blockDim.x) {
        int32_t v;
        if (i < win) {
            const int64_t slot = (newest + 1 + i) % win;
            v = slot > sp ? -1 : (int32_t)slot;
            widx[i] = v;
        } else {
            const int64_t j = i - win;
            v = j < k ? csel[j] : -1;
        }
        if (v >= nrows) {
            atomicOr(bad, 1);
            v = -1;
        }
        mine += v >= 0;
        idx[i] = v;
    }
    if (valid && mine)
        atomicAdd(valid, mine);
}

#ifndef AS_EMU
extern "C" int as_k_build_idx_decode(int32_t *widx, int win, int sp, const int32_t *sp_d, const int32_t *csel, int k,
                                     const int32_t *k_d, int kmax, int nrows, const int32_t *nrows_d, int32_t *idx,
                                     int *bad, unsigned long long *valid, cudaStream_t st)
{
    if (win <= 0 || kmax < 0 || (!sp_d && sp < 0) || (!k_d && (k < 0 || k > kmax)) || (!nrows_d && nrows < 0) ||
        !widx || !idx || !bad || (kmax > 0 && !csel))
        return (int)cudaErrorInvalidValue;
    const int64_t n = (int64_t)win + kmax;
    const int blocks = (int)((n + 255) / 256 < 2048 ? (n + 255) / 256 : 2048);
    as_launch(build_idx_decode_kernel, blocks, 256, 0, st, widx, win, sp, sp_d, csel, k, k_d, kmax, nrows, nrows_d, idx, bad,
              valid);
    return AS_LAUNCH_RESULT();
}
#endif // AS_EMU
