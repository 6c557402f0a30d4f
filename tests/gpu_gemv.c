/* kernels/gemv.cu (as_k_gemv_bf16, as_k_gemv_f32w) against the CPU twin ref/gemv.c (the decode
 * linear of ref/linear.c: f32 sums in any order, bf16 or f32 out).
 *
 * Rule (SPEC 6, bf16 tensors): the GPU sums in a different order, so a bf16 output may sit one ulp
 * from the twin's. An element passes when it is bit-equal, or 1 ulp away, or within the f32
 * ordering bound |got - want| <= 2^-16 * sum_i |x_i W_i| (an output that cancels to nearly nothing
 * can move by more than its own ulp under any reordering). f32 outputs: the ordering bound only.
 * Every output is poisoned (NaN) before each launch, and a guard row past the output stays intact.
 * Cases: the flash decode shapes (wq_a, wq_b, wkv, wo_b, the grouped wo_a with the engine's strides,
 * indexer wq_b, the f32 compressor), m = 1, 3, 8; n_in not a multiple of 8 (padded rows: vector body
 * + scalar tail; unpadded rows and misaligned x: scalar kernel); every (R, W) configuration; the GEMV
 * with the residual folded in (wo_b + residual add), and with q's RoPE folded in (wq_b + rope). */
#include <cuda_runtime_api.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/kernels.h"
#include "ref/gemv.h"
#include "ref/numerics.h"
#include "tests/lib/gpu_util.h"
#include "tests/lib/harness.h"
#include "tests/lib/kernel_shapes.h"

/* Not in kernels.h: explicit (R, W) configurations of the vector kernel (0 = automatic). */
int as_k_gemv_bf16_cfg(const as_bf16_t *W, int64_t ldw, int64_t strideW, int n_out, int n_in, const as_bf16_t *x,
                       int64_t ldx, int64_t strideX, int m, void *y, int64_t ldy, int64_t strideY, int y_f32, int batch,
                       int R, int Wn, cudaStream_t st);
int as_k_gemv_f32w_cfg(const float *W, int64_t ldw, int n_out, int n_in, const as_bf16_t *x, int64_t ldx, int m,
                       float *y, int64_t ldy, int R, int Wn, cudaStream_t st);

static void *xmalloc(size_t bytes)
{
    void *p = malloc(bytes ? bytes : 1);
    REQUIRE(p, "out of host memory (%zu bytes)", bytes);
    return p;
}

static int64_t ordered16(uint16_t b) { return b & 0x8000 ? -(int64_t)(b & 0x7fff) : (int64_t)b; }

typedef struct {
    const char *name;
    int n_out, n_in;
    int64_t ldw, ldx;  /* row strides in elements (>= n_in) */
    int batch;
    int f32w;          /* f32 weights (as_k_gemv_f32w) */
    int y_f32;         /* f32 output (bf16 weights only; f32 weights always give f32) */
    int x_off;         /* x starts this many elements into its buffer (misalignment) */
} GemvCase;

/* One launch and its check. m token rows; R, Wn: 0 = automatic. Returns the number of bad elements. */
/* AS_KTEST_SMALL=1 (for runs under compute-sanitizer): only the small cases. */
static int small_only(void)
{
    const char *e = getenv("AS_KTEST_SMALL");
    return e && *e && *e != '0';
}

