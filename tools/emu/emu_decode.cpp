// The decode-graph kernels on the emulator: kernels/row_pipe.cu against the chain of the
// separate kernels' semantics (rmsnorm in rmsnorm.cu's summation order, ref/rope.c's rotation,
// ref/quant.c's quantisers, the scale, the ring / cache stores), bit for bit; and
// kernels/build_idx.cu's decode kernel (window selection + idx, by value and from device
// parameters) against ref/window.c and build_idx's rule.
#include "emu.h"
#include "emu_rand.h"

#include <cstdio>
#include <cstdlib>
#include <vector>

namespace {
alignas(128) uint8_t smem[232448];
}
#include "kernels/build_idx.cu"
#include "kernels/row_pipe.cu"

extern "C" {
#include "ref/numerics.h"
#include "ref/quant.h"
#include "ref/window.h"
}


static int g_fail;

// rmsnorm.cu's sum of squares: 256 per-thread strided sums, the warp xor tree (lane 0's value), the
// 8 warp partials added in order.
static float kernel_sumsq(const uint16_t *x, int n)
{
    float lane[256];
    for (int t = 0; t < 256; t++) {
        float acc = 0.0f;
        for (int i = t; i < n; i += 256) {
            const float v = as_bf16_to_f32(x[i]);
            acc = acc + v * v;
        }
        lane[t] = acc;
    }
    float sum = 0.0f;
    for (int w = 0; w < 8; w++) {
        float a[32];
        for (int l = 0; l < 32; l++)
            a[l] = lane[w * 32 + l];
        for (int o = 16; o > 0; o >>= 1) {
            float b[32];
            for (int l = 0; l < 32; l++)
                b[l] = a[l] + a[l ^ o];
            for (int l = 0; l < 32; l++)
                a[l] = b[l];
        }
        sum = sum + a[0];
    }
    return sum;
}

struct Case {
    const char *name;
    int rows, heads, n, ldx_pad, ldy_pad;
    bool inplace, norm;
    int rd;
    int pos_mode; // 0: pos0 + row, 1: pos array, 2: one device position (rows 1)
    int pos0;
    bool inverse;
    int quant;
    float post_scale;
    bool pre;
    int store_mode, ring, ring_shift, row0;
    bool row0_dev;
    int special; // 1: zero rows, NaN / inf / -0 values sprinkled
};

