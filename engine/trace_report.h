/* One decode step's timeline (bench-engine --trace): the device's own start and end of every kernel,
 * copy and memset of a graph replay (engine/trace.c reads them from CUPTI), each kernel named by the
 * launch that captured it. This half is host code in every build (tests/test_trace_report.c): the
 * launch descriptions parsed, the figures per layer, the tables, the Chrome trace file. */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "model/errors.h"

typedef enum { AS_TRACE_KERNEL, AS_TRACE_MEMCPY, AS_TRACE_MEMSET } AsTraceKind;

typedef struct {
    uint64_t start_ns, end_ns; /* device timestamps */
    uint32_t stream;           /* CUPTI's stream id */
    AsTraceKind kind;
    int grid, block;           /* kernels: blocks and threads a block (x * y * z) */
    uint64_t bytes;            /* copies and memsets */
    uint64_t node;             /* CUPTI's id of the graph node that ran it (0: none) */
    int layer;                 /* from the launch's description ("layer 3 ..."); -1: none */
    char kernel[64];           /* the kernel's name without template arguments or parameters; copies: "memcpy" */
    char stage[64];            /* the launch's description, short ("wq_b + rope"); "" when untagged */
    char launch[160];          /* the launch's description whole; "" when untagged */
} AsTraceEvent;

/* A launch description ("layer 3 wq_b + rope(q): gemv 8192x1024 ...", "layer 12: kv rmsnorm + rope +
 * fp8 quant ...") split into its layer (-1 when it names none) and a short stage name: the text after
 * the layer, up to its first ':', '(' or word starting with a digit, less trailing words that carry
 * numbers or "of" while more than one word is left ("top-512 of 1x4096 ..." -> "top-512"). */
void as_trace_stage_of(const char *launch, int *layer, char *stage, size_t n);

/* A kernel's name as a user reads it: the demangled (or plain) name without its return type,
 * template arguments and parameters ("void topk_rows_kernel<256>(float const*, ...)" ->
 * "topk_rows_kernel"). */
void as_trace_short_name(const char *demangled, char *out, size_t n);

/* Sorts events by start (then end). */
void as_trace_sort(AsTraceEvent *ev, int n);

typedef struct {
    double span_us;  /* from the layer's first start to the next layer's first start (the last: the step's end) */
    double idle_us;  /* of the span, the time no kernel, copy or memset of the step was running */
    int kernels;     /* kernels tagged with the layer */
} AsTraceLayer;

/* Per layer (0 .. n_layers-1) over one step's sorted events; a layer none of whose events names it
 * gets zeros. Returns the number of layers found. */
int as_trace_layers(const AsTraceEvent *ev, int n, int n_layers, AsTraceLayer *out);

/* A layer's chain: the time each projection stage (wq_a, wq_b, the sparse attention, wo_a, wo_b: the
 * stages whose names start with those words) ends after the previous one ends, wq_a's after the previous
 * layer's wo_b; whatever runs between two of them counts in the later one. A programmatically launched
 * kernel starts when its blocks are resident, so ends, not starts, say where the time goes. */
enum { AS_TRACE_CHAIN = 5 };
extern const char *const as_trace_chain_stage[AS_TRACE_CHAIN];
typedef struct {
    double us[AS_TRACE_CHAIN];
    int ok; /* every stage found, in this layer and the previous layer's wo_b (so never layer 0) */
    /* The attention's inputs besides q (ok layers with an event, neither wq_b's nor the attention's, that
     * ends before the attention's first kernel: the kv branch, an index layer's selection): branch_us, the
     * last such end less wq_b's end (> 0: the branch, not q, was the attention's last input); attn_us, the
     * attention's end after its last input (its own time on the chain, whichever input came last). */
    int branch;
    double branch_us, attn_us;
} AsTraceChain;
void as_trace_chain(const AsTraceEvent *ev, int n, int n_layers, AsTraceChain *out);
/* The chains as a Markdown table, one row a layer kind (kind[l]: layer l's kind, rows in order of first
 * appearance): the kind's layers with a chain, the medians of each stage, their total, and of the branch
 * figures (over the layers that have them; "-" when none). */
void as_trace_print_chain(FILE *md, const AsTraceEvent *ev, int n, int n_layers, const char (*kind)[48]);
/* Whether layer l is the first of its kind (kind[j]: layer j's kind name). */
bool as_trace_first_of_kind(const char (*kind)[48], int l);

/* Layer l's events as a Markdown table: start and end from the layer's first start, duration,
 * stream (s0, s1, ... in the layer's order of first use), stage, kernel, grid. */
void as_trace_print_layer(FILE *md, const AsTraceEvent *ev, int n, int l);

/* The events as a Chrome trace (JSON, the "traceEvents" format that Perfetto and chrome://tracing
 * open): one complete event a kernel, copy or memset, microseconds from the step's first start, one
 * track a stream; args carry the layer, the launch and the grid. Written atomically. */
int as_trace_chrome_write(const char *path, const AsTraceEvent *ev, int n, const char *title, AsError *err);