static int64_t run_case(const GemvCase *c, int m, int R, int Wn, uint64_t seed, int quiet)
{
    if (small_only() && (int64_t)c->batch * c->n_out * c->n_in > ((int64_t)1 << 22)) {
        if (!quiet)
            as_test_note("%s m=%d: skipped (AS_KTEST_SMALL)", c->name, m);
        return 0;
    }
    const int B = c->batch, no = c->n_out, ni = c->n_in;
    /* layout as the engine's grouped call: W_b = W + b * no * ldw, x rows ldx apart with x_b = x + b * ni,
     * y[t][b * no + o] (ldy = B * no, strideY = no) */
    /* strideX: ni as the engine's (4096), rounded up to 8 where the rows are 8-aligned so that
     * awkward n_in still reaches the vector kernel */
    const int64_t strideW = (int64_t)no * c->ldw, ldy = (int64_t)B * no, strideY = no;
    const int64_t strideX = c->ldx % 8 == 0 ? ((int64_t)ni + 7) / 8 * 8 : ni;
    const int64_t wn = (int64_t)B * strideW;
    const int64_t xn = c->x_off + (int64_t)(m - 1) * c->ldx + (int64_t)(B - 1) * strideX + ni;
    const int64_t yn = (int64_t)m * ldy;

    float *W = xmalloc(sizeof(float) * (size_t)wn), *x = xmalloc(sizeof(float) * (size_t)xn);
    as_fill_uniform(W, wn, 0.5f, seed, !c->f32w); /* f32 weights keep their full mantissa */
    as_fill_uniform(x, xn, 2.0f, seed + 77, 1);
    void *dW;
    if (c->f32w) {
        dW = as_gpu_f32(W, wn);
    } else {
        dW = as_gpu_bf16(W, wn);
    }
    as_bf16_t *dxbuf = as_gpu_bf16(x, xn);
    const int out_f32 = c->f32w || c->y_f32;
    const size_t esz = out_f32 ? 4 : 2;
    uint8_t *dy = as_gpu_alloc(esz * (size_t)(yn + ldy)); /* + one guard row */
    REQUIRE(cudaMemset(dy, 0xff, esz * (size_t)(yn + ldy)) == cudaSuccess, "cudaMemset");

    int rc;
    if (c->f32w)
        rc = as_k_gemv_f32w_cfg(dW, c->ldw, no, ni, dxbuf + c->x_off, c->ldx, m, (float *)dy, ldy, R, Wn, 0);
    else
        rc = as_k_gemv_bf16_cfg(dW, c->ldw, strideW, no, ni, dxbuf + c->x_off, c->ldx, strideX, m, dy, ldy, strideY,
                                c->y_f32, B, R, Wn, 0);
    char what[200];
    snprintf(what, sizeof what, "%s %dx%d ldw=%lld batch=%d m=%d R=%d W=%d%s%s%s", c->name, no, ni,
             (long long)c->ldw, B, m, R, Wn, c->f32w ? " f32w" : "", out_f32 ? " y=f32" : " y=bf16",
             c->x_off ? " x misaligned" : "");
    as_gpu_check_launch(rc, what);

    uint8_t *got = xmalloc(esz * (size_t)(yn + ldy));
    as_gpu_get_bytes(got, dy, esz * (size_t)(yn + ldy));

    /* the twin, per batch and token row; sum |x w| in double for the ordering bound */
    int64_t bad = 0, exact = 0, one_ulp = 0, by_bound = 0;
    double max_ratio = 0; /* |got - want| / bound, worst */
    float *xr = xmalloc(sizeof(float) * (size_t)ni), *yr = xmalloc(sizeof(float) * (size_t)no);
    double *magr = xmalloc(sizeof(double) * (size_t)no);
    uint8_t *wraw = xmalloc((c->f32w ? 4 : 2) * (size_t)no * ni);
    for (int b = 0; b < B; b++) {
        /* packed copy of W_b (ldw may pad rows), as raw bf16 / f32 */
        for (int o = 0; o < no; o++)
            for (int i = 0; i < ni; i++) {
                float v = W[b * strideW + (int64_t)o * c->ldw + i];
                if (c->f32w)
                    memcpy(wraw + 4 * ((size_t)o * ni + i), &v, 4);
                else {
                    uint16_t h = as_bf16_bits(v);
                    memcpy(wraw + 2 * ((size_t)o * ni + i), &h, 2);
                }
            }
        for (int t = 0; t < m; t++) {
            for (int i = 0; i < ni; i++)
                xr[i] = x[c->x_off + (int64_t)t * c->ldx + (int64_t)b * strideX + i];
            /* the twin (serial per call) on slices of rows, and the magnitudes, in parallel */
#pragma omp parallel for schedule(static)
            for (int o0 = 0; o0 < no; o0 += 64) {
                const int n = no - o0 < 64 ? no - o0 : 64;
                if (c->f32w)
                    as_gemv_f32(xr, wraw + 4 * (size_t)o0 * ni, ni, n, yr + o0);
                else
                    as_gemv_bf16(xr, wraw + 2 * (size_t)o0 * ni, ni, n, yr + o0);
                for (int o = o0; o < o0 + n; o++) {
                    double mag = 0;
                    for (int i = 0; i < ni; i++)
                        mag += fabs((double)xr[i] * W[b * strideW + (int64_t)o * c->ldw + i]);
                    magr[o] = mag;
                }
            }
            for (int o = 0; o < no; o++) {
                const double bound = 0x1p-16 * magr[o] + 1e-30;
                const int64_t off = (int64_t)t * ldy + (int64_t)b * strideY + o;
                double g, w;
                int64_t ulp = 0;
                if (out_f32) {
                    float gf;
                    memcpy(&gf, got + 4 * off, 4);
                    g = gf, w = yr[o];
                } else {
                    uint16_t gb;
                    memcpy(&gb, got + 2 * off, 2);
                    uint16_t wb = as_bf16_bits(yr[o]);
                    g = as_bf16_to_f32(gb), w = as_bf16_to_f32(wb);
                    ulp = llabs(ordered16(gb) - ordered16(wb));
                }
                const double err = fabs(g - w);
                const int ok_bound = err <= bound;
                if (!isnan(g) && err / bound > max_ratio)
                    max_ratio = err / bound;
                if (!isnan(g) && g == w)
                    exact++;
                else if (!out_f32 && !isnan(g) && ulp <= 1)
                    one_ulp++;
                else if (!isnan(g) && ok_bound)
                    by_bound++;
                else {
                    if (bad < 6)
                        as_test_note("%s: batch %d row t=%d out o=%d: got %.9g, want %.9g (err %.3g, ordering bound "
                                     "%.3g%s)", what, b, t, o, g, w, err, bound, isnan(g) ? ", NaN: not written?" : "");
                    bad++;
                }
            }
        }
    }
    /* guard row past the output untouched (0xff bytes) */
    int64_t guard_bad = 0;
    for (size_t i = esz * (size_t)yn; i < esz * (size_t)(yn + ldy); i++)
        guard_bad += got[i] != 0xff;
    CHECK(guard_bad == 0, "%s: %lld bytes written past the output", what, (long long)guard_bad);
    CHECK(bad == 0, "%s: %lld of %lld outputs outside the rule (1 bf16 ulp or the f32 ordering bound)", what,
          (long long)bad, (long long)yn);
    if (!quiet || bad)
        as_test_note("%s: %lld exact, %lld at 1 ulp, %lld within the ordering bound, %lld bad; worst err/bound %.3f",
                     what, (long long)exact, (long long)one_ulp, (long long)by_bound, (long long)bad, max_ratio);
    free(W), free(x), free(got), free(xr), free(yr), free(wraw), free(magr);
    as_gpu_free(dW), as_gpu_free(dxbuf), as_gpu_free(dy);
    return bad;
}

