/* kernels/gemv.cu on e4m3 codes (as_k_gemv_e4m3 and its fused forms) against the same GEMV on the
 * dequantised weight, bf16(e4m3 * scale) (as_k_gemv_bf16: the bf16 upload's kernel): bit for bit, since
 * the engine's fp8 precision promises the two forms give the same numbers; and against the CPU twin
 * (ref/linear.c's GEMV of the dequantised weight) by the bf16 GEMV's rule (tests/gpu_gemv.c: exact, one
 * ulp, or the f32 order's bound).
 * Cases: the flash decode shapes (wq_a, wq_b, wkv, wo_b, indexer.wq_b), tiny's, awkward ones (n_out not a
 * multiple of any row group, one output row, n_in 32, 128-blocks of scales over 200 rows), m = 1, 3, 8;
 * every (R, W) on two shapes; the grouped wo_a (batch, its groups on whole scale blocks); the residual,
 * RoPE and RMSNorm epilogues; the refusals. Weights over the whole e4m3 range but NaN, e8m0 scales. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/kernels.h"
#include "ref/gemv.h"
#include "ref/numerics.h"
#include "tests/lib/fp8_cases.h"
#include "tests/lib/gpu_fp8.h"
#include "tests/lib/gpu_util.h"
#include "tests/lib/harness.h"

/* Not in kernels.h: the bf16 GEMV with an explicit (R, W) (the micro-benchmark's). */
int as_k_gemv_bf16_cfg(const as_bf16_t *W, int64_t ldw, int64_t strideW, int n_out, int n_in, const as_bf16_t *x,
                       int64_t ldx, int64_t strideX, int m, void *y, int64_t ldy, int64_t strideY, int y_f32,
                       int batch, int R, int Wn, cudaStream_t st);

typedef struct {
    const char *name;
    int n_out, n_in, B;
} Shape;

/* A weight on the device in both forms, and m rows of bf16 activations. */
typedef struct {
    AsTestFp8W f;
    AsTestFp8Dev d;
    float *wdq;       /* host, [n_out][n_in]: the dequantised weight */
    as_bf16_t *dwdq;  /* its bf16 upload */
    float *x;         /* host, [m][n_in] */
    as_bf16_t *dx;
    int n_out, n_in, m;
} Pair;

static void pair_init(Pair *p, int n_out, int n_in, int B, int m, uint64_t seed)
{
    memset(p, 0, sizeof *p);
    p->n_out = n_out, p->n_in = n_in, p->m = m;
    as_test_fp8w_make(&p->f, n_out, n_in, B, 0, seed);
    as_test_fp8_upload(&p->f, &p->d);
    p->wdq = as_test_xmalloc(sizeof(float) * (size_t)n_out * n_in);
    as_wt_rows_f32(&p->f.w, 0, n_out, p->wdq);
    p->dwdq = as_gpu_bf16(p->wdq, (int64_t)n_out * n_in);
    p->x = as_test_xmalloc(sizeof(float) * (size_t)m * n_in);
    as_fill_uniform(p->x, (int64_t)m * n_in, 2.0f, seed + 1, 1);
    p->dx = as_gpu_bf16(p->x, (int64_t)m * n_in);
}

static void pair_free(Pair *p)
{
    as_test_fp8_dev_free(&p->d);
    as_test_fp8w_free(&p->f);
    free(p->wdq), free(p->x);
    as_gpu_free(p->dwdq), as_gpu_free(p->dx);
}

static int64_t count_diff(const uint16_t *a, const uint16_t *b, int64_t n)
{
    int64_t d = 0;
    for (int64_t i = 0; i < n; i++)
        d += a[i] != b[i];
    return d;
}

/* Both GEMVs of a pair with (R, W) (0, 0: automatic) into poisoned outputs; returns the differing values
 * (and, once, the bf16 output against the CPU twin). */
