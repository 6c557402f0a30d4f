/* kernels/rmsnorm.cu against ref/rmsnorm.c. The kernel differs from the reference only in the
 * order of its f32 sum of squares, so two checks per case:
 *   - bit-exact against a host emulation of the kernel's own order (thread-strided partials,
 *     the warp's xor butterfly, the 8 warp sums in order), then the reference's exact steps;
 *   - against as_rmsnorm itself: at most 1 bf16 ulp, on at most 1/64 of the elements + 1 (counted).
 * Shapes: the flash norms (q 1280, kv 512, index k 128, attn 5120), the tiny ones (32, 64), odd
 * widths (1, 33, 257, 4099), row strides on both sides, in place, and rows of zeros, of tiny and
 * of huge values, and a row with a single nonzero element. */
#include <cuda_runtime_api.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "ref/numerics.h"
#include "ref/quant.h"
#include "ref/rmsnorm.h"
#include "tests/lib/gpu_util.h"
#include "tests/lib/harness.h"

/* ---- helpers ---- */

/* ---- the kernel's summation order on the host ---- */

#define RMS_THREADS 256 /* kernels/rmsnorm.cu kThreads */

/* One row as rmsnorm_kernel computes it: thread t sums x[t], x[t + 256], ... (products and sums
 * rounded), each warp's 32 partials go through the xor butterfly (lane l adds lane l ^ o for
 * o = 16, 8, 4, 2, 1), the 8 warp sums are added in order from 0. */
static void emulate_row(const float *x, const float *w, float *y, int n, float eps)
{
    float warp_sum[RMS_THREADS / 32];
    for (int wp = 0; wp < RMS_THREADS / 32; wp++) {
        float lane[32], tmp[32];
        for (int l = 0; l < 32; l++) {
            float acc = 0.0f;
            for (int i = wp * 32 + l; i < n; i += RMS_THREADS)
                acc = acc + x[i] * x[i];
            lane[l] = acc;
        }
        for (int o = 16; o > 0; o >>= 1) {
            for (int l = 0; l < 32; l++)
                tmp[l] = lane[l] + lane[l ^ o];
            memcpy(lane, tmp, sizeof lane);
        }
        warp_sum[wp] = lane[0];
    }
    float sum = 0.0f;
    for (int k = 0; k < RMS_THREADS / 32; k++)
        sum = sum + warp_sum[k];
    float ms = sum / (float)n;
    float inv = 1.0f / sqrtf(ms + eps);
    for (int i = 0; i < n; i++) {
        float r = x[i] * inv;
        y[i] = as_bf16(w[i] * r);
    }
}

/* ---- one case ---- */

typedef enum { DATA_UNIFORM, DATA_ZEROS, DATA_TINY, DATA_HUGE, DATA_ONE_HOT } Data;

static const char *data_name(Data d)
{
    static const char *names[] = {"uniform", "zeros", "tiny 1e-30", "huge 1e15", "one-hot"};
    return names[d];
}

static void fill_rows(float *x, int rows, int n, Data data, uint64_t seed)
{
    int64_t total = (int64_t)rows * n;
    switch (data) {
    case DATA_UNIFORM:
        as_fill_uniform(x, total, 3.0f, seed, 1);
        break;
    case DATA_ZEROS:
        memset(x, 0, sizeof(float) * (size_t)total);
        break;
    case DATA_TINY:
        as_fill_uniform(x, total, 1.0f, seed, 0);
        for (int64_t i = 0; i < total; i++)
            x[i] = as_bf16(x[i] * 1e-30f);
        break;
    case DATA_HUGE:
        as_fill_uniform(x, total, 1.0f, seed, 0);
        for (int64_t i = 0; i < total; i++)
            x[i] = as_bf16(x[i] * 1e15f);
        break;
    case DATA_ONE_HOT:
        memset(x, 0, sizeof(float) * (size_t)total);
        for (int r = 0; r < rows; r++)
            x[(int64_t)r * n + (int)((seed + (uint64_t)r * 7) % (uint64_t)n)] = r % 2 ? -2.5f : 0.375f;
        break;
    }
}

