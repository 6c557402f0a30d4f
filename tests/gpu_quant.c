/* kernels/quant.cu against ref/quant.c, bit for bit, for the three quantisers: fp8 (block 32,
 * ue8m0 scale), fp4 with e8m0 scales (block 32) and fp4 with e4m3 scales (block 16). Random
 * blocks at the flash and tiny shapes (each block at its own magnitude, 2^-40 .. 2^40), then
 * hand-made blocks: all zeros (amax floors), bf16 subnormals and tiny values (e4m3 subnormal
 * grid, subnormal e4m3 scales and their ties), exact ties of every grid (s = 1 blocks), values
 * near the bf16 maximum, the e4m3 scale's saturation (amax / 6 = 448, 464 -> 448, > 464 -> NaN),
 * signed zeros. `pre` must receive the input; NaN outputs must be NaN on both sides. */
#include <cuda_runtime_api.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "ref/numerics.h"
#include "ref/quant.h"
#include "tests/lib/gpu_util.h"
#include "tests/lib/harness.h"

/* ---- helpers ---- */

/* ---- the quantisers ---- */

static const char *kind_name(int kind)
{
    return kind == AS_KQ_FP8 ? "fp8" : kind == AS_KQ_FP4_E8M0 ? "fp4-e8m0" : "fp4-e4m3";
}
static int kind_block(int kind) { return kind == AS_KQ_FP4_E4M3 ? AS_FP4_E4M3_BLOCK : AS_FP8_BLOCK; }

static void ref_quant(int kind, float *x, int64_t n)
{
    if (kind == AS_KQ_FP8)
        as_fp8_quant(x, n, AS_FP8_BLOCK);
    else if (kind == AS_KQ_FP4_E8M0)
        as_fp4_quant_e8m0(x, n, AS_FP4_E8M0_BLOCK);
    else
        as_fp4_quant_e4m3(x, n, AS_FP4_E4M3_BLOCK);
}

/* The scale the reference gives block b (for the report of a mismatching block). */
static float ref_scale(int kind, const float *block)
{
    if (kind == AS_KQ_FP8)
        return as_fp8_block_scale(block, AS_FP8_BLOCK);
    if (kind == AS_KQ_FP4_E8M0)
        return as_fp4_e8m0_block_scale(block, AS_FP4_E8M0_BLOCK);
    return as_fp4_e4m3_block_scale(block, AS_FP4_E4M3_BLOCK);
}

/* Quantises x (n values, bf16) on both sides and compares; with_pre also checks `pre`. The
 * report's coordinates are [block][element]. */
static void check_quant(int kind, const char *label, const float *x_in, int64_t n, int with_pre)
{
    const int B = kind_block(kind);
    char what[200];
    snprintf(what, sizeof what, "%s %s n=%lld (%lld blocks of %d)%s", kind_name(kind), label, (long long)n,
             (long long)(n / B), B, with_pre ? " +pre" : "");
    float *x = as_test_xmalloc(sizeof(float) * (size_t)n);
    for (int64_t i = 0; i < n; i++)
        x[i] = as_bf16(x_in[i]);
    uint16_t *in_bits = as_test_xmalloc(sizeof(uint16_t) * (size_t)n);
    for (int64_t i = 0; i < n; i++)
        in_bits[i] = as_bf16_bits(x[i]);

    as_bf16_t *dx = as_gpu_bytes(in_bits, sizeof(uint16_t) * (size_t)n);
    as_bf16_t *dpre = NULL;
    if (with_pre) {
        dpre = as_gpu_alloc(sizeof(uint16_t) * (size_t)n);
        as_gpu_poison(dpre, sizeof(uint16_t) * (size_t)n);
    }
    as_gpu_check_launch(as_k_quant(dx, dpre, n, kind, 0), what);

    float *scales = as_test_xmalloc(sizeof(float) * (size_t)(n / B));
    for (int64_t b = 0; b < n / B; b++)
        scales[b] = ref_scale(kind, x + b * B);
    ref_quant(kind, x, n);

    uint16_t *got = as_test_xmalloc(sizeof(uint16_t) * (size_t)n), *want = as_test_xmalloc(sizeof(uint16_t) * (size_t)n);
    as_gpu_get_bytes(got, dx, sizeof(uint16_t) * (size_t)n);
    for (int64_t i = 0; i < n; i++)
        want[i] = as_bf16_bits(x[i]);
    AsBf16Diff d = as_diff_bf16(what, got, want, n / B, B, 0);
    if (d.bad) { /* name the scale of the first bad block */
        for (int64_t i = 0; i < n; i++)
            if (got[i] != want[i] && !(as_bf16_is_nan_bits(got[i]) && as_bf16_is_nan_bits(want[i]))) {
                int64_t b = i / B;
                as_test_note("%s: block %lld: reference scale %a, input[%lld] = %a", what, (long long)b,
                             (double)scales[b], (long long)(i % B), (double)as_bf16_to_f32(in_bits[i]));
                break;
            }
    }
    CHECK(d.bad == 0, "%s: %lld of %lld values differ from ref/quant.c", what, (long long)d.bad, (long long)n);
    if (with_pre) {
        uint16_t *pre = as_test_xmalloc(sizeof(uint16_t) * (size_t)n);
        as_gpu_get_bytes(pre, dpre, sizeof(uint16_t) * (size_t)n);
        int64_t bad = 0;
        for (int64_t i = 0; i < n; i++)
            if (pre[i] != in_bits[i] && bad++ < 3)
                as_test_note("%s: pre[%lld] = 0x%04x, input 0x%04x", what, (long long)i, pre[i], in_bits[i]);
        CHECK(bad == 0, "%s: pre differs from the input at %lld of %lld values", what, (long long)bad, (long long)n);
        free(pre);
        as_gpu_free(dpre);
    }
    if (d.bad == 0)
        as_test_note("%s: %lld/%lld bit-exact (%lld NaN on both sides)", what, (long long)n, (long long)n,
                     (long long)d.nans);
    free(x), free(in_bits), free(scales), free(got), free(want);
    as_gpu_free(dx);
}

