/* linear (ref/linear) against a naive double loop over the decoded weights: BF16, F32, F16 and
 * F8_E4M3 + block scale; s == 1 (every GEMV variant this CPU has) and s > 1 (panels + sgemm);
 * odd sizes, row subsets, an output stride; results independent of the thread count. */
#include <math.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "model/weights.h"
#include "ref/blas_core.h"
#include "ref/gemv.h"
#include "ref/linear.h"
#include "ref/numerics.h"
#include "tests/lib/harness.h"

typedef struct {
    AsWTensor w, scale;
    uint8_t *raw;   /* owns the bytes (offset by 1 when unaligned) */
    uint8_t *sraw;
} TestWeight;

static float rnd(uint32_t *seed, float lo, float hi)
{
    *seed = *seed * 1664525u + 1013904223u;
    return lo + (hi - lo) * (float)(*seed >> 8) / 16777216.0f;
}

/* A rows x cols weight of type dt with pseudo-random values; unaligned puts it at an odd address. */
/* fp8 weights get scales of 128 x 128 blocks, or of 32 x 32 ones where fp8_block says so. */
static int fp8_block = 128;

static void make_weight(TestWeight *tp, AsDType dt, int64_t rows, int64_t cols, bool unaligned, uint32_t seed)
{
    TestWeight t; /* filled here, copied out at the end; w.scale points into *tp */
    memset(&t, 0, sizeof t);
    int64_t n = rows * cols, bytes = as_dtype_bytes(dt, n);
    t.raw = malloc((size_t)bytes + 8);
    uint8_t *p = t.raw + (unaligned ? 1 : 0);
    for (int64_t i = 0; i < n; i++) {
        float v = rnd(&seed, -1, 1);
        if (dt == AS_DT_F32) {
            memcpy(p + 4 * i, &v, 4);
        } else if (dt == AS_DT_BF16) {
            uint16_t b = as_bf16_bits(v);
            memcpy(p + 2 * i, &b, 2);
        } else if (dt == AS_DT_F16) {
            /* small integers / 64 are exact in f16: sign, exponent, mantissa by hand */
            int k = (int)(v * 64);
            uint16_t h = 0;
            if (k) {
                int a = k < 0 ? -k : k, e = 0;
                while ((a >> e) > 1)
                    e++;
                h = (uint16_t)((k < 0 ? 0x8000 : 0) | ((e - 6 + 15) << 10) | (((a << 10) >> e) & 0x3ff));
            }
            memcpy(p + 2 * i, &h, 2);
        } else { /* F8_E4M3 */
            p[i] = as_e4m3_bits(v * 300.0f);
        }
    }
    t.w.dtype = dt;
    t.w.ndim = 2;
    t.w.shape[0] = rows;
    t.w.shape[1] = cols;
    t.w.data = p;
    t.w.nbytes = bytes;
    snprintf(t.w.name, sizeof t.w.name, "test.%s", as_dtype_name(dt));
    if (dt == AS_DT_F8_E4M3) {
        const int64_t B = fp8_block, sr = (rows + B - 1) / B, sc = (cols + B - 1) / B;
        t.w.block = (int)B;
        t.sraw = malloc((size_t)(sr * sc) * sizeof(float));
        for (int64_t i = 0; i < sr * sc; i++) {
            float s = 0.001f * (float)(i + 3);
            memcpy(t.sraw + 4 * i, &s, 4);
        }
        t.scale.dtype = AS_DT_F32;
        t.scale.ndim = 2;
        t.scale.shape[0] = sr;
        t.scale.shape[1] = sc;
        t.scale.data = t.sraw;
        t.w.scale = &tp->scale;
    }
    *tp = t;
}

static void free_weight(TestWeight *t)
{
    free(t->raw);
    free(t->sraw);
}

/* y[t][o] in double over W rows [o0, o0 + nout); also sum |x w| per element for the bound. */
static void linear_double(const float *x, int64_t s, const AsWTensor *w, int64_t o0, int64_t nout,
                          double *y, double *mag)
{
    int64_t cols = as_wt_cols(w);
    float *row = malloc((size_t)cols * sizeof *row);
    for (int64_t o = 0; o < nout; o++) {
        as_wt_rows_f32(w, o0 + o, 1, row);
        for (int64_t t = 0; t < s; t++) {
            double acc = 0, m = 0;
            for (int64_t i = 0; i < cols; i++) {
                acc += (double)x[t * cols + i] * row[i];
                m += fabs((double)x[t * cols + i] * row[i]);
            }
            y[t * nout + o] = acc;
            mag[t * nout + o] = m;
        }
    }
    free(row);
}

