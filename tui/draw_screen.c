#include <curses.h>
#include <stdio.h>
#include <string.h>

#include "tui/draw.h"
#include "tui/term.h"

static attr_t attr_of(TuiColor c) { return (attr_t)tui_term_attr(c); }

static void draw_span(int y, int x, const char *s, size_t bytes, attr_t a)
{
    attrset(a);
    mvaddnstr(y, x, s, (int)bytes);
}

/* The line with an attribute added to every character (selection). */
static void draw_line_attr(int y, int x, int w, const TuiLine *l, bool fill, attr_t extra, bool replace)
{
    int n = l->nchars < w ? l->nchars : w;
    int i = 0;
    while (i < n) {
        int j = i;
        while (j < n && l->color[j] == l->color[i])
            j++;
        size_t a = tl_offset(l, i), b = tl_offset(l, j);
        attr_t at = replace ? extra : attr_of((TuiColor)l->color[i]) | extra;
        draw_span(y, x + i, l->text + a, b - a, at);
        i = j;
    }
    if (fill && n < w) {
        attrset(replace ? extra : A_NORMAL);
        mvhline(y, x + n, ' ', w - n);
    }
    attrset(A_NORMAL);
}

void tui_draw_line(int y, int x, int w, const TuiLine *l, bool fill) { draw_line_attr(y, x, w, l, fill, 0, false); }

static void put_glyph(int y, int x, const char *s, attr_t a)
{
    attrset(a);
    mvaddstr(y, x, s);
}

void tui_draw_panel(const TuiPanel *p, const TuiGlyphs *g)
{
    const TuiRect r = p->r;
    if (!p->used || r.w < 3 || r.h < 2)
        return;
    attr_t border = p->focused ? attr_of(TC_TITLE) : A_NORMAL;
    put_glyph(r.y, r.x, g->tl, border);
    put_glyph(r.y, r.x + r.w - 1, g->tr, border);
    put_glyph(r.y + r.h - 1, r.x, g->bl, border);
    put_glyph(r.y + r.h - 1, r.x + r.w - 1, g->br, border);
    for (int x = r.x + 1; x < r.x + r.w - 1; x++) {
        put_glyph(r.y, x, g->h, border);
        put_glyph(r.y + r.h - 1, x, g->h, border);
    }
    for (int y = r.y + 1; y < r.y + r.h - 1; y++) {
        put_glyph(y, r.x, g->v, border);
        put_glyph(y, r.x + r.w - 1, g->v, border);
    }
    /* the title on the top border */
    if (p->title[0]) {
        TuiLine t;
        tl_init(&t);
        tl_add(&t, p->focused ? TC_SELECT : TC_TITLE, " %s ", p->title);
        tui_draw_line(r.y, r.x + 2, r.w - 4, &t, false);
        tl_free(&t);
    }
    int iw = r.w - 2, y = r.y + 1;
    if (p->header.nchars) {
        draw_line_attr(y, r.x + 1, iw, &p->header, true, attr_of(TC_HEADER), true);
        y++;
    }
    int ih = tp_inner_h(p);
    for (int i = 0; i < ih; i++) {
        int li = p->top + i;
        if (li >= p->lines.n) {
            attrset(A_NORMAL);
            mvhline(y + i, r.x + 1, ' ', iw);
            continue;
        }
        const TuiLine *l = &p->lines.v[li];
        if (li == p->sel)
            draw_line_attr(y + i, r.x + 1, iw, l, true, p->focused ? attr_of(TC_SELECT) : A_UNDERLINE | A_BOLD,
                           p->focused);
        else
            tui_draw_line(y + i, r.x + 1, iw, l, true);
    }
    /* lines were cut to fit: the key that shows them whole */
    if (p->full.n && r.w > 40) {
        TuiLine t;
        tl_init(&t);
        tl_add(&t, TC_DIM, " %s v: the whole text ", g->ellipsis);
        tui_draw_line(r.y + r.h - 1, r.x + 2, t.nchars, &t, false);
        tl_free(&t);
    }
    /* where the view is in a longer list */
    if (p->lines.n > ih && ih > 0 && r.w > 16) {
        char pos[48];
        int last = p->top + ih < p->lines.n ? p->top + ih : p->lines.n;
        snprintf(pos, sizeof pos, " %d-%d of %d ", p->top + 1, last, p->lines.n);
        TuiLine t;
        tl_init(&t);
        tl_put(&t, TC_DIM, pos);
        int len = t.nchars;
        tui_draw_line(r.y + r.h - 1, r.x + r.w - 2 - len, len, &t, false);
        tl_free(&t);
    }
    attrset(A_NORMAL);
}

void tui_draw_screen(const TuiScreen *s, const TuiLine *message, const TuiLine *keys, const TuiGlyphs *g)
{
    const TuiLayout *l = &s->lay;
    erase();
    tui_draw_line(l->status.y, 0, l->cols, &s->status, true);
    if (message)
        tui_draw_line(l->message.y, 0, l->cols, message, true);
    if (s->overlay.used) {
        tui_draw_panel(&s->overlay, g);
    } else {
        for (int i = 0; i < s->n_panels; i++)
            tui_draw_panel(&s->panel[i], g);
    }
    if (keys)
        tui_draw_line(l->keys.y, 0, l->cols, keys, true);
    refresh();
}

void tui_draw_too_small(int cols, int rows, const TuiLine *keys)
{
    char msg[160];
    snprintf(msg, sizeof msg, "terminal %dx%d is smaller than %dx%d: enlarge it", cols, rows, TUI_MIN_COLS,
             TUI_MIN_ROWS);
    int y = rows / 2, x = ((int)strlen(msg) < cols) ? (cols - (int)strlen(msg)) / 2 : 0;
    erase();
    attrset(attr_of(TC_WARN));
    mvaddnstr(y > 0 ? y - 1 : 0, x, msg, cols);
    attrset(A_NORMAL);
    if (keys && rows > 0)
        tui_draw_line(rows - 1, 0, cols, keys, true);
    refresh();
}
