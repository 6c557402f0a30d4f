/* kernels/fp8_gemv.cu against its CPU twins: ref/fp8_linear.c (as_fp8_linear_rows, the fp8 linear of
 * SPEC 2, act_quant included) and, for the bf16 activations of a checkpoint's fp8 wo_a, ref/linear.c on
 * the same weight (bf16(e4m3 * scale), exact for e8m0 scales).
 *
 * Rule (SPEC 6, bf16 tensors, and tests/gpu_gemv.c's per element): bit-exact, one bf16 ulp, or within
 * a bound on the reordering of the terms. The f32 order of the 32-wide blocks' scaled sums is free (SPEC:
 * the engine's summation order), bound 2^-16 * mag with mag = sum |xq w| sx ws. Inside a block the
 * tensor cores' fp8 accumulation aligns the products to fewer bits than f32 (DeepSeek-V3 reports about
 * 14 on Hopper): with 13 kept, a block's sum moves by at most 32 * 2^-13 of its largest product, so
 * random data on the tensor-core path gets 2^-8 * mag per element and SPEC 6 over the tensor. On
 * "exact grid" data every block's sum is exact in any such accumulator (tests/lib/fp8_cases.h) and the
 * f32 bound applies; so it does to the portable path, whose products and sums are f32.
 * Every output is poisoned (NaN) before the launch; a guard row past the output stays untouched.
 * Cases: the flash decode shapes (wq_a, wq_b, wkv, wo_b, indexer.wq_b; the grouped wo_a with bf16 x),
 * tiny's, awkward ones (n_out not a multiple of the 8-row tile, 1 row, n_in 32 and not a multiple of
 * 128, 128-blocks over 200 rows), m = 1, 3, 8, every warps-per-group setting, the portable path; the
 * residual, RoPE and RMSNorm epilogues against the plain GEMV's own output, bit for bit. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/kernels.h"
#include "ref/fp8_linear.h"
#include "ref/linear.h"
#include "ref/numerics.h"
#include "tests/lib/fp8_cases.h"
#include "tests/lib/gpu_fp8.h"
#include "tests/lib/gpu_util.h"
#include "tests/lib/harness.h"

/* Not in kernels.h: explicit warps per group (0: automatic) and the portable path. */
int as_k_fp8_gemv_cfg(const AsFp8Weight *w, const AsFp8Act *x, const as_bf16_t *xb, int64_t ldx, int64_t stride_x,
                      int m, void *y, int64_t ldy, int64_t stride_y, int y_f32, int Wn, int portable, cudaStream_t st);
int as_k_fp8_gemv_warps(int n_out, int n_in, int batch);

typedef struct {
    const char *name;
    int n_out, n_in, B;
} Shape;

/* The bound of a case: the f32 order's on exact-grid data and on the portable path, else the tensor
 * cores' accumulation (see the header). */
static double bound_of(int grid, int portable) { return grid || portable ? 0x1p-16 : 0x1p-8; }