static void run(const Case &c, uint64_t seed)
{
    g_rs = seed;
    const int maxpos = 4096, half = c.rd / 2;
    std::vector<float> cos_t((size_t)maxpos * (half ? half : 1)), sin_t(cos_t.size());
    for (size_t i = 0; i < cos_t.size(); i++) {
        cos_t[i] = urnd_f32(1.0f);
        sin_t[i] = urnd_f32(1.0f);
    }
    const int64_t width = (int64_t)c.heads * c.n, ldx = width + c.ldx_pad, ldy = c.inplace ? ldx : width + c.ldy_pad;
    std::vector<uint16_t> x((size_t)c.rows * ldx), y, pre((size_t)c.rows * width, 0x7f7f);
    for (auto &v : x)
        v = as_bf16_bits(urnd_f32(3.0f) * (rnd() % 5 == 0 ? 64.0f : 1.0f));
    if (c.special) {
        for (int i = 0; i < c.n; i++)
            x[i] = 0; // sub-row 0: zeros
        for (size_t i = 0; i < x.size(); i += 37) {
            const uint16_t sp[5] = {0x7fc1 /* NaN */, 0xff81 /* sNaN-ish payload */, 0x7f80 /* inf */, 0x8000 /* -0 */,
                                    0x0001 /* subnormal */};
            x[i] = sp[(i / 37) % 5];
        }
    }
    std::vector<float> w(c.n);
    for (auto &v : w)
        v = urnd_f32(2.0f);
    std::vector<int32_t> pos(c.rows);
    for (int r = 0; r < c.rows; r++)
        pos[r] = c.pos_mode == 1 ? (int)(rnd() % maxpos) : c.pos0 + r;
    if (c.pos_mode == 1 && c.rows > 2)
        pos[1] = -1; // not rotated
    const int store_rows = c.store_mode == AS_STORE_RING ? c.ring : c.row0 + c.rows + 3;
    std::vector<uint16_t> store((size_t)store_rows * width + 8), store_want;
    for (auto &v : store)
        v = as_bf16_bits(urnd_f32(1.0f));
    store_want = store;
    int32_t row0_dev = c.row0;
    // expected, sub-row by sub-row
    std::vector<uint16_t> y_want((size_t)c.rows * ldy), pre_want((size_t)c.rows * width, 0x7f7f);
    if (!c.inplace) {
        y.assign((size_t)c.rows * ldy, 0x7f7f);
        for (auto &v : y)
            v = as_bf16_bits(urnd_f32(1.0f));
        y_want = y;
    } else {
        y_want = x;
    }
    for (int r = 0; r < c.rows; r++)
        for (int h = 0; h < c.heads; h++) {
            const uint16_t *xr = x.data() + (size_t)r * ldx + (size_t)h * c.n;
            std::vector<uint16_t> v(xr, xr + c.n);
            if (c.norm) {
                const float sum = kernel_sumsq(xr, c.n);
                const float inv = 1.0f / std::sqrt(sum / (float)c.n + 1e-6f);
                for (int i = 0; i < c.n; i++)
                    v[i] = as_bf16_bits(w[i] * (as_bf16_to_f32(xr[i]) * inv));
            }
            const int p = pos[r];
            if (c.rd > 0 && p >= 0) {
                for (int k = 0; k < half; k++) {
                    const float co = cos_t[(size_t)p * half + k];
                    float si = sin_t[(size_t)p * half + k];
                    if (c.inverse)
                        si = -si;
                    uint16_t *z = v.data() + (c.n - c.rd) + 2 * k;
                    const float x0 = as_bf16_to_f32(z[0]), x1 = as_bf16_to_f32(z[1]);
                    const float re = x0 * co - x1 * si, im = x0 * si + x1 * co;
                    z[0] = as_bf16_bits(re);
                    z[1] = as_bf16_bits(im);
                }
            }
            if (c.pre)
                for (int i = 0; i < c.n; i++)
                    pre_want[(size_t)r * width + (size_t)h * c.n + i] = v[i];
            if (c.quant) {
                std::vector<float> f(c.n);
                for (int i = 0; i < c.n; i++)
                    f[i] = as_bf16_to_f32(v[i]);
                if (c.quant == AS_KQ_FP8)
                    as_fp8_quant(f.data(), c.n, 32);
                else if (c.quant == AS_KQ_FP4_E8M0)
                    as_fp4_quant_e8m0(f.data(), c.n, 32);
                else
                    as_fp4_quant_e4m3(f.data(), c.n, 16);
                for (int i = 0; i < c.n; i++)
                    v[i] = as_bf16_bits(f[i]);
            }
            if (c.post_scale != 1.0f)
                for (int i = 0; i < c.n; i++)
                    v[i] = as_bf16_bits(as_bf16_to_f32(v[i]) * c.post_scale);
            for (int i = 0; i < c.n; i++)
                y_want[(size_t)r * ldy + (size_t)h * c.n + i] = v[i];
            int64_t slot = -1;
            if (c.store_mode == AS_STORE_ROWS)
                slot = c.row0 + r;
            else if (c.store_mode == AS_STORE_RING && r >= c.rows - c.ring && p >= 0)
                slot = ((int64_t)p + c.ring_shift) % c.ring;
            if (slot >= 0)
                for (int i = 0; i < c.n; i++)
                    store_want[(size_t)slot * width + (size_t)h * c.n + i] = v[i];
        }
    // the kernel
    AsRowPipe p{};
    p.x = x.data();
    p.ldx = ldx;
    p.y = c.inplace ? x.data() : y.data();
    p.ldy = ldy;
    p.pre = c.pre ? pre.data() : nullptr;
    p.rows = c.rows;
    p.heads = c.heads;
    p.n = c.n;
    p.norm_w = c.norm ? w.data() : nullptr;
    p.eps = 1e-6f;
    p.rd = c.rd;
    p.pos0 = c.pos0;
    p.pos = c.pos_mode ? pos.data() : nullptr;
    p.cos_t = cos_t.data();
    p.sin_t = sin_t.data();
    p.inverse = c.inverse;
    p.quant = c.quant;
    p.post_scale = c.post_scale;
    p.store_mode = c.store_mode;
    p.store = c.store_mode ? store.data() : nullptr;
    p.store_ld = width;
    p.row0 = c.row0_dev ? -1 : c.row0;
    p.row0_d = c.row0_dev ? &row0_dev : nullptr;
    p.ring = c.ring;
    p.ring_shift = c.ring_shift;
    emu::smem_base = smem;
    auto body = [&] {
        switch (c.quant) {
        case 0: row_pipe_kernel<0>(p); break;
        case AS_KQ_FP8: row_pipe_kernel<AS_KQ_FP8>(p); break;
        case AS_KQ_FP4_E8M0: row_pipe_kernel<AS_KQ_FP4_E8M0>(p); break;
        default: row_pipe_kernel<AS_KQ_FP4_E4M3>(p); break;
        }
    };
    emu::launch(dim3((unsigned)(c.rows * c.heads)), dim3(256), body);
    const std::vector<uint16_t> &y_got = c.inplace ? x : y;
    long bad = 0;
    auto cmp = [&](const char *what, const std::vector<uint16_t> &got, const std::vector<uint16_t> &want) {
        for (size_t i = 0; i < want.size(); i++)
            if (got[i] != want[i] && bad++ < 4)
                printf("    %s[%zu]: got 0x%04x, want 0x%04x\n", what, i, got[i], want[i]);
    };
    cmp("y", y_got, y_want);
    if (c.pre)
        cmp("pre", pre, pre_want);
    cmp("store", store, store_want);
    printf("%s row_pipe %-44s rows %d heads %d n %d: %ld differ\n", bad ? "FAIL" : "ok  ", c.name, c.rows, c.heads,
           c.n, bad);
    g_fail += bad != 0;
}

