/* ggml's Q8_0 / Q2_K quantisers and dequantisers, q8_1 and the GPU-path dot products, written
 * from ggml-quants.c and ggml-cuda/vecdotq.cuh + mmvq.cu (see model/quants.h for the contract).
 * Every expression keeps ggml's operand order and f32 types; nothing is fused (-ffp-contract=off).
 * Integer conversions that are undefined in C for some inputs (negative left shifts, float to
 * int8 out of range) are written so that they are defined and give ggml's x86 result. */
#include "model/quants.h"

#include <math.h>
#include <string.h>

#include "ref/numerics.h"

#define QR2_K 4   /* 2-bit codes per byte */
#define LANES 32  /* one warp per output row */

/* ---- fp16 ---- */

uint16_t as_fp32_to_fp16(float f)
{
    uint32_t u = as_f32_bits(f);
    uint16_t sign = (uint16_t)((u >> 16) & 0x8000u);
    uint32_t a = u & 0x7fffffffu;
    if (a > 0x7f800000u) /* NaN: keep it a (quiet) NaN */
        return (uint16_t)(sign | 0x7e00u | ((a >> 13) & 0x3ffu));
    if (a >= 0x477ff000u) /* rounds to >= 65520: inf */
        return (uint16_t)(sign | 0x7c00u);
    if (a < 0x38800000u) { /* below 2^-14: subnormal half (or zero) */
        if (a < 0x33000000u) /* below 2^-25: rounds to zero (2^-25 itself ties to even 0) */
            return sign;
        uint32_t e = a >> 23, m = (a & 0x7fffffu) | 0x800000u;
        uint32_t shift = 126 - e; /* value = m * 2^(e - 150); half units 2^-24: m >> (126 - e) */
        uint32_t q = m >> shift, rem = m & ((1u << shift) - 1), half = 1u << (shift - 1);
        if (rem > half || (rem == half && (q & 1u)))
            q++;
        return (uint16_t)(sign | q);
    }
    /* normal: rebias the exponent, round the mantissa's low 13 bits to nearest even */
    uint32_t h = ((a >> 13) - ((127 - 15) << 10));
    uint32_t rem = a & 0x1fffu;
    if (rem > 0x1000u || (rem == 0x1000u && (h & 1u)))
        h++; /* a mantissa carry moves into the exponent, which is right */
    return (uint16_t)(sign | h);
}

float as_fp16_to_fp32(uint16_t h)
{
    uint32_t sign = (uint32_t)(h & 0x8000u) << 16;
    uint32_t e = (h >> 10) & 0x1fu, m = h & 0x3ffu;
    if (e == 0x1f)
        return as_bits_f32(sign | 0x7f800000u | (m << 13));
    if (e == 0) {
        float v = ldexpf((float)m, -24); /* m * 2^-24, exact */
        return sign ? -v : v;
    }
    return as_bits_f32(sign | ((e + 112) << 23) | (m << 13));
}

int as_nearest_int(float f)
{
    float v = f + 12582912.f;
    uint32_t i = as_f32_bits(v);
    return (int)(i & 0x007fffffu) - 0x00400000;
}

/* ggml's MAX / MIN macros (the NaN behaviour of the comparison included). */
static inline float maxf_ggml(float a, float b) { return a > b ? a : b; }
static inline int max_i(int a, int b) { return a > b ? a : b; }
static inline int min_i(int a, int b) { return a < b ? a : b; }

/* float -> int8 as the C cast does for values in range; out of range (undefined in C) -> 0. */
static inline int8_t to_i8(float v) { return (v >= -128.0f && v <= 127.0f) ? (int8_t)v : 0; }

/* ---- Q8_0 ---- */