/* A shared shape (tests/lib/kernel_shapes.h) as this test's case. */
static GemvCase case_of(const AsProjShape *s, int y_f32)
{
    return (GemvCase){s->name, s->n_out, s->n_in, s->ldw, s->ldx, s->groups, s->f32_weights,
                      s->f32_weights || y_f32, s->x_off};
}

GPU_TEST(gpu_gemv_flash_shapes)
{
    const int ms[] = {1, 3, 8};
    for (int i = 0; i <= AS_N_FLASH_PROJECTIONS; i++) {
        /* the last: wkv with an f32 output */
        const GemvCase c = i < AS_N_FLASH_PROJECTIONS ? case_of(&as_flash_projections[i], 0)
                                                      : (GemvCase){"wkv y=f32", AS_FLASH_HEAD_DIM, AS_FLASH_DIM,
                                                                   AS_FLASH_DIM, AS_FLASH_DIM, 1, 0, 1, 0};
        for (size_t k = 0; k < sizeof ms / sizeof ms[0]; k++)
            run_case(&c, ms[k], 0, 0, 100 + 10 * (uint64_t)i + k, 0);
    }
}

GPU_TEST(gpu_gemv_tiny_and_awkward)
{
    const int ms[] = {1, 2, 5, 8};
    for (int i = 0; i < AS_N_SMALL_PROJECTIONS; i++) {
        const GemvCase c = case_of(&as_small_projections[i], 0);
        for (size_t k = 0; k < sizeof ms / sizeof ms[0]; k++)
            run_case(&c, ms[k], 0, 0, 300 + 10 * (uint64_t)i + k, 0);
    }
}

/* Every (R, W) instantiation on an awkward shape: n_out not a multiple of R or of the block's rows,
 * n_in with a tail, batch 3, m over all template widths. */
