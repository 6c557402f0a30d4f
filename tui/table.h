/* A table of coloured cells fitted to a panel's width by one rule: every column as wide as its
 * widest cell, separated by two spaces (one when that is what fits); columns dropped by
 * priority, highest first, until the rest fit; then the column marked to shrink gives up what
 * is still missing, its cells cut after a whole word with an ellipsis; the last column (free
 * text) takes what is left and is cut the same way. A row that lost anything is also kept whole,
 * for the full-text overlay. A column empty in every row is left out. Column starts are recorded so that tests can check that no two
 * columns touch. */
#ifndef AS_TUI_TABLE_H
#define AS_TUI_TABLE_H

#include "tui/text.h"

#define TUI_TABLE_COLS TUI_MAX_COLS

typedef struct {
    const char *head;
    int prio;               /* 0: always shown; higher numbers are dropped first */
    bool right;             /* right-aligned (numbers) */
    bool shrink;            /* gives up width when the columns kept do not fit */
} TuiColumn;

typedef struct {
    int n_cols;
    TuiColumn col[TUI_TABLE_COLS];
    TuiLine *cell;          /* [n_rows][n_cols] */
    int n_rows, cap;
    int lead;               /* characters before the first column (a selection marker) */
    TuiLine *lead_cell;     /* [n_rows] */
    bool header_line;       /* the header goes into the lines (several tables in one panel) */
} TuiTable;

void tt_init(TuiTable *t, const TuiColumn *cols, int n_cols, int lead);
void tt_free(TuiTable *t);
/* A new row; returns its first cell (cells are consecutive: cell[c]), NULL on OOM. */
TuiLine *tt_row(TuiTable *t);
/* The lead cell of the last row. */
TuiLine *tt_lead(TuiTable *t);
/* Lays the table out in width characters: the header into p->header (or, header_line, as a
 * line), the rows appended to p->lines, the rows that lost a column or were cut to p->full, the
 * column starts to p->table[]. */
void tt_render(const TuiTable *t, int width, const char *ellipsis, TuiPanel *p);

#endif
