/* The tensor view: a heatmap of |engine - reference| over rows x channels of one tensor
 * ([token][head][channel] tensors: one row per token and head), downsampled (maximum per cell)
 * to the panel; and the value inspector at the cursor. Without an engine it shows |ref|. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tui/keys.h"
#include "tui/model.h"

static double elem(const AsHostTensor *t, int64_t i)
{
    switch (t->type) {
    case AS_VT_I32: return ((const int32_t *)t->data)[i];
    case AS_VT_U8: return ((const uint8_t *)t->data)[i];
    default: return ((const float *)t->data)[i];
    }
}

static bool same_shape(const AsHostTensor *a, const AsHostTensor *b)
{
    if (a->ndim != b->ndim)
        return false;
    for (int i = 0; i < a->ndim; i++)
        if (a->shape[i] != b->shape[i])
            return false;
    return true;
}

/* |got - want|, 0 when equal (infinities included), +inf when one side is NaN or they differ
 * by an infinity. */
static double absdiff(double a, double b)
{
    if (a == b)
        return 0;
    double v = fabs(a - b);
    return isnan(v) ? INFINITY : v;
}

static void fmt_val(const AsHostTensor *t, double v, char *buf, size_t n)
{
    if (t->type == AS_VT_I32 || t->type == AS_VT_U8)
        snprintf(buf, n, "%lld", (long long)v);
    else
        snprintf(buf, n, "%.8g", v);
}

/* The drawn matrix: R rows (tokens x heads for 3-D tensors, H heads each) by C channels; the
 * tensor is row-major, so element (r, c) is at r * C + c either way. */
typedef struct {
    int R, H, C;
} Slice;

static int64_t flat(const Slice *s, int64_t r, int64_t c) { return r * s->C + c; }

static void coord_text(AsTensorId id, const Slice *s, int64_t r, int64_t c, char *buf, size_t n)
{
    const AsTensorDesc *dd = &as_tensor_desc[id];
    if (s->H)
        snprintf(buf, n, "%s %lld, %s %lld, %s %lld", dd->dims[0], (long long)(r / s->H), dd->dims[1],
                 (long long)(r % s->H), dd->dims[2], (long long)c);
    else
        snprintf(buf, n, "%s %lld, %s %lld", dd->dims[0], (long long)r, dd->ndim > 1 ? dd->dims[1] : "col",
                 (long long)c);
}

/* What the heatmap draws: the base tensor (the reference's, else the engine's), the other side
 * when both have the same shape (then |diff| is drawn), the slice. */
typedef struct {
    const AsHostTensor *tw, *tg, *base;
    bool have_w, have_g, diff;
    Slice s;
} HeatSrc;

static bool heat_src(const TuiData *d, int l, AsTensorId id, HeatSrc *h)
{
    memset(h, 0, sizeof *h);
    const AsRun *r = &d->ref[l];
    const AsRun *gr = d->got ? &d->got[l] : NULL;
    h->tw = &r->t[id];
    h->tg = gr ? &gr->t[id] : NULL;
    h->have_w = h->tw->data != NULL;
    h->have_g = h->tg && h->tg->data;
    h->diff = h->have_w && h->have_g && same_shape(h->tw, h->tg);
    h->base = h->have_w ? h->tw : h->have_g ? h->tg : NULL;
    if (!h->base)
        return false;
    const AsHostTensor *b = h->base;
    if (b->ndim == 3) {
        h->s.H = (int)b->shape[1];
        h->s.R = (int)b->shape[0] * h->s.H;
        h->s.C = (int)b->shape[2];
    } else if (b->ndim == 2) {
        h->s.R = (int)b->shape[0];
        h->s.C = (int)b->shape[1];
    } else {
        h->s.R = 1;
        h->s.C = b->ndim ? (int)b->shape[0] : 0;
    }
    return true;
}

/* The drawn magnitude of element i: |diff|, else |value|; NaN counts as infinite. */
static double magnitude(const HeatSrc *h, int64_t i)
{
    double v = h->diff ? absdiff(elem(h->tg, i), elem(h->tw, i)) : fabs(elem(h->base, i));
    return isnan(v) ? INFINITY : v;
}

/* ---- the maxima pyramid --------------------------------------------------------------------- */

enum { BAND = TUI_HEAT_BAND };

void tui_heat_cache_free(TuiHeatCache *c)
{
    for (int k = 0; k < TUI_HEAT_LEVELS; k++)
        free(c->colmax[k]);
    free(c->cells);
    memset(c, 0, sizeof *c);
}

