// kernels/fp8_gemv.cu on the emulator: the tensor-core and portable forms, e4m3 (the fp8 linear, against
// ref/fp8_linear.c) and bf16 activations (the grouped wo_a, against ref/linear.c), every warps-per-group
// setting, a one-block-a-tile launch against a looping one (the same bits), and the residual and RoPE
// epilogues against the plain output.
#include "emu.h"
#include "emu_fp8.h"

#include <cstring>

namespace {
alignas(1024) uint8_t smem[160 * 1024];
}
#undef __shared__
#define __shared__ static
#include "kernels/fp8_gemv.cu"

extern "C" {
#include "ref/fp8_linear.h"
#include "ref/linear.h"
}

static int g_fail;

template <int Act, bool P> static void launch(const Fp8GemvArgs &a, int W, int grid)
{
    emu::smem_base = smem;
    emu::launch(dim3((unsigned)grid, (unsigned)a.w.batch), dim3(kThreads), [&] { fp8_gemv_kernel<Act, P>(a, W); });
}

template <int Act, bool P> static void launch_both(const Fp8GemvArgs &a, int W, std::vector<uint16_t> &y)
{
    const int groups = kWarps / W, sets = ((a.n_out + 7) / 8 + groups - 1) / groups;
    launch<Act, P>(a, W, sets);
    const std::vector<uint16_t> y1 = y;
    std::fill(y.begin(), y.end(), 0x7fc1);
    launch<Act, P>(a, W, sets > 2 ? sets / 3 : 1);
    if (y != y1) {
        printf("    the looping launch differs from one block a row set\n");
        g_fail++;
    }
}

// The fp8 linear: m token rows through act_quant's codes.
template <bool P> static void run_fp8(int n_out, int n_in, int B, int m, int W, bool grid)
{
    g_rs = (uint64_t)(n_out * 131 + n_in * 7 + m + 1000 * W + (grid ? 77 : 0));
    EmuFp8W f;
    emu_fp8w(f, n_out, n_in, B, grid);
    std::vector<float> x = emu_fp8_x(m, n_in, grid);
    const int nk = n_in / 32, lds = (nk + 3) / 4 * 4;
    std::vector<uint8_t> xq;
    std::vector<float> sx;
    emu_fp8_act(x, m, n_in, lds, xq, sx);
    const int ldy = n_out + 1;
    std::vector<uint16_t> y((size_t)m * ldy, 0x7fc1);
    Fp8GemvArgs a{};
    a.w = AsFp8Weight{f.codes.data(), n_in, f.ws.data(), f.ldws, n_out, n_in, 1, 0};
    a.xq = xq.data(), a.ldxq = n_in, a.sx = sx.data(), a.ldsx = lds;
    a.n_out = n_out, a.m = m, a.y = y.data(), a.ldy = ldy;
    launch_both<kActE4M3, P>(a, W, y);
    int bad = 0, shown = 0;
    std::vector<float> want(n_out);
    for (int t = 0; t < m; t++) {
        as_fp8_linear_rows(&x[(size_t)t * n_in], 1, &f.w, 0, n_out, want.data(), n_out);
        for (int o = 0; o < n_out; o++)
            bad += emu_fp8_bad(y[(size_t)t * ldy + o], want[o], emu_fp8_mag(&x[(size_t)t * n_in], f, o, true), &shown,
                               "fp8", t, o);
    }
    printf("%s fp8 gemv %s %dx%d block %d m %d W %d %s: %d bad\n", bad ? "FAIL" : "ok  ", P ? "portable" : "mma", n_out,
           n_in, B, m, W, grid ? "grid" : "random", bad);
    g_fail += bad != 0;
}

// The bf16 linear of a grouped fp8-form weight: G groups of olr rows, group g on x's columns g gw..
template <bool P> static void run_bf16x(int G, int olr, int gw, int m, int W)
{
    g_rs = (uint64_t)(G * 17 + olr * 5 + gw + m);
    EmuFp8W f;
    emu_fp8w(f, G * olr, gw, 32, false);
    const int ldx = G * gw, ldy = G * olr;
    std::vector<uint16_t> xb((size_t)m * ldx), y((size_t)m * ldy, 0x7fc1);
    std::vector<float> x((size_t)m * ldx);
    for (size_t i = 0; i < x.size(); i++) x[i] = urnd(2.0f), xb[i] = as_bf16_bits(x[i]);
    Fp8GemvArgs a{};
    a.w = AsFp8Weight{f.codes.data(), gw, f.ws.data(), f.ldws, olr, gw, G, olr};
    a.x = xb.data(), a.ldx = ldx, a.stride_x = gw;
    a.n_out = olr, a.m = m, a.y = y.data(), a.ldy = ldy, a.stride_y = olr;
    launch_both<kActBf16, P>(a, W, y);
    int bad = 0, shown = 0;
    std::vector<float> xg((size_t)m * gw), yg((size_t)m * olr);
    for (int g = 0; g < G; g++) {
        for (int t = 0; t < m; t++)
            memcpy(&xg[(size_t)t * gw], &x[(size_t)t * ldx + (size_t)g * gw], sizeof(float) * gw);
        as_linear_rows(xg.data(), m, &f.w, (int64_t)g * olr, olr, yg.data(), olr, true);
        for (int t = 0; t < m; t++)
            for (int o = 0; o < olr; o++)
                bad += emu_fp8_bad(y[(size_t)t * ldy + (size_t)g * olr + o], yg[(size_t)t * olr + o],
                                   emu_fp8_mag(&xg[(size_t)t * gw], f, g * olr + o, false), &shown, "bf16x", t, o);
    }
    printf("%s fp8 gemv bf16 x %s %d groups of %dx%d m %d W %d: %d bad\n", bad ? "FAIL" : "ok  ",
           P ? "portable" : "mma", G, olr, gw, m, W, bad);
    g_fail += bad != 0;
}

