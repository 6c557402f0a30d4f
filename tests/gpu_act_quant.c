/* kernels/act_quant.cu against ref/quant.c's as_act_quant, bit for bit: the e4m3 codes (as
 * as_e4m3_bits of the reference's values) and the scales, at the fp8 projections' input widths (flash:
 * 5120, 1280, 8192; tiny: 64, 32) and odd ones, 1 to 300 rows, random rows whose blocks span 2^-16 ..
 * 2^4 with blocks below the 1e-4 floor, then hand-made blocks: zeros and signed zeros, bf16 subnormals,
 * e4m3 ties at s = 1 (the grid's midpoints, each to its even code), the e4m3 subnormal grid and its
 * ties, an amax exactly 448 * 2^k (s = 2^k) and one bf16 step above it (s = 2^(k+1)), the bf16 maximum.
 * The scale rows' padding must be 0 and nothing past each row's codes written. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "ref/numerics.h"
#include "ref/quant.h"
#include "tests/lib/gpu_util.h"
#include "tests/lib/harness.h"

/* Runs both sides on s rows of n and compares; rows of codes ldq = n + 16 bytes apart (a guard). */
static void check_rows(const char *label, const float *x, int s, int n)
{
    char what[160];
    snprintf(what, sizeof what, "act_quant %s: %d rows of %d", label, s, n);
    const int nk = n / 32;
    const int64_t ldq = n + 16, lds = (nk + 3) / 4 * 4 + 4; /* padding of 1 to 7 scales, checked at 0 */
    as_bf16_t *dx = as_gpu_bf16(x, (int64_t)s * n);
    uint8_t *dq = as_gpu_alloc((size_t)(s * ldq));
    float *ds = as_gpu_alloc(sizeof(float) * (size_t)(s * lds));
    as_gpu_poison(dq, (size_t)(s * ldq));
    as_gpu_poison(ds, sizeof(float) * (size_t)(s * lds));
    as_gpu_check_launch(as_k_act_quant(dx, n, s, n, dq, ldq, ds, lds, 0), what);
    uint8_t *q = as_test_xmalloc((size_t)(s * ldq));
    float *sc = as_test_xmalloc(sizeof(float) * (size_t)(s * lds));
    as_gpu_get_bytes(q, dq, (size_t)(s * ldq));
    as_gpu_get_f32(sc, ds, s * lds);
    float *xq = as_test_xmalloc(sizeof(float) * (size_t)n), *sx = as_test_xmalloc(sizeof(float) * (size_t)nk);
    int64_t bad_codes = 0, bad_scales = 0, bad_pad = 0, guard = 0;
    for (int t = 0; t < s; t++) {
        float *xr = as_test_xmalloc(sizeof(float) * (size_t)n);
        for (int i = 0; i < n; i++)
            xr[i] = as_bf16(x[(int64_t)t * n + i]);
        as_act_quant(xr, n, xq, sx);
        for (int k = 0; k < nk; k++) {
            const float g = sc[t * lds + k];
            if (memcmp(&g, &sx[k], 4) && bad_scales++ < 4)
                as_test_note("%s: row %d block %d: scale %.9g, want %.9g", what, t, k, g, sx[k]);
        }
        for (int64_t k = nk; k < lds; k++)
            bad_pad += sc[t * lds + k] != 0.0f;
        for (int i = 0; i < n; i++) {
            const uint8_t want = as_e4m3_bits(xq[i]);
            if (q[t * ldq + i] != want && bad_codes++ < 6)
                as_test_note("%s: [%d][%d] (x %.9g, block scale %.9g): code 0x%02x, want 0x%02x (%.9g)", what, t, i,
                             xr[i], sx[i / 32], q[t * ldq + i], want, xq[i]);
        }
        for (int64_t i = n; i < ldq; i++)
            guard += q[t * ldq + i] != 0xff;
        free(xr);
    }
    CHECK(bad_codes == 0 && bad_scales == 0, "%s: %lld codes and %lld scales differ from as_act_quant", what,
          (long long)bad_codes, (long long)bad_scales);
    CHECK(bad_pad == 0, "%s: %lld padding scales not 0", what, (long long)bad_pad);
    CHECK(guard == 0, "%s: %lld bytes written past a row's codes", what, (long long)guard);
    free(q), free(sc), free(xq), free(sx);
    as_gpu_free(dx), as_gpu_free(dq), as_gpu_free(ds);
}