static bool cache_fits(const TuiHeatCache *c, const TuiData *d, int l, AsTensorId id, const HeatSrc *h)
{
    return c->colmax[0] && c->got == (h->tg ? h->tg->data : NULL) && c->want == h->tw->data && c->gen == d->gen &&
           c->layer == l && c->id == id && c->R == h->s.R && c->C == h->s.C && c->diff == h->diff;
}

static bool is_float(const AsHostTensor *t) { return t->type == AS_VT_BF16 || t->type == AS_VT_F32; }

/* cm[col] = max(cm[col], magnitude of row r), the float case in a loop the compiler vectorises. */
static void row_into(const HeatSrc *h, int64_t r, float *cm)
{
    const int C = h->s.C;
    if (h->diff && is_float(h->tg) && is_float(h->tw)) {
        const float *g = (const float *)h->tg->data + r * C, *w = (const float *)h->tw->data + r * C;
#pragma omp simd
        for (int x = 0; x < C; x++) {
            float a = g[x], b = w[x], v = fabsf(a - b);
            v = a == b ? 0.0f : v;       /* equal infinities too */
            v = v != v ? INFINITY : v;   /* a NaN on either side */
            cm[x] = cm[x] > v ? cm[x] : v;
        }
    } else if (!h->diff && is_float(h->base)) {
        const float *b = (const float *)h->base->data + r * C;
#pragma omp simd
        for (int x = 0; x < C; x++) {
            float v = fabsf(b[x]);
            v = v != v ? INFINITY : v;
            cm[x] = cm[x] > v ? cm[x] : v;
        }
    } else {
        for (int x = 0; x < C; x++) {
            float v = (float)magnitude(h, flat(&h->s, r, x));
            cm[x] = cm[x] > v ? cm[x] : v;
        }
    }
}

/* One pass over the tensor for the first level (each column's maximum over bands of 16 rows),
 * then each level from the one below (16 of its bands). */
static int cache_build(TuiHeatCache *c, const TuiData *d, int l, AsTensorId id, const HeatSrc *h)
{
    tui_heat_cache_free(c);
    const Slice *s = &h->s;
    int64_t band = BAND;
    for (int k = 0; k < TUI_HEAT_LEVELS; k++, band *= BAND) {
        c->bands[k] = (int)((s->R + band - 1) / band);
        if (!(c->colmax[k] = calloc((size_t)c->bands[k] * (size_t)s->C, sizeof(float)))) {
            tui_heat_cache_free(c);
            return -1;
        }
        c->n_levels = k + 1;
        if (c->bands[k] == 1)
            break;
    }
    float *l0 = c->colmax[0];
    int nb0 = c->bands[0];
#pragma omp parallel for schedule(static)
    for (int b = 0; b < nb0; b++)
        for (int64_t r = (int64_t)b * BAND; r < (int64_t)(b + 1) * BAND && r < s->R; r++)
            row_into(h, r, l0 + (size_t)b * (size_t)s->C);
    for (int k = 1; k < c->n_levels; k++) {
        const float *lo = c->colmax[k - 1];
        float *hi = c->colmax[k];
        for (int b = 0; b < c->bands[k - 1]; b++) {
            float *dst = hi + (size_t)(b / BAND) * (size_t)s->C;
            const float *src = lo + (size_t)b * (size_t)s->C;
            for (int x = 0; x < s->C; x++)
                dst[x] = dst[x] > src[x] ? dst[x] : src[x];
        }
    }
    const int top = c->n_levels - 1;
    c->vmax = 0;
    c->any_inf = false;
    for (size_t i = 0; i < (size_t)c->bands[top] * (size_t)s->C; i++) {
        float v = c->colmax[top][i];
        if (isinf(v))
            c->any_inf = true;
        else if (v > c->vmax)
            c->vmax = v;
    }
    c->got = h->tg ? h->tg->data : NULL;
    c->want = h->tw->data;
    c->gen = d->gen;
    c->layer = l;
    c->id = id;
    c->R = s->R;
    c->C = s->C;
    c->diff = h->diff;
    c->view_key[0] = -1; /* no cells yet */
    return 0;
}

/* The element with the largest magnitude (the first of equals): the column from the top level,
 * then down the levels to its band of 16 rows, then its row. */
static void cache_argmax(const TuiHeatCache *c, const HeatSrc *h, int64_t *row, int64_t *col)
{
    const int top = c->n_levels - 1, C = c->C;
    const float *t = c->colmax[top];
    size_t best = 0;
    for (size_t i = 1; i < (size_t)c->bands[top] * (size_t)C; i++)
        if (t[i] > t[best])
            best = i;
    int64_t b = (int64_t)(best / (size_t)C), x = (int64_t)(best % (size_t)C);
    for (int k = top - 1; k >= 0; k--) {
        int64_t b0 = b * BAND, bb = b0;
        for (int64_t j = b0; j < b0 + BAND && j < c->bands[k]; j++)
            if (c->colmax[k][j * C + x] > c->colmax[k][bb * C + x])
                bb = j;
        b = bb;
    }
    int64_t r0 = b * BAND, rr = r0;
    double m = -1;
    for (int64_t r = r0; r < r0 + BAND && r < c->R; r++) {
        double v = magnitude(h, flat(&h->s, r, x));
        if (v > m)
            m = v, rr = r;
    }
    *row = rr;
    *col = x;
}

