/* The fp8 linear (ref/fp8_linear.h). The weight's e4m3 codes are decoded to their values (exact in
 * f32) without the scale, which applies per block of the accumulation as the kernel applies it:
 *   s == 1 (decode): threads take chunks of rows; per row and 32-wide block a vector dot product
 *     (AVX2 + FMA where the CPU has it: the order inside a block is free), then the block's partial
 *     times both scales added to the row's accumulator in block order.
 *   s > 1 (prefill): threads take work items of up to 128 W rows (decoded to f32 in tile order)
 *     by 256 tokens; per tile of 6 tokens x 16 rows and block k the block's products P_k in
 *     registers (AVX2 + FMA where the CPU has it), then acc += (P_k * sx[t][k]) * Ws[o][k], in
 *     block order. */
#include "ref/fp8_linear.h"

#include <immintrin.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ref/alloc.h"
#include "ref/cancel.h"
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

/* ---- prefill: tiles of 6 tokens x 16 outputs, every K block in order ---- */

enum {
    MR = 6,   /* tokens a tile: 12 accumulators of 8 lanes, with the weights and x in 16 registers */
    MR512 = 12, /* AVX-512: 12 block sums and 12 accumulators of 16 lanes, the weights, in 32 registers */
    NR = 16,  /* outputs a tile */
    TB = 256, /* tokens a work item: the panel's decode costs about 1/(2 TB) of its products */
    PR = 128, /* W rows a work item at most: a tile's weights (16 x cols) stay in L2 */
};

/* The per-thread buffers of one work item: the panel's values in tile order (for each 16-row
 * tile, [cols][16], rows past the panel zero) and their block scales ([nk][16]). */
typedef struct {
    float *wt, *wst, *scale_row, *ws;
} Panel;

static void decode_panel(const AsWTensor *w, const AsFp8Way *way, int64_t o, int64_t np, Panel *pn)
{
    const int64_t cols = as_wt_cols(w), nk = cols / KB, ntile = (np + NR - 1) / NR;
    for (int64_t r = 0; r < ntile * NR; r++) {
        float *wt = pn->wt + (r / NR) * cols * NR + r % NR, *wst = pn->wst + (r / NR) * nk * NR + r % NR;
        if (r >= np) {
            for (int64_t i = 0; i < cols; i++)
                wt[i * NR] = 0.0f;
            for (int64_t k = 0; k < nk; k++)
                wst[k * NR] = 0.0f;
            continue;
        }
        const uint8_t *codes = (const uint8_t *)w->data + (o + r) * cols;
        for (int64_t i = 0; i < cols; i++)
            wt[i * NR] = e4m3_lut[codes[i]];
        row_scales(w, way, o + r, pn->scale_row, pn->ws);
        for (int64_t k = 0; k < nk; k++)
            wst[k * NR] = pn->ws[k];
    }
}

/* acc[m][n] = sum over blocks k, in order, of (P_k[m][n] * sx[m][k]) * ws[k][n], P_k the block's
 * dot product of token m's row xr[m] and tile row n of wt ([cols][16]). */
static void tile_portable(const float *const *xr, const float *const *sxr, const float *wt, const float *wst,
                          int64_t nk, float acc[MR][NR])
{
    memset(acc, 0, sizeof(float) * MR * NR);
    for (int64_t k = 0; k < nk; k++) {
        float p[MR][NR] = {{0}};
        for (int i = 0; i < KB; i++) {
            const float *wi = wt + (k * KB + i) * NR;
            for (int m = 0; m < MR; m++) {
                const float xv = xr[m][k * KB + i];
                for (int n = 0; n < NR; n++)
                    p[m][n] += xv * wi[n];
            }
        }
        for (int m = 0; m < MR; m++)
            for (int n = 0; n < NR; n++)
                acc[m][n] += p[m][n] * sxr[m][k] * wst[k * NR + n];
    }
}

