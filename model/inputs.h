/* The synthetic token inputs a run uses by default (documented in docs/MODEL_FILES.md). */
#ifndef AS_INPUTS_H
#define AS_INPUTS_H

#include <stdint.h>

/* h0[t][i] = bf16(N(0,1)) for positions pos0 .. pos0 + s - 1 and channels 0 .. dim - 1, seeded per
 * position: the input at position p is element i of a virtual tensor named "inputs.<p>" of the
 * gen generator, so a decode step at p sees what a prefill sees at p. */
void as_inputs_synthetic(uint64_t seed, int pos0, int s, int dim, float *h0);

#endif