GPU_TEST(gpu_gemv_every_config)
{
    const AsProjShape *e = &as_every_config_projection;
    const GemvCase bf = case_of(e, 0);
    const GemvCase f32 = {"every config f32w", e->n_out, e->n_in, e->ldw, e->ldx, 1, 1, 1, e->x_off};
    const int Rs[] = {1, 2, 4}, Ws[] = {1, 2, 4, 8}, ms[] = {1, 2, 3, 4, 6, 8};
    int64_t bad = 0, runs = 0;
    for (int ri = 0; ri < 3; ri++)
        for (int wi = 0; wi < 4; wi++)
            for (int mi = 0; mi < 6; mi++) {
                bad += run_case(&bf, ms[mi], Rs[ri], Ws[wi], 500 + runs, 1);
                bad += run_case(&f32, ms[mi], Rs[ri], Ws[wi], 900 + runs, 1);
                runs += 2;
            }
    as_test_note("every config: %lld launches (R in 1,2,4 x W in 1,2,4,8 x m in 1,2,3,4,6,8 x bf16/f32 weights), "
                 "%lld bad outputs", (long long)runs, (long long)bad);
}

/* as_k_gemv_bf16_residual: y bit-identical to as_k_gemv_bf16's on the same operands (one GEMV, so the
 * plain GEMV's twin check above covers its values), and h = bf16(h0 + y) for every element, exactly
 * (residual_add's roundings). wo_b's flash shape (m = 1, 3: the vector kernel) and an unaligned x
 * (the scalar kernel), with a guard element past the last row of h. */
static void check_residual(int no, int ni, int m, int x_off, uint64_t seed)
{
    const int64_t ldx = ni, xn = x_off + (int64_t)m * ldx, hn = (int64_t)m * no;
    float *W = xmalloc(sizeof(float) * (size_t)no * ni), *x = xmalloc(sizeof(float) * (size_t)xn);
    float *h0 = xmalloc(sizeof(float) * (size_t)(hn + 1));
    as_fill_uniform(W, (int64_t)no * ni, 0.5f, seed, 1);
    as_fill_uniform(x, xn, 2.0f, seed + 1, 1);
    as_fill_uniform(h0, hn + 1, 4.0f, seed + 2, 1);
    as_bf16_t *dW = as_gpu_bf16(W, (int64_t)no * ni), *dx = as_gpu_bf16(x, xn), *dh = as_gpu_bf16(h0, hn + 1);
    as_bf16_t *dy = as_gpu_alloc(sizeof(as_bf16_t) * (size_t)hn), *dyp = as_gpu_alloc(sizeof(as_bf16_t) * (size_t)hn);
    char what[160];
    snprintf(what, sizeof what, "gemv + residual %dx%d m=%d%s", no, ni, m, x_off ? " x misaligned" : "");
    as_gpu_check_launch(as_k_gemv_bf16_residual(dW, no, ni, dx + x_off, ldx, m, dy, no, dh, no, 0), what);
    as_gpu_check_launch(as_k_gemv_bf16(dW, ni, 0, no, ni, dx + x_off, ldx, 0, m, dyp, no, 0, 0, 1, 0), what);
    uint16_t *y = xmalloc(2 * (size_t)hn), *yp = xmalloc(2 * (size_t)hn), *h = xmalloc(2 * (size_t)(hn + 1));
    as_gpu_get_bytes(y, dy, 2 * (size_t)hn);
    as_gpu_get_bytes(yp, dyp, 2 * (size_t)hn);
    as_gpu_get_bytes(h, dh, 2 * (size_t)(hn + 1));
    int64_t ydiff = 0, hbad = 0;
    for (int64_t i = 0; i < hn; i++) {
        ydiff += y[i] != yp[i];
        const uint16_t want = as_bf16_bits(as_bf16_to_f32(as_bf16_bits(h0[i])) + as_bf16_to_f32(y[i]));
        hbad += h[i] != want;
    }
    CHECK(ydiff == 0, "%s: y differs from the plain GEMV's in %lld of %lld", what, (long long)ydiff, (long long)hn);
    CHECK(hbad == 0, "%s: h != bf16(h0 + y) in %lld of %lld", what, (long long)hbad, (long long)hn);
    CHECK(h[hn] == as_bf16_bits(h0[hn]), "%s: the guard element past h was written", what);
    as_test_note("%s: y = the plain GEMV's, h = bf16(h0 + y) in all %lld", what, (long long)hn);
    free(W), free(x), free(h0), free(y), free(yp), free(h);
    as_gpu_free(dW), as_gpu_free(dx), as_gpu_free(dh), as_gpu_free(dy), as_gpu_free(dyp);
}

