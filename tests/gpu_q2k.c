/* The Q2_K projection kernels (kernels/q8_1.cu as_k_quantize_q8_1, q2k_mmvq.cu as_k_q2k_mmvq,
 * q2k_mmq.cu as_k_q2k_mmq) against their CPU twins in model/quants.c and against the exact
 * dequantised weights.
 *
 * Rules:
 *   - q8_1 blocks: bit for bit as_quantize_row_q8_1 (same divisions, roundings, fp16 stores).
 *   - mmvq (automatic configuration, W = 1): bit for bit as_vec_dot_q2_K_q8_1, f32 and bf16 out. The
 *     twin is ggml's mul_mat_vec_q with one warp per row, term for term and in the same summation
 *     order, and so is the kernel: there is nothing left to differ.
 *   - mmq and mmvq with W > 1 (several warps per row): the same exact integers, f32 roundings grouped
 *     differently. An output passes when bit-equal, or 1 bf16 ulp away, or within the f32 ordering
 *     bound 2^-16 * mag, mag = sum_k (dx sc_k q_k + dy mn_k) d8_k |u_k| (the size of every partial
 *     sum; an output that cancels can move by more than its own ulp under any regrouping).
 *   - against the exact dequantised weights (as_wt_rows_f32 of the blocks) and the unquantised bf16
 *     x, f32 dot (in double here): |got - ref| <= sum_k |w_k| |x_k - xq_k| + 2^-16 mag + 2^-8 |ref|
 *     (the activation quantisation error, exactly bounded by the actual per-element error, plus
 *     f32 and bf16 rounding). The achieved error is printed as max|got - ref| / max|ref| over the
 *     tensor, the figure SPEC 6's tensor rule (2^-7) and the q8_1 tolerance of docs/GGUF.md compare.
 * Every output is poisoned before each launch and a guard row past it must stay intact.
 * Weights: random blocks (random scale/min nibbles and 2-bit codes, fp16 d and dmin in [1e-3, 2e-2])
 * so the test does not depend on the quantiser; activations: uniform bf16 with outlier channels
 * and an all-zero block per row (amax = 0). AS_KTEST_SMALL=1 keeps only the small cases.
 * Last, the engine end to end on GGUF files (tiny-q converted to Q2_K and to Q8_0): every Q2_K path
 * (mmvq, mmq, grouped wo_a) and the f32 paths of Q8_0 weights, against the reference by SPEC 6 with
 * the quantised tolerance of driver/compare.c. */
#include <cuda_runtime_api.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "driver/driver.h"
#include "model/gen.h"
#include "model/ggml_blocks.h"
#include "model/gguf.h"
#include "model/quants.h"
#include "model/weights.h"
#include "ref/numerics.h"
#include "tests/lib/gpu_util.h"
#include "tests/lib/harness.h"
#include "tests/lib/kernel_shapes.h"

/* Not in kernels.h: explicit mmvq configuration (R rows per warp, W warps per row; 0 = automatic). */
int as_k_q2k_mmvq_cfg(const void *W, int64_t ldw, int64_t strideW, int n_out, int n_in, const void *xq, int64_t ldx,
                      int64_t strideX, int m, void *y, int64_t ldy, int64_t strideY, int y_f32, int batch, int R,
                      int Wn, cudaStream_t st);

enum { K_MMVQ, K_MMQ };

static void *xmalloc(size_t bytes)
{
    void *p = malloc(bytes ? bytes : 1);
    REQUIRE(p, "out of host memory (%zu bytes)", bytes);
    return p;
}

static int small_only(void)
{
    const char *e = getenv("AS_KTEST_SMALL");
    return e && *e && *e != '0';
}