/* One launch of the fp8 linear on m token rows and its check; returns the bad elements. */
static int64_t run_fp8(const Shape *c, int m, int Wn, int portable, int grid, uint64_t seed, int quiet)
{
    if (as_test_fp8_small_only() && (int64_t)c->n_out * c->n_in > ((int64_t)1 << 22)) {
        if (!quiet)
            as_test_note("%s m=%d: skipped (AS_KTEST_SMALL)", c->name, m);
        return 0;
    }
    const int no = c->n_out, ni = c->n_in;
    AsTestFp8Case k;
    as_test_fp8_case(&k, no, ni, c->B, m, grid, seed);
    const float *x = k.x;
    const AsTestFp8Dev d = k.d;
    const AsFp8Act xa = k.xa;
    const int64_t ldy = no + 3; /* a row stride that is not the width */
    uint16_t *dy = as_gpu_alloc(2 * (size_t)((m + 1) * ldy));
    as_gpu_poison(dy, 2 * (size_t)((m + 1) * ldy));
    char what[200];
    snprintf(what, sizeof what, "fp8 gemv %s %dx%d block %d m=%d W=%d%s%s", c->name, no, ni, c->B, m,
             Wn ? Wn : as_k_fp8_gemv_warps(no, ni, 1), portable ? " portable" : "", grid ? " grid" : "");
    as_gpu_check_launch(as_k_fp8_gemv_cfg(&d.w, &xa, NULL, 0, 0, m, dy, ldy, 0, 0, Wn, portable, 0), what);
    uint16_t *got = as_test_xmalloc(2 * (size_t)((m + 1) * ldy));
    as_gpu_get_bytes(got, dy, 2 * (size_t)((m + 1) * ldy));

    float *want = as_test_xmalloc(sizeof(float) * (size_t)m * no);
    double *mag = as_test_xmalloc(sizeof(double) * (size_t)m * no);
    for (int t = 0; t < m; t++) /* s = 1 a row: the twin's decode path */
        as_fp8_linear_rows(x + (int64_t)t * ni, 1, &k.f.w, 0, no, want + (int64_t)t * no, no);
    as_test_fp8_magnitudes(x, m, &k.f.w, 0, mag);
    AsTestFp8Cmp r = as_test_fp8_compare(what, got, ldy, want, mag, m, no, bound_of(grid, portable));
    int64_t guard = 0, gaps = 0;
    for (int64_t i = (int64_t)m * ldy; i < (int64_t)(m + 1) * ldy; i++)
        guard += got[i] != 0xffff;
    for (int t = 0; t < m; t++)
        for (int64_t o = no; o < ldy; o++)
            gaps += got[t * ldy + o] != 0xffff;
    CHECK(r.bad == 0, "%s: %lld of %lld outputs outside the rule", what, (long long)r.bad, (long long)m * no);
    CHECK(r.spec6_ok, "%s: max error %.3g beyond SPEC 6's %.3g", what, r.max_err, r.max_want * 0x1p-7 + 1e-4);
    CHECK(guard == 0 && gaps == 0, "%s: %lld elements written past the output rows, %lld between them", what,
          (long long)guard, (long long)gaps);
    if (!quiet || r.bad)
        as_test_fp8_note(what, &r);
    free(got), free(want), free(mag);
    as_gpu_free(dy);
    as_test_fp8_case_free(&k);
    return r.bad;
}

static const Shape kFlash[] = {{"wq_a", 1280, 5120, 32},  {"wq_b", 32768, 1280, 32}, {"wkv", 512, 5120, 32},
                               {"wo_b", 5120, 8192, 32},  {"indexer.wq_b", 4096, 1280, 32}};
static const Shape kTiny[] = {{"tiny wq_a", 32, 64, 32}, {"tiny wq_b", 256, 32, 32}, {"tiny wkv", 64, 64, 32},
                              {"tiny wo_b", 64, 32, 32}, {"tiny indexer.wq_b", 128, 32, 32}};

GPU_TEST(gpu_fp8_gemv_flash_shapes)
{
    for (size_t i = 0; i < sizeof kFlash / sizeof kFlash[0]; i++) {
        run_fp8(&kFlash[i], 1, 0, 0, 0, 100 + i, 0);
        run_fp8(&kFlash[i], 1, 0, 0, 1, 200 + i, 0);
        run_fp8(&kFlash[i], 8, 0, 0, 0, 300 + i, 0);
    }
}

