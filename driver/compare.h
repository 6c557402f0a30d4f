/* The comparison of one layer's run (got: engine or another dump) against the reference
 * (want), by the rules of SPEC section 6. */
#ifndef AS_COMPARE_H
#define AS_COMPARE_H

#include <stdbool.h>
#include <stdint.h>

#include "ref/run.h"

typedef enum {
    AS_V_NOT_RUN,   /* not compared (yet) */
    AS_V_ABSENT,    /* absent on both sides for this layer/step */
    AS_V_PASS,      /* within tolerance, selections exact */
    AS_V_FLIPS,     /* within tolerance except benign quantisation flips */
    AS_V_NEAR_TIE,  /* selections differ, each difference explained by a near-tie */
    AS_V_MISMATCH,  /* out of tolerance, or a selection difference that is not a near-tie */
    AS_V_COUNT
} AsVerdict;

const char *as_verdict_name(AsVerdict v);   /* "pass", "flips", "near-tie", "MISMATCH", ... */
bool as_verdict_ok(AsVerdict v);            /* pass, flips, near-tie, absent */

/* Tolerance of SPEC 6: max|got - want| <= max|want| * rel + abs. */
typedef struct {
    double rel, abs;
} AsTolerance;

#define AS_TOL_DEFAULT ((AsTolerance){0.0078125 /* 2^-7 */, 1e-4})

/* One differing query of a selection. */
typedef struct {
    int64_t query;          /* token (row of the selection) */
    int n_only_got, n_only_want;
    int32_t only_got[8], only_want[8];   /* first few positions in one set only */
    double margin;          /* score gap at the boundary (bf16 ulps when near_tie) */
    bool near_tie;
} AsSelDiff;

#define AS_MAX_SELDIFFS 16

typedef struct {
    AsVerdict verdict;
    int64_t numel;
    bool shape_differs;
    bool absent_got, absent_want;   /* present on one side only (a mismatch) */
    /* values */
    double max_abs;         /* max |got - want| over elements that are not benign flips */
    double want_max;        /* max |want| */
    double tol;             /* allowed max_abs */
    double max_rel;         /* max_abs / want_max */
    int64_t worst;          /* flat index of the worst element (-1 none) */
    int64_t worst_coord[3];
    double worst_got, worst_want;
    int64_t worst_ulp;      /* bf16 ulp distance of the worst element */
    int64_t n_bad;          /* elements beyond tolerance (not flips) */
    int64_t n_flips;        /* benign quantisation flips */
    int64_t n_flips_wide;   /* of which the inputs differed by more than one ulp, within their own
                             * tensor's bf16 rule (driver/compare.c, is_flip) */
    bool explained;         /* out of tolerance, but inherited: the checked side matches the reference
                             * recomputed from its own inputs (driver/explain.h) */
    double explained_max_abs; /* its max |diff| against that recomputation */
    /* selections */
    int64_t n_rows_differ, n_near_tie, n_real;
    int n_seldiffs;
    AsSelDiff seldiff[AS_MAX_SELDIFFS];
} AsTensorDiff;

typedef struct {
    int layer, step;
    AsVerdict verdict;      /* worst over the tensors */
    AsTensorId worst_tensor;
    AsTensorDiff t[AS_T_COUNT];
} AsLayerDiff;

typedef struct {
    AsTolerance tol[AS_T_COUNT];  /* per-tensor (batch scripts may override) */
    bool quantised;               /* Q2_K/Q8_0 projections: looser documented tolerance */
    int cand_block;               /* candidate_block_size; 0 = unknown: every cand difference is real */
} AsCompareOptions;

void as_compare_options_default(AsCompareOptions *o);

/* Compares every tensor present on either side. */
void as_compare_layer(const AsRun *got, const AsRun *want, const AsCompareOptions *opt, AsLayerDiff *out);
/* One tensor (id) of two runs; the runs give the pre-quantisation twins and the scores that
 * explain selection differences. */
void as_compare_tensor(const AsRun *got, const AsRun *want, AsTensorId id, const AsCompareOptions *opt,
                       AsTensorDiff *out);

/* bf16 ulp distance between two bf16 values (ordered-integer difference). */
int64_t as_bf16_ulp_distance(float a, float b);

/* "token 3, head 1, channel 17" for tensor id at flat index i. */
void as_format_coord(AsTensorId id, const int64_t coord[3], int ndim, char *buf, int n);

/* One line for a report: "q: MISMATCH max_abs 0.5 (tol 0.0079, rel 0.25) at token 3, head 1,
 * channel 17: got 2.5 want 2 (16 ulp), 3 bad", or the selection / structural equivalent. */
void as_tensor_diff_line(AsTensorId id, const AsTensorDiff *d, char *buf, int n);

#endif
