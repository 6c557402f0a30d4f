/* bench-engine's figures as one JSON object (--json), for scripts and the record in bench/. Host code,
 * in every build (tests/test_bench_json.c). */
#pragma once

#include "model/errors.h"

typedef struct {
    double copy_gbs, gemm_tflops;                     /* the device's limits measured in the run */
    double decode_ms, decode_wall_ms, decode_floor_ms; /* uncaptured, profiled; the HBM floor */
    double decode_graph_ms, decode_graph_wall_ms;      /* through the CUDA graph */
    int graph_nodes, graph_kernels, graph_host_nodes;
    double prefill_ms, proj_tflops, proj_alone_tflops, attn_tflops, iscore_tflops; /* 0: no prefill run */
} AsBenchFigures;

/* Writes f and the knobs' flags (as_engine_knobs_flags: no quote, backslash or control byte; NULL: "") to
 * path atomically (as_atomic_create / as_atomic_commit: a reader never sees half of it); when it
 * cannot, the error names the path (AS_EBADINPUT: no path, too long, a folder that does not exist;
 * AS_ERUNTIME: a write or rename refused) and no temporary is left. */
int as_bench_json_write(const char *path, const AsBenchFigures *f, const char *knob_flags, AsError *err);
