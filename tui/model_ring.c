/* The ring view: the window ring of the current layer after its latest run, slot by slot (the
 * position each holds), oldest to newest, the slots written in that step, and the slots the
 * chosen query attends (widx). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tui/model.h"

int tui_ring_slots(const AsRun *r, const AsRun *got, int win, int query, TuiRingSlot *slots)
{
    for (int j = 0; j < win; j++)
        slots[j] = (TuiRingSlot){.pos = -1, .age = -1, .got_diff = -1};
    const AsHostTensor *rw = &r->t[AS_T_ST_RING], *rg = got ? &got->t[AS_T_ST_RING] : NULL;
    if (rg && rg->data && rw->data && rg->ndim == 2 && rw->ndim == 2 && rg->shape[0] == win &&
        rw->shape[0] == win && rg->shape[1] == rw->shape[1]) {
        int64_t hd = rw->shape[1];
        for (int j = 0; j < win; j++) {
            const float *a = (const float *)rg->data + j * hd, *b = (const float *)rw->data + j * hd;
            float m = 0;
            for (int64_t c = 0; c < hd; c++) {
                float dv = a[c] == b[c] ? 0 : fabsf(a[c] - b[c]);
                if (!(dv <= m))
                    m = isnan(dv) ? INFINITY : dv;
            }
            slots[j].got_diff = m;
        }
    }
    if (r->s <= 0 || win <= 0)
        return 0;
    int end = r->start_pos + r->s;
    int n = 0;
    for (int j = 0; j < win; j++) {
        if (end - 1 < j)
            continue;
        int p = j + win * ((end - 1 - j) / win);
        slots[j].pos = p;
        slots[j].written = p >= r->start_pos;
        n++;
    }
    /* ages: rank by position */
    for (int j = 0; j < win; j++) {
        if (slots[j].pos < 0)
            continue;
        int a = 0;
        for (int k = 0; k < win; k++)
            if (slots[k].pos >= 0 && slots[k].pos < slots[j].pos)
                a++;
        slots[j].age = a;
    }
    const AsHostTensor *w = &r->t[AS_T_WIDX];
    if (w->data && w->ndim == 2 && query >= 0 && query < w->shape[0]) {
        const int32_t *row = (const int32_t *)w->data + (size_t)query * (size_t)w->shape[1];
        for (int64_t c = 0; c < w->shape[1]; c++) {
            int v = row[c];
            if (v < 0)
                continue;
            if (r->start_pos > 0) {
                if (v < win) /* decode: widx lists ring slots */
                    slots[v].attended = true;
            } else {
                /* prefill: widx lists the chunk's rows; the ring holds a row when its slot does */
                int p = r->start_pos + v;
                if (slots[p % win].pos == p)
                    slots[p % win].attended = true;
            }
        }
    }
    return n;
}

static TuiColor slot_color(const TuiRingSlot *s)
{
    if (s->got_diff > 0)
        return TC_MISMATCH;
    if (s->pos < 0)
        return TC_DIM;
    if (s->written)
        return TC_ACCENT;
    if (s->attended)
        return TC_GOOD;
    return TC_NORMAL;
}

