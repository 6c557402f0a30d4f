// The decode graph's index scores on the emulator: the launch sized for max_width (its
// grid, tiles per block and position chunks planned for that width) with the live width read from
// "device" memory, against the by-value launch at the live width, bit for bit (score rows are the
// live width apart; nothing past it is written).
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
#include "ref/numerics.h"
#include "ref/quant.h"
}


static int g_fail;

// tpb_bv / tpb_max: tiles per block of the two launches (as launch_mma plans them for each width).
template <int IHD>
static void run(const char *name, int nh, int width, int max_width, int tpb_bv, int tpb_max, bool scalar, uint64_t seed)
{
    g_rs = seed;
    const int s = 1, ihd = IHD, ratio = 2, start_pos = 1;
    std::vector<float> iq((size_t)s * nh * ihd), k((size_t)max_width * ihd), w((size_t)s * nh);
    for (auto &v : iq) v = urnd(3.0f);
    for (auto &v : k) v = urnd(3.0f);
    for (auto &v : w) v = urnd(0.25f);
    as_fp4_quant_e8m0(iq.data(), (int64_t)iq.size(), 32);
    as_fp4_quant_e8m0(k.data(), (int64_t)k.size(), 32);
    std::vector<uint16_t> iqb(iq.size()), kb(k.size()), wb(w.size()), bv((size_t)max_width + 64, 0x7f7f),
        dec((size_t)max_width + 64, 0x7f7f);
    for (size_t i = 0; i < iq.size(); i++) iqb[i] = as_bf16_bits(iq[i]);
    for (size_t i = 0; i < k.size(); i++) kb[i] = as_bf16_bits(k[i]);
    for (size_t i = 0; i < w.size(); i++) wb[i] = as_bf16_bits(w[i]);
    const int32_t width_d = width;
    emu::smem_base = smem;
    if (scalar) {
        emu::launch(dim3(3), dim3(64), [&] {
            index_scores_scalar_kernel(iqb.data(), kb.data(), wb.data(), s, nh, ihd, width, start_pos, ratio, bv.data());
        });
        emu::launch(dim3(5), dim3(64), [&] {
            index_scores_scalar_kernel(iqb.data(), kb.data(), wb.data(), s, nh, ihd, max_width, start_pos, ratio,
                                       dec.data(), &width_d);
        });
    } else {
        const int nt = (width + kTileP - 1) / kTileP, ntm = (max_width + kTileP - 1) / kTileP;
        emu::launch(dim3(1, (unsigned)((nt + tpb_bv - 1) / tpb_bv)), dim3(kThreads), [&] {
            index_scores_mma_kernel<IHD>(iqb.data(), kb.data(), wb.data(), s, width, start_pos, ratio, tpb_bv,
                                         bv.data());
        });
        emu::launch(dim3(1, (unsigned)((ntm + tpb_max - 1) / tpb_max)), dim3(kThreads), [&] {
            index_scores_mma_kernel<IHD>(iqb.data(), kb.data(), wb.data(), s, max_width, start_pos, ratio, tpb_max,
                                         dec.data(), &width_d);
        });
    }
    long bad = 0;
    for (size_t i = 0; i < bv.size(); i++) // the live scores equal, nothing past them written
        if (bv[i] != dec[i] && bad++ < 4)
            printf("    score[%zu]: decode 0x%04x, by value 0x%04x\n", i, dec[i], bv[i]);
    printf("%s index_scores decode %-28s ihd %d width %d of %d, tiles/block %d / %d %s: %ld differ\n",
           bad ? "FAIL" : "ok  ", name, IHD, width, max_width, tpb_bv, tpb_max, scalar ? "scalar" : "mma", bad);
    g_fail += bad != 0;
}

// The one-query kernel (index_scores_row_kernel) against the mma kernel at the same width, start
// position and ratio (start_pos 0: the prefill's visibility, (0 + 1) / ratio positions), by value and
// with the live width read from memory (max_width's grid), bit for bit, nothing past the width written.
template <int IHD>
static void run_row(int width, int max_width, int start_pos, int ratio, uint64_t seed)
{
    g_rs = seed;
    const int nh = 32;
    std::vector<float> iq((size_t)nh * IHD), k((size_t)max_width * IHD), w(nh);
    for (auto &v : iq) v = urnd(3.0f);
    for (auto &v : k) v = urnd(3.0f);
    for (auto &v : w) v = urnd(0.25f);
    as_fp4_quant_e8m0(iq.data(), (int64_t)iq.size(), 32);
    as_fp4_quant_e8m0(k.data(), (int64_t)k.size(), 32);
    std::vector<uint16_t> iqb(iq.size()), kb(k.size()), wb(w.size());
    for (size_t i = 0; i < iq.size(); i++) iqb[i] = as_bf16_bits(iq[i]);
    for (size_t i = 0; i < k.size(); i++) kb[i] = as_bf16_bits(k[i]);
    for (size_t i = 0; i < w.size(); i++) wb[i] = as_bf16_bits(w[i]);
    std::vector<uint16_t> want((size_t)max_width + 64, 0x7f7f), got(want), got_d(want);
    const int32_t width_d = width;
    emu::smem_base = smem;
    const int nt = (width + kTileP - 1) / kTileP, ntm = (max_width + kTileP - 1) / kTileP;
    emu::launch(dim3(1, (unsigned)nt), dim3(kThreads), [&] {
        index_scores_mma_kernel<IHD>(iqb.data(), kb.data(), wb.data(), 1, width, start_pos, ratio, 1, want.data());
    });
    emu::launch(dim3((unsigned)nt), dim3(kThreads), [&] {
        index_scores_row_kernel<IHD>(iqb.data(), kb.data(), wb.data(), width, start_pos, ratio, got.data());
    });
    emu::launch(dim3((unsigned)ntm), dim3(kThreads), [&] {
        index_scores_row_kernel<IHD>(iqb.data(), kb.data(), wb.data(), max_width, start_pos, ratio, got_d.data(),
                                     &width_d);
    });
    long bad = 0;
    for (size_t i = 0; i < want.size(); i++)
        if ((got[i] != want[i] || got_d[i] != want[i]) && bad++ < 4)
            printf("    score[%zu]: one-query 0x%04x / live width 0x%04x, mma 0x%04x\n", i, got[i], got_d[i], want[i]);
    printf("%s index_scores one query  ihd %d width %d of %d, start %d ratio %d: %ld differ\n", bad ? "FAIL" : "ok  ",
           IHD, width, max_width, start_pos, ratio, bad);
    g_fail += bad != 0;
}

int main()
{
    run_row<128>(1, 700, 1, 2, 11);
    run_row<128>(7, 64, 1, 1, 12);
    run_row<128>(65, 700, 1, 2, 13);
    run_row<128>(700, 700, 1, 1, 14);
    run_row<128>(4096, 4096, 9, 1, 15);
    run_row<128>(300, 300, 0, 1, 16); // a one-token prefill: one visible position
    run_row<128>(300, 300, 0, 2, 17); // none
    run_row<64>(130, 500, 1, 2, 18);
    run<128>("one position", 32, 1, 700, 1, 3, false, 1);
    run<128>("a tile and one", 32, 65, 700, 1, 2, false, 2);
    run<128>("width 300 of 700", 32, 300, 700, 1, 4, false, 3);
    run<128>("whole", 32, 700, 700, 2, 2, false, 4);
    run<64>("ihd 64", 32, 130, 500, 1, 3, false, 5);
    run<32>("tiny: scalar, 4 heads", 4, 37, 120, 1, 1, true, 6);
    printf("%d failed\n", g_fail);
    return g_fail != 0;
}