// Residual and RoPE in the store, against the plain launch's output.
static void run_epilogues(int heads, int hd, int rd, int n_in, int m)
{
    const int n_out = heads * hd, half = rd / 2;
    g_rs = 99;
    EmuFp8W f;
    emu_fp8w(f, n_out, n_in, 32, false);
    std::vector<float> x = emu_fp8_x(m, n_in, false);
    const int nk = n_in / 32, lds = (nk + 3) / 4 * 4;
    std::vector<uint8_t> xq;
    std::vector<float> sx;
    emu_fp8_act(x, m, n_in, lds, xq, sx);
    std::vector<uint16_t> y0((size_t)m * n_out, 0x7fc1), y1 = y0, y2 = y0, h((size_t)m * n_out), h0;
    for (auto &v : h) v = as_bf16_bits(urnd(3.0f));
    h0 = h;
    std::vector<float> cs(64 * half), sn(64 * half);
    for (int i = 0; i < 64 * half; i++) cs[i] = urnd_f32(1.0f), sn[i] = urnd_f32(1.0f);
    const int32_t pos[3] = {17, -1, 63};
    Fp8GemvArgs a{};
    a.w = AsFp8Weight{f.codes.data(), n_in, f.ws.data(), f.ldws, n_out, n_in, 1, 0};
    a.xq = xq.data(), a.ldxq = n_in, a.sx = sx.data(), a.ldsx = lds;
    a.n_out = n_out, a.m = m, a.y = y0.data(), a.ldy = n_out;
    const int W = 2, grid = 3;
    launch<kActE4M3, false>(a, W, grid);
    a.y = y1.data(), a.res = h.data(), a.ldres = n_out;
    launch<kActE4M3, false>(a, W, grid);
    a.y = y2.data(), a.res = nullptr;
    a.rope = AsDRope{cs.data(), sn.data(), hd, rd, 5, pos, 0};
    launch<kActE4M3, false>(a, W, grid);
    long bad_res = 0, bad_rope = 0;
    for (int t = 0; t < m; t++)
        for (int o = 0; o < n_out; o++) {
            const size_t at = (size_t)t * n_out + o;
            bad_res += y1[at] != y0[at] || h[at] != as_bf16_bits(as_bf16_to_f32(h0[at]) + as_bf16_to_f32(y0[at]));
            uint16_t want = y0[at];
            const int ch = o % hd - (hd - rd), p = pos[t];
            if (ch >= 0 && p >= 0) {
                const size_t i0 = at - ch % 2;
                const float c = cs[(size_t)p * half + ch / 2], s = sn[(size_t)p * half + ch / 2];
                const float x0 = as_bf16_to_f32(y0[i0]), x1 = as_bf16_to_f32(y0[i0 + 1]);
                want = ch % 2 == 0 ? as_bf16_bits(x0 * c - x1 * s) : as_bf16_bits(x0 * s + x1 * c);
            }
            bad_rope += y2[at] != want;
        }
    printf("%s fp8 gemv epilogues %d heads x %d (rd %d) <- %d, m %d: residual %ld wrong, rope %ld wrong\n",
           bad_res || bad_rope ? "FAIL" : "ok  ", heads, hd, rd, n_in, m, bad_res, bad_rope);
    g_fail += bad_res || bad_rope;
}

int main()
{
    for (int W = 1; W <= 8; W *= 2) {
        run_fp8<false>(13, 160, 32, 3, W, true);
        run_fp8<false>(13, 160, 32, 3, W, false);
        run_fp8<true>(13, 160, 32, 3, W, false);
    }
    run_fp8<false>(64, 96, 32, 1, 0 + 1, true);
    run_fp8<false>(40, 256, 128, 8, 4, true);
    run_fp8<false>(1, 32, 32, 2, 1, false);
    run_fp8<false>(70, 320, 32, 5, 8, true);
    run_bf16x<false>(2, 16, 64, 3, 2);
    run_bf16x<true>(2, 16, 64, 3, 2);
    run_bf16x<false>(3, 32, 128, 1, 4);
    run_epilogues(2, 32, 16, 96, 3);
    return g_fail ? 1 : 0;
}
