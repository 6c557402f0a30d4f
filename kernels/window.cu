// The sliding window (twin: ref/window.c, test: tests/gpu_window.c): the ring update and the
// window selection of SPEC 3 step 3. Pure index math and copies: bit-exact by construction.
//   ring store, prefill (start_pos 0): token p in [max(0, s - win), s) -> slot p % win
//   ring store, decode  (start_pos > 0, s == 1): slot start_pos % win <- row 0
//   select, prefill: widx[t][c], cols = min(s, win): j = max(0, t - win + 1) + c, -1 where j > t
//   select, decode:  widx[0][c], cols = win: slot (start_pos % win + 1 + c) % win, -1 where
//                    slot > start_pos (ring not yet full)
// Launch: one thread per copied element / per widx entry, 256 threads, grid-stride (grid capped
// at 2^16 blocks).
#include "kernels/common.cuh"
#include "kernels/kernels.h"

namespace {

constexpr int kThreads = 256;

// Copies `rows` rows of kv (starting at kv row `first`) into the ring; row p -> slot p % win.
__global__ void ring_store_kernel(uint16_t *ring, int win, int hd, const uint16_t *kv, int first, int rows,
                                  int kv_row0_pos)
{
    as_d_pdl_wait();
    const int64_t total = (int64_t)rows * hd;
    for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < total; i += (int64_t)gridDim.x * blockDim.x) {
        const int j = (int)(i / hd);
        const int d = (int)(i - (int64_t)j * hd);
        const int64_t src = (int64_t)(first + j);             // kv row
        const int64_t pos = (int64_t)kv_row0_pos + first + j; // its token position
        const int64_t slot = pos % win;
        ring[slot * hd + d] = kv[src * hd + d];
    }
}

__global__ void select_prefill_kernel(int32_t *widx, int s, int win, int cols)
{
    as_d_pdl_wait();
    const int64_t total = (int64_t)s * cols;
    for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < total; i += (int64_t)gridDim.x * blockDim.x) {
        const int64_t t = i / cols;
        const int64_t c = i - t * cols;
        const int64_t first = t - win + 1 > 0 ? t - win + 1 : 0;
        const int64_t j = first + c;
        widx[i] = j > t ? -1 : (int32_t)j;
    }
}

__global__ void select_decode_kernel(int32_t *widx, int win, int start_pos)
{
    as_d_pdl_wait();
    const int64_t newest = start_pos % win;
    for (int64_t c = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; c < win; c += (int64_t)gridDim.x * blockDim.x) {
        const int64_t slot = (newest + 1 + c) % win;
        widx[c] = slot > start_pos ? -1 : (int32_t)slot;
    }
}

} // namespace

extern "C" int as_k_ring_store(as_bf16_t *ring, int win, int hd, const as_bf16_t *kv, int s, int start_pos,
                               cudaStream_t st)
{
    if (win <= 0 || hd <= 0 || s <= 0 || start_pos < 0 || (start_pos > 0 && s != 1) || !ring || !kv)
        return (int)cudaErrorInvalidValue;
    int first, rows;
    if (start_pos == 0) {
        first = s > win ? s - win : 0;
        rows = s - first;
    } else {
        first = 0;
        rows = 1;
    }
    as_launch(ring_store_kernel, as_grid_1d((int64_t)rows * hd, kThreads), kThreads, 0, st, ring, win, hd, kv, first, rows,
              start_pos);
    return AS_LAUNCH_RESULT();
}

extern "C" int as_k_window_select(int32_t *widx, int s, int win, int start_pos, cudaStream_t st)
{
    if (win <= 0 || s <= 0 || start_pos < 0 || (start_pos > 0 && s != 1) || !widx)
        return (int)cudaErrorInvalidValue;
    if (start_pos == 0) {
        const int cols = s < win ? s : win;
        as_launch(select_prefill_kernel, as_grid_1d((int64_t)s * cols, kThreads), kThreads, 0, st, widx, s, win, cols);
    } else {
        as_launch(select_decode_kernel, as_grid_1d(win, kThreads), kThreads, 0, st, widx, win, start_pos);
    }
    return AS_LAUNCH_RESULT();
}
