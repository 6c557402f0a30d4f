/* The layers view: the layer list (ratio, roles, what each reads, the step's verdict) and the
 * current layer's tensor table (shape, verdict, max diff, ulp, worst coordinates). */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "tui/keys.h"
#include "tui/model.h"

/* "1x4x64" */
static void shape_str(const AsHostTensor *t, char *buf, size_t n)
{
    if (!t->data) {
        snprintf(buf, n, "-");
        return;
    }
    size_t k = 0;
    buf[0] = '\0';
    for (int i = 0; i < t->ndim && k < n; i++)
        k += (size_t)snprintf(buf + k, n - k, "%s%lld", i ? "x" : "", (long long)t->shape[i]);
}

/* "[3,1,17]" */
static void coord_str(const int64_t *c, int nd, char *buf, size_t n)
{
    size_t k = (size_t)snprintf(buf, n, "[");
    for (int i = 0; i < nd && k < n; i++)
        k += (size_t)snprintf(buf + k, n - k, "%s%lld", i ? "," : "", (long long)c[i]);
    if (k < n)
        snprintf(buf + k, n - k, "]");
}

static void num_str(double v, char *buf, size_t n)
{
    if (isnan(v))
        snprintf(buf, n, "nan");
    else if (v == 0)
        snprintf(buf, n, "0");
    else
        snprintf(buf, n, "%.3g", v);
}

void tui_model_layers(const TuiData *d, TuiState *st, const TuiGlyphs *g, TuiPanel *p)
{
    const AsConfig *cfg = d->cfg;
    char role[200];
    int w = 0;
    for (int l = 0; l < cfg->n_layers; l++) {
        as_config_role_line(cfg, l, role, sizeof role);
        int k = tui_utf8_len(role);
        w = k > w ? k : w;
    }
    if (d->cur.step < 0)
        snprintf(p->title, sizeof p->title, "layers (%d): nothing run yet", cfg->n_layers);
    else
        snprintf(p->title, sizeof p->title, "layers (%d): step %d %s, %d of %d run", cfg->n_layers, d->cur.step,
                 d->cur.prefill ? "prefill" : "decode", d->cur.next_layer, cfg->n_layers);
    tl_put(&p->header, TC_HEADER, "  ");
    tl_field(&p->header, TC_HEADER, w, "%s", as_config_role_header());
    tl_put(&p->header, TC_HEADER, "  verdict");
    for (int l = 0; l < cfg->n_layers; l++) {
        TuiLine *line = tls_new(&p->lines);
        if (!line)
            break;
        bool next = d->cur.step >= 0 && l == d->cur.next_layer;
        tl_put(line, TC_NORMAL, l == st->layer ? g->marker : " ");
        tl_put(line, next ? TC_ACCENT : TC_NORMAL, next ? g->next : " ");
        as_config_role_line(cfg, l, role, sizeof role);
        tl_field(line, d->done[l] || d->cur.step < 0 ? TC_NORMAL : TC_DIM, w, "%s", role);
        TuiColor c;
        const char *v = tui_layer_verdict(d, l, &c);
        tl_put(line, TC_NORMAL, "  ");
        tl_put(line, c, v);
        /* the worst tensor where it fits */
        if (d->got && d->done[l] && d->diff[l].verdict > AS_V_PASS && (unsigned)d->diff[l].worst_tensor < AS_T_COUNT) {
            const char *wn = as_tensor_desc[d->diff[l].worst_tensor].name;
            if (line->nchars + 1 + (int)strlen(wn) <= tp_inner_w(p))
                tl_add(line, TC_DIM, " %s", wn);
        }
    }
    p->sel = st->layer;
    tp_follow(p, &st->top[TV_LAYERS][0]);
}

/* The table row of one tensor. */
static void tensor_row(const TuiData *d, int l, AsTensorId id, bool sel, const TuiGlyphs *g, TuiLine *line)
{
    const AsRun *r = &d->ref[l];
    const AsRun *gr = d->got ? &d->got[l] : NULL;
    const AsHostTensor *t = r->t[id].data ? &r->t[id] : &gr->t[id];
    const AsTensorDesc *desc = &as_tensor_desc[id];
    char shape[48], a[32], b[32], c[48];
    shape_str(t, shape, sizeof shape);
    tl_put(line, TC_NORMAL, sel ? g->marker : " ");
    tl_field(line, TC_NORMAL, 16, "%s", desc->name);
    tl_field(line, TC_NORMAL, 14, "%s", shape);
    if (!gr) {
        tl_field(line, TC_REFONLY, 10, "no engine");
        tl_put(line, TC_DIM, desc->what);
        return;
    }
    if (!d->done[l]) {
        tl_field(line, TC_DIM, 10, "not run");
        tl_put(line, TC_DIM, desc->what);
        return;
    }
    const AsTensorDiff *df = &d->diff[l].t[id];
    const char *vn = df->verdict == AS_V_NOT_RUN ? "not run" : as_verdict_name(df->verdict);
    tl_field(line, tui_verdict_color(df->verdict), 10, "%s", vn);
    if (df->absent_got || df->absent_want) {
        tl_add(line, TC_MISMATCH, "absent on the %s side", df->absent_got ? "engine" : "reference");
        return;
    }
    if (df->shape_differs) {
        tl_add(line, TC_MISMATCH, "shapes differ");
        return;
    }
    if (desc->selection) {
        if (!df->n_rows_differ) {
            tl_add(line, TC_DIM, "exact");
            return;
        }
        tl_add(line, TC_NORMAL, "%lld rows differ (%lld near-tie, %lld real)", (long long)df->n_rows_differ,
               (long long)df->n_near_tie, (long long)df->n_real);
        if (df->n_tie_order)
            tl_add(line, TC_NEARTIE, "; %lld tie-order: %s", (long long)df->n_tie_order, as_tie_fit_what(df->tie_fit));
        if (df->cause == AS_CAUSE_INHERITED && df->from.layer >= 0)
            tl_add(line, TC_FLIPS, "; inherited from layer %d step %d", df->from.layer, df->from.step);
        return;
    }
    num_str(df->max_abs, a, sizeof a);
    num_str(df->tol, b, sizeof b);
    tl_field(line, df->max_abs > df->tol ? TC_MISMATCH : TC_NORMAL, 10, "%s", a);
    tl_field(line, TC_DIM, 9, "%s", b);
    if (df->worst >= 0) {
        if (df->worst_ulp == INT64_MAX)
            tl_field(line, TC_NORMAL, 7, "nan");
        else
            tl_field(line, TC_NORMAL, 7, "%lld", (long long)df->worst_ulp);
        coord_str(df->worst_coord, desc->ndim, c, sizeof c);
        tl_field(line, TC_NORMAL, 14, "%s", c);
    } else {
        tl_field(line, TC_DIM, 21, "-");
    }
    if (df->n_flips)
        tl_add(line, TC_FLIPS, " %lld flips", (long long)df->n_flips);
    if (df->n_bad)
        tl_add(line, TC_MISMATCH, " %lld bad", (long long)df->n_bad);
    if (df->cause == AS_CAUSE_INHERITED && df->from.layer >= 0)
        tl_add(line, TC_FLIPS, " inherited from layer %d step %d", df->from.layer, df->from.step);
}