/* ---- the view: zoom, origin, cells -------------------------------------------------------- */

/* One axis: E elements in at most P cells. Zoom z shows ceil(E / 2^z) elements (never fewer
 * than fit one a cell). Coarse rows count in bands of a pyramid level (u = 16, 256, ...), so
 * that each cell covers whole bands and its maximum comes from the pyramid exactly. */
typedef struct {
    int64_t E;
    int P;
    int level;          /* the pyramid level counted in (-1: elements) */
    int64_t u;          /* elements a unit: 1 or the level's band */
    int64_t units;      /* ceil(E / u) */
    int64_t span;       /* units in view */
    int n;              /* cells */
    int64_t org;        /* first unit in view */
} Axis;

static int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

/* The smallest zoom that shows one element a cell. */
static int axis_max_zoom(int64_t E, int P)
{
    int z = 0;
    while (ceil_div(E, (int64_t)1 << z) > P && z < 40)
        z++;
    return z;
}

/* levels: how many pyramid levels the axis may count in (0: always elements). */
static void axis_set(Axis *a, int64_t E, int P, int zoom, int64_t cursor, int *org_elem, int levels)
{
    a->E = E;
    a->P = P < 1 ? 1 : P;
    int64_t span = ceil_div(E, (int64_t)1 << (zoom < 40 ? zoom : 40));
    if (span < (E < a->P ? E : a->P))
        span = E < a->P ? E : a->P;
    a->level = -1;
    a->u = 1;
    for (int64_t band = BAND; a->level + 1 < levels && span / a->P >= band; band *= BAND)
        a->level++, a->u = band;
    a->units = ceil_div(E, a->u);
    a->span = a->u == 1 ? span : ceil_div(span, a->u);
    if (a->span > a->units)
        a->span = a->units;
    a->n = (int)(a->span < a->P ? a->span : a->P);
    /* keep the origin while the cursor is in view; else centre the cursor */
    int64_t cu = cursor / a->u, org = *org_elem >= 0 ? *org_elem / a->u : -1;
    if (org < 0 || cu < org || cu >= org + a->span)
        org = cu - a->span / 2;
    if (org > a->units - a->span)
        org = a->units - a->span;
    if (org < 0)
        org = 0;
    a->org = org;
    *org_elem = (int)(org * a->u);
}

/* Cell i's units [lo, hi). */
static void axis_cell(const Axis *a, int i, int64_t *lo, int64_t *hi)
{
    *lo = a->org + (int64_t)i * a->span / a->n;
    *hi = a->org + (int64_t)(i + 1) * a->span / a->n;
}

/* The cell holding element e (-1 when out of view). */
static int axis_cell_of(const Axis *a, int64_t e)
{
    int64_t y = e / a->u - a->org;
    if (y < 0 || y >= a->span)
        return -1;
    return (int)((y * a->n + a->n - 1) / a->span);
}

static int64_t axis_elem(const Axis *a, int64_t unit) { return unit * a->u < a->E ? unit * a->u : a->E; }

/* The maximum magnitude of the cell rows [r0, r1) x columns [c0, c1) (in elements): from the
 * pyramid level the rows count in, else from the elements. */
static float cell_max(const TuiHeatCache *c, const HeatSrc *h, const Axis *ar, int64_t r0, int64_t r1, int64_t c0,
                      int64_t c1)
{
    float m = 0;
    if (ar->level >= 0) {
        const float *lv = c->colmax[ar->level];
        for (int64_t b = r0 / ar->u; b < ceil_div(r1, ar->u); b++) {
            const float *row = lv + b * c->C;
            for (int64_t x = c0; x < c1; x++)
                m = m > row[x] ? m : row[x];
        }
    } else {
        for (int64_t r = r0; r < r1; r++)
            for (int64_t x = c0; x < c1; x++) {
                float v = (float)magnitude(h, flat(&h->s, r, x));
                m = m > v ? m : v;
            }
    }
    return m;
}

