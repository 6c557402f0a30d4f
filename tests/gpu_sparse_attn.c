/* kernels/sparse_attn.cu (as_k_sparse_attn) against its CPU twin as_sparse_attention
 * (ref/attention.c), SPEC 6 rule: max|got - want| <= max|want| * 2^-7 + 1e-4 over the tensor.
 * Both compute kernel.py's blockwise softmax (SPEC 3 step 7: blocks of 64 entries, the running max
 * from -1e30, bf16(p) against it into P.R, the f32 p into the denominator, the sink added at the end).
 *
 * Each case runs every path that applies: the automatic choice, the tensor-core kernel without a
 * split, with 3 splits and with a split per 64-entry tile (s <= 64), the per-(t, h) warp kernel
 * (s <= 64) and, on a compute capability 9.0 device, the wgmma kernel (hd 512: kernels/sparse_attn_wgmma.cu,
 * at every s, so also 1 token, partial 64-row tiles, 48 and 128 heads, wide selections); the automatic
 * launch runs twice and must give the same bits (a moving result is a race). Outputs are poisoned (bf16
 * NaN) before every launch. Each check prints the achieved max error and its ratio to the tolerance,
 * the worst element's coordinates, and the count of bit-exact elements. A path that does not split
 * the selection computes the twin's algorithm (what is left: the exponential's last bits, the order of
 * the sums, a bf16(p) or the output rounded the other way at a tie), so its ratio is far below 1; a split
 * rounds its bf16(p) against its own running max (the accepted deviation, docs/ENGINE.md): the test
 * prints the worst ratio of each kind apart. The automatic path splits at few queries (and at s = 1 it
 * is kernels/attn_decode.cu, a split per 64 entries).
 * Selections: the model's prefill (window of the chunk's own rows + compressed positions, -1 past
 * the query's visibility; also window only, as ratio-0 layers have it) and decode (ring oldest first, -1
 * for slots not yet written: leading -1) layouts, random with -1, leading -1, one valid entry per query,
 * whole rows of -1 (every third query, or all of them, also with a sink of -inf: o = 0, not 0 / 0), a
 * running max that grows between blocks (rows built to score ~5 and ~15 above the rest, in the second
 * and in a later block), na = 0, nb = 0, topk 1, 64, 65 and others not a multiple of the 64-row tile;
 * sinks ordinary, huge (o ~ 0), very negative and -inf; flash (64 heads x 512), partial and double head
 * blocks, other hd, and the tiny geometry (4 x 64). */
#include <cuda_runtime_api.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "ref/attention.h"
#include "ref/numerics.h"
#include "tests/lib/gpu_util.h"
#include "tests/lib/harness.h"
#include "tests/lib/kernel_shapes.h"

/* Not in kernels.h: path 0 auto / 1 warp kernel / 2 tensor-core kernel / 3 wgmma kernel; split -1 none / 0
 * auto / n. */
int as_k_sparse_attn_path(const as_bf16_t *q, const as_bf16_t *rows_a, int na, const as_bf16_t *rows_b, int nb,
                          const int32_t *idx, int topk, const float *sink, as_bf16_t *o, int s, int nh, int hd,
                          float scale, int path, int split, cudaStream_t st);

static void *xmalloc(size_t bytes)
{
    void *p = malloc(bytes ? bytes : 1);
    REQUIRE(p, "out of host memory (%zu bytes)", bytes);
    return p;
}