static uint64_t splitmix(uint64_t *s)
{
    uint64_t z = (*s += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}
static float unit(uint64_t *s) { return (float)(splitmix(s) >> 40) / (float)(1ull << 24); } /* [0, 1) */

static void random_q2k(AsBlockQ2K *w, int64_t n, uint64_t seed)
{
    uint64_t s = seed * 0x9e3779b97f4a7c15ull + 7;
    for (int64_t i = 0; i < n; i++) {
        for (int k = 0; k < 16; k++)
            w[i].scales[k] = (uint8_t)splitmix(&s);
        for (int k = 0; k < 64; k++)
            w[i].qs[k] = (uint8_t)splitmix(&s);
        w[i].d = as_fp32_to_fp16(1e-3f + 1.9e-2f * unit(&s));
        w[i].dmin = as_fp32_to_fp16(1e-3f + 1.9e-2f * unit(&s));
    }
}

/* bf16 activations [rows][n]: uniform in [-1, 1], every 97th channel x 8 (outliers), and one block
 * of 32 zeros per row (at a row-dependent place). */
static void random_x(uint16_t *x, int rows, int n, uint64_t seed)
{
    uint64_t s = seed * 0x2545f4914f6cdd1dull + 3;
    for (int r = 0; r < rows; r++) {
        const int zb = (int)((r * 7 + 3) % (n / 32));
        for (int i = 0; i < n; i++) {
            float v = 2.0f * unit(&s) - 1.0f;
            if (i % 97 == 13)
                v *= 8.0f;
            if (i / 32 == zb)
                v = 0.0f;
            x[(int64_t)r * n + i] = as_bf16_bits(v);
        }
    }
}

static int64_t ordered16(uint16_t b) { return b & 0x8000 ? -(int64_t)(b & 0x7fff) : (int64_t)b; }

/* ---------------------------------------------------------------------------------------------- */
/* q8_1 on the device against the twin: rows x n values (x rows ldx apart), y rows ldy blocks apart
 * with a poisoned gap and guard row. Returns the device's q8_1 blocks as they lie (rows + 1 rows of
 * ldy blocks: the rows, their gaps, the guard row) in *out. */
static int64_t check_q8_1(const char *what, const uint16_t *xh, int rows, int n, int64_t ldx, int64_t ldy,
                          AsBlockQ8_1 **out)
{
    const int nbk = n / 32;
    const size_t ybytes = sizeof(AsBlockQ8_1) * (size_t)((int64_t)(rows + 1) * ldy);
    uint16_t *xpad = xmalloc(sizeof(uint16_t) * (size_t)((int64_t)rows * ldx));
    for (int r = 0; r < rows; r++) {
        memcpy(xpad + (int64_t)r * ldx, xh + (int64_t)r * n, sizeof(uint16_t) * (size_t)n);
        for (int64_t i = n; i < ldx; i++)
            xpad[(int64_t)r * ldx + i] = 0x7fc0; /* NaN in the row padding: must not be read */
    }
    as_bf16_t *dx = as_gpu_bytes(xpad, sizeof(uint16_t) * (size_t)((int64_t)rows * ldx));
    uint8_t *dy = as_gpu_alloc(ybytes);
    REQUIRE(cudaMemset(dy, 0xa5, ybytes) == cudaSuccess, "cudaMemset");
    as_gpu_check_launch(as_k_quantize_q8_1(dx, ldx, rows, n, dy, ldy, 0), what);
    uint8_t *got = xmalloc(ybytes);
    as_gpu_get_bytes(got, dy, ybytes);

    AsBlockQ8_1 *want = xmalloc(sizeof(AsBlockQ8_1) * (size_t)nbk);
    float *xf = xmalloc(sizeof(float) * (size_t)n);
    int64_t bad = 0, gap_bad = 0;
    for (int r = 0; r < rows; r++) {
        for (int i = 0; i < n; i++)
            xf[i] = as_bf16_to_f32(xh[(int64_t)r * n + i]);
        as_quantize_row_q8_1(xf, want, n);
        const AsBlockQ8_1 *g = (const AsBlockQ8_1 *)got + (int64_t)r * ldy;
        for (int b = 0; b < nbk; b++) {
            if (!memcmp(&g[b], &want[b], sizeof want[b]))
                continue;
            if (bad < 5) {
                int j = 0;
                while (j < 32 && g[b].qs[j] == want[b].qs[j])
                    j++;
                as_test_note("%s: row %d block %d (values %d..%d): d %04x want %04x, s %04x want %04x, first "
                             "differing q at %d: got %d want %d (x = %.9g)", what, r, b, 32 * b, 32 * b + 31,
                             g[b].d, want[b].d, g[b].s, want[b].s, j, j < 32 ? g[b].qs[j] : 0,
                             j < 32 ? want[b].qs[j] : 0, j < 32 ? xf[32 * b + j] : 0.0);
            }
            bad++;
        }
        const uint8_t *gap = (const uint8_t *)(g + nbk);
        for (size_t i = 0; i < sizeof(AsBlockQ8_1) * (size_t)(ldy - nbk); i++)
            gap_bad += gap[i] != 0xa5;
    }
    const uint8_t *guard = got + sizeof(AsBlockQ8_1) * (size_t)((int64_t)rows * ldy);
    for (size_t i = 0; i < sizeof(AsBlockQ8_1) * (size_t)ldy; i++)
        gap_bad += guard[i] != 0xa5;
    CHECK(bad == 0, "%s: %lld of %lld q8_1 blocks differ from as_quantize_row_q8_1", what, (long long)bad,
          (long long)rows * nbk);
    CHECK(gap_bad == 0, "%s: %lld bytes written outside the rows' blocks", what, (long long)gap_bad);
    free(xpad), free(want), free(xf);
    as_gpu_free(dx), as_gpu_free(dy);
    *out = (AsBlockQ8_1 *)got;
    return bad;
}

GPU_TEST(gpu_q2k_quantize_q8_1)
{
    struct { const char *name; int rows, n; int64_t ldx, ldy; } cases[] = {
        {"dim row", 1, AS_FLASH_DIM, AS_FLASH_DIM, AS_FLASH_DIM / 32},
        {"q_lora rows", 7, AS_FLASH_Q_LORA, AS_FLASH_Q_LORA, AS_FLASH_Q_LORA / 32},
        {"o rows (wo_a input)", 9, AS_FLASH_HEADS * AS_FLASH_HEAD_DIM, AS_FLASH_HEADS * AS_FLASH_HEAD_DIM,
         AS_FLASH_HEADS * AS_FLASH_HEAD_DIM / 32},
        {"wo_b input, padded strides", 64, AS_FLASH_O_GROUPS * AS_FLASH_O_LORA, 8200, 260},
        {"one block", 3, 32, 40, 2},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        if (small_only() && (int64_t)cases[i].rows * cases[i].n > (1 << 20))
            continue;
        uint16_t *x = xmalloc(sizeof(uint16_t) * (size_t)((int64_t)cases[i].rows * cases[i].n));
        random_x(x, cases[i].rows, cases[i].n, 11 + i);
        if (cases[i].n == 32) { /* one row of edge values: tiny, huge, subnormal bf16, exact ties x/d = k + 0.5 */
            for (int k = 0; k < 32; k++)
                x[k] = as_bf16_bits(k == 0 ? 127.0f : (float)k + 0.5f); /* d = 1: ties to away */
            for (int k = 0; k < 32; k++)
                x[32 + k] = (uint16_t)(k + 1); /* bf16 subnormals 2^-133 .. */
            for (int k = 0; k < 32; k++)
                x[64 + k] = as_bf16_bits((k & 1 ? -1.0f : 1.0f) * 3.0e38f / (float)(k + 1));
        }
        char what[128];
        snprintf(what, sizeof what, "q8_1 %s %dx%d ldx=%lld ldy=%lld", cases[i].name, cases[i].rows, cases[i].n,
                 (long long)cases[i].ldx, (long long)cases[i].ldy);
        AsBlockQ8_1 *q = NULL;
        int64_t bad = check_q8_1(what, x, cases[i].rows, cases[i].n, cases[i].ldx, cases[i].ldy, &q);
        as_test_note("%s: %lld blocks, %lld differ", what, (long long)cases[i].rows * cases[i].n / 32, (long long)bad);
        free(x), free(q);
    }
}

/* ---------------------------------------------------------------------------------------------- */
/* One projection case, laid out as the engine lays out its calls: x [m][batch * n_in] (the grouped
 * wo_a reads group b's slice of the o rows), q8_1 [m][batch * n_in / 32] with strideX = n_in / 32;
 * W [batch][n_out][ldw] blocks; y [m][ldy] with group b at b * n_out. */
typedef struct {
    const char *name;
    int n_out, n_in, batch;
    int wpad;   /* extra blocks per weight row (ldw = n_in / 256 + wpad) */
    int ypad;   /* extra elements per output row */
    int xpad;   /* extra q8_1 blocks per token row (ldx = batch * n_in / 32 + xpad): an odd ldx takes
                 * mmq's 4-byte copies of the q8_1 rows instead of the 16-byte ones */
} Q2kCase;

typedef struct {
    int64_t exact, one_ulp, by_bound, bad;
    double worst_bound_ratio;            /* |got - want| / ordering bound, non-exact outputs */
    double max_ref_err, max_ref;         /* against the dequantised f32 reference */
    double sq_err, sq_ref;               /* sums of squares: the rms relative error */
    double worst_q8_ratio;               /* |got - ref| / (q8_1 error bound) */
    int64_t ref_bad;
} Q2kStats;

static int64_t run_case(const Q2kCase *c, int m, int kernel, int R, int Wn, int y_f32, uint64_t seed, int quiet)
{
    const int B = c->batch, no = c->n_out, ni = c->n_in, nb = ni / 256, nx = ni / 32;
    if (small_only() && (int64_t)B * no * ni * (m > 8 ? 8 : m) > ((int64_t)1 << 24)) {
        if (!quiet)
            as_test_note("%s m=%d: skipped (AS_KTEST_SMALL)", c->name, m);
        return 0;
    }
    const int64_t ldw = nb + c->wpad, strideW = (int64_t)no * ldw;
    const int64_t X = (int64_t)B * ni, ldx = X / 32 + c->xpad, strideX = nx;
    const int64_t ldy = (int64_t)B * no + c->ypad, strideY = no;
    const int exact_rule = kernel == K_MMVQ && Wn <= 1;
    char what[256], groups[32] = "";
    if (B > 1)
        snprintf(groups, sizeof groups, " x %d groups", B);
    snprintf(what, sizeof what, "%s %dx%d%s m=%d %s R=%d W=%d y=%s", c->name, no, ni, groups, m,
             kernel == K_MMVQ ? "mmvq" : "mmq", R, Wn, y_f32 ? "f32" : "bf16");

    AsBlockQ2K *W = xmalloc(sizeof(AsBlockQ2K) * (size_t)(B * strideW));
    random_q2k(W, B * strideW, seed);
    uint16_t *x = xmalloc(sizeof(uint16_t) * (size_t)(m * X));
    random_x(x, m, (int)X, seed + 1000);

    /* activations through the device quantiser (checked against the twin on the way) */
    AsBlockQ8_1 *xq = NULL;
    char qwhat[300];
    snprintf(qwhat, sizeof qwhat, "%s: its q8_1 input", what);
    check_q8_1(qwhat, x, m, (int)X, X, ldx, &xq);
    void *dW = as_gpu_bytes(W, sizeof(AsBlockQ2K) * (size_t)(B * strideW));
    void *dxq = as_gpu_bytes(xq, sizeof(AsBlockQ8_1) * (size_t)(m * ldx));
    const size_t esz = y_f32 ? 4 : 2, ybytes = esz * (size_t)((m + 1) * ldy); /* + one guard row */
    uint8_t *dy = as_gpu_alloc(ybytes);
    REQUIRE(cudaMemset(dy, 0xff, ybytes) == cudaSuccess, "cudaMemset");
    int rc;
    if (kernel == K_MMVQ)
        rc = as_k_q2k_mmvq_cfg(dW, ldw, strideW, no, ni, dxq, ldx, strideX, m, dy, ldy, strideY, y_f32, B, R, Wn, 0);
    else
        rc = as_k_q2k_mmq(dW, ldw, strideW, no, ni, dxq, ldx, strideX, m, dy, ldy, strideY, y_f32, B, 0);
    as_gpu_check_launch(rc, what);
    uint8_t *got = xmalloc(ybytes);
    as_gpu_get_bytes(got, dy, ybytes);

    /* per token: |d8 u| (for mag), |x - d8 u| (the quantisation error) */
    float *xabs = xmalloc(sizeof(float) * (size_t)(m * X)), *xerr = xmalloc(sizeof(float) * (size_t)(m * X));
    for (int t = 0; t < m; t++)
        for (int64_t i = 0; i < X; i++) {
            const AsBlockQ8_1 *blk = &xq[t * ldx + i / 32];
            const float d8 = as_fp16_to_fp32(blk->d), u = (float)blk->qs[i % 32];
            xabs[t * X + i] = d8 * fabsf(u);
            xerr[t * X + i] = (float)fabs((double)as_bf16_to_f32(x[t * X + i]) - (double)d8 * u);
        }

    Q2kStats st = {0};
    const int64_t rows_total = (int64_t)B * no;
#pragma omp parallel
    {
        float *wdeq = malloc(sizeof(float) * (size_t)ni), *wabs = malloc(sizeof(float) * (size_t)ni);
        Q2kStats my = {0};
        char notes[4][320];
        int nnotes = 0;
#pragma omp for schedule(dynamic, 16)
        for (int64_t ro = 0; ro < rows_total; ro++) {
            const int b = (int)(ro / no), o = (int)(ro % no);
            const AsBlockQ2K *row = W + b * strideW + (int64_t)o * ldw;
            AsWTensor t1 = {.dtype = AS_DT_Q2_K, .ndim = 2, .shape = {1, ni}, .data = row,
                            .nbytes = (int64_t)sizeof(AsBlockQ2K) * nb};
            snprintf(t1.name, sizeof t1.name, "random Q2_K row %d", o);
            as_wt_rows_f32(&t1, 0, 1, wdeq);
            for (int i = 0; i < ni; i++) {
                const AsBlockQ2K *q = &row[i / 256];
                const int k = i % 256, sc = q->scales[k / 16];
                const int code = (q->qs[32 * (k / 128) + k % 32] >> (2 * ((k % 128) / 32))) & 3;
                wabs[i] = as_fp16_to_fp32(q->d) * (float)(sc & 15) * (float)code +
                          as_fp16_to_fp32(q->dmin) * (float)(sc >> 4);
            }
            for (int t = 0; t < m; t++) {
                const int64_t xo = t * X + (int64_t)b * ni;
                const float want = as_vec_dot_q2_K_q8_1(row, xq + t * ldx + b * strideX, nb);
                double mag = 0, ref = 0, qerr = 0;
                for (int i = 0; i < ni; i++) {
                    mag += (double)wabs[i] * xabs[xo + i];
                    ref += (double)wdeq[i] * as_bf16_to_f32(x[xo + i]);
                    qerr += fabs((double)wdeq[i]) * xerr[xo + i];
                }
                const int64_t off = t * ldy + b * strideY + o;
                double g, w;
                int64_t ulp = 0;
                int same;
                if (y_f32) {
                    float gf;
                    memcpy(&gf, got + 4 * off, 4);
                    same = !memcmp(&gf, &want, 4);
                    g = gf, w = want;
                } else {
                    uint16_t gb, wb = as_bf16_bits(want);
                    memcpy(&gb, got + 2 * off, 2);
                    same = gb == wb;
                    ulp = llabs(ordered16(gb) - ordered16(wb));
                    g = as_bf16_to_f32(gb), w = as_bf16_to_f32(wb);
                }
                const double err = fabs(g - w), bound = 0x1p-16 * mag + 1e-30;
                int ok;
                if (same)
                    my.exact++, ok = 1;
                else if (exact_rule || isnan(g))
                    ok = 0;
                else if (!y_f32 && ulp <= 1)
                    my.one_ulp++, ok = 1;
                else if (err <= bound)
                    my.by_bound++, ok = 1;
                else
                    ok = 0;
                if (!same && !isnan(g) && err / bound > my.worst_bound_ratio)
                    my.worst_bound_ratio = err / bound;
                if (!ok) {
                    if (nnotes < 4)
                        snprintf(notes[nnotes++], sizeof notes[0],
                                 "batch %d token t=%d out o=%d: got %.9g, want %.9g (twin), err %.3g, %s%s", b, t, o, g,
                                 w, err, exact_rule ? "rule: bit for bit" : "ordering bound ",
                                 isnan(g) ? " -- NaN: not written?" : "");
                    my.bad++;
                }
                /* against the exact dequantised weights and the unquantised x */
                const double rerr = fabs(g - ref), rbound = qerr + 0x1p-16 * mag + 0x1p-8 * fabs(ref) + 1e-30;
                my.sq_err += rerr * rerr, my.sq_ref += ref * ref;
                if (rerr > my.max_ref_err)
                    my.max_ref_err = rerr;
                if (fabs(ref) > my.max_ref)
                    my.max_ref = fabs(ref);
                if (rerr / rbound > my.worst_q8_ratio)
                    my.worst_q8_ratio = rerr / rbound;
                if (!(rerr <= rbound)) {
                    if (nnotes < 4)
                        snprintf(notes[nnotes++], sizeof notes[0],
                                 "batch %d token t=%d out o=%d: got %.9g, dequantised f32 reference %.9g: err %.3g "
                                 "over the q8_1 bound %.3g", b, t, o, g, ref, rerr, rbound);
                    my.ref_bad++;
                }
            }
        }
#pragma omp critical
        {
            st.exact += my.exact, st.one_ulp += my.one_ulp, st.by_bound += my.by_bound, st.bad += my.bad;
            st.ref_bad += my.ref_bad;
            st.worst_bound_ratio = fmax(st.worst_bound_ratio, my.worst_bound_ratio);
            st.worst_q8_ratio = fmax(st.worst_q8_ratio, my.worst_q8_ratio);
            st.max_ref_err = fmax(st.max_ref_err, my.max_ref_err);
            st.max_ref = fmax(st.max_ref, my.max_ref);
            st.sq_err += my.sq_err, st.sq_ref += my.sq_ref;
            for (int i = 0; i < nnotes; i++)
                as_test_note("%s: %s", what, notes[i]);
        }
        free(wdeq), free(wabs);
    }
    /* the gaps between groups / the row padding and the guard row stay poisoned */
    int64_t outside = 0;
    for (int64_t t = 0; t <= m; t++)
        for (int64_t j = 0; j < ldy; j++) {
            if (t < m && j < (int64_t)B * no)
                continue;
            for (size_t k = 0; k < esz; k++)
                outside += got[esz * (size_t)(t * ldy + j) + k] != 0xff;
        }
    const int64_t total = (int64_t)m * B * no;
    CHECK(outside == 0, "%s: %lld bytes written outside the outputs", what, (long long)outside);
    CHECK(st.bad == 0, "%s: %lld of %lld outputs break the rule against the twin (%s)", what, (long long)st.bad,
          (long long)total, exact_rule ? "bit for bit" : "1 bf16 ulp or the f32 ordering bound");
    CHECK(st.ref_bad == 0, "%s: %lld of %lld outputs farther from the dequantised f32 reference than the q8_1 "
          "bound", what, (long long)st.ref_bad, (long long)total);
    if (!quiet || st.bad || st.ref_bad)
        as_test_note("%s: twin: %lld/%lld bit-exact, %lld at 1 ulp, %lld within the ordering bound (worst %.3f of it), "
                     "%lld bad | dequantised f32 reference: max err %.3g = %.2f%% of max|ref| %.3g, rms %.2f%%, "
                     "worst %.3f of the q8_1 bound", what, (long long)st.exact, (long long)total,
                     (long long)st.one_ulp, (long long)st.by_bound, st.worst_bound_ratio, (long long)st.bad,
                     st.max_ref_err, st.max_ref > 0 ? 100.0 * st.max_ref_err / st.max_ref : 0.0, st.max_ref,
                     st.sq_ref > 0 ? 100.0 * sqrt(st.sq_err / st.sq_ref) : 0.0, st.worst_q8_ratio);
    free(W), free(x), free(xq), free(got), free(xabs), free(xerr);
    as_gpu_free(dW), as_gpu_free(dxq), as_gpu_free(dy);
    return st.bad + st.ref_bad;
}

/* The flash projections that convert --quant q2_k writes as Q2_K (tests/lib/kernel_shapes.h: all
 * but the ratio-2 compressor's f32 weights; wo_a is 8 groups of 1024 x 4096, one launch). */
static int flash_q2k_case(int i, Q2kCase *c)
{
    const AsProjShape *s = &as_flash_projections[i];
    *c = (Q2kCase){s->name, s->n_out, s->n_in, s->groups, 0, 0, 0};
    return !s->f32_weights;
}

GPU_TEST(gpu_q2k_mmvq_flash_shapes)
{
    const int ms[] = {1, 3, 8};
    Q2kCase c;
    for (int i = 0; i < AS_N_FLASH_PROJECTIONS; i++)
        for (size_t k = 0; k < sizeof ms / sizeof ms[0] && flash_q2k_case(i, &c); k++)
            run_case(&c, ms[k], K_MMVQ, 0, 0, k != 1, 100 + 10 * (uint64_t)i + k, 0); /* y f32 at m 1, 8; bf16 at 3 */
}

GPU_TEST(gpu_q2k_mmq_flash_shapes)
{
    const int ms[] = {9, 64};
    Q2kCase c;
    for (int i = 0; i < AS_N_FLASH_PROJECTIONS; i++)
        for (size_t k = 0; k < sizeof ms / sizeof ms[0] && flash_q2k_case(i, &c); k++)
            run_case(&c, ms[k], K_MMQ, 0, 0, k == 0, 200 + 10 * (uint64_t)i + k, 0);
}

/* Tails: n_out not a multiple of the mmq tile (128) or of R, 1 row, tokens past a 32-token tile,
 * padded weight, token and output rows (odd / 2-block token strides: mmq's 4-byte q8_1 copies), batches. */
GPU_TEST(gpu_q2k_odd_sizes)
{
    const Q2kCase cases[] = {
        {"odd rows", 301, 768, 1, 0, 0, 0},
        {"one row", 1, 256, 1, 0, 0, 0},
        {"129 rows, padded, odd x stride", 129, 512, 1, 3, 5, 1},
        {"grouped odd", 37, 1024, 3, 1, 2, 2},
    };
    const int ms[] = {1, 3, 8, 9, 17, 64};
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
        for (size_t k = 0; k < sizeof ms / sizeof ms[0]; k++) {
            if (ms[k] <= 8)
                run_case(&cases[i], ms[k], K_MMVQ, 0, 0, (int)(k & 1), 300 + 10 * i + k, 0);
            run_case(&cases[i], ms[k], K_MMQ, 0, 0, (int)(k & 1), 400 + 10 * i + k, 0);
        }
}

/* Every mmvq instantiation (R in 1, 2, 4 x M in 1, 2, 4, 8) and warp split W in 1, 2, 4, 8 on an
 * awkward batched shape: W = 1 bit for bit, W > 1 within the ordering bound. */
GPU_TEST(gpu_q2k_mmvq_every_config)
{
    const Q2kCase c = {"cfg", 301, 1536, 3, 1, 3, 1};
    const int Rs[] = {1, 2, 4}, Ws[] = {1, 2, 4, 8}, ms[] = {1, 2, 3, 4, 6, 8};
    int64_t bad = 0, runs = 0;
    for (int ri = 0; ri < 3; ri++)
        for (int wi = 0; wi < 4; wi++)
            for (int mi = 0; mi < 6; mi++) {
                bad += run_case(&c, ms[mi], K_MMVQ, Rs[ri], Ws[wi], (mi + wi) & 1, 600 + runs, 1);
                runs++;
            }
    as_test_note("mmvq every config: %lld launches (R in 1,2,4 x W in 1,2,4,8 x m in 1,2,3,4,6,8), %lld bad outputs",
                 (long long)runs, (long long)bad);
}

GPU_TEST(gpu_q2k_refuses_nonsense)
{
    uint8_t *buf = as_gpu_alloc(1 << 16);
    void *w = buf, *x = buf + 8192, *y = buf + 32768;
    const int inval = (int)cudaErrorInvalidValue;
    /*                     W  ldw sW no ni   x  ldx sX m  y  ldy sY f32 batch */
    CHECK(as_k_q2k_mmvq(w, 1, 0, 4, 128, x, 4, 0, 1, y, 4, 0, 0, 1, 0) == inval,
          "mmvq: n_in 128 (not a multiple of 256) refused");
    CHECK(as_k_q2k_mmq(w, 1, 0, 4, 300, x, 10, 0, 1, y, 4, 0, 0, 1, 0) == inval, "mmq: n_in 300 refused");
    CHECK(as_k_q2k_mmvq(w, 1, 0, 4, 256, x, 8, 0, 9, y, 4, 0, 0, 1, 0) == inval, "mmvq: m = 9 refused");
    CHECK(as_k_q2k_mmvq(w, 0, 0, 4, 256, x, 8, 0, 1, y, 4, 0, 0, 1, 0) == inval, "mmvq: ldw < n_in / 256 refused");
    CHECK(as_k_q2k_mmq(w, 1, 0, 4, 256, x, 7, 0, 1, y, 4, 0, 0, 1, 0) == inval, "mmq: ldx < n_in / 32 refused");
    CHECK(as_k_q2k_mmq(w, 1, 0, 4, 256, x, 8, 0, 1, y, 3, 0, 0, 1, 0) == inval, "mmq: ldy < n_out refused");
    CHECK(as_k_q2k_mmvq(buf + 2, 1, 0, 4, 256, x, 8, 0, 1, y, 4, 0, 0, 1, 0) == inval,
          "mmvq: W not 4-byte aligned refused");
    CHECK(as_k_q2k_mmq(w, 1, 0, 4, 256, buf + 8194, 8, 0, 1, y, 4, 0, 0, 1, 0) == inval,
          "mmq: x not 4-byte aligned refused");
    CHECK(as_k_q2k_mmvq(w, 1, 0, 4, 256, x, 8, 0, 1, buf + 32770, 4, 0, 1, 1, 0) == inval,
          "mmvq: f32 y not 4-byte aligned refused");
    CHECK(as_k_q2k_mmq(NULL, 1, 0, 4, 256, x, 8, 0, 1, y, 4, 0, 0, 1, 0) == inval, "mmq: W NULL refused");
    CHECK(as_k_q2k_mmvq(w, 1, 0, 4, 0, x, 8, 0, 1, y, 4, 0, 0, 1, 0) == inval, "mmvq: n_in 0 refused");
    CHECK(as_k_q2k_mmq(w, 1, -1, 4, 256, x, 8, 0, 1, y, 4, 0, 0, 2, 0) == inval, "mmq: negative batch stride refused");
    CHECK(as_k_q2k_mmq(w, 1, 0, -1, 256, x, 8, 0, 1, y, 4, 0, 0, 1, 0) == inval, "mmq: n_out < 0 refused");
    CHECK(as_k_q2k_mmvq(w, 1, 0, 0, 256, x, 8, 0, 1, y, 4, 0, 0, 1, 0) == 0, "mmvq: n_out 0 is a no-op");
    CHECK(as_k_q2k_mmq(w, 1, 0, 4, 256, x, 8, 0, 0, y, 4, 0, 0, 1, 0) == 0, "mmq: m 0 is a no-op");
    CHECK(as_k_quantize_q8_1(x, 48, 1, 48, y, 2, 0) == inval, "q8_1: n 48 (not a multiple of 32) refused");
    CHECK(as_k_quantize_q8_1(x, 16, 1, 32, y, 1, 0) == inval, "q8_1: ldx < n refused");
    CHECK(as_k_quantize_q8_1(x, 64, 2, 64, y, 1, 0) == inval, "q8_1: ldy < n / 32 refused");
    CHECK(as_k_quantize_q8_1(x, 32, 1, 32, buf + 32770, 1, 0) == inval, "q8_1: y not 4-byte aligned refused");
    CHECK(as_k_quantize_q8_1(x, 32, 0, 32, y, 1, 0) == 0, "q8_1: 0 rows is a no-op");
    as_gpu_sync("Q2_K refusals");
    as_gpu_free(buf);
}

/* ---------------------------------------------------------------------------------------------- */
#ifndef AS_Q2K_KERNELS_ONLY /* bench/emu/emu_q2k_test.cpp: the kernels on the emulator, no engine */
/* The engine on GGUF models (tiny-q converted): Q2_K projections through the q8_1 kernels, Q8_0 ones
 * dequantised to f32; prefill sizes on both sides of the mmvq / mmq switch (8 rows) and decode steps,
 * each layer against the reference with the driver's quantised tolerance. */
typedef struct {
    int layer_runs, ok, mismatch;
    char first_bad[400];
} EngTally;

static void eng_tally(const AsDriver *d, EngTally *t)
{
    for (int l = 0; l < d->model.cfg.n_layers; l++) {
        const AsLayerDiff *df = &d->diff[l];
        t->layer_runs++;
        if (as_verdict_ok(df->verdict)) {
            t->ok++;
            continue;
        }
        if (!t->mismatch++)
            for (int i = 0; i < AS_T_COUNT; i++)
                if (!as_verdict_ok(df->t[i].verdict)) {
                    const AsTensorDiff *x = &df->t[i];
                    snprintf(t->first_bad, sizeof t->first_bad,
                             "step %d (pos %d), layer %d, %s: %s, max |diff| %.4g > tol %.4g (got %.6g, want %.6g, "
                             "%ld bad)", d->cur.step, d->cur.start_pos, l, as_tensor_desc[i].name,
                             as_verdict_name(x->verdict), x->max_abs, x->tol, x->worst_got, x->worst_want,
                             (long)x->n_bad);
                    break;
                }
    }
}

GPU_TEST(gpu_q2k_engine_gguf_tiny_q)
{
    char dir[1024], path[1100];
    snprintf(dir, sizeof dir, "%s/tiny-q", as_test_tmpdir());
    AsConfig cfg;
    AsError err = {0};
    REQUIRE(as_config_preset("tiny-q", &cfg, &err) == AS_OK, "%s", err.msg);
    REQUIRE(as_gen_model(&cfg, AS_PREC_BF16, 1, "tiny-q", dir, false, &err) == AS_OK, "gen tiny-q: %s", err.msg);
    AsModel src;
    REQUIRE(as_model_load(dir, 0, &src, &err) == AS_OK, "load tiny-q: %s", err.msg);
    const struct { AsDType quant; const char *file; } files[] = {{AS_DT_Q2_K, "q2k.gguf"}, {AS_DT_Q8_0, "q80.gguf"}};
    for (size_t f = 0; f < sizeof files / sizeof files[0]; f++) {
        snprintf(path, sizeof path, "%s/%s", as_test_tmpdir(), files[f].file);
        AsGgufConvertOptions o = {files[f].quant, AS_GGUF_NAMES_LLAMA, "tiny-q", false};
        REQUIRE(as_gguf_convert(&src, &o, path, &err) == AS_OK, "convert to %s: %s", files[f].file, err.msg);
        setenv("ATTNSCOPE_CACHE", as_test_tmpdir(), 1);
        AsDriverOptions dopt;
        as_driver_options_default(&dopt);
        dopt.model = path;
        dopt.quiet = true;
        AsDriver *d;
        REQUIRE(as_driver_open(&dopt, &d, &err) == 0, "open %s: %s", path, err.msg);
        REQUIRE(d->got_kind == AS_GOT_ENGINE, "%s: the engine is not in use: %s", files[f].file, d->note);
        const int sizes[] = {1, 5, 8, 9, 13, 40};
        for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++) {
            EngTally t = {0};
            REQUIRE(as_driver_prefill(d, sizes[i], &err) == 0, "%s prefill %d: %s", files[f].file, sizes[i], err.msg);
            eng_tally(d, &t);
            for (int k = 0; k < 4; k++) {
                REQUIRE(as_driver_decode(d, 1, &err) == 0, "%s decode %d: %s", files[f].file, k + 1, err.msg);
                eng_tally(d, &t);
            }
            as_test_note("%s (%s projections): prefill s=%d + 4 decode: %d layer runs, %d within the quantised "
                         "tolerance, %d not", files[f].file, as_dtype_name(files[f].quant), sizes[i], t.layer_runs,
                         t.ok, t.mismatch);
            CHECK(t.mismatch == 0, "%s prefill s=%d: first failure: %s", files[f].file, sizes[i], t.first_bad);
        }
        as_driver_close(d);
    }
    as_model_free(&src);
}