/* The cells of the view, from the cache when only the cursor moved since they were made. */
static const double *view_cells(TuiHeatCache *c, const HeatSrc *h, const Axis *ar, const Axis *ac)
{
    long long key[8] = {ar->org, ar->span, ar->n, ar->u, ac->org, ac->span, ac->n, ac->u};
    if (c->cells && !memcmp(key, c->view_key, sizeof key))
        return c->cells;
    int n = ar->n * ac->n;
    if (n > c->cells_cap) {
        double *v = realloc(c->cells, sizeof *v * (size_t)n);
        if (!v)
            return NULL;
        c->cells = v;
        c->cells_cap = n;
    }
    for (int i = 0; i < ar->n; i++) {
        int64_t u0, u1;
        axis_cell(ar, i, &u0, &u1);
        int64_t e0 = axis_elem(ar, u0), e1 = axis_elem(ar, u1);
        for (int k = 0; k < ac->n; k++) {
            int64_t v0, v1;
            axis_cell(ac, k, &v0, &v1);
            c->cells[i * ac->n + k] = cell_max(c, h, ar, e0, e1, axis_elem(ac, v0), axis_elem(ac, v1));
        }
    }
    memcpy(c->view_key, key, sizeof key);
    return c->cells;
}

/* The shade of a magnitude on the scale 0 .. vmax: 0 for zero, 1..4 by quarters. */
static int level_of(double m, double vmax)
{
    if (m <= 0)
        return 0;
    if (!isfinite(m) || vmax <= 0)
        return 4;
    int lvl = 1 + (int)fmin(3.0, floor(4.0 * m / vmax));
    return lvl > 4 ? 4 : lvl;
}

/* The row label of element row r: "token.head" for 3-D tensors. */
static void row_label(const Slice *s, int64_t r, char *buf, size_t n)
{
    if (s->H)
        snprintf(buf, n, "%lld.%lld", (long long)(r / s->H), (long long)(r % s->H));
    else
        snprintf(buf, n, "%lld", (long long)r);
}

/* The scale: what each shade stands for, what is red, the cursor. */
static void heat_scale(TuiPanel *heat, const TuiGlyphs *g, double vmax, bool any_inf, bool diff, bool selection,
                       double tol)
{
    TuiLine leg;
    tl_init(&leg);
    tl_put(&leg, TC_DIM, " ");
    tl_put(&leg, TC_DIM, g->shade[0]);
    tl_put(&leg, TC_NORMAL, " 0");
    if (vmax <= 0 && !any_inf)
        tl_put(&leg, TC_NORMAL, diff ? ": no difference anywhere" : ": every value is zero");
    for (int i = 1; i <= 4 && vmax > 0; i++) {
        tl_put(&leg, TC_NORMAL, "  ");
        tl_put(&leg, (TuiColor)(TC_HEAT1 + i - 1), g->shade[i]);
        tl_add(&leg, TC_NORMAL, " %s%.3g", i == 4 ? "to " : "<", vmax * i / 4);
    }
    if (any_inf)
        tl_put(&leg, TC_BAD, "  red: infinite or NaN");
    if (diff && isfinite(tol) && !selection)
        tl_add(&leg, TC_MISMATCH, "  red: beyond tol %.3g", tol);
    else if (diff && selection)
        tl_put(&leg, TC_MISMATCH, "  red: any difference (a selection)");
    tl_put(&leg, TC_NORMAL, "  ");
    tl_put(&leg, TC_CURSOR, g->shade[0]);
    tl_put(&leg, TC_NORMAL, " cursor");
    tls_add_wrapped_line(&heat->lines, &leg, tp_inner_w(heat), 3);
    tl_free(&leg);
}

/* Lines the scale takes at this width (to leave them below the cells). */
static int scale_lines(TuiPanel *heat, const TuiGlyphs *g, double vmax, bool any_inf, bool diff, bool selection,
                       double tol)
{
    TuiPanel tmp;
    tp_init(&tmp);
    tmp.r = heat->r;
    heat_scale(&tmp, g, vmax, any_inf, diff, selection, tol);
    int n = tmp.lines.n;
    tp_free(&tmp);
    return n;
}

/* The inspector's first line: what the tensor is. */
static void add_what(TuiPanel *insp, const AsTensorDesc *desc)
{
    char w[256];
    snprintf(w, sizeof w, " %s: %s", desc->name, desc->what);
    tls_add_wrapped(&insp->lines, TC_DIM, w, tp_inner_w(insp), 3);
}

static void put_cursor_on_worst(const TuiData *d, TuiState *st, const HeatSrc *h, const TuiHeatCache *c)
{
    int64_t wc[3];
    int nd = 0;
    const AsRun *gr = d->got ? &d->got[st->layer] : NULL;
    if (gr && d->done[st->layer] && d->diff[st->layer].t[st->tensor].worst >= 0 &&
        tui_tensor_worst(d, st->layer, st->tensor, wc, &nd)) {
        st->cur_r = (int)(nd == 3 ? wc[0] * h->s.H + wc[1] : wc[0]);
        st->cur_c = (int)(nd == 3 ? wc[2] : nd > 1 ? wc[1] : wc[0]);
        if (nd == 1)
            st->cur_r = 0;
    } else if (c && c->colmax[0]) {
        int64_t r, col;
        cache_argmax(c, h, &r, &col);
        st->cur_r = (int)r;
        st->cur_c = (int)col;
    } else {
        st->cur_r = st->cur_c = 0;
    }
    st->org_r = st->org_c = -1;
}

