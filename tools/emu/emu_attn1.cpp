// kernels/attn_decode.cu (one query) on the emulator: against ref/attention.c as_sparse_attention by
// SPEC 6's bf16 rule, and the launch sized for topk_max reading the live width and row count from
// "device" memory against the launch at the live width, bit for bit (entries past the live width and
// rows past the live count present, both ignored). Shapes: flash (64 heads x 512: window only,
// window + 1, + 300, + 512), hd 256, a sink of -inf with nothing selected; each with the tensor-core
// split (split_mma_kernel) at 4 and 8 heads a block.
#include "emu.h"
#include "emu_rand.h"
#include "tests/lib/kernel_shapes.h"

#include <cmath>
#include <cstdio>
#include <vector>

// Static __shared__ arrays: one block runs at a time, so a function-level static is the block's.
#undef __shared__
#define __shared__ static
#include "kernels/attn_decode.cu"

namespace attn1 {
alignas(16) uint8_t attn1_smem[sizeof(MmaSmem<512, 8>)]; // split_mma_kernel's dynamic shared memory
}

extern "C" {
#include "ref/attention.h"
}

static int g_fail;
static int g_mma; // the split's heads a block (split_mma_kernel): 4, or 8 where nh allows

template <int HD>
static void launch(const attn1::Args &a, int nsplit, int nh)
{
    if (nsplit > 0 && g_mma == 8 && nh % 8 == 0)
        emu::launch(dim3((unsigned)nsplit, (unsigned)(nh / 8)), dim3(8 * 32), [&] { attn1::split_mma_kernel<HD, 8>(a); });
    else if (nsplit > 0)
        emu::launch(dim3((unsigned)nsplit, (unsigned)(nh / attn1::kHeads)), dim3(attn1::kHeads * 32),
                    [&] { attn1::split_mma_kernel<HD>(a); });
    emu::launch(dim3((unsigned)nh), dim3(HD / 4), [&] { attn1::combine_kernel<HD>(a); });
}