GPU_TEST(gpu_fp8_gemv_tiny_and_awkward)
{
    for (size_t i = 0; i < sizeof kTiny / sizeof kTiny[0]; i++)
        for (int m = 1; m <= 8; m += 7) {
            run_fp8(&kTiny[i], m, 0, 0, 0, 400 + i, 1);
            run_fp8(&kTiny[i], m, 0, 0, 1, 500 + i, 1);
        }
    const Shape odd[] = {{"one row", 1, 5120, 32},         {"7 rows", 7, 96, 32},         {"13 rows", 13, 160, 32},
                         {"100 rows", 100, 32, 32},        {"300 rows", 300, 1312, 32},   {"128-blocks", 200, 384, 128},
                         {"128-blocks tail", 77, 160, 128}};
    for (size_t i = 0; i < sizeof odd / sizeof odd[0]; i++)
        for (int m = 1; m <= 8; m++) {
            run_fp8(&odd[i], m, 0, 0, 0, 600 + i * 8 + (size_t)m, 1);
            run_fp8(&odd[i], m, 0, 0, 1, 700 + i * 8 + (size_t)m, 1);
        }
    as_test_note("tiny shapes (m 1, 8) and 7 awkward ones (m 1..8), random and grid data");
}

GPU_TEST(gpu_fp8_gemv_every_config_and_portable)
{
    const Shape cases[] = {kFlash[0], kFlash[4], {"odd", 300, 1312, 32}, kTiny[1]};
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
        for (int Wn = 1; Wn <= 8; Wn *= 2)
            for (int m = 1; m <= 3; m += 2) {
                run_fp8(&cases[i], m, Wn, 0, 1, 800 + i, 1);
                run_fp8(&cases[i], m, Wn, 1, 0, 900 + i, 1);
            }
    as_test_note("4 shapes x W 1, 2, 4, 8 x m 1, 3: tensor cores on grid data, the portable path on random data");
}

/* The bf16 linear of a grouped fp8-form weight (wo_a): G groups of olr rows, group g reading x's columns
 * [g gw, (g + 1) gw), outputs og[t][g olr + o] as the engine lays them out. */
static void run_bf16x(const char *name, int G, int olr, int gw, int m, int grid, int portable, uint64_t seed)
{
    if (as_test_fp8_small_only() && (int64_t)G * olr * gw > ((int64_t)1 << 22))
        return;
    AsTestFp8W f;
    as_test_fp8w_make(&f, (int64_t)G * olr, gw, 32, grid, seed);
    const int64_t ldx = (int64_t)G * gw, ldy = (int64_t)G * olr;
    float *x = as_test_xmalloc(sizeof(float) * (size_t)(m * ldx));
    if (grid)
        as_test_bf16_grid_x(x, m, ldx, seed + 1);
    else
        as_fill_uniform(x, m * ldx, 2.0f, seed + 1, 1);
    AsTestFp8Dev d;
    as_test_fp8_upload(&f, &d);
    AsFp8Weight w = d.w;
    w.n_out = olr, w.batch = G, w.stride_rows = olr;
    as_bf16_t *dx = as_gpu_bf16(x, m * ldx);
    uint16_t *dy = as_gpu_alloc(2 * (size_t)((m + 1) * ldy));
    as_gpu_poison(dy, 2 * (size_t)((m + 1) * ldy));
    char what[200];
    snprintf(what, sizeof what, "fp8 gemv bf16 x %s %d groups of %dx%d m=%d%s%s", name, G, olr, gw, m,
             portable ? " portable" : "", grid ? " grid" : "");
    as_gpu_check_launch(as_k_fp8_gemv_cfg(&w, NULL, dx, ldx, gw, m, dy, ldy, olr, 0, 0, portable, 0), what);
    uint16_t *got = as_test_xmalloc(2 * (size_t)((m + 1) * ldy));
    as_gpu_get_bytes(got, dy, 2 * (size_t)((m + 1) * ldy));
    /* the twin per group: the bf16 linear of the group's rows on x's group columns; the magnitudes
     * sum |x w| in double over the dequantised rows */
    float *want = as_test_xmalloc(sizeof(float) * (size_t)(m * ldy)), *xg = as_test_xmalloc(sizeof(float) * (size_t)(m * gw));
    float *yg = as_test_xmalloc(sizeof(float) * (size_t)(m * olr)), *wr = as_test_xmalloc(sizeof(float) * (size_t)gw);
    double *mag = as_test_xmalloc(sizeof(double) * (size_t)(m * ldy));
    for (int g = 0; g < G; g++) {
        for (int t = 0; t < m; t++)
            memcpy(xg + (int64_t)t * gw, x + t * ldx + (int64_t)g * gw, sizeof(float) * (size_t)gw);
        as_linear_rows(xg, m, &f.w, (int64_t)g * olr, olr, yg, olr, true);
        for (int o = 0; o < olr; o++) {
            as_wt_rows_f32(&f.w, (int64_t)g * olr + o, 1, wr);
            for (int t = 0; t < m; t++) {
                double acc = 0;
                for (int i = 0; i < gw; i++)
                    acc += fabs((double)xg[(int64_t)t * gw + i] * wr[i]);
                mag[t * ldy + (int64_t)g * olr + o] = acc;
                want[t * ldy + (int64_t)g * olr + o] = yg[(int64_t)t * olr + o];
            }
        }
    }
    AsTestFp8Cmp r = as_test_fp8_compare(what, got, ldy, want, mag, m, ldy, bound_of(grid, portable));
    int64_t guard = 0;
    for (int64_t i = (int64_t)m * ldy; i < (int64_t)(m + 1) * ldy; i++)
        guard += got[i] != 0xffff;
    CHECK(r.bad == 0 && r.spec6_ok, "%s: %lld of %lld outputs outside the rule (SPEC 6 %s)", what, (long long)r.bad,
          (long long)(m * ldy), r.spec6_ok ? "met" : "not met");
    CHECK(guard == 0, "%s: %lld elements written past the output", what, (long long)guard);
    as_test_fp8_note(what, &r);
    free(x), free(got), free(want), free(xg), free(yg), free(wr), free(mag);
    as_gpu_free(dx), as_gpu_free(dy);
    as_test_fp8_dev_free(&d);
    as_test_fp8w_free(&f);
}

