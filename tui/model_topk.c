/* The top-k view: for a chosen query, the compressed selection of the engine and of the
 * reference side by side (positions, scores, distance to each side's cut), the differences
 * highlighted with the comparison's margins (AsTensorDiff.seldiff), and the index scores as a
 * sparkline with the cut (the k-th largest score). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tui/model.h"

static int cmp_desc(const void *a, const void *b)
{
    float x = *(const float *)a, y = *(const float *)b;
    return (x < y) - (x > y);
}

/* The k-th largest of a row (-inf when k is out of range). */
static float kth_largest(const float *row, int n, int k)
{
    if (!row || k <= 0 || k > n)
        return -INFINITY;
    float *tmp = malloc(sizeof *tmp * (size_t)n);
    if (!tmp)
        return -INFINITY;
    memcpy(tmp, row, sizeof *tmp * (size_t)n);
    qsort(tmp, (size_t)n, sizeof *tmp, cmp_desc);
    float v = tmp[k - 1];
    free(tmp);
    return v;
}

static const float *row_of(const AsRun *r, AsTensorId id, int t, int *n)
{
    const AsHostTensor *h = &r->t[id];
    *n = 0;
    if (!h->data || h->ndim != 2 || t < 0 || t >= h->shape[0])
        return NULL;
    *n = (int)h->shape[1];
    return (const float *)h->data + (size_t)t * (size_t)h->shape[1];
}

static const int32_t *sel_row(const AsRun *r, int t, int *n)
{
    const AsHostTensor *h = &r->t[AS_T_CSEL];
    *n = 0;
    if (!h->data || h->ndim != 2 || t < 0 || t >= h->shape[0])
        return NULL;
    *n = (int)h->shape[1];
    return (const int32_t *)h->data + (size_t)t * (size_t)h->shape[1];
}

static void fmt_score(const TuiGlyphs *g, float v, char *buf, size_t n)
{
    if (isinf(v) && v < 0)
        snprintf(buf, n, "%s", g->minus_inf);
    else
        snprintf(buf, n, "%.5g", v);
}

/* Distance to the cut: in bf16 ulps when close ("+1 ulp"), else the difference ("+0.25"). */
static void fmt_margin(float v, float cut, char *buf, size_t n)
{
    if (!isfinite(v) || !isfinite(cut)) {
        snprintf(buf, n, "%s", v == cut ? "at cut" : "");
        return;
    }
    int64_t u = as_bf16_ulp_distance(v, cut);
    if (u < 0)
        u = -u;
    if (u <= 16)
        snprintf(buf, n, "%s%lld ulp", v >= cut ? "+" : "-", (long long)u);
    else
        snprintf(buf, n, "%+.3g", (double)v - (double)cut);
}

typedef struct {
    int pos;
    bool in_got, in_want;
} Entry;

static int cmp_entry(const void *a, const void *b)
{
    return ((const Entry *)a)->pos - ((const Entry *)b)->pos;
}

static bool has(const int32_t *row, int n, int v)
{
    for (int i = 0; row && i < n; i++)
        if (row[i] == v)
            return true;
    return false;
}

/* The index scores as a sparkline across the panel (each column the maximum of its positions,
 * scaled between the lowest and the highest finite score), the picks marked below it, and a
 * legend for every mark. */
