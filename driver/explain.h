/* Mismatches inherited from upstream (SPEC 6: "the tensors downstream of a flip (o, out) still
 * meet the bf16 rule in practice; report it if they do not"). When every tensor before o passes
 * (quantisation flips and near-ties allowed) but o does not, the difference may come from those
 * flips: one fp8 grid step in a row that carries most of a query's attention moves o by more than
 * the bf16 rule. The reference then recomputes the stage from the checked side's OWN inputs; if
 * the checked side matches that, the stage is correct and its mismatch is inherited: the tensor is
 * marked explained, its verdict becomes the worst upstream (flips, near-tie, tie-order) and its
 * cause "inherited" (from that upstream difference in the same layer). The same holds for the index
 * path, where fp4 flips in the queries and keys move scores by many ulps and so the selections:
 * iscore (from iq, keys, w and the masks), cand (from the scores, or the publisher's mask), csel
 * (torch's top-k of the scores, or the publisher's selection), idx (widx then csel), then o (from
 * q, rows, idx), o_back, og, out.
 *
 * Across layers (SPEC 6, "a selection or mask published by an earlier layer, whose own difference
 * was explained"): a layer that reuses a selection or applies a candidate mask takes the one its
 * publisher (by the reference's provenance) gave on the checked side; when that differs from the
 * reference's and the checked side matches the recomputation with it, the tensor (and what follows
 * from it in the layer) is AS_V_INHERITED from that layer and step.
 *
 * The row-wise stages (the projections, the attention of each query, the inverse rotation) recompute
 * only the rows (tokens) whose inputs differ from the reference's and, where the checked side stores
 * the tensor, that differ from the reference's beyond the tolerance; the other rows are the reference's
 * (the stage gives them for the same input bytes, and a row within the tolerance passes as it is). An
 * engine's flips touch few rows, so the explanation costs a fraction of a layer, not a second forward.
 *
 * Partial runs (a dump that stores a few tensors): an input the checked side does not store is, for a
 * stage, recomputed from its own upstream tensors where it can be (o_back from o, og from o_back...),
 * else the reference's value stands in. */
#ifndef AS_EXPLAIN_H
#define AS_EXPLAIN_H

#include "driver/compare.h"
#include "ref/layer.h"

/* What the checked side published earlier in the same step (a reusing layer's selection, a candidate
 * user's mask are the publisher's), and this step's diffs so far. Any pointer may be NULL; an _n of -1
 * means nothing published in this step. */
typedef struct {
    const int32_t *pub_sel[AS_MAX_LAYERS];
    int64_t pub_sel_n[AS_MAX_LAYERS];
    const uint8_t *pub_cand[AS_MAX_LAYERS];
    int64_t pub_cand_n[AS_MAX_LAYERS];
    const AsLayerDiff *diff;
} AsExplainContext;

/* Re-judges diff (already filled by as_compare_layer of got against want, the reference's run of the
 * same layer and step). ctx may be NULL (nothing published known: reused selections and applied masks
 * are then taken from got itself). */
void as_explain_downstream(const AsRefModel *rm, const AsRun *got, const AsRun *want, const AsExplainContext *ctx,
                           const AsCompareOptions *opt, AsLayerDiff *diff);

#endif
