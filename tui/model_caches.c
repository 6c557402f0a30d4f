/* The caches view: each kv source's compressed cache (rows filled against max_seq / ratio, the
 * partial group waiting at ratio 2, the layers that read it), each key owner's index-key cache,
 * and, per index source, whose keys it actually scored against in this step (the aliasing
 * quirk, SPEC 3), with the selection and compressed rows each layer read. With a checked side
 * both sides are shown and what differs is marked: rows filled, the comparison's verdict on the
 * cache's contents (the worst row), published or not, provenance. */
#include <stdio.h>
#include <string.h>

#include "tui/model.h"
#include "tui/table.h"

static void gauge(TuiLine *l, const TuiGlyphs *g, int rows, int cap, int w)
{
    int full = cap > 0 ? (int)((long long)rows * w / cap) : 0;
    if (rows > 0 && full == 0)
        full = 1;
    if (full > w)
        full = w;
    tl_put(l, TC_DIM, "[");
    for (int i = 0; i < w; i++)
        tl_put(l, i < full ? TC_GOOD : TC_DIM, i < full ? g->bar_full : g->bar_empty);
    tl_put(l, TC_DIM, "]");
}

/* The checked side's run of layer l, when it has one. */
static const AsRun *got_run(const TuiData *d, int l)
{
    return d->got && d->got[l].s > 0 ? &d->got[l] : NULL;
}

static int rows_of(const AsRun *r, AsTensorId id) { return r && r->t[id].data ? (int)r->t[id].shape[0] : 0; }

/* The rows cell of a dropped layer: its count is not known any more, not 0. */
static void dropped_cells(TuiLine *c)
{
    tl_put(&c[2], TC_DIM, "dropped");
    tl_put(&c[5], TC_DIM, "(ATTNSCOPE_RUN_BUDGET_MB)");
}

static bool same_prov(AsProvenance a, AsProvenance b) { return a.layer == b.layer && a.step == b.step; }

/* The engine's count beside the reference's: marked when they differ. */
static void engine_count(TuiLine *cell, const AsRun *gr, int got, int want)
{
    if (!gr)
        return; /* no checked side: the column is left out */
    if (got != want)
        tl_add(cell, TC_MISMATCH, "%d !", got);
    else
        tl_add(cell, TC_NORMAL, "%d", got);
}

/* The comparison's word on the checked side's copy of a cache (the state tensor id): its verdict,
 * and where the worst row is when it is beyond tolerance. */
static void cache_verdict(const TuiData *d, int l, AsTensorId id, TuiLine *cell)
{
    if (!d->got || !d->done[l])
        return;
    const AsTensorDiff *df = &d->diff[l].t[id];
    if (df->verdict == AS_V_NOT_RUN)
        return;
    tl_put(cell, tui_verdict_color(df->verdict), as_verdict_name(df->verdict));
    if (df->verdict == AS_V_MISMATCH && df->worst >= 0)
        tl_add(cell, TC_MISMATCH, " at row %lld", (long long)df->worst_coord[0]);
}

static void age_cell(const TuiData *d, int l, TuiLine *cell)
{
    if (d->cur.step >= 0 && !d->done[l] && d->ref[l].s > 0)
        tl_add(cell, TC_DIM, "as of step %d", d->ref[l].step);
}

static void compressed_caches(const TuiData *d, const TuiGlyphs *g, int w, TuiPanel *p)
{
    const AsConfig *cfg = d->cfg;
    tls_add(&p->lines, TC_TITLE, " compressed caches (kv sources): rows filled of max_seq %d / ratio", cfg->max_seq);
    const TuiColumn cols[] = {{"src", 0, true, false},      {"ratio", 0, false, false}, {"rows", 0, true, false},
                              {"engine", 0, true, false},   {"cap", 0, true, false},    {"engine's cache", 0, false, false},
                              {"fill", 3, false, false},    {"partial group", 2, false, false},
                              {"read by", 1, false, false}, {"", 4, false, false}};
    TuiTable t;
    tt_init(&t, cols, 10, 1);
    t.header_line = true;
    for (int l = 0; l < cfg->n_layers; l++) {
        const AsLayerRole *role = &cfg->role[l];
        if (!role->kv_source)
            continue;
        TuiLine *c = tt_row(&t);
        if (!c)
            break;
        const AsRun *r = &d->ref[l], *gr = got_run(d, l);
        int rows = rows_of(r, AS_T_ST_CCACHE), cap = role->ratio > 0 ? cfg->max_seq / role->ratio : 0;
        tl_add(&c[0], TC_NORMAL, "%d", l);
        tl_add(&c[1], TC_NORMAL, "r%d", role->ratio);
        tl_add(&c[4], TC_NORMAL, "%d", cap);
        if (tui_layer_dropped(d, l)) {
            dropped_cells(c);
        } else {
            tl_add(&c[2], TC_NORMAL, "%d", rows);
            engine_count(&c[3], gr, rows_of(gr, AS_T_ST_CCACHE), rows);
            cache_verdict(d, l, AS_T_ST_CCACHE, &c[5]);
            gauge(&c[6], g, rows, cap, 8);
        }
        if (role->ratio == 2 && r->s > 0) {
            int end = r->start_pos + r->s, wait = end % 2;
            if (wait)
                tl_add(&c[7], TC_ACCENT, "%d of 2 waiting (pos %d)", wait, end - wait);
            else
                tl_put(&c[7], TC_DIM, "none waiting");
        } else {
            tl_put(&c[7], TC_DIM, "-");
        }
        tl_put(&c[8], TC_NORMAL, "layers");
        for (int k = 0; k < cfg->n_layers; k++)
            if (cfg->role[k].kv_from == l)
                tl_add(&c[8], TC_NORMAL, " %d", k);
        age_cell(d, l, &c[9]);
    }
    tt_render(&t, w, g->ellipsis, p);
    tt_free(&t);
}

