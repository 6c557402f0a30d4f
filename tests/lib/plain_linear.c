/* The projections by their definitions, in double, one product at a time: the independent forms
 * the reference's linears are held to (tests/test_ref_layer.c, tests/test_ref_precision.c). */
#include "tests/lib/plain_linear.h"

#include <math.h>
#include <stdlib.h>

#include "model/precision.h"
#include "ref/numerics.h"
float as_plain_e4m3(float v)
{
    float best = 0;
    int best_code = 0;
    double bd = INFINITY;
    for (int code = 0; code < 127; code++) {
        int e = code >> 3, m = code & 7;
        double g = e == 0 ? m / 8.0 * pow(2, -6) : (1 + m / 8.0) * pow(2, e - 7);
        double d = fabs(fabs((double)v) - g);
        if (d < bd || (d == bd && (code & 1) == 0 && (best_code & 1))) {
            bd = d;
            best = (float)g;
            best_code = code;
        }
    }
    return v < 0 ? -best : best;
}

double as_plain_dot_w(const float *x, const AsWTensor *w, int o)
{
    int64_t in = as_wt_cols(w);
    float *row = malloc(sizeof(float) * (size_t)in);
    as_wt_rows_f32(w, o, 1, row);
    double acc = 0;
    for (int64_t i = 0; i < in; i++)
        acc += (double)x[i] * row[i];
    free(row);
    return acc;
}

void as_plain_linear(const float *x, int s, const AsWTensor *w, float *y)
{
    int64_t out = as_wt_rows(w), in = as_wt_cols(w);
    for (int t = 0; t < s; t++)
        for (int64_t o = 0; o < out; o++)
            y[t * out + o] = as_bf16((float)as_plain_dot_w(x + t * in, w, (int)o));
}

float as_plain_pow2_ceil(double v)
{
    int e;
    double mant = frexp(v, &e); /* v = mant * 2^e, mant in [0.5, 1) */
    return (float)(mant == 0.5 ? ldexp(1, e - 1) : ldexp(1, e));
}

/* act_quant by brute force, then per 32-wide block the partial sum times both scales, added in
 * block order (exact in double where f32 rounds). */
void as_plain_fp8_linear(const float *x, int s, const AsWTensor *w, float *y)
{
    int64_t out = as_wt_rows(w), in = as_wt_cols(w);
    float *row = malloc(sizeof(float) * (size_t)in), *xq = malloc(sizeof(float) * (size_t)in);
    float *sx = malloc(sizeof(float) * (size_t)(in / 32)), *ws = malloc(sizeof(float) * (size_t)as_wt_cols(w->scale));
    for (int t = 0; t < s; t++) {
        for (int64_t b = 0; b < in / 32; b++) {
            double amax = 1e-4;
            for (int i = 0; i < 32; i++)
                amax = fmax(amax, fabs(x[t * in + b * 32 + i]));
            sx[b] = as_plain_pow2_ceil((float)(amax / 448.0));
            for (int i = 0; i < 32; i++)
                xq[b * 32 + i] = as_plain_e4m3((float)fmin(fmax(x[t * in + b * 32 + i] / sx[b], -448), 448));
        }
        for (int64_t o = 0; o < out; o++) {
            as_wt_rows_f32(w->scale, o / w->block, 1, ws);
            const uint8_t *codes = (const uint8_t *)w->data + o * in;
            for (int64_t i = 0; i < in; i++)
                row[i] = as_e4m3_from_bits(codes[i]);
            double acc = 0;
            for (int64_t b = 0; b < in / 32; b++) {
                double p = 0;
                for (int i = 0; i < 32; i++)
                    p += (double)xq[b * 32 + i] * row[b * 32 + i];
                acc += p * sx[b] * ws[b * 32 / w->block];
            }
            y[t * out + o] = as_bf16((float)acc);
        }
    }
    free(row), free(xq), free(sx), free(ws);
}

/* One of the five fp8 projections, in the model's precision. */
void as_plain_proj(const AsModel *m, const float *x, int s, const AsWTensor *w, float *y)
{
    if (as_proj_fp8(m, w))
        as_plain_fp8_linear(x, s, w, y);
    else
        as_plain_linear(x, s, w, y);
}

