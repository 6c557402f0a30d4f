/* The attention tensors each layer's role needs: one table for the loader's checks and for
 * the synthetic models gen writes (SPEC section 1). */
#ifndef AS_MODEL_LOAD_H
#define AS_MODEL_LOAD_H

#include <stdint.h>

#include "model/config.h"

typedef enum {
    AS_WK_PROJ,     /* projection [out, in]: BF16, F16, F32 or F8_E4M3 with a block scale */
    AS_WK_NORM,     /* RMSNorm weight: F32 (BF16, F16 accepted) */
    AS_WK_SINK,     /* attn_sink: F32 (BF16, F16 accepted) */
    AS_WK_F32,      /* ratio-2 compressor wkv: F32 only */
    AS_WK_GATE,     /* ratio-2 compressor wgate: F32 only */
} AsWeightKind;

#define AS_LAYER_MAX_TENSORS 20

typedef struct {
    char name[192];         /* "layers.3.attn.wq_b.weight" */
    AsWeightKind kind;
    int ndim;
    int64_t shape[2];
    const char *why;        /* why the role needs it ("it is an index source") */
    size_t slot;            /* offsetof(AsLayerWeights, ...) it fills */
} AsLayerTensor;

/* The tensors layer l of a validated config needs, in a fixed order; returns how many (at most
 * AS_LAYER_MAX_TENSORS). */
int as_layer_tensors(const AsConfig *cfg, int l, AsLayerTensor *out);

#endif
