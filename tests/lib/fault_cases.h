/* Where each named fault must first show at the tiny preset (prefill 16 tokens, then decode),
 * tensors in forward order. Shared by the CPU test (reference twin) and the GPU test (engine). */
#ifndef AS_TEST_FAULT_CASES_H
#define AS_TEST_FAULT_CASES_H

#include "ref/faults.h"

typedef struct {
    AsFault fault;
    int step, layer;
    AsTensorId tensor;
    const char *why;
} AsFaultCase;

static const AsFaultCase as_fault_cases[] = {
    {AS_FAULT_RING_SLOT, 1, 0, AS_T_ROWS_A, "the first decode writes the ring one slot off; layer 0 attends it"},
    {AS_FAULT_ROPE_BACKWARDS, 0, 0, AS_T_Q, "token 1 of the prefill is rotated by -angle"},
    {AS_FAULT_SINK_IGNORED, 0, 0, AS_T_O, "every layer's softmax loses the sink"},
    {AS_FAULT_CAND_MASK_OFF, 0, 7, AS_T_ISCORE, "layer 7 is the first candidate user; 16 tokens narrow the mask"},
    {AS_FAULT_FP4_SCALE, 0, 1, AS_T_LATENT_Q, "layer 1 is the first kv source; the prefill completes groups"},
    {AS_FAULT_NO_OFFSET, 0, 1, AS_T_CSEL, "layer 1 is the first index source with a compressed selection"},
    /* layer 5 (ratio 1) is the first owner with new keys in a decode: the keys it scores against
     * lack the new row */
    {AS_FAULT_STALE_KEYS, 1, 5, AS_T_KEYS, "layer 5's first decode key is not written"},
};

#define AS_N_FAULT_CASES ((int)(sizeof as_fault_cases / sizeof as_fault_cases[0]))

#endif