AVX2 static void tile_avx2(const float *const *xr, const float *const *sxr, const float *wt, const float *wst,
                           int64_t nk, float acc[MR][NR])
{
    memset(acc, 0, sizeof(float) * MR * NR);
    for (int64_t k = 0; k < nk; k++) {
        __m256 p[MR][2];
#pragma GCC unroll 6
        for (int m = 0; m < MR; m++)
            p[m][0] = p[m][1] = _mm256_setzero_ps();
        const float *wk = wt + k * KB * NR;
        for (int i = 0; i < KB; i++) {
            const __m256 w0 = _mm256_loadu_ps(wk + i * NR), w1 = _mm256_loadu_ps(wk + i * NR + 8);
#pragma GCC unroll 6
            for (int m = 0; m < MR; m++) {
                const __m256 xv = _mm256_broadcast_ss(xr[m] + k * KB + i);
                p[m][0] = _mm256_fmadd_ps(xv, w0, p[m][0]);
                p[m][1] = _mm256_fmadd_ps(xv, w1, p[m][1]);
            }
        }
        const __m256 s0 = _mm256_loadu_ps(wst + k * NR), s1 = _mm256_loadu_ps(wst + k * NR + 8);
#pragma GCC unroll 6
        for (int m = 0; m < MR; m++) {
            const __m256 st = _mm256_set1_ps(sxr[m][k]);
            _mm256_storeu_ps(acc[m],
                             _mm256_add_ps(_mm256_loadu_ps(acc[m]), _mm256_mul_ps(_mm256_mul_ps(p[m][0], st), s0)));
            _mm256_storeu_ps(acc[m] + 8,
                             _mm256_add_ps(_mm256_loadu_ps(acc[m] + 8), _mm256_mul_ps(_mm256_mul_ps(p[m][1], st), s1)));
        }
    }
}

#define AVX512 __attribute__((target("avx512f")))

/* tile_avx2's sums, 16 lanes wide over twice the tokens, the accumulators held in registers: each element
 * takes the same operations in the same order, so the same bits. */
AVX512 static void tile_avx512(const float *const *xr, const float *const *sxr, const float *wt, const float *wst,
                               int64_t nk, float acc[MR512][NR])
{
    __m512 a[MR512];
#pragma GCC unroll 12
    for (int m = 0; m < MR512; m++)
        a[m] = _mm512_setzero_ps();
    for (int64_t k = 0; k < nk; k++) {
        __m512 p[MR512];
#pragma GCC unroll 12
        for (int m = 0; m < MR512; m++)
            p[m] = _mm512_setzero_ps();
        const float *wk = wt + k * KB * NR;
        for (int i = 0; i < KB; i++) {
            const __m512 w = _mm512_loadu_ps(wk + i * NR);
#pragma GCC unroll 12
            for (int m = 0; m < MR512; m++)
                p[m] = _mm512_fmadd_ps(_mm512_set1_ps(xr[m][k * KB + i]), w, p[m]);
        }
        const __m512 sw = _mm512_loadu_ps(wst + k * NR);
#pragma GCC unroll 12
        for (int m = 0; m < MR512; m++)
            a[m] = _mm512_add_ps(a[m], _mm512_mul_ps(_mm512_mul_ps(p[m], _mm512_set1_ps(sxr[m][k])), sw));
    }
#pragma GCC unroll 12
    for (int m = 0; m < MR512; m++)
        _mm512_storeu_ps(acc[m], a[m]);
}

/* W rows a work item: PR, halved while the items would not give every thread two. */
static int64_t panel_rows(int64_t nout, int64_t ntb, int nt)
{
    int64_t p = PR;
    while (p > NR && ((nout + p - 1) / p) * ntb < 2 * (int64_t)nt)
        p /= 2;
    return p;
}

