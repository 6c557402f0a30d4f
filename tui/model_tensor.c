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

void tui_model_heatmap(const TuiData *d, TuiState *st, const TuiGlyphs *g, TuiPanel *heat, TuiPanel *insp,
                       TuiHeatGeom *geom)
{
    memset(geom, 0, sizeof *geom);
    int l = st->layer;
    AsTensorId id = st->tensor;
    const AsTensorDesc *desc = &as_tensor_desc[id];
    const AsRun *r = &d->ref[l];
    const AsRun *gr = d->got ? &d->got[l] : NULL;
    const AsHostTensor *tw = &r->t[id], *tg = gr ? &gr->t[id] : NULL;
    bool have_w = tw->data != NULL, have_g = tg && tg->data;
    bool diff_mode = have_w && have_g && same_shape(tw, tg);
    const AsHostTensor *base = have_w ? tw : have_g ? tg : NULL;
    snprintf(insp->title, sizeof insp->title, "inspector: %s", desc->name);
    if (!base) {
        snprintf(heat->title, sizeof heat->title, "layer %d: %s", l, desc->name);
        tls_add(&heat->lines, TC_DIM, " %s is not present in layer %d%s (its role or this step has none)",
                desc->name, l, d->cur.step >= 0 ? "" : " yet");
        tls_add(&insp->lines, TC_DIM, " %s: %s", desc->name, desc->what);
        return;
    }
    Slice s = {0};
    if (base->ndim == 3) {
        s.H = (int)base->shape[1];
        s.R = (int)base->shape[0] * s.H;
        s.C = (int)base->shape[2];
    } else if (base->ndim == 2) {
        s.R = (int)base->shape[0];
        s.C = (int)base->shape[1];
    } else {
        s.R = 1;
        s.C = base->ndim ? (int)base->shape[0] : 0;
    }
    const char *what = diff_mode ? "|diff|" : "|ref|";
    if (!diff_mode && !have_w)
        what = "|engine|";
    char headtxt[64] = "";
    if (s.H)
        snprintf(headtxt, sizeof headtxt, ", %d %ss per %s", s.H, desc->dims[1], desc->dims[0]);
    snprintf(heat->title, sizeof heat->title, "%s %s, layer %d%s%s", what, desc->name, l, headtxt,
             diff_mode ? "" : (d->got ? " (one side only)" : " (no engine)"));
    if (s.R <= 0 || s.C <= 0) {
        tls_add(&heat->lines, TC_DIM, " %s is empty here (%d rows): nothing to draw", desc->name, s.R);
        tls_add(&insp->lines, TC_DIM, " %s: %s", desc->name, desc->what);
        return;
    }
    /* geometry: a row label column, then cells; a legend line at the bottom */
    char rdim[48];
    snprintf(rdim, sizeof rdim, "%s%s%s", desc->dims[0], s.H ? "." : "", s.H ? desc->dims[1] : "");
    const char *cdim = desc->ndim == 3 ? desc->dims[2] : desc->dims[1] ? desc->dims[1] : "col";
    int iw = tp_inner_w(heat) - 7;
    tl_put(&heat->header, TC_HEADER, " "); /* placeholder so that tp_inner_h counts the header */
    int ih = tp_inner_h(heat) - 1;
    if (iw < 1)
        iw = 1;
    if (ih < 1)
        ih = 1;
    int cpc = (s.C + iw - 1) / iw, rpc = (s.R + ih - 1) / ih;
    int ncc = (s.C + cpc - 1) / cpc, nrc = (s.R + rpc - 1) / rpc;
    geom->valid = true;
    geom->rows = s.R;
    geom->cols = s.C;
    geom->rpc = rpc;
    geom->cpc = cpc;
    geom->heads = s.H;
    if (st->cur_r >= s.R)
        st->cur_r = s.R - 1;
    if (st->cur_c >= s.C)
        st->cur_c = s.C - 1;
    if (s.H)
        st->head = st->cur_r % s.H;
    tl_clear(&heat->header);
    if (s.H)
        tl_add(&heat->header, TC_HEADER, " %s 0.0..%d.%d down (%d per cell), %s 0..%d across (%d per cell)", rdim,
               s.R / s.H - 1, s.H - 1, rpc, cdim, s.C - 1, cpc);
    else
        tl_add(&heat->header, TC_HEADER, " %s 0..%d down (%d per cell), %s 0..%d across (%d per cell)", rdim,
               s.R - 1, rpc, cdim, s.C - 1, cpc);
    /* the cells' maxima */
    double *cell = malloc(sizeof *cell * (size_t)nrc * (size_t)ncc);
    if (!cell) {
        tls_add(&heat->lines, TC_BAD, " out of memory for the heatmap");
        return;
    }
    double vmax = 0;
    int64_t worst_cell_r = -1, worst_cell_c = -1;
    double worst_cell = -1;
    for (int cr = 0; cr < nrc; cr++)
        for (int cc = 0; cc < ncc; cc++) {
            double m = 0;
            for (int64_t rr = (int64_t)cr * rpc; rr < (int64_t)(cr + 1) * rpc && rr < s.R; rr++)
                for (int64_t c = (int64_t)cc * cpc; c < (int64_t)(cc + 1) * cpc && c < s.C; c++) {
                    int64_t i = flat(&s, rr, c);
                    double v = diff_mode ? absdiff(elem(tg, i), elem(tw, i)) : fabs(elem(base, i));
                    if (isnan(v))
                        v = INFINITY;
                    if (v > m)
                        m = v;
                }
            cell[cr * ncc + cc] = m;
            if (isfinite(m) && m > vmax)
                vmax = m;
            if (m > worst_cell) {
                worst_cell = m;
                worst_cell_r = cr;
                worst_cell_c = cc;
            }
        }
    (void)worst_cell_r;
    (void)worst_cell_c;
    double tol = INFINITY;
    if (diff_mode) {
        const AsTensorDiff *df = &d->diff[l].t[id];
        tol = d->done[l] && df->verdict != AS_V_NOT_RUN ? df->tol : INFINITY;
    }
    int cur_cr = st->cur_r / rpc, cur_cc = st->cur_c / cpc;
    for (int cr = 0; cr < nrc; cr++) {
        TuiLine *line = tls_new(&heat->lines);
        if (!line)
            break;
        if (s.H) {
            char lab[32];
            snprintf(lab, sizeof lab, "%d.%d", cr * rpc / s.H, cr * rpc % s.H);
            tl_add(line, TC_DIM, "%6s ", lab);
        } else {
            tl_add(line, TC_DIM, "%6d ", cr * rpc);
        }
        for (int cc = 0; cc < ncc; cc++) {
            double m = cell[cr * ncc + cc];
            int lvl = 0;
            if (m > 0)
                lvl = isfinite(m) && vmax > 0 ? 1 + (int)fmin(3.0, floor(4.0 * m / vmax)) : 4;
            if (lvl > 4)
                lvl = 4;
            TuiColor c = lvl == 0 ? TC_DIM : (TuiColor)(TC_HEAT1 + lvl - 1);
            if (!isfinite(m))
                c = TC_BAD;
            else if (diff_mode && m > (desc->selection ? 0 : tol))
                c = TC_MISMATCH;
            if (cr == cur_cr && cc == cur_cc)
                c = TC_CURSOR;
            tl_put(line, c, g->shade[lvl]);
        }
    }
    free(cell);
    TuiLine *leg = tls_new(&heat->lines);
    if (leg) {
        tl_put(leg, TC_DIM, "        ");
        tl_put(leg, TC_DIM, g->shade[0]);
        tl_put(leg, TC_NORMAL, " 0  ");
        for (int i = 1; i <= 4; i++)
            tl_put(leg, (TuiColor)(TC_HEAT1 + i - 1), g->shade[i]);
        tl_add(leg, TC_NORMAL, " up to %.4g", vmax);
        if (worst_cell > vmax)
            tl_put(leg, TC_BAD, "  red: infinite");
        if (diff_mode && isfinite(tol) && !desc->selection)
            tl_add(leg, TC_MISMATCH, "  beyond tol %.3g", tol);
        else if (diff_mode && desc->selection)
            tl_put(leg, TC_NORMAL, "  (selections: any difference counts)");
        tl_put(leg, TC_NORMAL, "  ");
        tl_put(leg, TC_CURSOR, g->shade[0]);
        tl_put(leg, TC_NORMAL, " cursor");
    }

    /* the inspector */
    char ct[128], a[40], b[40];
    int64_t i = flat(&s, st->cur_r, st->cur_c);
    tls_add(&insp->lines, TC_DIM, " %s: %s", desc->name, desc->what);
    coord_text(id, &s, st->cur_r, st->cur_c, ct, sizeof ct);
    if (rpc * cpc > 1)
        tls_add(&insp->lines, TC_NORMAL, " cursor     %s  (its cell: %d x %d, drawn as the maximum)", ct, rpc, cpc);
    else
        tls_add(&insp->lines, TC_NORMAL, " cursor     %s", ct);
    TuiLine *le = tls_new(&insp->lines), *lr = tls_new(&insp->lines), *ld = tls_new(&insp->lines);
    if (le) {
        tl_put(le, TC_NORMAL, " engine     ");
        if (have_g && same_shape(tg, base)) {
            fmt_val(tg, elem(tg, i), a, sizeof a);
            tl_put(le, TC_NORMAL, a);
        } else {
            tl_put(le, TC_REFONLY, d->got ? "absent" : "no engine");
        }
    }
    if (lr) {
        tl_put(lr, TC_NORMAL, " reference  ");
        if (have_w) {
            fmt_val(tw, elem(tw, i), b, sizeof b);
            tl_put(lr, TC_NORMAL, b);
        } else {
            tl_put(lr, TC_DIM, "absent");
        }
    }
    if (ld) {
        tl_put(ld, TC_NORMAL, " diff       ");
        if (diff_mode) {
            double gv = elem(tg, i), wv = elem(tw, i), dv = absdiff(gv, wv);
            tl_add(ld, dv > tol ? TC_MISMATCH : TC_NORMAL, "%.6g", gv - wv);
            if (tw->type == AS_VT_BF16) {
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
    if (diff_mode && d->done[l]) {
        char line[512];
        line[0] = ' ';
        as_tensor_diff_line(id, &d->diff[l].t[id], line + 1, sizeof line - 1);
        tls_add_wrapped(&insp->lines, tui_verdict_color(d->diff[l].t[id].verdict), line, tp_inner_w(insp), 3);
    } else if (!d->got) {
        int64_t wc[3];
        int nd;
        if (tui_tensor_worst(d, l, id, wc, &nd)) {
            coord_text(id, &s, s.H ? wc[0] * s.H + wc[1] : wc[0], s.H ? wc[2] : nd > 1 ? wc[1] : wc[0], ct, sizeof ct);
            tls_add(&insp->lines, TC_NORMAL, " largest |ref| at %s (w moves the cursor there)", ct);
        }
    }
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

void tui_tensor_open(const TuiData *d, TuiState *st)
{
    st->view = TV_TENSOR;
    int64_t c[3];
    int nd = 0;
    if (!tui_tensor_worst(d, st->layer, st->tensor, c, &nd)) {
        st->cur_r = st->cur_c = 0;
        return;
    }
    st->cur_r = (int)c[0];
    if (nd == 3) {
        /* one heatmap row per token and head */
        const AsHostTensor *t = &d->ref[st->layer].t[st->tensor];
        int64_t heads = t->data ? t->shape[1] : d->got[st->layer].t[st->tensor].shape[1];
        st->cur_r = (int)(c[0] * heads + c[1]);
        st->head = (int)c[1];
        st->cur_c = (int)c[2];
    } else {
        st->cur_c = nd > 1 ? (int)c[1] : 0;
    }
}

bool tui_tensor_key(const TuiData *d, TuiState *st, const TuiHeatGeom *hg, int key)
{
    enum { PAGE = 10 };
    int rpc = hg->valid ? hg->rpc : 1, cpc = hg->valid ? hg->cpc : 1;
    switch (key) {
    case TUI_KEY_ESC: st->view = TV_LAYERS; return true;
    case 'w': tui_tensor_open(d, st); return true;
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
    default: return false;
    }
    if (st->cur_r < 0)
        st->cur_r = 0;
    if (st->cur_c < 0)
        st->cur_c = 0;
    return true;
}
