// kernels/index_scores.cu on the emulator, against as_index_scores + as_index_visibility
// (ref/indexer.c): bit-exact with fp4-quantised data.
#include "emu.h"
#include "emu_rand.h"

#include <cstdio>
#include <cstdlib>
#include <vector>

namespace {
alignas(128) uint8_t smem[232448];
}
#include "kernels/index_scores.cu"

extern "C" {
#include "ref/indexer.h"
#include "ref/numerics.h"
#include "ref/quant.h"
}


static int g_fail;

template <int IHD>
static void run(const char *name, int s, int width, int start_pos, int ratio, int tpb, bool scalar, uint64_t seed)
{
    g_rs = seed;
    const int nh = 32, ihd = IHD;
    std::vector<float> iq((size_t)s * nh * ihd), k((size_t)width * ihd), w((size_t)s * nh), want((size_t)s * width);
    for (auto &v : iq) v = urnd(3.0f);
    for (auto &v : k) v = urnd(3.0f);
    for (size_t i = 0; i < w.size(); i++) w[i] = i % 7 ? urnd(0.25f) : 0.0f;
    as_fp4_quant_e8m0(iq.data(), (int64_t)iq.size(), AS_FP4_E8M0_BLOCK);
    as_fp4_quant_e8m0(k.data(), (int64_t)k.size(), AS_FP4_E8M0_BLOCK);
    std::vector<int> clen(s);
    for (int t = 0; t < s; t++) {
        int c = start_pos == 0 ? (t + 1) / ratio : width;
        clen[t] = c > width ? width : c;
    }
    as_index_scores(iq.data(), k.data(), w.data(), s, nh, ihd, width, want.data());
    as_index_visibility(want.data(), s, width, clen.data());

    std::vector<uint16_t> iqb(iq.size()), kb(k.size()), wb(w.size()), out((size_t)s * width, 0x7f7f);
    for (size_t i = 0; i < iq.size(); i++) iqb[i] = as_bf16_bits(iq[i]);
    for (size_t i = 0; i < k.size(); i++) kb[i] = as_bf16_bits(k[i]);
    for (size_t i = 0; i < w.size(); i++) wb[i] = as_bf16_bits(w[i]);
    emu::smem_base = smem;
    if (scalar) {
        emu::launch(dim3(4), dim3(64), [&] {
            index_scores_scalar_kernel(iqb.data(), kb.data(), wb.data(), s, nh, ihd, width, start_pos, ratio,
                                       out.data());
        });
    } else {
        const int ntiles = (width + kTileP - 1) / kTileP;
        dim3 grid((unsigned)((s + kWarps - 1) / kWarps), (unsigned)((ntiles + tpb - 1) / tpb));
        emu::launch(grid, dim3(kThreads), [&] {
            index_scores_mma_kernel<IHD>(iqb.data(), kb.data(), wb.data(), s, width, start_pos, ratio, tpb,
                                         out.data());
        });
    }
    int64_t bad = 0, masked = 0;
    for (size_t i = 0; i < out.size(); i++) {
        uint16_t want_b = as_bf16_bits(want[i]);
        masked += want_b == 0xff80;
        if (out[i] != want_b && bad++ < 4)
            printf("    score[%zu][%zu] got 0x%04x want 0x%04x (%g)\n", i / width, i % width, out[i], want_b,
                   want[i]);
    }
    printf("%s %-36s ihd %d s %d width %d start_pos %d ratio %d tiles/block %d %s: %lld/%zu bit-exact (%lld -inf)\n",
           bad ? "FAIL" : "ok  ", name, IHD, s, width, start_pos, ratio, tpb, scalar ? "scalar" : "mma",
           (long long)(out.size() - bad), out.size(), (long long)masked);
    g_fail += bad != 0;
}

int main()
{
    run<128>("prefill ratio 1", 11, 11, 0, 1, 16, false, 1);
    run<128>("prefill ratio 2, past visibility", 9, 150, 0, 2, 1, false, 2);
    run<128>("decode", 1, 130, 77, 2, 1, false, 3);
    run<128>("decode 2 tiles/block", 1, 200, 77, 2, 2, false, 4);
    run<64>("prefill ihd 64", 10, 70, 0, 1, 1, false, 5);
    run<128>("scalar", 5, 40, 0, 1, 1, true, 6);
    printf("%d failed\n", g_fail);
    return g_fail != 0;
}
