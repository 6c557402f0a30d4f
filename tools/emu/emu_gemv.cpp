// kernels/gemv.cu on the emulator, every (R, W, M) configuration, against ref/gemv.c; its e4m3 weights
// against its bf16 weights dequantised (the same bits).
#include "emu.h"
#include "emu_rand.h"

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <algorithm>
#include <vector>

// Static __shared__ arrays: one block runs at a time, so a function-level static is the block's.
#undef __shared__
#define __shared__ static
#include "kernels/gemv.cu"

extern "C" {
#include "ref/gemv.h"
#include "ref/numerics.h"
}
#include "tests/lib/kernel_shapes.h"


static int g_fail;

// One shared shape (tests/lib/kernel_shapes.h) in the GPU test's layout (tests/gpu_gemv.c): group b
// of x at b * strideX, rounded up to 8 where the x rows are 8-aligned; the kernel the launcher picks
// (the vector one needs 16-byte aligned rows, x and batch strides).
template <typename TW, int R, int M>
static void run(const AsProjShape &s, int m, int wwarps, bool yf32)
{
    const int n_out = s.n_out, n_in = s.n_in, ldw = s.ldw, batch = s.groups;
    const int64_t ldx = s.ldx, strideX = ldx % 8 == 0 ? ((int64_t)n_in + 7) / 8 * 8 : n_in,
                  strideW = (int64_t)n_out * ldw, ldy = (int64_t)batch * n_out, strideY = n_out;
    const bool scalar = ldw % 8 || ldx % 8 || s.x_off % 8 || (batch > 1 && (strideW % 8 || strideX % 8));
    std::vector<float> W((size_t)batch * strideW), xbuf((size_t)(s.x_off + (m - 1) * ldx + batch * strideX + 8));
    const float *x = xbuf.data() + s.x_off;
    for (auto &v : W) v = urnd(0.5f);
    for (auto &v : xbuf) v = urnd(2.0f);
    std::vector<uint16_t> Wb(W.size()), xb(xbuf.size());
    for (size_t i = 0; i < W.size(); i++) Wb[i] = as_bf16_bits(W[i]);
    for (size_t i = 0; i < xbuf.size(); i++) xb[i] = as_bf16_bits(xbuf[i]);
    std::vector<float> yo((size_t)m * ldy, NAN);
    std::vector<uint16_t> yb((size_t)m * ldy, 0x7f7f);
    const bool f32w = sizeof(TW) == 4;
    GemvArgs a{f32w ? (const void *)W.data() : (const void *)Wb.data(), ldw, strideW, n_out, n_in, xb.data() + s.x_off, ldx,
               strideX, m, yf32 ? (void *)yo.data() : (void *)yb.data(), ldy, strideY, yf32 ? 1 : 0, nullptr, 0, {}, {}, nullptr, 0, 0};
    if (scalar) {
        emu::launch(dim3((unsigned)((n_out + kWarps - 1) / kWarps), (unsigned)batch), dim3(kThreads),
                    [&] { gemv_scalar_kernel<TW>(a); });
    } else {
        // twice: one block a row set, then a third as many blocks looping over the row sets with the
        // first weights loaded early (the resident launch); the second must leave y as the first did
        const int gpb = kWarps / wwarps, groups = (n_out + R - 1) / R, sets = (groups + gpb - 1) / gpb;
        emu::launch(dim3((unsigned)sets, (unsigned)batch), dim3(kThreads), [&] { gemv_vec_kernel<TW, R, M>(a, wwarps); });
        const std::vector<float> yo1 = yo;
        const std::vector<uint16_t> yb1 = yb;
        std::fill(yo.begin(), yo.end(), NAN);
        std::fill(yb.begin(), yb.end(), 0x7f7f);
        emu::launch(dim3((unsigned)(sets > 2 ? sets / 3 : 1), (unsigned)batch), dim3(kThreads),
                    [&] { gemv_vec_kernel<TW, R, M>(a, wwarps); });
        if (memcmp(yo.data(), yo1.data(), yo.size() * sizeof(float)) || yb != yb1) {
            printf("    the resident launch (%d blocks for %d row sets) differs from one block a row set\n",
                   sets > 2 ? sets / 3 : 1, sets);
            g_fail++;
        }
    }
    int64_t bad = 0;
    double worst = 0;
    std::vector<float> xr(n_in), yr(n_out), wr((size_t)n_out * n_in);
    for (int b = 0; b < batch; b++)
        for (int t = 0; t < m; t++) {
            for (int i = 0; i < n_in; i++) xr[i] = x[(size_t)(t * ldx + b * strideX + i)];
            for (int o = 0; o < n_out; o++)
                for (int i = 0; i < n_in; i++) {
                    double acc = 0;
                    (void)acc;
                    wr[(size_t)o * n_in + i] = W[(size_t)(b * strideW + (int64_t)o * ldw + i)];
                }
            as_gemv_f32(xr.data(), wr.data(), n_in, n_out, yr.data());
            for (int o = 0; o < n_out; o++) {
                const size_t off = (size_t)(t * ldy + b * strideY + o);
                const float g = yf32 ? yo[off] : as_bf16_to_f32(yb[off]);
                const float w = yf32 ? yr[o] : as_bf16(yr[o]);
                double mag = 0;
                for (int i = 0; i < n_in; i++) mag += fabs((double)xr[i] * wr[(size_t)o * n_in + i]);
                const double err = fabs((double)g - w), tol = yf32 ? 0x1p-16 * mag : fmax(fabs(w) * 0x1p-7, 0x1p-16 * mag);
                worst = fmax(worst, err / tol);
                if (!(err <= tol) && bad++ < 3)
                    printf("    b %d t %d o %d: got %g want %g\n", b, t, o, g, w);
            }
        }
    printf("%s %-26s %s R%d M%d W%d %dx%d ldw %d batch %d m %d %s y %s: worst err/tol %.3f, %lld bad\n",
           bad ? "FAIL" : "ok  ", s.name, f32w ? "f32w" : "bf16", R, M, wwarps, n_out, n_in, ldw, batch, m,
           scalar ? "scalar" : "vec", yf32 ? "f32" : "bf16", worst, (long long)bad);
    g_fail += bad != 0;
}