/* Runs one configuration; returns the number of elements out of bound. */
static int check_linear(const char *what, const TestWeight *tw, int64_t s, int64_t o0, int64_t nout, int64_t ldy)
{
    const AsWTensor *w = &tw->w;
    int64_t cols = as_wt_cols(w);
    float *x = malloc((size_t)(s * cols) * sizeof *x);
    float *y = malloc((size_t)(s * ldy) * sizeof *y), *yb = malloc((size_t)(s * ldy) * sizeof *yb);
    double *want = malloc((size_t)(s * nout) * sizeof *want), *mag = malloc((size_t)(s * nout) * sizeof *mag);
    uint32_t seed = 42;
    for (int64_t i = 0; i < s * cols; i++)
        x[i] = as_bf16(rnd(&seed, -2, 2));
    for (int64_t i = 0; i < s * ldy; i++)
        y[i] = yb[i] = -12345.0f; /* the gaps of ldy must stay untouched */
    as_linear_rows(x, s, w, o0, nout, y, ldy, false);
    as_linear_rows(x, s, w, o0, nout, yb, ldy, true);
    linear_double(x, s, w, o0, nout, want, mag);
    int bad = 0;
    for (int64_t t = 0; t < s; t++) {
        for (int64_t o = 0; o < nout; o++) {
            double got = y[t * ldy + o], tol = (double)cols * 0x1p-23 * mag[t * nout + o] + 1e-30;
            if (fabs(got - want[t * nout + o]) > tol && bad++ < 3)
                as_test_fail(__FILE__, __LINE__, "%s: s %lld, y[%lld][%lld] = %.9g, double %.9g", what,
                             (long long)s, (long long)t, (long long)o, got, want[t * nout + o]);
            if (yb[t * ldy + o] != as_bf16(y[t * ldy + o]) && bad++ < 3)
                as_test_fail(__FILE__, __LINE__, "%s: s %lld, rounded y[%lld][%lld] = %.9g, bf16 of f32 %.9g",
                             what, (long long)s, (long long)t, (long long)o, yb[t * ldy + o], y[t * ldy + o]);
        }
        for (int64_t o = nout; o < ldy; o++)
            if (y[t * ldy + o] != -12345.0f && bad++ < 3)
                as_test_fail(__FILE__, __LINE__, "%s: wrote past nout at [%lld][%lld]", what, (long long)t,
                             (long long)o);
    }
    free(x);
    free(y);
    free(yb);
    free(want);
    free(mag);
    return bad;
}

static const AsDType types[] = {AS_DT_BF16, AS_DT_F32, AS_DT_F16, AS_DT_F8_E4M3};

TEST(linear_all_types_vs_double)
{
    int configs = 0;
    for (size_t d = 0; d < sizeof types / sizeof types[0]; d++) {
        for (int unaligned = 0; unaligned < 2; unaligned++) {
            /* 300 rows: one 256-row panel and a short one; 70 columns: SIMD body plus tail */
            TestWeight tw;
            make_weight(&tw, types[d], 300, 70, unaligned, 7 + (uint32_t)d);
            char what[96];
            snprintf(what, sizeof what, "%s%s 300x70", as_dtype_name(types[d]), unaligned ? " (unaligned)" : "");
            const int64_t ss[] = {1, 2, 3, 37};
            for (size_t k = 0; k < 4; k++) {
                check_linear(what, &tw, ss[k], 0, 300, 300);
                check_linear(what, &tw, ss[k], 5, 290, 293); /* row subset, wider output stride */
                check_linear(what, &tw, ss[k], 299, 1, 1);   /* the last row alone */
                configs += 3;
            }
            free_weight(&tw);
        }
    }
    as_test_note("%d configurations (BF16, F32, F16, F8_E4M3+scale; aligned and not; s 1, 2, 3, 37; row subsets)",
                 configs);
}

TEST(linear_gemv_every_isa)
{
    const AsIsa isas[] = {AS_ISA_PORTABLE, AS_ISA_AVX2, AS_ISA_AVX512};
    char ran[128] = "";
    for (size_t i = 0; i < 3; i++) {
        if (as_gemv_force_isa(isas[i]) != 0)
            continue;
        strcat(ran, " ");
        strcat(ran, as_isa_name(isas[i]));
        const AsDType dts[3] = {AS_DT_BF16, AS_DT_F32, AS_DT_F8_E4M3};
        for (int dt = 0; dt < 3; dt++) {
            /* 1283 columns: 80 x 16 lanes + 3 (and 10 fp8 scale blocks + 3 columns); 267 rows:
             * blocks of 4 plus 3, three fp8 block rows */
            TestWeight tw;
            make_weight(&tw, dts[dt], 267, 1283, true, 5);
            char what[64];
            snprintf(what, sizeof what, "%s %s", as_isa_name(isas[i]), as_dtype_name(dts[dt]));
            check_linear(what, &tw, 1, 0, 267, 267);
            check_linear(what, &tw, 1, 3, 261, 261);
            check_linear(what, &tw, 1, 126, 7, 7); /* a block of 4 across the 128-row scale edge */
            free_weight(&tw);
        }
    }
    as_gemv_force_isa(AS_ISA_AUTO);
    as_test_note("GEMV variants checked:%s (auto picks %s)", ran, as_isa_name(as_gemv_isa()));
}

