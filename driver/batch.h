/* The batch mode: runs a script through the driver, dumps what it asks for, writes the reports,
 * and turns the outcome into the exit code (0 within tolerance, 1 a mismatch, 2 bad input,
 * 3 a runtime failure). */
#ifndef AS_BATCH_H
#define AS_BATCH_H

#include "driver/script.h"

typedef struct {
    const char *report_json, *report_junit, *dump_path;  /* override the script's (CWD-relative) */
    bool quiet;                                          /* no progress on stderr */
    bool no_engine;
    bool host_select;                                    /* the engine's top-k on the host */
    const AsEngineKnobs *knobs;                          /* the engine's knobs; NULL: the defaults */
    const char *bf16_model;                              /* overrides the script's "bf16_model" */
    bool diagnose;                                       /* diagnoses as the script's "diagnose" does */
} AsBatchOptions;

/* Returns the exit code; err holds the message of a failure (codes 2 and 3). */
int as_batch_run(const AsScript *s, const AsBatchOptions *o, AsError *err);

#endif