void tui_model_heatmap(const TuiData *d, TuiState *st, const TuiGlyphs *g, TuiPanel *heat, TuiPanel *insp,
                       TuiHeatGeom *geom, TuiHeatCache *cache)
{
    memset(geom, 0, sizeof *geom);
    int l = st->layer;
    AsTensorId id = st->tensor;
    const AsTensorDesc *desc = &as_tensor_desc[id];
    HeatSrc h;
    snprintf(insp->title, sizeof insp->title, "inspector: %s", desc->name);
    char age[96];
    tui_run_age(d, l, age, sizeof age);
    if (!heat_src(d, l, id, &h)) {
        snprintf(heat->title, sizeof heat->title, "layer %d: %s", l, desc->name);
        if (tui_layer_dropped(d, l))
            tls_add(&heat->lines, TC_WARN, " layer %d's tensors were dropped to bound memory: only the latest layers "
                    "keep theirs (ATTNSCOPE_RUN_BUDGET_MB); its verdicts stay in the layer list", l);
        else
            tls_add(&heat->lines, TC_DIM, " %s is not present in layer %d%s (its role or this step has none)",
                    desc->name, l, d->cur.step >= 0 ? "" : " yet");
        add_what(insp, desc);
        return;
    }
    const Slice s = h.s;
    const char *what = h.diff ? "|diff|" : h.have_w ? "|ref|" : "|engine|";
    char headtxt[64] = "";
    if (s.H)
        snprintf(headtxt, sizeof headtxt, ", %d %ss per %s", s.H, desc->dims[1], desc->dims[0]);
    snprintf(heat->title, sizeof heat->title, "%s %s, layer %d%s%s%s", what, desc->name, l, headtxt,
             h.diff ? "" : (d->got ? " (one side only)" : " (no engine)"), age);
    if (s.R <= 0 || s.C <= 0) {
        tls_add(&heat->lines, TC_DIM, " %s is empty here (%d rows): nothing to draw", desc->name, s.R);
        add_what(insp, desc);
        return;
    }
    TuiHeatCache local;
    memset(&local, 0, sizeof local);
    TuiHeatCache *c = cache ? cache : &local;
    if (!cache_fits(c, d, l, id, &h) && cache_build(c, d, l, id, &h)) {
        tls_add(&heat->lines, TC_BAD, " out of memory for the heatmap of %s", desc->name);
        return;
    }
    if (st->heat_open) {
        put_cursor_on_worst(d, st, &h, c);
        st->heat_open = false;
    }
    if (st->cur_r >= s.R)
        st->cur_r = s.R - 1;
    if (st->cur_c >= s.C)
        st->cur_c = s.C - 1;
    if (s.H)
        st->head = st->cur_r % s.H;
    double tol = INFINITY;
    if (h.diff && d->done[l] && d->diff[l].t[id].verdict != AS_V_NOT_RUN)
        tol = d->diff[l].t[id].tol;

    /* geometry: a row label column, then the cells; the scale below them */
    char lab[32];
    row_label(&s, s.R - 1, lab, sizeof lab);
    int lw = (int)strlen(lab) + 1;
    tl_put(&heat->header, TC_HEADER, " "); /* so that tp_inner_h counts the header */
    int cells_w = tp_inner_w(heat) - lw - 1;
    int cells_h = tp_inner_h(heat) - scale_lines(heat, g, c->vmax, c->any_inf, h.diff, desc->selection, tol);
    geom->max_zoom = axis_max_zoom(s.R, cells_h < 1 ? 1 : cells_h);
    int zc = axis_max_zoom(s.C, cells_w < 1 ? 1 : cells_w);
    geom->max_zoom = zc > geom->max_zoom ? zc : geom->max_zoom;
    if (st->zoom > geom->max_zoom)
        st->zoom = geom->max_zoom;
    if (st->zoom < 0)
        st->zoom = 0;
    Axis ar, ac;
    axis_set(&ar, s.R, cells_h, st->zoom, st->cur_r, &st->org_r, c->n_levels);
    axis_set(&ac, s.C, cells_w, st->zoom, st->cur_c, &st->org_c, 0);
    /* fewer elements than columns: wider cells fill the panel */
    int cw = ac.u == 1 && ac.n * 2 <= cells_w ? cells_w / ac.n : 1;
    if (cw > 4)
        cw = 4;
    int64_t span_r = axis_elem(&ar, ar.org + ar.span) - axis_elem(&ar, ar.org);
    int64_t span_c = axis_elem(&ac, ac.org + ac.span) - axis_elem(&ac, ac.org);
    geom->valid = true;
    geom->rows = s.R;
    geom->cols = s.C;
    geom->heads = s.H;
    geom->zoom = st->zoom;
    geom->span_r = (int)span_r;
    geom->span_c = (int)span_c;
    geom->n_r = ar.n;
    geom->n_c = ac.n;
    geom->rpc = (int)ceil_div(span_r, ar.n);
    geom->cpc = (int)ceil_div(span_c, ac.n);

    char r0[32], r1[32], rdim[48];
    row_label(&s, axis_elem(&ar, ar.org), r0, sizeof r0);
    row_label(&s, axis_elem(&ar, ar.org + ar.span) - 1, r1, sizeof r1);
    snprintf(rdim, sizeof rdim, "%s%s%s", desc->dims[0], s.H ? "." : "", s.H ? desc->dims[1] : "");
    const char *cdim = desc->ndim == 3 ? desc->dims[2] : desc->ndim > 1 && desc->dims[1] ? desc->dims[1] : "col";
    tl_clear(&heat->header);
    tl_add(&heat->header, TC_HEADER, " %s %s..%s (%d a cell) x %s %lld..%lld (%d a cell)  zoom %d/%d", rdim, r0, r1,
           geom->rpc, cdim, (long long)axis_elem(&ac, ac.org), (long long)axis_elem(&ac, ac.org + ac.span) - 1,
           geom->cpc, st->zoom, geom->max_zoom);
    int cur_i = axis_cell_of(&ar, st->cur_r), cur_k = axis_cell_of(&ac, st->cur_c);
    const double *cells = view_cells(c, &h, &ar, &ac);
    if (!cells) {
        tls_add(&heat->lines, TC_BAD, " out of memory for the heatmap of %s", desc->name);
        if (c == &local)
            tui_heat_cache_free(&local);
        return;
    }
    for (int i = 0; i < ar.n; i++) {
        TuiLine *line = tls_new(&heat->lines);
        if (!line)
            break;
        int64_t u0, u1;
        axis_cell(&ar, i, &u0, &u1);
        row_label(&s, axis_elem(&ar, u0), lab, sizeof lab);
        tl_add(line, TC_DIM, "%*s ", lw, lab);
        for (int k = 0; k < ac.n; k++) {
            double m = cells[i * ac.n + k];
            int lvl = level_of(m, c->vmax);
            TuiColor col = lvl == 0 ? TC_DIM : (TuiColor)(TC_HEAT1 + lvl - 1);
            if (!isfinite(m))
                col = TC_BAD;
            else if (h.diff && m > (desc->selection ? 0 : tol))
                col = TC_MISMATCH;
            if (i == cur_i && k == cur_k)
                col = TC_CURSOR;
            for (int x = 0; x < cw; x++)
                tl_put(line, col, g->shade[lvl]);
        }
    }
    heat_scale(heat, g, c->vmax, c->any_inf, h.diff, desc->selection, tol);

    /* the inspector */
    char ct[128], a[40], b[40];
    int64_t i = flat(&s, st->cur_r, st->cur_c);
    add_what(insp, desc);
    coord_text(id, &s, st->cur_r, st->cur_c, ct, sizeof ct);
    TuiLine *lc = tls_new(&insp->lines);
    if (lc) {
        tl_add(lc, TC_NORMAL, " cursor     %s", ct);
        if (geom->rpc * geom->cpc > 1)
            tl_add(lc, TC_DIM, "  (a cell: %d x %d, its maximum drawn; + zooms in)", geom->rpc, geom->cpc);
    }
    TuiLine *le = tls_new(&insp->lines), *lr = tls_new(&insp->lines), *ld = tls_new(&insp->lines);
    if (le) {
        tl_put(le, TC_NORMAL, " engine     ");
        if (h.have_g && same_shape(h.tg, h.base)) {
            fmt_val(h.tg, elem(h.tg, i), a, sizeof a);
            tl_put(le, TC_NORMAL, a);
        } else {
            tl_put(le, TC_REFONLY, d->got ? "absent" : "no engine");
        }
    }
    if (lr) {
        tl_put(lr, TC_NORMAL, " reference  ");
        if (h.have_w) {
            fmt_val(h.tw, elem(h.tw, i), b, sizeof b);
            tl_put(lr, TC_NORMAL, b);
        } else {
            tl_put(lr, TC_DIM, "absent");
        }
    }
    if (ld) {
        tl_put(ld, TC_NORMAL, " diff       ");
        if (h.diff) {
            double gv = elem(h.tg, i), wv = elem(h.tw, i), dv = absdiff(gv, wv);
            tl_add(ld, dv > tol ? TC_MISMATCH : TC_NORMAL, "%.6g", gv - wv);
            if (h.tw->type == AS_VT_BF16) {
                int64_t u = as_bf16_ulp_distance((float)gv, (float)wv);
                if (u == INT64_MAX)
                    tl_add(ld, TC_NORMAL, "  (nan)");
                else
                    tl_add(ld, TC_NORMAL, "  (%lld ulp)", (long long)u);
            }
        } else {
            tl_put(ld, TC_REFONLY, d->got ? "one side only" : "no engine");
        }
    }
    if (h.diff && d->done[l]) {
        char line[512];
        line[0] = ' ';
        as_tensor_diff_line(id, &d->diff[l].t[id], line + 1, sizeof line - 1);
        tls_add_wrapped(&insp->lines, tui_verdict_color(d->diff[l].t[id].verdict), line, tp_inner_w(insp), 3);
    } else if (!d->got) {
        int64_t r, col;
        cache_argmax(c, &h, &r, &col);
        coord_text(id, &s, r, col, ct, sizeof ct);
        char line[256];
        snprintf(line, sizeof line, " largest |ref| at %s (w moves the cursor there)", ct);
        tls_add_wrapped(&insp->lines, TC_NORMAL, line, tp_inner_w(insp), 3);
    }
    if (c == &local)
        tui_heat_cache_free(&local);
}