static uint64_t mix(uint64_t *s)
{
    uint64_t z = (*s += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

/* Uniform [-1, 1] bf16 values, block b scaled by 2^k_b (exact), k_b in [-40, 40] for the
 * power-of-two scales, [-12, 11] for the e4m3 scale (below, amax floors; above 2^11, amax / 6
 * passes 464 and the block is NaN: the edge test covers both). */
static float *random_blocks(int64_t n, int kind, uint64_t seed)
{
    const int B = kind_block(kind);
    const int kmin = kind == AS_KQ_FP4_E4M3 ? -12 : -40, kmax = kind == AS_KQ_FP4_E4M3 ? 11 : 40;
    float *x = as_test_xmalloc(sizeof(float) * (size_t)n);
    as_fill_uniform(x, n, 1.0f, seed, 1);
    uint64_t s = seed ^ 0x5eedull;
    for (int64_t b = 0; b < n / B; b++) {
        int k = (int)(mix(&s) % (uint64_t)(kmax - kmin + 1)) + kmin;
        for (int j = 0; j < B; j++)
            x[b * B + j] = ldexpf(x[b * B + j], k);
    }
    return x;
}

static void random_cases(int kind, const char *geom, int width, uint64_t seed)
{
    const int s_list[] = {1, 7, 512};
    for (int k = 0; k < 3; k++) {
        int64_t n = (int64_t)s_list[k] * width;
        float *x = random_blocks(n, kind, seed + (uint64_t)k);
        char label[96];
        snprintf(label, sizeof label, "%s random s=%d x %d", geom, s_list[k], width);
        check_quant(kind, label, x, n, k == 1);
        free(x);
    }
}

GPU_TEST(gpu_quant_random_blocks_flash_and_tiny)
{
    /* flash: kv rows (fp8) and latents (fp4-e4m3) of hd 512, index q rows of 32 x 128 (fp4-e8m0) */
    random_cases(AS_KQ_FP8, "flash kv", 512, 1000);
    random_cases(AS_KQ_FP4_E8M0, "flash index q", 32 * 128, 2000);
    random_cases(AS_KQ_FP4_E8M0, "flash index k", 128, 2500);
    random_cases(AS_KQ_FP4_E4M3, "flash latent", 512, 3000);
    /* tiny: hd 64, index 4 x 32 */
    random_cases(AS_KQ_FP8, "tiny kv", 64, 4000);
    random_cases(AS_KQ_FP4_E8M0, "tiny index q", 4 * 32, 5000);
    random_cases(AS_KQ_FP4_E4M3, "tiny latent", 64, 6000);
    /* one block; and more than one grid's worth of 256-thread blocks with a partial last one */
    for (int kind = AS_KQ_FP8; kind <= AS_KQ_FP4_E4M3; kind++) {
        int B = kind_block(kind);
        float *x = random_blocks(B, kind, 7000 + (uint64_t)kind);
        check_quant(kind, "one block", x, B, 1);
        free(x);
        int64_t n = (int64_t)B * 4099;
        x = random_blocks(n, kind, 7100 + (uint64_t)kind);
        check_quant(kind, "4099 blocks", x, n, 0);
        free(x);
    }
}

/* ---- hand-made blocks ---- */

/* Writes one block per pattern into x (B values each); returns the number of blocks. */
static int edge_blocks(int kind, float *x, int max_blocks)
{
    const int B = kind_block(kind);
    int nb = 0;
#define BLOCK(...)                                                                                   \
    do {                                                                                             \
        const float v_[] = {__VA_ARGS__};                                                            \
        const int nv_ = (int)(sizeof v_ / sizeof v_[0]);                                             \
        REQUIRE(nb < max_blocks, "test bug: too many edge blocks");                                  \
        for (int j_ = 0; j_ < B; j_++)                                                               \
            x[nb * B + j_] = j_ < nv_ ? v_[j_] : 0.0f;                                               \
        nb++;                                                                                        \
    } while (0)
    /* all zeros, and signed zeros: amax floors */
    BLOCK(0.0f);
    BLOCK(-0.0f, 0.0f, -0.0f, -0.0f, 0.0f);
    /* bf16 subnormals only (amax floors; everything quantises to +-0) */
    BLOCK(0x1p-133f, -0x1p-133f, 0x7fp-133f, -0x3p-131f, 0x1p-127f);
    /* tiny normals around the floors */
    BLOCK(1e-4f, -1e-4f, 5e-5f, 1e-6f, -3e-7f, 0x1p-20f);
    BLOCK(0x1p-9f, 0x1.8p-9f, -0x1p-10f, 0x1.4p-9f, 6e-3f, -0x1.8p-7f);
    BLOCK(0x1p-124f, 0x1.8p-124f, -0x1p-125f, 0x1p-126f, 3e-38f);
    if (kind == AS_KQ_FP8) {
        /* amax 448: s = 1, the e4m3 grid itself; ties: 1.0625 -> 1, 17 -> 16, 19 -> 20, 2^-10 -> 0,
         * 3 * 2^-10 -> 2^-8 (subnormal, even code), 2^-6 + 2^-10 -> 2^-6 (normal/subnormal edge) */
        BLOCK(448.0f, 1.0625f, 17.0f, 19.0f, -19.0f, 0x1p-10f, 0x3p-10f, -0x3p-10f, 0x1p-6f + 0x1p-10f, 0x5p-10f,
              1.1875f, 240.0f, 232.0f, 248.0f, -448.0f, 0x1.2p-6f);
        /* amax just above 448: s = 2, x / s ties at half scale */
        BLOCK(449.0f, 464.0f, 2.125f, 34.0f, 38.0f, -0x3p-9f);
        /* amax = 448 * 2^k exactly (s = 2^k, mantissa 0) against one ulp above (s = 2^(k+1)) */
        BLOCK(896.0f, 17.0f, 9.0f);
        BLOCK(0x1.c2p9f, 17.0f, 9.0f);
    } else {
        /* amax 6: s = 1 for both scale kinds; every e2m1 tie, both signs; the clamp at 6 */
        BLOCK(6.0f, 0.25f, 0.75f, 1.25f, 1.75f, 2.5f, 3.5f, 5.0f, -0.25f, -0.75f, -1.25f, -1.75f, -2.5f, -3.5f,
              -5.0f, 5.5f);
        BLOCK(-6.0f, 0.5f, 1.0f, 1.5f, 2.0f, 3.0f, 4.0f, 0.2578125f, 0.7421875f, 1.2578125f, 4.96875f, 5.03125f,
              2.515625f, 3.484375f, -0.125f, 0.375f);
        /* amax 12: s = 2 */
        BLOCK(12.0f, 0.5f, 1.5f, 2.5f, 3.5f, 5.0f, 7.0f, 10.0f, -10.0f, 11.0f);
    }
    if (kind == AS_KQ_FP4_E4M3) {
        /* e4m3 scales in the subnormal range: amax / 6 = 2^-9 (floor), 1.5 * 2^-9 (tie -> 2^-8),
         * 2.5 * 2^-9 (tie -> 2^-8), 3 * 2^-9, 7.5 * 2^-9 (tie -> 2^-6, the first normal) */
        BLOCK(0x1.8p-7f, 0x1p-8f, -0x1p-9f);
        BLOCK(0x1.2p-6f, 0x1p-7f, -0x1p-8f, 0x1p-10f);
        BLOCK(0x1.ep-6f, 0x1p-7f, 0x1p-6f, -0x1.8p-7f);
        BLOCK(0x1.2p-5f, 0x1p-6f, 0x1p-7f);
        BLOCK(0x1.68p-4f, 0x1p-5f, 0x1p-6f);
        /* e4m3 scale rounding ties in the normal range: amax / 6 = 1.0625 (-> 1), 1.1875 (-> 1.25) */
        BLOCK(6.375f, 1.0f, 2.0f, 3.0f);
        BLOCK(7.125f, 1.0f, 2.0f, 3.0f);
        /* saturation: amax / 6 = 448 exactly, 464 (tie -> 448), 466.67 (> 464: NaN, as torch), 512 */
        BLOCK(2688.0f, 1000.0f, -2000.0f, 100.0f);
        BLOCK(2784.0f, 1000.0f, -2000.0f, 100.0f);
        BLOCK(2800.0f, 1000.0f, -2000.0f, 100.0f);
        BLOCK(3072.0f, 1.0f);
    }
    /* values near the bf16 maximum (3.39e38) and one huge value among small ones */
    BLOCK(0x1.fep127f, -0x1.fep127f, 0x1p127f, 0x1.8p126f, 1.0f, 1e30f);
    BLOCK(1e38f, 1.0f, -1.0f, 0.5f, 1e-3f, 1e20f);
    /* mixed magnitudes (most of the block rounds to zero or to the subnormal e4m3 grid) */
    BLOCK(1.0f, 0x1p-8f, 0x1p-9f, 0x1p-10f, 0x1p-11f, 0x1p-12f, -0x1p-9f, 0x1.8p-9f, 0x1p-14f, 0x1p-20f);
#undef BLOCK
    return nb;
}

GPU_TEST(gpu_quant_edge_blocks)
{
    for (int kind = AS_KQ_FP8; kind <= AS_KQ_FP4_E4M3; kind++) {
        const int B = kind_block(kind);
        float x[64 * 32];
        int nb = edge_blocks(kind, x, 64);
        /* each block also at 2^-3 and 2^+3 of itself where that keeps it finite and normal-ish, and
         * the mirrored (negated) block: the patterns' ties move with the scale */
        float all[3 * 64 * 32];
        int64_t n = 0;
        for (int b = 0; b < nb; b++)
            for (int j = 0; j < B; j++)
                all[n++] = x[b * B + j];
        for (int b = 0; b < nb; b++)
            for (int j = 0; j < B; j++)
                all[n++] = -x[b * B + j];
        for (int b = 0; b < nb; b++)
            for (int j = 0; j < B; j++) {
                float v = x[b * B + j];
                all[n++] = fabsf(v) < 1e30f ? ldexpf(v, 3) : v;
            }
        check_quant(kind, "edge blocks", all, n, 1);
        /* the NaN block (amax / 6 > 464) must be NaN on the device too: diff_bf16 accepts NaN only
         * against NaN, so the count of NaN is the reference's */
    }
}

GPU_TEST(gpu_quant_refuses_bad_sizes)
{
    as_bf16_t *x = (as_bf16_t *)(uintptr_t)16; /* never dereferenced: every call below is refused */
    CHECK(as_k_quant(x, NULL, 48, AS_KQ_FP8, 0) == (int)cudaErrorInvalidValue, "fp8 n = 48 refused (block 32)");
    CHECK(as_k_quant(x, NULL, 16, AS_KQ_FP4_E8M0, 0) == (int)cudaErrorInvalidValue, "fp4-e8m0 n = 16 refused");
    CHECK(as_k_quant(x, NULL, 24, AS_KQ_FP4_E4M3, 0) == (int)cudaErrorInvalidValue, "fp4-e4m3 n = 24 refused");
    CHECK(as_k_quant(x, NULL, 32, 0, 0) == (int)cudaErrorInvalidValue, "kind 0 refused");
    CHECK(as_k_quant(x, NULL, 32, 4, 0) == (int)cudaErrorInvalidValue, "kind 4 refused");
    CHECK(as_k_quant(x, NULL, -32, AS_KQ_FP8, 0) == (int)cudaErrorInvalidValue, "n < 0 refused");
    CHECK(as_k_quant(NULL, NULL, 0, AS_KQ_FP8, 0) == 0, "n = 0 is a no-op");
}
