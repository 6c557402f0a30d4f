/* Decoding weight tensors in place (model/weights.h): every storage type to exact f32 values
 * (ggml's Q8_0 and Q2_K blocks by ggml's own dequantisation, model/quants.c).
 * The mapping may place a tensor at any byte offset, so elements are read with memcpy (no
 * aligned loads). Little-endian host, as the file formats are. */
#include "model/weights.h"

#include <math.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "model/ggml_blocks.h"
#include "model/quants.h"
#include "ref/numerics.h"


const char *as_dtype_name(AsDType t)
{
    switch (t) {
    case AS_DT_F32: return "F32";
    case AS_DT_F16: return "F16";
    case AS_DT_BF16: return "BF16";
    case AS_DT_F8_E4M3: return "F8_E4M3";
    case AS_DT_F8_E8M0: return "F8_E8M0";
    case AS_DT_Q8_0: return "Q8_0";
    case AS_DT_Q2_K: return "Q2_K";
    case AS_DT_COUNT: break;
    }
    return "?";
}

int64_t as_dtype_bytes(AsDType t, int64_t n)
{
    switch (t) {
    case AS_DT_F32: return 4 * n;
    case AS_DT_F16:
    case AS_DT_BF16: return 2 * n;
    case AS_DT_F8_E4M3:
    case AS_DT_F8_E8M0: return n;
    case AS_DT_Q8_0: return n / 32 * 34;  /* ggml block_q8_0: fp16 d + 32 x int8 */
    case AS_DT_Q2_K: return n / 256 * 84; /* ggml block_q2_K: 16 + 64 bytes + fp16 d, dmin */
    case AS_DT_COUNT: break;
    }
    return -1;
}

static inline uint16_t load_u16(const uint8_t *p)
{
    uint16_t v;
    memcpy(&v, p, 2);
    return v;
}

static inline float load_f32(const uint8_t *p)
{
    float v;
    memcpy(&v, p, 4);
    return v;
}

/* ue8m0: 2^(e - 127); 0xff is NaN. */
static float e8m0_to_f32(uint8_t e) { return e == 0xff ? NAN : ldexpf(1.0f, (int)e - 127); }

/* One fp8 block scale (F32, BF16 or F8_E8M0 storage); a missing scale tensor means 1. */
static float fp8_block_scale(const AsWTensor *sc, int64_t br, int64_t bc)
{
    if (!sc)
        return 1.0f;
    int64_t i = br * as_wt_cols(sc) + bc;
    const uint8_t *p = sc->data;
    switch (sc->dtype) {
    case AS_DT_F32: return load_f32(p + 4 * i);
    case AS_DT_BF16: return as_bf16_to_f32(load_u16(p + 2 * i));
    case AS_DT_F8_E8M0: return e8m0_to_f32(p[i]);
    default: return NAN; /* the loader refuses other scale types */
    }
}

/* The 256 float8_e4m3fn values, built once. */
static float e4m3_lut[256];
static pthread_once_t e4m3_once = PTHREAD_ONCE_INIT;
static void build_e4m3_lut(void)
{
    for (int b = 0; b < 256; b++)
        e4m3_lut[b] = as_e4m3_from_bits((uint8_t)b);
}

/* The block edge of an fp8 weight's scales: t->block as the loader set it from the scale's shape;
 * a tensor built by hand (block 0) gets it from its scale's shape the same way, 32 before 128.
 * Without a scale any edge will do (the scale is 1); 0: the shape fits no block size. */
static int64_t fp8_block(const AsWTensor *t)
{
    if (t->block > 0)
        return t->block;
    const AsWTensor *s = t->scale;
    if (!s)
        return as_wt_cols(t) > 0 ? as_wt_cols(t) : 1;
    static const int64_t edges[2] = {32, 128};
    for (int i = 0; i < 2; i++) {
        int64_t b = edges[i];
        if (s->ndim == 2 && s->shape[0] == (as_wt_rows(t) + b - 1) / b && s->shape[1] == (as_wt_cols(t) + b - 1) / b)
            return b;
    }
    return 0;
}