bool tui_tensor_worst(const TuiData *d, int l, AsTensorId id, int64_t coord[3], int *ndim)
{
    const AsRun *r = &d->ref[l];
    const AsRun *gr = d->got ? &d->got[l] : NULL;
    const AsHostTensor *tw = &r->t[id], *tg = gr ? &gr->t[id] : NULL;
    const AsHostTensor *base = tw->data ? tw : tg && tg->data ? tg : NULL;
    coord[0] = coord[1] = coord[2] = 0;
    if (!base)
        return false;
    *ndim = base->ndim;
    if (gr && d->done[l] && d->diff[l].t[id].worst >= 0) {
        memcpy(coord, d->diff[l].t[id].worst_coord, sizeof(int64_t) * 3);
        return true;
    }
    double m = -1;
    int64_t at = -1, n = as_ht_numel(base);
    for (int64_t k = 0; k < n; k++) {
        double v = fabs(elem(base, k));
        if (isfinite(v) && v > m)
            m = v, at = k;
    }
    if (at < 0)
        return false;
    for (int dd = base->ndim - 1; dd >= 0; dd--) {
        int64_t e = base->shape[dd] > 0 ? base->shape[dd] : 1;
        coord[dd] = at % e;
        at /= e;
    }
    return true;
}

/* ---- keys ------------------------------------------------------------------------------------ */