GPU_TEST(gpu_fp8_gemv_bf16x_grouped_wo_a)
{
    run_bf16x("flash wo_a", 8, 1024, 4096, 1, 0, 0, 31);
    run_bf16x("flash wo_a", 8, 1024, 4096, 1, 1, 0, 32);
    run_bf16x("flash wo_a", 8, 1024, 4096, 8, 0, 0, 33);
    run_bf16x("tiny wo_a (groups inside a 32-row scale block)", 2, 16, 64, 3, 1, 0, 34);
    run_bf16x("tiny wo_a", 2, 16, 64, 1, 0, 0, 37);
    run_bf16x("one group", 1, 100, 96, 5, 0, 0, 35);
    run_bf16x("flash wo_a portable", 8, 1024, 4096, 1, 0, 1, 36);
}

/* The epilogues against the plain GEMV's own output (the same launch configuration: the same bits):
 * the residual h = bf16(h + y), q's RoPE pairs (ref/rope.c's arithmetic, tables of random values,
 * positions from pos0 or an array with a negative entry: that row unrotated), and the RMSNorm of the
 * finished row by the last block against as_k_rmsnorm launched on it. */
typedef struct {
    AsTestFp8Case k;
    AsTestFp8Dev d;
    AsFp8Act x;
    uint16_t *y_plain; /* host, [m][n_out] */
    int m;
} Epi;

static void epi_init(Epi *e, const Shape *c, int m, uint64_t seed)
{
    memset(e, 0, sizeof *e);
    e->m = m;
    as_test_fp8_case(&e->k, c->n_out, c->n_in, c->B, m, 0, seed);
    e->d = e->k.d;
    e->x = e->k.xa;
    uint16_t *dy = as_gpu_alloc(2 * (size_t)m * c->n_out);
    as_gpu_check_launch(as_k_fp8_gemv(&e->d.w, &e->x, m, dy, c->n_out, 0, 0, 0), "plain fp8 gemv");
    e->y_plain = as_test_xmalloc(2 * (size_t)m * c->n_out);
    as_gpu_get_bytes(e->y_plain, dy, 2 * (size_t)m * c->n_out);
    as_gpu_free(dy);
}

static void epi_free(Epi *e)
{
    as_test_fp8_case_free(&e->k);
    free(e->y_plain);
}

