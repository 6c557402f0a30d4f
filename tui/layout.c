#include "tui/layout.h"

#include <string.h>

const char *tui_view_name(TuiView v)
{
    static const char *const names[TV_COUNT] = {"layers", "tensor", "ring", "caches", "candidates", "top-k"};
    return (unsigned)v < TV_COUNT ? names[v] : "?";
}

static TuiRect rect(int x, int y, int w, int h) { return (TuiRect){x, y, w, h}; }

static int clampi(int v, int lo, int hi) { return v < lo ? lo : v > hi ? hi : v; }

void tui_layout(TuiView v, int cols, int rows, int n_layers, TuiLayout *o)
{
    memset(o, 0, sizeof *o);
    o->cols = cols;
    o->rows = rows;
    if (cols < TUI_MIN_COLS || rows < TUI_MIN_ROWS) {
        o->too_small = true;
        return;
    }
    o->status = rect(0, 0, cols, 1);
    o->message = rect(0, 1, cols, 1);
    o->keys = rect(0, rows - 1, cols, 1);
    o->body = rect(0, 2, cols, rows - 3);
    TuiRect b = o->body;
    switch (v) {
    case TV_LAYERS:
        o->n_panels = 2;
        if (cols >= 160) {
            /* the role lines want about 80 columns; the tensor table takes the rest */
            int lw = clampi(cols * 45 / 100, 80, 110);
            o->wide = true;
            o->panel[0] = rect(b.x, b.y, lw, b.h);
            o->panel[1] = rect(b.x + lw, b.y, b.w - lw, b.h);
        } else {
            int lh = clampi(n_layers + 3, 5, b.h - 8);
            o->panel[0] = rect(b.x, b.y, b.w, lh);
            o->panel[1] = rect(b.x, b.y + lh, b.w, b.h - lh);
        }
        break;
    case TV_TENSOR:
        o->n_panels = 2;
        if (cols >= 140) {
            int iw = clampi(cols / 3, 50, 70);
            o->wide = true;
            o->panel[0] = rect(b.x, b.y, b.w - iw, b.h);
            o->panel[1] = rect(b.x + b.w - iw, b.y, iw, b.h);
        } else {
            int ih = 9;
            o->panel[0] = rect(b.x, b.y, b.w, b.h - ih);
            o->panel[1] = rect(b.x, b.y + b.h - ih, b.w, ih);
        }
        break;
    case TV_CAND:
    case TV_TOPK: {
        o->n_panels = 2;
        int th = v == TV_TOPK ? 8 : clampi(b.h / 2, 8, 20);
        if (cols >= 160) {
            /* side by side: the grid / sparkline on the left gets the height */
            int lw = b.w * 55 / 100;
            o->wide = true;
            o->panel[0] = rect(b.x, b.y, lw, b.h);
            o->panel[1] = rect(b.x + lw, b.y, b.w - lw, b.h);
        } else {
            o->panel[0] = rect(b.x, b.y, b.w, th);
            o->panel[1] = rect(b.x, b.y + th, b.w, b.h - th);
        }
        break;
    }
    case TV_RING:
    case TV_CACHES:
    default:
        o->n_panels = 1;
        o->panel[0] = b;
        break;
    }
}

static bool inside(TuiRect a, TuiRect b)
{
    return a.x >= b.x && a.y >= b.y && a.x + a.w <= b.x + b.w && a.y + a.h <= b.y + b.h && a.w > 0 && a.h > 0;
}

static bool overlap(TuiRect a, TuiRect b)
{
    return a.x < b.x + b.w && b.x < a.x + a.w && a.y < b.y + b.h && b.y < a.y + a.h;
}

bool tui_layout_valid(const TuiLayout *l)
{
    if (l->too_small)
        return l->n_panels == 0;
    if (l->keys.y != l->rows - 1 || l->status.y != 0)
        return false;
    for (int i = 0; i < l->n_panels; i++) {
        if (!inside(l->panel[i], l->body) || l->panel[i].w < 20 || l->panel[i].h < 3)
            return false;
        for (int j = i + 1; j < l->n_panels; j++)
            if (overlap(l->panel[i], l->panel[j]))
                return false;
    }
    return true;
}