// q's RoPE in the store (AsDRope): against the same launch without it, then each pair rotated on the
// host with ref's rounding (products, sum and difference in f32, then bf16); R = 2 and 4, m = 1 and 3,
// positions by value and by "device" pointer (token 1 at -1: unrotated), inverse once.
template <int R, int M>
static void run_rope(int heads, int hd, int rd, int n_in, int m, int wwarps, bool by_ptr, bool inverse)
{
    const int n_out = heads * hd, half = rd / 2, maxpos = 64;
    std::vector<uint16_t> Wb((size_t)n_out * n_in), xb((size_t)m * n_in), y0((size_t)m * n_out, 0x7f7f),
        y1((size_t)m * n_out, 0x7f7f);
    for (auto &v : Wb) v = as_bf16_bits(urnd(0.5f));
    for (auto &v : xb) v = as_bf16_bits(urnd(2.0f));
    std::vector<float> cs((size_t)maxpos * half), sn((size_t)maxpos * half);
    for (size_t i = 0; i < cs.size(); i++) cs[i] = urnd(1.0f), sn[i] = urnd(1.0f);
    const int32_t pos[3] = {17, -1, 63};
    GemvArgs a{Wb.data(), n_in, 0, n_out, n_in, xb.data(), n_in, 0, m, y0.data(), n_out, 0, 0, nullptr, 0, {}, {}, nullptr, 0, 0};
    const int gpb = kWarps / wwarps, sets = ((n_out + R - 1) / R + gpb - 1) / gpb;
    emu::launch(dim3((unsigned)sets, 1), dim3(kThreads), [&] { gemv_vec_kernel<uint16_t, R, M>(a, wwarps); });
    a.y = y1.data();
    a.rope = AsDRope{cs.data(), sn.data(), hd, rd, 5, by_ptr ? pos : nullptr, inverse ? 1 : 0};
    emu::launch(dim3((unsigned)sets, 1), dim3(kThreads), [&] { gemv_vec_kernel<uint16_t, R, M>(a, wwarps); });
    long bad = 0;
    for (int t = 0; t < m; t++)
        for (int h = 0; h < heads; h++)
            for (int k = 0; k < hd; k++) {
                const size_t at = (size_t)t * n_out + (size_t)h * hd + k;
                uint16_t want = y0[at];
                const int p = by_ptr ? pos[t] : 5 + t, ch = k - (hd - rd);
                if (ch >= 0 && p >= 0) {
                    const size_t i0 = at - ch % 2;
                    const float c = cs[(size_t)p * half + ch / 2], sv = sn[(size_t)p * half + ch / 2] * (inverse ? -1 : 1);
                    const float x0 = as_bf16_to_f32(y0[i0]), x1 = as_bf16_to_f32(y0[i0 + 1]);
                    want = ch % 2 == 0 ? as_bf16_bits(x0 * c - x1 * sv) : as_bf16_bits(x0 * sv + x1 * c);
                }
                bad += y1[at] != want;
            }
    printf("%s rope R%d M%d W%d %d heads x %d (rd %d) <- %d, m %d, positions %s%s: %ld wrong\n", bad ? "FAIL" : "ok  ", R,
           M, wwarps, heads, hd, rd, n_in, m, by_ptr ? "by pointer" : "pos0 + t", inverse ? ", inverse" : "", bad);
    g_fail += bad != 0;
}