static int64_t count_diff(const uint16_t *a, const uint16_t *b, int64_t n)
{
    int64_t d = 0;
    for (int64_t i = 0; i < n; i++)
        d += a[i] != b[i];
    return d;
}

static uint16_t residual_bits(uint16_t h, uint16_t y) { return as_bf16_bits(as_bf16_to_f32(h) + as_bf16_to_f32(y)); }

static void check_residual(const Shape *c, int m, uint64_t seed)
{
    Epi e;
    epi_init(&e, c, m, seed);
    const int64_t n = (int64_t)m * c->n_out;
    float *h = as_test_xmalloc(sizeof(float) * (size_t)n);
    as_fill_uniform(h, n, 4.0f, seed + 2, 1);
    as_bf16_t *dh = as_gpu_bf16(h, n);
    uint16_t *dy = as_gpu_alloc(2 * (size_t)n);
    char what[128];
    snprintf(what, sizeof what, "fp8 gemv + residual %s %dx%d m=%d", c->name, c->n_out, c->n_in, m);
    as_gpu_check_launch(as_k_fp8_gemv_residual(&e.d.w, &e.x, m, dy, c->n_out, dh, c->n_out, 0), what);
    uint16_t *y = as_test_xmalloc(2 * (size_t)n), *hg = as_test_xmalloc(2 * (size_t)n), *hw = as_test_xmalloc(2 * (size_t)n);
    as_gpu_get_bytes(y, dy, 2 * (size_t)n);
    as_gpu_get_bytes(hg, dh, 2 * (size_t)n);
    for (int64_t i = 0; i < n; i++)
        hw[i] = residual_bits(as_bf16_bits(h[i]), e.y_plain[i]);
    CHECK(count_diff(y, e.y_plain, n) == 0, "%s: y differs from the plain GEMV's", what);
    CHECK(count_diff(hg, hw, n) == 0, "%s: %lld of %lld h values are not bf16(h + y)", what, (long long)count_diff(hg, hw, n),
          (long long)n);
    free(h), free(y), free(hg), free(hw);
    as_gpu_free(dh), as_gpu_free(dy);
    epi_free(&e);
}

/* ref/rope.c's pair: re = a c - b s, im = a s + b c, each step rounded to f32, then both to bf16. */
static void rope_pair_host(uint16_t *x0, uint16_t *x1, float cs, float sn)
{
    const float a = as_bf16_to_f32(*x0), b = as_bf16_to_f32(*x1);
    const float ac = a * cs, bs = b * sn, as = a * sn, bc = b * cs;
    *x0 = as_bf16_bits(ac - bs);
    *x1 = as_bf16_bits(as + bc);
}

