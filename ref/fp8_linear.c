/* The fp8 linear (ref/fp8_linear.h). The weight's e4m3 codes are decoded to their values (exact in
 * f32) without the scale, which applies per block of the accumulation as the kernel applies it:
 *   s == 1 (decode): threads take chunks of rows; per row and 32-wide block a vector dot product
 *     (AVX2 + FMA where the CPU has it: the order inside a block is free), then the block's partial
 *     times both scales added to the row's accumulator in block order.
 *   s > 1 (prefill): threads take panels of W rows decoded to f32; per block k one serial sgemm
 *     P_k = Xq[:, k] . Wq[panel, k]^T (K = 32) and acc += P_k * sx[t][k] * Ws[o][k], in order. */
#include "ref/fp8_linear.h"

#include <cblas.h>
#include <immintrin.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ref/alloc.h"
#include "ref/cancel.h"
#include "ref/gemm.h"
#include "ref/gemv.h"
#include "ref/linear.h"
#include "ref/numerics.h"
#include "ref/quant.h"

#define KB AS_FP8_BLOCK /* the accumulation's K block: act_quant's block, 32 */

static int64_t clamp_index(int64_t i, int64_t n) { return i < n ? i : n - 1; }

/* The block edge weight coordinates are mapped to scale blocks with (the scale's own, or the way's). */
static int64_t scale_edge(const AsWTensor *w, const AsFp8Way *way) { return way->block_as ? way->block_as : w->block; }

/* The scale row that weight row o reads. */
static int64_t scale_row_of(const AsWTensor *w, const AsFp8Way *way, int64_t o)
{
    return clamp_index(o / scale_edge(w, way), as_wt_rows(w->scale));
}

/* Scale row r as values: decoded, or (e8m0_byte) each F8_E8M0 byte as the number it is. */
static void read_scale_row(const AsWTensor *sc, int64_t r, bool e8m0_byte, float *dst)
{
    const int64_t n = as_wt_cols(sc);
    if (!(e8m0_byte && sc->dtype == AS_DT_F8_E8M0)) {
        as_wt_rows_f32(sc, r, 1, dst);
        return;
    }
    const uint8_t *b = (const uint8_t *)sc->data + r * n;
    for (int64_t i = 0; i < n; i++)
        dst[i] = (float)b[i];
}

/* The weight scale of row o for every 32-wide block: ws[k] = Ws[o / B][32 k / B]. */
static void row_scales(const AsWTensor *w, const AsFp8Way *way, int64_t o, float *scale_row, float *ws)
{
    const int64_t B = scale_edge(w, way), nk = as_wt_cols(w) / KB, nc = as_wt_cols(w->scale);
    read_scale_row(w->scale, scale_row_of(w, way, o), way->e8m0_byte, scale_row);
    for (int64_t k = 0; k < nk; k++)
        ws[k] = scale_row[clamp_index(k * KB / B, nc)];
}

/* e4m3 codes to their values, exactly. */
static float e4m3_lut[256];
static void init_lut(void)
{
    for (int b = 0; b < 256; b++)
        e4m3_lut[b] = as_e4m3_from_bits((uint8_t)b);
}

/* ---- decode: one row against the quantised input ---- */

static float row_portable(const float *xq, const float *sx, const uint8_t *wr, const float *ws, int64_t nk)
{
    float acc = 0.0f;
    for (int64_t k = 0; k < nk; k++) {
        const float *xb = xq + k * KB;
        const uint8_t *wb = wr + k * KB;
        float p = 0.0f;
        for (int i = 0; i < KB; i++)
            p += xb[i] * e4m3_lut[wb[i]];
        acc += p * sx[k] * ws[k];
    }
    return acc;
}

#define AVX2 __attribute__((target("avx2,fma")))

/* 8 e4m3 codes as f32 values: the low 7 bits shifted to bit 20 are the magnitude times 2^-120 (an
 * e4m3 subnormal becomes the f32 subnormal), times 2^120 exactly; the sign or-ed back. The NaN
 * codes (0x7f, 0xff) are left to the scalar path. */
