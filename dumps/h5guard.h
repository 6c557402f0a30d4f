/* HDF5 1.10 follows the structures of a damaged file blindly where its older formats have no
 * checksums, and can crash doing so. Reads of files that are not known to be checksummed run
 * in a child process: a crash there becomes a clean AS_EBADINPUT in the caller. */
#ifndef AS_H5GUARD_H
#define AS_H5GUARD_H

#include <stddef.h>

#include "model/errors.h"

typedef int (*AsGuardFn)(void *ctx, AsError *err);

/* Runs fn(ctx) in a child process and returns its code and message; a child killed by a
 * signal gives AS_EBADINPUT "WHAT: damaged: ...". What the child writes into memory from
 * as_guard_alloc reaches the caller; anything else it changes does not. Without fork (or a
 * pipe), fn runs in process. */
int as_guard_run(AsGuardFn fn, void *ctx, const char *what, AsError *err);
/* Memory shared with the child (zeroed); NULL when bytes is 0 or on failure. */
void *as_guard_alloc(size_t bytes);
void as_guard_free(void *p, size_t bytes);

#endif
