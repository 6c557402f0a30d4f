/* The session's record of every layer run since the last prefill, so that "save the run" can
 * write all the steps (the driver keeps only the current one). Copies are taken by the driver's
 * layer hook on the worker thread, within a memory budget ($ATTNSCOPE_TUI_HISTORY_MB, default
 * 1024; 0 turns recording off); past the budget recording stops and says where. */
#ifndef AS_TUI_HISTORY_H
#define AS_TUI_HISTORY_H

#include <stdbool.h>
#include <stddef.h>

#include "driver/driver.h"

typedef struct {
    int step, layer;
    bool prefill;
    int start_pos, s;
    AsRun ref, got;
    bool has_got;
    AsLayerDiff *diff;      /* NULL without a checked side */
} TuiRec;

typedef struct {
    TuiRec *v;
    int n, cap;
    size_t bytes, budget;
    bool full;              /* recording stopped: the budget was reached */
    int full_step, full_layer;
} TuiHistory;

/* budget in bytes; (size_t)-1 reads $ATTNSCOPE_TUI_HISTORY_MB. */
void tui_history_init(TuiHistory *h, size_t budget);
void tui_history_free(TuiHistory *h);
void tui_history_reset(TuiHistory *h);
/* Records one layer (a step 0 layer 0 record starts a new run: the history is reset first).
 * Returns 0, or -1 when not recorded (budget reached or out of memory: h->full says). */
int tui_history_add(TuiHistory *h, const AsStepInfo *cur, int layer, const AsRun *got, const AsRun *ref,
                    const AsLayerDiff *diff);
/* Number of distinct steps held. */
int tui_history_steps(const TuiHistory *h);

/* ---- saving (through dumps/dump.h: a temporary renamed into place on commit) ---------------- */

/* The current step: every layer run so far in it, both sides, the diffs. msg gets one line. */
int tui_save_step(AsDriver *d, const char *path, char *msg, size_t n, AsError *err);
/* The whole run as recorded in h. */
int tui_save_run(AsDriver *d, const TuiHistory *h, const char *path, char *msg, size_t n, AsError *err);

#endif
