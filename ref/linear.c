/* linear(x, W) of SPEC section 2: y[t][o] = sum_i x[t][i] * W[o][i] in f32 (any summation
 * order), optionally bf16. W is read in place through its storage type:
 *   s == 1 (decode): threads split the rows; BF16 / F32 / F8_E4M3 rows are streamed straight
 *     from the mapping by the GEMV kernels (ref/gemv.c; fp8 decoded on the fly), other types
 *     (and fp8 on a CPU without AVX2) are decoded a few rows at a time into a thread-local
 *     buffer first.
 *   s > 1 (prefill): threads take panels of W rows, decode each to f32 (exact) in a
 *     thread-local buffer and multiply it with the serial OpenBLAS sgemm, y[:, panel] = x . panel^T. */
#include "ref/linear.h"

#include <cblas.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ref/alloc.h"
#include "ref/cancel.h"
#include "ref/gemm.h"
#include "ref/gemv.h"
#include "ref/numerics.h"

#define GEMV_ROWS 16   /* rows a thread decodes at once (the decode path) */

static bool streams_in_place(const AsWTensor *w)
{
    return w->dtype == AS_DT_BF16 || w->dtype == AS_DT_F32;
}

/* fp8 rows decoded on the fly by the vector kernel: the block scales of rows [r0, r1) are
 * widened to f32 in buf first. false when this CPU has no such kernel. */
static bool fp8_gemv(const float *x, const AsWTensor *w, int64_t r0, int64_t r1, float *y, float *buf)
{
    const int64_t cols = as_wt_cols(w), b0 = r0 / w->block, nb = (r1 - 1) / w->block - b0 + 1;
    as_wt_rows_f32(w->scale, b0, nb, buf);
    return as_gemv_fp8(x, (const uint8_t *)w->data + r0 * cols, cols, r1 - r0, r0, buf, as_wt_cols(w->scale),
                       w->block, y);
}

/* y[o - o0] for W rows [r0, r1), one thread's share. */
static void gemv_rows(const float *x, const AsWTensor *w, int64_t r0, int64_t r1, float *y,
                      float *buf)
{
    const int64_t cols = as_wt_cols(w);
    if (w->dtype == AS_DT_BF16) {
        as_gemv_bf16(x, (const uint8_t *)w->data + 2 * r0 * cols, cols, r1 - r0, y);
        return;
    }
    if (w->dtype == AS_DT_F32) {
        as_gemv_f32(x, (const uint8_t *)w->data + 4 * r0 * cols, cols, r1 - r0, y);
        return;
    }
    if (w->dtype == AS_DT_F8_E4M3 && w->scale && fp8_gemv(x, w, r0, r1, y, buf))
        return;
    for (int64_t r = r0; r < r1; r += GEMV_ROWS) {
        int64_t n = r1 - r < GEMV_ROWS ? r1 - r : GEMV_ROWS;
        as_wt_rows_f32(w, r, n, buf);
        as_gemv_f32(x, buf, cols, n, y + (r - r0));
    }
}

static void round_bf16_rows(float *y, int64_t s, int64_t n, int64_t ldy)
{
    for (int64_t t = 0; t < s; t++)
        for (int64_t o = 0; o < n; o++)
            y[t * ldy + o] = as_bf16(y[t * ldy + o]);
}

/* Rows go out in chunks of about 256 KiB of weights, handed out dynamically: each chunk is one
 * contiguous stream, and a thread that loses its core (a busy machine) does not hold the
 * others up. */
static void linear_gemv(const float *x, const AsWTensor *w, int64_t o0, int64_t nout, float *y, bool round)
{
    const int64_t cols = as_wt_cols(w);
    const int64_t row_bytes = as_dtype_bytes(w->dtype, cols) > 0 ? as_dtype_bytes(w->dtype, cols) : 1;
    int64_t chunk = (256 * 1024 / row_bytes + 3) & ~(int64_t)3;
    chunk = chunk < 16 ? 16 : chunk;
    const int64_t nchunk = (nout + chunk - 1) / chunk;
    const int nt = as_ref_threads();
#pragma omp parallel num_threads(nt) if (nchunk > 1)
    {
        /* decoded rows, or the f32 block scales of one chunk's rows */
        const int64_t scale_floats = w->scale ? (chunk / (w->block > 0 ? w->block : 1) + 2) * as_wt_cols(w->scale) : 0;
        const int64_t nbuf = GEMV_ROWS * cols > scale_floats ? GEMV_ROWS * cols : scale_floats;
        float *buf = streams_in_place(w) ? NULL : as_ref_xmalloc((size_t)nbuf * sizeof *buf, "linear");
#pragma omp for schedule(dynamic)
        for (int64_t j = 0; j < nchunk; j++) {
            int64_t a = j * chunk, b = a + chunk < nout ? a + chunk : nout;
            if (as_ref_cancelled()) { /* zeros: what follows in the cancelled layer stays finite */
                memset(y + a, 0, sizeof *y * (size_t)(b - a));
                continue;
            }
            gemv_rows(x, w, o0 + a, o0 + b, y + a, buf);
            if (round)
                round_bf16_rows(y + a, 1, b - a, b - a);
        }
        free(buf);
    }
}

