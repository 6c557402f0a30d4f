// idx = the window selection followed by the compressed selection (SPEC 3 step 5f), assembled on
// the device so that no layer waits for the host. Entries that name a row beyond the attended
// ones would be read out of bounds: they become -1 and raise *bad (the engine turns that into the
// reference's refusal when it next synchronises). valid[0] counts the selected rows (profile).
#include "kernels/common.cuh"
#include "kernels/kernels.h"

__global__ void build_idx_kernel(const int32_t *widx, int cols, const int32_t *csel, int k, int s, int nrows,
                                 int32_t *idx, int *bad, unsigned long long *valid)
{
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

extern "C" int as_k_build_idx(const int32_t *widx, int cols, const int32_t *csel, int k, int s, int nrows,
                              int32_t *idx, int *bad, unsigned long long *valid, cudaStream_t st)
{
    if (s < 0 || cols < 0 || k < 0 || nrows < 0 || !bad || (cols && !widx) || (k && !csel) || !idx)
        return (int)cudaErrorInvalidValue;
    int64_t n = (int64_t)s * (cols + k);
    if (n == 0)
        return 0;
    int blocks = (int)((n + 255) / 256 < 2048 ? (n + 255) / 256 : 2048);
    build_idx_kernel<<<blocks, 256, 0, st>>>(widx, cols, csel, k, s, nrows, idx, bad, valid);
    return AS_LAUNCH_RESULT();
}