/* One work item: tokens t0 .. t0 + ntok - 1 against the decoded panel's np rows (outputs p ..). */
static void gemm_item(const float *xq, const float *sx, int64_t t0, int64_t ntok, int64_t cols, const Panel *pn,
                      int64_t np, AsIsa isa, float *y, int64_t ldy)
{
    const int64_t nk = cols / KB, ntile = (np + NR - 1) / NR;
    const int mr = isa == AS_ISA_AVX512 ? MR512 : MR;
    float acc[MR512][NR];
    for (int64_t rt = 0; rt < ntile; rt++) {
        const float *wt = pn->wt + rt * cols * NR, *wst = pn->wst + rt * nk * NR;
        const int64_t n0 = rt * NR, nn = np - n0 < NR ? np - n0 : NR;
        for (int64_t m0 = 0; m0 < ntok; m0 += mr) {
            const float *xr[MR512], *sxr[MR512];
            for (int m = 0; m < mr; m++) { /* rows past the item repeat its last: computed, not stored */
                const int64_t t = t0 + (m0 + m < ntok ? m0 + m : ntok - 1);
                xr[m] = xq + t * cols;
                sxr[m] = sx + t * nk;
            }
            if (isa == AS_ISA_AVX512)
                tile_avx512(xr, sxr, wt, wst, nk, acc);
            else if (isa == AS_ISA_AVX2)
                tile_avx2(xr, sxr, wt, wst, nk, acc);
            else
                tile_portable(xr, sxr, wt, wst, nk, acc);
            for (int64_t m = 0; m < mr && m0 + m < ntok; m++)
                for (int64_t n = 0; n < nn; n++)
                    y[(t0 + m0 + m) * ldy + n0 + n] = as_bf16(acc[m][n]);
        }
    }
}

static void fp8_gemm(const float *xq, const float *sx, int64_t s, const AsWTensor *w, const AsFp8Way *way, int64_t o0,
                     int64_t nout, float *y, int64_t ldy)
{
    const int64_t cols = as_wt_cols(w), nk = cols / KB;
    const int nt = as_ref_threads();
    const AsIsa isa = as_gemv_isa();
    const int64_t ntb = (s + TB - 1) / TB, prow = panel_rows(nout, ntb, nt), npanel = (nout + prow - 1) / prow;
#pragma omp parallel num_threads(nt)
    {
        Panel pn = {
            .wt = as_ref_xmalloc(sizeof(float) * (size_t)(prow * cols), "fp8 linear"),
            .wst = as_ref_xmalloc(sizeof(float) * (size_t)(prow * nk), "fp8 linear"),
            .scale_row = as_ref_xmalloc(sizeof(float) * (size_t)as_wt_cols(w->scale), "fp8 linear"),
            .ws = as_ref_xmalloc(sizeof(float) * (size_t)nk, "fp8 linear"),
        };
        int64_t decoded = -1; /* the panel pn holds */
#pragma omp for schedule(dynamic)
        for (int64_t j = 0; j < npanel * ntb; j++) {
            const int64_t panel = j / ntb, p = panel * prow, np = nout - p < prow ? nout - p : prow;
            const int64_t t0 = (j % ntb) * TB, ntok = s - t0 < TB ? s - t0 : TB;
            if (as_ref_cancelled()) { /* zeros: what follows in the cancelled layer stays finite */
                for (int64_t t = t0; t < t0 + ntok; t++)
                    memset(y + t * ldy + p, 0, sizeof(float) * (size_t)np);
                continue;
            }
            if (decoded != panel) {
                decode_panel(w, way, o0 + p, np, &pn);
                decoded = panel;
            }
            gemm_item(xq, sx, t0, ntok, cols, &pn, np, isa, y + p, ldy);
        }
        free(pn.wt);
        free(pn.wst);
        free(pn.scale_row);
        free(pn.ws);
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
    /* rows are independent: all threads quantise them (a prefill's act_quant was serial) */
#pragma omp parallel for schedule(static) num_threads(as_ref_threads()) if (s >= 16)
    for (int64_t t = 0; t < s; t++) {
        if (as_ref_cancelled()) { /* zeros: what follows in the cancelled layer stays finite */
            memset(xq + t * cols, 0, sizeof *xq * (size_t)cols);
            memset(sx + t * (cols / KB), 0, sizeof *sx * (size_t)(cols / KB));
            continue;
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