static void sparkline(TuiPanel *spark, const TuiGlyphs *g, const float *sw, int nw, float cut, const int32_t *want,
                      int nsel, int off, const int32_t *gotsel, int ngsel, int goff)
{
    int room = tp_inner_w(spark) - 1, cols = room < 1 ? 1 : room > nw ? nw : room;
    /* fewer positions than columns: each drawn wider, so the line still spans the panel */
    int cw = cols == nw && nw > 0 ? room / nw : 1;
    cw = cw < 1 ? 1 : cw > 4 ? 4 : cw;
    float lo = INFINITY, hi = -INFINITY;
    int picked = 0, masked = 0;
    for (int p = 0; p < nw; p++) {
        if (isfinite(sw[p])) {
            lo = fminf(lo, sw[p]);
            hi = fmaxf(hi, sw[p]);
        } else {
            masked++;
        }
        picked += has(want, nsel, p + off);
    }
    TuiLine *sl = tls_new(&spark->lines), *mk = tls_new(&spark->lines);
    if (!sl || !mk)
        return;
    tl_put(sl, TC_NORMAL, " ");
    tl_put(mk, TC_NORMAL, " ");
    bool some = false, shows_masked = false;
    for (int b = 0; b < cols; b++) {
        int p0 = (int)((int64_t)b * nw / cols), p1 = (int)((int64_t)(b + 1) * nw / cols);
        float m = -INFINITY;
        int n_sel = 0;
        bool only_g = false, only_w = false;
        for (int p = p0; p < p1; p++) {
            m = fmaxf(m, sw[p]);
            bool iw = has(want, nsel, p + off), ig = gotsel && has(gotsel, ngsel, p + goff);
            n_sel += iw;
            only_w |= gotsel && iw && !ig;
            only_g |= ig && !iw;
        }
        for (int x = 0; x < cw; x++) {
            if (!isfinite(m)) {
                tl_put(sl, TC_DIM, g->shade[0]);
                shows_masked = true;
            } else {
                int lvl = hi > lo ? (int)((m - lo) / (hi - lo) * 7.999f) : 7;
                lvl = lvl < 0 ? 0 : lvl > 7 ? 7 : lvl;
                tl_put(sl, m >= cut ? TC_GOOD : TC_DIM, g->spark[lvl]);
            }
            if (only_g)
                tl_put(mk, TC_ONLY_GOT, "e");
            else if (only_w)
                tl_put(mk, TC_ONLY_WANT, "r");
            else if (n_sel && n_sel == p1 - p0)
                tl_put(mk, TC_GOOD, "^");
            else if (n_sel)
                tl_put(mk, TC_GOOD, "'"), some = true;
            else
                tl_put(mk, TC_NORMAL, " ");
        }
    }
    char a[32] = "-", b[32] = "-", line[400];
    if (isfinite(lo))
        snprintf(a, sizeof a, "%.3g", lo), snprintf(b, sizeof b, "%.3g", hi);
    char per[48];
    if (cols < nw)
        snprintf(per, sizeof per, "several a column (their maximum)");
    else if (cw > 1)
        snprintf(per, sizeof per, "one a column, %d wide", cw);
    else
        snprintf(per, sizeof per, "one a column");
    snprintf(line, sizeof line, " positions 0..%d, %s; bar height: score %s..%s, green at or above the cut; %d of %d "
             "picked, %d masked", nw - 1, per, a, b, picked, nw, masked);
    tls_add_wrapped(&spark->lines, TC_DIM, line, tp_inner_w(spark), 2);
    TuiLine leg;
    tl_init(&leg);
    tl_put(&leg, TC_DIM, " marks: ");
    tl_item(&leg, TC_GOOD, "^", TC_DIM, cols == nw ? " picked" : " all picked");
    if (some || cols != nw)
        tl_item(&leg, TC_GOOD, "  '", TC_DIM, " some picked");
    tl_item(&leg, TC_ONLY_GOT, "  e", TC_DIM, " engine only");
    tl_item(&leg, TC_ONLY_WANT, "  r", TC_DIM, " reference only");
    if (shows_masked || masked) {
        tl_put(&leg, TC_DIM, "  ");
        tl_item(&leg, TC_DIM, g->shade[0], TC_DIM, " masked (-inf: not visible, or not a candidate)");
    }
    tls_add_wrapped_line(&spark->lines, &leg, tp_inner_w(spark), 4);
    tl_free(&leg);
}

