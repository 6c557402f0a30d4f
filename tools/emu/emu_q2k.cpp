// kernels/q8_1.cu, q2k_mmvq.cu and q2k_mmq.cu on the emulator (tools/emu/emu.h) against their twins
// in model/quants.c: the q8_1 blocks bit for bit, mmvq bit for bit (f32 and bf16), mmq within the
// f32 ordering bound. Small shapes with tails (rows past a tile, tokens past a tile, batches).
// Built and run by `make emu`.
#include "emu.h"
#include "emu_rand.h"

#include <cstdio>
#include <cstdlib>
#include <vector>

#undef __shared__
#define __shared__ static
#include "kernels/q2k_mmq.cu"
#include "kernels/q2k_mmvq.cu"
#include "kernels/q8_1.cu"

extern "C" {
#include "model/quants.h"
#include "ref/numerics.h"
}

static int g_fail;

static void random_q2k(std::vector<AsBlockQ2K> &w)
{
    for (auto &b : w) {
        for (auto &s : b.scales) s = (uint8_t)rnd();
        for (auto &q : b.qs) q = (uint8_t)rnd();
        b.d = as_fp32_to_fp16(0.001f + 0.02f * (float)(rnd() >> 40) / 16777216.0f);
        b.dmin = as_fp32_to_fp16(0.001f + 0.02f * (float)(rnd() >> 40) / 16777216.0f);
    }
}

// x [batch][m][n_in] bf16 -> q8_1 on the emulator; checked against the twin.
static std::vector<AsBlockQ8_1> quantize(const std::vector<uint16_t> &xb, int rows, int n)
{
    const int nbk = n / 32;
    std::vector<AsBlockQ8_1> y((size_t)rows * nbk), want((size_t)rows * nbk);
    const int64_t grid = ((int64_t)rows * nbk + 7) / 8;
    emu::launch(dim3((unsigned)grid), dim3(kQ8Threads), [&] { q8_1_kernel(xb.data(), n, rows, nbk, y.data(), nbk); });
    std::vector<float> xf(n);
    int64_t bad = 0;
    for (int r = 0; r < rows; r++) {
        for (int i = 0; i < n; i++) xf[i] = as_bf16_to_f32(xb[(size_t)r * n + i]);
        as_quantize_row_q8_1(xf.data(), &want[(size_t)r * nbk], n);
    }
    for (size_t i = 0; i < y.size(); i++)
        if (memcmp(&y[i], &want[i], sizeof y[i]) && bad++ < 3)
            printf("    q8_1 block %zu: d %04x/%04x s %04x/%04x\n", i, y[i].d, want[i].d, y[i].s, want[i].s);
    printf("%s q8_1 %d rows x %d: %lld bad blocks\n", bad ? "FAIL" : "ok  ", rows, n, (long long)bad);
    g_fail += bad != 0;
    return y;
}

