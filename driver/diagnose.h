/* The diagnosis of a layer run that another engine got wrong (`check --diagnose`, `run --diagnose`, the
 * TUI's `D`): its first mismatching tensor re-computed by the reference under each wrong convention of
 * the catalogue (ref/convention.h), from the layer's recorded tensors (the checked side's where it stores
 * them, the reference's for the rest) and the reference's state before the step, re-running only the
 * stages between what the convention bends and that tensor (ref/stage.h). Each convention that
 * reproduces the checked side within SPEC 6's rule, and contradicts no tensor it stores upstream, is
 * named, in the words docs/DIAGNOSE.md lists. A layer whose tensors all pass but whose quantised tensor
 * differs where the quantiser's input is bit-identical (two quantisers that round differently: SPEC 6
 * counts such elements as flips) is diagnosed at that tensor. */
#ifndef AS_DIAGNOSE_H
#define AS_DIAGNOSE_H

#include "driver/compare.h"
#include "ref/convention.h"
#include "ref/layer.h"

/* What the reference's state held for a layer before a step: what the window stage and the plan
 * (ref/plan.h) re-run from. (The caches grow by rows written at the plan's row: their rows before it are
 * in the recorded tensors; no convention bends the compressor's pooling, so its partial group is not
 * needed.) */
typedef struct {
    bool valid;
    int step;
    AsSharedProv prov;         /* the shared slots' provenance before the layer */
    float *ring;               /* [window][head_dim] */
    int ring_n;                /* floats allocated */
} AsLayerBefore;

/* Keeps layer l's state from st (before the reference runs layer l of step `step`). -1 when out of
 * memory (b is then invalid). */
int as_layer_before_capture(const AsRefState *st, const AsConfig *cfg, int l, int step, AsLayerBefore *b);
void as_layer_before_free(AsLayerBefore *b);

typedef struct {
    AsConvention conv;
    double max_abs;            /* the checked side against the re-run, on the tensor diagnosed */
} AsDiagMatch;

typedef struct {
    bool ran;                  /* a tensor was diagnosed (false: nothing to diagnose, or note says why not) */
    int layer, step;
    AsTensorId tensor;         /* the tensor diagnosed */
    int64_t same_input_flips;  /* its elements that differ at a bit-identical quantiser input */
    bool by_flips;             /* diagnosed for those flips alone: every tensor is within the rule */
    bool inherited;            /* the reference re-run on the checked side's own inputs reproduces it */
    int n_tried;               /* conventions re-run (those that bend a stage the tensor depends on) */
    int n_match;
    AsDiagMatch match[AS_CONV_COUNT];
    char note[240];            /* what could not be re-run, or why nothing ran */
} AsDiagnosis;

/* Diagnoses got (the checked side's run of a layer, possibly partial) against ref (the reference's run of
 * the same layer and step) whose comparison is diff; before: the reference's state before that layer and
 * step. cmp: the comparison's options. Fills out (out->ran false when no tensor needs a diagnosis).
 * Returns 0, or -1 when out of memory. */
int as_diagnose_layer(const AsRefModel *rm, const AsLayerBefore *before, const AsRun *got, const AsRun *ref,
                      const AsLayerDiff *diff, const AsCompareOptions *cmp, AsDiagnosis *out);

/* Whether a layer's comparison calls for a diagnosis: a mismatch, or flips at bit-identical inputs. */
bool as_diagnosis_wanted(const AsRun *got, const AsRun *ref, const AsLayerDiff *diff);

/* What a replay or a run keeps to diagnose as it goes: each layer's state before its current step, and
 * which layers it has diagnosed. A layer is diagnosed at its first run that calls for it: from then on
 * the checked side's state has diverged from the reference's that a re-run starts from, so later runs
 * of that layer are noted, not re-run. */
typedef struct AsDiagnoser AsDiagnoser;
AsDiagnoser *as_diagnoser_new(const AsConfig *cfg);   /* NULL when out of memory */
void as_diagnoser_free(AsDiagnoser *g);
/* Before the reference runs layer l of step `step` from st. -1 when out of memory. */
int as_diagnoser_before(AsDiagnoser *g, const AsRefState *st, int l, int step);
/* After the layer's comparison (and explanation): true when out holds a diagnosis to report (the layer
 * calls for one). -1 when out of memory. */
int as_diagnoser_after(AsDiagnoser *g, const AsRefModel *rm, const AsRun *got, const AsRun *ref,
                       const AsLayerDiff *diff, const AsCompareOptions *cmp, AsDiagnosis *out);
/* The state kept before layer l's current step (invalid before the first). */
const AsLayerBefore *as_diagnoser_layer_before(const AsDiagnoser *g, int l);

/* "layer 24 iq_pre: matches the reference with RoPE on halves (NeoX) instead of interleaved pairs in the
 * index queries: your indexer rotates the wrong layout", several matches joined by "; or ", "layer 3 o:
 * none of the catalogue reproduces it (12 conventions tried)", or the note. */
void as_diagnosis_text(const AsDiagnosis *d, char *buf, size_t n);

#endif