/* rows of n, x stride ldx, y stride ldy (in_place: y = x, ldy = ldx). Padding past n in each
 * row is poison on the way in and must be poison (y) or unchanged (in place) on the way out. */
static void check_case(const char *geom, int rows, int n, int64_t ldx, int64_t ldy, int in_place, float eps,
                       Data data, uint64_t seed)
{
    if (in_place)
        ldy = ldx;
    char what[200];
    snprintf(what, sizeof what, "rmsnorm %s rows=%d n=%d ldx=%lld ldy=%lld%s eps=%g %s", geom, rows, n,
             (long long)ldx, (long long)ldy, in_place ? " in-place" : "", (double)eps, data_name(data));

    int64_t cnt = (int64_t)rows * n;
    float *x = as_test_xmalloc(sizeof(float) * (size_t)cnt), *w = as_test_xmalloc(sizeof(float) * (size_t)n);
    float *want = as_test_xmalloc(sizeof(float) * (size_t)cnt), *emu = as_test_xmalloc(sizeof(float) * (size_t)cnt);
    fill_rows(x, rows, n, data, seed);
    as_fill_uniform(w, n, 0.5f, seed + 77, 0);
    for (int i = 0; i < n; i++)
        w[i] += 1.0f; /* f32 weights in [0.5, 1.5), not bf16 values */

    /* device x: rows at stride ldx, padding 0xffff */
    uint16_t *hx = as_test_xmalloc(sizeof(uint16_t) * (size_t)(rows * ldx));
    memset(hx, 0xff, sizeof(uint16_t) * (size_t)(rows * ldx));
    for (int r = 0; r < rows; r++)
        for (int i = 0; i < n; i++)
            hx[(int64_t)r * ldx + i] = as_bf16_bits(x[(int64_t)r * n + i]);
    as_bf16_t *dx = as_gpu_bytes(hx, sizeof(uint16_t) * (size_t)(rows * ldx));
    float *dw = as_gpu_f32(w, n);
    as_bf16_t *dy = dx;
    if (!in_place) {
        dy = as_gpu_alloc(sizeof(uint16_t) * (size_t)(rows * ldy));
        as_gpu_poison(dy, sizeof(uint16_t) * (size_t)(rows * ldy));
    }
    as_gpu_check_launch(as_k_rmsnorm(dx, ldx, dw, dy, ldy, rows, n, eps, 0), what);
    uint16_t *hy = as_test_xmalloc(sizeof(uint16_t) * (size_t)(rows * ldy));
    as_gpu_get_bytes(hy, dy, sizeof(uint16_t) * (size_t)(rows * ldy));

    as_rmsnorm(x, w, want, rows, n, eps);
    for (int r = 0; r < rows; r++)
        emulate_row(x + (int64_t)r * n, w, emu + (int64_t)r * n, n, eps);

    /* pack the device rows; check the padding */
    uint16_t *got = as_test_xmalloc(sizeof(uint16_t) * (size_t)cnt), *bw = as_test_xmalloc(sizeof(uint16_t) * (size_t)cnt),
             *be = as_test_xmalloc(sizeof(uint16_t) * (size_t)cnt);
    int64_t pad_bad = 0;
    for (int r = 0; r < rows; r++) {
        for (int i = 0; i < n; i++) {
            got[(int64_t)r * n + i] = hy[(int64_t)r * ldy + i];
            bw[(int64_t)r * n + i] = as_bf16_bits(want[(int64_t)r * n + i]);
            be[(int64_t)r * n + i] = as_bf16_bits(emu[(int64_t)r * n + i]);
        }
        for (int64_t i = n; i < ldy; i++)
            if (hy[(int64_t)r * ldy + i] != 0xffff && pad_bad++ < 3)
                as_test_note("%s: row %d padding [%lld] written: 0x%04x", what, r, (long long)i,
                             hy[(int64_t)r * ldy + i]);
    }
    CHECK(pad_bad == 0, "%s: %lld padding elements past n written", what, (long long)pad_bad);

    char sub[240];
    snprintf(sub, sizeof sub, "%s vs kernel-order emulation", what);
    AsBf16Diff de = as_diff_bf16(sub, got, be, rows, n, 0);
    snprintf(sub, sizeof sub, "%s vs as_rmsnorm", what);
    AsBf16Diff dr = as_diff_bf16(sub, got, bw, rows, n, 1);
    CHECK(de.bad == 0, "%s: %lld of %lld elements differ from the emulation of the kernel's order (index or "
          "rounding bug, not summation order)", what, (long long)de.bad, (long long)cnt);
    CHECK(dr.bad == 0, "%s: %lld of %lld elements more than 1 bf16 ulp from as_rmsnorm", what, (long long)dr.bad,
          (long long)cnt);
    CHECK(dr.near <= cnt / 64 + 1, "%s: %lld of %lld elements 1 ulp from as_rmsnorm: more than summation order explains",
          what, (long long)dr.near, (long long)cnt);
    as_test_note("%s: %lld/%lld bit-exact to the kernel-order emulation; vs as_rmsnorm %lld exact, %lld at 1 ulp",
                 what, (long long)(cnt - de.bad), (long long)cnt, (long long)(cnt - dr.near - dr.bad),
                 (long long)dr.near);

    free(x), free(w), free(want), free(emu), free(hx), free(hy), free(got), free(bw), free(be);
    as_gpu_free(dx);
    as_gpu_free(dw);
    if (!in_place)
        as_gpu_free(dy);
}