GPU_TEST(gpu_gemv_residual)
{
    const int wo_b_in = AS_FLASH_O_GROUPS * AS_FLASH_O_LORA;
    check_residual(AS_FLASH_DIM, wo_b_in, 1, 0, 7001);
    check_residual(AS_FLASH_DIM, wo_b_in, 3, 0, 7011);
    check_residual(301, 1003, 2, 1, 7021);
    as_bf16_t *d = as_gpu_alloc(4096);
    CHECK(as_k_gemv_bf16_residual(d, 4, 8, d, 8, 1, d, 4, NULL, 4, 0) == (int)cudaErrorInvalidValue, "h NULL refused");
    CHECK(as_k_gemv_bf16_residual(d, 4, 8, d, 8, 1, d, 4, d, 3, 0) == (int)cudaErrorInvalidValue, "ldh < n_out refused");
    as_gpu_sync("gemv + residual refusals");
    as_gpu_free(d);
}

/* as_k_gemv_bf16_norm against the launches it replaces (as_k_gemv_bf16 or as_k_gemv_bf16_residual, then
 * as_k_rmsnorm), bit for bit in y, h and the normalised row: wq_a's shape normalised in place (q_norm),
 * wo_b's with the residual into another row (the next layer's attn_norm), rows past what a block keeps in
 * registers and an unaligned x (both: the separate launches), one output row. Launched `runs` times on
 * one counter (the last block resets it: a graph replays the launch), which must end at 0. */
static void check_norm(int no, int ni, int with_h, int in_place, int x_off, int runs, uint64_t seed)
{
    const int64_t xn = x_off + (int64_t)ni;
    float *W = xmalloc(sizeof(float) * (size_t)no * ni), *x = xmalloc(sizeof(float) * (size_t)xn);
    float *h = xmalloc(sizeof(float) * (size_t)no), *nw = xmalloc(sizeof(float) * (size_t)no);
    as_fill_uniform(W, (int64_t)no * ni, 0.5f, seed, 1);
    as_fill_uniform(x, xn, 2.0f, seed + 1, 1);
    as_fill_uniform(h, no, 30.0f, seed + 2, 1);
    as_fill_uniform(nw, no, 1.5f, seed + 3, 0);
    as_bf16_t *dW = as_gpu_bf16(W, (int64_t)no * ni), *dx = as_gpu_bf16(x, xn);
    float *dnw = as_gpu_f32(nw, no);
    as_bf16_t *dh[2] = {as_gpu_bf16(h, no), as_gpu_bf16(h, no)};
    as_bf16_t *dy[2] = {as_gpu_alloc(2 * (size_t)no), as_gpu_alloc(2 * (size_t)no)};
    as_bf16_t *dn[2] = {as_gpu_alloc(2 * (size_t)no), as_gpu_alloc(2 * (size_t)no)};
    unsigned *ctr = as_gpu_alloc(sizeof(unsigned));
    REQUIRE(cudaMemset(ctr, 0, sizeof(unsigned)) == cudaSuccess, "counter");
    char what[160];
    snprintf(what, sizeof what, "gemv %dx%d%s + rmsnorm%s%s, %d runs", no, ni, with_h ? " + residual" : "",
             in_place ? " in place" : "", x_off ? ", x misaligned" : "", runs);
    for (int run = 0; run < runs; run++) {
        for (int k = 0; k < 2; k++) {
            REQUIRE(cudaMemset(dy[k], 0xff, 2 * (size_t)no) == cudaSuccess, "poison");
            REQUIRE(cudaMemset(dn[k], 0xff, 2 * (size_t)no) == cudaSuccess, "poison");
        }
        as_bf16_t *src0 = with_h ? dh[0] : dy[0], *src1 = with_h ? dh[1] : dy[1];
        as_bf16_t *out0 = in_place ? src0 : dn[0], *out1 = in_place ? src1 : dn[1];
        as_gpu_check_launch(
            as_k_gemv_bf16_norm(dW, no, ni, dx + x_off, dy[0], with_h ? dh[0] : NULL, dnw, 1e-6f, out0, ctr, 0), what);
        if (with_h)
            as_gpu_check_launch(as_k_gemv_bf16_residual(dW, no, ni, dx + x_off, ni, 1, dy[1], no, dh[1], no, 0), what);
        else
            as_gpu_check_launch(as_k_gemv_bf16(dW, ni, 0, no, ni, dx + x_off, ni, 0, 1, dy[1], no, 0, 0, 1, 0), what);
        as_gpu_check_launch(as_k_rmsnorm(src1, no, dnw, out1, no, 1, no, 1e-6f, 0), what);
    }
    uint16_t *a = xmalloc(2 * (size_t)no), *b = xmalloc(2 * (size_t)no);
    as_bf16_t *const *bufs[3] = {dy, dh, dn};
    static const char *names[3] = {"y", "h", "normalised row"};
    for (int k = 0; k < 3; k++) {
        as_gpu_get_bytes(a, bufs[k][0], 2 * (size_t)no);
        as_gpu_get_bytes(b, bufs[k][1], 2 * (size_t)no);
        int64_t bad = 0;
        for (int i = 0; i < no; i++)
            bad += a[i] != b[i];
        CHECK(bad == 0, "%s: %s: %lld of %d differ from the separate launches", what, names[k], (long long)bad, no);
    }
    unsigned left = 99;
    as_gpu_get_bytes(&left, ctr, sizeof left);
    CHECK(left == 0, "%s: the counter left at %u, not 0", what, left);
    as_test_note("%s: checked", what);
    free(W), free(x), free(h), free(nw), free(a), free(b);
    as_gpu_free(dW), as_gpu_free(dx), as_gpu_free(dnw), as_gpu_free(ctr);
    for (int k = 0; k < 2; k++)
        as_gpu_free(dh[k]), as_gpu_free(dy[k]), as_gpu_free(dn[k]);
}

