/* Mismatches inherited from upstream (SPEC 6: "the tensors downstream of a flip (o, out) still
 * meet the bf16 rule in practice; report it if they do not"). When every tensor before o passes
 * (quantisation flips and near-ties allowed) but o does not, the difference may come from those
 * flips: one fp8 grid step in a row that carries most of a query's attention moves o by more than
 * the bf16 rule. The reference then recomputes the stage from the checked side's OWN inputs; if
 * the checked side matches that, the stage is correct and its mismatch is inherited: the verdict
 * becomes flips (or near-tie, when a selection near-tie is upstream) and the tensor is marked
 * explained. Stages: o (from q, rows, idx), o_back (from o), og (from o_back), out (from og). */
#ifndef AS_EXPLAIN_H
#define AS_EXPLAIN_H

#include "driver/compare.h"
#include "ref/layer.h"

/* Re-judges diff (already filled by as_compare_layer of got against the reference). */
void as_explain_downstream(const AsRefModel *rm, const AsRun *got, const AsCompareOptions *opt, AsLayerDiff *diff);

#endif
