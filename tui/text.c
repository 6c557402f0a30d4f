#include "tui/text.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void tl_init(TuiLine *l) { memset(l, 0, sizeof *l); }

void tl_free(TuiLine *l)
{
    free(l->text);
    free(l->color);
    tl_init(l);
}

void tl_clear(TuiLine *l)
{
    l->len = 0;
    l->nchars = 0;
    if (l->text)
        l->text[0] = '\0';
}

int tui_utf8_len(const char *s)
{
    int n = 0;
    for (; *s; s++)
        if (((unsigned char)*s & 0xc0) != 0x80)
            n++;
    return n;
}

static bool reserve(TuiLine *l, size_t bytes, int chars)
{
    if (l->len + bytes + 1 > l->cap) {
        size_t cap = l->cap ? l->cap : 64;
        while (cap < l->len + bytes + 1)
            cap *= 2;
        char *t = realloc(l->text, cap);
        if (!t)
            return false;
        l->text = t;
        l->cap = cap;
    }
    if (l->nchars + chars > l->ccap) {
        int cap = l->ccap ? l->ccap : 64;
        while (cap < l->nchars + chars)
            cap *= 2;
        unsigned char *c = realloc(l->color, (size_t)cap);
        if (!c)
            return false;
        l->color = c;
        l->ccap = cap;
    }
    return true;
}

void tl_put(TuiLine *l, TuiColor c, const char *s)
{
    size_t bytes = strlen(s);
    int chars = tui_utf8_len(s);
    if (!bytes || !reserve(l, bytes, chars))
        return;
    memcpy(l->text + l->len, s, bytes + 1);
    l->len += bytes;
    memset(l->color + l->nchars, (int)c, (size_t)chars);
    l->nchars += chars;
}

static void tl_vadd(TuiLine *l, TuiColor c, const char *fmt, va_list ap) __attribute__((format(printf, 3, 0)));
static void tl_vadd(TuiLine *l, TuiColor c, const char *fmt, va_list ap)
{
    char buf[1024];
    vsnprintf(buf, sizeof buf, fmt, ap);
    tl_put(l, c, buf);
}

void tl_add(TuiLine *l, TuiColor c, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    tl_vadd(l, c, fmt, ap);
    va_end(ap);
}

void tl_pad(TuiLine *l, int n, TuiColor c)
{
    while (l->nchars < n) {
        int before = l->nchars;
        tl_put(l, c, " ");
        if (l->nchars == before)
            return;
    }
}