/* "1 new key, published" / "no new keys: not republished" / "not run yet" */
static void published(TuiLine *cell, const AsRun *r, bool other_differs)
{
    if (!r || r->s <= 0)
        tl_put(cell, TC_DIM, r ? "not run yet" : "-");
    else if (r->n_new > 0)
        tl_add(cell, other_differs ? TC_MISMATCH : TC_GOOD, "%d new key%s, published", r->n_new,
               r->n_new == 1 ? "" : "s");
    else
        tl_put(cell, other_differs ? TC_MISMATCH : TC_WARN, "no new keys: not republished");
}

static void key_caches(const TuiData *d, const TuiGlyphs *g, int w, TuiPanel *p)
{
    const AsConfig *cfg = d->cfg;
    tls_add(&p->lines, TC_TITLE, " index-key caches (key owners)");
    bool two = d->got != NULL;
    const TuiColumn cols[] = {{"own", 0, true, false},  {"ratio", 0, false, false},        {"rows", 0, true, false},
                              {"engine", 0, true, false}, {"cap", 0, true, false},   {"engine's cache", 0, false, false},
                              {two ? "reference this step" : "this step", 0, false, true},
                              {"engine this step", 0, false, false}, {"", 4, false, false}};
    TuiTable t;
    tt_init(&t, cols, 9, 1);
    t.header_line = true;
    for (int l = 0; l < cfg->n_layers; l++) {
        const AsLayerRole *role = &cfg->role[l];
        if (!role->key_owner)
            continue;
        TuiLine *c = tt_row(&t);
        if (!c)
            break;
        const AsRun *r = &d->ref[l], *gr = got_run(d, l);
        int rows = rows_of(r, AS_T_ST_IKCACHE);
        tl_add(&c[0], TC_NORMAL, "%d", l);
        tl_add(&c[1], TC_NORMAL, "r%d", role->ratio);
        tl_add(&c[4], TC_NORMAL, "%d", role->ratio > 0 ? cfg->max_seq / role->ratio : 0);
        if (tui_layer_dropped(d, l)) {
            dropped_cells(c);
        } else {
            tl_add(&c[2], TC_NORMAL, "%d", rows);
            engine_count(&c[3], gr, rows_of(gr, AS_T_ST_IKCACHE), rows);
            cache_verdict(d, l, AS_T_ST_IKCACHE, &c[5]);
            bool differ = gr && (gr->n_new > 0) != (r->n_new > 0);
            published(&c[6], r, false);
            if (gr)
                published(&c[7], gr, differ);
        }
        age_cell(d, l, &c[8]);
    }
    tt_render(&t, w, g->ellipsis, p);
    tt_free(&t);
}

/* "layer 5's keys (step 6)" and whether that is aliased or old. */
static void keys_text(TuiLine *l, TuiColor c, const AsLayerRole *role, const AsRun *r)
{
    tl_add(l, c, "layer %d's keys (step %d)", r->keys_from.layer, r->keys_from.step);
    if (r->keys_from.layer != role->keys_from)
        tl_add(l, c, "  aliased: owner is layer %d", role->keys_from);
    else if (r->keys_from.step != r->step)
        tl_put(l, c, "  an earlier step's keys");
}

