/* The layers view: the layer list (ratio, roles, what each reads, the step's verdict) and the
 * current layer's tensor table (shape, verdict, max diff, ulp, worst coordinates). */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "tui/keys.h"
#include "tui/model.h"
#include "tui/table.h"

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

/* The worst tensor of layer l when its verdict is worse than pass ("" else). */
static const char *worst_name(const TuiData *d, int l)
{
    if (!d->got || !d->done[l] || d->diff[l].verdict <= AS_V_PASS || (unsigned)d->diff[l].worst_tensor >= AS_T_COUNT)
        return "";
    return as_tensor_desc[d->diff[l].worst_tensor].name;
}

void tui_model_layers(const TuiData *d, TuiState *st, const TuiGlyphs *g, TuiPanel *p)
{
    const AsConfig *cfg = d->cfg;
    if (d->cur.step < 0)
        snprintf(p->title, sizeof p->title, "layers (%d): nothing run yet", cfg->n_layers);
    else
        snprintf(p->title, sizeof p->title, "layers (%d): step %d %s, %d of %d run", cfg->n_layers, d->cur.step,
                 d->cur.prefill ? "prefill" : "decode", d->cur.next_layer, cfg->n_layers);
    /* the role line gives up its end first: the verdict and the worst tensor always show */
    const TuiColumn cols[] = {{.head = as_config_role_header(), .shrink = true}, {.head = "verdict"}, {.head = "worst"}};
    TuiTable t;
    tt_init(&t, cols, 3, 2);
    char role[200];
    for (int l = 0; l < cfg->n_layers; l++) {
        TuiLine *row = tt_row(&t);
        if (!row)
            break;
        bool next = d->cur.step >= 0 && l == d->cur.next_layer;
        TuiLine *lead = tt_lead(&t);
        tl_put(lead, TC_NORMAL, l == st->layer ? g->marker : " ");
        tl_put(lead, next ? TC_ACCENT : TC_NORMAL, next ? g->next : " ");
        as_config_role_line(cfg, l, role, sizeof role);
        tl_put(&row[0], d->done[l] || d->cur.step < 0 ? TC_NORMAL : TC_DIM, role);
        TuiColor c;
        const char *v = tui_layer_verdict(d, l, &c);
        tl_put(&row[1], c, v);
        tl_put(&row[2], TC_DIM, worst_name(d, l));
    }
    tt_render(&t, tp_inner_w(p), g->ellipsis, p);
    tt_free(&t);
    p->sel = st->layer;
    tp_follow(p, &st->top[TV_LAYERS][0]);
}

/* The tensor table's columns: name and verdict always; the worst element's place, max |diff|,
 * the shape, the tolerance and the ulp distance dropped in the reverse order when narrow. */
enum { COL_NAME, COL_SHAPE, COL_VERDICT, COL_MAX, COL_TOL, COL_ULP, COL_AT, COL_NOTES, COL_N };