GPU_TEST(gpu_gemv_norm)
{
    check_norm(AS_FLASH_Q_LORA, AS_FLASH_DIM, 0, 1, 0, 3, 7101); /* wq_a + q_norm, in place */
    /* wo_b + residual + the next layer's attn_norm */
    check_norm(AS_FLASH_DIM, AS_FLASH_O_GROUPS * AS_FLASH_O_LORA, 1, 0, 0, 3, 7111);
    check_norm(6144, 256, 1, 0, 0, 2, 7121);   /* the longest row a block keeps in registers */
    check_norm(6152, 64, 0, 1, 0, 1, 7131);    /* longer: the separate launches */
    check_norm(301, 1003, 1, 0, 1, 2, 7141);   /* x misaligned: the scalar kernel, then rmsnorm.cu */
    check_norm(1, 16, 0, 0, 0, 2, 7151);       /* one output row */
    as_bf16_t *d = as_gpu_alloc(4096);
    unsigned *ctr = as_gpu_alloc(sizeof(unsigned));
    float *w = as_gpu_alloc(64);
    CHECK(as_k_gemv_bf16_norm(d, 4, 8, d, d, NULL, w, 1e-6f, d, NULL, 0) == (int)cudaErrorInvalidValue,
          "no counter refused");
    CHECK(as_k_gemv_bf16_norm(d, 4, 8, d, d, NULL, NULL, 1e-6f, d, ctr, 0) == (int)cudaErrorInvalidValue,
          "no norm weights refused");
    CHECK(as_k_gemv_bf16_norm(d, 0, 8, d, d, NULL, w, 1e-6f, d, ctr, 0) == (int)cudaErrorInvalidValue,
          "no output rows refused");
    as_gpu_sync("gemv + rmsnorm refusals");
    as_gpu_free(d), as_gpu_free(ctr), as_gpu_free(w);
}

/* as_k_gemv_bf16_rope against as_k_gemv_bf16 then as_k_rope, bit for bit: positions by value (pos0 + t)
 * or from device memory (one of them negative: that row unrotated), the inverse rotation, the flash
 * wq_b shape (64 heads x 512, rd 64), m = 1, 3, 8 (every token width of the vector kernel), an
 * unaligned x (the scalar kernel, then rope.cu), and room left free beside the launch (a smaller grid,
 * down to one block: the same bits). */
