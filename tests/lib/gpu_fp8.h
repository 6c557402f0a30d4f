/* The fp8 kernels' test plumbing on the device (tests/lib/gpu_fp8.c): fp8-form weights uploaded as the
 * engine uploads them (model/fp8_form.h), act_quant run on the device, and the comparison rule. */
#ifndef AS_TEST_GPU_FP8_H
#define AS_TEST_GPU_FP8_H

#include <stdint.h>

#include "kernels/kernels.h"
#include "tests/lib/fp8_cases.h"

typedef struct {
    AsFp8Weight w; /* batch 1, the whole tensor */
    void *codes;
    float *ws;
} AsTestFp8Dev;

void as_test_fp8_upload(const AsTestFp8W *f, AsTestFp8Dev *d);
void as_test_fp8_dev_free(AsTestFp8Dev *d);

/* s host rows of n (bf16 values) through as_k_act_quant on the device into a new act8 buffer (*buf, freed
 * with as_gpu_free); returns its view. */
AsFp8Act as_test_act_quant_dev(const float *x, int64_t s, int64_t n, void **buf);

/* One case of the fp8 linear: a weight of rows x cols (block B; grid: tests/lib/fp8_cases.h) and s rows of
 * activations on the host, both on the device, the activations through act_quant. */
typedef struct {
    AsTestFp8W f;
    float *x;     /* [s][cols], host */
    AsTestFp8Dev d;
    void *xbuf;   /* act_quant's buffer */
    AsFp8Act xa;  /* its view */
} AsTestFp8Case;
void as_test_fp8_case(AsTestFp8Case *c, int64_t rows, int64_t cols, int B, int64_t s, int grid, uint64_t seed);
void as_test_fp8_case_free(AsTestFp8Case *c);

/* A bf16 output [rows][cols] (rows ldg apart) against the twin's want, element by element: bit-exact,
 * one bf16 ulp, or within bound_rel * mag (the terms' f32 order, or the tensor cores' accumulation);
 * NaN where the twin has a number is bad. Over the tensor also SPEC 6's rule, max |got - want| <=
 * max |want| 2^-7 + 1e-4. The first bad elements are reported with their coordinates. */
typedef struct {
    int64_t exact, ulp1, by_bound, bad;
    double worst_ratio; /* |got - want| / (2^-16 mag), the f32 order's bound */
    double max_err, max_want;
    int spec6_ok;
} AsTestFp8Cmp;
AsTestFp8Cmp as_test_fp8_compare(const char *what, const uint16_t *got, int64_t ldg, const float *want,
                                 const double *mag, int64_t rows, int64_t cols, double bound_rel);
/* One line: the counts, the worst ratio, SPEC 6's margin. */
void as_test_fp8_note(const char *what, const AsTestFp8Cmp *c);

/* AS_KTEST_SMALL=1 (compute-sanitizer runs): only cases below 2^22 weights. */
int as_test_fp8_small_only(void);

#endif
