/* The key map: one table that the key line (always the last line, htop's FunctionBar) and the
 * help screen are both made from, so that they cannot disagree with each other. */
#ifndef AS_TUI_KEYS_H
#define AS_TUI_KEYS_H

#include "tui/layout.h"
#include "tui/text.h"

/* Keys as the views see them: printable ASCII and control characters as themselves, the rest
 * named here (tui/term.c translates curses' codes), so that no view model depends on curses. */
enum {
    TUI_KEY_NONE = -1,
    TUI_KEY_TAB = '\t',
    TUI_KEY_ENTER = '\r',
    TUI_KEY_ESC = 27,
    TUI_KEY_BACKSPACE = 127,
    TUI_KEY_UP = 0x1000,
    TUI_KEY_DOWN,
    TUI_KEY_LEFT,
    TUI_KEY_RIGHT,
    TUI_KEY_PGUP,
    TUI_KEY_PGDN,
    TUI_KEY_HOME,
    TUI_KEY_END,
    TUI_KEY_BTAB,
    TUI_KEY_RESIZE,
};
#define TUI_KEY_CTRL(c) ((c) & 0x1f)

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