/* The flash geometry from a Q2_K GGUF ($ATTNSCOPE_FLASH_Q2K, written by `attnscope convert --to gguf
 * --quant q2_k` from the flash preset; scripts/gpu_session.sh q2kflash): a 512-token prefill and 16
 * decode steps, every layer within the quantised tolerance. */
GPU_TEST(gpu_q2k_engine_flash_prefill512_decode16)
{
    const char *path = getenv("ATTNSCOPE_FLASH_Q2K");
    if (!path || !*path)
        as_test_skip("ATTNSCOPE_FLASH_Q2K not set (a flash model converted to a Q2_K GGUF)");
    AsError err = {0};
    AsDriverOptions dopt;
    as_driver_options_default(&dopt);
    dopt.model = path;
    dopt.quiet = true;
    dopt.max_seq = 1024;
    AsDriver *d;
    REQUIRE(as_driver_open(&dopt, &d, &err) == 0, "open %s: %s", path, err.msg);
    REQUIRE(d->got_kind == AS_GOT_ENGINE, "the engine is not in use: %s", d->note);
    EngTally t = {0};
    REQUIRE(as_driver_prefill(d, 512, &err) == 0, "prefill 512: %s", err.msg);
    eng_tally(d, &t);
    for (int k = 0; k < 16; k++) {
        REQUIRE(as_driver_decode(d, 1, &err) == 0, "decode %d: %s", k + 1, err.msg);
        eng_tally(d, &t);
    }
    as_test_note("flash Q2_K GGUF: prefill 512 + 16 decode: %d layer runs, %d within the quantised tolerance, %d not",
                 t.layer_runs, t.ok, t.mismatch);
    CHECK(t.mismatch == 0, "flash Q2_K: first failure: %s", t.first_bad);
    as_driver_close(d);
}
#endif