static void check_rope(int heads, int hd, int rd, int ni, int m, int x_off, int by_device, int inverse, int room,
                       uint64_t seed)
{
    const int no = heads * hd, half = rd / 2, maxpos = 4096;
    const int64_t ldx = ni, xn = x_off + (int64_t)m * ldx, yn = (int64_t)m * no;
    float *W = xmalloc(sizeof(float) * (size_t)no * ni), *x = xmalloc(sizeof(float) * (size_t)xn);
    float *cs = xmalloc(sizeof(float) * (size_t)maxpos * half), *sn = xmalloc(sizeof(float) * (size_t)maxpos * half);
    as_fill_uniform(W, (int64_t)no * ni, 0.5f, seed, 1);
    as_fill_uniform(x, xn, 2.0f, seed + 1, 1);
    as_fill_uniform(cs, (int64_t)maxpos * half, 1.0f, seed + 2, 0);
    as_fill_uniform(sn, (int64_t)maxpos * half, 1.0f, seed + 3, 0);
    int32_t pos[8];
    for (int t = 0; t < 8; t++)
        pos[t] = t == 1 ? -1 : (int)((seed * 131 + 977 * (uint64_t)t) % maxpos);
    const int pos0 = (int)(seed % 3000);
    as_bf16_t *dW = as_gpu_bf16(W, (int64_t)no * ni), *dx = as_gpu_bf16(x, xn);
    float *dcs = as_gpu_f32(cs, (int64_t)maxpos * half), *dsn = as_gpu_f32(sn, (int64_t)maxpos * half);
    int32_t *dpos = as_gpu_bytes(pos, sizeof pos);
    as_bf16_t *dy = as_gpu_alloc(2 * (size_t)yn), *dyr = as_gpu_alloc(2 * (size_t)yn);
    REQUIRE(cudaMemset(dy, 0xff, 2 * (size_t)yn) == cudaSuccess, "poison");
    char what[200];
    snprintf(what, sizeof what, "gemv + rope %d heads x %d (rd %d) <- %d, m=%d, positions %s%s%s, room %d", heads, hd,
             rd, ni, m, by_device ? "on the device" : "pos0 + t", inverse ? ", inverse" : "",
             x_off ? ", x misaligned" : "", room);
    const int32_t *pp = by_device ? dpos : NULL;
    as_gpu_check_launch(as_k_gemv_bf16_rope(dW, no, ni, dx + x_off, ldx, m, dy, no, heads, hd, rd, pos0, pp, dcs, dsn,
                                            inverse, room, 0),
                        what);
    as_gpu_check_launch(as_k_gemv_bf16(dW, ni, 0, no, ni, dx + x_off, ldx, 0, m, dyr, no, 0, 0, 1, 0), what);
    as_gpu_check_launch(as_k_rope(dyr, no, m, heads, hd, rd, pos0, pp, dcs, dsn, inverse, 0), what);
    uint16_t *y = xmalloc(2 * (size_t)yn), *yr = xmalloc(2 * (size_t)yn);
    as_gpu_get_bytes(y, dy, 2 * (size_t)yn);
    as_gpu_get_bytes(yr, dyr, 2 * (size_t)yn);
    int64_t bad = 0, rotated = 0;
    for (int64_t i = 0; i < yn; i++) {
        bad += y[i] != yr[i];
        rotated += (i % hd) >= hd - rd;
    }
    CHECK(bad == 0, "%s: %lld of %lld differ from the GEMV then rope.cu", what, (long long)bad, (long long)yn);
    if (!bad)
        as_test_note("%s: bit for bit (%lld rotated channels)", what, (long long)rotated);
    free(W), free(x), free(cs), free(sn), free(y), free(yr);
    as_gpu_free(dW), as_gpu_free(dx), as_gpu_free(dcs), as_gpu_free(dsn), as_gpu_free(dpos), as_gpu_free(dy),
        as_gpu_free(dyr);
}

