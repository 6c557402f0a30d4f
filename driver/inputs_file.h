/* Layer inputs from a file: a dump's /inputs/h0 or any HDF5 file with a [tokens][dim] dataset. */
#ifndef AS_INPUTS_FILE_H
#define AS_INPUTS_FILE_H

#include "model/errors.h"

/* Reads dataset `name` (NULL: "inputs/h0" if present, else the first 2-D floating dataset found
 * at the root) as [tokens][dim] floats rounded to bf16 values. dim must match; tokens <= max_tokens. */
int as_inputs_file_load(const char *path, const char *name, int dim, int max_tokens, float **out, int *tokens,
                        AsError *err);

#endif