AVX2 static inline __m256 e4m3x8_avx2(const uint8_t *p)
{
    __m256i b = _mm256_cvtepu8_epi32(_mm_loadl_epi64((const __m128i *)(const void *)p));
    __m256i m = _mm256_and_si256(b, _mm256_set1_epi32(0x7f));
    __m256 v = _mm256_mul_ps(_mm256_castsi256_ps(_mm256_slli_epi32(m, 20)), _mm256_set1_ps(0x1p120f));
    __m256i sign = _mm256_slli_epi32(_mm256_and_si256(b, _mm256_set1_epi32(0x80)), 24);
    return _mm256_castsi256_ps(_mm256_or_si256(_mm256_castps_si256(v), sign));
}

AVX2 static inline float hsum8(__m256 v)
{
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    s = _mm_add_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
}

static bool has_nan_code(const uint8_t *p, int64_t n)
{
    for (int64_t i = 0; i < n; i++)
        if ((p[i] & 0x7f) == 0x7f)
            return true;
    return false;
}

AVX2 static float row_avx2(const float *xq, const float *sx, const uint8_t *wr, const float *ws, int64_t nk)
{
    float acc = 0.0f;
    for (int64_t k = 0; k < nk; k++) {
        const float *xb = xq + k * KB;
        const uint8_t *wb = wr + k * KB;
        __m256 a = _mm256_mul_ps(_mm256_loadu_ps(xb), e4m3x8_avx2(wb));
        a = _mm256_fmadd_ps(_mm256_loadu_ps(xb + 8), e4m3x8_avx2(wb + 8), a);
        a = _mm256_fmadd_ps(_mm256_loadu_ps(xb + 16), e4m3x8_avx2(wb + 16), a);
        a = _mm256_fmadd_ps(_mm256_loadu_ps(xb + 24), e4m3x8_avx2(wb + 24), a);
        acc += hsum8(a) * sx[k] * ws[k];
    }
    return acc;
}

static void fp8_gemv(const float *xq, const float *sx, const AsWTensor *w, const AsFp8Way *way, int64_t o0,
                     int64_t nout, float *y)
{
    const int64_t cols = as_wt_cols(w), nk = cols / KB;
    const bool avx2 = as_gemv_isa() != AS_ISA_PORTABLE; /* AVX2 or better (tests force the portable form) */
    const int64_t chunk = 64;
    const int64_t nchunk = (nout + chunk - 1) / chunk;
#pragma omp parallel num_threads(as_ref_threads()) if (nchunk > 1)
    {
        float *scale_row = as_ref_xmalloc(sizeof(float) * (size_t)as_wt_cols(w->scale), "fp8 linear");
        float *ws = as_ref_xmalloc(sizeof(float) * (size_t)nk, "fp8 linear");
        int64_t ws_row = -1; /* the weight-scale row ws holds */
#pragma omp for schedule(dynamic)
        for (int64_t j = 0; j < nchunk; j++) {
            const int64_t a = j * chunk, b = a + chunk < nout ? a + chunk : nout;
            if (as_ref_cancelled()) { /* zeros: what follows in the cancelled layer stays finite */
                memset(y + a, 0, sizeof *y * (size_t)(b - a));
                continue;
            }
            for (int64_t o = o0 + a; o < o0 + b; o++) {
                if (scale_row_of(w, way, o) != ws_row) {
                    row_scales(w, way, o, scale_row, ws);
                    ws_row = scale_row_of(w, way, o);
                }
                const uint8_t *wr = (const uint8_t *)w->data + o * cols;
                float acc = avx2 && !has_nan_code(wr, cols) ? row_avx2(xq, sx, wr, ws, nk)
                                                             : row_portable(xq, sx, wr, ws, nk);
                y[o - o0] = as_bf16(acc);
            }
        }
        free(scale_row);
        free(ws);
    }
}

/* ---- prefill: panels of W rows, one sgemm per K block ---- */

/* W rows per panel: wide panels repack each K block of x fewer times (one sgemm per panel and
 * block), but every thread needs a panel: at least two panels a thread where the rows allow. */
static int64_t panel_rows(int64_t nout, int nt)
{
    int64_t p = (nout / (2 * (int64_t)nt) + 15) & ~(int64_t)15;
    return p < 64 ? 64 : p > 512 ? 512 : p;
}

