/* The GPU attention engine (CUDA C + cuBLAS): the device form of ref/, layer state on the GPU.
 * The driver steps it one layer at a time (or a whole step at once) and copies any layer's run
 * back to the host in the reference's AsRun form. */
#ifndef AS_ENGINE_H
#define AS_ENGINE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>

#include "engine/knobs.h"
#include "model/errors.h"
#include "model/weights.h"
#include "ref/run.h"

typedef struct AsEngine AsEngine;

typedef struct {
    int device;           /* CUDA device ordinal */
    const char *inject;   /* a named fault (driver --inject), or NULL */
    bool host_select;     /* select top-k on the host with the reference's code (default: the device) */
    bool capture_runs;    /* keep every intermediate for as_engine_layer_run (debugging) */
    bool profile;         /* time each stage with CUDA events (bench-engine) */
    const AsEngineKnobs *knobs; /* engine/knobs.h (copied at creation); NULL: every knob at its default */
} AsEngineOptions;

/* Number of usable CUDA devices (0 when none, or when built without CUDA). */
int as_engine_device_count(void);
/* One line per device ("0: NVIDIA H200, sm_90, 139.8 GiB, driver 13.0") or why there is none. */
void as_engine_describe_devices(char *buf, size_t n);
/* "CUDA 13.0 (runtime), cuBLAS 13.x" or "built without CUDA". */
const char *as_engine_build_info(void);

/* Uploads the model's weights and allocates the layer and shared state. */
int as_engine_create(const AsModel *m, const AsEngineOptions *opt, AsEngine **out, AsError *err);
void as_engine_destroy(AsEngine *e);
/* Empties every layer's state and the shared state (before a new prefill). */
void as_engine_reset(AsEngine *e);

/* Starts a step (prefill: start_pos 0, any s >= 1; decode: start_pos > 0, s == 1) on the
 * token inputs h0 ([s][dim], bf16 values). */
int as_engine_begin_step(AsEngine *e, const float *h0, int start_pos, int s, AsError *err);
/* Runs the next layer of the current step; returns its index through *layer (-1 once done). */
int as_engine_next_layer(AsEngine *e, int *layer, AsError *err);
/* Runs all remaining layers of the current step. */
int as_engine_finish_step(AsEngine *e, AsError *err);
/* Copies the run of the layer just executed (every tensor of ref/run.h) to the host. */
int as_engine_layer_run(AsEngine *e, AsRun *out, AsError *err);
/* The device selection's counters since creation (kernels/kernels.h, AS_TOPK_*): rows selected, rows
 * whose k-th value is tied across the cut (decided by the exact emulation of torch's tie order), rows
 * through partial_sort, introselect's passes on the block and on one warp and the columns they ranked,
 * and the SM cycles of the row's load, those passes, the tie check and the set's emission. Counted only
 * by a profiling engine (AsEngineOptions.profile: bench-engine); zeros otherwise. */
#define AS_SEL_NSTATS 12
int as_engine_select_stats(AsEngine *e, unsigned long long out[AS_SEL_NSTATS], AsError *err);
/* The residual stream h ([s][dim]) entering the next layer (after the last one: the step's output). */
int as_engine_residual(AsEngine *e, float *h, AsError *err);

/* ---- decode as one CUDA graph (engine/graph.c) ----
 * The whole decode step (every layer) is captured once per step shape and replayed per token. The
 * token's input row and a table of per-layer step parameters (positions, index widths, selection
 * sizes: planned on the host, read on the device) are copied in by the graph's first nodes from
 * pinned buffers, so no position is baked into a graph; kernels whose work grows with the position
 * launch for the most and stop at the live length. The top-k and candidate blocks run on the device
 * (kernels/topk_select.cu, width and k read from the step parameters): no host node, no round trip;
 * with host_select (or rows wider than AS_TOPK_MAX_WIDTH) they run on the host (the reference's
 * ref/indexer.c and ref/candidates.c) in host nodes between a copy of the score row down and a copy
 * of the selection up. A step's shape is what the host decides per layer (latents completed, keys
 * read, ...): in the released geometry and tiny the parity of start_pos (ratio-2 groups complete on
 * odd positions), so two graphs, captured on first use. A graph step leaves the engine as
 * as_engine_begin_step + as_engine_finish_step would, bit for bit (tests/gpu_graph.c): residual,
 * caches, shared state and its provenance, and the last layer's run for as_engine_layer_run.
 * The graph belongs to the caller and must be destroyed before its engine. Only the benchmark uses it;
 * the driver steps layer by layer without it. */
typedef struct AsDecodeGraph AsDecodeGraph;

