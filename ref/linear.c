/* linear(x, W) of SPEC section 2: y[t][o] = sum_i x[t][i] * W[o][i] in f32 (any summation
 * order), optionally bf16. W is read in place through its storage type:
 *   s == 1 (decode): threads split the rows; BF16 / F32 rows are streamed straight from the
 *     mapping by the GEMV kernels (ref/gemv.c), other types are decoded a few rows at a time
 *     into a thread-local buffer first.
 *   s > 1 (prefill): panels of W rows are decoded to f32 (exact) and multiplied by OpenBLAS
 *     sgemm, y[:, panel] = x . panel^T. */
#include "ref/linear.h"

#include <cblas.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "ref/gemv.h"
#include "ref/numerics.h"

#define GEMV_ROWS 16   /* rows a thread decodes at once (non-BF16/F32 decode path) */
#define PANEL_ROWS 256 /* W rows per sgemm */

static void *xmalloc(size_t n)
{
    void *p = malloc(n ? n : 1);
    if (!p) {
        fprintf(stderr, "attnscope: linear: out of memory (%zu bytes)\n", n);
        abort();
    }
    return p;
}

static bool streams_in_place(const AsWTensor *w)
{
    return w->dtype == AS_DT_BF16 || w->dtype == AS_DT_F32;
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
    for (int64_t r = r0; r < r1; r += GEMV_ROWS) {
        int64_t n = r1 - r < GEMV_ROWS ? r1 - r : GEMV_ROWS;
        as_wt_rows_f32(w, r, n, buf);
        as_gemv_f32(x, buf, cols, n, y + (r - r0));
    }
}

static void linear_gemv(const float *x, const AsWTensor *w, int64_t o0, int64_t nout, float *y)
{
    const int64_t cols = as_wt_cols(w);
    const int nt = as_ref_threads();
    /* Contiguous slices (one stream per thread), in multiples of 4 rows (the kernels' block). */
    const int64_t per = ((nout + nt - 1) / nt + 3) & ~(int64_t)3;
#pragma omp parallel num_threads(nt)
    {
        float *buf = streams_in_place(w) ? NULL : xmalloc((size_t)(GEMV_ROWS * cols) * sizeof *buf);
#pragma omp for schedule(static, 1)
        for (int i = 0; i < nt; i++) {
            int64_t a = (int64_t)i * per, b = a + per < nout ? a + per : nout;
            if (a < b)
                gemv_rows(x, w, o0 + a, o0 + b, y + a, buf);
        }
        free(buf);
    }
}

static void linear_gemm(const float *x, int64_t s, const AsWTensor *w, int64_t o0, int64_t nout,
                        float *y, int64_t ldy)
{
    const int64_t cols = as_wt_cols(w);
    const int nt = as_ref_threads();
    /* An F32 tensor at a float-aligned address is already the panel. */
    if (w->dtype == AS_DT_F32 && (uintptr_t)w->data % sizeof(float) == 0) {
        const float *wf = (const float *)w->data + o0 * cols;
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, (int)s, (int)nout, (int)cols, 1.0f, x,
                    (int)cols, wf, (int)cols, 0.0f, y, (int)ldy);
        return;
    }
    float *panel = xmalloc((size_t)(PANEL_ROWS * cols) * sizeof *panel);
    for (int64_t p = 0; p < nout; p += PANEL_ROWS) {
        const int64_t np = nout - p < PANEL_ROWS ? nout - p : PANEL_ROWS;
#pragma omp parallel for num_threads(nt) schedule(static)
        for (int64_t r = 0; r < np; r += 8)
            as_wt_rows_f32(w, o0 + p + r, np - r < 8 ? np - r : 8, panel + r * cols);
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, (int)s, (int)np, (int)cols, 1.0f, x,
                    (int)cols, panel, (int)cols, 0.0f, y + p, (int)ldy);
    }
    free(panel);
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
        linear_gemv(x, w, o0, nout, y);
    else
        linear_gemm(x, s, w, o0, nout, y, ldy);
    if (round_bf16)
        for (int64_t t = 0; t < s; t++)
            for (int64_t o = 0; o < nout; o++)
                y[t * ldy + o] = as_bf16(y[t * ldy + o]);
}