void tui_tensor_open(TuiState *st)
{
    st->view = TV_TENSOR;
    st->heat_open = true;
    st->zoom = 0;
    st->org_r = st->org_c = -1;
}

void tui_state_set_view(TuiState *st, TuiView v)
{
    if (v == TV_TENSOR && st->view != TV_TENSOR)
        tui_tensor_open(st);
    st->view = v;
}

bool tui_heat_goto_parse(const TuiData *d, const TuiState *st, const char *text, int64_t coord[3], char *msg,
                         size_t n)
{
    const AsTensorDesc *desc = &as_tensor_desc[st->tensor];
    HeatSrc h;
    if (!heat_src(d, st->layer, st->tensor, &h) || h.s.R <= 0 || h.s.C <= 0) {
        snprintf(msg, n, "%s has no elements in layer %d", desc->name, st->layer);
        return false;
    }
    const AsHostTensor *b = h.base;
    int nd = b->ndim;
    /* the cursor's own coordinates fill what the text leaves out */
    int64_t cur[3] = {0, 0, 0};
    if (nd == 3)
        cur[0] = st->cur_r / h.s.H, cur[1] = st->cur_r % h.s.H, cur[2] = st->cur_c;
    else if (nd == 2)
        cur[0] = st->cur_r, cur[1] = st->cur_c;
    else
        cur[0] = st->cur_c;
    bool set[3] = {false, false, false};
    int next = 0, named = -1;
    const char *p = text;
    while (*p) {
        while (*p == ' ' || *p == ',')
            p++;
        if (!*p)
            break;
        if (*p >= '0' && *p <= '9') {
            char *end;
            long long v = strtoll(p, &end, 10);
            int dim = named >= 0 ? named : next;
            while (named < 0 && dim < nd && set[dim])
                dim++;
            if (dim >= nd) {
                snprintf(msg, n, "%s has %d dimension%s: one number too many", desc->name, nd, nd == 1 ? "" : "s");
                return false;
            }
            if (v < 0 || v >= b->shape[dim]) {
                snprintf(msg, n, "%s %lld is beyond 0..%lld", desc->dims[dim], v, (long long)b->shape[dim] - 1);
                return false;
            }
            cur[dim] = v;
            set[dim] = true;
            next = dim + 1;
            named = -1;
            p = end;
            continue;
        }
        const char *w0 = p;
        while (*p && *p != ' ' && *p != ',' && !(*p >= '0' && *p <= '9'))
            p++;
        size_t len = (size_t)(p - w0);
        int match = -1, count = 0;
        for (int k = 0; k < nd; k++)
            if (desc->dims[k] && len <= strlen(desc->dims[k]) && !strncmp(desc->dims[k], w0, len))
                match = k, count++;
        if (count != 1) {
            char dims[96] = "";
            for (int k = 0; k < nd; k++)
                snprintf(dims + strlen(dims), sizeof dims - strlen(dims), "%s%s", k ? ", " : "", desc->dims[k]);
            snprintf(msg, n, "'%.*s' is %s dimension of %s (%s)", (int)(len < 24 ? len : 24), w0,
                     count ? "more than one" : "not a", desc->name, dims);
            return false;
        }
        named = match;
    }
    if (named >= 0) {
        snprintf(msg, n, "%s needs a number after it", desc->dims[named]);
        return false;
    }
    int pos = 0;
    pos += snprintf(msg, n, "goes to");
    for (int k = 0; k < nd && pos < (int)n; k++)
        pos += snprintf(msg + pos, n - (size_t)pos, "%s %s %lld", k ? "," : "", desc->dims[k], (long long)cur[k]);
    memcpy(coord, cur, sizeof cur);
    return true;
}