static int64_t run_pair(const Pair *p, int R, int Wn, int twin)
{
    const int64_t n = (int64_t)p->m * p->n_out;
    uint16_t *d8 = as_gpu_alloc(2 * (size_t)n), *d16 = as_gpu_alloc(2 * (size_t)n);
    as_gpu_poison(d8, 2 * (size_t)n), as_gpu_poison(d16, 2 * (size_t)n);
    char what[160];
    snprintf(what, sizeof what, "e4m3 gemv %dx%d m=%d R%d W%d", p->n_out, p->n_in, p->m, R, Wn);
    as_gpu_check_launch(as_k_gemv_e4m3_cfg(&p->d.w, p->dx, p->n_in, 0, p->m, d8, p->n_out, 0, 0, R, Wn, 0), what);
    as_gpu_check_launch(as_k_gemv_bf16_cfg(p->dwdq, p->n_in, 0, p->n_out, p->n_in, p->dx, p->n_in, 0, p->m, d16,
                                           p->n_out, 0, 0, 1, R, Wn, 0),
                        what);
    uint16_t *y8 = as_test_xmalloc(2 * (size_t)n), *y16 = as_test_xmalloc(2 * (size_t)n);
    as_gpu_get_bytes(y8, d8, 2 * (size_t)n);
    as_gpu_get_bytes(y16, d16, 2 * (size_t)n);
    const int64_t diff = count_diff(y8, y16, n);
    if (twin) {
        float *want = as_test_xmalloc(sizeof(float) * (size_t)n);
        double *mag = as_test_xmalloc(sizeof(double) * (size_t)n);
        for (int t = 0; t < p->m; t++) {
            float *xr = p->x + (int64_t)t * p->n_in;
            for (int64_t i = 0; i < p->n_in; i++)
                xr[i] = as_bf16_to_f32(as_bf16_bits(xr[i]));
            as_gemv_f32(xr, p->wdq, p->n_in, p->n_out, want + (int64_t)t * p->n_out);
            for (int o = 0; o < p->n_out; o++) {
                double s = 0;
                for (int64_t i = 0; i < p->n_in; i++)
                    s += fabs((double)xr[i] * p->wdq[(int64_t)o * p->n_in + i]);
                mag[(int64_t)t * p->n_out + o] = s;
            }
        }
        for (int64_t i = 0; i < n; i++)
            want[i] = as_bf16_to_f32(as_bf16_bits(want[i]));
        const AsTestFp8Cmp c = as_test_fp8_compare(what, y8, p->n_out, want, mag, p->m, p->n_out, 0x1p-16);
        as_test_fp8_note(what, &c);
        CHECK(c.bad == 0 && c.spec6_ok, "%s: %lld values out of the f32 order's bound against the CPU twin", what,
              (long long)c.bad);
        free(want), free(mag);
    }
    free(y8), free(y16);
    as_gpu_free(d8), as_gpu_free(d16);
    return diff;
}

static const Shape kShapes[] = {
    {"flash wq_a", 1280, 5120, 32},  {"flash wq_b", 32768, 1280, 32}, {"flash wkv", 512, 5120, 32},
    {"flash wo_b", 5120, 8192, 32},  {"flash indexer.wq_b", 4096, 1280, 32},
    {"tiny wq_a", 32, 64, 32},       {"tiny wq_b", 256, 32, 32},      {"tiny wkv", 64, 64, 32},
    {"rows off every group", 37, 96, 32}, {"one row", 1, 64, 32},      {"n_in 32", 200, 32, 32},
    {"128-blocks over 200 rows", 200, 256, 128}};

GPU_TEST(gpu_gemv_e4m3_same_bits_as_bf16)
{
    const int ms[] = {1, 3, 8};
    for (size_t s = 0; s < sizeof kShapes / sizeof kShapes[0]; s++) {
        const Shape *c = &kShapes[s];
        if (as_test_fp8_small_only() && (int64_t)c->n_out * c->n_in > ((int64_t)1 << 22))
            continue;
        for (size_t k = 0; k < sizeof ms / sizeof ms[0]; k++) {
            Pair p;
            pair_init(&p, c->n_out, c->n_in, c->B, ms[k], 100 + s * 7 + k);
            const int64_t d = run_pair(&p, 0, 0, k == 0 && (int64_t)c->n_out * c->n_in <= ((int64_t)1 << 23));
            CHECK(d == 0, "%s m=%d: %lld of %lld values differ from the bf16 GEMV of the dequantised weight", c->name,
                  ms[k], (long long)d, (long long)p.m * p.n_out);
            pair_free(&p);
        }
    }
}

