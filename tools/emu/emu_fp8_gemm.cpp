// kernels/fp8_gemm.cu's wgmma kernel on the emulator (tools/emu/kernels/fp8.cuh's wgmma: the
// descriptors' addressing and the 128-byte swizzle, the accumulator fragment) against ref/fp8_linear.c:
// token and output tiles with edges, K cut short inside a stage, 128-blocks.
#include "emu.h"
#include "emu_fp8.h"

#include <cstring>

namespace {
alignas(1024) uint8_t smem_raw[227 * 1024];
}
#undef __shared__
#define __shared__ static
#include "kernels/fp8_gemm.cu"

extern "C" {
#include "ref/fp8_linear.h"
}

static int g_fail;

static void run(int s, int n_out, int n_in, int B, bool grid)
{
    g_rs = (uint64_t)(s * 1009 + n_out * 31 + n_in + (grid ? 5 : 0));
    EmuFp8W f;
    emu_fp8w(f, n_out, n_in, B, grid);
    std::vector<float> x = emu_fp8_x(s, n_in, grid);
    const int nk = n_in / 32, lds = (nk + 3) / 4 * 4;
    std::vector<uint8_t> xq;
    std::vector<float> sx;
    emu_fp8_act(x, s, n_in, lds, xq, sx);
    const int ldy = n_out + 3;
    std::vector<uint16_t> y((size_t)s * ldy, 0x7fc1);
    GemmArgs a{AsFp8Weight{f.codes.data(), n_in, f.ws.data(), f.ldws, n_out, n_in, 1, 0},
               AsFp8Act{xq.data(), n_in, 0, sx.data(), lds, 0}, s, y.data(), ldy};
    emu::smem_base = smem_raw;
    emu::launch(dim3((unsigned)((s + kBM - 1) / kBM), (unsigned)((n_out + kBN - 1) / kBN)), dim3(kThreads),
                [&] { fp8_gemm_kernel(a); });
    std::vector<float> want((size_t)s * n_out);
    as_fp8_linear(x.data(), s, &f.w, want.data());
    int bad = 0, shown = 0, outside = 0;
    for (int t = 0; t < s; t++) {
        for (int o = 0; o < n_out; o++)
            bad += emu_fp8_bad(y[(size_t)t * ldy + o], want[(size_t)t * n_out + o],
                               emu_fp8_mag(&x[(size_t)t * n_in], f, o, true), &shown, "gemm", t, o);
        for (int o = n_out; o < ldy; o++)
            outside += y[(size_t)t * ldy + o] != 0x7fc1;
    }
    printf("%s fp8 gemm s %d %dx%d block %d %s: %d bad, %d written outside\n", bad || outside ? "FAIL" : "ok  ", s,
           n_out, n_in, B, grid ? "grid" : "random", bad, outside);
    g_fail += bad || outside;
}

int main()
{
    run(1, 13, 32, 32, false);
    run(9, 130, 96, 32, true);
    run(9, 130, 96, 32, false);
    run(130, 20, 160, 32, false);
    run(20, 200, 544, 128, true);
    run(70, 128, 288, 32, false);
    return g_fail ? 1 : 0;
}