void tl_field(TuiLine *l, TuiColor c, int n, const char *fmt, ...)
{
    char buf[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    /* cut at n characters */
    int chars = 0;
    size_t i = 0;
    for (; buf[i]; i++) {
        if (((unsigned char)buf[i] & 0xc0) != 0x80) {
            if (chars == n)
                break;
            chars++;
        }
    }
    buf[i] = '\0';
    int start = l->nchars;
    tl_put(l, c, buf);
    tl_pad(l, start + n, c);
}

void tl_recolor(TuiLine *l, TuiColor c)
{
    if (l->nchars)
        memset(l->color, (int)c, (size_t)l->nchars);
}

void tl_copy(TuiLine *dst, const TuiLine *src)
{
    tl_clear(dst);
    tl_append(dst, src);
}

void tl_append_range(TuiLine *dst, const TuiLine *src, int from, int to)
{
    for (int i = from < 0 ? 0 : from; i < to && i < src->nchars; i++) {
        size_t a = tl_offset(src, i), b = tl_offset(src, i + 1);
        char ch[8];
        size_t k = b - a < sizeof ch - 1 ? b - a : sizeof ch - 1;
        memcpy(ch, src->text + a, k);
        ch[k] = '\0';
        tl_put(dst, (TuiColor)src->color[i], ch);
    }
}

void tl_append(TuiLine *dst, const TuiLine *src) { tl_append_range(dst, src, 0, src->nchars); }

void tl_item(TuiLine *l, TuiColor mark_color, const char *mark, TuiColor text_color, const char *text)
{
    tl_put(l, mark_color, mark);
    tl_put(l, text_color, text);
}

void tl_truncate(TuiLine *l, int n)
{
    if (n >= l->nchars)
        return;
    if (n < 0)
        n = 0;
    l->len = tl_offset(l, n);
    l->text[l->len] = '\0';
    l->nchars = n;
}

bool tl_fit(TuiLine *l, int width, const char *ellipsis)
{
    if (l->nchars <= width)
        return false;
    int room = width - tui_utf8_len(ellipsis), keep = 0;
    /* the last space at or before `room` ends the last whole word that fits */
    for (int i = room; i > 0 && !keep; i--) {
        size_t b = tl_offset(l, i);
        if (l->text[b] == ' ')
            keep = i;
    }
    if (!keep)
        keep = room > 0 ? room : 0; /* one word wider than the panel: cut inside it */
    while (keep > 0 && l->text[tl_offset(l, keep - 1)] == ' ')
        keep--;
    TuiColor c = keep > 0 ? (TuiColor)l->color[keep - 1] : TC_NORMAL;
    tl_truncate(l, keep);
    if (keep > 0 && room > keep)
        tl_put(l, c, " ");
    tl_put(l, c, ellipsis);
    return true;
}

size_t tl_offset(const TuiLine *l, int i)
{
    if (i <= 0)
        return 0;
    int chars = 0;
    for (size_t b = 0; b < l->len; b++) {
        if (((unsigned char)l->text[b] & 0xc0) != 0x80) {
            if (chars == i)
                return b;
            chars++;
        }
    }
    return l->len;
}

void tls_init(TuiLines *ls) { memset(ls, 0, sizeof *ls); }

void tls_clear(TuiLines *ls)
{
    for (int i = 0; i < ls->n; i++)
        tl_free(&ls->v[i]);
    ls->n = 0;
}

void tls_free(TuiLines *ls)
{
    tls_clear(ls);
    free(ls->v);
    tls_init(ls);
}

TuiLine *tls_new(TuiLines *ls)
{
    if (ls->n == ls->cap) {
        int cap = ls->cap ? ls->cap * 2 : 16;
        TuiLine *v = realloc(ls->v, sizeof *v * (size_t)cap);
        if (!v)
            return NULL;
        ls->v = v;
        ls->cap = cap;
    }
    TuiLine *l = &ls->v[ls->n++];
    tl_init(l);
    return l;
}

TuiLine *tls_add(TuiLines *ls, TuiColor c, const char *fmt, ...)
{
    TuiLine *l = tls_new(ls);
    if (!l)
        return NULL;
    va_list ap;
    va_start(ap, fmt);
    tl_vadd(l, c, fmt, ap);
    va_end(ap);
    return l;
}

void tls_add_wrapped(TuiLines *ls, TuiColor c, const char *text, int width, int indent)
{
    if (width < indent + 10)
        width = indent + 10;
    const char *p = text;
    bool first = true;
    while (*p) {
        int avail = first ? width : width - indent;
        /* the longest prefix of at most avail characters ending before a space */
        const char *q = p, *cut = NULL;
        int chars = 0;
        while (*q && chars < avail) {
            if (*q == ' ')
                cut = q;
            q++;
            while ((*q & 0xc0) == 0x80)
                q++;
            chars++;
        }
        if (!*q)
            cut = q;
        else if (!cut || cut == p)
            cut = q;
        TuiLine *l = tls_new(ls);
        if (!l)
            return;
        if (!first)
            tl_pad(l, indent, c);
        char buf[1024];
        size_t n = (size_t)(cut - p) < sizeof buf - 1 ? (size_t)(cut - p) : sizeof buf - 1;
        memcpy(buf, p, n);
        buf[n] = '\0';
        tl_put(l, c, buf);
        p = cut;
        while (*p == ' ')
            p++;
        first = false;
    }
}

void tls_add_wrapped_line(TuiLines *ls, const TuiLine *l, int width, int indent)
{
    if (width < indent + 10)
        width = indent + 10;
    int i = 0;
    bool first = true;
    while (i < l->nchars) {
        int avail = first ? width : width - indent, end = i + avail;
        if (end >= l->nchars) {
            end = l->nchars;
        } else {
            /* break at the last space within reach, else inside the word */
            int cut = end;
            while (cut > i && l->text[tl_offset(l, cut)] != ' ')
                cut--;
            end = cut > i ? cut : end;
        }
        TuiLine *o = tls_new(ls);
        if (!o)
            return;
        if (!first)
            tl_pad(o, indent, TC_NORMAL);
        tl_append_range(o, l, i, end);
        i = end;
        while (i < l->nchars && l->text[tl_offset(l, i)] == ' ')
            i++;
        first = false;
    }
}

int tls_find(const TuiLines *ls, const char *s)
{
    for (int i = 0; i < ls->n; i++)
        if (ls->v[i].text && strstr(ls->v[i].text, s))
            return i;
    return -1;
}

/* ---- glyphs ----------------------------------------------------------------------------- */

const TuiGlyphs tui_glyphs_utf8 = {
    .utf8 = true,
    .h = "\u2500", .v = "\u2502", .tl = "\u250c", .tr = "\u2510", .bl = "\u2514", .br = "\u2518",
    .spin = {"\u280b", "\u2819", "\u2839", "\u2838", "\u283c", "\u2834", "\u2826", "\u2827", "\u2807", "\u280f"},
    .n_spin = 10,
    .shade = {"\u00b7", "\u2591", "\u2592", "\u2593", "\u2588"},
    .spark = {"\u2581", "\u2582", "\u2583", "\u2584", "\u2585", "\u2586", "\u2587", "\u2588"},
    .block_kept = "\u25a0", .block_dropped = "\u00b7", .block_pinned = "\u25c6", .block_hidden = " ",
    .bar_full = "\u2588", .bar_empty = "\u2591",
    .marker = "\u25b6", .next = "\u25b8", .dot = "\u25cf", .ellipsis = "\u2026", .minus_inf = "-\u221e",
};

const TuiGlyphs tui_glyphs_ascii = {
    .utf8 = false,
    .h = "-", .v = "|", .tl = "+", .tr = "+", .bl = "+", .br = "+",
    .spin = {"|", "/", "-", "\\"},
    .n_spin = 4,
    .shade = {".", ":", "+", "*", "#"},
    .spark = {"_", ".", "-", ":", "=", "+", "*", "#"},
    .block_kept = "#", .block_dropped = ".", .block_pinned = "@", .block_hidden = " ",
    .bar_full = "#", .bar_empty = ".",
    .marker = ">", .next = ">", .dot = "*", .ellipsis = "~", .minus_inf = "-inf",
};

/* ---- panel ------------------------------------------------------------------------------ */

void tp_init(TuiPanel *p)
{
    memset(p, 0, sizeof *p);
    tl_init(&p->header);
    tls_init(&p->lines);
    tls_init(&p->full);
    p->sel = -1;
}

void tp_free(TuiPanel *p)
{
    tl_free(&p->header);
    tls_free(&p->lines);
    tls_free(&p->full);
    tp_init(p);
}

void tp_reset(TuiPanel *p)
{
    TuiRect r = p->r;
    tp_free(p);
    p->r = r;
}

int tp_inner_w(const TuiPanel *p) { return p->r.w > 2 ? p->r.w - 2 : 0; }

int tp_inner_h(const TuiPanel *p)
{
    int h = p->r.h - 2 - (p->header.nchars > 0 ? 1 : 0);
    return h > 0 ? h : 0;
}

void tp_follow(TuiPanel *p, int *top)
{
    int h = tp_inner_h(p), n = p->lines.n;
    int t = top ? *top : 0;
    if (p->sel >= 0) {
        if (p->sel < t)
            t = p->sel;
        if (h > 0 && p->sel >= t + h)
            t = p->sel - h + 1;
    }
    if (t > n - h)
        t = n - h;
    if (t < 0)
        t = 0;
    p->top = t;
    if (top)
        *top = t;
}

/* The title's room on the top border: "┌─ title ─┐" leaves the width less 6. */
static void fit_title(TuiPanel *p, const char *ellipsis)
{
    int room = p->r.w - 6;
    if (room < 1 || tui_utf8_len(p->title) <= room)
        return;
    TuiLine t;
    tl_init(&t);
    tl_put(&t, TC_TITLE, p->title);
    TuiLine *whole = tls_new(&p->full);
    if (whole)
        tl_copy(whole, &t);
    tl_fit(&t, room, ellipsis);
    snprintf(p->title, sizeof p->title, "%s", t.text ? t.text : "");
    tl_free(&t);
}

int tp_fit(TuiPanel *p, const char *ellipsis)
{
    int w = tp_inner_w(p), cut = 0;
    fit_title(p, ellipsis);
    if (p->header.nchars > w) {
        TuiLine *whole = tls_new(&p->full);
        if (whole)
            tl_copy(whole, &p->header);
        tl_fit(&p->header, w, ellipsis);
    }
    for (int i = 0; i < p->lines.n; i++) {
        TuiLine *l = &p->lines.v[i];
        if (l->nchars <= w)
            continue;
        TuiLine *whole = tls_new(&p->full);
        if (whole)
            tl_copy(whole, l);
        /* tls_new may have moved nothing in p->lines: l stays valid */
        tl_fit(l, w, ellipsis);
        cut++;
    }
    return cut;
}