GPU_TEST(gpu_rmsnorm_flash_shapes)
{
    const float eps = 1e-20f; /* flash norm_eps */
    const int s_list[] = {1, 7, 512};
    for (int k = 0; k < 3; k++) {
        int s = s_list[k];
        check_case("flash q_norm", s, 1280, 1280, 1280, 0, eps, DATA_UNIFORM, 100 + (uint64_t)s);
        check_case("flash kv_norm", s, 512, 512, 512, 0, eps, DATA_UNIFORM, 200 + (uint64_t)s);
        check_case("flash index k_norm", s, 128, 128, 128, 0, eps, DATA_UNIFORM, 300 + (uint64_t)s);
        check_case("flash attn_norm", s, 5120, 5120, 5120, 0, eps, DATA_UNIFORM, 400 + (uint64_t)s);
    }
    /* the latent rows in place, as the compressor normalises them */
    check_case("flash latent", 7, 512, 512, 512, 1, eps, DATA_UNIFORM, 501);
}

GPU_TEST(gpu_rmsnorm_tiny_and_odd_shapes)
{
    const float eps = 1e-6f; /* tiny norm_eps */
    check_case("tiny q_norm", 1, 32, 32, 32, 0, eps, DATA_UNIFORM, 601);
    check_case("tiny kv_norm", 7, 64, 64, 64, 0, eps, DATA_UNIFORM, 602);
    check_case("tiny index k_norm", 7, 32, 32, 32, 0, eps, DATA_UNIFORM, 603);
    check_case("odd", 3, 1, 1, 1, 0, eps, DATA_UNIFORM, 604);
    check_case("odd", 5, 33, 33, 33, 0, eps, DATA_UNIFORM, 605);
    check_case("odd", 9, 257, 257, 257, 0, 1e-20f, DATA_UNIFORM, 606);
    check_case("odd", 4, 4099, 4099, 4099, 0, 1e-20f, DATA_UNIFORM, 607);
}

