/* The comparison of one layer's run (got: engine or another dump) against the reference
 * (want), by the rules of SPEC section 6. */
#ifndef AS_COMPARE_H
#define AS_COMPARE_H

#include <stdbool.h>
#include <stdint.h>

#include "ref/run.h"
#include "ref/topk.h"

/* Ordered by severity: a layer's verdict is the worst of its tensors'. */
typedef enum {
    AS_V_NOT_RUN,   /* not compared (yet) */
    AS_V_ABSENT,    /* absent on both sides for this layer/step, or (partial comparisons) not stored
                     * by the checked side: listed, not judged */
    AS_V_PASS,      /* within tolerance, selections exact */
    AS_V_FLIPS,     /* within tolerance except benign quantisation flips */
    AS_V_NEAR_TIE,  /* selections differ, each difference explained by a near-tie */
    AS_V_TIE_ORDER, /* selections differ only among scores exactly equal to the k-th (SPEC 5, 6) */
    AS_V_INHERITED, /* differs because an input published by an earlier layer (a reused selection, an
                     * applied mask) differs there, and that layer's difference was explained */
    AS_V_MISMATCH,  /* out of tolerance, or a selection difference that nothing explains */
    AS_V_COUNT
} AsVerdict;

const char *as_verdict_name(AsVerdict v);   /* "pass", "flips", "near-tie", "tie-order", "inherited", "MISMATCH", ... */
bool as_verdict_ok(AsVerdict v);            /* everything but MISMATCH (and not-run) */

/* Why a tensor is not a pass (SPEC 6), kept for the reports. */
typedef enum {
    AS_CAUSE_NONE,      /* a pass (or absent) */
    AS_CAUSE_FLIP,      /* quantisation flips */
    AS_CAUSE_NEAR_TIE,  /* a selection boundary within one bf16 ulp */
    AS_CAUSE_TIE_ORDER, /* a selection among exactly equal scores */
    AS_CAUSE_INHERITED, /* follows from its inputs: `from` names the layer and step (the same layer:
                         * from a difference upstream in it) */
    AS_CAUSE_REAL,      /* nothing explains it */
    AS_CAUSE_COUNT
} AsCause;
const char *as_cause_name(AsCause c);       /* "flip", "near-tie", "tie-order", "inherited", "real" */

/* The tie conventions a selection's choices fit (bit 1 << AsTieOrder); 0: none of them. */
typedef uint8_t AsTieFit;
#define AS_TIE_FIT_ALL ((AsTieFit)((1u << AS_TIES_COUNT) - 1))
/* "lowest index first" (the first convention that fits, in cpu, lowest, highest order), "none of
 * cpu, lowest, highest" when none fits. */
const char *as_tie_fit_what(AsTieFit fit);
const char *as_tie_fit_name(AsTieFit fit);  /* "cpu", "lowest", "highest", "none" */

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
    bool tie_order;         /* every position in one set only scores exactly the k-th score */
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
    int64_t n_tie_order;    /* differing queries explained as tie-order */
    AsTieFit tie_fit;       /* tie-order: the conventions the checked side's choices fit */
    int n_seldiffs;
    AsSelDiff seldiff[AS_MAX_SELDIFFS];
    /* why it is not a pass */
    AsCause cause;
    AsProvenance from;      /* AS_CAUSE_INHERITED: the layer and step it follows from ({-1, -1}: none) */
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
    int cand_topk_blocks;         /* candidate_topk_blocks (to tell which tie convention a mask fits); 0 unknown */
    /* Partial comparisons (check, diff): a tensor the got side does not store, and (want_partial) one
     * the want side does not store, is absent: listed, not judged. Without them a tensor present on one
     * side only is a mismatch. A tensor in `require` (AS_DUMP_TENSOR_BIT) absent on either side is a
     * mismatch whatever these say. */
    bool got_partial, want_partial;
    uint64_t require;
} AsCompareOptions;

void as_compare_options_default(AsCompareOptions *o);

/* Compares every tensor present on either side. */
void as_compare_layer(const AsRun *got, const AsRun *want, const AsCompareOptions *opt, AsLayerDiff *out);
/* One tensor (id) of two runs; the runs give the pre-quantisation twins and the scores that
 * explain selection differences. */
void as_compare_tensor(const AsRun *got, const AsRun *want, AsTensorId id, const AsCompareOptions *opt,
                       AsTensorDiff *out);

/* The rank of a verdict (its enum order): the layer verdict is the highest. */
static inline int as_verdict_rank(AsVerdict v) { return (unsigned)v < AS_V_COUNT ? (int)v : 0; }

/* The first tensor out of rule in forward order (verdict above pass), AS_T_COUNT when none; why gets
 * its cause in words ("flip", "near-tie", "tie-order (lowest index first)", "inherited from layer 1
 * step 0", "inherited from kv in this layer", "real"). */
AsTensorId as_layer_cause(const AsLayerDiff *d, char *why, int n);
/* A tensor's cause in words, as above. */
void as_tensor_cause(const AsLayerDiff *d, AsTensorId id, char *why, int n);

/* bf16 ulp distance between two bf16 values (ordered-integer difference). */
int64_t as_bf16_ulp_distance(float a, float b);

/* "token 3, head 1, channel 17" for tensor id at flat index i. */
void as_format_coord(AsTensorId id, const int64_t coord[3], int ndim, char *buf, int n);

/* One line for a report: "q: MISMATCH max_abs 0.5 (tol 0.0079, rel 0.25) at token 3, head 1,
 * channel 17: got 2.5 want 2 (16 ulp), 3 bad", or the selection / structural equivalent. */
void as_tensor_diff_line(AsTensorId id, const AsTensorDiff *d, char *buf, int n);

#endif