typedef struct {
    bool keep_layer_outs;   /* copy every layer's out aside each step (as_decode_graph_layer_outs) */
    bool layer_events;      /* an event node before each layer and after the last (as_decode_graph_layer_ms):
                             * the layers' boundaries lose their overlap (no programmatic edge across an event
                             * node), so the step runs a little slower than without */
} AsDecodeGraphOptions;

typedef struct {
    int captures;           /* graphs captured so far */
    int replays;            /* steps that replayed a graph captured before */
    int graphs;             /* graphs held now */
    int nodes, kernels, memcpys, memsets, hosts, others; /* of the last step's graph */
    double last_ms;         /* device time of the last step (events around the graph launch) */
} AsDecodeGraphInfo;

int as_decode_graph_create(AsEngine *e, const AsDecodeGraphOptions *opt, AsDecodeGraph **out, AsError *err);
void as_decode_graph_destroy(AsDecodeGraph *g);
/* One decode step (start_pos > 0, after a prefill, no step in progress) on the token input h0 ([dim],
 * bf16 values) through the graph; returns when the step is done, with the refusals and errors of the
 * uncaptured step (a failing CUDA call or host node is named). */
int as_engine_decode_graph(AsDecodeGraph *g, const float *h0, int start_pos, AsError *err);
void as_decode_graph_info(const AsDecodeGraph *g, AsDecodeGraphInfo *out);
/* Every layer's device time in the last step, ms ([n_layers]; layer_events): between the event nodes
 * around it. */
int as_decode_graph_layer_ms(const AsDecodeGraph *g, double *ms, AsError *err);
/* Every layer's out of the last step ([n_layers][dim]; keep_layer_outs). */
int as_decode_graph_layer_outs(AsDecodeGraph *g, float *outs, AsError *err);
/* Layer l's run in the last step, scalars and provenance only (rows_b_from, keys_from, sel_from,
 * cand_from, k, width, ...: what as_engine_layer_run gives for that layer, without tensors; a graph
 * step keeps only the last layer's tensors). out is freed first (as_run_init'ed or a run). */
int as_decode_graph_layer_meta(const AsDecodeGraph *g, int l, AsRun *out, AsError *err);

/* One bench-engine run's headline figures, for the table of both precisions side by side (bench-engine
 * --precision both). The floor: the weights as the engine holds them (for fp8 weights in fp8 form: the
 * checkpoint's codes and scales) plus the cache rows and index keys read, over the copy bandwidth. */
typedef struct {
    AsPrecision precision;
    bool fp8_form;         /* fp8 precision with the fp8 weights as e4m3 codes (docs/ENGINE.md, Precision) */
    double copy_gbs;
    double weight_gb, cache_gb; /* read a decode step */
    double floor_ms;
    double graph_ms;       /* the decode step through the CUDA graph (median) */
    double prefill_ms, proj_ms, proj_tflops; /* 0: no prefill */
    /* fp8 form: the fp8 projections alone (act_quant + the fp8 GEMM) against cuBLASLt's fp8 GEMM at the
     * same shapes, at the prefill's tokens; 0 otherwise */
    double fp8_proj_ms, fp8_lt_ms, fp8_proj_tflops, fp8_lt_tflops;
} AsBenchSummary;

/* The benchmark (`attnscope bench-engine`): decode at `context` tokens and a
 * prefill of `prefill` tokens, per layer kind, against the device's measured limits. Writes a
 * Markdown table to md (and the figures as JSON to json_path when non-NULL, written atomically; an
 * error when it cannot be written). */
typedef struct {
    int device;
    int context;        /* decode context (a prefill of this many tokens first) */
    int decode_steps;   /* timed decode steps (profiled uncaptured, then as many through the graph) */
    int prefill;        /* tokens of the timed prefill (0: skip) */
    const char *json_path;
    const char *svg_path;   /* the per-layer chart (decode against the floor, prefill by stage), or NULL */
    const char *title;      /* the chart's title line */
    bool host_select;       /* the selection on the host (the reference's code) instead of the device */
    bool graph_layers;      /* also decode_steps + 2 steps through a graph with event nodes between the layers:
                             * the graph's time per layer kind */
    const char *trace_path; /* also decode_steps + 2 graph steps under CUPTI: the last one's timeline, written
                             * there as a Chrome trace (engine/bench_trace.c); NULL: none */
    const AsEngineKnobs *knobs; /* the engine's knobs; NULL: the defaults */
    const char *knob_flags; /* the flags that set them (as_engine_knobs_flags), for the JSON; NULL: none */
    AsBenchSummary *summary; /* filled when given */
} AsEngineBenchOptions;

int as_engine_bench(const AsModel *m, const AsEngineBenchOptions *o, FILE *md, AsError *err);

#endif
