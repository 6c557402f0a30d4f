/* Synthetic token inputs: one normal-ish bf16 value per (position, channel). */
#include "model/inputs.h"

#include <stdio.h>

#include "model/gen.h"
#include "ref/numerics.h"

void as_inputs_synthetic(uint64_t seed, int pos0, int s, int dim, float *h0)
{
    for (int t = 0; t < s; t++) {
        char name[40];
        snprintf(name, sizeof name, "inputs.%lld", (long long)pos0 + t);
        uint64_t key = as_gen_key(seed, as_gen_fnv1a(name));
        for (int i = 0; i < dim; i++)
            h0[(size_t)t * (size_t)dim + (size_t)i] = as_bf16((float)as_gen_normal(as_gen_hash(key, (uint64_t)i)));
    }
}