GPU_TEST(gpu_gemv_e4m3_every_config)
{
    const Shape cs[] = {{"flash wkv", 512, 5120, 32}, {"tiny wq_b", 256, 32, 32}};
    for (size_t s = 0; s < 2; s++)
        for (int m = 1; m <= 8; m += 7) {
            Pair p;
            pair_init(&p, cs[s].n_out, cs[s].n_in, cs[s].B, m, 300 + s + m);
            for (int R = 1; R <= 4; R *= 2)
                for (int W = 1; W <= 8; W *= 2) {
                    const int64_t d = run_pair(&p, R, W, 0);
                    CHECK(d == 0, "%s m=%d R%d W%d: %lld values differ from the bf16 GEMV's", cs[s].name, m, R, W,
                          (long long)d);
                }
            pair_free(&p);
        }
}

/* The grouped wo_a: G groups of olr rows (one weight of G * olr rows), group g reading columns g * gw.. of
 * the o rows (ldo = G * gw), against the bf16 GEMV batched the same way. */
static void run_grouped(const char *name, int G, int olr, int gw, int m, uint64_t seed)
{
    Pair p;
    pair_init(&p, G * olr, gw, 32, 1, seed);
    const int64_t ldo = (int64_t)G * gw, ny = (int64_t)m * G * olr;
    float *o = as_test_xmalloc(sizeof(float) * (size_t)(m * ldo));
    as_fill_uniform(o, m * ldo, 2.0f, seed + 5, 1);
    as_bf16_t *dO = as_gpu_bf16(o, m * ldo);
    uint16_t *d8 = as_gpu_alloc(2 * (size_t)ny), *d16 = as_gpu_alloc(2 * (size_t)ny);
    as_gpu_poison(d8, 2 * (size_t)ny), as_gpu_poison(d16, 2 * (size_t)ny);
    AsFp8Weight w = p.d.w;
    w.n_out = olr, w.batch = G, w.stride_rows = olr;
    as_gpu_check_launch(as_k_gemv_e4m3(&w, dO, ldo, gw, m, d8, (int64_t)G * olr, olr, 0, 0), name);
    as_gpu_check_launch(as_k_gemv_bf16(p.dwdq, gw, (int64_t)olr * gw, olr, gw, dO, ldo, gw, m, d16, (int64_t)G * olr,
                                       olr, 0, G, 0),
                        name);
    uint16_t *y8 = as_test_xmalloc(2 * (size_t)ny), *y16 = as_test_xmalloc(2 * (size_t)ny);
    as_gpu_get_bytes(y8, d8, 2 * (size_t)ny), as_gpu_get_bytes(y16, d16, 2 * (size_t)ny);
    const int64_t d = count_diff(y8, y16, ny);
    CHECK(d == 0, "%s (%d groups of %dx%d, m=%d): %lld of %lld values differ from the bf16 GEMV's", name, G, olr, gw, m,
          (long long)d, (long long)ny);
    free(o), free(y8), free(y16);
    as_gpu_free(dO), as_gpu_free(d8), as_gpu_free(d16);
    pair_free(&p);
}

GPU_TEST(gpu_gemv_e4m3_grouped_wo_a)
{
    if (!as_test_fp8_small_only()) {
        run_grouped("flash wo_a", 8, 1024, 4096, 1, 41);
        run_grouped("flash wo_a", 8, 1024, 4096, 8, 42);
    }
    run_grouped("tiny-sized wo_a", 2, 32, 64, 3, 43);
    run_grouped("one group", 1, 96, 96, 5, 44);
}