void as_quantize_row_q8_0(const float *x, AsBlockQ8_0 *y, int64_t k)
{
    const int64_t nb = k / AS_QK8_0;
    for (int64_t i = 0; i < nb; i++) {
        float amax = 0.0f;
        for (int j = 0; j < AS_QK8_0; j++)
            amax = maxf_ggml(amax, fabsf(x[i * AS_QK8_0 + j]));
        const float d = amax / ((1 << 7) - 1);
        const float id = d ? 1.0f / d : 0.0f;
        y[i].d = as_fp32_to_fp16(d);
        for (int j = 0; j < AS_QK8_0; j++) {
            const float x0 = x[i * AS_QK8_0 + j] * id;
            y[i].qs[j] = to_i8(roundf(x0));
        }
    }
}

void as_dequantize_row_q8_0(const AsBlockQ8_0 *x, float *y, int64_t k)
{
    const int64_t nb = k / AS_QK8_0;
    for (int64_t i = 0; i < nb; i++) {
        const float d = as_fp16_to_fp32(x[i].d);
        for (int j = 0; j < AS_QK8_0; j++)
            y[i * AS_QK8_0 + j] = x[i].qs[j] * d;
    }
}

/* ---- Q2_K ---- */

/* make_qkx2_quants: levels L[i] in 0..nmax and (scale, -min) fitting x[i] ~ scale * L[i] + min,
 * min <= 0, by a search over 1 + nstep inverse scales, each refitted by weighted least squares;
 * the fit with the smallest weighted error (absolute if use_mad) wins. Returns the scale, stores
 * -min in *the_min. Note that min moves to the best fit so far inside the search loop, as in ggml. */
static float make_qkx2_quants(int n, int nmax, const float *x, const float *weights, uint8_t *L, float *the_min,
                              uint8_t *Laux, float rmin, float rdelta, int nstep, int use_mad)
{
    float min = x[0];
    float max = x[0];
    float sum_w = weights[0];
    float sum_x = sum_w * x[0];
    for (int i = 1; i < n; ++i) {
        if (x[i] < min)
            min = x[i];
        if (x[i] > max)
            max = x[i];
        float w = weights[i];
        sum_w += w;
        sum_x += w * x[i];
    }
    if (min > 0)
        min = 0;
    if (max == min) {
        for (int i = 0; i < n; ++i)
            L[i] = 0;
        *the_min = -min;
        return 0.f;
    }
    float iscale = nmax / (max - min);
    float scale = 1 / iscale;
    float best_error = 0;
    for (int i = 0; i < n; ++i) {
        int l = as_nearest_int(iscale * (x[i] - min));
        L[i] = (uint8_t)max_i(0, min_i(nmax, l));
        float diff = scale * L[i] + min - x[i];
        diff = use_mad ? fabsf(diff) : diff * diff;
        float w = weights[i];
        best_error += w * diff;
    }
    if (nstep < 1) {
        *the_min = -min;
        return scale;
    }
    for (int is = 0; is <= nstep; ++is) {
        iscale = (rmin + rdelta * is + nmax) / (max - min);
        float sum_l = 0, sum_l2 = 0, sum_xl = 0;
        for (int i = 0; i < n; ++i) {
            int l = as_nearest_int(iscale * (x[i] - min));
            l = max_i(0, min_i(nmax, l));
            Laux[i] = (uint8_t)l;
            float w = weights[i];
            sum_l += w * l;
            sum_l2 += w * l * l;
            sum_xl += w * l * x[i];
        }
        float D = sum_w * sum_l2 - sum_l * sum_l;
        if (D > 0) {
            float this_scale = (sum_w * sum_xl - sum_x * sum_l) / D;
            float this_min = (sum_l2 * sum_x - sum_l * sum_xl) / D;
            if (this_min > 0) {
                this_min = 0;
                this_scale = sum_xl / sum_l2;
            }
            float cur_error = 0;
            for (int i = 0; i < n; ++i) {
                float diff = this_scale * Laux[i] + this_min - x[i];
                diff = use_mad ? fabsf(diff) : diff * diff;
                float w = weights[i];
                cur_error += w * diff;
            }
            if (cur_error < best_error) {
                for (int i = 0; i < n; ++i)
                    L[i] = Laux[i];
                best_error = cur_error;
                scale = this_scale;
                min = this_min;
            }
        }
    }
    *the_min = -min;
    return scale;
}

