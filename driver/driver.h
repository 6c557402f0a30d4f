/* The driver: owns the model, the inputs, the engine (when a CUDA device is present), the
 * reference and the comparison, and steps them through prefill and decode, one layer at a
 * time or whole steps. The TUI and the batch mode both stand on it.
 *
 * Sides: "ref" is the CPU reference; "got" is what is checked against it: the GPU engine, or
 * (no device, --inject given) a reference twin with the named fault, or nothing (reference
 * only: everything but the got column works). */
#ifndef AS_DRIVER_H
#define AS_DRIVER_H

#include <stdatomic.h>
#include <stdbool.h>

#include "driver/compare.h"
#include "driver/diagnose.h"
#include "driver/explain.h"
#include "dumps/dump.h"
#include "engine/engine.h"
#include "model/weights.h"
#include "ref/faults.h"
#include "ref/stack.h"

typedef enum { AS_MODE_TEACHER, AS_MODE_FREE } AsMode;
typedef enum { AS_GOT_NONE, AS_GOT_ENGINE, AS_GOT_TWIN } AsGotKind;

const char *as_mode_name(AsMode m);

typedef struct {
    const char *model;       /* a directory / file, or a preset name ("tiny", "flash", "preset:tiny") */
    uint64_t weight_seed;    /* seed of a generated preset (default 1) */
    uint64_t input_seed;     /* seed of the synthetic token inputs (default 1) */
    const char *inputs_path; /* HDF5 file with a [tokens][dim] dataset (or a dump), or NULL */
    const char *inputs_dataset; /* dataset name in inputs_path (NULL: "inputs/h0", else the first 2-D one) */
    int max_seq;             /* 0: the config's */
    AsMode mode;
    bool no_engine;          /* reference only even where a device is present */
    bool host_select;        /* the engine selects top-k on the host (reference code), not the device */
    const AsEngineKnobs *knobs; /* the engine's knobs (engine/knobs.h); NULL: the defaults */
    const char *inject;      /* fault name: in the engine, or in a reference twin without a device; or a
                              * convention of ref/convention.h, planted in a reference twin */
    int device;
    int threads;             /* reference threads (0: all cores) */
    bool quiet;              /* no notes on stderr */
    AsPrecision precision;   /* AS_PREC_AUTO: the config's dtype, else the weights' (model/precision.h) */
    const char *bf16_model;  /* the bf16 source of a quantised model, or NULL: its reference runs
                              * beside, and qerr holds, per layer, the quantisation error itself
                              * (reference on model vs reference on bf16_model; docs/GGUF.md) */
    bool diagnose;           /* each layer's first mismatching run diagnosed (driver/diagnose.h) into diag */
} AsDriverOptions;

void as_driver_options_default(AsDriverOptions *o);

/* Called after each layer of each step with both sides' runs (got may be NULL) and the diff. */
typedef void (*AsLayerHook)(void *ctx, int step, int layer, const AsRun *got, const AsRun *ref,
                            const AsLayerDiff *diff);

typedef struct {
    int step;               /* -1 until the first prefill */
    bool prefill;
    int start_pos, s;
    int next_layer;         /* n_layers once the step is done */
} AsStepInfo;

typedef struct AsDriver {
    AsDriverOptions opt;
    AsModel model;
    AsCompareOptions cmp;
    AsRefStack ref;
    AsGotKind got_kind;
    char got_name[48];      /* "engine", "ref+fault:NAME", "none" */
    AsEngine *eng;
    AsRefStack *twin;
    char note[256];         /* how the driver runs, said once ("reference only: no CUDA device") */

    AsStepInfo cur;
    int next_pos;           /* position of the next decode token */
    float *h0;              /* [s][dim] the current step's inputs */
    int h0_cap;
    /* this step's runs, per layer (ref always; got when present); diff per layer */
    AsRun *ref_run, *got_run;
    AsLayerDiff *diff;
    bool *layer_done;
    /* what the checked side published in this step (copies), for explaining inherited differences */
    AsExplainContext xc;

    /* the inputs file (if any): all its rows, positions 0.. */
    float *file_inputs;
    int file_tokens;

    /* the bf16 source (opt.bf16_model): its model, reference, runs, and the quantisation error
     * per layer (ref_run against bf16_run, default tolerances: the metrics, not a verdict) */
    AsModel *bf16;
    AsRefStack *bf16_ref;
    AsRun *bf16_run;
    AsLayerDiff *qerr;

    /* the reference's state before the current decode step (as_driver_keep_state_in): what a dump of
     * the step needs for a replay (docs/DUMP_FORMAT.md, "The state_in group") */
    bool keep_state_in, state_in_valid;
    AsRun *state_in;             /* [n_layers] */
    AsDumpStateIn state_in_info;

    /* the reference's state before each layer of the current step (a checked side present), and with
     * opt.diagnose the diagnoses of the step's layers (diag_valid: layer l has one) */
    AsDiagnoser *dg;
    AsDiagnosis *diag;           /* [n_layers] */
    bool *diag_valid;

    AsLayerHook hook;
    void *hook_ctx;
    atomic_int cancel;      /* set from another thread: stops between layers, and inside one (ref/cancel.h) */
    atomic_int progress_layer;
    atomic_int progress_phase; /* AsDriverPhase: what the step is doing, for a progress line */
    int torn_layer;         /* >= 0: a cancel cut this layer of the current step short; its state is half
                             * written, so nothing more runs until a prefill */
} AsDriver;

