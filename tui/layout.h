/* Where everything goes, computed from the terminal size alone (nvtop's
 * interface_layout_selection.c): row 0 the status line, row 1 the message / progress line, the
 * body, and the key line always last. No curses here. */
#ifndef AS_TUI_LAYOUT_H
#define AS_TUI_LAYOUT_H

#include <stdbool.h>

#include "tui/text.h"

#define TUI_MIN_COLS 80
#define TUI_MIN_ROWS 24

typedef enum {
    TV_LAYERS,      /* layer list + the current layer's tensors */
    TV_TENSOR,      /* one tensor: heatmap + value inspector */
    TV_RING,        /* the window ring */
    TV_CACHES,      /* compressed and index-key caches, whose keys each index source read */
    TV_CAND,        /* candidate block grid for a query */
    TV_TOPK,        /* top-k selection side by side, index scores sparkline */
    TV_COUNT
} TuiView;

const char *tui_view_name(TuiView v);

#define TUI_MAX_PANELS 3

typedef struct {
    int cols, rows;
    bool too_small;
    bool wide;              /* side-by-side arrangement */
    TuiRect status, message, body, keys;
    int n_panels;
    TuiRect panel[TUI_MAX_PANELS];
} TuiLayout;

/* Layout of view v on a cols x rows terminal; n_layers sizes the layer list. */
void tui_layout(TuiView v, int cols, int rows, int n_layers, TuiLayout *out);
/* true when every panel lies inside the body and no two overlap (a check for tests). */
bool tui_layout_valid(const TuiLayout *l);

#endif
