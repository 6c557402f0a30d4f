/* Optional timing of the engine's stages with CUDA events (bench-engine): every projection,
 * the sparse attention, the index scores and each whole layer, accumulated per layer. Off
 * (NULL) in normal runs: then the hooks cost one pointer test. */
#ifndef AS_ENGINE_PROFILE_H
#define AS_ENGINE_PROFILE_H

#include <cuda_runtime_api.h>
#include <stdint.h>

#include "model/config.h"

typedef enum { AS_OP_LAYER, AS_OP_PROJ, AS_OP_ATTN, AS_OP_ISCORE, AS_OP_SELECT, AS_OP_COUNT } AsOp;

typedef struct {
    double ms[AS_OP_COUNT];      /* accumulated time per op */
    double flops[AS_OP_COUNT];   /* accumulated work per op */
    double bytes[AS_OP_COUNT];   /* accumulated minimal bytes per op */
} AsLayerProfile;

#define AS_PROF_MAX_EVENTS 4096

typedef struct {
    cudaEvent_t ev[AS_PROF_MAX_EVENTS][2];
    int n;
    int dropped;                    /* ops not timed because the table was full */
    struct {
        AsOp op;
        int layer;
        double flops, bytes;
    } rec[AS_PROF_MAX_EVENTS];
    int open_layer;
    double host_ms[AS_MAX_LAYERS];  /* host-side time (selection) per layer */
    AsLayerProfile layer[AS_MAX_LAYERS];
} AsProfile;

typedef struct AsEngine AsEngine;

int as_prof_create(AsProfile **p);
void as_prof_destroy(AsProfile *p);
/* Records the start of an op on the engine's stream; returns the slot for as_prof_end (-1 when off).
 * A negative flops is work per selected row of the layer (counted by build_idx this step). */
int as_prof_begin(AsEngine *e, AsOp op, int layer, double flops, double bytes);
void as_prof_end(AsEngine *e, int slot);
/* Waits for the stream and folds the recorded events into the per-layer totals. Call it
 * between steps, never with an op still open. */
int as_prof_collect(AsEngine *e);
void as_prof_reset(AsProfile *p);

#endif
