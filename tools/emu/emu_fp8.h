// The fp8 kernels' emulator checks (emu_fp8_quant.cpp, emu_fp8_gemv.cpp, emu_fp8_gemm.cpp): fp8 weights
// with e8m0 block scales and activations, random or on the exact grid of tests/lib/fp8_cases.h (every
// 32-wide block's sum exact), and the per-element rule: exact, one bf16 ulp, or 2^-16 of sum |terms|.
#pragma once

#include "emu_rand.h"

#include <cmath>
#include <cstdio>
#include <vector>

extern "C" {
#include "model/fp8_form.h"
#include "model/weights.h"
#include "ref/quant.h"
}

struct EmuFp8W {
    std::vector<uint8_t> codes, sc;
    std::vector<float> ws; // the fp8 form's scales (model/fp8_form.h)
    AsWTensor w{}, scale{};
    int64_t ldws = 0;
};

// rows x cols codes, e8m0 scales of block B (2^-10 .. 2^-3); grid: magnitudes 1 .. 1.875.
inline void emu_fp8w(EmuFp8W &f, int rows, int cols, int B, bool grid)
{
    f.codes.resize((size_t)rows * cols);
    for (auto &c : f.codes) {
        const uint8_t r = (uint8_t)(rnd() >> 56);
        c = grid ? (uint8_t)((r & 0x80) | (7 << 3) | (r & 7)) : ((r & 0x7f) == 0x7f ? 0x7e : r);
    }
    const int sr = (rows + B - 1) / B, scc = (cols + B - 1) / B;
    f.sc.resize((size_t)sr * scc);
    for (auto &s : f.sc)
        s = (uint8_t)(117 + rnd() % 8);
    f.scale = AsWTensor{};
    f.scale.dtype = AS_DT_F8_E8M0, f.scale.ndim = 2, f.scale.shape[0] = sr, f.scale.shape[1] = scc;
    f.scale.data = f.sc.data(), f.scale.nbytes = (int64_t)f.sc.size();
    f.w = AsWTensor{};
    f.w.dtype = AS_DT_F8_E4M3, f.w.ndim = 2, f.w.shape[0] = rows, f.w.shape[1] = cols;
    f.w.data = f.codes.data(), f.w.nbytes = (int64_t)f.codes.size(), f.w.scale = &f.scale, f.w.block = B;
    snprintf(f.w.name, sizeof f.w.name, "emu.fp8");
    f.ldws = as_fp8_form_ldws(cols);
    f.ws.assign((size_t)(as_fp8_form_scale_rows(rows) * f.ldws), -1.0f);
    as_fp8_form_scales(&f.w, f.ws.data());
}

// s rows of n activations (bf16 values): grid (act_quant codes v in +-{256..448}, one 448 a block, scale
// 2^e), or random with a magnitude per block.
inline std::vector<float> emu_fp8_x(int s, int n, bool grid)
{
    std::vector<float> x((size_t)s * n);
    for (int b = 0; b < s * n / 32; b++) {
        const int e = grid ? -14 + (int)(rnd() % 9) : -8 + (int)(rnd() % 12);
        const int top = (int)(rnd() % 32);
        for (int i = 0; i < 32; i++) {
            const uint64_t v = rnd();
            if (grid) {
                const float q = i == top ? 448.0f : 256.0f + 32.0f * (float)(v % 7);
                x[(size_t)b * 32 + i] = ldexpf((v >> 8) & 1 ? -q : q, e);
            } else {
                x[(size_t)b * 32 + i] = as_bf16(ldexpf(urnd_f32(1.0f), e));
            }
        }
    }
    return x;
}

// act_quant of s rows of n (the reference's): the codes [s][n] and the scales [s][lds] (padding 0).
inline void emu_fp8_act(const std::vector<float> &x, int s, int n, int lds, std::vector<uint8_t> &xq,
                        std::vector<float> &sx)
{
    xq.assign((size_t)s * n, 0);
    sx.assign((size_t)s * lds, 0.0f);
    std::vector<float> q(n);
    for (int t = 0; t < s; t++) {
        as_act_quant(&x[(size_t)t * n], n, q.data(), &sx[(size_t)t * lds]);
        for (int i = 0; i < n; i++) xq[(size_t)t * n + i] = as_e4m3_bits(q[i]);
    }
}

// sum_k sum_{i in k} |xq w| sx ws per output (act_quant: the fp8 linear), or |x w| (bf16 x).
inline double emu_fp8_mag(const float *x, const EmuFp8W &f, int o, bool act)
{
    const int64_t n = as_wt_cols(&f.w);
    std::vector<float> xq(n), sx(n / 32), wr(n);
    if (act)
        as_act_quant(x, n, xq.data(), sx.data());
    as_wt_rows_f32(&f.w, o, 1, wr.data());
    double m = 0;
    for (int64_t i = 0; i < n; i++)
        m += act ? fabs((double)xq[i] * wr[i]) * sx[i / 32] : fabs((double)x[i] * wr[i]);
    return m;
}

// The rule; returns 1 for a bad element (and reports it when *shown < 3).
inline int emu_fp8_bad(uint16_t got, float want, double mag, int *shown, const char *what, int t, int o)
{
    const uint16_t wb = as_bf16_bits(want);
    auto ord = [](uint16_t b) { return b & 0x8000 ? -(int64_t)(b & 0x7fff) : (int64_t)b; };
    const double err = fabs((double)as_bf16_to_f32(got) - as_bf16_to_f32(wb));
    if (got == wb || llabs(ord(got) - ord(wb)) <= 1 || err <= 0x1p-16 * mag)
        return 0;
    if ((*shown)++ < 3)
        printf("    %s t %d o %d: got %.9g want %.9g (mag %.3g)\n", what, t, o, as_bf16_to_f32(got), as_bf16_to_f32(wb), mag);
    return 1;
}