GPU_TEST(gpu_rmsnorm_strides_and_in_place)
{
    /* x rows padded by 37, y rows by 5 (a q row block inside a wider buffer) */
    check_case("strided", 7, 1280, 1280 + 37, 1280 + 5, 0, 1e-20f, DATA_UNIFORM, 701);
    check_case("strided", 3, 64, 100, 64, 0, 1e-6f, DATA_UNIFORM, 702);
    check_case("strided", 3, 64, 64, 71, 0, 1e-6f, DATA_UNIFORM, 703);
    check_case("strided", 5, 512, 640, 640, 1, 1e-20f, DATA_UNIFORM, 704);
    check_case("contiguous", 512, 1280, 1280, 1280, 1, 1e-20f, DATA_UNIFORM, 705);
}

GPU_TEST(gpu_rmsnorm_extreme_rows)
{
    check_case("flash kv_norm", 4, 512, 512, 512, 0, 1e-20f, DATA_ZEROS, 801);   /* ms 0: x * 1e10 = 0 */
    check_case("flash kv_norm", 4, 512, 512, 512, 0, 1e-20f, DATA_TINY, 802);    /* squares underflow: eps rules */
    check_case("flash kv_norm", 4, 512, 512, 512, 0, 1e-20f, DATA_HUGE, 803);    /* squares near 1e30 */
    check_case("flash q_norm", 6, 1280, 1280, 1280, 0, 1e-20f, DATA_ONE_HOT, 804); /* r = +-sqrt(n) */
    check_case("tiny kv_norm", 4, 64, 64, 64, 0, 1e-6f, DATA_ZEROS, 805);
    check_case("tiny kv_norm", 4, 64, 64, 64, 0, 1e-6f, DATA_TINY, 806);
}

GPU_TEST(gpu_rmsnorm_refuses_bad_sizes)
{
    CHECK(as_k_rmsnorm(NULL, 8, NULL, NULL, 8, 1, 0, 1e-6f, 0) == (int)cudaErrorInvalidValue, "n = 0 refused");
    CHECK(as_k_rmsnorm(NULL, 4, NULL, NULL, 8, 1, 8, 1e-6f, 0) == (int)cudaErrorInvalidValue, "ldx < n refused");
    CHECK(as_k_rmsnorm(NULL, 8, NULL, NULL, 4, 1, 8, 1e-6f, 0) == (int)cudaErrorInvalidValue, "ldy < n refused");
    CHECK(as_k_rmsnorm(NULL, 8, NULL, NULL, 8, -1, 8, 1e-6f, 0) == (int)cudaErrorInvalidValue, "rows < 0 refused");
    CHECK(as_k_rmsnorm(NULL, 8, NULL, NULL, 8, 0, 8, 1e-6f, 0) == 0, "rows = 0 is a no-op");
}

/* as_k_rmsnorm_qdq: y as as_k_rmsnorm (the kernel-order emulation, bit for bit) and yq its fp8 QDQ as the
 * reference's act_quant gives it (bf16(xq * s) per block of 32), at the flash x and qr rows, rows the
 * block does not keep in registers, a row stride on yq; then its refusals. */
