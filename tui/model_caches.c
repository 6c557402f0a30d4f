/* The caches view: each kv source's compressed cache (rows filled against max_seq / ratio, the
 * partial group waiting at ratio 2, the layers that read it), each key owner's index-key cache,
 * and, per index source, whose keys it actually scored against in this step (the aliasing
 * quirk, SPEC 3), with the selection and compressed rows each layer read. */
#include <stdio.h>
#include <string.h>

#include "tui/model.h"

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

static void as_of(const TuiData *d, const AsRun *r, int l, TuiLine *line)
{
    if (d->cur.step >= 0 && !d->done[l])
        tl_add(line, TC_DIM, "  (as of step %d)", r->step);
}

/* A cache's line: layer, ratio, rows filled (the layer's state tensor `id`) against max_seq / ratio.
 * NULL when out of memory; *rows_out, *cap_out receive the two counts. */
static TuiLine *cache_line(const TuiData *d, TuiPanel *p, int l, AsTensorId id, int *rows_out, int *cap_out)
{
    const AsLayerRole *role = &d->cfg->role[l];
    TuiLine *line = tls_new(&p->lines);
    if (!line)
        return NULL;
    const AsHostTensor *t = &d->ref[l].t[id];
    *cap_out = role->ratio > 0 ? d->cfg->max_seq / role->ratio : 0;
    *rows_out = t->data ? (int)t->shape[0] : 0;
    tl_add(line, TC_NORMAL, "  %3d  r%d  %6d / %-5d ", l, role->ratio, *rows_out, *cap_out);
    return line;
}

void tui_model_caches(const TuiData *d, TuiState *st, const TuiGlyphs *g, TuiPanel *p)
{
    const AsConfig *cfg = d->cfg;
    int nl = cfg->n_layers;
    if (d->cur.step < 0)
        snprintf(p->title, sizeof p->title, "caches: nothing run yet");
    else
        snprintf(p->title, sizeof p->title, "caches after step %d (%s, start_pos %d, %d token%s)", d->cur.step,
                 d->cur.prefill ? "prefill" : "decode", d->cur.start_pos, d->cur.s, d->cur.s == 1 ? "" : "s");
    tls_add(&p->lines, TC_TITLE, " compressed caches (kv sources): rows filled / max_seq %d / ratio", cfg->max_seq);
    tls_add(&p->lines, TC_HEADER, "  src ratio    rows / cap  fill       partial group            read by");
    for (int l = 0; l < nl; l++) {
        const AsLayerRole *role = &cfg->role[l];
        if (!role->kv_source)
            continue;
        const AsRun *r = &d->ref[l];
        int rows, cap;
        TuiLine *line = cache_line(d, p, l, AS_T_ST_CCACHE, &rows, &cap);
        if (!line)
            break;
        gauge(line, g, rows, cap, 8);
        if (role->ratio == 2 && r->s > 0) {
            int end = r->start_pos + r->s, wait = end % 2;
            if (wait)
                tl_field(line, TC_ACCENT, 24, " %d of 2 waiting (pos %d)", wait, end - wait);
            else
                tl_field(line, TC_DIM, 24, " none waiting");
        } else {
            tl_field(line, TC_DIM, 24, " -");
        }
        tl_put(line, TC_NORMAL, " layers");
        for (int k = 0; k < nl; k++)
            if (cfg->role[k].kv_from == l)
                tl_add(line, TC_NORMAL, " %d", k);
        as_of(d, r, l, line);
    }
    tls_add(&p->lines, TC_NORMAL, " ");
    tls_add(&p->lines, TC_TITLE, " index-key caches (key owners)");
    tls_add(&p->lines, TC_HEADER, "  own ratio    rows / cap  this step");
    for (int l = 0; l < nl; l++) {
        const AsLayerRole *role = &cfg->role[l];
        if (!role->key_owner)
            continue;
        const AsRun *r = &d->ref[l];
        int rows, cap;
        TuiLine *line = cache_line(d, p, l, AS_T_ST_IKCACHE, &rows, &cap);
        if (!line)
            break;
        if (r->s <= 0)
            tl_put(line, TC_DIM, "not run yet");
        else if (r->n_new > 0)
            tl_add(line, TC_GOOD, "%d new key%s, published", r->n_new, r->n_new == 1 ? "" : "s");
        else
            tl_put(line, TC_WARN, "no new keys: not republished");
        as_of(d, r, l, line);
    }
    tls_add(&p->lines, TC_NORMAL, " ");
    tls_add(&p->lines, TC_TITLE, " index sources: whose keys each scored against");
    for (int l = 0; l < nl; l++) {
        const AsLayerRole *role = &cfg->role[l];
        if (!role->index_source)
            continue;
        const AsRun *r = &d->ref[l];
        TuiLine *line = tls_new(&p->lines);
        if (!line)
            break;
        if (r->s <= 0) {
            tl_add(line, TC_DIM, "  layer %d has not run yet", l);
            continue;
        }
        if (!r->indexer_ran) {
            tl_add(line, TC_WARN, "  layer %d: indexer did not run (compress_len %d)", l, r->compress_len);
            if (r->sel_from.layer >= 0)
                tl_add(line, TC_WARN, "; selection stale from layer %d (step %d)", r->sel_from.layer,
                       r->sel_from.step);
            as_of(d, r, l, line);
            continue;
        }
        bool alias = r->keys_from.layer != role->keys_from || r->keys_from.step != r->step;
        tl_add(line, alias ? TC_WARN : TC_NORMAL, "  layer %d scored against layer %d's keys (step %d)", l,
               r->keys_from.layer, r->keys_from.step);
        if (alias) {
            if (r->keys_from.layer != role->keys_from)
                tl_add(line, TC_WARN, "  aliased: owner is layer %d", role->keys_from);
            else
                tl_add(line, TC_WARN, "  an earlier step's keys");
        }
        as_of(d, r, l, line);
    }
    tls_add(&p->lines, TC_NORMAL, " ");
    tls_add(&p->lines, TC_TITLE, " shared state read by each compressed layer");
    for (int l = 0; l < nl; l++) {
        const AsRun *r = &d->ref[l];
        if (cfg->role[l].ratio == 0 || r->s <= 0)
            continue;
        TuiLine *line = tls_new(&p->lines);
        if (!line)
            break;
        tl_add(line, TC_NORMAL, "  layer %d: rows_b <- layer %d (step %d), %d rows", l, r->rows_b_from.layer,
               r->rows_b_from.step, r->rows_b_len);
        bool stale = r->sel_from.layer >= 0 && r->sel_from.step != r->step;
        if (r->sel_from.layer >= 0)
            tl_add(line, stale ? TC_WARN : TC_NORMAL, "; selection <- layer %d (step %d)%s", r->sel_from.layer,
                   r->sel_from.step, stale ? " stale" : "");
        if (r->cand_from.layer >= 0)
            tl_add(line, TC_NORMAL, "; candidates <- layer %d (step %d)", r->cand_from.layer, r->cand_from.step);
        as_of(d, r, l, line);
    }
    tp_follow(p, &st->top[TV_CACHES][0]);
}
