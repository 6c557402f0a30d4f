/* The key map: one table that the key line (always the last line, htop's FunctionBar) and the
 * help screen are both made from, so that they cannot disagree with each other. */
#ifndef AS_TUI_KEYS_H
#define AS_TUI_KEYS_H

#include "tui/layout.h"
#include "tui/text.h"

typedef enum {
    TUI_KL_IDLE,        /* the view's keys */
    TUI_KL_BUSY,        /* the worker runs: cancel, help, quit */
    TUI_KL_HELP,        /* the help screen is up */
    TUI_KL_SMALL,       /* the terminal is too small */
} TuiKeyLineMode;

/* The key line for view v at this width: the most important keys that fit, in table order. */
void tui_key_line(TuiLine *l, int width, TuiView v, TuiKeyLineMode mode, const TuiGlyphs *g);

/* The help screen lines. */
void tui_model_help_lines(TuiLines *ls, const TuiGlyphs *g, int width);

#endif
