/* The kernels' decode-graph variants against their by-value twins, bit for bit on the
 * device: each reads the step's live scalars (position, width, k, row counts) from device memory
 * and launches for the most they can be; at the same live values it must produce what the by-value
 * launch produces (whose twins pin it to ref/). as_k_build_idx_decode (window selection + idx) vs
 * as_k_window_select + as_k_build_idx; as_k_compress_pool_decode vs as_k_compress_pool (decode);
 * as_k_index_scores_decode vs as_k_index_scores; as_k_sparse_attn_decode vs as_k_sparse_attn, at
 * the flash (the one-query kernel: a split per 64-entry block into the caller's workspace) and tiny
 * (warp kernel) geometries, live widths from one entry to the whole (1, 20, 64, 65, 129, ...), a
 * running max that grows between blocks, every live entry -1; the by-value attention is checked
 * against its twin as_sparse_attention too (SPEC 6, the ratio to the tolerance printed: its splits
 * round bf16(p) against their own running max, the accepted deviation from kernel.py). Outputs are
 * poisoned before each launch; past the live length nothing may be written (scores) or everything is
 * -1 (idx). */
#include <cuda_runtime_api.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "ref/attention.h"
#include "ref/numerics.h"
#include "ref/quant.h"
#include "tests/lib/gpu_util.h"
#include "tests/lib/harness.h"
#include "tests/lib/kernel_shapes.h"

/* flash's attention (heads, head_dim, window rows), its index heads (heads, head_dim), the decode
 * context and the attention's entries a query (tests/lib/kernel_shapes.h) */
#define FL_ATTN AS_FLASH_HEADS, AS_FLASH_HEAD_DIM, AS_FLASH_WINDOW
#define FL_INDEX AS_FLASH_INDEX_HEADS, AS_FLASH_INDEX_HEAD_DIM
#define FL_CTX AS_FLASH_CONTEXT
#define FL_TOPK AS_FLASH_ATTN_TOPK

static void *xmalloc(size_t bytes)
{
    void *p = malloc(bytes ? bytes : 1);
    REQUIRE(p, "out of host memory (%zu bytes)", bytes);
    return p;
}