/* The fused forms against the bf16 GEMV's fused forms on the dequantised weight: the same bits. */
static void check_fused(const Shape *c, int m, uint64_t seed)
{
    Pair p;
    pair_init(&p, c->n_out, c->n_in, c->B, m, seed);
    const int64_t n = (int64_t)m * c->n_out;
    uint16_t *y8 = as_test_xmalloc(2 * (size_t)n), *y16 = as_test_xmalloc(2 * (size_t)n),
             *h8 = as_test_xmalloc(2 * (size_t)n), *h16 = as_test_xmalloc(2 * (size_t)n);
    uint16_t *d8 = as_gpu_alloc(2 * (size_t)n), *d16 = as_gpu_alloc(2 * (size_t)n);
    float *h = as_test_xmalloc(sizeof(float) * (size_t)n);
    as_fill_uniform(h, n, 4.0f, seed + 2, 1);
    /* residual */
    as_bf16_t *dh8 = as_gpu_bf16(h, n), *dh16 = as_gpu_bf16(h, n);
    as_gpu_check_launch(as_k_gemv_e4m3_residual(&p.d.w, p.dx, c->n_in, m, d8, c->n_out, dh8, c->n_out, 0), "residual");
    as_gpu_check_launch(as_k_gemv_bf16_residual(p.dwdq, c->n_out, c->n_in, p.dx, c->n_in, m, d16, c->n_out, dh16,
                                                c->n_out, 0),
                        "residual");
    as_gpu_get_bytes(y8, d8, 2 * (size_t)n), as_gpu_get_bytes(y16, d16, 2 * (size_t)n);
    as_gpu_get_bytes(h8, dh8, 2 * (size_t)n), as_gpu_get_bytes(h16, dh16, 2 * (size_t)n);
    CHECK(count_diff(y8, y16, n) == 0 && count_diff(h8, h16, n) == 0, "%s m=%d + residual: y %lld, h %lld values differ",
          c->name, m, (long long)count_diff(y8, y16, n), (long long)count_diff(h8, h16, n));
    /* q's RoPE: heads of 64 with rd 16, positions by array (one negative: unrotated) */
    const int hd = 64, rd = 16, half = rd / 2, max_pos = 64;
    if (c->n_out % hd == 0) {
        float *cs = as_test_xmalloc(sizeof(float) * max_pos * half), *sn = as_test_xmalloc(sizeof(float) * max_pos * half);
        as_fill_uniform(cs, (int64_t)max_pos * half, 1.0f, seed + 3, 0);
        as_fill_uniform(sn, (int64_t)max_pos * half, 1.0f, seed + 4, 0);
        int32_t pos[8];
        for (int t = 0; t < m; t++)
            pos[t] = t == 1 ? -1 : (int32_t)((7 * t + 3) % max_pos);
        float *dcs = as_gpu_f32(cs, (int64_t)max_pos * half), *dsn = as_gpu_f32(sn, (int64_t)max_pos * half);
        int32_t *dpos = as_gpu_bytes(pos, sizeof(int32_t) * (size_t)m);
        const int heads = c->n_out / hd;
        as_gpu_check_launch(as_k_gemv_e4m3_rope(&p.d.w, p.dx, c->n_in, m, d8, c->n_out, heads, hd, rd, 5, dpos, dcs, dsn,
                                                0, 0, 0),
                            "rope");
        as_gpu_check_launch(as_k_gemv_bf16_rope(p.dwdq, c->n_out, c->n_in, p.dx, c->n_in, m, d16, c->n_out, heads, hd, rd,
                                                5, dpos, dcs, dsn, 0, 0, 0),
                            "rope");
        as_gpu_get_bytes(y8, d8, 2 * (size_t)n), as_gpu_get_bytes(y16, d16, 2 * (size_t)n);
        CHECK(count_diff(y8, y16, n) == 0, "%s m=%d + rope: %lld values differ", c->name, m,
              (long long)count_diff(y8, y16, n));
        free(cs), free(sn);
        as_gpu_free(dcs), as_gpu_free(dsn), as_gpu_free(dpos);
    }
    /* the RMSNorm of the finished row (m = 1), with the residual */
    if (m == 1) {
        float *nw = as_test_xmalloc(sizeof(float) * (size_t)c->n_out);
        as_fill_uniform(nw, c->n_out, 1.5f, seed + 6, 0);
        float *dnw = as_gpu_f32(nw, c->n_out);
        as_bf16_t *g8 = as_gpu_bf16(h, n), *g16 = as_gpu_bf16(h, n);
        uint16_t *z8 = as_gpu_alloc(2 * (size_t)n), *z16 = as_gpu_alloc(2 * (size_t)n);
        unsigned *ctr = as_gpu_alloc(2 * sizeof(unsigned));
        CHECK(cudaMemset(ctr, 0, 2 * sizeof(unsigned)) == cudaSuccess, "counter");
        as_gpu_check_launch(as_k_gemv_e4m3_norm(&p.d.w, p.dx, d8, g8, dnw, 1e-6f, z8, ctr, 0), "norm");
        as_gpu_check_launch(as_k_gemv_bf16_norm(p.dwdq, c->n_out, c->n_in, p.dx, d16, g16, dnw, 1e-6f, z16, ctr + 1, 0),
                            "norm");
        as_gpu_get_bytes(y8, z8, 2 * (size_t)n), as_gpu_get_bytes(y16, z16, 2 * (size_t)n);
        CHECK(count_diff(y8, y16, n) == 0, "%s + residual + rmsnorm: %lld values differ", c->name,
              (long long)count_diff(y8, y16, n));
        free(nw);
        as_gpu_free(dnw), as_gpu_free(g8), as_gpu_free(g16), as_gpu_free(z8), as_gpu_free(z16), as_gpu_free(ctr);
    }
    free(y8), free(y16), free(h8), free(h16), free(h);
    as_gpu_free(d8), as_gpu_free(d16), as_gpu_free(dh8), as_gpu_free(dh16);
    pair_free(&p);
}

