/* Rendering with curses (htop's Panel drawing): the only TUI code that includes curses besides
 * tui/term.c, which owns the terminal and the colour scheme. Everything drawn comes from the
 * view models (tui/model.h). */
#ifndef AS_TUI_DRAW_H
#define AS_TUI_DRAW_H

#include <stdbool.h>

#include "tui/model.h"

/* One line at (y, x), at most w characters, skipping the first `skip`; pads with blanks to w
 * when fill. */
void tui_draw_line(int y, int x, int w, const TuiLine *l, bool fill);
/* The panel widget: border, title, header, the visible lines, the selection, a position mark. */
void tui_draw_panel(const TuiPanel *p, const TuiGlyphs *g);
/* The whole screen (erased, drawn, refreshed): status, message, panels (or the help), key line
 * (or the prompt line). */
void tui_draw_screen(const TuiScreen *s, const TuiLine *message, const TuiLine *keys, const TuiGlyphs *g);
/* The message shown instead of the views on a terminal below the minimum size. */
void tui_draw_too_small(int cols, int rows, const TuiLine *keys);

#endif
