/* The fp8 form of a weight (model/fp8_form.h). */
#include "model/fp8_form.h"

#include <limits.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

int as_fp8_form_scales(const AsWTensor *t, float *ws)
{
    const AsWTensor *sc = t->scale;
    const int64_t rows = as_wt_rows(t), nk = as_wt_cols(t) / 32, ldws = as_fp8_form_ldws(as_wt_cols(t));
    const int64_t B = t->block;
    float *srow = malloc(sizeof(float) * (size_t)(as_wt_cols(sc) > 0 ? as_wt_cols(sc) : 1));
    if (!srow)
        return -1;
    for (int64_t rb = 0; rb < as_fp8_form_scale_rows(rows); rb++) {
        as_wt_rows_f32(sc, rb * 32 / B, 1, srow);
        float *out = ws + rb * ldws;
        for (int64_t k = 0; k < nk; k++)
            out[k] = srow[k * 32 / B];
        for (int64_t k = nk; k < ldws; k++)
            out[k] = 0.0f;
    }
    free(srow);
    return 0;
}

/* Every value of the f32-readable scale tensor sc a power of two 2^e with lo <= e <= hi. */
static bool scales_pow2_in(const AsWTensor *sc, int lo, int hi)
{
    const int64_t n = as_wt_cols(sc);
    float *row = malloc(sizeof(float) * (size_t)(n > 0 ? n : 1));
    if (!row)
        return false;
    bool ok = true;
    for (int64_t r = 0; r < as_wt_rows(sc) && ok; r++) {
        as_wt_rows_f32(sc, r, 1, row);
        for (int64_t k = 0; k < n && ok; k++) {
            int e;
            ok = isfinite(row[k]) && row[k] > 0.0f && frexpf(row[k], &e) == 0.5f && e - 1 >= lo && e - 1 <= hi;
        }
    }
    free(row);
    return ok;
}

bool as_fp8_scales_pow2(const AsWTensor *t)
{
    const AsWTensor *sc = t->scale;
    if (!sc)
        return false;
    return sc->dtype == AS_DT_F8_E8M0 || scales_pow2_in(sc, INT_MIN, INT_MAX);
}

/* Every scale a power of two in [2^-100, 2^100] (an e8m0 scale: its exponent byte, 2^(e - 127)). */
static bool scales_moderate(const AsWTensor *sc)
{
    if (sc->dtype == AS_DT_F8_E8M0) {
        const uint8_t *b = sc->data;
        for (int64_t i = 0; i < as_wt_rows(sc) * as_wt_cols(sc); i++)
            if (b[i] < 27 || b[i] > 227)
                return false;
        return true;
    }
    return scales_pow2_in(sc, -100, 100);
}

bool as_fp8_codes_exact(const AsWTensor *t)
{
    if (!t->scale || as_wt_cols(t) % 32 || !scales_moderate(t->scale))
        return false;
    const uint8_t *b = t->data;
    const size_t n = (size_t)t->nbytes;
    size_t i = 0;
    /* eight codes at a time: a byte whose low seven bits are all set */
    for (; i + 8 <= n; i += 8) {
        uint64_t w;
        memcpy(&w, b + i, 8);
        const uint64_t low7 = w & 0x7f7f7f7f7f7f7f7fULL;
        if ((low7 + 0x0101010101010101ULL) & 0x8080808080808080ULL)
            return false;
    }
    for (; i < n; i++)
        if ((b[i] & 0x7f) == 0x7f)
            return false;
    return true;
}
