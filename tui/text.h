/* What the TUI shows, without curses: lines of UTF-8 (or ASCII) text with colour roles per
 * character, the glyph sets for UTF-8 and ASCII terminals, and the panel, the one widget every
 * view is made of (htop's Panel: a titled box of lines, one of them selected, scrolled to keep
 * it visible). tui/model_*.c fill these; tui/draw_*.c put them on the terminal. */
#ifndef AS_TUI_TEXT_H
#define AS_TUI_TEXT_H

#include <stdbool.h>
#include <stddef.h>

/* Colour roles; tui/draw_screen.c maps each to a colour pair, or to an attribute on a
 * monochrome terminal. */
typedef enum {
    TC_NORMAL,
    TC_DIM,       /* not run, empty, absent */
    TC_TITLE,     /* panel titles */
    TC_HEADER,    /* column headers */
    TC_KEY,       /* a key in the key line and the help */
    TC_SELECT,    /* the selected line of the focused panel */
    TC_PASS,
    TC_FLIPS,
    TC_NEARTIE,
    TC_MISMATCH,
    TC_REFONLY,   /* ran without a checked side */
    TC_GOOD,      /* kept, attended, filled */
    TC_WARN,      /* quirks shown: aliasing, stale selection */
    TC_BAD,       /* dropped blocks, errors */
    TC_ACCENT,    /* written this step, pinned block, the cut */
    TC_ONLY_GOT,  /* in the engine's set only */
    TC_ONLY_WANT, /* in the reference's set only */
    TC_HEAT1,
    TC_HEAT2,
    TC_HEAT3,
    TC_HEAT4,
    TC_CURSOR,    /* the heatmap cursor */
    TC_BUSY,
    TC_COUNT
} TuiColor;

/* One line: text (UTF-8) and one colour per character (code point). */
typedef struct {
    char *text;
    size_t len, cap;        /* bytes */
    unsigned char *color;   /* one TuiColor per character */
    int nchars, ccap;
} TuiLine;

void tl_init(TuiLine *l);
void tl_free(TuiLine *l);
void tl_clear(TuiLine *l);
/* Appends formatted text in one colour. */
void tl_add(TuiLine *l, TuiColor c, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
/* Appends text as is (no format). */
void tl_put(TuiLine *l, TuiColor c, const char *s);
/* Pads with spaces to n characters (no-op when already wider). */
void tl_pad(TuiLine *l, int n, TuiColor c);
/* Appends text padded (or cut) to exactly n characters. */
void tl_field(TuiLine *l, TuiColor c, int n, const char *fmt, ...) __attribute__((format(printf, 4, 5)));
/* Recolours every character already there. */
void tl_recolor(TuiLine *l, TuiColor c);
void tl_copy(TuiLine *dst, const TuiLine *src);
/* Appends src (text and colours) to dst; _range: its characters from .. to - 1. */
void tl_append(TuiLine *dst, const TuiLine *src);
void tl_append_range(TuiLine *dst, const TuiLine *src, int from, int to);
/* A legend's item: a mark in its colour, then what it means in another. */
void tl_item(TuiLine *l, TuiColor mark_color, const char *mark, TuiColor text_color, const char *text);
/* Keeps the first n characters. */
void tl_truncate(TuiLine *l, int n);
/* Fits the line into width characters: a longer one is cut after its last whole word that
 * leaves room for the ellipsis, which is appended (in the colour of what it follows). Returns
 * whether it was cut. */
bool tl_fit(TuiLine *l, int width, const char *ellipsis);
/* Byte offset of character i (len when i >= nchars). */
size_t tl_offset(const TuiLine *l, int i);
/* Number of characters (code points) of a UTF-8 string. */
int tui_utf8_len(const char *s);

/* A growable list of lines. */
typedef struct {
    TuiLine *v;
    int n, cap;
} TuiLines;

void tls_init(TuiLines *ls);
void tls_free(TuiLines *ls);
void tls_clear(TuiLines *ls);
/* A new empty line at the end (NULL on OOM: callers may ignore, the line is then lost). */
TuiLine *tls_new(TuiLines *ls);
/* tls_new + tl_add in one. */
TuiLine *tls_add(TuiLines *ls, TuiColor c, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
/* Adds text as lines of at most width characters, broken at spaces; continuation lines are
 * indented by indent. */
void tls_add_wrapped(TuiLines *ls, TuiColor c, const char *text, int width, int indent);
/* The same for a coloured line: each character keeps its colour. */
void tls_add_wrapped_line(TuiLines *ls, const TuiLine *l, int width, int indent);
/* Finds the first line containing s (-1 none); for tests and the tmux script's twins. */
int tls_find(const TuiLines *ls, const char *s);

/* ---- glyphs ----------------------------------------------------------------------------- */

typedef struct {
    bool utf8;
    const char *h, *v, *tl, *tr, *bl, *br;      /* panel borders */
    const char *spin[10];
    int n_spin;
    const char *shade[5];                        /* heat: zero, then four levels */
    const char *spark[8];                        /* sparkline levels */
    const char *block_kept, *block_dropped, *block_pinned, *block_hidden;
    const char *bar_full, *bar_empty;            /* gauges */
    const char *marker;                          /* the selected line's marker */
    const char *next;                            /* the next layer to run */
    const char *dot;                             /* attended */
    const char *ellipsis;
    const char *minus_inf;
} TuiGlyphs;

extern const TuiGlyphs tui_glyphs_utf8, tui_glyphs_ascii;

/* ---- the panel widget ------------------------------------------------------------------ */

typedef struct {
    int x, y, w, h;         /* outer box, border included */
} TuiRect;

#define TUI_MAX_COLS 12
#define TUI_MAX_TABLES 4

/* A table's columns in a panel: lines first .. first + n_lines - 1 (and the panel's header
 * when header) start their columns at x[0..n_cols). */
typedef struct {
    int first, n_lines, n_cols;
    bool header;
    int x[TUI_MAX_COLS];
} TuiColumns;

typedef struct {
    TuiRect r;
    bool used;
    bool focused;           /* title highlighted; the selected line shown as selected */
    char title[192];
    TuiLine header;         /* column header (empty: none) */
    TuiLines lines;
    int sel;                /* selected line (-1: none) */
    int top;                /* first line shown */
    TuiLines full;          /* the whole text of the lines (and title) that were cut to fit */
    TuiColumns table[TUI_MAX_TABLES];   /* where tables put their columns (for the layout checks) */
    int n_tables;
} TuiPanel;

void tp_init(TuiPanel *p);
void tp_free(TuiPanel *p);
void tp_reset(TuiPanel *p);   /* empty, keeps the rect */
/* Inner size (without the border and header). */
int tp_inner_w(const TuiPanel *p);
int tp_inner_h(const TuiPanel *p);
/* Scrolls so that sel stays visible, starting from *top (kept by the caller between builds);
 * writes the result back to *top and to p->top. */
void tp_follow(TuiPanel *p, int *top);
/* Fits the title, the header and every line to the inner width (tl_fit); the whole text of
 * each line cut goes to p->full. Returns the number of lines cut. */
int tp_fit(TuiPanel *p, const char *ellipsis);

#endif