static void run(int n_out, int n_in, int m, int batch, bool mmq, int R, int W, bool y_f32, bool b4 = false)
{
    const int nb = n_in / 256, nx = n_in / 32;
    std::vector<AsBlockQ2K> w((size_t)batch * n_out * nb);
    random_q2k(w);
    std::vector<uint16_t> xb((size_t)batch * m * n_in);
    for (auto &v : xb) v = as_bf16_bits(urnd_f32(2.0f));
    std::vector<AsBlockQ8_1> xq = quantize(xb, batch * m, n_in);
    // layout: W_b = W + b n_out nb; x_b rows t at b m nx + t nx; y[b][t][o]
    std::vector<float> yf((size_t)batch * m * n_out, NAN);
    std::vector<uint16_t> yb((size_t)batch * m * n_out, 0x7fc1);
    if (mmq) {
        q2k::Args a{w.data(), nb, (int64_t)n_out * nb, n_out, n_in, xq.data(), nx, (int64_t)m * nx, m,
                    y_f32 ? (void *)yf.data() : (void *)yb.data(), n_out, (int64_t)m * n_out, y_f32 ? 1 : 0,
                    !b4 && mmq_b16(xq.data(), nx, (int64_t)m * nx, batch) ? 1 : 0};
        emu::launch(dim3((unsigned)((n_out + kBM - 1) / kBM), (unsigned)((m + kBN - 1) / kBN), (unsigned)batch),
                    dim3(kMqThreads), [&] { q2k_mmq_kernel(a); });
    } else {
        q2k::Args a{w.data(), nb, (int64_t)n_out * nb, n_out, n_in, xq.data(), nx, (int64_t)m * nx, m,
                    y_f32 ? (void *)yf.data() : (void *)yb.data(), n_out, (int64_t)m * n_out, y_f32 ? 1 : 0, 0};
        const int gpb = kWarps / W, groups = (n_out + R - 1) / R;
        const dim3 grid((unsigned)((groups + gpb - 1) / gpb), (unsigned)batch);
        auto go = [&](auto kern) { emu::launch(grid, dim3(kThreads), [&] { kern(a, W); }); };
        const int M = m <= 1 ? 1 : m <= 2 ? 2 : m <= 4 ? 4 : 8;
#define CASE(r, mm) if (R == r && M == mm) go(q2k_mmvq_kernel<r, mm>);
        CASE(1, 1) CASE(1, 2) CASE(1, 4) CASE(1, 8) CASE(2, 1) CASE(2, 2) CASE(2, 4) CASE(2, 8)
        CASE(4, 1) CASE(4, 2) CASE(4, 4) CASE(4, 8)
#undef CASE
    }
    int64_t bad = 0, exact = 0;
    double worst = 0;
    for (int b = 0; b < batch; b++)
        for (int t = 0; t < m; t++)
            for (int o = 0; o < n_out; o++) {
                const AsBlockQ2K *row = &w[((size_t)b * n_out + o) * nb];
                const AsBlockQ8_1 *xr = &xq[((size_t)b * m + t) * nx];
                const float want = as_vec_dot_q2_K_q8_1(row, xr, nb);
                // magnitude: sum over weights of (d sc q + dmin mn) d8 |u|
                double mag = 0;
                std::vector<float> wf(n_in);
                for (int kb = 0; kb < nb; kb++)
                    for (int i = 0; i < 256; i++) {
                        const AsBlockQ2K &q = row[kb];
                        const int sc = q.scales[i / 16];
                        const int qq = (q.qs[32 * (i / 128) + i % 32] >> (2 * ((i % 128) / 32))) & 3;
                        const AsBlockQ8_1 &xa = xr[kb * 8 + i / 32];
                        mag += ((double)as_fp16_to_fp32(q.d) * (sc & 15) * qq +
                                (double)as_fp16_to_fp32(q.dmin) * (sc >> 4)) *
                               as_fp16_to_fp32(xa.d) * std::abs((int)xa.qs[i % 32]);
                    }
                const size_t off = ((size_t)b * m + t) * n_out + o;
                const double got = y_f32 ? (double)yf[off] : (double)as_bf16_to_f32(yb[off]);
                const double wv = y_f32 ? (double)want : (double)as_bf16(want);
                const double err = fabs(got - wv), tol = y_f32 ? 0x1p-20 * mag : fmax(0x1p-8 * fabs(wv), 0x1p-20 * mag);
                exact += got == wv;
                if (!(err <= tol) || (!mmq && W == 1 && got != wv)) {
                    if (bad++ < 4)
                        printf("    b %d t %d o %d: got %.9g want %.9g (mag %.3g)\n", b, t, o, got, wv, mag);
                } else if (tol > 0 && err / tol > worst)
                    worst = err / tol;
            }
    const int64_t total = (int64_t)batch * m * n_out;
    printf("%s %s%s %dx%d m %d batch %d R%d W%d y %s: %lld/%lld exact, worst err/bound %.3f, %lld bad\n",
           bad ? "FAIL" : "ok  ", mmq ? "mmq " : "mmvq", b4 ? " (4-byte B copies)" : "", n_out, n_in, m, batch, R, W,
           y_f32 ? "f32" : "bf16",
           (long long)exact, (long long)total, worst, (long long)bad);
    g_fail += bad != 0;
}

int main()
{
    g_rs = 12345;
    run(37, 512, 3, 2, false, 4, 1, true);
    run(37, 768, 1, 1, false, 1, 1, true);
    run(9, 1280, 5, 1, false, 2, 1, false);
    run(33, 512, 8, 2, false, 4, 1, true);
    run(20, 1024, 2, 1, false, 1, 4, true); // W = 4: another order, ordering bound only
    run(130, 512, 40, 2, true, 0, 0, true);
    run(17, 256, 9, 1, true, 0, 0, false);
    run(128, 768, 32, 1, true, 0, 0, true);
    run(70, 512, 33, 2, true, 0, 0, true, true);
    printf("%d failed\n", g_fail);
    return g_fail != 0;
}