// The RMSNorm of the finished row by the last block (GemvArgs.norm): against the same launch without it,
// then as_d_rmsnorm_row (rmsnorm.cu's kernel body) over the row; with the residual (the row normalised
// is h) or without (y, in place as q_norm); twice on one counter, which must be back at 0.
template <int R>
static void run_norm(int n_out, int n_in, int wwarps, bool with_res, bool in_place)
{
    std::vector<uint16_t> Wb((size_t)n_out * n_in), xb((size_t)n_in), h0((size_t)n_out), y0((size_t)n_out, 0x7f7f);
    std::vector<float> nw((size_t)n_out);
    for (auto &v : Wb) v = as_bf16_bits(urnd(0.5f));
    for (auto &v : xb) v = as_bf16_bits(urnd(2.0f));
    for (auto &v : h0) v = as_bf16_bits(urnd(30.0f));
    for (auto &v : nw) v = urnd(1.5f);
    std::vector<uint16_t> h1 = h0, y1 = y0, want((size_t)n_out, 0x7f7f), got((size_t)n_out, 0x7f7f);
    const int gpb = kWarps / wwarps, sets = ((n_out + R - 1) / R + gpb - 1) / gpb;
    GemvArgs a{Wb.data(), n_in, 0, n_out, n_in, xb.data(), n_in, 0, 1, y0.data(), n_out, 0, 0,
               with_res ? h0.data() : nullptr, n_out, {}, {}, nullptr, 0, 0};
    emu::launch(dim3((unsigned)sets, 1), dim3(kThreads), [&] { gemv_vec_kernel<uint16_t, R, 1>(a, wwarps); });
    const uint16_t *src = with_res ? h0.data() : y0.data();
    emu::launch(dim3(1), dim3(kRmsThreads), [&] { as_d_rmsnorm_row(src, nw.data(), want.data(), nullptr, n_out, 1e-6f); });
    unsigned ctr = 0;
    long bad = 0;
    for (int run = 0; run < 2; run++) {
        std::vector<uint16_t> hr = h1, yr = y1;
        a.y = yr.data();
        a.res = with_res ? hr.data() : nullptr;
        uint16_t *out = in_place ? (with_res ? hr.data() : yr.data()) : got.data();
        a.norm = {nw.data(), out, 1e-6f, &ctr};
        emu::launch(dim3((unsigned)(sets > 2 ? sets / 2 : 1), 1), dim3(kThreads),
                    [&] { gemv_vec_kernel<uint16_t, R, 1>(a, wwarps); });
        for (int i = 0; i < n_out; i++)
            bad += out[i] != want[i] || (!in_place && (yr[i] != y0[i] || (with_res && hr[i] != h0[i])));
        bad += ctr != 0;
    }
    printf("%s norm R%d W%d %dx%d%s%s: %ld wrong\n", bad ? "FAIL" : "ok  ", R, wwarps, n_out, n_in,
           with_res ? " + residual" : "", in_place ? ", in place" : "", bad);
    g_fail += bad != 0;
}