void as_quantize_row_q2_K(const float *x, AsBlockQ2K *y, int64_t k)
{
    const int64_t nb = k / AS_QK_K;
    uint8_t L[AS_QK_K];
    uint8_t Laux[16];
    float weights[16];
    float mins[AS_QK_K / 16];
    float scales[AS_QK_K / 16];
    const float q4scale = 15.f;

    for (int64_t i = 0; i < nb; i++) {
        float max_scale = 0; /* as we are deducting the min, scales are always positive */
        float max_min = 0;
        for (int j = 0; j < AS_QK_K / 16; ++j) {
            for (int l = 0; l < 16; ++l)
                weights[l] = fabsf(x[16 * j + l]);
            scales[j] = make_qkx2_quants(16, 3, x + 16 * j, weights, L + 16 * j, &mins[j], Laux, -0.5f, 0.1f, 15, 1);
            float scale = scales[j];
            if (scale > max_scale)
                max_scale = scale;
            float min = mins[j];
            if (min > max_min)
                max_min = min;
        }
        if (max_scale > 0) {
            float iscale = q4scale / max_scale;
            for (int j = 0; j < AS_QK_K / 16; ++j) {
                int l = as_nearest_int(iscale * scales[j]);
                y[i].scales[j] = (uint8_t)l; /* modulo 256, as the C conversion */
            }
            y[i].d = as_fp32_to_fp16(max_scale / q4scale);
        } else {
            for (int j = 0; j < AS_QK_K / 16; ++j)
                y[i].scales[j] = 0;
            y[i].d = as_fp32_to_fp16(0.f);
        }
        if (max_min > 0) {
            float iscale = q4scale / max_min;
            for (int j = 0; j < AS_QK_K / 16; ++j) {
                int l = as_nearest_int(iscale * mins[j]);
                y[i].scales[j] |= (uint8_t)((unsigned)l << 4); /* l < 0 shifted as two's complement */
            }
            y[i].dmin = as_fp32_to_fp16(max_min / q4scale);
        } else {
            y[i].dmin = as_fp32_to_fp16(0.f);
        }
        for (int j = 0; j < AS_QK_K / 16; ++j) {
            const float d = as_fp16_to_fp32(y[i].d) * (y[i].scales[j] & 0xF);
            if (!d)
                continue;
            const float dm = as_fp16_to_fp32(y[i].dmin) * (y[i].scales[j] >> 4);
            for (int ii = 0; ii < 16; ++ii) {
                int l = as_nearest_int((x[16 * j + ii] + dm) / d);
                l = max_i(0, min_i(3, l));
                L[16 * j + ii] = (uint8_t)l;
            }
        }
        for (int j = 0; j < AS_QK_K; j += 128)
            for (int l = 0; l < 32; ++l)
                y[i].qs[j / 4 + l] =
                    (uint8_t)(L[j + l] | (L[j + l + 32] << 2) | (L[j + l + 64] << 4) | (L[j + l + 96] << 6));
        x += AS_QK_K;
    }
}

void as_dequantize_row_q2_K(const AsBlockQ2K *x, float *y, int64_t k)
{
    const int64_t nb = k / AS_QK_K;
    for (int64_t i = 0; i < nb; i++) {
        const float d = as_fp16_to_fp32(x[i].d);
        const float min = as_fp16_to_fp32(x[i].dmin);
        const uint8_t *q = x[i].qs;
        int is = 0;
        for (int n = 0; n < AS_QK_K; n += 128) {
            int shift = 0;
            for (int j = 0; j < 4; ++j) {
                uint8_t sc = x[i].scales[is++];
                float dl = d * (sc & 0xF), ml = min * (sc >> 4);
                for (int l = 0; l < 16; ++l)
                    *y++ = dl * ((int8_t)((q[l] >> shift) & 3)) - ml;
                sc = x[i].scales[is++];
                dl = d * (sc & 0xF);
                ml = min * (sc >> 4);
                for (int l = 0; l < 16; ++l)
                    *y++ = dl * ((int8_t)((q[l + 16] >> shift) & 3)) - ml;
                shift += 2;
            }
            q += 32;
        }
    }
}

