#include "ref/faults.h"

#include <stdio.h>
#include <string.h>

const AsFaultDesc as_fault_desc[AS_FAULT_COUNT] = {
    [AS_FAULT_NONE] = {"none", "no fault", AS_T_COUNT, "-"},
    [AS_FAULT_RING_SLOT] = {"ring-slot", "decode writes the window row into slot (start_pos + 1) % window",
                            AS_T_ROWS_A, "every layer, first decode step"},
    [AS_FAULT_ROPE_BACKWARDS] = {"rope-backwards", "queries rotated by -angle instead of +angle", AS_T_Q,
                                 "every layer, any step (position > 0)"},
    [AS_FAULT_SINK_IGNORED] = {"sink-ignored", "the attention sink left out of the softmax denominator", AS_T_O,
                               "every layer"},
    [AS_FAULT_CAND_MASK_OFF] = {"cand-mask-off", "candidate users score without the candidate mask",
                                AS_T_ISCORE, "candidate users, once the candidate selection narrows"},
    [AS_FAULT_FP4_SCALE] = {"fp4-scale", "compressed-cache rows written at twice their fp4-e4m3 value",
                            AS_T_LATENT_Q, "kv sources, first step that completes a group"},
    [AS_FAULT_NO_OFFSET] = {"no-offset", "compressed picks not offset by the number of window rows", AS_T_CSEL,
                            "index sources, first step with a compressed selection"},
    [AS_FAULT_STALE_KEYS] = {"stale-keys", "in decode steps key owners do not write their new index keys",
                             AS_T_KEYS, "key owners, the first decode step that completes a group"},
};

AsFault as_fault_by_name(const char *name)
{
    for (int i = 0; i < AS_FAULT_COUNT; i++)
        if (strcmp(as_fault_desc[i].name, name) == 0)
            return (AsFault)i;
    return AS_FAULT_COUNT;
}

void as_fault_names(char *buf, size_t n)
{
    size_t k = 0;
    if (n)
        buf[0] = '\0';
    for (int i = AS_FAULT_NONE + 1; i < AS_FAULT_COUNT && k < n; i++)
        k += (size_t)snprintf(buf + k, n - k, "%s%s", i > AS_FAULT_NONE + 1 ? ", " : "", as_fault_desc[i].name);
}
