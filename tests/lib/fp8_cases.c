/* fp8 test weights and activations (tests/lib/fp8_cases.h). */
#include "tests/lib/fp8_cases.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ref/numerics.h"
#include "ref/quant.h"
#include "tests/lib/harness.h"

static uint64_t mix(uint64_t *s)
{
    uint64_t z = (*s += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

void as_test_fp8w_make(AsTestFp8W *f, int64_t rows, int64_t cols, int B, int grid, uint64_t seed)
{
    memset(f, 0, sizeof *f);
    const int64_t sr = (rows + B - 1) / B, sc = (cols + B - 1) / B;
    f->codes = malloc((size_t)(rows * cols));
    f->scale_bytes = malloc((size_t)(sr * sc));
    REQUIRE(f->codes && f->scale_bytes, "out of host memory for an fp8 weight of %lld x %lld", (long long)rows,
            (long long)cols);
    uint64_t s = seed * 0x2545f4914f6cdd1dull + 7;
    for (int64_t i = 0; i < rows * cols; i++) {
        const uint8_t c = (uint8_t)(mix(&s) >> 56);
        if (grid)
            f->codes[i] = (uint8_t)((c & 0x80) | (7 << 3) | (c & 7)); /* +-(1 + m / 8) */
        else
            f->codes[i] = (c & 0x7f) == 0x7f ? 0x7e : c;
    }
    for (int64_t i = 0; i < sr * sc; i++)
        f->scale_bytes[i] = (uint8_t)(117 + mix(&s) % 8); /* 2^-10 .. 2^-3 */
    f->scale = (AsWTensor){.dtype = AS_DT_F8_E8M0, .ndim = 2, .shape = {sr, sc}, .data = f->scale_bytes,
                           .nbytes = sr * sc};
    f->w = (AsWTensor){.dtype = AS_DT_F8_E4M3, .ndim = 2, .shape = {rows, cols}, .data = f->codes,
                       .nbytes = rows * cols, .scale = &f->scale, .block = B};
    snprintf(f->w.name, sizeof f->w.name, "test.fp8.%lldx%lld.b%d%s", (long long)rows, (long long)cols, B,
             grid ? ".grid" : "");
}

void as_test_fp8w_free(AsTestFp8W *f)
{
    free(f->codes);
    free(f->scale_bytes);
    memset(f, 0, sizeof *f);
}

void as_test_fp8_x(float *x, int64_t s, int64_t n, int grid, uint64_t seed)
{
    uint64_t r = seed * 0x9e3779b97f4a7c15ull + 3;
    for (int64_t t = 0; t < s; t++)
        for (int64_t b = 0; b < n / 32; b++) {
            float *xb = x + t * n + 32 * b;
            const uint64_t h = mix(&r);
            if (grid) {
                const int e = -14 + (int)(h % 9); /* 2^-14 .. 2^-6 */
                const int top = (int)((h >> 8) % 32);
                for (int i = 0; i < 32; i++) {
                    const uint64_t v = mix(&r);
                    const float q = i == top ? 448.0f : 256.0f + 32.0f * (float)(v % 7);
                    xb[i] = ldexpf((v >> 8) & 1 ? -q : q, e);
                }
            } else {
                const float mag = h % 17 == 0 ? 2e-5f : ldexpf(1.0f, -12 + (int)(h % 17));
                for (int i = 0; i < 32; i++)
                    xb[i] = as_bf16(mag * (2.0f * (float)(mix(&r) >> 40) / 16777216.0f - 1.0f));
            }
        }
}

void as_test_bf16_grid_x(float *x, int64_t s, int64_t n, uint64_t seed)
{
    uint64_t r = seed * 0x9e3779b97f4a7c15ull + 5;
    for (int64_t t = 0; t < s; t++)
        for (int64_t b = 0; b < n / 32; b++) {
            const int e = -6 + (int)(mix(&r) % 9);
            for (int i = 0; i < 32; i++) {
                const uint64_t v = mix(&r);
                const float q = 1.0f + (float)(v % 16) / 16.0f;
                x[t * n + 32 * b + i] = ldexpf((v >> 8) & 1 ? -q : q, e);
            }
        }
}

void as_test_fp8_magnitudes(const float *x, int64_t s, const AsWTensor *w, int act, double *mag)
{
    const int64_t rows = as_wt_rows(w), cols = as_wt_cols(w), nk = cols / 32;
    float *xq = malloc(sizeof(float) * (size_t)(s * cols)), *sx = malloc(sizeof(float) * (size_t)(s * nk));
    REQUIRE(xq && sx, "out of host memory");
    for (int64_t t = 0; t < s; t++) {
        if (act == 0) {
            as_act_quant(x + t * cols, cols, xq + t * cols, sx + t * nk);
        } else {
            memcpy(xq + t * cols, x + t * cols, sizeof(float) * (size_t)cols);
            for (int64_t k = 0; k < nk; k++)
                sx[t * nk + k] = 1.0f;
        }
    }
#pragma omp parallel
    {
        float *wr = malloc(sizeof(float) * (size_t)cols);
#pragma omp for schedule(static)
        for (int64_t o = 0; o < rows; o++) {
            if (!wr)
                continue;
            as_wt_rows_f32(w, o, 1, wr); /* bf16(e4m3 * scale): e4m3 * scale exactly for e8m0 scales */
            for (int64_t t = 0; t < s; t++) {
                double m = 0;
                for (int64_t i = 0; i < cols; i++)
                    m += fabs((double)xq[t * cols + i] * wr[i]) * sx[t * nk + i / 32];
                mag[t * rows + o] = m;
            }
        }
        free(wr);
    }
    free(xq), free(sx);
}
