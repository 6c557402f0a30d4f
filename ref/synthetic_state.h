/* For benchmarks only: a reference stack put in the state it would have after `context` tokens
 * (rings full, caches filled to context / ratio rows with random values on their quantisers'
 * grids, the shared state as the last layer of a step leaves it), so that a decode step at a
 * long context can be timed without first running that long prefill on the CPU. The values
 * are not a model's: only the shapes, the amounts of work and the memory traffic are. */
#ifndef AS_SYNTHETIC_STATE_H
#define AS_SYNTHETIC_STATE_H

#include "ref/stack.h"

int as_ref_stack_fast_forward(AsRefStack *k, int context, uint64_t seed, AsError *err);

#endif
