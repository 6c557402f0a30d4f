// kernels/topk_select.cu on the emulator: the block's emulation of libstdc++'s introselect / heap
// select against ref/topk.c (as_topk_torch_set) on rows built to stress the tie order (bf16 values on
// a narrow range, runs of -inf, NaN, all equal, both of torch's branches, the depth limit), the
// indexer's selection against ref/indexer.c + the candidate mask, and the candidate blocks against
// ref/candidates.c. Every set must be identical.
#include "emu.h"
#include "emu_rand.h"

#include <cstdio>
#include <cstdlib>
#include <vector>

// global (external linkage): the kernels' block-scope `extern __shared__ smem[]` names it
alignas(128) uint8_t smem[232448];
#include "kernels/topk_select.cu"

extern "C" {
#include "ref/candidates.h"
#include "ref/indexer.h"
#include "ref/topk.h"
}

static int g_fail, g_cases;
// the launchers' block (kTopkThreads, host side of topk_select.cu), or EMU_TOPK_BLOCK (32: one warp)
static const unsigned kBlock = getenv("EMU_TOPK_BLOCK") ? (unsigned)atoi(getenv("EMU_TOPK_BLOCK")) : 256;
// the longest range introselect leaves to the first warp (the launchers' kTopkWarpRange, 128), or
// EMU_TOPK_WARP_RANGE (0: the block throughout)
static const int kWarpRange = getenv("EMU_TOPK_WARP_RANGE") ? atoi(getenv("EMU_TOPK_WARP_RANGE")) : 128;
static unsigned long long g_stats[AS_TOPK_NSTATS];

enum Dist { DISTINCT, NARROW_BF16, MASKED, WITH_NAN, ALL_EQUAL, SORTED_UP, SORTED_DOWN, NDIST };
static const char *dist_name[] = {"distinct", "narrow-bf16", "masked", "nan", "all-equal", "rising", "falling"};

static void fill(std::vector<float> &v, Dist d)
{
    const int n = (int)v.size();
    for (int i = 0; i < n; i++) {
        switch (d) {
        case DISTINCT: v[i] = urnd_f32(4.0f); break;
        case NARROW_BF16: v[i] = as_bf16(1.0f + urnd_f32(0.05f)); break; // ~26 bf16 values: ties everywhere
        case MASKED: v[i] = (rnd() & 3) ? -INFINITY : as_bf16(urnd_f32(1.0f)); break;
        case WITH_NAN: v[i] = (rnd() % 7 == 0) ? NAN : as_bf16(urnd_f32(1.0f)); break;
        case ALL_EQUAL: v[i] = -INFINITY; break;
        case SORTED_UP: v[i] = as_bf16((float)(i / 3)); break;
        case SORTED_DOWN: v[i] = as_bf16((float)((n - i) / 3)); break;
        default: break;
        }
    }
}

static void check_rows(int n, int k, Dist d, int rows)
{
    std::vector<float> v((size_t)n * rows);
    std::vector<float> one(n);
    for (int t = 0; t < rows; t++) {
        fill(one, d);
        for (int i = 0; i < n; i++)
            v[(size_t)t * n + i] = one[i];
    }
    std::vector<int32_t> got((size_t)rows * (k > 0 ? k : 1), -9), want(k > 0 ? k : 1);
    emu::launch(dim3((unsigned)rows), dim3(kBlock), [&] { topk_rows_kernel(v.data(), n, k, got.data(), kWarpRange, g_stats); });
    for (int t = 0; t < rows; t++) {
        g_cases++;
        as_topk_torch_set(v.data() + (size_t)t * n, n, k, want.data(), nullptr);
        for (int j = 0; j < k; j++)
            if (got[(size_t)t * k + j] != want[j]) {
                if (g_fail++ < 10)
                    printf("FAIL topk rows n %d k %d (%s, %s) row %d: [%d] got %d, torch %d\n", n, k, dist_name[d],
                           (int64_t)k * 64 <= n ? "partial_sort" : "nth_element", t, j, got[(size_t)t * k + j],
                           want[j]);
                break;
            }
    }
}