/* The table row of one tensor: a cell per column. */
static void tensor_row(const TuiData *d, int l, AsTensorId id, TuiLine *cell)
{
    const AsRun *r = &d->ref[l];
    const AsRun *gr = d->got ? &d->got[l] : NULL;
    const AsHostTensor *t = r->t[id].data ? &r->t[id] : &gr->t[id];
    const AsTensorDesc *desc = &as_tensor_desc[id];
    char shape[48], a[32], c[48];
    shape_str(t, shape, sizeof shape);
    tl_put(&cell[COL_NAME], TC_NORMAL, desc->name);
    tl_put(&cell[COL_SHAPE], TC_NORMAL, shape);
    if (!gr || !d->done[l]) {
        tl_put(&cell[COL_VERDICT], gr ? TC_DIM : TC_REFONLY, gr ? "not run" : "no engine");
        tl_put(&cell[COL_NOTES], TC_DIM, desc->what);
        return;
    }
    const AsTensorDiff *df = &d->diff[l].t[id];
    tl_put(&cell[COL_VERDICT], tui_verdict_color(df->verdict),
           df->verdict == AS_V_NOT_RUN ? "not run" : as_verdict_name(df->verdict));
    TuiLine *notes = &cell[COL_NOTES];
    if (df->absent_got || df->absent_want) {
        tl_add(notes, TC_MISMATCH, "absent on the %s side", df->absent_got ? "engine" : "reference");
        return;
    }
    if (df->shape_differs) {
        tl_put(notes, TC_MISMATCH, "shapes differ");
        return;
    }
    if (desc->selection) {
        if (!df->n_rows_differ) {
            tl_put(notes, TC_DIM, "exact");
            return;
        }
        tl_add(notes, TC_NORMAL, "%lld rows differ (%lld near-tie, %lld real)", (long long)df->n_rows_differ,
               (long long)df->n_near_tie, (long long)df->n_real);
        if (df->n_tie_order)
            tl_add(notes, TC_NEARTIE, "; %lld tie-order: %s", (long long)df->n_tie_order, as_tie_fit_what(df->tie_fit));
        if (df->cause == AS_CAUSE_INHERITED && df->from.layer >= 0)
            tl_add(notes, TC_FLIPS, "; inherited from layer %d step %d", df->from.layer, df->from.step);
        return;
    }
    num_str(df->max_abs, a, sizeof a);
    tl_put(&cell[COL_MAX], df->max_abs > df->tol ? TC_MISMATCH : TC_NORMAL, a);
    num_str(df->tol, a, sizeof a);
    tl_put(&cell[COL_TOL], TC_DIM, a);
    if (df->worst >= 0) {
        if (df->worst_ulp == INT64_MAX)
            tl_put(&cell[COL_ULP], TC_NORMAL, "nan");
        else
            tl_add(&cell[COL_ULP], TC_NORMAL, "%lld", (long long)df->worst_ulp);
        coord_str(df->worst_coord, desc->ndim, c, sizeof c);
        tl_put(&cell[COL_AT], TC_NORMAL, c);
    } else {
        tl_put(&cell[COL_ULP], TC_DIM, "-");
    }
    const char *sp = "";
    if (df->n_flips)
        tl_add(notes, TC_FLIPS, "%lld flips", (long long)df->n_flips), sp = " ";
    if (df->n_bad)
        tl_add(notes, TC_MISMATCH, "%s%lld bad", sp, (long long)df->n_bad), sp = " ";
    if (df->cause == AS_CAUSE_INHERITED && df->from.layer >= 0)
        tl_add(notes, TC_FLIPS, "%sinherited from layer %d step %d", sp, df->from.layer, df->from.step);
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
    if (n == 0) {
        if (tui_layer_dropped(d, l))
            tls_add(&p->lines, TC_WARN, " layer %d's tensors were dropped to bound memory (ATTNSCOPE_RUN_BUDGET_MB)", l);
        else
            tls_add(&p->lines, TC_DIM, " layer %d has not run yet: n runs the next layer, p prefills", l);
        p->sel = -1;
        tp_follow(p, &st->top[TV_LAYERS][1]);
        return;
    }
    const TuiColumn cols[COL_N] = {
        [COL_NAME] = {"tensor", 0, false, false},   [COL_SHAPE] = {"shape", 3, false, false},
        [COL_VERDICT] = {"verdict", 0, false, false}, [COL_MAX] = {"max|diff|", 2, false, false},
        [COL_TOL] = {"tol", 4, false, false},         [COL_ULP] = {"ulp", 5, true, false},
        [COL_AT] = {"worst at", 1, false, false},     [COL_NOTES] = {d->got ? "" : "what", 0, false, false},
    };
    TuiTable t;
    tt_init(&t, cols, COL_N, 1);
    p->sel = 0;
    for (int i = 0; i < n; i++)
        if (ids[i] == st->tensor)
            p->sel = i;
    st->tensor = ids[p->sel];
    for (int i = 0; i < n; i++) {
        TuiLine *row = tt_row(&t);
        if (!row)
            break;
        tl_put(tt_lead(&t), TC_NORMAL, i == p->sel ? g->marker : " ");
        tensor_row(d, l, ids[i], row);
    }
    tt_render(&t, tp_inner_w(p), g->ellipsis, p);
    tt_free(&t);
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
            tui_tensor_open(st);
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