static void check_qdq(int rows, int n, int64_t ldq, Data data, uint64_t seed)
{
    char what[120];
    snprintf(what, sizeof what, "rmsnorm + fp8 QDQ rows=%d n=%d ldq=%lld %s", rows, n, (long long)ldq, data_name(data));
    const int64_t cnt = (int64_t)rows * n;
    float *x = as_test_xmalloc(sizeof(float) * (size_t)cnt), *w = as_test_xmalloc(sizeof(float) * (size_t)n);
    float *emu = as_test_xmalloc(sizeof(float) * (size_t)cnt), *xq = as_test_xmalloc(sizeof(float) * (size_t)n);
    float *sx = as_test_xmalloc(sizeof(float) * (size_t)(n / 32));
    fill_rows(x, rows, n, data, seed);
    as_fill_uniform(w, n, 0.5f, seed + 1, 0);
    for (int i = 0; i < n; i++)
        w[i] += 1.0f;
    as_bf16_t *dx = as_gpu_bf16(x, cnt), *dy = as_gpu_alloc(2 * (size_t)cnt);
    as_bf16_t *dq = as_gpu_alloc(2 * (size_t)(rows * ldq));
    float *dw = as_gpu_f32(w, n);
    as_gpu_poison(dq, 2 * (size_t)(rows * ldq));
    as_gpu_check_launch(as_k_rmsnorm_qdq(dx, n, dw, dy, n, dq, ldq, rows, n, 1e-20f, 0), what);
    uint16_t *hy = as_test_xmalloc(2 * (size_t)cnt), *hq = as_test_xmalloc(2 * (size_t)(rows * ldq));
    as_gpu_get_bytes(hy, dy, 2 * (size_t)cnt);
    as_gpu_get_bytes(hq, dq, 2 * (size_t)(rows * ldq));
    int64_t bad_y = 0, bad_q = 0, pad = 0;
    for (int r = 0; r < rows; r++) {
        float *er = emu + (int64_t)r * n;
        emulate_row(x + (int64_t)r * n, w, er, n, 1e-20f);
        as_act_quant(er, n, xq, sx);
        for (int i = 0; i < n; i++) {
            bad_y += hy[(int64_t)r * n + i] != as_bf16_bits(er[i]);
            bad_q += hq[(int64_t)r * ldq + i] != as_bf16_bits(as_bf16(xq[i] * sx[i / 32]));
        }
        for (int64_t i = n; i < ldq; i++)
            pad += hq[(int64_t)r * ldq + i] != 0xffff;
    }
    CHECK(bad_y == 0, "%s: %lld of %lld normalised values differ from the kernel-order emulation", what,
          (long long)bad_y, (long long)cnt);
    CHECK(bad_q == 0, "%s: %lld of %lld QDQ values differ from act_quant's", what, (long long)bad_q, (long long)cnt);
    CHECK(pad == 0, "%s: %lld values written past n in yq's rows", what, (long long)pad);
    free(x), free(w), free(emu), free(xq), free(sx), free(hy), free(hq);
    as_gpu_free(dx), as_gpu_free(dy), as_gpu_free(dq), as_gpu_free(dw);
}

GPU_TEST(gpu_rmsnorm_qdq)
{
    check_qdq(1, 4096, 4096, DATA_UNIFORM, 901);  /* flash x, one decode row */
    check_qdq(7, 1024, 1024 + 64, DATA_UNIFORM, 902); /* flash qr, a stride on yq */
    check_qdq(3, 6400, 6400, DATA_UNIFORM, 903);  /* past the values a thread keeps in registers */
    check_qdq(4, 64, 64, DATA_HUGE, 904);
    check_qdq(4, 64, 64, DATA_ONE_HOT, 905);
    as_bf16_t *d = as_gpu_alloc(4096);
    float *w = as_gpu_alloc(256);
    CHECK(as_k_rmsnorm_qdq(d, 48, w, d + 64, 48, d + 128, 48, 1, 48, 1e-6f, 0) == (int)cudaErrorInvalidValue,
          "a QDQ of rows not whole blocks of 32 refused");
    CHECK(as_k_rmsnorm_qdq(d, 64, w, d + 64, 64, d + 128, 32, 1, 64, 1e-6f, 0) == (int)cudaErrorInvalidValue,
          "ldq < n refused");
    CHECK(as_k_rmsnorm_qdq(d, 64, w, d + 64, 64, d + 64, 64, 1, 64, 1e-6f, 0) == (int)cudaErrorInvalidValue,
          "yq onto y refused");
    CHECK(as_k_rmsnorm_qdq(d, 64, w, d, 64, d, 64, 1, 64, 1e-6f, 0) == (int)cudaErrorInvalidValue,
          "yq onto x refused");
    as_gpu_sync("rmsnorm + QDQ refusals");
    as_gpu_free(d), as_gpu_free(w);
}