/* ---- q8_1 and the dot products ---- */

void as_quantize_row_q8_1(const float *x, AsBlockQ8_1 *y, int64_t k)
{
    const int64_t nb = k / AS_QK8_1;
    for (int64_t i = 0; i < nb; i++) {
        const float *xb = x + i * AS_QK8_1;
        float amax = 0.0f;
        for (int j = 0; j < AS_QK8_1; j++)
            amax = fmaxf(amax, fabsf(xb[j]));
        const float d = amax / 127.0f;
        int sum = 0;
        for (int j = 0; j < AS_QK8_1; j++) {
            const int8_t q = amax == 0.0f ? 0 : to_i8(roundf(xb[j] / d));
            y[i].qs[j] = q;
            sum += q;
        }
        y[i].d = as_fp32_to_fp16(d);
        y[i].s = as_fp32_to_fp16(d * (float)sum);
    }
}

/* The warp sum of ggml's warp_reduce_sum: xor butterfly over 32 lanes. */
static float butterfly(float acc[LANES])
{
    for (int off = LANES / 2; off > 0; off /= 2) {
        float nxt[LANES];
        for (int l = 0; l < LANES; l++)
            nxt[l] = acc[l] + acc[l ^ off];
        memcpy(acc, nxt, sizeof nxt);
    }
    return acc[0];
}

/* p(b, t) of vec_dot_q2_K_q8_1 (see model/quants.h). */
static float q2k_slot(const AsBlockQ2K *xb, const AsBlockQ8_1 *y8, int t)
{
    const int n = t / 8, c = t % 8;
    const uint8_t *v = xb->qs + 32 * n + 4 * c;
    float sumf_d = 0.0f, sumf_m = 0.0f;
    for (int i = 0; i < QR2_K; i++) {
        const AsBlockQ8_1 *a = &y8[4 * n + i];
        const int sc = xb->scales[8 * n + 2 * i + c / 4];
        const float d8 = as_fp16_to_fp32(a->d);
        int dot = 0, sm = 0;
        for (int kk = 0; kk < 4; kk++) {
            dot += ((v[kk] >> (2 * i)) & 3) * a->qs[4 * c + kk];
            sm += (sc >> 4) * a->qs[4 * c + kk];
        }
        sumf_d = sumf_d + d8 * (float)(dot * (sc & 0xF));
        sumf_m = sumf_m + d8 * (float)sm;
    }
    const float dx = as_fp16_to_fp32(xb->d), mx = as_fp16_to_fp32(xb->dmin);
    return dx * sumf_d - mx * sumf_m;
}

float as_vec_dot_q2_K_q8_1(const AsBlockQ2K *x, const AsBlockQ8_1 *y, int64_t nb)
{
    float acc[LANES];
    for (int lane = 0; lane < LANES; lane++) {
        acc[lane] = 0.0f;
        for (int64_t b = lane / 16; b < nb; b += 2)
            acc[lane] = acc[lane] + q2k_slot(&x[b], &y[8 * b], lane % 16);
    }
    return butterfly(acc);
}

float as_vec_dot_q8_0_q8_1(const AsBlockQ8_0 *x, const AsBlockQ8_1 *y, int64_t nb)
{
    float acc[LANES];
    for (int lane = 0; lane < LANES; lane++) {
        acc[lane] = 0.0f;
        const int t = lane % 4;
        for (int64_t b = lane / 4; b < nb; b += 8) {
            int sumi = 0;
            for (int kk = 0; kk < 8; kk++)
                sumi += x[b].qs[8 * t + kk] * y[b].qs[8 * t + kk];
            const float d = as_fp16_to_fp32(x[b].d) * as_fp16_to_fp32(y[b].d);
            acc[lane] = acc[lane] + d * (float)sumi;
        }
    }
    return butterfly(acc);
}