/* What a step is doing, in the order a layer does it. */
typedef enum {
    AS_PHASE_BEGIN,     /* the step's inputs, both sides' step set up */
    AS_PHASE_ENGINE,    /* the checked side's layer (the engine's forward, or the twin's) */
    AS_PHASE_ENGINE_COPY, /* the engine's tensors of the layer to the host */
    AS_PHASE_REFERENCE, /* the reference's layer */
    AS_PHASE_COMPARE,   /* every tensor against the reference's */
    AS_PHASE_EXPLAIN,   /* the explanation of the differences (driver/explain.h) */
    AS_PHASE_DIAGNOSE,  /* the diagnoser's replays */
    AS_PHASE_BF16,      /* the bf16 reference beside an fp8 one */
    AS_PHASE_COUNT
} AsDriverPhase;
/* The phase's words ("reference", ...); "" out of range. */
const char *as_driver_phase_name(int phase);

int as_driver_open(const AsDriverOptions *o, AsDriver **out, AsError *err);
void as_driver_close(AsDriver *d);
const AsConfig *as_driver_config(const AsDriver *d);
void as_driver_set_hook(AsDriver *d, AsLayerHook hook, void *ctx);

/* Starts a prefill of s tokens (resets every state) or a decode step of one token. */
int as_driver_begin_prefill(AsDriver *d, int s, AsError *err);
int as_driver_begin_decode(AsDriver *d, AsError *err);
/* Runs the next layer of the current step on both sides and compares. */
int as_driver_step_layer(AsDriver *d, AsError *err);
int as_driver_finish_step(AsDriver *d, AsError *err);
/* Whole steps. */
int as_driver_prefill(AsDriver *d, int s, AsError *err);
int as_driver_decode(AsDriver *d, int n, AsError *err);
/* Keep (from the next step on) a copy of the reference's state before each decode step in
 * state_in / state_in_info (state_in_valid says whether the current step has one). */
void as_driver_keep_state_in(AsDriver *d, bool on);
/* Diagnoses layer l of the current step (run already, both sides' tensors still held) on demand, whether
 * or not opt.diagnose is set (the TUI's key): out->ran false with a note when there is nothing to
 * diagnose. Returns 0, or an error (AS_EBADINPUT: no such layer run; AS_ERUNTIME: out of memory). */
int as_driver_diagnose(AsDriver *d, int l, AsDiagnosis *out, AsError *err);
/* Toggles teacher / free; takes effect from the next layer. */
void as_driver_set_mode(AsDriver *d, AsMode m);

/* The worst verdict of the current step so far. */
AsVerdict as_driver_step_verdict(const AsDriver *d, int *layer, AsTensorId *tensor);

/* Where the got side first goes out of tolerance. */
typedef struct {
    bool found;
    int step, layer, start_pos;
    AsTensorId tensor;
    AsTensorDiff diff;
} AsDivergence;

/* Runs (a prefill of prefill_s tokens when nothing has run yet, then) up to max_decode decode
 * steps, stopping at the first layer whose verdict is a mismatch. */
int as_driver_first_divergence(AsDriver *d, int prefill_s, int max_decode, AsDivergence *out, AsError *err);

/* The step's token inputs for positions pos0 .. pos0 + s - 1 (file or synthetic). */
int as_driver_inputs(AsDriver *d, int pos0, int s, float *h0, AsError *err);

/* Resolves a model spec (preset name or path) to a directory, generating a preset into the cache
 * directory ($ATTNSCOPE_CACHE, else $XDG_CACHE_HOME/attnscope, else ~/.cache/attnscope) on first use. */
int as_resolve_model(const char *spec, uint64_t seed, char *dir, size_t n, bool quiet, AsError *err);

#endif
