/* The worker: one thread that runs everything that touches the driver's state (prefill,
 * decode, layers, first divergence, saves), so that the interface never blocks.
 *
 * Ownership rule (no data races): while a job is queued or running, only the worker reads or
 * writes the driver; the interface thread reads the driver only after
 * tui_worker_take_result() has returned true and before its next tui_worker_submit(). The
 * hand-over goes through the worker's mutex both ways (happens-before). While busy the
 * interface reads only tui_worker_progress() (under the mutex) and the driver's atomics
 * (progress_layer, cancel). */
#ifndef AS_TUI_WORKER_H
#define AS_TUI_WORKER_H

#include <limits.h>
#include <stdbool.h>

#include "driver/driver.h"
#include "tui/history.h"

typedef enum {
    TUI_JOB_NONE,
    TUI_JOB_OPEN,        /* the driver from opt (a preset generated on first use, the weights, the engine) */
    TUI_JOB_PREFILL,     /* n tokens (resets every state) */
    TUI_JOB_DECODE,      /* n decode steps (finishes the current step first) */
    TUI_JOB_LAYER,       /* the next layer (a finished step: begins a decode step) */
    TUI_JOB_FINISH,      /* the rest of the current step */
    TUI_JOB_DIVERGE,     /* run to the first divergence: n decode steps at most, n2 prefill tokens if needed */
    TUI_JOB_SAVE_STEP,   /* path */
    TUI_JOB_SAVE_RUN,    /* path */
    TUI_JOB_DIAGNOSE,    /* layer n of the current step: as_driver_diagnose (docs/DIAGNOSE.md) */
    TUI_JOB_COUNT
} TuiJobKind;

const char *tui_job_name(TuiJobKind k);

typedef struct {
    TuiJobKind kind;
    int n, n2;
    char path[PATH_MAX];
    AsDriverOptions opt;     /* TUI_JOB_OPEN (its strings must outlive the worker) */
} TuiJob;

typedef struct {
    TuiJobKind kind;
    int rc;                  /* 0 or an AS_E* code (AS_ECANCELLED when cancelled) */
    char msg[700];           /* one line for the message line */
    int layer;               /* the layer to show after it (-1: keep the user's) */
    AsTensorId tensor;       /* the tensor to show (AS_T_COUNT: keep) */
    double seconds;
} TuiJobResult;

typedef struct {
    bool busy;
    bool cancelling;
    TuiJobKind kind;
    int done, total;         /* decode steps / records done of the job */
    int step, layer;         /* the last layer completed (hook), -1 none */
    double seconds;          /* since the job started */
    char phase[160];         /* what the job does now, when it says ("" else) */
} TuiProgress;

typedef struct TuiWorker TuiWorker;

/* Starts the thread (signals SIGINT/SIGTERM blocked in it: they reach the interface thread)
 * and sets the driver's layer hook. d may be NULL: then the first job is TUI_JOB_OPEN. */
int tui_worker_start(AsDriver *d, TuiWorker **out, AsError *err);
/* The driver (NULL until TUI_JOB_OPEN succeeded); the caller closes it after tui_worker_stop.
 * Read like the driver: only while idle. */
AsDriver *tui_worker_driver(TuiWorker *w);
/* Cancels what runs, joins the thread, frees the worker (not the driver). */
void tui_worker_stop(TuiWorker *w);
/* Queues a job; false when one is queued or running. */
bool tui_worker_submit(TuiWorker *w, const TuiJob *job);
/* true (once per job) when a job has finished: res filled; from here the driver may be read. */
bool tui_worker_take_result(TuiWorker *w, TuiJobResult *res);
/* Asks the running job to stop (between layers). */
void tui_worker_cancel(TuiWorker *w);
bool tui_worker_busy(TuiWorker *w);
void tui_worker_progress(TuiWorker *w, TuiProgress *p);
/* The run record (read only while idle, like the driver). */
const TuiHistory *tui_worker_history(TuiWorker *w);
/* Blocks until the current job (if any) is finished: for tests and shutdown. */
void tui_worker_wait(TuiWorker *w);

#endif
