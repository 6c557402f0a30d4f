#include "tui/table.h"

#include <stdlib.h>
#include <string.h>

void tt_init(TuiTable *t, const TuiColumn *cols, int n_cols, int lead)
{
    memset(t, 0, sizeof *t);
    t->n_cols = n_cols < TUI_TABLE_COLS ? n_cols : TUI_TABLE_COLS;
    memcpy(t->col, cols, sizeof *cols * (size_t)t->n_cols);
    t->lead = lead;
}

void tt_free(TuiTable *t)
{
    for (int i = 0; i < t->n_rows * t->n_cols; i++)
        tl_free(&t->cell[i]);
    for (int i = 0; i < t->n_rows; i++)
        tl_free(&t->lead_cell[i]);
    free(t->cell);
    free(t->lead_cell);
    memset(t, 0, sizeof *t);
}

TuiLine *tt_row(TuiTable *t)
{
    if (t->n_rows == t->cap) {
        int cap = t->cap ? t->cap * 2 : 16;
        TuiLine *c = realloc(t->cell, sizeof *c * (size_t)cap * (size_t)t->n_cols);
        if (!c)
            return NULL;
        t->cell = c;
        TuiLine *l = realloc(t->lead_cell, sizeof *l * (size_t)cap);
        if (!l)
            return NULL;
        t->lead_cell = l;
        t->cap = cap;
    }
    TuiLine *row = &t->cell[t->n_rows * t->n_cols];
    for (int c = 0; c < t->n_cols; c++)
        tl_init(&row[c]);
    tl_init(&t->lead_cell[t->n_rows]);
    t->n_rows++;
    return row;
}

TuiLine *tt_lead(TuiTable *t) { return t->n_rows ? &t->lead_cell[t->n_rows - 1] : NULL; }

static const TuiLine *cell(const TuiTable *t, int r, int c) { return &t->cell[r * t->n_cols + c]; }

/* One row (r < 0: the header) with the columns shown and their widths; the last shown column
 * unpadded. */
static void render_row(const TuiTable *t, int r, const bool *shown, const int *w, int gap, const char *ellipsis,
                       TuiLine *o)
{
    TuiColor hc = TC_HEADER;
    if (r < 0)
        tl_pad(o, t->lead, hc);
    else
        tl_append(o, &t->lead_cell[r]), tl_pad(o, t->lead, TC_NORMAL);
    int last = -1;
    for (int c = 0; c < t->n_cols; c++)
        if (shown[c])
            last = c;
    bool first = true;
    for (int c = 0; c < t->n_cols; c++) {
        if (!shown[c])
            continue;
        if (!first)
            tl_pad(o, o->nchars + gap, r < 0 ? hc : TC_NORMAL);
        first = false;
        int start = o->nchars;
        TuiLine h;
        tl_init(&h);
        if (r < 0)
            tl_put(&h, hc, t->col[c].head);
        if (r >= 0)
            tl_copy(&h, cell(t, r, c));
        if (c != last)
            tl_fit(&h, w[c], ellipsis);
        const TuiLine *src = &h;
        if (t->col[c].right)
            tl_pad(o, start + w[c] - src->nchars, r < 0 ? hc : TC_NORMAL);
        tl_append(o, src);
        if (c != last)
            tl_pad(o, start + w[c], r < 0 ? hc : TC_NORMAL);
        tl_free(&h);
    }
}

static int total(const TuiTable *t, const bool *shown, const int *w, int gap)
{
    int sum = t->lead, n = 0;
    for (int c = 0; c < t->n_cols; c++)
        if (shown[c])
            sum += w[c], n++;
    return sum + (n > 1 ? (n - 1) * gap : 0);
}

/* Whether row r loses text at these widths: a dropped column's cell, a cell cut to its width. */
static bool row_loses(const TuiTable *t, int r, const bool *shown, const int *w, int last)
{
    for (int c = 0; c < t->n_cols; c++) {
        int n = cell(t, r, c)->nchars;
        if ((!shown[c] && n > 0) || (shown[c] && c != last && n > w[c]))
            return true;
    }
    return false;
}

void tt_render(const TuiTable *t, int width, const char *ellipsis, TuiPanel *p)
{
    int w[TUI_TABLE_COLS], full_w[TUI_TABLE_COLS];
    bool shown[TUI_TABLE_COLS], all[TUI_TABLE_COLS];
    for (int c = 0; c < t->n_cols; c++) {
        w[c] = tui_utf8_len(t->col[c].head);
        for (int r = 0; r < t->n_rows; r++)
            w[c] = cell(t, r, c)->nchars > w[c] ? cell(t, r, c)->nchars : w[c];
        full_w[c] = w[c];
        /* a column empty in every row is left out */
        bool any = t->n_rows == 0;
        for (int r = 0; r < t->n_rows && !any; r++)
            any = cell(t, r, c)->nchars > 0;
        shown[c] = all[c] = any;
    }
    int gap = total(t, shown, w, 2) > width ? 1 : 2;
    /* drop by priority, highest first, until everything fits or only priority 0 is left */
    while (total(t, shown, w, gap) > width) {
        int drop = -1;
        for (int c = t->n_cols - 1; c >= 0; c--)
            if (shown[c] && t->col[c].prio > 0 && (drop < 0 || t->col[c].prio > t->col[drop].prio))
                drop = c;
        if (drop < 0)
            break;
        shown[drop] = false;
    }
    int last = -1;
    for (int c = 0; c < t->n_cols; c++)
        if (shown[c])
            last = c;
    /* what is still missing comes out of the shrinking columns (the last one is cut at the end) */
    int excess = total(t, shown, w, gap) - width;
    for (int c = 0; c < t->n_cols && excess > 0; c++)
        if (shown[c] && t->col[c].shrink && c != last) {
            int give = w[c] - 4 < excess ? w[c] - 4 : excess;
            if (give > 0)
                w[c] -= give, excess -= give;
        }
    TuiColumns cols = {.header = !t->header_line};
    int x = t->lead;
    for (int c = 0; c < t->n_cols; c++) {
        if (!shown[c])
            continue;
        if (cols.n_cols)
            x += gap;
        cols.x[cols.n_cols++] = x;
        x += w[c];
    }
    TuiLine *head = &p->header;
    if (t->header_line) {
        cols.first = p->lines.n;
        if (!(head = tls_new(&p->lines)))
            return;
    } else {
        tl_clear(head);
    }
    render_row(t, -1, shown, w, gap, ellipsis, head);
    tl_fit(head, width, ellipsis);
    if (!t->header_line)
        cols.first = p->lines.n;
    cols.n_lines = t->n_rows + (t->header_line ? 1 : 0);
    if (p->n_tables < TUI_MAX_TABLES)
        p->table[p->n_tables++] = cols;
    for (int r = 0; r < t->n_rows; r++) {
        TuiLine *o = tls_new(&p->lines);
        if (!o)
            return;
        render_row(t, r, shown, w, gap, ellipsis, o);
        if (o->nchars > width || row_loses(t, r, shown, w, last)) {
            TuiLine *whole = tls_new(&p->full);
            if (whole)
                render_row(t, r, all, full_w, 2, ellipsis, whole);
            o = &p->lines.v[p->lines.n - 1];
        }
        tl_fit(o, width, ellipsis);
    }
}
