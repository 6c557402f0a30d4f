// The decode graph's sparse attention on the emulator: the launch sized for topk_max with
// the live width and compressed row count read from "device" memory, split one tile per split into a
// given workspace, folded by the combine kernel over the live splits only, against the by-value
// launch at the live width (split as as_k_sparse_attn plans a one-query decode: one tile per split),
// bit for bit. The entries past the live width hold valid rows and entries naming rows past the live
// row count are present: both must be ignored as the by-value launch ignores them.
#include "emu.h"
#include "emu_rand.h"

#include <cstdio>
#include <cstdlib>
#include <vector>

namespace {
alignas(128) uint8_t smem[232448];
}
#include "kernels/sparse_attn.cu"

extern "C" {
#include "ref/numerics.h"
}


static int g_fail;

// One query (s = 1). mma: the tensor-core kernel (nh % 16 == 0), else the warp kernel.
template <int HD>
static void run(const char *name, int nh, int na, int nb_live, int nb_max, int topk_live, int topk_max, bool mma,
                uint64_t seed)
{
    g_rs = seed;
    const int hd = HD, nrows_max = na + nb_max;
    std::vector<uint16_t> q((size_t)nh * hd), rows((size_t)nrows_max * hd), o_bv((size_t)nh * hd, 0x7f7f),
        o_dec((size_t)nh * hd, 0x1234);
    for (auto &v : q) v = as_bf16_bits(urnd(2.0f));
    for (auto &v : rows) v = as_bf16_bits(urnd(2.0f));
    std::vector<float> sink(nh);
    for (auto &v : sink) v = urnd(2.0f);
    std::vector<int32_t> idx(topk_max);
    for (int j = 0; j < topk_max; j++) {
        int v = (int)(rnd() % (uint64_t)(na + nb_live));
        if (rnd() % 8 == 0)
            v = -1;
        if (rnd() % 16 == 0)
            v = na + nb_live + (int)(rnd() % (uint64_t)(nb_max - nb_live + 1)); // past the live rows
        if (j >= topk_live)
            v = (int)(rnd() % (uint64_t)(na + nb_live)); // a valid row past the live width
        idx[j] = v;
    }
    const float scale = 1.0f / sqrtf((float)hd);
    const int32_t topk_d = topk_live, nb_d = nb_live;
    emu::smem_base = smem;
    // by value, at the live width
    {
        AttnArgs a{q.data(), rows.data(), na, rows.data() + (size_t)na * hd, nb_live, idx.data(), topk_live, sink.data(),
                   o_bv.data(), nh, scale, 1, nullptr, nullptr};
        if (mma) {
            const int ntiles = (topk_live + kTR - 1) / kTR, nsplit = ntiles < 1 ? 1 : ntiles;
            std::vector<float> ws;
            if (nsplit > 1) {
                ws.assign((size_t)nsplit * nh * (hd + 2), NAN);
                a.ws_o = ws.data();
                a.ws_ml = ws.data() + (size_t)nsplit * nh * hd;
            }
            emu::launch(dim3(1, nsplit, (nh + kHB - 1) / kHB), dim3(kThreads), [&] { sparse_attn_mma_kernel<HD>(a); });
            if (nsplit > 1)
                emu::launch(dim3(1, nh), dim3(128),
                            [&] { sparse_attn_combine_kernel(a.ws_o, a.ws_ml, a.sink, a.o, nh, hd, nsplit); });
        } else {
            emu::launch(dim3((unsigned)((nh + 3) / 4)), dim3(128), [&] { sparse_attn_warp_kernel(a, 1, hd); });
        }
    }
    // the decode variant, sized for topk_max / nb_max
    {
        AttnArgs a{q.data(), rows.data(), na, rows.data() + (size_t)na * hd, nb_max, idx.data(), topk_max, sink.data(),
                   o_dec.data(), nh, scale, 1, nullptr, nullptr};
        a.topk_d = &topk_d;
        a.nb_d = &nb_d;
        if (mma) {
            const int nsplit = (topk_max + kTR - 1) / kTR;
            std::vector<float> ws((size_t)nsplit * nh * (hd + 2), NAN);
            if (nsplit > 1) {
                a.ws_o = ws.data();
                a.ws_ml = ws.data() + (size_t)nsplit * nh * hd;
            }
            emu::launch(dim3(1, nsplit, (nh + kHB - 1) / kHB), dim3(kThreads), [&] { sparse_attn_mma_kernel<HD>(a); });
            if (nsplit > 1)
                emu::launch(dim3(1, nh), dim3(128), [&] {
                    sparse_attn_combine_kernel(a.ws_o, a.ws_ml, a.sink, a.o, nh, hd, nsplit, a.topk_d, a.topk, 1);
                });
        } else {
            emu::launch(dim3((unsigned)((nh + 3) / 4)), dim3(128), [&] { sparse_attn_warp_kernel(a, 1, hd); });
        }
    }
    long bad = 0;
    for (size_t i = 0; i < o_bv.size(); i++)
        if (o_bv[i] != o_dec[i] && bad++ < 4)
            printf("    o[%zu][%zu]: decode 0x%04x, by value 0x%04x\n", i / hd, i % hd, o_dec[i], o_bv[i]);
    printf("%s sparse_attn decode %-32s HD %d nh %d rows %d+%d/%d topk %d/%d %s: %ld differ\n", bad ? "FAIL" : "ok  ",
           name, HD, nh, na, nb_live, nb_max, topk_live, topk_max, mma ? "mma" : "warp", bad);
    g_fail += bad != 0;
}

int main()
{
    // flash: window 128 + index_topk 512
    run<512>("one live tile (finalised in place)", 64, 128, 300, 600, 20, 640, true, 1);
    run<512>("two live tiles", 64, 128, 300, 600, 65, 640, true, 2);
    run<512>("window + 1", 64, 128, 300, 600, 129, 640, true, 3);
    run<512>("window + 300", 64, 128, 300, 600, 428, 640, true, 4);
    run<512>("full width", 64, 128, 600, 600, 640, 640, true, 5);
    run<512>("ratio 0: window only", 64, 128, 0, 0, 128, 128, true, 6);
    // tiny: 4 heads of 64, window 8 + index_topk 8: the warp kernel
    run<64>("tiny, warp kernel", 4, 8, 5, 40, 13, 16, false, 7);
    run<64>("tiny, warp kernel, full", 4, 8, 40, 40, 16, 16, false, 8);
    printf("%d failed\n", g_fail);
    return g_fail != 0;
}