static void check_rope(const Shape *c, int m, int hd, int rd, int use_pos, int inverse, int room, uint64_t seed)
{
    Epi e;
    epi_init(&e, c, m, seed);
    const int heads = c->n_out / hd, half = rd / 2, max_pos = 64, pos0 = 5;
    float *cs = as_test_xmalloc(sizeof(float) * (size_t)max_pos * half), *sn = as_test_xmalloc(sizeof(float) * (size_t)max_pos * half);
    as_fill_uniform(cs, (int64_t)max_pos * half, 1.0f, seed + 3, 0);
    as_fill_uniform(sn, (int64_t)max_pos * half, 1.0f, seed + 4, 0);
    int32_t pos[8];
    for (int t = 0; t < m; t++)
        pos[t] = t == 1 ? -1 : (int32_t)((7 * t + 3) % max_pos);
    float *dcs = as_gpu_f32(cs, (int64_t)max_pos * half), *dsn = as_gpu_f32(sn, (int64_t)max_pos * half);
    int32_t *dpos = as_gpu_bytes(pos, sizeof(int32_t) * (size_t)m);
    const int64_t n = (int64_t)m * c->n_out;
    uint16_t *dy = as_gpu_alloc(2 * (size_t)n);
    char what[160];
    snprintf(what, sizeof what, "fp8 gemv + rope %s %d heads x %d rd %d m=%d %s%s room %d", c->name, heads, hd, rd, m,
             use_pos ? "pos[]" : "pos0", inverse ? " inverse" : "", room);
    as_gpu_check_launch(as_k_fp8_gemv_rope(&e.d.w, &e.x, m, dy, c->n_out, heads, hd, rd, pos0, use_pos ? dpos : NULL,
                                           dcs, dsn, inverse, room, 0),
                        what);
    uint16_t *y = as_test_xmalloc(2 * (size_t)n), *want = as_test_xmalloc(2 * (size_t)n);
    as_gpu_get_bytes(y, dy, 2 * (size_t)n);
    memcpy(want, e.y_plain, 2 * (size_t)n);
    for (int t = 0; t < m; t++) {
        const int p = use_pos ? pos[t] : pos0 + t;
        if (p < 0)
            continue;
        for (int h = 0; h < heads; h++)
            for (int k = 0; k < half; k++) {
                uint16_t *row = want + (int64_t)t * c->n_out + (int64_t)h * hd + (hd - rd);
                const float s = sn[p * half + k];
                rope_pair_host(&row[2 * k], &row[2 * k + 1], cs[p * half + k], inverse ? -s : s);
            }
    }
    CHECK(count_diff(y, want, n) == 0, "%s: %lld of %lld values differ from the plain GEMV's output rotated", what,
          (long long)count_diff(y, want, n), (long long)n);
    free(cs), free(sn), free(y), free(want);
    as_gpu_free(dcs), as_gpu_free(dsn), as_gpu_free(dpos), as_gpu_free(dy);
    epi_free(&e);
}

static void check_norm(const Shape *c, int with_h, uint64_t seed)
{
    Epi e;
    epi_init(&e, c, 1, seed);
    const int n = c->n_out;
    float *h = as_test_xmalloc(sizeof(float) * (size_t)n), *nw = as_test_xmalloc(sizeof(float) * (size_t)n);
    as_fill_uniform(h, n, 4.0f, seed + 5, 1);
    as_fill_uniform(nw, n, 1.5f, seed + 6, 1);
    as_bf16_t *dh = as_gpu_bf16(h, n);
    float *dnw = as_gpu_f32(nw, n);
    uint16_t *dy = as_gpu_alloc(2 * (size_t)n), *dyn = as_gpu_alloc(2 * (size_t)n), *dref = as_gpu_alloc(2 * (size_t)n);
    unsigned *ctr = as_gpu_alloc(sizeof(unsigned));
    REQUIRE(cudaMemset(ctr, 0, sizeof(unsigned)) == cudaSuccess, "cudaMemset");
    char what[128];
    snprintf(what, sizeof what, "fp8 gemv%s + rmsnorm %s %dx%d", with_h ? " + residual" : "", c->name, n, c->n_in);
    as_gpu_check_launch(as_k_fp8_gemv_norm(&e.d.w, &e.x, dy, with_h ? dh : NULL, dnw, 1e-6f, dyn, ctr, 0), what);
    as_gpu_check_launch(as_k_rmsnorm(with_h ? dh : dy, n, dnw, dref, n, 1, n, 1e-6f, 0), "rmsnorm of the GEMV's row");
    uint16_t *y = as_test_xmalloc(2 * (size_t)n), *yn = as_test_xmalloc(2 * (size_t)n), *yr = as_test_xmalloc(2 * (size_t)n);
    uint16_t *hg = as_test_xmalloc(2 * (size_t)n);
    unsigned c_after = 1;
    as_gpu_get_bytes(y, dy, 2 * (size_t)n);
    as_gpu_get_bytes(yn, dyn, 2 * (size_t)n);
    as_gpu_get_bytes(yr, dref, 2 * (size_t)n);
    as_gpu_get_bytes(hg, dh, 2 * (size_t)n);
    as_gpu_get_bytes(&c_after, ctr, sizeof c_after);
    CHECK(count_diff(y, e.y_plain, n) == 0, "%s: y differs from the plain GEMV's", what);
    if (with_h) {
        int64_t bad = 0;
        for (int i = 0; i < n; i++)
            bad += hg[i] != residual_bits(as_bf16_bits(h[i]), e.y_plain[i]);
        CHECK(bad == 0, "%s: %lld h values are not bf16(h + y)", what, (long long)bad);
    }
    CHECK(count_diff(yn, yr, n) == 0, "%s: %lld of %d normalised values differ from as_k_rmsnorm's", what,
          (long long)count_diff(yn, yr, n), n);
    CHECK(c_after == 0, "%s: the block counter was left at %u", what, c_after);
    free(h), free(nw), free(y), free(yn), free(yr), free(hg);
    as_gpu_free(dh), as_gpu_free(dnw), as_gpu_free(dy), as_gpu_free(dyn), as_gpu_free(dref), as_gpu_free(ctr);
    epi_free(&e);
}

