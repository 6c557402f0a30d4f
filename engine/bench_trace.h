/* bench-engine --trace: one decode step through the graph on the device's own timeline. */
#pragma once

#include <stdio.h>

#include "engine/engine.h"

/* Runs `steps` decode steps through a fresh graph under a trace (engine/trace.h; inputs h0, one row a
 * step, from position pos0; steps >= 3: the first two capture), then reports the last replay: its span
 * against graph_ms (the untraced graph's median), per layer kind (kind[l]: layer l's kind name) the
 * span and idle time a layer, and the first layer of each kind kernel by kernel; writes the step to
 * path as a Chrome trace. */
int as_bench_trace(AsEngine *e, const float *h0, int pos0, int steps, const char *path, const char (*kind)[48],
                   double graph_ms, FILE *md, AsError *err);
