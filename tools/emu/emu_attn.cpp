// kernels/sparse_attn.cu on the emulator, against as_sparse_attention (ref/attention.c).
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
#include "ref/attention.h"
#include "ref/numerics.h"
}


static int g_fail;
// > 0: the model's prefill window selection instead of random entries (SPEC 3 step 3): query t is
// position g_pos0 + t of the chunk, topk = the window, column c lists max(0, p - topk + 1) + c, -1
// where that is past p (early queries: mostly masked tiles, the last ones wholly -1).
static int g_window_layout, g_pos0;

// path 0: tensor-core kernel with nsplit splits (as launch_mma plans them); 1: the warp kernel.
template <int HD>
static void run(const char *name, int s, int nh, int na, int nb, int topk, int want_split, int path, float sinkv,
                uint64_t seed)
{
    g_rs = seed;
    const int hd = HD;
    const int64_t nq = (int64_t)s * nh * hd, nrows = (int64_t)na + nb;
    std::vector<float> q(nq), rows(nrows * hd), sink(nh), want(nq);
    std::vector<int32_t> idx((size_t)s * topk);
    for (auto &v : q) v = urnd(2.0f);
    for (auto &v : rows) v = urnd(2.0f);
    for (int h = 0; h < nh; h++) sink[h] = std::isnan(sinkv) ? urnd(2.0f) : sinkv;
    for (int t = 0; t < s; t++)
        for (int j = 0; j < topk; j++) {
            int v = (int)(rnd() % (uint64_t)nrows);
            if (rnd() % 8 == 0 || (t == 1 && j < topk / 2))
                v = -1;
            if (t == 2)
                v = j == topk / 3 ? v < 0 ? 0 : v : -1; // one valid entry
            if (t == 3)
                v = -1; // none
            if (g_window_layout) {
                const int p = g_pos0 + t, r = (p - topk + 1 > 0 ? p - topk + 1 : 0) + j;
                v = r > p ? -1 : r;
            }
            idx[(size_t)t * topk + j] = v;
        }
    const float scale = 1.0f / sqrtf((float)hd);
    as_sparse_attention(q.data(), rows.data(), nrows, idx.data(), topk, sink.data(), want.data(), s, nh, hd, scale);

    std::vector<uint16_t> qb(nq), rb(nrows * hd + 8), ob(nq, 0x7f7f);
    for (int64_t i = 0; i < nq; i++) qb[i] = as_bf16_bits(q[i]);
    for (int64_t i = 0; i < nrows * hd; i++) rb[i] = as_bf16_bits(rows[i]);
    AttnArgs a{qb.data(), rb.data(), na, rb.data() + (size_t)na * hd, nb, idx.data(), topk, sink.data(), ob.data(),
               nh, scale, 1, nullptr, nullptr};
    emu::smem_base = smem;
    int nsplit = 1;
    if (path == 0) {
        const int nhb = (nh + kHB - 1) / kHB, ntiles = (topk + kTR - 1) / kTR;
        nsplit = want_split < 1 ? 1 : want_split > ntiles ? ntiles : want_split;
        int tps = (ntiles + nsplit - 1) / nsplit;
        tps = tps > kMaxSplitTiles ? kMaxSplitTiles : tps;
        nsplit = (ntiles + tps - 1) / tps;
        a.tiles_per_split = tps;
        std::vector<float> ws;
        if (nsplit > 1) {
            ws.assign((size_t)s * nsplit * nh * (hd + 2), NAN);
            a.ws_o = ws.data();
            a.ws_ml = ws.data() + (size_t)s * nsplit * nh * hd;
        }
        emu::launch(dim3(s, nsplit, nhb), dim3(kThreads), [&] { sparse_attn_mma_kernel<HD>(a); });
        if (nsplit > 1)
            emu::launch(dim3(s, nh), dim3(128),
                        [&] { sparse_attn_combine_kernel(a.ws_o, a.ws_ml, a.sink, a.o, nh, hd, nsplit); });
    } else {
        emu::launch(dim3((unsigned)((s * nh + 3) / 4)), dim3(128), [&] { sparse_attn_warp_kernel(a, s, hd); });
    }
    double maxw = 0, maxe = 0;
    int64_t bad = 0, worst = 0;
    for (int64_t i = 0; i < nq; i++) maxw = fmax(maxw, fabs(want[i]));
    const double tol = maxw * 0x1p-7 + 1e-4;
    for (int64_t i = 0; i < nq; i++) {
        float g = as_bf16_to_f32(ob[i]);
        double e = std::isnan(g) ? INFINITY : fabs(g - want[i]);
        if (e > maxe) maxe = e, worst = i;
        if (!(e <= tol) && bad++ < 4)
            printf("    o[%lld][%lld][%lld] got %g want %g\n", (long long)(i / ((int64_t)nh * hd)),
                   (long long)(i / hd % nh), (long long)(i % hd), g, want[i]);
    }
    printf("%s %-40s HD %d s %d nh %d rows %d+%d topk %d %s splits %d: max err %.3g = %.3f tol (worst %lld), %lld bad\n",
           bad ? "FAIL" : "ok  ", name, HD, s, nh, na, nb, topk, path ? "warp" : "mma", nsplit, maxe, maxe / tol,
           (long long)worst, (long long)bad);
    g_fail += bad != 0;
}

int main()
{
    run<512>("flash, 1 split", 4, 64, 40, 60, 100, 1, 0, NAN, 1);
    run<512>("flash, 2 splits", 4, 64, 40, 60, 100, 2, 0, NAN, 2);
    run<512>("flash, huge sink", 4, 64, 40, 60, 70, 1, 0, 1000.0f, 3);
    run<64>("hd 64, 48 heads, 4 splits", 4, 48, 30, 0, 130, 4, 0, NAN, 4);
    run<128>("hd 128, 128 heads (2 blocks), na 0", 4, 128, 0, 90, 33, 1, 0, NAN, 5);
    run<256>("hd 256, 16 heads", 4, 16, 50, 50, 64, 1, 0, -1000.0f, 6);
    run<64>("warp kernel hd 64, 4 heads", 5, 4, 20, 20, 50, 1, 1, NAN, 7);
    // layer 0 of the flash prefill (ratio 0: window only, topk 128, nb 0): queries 0..7 see 1..8 rows
    // of 4 tiles, then the window fills and slides (positions 125..130)
    g_window_layout = 1, g_pos0 = 0;
    run<512>("prefill window, queries 0..7", 8, 64, 512, 0, 128, 1, 0, NAN, 8);
    run<512>("prefill window, queries 0..7, 2 splits", 8, 64, 512, 0, 128, 2, 0, NAN, 9);
    g_pos0 = 125;
    run<512>("prefill window, queries 125..130", 6, 64, 512, 0, 128, 1, 0, NAN, 10);
    g_window_layout = 0;
    printf("%d failed\n", g_fail);
    return g_fail != 0;
}
