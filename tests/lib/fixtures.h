/* The torch fixtures of ../shared/fixtures (README there), loaded with cJSON into plain arrays.
 * The directory is as_fixtures_dir() (honours $ATTNSCOPE_FIXTURES). */
#ifndef AS_TEST_FIXTURES_H
#define AS_TEST_FIXTURES_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* One row of topk_torch_cpu.json. */
typedef struct {
    char note[160];
    int64_t n, k;
    bool partial_sort;         /* branch == "partial_sort" */
    float *values;             /* [n] the bf16 bit patterns, widened */
    int32_t *set;              /* [k] ascending */
    int32_t *unsorted_order;   /* [k] torch.topk(..., sorted=False) */
} AsTopkCase;

typedef struct {
    char source[160];
    int n_cases;
    AsTopkCase *cases;
} AsTopkFixture;

/* rounding_torch.json: parallel arrays. */
typedef struct {
    char source[160];
    int64_t n;
    uint32_t *f32_bits;
    uint16_t *bf16_bits;       /* torch .to(bfloat16) of f32_bits */
    uint32_t *clamped_f32_bits;/* f32_bits clamped to [-448, 448] */
    uint8_t *e4m3_bits;        /* torch .to(float8_e4m3fn) of clamped_f32_bits */
} AsRoundingFixture;

/* 0, or -1 with a one-line reason (file path included) in err. */
int as_fixture_load_topk(AsTopkFixture *f, char *err, size_t errlen);
void as_fixture_free_topk(AsTopkFixture *f);
int as_fixture_load_rounding(AsRoundingFixture *f, char *err, size_t errlen);
void as_fixture_free_rounding(AsRoundingFixture *f);

#endif