template <int HD>
static void run(const char *name, int nh, int na, int nb_live, int nb_max, int topk_live, int topk_max, bool no_sink,
                uint64_t seed)
{
    g_rs = seed;
    const int nrows = na + nb_max;
    std::vector<uint16_t> q((size_t)nh * HD), rows((size_t)nrows * HD), o_bv((size_t)nh * HD, 0x7f7f),
        o_dec((size_t)nh * HD, 0x1234);
    for (auto &v : q)
        v = as_bf16_bits(urnd(2.0f));
    for (auto &v : rows)
        v = as_bf16_bits(urnd(2.0f));
    std::vector<float> sink(nh);
    for (auto &v : sink)
        v = no_sink ? -INFINITY : urnd(2.0f);
    std::vector<int32_t> idx(topk_max);
    for (int j = 0; j < topk_max; j++) {
        int v = (int)(rnd() % (uint64_t)(na + nb_max)); // some past the live row count
        if (j < na && rnd() % 3 == 0)
            v = -1;
        idx[j] = v;
    }
    const float scale = 1.0f / std::sqrt((float)HD);
    // by value at the live width: entries >= na + nb_live are skipped, as the reference wants them -1
    const int ns_live = (topk_live + attn1::kSplit - 1) / attn1::kSplit;
    const int ns_max = (topk_max + attn1::kSplit - 1) / attn1::kSplit;
    std::vector<float> ws_bv((size_t)(ns_live > 0 ? ns_live : 1) * nh * (HD + 2), NAN),
        ws_dec((size_t)ns_max * nh * (HD + 2), NAN);
    attn1::Args a{q.data(), rows.data(), rows.data() + (size_t)na * HD, na, nb_live, nullptr, idx.data(), topk_live,
                  nullptr, sink.data(), o_bv.data(), nh, scale, ns_live ? ws_bv.data() : nullptr,
                  ns_live ? ws_bv.data() + (size_t)ns_live * nh * HD : nullptr, AsOBack{}, 0};
    launch<HD>(a, ns_live, nh);
    const int32_t topk_d = topk_live, nb_d = nb_live;
    attn1::Args d{q.data(), rows.data(), rows.data() + (size_t)na * HD, na, nb_max, &nb_d, idx.data(), topk_max,
                  &topk_d, sink.data(), o_dec.data(), nh, scale, ws_dec.data(),
                  ws_dec.data() + (size_t)ns_max * nh * HD, AsOBack{}, 1}; // rows staged before the wait
    // the device-parameter launch also writes o_back (the inverse RoPE of o's last rd channels at *pos_d)
    const int rd = HD / 8, half = rd / 2, pos = (int)(seed * 37 % 500);
    std::vector<float> cs((size_t)(pos + 1) * half), sn((size_t)(pos + 1) * half);
    for (size_t i = 0; i < cs.size(); i++)
        cs[i] = urnd(1.0f), sn[i] = urnd(1.0f);
    std::vector<uint16_t> o_back((size_t)nh * HD, 0x5555);
    const int32_t pos_d = pos;
    d.ob = AsOBack{o_back.data(), cs.data(), sn.data(), rd, -1, &pos_d};
    launch<HD>(d, ns_max, nh);
    long back_bad = 0; // row_pipe.cu's inverse RoPE of o_dec, each step rounded
    for (int h = 0; h < nh; h++)
        for (int i = 0; i < HD; i++) {
            const size_t at = (size_t)h * HD + i;
            uint16_t want = o_dec[at];
            if (i >= HD - rd) {
                const int k = (i - (HD - rd)) / 2, i0 = (int)at - (i - (HD - rd)) % 2;
                const float c = cs[(size_t)pos * half + k], s = -sn[(size_t)pos * half + k];
                const float x0 = as_bf16_to_f32(o_dec[i0]), x1 = as_bf16_to_f32(o_dec[i0 + 1]);
                want = (i - (HD - rd)) % 2 == 0 ? as_bf16_bits(x0 * c - x1 * s) : as_bf16_bits(x0 * s + x1 * c);
            }
            back_bad += o_back[at] != want;
        }
    long moved = 0;
    for (size_t i = 0; i < o_bv.size(); i++)
        moved += o_bv[i] != o_dec[i];
    // the reference: f32 copies, entries past the live width or naming rows past the live count -> -1
    std::vector<float> qf(q.size()), rf(rows.size()), of(q.size());
    for (size_t i = 0; i < q.size(); i++)
        qf[i] = as_bf16_to_f32(q[i]);
    for (size_t i = 0; i < rows.size(); i++)
        rf[i] = as_bf16_to_f32(rows[i]);
    std::vector<int32_t> ridx(topk_live);
    for (int j = 0; j < topk_live; j++)
        ridx[j] = idx[j] < na + nb_live ? idx[j] : -1;
    as_sparse_attention(qf.data(), rf.data(), nrows, ridx.data(), topk_live, sink.data(), of.data(), 1, nh, HD, scale);
    float omax = 0, err = 0;
    for (size_t i = 0; i < of.size(); i++) {
        omax = std::fmax(omax, std::fabs(of[i]));
        err = std::fmax(err, std::fabs(as_bf16_to_f32(o_bv[i]) - of[i]));
    }
    const float tol = omax * 0x1p-7f + 1e-4f;
    const bool ok = moved == 0 && err <= tol && back_bad == 0;
    printf("%s %s %s: nh %d hd %d, %d live entries of %d, %d live compressed rows of %d: device-parameter launch %s, "
           "max |err| %.3g (tol %.3g), o_back at pos %d: %ld wrong\n",
           ok ? "ok  " : "FAIL", g_mma == 8 ? "mma8" : "mma4", name, nh, HD, topk_live, topk_max, nb_live, nb_max,
           moved ? "DIFFERS" : "bit-exact", err, tol, pos, back_bad);
    g_fail += !ok;
}

int main()
{
    emu::smem_base = attn1::attn1_smem; // ldmatrix's shared addresses are relative to it
    for (int pass = 1; pass < 3; pass++) {
    g_mma = pass * 4; // the tensor-core split with 4, then 8 heads a block
    // the flash geometry (tests/lib/kernel_shapes.h): heads, window rows, the attention's entries
    constexpr int HD = AS_FLASH_HEAD_DIM, NH = AS_FLASH_HEADS, WIN = AS_FLASH_WINDOW, TOPK = AS_FLASH_ATTN_TOPK;
    run<HD>("flash, window only", NH, WIN, 0, 0, WIN, WIN, false, 1);
    run<HD>("flash, window + 1", NH, WIN, 1, 2048, WIN + 1, TOPK, false, 2);
    run<HD>("flash, window + 300", NH, WIN, 300, 2048, WIN + 300, TOPK, false, 3);
    run<HD>("flash, window + 512", NH, WIN, 2048, 2048, TOPK, TOPK, false, 4);
    run<HD>("flash, 65 entries (a split of one)", NH, WIN, 300, 400, 65, TOPK, false, 5);
    run<256>("hd 256, 16 heads", 16, 40, 70, 100, 90, 110, false, 6);
    run<512>("12 heads (three blocks of 4)", 12, 128, 300, 400, 428, 640, false, 8);
    run<256>("hd 256, 20 heads", 20, 40, 70, 100, 90, 110, false, 9);
    run<512>("nothing selected, no sink", 8, 4, 0, 0, 0, 32, true, 7);
    }
    printf(g_fail ? "FAIL: %d cases\n" : "attn_decode: every case within tolerance and bit-exact by device parameters\n",
           g_fail);
    return g_fail ? 1 : 0;
}
