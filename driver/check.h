/* `attnscope check`: a dump written by another engine (its inputs, steps and tensors) replayed
 * through the reference and diffed, so a user can debug their own engine without touching
 * attnscope's. The reference runs every step from the dump's inputs (or, for a dump that starts
 * mid-run, from the state its /state_in group holds); in teacher mode each layer gets the dump's own
 * input `x` where the dump stores it. What the checked side stores is compared; a tensor it does not
 * store is `absent` (listed, not judged) unless required. */
#ifndef AS_CHECK_H
#define AS_CHECK_H

#include "driver/driver.h"

typedef struct {
    const char *dump;        /* the dump to check (its name in reports) */
    const char *const *inputs; /* or what to import in its place (driver/dump_source.h), n_inputs of them */
    int n_inputs;
    const char *model;       /* model directory / file / preset; NULL: found by the dump's digest in the preset
                              * cache, else its weights name beside the dump (driver/model_find.h) */
    const char *side;        /* the side to check (NULL: the first side that is not "ref") */
    AsMode mode;
    bool ignore_digest;      /* run even when the weights' digest differs from the dump's */
    AsPrecision precision;   /* AS_PREC_AUTO: the dump's "precision" attribute, else the model's */
    uint64_t require;        /* tensors (AS_DUMP_TENSOR_BIT) the checked side must store where the reference has
                              * them: absent is then a mismatch */
    AsTieOrder ties;         /* how the reference breaks exact ties (AS_TIES_CPU: torch's CPU order) */
    const char *report_json, *report_junit;
    bool quiet;
    bool diagnose;           /* each layer's first mismatching run re-run under the catalogue's wrong conventions
                              * (driver/diagnose.h), named in the reports */
} AsCheckOptions;

/* Returns the exit code (0 within tolerance, 1 a mismatch, 2 bad input, 3 runtime failure). */
int as_check_dump(const AsCheckOptions *o, AsError *err);

#endif