// e4m3 codes with block scales against the bf16 GEMV of their dequantised values, bf16(code * scale):
// the same bits, batch groups, both kernels (vector and scalar: x rows unaligned), the epilogues'
// residual. Codes over the whole e4m3 range but NaN (subnormals and negatives included), scales 2^-20..2^6.
template <int R, int M>
static void run_e4m3(int n_out, int n_in, int batch, int m, int wwarps, bool scalar, bool residual)
{
    const int64_t ldws = (n_in / 32 + 3) / 4 * 4, srows = (n_out + 31) / 32;
    const int64_t ldx = scalar ? n_in + 1 : n_in, strideX = (int64_t)m * ldx, ldy = (int64_t)batch * n_out;
    std::vector<uint8_t> q((size_t)batch * n_out * n_in);
    std::vector<float> ws((size_t)batch * srows * ldws, 0.0f);
    std::vector<uint16_t> wb(q.size()), xb((size_t)batch * strideX + 8), y8((size_t)m * ldy, 0x7f7f),
        y16((size_t)m * ldy, 0x7f7f), h8((size_t)m * n_out), h16;
    for (auto &v : ws) v = ldexpf(1.0f, (int)(urnd(1.0f) * 13.0f) - 7);
    for (size_t i = 0; i < q.size(); i++) {
        uint8_t b = (uint8_t)(urnd(1.0f) * 127.0f + 128.0f);
        q[i] = (b & 0x7f) == 0x7f ? (uint8_t)(b - 1) : b;
    }
    for (int b = 0; b < batch; b++)
        for (int o = 0; o < n_out; o++)
            for (int i = 0; i < n_in; i++) {
                const size_t at = ((size_t)b * n_out + o) * n_in + i;
                wb[at] = as_bf16_bits(as_e4m3_from_bits(q[at]) * ws[((size_t)b * srows + o / 32) * ldws + i / 32]);
            }
    for (auto &v : xb) v = as_bf16_bits(urnd(2.0f));
    for (auto &v : h8) v = as_bf16_bits(urnd(8.0f));
    h16 = h8;
    GemvArgs a8{q.data(), n_in, (int64_t)n_out * n_in, n_out, n_in, xb.data(), ldx, strideX, m, y8.data(), ldy, n_out,
                0, residual ? h8.data() : nullptr, n_out, {}, {}, ws.data(), ldws, srows * ldws};
    GemvArgs a16{wb.data(), n_in, (int64_t)n_out * n_in, n_out, n_in, xb.data(), ldx, strideX, m, y16.data(), ldy,
                 n_out, 0, residual ? h16.data() : nullptr, n_out, {}, {}, nullptr, 0, 0};
    if (scalar) {
        const dim3 grid((unsigned)((n_out + kWarps - 1) / kWarps), (unsigned)batch);
        emu::launch(grid, dim3(kThreads), [&] { gemv_scalar_kernel<uint8_t>(a8); });
        emu::launch(grid, dim3(kThreads), [&] { gemv_scalar_kernel<uint16_t>(a16); });
    } else {
        const int gpb = kWarps / wwarps, sets = ((n_out + R - 1) / R + gpb - 1) / gpb;
        const dim3 grid((unsigned)(sets > 2 ? sets / 2 : 1), (unsigned)batch);
        if constexpr (M == 1) // the decode's e4m3 kernel
            emu::launch(grid, dim3(kThreads), [&] { gemv_e4m3_m1_kernel<R, 2>(a8, wwarps); });
        else
            emu::launch(grid, dim3(kThreads), [&] { gemv_vec_kernel<uint8_t, R, M>(a8, wwarps); });
        emu::launch(grid, dim3(kThreads), [&] { gemv_vec_kernel<uint16_t, R, M>(a16, wwarps); });
    }
    long bad = 0;
    for (size_t i = 0; i < y8.size(); i++)
        bad += y8[i] != y16[i];
    for (size_t i = 0; i < h8.size(); i++)
        bad += h8[i] != h16[i];
    printf("%s e4m3 R%d M%d W%d %dx%d batch %d m %d %s%s: %ld outputs not the bf16 GEMV's bits\n", bad ? "FAIL" : "ok  ",
           R, M, wwarps, n_out, n_in, batch, m, scalar ? "scalar" : "vec", residual ? " + residual" : "", bad);
    g_fail += bad != 0;
}

int main()
{
    // the small projections the GPU test runs, each under several (R, M, W), the larger ones under
    // two (one emulated thread is an OS thread): W as bf16 values in both weight types (the f32 path
    // reads them as f32)
    for (const AsProjShape &s : as_small_projections) {
        const bool all = (int64_t)s.groups * s.n_out * s.n_in < (1 << 16);
        if (s.f32_weights) {
            run<float, 4, 2>(s, 2, 2, true);
            if (all)
                run<float, 1, 8>(s, 8, 8, true), run<float, 1, 4>(s, 3, 1, true);
        } else {
            run<uint16_t, 4, 8>(s, 5, 2, false);
            run<uint16_t, 2, 1>(s, 1, 8, true);
            if (all)
                run<uint16_t, 1, 1>(s, 1, 1, false), run<uint16_t, 1, 2>(s, 2, 1, false),
                    run<uint16_t, 4, 4>(s, 3, 4, false);
        }
    }
    run_rope<4, 1>(4, 64, 16, 256, 1, 1, true, false);
    run_rope<2, 4>(3, 40, 8, 136, 3, 2, false, true);
    run_rope<4, 4>(2, 64, 64, 64, 3, 4, true, false);
    run_norm<2>(1280, 64, 1, false, true);
    run_norm<4>(520, 96, 2, true, false);
    run_norm<1>(37, 203 + 5, 1, true, true);
    run_e4m3<4, 1>(96, 256, 1, 1, 2, false, true);
    run_e4m3<1, 2>(64, 1280, 1, 2, 8, false, false);
    run_e4m3<2, 4>(40, 96, 1, 3, 1, false, false);
    run_e4m3<4, 8>(32, 64, 3, 8, 4, false, false);
    run_e4m3<2, 1>(64, 64, 4, 1, 1, false, false);
    run_e4m3<4, 1>(64, 1280, 2, 1, 1, false, false); // five chunks a lane: a step of two, then one
    run_e4m3<1, 1>(96, 640, 1, 1, 8, false, true);   // lanes past the row's last chunk
    run_e4m3<1, 1>(33, 160, 2, 1, 1, true, false);
    printf("%d failed\n", g_fail);
    return g_fail != 0;
}
