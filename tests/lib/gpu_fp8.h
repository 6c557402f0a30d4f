/* The fp8-form weights' test plumbing on the device (tests/lib/gpu_fp8.c): weights uploaded as the engine
 * uploads them (model/fp8_form.h), and the comparison rule. */
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