GPU_TEST(gpu_gemv_e4m3_epilogues)
{
    const Shape cs[] = {{"flash wq_b", 32768, 1280, 32}, {"flash wo_b", 5120, 8192, 32}, {"tiny wq_b", 256, 32, 32},
                        {"rows off every group", 192, 96, 32}};
    for (size_t s = 0; s < sizeof cs / sizeof cs[0]; s++) {
        if (as_test_fp8_small_only() && (int64_t)cs[s].n_out * cs[s].n_in > ((int64_t)1 << 22))
            continue;
        check_fused(&cs[s], 1, 500 + s);
        check_fused(&cs[s], 3, 510 + s);
    }
}

GPU_TEST(gpu_gemv_e4m3_refusals)
{
    Pair p;
    pair_init(&p, 64, 64, 32, 1, 900);
    uint16_t *dy = as_gpu_alloc(2 * 64);
    AsFp8Weight w = p.d.w;
    w.ws = NULL;
    CHECK(as_k_gemv_e4m3(&w, p.dx, 64, 0, 1, dy, 64, 0, 0, 0) != 0, "no block scales accepted");
    w = p.d.w;
    w.n_in = 48;
    CHECK(as_k_gemv_e4m3(&w, p.dx, 64, 0, 1, dy, 64, 0, 0, 0) != 0, "n_in 48 (not whole blocks) accepted");
    w = p.d.w;
    w.n_out = 16, w.batch = 2, w.stride_rows = 16;
    CHECK(as_k_gemv_e4m3(&w, p.dx, 64, 0, 1, dy, 64, 16, 0, 0) != 0, "groups off the 32-row scale blocks accepted");
    CHECK(as_k_gemv_e4m3(NULL, p.dx, 64, 0, 1, dy, 64, 0, 0, 0) != 0, "no weight accepted");
    w = p.d.w;
    CHECK(as_k_gemv_e4m3(&w, p.dx, 64, 0, 9, dy, 64, 0, 0, 0) != 0, "m = 9 accepted");
    cudaGetLastError();
    as_gpu_free(dy);
    pair_free(&p);
}

/* kernels/fp8_dequant.cu against its twin, as_wt_rows_f32 (the bf16 upload's values): bit for bit, 32- and
 * 128-blocks of scales, rows off a block, into rows wider than the weight. */
GPU_TEST(gpu_gemv_e4m3_dequant_exact)
{
    const Shape cs[] = {{"flash wq_a", 1280, 5120, 32}, {"tiny wq_b", 256, 32, 32}, {"rows off a block", 37, 96, 32},
                        {"128-blocks over 200 rows", 200, 256, 128}};
    for (size_t s = 0; s < sizeof cs / sizeof cs[0]; s++) {
        Pair p;
        pair_init(&p, cs[s].n_out, cs[s].n_in, cs[s].B, 1, 700 + s);
        const int64_t ldo = cs[s].n_in + 8, n = (int64_t)cs[s].n_out * ldo;
        uint16_t *dout = as_gpu_alloc(2 * (size_t)n);
        as_gpu_poison(dout, 2 * (size_t)n);
        as_gpu_check_launch(as_k_fp8_dequant_bf16(&p.d.w, (as_bf16_t *)dout, ldo, 0), cs[s].name);
        uint16_t *out = as_test_xmalloc(2 * (size_t)n);
        as_gpu_get_bytes(out, dout, 2 * (size_t)n);
        int64_t bad = 0;
        for (int o = 0; o < cs[s].n_out; o++)
            for (int i = 0; i < cs[s].n_in; i++)
                bad += out[(int64_t)o * ldo + i] != as_bf16_bits(p.wdq[(int64_t)o * cs[s].n_in + i]);
        CHECK(bad == 0, "%s: %lld dequantised values are not bf16(e4m3 * scale)", cs[s].name, (long long)bad);
        free(out);
        as_gpu_free(dout);
        pair_free(&p);
    }
}
