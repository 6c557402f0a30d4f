/* precompute_freqs_cis and apply_rotary_emb of SPEC section 2, in f32 like torch:
 *   f[k] = 1 / base^((2k) / rd)             (f32 division, powf, f32 reciprocal)
 *   YaRN: f[k] = f[k] / factor * ramp_k + f[k] * (1 - ramp_k)   (f32, in that order)
 *   a = (float)pos * f[k]; cos a, sin a in f32 (cosf, sinf)
 *   (x0 + i x1) * (c + i s): re = x0*c - x1*s, im = x0*s + x1*c, each bf16. */
#include "ref/rope.h"

#include <math.h>
#include <stdlib.h>

#include "ref/linear.h" /* as_ref_threads */
#include "ref/numerics.h"

/* YaRN's correction dimension (in f64, as DeepSeek's find_correction_dim in Python floats):
 * the rotary dimension whose wavelength makes num_rotations turns over original_seq_len. */
static double yarn_corr_dim(double num_rotations, int rd, double base, int original_seq_len)
{
    return rd * log(original_seq_len / (num_rotations * 2 * M_PI)) / (2 * log(base));
}

static void precompute_freqs(float *f, int rd, double base, bool yarn, double factor,
                             int original_seq_len, double beta_fast, double beta_slow)
{
    const float fbase = (float)base, frd = (float)rd;
    for (int k = 0; k < rd / 2; k++) {
        float e = (float)(2 * k) / frd;
        f[k] = 1.0f / powf(fbase, e);
    }
    if (!yarn)
        return;
    double low = floor(yarn_corr_dim(beta_fast, rd, base, original_seq_len));
    double high = ceil(yarn_corr_dim(beta_slow, rd, base, original_seq_len));
    if (low < 0)
        low = 0;
    if (high > rd - 1)
        high = rd - 1;
    /* DeepSeek's linear_ramp_factor: (arange(f32) - low) / (high - low), widened by 0.001 when
     * high == low; low and high are integers, the division is f32. */
    float span = (float)(high - low > 0.001 ? high - low : 0.001);
    const float ffactor = (float)factor;
    for (int k = 0; k < rd / 2; k++) {
        float ramp = ((float)k - (float)low) / span;
        ramp = ramp < 0.0f ? 0.0f : ramp > 1.0f ? 1.0f : ramp;
        f[k] = f[k] / ffactor * ramp + f[k] * (1.0f - ramp);
    }
}

int as_rope_init(AsRopeTable *t, int rd, int max_seq, double base, bool yarn, double factor,
                 int original_seq_len, double beta_fast, double beta_slow)
{
    *t = (AsRopeTable){.rd = rd, .max_seq = max_seq};
    if (rd <= 0 || rd % 2 || max_seq < 0)
        return -1;
    int64_t half = rd / 2;
    t->freq = malloc((size_t)half * sizeof *t->freq);
    t->cos = malloc((size_t)(max_seq * half + 1) * sizeof *t->cos);
    t->sin = malloc((size_t)(max_seq * half + 1) * sizeof *t->sin);
    if (!t->freq || !t->cos || !t->sin) {
        as_rope_free(t);
        return -1;
    }
    precompute_freqs(t->freq, rd, base, yarn, factor, original_seq_len, beta_fast, beta_slow);
#pragma omp parallel for schedule(static) num_threads(as_ref_threads()) if (max_seq >= 4096)
    for (int64_t p = 0; p < max_seq; p++)
        for (int64_t k = 0; k < half; k++) {
            float a = (float)p * t->freq[k];
            t->cos[p * half + k] = cosf(a);
            t->sin[p * half + k] = sinf(a);
        }
    return 0;
}

int as_rope_init_kind(AsRopeTable *t, const AsConfig *cfg, int max_seq, bool compress_theta, bool yarn)
{
    double base = compress_theta ? cfg->compress_rope_theta : cfg->rope_theta;
    if (!yarn)
        return as_rope_init(t, cfg->rope_head_dim, max_seq, base, false, 1.0, 0, 0, 0);
    return as_rope_init(t, cfg->rope_head_dim, max_seq, base, true, cfg->rope_factor, cfg->original_seq_len,
                        cfg->beta_fast, cfg->beta_slow);
}

int as_rope_init_for_ratio(AsRopeTable *t, const AsConfig *cfg, int ratio)
{
    return as_rope_init_kind(t, cfg, cfg->max_seq, ratio > 0, ratio > 0);
}

void as_rope_free(AsRopeTable *t)
{
    free(t->freq);
    free(t->cos);
    free(t->sin);
    t->freq = t->cos = t->sin = NULL;
}

/* Channels i0 and i1 of pair k in a layout (z: the rotated channels' first). */
static void pair_of(AsRopeLayout layout, int k, int half, int *i0, int *i1)
{
    if (layout == AS_ROPE_HALVES) {
        *i0 = k;
        *i1 = k + half;
    } else {
        *i0 = 2 * k;
        *i1 = 2 * k + 1;
    }
}

/* One row: pairs (2k, 2k+1) of the last rd channels (or the layout's). Positions past the table are
 * computed the same way on the fly (same values, no failure mode). */
static void rope_row(float *x, int width, int pos, const AsRopeTable *t, bool inverse, AsRopeLayout layout)
{
    const int half = t->rd / 2;
    float *z = layout == AS_ROPE_FIRST_PAIRS ? x : x + (width - t->rd);
    for (int k = 0; k < half; k++) {
        float c, s;
        if (pos >= 0 && pos < t->max_seq) {
            c = t->cos[(int64_t)pos * half + k];
            s = t->sin[(int64_t)pos * half + k];
        } else {
            float a = (float)pos * t->freq[k];
            c = cosf(a);
            s = sinf(a);
        }
        if (inverse)
            s = -s; /* the conjugate */
        int i0, i1;
        pair_of(layout, k, half, &i0, &i1);
        float x0 = z[i0], x1 = z[i1];
        float re = x0 * c - x1 * s;
        float im = x0 * s + x1 * c;
        z[i0] = as_bf16(re);
        z[i1] = as_bf16(im);
    }
}

void as_rope_rows_in(float *x, int64_t rows, int64_t stride, int width, const int *pos, const AsRopeTable *t,
                     bool inverse, AsRopeLayout layout)
{
    if (width < t->rd || layout == AS_ROPE_NONE)
        return;
#pragma omp parallel for schedule(static) num_threads(as_ref_threads()) if (rows >= 4096)
    for (int64_t r = 0; r < rows; r++)
        rope_row(x + r * stride, width, pos[r], t, inverse, layout);
}

void as_rope_heads_in(float *x, int64_t s, int heads, int width, int pos0, const AsRopeTable *t, bool inverse,
                      AsRopeLayout layout)
{
    if (width < t->rd || layout == AS_ROPE_NONE)
        return;
#pragma omp parallel for schedule(static) num_threads(as_ref_threads()) if (s * heads >= 4096)
    for (int64_t r = 0; r < s * heads; r++)
        rope_row(x + r * width, width, pos0 + (int)(r / heads), t, inverse, layout);
}

void as_rope_rows(float *x, int64_t rows, int64_t stride, int width, const int *pos,
                  const AsRopeTable *t, bool inverse)
{
    as_rope_rows_in(x, rows, stride, width, pos, t, inverse, AS_ROPE_PAIRS);
}

void as_rope_heads(float *x, int64_t s, int heads, int width, int pos0, const AsRopeTable *t, bool inverse)
{
    as_rope_heads_in(x, s, heads, width, pos0, t, inverse, AS_ROPE_PAIRS);
}
