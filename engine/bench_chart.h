/* The benchmark's chart: per-layer decode time against its HBM floor and per-layer prefill
 * time split by stage, as one self-contained SVG (no fonts or scripts beyond the viewer's default). */
#ifndef AS_BENCH_CHART_H
#define AS_BENCH_CHART_H

#include <stdio.h>

#include "engine/profile.h"

typedef struct {
    const char *title;       /* e.g. "bench-engine, DATE UTC, NVIDIA H200, flash" */
    int n_layers;
    const char *kind[AS_MAX_LAYERS];   /* short layer kinds ("r2 kv idx") */
    double decode_ms[AS_MAX_LAYERS];   /* device time of the layer in one decode step */
    double decode_floor_ms[AS_MAX_LAYERS];
    int have_prefill;
    int prefill_tokens;
    double prefill_ms[AS_MAX_LAYERS][AS_OP_COUNT]; /* per stage; [AS_OP_LAYER] the whole layer */
} AsBenchChart;

/* Writes the SVG; returns 0, or -1 when the file cannot be written. */
int as_bench_chart_svg(const AsBenchChart *c, FILE *f);

#endif