// The indexer's selection: prefill rows (visibility (t + 1) / ratio) or one decode row, with and
// without a candidate mask, against the host path's code (mask, then as_index_topk).
// fine: the candidate flags change within 8-column chunks (the vector load's), not only between them
// idx_len > 0 (a decode row): the kernel also writes the attention's idx entries (build_idx_decode's
// rule with nrows rows attended), checked against that rule applied to the reference's selection.
static void check_index(int s, int width, int k, int ratio, bool prefill, bool masked, int offset, bool fine = false,
                        int idx_len = 0, int nrows = 0)
{
    std::vector<uint16_t> score((size_t)s * width);
    std::vector<uint8_t> cand((size_t)s * width);
    std::vector<float> ref((size_t)s * width);
    std::vector<int> clens(s);
    for (int t = 0; t < s; t++) {
        clens[t] = prefill ? (t + 1) / ratio : width;
        for (int p = 0; p < width; p++) {
            const float x = p >= clens[t] ? -INFINITY : as_bf16(urnd_f32(0.1f)); // scores of a few binades
            score[(size_t)t * width + p] = as_bf16_bits(x);
            cand[(size_t)t * width + p] = (uint8_t)(((fine ? p * 5 : p / 8) + t) % 3 != 0);
            ref[(size_t)t * width + p] = masked && !cand[(size_t)t * width + p] ? -INFINITY : x;
        }
    }
    std::vector<int32_t> got((size_t)s * k, -9), got2((size_t)s * k, -9), want((size_t)s * k);
    std::vector<int32_t> idx((size_t)idx_len + 8, -9);
    int bad = 0;
    unsigned long long valid = 0;
    const int32_t width_d = width, k_d = k, nrows_d = nrows;
    const bool dev = !prefill; // a decode reads width and k from the step parameters
    const TopkIdxOut io = {idx_len ? idx.data() : nullptr, idx_len, -7, &nrows_d, &bad, &valid};
    emu::launch(dim3((unsigned)s), dim3(kBlock), [&] {
        index_topk_kernel(score.data(), width, dev ? -7 : width, dev ? &width_d : nullptr, dev ? -7 : k,
                          dev ? &k_d : nullptr, ratio, prefill, masked ? cand.data() : nullptr, width, offset,
                          got.data(), k, got2.data(), kWarpRange, g_stats, io);
    });
    as_index_topk(ref.data(), s, width, k, clens.data(), offset, want.data());
    g_cases++;
    for (size_t i = 0; i < got.size(); i++)
        if (got[i] != want[i] || got2[i] != want[i]) {
            if (g_fail++ < 10)
                printf("FAIL index topk s %d width %d k %d ratio %d %s%s: row %zu [%zu] got %d / %d, want %d\n", s,
                       width, k, ratio, prefill ? "prefill" : "decode", masked ? " masked" : "", i / k, i % k, got[i],
                       got2[i], want[i]);
            break;
        }
    if (idx_len) { // build_idx_decode's compressed part, from the reference's selection
        int want_bad = 0;
        unsigned long long want_valid = 0;
        for (int j = 0; j < idx_len + 8; j++) {
            int32_t v = j < k ? want[j] : j < idx_len ? -1 : -9;
            if (j < idx_len && v >= nrows) {
                want_bad = 1;
                v = -1;
            }
            want_valid += j < idx_len && v >= 0;
            if (idx[j] != v) {
                if (g_fail++ < 10)
                    printf("FAIL index topk idx (width %d k %d len %d nrows %d): [%d] got %d, want %d\n", width, k,
                           idx_len, nrows, j, idx[j], v);
                break;
            }
        }
        if (bad != want_bad || valid != want_valid) {
            if (g_fail++ < 10)
                printf("FAIL index topk idx (width %d k %d nrows %d): bad %d valid %llu, want %d / %llu\n", width, k,
                       nrows, bad, valid, want_bad, want_valid);
        }
    }
    for (size_t i = 0; i < score.size(); i++)
        if (as_bf16_to_f32(score[i]) != ref[i] && !(ref[i] != ref[i])) {
            if (g_fail++ < 10)
                printf("FAIL index topk: masked score [%zu] %g, want %g\n", i, as_bf16_to_f32(score[i]), ref[i]);
            break;
        }
}

