/* `attnscope check`: a dump written by another engine (its inputs, steps and tensors) replayed
 * through the reference and diffed, so a user can debug their own engine without touching
 * attnscope's. The reference runs every step from the dump's inputs; in teacher mode each layer
 * gets the dump's own input `x` where the dump stores it. */
#ifndef AS_CHECK_H
#define AS_CHECK_H

#include "driver/driver.h"

typedef struct {
    const char *dump;        /* the dump to check */
    const char *model;       /* model directory / file / preset; NULL: the dump's weights name, next to the dump */
    const char *side;        /* the side to check (NULL: the first side that is not "ref") */
    AsMode mode;
    bool ignore_digest;      /* run even when the weights' digest differs from the dump's */
    AsPrecision precision;   /* AS_PREC_AUTO: the dump's "precision" attribute, else the model's */
    const char *report_json, *report_junit;
    bool quiet;
} AsCheckOptions;

/* Returns the exit code (0 within tolerance, 1 a mismatch, 2 bad input, 3 runtime failure). */
int as_check_dump(const AsCheckOptions *o, AsError *err);

#endif
