/* RMSNorm as DeepSeek's RMSNorm.forward computes it: x.float(); r = x * rsqrt(mean(x^2) + eps);
 * (w * r).to(bf16). Every step in f32, one bf16 rounding at the end. */
#include "ref/rmsnorm.h"

#include <math.h>

#include "ref/linear.h" /* as_ref_threads */
#include "ref/numerics.h"

static void rmsnorm_row(const float *x, const float *w, float *y, int64_t n, float eps)
{
    float sum = 0.0f;
    for (int64_t i = 0; i < n; i++)
        sum += x[i] * x[i];
    float ms = sum / (float)n;
    float inv = 1.0f / sqrtf(ms + eps); /* rsqrt, rounded twice as 1/sqrt */
    for (int64_t i = 0; i < n; i++) {
        float r = x[i] * inv;
        y[i] = as_bf16(w[i] * r);
    }
}

void as_rmsnorm(const float *x, const float *w, float *y, int64_t rows, int64_t n, float eps)
{
    if (n <= 0)
        return;
#pragma omp parallel for schedule(static) num_threads(as_ref_threads()) if (rows * n >= (1 << 16))
    for (int64_t r = 0; r < rows; r++)
        rmsnorm_row(x + r * n, w, y + r * n, n, eps);
}