static void fp8_gemm(const float *xq, const float *sx, int64_t s, const AsWTensor *w, const AsFp8Way *way, int64_t o0,
                     int64_t nout, float *y, int64_t ldy)
{
    const int64_t cols = as_wt_cols(w), nk = cols / KB;
    const int nt = as_ref_threads();
    const int64_t prow = panel_rows(nout, nt), npanel = (nout + prow - 1) / prow;
    as_blas_serial();
#pragma omp parallel num_threads(nt)
    {
        float *panel = as_ref_xmalloc(sizeof(float) * (size_t)(prow * cols), "fp8 linear");
        float *ws = as_ref_xmalloc(sizeof(float) * (size_t)(prow * nk), "fp8 linear");
        float *scale_row = as_ref_xmalloc(sizeof(float) * (size_t)as_wt_cols(w->scale), "fp8 linear");
        float *pk = as_ref_xmalloc(sizeof(float) * (size_t)(s * prow), "fp8 linear");
#pragma omp for schedule(dynamic)
        for (int64_t j = 0; j < npanel; j++) {
            const int64_t p = j * prow, np = nout - p < prow ? nout - p : prow;
            for (int64_t t = 0; t < s; t++)
                memset(y + t * ldy + p, 0, sizeof(float) * (size_t)np);
            if (as_ref_cancelled())
                continue;
            for (int64_t r = 0; r < np; r++) {
                const uint8_t *wr = (const uint8_t *)w->data + (o0 + p + r) * cols;
                for (int64_t i = 0; i < cols; i++)
                    panel[r * cols + i] = e4m3_lut[wr[i]];
                row_scales(w, way, o0 + p + r, scale_row, ws + r * nk);
            }
            for (int64_t k = 0; k < nk && !as_ref_cancelled(); k++) {
                cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, (int)s, (int)np, KB, 1.0f, xq + k * KB,
                            (int)cols, panel + k * KB, (int)cols, 0.0f, pk, (int)np);
                for (int64_t t = 0; t < s; t++) {
                    float *yt = y + t * ldy + p;
                    const float st = sx[t * nk + k];
                    for (int64_t r = 0; r < np; r++)
                        yt[r] += pk[t * np + r] * st * ws[r * nk + k];
                }
            }
            for (int64_t t = 0; t < s; t++)
                for (int64_t r = 0; r < np; r++)
                    y[t * ldy + p + r] = as_bf16(y[t * ldy + p + r]);
        }
        free(panel);
        free(ws);
        free(scale_row);
        free(pk);
    }
}

void as_fp8_linear_rows(const float *x, int64_t s, const AsWTensor *w, int64_t o0, int64_t nout, float *y,
                        int64_t ldy)
{
    const AsFp8Way model_py = {0, false};
    as_fp8_linear_rows_in(x, s, w, o0, nout, y, ldy, &model_py);
}

void as_fp8_linear_rows_in(const float *x, int64_t s, const AsWTensor *w, int64_t o0, int64_t nout, float *y,
                           int64_t ldy, const AsFp8Way *way)
{
    const int64_t cols = as_wt_cols(w);
    if (nout < 0)
        nout = as_wt_rows(w) - o0;
    if (ldy < 0)
        ldy = nout;
    if (s <= 0 || nout <= 0)
        return;
    if (cols % KB || !w->scale || (w->block != 32 && w->block != 128)) {
        fprintf(stderr, "attnscope: fp8 linear of %s: in %lld is not a multiple of 32 or the block scale is "
                "missing (the precision check lets neither through)\n", w->name, (long long)cols);
        abort();
    }
    static pthread_once_t once = PTHREAD_ONCE_INIT;
    pthread_once(&once, init_lut);
    float *xq = as_ref_xmalloc(sizeof(float) * (size_t)(s * cols), "fp8 linear");
    float *sx = as_ref_xmalloc(sizeof(float) * (size_t)(s * (cols / KB)), "fp8 linear");
    for (int64_t t = 0; t < s; t++) {
        if (as_ref_cancelled()) { /* the rest zero: what follows in the cancelled layer stays finite */
            memset(xq + t * cols, 0, sizeof *xq * (size_t)((s - t) * cols));
            memset(sx + t * (cols / KB), 0, sizeof *sx * (size_t)((s - t) * (cols / KB)));
            break;
        }
        as_act_quant(x + t * cols, cols, xq + t * cols, sx + t * (cols / KB));
    }
    if (s == 1)
        fp8_gemv(xq, sx, w, way, o0, nout, y);
    else
        fp8_gemm(xq, sx, s, w, way, o0, nout, y, ldy);
    free(xq);
    free(sx);
}