static uint64_t mix(uint64_t *s)
{
    uint64_t z = (*s += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}
static int rnd_int(uint64_t *s, int n) { return (int)(mix(s) % (uint64_t)n); }

typedef enum {
    SEL_PREFILL,      /* SPEC 3: window over the chunk's rows (na = s) + compressed, -1 past visibility */
    SEL_DECODE,       /* ring oldest first (-1 for slots > start_pos) + compressed positions */
    SEL_RANDOM,       /* uniform over na + nb rows, 1 in 8 entries -1 */
    SEL_LEADING_NEG,  /* the first half -1, then random rows */
    SEL_ONE_VALID,    /* all -1 but one entry at a random place */
    SEL_ALL_NEG_ROWS, /* random, every third query entirely -1 (o = 0) */
    SEL_ALL_NEG,      /* every entry of every query -1 (o = 0) */
    SEL_HOT,          /* random over all but the last 2 s rows; query t's hot rows (the last 2 s, built in
                       * run_attn to score ~5 and ~15 above the rest) at entries 64 + t % 64 and
                       * 128 + 7 t % (topk - 128), where the selection has them: the running max grows
                       * between blocks */
} SelKind;

typedef enum { SINK_NORMAL, SINK_HUGE, SINK_NEG, SINK_NEG_INF } SinkKind;

typedef struct {
    const char *name;
    int s, nh, hd, na, nb, topk;
    SelKind sel;
    SinkKind sink;
    float qa, ra;  /* q, rows uniform in [-qa, qa], [-ra, ra] (bf16) */
    int win;       /* SEL_PREFILL / SEL_DECODE: window; decode: na = win */
    int ratio;     /* SEL_PREFILL: compress ratio (visibility (t + 1) / ratio) */
    int start_pos; /* SEL_DECODE */
} AttnCase;

static int cmp_int(const void *a, const void *b) { return *(const int *)a - *(const int *)b; }

/* k sorted distinct positions of [0, n) (all of them when k >= n), -1 padded to k. */
static void pick_sorted(uint64_t *rs, int n, int k, int *out)
{
    int m = k < n ? k : n;
    int *perm = xmalloc(sizeof(int) * (size_t)(n > 0 ? n : 1));
    for (int i = 0; i < n; i++)
        perm[i] = i;
    for (int i = 0; i < m; i++) { /* partial Fisher-Yates */
        int j = i + rnd_int(rs, n - i), tmp = perm[i];
        perm[i] = perm[j], perm[j] = tmp;
    }
    qsort(perm, (size_t)m, sizeof(int), cmp_int);
    for (int i = 0; i < k; i++)
        out[i] = i < m ? perm[i] : -1;
    free(perm);
}

static void make_idx(const AttnCase *c, uint64_t seed, int32_t *idx)
{
    uint64_t rs = seed;
    const int s = c->s, topk = c->topk, nrows = c->na + c->nb;
    int *tmp = xmalloc(sizeof(int) * (size_t)(topk + 1));
    for (int t = 0; t < s; t++) {
        int32_t *row = idx + (int64_t)t * topk;
        switch (c->sel) {
        case SEL_PREFILL: {
            const int cols = s < c->win ? s : c->win, k = topk - cols;
            REQUIRE(k >= 0 && c->na == s, "%s: prefill layout needs na = s and topk >= min(s, win)", c->name);
            for (int j = 0; j < cols; j++) {
                int p = (t - c->win + 1 > 0 ? t - c->win + 1 : 0) + j;
                row[j] = p > t ? -1 : p;
            }
            const int clen = (t + 1) / c->ratio;
            pick_sorted(&rs, c->nb, k, tmp);
            for (int j = 0; j < k; j++)
                row[cols + j] = tmp[j] >= 0 && tmp[j] < clen ? tmp[j] + c->na : -1;
            break;
        }
        case SEL_DECODE: {
            const int win = c->win, sp = c->start_pos, k = topk - win;
            REQUIRE(k >= 0 && c->na == win, "%s: decode layout needs na = win and topk >= win", c->name);
            for (int j = 0; j < win; j++) {
                int slot = (sp % win + 1 + j) % win;
                row[j] = slot > sp ? -1 : slot;
            }
            pick_sorted(&rs, c->nb, k, tmp);
            for (int j = 0; j < k; j++)
                row[win + j] = tmp[j] >= 0 ? tmp[j] + c->na : -1;
            break;
        }
        case SEL_RANDOM:
        case SEL_ALL_NEG_ROWS:
            for (int j = 0; j < topk; j++)
                row[j] = rnd_int(&rs, 8) == 0 ? -1 : rnd_int(&rs, nrows);
            if (c->sel == SEL_ALL_NEG_ROWS && t % 3 == 1)
                for (int j = 0; j < topk; j++)
                    row[j] = -1;
            break;
        case SEL_LEADING_NEG:
            for (int j = 0; j < topk; j++)
                row[j] = j < topk / 2 ? -1 : rnd_int(&rs, nrows);
            break;
        case SEL_ONE_VALID: {
            for (int j = 0; j < topk; j++)
                row[j] = -1;
            row[rnd_int(&rs, topk)] = rnd_int(&rs, nrows);
            break;
        }
        case SEL_ALL_NEG:
            for (int j = 0; j < topk; j++)
                row[j] = -1;
            break;
        case SEL_HOT: {
            const int cold = nrows - 2 * s;
            REQUIRE(cold > 0, "%s: the hot layout needs more than 2 s rows", c->name);
            for (int j = 0; j < topk; j++)
                row[j] = rnd_int(&rs, 8) == 0 ? -1 : rnd_int(&rs, cold);
            if (topk > 64)
                row[64 + t % (topk - 64 < 64 ? topk - 64 : 64)] = cold + 2 * t;
            if (topk > 128)
                row[128 + 7 * t % (topk - 128)] = cold + 2 * t + 1;
            break;
        }
        }
    }
    free(tmp);
}

static int64_t ordered16(uint16_t b) { return b & 0x8000 ? -(int64_t)(b & 0x7fff) : (int64_t)b; }

typedef struct {
    int64_t bad, exact;
    double max_err, tol, max_rel;
} AttnCmp;

/* got: bf16 bits [s][nh][hd]; want: the twin's floats (bf16 values). */
static AttnCmp compare(const char *what, const uint16_t *got, const float *want, int s, int nh, int hd)
{
    const int64_t n = (int64_t)s * nh * hd;
    double maxw = 0;
    for (int64_t i = 0; i < n; i++)
        maxw = fmax(maxw, fabs(want[i]));
    AttnCmp r = {0, 0, 0, maxw * 0x1p-7 + 1e-4, 0};
    int64_t worst = -1;
    for (int64_t i = 0; i < n; i++) {
        const float g = as_bf16_to_f32(got[i]);
        const double err = isnan(g) ? INFINITY : fabs((double)g - want[i]);
        if (got[i] == as_bf16_bits(want[i]))
            r.exact++;
        if (err > r.max_err || worst < 0) {
            if (err > r.max_err)
                r.max_err = err;
            worst = i;
        }
        if (fabs(want[i]) > 1e-3 * maxw && !isnan(g))
            r.max_rel = fmax(r.max_rel, err / fabs(want[i]));
        if (!(err <= r.tol)) {
            if (r.bad < 5) {
                const int64_t t = i / ((int64_t)nh * hd), h = (int)(i / hd % nh), d = (int)(i % hd);
                as_test_note("%s: o[t=%lld][h=%lld][d=%lld]: got %.9g (0x%04x)%s, want %.9g, err %.3g > tol %.3g",
                             what, (long long)t, (long long)h, (long long)d, g, got[i],
                             isnan(g) ? " NaN: not written?" : "", want[i], err, r.tol);
            }
            r.bad++;
        }
    }
    if (worst >= 0) {
        const int64_t t = worst / ((int64_t)nh * hd), h = worst / hd % nh, d = worst % hd;
        const float g = as_bf16_to_f32(got[worst]);
        as_test_note("%s: max err %.3g = %.3f x tol (tol %.3g = max|want| %.4g * 2^-7 + 1e-4), max rel %.3g, worst "
                     "o[%lld][%lld][%lld] got %.7g want %.7g (%lld ulp), %lld/%lld bit-exact, %lld bad",
                     what, r.max_err, r.max_err / r.tol, r.tol, maxw, r.max_rel, (long long)t, (long long)h,
                     (long long)d, g, want[worst],
                     isnan(g) ? -1LL : (long long)llabs(ordered16(got[worst]) - ordered16(as_bf16_bits(want[worst]))),
                     (long long)r.exact, (long long)n, (long long)r.bad);
    }
    return r;
}

/* over every check of the test, reported at the end: the paths that take the selection whole (the twin's
 * algorithm) and those that split it */
static double g_worst_whole, g_worst_split;

/* AS_KTEST_SMALL=1 (for runs under compute-sanitizer): only the small cases. */
static int small_only(void)
{
    const char *e = getenv("AS_KTEST_SMALL");
    return e && *e && *e != '0';
}

static void run_attn(const AttnCase *c, uint64_t seed)
{
    if (small_only() && (c->s > 64 || (int64_t)c->s * c->topk > 8192)) {
        as_test_note("%s: skipped (AS_KTEST_SMALL)", c->name);
        return;
    }
    const int s = c->s, nh = c->nh, hd = c->hd, na = c->na, nb = c->nb, topk = c->topk;
    const int64_t nq = (int64_t)s * nh * hd, nrows = (int64_t)na + nb;
    float *q = xmalloc(sizeof(float) * (size_t)nq), *rows = xmalloc(sizeof(float) * (size_t)(nrows * hd + 1));
    float *sink = xmalloc(sizeof(float) * (size_t)nh), *want = xmalloc(sizeof(float) * (size_t)nq);
    int32_t *idx = xmalloc(sizeof(int32_t) * (size_t)((int64_t)s * topk + 1));
    as_fill_uniform(q, nq, c->qa, seed, 1);
    as_fill_uniform(rows, nrows * hd, c->ra, seed + 1, 1);
    as_fill_uniform(sink, nh, 2.0f, seed + 2, 1);
    for (int h = 0; h < nh; h++) {
        if (c->sink == SINK_HUGE)
            sink[h] = h % 2 ? 1000.0f : 12.0f; /* o == 0, or small but nonzero */
        else if (c->sink == SINK_NEG)
            sink[h] = -1000.0f;
        else if (c->sink == SINK_NEG_INF)
            sink[h] = -INFINITY;
    }
    if (c->sel == SEL_HOT) /* query t's hot rows: f / sqrt(nh) times the sum of its heads' q, f = 1.5 and 4 */
        for (int t = 0; t < s && 2 * t + 1 < nrows; t++)
            for (int k = 0; k < 2; k++) {
                float *hot = rows + (nrows - 2 * (int64_t)s + 2 * t + k) * hd;
                const float f = (k ? 4.0f : 1.5f) / sqrtf((float)nh);
                for (int d = 0; d < hd; d++) {
                    float sum = 0.0f;
                    for (int h = 0; h < nh; h++)
                        sum += q[((int64_t)t * nh + h) * hd + d];
                    hot[d] = as_bf16(f * sum);
                }
            }
    make_idx(c, seed + 3, idx);
    int64_t nvalid = 0;
    for (int64_t i = 0; i < (int64_t)s * topk; i++)
        nvalid += idx[i] >= 0;
    const float scale = (float)(1.0 / sqrt((double)hd));
    as_sparse_attention(q, rows, nrows, idx, topk, sink, want, s, nh, hd, scale);

    as_bf16_t *dq = as_gpu_bf16(q, nq);
    as_bf16_t *da = na ? as_gpu_bf16(rows, (int64_t)na * hd) : NULL;
    as_bf16_t *db = nb ? as_gpu_bf16(rows + (int64_t)na * hd, (int64_t)nb * hd) : NULL;
    float *dsink = as_gpu_f32(sink, nh);
    int32_t *didx = as_gpu_bytes(idx, sizeof(int32_t) * (size_t)((int64_t)s * topk + 1));
    as_bf16_t *dout = as_gpu_alloc(sizeof(uint16_t) * (size_t)nq);
    uint16_t *got = xmalloc(sizeof(uint16_t) * (size_t)nq), *got2 = xmalloc(sizeof(uint16_t) * (size_t)nq);

    const int fast = nh % 16 == 0 && (hd == 64 || hd == 128 || hd == 256 || hd == 512) && topk > 0;
    const int wgmma = as_k_sparse_attn_wgmma_applies(nh, hd, topk, dq, dout, da, na, db, nb);
    if (!wgmma && hd == 512 && nh % 16 == 0 && topk > 0)
        as_test_note("%s: the wgmma kernel does not run on this device (not compute capability 9.0)", c->name);
    struct {
        int path, split, whole; /* whole: one split (every topk here is <= 2048, one split's most) */
        const char *name;
    } variants[] = {{0, 0, 0, "auto"},          {2, -1, 1, "mma, 1 split"}, {2, 3, 0, "mma, 3 splits"},
                    {2, 1 << 20, 0, "mma, a split per tile"}, {1, 0, 1, "warp kernel"}, {3, -1, 1, "wgmma"}};
    for (int v = 0; v < 6; v++) {
        if (v >= 1 && v <= 3 && !fast)
            continue;
        if ((v == 2 || v == 3 || v == 4) && s > 64)
            continue;
        if (v == 5 && !wgmma)
            continue;
        char what[256];
        snprintf(what, sizeof what, "%s [%s] s=%d nh=%d hd=%d na=%d nb=%d topk=%d (%lld valid entries)", c->name,
                 variants[v].name, s, nh, hd, na, nb, topk, (long long)nvalid);
        REQUIRE(cudaMemset(dout, 0x7f, sizeof(uint16_t) * (size_t)nq) == cudaSuccess, "poison"); /* 0x7f7f: NaN */
        as_gpu_check_launch(as_k_sparse_attn_path(dq, da, na, db, nb, didx, topk, dsink, dout, s, nh, hd, scale,
                                                  variants[v].path, variants[v].split, 0),
                            what);
        as_gpu_get_bytes(got, dout, sizeof(uint16_t) * (size_t)nq);
        AttnCmp r = compare(what, got, want, s, nh, hd);
        CHECK(r.bad == 0, "%s: %lld of %lld outputs beyond the SPEC 6 tolerance (max err %.3g, tol %.3g)", what,
              (long long)r.bad, (long long)nq, r.max_err, r.tol);
        double *worst = variants[v].whole ? &g_worst_whole : &g_worst_split;
        if (r.max_err / r.tol > *worst)
            *worst = r.max_err / r.tol;
        if (v == 0) { /* the same launch again: the same bits */
            REQUIRE(cudaMemset(dout, 0x7f, sizeof(uint16_t) * (size_t)nq) == cudaSuccess, "poison");
            as_gpu_check_launch(as_k_sparse_attn_path(dq, da, na, db, nb, didx, topk, dsink, dout, s, nh, hd, scale,
                                                      0, 0, 0),
                                what);
            as_gpu_get_bytes(got2, dout, sizeof(uint16_t) * (size_t)nq);
            int64_t moved = 0, first = -1;
            for (int64_t i = 0; i < nq; i++)
                if (got[i] != got2[i] && moved++ == 0)
                    first = i;
            CHECK(moved == 0, "%s: a second launch changed %lld outputs (first at %lld: 0x%04x then 0x%04x): a race",
                  what, (long long)moved, (long long)first, first >= 0 ? got[first] : 0, first >= 0 ? got2[first] : 0);
        }
    }
    free(q), free(rows), free(sink), free(want), free(idx), free(got), free(got2);
    as_gpu_free(dq), as_gpu_free(da), as_gpu_free(db), as_gpu_free(dsink), as_gpu_free(didx), as_gpu_free(dout);
}

#define FL AS_FLASH_HEADS, AS_FLASH_HEAD_DIM

static void report_worst(const char *what)
{
    as_test_note("%s: worst max-err / tolerance: %.3f on the paths that take the selection whole, %.3f on those "
                 "that may split it", what, g_worst_whole, g_worst_split);
}

GPU_TEST(gpu_sparse_attn_flash)
{
    g_worst_whole = g_worst_split = 0;
    const AttnCase cases[] = {
        /* name, s, nh, hd, na, nb, topk, sel, sink, qa, ra, win, ratio, start_pos */
        {"decode, fresh ring (leading -1), 3 compressed rows", 1, FL, 128, 3, 640, SEL_DECODE, SINK_NORMAL, 2, 2, 128, 1, 5},
        {"decode, full ring, 512 of 2500 compressed", 1, FL, 128, 2500, 640, SEL_DECODE, SINK_NORMAL, 2, 2, 128, 1, 5000},
        {"prefill s=7 ratio 1", 7, FL, 7, 7, 14, SEL_PREFILL, SINK_NORMAL, 2, 2, 128, 1, 0},
        {"prefill s=64 ratio 2", 64, FL, 64, 32, 96, SEL_PREFILL, SINK_NORMAL, 2, 2, 128, 2, 0},
        {"prefill s=512 ratio 1 (topk 640)", 512, FL, 512, 512, 640, SEL_PREFILL, SINK_NORMAL, 2, 2, 128, 1, 0},
        /* layer 0 of the flash prefill (ratio 0): window only, topk 128, nb 0; query t < 96 has 3 - t / 32
         * wholly masked tiles after its partial first/last one (an engine layer-0 o mismatch here has
         * been a kv quantisation flip upstream, not this kernel: tools/emu/real.sh shows which) */
        {"prefill s=512 ratio 0 (window only, topk 128)", 512, FL, 512, 0, 128, SEL_PREFILL, SINK_NORMAL, 2, 2, 128, 1, 0},
        {"prefill s=512 ratio 0, peaked (|q|, |row| <= 4)", 512, FL, 512, 0, 128, SEL_PREFILL, SINK_NORMAL, 4, 4, 128, 1, 0},
        {"prefill s=64 ratio 0 (window only, topk 64)", 64, FL, 64, 0, 64, SEL_PREFILL, SINK_NORMAL, 2, 2, 128, 1, 0},
        {"random, topk 200 (not a multiple of 64)", 64, FL, 300, 700, 200, SEL_RANDOM, SINK_NORMAL, 2, 2, 0, 1, 0},
        {"na = 0 (rows_b only)", 7, FL, 0, 1000, 100, SEL_RANDOM, SINK_NORMAL, 2, 2, 0, 1, 0},
        {"nb = 0 (rows_a only)", 7, FL, 1000, 0, 100, SEL_RANDOM, SINK_NORMAL, 2, 2, 0, 1, 0},
        {"one valid entry per query", 64, FL, 128, 2000, 640, SEL_ONE_VALID, SINK_NORMAL, 2, 2, 0, 1, 0},
        {"every third query all -1", 7, FL, 128, 900, 300, SEL_ALL_NEG_ROWS, SINK_NORMAL, 2, 2, 0, 1, 0},
        {"leading -1 (half)", 7, FL, 128, 900, 333, SEL_LEADING_NEG, SINK_NORMAL, 2, 2, 0, 1, 0},
        {"huge sinks (1000: o = 0; 12: o small)", 7, FL, 128, 900, 640, SEL_RANDOM, SINK_HUGE, 2, 2, 0, 1, 0},
        {"very negative sinks (-1000)", 64, FL, 128, 900, 640, SEL_RANDOM, SINK_NEG, 2, 2, 0, 1, 0},
        {"peaked softmax (|q|, |row| <= 4)", 64, FL, 128, 900, 640, SEL_RANDOM, SINK_NORMAL, 4, 4, 0, 1, 0},
        {"wide selection (topk 2048)", 3, FL, 1000, 3000, 2048, SEL_RANDOM, SINK_NORMAL, 2, 2, 0, 1, 0},
        /* the wgmma kernel reads a selection's first 1024 entries up front to find its last tile with a
         * row; beyond them it reads on: rows only past entry 1024, and one row anywhere in 2048 */
        {"wide, the first 1024 entries -1", 3, FL, 1000, 3000, 2048, SEL_LEADING_NEG, SINK_NORMAL, 2, 2, 0, 1, 0},
        {"wide, one valid entry per query", 64, FL, 1000, 3000, 2048, SEL_ONE_VALID, SINK_NORMAL, 2, 2, 0, 1, 0},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
        run_attn(&cases[i], 1000 + 17 * i);
    report_worst("flash");
}

/* kernel.py's blocks of 64 entries: selections of 1, 64 and 65 entries (one block, one full block, a
 * second block of one), a running max that grows between blocks, every entry -1 (o = 0, also with a sink
 * of -inf: 0, not 0 / 0), a sink of -inf with rows selected (den = the sum of p); at one query (the
 * one-query kernel's splits), a few (the tensor-core kernel, whole and split) and a prefill's 512 (the
 * wgmma kernel on sm_90). */
GPU_TEST(gpu_sparse_attn_blocks)
{
    g_worst_whole = g_worst_split = 0;
    const AttnCase cases[] = {
        /* name, s, nh, hd, na, nb, topk, sel, sink, qa, ra, win, ratio, start_pos */
        {"topk 1", 7, FL, 300, 700, 1, SEL_RANDOM, SINK_NORMAL, 2, 2, 0, 1, 0},
        {"topk 1, one query", 1, FL, 300, 700, 1, SEL_RANDOM, SINK_NORMAL, 2, 2, 0, 1, 0},
        {"topk 64", 7, FL, 300, 700, 64, SEL_RANDOM, SINK_NORMAL, 2, 2, 0, 1, 0},
        {"topk 64, one query", 1, FL, 300, 700, 64, SEL_RANDOM, SINK_NORMAL, 2, 2, 0, 1, 0},
        {"topk 65", 7, FL, 300, 700, 65, SEL_RANDOM, SINK_NORMAL, 2, 2, 0, 1, 0},
        {"topk 65, one query", 1, FL, 300, 700, 65, SEL_RANDOM, SINK_NORMAL, 2, 2, 0, 1, 0},
        {"topk 65, the max grows in block 1", 7, FL, 300, 700, 65, SEL_HOT, SINK_NORMAL, 2, 2, 0, 1, 0},
        {"max grows in blocks 1 and 2+ (topk 640)", 7, FL, 300, 700, 640, SEL_HOT, SINK_NORMAL, 2, 2, 0, 1, 0},
        {"max grows, one query", 1, FL, 300, 700, 640, SEL_HOT, SINK_NORMAL, 2, 2, 0, 1, 0},
        {"max grows, topk 200", 64, FL, 300, 700, 200, SEL_HOT, SINK_NORMAL, 2, 2, 0, 1, 0},
        {"max grows, prefill s=512", 512, FL, 1000, 2000, 640, SEL_HOT, SINK_NORMAL, 2, 2, 0, 1, 0},
        {"max grows, 16 heads x 128", 7, 16, 128, 300, 700, 333, SEL_HOT, SINK_NORMAL, 2, 2, 0, 1, 0},
        {"max grows, tiny (warp kernel)", 7, 4, 64, 100, 100, 160, SEL_HOT, SINK_NORMAL, 2, 2, 0, 1, 0},
        {"all -1", 7, FL, 300, 700, 200, SEL_ALL_NEG, SINK_NORMAL, 2, 2, 0, 1, 0},
        {"all -1, one query", 1, FL, 300, 700, 640, SEL_ALL_NEG, SINK_NORMAL, 2, 2, 0, 1, 0},
        {"all -1, sink -inf", 7, FL, 300, 700, 200, SEL_ALL_NEG, SINK_NEG_INF, 2, 2, 0, 1, 0},
        {"all -1, sink -inf, one query", 1, FL, 300, 700, 640, SEL_ALL_NEG, SINK_NEG_INF, 2, 2, 0, 1, 0},
        {"all -1, sink -inf, prefill s=512", 512, FL, 300, 700, 128, SEL_ALL_NEG, SINK_NEG_INF, 2, 2, 0, 1, 0},
        {"all -1, sink -inf, tiny", 7, 4, 64, 30, 30, 50, SEL_ALL_NEG, SINK_NEG_INF, 2, 2, 0, 1, 0},
        {"every third query all -1, sink -inf", 7, FL, 300, 700, 333, SEL_ALL_NEG_ROWS, SINK_NEG_INF, 2, 2, 0, 1, 0},
        {"sink -inf, one query", 1, FL, 300, 700, 429, SEL_RANDOM, SINK_NEG_INF, 2, 2, 0, 1, 0},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
        run_attn(&cases[i], 9000 + 17 * i);
    report_worst("blocks");
}

GPU_TEST(gpu_sparse_attn_other_geometries)
{
    g_worst_whole = g_worst_split = 0;
    const AttnCase cases[] = {
        /* tiny: 4 heads of 64 (the warp kernel) */
        {"tiny decode", 1, 4, 64, 16, 40, 16 + 12, SEL_DECODE, SINK_NORMAL, 2, 2, 16, 1, 7},
        {"tiny prefill s=7", 7, 4, 64, 7, 3, 7 + 3, SEL_PREFILL, SINK_NORMAL, 2, 2, 16, 2, 0},
        {"tiny prefill s=64", 64, 4, 64, 64, 32, 16 + 32, SEL_PREFILL, SINK_NORMAL, 2, 2, 16, 2, 0},
        /* tensor-core kernel with a partial head block, other hd, two head blocks */
        {"16 heads x 128", 7, 16, 128, 200, 300, 150, SEL_RANDOM, SINK_NORMAL, 2, 2, 0, 1, 0},
        {"32 heads x 256", 64, 32, 256, 200, 300, 161, SEL_RANDOM, SINK_NORMAL, 2, 2, 0, 1, 0},
        {"48 heads x 512", 5, 48, 512, 200, 300, 640, SEL_RANDOM, SINK_NORMAL, 2, 2, 0, 1, 0},
        {"128 heads x 512 (two head blocks)", 3, 128, 512, 200, 300, 640, SEL_RANDOM, SINK_NORMAL, 2, 2, 0, 1, 0},
        {"64 heads x 64", 64, 64, 64, 200, 300, 97, SEL_RANDOM, SINK_NORMAL, 2, 2, 0, 1, 0},
        /* hd outside the tensor-core set, nh not a multiple of 16: the warp kernel */
        {"64 heads x 96", 3, 64, 96, 200, 300, 100, SEL_RANDOM, SINK_NORMAL, 2, 2, 0, 1, 0},
        {"5 heads x 512", 7, 5, 512, 200, 300, 640, SEL_RANDOM, SINK_NORMAL, 2, 2, 0, 1, 0},
        /* one query, heads a multiple of the one-query kernel's 4 a block but not of 8 or 16 */
        {"12 heads x 512, one query", 1, 12, 512, 200, 300, 640, SEL_RANDOM, SINK_NORMAL, 2, 2, 0, 1, 0},
        {"20 heads x 256, one query", 1, 20, 256, 100, 150, 161, SEL_RANDOM, SINK_NORMAL, 2, 2, 0, 1, 0},
        {"topk 0", 3, 64, 512, 10, 10, 0, SEL_RANDOM, SINK_NORMAL, 2, 2, 0, 1, 0},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
        run_attn(&cases[i], 5000 + 17 * i);
    report_worst("other geometries");
}

GPU_TEST(gpu_sparse_attn_refuses_nonsense)
{
    as_bf16_t *d = as_gpu_alloc(1 << 16);
    float *f = as_gpu_alloc(1024);
    int32_t *ix = as_gpu_alloc(1024);
    const float sc = 0.125f;
    CHECK(as_k_sparse_attn(d, d, 1, d, 1, ix, 1, f, d, 1, 64, 513, sc, 0) == (int)cudaErrorInvalidValue,
          "hd 513 refused");
    CHECK(as_k_sparse_attn(d, d, 1, d, 1, ix, 1, f, d, 1, 64, 0, sc, 0) == (int)cudaErrorInvalidValue, "hd 0 refused");
    CHECK(as_k_sparse_attn(d, d, 1, d, 1, ix, 1, f, d, 1, 0, 64, sc, 0) == (int)cudaErrorInvalidValue, "nh 0 refused");
    CHECK(as_k_sparse_attn(d, d, -1, d, 1, ix, 1, f, d, 1, 4, 64, sc, 0) == (int)cudaErrorInvalidValue,
          "na < 0 refused");
    CHECK(as_k_sparse_attn(d, d, 1, d, 1, ix, -1, f, d, 1, 4, 64, sc, 0) == (int)cudaErrorInvalidValue,
          "topk < 0 refused");
    CHECK(as_k_sparse_attn(d, NULL, 1, d, 1, ix, 1, f, d, 1, 4, 64, sc, 0) == (int)cudaErrorInvalidValue,
          "rows_a NULL with na > 0 refused");
    CHECK(as_k_sparse_attn(d, d, 1, d, 1, ix, 1, NULL, d, 1, 4, 64, sc, 0) == (int)cudaErrorInvalidValue,
          "sink NULL refused");
    CHECK(as_k_sparse_attn(d, d, 1, d, 1, ix, 1, f, d, 0, 4, 64, sc, 0) == 0, "s 0 is a no-op");
    as_gpu_sync("sparse attention refusals");
    as_gpu_free(d), as_gpu_free(f), as_gpu_free(ix);
}