GPU_TEST(gpu_gemv_rope)
{
    const int nh = AS_FLASH_HEADS, hd = AS_FLASH_HEAD_DIM, rd = AS_FLASH_ROPE_DIM, ni = AS_FLASH_Q_LORA;
    check_rope(nh, hd, rd, ni, 1, 0, 1, 0, 0, 8001);       /* flash wq_b, a decode step */
    check_rope(nh, hd, rd, ni, 1, 0, 1, 0, 48, 8002);      /* the same with room beside it (--sel-room) */
    check_rope(nh, hd, rd, ni, 1, 0, 0, 0, 1 << 20, 8003); /* room for everything: a one-block grid */
    check_rope(nh, hd, rd, ni, 3, 0, 0, 0, 0, 8011);
    check_rope(nh, hd, rd, ni, 8, 0, 1, 1, 0, 8021);
    check_rope(4, 64, 16, 256, 5, 0, 0, 1, 0, 8031);   /* tiny */
    check_rope(4, 64, 64, 256, 2, 0, 1, 0, 0, 8041);   /* rd = hd: every channel */
    check_rope(3, 40, 8, 1003, 2, 1, 1, 0, 0, 8051);   /* the scalar kernel, then rope.cu */
    as_bf16_t *d = as_gpu_alloc(4096);
    float *t = as_gpu_alloc(4096);
    CHECK(as_k_gemv_bf16_rope(d, 8, 8, d, 8, 1, d, 8, 2, 4, 3, 0, NULL, t, t, 0, 0, 0) == (int)cudaErrorInvalidValue,
          "odd rd refused");
    CHECK(as_k_gemv_bf16_rope(d, 8, 8, d, 8, 1, d, 8, 3, 4, 2, 0, NULL, t, t, 0, 0, 0) == (int)cudaErrorInvalidValue,
          "heads * hd != n_out refused");
    CHECK(as_k_gemv_bf16_rope(d, 8, 8, d, 8, 1, d, 8, 2, 4, 2, -1, NULL, t, t, 0, 0, 0) == (int)cudaErrorInvalidValue,
          "negative pos0 refused");
    CHECK(as_k_gemv_bf16_rope(d, 8, 8, d, 8, 1, d, 8, 2, 4, 2, 0, NULL, NULL, t, 0, 0, 0) == (int)cudaErrorInvalidValue,
          "no cos table refused");
    CHECK(as_k_gemv_bf16_rope(d, 8, 8, d, 8, 1, d, 8, 2, 4, 2, 0, NULL, t, t, 0, -1, 0) == (int)cudaErrorInvalidValue,
          "negative room refused");
    as_gpu_sync("gemv + rope refusals");
    as_gpu_free(d);
    as_gpu_free(t);
}

GPU_TEST(gpu_gemv_refuses_nonsense)
{
    as_bf16_t *d = as_gpu_alloc(4096);
    float *y = as_gpu_alloc(4096);
    CHECK(as_k_gemv_bf16(d, 8, 0, 4, 8, d, 8, 0, 9, y, 4, 0, 0, 1, 0) == (int)cudaErrorInvalidValue, "m = 9 refused");
    CHECK(as_k_gemv_bf16(d, 4, 0, 4, 8, d, 8, 0, 1, y, 4, 0, 0, 1, 0) == (int)cudaErrorInvalidValue, "ldw < n_in refused");
    CHECK(as_k_gemv_bf16(d, 8, 0, 4, 8, d, 8, 0, 1, y, 3, 0, 0, 1, 0) == (int)cudaErrorInvalidValue, "ldy < n_out refused");
    CHECK(as_k_gemv_bf16(d, 8, 0, -1, 8, d, 8, 0, 1, y, 4, 0, 0, 1, 0) == (int)cudaErrorInvalidValue, "n_out < 0 refused");
    CHECK(as_k_gemv_bf16(d, 8, 0, 4, 0, d, 8, 0, 1, y, 4, 0, 0, 1, 0) == (int)cudaErrorInvalidValue, "n_in 0 refused");
    CHECK(as_k_gemv_bf16(d, 8, 0, 4, 8, NULL, 8, 0, 1, y, 4, 0, 0, 1, 0) == (int)cudaErrorInvalidValue, "x NULL refused");
    CHECK(as_k_gemv_f32w((const float *)d, 8, 4, 8, d, 8, -1, y, 4, 0) == (int)cudaErrorInvalidValue, "m < 0 refused");
    CHECK(as_k_gemv_bf16(d, 8, 0, 0, 8, d, 8, 0, 1, y, 4, 0, 0, 1, 0) == 0, "n_out 0 is a no-op");
    CHECK(as_k_gemv_bf16(d, 8, 0, 4, 8, d, 8, 0, 0, y, 4, 0, 0, 1, 0) == 0, "m 0 is a no-op");
    as_gpu_sync("gemv refusals");
    as_gpu_free(d);
    as_gpu_free(y);
}
