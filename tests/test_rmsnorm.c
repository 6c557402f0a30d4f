/* RMSNorm (ref/rmsnorm) on small rows worked by hand. */
#include <math.h>

#include "ref/numerics.h"
#include "ref/rmsnorm.h"
#include "tests/lib/harness.h"

TEST(rmsnorm_small_row)
{
    /* mean(x^2) = 30 / 4 = 7.5; 1/sqrt(7.5) = 0.36514837; y = bf16(w * x * 0.36514837):
     * 0.3651 -> 0.365234375 (step 2^-9), 0.3651 (w 0.5, x 2), 2.1909 -> 2.1875 (step 2^-6),
     * -1.4606 -> -1.4609375 (step 2^-7). */
    const float x[4] = {1, 2, 3, 4}, w[4] = {1, 0.5f, 2, -1};
    const float want[4] = {0.365234375f, 0.365234375f, 2.1875f, -1.4609375f};
    float y[4];
    as_rmsnorm(x, w, y, 1, 4, 1e-20f);
    for (int i = 0; i < 4; i++)
        CHECK(y[i] == want[i], "y[%d] = %.9g, want %.9g", i, y[i], want[i]);

    /* in place, two rows: the second row is the first times 8 (same normalised values) */
    float xy[8] = {1, 2, 3, 4, 8, 16, 24, 32};
    as_rmsnorm(xy, w, xy, 2, 4, 1e-20f);
    for (int i = 0; i < 8; i++)
        CHECK(xy[i] == want[i % 4], "in place [%d] = %.9g, want %.9g", i, xy[i], want[i % 4]);
}

TEST(rmsnorm_eps_and_zero_row)
{
    const float w[4] = {1, 1, 1, 1};
    /* all zero with eps 1e-20: 0 * 1e10 = 0, no NaN */
    float z[4] = {0, 0, 0, 0};
    as_rmsnorm(z, w, z, 1, 4, 1e-20f);
    for (int i = 0; i < 4; i++)
        CHECK(z[i] == 0.0f, "zero row [%d] = %g", i, z[i]);
    /* eps dominates: x = 2^-10 everywhere, eps 1: mean 2^-20, 1/sqrt(1 + 2^-20) = 1 - 2^-21 in
     * f32; y = bf16(2^-10 * (1 - 2^-21)) = 2^-10 */
    float t[4] = {0x1p-10f, 0x1p-10f, 0x1p-10f, 0x1p-10f};
    as_rmsnorm(t, w, t, 1, 4, 1.0f);
    for (int i = 0; i < 4; i++)
        CHECK(t[i] == 0x1p-10f, "eps-dominated [%d] = %a", i, t[i]);
}

/* A long row against a double-precision evaluation: within one bf16 step. */
TEST(rmsnorm_long_row_vs_double)
{
    enum { N = 1280 };
    static float x[N], w[N], y[N];
    uint32_t seed = 7;
    double ss = 0;
    for (int i = 0; i < N; i++) {
        seed = seed * 1664525u + 1013904223u;
        x[i] = as_bf16((float)(seed >> 8) / 16777216.0f * 4 - 2);
        w[i] = 0.5f + (float)(i % 7) * 0.25f;
        ss += (double)x[i] * x[i];
    }
    as_rmsnorm(x, w, y, 1, N, 1e-20f);
    double inv = 1.0 / sqrt(ss / N + 1e-20);
    int bad = 0;
    for (int i = 0; i < N; i++) {
        double want = w[i] * x[i] * inv;
        if (fabs(y[i] - want) > fabs(want) * 0x1p-8 + 1e-30 && bad++ < 3)
            as_test_fail(__FILE__, __LINE__, "[%d] got %.9g, double %.9g", i, y[i], want);
    }
}