TEST(linear_same_bits_for_any_thread_count)
{
    int before = as_ref_threads();
    TestWeight tw;
    make_weight(&tw, AS_DT_BF16, 517, 300, false, 9);
    const int64_t ss[] = {1, 5};
    for (size_t k = 0; k < 2; k++) {
        int64_t s = ss[k];
        float *x = malloc(sizeof(float) * s * 300), *y1 = malloc(sizeof(float) * s * 517),
              *y2 = malloc(sizeof(float) * s * 517);
        uint32_t seed = 1;
        for (int64_t i = 0; i < s * 300; i++)
            x[i] = as_bf16(rnd(&seed, -1, 1));
        as_ref_set_threads(1);
        CHECK(as_ref_threads() == 1, "as_ref_threads after set 1: %d", as_ref_threads());
        as_linear(x, s, &tw.w, y1, true);
        as_ref_set_threads(2);
        as_linear(x, s, &tw.w, y2, true);
        CHECK(memcmp(y1, y2, sizeof(float) * s * 517) == 0, "s %lld: 1 and 2 threads differ", (long long)s);
        free(x);
        free(y1);
        free(y2);
    }
    as_ref_set_threads(before);
    free_weight(&tw);
}

/* x one-hot at each column: y is the decoded weight itself, which must equal the decoder's. */
static int fp8_one_hot(const AsWTensor *t, const char *what)
{
    enum { R = 4, C = 256 };
    float x[C], y[R], dec[R * C];
    as_wt_rows_f32(t, 0, R, dec);
    int checked = 0;
    for (int c = 0; c < C; c++) {
        memset(x, 0, sizeof x);
        x[c] = 1.0f;
        as_linear(x, 1, t, y, false);
        for (int r = 0; r < R; r++, checked++)
            CHECK(y[r] == dec[r * C + c], "%s: code 0x%02x (row %d col %d): GEMV %a, decoder %a", what,
                  ((const uint8_t *)t->data)[r * C + c], r, c, y[r], dec[r * C + c]);
    }
    return checked;
}

/* Every fp8 code through each GEMV variant, for F32 and E8M0 scales (rounded, exact, huge and
 * subnormal-product kernels' paths); the NaN codes (which would
 * poison every one-hot product of their row) on their own, at a vector lane and in the tail. */
TEST(linear_fp8_every_code)
{
    enum { R = 4, C = 256 };
    uint8_t w[R * C];
    for (int r = 0; r < R; r++)
        for (int c = 0; c < C; c++)
            w[r * C + c] = ((c + 37 * r) & 0x7f) == 0x7f ? 0x38 : (uint8_t)(c + 37 * r);
    const float sf[2] = {0.0173f, 3.0f};
    const uint8_t se[2] = {120, 131};
    AsWTensor scale_f32 = {.dtype = AS_DT_F32, .ndim = 2, .shape = {1, 2}, .data = sf};
    AsWTensor scale_e8m0 = {.dtype = AS_DT_F8_E8M0, .ndim = 2, .shape = {1, 2}, .data = se};
    /* a huge scale (the scalar path) and a tiny power of two (products go subnormal: rounded) */
    const float sx[2] = {300.0f, 0x1p-120f};
    AsWTensor scale_odd = {.dtype = AS_DT_F32, .ndim = 2, .shape = {1, 2}, .data = sx};
    uint8_t wn[2 * 35];
    memset(wn, 0x38, sizeof wn);
    wn[5] = 0x7f;
    wn[35 + 33] = 0xff;
    AsWTensor tn = {.dtype = AS_DT_F8_E4M3, .ndim = 2, .shape = {2, 35}, .data = wn, .scale = &scale_f32, .block = 128};
    float ones[35], yn[2];
    for (int c = 0; c < 35; c++)
        ones[c] = 1.0f;

    const AsIsa isas[] = {AS_ISA_PORTABLE, AS_ISA_AVX2, AS_ISA_AVX512};
    char ran[128] = "";
    int checked = 0;
    for (size_t i = 0; i < 3; i++) {
        if (as_gemv_force_isa(isas[i]) != 0)
            continue;
        snprintf(ran + strlen(ran), sizeof ran - strlen(ran), " %s", as_isa_name(isas[i]));
        char what[64];
        AsWTensor t = {.dtype = AS_DT_F8_E4M3, .ndim = 2, .shape = {R, C}, .data = w, .scale = &scale_f32, .block = 128};
        snprintf(what, sizeof what, "%s, F32 scale", as_isa_name(isas[i]));
        checked += fp8_one_hot(&t, what);
        t.scale = &scale_e8m0;
        snprintf(what, sizeof what, "%s, F8_E8M0 scale", as_isa_name(isas[i]));
        checked += fp8_one_hot(&t, what);
        t.scale = &scale_odd;
        snprintf(what, sizeof what, "%s, scales 300 and 2^-120", as_isa_name(isas[i]));
        checked += fp8_one_hot(&t, what);
        as_linear(ones, 1, &tn, yn, false);
        CHECK(isnan(yn[0]) && isnan(yn[1]), "%s: NaN codes must give NaN: %g %g", as_isa_name(isas[i]), yn[0], yn[1]);
        const float snan = NAN;
        AsWTensor scale_nan = {.dtype = AS_DT_F32, .ndim = 2, .shape = {1, 1}, .data = &snan};
        AsWTensor tz = {.dtype = AS_DT_F8_E4M3, .ndim = 2, .shape = {1, 35}, .data = w, .scale = &scale_nan, .block = 128};
        as_linear(ones, 1, &tz, yn, false);
        CHECK(isnan(yn[0]), "%s: a NaN scale must give NaN: %g", as_isa_name(isas[i]), yn[0]);
    }
    as_gemv_force_isa(AS_ISA_AUTO);
    as_test_note("%d fp8 weights through the GEMV (variants:%s) equal the decoder's; NaN codes give NaN", checked, ran);
}