// build_idx_decode_kernel against ref/window.c's decode selection and build_idx's rule.
static void run_idx(int win, int sp, int k, int kmax, int nrows, bool dev, uint64_t seed)
{
    g_rs = seed;
    std::vector<int32_t> csel(kmax + 1), widx(win, 12345), idx(win + kmax, 12345), wwant(win);
    for (auto &v : csel)
        v = (int)(rnd() % (uint64_t)(nrows + 8)) - 2; // some -1.., some >= nrows
    as_window_select_decode(wwant.data(), win, sp);
    int bad = 0, bad_want = 0;
    unsigned long long valid = 0, valid_want = 0;
    std::vector<int32_t> iwant(win + kmax);
    for (int i = 0; i < win + kmax; i++) {
        int32_t v = i < win ? wwant[i] : i - win < k ? csel[i - win] : -1;
        if (v >= nrows)
            bad_want = 1, v = -1;
        valid_want += v >= 0;
        iwant[i] = v;
    }
    const int32_t sp_d = sp, k_d = k, nrows_d = nrows;
    emu::launch(dim3(2), dim3(64), [&] {
        build_idx_decode_kernel(widx.data(), win, dev ? -7 : sp, dev ? &sp_d : nullptr, csel.data(), dev ? -7 : k,
                                dev ? &k_d : nullptr, kmax, dev ? -7 : nrows, dev ? &nrows_d : nullptr, idx.data(), &bad,
                                &valid);
    });
    long diff = bad != bad_want || valid != valid_want;
    for (int i = 0; i < win; i++)
        diff += widx[i] != wwant[i];
    for (int i = 0; i < win + kmax; i++)
        diff += idx[i] != iwant[i];
    printf("%s build_idx_decode win %d sp %d k %d/%d nrows %d %s: %ld differ (bad %d/%d, valid %llu/%llu)\n",
           diff ? "FAIL" : "ok  ", win, sp, k, kmax, nrows, dev ? "device params" : "by value", diff, bad, bad_want,
           valid, valid_want);
    g_fail += diff != 0;
}

