/* The interactive step debugger (`attnscope tui`, and `attnscope` alone): docs/TUI.md. */
#ifndef AS_TUI_H
#define AS_TUI_H

#include "driver/driver.h"

typedef struct {
    AsDriverOptions drv;
    int prefill;            /* > 0: prefill this many tokens at start */
    const char *label;      /* model name for the status line (NULL: drv.model) */
} AsTuiOptions;

/* Opens the driver, runs the interface until q, returns the exit status (0; AS_E* codes when
 * the driver cannot open or there is no terminal, with the message on stderr). */
int as_tui_main(const AsTuiOptions *o);

#endif