/* Scale kinds mixed inside a block of 4 rows (rows 126..129 straddle two scale rows): powers of
 * two, plain values, a huge one; against the double loop on every variant. */
TEST(linear_fp8_mixed_scale_kinds)
{
    TestWeight tw;
    make_weight(&tw, AS_DT_F8_E4M3, 200, 300, false, 17);
    const float sc[6] = {0.25f, 0x1p-3f, 1.0f, 0.3f, 0x1p-5f, 700.0f};
    memcpy(tw.sraw, sc, sizeof sc);
    const AsIsa isas[] = {AS_ISA_PORTABLE, AS_ISA_AVX2, AS_ISA_AVX512};
    for (size_t i = 0; i < 3; i++) {
        if (as_gemv_force_isa(isas[i]) != 0)
            continue;
        check_linear(as_isa_name(isas[i]), &tw, 1, 0, 200, 200);
        check_linear(as_isa_name(isas[i]), &tw, 1, 126, 5, 5);
        /* exact: one-hot x reads back each weight of rows 125..130 */
        float x[300], y[6], dec[6 * 300];
        as_wt_rows_f32(&tw.w, 125, 6, dec);
        int bad = 0;
        for (int c = 0; c < 300; c++) {
            memset(x, 0, sizeof x);
            x[c] = 1.0f;
            as_linear_rows(x, 1, &tw.w, 125, 6, y, 6, false);
            for (int r = 0; r < 6; r++)
                if (y[r] != dec[r * 300 + c] && bad++ < 3)
                    as_test_fail(__FILE__, __LINE__, "%s: weight [%d][%d]: GEMV %a, decoder %a", as_isa_name(isas[i]),
                                 125 + r, c, y[r], dec[r * 300 + c]);
        }
    }
    as_gemv_force_isa(AS_ISA_AUTO);
    free_weight(&tw);
}

/* OpenBLAS's kernel choice: a core without AVX2 on a CPU with it is replaced (AVX-512: SkylakeX), a
 * vector core or a CPU without AVX2 is left alone; and the program runs on a vector core here when the
 * CPU has AVX2 (the check at start-up re-executed it where OpenBLAS fell back). */
static bool wants(const char *got, const char *want) { return got && !strcmp(got, want); }

TEST(linear_blas_core_choice)
{
    CHECK(wants(as_blas_core_wanted("Prescott", true, false), "Haswell"), "Prescott on an AVX2 CPU: Haswell");
    CHECK(wants(as_blas_core_wanted("Core2", true, true), "SkylakeX"), "Core2 on an AVX-512 CPU: SkylakeX");
    CHECK(wants(as_blas_core_wanted("Sandybridge", true, false), "Haswell"),
          "Sandybridge (AVX, no AVX2) on an AVX2 CPU: Haswell");
    CHECK(as_blas_core_wanted("Haswell", true, true) == NULL, "Haswell kept");
    CHECK(as_blas_core_wanted("cooperlake", true, true) == NULL, "Cooperlake kept (any case)");
    CHECK(as_blas_core_wanted("Zen", true, false) == NULL, "Zen kept");
    CHECK(as_blas_core_wanted("Prescott", false, false) == NULL, "no AVX2: Prescott kept");
    CHECK(as_blas_core_wanted(NULL, true, true) == NULL, "no name: nothing");
    as_test_note("this process: OpenBLAS's %s kernels", as_blas_core_name());
}