/* Work items of a prefill: panels of W rows by bands of tokens. Small s is memory bound, so a panel
 * stays in L2 between its decode and the sgemm that reads it back; large s is compute bound, so
 * panels are wide enough that re-packing x for every panel costs little, and halved (to 16 rows)
 * until every thread has four items: a projection of few rows (wkv's 512, a wo_a group's 1024) would
 * otherwise leave most threads at the barrier. Bands of 512 tokens keep the decode of a panel, once an
 * item, under 1/1000 of its products. */
enum { BAND = 512 };

static int64_t panel_rows(int64_t s, int64_t cols, int64_t nout, int nt)
{
    int64_t p = s >= 64 ? 256 : (256 * 1024 / 4) / (cols > 0 ? cols : 1);
    p = p < 16 ? 16 : p > 256 ? 256 : p;
    p &= ~(int64_t)15;
    const int64_t nband = (s + BAND - 1) / BAND;
    while (p > 16 && ((nout + p - 1) / p) * nband < 4 * (int64_t)nt)
        p = (p / 2 + 15) & ~(int64_t)15;
    return p;
}

/* Each thread decodes its items' panels into its own buffer (once for consecutive items of one panel)
 * and runs the serial sgemm y[band, panel] = x[band] . panel^T on them (each element's dot product is
 * BLAS's whatever the tiling). */
static void linear_gemm(const float *x, int64_t s, const AsWTensor *w, int64_t o0, int64_t nout,
                        float *y, int64_t ldy, bool round)
{
    const int nt = as_ref_threads();
    const int64_t cols = as_wt_cols(w), prow = panel_rows(s, cols, nout, nt);
    const int64_t npanel = (nout + prow - 1) / prow, nband = (s + BAND - 1) / BAND;
    /* An F32 tensor at a float-aligned address is its own panel. */
    const bool direct = w->dtype == AS_DT_F32 && (uintptr_t)w->data % sizeof(float) == 0;
    as_blas_serial();
#pragma omp parallel num_threads(nt)
    {
        float *panel = direct ? NULL : as_ref_xmalloc((size_t)(prow * cols) * sizeof *panel, "linear");
        int64_t decoded = -1; /* the panel `panel` holds */
#pragma omp for schedule(dynamic)
        for (int64_t j = 0; j < npanel * nband; j++) {
            const int64_t pi = j / nband, p = pi * prow, np = nout - p < prow ? nout - p : prow;
            const int64_t t0 = (j % nband) * BAND, nt_ = s - t0 < BAND ? s - t0 : BAND;
            if (as_ref_cancelled()) {
                for (int64_t t = t0; t < t0 + nt_; t++)
                    memset(y + t * ldy + p, 0, sizeof *y * (size_t)np);
                continue;
            }
            const float *wp = direct ? (const float *)w->data + (o0 + p) * cols : panel;
            if (!direct && decoded != pi) {
                as_wt_rows_f32(w, o0 + p, np, panel);
                decoded = pi;
            }
            cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, (int)nt_, (int)np, (int)cols, 1.0f, x + t0 * cols,
                        (int)cols, wp, (int)cols, 0.0f, y + t0 * ldy + p, (int)ldy);
            if (round)
                round_bf16_rows(y + t0 * ldy + p, nt_, np, ldy);
        }
        free(panel);
    }
}

void as_linear_rows(const float *x, int64_t s, const AsWTensor *w, int64_t o0, int64_t nout,
                    float *y, int64_t ldy, bool round_bf16)
{
    if (nout < 0)
        nout = as_wt_rows(w) - o0;
    if (ldy < 0)
        ldy = nout;
    if (s <= 0 || nout <= 0)
        return;
    if (s == 1)
        linear_gemv(x, w, o0, nout, y, round_bf16);
    else
        linear_gemm(x, s, w, o0, nout, y, ldy, round_bf16);
}
