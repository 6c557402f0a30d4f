/* kernels/elementwise.cu against its CPU twins, bit for bit: bf16 -> f32 widening, the index
 * weights' scale (as_index_weights_scale, ref/indexer.c) and the residual add (ref/stack.c:
 * h = bf16(h + out)). Inputs span the whole bf16 exponent range (subnormals, near-overflow,
 * signed zeros, ties of the final rounding); outputs are poisoned before every launch. */
#include <cuda_runtime_api.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "ref/indexer.h"
#include "ref/numerics.h"
#include "tests/lib/gpu_util.h"
#include "tests/lib/harness.h"

/* ---- helpers ---- */

static uint64_t mix(uint64_t *s)
{
    uint64_t z = (*s += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

/* bf16 values with random sign, mantissa and exponent 2^emin .. 2^emax (emin >= -133: below
 * -126 the values are bf16 subnormals, 2^e their leading bit; emax <= 127); every 61st is +-0
 * and every 67th a bf16 subnormal, so the rare paths are always present. */
static void fill_wide(float *x, int64_t n, int emin, int emax, uint64_t seed)
{
    uint64_t s = seed;
    for (int64_t i = 0; i < n; i++) {
        uint64_t r = mix(&s);
        uint32_t sign = (uint32_t)(r & 1) << 31, mant = (uint32_t)(r >> 1) & 0x7f;
        int e = emin + (int)((r >> 8) % (uint64_t)(emax - emin + 1));
        uint32_t bits;
        if (e >= -126) {
            bits = sign | ((uint32_t)(e + 127) << 23) | (mant << 16);
        } else { /* m * 2^-133 with the leading bit at 2^e */
            uint32_t lead = 1u << (e + 133);
            bits = sign | ((lead | (mant & (lead - 1))) << 16);
        }
        if (i % 61 == 60)
            bits = sign;
        else if (i % 67 == 66)
            bits = sign | (mant << 16) | 0x10000u; /* exponent field 0: subnormal */
        x[i] = as_bits_f32(bits);
    }
}


static uint16_t *dev_bits(const as_bf16_t *dev, int64_t n)
{
    uint16_t *h = as_test_xmalloc(sizeof(uint16_t) * (size_t)n);
    as_gpu_get_bytes(h, dev, sizeof(uint16_t) * (size_t)n);
    return h;
}

static uint16_t *host_bits(const float *x, int64_t n)
{
    uint16_t *h = as_test_xmalloc(sizeof(uint16_t) * (size_t)n);
    for (int64_t i = 0; i < n; i++)
        h[i] = as_bf16_bits(x[i]);
    return h;
}

/* ---- bf16 -> f32 ---- */

static void check_widen(int64_t n, uint64_t seed)
{
    float *x = as_test_xmalloc(sizeof(float) * (size_t)n), *y = as_test_xmalloc(sizeof(float) * (size_t)(n + 1));
    fill_wide(x, n, -133, 127, seed);
    /* the special values at the front: +-inf, NaN, the largest finite, the smallest subnormal */
    const uint32_t special[] = {0x7f800000u, 0xff800000u, 0x7fc00000u, 0x7f7f0000u, 0x00010000u, 0x80010000u};
    for (int i = 0; i < 6 && i < n; i++)
        x[i] = as_bits_f32(special[i]);
    as_bf16_t *dx = as_gpu_bf16(x, n);
    float *dy = as_gpu_alloc(sizeof(float) * (size_t)(n + 1)); /* one guard element past the end */
    as_gpu_poison(dy, sizeof(float) * (size_t)(n + 1));
    as_gpu_check_launch(as_k_bf16_to_f32(dx, dy, n, 0), "as_k_bf16_to_f32");
    as_gpu_get_f32(y, dy, n + 1);
    int64_t bad = 0;
    for (int64_t i = 0; i < n; i++) {
        uint32_t want = (uint32_t)as_bf16_bits(x[i]) << 16, got = as_f32_bits(y[i]);
        if (got != want && bad++ < 6)
            as_test_note("bf16_to_f32 n=%lld: [%lld]: got 0x%08x, want 0x%08x", (long long)n, (long long)i, got, want);
    }
    CHECK(bad == 0, "bf16_to_f32 n=%lld: %lld of %lld values not widened exactly", (long long)n, (long long)bad,
          (long long)n);
    CHECK(as_f32_bits(y[n]) == 0xffffffffu, "bf16_to_f32 n=%lld: wrote past the end (guard 0x%08x)", (long long)n,
          as_f32_bits(y[n]));
    as_test_note("bf16_to_f32 n=%lld: %lld/%lld exact, guard intact", (long long)n, (long long)(n - bad),
                 (long long)n);
    as_gpu_free(dx);
    as_gpu_free(dy);
    free(x);
    free(y);
}

GPU_TEST(gpu_elementwise_bf16_to_f32_exact_widening)
{
    check_widen(1, 1);
    check_widen(6, 2);
    check_widen(4097, 3);              /* not a multiple of the block */
    check_widen(7 * 5120, 4);          /* 7 tokens of the flash model's width */
    check_widen((1 << 24) + 4099, 5);  /* grid-stride: more than the capped grid (2^16 x 256) covers */
    CHECK(as_k_bf16_to_f32(NULL, NULL, -1, 0) == (int)cudaErrorInvalidValue, "n < 0 must be refused");
    CHECK(as_k_bf16_to_f32(NULL, NULL, 0, 0) == 0, "n == 0 is a no-op");
}

/* ---- index weights scale ---- */

/* w [s][nh] scaled by c = (float)(ihd^-0.5 * nh^-0.5), the reference in place on the host. */
static void check_scale(const char *geom, int s, int nh, int ihd, int emin, int emax, uint64_t seed)
{
    int64_t n = (int64_t)s * nh;
    float *w = as_test_xmalloc(sizeof(float) * (size_t)(n + 1));
    fill_wide(w, n, emin, emax, seed);
    w[n] = 0.0f;
    as_bf16_t *dw = as_gpu_bf16(w, n + 1);
    as_gpu_poison(dw + n, sizeof(uint16_t)); /* guard */
    const float c = (float)(1.0 / sqrt((double)ihd) * (1.0 / sqrt((double)nh)));
    as_gpu_check_launch(as_k_scale_bf16(dw, n, c, 0), "as_k_scale_bf16");
    as_index_weights_scale(w, s, nh, ihd);
    uint16_t *got = dev_bits(dw, n + 1), *want = host_bits(w, n);
    char what[160];
    snprintf(what, sizeof what, "scale_bf16 %s s=%d nh=%d ihd=%d (2^%d..2^%d)", geom, s, nh, ihd, emin, emax);
    AsBf16Diff d = as_diff_bf16(what, got, want, s, nh, 0);
    CHECK(d.bad == 0, "%s: %lld of %lld weights differ from as_index_weights_scale", what, (long long)d.bad,
          (long long)n);
    CHECK(got[n] == 0xffff, "%s: wrote past the end (guard 0x%04x)", what, got[n]);
    if (d.bad == 0)
        as_test_note("%s: %lld/%lld bit-exact", what, (long long)n, (long long)n);
    free(got);
    free(want);
    free(w);
    as_gpu_free(dw);
}

GPU_TEST(gpu_elementwise_scale_bf16_matches_index_weights_scale)
{
    /* flash: nh_i 32, ihd 128; tiny: 4 heads of 32 */
    check_scale("flash", 1, 32, 128, -8, 8, 11);
    check_scale("flash", 7, 32, 128, -8, 8, 12);
    check_scale("flash", 512, 32, 128, -8, 8, 13);
    check_scale("tiny", 1, 4, 32, -8, 8, 14);
    check_scale("tiny", 7, 4, 32, -8, 8, 15);
    /* the whole exponent range: products that become subnormal, or stay near the top */
    check_scale("flash", 512, 32, 128, -133, 127, 16);
    check_scale("tiny", 333, 4, 32, -133, 127, 17);
    CHECK(as_k_scale_bf16(NULL, -3, 1.0f, 0) == (int)cudaErrorInvalidValue, "n < 0 must be refused");
}

/* ---- residual ---- */

static void check_residual(const char *geom, int s, int dim, int emin, int emax, uint64_t seed)
{
    int64_t n = (int64_t)s * dim;
    float *h = as_test_xmalloc(sizeof(float) * (size_t)(n + 1)), *out = as_test_xmalloc(sizeof(float) * (size_t)n);
    fill_wide(h, n, emin, emax, seed);
    fill_wide(out, n, emin, emax, seed + 1000);
    /* exact cancellations and ties of the bf16 rounding: out = -h, and h = 1, out = 2^-8 (tie: 1),
     * h = 1 + 2^-7, out = 2^-8 (tie: up to 1 + 2^-6) */
    for (int64_t i = 0; i + 2 < n; i += 97) {
        out[i] = -h[i];
        h[i + 1] = 1.0f, out[i + 1] = 0x1p-8f;
        h[i + 2] = 1.0f + 0x1p-7f, out[i + 2] = 0x1p-8f;
    }
    h[n] = 0.0f;
    as_bf16_t *dh = as_gpu_bf16(h, n + 1), *dout = as_gpu_bf16(out, n);
    as_gpu_poison(dh + n, sizeof(uint16_t));
    as_gpu_check_launch(as_k_residual_add(dh, dout, n, 0), "as_k_residual_add");
    for (int64_t i = 0; i < n; i++) /* ref/stack.c: k->h[i] = as_bf16(k->h[i] + out[i]) */
        h[i] = as_bf16(h[i] + out[i]);
    uint16_t *got = dev_bits(dh, n + 1), *want = host_bits(h, n);
    char what[160];
    snprintf(what, sizeof what, "residual_add %s s=%d dim=%d (2^%d..2^%d)", geom, s, dim, emin, emax);
    AsBf16Diff d = as_diff_bf16(what, got, want, s, dim, 0);
    CHECK(d.bad == 0, "%s: %lld of %lld elements differ from bf16(h + out)", what, (long long)d.bad, (long long)n);
    CHECK(got[n] == 0xffff, "%s: wrote past the end (guard 0x%04x)", what, got[n]);
    if (d.bad == 0)
        as_test_note("%s: %lld/%lld bit-exact", what, (long long)n, (long long)n);
    free(got);
    free(want);
    free(h);
    free(out);
    as_gpu_free(dh);
    as_gpu_free(dout);
}

GPU_TEST(gpu_elementwise_residual_add_matches_reference)
{
    check_residual("flash", 1, 5120, -10, 10, 21);
    check_residual("flash", 7, 5120, -10, 10, 22);
    check_residual("flash", 512, 5120, -10, 10, 23);
    check_residual("tiny", 1, 64, -10, 10, 24);
    check_residual("tiny", 7, 64, -10, 10, 25);
    /* every exponent: subnormal sums, overflow to inf at the top */
    check_residual("flash", 7, 5120, -133, 127, 26);
    CHECK(as_k_residual_add(NULL, NULL, -1, 0) == (int)cudaErrorInvalidValue, "n < 0 must be refused");
}