void tui_heat_goto(const TuiData *d, TuiState *st, const int64_t coord[3])
{
    HeatSrc h;
    if (!heat_src(d, st->layer, st->tensor, &h))
        return;
    int nd = h.base->ndim;
    st->cur_r = (int)(nd == 3 ? coord[0] * h.s.H + coord[1] : nd == 2 ? coord[0] : 0);
    st->cur_c = (int)(nd == 3 ? coord[2] : nd == 2 ? coord[1] : coord[0]);
    st->zoom = 99; /* clamped to one element a cell by the build */
    st->org_r = st->org_c = -1;
    st->heat_open = false;
}

bool tui_tensor_key(const TuiData *d, TuiState *st, const TuiHeatGeom *hg, int key)
{
    (void)d;
    enum { PAGE = 10 };
    int rpc = hg->valid ? hg->rpc : 1, cpc = hg->valid ? hg->cpc : 1;
    switch (key) {
    case TUI_KEY_ESC: st->view = TV_LAYERS; return true;
    case 'w': st->heat_open = true; return true; /* the cursor to the worst, at this zoom */
    case '+':
    case '=':
    case '-':
        st->zoom += key == '-' ? -1 : 1;
        if (st->zoom < 0)
            st->zoom = 0;
        if (hg->valid && st->zoom > hg->max_zoom)
            st->zoom = hg->max_zoom;
        st->org_r = st->org_c = -1; /* centred on the cursor */
        return true;
    case '<':
    case '>':
        /* one head up or down: the heatmap has a row per token and head */
        if (!hg->valid || hg->heads <= 0)
            return false;
        st->cur_r += key == '>' ? 1 : -1;
        break;
    case TUI_KEY_UP: case 'k': st->cur_r -= rpc; break;
    case TUI_KEY_DOWN: case 'j': st->cur_r += rpc; break;
    case TUI_KEY_LEFT: case 'h': st->cur_c -= cpc; break;
    case TUI_KEY_RIGHT: case 'l': st->cur_c += cpc; break;
    case TUI_KEY_PGUP: st->cur_r -= rpc * PAGE; break;
    case TUI_KEY_PGDN: st->cur_r += rpc * PAGE; break;
    case TUI_KEY_HOME: st->cur_r = st->cur_c = 0; break;
    case TUI_KEY_END:
        if (hg->valid)
            st->cur_r = hg->rows - 1, st->cur_c = hg->cols - 1;
        break;
    default: return false;
    }
    if (st->cur_r < 0)
        st->cur_r = 0;
    if (st->cur_c < 0)
        st->cur_c = 0;
    if (hg->valid) {
        st->cur_r = st->cur_r < hg->rows ? st->cur_r : hg->rows - 1;
        st->cur_c = st->cur_c < hg->cols ? st->cur_c : hg->cols - 1;
    }
    return true;
}
