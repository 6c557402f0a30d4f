/* The device's own timeline of a decode graph (bench-engine --trace): CUPTI's activity records of every
 * kernel, copy and memset a replay runs, with their device start and end, each kernel named by the
 * engine launch that captured it. CUPTI is loaded when a trace begins (dlopen: libcupti.so.13 from the
 * bundle or the CUDA toolkit), so that attnscope runs where it is missing; only --trace needs it. */
#pragma once

#include <cuda_runtime_api.h>
#include <stdbool.h>

#include "engine/trace_report.h"
#include "model/errors.h"

/* True between as_trace_begin and as_trace_end: every engine call (check.h's CU and KL) then calls
 * as_trace_tag with its description, which names the graph nodes the call added to a watched stream
 * that is capturing. */
extern bool as_trace_tagging;
void as_trace_tag(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* The streams a capture runs on (the engine's main and kv-branch streams); a and b may be equal. */
void as_trace_watch(cudaStream_t a, cudaStream_t b);

typedef struct AsTrace AsTrace;

/* Loads CUPTI and starts recording: graph nodes created from now on get the launches' names, and
 * kernels, copies and memsets of every stream are recorded. One trace at a time (CUPTI allows one
 * subscriber a process: under Nsight or compute-sanitizer this fails with that reason). */
int as_trace_begin(AsTrace **out, AsError *err);

/* The events recorded since the begin or the last collect, sorted by start, each tagged with its
 * launch where one named it (*ev malloc'd, the caller frees it). *untagged: kernels none named. */
int as_trace_collect(AsTrace *t, AsTraceEvent **ev, int *n, int *untagged, AsError *err);

void as_trace_end(AsTrace *t);