static void check_cand(int s, int width, int ratio, bool prefill, int bs, int topk_blocks, bool ties)
{
    std::vector<uint16_t> score((size_t)s * width);
    std::vector<float> f((size_t)s * width);
    std::vector<int> clens(s);
    for (int t = 0; t < s; t++) {
        clens[t] = prefill ? (t + 1) / ratio : width;
        for (int p = 0; p < width; p++) {
            const float x = p >= clens[t] ? -INFINITY : as_bf16(ties ? 1.0f + urnd_f32(0.02f) : urnd_f32(1.0f));
            score[(size_t)t * width + p] = as_bf16_bits(x);
            f[(size_t)t * width + p] = x;
        }
    }
    std::vector<uint8_t> got((size_t)s * width, 7), want((size_t)s * width);
    emu::launch(dim3((unsigned)s), dim3(kBlock), [&] {
        candidate_blocks_kernel(score.data(), width, width, nullptr, ratio, prefill, bs, topk_blocks, got.data(), width,
                                kWarpRange, nullptr);
    });
    as_select_candidate_blocks(f.data(), s, width, clens.data(), bs, topk_blocks, want.data());
    g_cases++;
    for (size_t i = 0; i < got.size(); i++)
        if (got[i] != want[i]) {
            if (g_fail++ < 10)
                printf("FAIL candidate blocks s %d width %d bs %d kb %d %s: row %zu col %zu got %d want %d\n", s, width,
                       bs, topk_blocks, prefill ? "prefill" : "decode", i / width, i % width, got[i], want[i]);
            break;
        }
}

int main()
{
    emu::smem_base = smem;
    g_rs = 20261129;
    const int ns[] = {1, 2, 3, 4, 5, 7, 9, 16, 33, 64, 65, 100, 129, 257, 1000, 2048, 4096};
    for (int n : ns)
        for (int d = 0; d < NDIST; d++) {
            const int ks[] = {1, 2, 3, n / 64, n / 64 + 1, n / 8, n / 2, n - 1, n};
            for (int k : ks)
                if (k >= 1 && k <= n)
                    check_rows(n, k, (Dist)d, n >= 2048 ? 2 : 4);
        }
    printf("topk rows: %d rows, %d failed; stats: %llu selections, %llu tied at the cut, %llu partial_sort\n",
           g_cases, g_fail, g_stats[0], g_stats[1], g_stats[2]);
    const int rows_cases = g_cases;
    // the indexer: flash-like widths at decode, small prefills with visibility and masks, tiny's k
    check_index(1, 2048, 512, 2, false, false, 128);
    check_index(1, 4096, 512, 1, false, true, 128);
    check_index(1, 300, 4, 1, false, true, 8);
    check_index(1, 5, 5, 1, false, false, 8);
    check_index(40, 40, 16, 1, true, false, 40);
    check_index(40, 20, 16, 2, true, true, 40);
    check_index(13, 13, 4, 1, true, true, 8);
    check_index(300, 150, 64, 2, true, false, 128);
    // 16-byte-aligned rows through the 8-column loads (widths a multiple of 8), with tails, unaligned rows
    check_index(1, 4096, 512, 1, false, true, 128, true);
    check_index(1, 4095, 512, 1, false, true, 128, true);
    check_index(1, 2049, 512, 2, false, false, 128);
    check_index(1, 13, 4, 1, false, true, 8, true);
    check_index(24, 64, 16, 1, true, true, 64, true);
    check_index(17, 72, 9, 2, true, true, 72, true);
    // a decode row that also writes the attention's idx: every row attended, some not (bad), k short of
    // the launch's most
    check_index(1, 4096, 512, 1, false, true, 128, true, 512, 128 + 4096);
    check_index(1, 2048, 512, 2, false, false, 128, false, 512, 128 + 1500);
    check_index(1, 300, 300, 1, false, true, 128, true, 512, 128 + 300);
    // the candidate blocks: the real geometry (kb >= blocks: all kept), narrowing ones, ties among maxima
    check_cand(1, 4096, 1, false, 8, 2048, false);
    check_cand(1, 100, 1, false, 8, 4, true);
    check_cand(1, 101, 1, false, 8, 4, false);
    check_cand(40, 40, 1, true, 4, 3, true);
    check_cand(64, 64, 1, true, 2, 5, true);
    check_cand(20, 10, 2, true, 3, 2, false);
    printf("index / candidate selections: %d cases, %d failed in all\n", g_cases - rows_cases, g_fail);
    if (g_fail)
        printf("FAIL: %d\n", g_fail);
    else
        printf("topk_select: all %d cases identical to the reference\n", g_cases);
    return g_fail ? 1 : 0;
}