static void index_sources(const TuiData *d, int w, TuiPanel *p)
{
    const AsConfig *cfg = d->cfg;
    tls_add(&p->lines, TC_TITLE, " index sources: whose keys each scored against");
    for (int l = 0; l < cfg->n_layers; l++) {
        const AsLayerRole *role = &cfg->role[l];
        if (!role->index_source)
            continue;
        const AsRun *r = &d->ref[l], *gr = got_run(d, l);
        TuiLine line;
        tl_init(&line);
        if (r->s <= 0) {
            const char *why = tui_layer_dropped(d, l) ? "its tensors were dropped (ATTNSCOPE_RUN_BUDGET_MB)"
                                                      : "has not run yet";
            tl_add(&line, TC_DIM, "  layer %d %s", l, why);
        } else if (!r->indexer_ran) {
            tl_add(&line, TC_WARN, "  layer %d: indexer did not run (compress_len %d)", l, r->compress_len);
            if (r->sel_from.layer >= 0)
                tl_add(&line, TC_WARN, "; selection stale from layer %d (step %d)", r->sel_from.layer,
                       r->sel_from.step);
        } else {
            bool alias = r->keys_from.layer != role->keys_from || r->keys_from.step != r->step;
            tl_add(&line, alias ? TC_WARN : TC_NORMAL, "  layer %d scored against ", l);
            keys_text(&line, alias ? TC_WARN : TC_NORMAL, role, r);
        }
        if (gr && r->s > 0) {
            bool same = gr->indexer_ran == r->indexer_ran && (!r->indexer_ran || same_prov(gr->keys_from, r->keys_from));
            if (same) {
                tl_put(&line, TC_DIM, "; engine: the same");
            } else if (!gr->indexer_ran) {
                tl_put(&line, TC_MISMATCH, "; engine: its indexer did not run");
            } else {
                tl_put(&line, TC_MISMATCH, "; engine: ");
                keys_text(&line, TC_MISMATCH, role, gr);
            }
        }
        char age[96];
        tui_run_age(d, l, age, sizeof age);
        tl_put(&line, TC_DIM, age);
        tls_add_wrapped_line(&p->lines, &line, w, 4);
        tl_free(&line);
    }
}

/* One side's shared reads: rows_b, selection, candidates, with their publishers. */
static void reads_text(TuiLine *l, TuiColor c, const AsRun *r)
{
    tl_add(l, c, "rows_b <- layer %d (step %d), %d rows", r->rows_b_from.layer, r->rows_b_from.step, r->rows_b_len);
    bool stale = r->sel_from.layer >= 0 && r->sel_from.step != r->step;
    if (r->sel_from.layer >= 0)
        tl_add(l, stale && c == TC_NORMAL ? TC_WARN : c, "; selection <- layer %d (step %d)%s", r->sel_from.layer,
               r->sel_from.step, stale ? " stale" : "");
    if (r->cand_from.layer >= 0)
        tl_add(l, c, "; candidates <- layer %d (step %d)", r->cand_from.layer, r->cand_from.step);
}

static void shared_reads(const TuiData *d, int w, TuiPanel *p)
{
    const AsConfig *cfg = d->cfg;
    tls_add(&p->lines, TC_TITLE, " shared state read by each compressed layer");
    for (int l = 0; l < cfg->n_layers; l++) {
        const AsRun *r = &d->ref[l], *gr = got_run(d, l);
        if (cfg->role[l].ratio == 0 || r->s <= 0)
            continue;
        TuiLine line;
        tl_init(&line);
        tl_add(&line, TC_NORMAL, "  layer %d: ", l);
        reads_text(&line, TC_NORMAL, r);
        if (gr) {
            bool same = same_prov(gr->rows_b_from, r->rows_b_from) && gr->rows_b_len == r->rows_b_len &&
                        same_prov(gr->sel_from, r->sel_from) && same_prov(gr->cand_from, r->cand_from);
            if (same) {
                tl_put(&line, TC_DIM, "; engine: the same");
            } else {
                tl_put(&line, TC_MISMATCH, "; engine: ");
                reads_text(&line, TC_MISMATCH, gr);
            }
        }
        char age[96];
        tui_run_age(d, l, age, sizeof age);
        tl_put(&line, TC_DIM, age);
        tls_add_wrapped_line(&p->lines, &line, w, 4);
        tl_free(&line);
    }
}

void tui_model_caches(const TuiData *d, TuiState *st, const TuiGlyphs *g, TuiPanel *p)
{
    if (d->cur.step < 0)
        snprintf(p->title, sizeof p->title, "caches: nothing run yet");
    else
        snprintf(p->title, sizeof p->title, "caches after step %d (%s, start_pos %d, %d token%s)%s", d->cur.step,
                 d->cur.prefill ? "prefill" : "decode", d->cur.start_pos, d->cur.s, d->cur.s == 1 ? "" : "s",
                 d->got ? ": reference and engine" : "");
    int w = tp_inner_w(p);
    compressed_caches(d, g, w, p);
    tls_add(&p->lines, TC_NORMAL, " ");
    key_caches(d, g, w, p);
    tls_add(&p->lines, TC_NORMAL, " ");
    index_sources(d, w, p);
    tls_add(&p->lines, TC_NORMAL, " ");
    shared_reads(d, w, p);
    tp_follow(p, &st->top[TV_CACHES][0]);
}