void tui_model_tensors(const TuiData *d, TuiState *st, const TuiGlyphs *g, TuiPanel *p)
{
    int l = st->layer;
    const AsRun *r = &d->ref[l];
    AsTensorId ids[AS_T_COUNT];
    int n = tui_layer_tensors(d, l, ids);
    char when[64] = "";
    if (d->cur.step >= 0 && !d->done[l] && r->t[AS_T_X].data)
        snprintf(when, sizeof when, " (not run in step %d: as of step %d)", d->cur.step, r->step);
    else if (d->cur.step >= 0 && d->done[l])
        snprintf(when, sizeof when, ", step %d", d->cur.step);
    snprintf(p->title, sizeof p->title, "layer %d tensors%s", l, when);
    TuiLine *h = &p->header;
    tl_field(h, TC_HEADER, 17, " tensor");
    tl_field(h, TC_HEADER, 14, "shape");
    tl_field(h, TC_HEADER, 10, "verdict");
    if (d->got) {
        tl_field(h, TC_HEADER, 10, "max|diff|");
        tl_field(h, TC_HEADER, 9, "tol");
        tl_field(h, TC_HEADER, 7, "ulp");
        tl_put(h, TC_HEADER, "worst at");
    } else {
        tl_put(h, TC_HEADER, "what");
    }
    if (n == 0) {
        if (d->cur.step >= 0 && d->done[l])
            tls_add(&p->lines, TC_WARN, " layer %d's tensors were dropped to bound memory (ATTNSCOPE_RUN_BUDGET_MB)", l);
        else
            tls_add(&p->lines, TC_DIM, " layer %d has not run yet: n runs the next layer, p prefills", l);
        p->sel = -1;
        tp_follow(p, &st->top[TV_LAYERS][1]);
        return;
    }
    p->sel = 0;
    for (int i = 0; i < n; i++)
        if (ids[i] == st->tensor)
            p->sel = i;
    st->tensor = ids[p->sel];
    for (int i = 0; i < n; i++) {
        TuiLine *line = tls_new(&p->lines);
        if (!line)
            break;
        tensor_row(d, l, ids[i], i == p->sel, g, line);
    }
    tp_follow(p, &st->top[TV_LAYERS][1]);
}

/* ---- keys ------------------------------------------------------------------------------------ */

/* The tensor table's selection, delta rows on, within the tensors present. */
static void move_tensor(const TuiData *d, TuiState *st, int delta)
{
    AsTensorId ids[AS_T_COUNT];
    int n = tui_layer_tensors(d, st->layer, ids);
    if (!n)
        return;
    int i = 0;
    for (int k = 0; k < n; k++)
        if (ids[k] == st->tensor)
            i = k;
    i += delta;
    i = i < 0 ? 0 : i >= n ? n - 1 : i;
    st->tensor = ids[i];
}

static void move_layer(const TuiData *d, TuiState *st, int delta)
{
    int l = st->layer + delta, last = d->cfg->n_layers - 1;
    st->layer = l < 0 ? 0 : l > last ? last : l;
}

bool tui_layers_key(const TuiData *d, TuiState *st, int key)
{
    enum { PAGE = 10 };
    int delta = 0;
    switch (key) {
    case TUI_KEY_TAB: st->focus = !st->focus; return true;
    case TUI_KEY_LEFT: st->focus = 0; return true;
    case TUI_KEY_RIGHT: st->focus = 1; return true;
    case TUI_KEY_ENTER:
        if (st->focus == 0)
            st->focus = 1;
        else
            tui_tensor_open(d, st);
        return true;
    case TUI_KEY_UP: case 'k': delta = -1; break;
    case TUI_KEY_DOWN: case 'j': delta = 1; break;
    case TUI_KEY_PGUP: delta = -PAGE; break;
    case TUI_KEY_PGDN: delta = PAGE; break;
    case TUI_KEY_HOME: delta = -AS_MAX_LAYERS - AS_T_COUNT; break;
    case TUI_KEY_END: delta = AS_MAX_LAYERS + AS_T_COUNT; break;
    default: return false;
    }
    if (st->focus == 0)
        move_layer(d, st, delta);
    else
        move_tensor(d, st, delta);
    return true;
}