void tui_model_ring(const TuiData *d, TuiState *st, const TuiGlyphs *g, TuiPanel *p)
{
    const AsConfig *cfg = d->cfg;
    int l = st->layer, win = cfg->window;
    const AsRun *r = &d->ref[l];
    snprintf(p->title, sizeof p->title, "window ring: layer %d, %d slots", l, win);
    if (r->s <= 0) {
        tls_add(&p->lines, TC_DIM, " layer %d has not run yet: p prefills, n runs the next layer", l);
        tp_follow(p, &st->top[TV_RING][0]);
        return;
    }
    TuiRingSlot *slots = calloc((size_t)win, sizeof *slots);
    if (!slots) {
        tls_add(&p->lines, TC_BAD, " out of memory");
        return;
    }
    int q = st->query < r->s ? st->query : r->s - 1;
    const AsRun *got = d->got && d->done[l] ? &d->got[l] : NULL;
    int n = tui_ring_slots(r, got, win, q, slots);
    int end = r->start_pos + r->s;
    bool prefill = r->start_pos == 0;
    char age[96];
    tui_run_age(d, l, age, sizeof age);
    snprintf(p->title, sizeof p->title, "window ring: layer %d (ratio %d), step %d %s, %d slots%s", l, r->ratio,
             r->step, prefill ? "prefill" : "decode", win, age);
    /* what was written */
    TuiLine *line = tls_new(&p->lines);
    if (line) {
        if (prefill) {
            int first = end > win ? end - win : 0;
            tl_add(line, TC_NORMAL, " prefill of %d tokens wrote positions %d..%d", r->s, first, end - 1);
        } else {
            tl_add(line, TC_NORMAL, " decode at position %d wrote ", r->start_pos);
            tl_add(line, TC_ACCENT, "slot %d", r->start_pos % win);
        }
        tl_add(line, TC_NORMAL, "; %d of %d slots hold %d..%d", n, win, end - n, end - 1);
    }
    /* what the query attends */
    const AsHostTensor *w = &r->t[AS_T_WIDX];
    line = tls_new(&p->lines);
    if (line && w->data && w->ndim == 2) {
        const int32_t *row = (const int32_t *)w->data + (size_t)q * (size_t)w->shape[1];
        int cnt = 0, lo = -1, hi = -1;
        for (int64_t c = 0; c < w->shape[1]; c++) {
            if (row[c] < 0)
                continue;
            int pos = prefill ? row[c] : slots[row[c] % win].pos;
            cnt++;
            lo = lo < 0 || pos < lo ? pos : lo;
            hi = pos > hi ? pos : hi;
        }
        tl_add(line, TC_NORMAL, " query %d (position %d) attends ", q, r->start_pos + q);
        tl_add(line, TC_GOOD, "%d %s", cnt, prefill ? "chunk rows" : "slots");
        if (cnt)
            tl_add(line, TC_NORMAL, ", positions %d..%d", lo, hi);
        if (prefill) {
            int in_ring = 0;
            for (int j = 0; j < win; j++)
                in_ring += slots[j].attended;
            if (in_ring < cnt)
                tl_add(line, TC_DIM, " (%d of them still in the ring)", in_ring);
        }
    }
    tls_add(&p->lines, TC_NORMAL, " ");
    /* the strip, in slot order, wrapped to the panel */
    int digits = 1;
    for (int v = end; v >= 10; v /= 10)
        digits++;
    int cw = digits + 2 > 5 ? digits + 2 : 5;
    int per = (tp_inner_w(p) - 7) / cw;
    if (per < 1)
        per = 1;
    for (int j0 = 0; j0 < win; j0 += per) {
        TuiLine *ls = tls_new(&p->lines), *lp = tls_new(&p->lines), *lm = tls_new(&p->lines);
        if (!ls || !lp || !lm)
            break;
        tl_put(ls, TC_HEADER, " slot  ");
        tl_put(lp, TC_HEADER, " pos   ");
        tl_put(lm, TC_HEADER, "       ");
        for (int j = j0; j < win && j < j0 + per; j++) {
            TuiColor c = slot_color(&slots[j]);
            tl_add(ls, TC_DIM, "%*d", cw, j);
            if (slots[j].pos >= 0)
                tl_add(lp, c, "%*d", cw, slots[j].pos);
            else
                tl_add(lp, TC_DIM, "%*s", cw, "-");
            char mark[24] = "";
            if (slots[j].written || slots[j].attended || slots[j].got_diff > 0)
                snprintf(mark, sizeof mark, "%s%s%s", slots[j].got_diff > 0 ? "!" : "", slots[j].written ? "W" : "",
                         slots[j].attended ? g->dot : "");
            tl_pad(lm, lm->nchars + cw - tui_utf8_len(mark), TC_NORMAL);
            tl_put(lm, c, mark);
        }
    }
    TuiLine *leg = tls_new(&p->lines);
    if (leg) {
        tl_put(leg, TC_DIM, "        ");
        tl_put(leg, TC_ACCENT, "W written");
        tl_put(leg, TC_NORMAL, "   ");
        tl_add(leg, TC_GOOD, "%s attended by query %d", g->dot, q);
        tl_put(leg, TC_NORMAL, "   ");
        tl_put(leg, TC_DIM, "- empty");
        if (got)
            tl_put(leg, TC_MISMATCH, "   ! engine differs");
    }
    tls_add(&p->lines, TC_NORMAL, " ");
    /* oldest to newest */
    tls_add(&p->lines, TC_TITLE, " oldest to newest");
    tls_add(&p->lines, TC_HEADER, "    age  slot  position");
    for (int a = 0; a < n; a++) {
        for (int j = 0; j < win; j++) {
            if (slots[j].age != a)
                continue;
            TuiLine *lr = tls_new(&p->lines);
            if (!lr)
                break;
            TuiColor c = slot_color(&slots[j]);
            tl_add(lr, c, "   %4d  %4d  %8d", a + 1, j, slots[j].pos);
            if (slots[j].written)
                tl_put(lr, TC_ACCENT, "  written");
            if (slots[j].attended)
                tl_add(lr, TC_GOOD, "  attended");
            if (slots[j].got_diff > 0)
                tl_add(lr, TC_MISMATCH, "  engine %.3g off", slots[j].got_diff);
            if (a == n - 1)
                tl_put(lr, TC_DIM, "  newest");
            else if (a == 0)
                tl_put(lr, TC_DIM, "  oldest");
        }
    }
    if (n < win)
        tls_add(&p->lines, TC_DIM, "   %d empty slot%s (positions not reached yet)", win - n, win - n == 1 ? "" : "s");
    for (int j = 0; j < win; j++)
        if (slots[j].pos < 0 && slots[j].got_diff > 0)
            tls_add(&p->lines, TC_MISMATCH, "   slot %d is empty here but not in the engine's ring (%.3g off)", j,
                    slots[j].got_diff);
    free(slots);
    tp_follow(p, &st->top[TV_RING][0]);
}