/* Row r of an fp8 weight: weight = bf16(fp8 * scale), the product in f32; one scale per B x B block. */
static void fp8_row(const AsWTensor *t, int64_t r, const float *lut, float *dst)
{
    const int64_t cols = as_wt_cols(t), b = fp8_block(t);
    const uint8_t *src = (const uint8_t *)t->data + r * cols;
    if (b <= 0) { /* a scale of no block shape: never read out of its bounds */
        for (int64_t c = 0; c < cols; c++)
            dst[c] = NAN;
        return;
    }
    for (int64_t c0 = 0; c0 < cols; c0 += b) {
        float s = fp8_block_scale(t->scale, r / b, c0 / b);
        int64_t c1 = c0 + b < cols ? c0 + b : cols;
        for (int64_t c = c0; c < c1; c++)
            dst[c] = as_bf16(lut[src[c]] * s);
    }
}

void as_wt_rows_f32(const AsWTensor *t, int64_t r0, int64_t n, float *dst)
{
    const int64_t cols = as_wt_cols(t), count = n * cols;
    const uint8_t *base = t->data;
    switch (t->dtype) {
    case AS_DT_F32:
        memcpy(dst, base + 4 * r0 * cols, (size_t)count * sizeof *dst);
        return;
    case AS_DT_BF16: {
        const uint8_t *src = base + 2 * r0 * cols;
        for (int64_t i = 0; i < count; i++)
            dst[i] = as_bf16_to_f32(load_u16(src + 2 * i));
        return;
    }
    case AS_DT_F16: {
        const uint8_t *src = base + 2 * r0 * cols;
        for (int64_t i = 0; i < count; i++)
            dst[i] = as_fp16_to_fp32(load_u16(src + 2 * i));
        return;
    }
    case AS_DT_F8_E4M3: {
        pthread_once(&e4m3_once, build_e4m3_lut);
        for (int64_t r = 0; r < n; r++)
            fp8_row(t, r0 + r, e4m3_lut, dst + r * cols);
        return;
    }
    case AS_DT_F8_E8M0: {
        const uint8_t *src = base + r0 * cols;
        for (int64_t i = 0; i < count; i++)
            dst[i] = e8m0_to_f32(src[i]);
        return;
    }
    case AS_DT_Q8_0: {
        /* ggml blocks lie at any byte offset: each is copied out before it is read */
        const int64_t nb = count / AS_QK8_0;
        const uint8_t *src = base + r0 * (cols / AS_QK8_0) * (int64_t)sizeof(AsBlockQ8_0);
        for (int64_t b = 0; b < nb; b++) {
            AsBlockQ8_0 blk;
            memcpy(&blk, src + b * (int64_t)sizeof blk, sizeof blk);
            as_dequantize_row_q8_0(&blk, dst + b * AS_QK8_0, AS_QK8_0);
        }
        return;
    }
    case AS_DT_Q2_K: {
        const int64_t nb = count / AS_QK_K;
        const uint8_t *src = base + r0 * (cols / AS_QK_K) * (int64_t)sizeof(AsBlockQ2K);
        for (int64_t b = 0; b < nb; b++) {
            AsBlockQ2K blk;
            memcpy(&blk, src + b * (int64_t)sizeof blk, sizeof blk);
            as_dequantize_row_q2_K(&blk, dst + b * AS_QK_K, AS_QK_K);
        }
        return;
    }
    case AS_DT_COUNT:
        break;
    }
    for (int64_t i = 0; i < count; i++)
        dst[i] = NAN;
}

void as_wt_rows_bf16(const AsWTensor *t, int64_t r0, int64_t n, uint16_t *dst)
{
    const int64_t cols = as_wt_cols(t);
    if (t->dtype == AS_DT_BF16) {
        memcpy(dst, (const uint8_t *)t->data + 2 * r0 * cols, (size_t)(n * cols) * sizeof *dst);
        return;
    }
    float *row = malloc((size_t)(cols > 0 ? cols : 1) * sizeof *row);
    if (!row) {
        for (int64_t i = 0; i < n * cols; i++)
            dst[i] = 0x7fc0u; /* NaN: out of memory must not look like data */
        return;
    }
    for (int64_t r = 0; r < n; r++) {
        as_wt_rows_f32(t, r0 + r, 1, row);
        for (int64_t c = 0; c < cols; c++)
            dst[r * cols + c] = as_bf16_bits(row[c]);
    }
    free(row);
}

float *as_wt_vec_f32(const AsWTensor *t)
{
    int64_t rows = as_wt_rows(t), cols = as_wt_cols(t);
    float *v = malloc((size_t)(rows * cols > 0 ? rows * cols : 1) * sizeof *v);
    if (v)
        as_wt_rows_f32(t, 0, rows, v);
    return v;
}