void tui_model_topk(const TuiData *d, TuiState *st, const TuiGlyphs *g, TuiPanel *spark, TuiPanel *sets)
{
    int l = st->layer;
    const AsRun *r = &d->ref[l];
    snprintf(sets->title, sizeof sets->title, "selection");
    if (!r->t[AS_T_CSEL].data || r->t[AS_T_CSEL].shape[0] <= 0) {
        snprintf(spark->title, sizeof spark->title, "top-k: layer %d", l);
        tls_add(&spark->lines, TC_DIM, " layer %d has no compressed selection%s", l,
                r->ratio == 0 ? " (ratio 0: window only)" : r->s <= 0 ? " (not run yet)" : " (nothing compressed yet)");
        tls_add(&sets->lines, TC_DIM, " nothing to compare here: [ and ] change the layer, g jumps to one");
        tp_follow(spark, &st->top[TV_TOPK][0]);
        return;
    }
    const AsRun *gr = d->got && d->done[l] ? &d->got[l] : NULL;
    /* whose scores made the selection */
    const AsRun *sr = r, *sgr = gr;
    int sl = l;
    char whose[96] = "own indexer";
    if (!r->indexer_ran) {
        sl = r->sel_from.layer;
        snprintf(whose, sizeof whose, "selection of layer %d (step %d)", r->sel_from.layer, r->sel_from.step);
        sr = NULL;
        sgr = NULL;
        if (sl >= 0 && d->ref[sl].step == r->sel_from.step && d->ref[sl].indexer_ran) {
            sr = &d->ref[sl];
            sgr = d->got && d->done[sl] ? &d->got[sl] : NULL;
        }
    }
    int nsel = 0, ngsel = 0;
    int t = st->query < r->t[AS_T_CSEL].shape[0] ? st->query : (int)r->t[AS_T_CSEL].shape[0] - 1;
    const int32_t *want = sel_row(r, t, &nsel), *gotsel = gr ? sel_row(gr, t, &ngsel) : NULL;
    int nw = 0, ng = 0;
    const float *sw = sr ? row_of(sr, AS_T_ISCORE, t, &nw) : NULL;
    const float *sg = sgr ? row_of(sgr, AS_T_ISCORE, t, &ng) : NULL;
    int k = sr ? sr->k : r->k;
    float cut_w = kth_largest(sw, nw, k), cut_g = kth_largest(sg, ng, sgr ? sgr->k : k);
    int off = r->rows_a_len, goff = gr ? gr->rows_a_len : off;
    char age[96];
    tui_run_age(d, l, age, sizeof age);
    snprintf(spark->title, sizeof spark->title, "index scores: layer %d (%s), query %d (position %d)%s", l, whose, t,
             r->start_pos + t, age);

    /* the sparkline */
    TuiLine *line = tls_new(&spark->lines);
    if (line) {
        tl_add(line, TC_NORMAL, " %d scores, k = %d, ", nw, k);
        char c[32];
        fmt_score(g, cut_w, c, sizeof c);
        tl_add(line, TC_ACCENT, "cut (%d%s largest) = %s", k, k == 1 ? "st" : k == 2 ? "nd" : k == 3 ? "rd" : "th", c);
        if (sg) {
            fmt_score(g, cut_g, c, sizeof c);
            tl_add(line, TC_NORMAL, "; engine cut %s", c);
        }
    }
    if (!sw)
        tls_add(&spark->lines, TC_DIM, " the scores of %s are not held (an earlier step): sets only", whose);
    else
        sparkline(spark, g, sw, nw, cut_w, want, nsel, off, gotsel, ngsel, goff);
    tp_follow(spark, &st->top[TV_TOPK][0]);

    /* the sets side by side */
    snprintf(sets->title, sizeof sets->title, "compressed selection of query %d: engine | reference", t);
    Entry *e = calloc((size_t)(nsel + ngsel + 1), sizeof *e);
    if (!e) {
        tls_add(&sets->lines, TC_BAD, " out of memory");
        return;
    }
    int ne = 0, n_none_w = 0, n_none_g = 0;
    for (int i = 0; i < nsel; i++) {
        if (want[i] < 0) {
            n_none_w++;
            continue;
        }
        e[ne++] = (Entry){want[i] - off, false, true};
    }
    for (int i = 0; gotsel && i < ngsel; i++) {
        if (gotsel[i] < 0) {
            n_none_g++;
            continue;
        }
        int p = gotsel[i] - goff;
        bool found = false;
        for (int j = 0; j < ne; j++)
            if (e[j].pos == p) {
                e[j].in_got = true;
                found = true;
            }
        if (!found)
            e[ne++] = (Entry){p, true, false};
    }
    qsort(e, (size_t)ne, sizeof *e, cmp_entry);
    int half = (tp_inner_w(sets) - 3) / 2;
    if (half > 40)
        half = 40;
    TuiLine *h = &sets->header;
    if (gotsel)
        tl_field(h, TC_HEADER, half, " engine: %d picked", ngsel - n_none_g);
    else
        tl_field(h, TC_HEADER, half, " engine");
    tl_put(h, TC_HEADER, " | ");
    tl_field(h, TC_HEADER, half, "reference: %d picked", nsel - n_none_w);
    /* the comparison's own account of this query */
    if (gr) {
        const AsTensorDiff *df = &d->diff[l].t[AS_T_CSEL];
        const AsSelDiff *sd = NULL;
        for (int i = 0; i < df->n_seldiffs; i++)
            if (df->seldiff[i].query == t)
                sd = &df->seldiff[i];
        if (!sd && df->n_rows_differ == 0) {
            tls_add(&sets->lines, TC_PASS, " query %d: the sets agree (csel %s)", t, as_verdict_name(df->verdict));
        } else if (!sd) {
            tls_add(&sets->lines, TC_DIM, " query %d: the sets agree; %lld other rows differ", t,
                    (long long)df->n_rows_differ);
        } else {
            tls_add(&sets->lines, sd->near_tie ? TC_NEARTIE : TC_MISMATCH, " query %d: %s, margin %g ulp", t,
                    sd->near_tie ? "near-tie" : "real mismatch", sd->margin);
            TuiLine *sl2 = tls_new(&sets->lines);
            if (sl2) {
                tl_put(sl2, TC_ONLY_GOT, " engine only");
                for (int i = 0; i < sd->n_only_got && i < 8; i++)
                    tl_add(sl2, TC_ONLY_GOT, " %d", sd->only_got[i] - goff);
                tl_put(sl2, TC_ONLY_WANT, "  reference only");
                for (int i = 0; i < sd->n_only_want && i < 8; i++)
                    tl_add(sl2, TC_ONLY_WANT, " %d", sd->only_want[i] - off);
            }
        }
    } else if (!d->got) {
        tls_add(&sets->lines, TC_REFONLY, " no engine: the reference set alone");
    }
    for (int i = 0; i < ne; i++) {
        TuiLine *row = tls_new(&sets->lines);
        if (!row)
            break;
        char sc[32], mg[32];
        int p = e[i].pos;
        if (!gotsel) {
            tl_field(row, TC_REFONLY, half, "%s", "");
        } else if (e[i].in_got) {
            fmt_score(g, sg && p >= 0 && p < ng ? sg[p] : NAN, sc, sizeof sc);
            fmt_margin(sg && p >= 0 && p < ng ? sg[p] : NAN, cut_g, mg, sizeof mg);
            if (!sg)
                sc[0] = mg[0] = '\0';
            tl_field(row, e[i].in_want ? TC_NORMAL : TC_ONLY_GOT, half, " %5d  %10s  %s", p, sc, mg);
        } else {
            tl_field(row, TC_ONLY_WANT, half, "     -");
        }
        tl_put(row, TC_DIM, " | ");
        if (e[i].in_want) {
            fmt_score(g, sw && p >= 0 && p < nw ? sw[p] : NAN, sc, sizeof sc);
            fmt_margin(sw && p >= 0 && p < nw ? sw[p] : NAN, cut_w, mg, sizeof mg);
            if (!sw)
                sc[0] = mg[0] = '\0';
            tl_field(row, gotsel && !e[i].in_got ? TC_ONLY_WANT : TC_NORMAL, half, "%5d  %10s  %s", p, sc, mg);
        } else {
            tl_field(row, TC_ONLY_GOT, half, "    -");
        }
    }
    if (n_none_w || n_none_g)
        tls_add(&sets->lines, TC_DIM, " picks at or beyond compress_lens emitted as -1: engine %d, reference %d",
                n_none_g, n_none_w);
    free(e);
    tp_follow(sets, &st->top[TV_TOPK][1]);
}