GPU_TEST(gpu_fp8_gemv_epilogues)
{
    const Shape wo_b = kFlash[3], wq_b = kFlash[1], wq_a = kFlash[0];
    if (!as_test_fp8_small_only()) {
        check_residual(&wo_b, 1, 41);
        check_residual(&wo_b, 3, 42);
        check_rope(&wq_b, 1, 512, 64, 0, 0, 0, 43);
        check_rope(&wq_b, 1, 512, 64, 1, 0, 200, 44);
        check_norm(&wq_a, 0, 45);
        check_norm(&wo_b, 1, 46);
    }
    check_residual(&kTiny[3], 5, 47);
    check_rope(&kTiny[1], 3, 64, 16, 1, 1, 0, 48);
    check_rope(&kTiny[1], 8, 64, 16, 0, 0, 3, 49);
    check_norm(&kTiny[0], 0, 50);
    check_norm(&kTiny[3], 1, 51);
}

/* Sizes and alignments the kernel cannot take are refused, not run. */
GPU_TEST(gpu_fp8_gemv_refusals)
{
    AsTestFp8W f;
    as_test_fp8w_make(&f, 64, 96, 32, 0, 61);
    AsTestFp8Dev d;
    as_test_fp8_upload(&f, &d);
    float x[2 * 96];
    as_test_fp8_x(x, 2, 96, 0, 62);
    void *xbuf;
    const AsFp8Act xa = as_test_act_quant_dev(x, 2, 96, &xbuf);
    uint16_t *dy = as_gpu_alloc(2 * 64 * 9);
    AsFp8Weight w = d.w;
    CHECK(as_k_fp8_gemv(&w, &xa, 9, dy, 64, 0, 0, 0) == (int)cudaErrorInvalidValue, "m = 9 accepted");
    w.n_in = 80;
    CHECK(as_k_fp8_gemv(&w, &xa, 1, dy, 64, 0, 0, 0) == (int)cudaErrorInvalidValue, "n_in 80 accepted");
    w = d.w;
    w.ldws = 2;
    CHECK(as_k_fp8_gemv(&w, &xa, 1, dy, 64, 0, 0, 0) == (int)cudaErrorInvalidValue, "a scale row shorter than n_in / 32");
    AsFp8Act xm = xa;
    xm.q += 8;
    CHECK(as_k_fp8_gemv(&d.w, &xm, 1, dy, 64, 0, 0, 0) == (int)cudaErrorInvalidValue, "misaligned codes accepted");
    CHECK(as_k_fp8_gemv(&d.w, &xa, 1, dy, 63, 0, 0, 0) == (int)cudaErrorInvalidValue, "ldy below n_out accepted");
    CHECK(as_k_fp8_gemv(&d.w, &xa, 0, dy, 64, 0, 0, 0) == 0, "m = 0 is not a no-op");
    cudaGetLastError();
    as_gpu_free(dy), as_gpu_free(xbuf);
    as_test_fp8_dev_free(&d);
    as_test_fp8w_free(&f);
}