GPU_TEST(gpu_act_quant_random_rows)
{
    const struct {
        int s, n;
    } shapes[] = {{1, 5120}, {8, 5120}, {1, 1280}, {3, 1280}, {1, 8192}, {300, 1280}, {1, 64}, {5, 32}, {7, 96}, {2, 288}};
    for (size_t c = 0; c < sizeof shapes / sizeof shapes[0]; c++) {
        const int s = shapes[c].s, n = shapes[c].n;
        float *x = as_test_xmalloc(sizeof(float) * (size_t)s * n);
        as_fill_uniform(x, (int64_t)s * n, 1.0f, 17 + c, 1);
        for (int64_t b = 0; b < (int64_t)s * n / 32; b++) { /* each block at its own magnitude */
            const int e = (int)((b * 7 + c) % 21) - 16;
            for (int i = 0; i < 32; i++)
                x[b * 32 + i] = as_bf16(b % 13 == 5 ? x[b * 32 + i] * 5e-5f : ldexpf(x[b * 32 + i], e));
        }
        char label[32];
        snprintf(label, sizeof label, "random %zu", c);
        check_rows(label, x, s, n);
        free(x);
    }
}

GPU_TEST(gpu_act_quant_hand_blocks)
{
    enum { NB = 12, N = 32 * NB };
    float x[N];
    for (int i = 0; i < 32; i++) {
        x[i] = 0.0f;                                        /* 0: zeros (the amax floor) */
        x[32 + i] = i % 2 ? -0.0f : 0.0f;                    /* 1: signed zeros */
        x[64 + i] = ldexpf((float)(i + 1), -133);            /* 2: bf16 subnormals */
        /* 3: s = 1 (amax 448) and the grid's midpoints: 1.0625 (1 | 1.125 -> 1), 1.1875 (-> 1.25), 17, 19,
         * 208 (192 | 224 -> 192), 240 (224 | 256 -> 256), 416 | 448 midpoint 432 -> 448 */
        static const float mids[8] = {1.0625f, 1.1875f, 17.0f, 19.0f, 208.0f, 240.0f, 432.0f, -1.0625f};
        x[96 + i] = i == 0 ? 448.0f : mids[i % 8] * (i % 3 ? 1.0f : -1.0f);
        /* 4: s = 1 and the e4m3 subnormal grid (2^-9 steps) with its ties: k * 2^-10 */
        x[128 + i] = i == 0 ? -448.0f : ldexpf((float)i, -10);
        x[160 + i] = i == 7 ? 448.0f * 0x1p-20f : 0x1p-22f * (float)i; /* 5: amax 448 * 2^-20: s = 2^-20 */
        x[192 + i] = i == 7 ? as_bf16_to_f32((uint16_t)(as_bf16_bits(448.0f * 0x1p-20f) + 1)) : 0x1p-22f * (float)i;
        x[224 + i] = i == 3 ? 3.3895313892515355e38f : 1.0f; /* 7: the bf16 maximum (s = 2^120) */
        x[256 + i] = 1e-4f * (float)(i - 16) / 16.0f;        /* 8: at and below the floor */
        x[288 + i] = (i % 2 ? -1.0f : 1.0f) * ldexpf(1.0f + (float)i / 32.0f, i % 9 - 4); /* 9: mixed exponents */
        x[320 + i] = i == 31 ? -448.0f * 4.0f : 4.0f * (float)(i - 15) / 8.0f; /* 10: s = 4, negative amax */
        x[352 + i] = ldexpf(1.0f, -i);                         /* 11: 1 .. 2^-31 */
    }
    check_rows("hand blocks", x, 1, N);
}