static uint64_t g_rs;
static uint64_t rnd(void)
{
    uint64_t z = (g_rs += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}
static float urnd(float a) { return as_bf16((2.0f * (float)(rnd() >> 40) / 16777216.0f - 1.0f) * a); }

static int32_t *dev_int(int32_t v) { return as_gpu_bytes(&v, sizeof v); }

static int64_t diff_bytes(const char *what, const void *got, const void *want, size_t n, size_t esz)
{
    int64_t bad = 0;
    for (size_t i = 0; i < n; i++)
        if (memcmp((const char *)got + i * esz, (const char *)want + i * esz, esz) && bad++ < 4) {
            uint32_t g = 0, w = 0;
            memcpy(&g, (const char *)got + i * esz, esz < 4 ? esz : 4);
            memcpy(&w, (const char *)want + i * esz, esz < 4 ? esz : 4);
            as_test_note("%s: [%zu]: variant 0x%x, by value 0x%x", what, i, g, w);
        }
    return bad;
}

/* ---- window selection + idx ---- */

static void idx_case(int win, int sp, int k, int kmax, int nrows, uint64_t seed)
{
    g_rs = seed;
    char what[160];
    snprintf(what, sizeof what, "build_idx_decode win %d sp %d k %d of %d nrows %d", win, sp, k, kmax, nrows);
    int32_t *csel = xmalloc(sizeof(int32_t) * (size_t)(kmax + 1));
    for (int j = 0; j <= kmax; j++)
        csel[j] = (int32_t)(rnd() % (uint64_t)(nrows + 8)) - 2;
    int32_t *dcsel = as_gpu_bytes(csel, sizeof(int32_t) * (size_t)(kmax + 1));
    const size_t n = (size_t)win + kmax;
    int32_t *w_bv = as_gpu_alloc(sizeof(int32_t) * win), *i_bv = as_gpu_alloc(sizeof(int32_t) * n);
    int32_t *w_v = as_gpu_alloc(sizeof(int32_t) * win), *i_v = as_gpu_alloc(sizeof(int32_t) * n);
    int32_t *w_v2 = as_gpu_alloc(sizeof(int32_t) * win), *i_v2 = as_gpu_alloc(sizeof(int32_t) * n);
    int *flags = as_gpu_alloc(sizeof(int) * 3);
    unsigned long long *valid = as_gpu_alloc(sizeof(unsigned long long) * 3);
    REQUIRE(cudaMemset(flags, 0, sizeof(int) * 3) == cudaSuccess && cudaMemset(valid, 0, 24) == cudaSuccess, "memset");
    REQUIRE(cudaMemset(i_bv, 0x55, sizeof(int32_t) * n) == cudaSuccess && cudaMemset(i_v, 0x66, sizeof(int32_t) * n) == cudaSuccess &&
                cudaMemset(i_v2, 0x77, sizeof(int32_t) * n) == cudaSuccess,
            "poison");
    int32_t *dsp = dev_int(sp), *dk = dev_int(k), *dn = dev_int(nrows);
    as_gpu_check_launch(as_k_window_select(w_bv, 1, win, sp, 0), what);
    as_gpu_check_launch(as_k_build_idx(w_bv, win, dcsel, k, 1, nrows, i_bv, flags, valid, 0), what);
    /* by value (the uncaptured decode) and from device parameters launched for kmax (the graph) */
    as_gpu_check_launch(as_k_build_idx_decode(w_v, win, sp, NULL, dcsel, k, NULL, k, nrows, NULL, i_v, flags + 1,
                                              valid + 1, 0),
                        what);
    as_gpu_check_launch(as_k_build_idx_decode(w_v2, win, 0, dsp, dcsel, 0, dk, kmax, 0, dn, i_v2, flags + 2, valid + 2, 0),
                        what);
    int32_t *a = xmalloc(sizeof(int32_t) * n), *b = xmalloc(sizeof(int32_t) * n), *c = xmalloc(sizeof(int32_t) * n);
    int fl[3];
    unsigned long long va[3];
    as_gpu_get_bytes(fl, flags, sizeof fl);
    as_gpu_get_bytes(va, valid, sizeof va);
    int64_t bad = 0;
    as_gpu_get_bytes(a, w_bv, sizeof(int32_t) * win);
    as_gpu_get_bytes(b, w_v, sizeof(int32_t) * win);
    as_gpu_get_bytes(c, w_v2, sizeof(int32_t) * win);
    bad += diff_bytes(what, b, a, (size_t)win, 4) + diff_bytes(what, c, a, (size_t)win, 4);
    as_gpu_get_bytes(a, i_bv, sizeof(int32_t) * n);
    as_gpu_get_bytes(b, i_v, sizeof(int32_t) * n);
    as_gpu_get_bytes(c, i_v2, sizeof(int32_t) * n);
    bad += diff_bytes(what, b, a, (size_t)win + k, 4) + diff_bytes(what, c, a, (size_t)win + k, 4);
    for (size_t i = (size_t)win + k; i < n; i++)
        bad += c[i] != -1;
    bad += fl[1] != fl[0] || fl[2] != fl[0] || va[1] != va[0] || va[2] != va[0];
    CHECK(bad == 0, "%s: %lld differences (refusal %d/%d/%d, valid %llu/%llu/%llu)", what, (long long)bad, fl[0], fl[1],
          fl[2], va[0], va[1], va[2]);
    if (!bad)
        as_test_note("%s: widx and idx exact, refusal %d, %llu valid", what, fl[0], va[0]);
    free(csel), free(a), free(b), free(c);
    as_gpu_free(dcsel), as_gpu_free(w_bv), as_gpu_free(i_bv), as_gpu_free(w_v), as_gpu_free(i_v), as_gpu_free(w_v2),
        as_gpu_free(i_v2), as_gpu_free(flags), as_gpu_free(valid), as_gpu_free(dsp), as_gpu_free(dk), as_gpu_free(dn);
}

GPU_TEST(gpu_decode_kernels_build_idx)
{
    idx_case(128, 1, 1, 512, 128 + 1, 1);       /* ring not full: leading -1 */
    idx_case(128, 127, 64, 512, 128 + 64, 2);   /* the wrap */
    idx_case(128, 128, 64, 512, 128 + 60, 3);   /* refusals: entries past the rows */
    idx_case(128, 5000, 512, 512, 128 + 2500, 4);
    idx_case(128, 301, 0, 0, 128, 5);           /* ratio 0: window only */
    idx_case(8, 13, 5, 8, 8 + 7, 6);            /* tiny */
}

/* ---- compressor pooling ---- */

GPU_TEST(gpu_decode_kernels_compress_pool)
{
    const int hd = 512, r = 2;
    float *part_kv0 = xmalloc(sizeof(float) * r * hd), *part_sc0 = xmalloc(sizeof(float) * r * hd);
    float *ckv = xmalloc(sizeof(float) * hd), *csc = xmalloc(sizeof(float) * hd);
    int64_t bad = 0;
    for (int sp = 1; sp <= 6; sp++) {
        g_rs = 100 + sp;
        for (int i = 0; i < r * hd; i++)
            part_kv0[i] = urnd(3.0f), part_sc0[i] = urnd(8.0f);
        for (int i = 0; i < hd; i++)
            ckv[i] = urnd(3.0f), csc[i] = urnd(8.0f);
        float *dkv = as_gpu_f32(ckv, hd), *dsc = as_gpu_f32(csc, hd);
        float *pk[2], *ps[2];
        as_bf16_t *lat[2];
        for (int v = 0; v < 2; v++) {
            pk[v] = as_gpu_f32(part_kv0, r * hd);
            ps[v] = as_gpu_f32(part_sc0, r * hd);
            lat[v] = as_gpu_alloc(sizeof(uint16_t) * hd);
            REQUIRE(cudaMemset(lat[v], 0x7f, sizeof(uint16_t) * hd) == cudaSuccess, "poison");
        }
        int32_t *dsp = dev_int(sp);
        as_gpu_check_launch(as_k_compress_pool(dkv, dsc, 1, r, hd, sp, pk[0], ps[0], lat[0], 0), "pool by value");
        as_gpu_check_launch(as_k_compress_pool_decode(dkv, dsc, r, hd, dsp, pk[1], ps[1], lat[1], 0), "pool decode");
        float *a = xmalloc(sizeof(float) * r * hd), *b = xmalloc(sizeof(float) * r * hd);
        char what[64];
        snprintf(what, sizeof what, "compress_pool_decode sp %d", sp);
        as_gpu_get_f32(a, pk[0], r * hd), as_gpu_get_f32(b, pk[1], r * hd);
        bad += diff_bytes(what, b, a, (size_t)r * hd, 4);
        as_gpu_get_f32(a, ps[0], r * hd), as_gpu_get_f32(b, ps[1], r * hd);
        bad += diff_bytes(what, b, a, (size_t)r * hd, 4);
        as_gpu_get_bytes(a, lat[0], sizeof(uint16_t) * hd), as_gpu_get_bytes(b, lat[1], sizeof(uint16_t) * hd);
        bad += diff_bytes(what, b, a, (size_t)hd, 2);
        free(a), free(b);
        as_gpu_free(dkv), as_gpu_free(dsc), as_gpu_free(dsp);
        for (int v = 0; v < 2; v++)
            as_gpu_free(pk[v]), as_gpu_free(ps[v]), as_gpu_free(lat[v]);
    }
    CHECK(bad == 0, "compress_pool_decode: %lld values differ from the by-value decode", (long long)bad);
    if (!bad)
        as_test_note("compress_pool_decode: state and latent exact at start_pos 1..6 (groups complete on odd ones)");
    free(part_kv0), free(part_sc0), free(ckv), free(csc);
}

/* ---- index scores ---- */

static void scores_case(int nh, int ihd, int width, int max_width, uint64_t seed)
{
    g_rs = seed;
    char what[128];
    snprintf(what, sizeof what, "index_scores_decode %d heads x %d, width %d of %d", nh, ihd, width, max_width);
    float *iq = xmalloc(sizeof(float) * (size_t)nh * ihd), *k = xmalloc(sizeof(float) * (size_t)max_width * ihd),
          *w = xmalloc(sizeof(float) * (size_t)nh);
    for (int i = 0; i < nh * ihd; i++)
        iq[i] = urnd(3.0f);
    for (int64_t i = 0; i < (int64_t)max_width * ihd; i++)
        k[i] = urnd(3.0f);
    for (int i = 0; i < nh; i++)
        w[i] = urnd(0.25f);
    as_fp4_quant_e8m0(iq, (int64_t)nh * ihd, 32); /* the model's inputs: fp4 (exact dots) */
    as_fp4_quant_e8m0(k, (int64_t)max_width * ihd, 32);
    as_bf16_t *diq = as_gpu_bf16(iq, (int64_t)nh * ihd), *dk = as_gpu_bf16(k, (int64_t)max_width * ihd),
              *dw = as_gpu_bf16(w, nh);
    as_bf16_t *a = as_gpu_alloc(sizeof(uint16_t) * (size_t)(max_width + 64)),
              *b = as_gpu_alloc(sizeof(uint16_t) * (size_t)(max_width + 64));
    REQUIRE(cudaMemset(a, 0x7f, sizeof(uint16_t) * (size_t)(max_width + 64)) == cudaSuccess &&
                cudaMemset(b, 0x7f, sizeof(uint16_t) * (size_t)(max_width + 64)) == cudaSuccess,
            "poison");
    int32_t *dwidth = dev_int(width);
    as_gpu_check_launch(as_k_index_scores(diq, dk, dw, 1, nh, ihd, width, 5000, 2, a, 0), what);
    as_gpu_check_launch(as_k_index_scores_decode(diq, dk, dw, 1, nh, ihd, max_width, dwidth, 2, b, 0), what);
    uint16_t *ga = xmalloc(sizeof(uint16_t) * (size_t)(max_width + 64)), *gb = xmalloc(sizeof(uint16_t) * (size_t)(max_width + 64));
    as_gpu_get_bytes(ga, a, sizeof(uint16_t) * (size_t)(max_width + 64));
    as_gpu_get_bytes(gb, b, sizeof(uint16_t) * (size_t)(max_width + 64));
    int64_t bad = diff_bytes(what, gb, ga, (size_t)(max_width + 64), 2); /* past the width: both still poison */
    CHECK(bad == 0, "%s: %lld scores differ from the by-value launch", what, (long long)bad);
    if (!bad)
        as_test_note("%s: exact, nothing written past the width", what);
    free(iq), free(k), free(w), free(ga), free(gb);
    as_gpu_free(diq), as_gpu_free(dk), as_gpu_free(dw), as_gpu_free(a), as_gpu_free(b), as_gpu_free(dwidth);
}

GPU_TEST(gpu_decode_kernels_index_scores)
{
    scores_case(FL_INDEX, 1, AS_FLASH_MAX_SEQ, 1);
    scores_case(FL_INDEX, 64, AS_FLASH_MAX_SEQ, 2);
    scores_case(FL_INDEX, 65, AS_FLASH_MAX_SEQ, 3);
    scores_case(FL_INDEX, 2049, FL_CTX, 4);
    scores_case(FL_INDEX, 4097, AS_FLASH_MAX_SEQ, 5);
    scores_case(FL_INDEX, AS_FLASH_MAX_SEQ, AS_FLASH_MAX_SEQ, 6);
    scores_case(4, 32, 37, 512, 7); /* tiny: the scalar kernel */
}

/* ---- sparse attention ---- */

typedef enum {
    ATTN_RANDOM,  /* random live rows, a third of the ring's entries -1 */
    ATTN_ALL_NEG, /* every live entry -1: o = 0 */
    ATTN_HOT,     /* random over all but the last two live rows, which score ~5 and ~15 above the rest
                   * (f / sqrt(nh) times the sum of the heads' q, f = 1.5 and 4) at entries in blocks 1 and
                   * 2+: the running max grows between blocks */
} AttnKind;

/* The SPEC 6 rule (max|got - want| <= max|want| 2^-7 + 1e-4) for got (bf16 bits) against the twin's want:
 * the ratio of the max error to the tolerance, infinite for a NaN. */
static double spec6_ratio(const uint16_t *got, const float *want, size_t n, int64_t *exact)
{
    double maxw = 0, maxe = 0;
    *exact = 0;
    for (size_t i = 0; i < n; i++)
        maxw = fmax(maxw, fabs(want[i]));
    for (size_t i = 0; i < n; i++) {
        const float g = as_bf16_to_f32(got[i]);
        maxe = fmax(maxe, isnan(g) ? INFINITY : fabs((double)g - want[i]));
        *exact += got[i] == as_bf16_bits(want[i]);
    }
    return maxe / (maxw * 0x1p-7 + 1e-4);
}

static double g_attn_worst; /* the by-value attention against its twin, over the cases: reported at the end */

/* One forced attention path (the engine's --attn-path): the decode launch on it against the by-value launch
 * on it at the live width, bit for bit where the plan splits one tile per split; or both refuse alike (a
 * kernel that does not apply to the geometry). */
static void attn_path_case(const char *what, int path, const as_bf16_t *dq, const as_bf16_t *drows, int na, int nb_live,
                           int nb_max, const int32_t *didx, int topk_live, int topk_max, const int32_t *dtopk,
                           const int32_t *dnb, const float *dsink, int nh, int hd, float scale)
{
    static const char *const names[] = {"auto", "warp", "mma", "wgmma"};
    const size_t bytes = sizeof(uint16_t) * (size_t)nh * hd;
    int mma = 0, tps = 0;
    size_t wsb = 0;
    REQUIRE(as_k_sparse_attn_decode_plan(1, nh, hd, topk_max, path, &mma, &tps, &wsb) == 0, "%s, %s: plan", what,
            names[path]);
    void *ws = wsb ? as_gpu_alloc(wsb) : NULL;
    as_bf16_t *oa = as_gpu_alloc(bytes), *ob = as_gpu_alloc(bytes);
    REQUIRE(cudaMemset(oa, 0xff, bytes) == cudaSuccess && cudaMemset(ob, 0xff, bytes) == cudaSuccess, "poison");
    const int ra = as_k_sparse_attn_path(dq, drows, na, drows + (size_t)na * hd, nb_live, didx, topk_live, dsink, oa, 1,
                                         nh, hd, scale, path, 0, 0);
    const int rb = as_k_sparse_attn_decode(dq, drows, na, drows + (size_t)na * hd, nb_max, dnb, didx, topk_max, dtopk,
                                           dsink, ob, 1, nh, hd, scale, ws, wsb, NULL, 0, path, 0);
    REQUIRE(cudaDeviceSynchronize() == cudaSuccess, "%s, %s: %s", what, names[path],
            cudaGetErrorString(cudaGetLastError()));
    if (path == AS_K_ATTN_WGMMA) { /* prefill's kernel only: a decode keeps the tensor-core or warp kernel */
        CHECK(rb == 0, "%s, wgmma: the decode launch refused (%d)", what, rb);
    } else if (ra || rb) {
        CHECK(ra == (int)cudaErrorInvalidValue && rb == ra, "%s, %s: the by-value launch gave %d, the decode one %d",
              what, names[path], ra, rb);
    } else if (mma != 1 || tps == 1) {
        uint16_t *ga = xmalloc(bytes), *gb = xmalloc(bytes);
        as_gpu_get_bytes(ga, oa, bytes);
        as_gpu_get_bytes(gb, ob, bytes);
        const int64_t bad = diff_bytes(what, gb, ga, (size_t)nh * hd, 2);
        CHECK(bad == 0, "%s, %s: %lld of %d outputs differ from the by-value launch on the same path", what,
              names[path], (long long)bad, nh * hd);
        free(ga), free(gb);
    }
    cudaGetLastError();
    as_gpu_free(oa), as_gpu_free(ob);
    if (ws)
        as_gpu_free(ws);
}

static void attn_case_k(const char *name, int nh, int hd, int na, int nb_live, int nb_max, int topk_live, int topk_max,
                        AttnKind kind, uint64_t seed)
{
    g_rs = seed;
    char what[200];
    snprintf(what, sizeof what, "sparse_attn_decode %s (%d heads x %d, rows %d+%d of %d, topk %d of %d)", name, nh, hd,
             na, nb_live, nb_max, topk_live, topk_max);
    const int nrows = na + nb_max, live = na + nb_live, cold = kind == ATTN_HOT ? live - 2 : live;
    REQUIRE(cold > 0, "%s: the hot rows need more than two live rows", what);
    float *q = xmalloc(sizeof(float) * (size_t)nh * hd), *rows = xmalloc(sizeof(float) * (size_t)nrows * hd),
          *sink = xmalloc(sizeof(float) * (size_t)nh);
    for (int i = 0; i < nh * hd; i++)
        q[i] = urnd(2.0f);
    for (int64_t i = 0; i < (int64_t)nrows * hd; i++)
        rows[i] = urnd(2.0f);
    for (int h = 0; h < nh; h++)
        sink[h] = urnd(2.0f);
    if (kind == ATTN_HOT)
        for (int k = 0; k < 2; k++)
            for (int d = 0; d < hd; d++) {
                float sum = 0.0f;
                for (int h = 0; h < nh; h++)
                    sum += q[h * hd + d];
                rows[(int64_t)(cold + k) * hd + d] = as_bf16((k ? 4.0f : 1.5f) / sqrtf((float)nh) * sum);
            }
    int32_t *idx = xmalloc(sizeof(int32_t) * (size_t)topk_max);
    for (int j = 0; j < topk_max; j++) {
        int v = (int)(rnd() % (uint64_t)cold);
        if (j < na && j < topk_live && rnd() % 3 == 0)
            v = -1; /* a ring not yet full */
        if (j >= topk_live || kind == ATTN_ALL_NEG)
            v = -1; /* as build_idx_decode leaves them */
        idx[j] = v;
    }
    if (kind == ATTN_HOT && topk_live > 64)
        idx[64 + (int)(seed % (uint64_t)(topk_live - 64 < 64 ? topk_live - 64 : 64))] = cold;
    if (kind == ATTN_HOT && topk_live > 128)
        idx[128 + (int)(7 * seed % (uint64_t)(topk_live - 128))] = cold + 1;
    as_bf16_t *dq = as_gpu_bf16(q, (int64_t)nh * hd), *drows = as_gpu_bf16(rows, (int64_t)nrows * hd);
    float *dsink = as_gpu_f32(sink, nh);
    int32_t *didx = as_gpu_bytes(idx, sizeof(int32_t) * (size_t)topk_max);
    as_bf16_t *oa = as_gpu_alloc(sizeof(uint16_t) * (size_t)nh * hd), *ob = as_gpu_alloc(sizeof(uint16_t) * (size_t)nh * hd);
    REQUIRE(cudaMemset(oa, 0xff, sizeof(uint16_t) * (size_t)nh * hd) == cudaSuccess &&
                cudaMemset(ob, 0xff, sizeof(uint16_t) * (size_t)nh * hd) == cudaSuccess,
            "poison");
    int mma = 0, tps = 0;
    size_t wsb = 0;
    REQUIRE(as_k_sparse_attn_decode_plan(1, nh, hd, topk_max, AS_K_ATTN_AUTO, &mma, &tps, &wsb) == 0, "%s: plan",
            what);
    CHECK(mma != 1 || tps == 1, "%s: the decode plan splits %d tiles per split (one expected)", what, tps);
    void *ws = wsb ? as_gpu_alloc(wsb) : NULL;
    if (ws)
        REQUIRE(cudaMemset(ws, 0xff, wsb) == cudaSuccess, "poison the workspace");
    int32_t *dtopk = dev_int(topk_live), *dnb = dev_int(nb_live);
    const float scale = 1.0f / sqrtf((float)hd);
    as_gpu_check_launch(as_k_sparse_attn(dq, drows, na, drows + (size_t)na * hd, nb_live, didx, topk_live, dsink, oa, 1,
                                         nh, hd, scale, 0),
                        what);
    as_gpu_check_launch(as_k_sparse_attn_decode(dq, drows, na, drows + (size_t)na * hd, nb_max, dnb, didx, topk_max,
                                                dtopk, dsink, ob, 1, nh, hd, scale, ws, wsb, NULL, 0, AS_K_ATTN_AUTO, 0),
                        what);
    uint16_t *ga = xmalloc(sizeof(uint16_t) * (size_t)nh * hd), *gb = xmalloc(sizeof(uint16_t) * (size_t)nh * hd);
    as_gpu_get_bytes(ga, oa, sizeof(uint16_t) * (size_t)nh * hd);
    as_gpu_get_bytes(gb, ob, sizeof(uint16_t) * (size_t)nh * hd);
    int64_t bad = diff_bytes(what, gb, ga, (size_t)nh * hd, 2);
    CHECK(bad == 0, "%s: %lld of %d outputs differ from the by-value launch", what, (long long)bad, nh * hd);
    if (!bad)
        as_test_note("%s: exact (%s, %d tiles per split, workspace %zu bytes)", what,
                     mma == 2 ? "one-query kernel" : mma ? "tensor cores" : "warp kernel", tps, wsb);
    { /* the by-value launch against the twin (entries past the live width are -1 in idx already) */
        float *want = xmalloc(sizeof(float) * (size_t)nh * hd);
        as_sparse_attention(q, rows, nrows, idx, topk_live, sink, want, 1, nh, hd, scale);
        int64_t exact = 0;
        const double ratio = spec6_ratio(ga, want, (size_t)nh * hd, &exact);
        CHECK(ratio <= 1.0, "%s: the by-value launch against as_sparse_attention: max err %.3f x the SPEC 6 tolerance",
              what, ratio);
        as_test_note("%s: against the twin: max err %.3f x tolerance, %lld/%d bit-exact", what, ratio,
                     (long long)exact, nh * hd);
        if (ratio > g_attn_worst)
            g_attn_worst = ratio;
        free(want);
    }
    /* early_rows: the rows staged before the PDL wait while the kernel launched just before writes q (here
     * a copy of q by as_k_o_back at a negative position, as wq_b's GEMV writes it in the engine): the same
     * bits */
    const size_t q_bytes = sizeof(uint16_t) * (size_t)nh * hd;
    as_bf16_t *dq_late = as_gpu_alloc(q_bytes), *oe = as_gpu_alloc(q_bytes);
    REQUIRE(cudaMemset(dq_late, 0xff, q_bytes) == cudaSuccess && cudaMemset(oe, 0xff, q_bytes) == cudaSuccess,
            "poison");
    const AsOBack q_copy = {.o_back = dq_late, .rd = 0, .pos0 = -1};
    as_gpu_check_launch(as_k_o_back(dq, 1, nh, hd, &q_copy, 0), what);
    as_gpu_check_launch(as_k_sparse_attn_decode(dq_late, drows, na, drows + (size_t)na * hd, nb_max, dnb, didx,
                                                topk_max, dtopk, dsink, oe, 1, nh, hd, scale, ws, wsb, NULL, 1,
                                                AS_K_ATTN_AUTO, 0),
                        what);
    uint16_t *ge = xmalloc(q_bytes);
    as_gpu_get_bytes(ge, oe, q_bytes);
    const int64_t bad_e = diff_bytes(what, ge, ga, (size_t)nh * hd, 2);
    CHECK(bad_e == 0, "%s with the rows staged early: %lld of %d outputs differ from the by-value launch", what,
          (long long)bad_e, nh * hd);
    free(ge);
    as_gpu_free(dq_late), as_gpu_free(oe);
    /* with o_back (AsOBack): o as before, o_back = the row pipeline's inverse RoPE of that o, bit for bit
     * (the one-query kernel's combine writes it; the other paths launch the row pipeline) */
    const int rd = hd / 8, half = rd / 2, pos = seed % 2 ? 0 : 1000 + (int)seed;
    float *cs = xmalloc(sizeof(float) * (size_t)(pos + 1) * half), *sn = xmalloc(sizeof(float) * (size_t)(pos + 1) * half);
    for (int64_t i = 0; i < (int64_t)(pos + 1) * half; i++)
        cs[i] = urnd(1.0f), sn[i] = urnd(1.0f);
    float *dcs = as_gpu_f32(cs, (int64_t)(pos + 1) * half), *dsn = as_gpu_f32(sn, (int64_t)(pos + 1) * half);
    int32_t *dpos = dev_int(pos);
    const size_t ob_bytes = sizeof(uint16_t) * (size_t)nh * hd;
    as_bf16_t *oc = as_gpu_alloc(ob_bytes), *obk = as_gpu_alloc(ob_bytes), *obr = as_gpu_alloc(ob_bytes);
    REQUIRE(cudaMemset(oc, 0xff, ob_bytes) == cudaSuccess && cudaMemset(obk, 0xff, ob_bytes) == cudaSuccess &&
                cudaMemset(obr, 0xee, ob_bytes) == cudaSuccess,
            "poison");
    const AsOBack obs = {.o_back = obk, .cos_t = dcs, .sin_t = dsn, .rd = rd, .pos0 = -7, .pos_d = dpos};
    as_gpu_check_launch(as_k_sparse_attn_decode(dq, drows, na, drows + (size_t)na * hd, nb_max, dnb, didx, topk_max,
                                                dtopk, dsink, oc, 1, nh, hd, scale, ws, wsb, &obs, 0, AS_K_ATTN_AUTO, 0),
                        what);
    const AsRowPipe rp = {.x = oa, .ldx = (int64_t)nh * hd, .y = obr, .ldy = (int64_t)nh * hd, .rows = 1, .heads = nh,
                          .n = hd, .rd = rd, .pos0 = pos, .cos_t = dcs, .sin_t = dsn, .inverse = 1, .post_scale = 1.0f};
    as_gpu_check_launch(as_k_row_pipe(&rp, 0), what);
    uint16_t *gc = xmalloc(ob_bytes), *gk = xmalloc(ob_bytes), *gr = xmalloc(ob_bytes);
    as_gpu_get_bytes(gc, oc, ob_bytes);
    as_gpu_get_bytes(gk, obk, ob_bytes);
    as_gpu_get_bytes(gr, obr, ob_bytes);
    int64_t bad_o = diff_bytes(what, gc, ga, (size_t)nh * hd, 2), bad_b = diff_bytes(what, gk, gr, (size_t)nh * hd, 2);
    CHECK(bad_o == 0, "%s with o_back: %lld of %d o differ from the by-value launch", what, (long long)bad_o, nh * hd);
    CHECK(bad_b == 0, "%s: %lld of %d o_back differ from the row pipeline's inverse RoPE (pos %d, rd %d)", what,
          (long long)bad_b, nh * hd, pos, rd);
    if (!bad_o && !bad_b)
        as_test_note("%s: o_back (pos %d, rd %d) = the row pipeline's, bit for bit", what, pos, rd);
    free(cs), free(sn), free(gc), free(gk), free(gr);
    as_gpu_free(dcs), as_gpu_free(dsn), as_gpu_free(dpos), as_gpu_free(oc), as_gpu_free(obk), as_gpu_free(obr);
    for (int path = AS_K_ATTN_WARP; path <= AS_K_ATTN_WGMMA; path++)
        attn_path_case(what, path, dq, drows, na, nb_live, nb_max, didx, topk_live, topk_max, dtopk, dnb, dsink, nh, hd,
                       scale);
    free(q), free(rows), free(sink), free(idx), free(ga), free(gb);
    as_gpu_free(dq), as_gpu_free(drows), as_gpu_free(dsink), as_gpu_free(didx), as_gpu_free(oa), as_gpu_free(ob),
        as_gpu_free(dtopk), as_gpu_free(dnb);
    if (ws)
        as_gpu_free(ws);
}

static void attn_case(const char *name, int nh, int hd, int na, int nb_live, int nb_max, int topk_live, int topk_max,
                      uint64_t seed)
{
    attn_case_k(name, nh, hd, na, nb_live, nb_max, topk_live, topk_max, ATTN_RANDOM, seed);
}

GPU_TEST(gpu_decode_kernels_sparse_attn)
{
    g_attn_worst = 0;
    /* flash: window 128 + index_topk 512 (ratio > 0), window only (ratio 0); a split is a 64-entry block */
    attn_case("one live entry", FL_ATTN, 300, FL_CTX, 1, FL_TOPK, 9);
    attn_case("one live split, partial", FL_ATTN, 300, FL_CTX, 20, FL_TOPK, 1);
    attn_case("one live split, whole (64)", FL_ATTN, 300, FL_CTX, 64, FL_TOPK, 10);
    attn_case("two live splits, the second of one entry (65)", FL_ATTN, 300, FL_CTX, 65, FL_TOPK, 2);
    attn_case("window + 1", FL_ATTN, 1, FL_CTX, 129, FL_TOPK, 3);
    attn_case("window + 300", FL_ATTN, 300, FL_CTX, 428, FL_TOPK, 4);
    attn_case("window + 512", FL_ATTN, 2048, FL_CTX, FL_TOPK, FL_TOPK, 5);
    attn_case("ratio 0, window only", FL_ATTN, 0, 0, AS_FLASH_WINDOW, AS_FLASH_WINDOW, 6);
    attn_case_k("the max grows in block 1", FL_ATTN, 300, FL_CTX, 65, FL_TOPK, ATTN_HOT, 11);
    attn_case_k("the max grows in blocks 1 and 2+", FL_ATTN, 300, FL_CTX, FL_TOPK, FL_TOPK, ATTN_HOT, 12);
    attn_case_k("the max grows, window + 300", FL_ATTN, 300, FL_CTX, 428, FL_TOPK, ATTN_HOT, 13);
    attn_case_k("every live entry -1", FL_ATTN, 300, FL_CTX, 428, FL_TOPK, ATTN_ALL_NEG, 14);
    /* heads not a multiple of 8: 4 a block */
    attn_case_k("12 heads, the max grows", 12, AS_FLASH_HEAD_DIM, AS_FLASH_WINDOW, 300, FL_CTX, 333, FL_TOPK, ATTN_HOT,
                15);
    /* tiny: the warp kernel */
    attn_case("tiny", 4, 64, 8, 5, 256, 13, 16, 7);
    attn_case("tiny, whole", 4, 64, 8, 40, 256, 16, 16, 8);
    attn_case_k("tiny, the max grows", 4, 64, 16, 200, 256, 150, 160, ATTN_HOT, 16);
    attn_case_k("tiny, every live entry -1", 4, 64, 8, 40, 256, 16, 16, ATTN_ALL_NEG, 17);
    as_test_note("sparse_attn_decode: worst max-err / tolerance of the by-value launches against the twin: %.3f",
                 g_attn_worst);
}