int main()
{
    const Case cases[] = {
        // name rows heads n ldx_pad ldy_pad inplace norm rd pos_mode pos0 inverse quant post pre store ring shift row0 row0_dev special
        {"kv prefill: norm rope fp8 ring (3 rows, ring 4)", 3, 1, 512, 0, 0, true, true, 64, 0, 0, false, AS_KQ_FP8, 1.0f,
         true, AS_STORE_RING, 4, 0, 0, false, 0},
        {"kv prefill past the ring (20 rows, ring 8)", 20, 1, 64, 0, 0, true, true, 16, 0, 0, false, AS_KQ_FP8, 1.0f, true,
         AS_STORE_RING, 8, 0, 0, false, 0},
        {"kv decode: device position, ring shift 1", 1, 1, 512, 0, 0, true, true, 64, 1, 0, false, AS_KQ_FP8, 1.0f, true,
         AS_STORE_RING, 128, 1, 0, false, 0},
        {"index keys: norm rope e8m0, rows at device row0", 3, 1, 128, 0, 0, true, true, 64, 1, 0, false, AS_KQ_FP4_E8M0,
         1.0f, true, AS_STORE_ROWS, 0, 0, 5, true, 0},
        {"latents: rope e4m3 x2, out of place, rows at row0", 3, 1, 512, 0, 8, false, false, 64, 1, 0, false,
         AS_KQ_FP4_E4M3, 2.0f, true, AS_STORE_ROWS, 0, 0, 2, false, 0},
        {"index queries: 4 heads, padded rows, rope e8m0", 2, 4, 128, 64, 0, true, false, 64, 0, 100, false,
         AS_KQ_FP4_E8M0, 1.0f, true, AS_STORE_NONE, 0, 0, 0, false, 0},
        {"o: 3 heads, inverse rope, out of place", 2, 3, 512, 0, 0, false, false, 64, 0, 7, true, 0, 1.0f, false,
         AS_STORE_NONE, 0, 0, 0, false, 0},
        {"n 48, e4m3 (lanes past n)", 2, 1, 48, 0, 0, true, true, 16, 0, 3, false, AS_KQ_FP4_E4M3, 1.0f, true,
         AS_STORE_NONE, 0, 0, 0, false, 0},
        {"specials: zeros, NaN, inf, -0, subnormal; no norm", 2, 2, 64, 0, 0, true, false, 16, 0, 1, false, 0, 1.0f, true,
         AS_STORE_NONE, 0, 0, 0, false, 1},
        {"specials with norm and fp8", 2, 1, 64, 0, 0, true, true, 16, 0, 1, false, AS_KQ_FP8, 1.0f, true, AS_STORE_NONE,
         0, 0, 0, false, 1},
        {"n 640 (3 passes of 256), norm e8m0", 1, 1, 640, 0, 0, true, true, 64, 0, 4000, false, AS_KQ_FP4_E8M0, 1.0f, true,
         AS_STORE_NONE, 0, 0, 0, false, 0},
    };
    uint64_t seed = 1;
    for (const Case &c : cases)
        run(c, seed++);
    // window + idx: before the ring is full, at the wrap, far past it; k below / at kmax; refusals
    run_idx(8, 1, 2, 8, 8 + 3, false, 11);
    run_idx(8, 1, 2, 8, 8 + 3, true, 11);
    run_idx(8, 7, 8, 8, 8 + 40, true, 12);
    run_idx(8, 8, 5, 8, 8 + 2, true, 13);
    run_idx(128, 4097, 512, 512, 128 + 2049, true, 14);
    run_idx(128, 4097, 300, 512, 128 + 2049, true, 15);
    run_idx(128, 300, 0, 0, 128, true, 16);
    run_idx(128, 127, 77, 512, 128 + 64, false, 17);
    printf("%d failed\n", g_fail);
    return g_fail != 0;
}
