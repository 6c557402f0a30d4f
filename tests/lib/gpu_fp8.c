/* The fp8-form weights' test plumbing (tests/lib/gpu_fp8.h). */
#include "tests/lib/gpu_fp8.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "model/fp8_form.h"
#include "ref/numerics.h"
#include "tests/lib/gpu_util.h"
#include "tests/lib/harness.h"

void as_test_fp8_upload(const AsTestFp8W *f, AsTestFp8Dev *d)
{
    const int64_t rows = as_wt_rows(&f->w), cols = as_wt_cols(&f->w);
    const int64_t ldws = as_fp8_form_ldws(cols), srows = as_fp8_form_scale_rows(rows);
    float *ws = as_test_xmalloc(sizeof(float) * (size_t)(srows * ldws));
    REQUIRE(as_fp8_form_scales(&f->w, ws) == 0, "%s: fp8-form scales", f->w.name);
    memset(d, 0, sizeof *d);
    d->codes = as_gpu_bytes(f->codes, (size_t)(rows * cols));
    d->ws = as_gpu_f32(ws, srows * ldws);
    free(ws);
    d->w = (AsFp8Weight){.w = d->codes, .ldw = cols, .ws = d->ws, .ldws = ldws, .n_out = (int)rows, .n_in = (int)cols,
                         .batch = 1, .stride_rows = 0};
}

void as_test_fp8_dev_free(AsTestFp8Dev *d)
{
    as_gpu_free(d->codes);
    as_gpu_free(d->ws);
    memset(d, 0, sizeof *d);
}

static int64_t ordered16(uint16_t b) { return b & 0x8000 ? -(int64_t)(b & 0x7fff) : (int64_t)b; }

AsTestFp8Cmp as_test_fp8_compare(const char *what, const uint16_t *got, int64_t ldg, const float *want,
                                 const double *mag, int64_t rows, int64_t cols, double bound_rel)
{
    AsTestFp8Cmp c = {0};
    for (int64_t r = 0; r < rows; r++)
        for (int64_t o = 0; o < cols; o++) {
            const uint16_t gb = got[r * ldg + o], wb = as_bf16_bits(want[r * cols + o]);
            const double g = as_bf16_to_f32(gb), w = as_bf16_to_f32(wb), m = mag[r * cols + o];
            const double err = fabs(g - w), ord = 0x1p-16 * m + 1e-30;
            if (!isnan(g) && err / ord > c.worst_ratio)
                c.worst_ratio = err / ord;
            if (!isnan(g) && err > c.max_err)
                c.max_err = err;
            if (fabs(w) > c.max_want)
                c.max_want = fabs(w);
            if (isnan(g) && !isnan(w)) {
                /* bad below */
            } else if (gb == wb || (isnan(g) && isnan(w))) {
                c.exact++;
                continue;
            } else if (llabs(ordered16(gb) - ordered16(wb)) <= 1) {
                c.ulp1++;
                continue;
            } else if (err <= bound_rel * m) {
                c.by_bound++;
                continue;
            }
            if (c.bad < 6)
                as_test_note("%s: [%lld][%lld]: got %.9g, want %.9g (err %.3g, bound %.3g%s)", what, (long long)r,
                             (long long)o, g, w, err, bound_rel * m, isnan(g) ? ", NaN: not written?" : "");
            c.bad++;
        }
    c.spec6_ok = c.max_err <= c.max_want * 0x1p-7 + 1e-4;
    return c;
}

void as_test_fp8_note(const char *what, const AsTestFp8Cmp *c)
{
    as_test_note("%s: %lld exact, %lld at 1 ulp, %lld within the bound, %lld bad; worst err / f32-order bound %.3f; "
                 "SPEC 6: max err %.3g against %.3g allowed", what, (long long)c->exact, (long long)c->ulp1,
                 (long long)c->by_bound, (long long)c->bad, c->worst_ratio, c->max_err, c->max_want * 0x1p-7 + 1e-4);
}

int as_test_fp8_small_only(void)
{
    const char *e = getenv("AS_KTEST_SMALL");
    return e && *e && *e != '0';
}
