/* The pieces every view shares: the data from the driver, the user's choices, verdict colours,
 * the status line, and the build of a whole screen. */
#include <stdio.h>
#include <string.h>

#include "model/precision.h"
#include "model/text_safe.h"
#include "tui/keys.h"
#include "tui/model.h"

void tui_data_from_driver(const AsDriver *d, const char *model_name, TuiData *o)
{
    memset(o, 0, sizeof *o);
    o->cfg = &d->model.cfg;
    o->model_name = model_name ? model_name : d->opt.model;
    o->precision = as_precision_name(d->model.precision);
    o->cur = d->cur;
    o->next_pos = d->next_pos;
    o->mode = d->opt.mode;
    o->got_kind = d->got_kind;
    o->got_name = d->got_name;
    o->note = d->note;
    o->inject = d->opt.inject;
    o->ref = d->ref_run;
    o->got = d->got_kind == AS_GOT_NONE ? NULL : d->got_run;
    o->diff = d->diff;
    o->done = d->layer_done;
}

void tui_state_init(TuiState *st)
{
    memset(st, 0, sizeof *st);
    st->view = TV_LAYERS;
    st->tensor = AS_T_Q;
}

static int clampi(int v, int lo, int hi) { return v < lo ? lo : v > hi ? hi : v; }

void tui_state_clamp(TuiState *st, const TuiData *d)
{
    int nl = d->cfg->n_layers;
    st->layer = clampi(st->layer, 0, nl - 1);
    const AsRun *r = &d->ref[st->layer];
    int s = r->s > 0 ? r->s : 1;
    st->query = clampi(st->query, 0, s - 1);
    if (st->head < 0)
        st->head = 0;
    if ((unsigned)st->tensor >= AS_T_COUNT)
        st->tensor = AS_T_Q;
    if (st->cur_r < 0)
        st->cur_r = 0;
    if (st->cur_c < 0)
        st->cur_c = 0;
}

TuiColor tui_verdict_color(AsVerdict v)
{
    switch (v) {
    case AS_V_PASS: return TC_PASS;
    case AS_V_FLIPS: return TC_FLIPS;
    case AS_V_NEAR_TIE: return TC_NEARTIE;
    case AS_V_TIE_ORDER: return TC_NEARTIE;
    case AS_V_INHERITED: return TC_FLIPS;
    case AS_V_MISMATCH: return TC_MISMATCH;
    case AS_V_ABSENT: return TC_DIM;
    default: return TC_DIM;
    }
}

const char *tui_layer_verdict(const TuiData *d, int l, TuiColor *c)
{
    if (d->cur.step < 0 || !d->done[l]) {
        *c = TC_DIM;
        return "not run";
    }
    if (!d->got) {
        *c = TC_REFONLY;
        return "ref only";
    }
    AsVerdict v = d->diff[l].verdict;
    *c = tui_verdict_color(v);
    return v == AS_V_NOT_RUN ? "not run" : as_verdict_name(v);
}

int tui_layer_tensors(const TuiData *d, int l, AsTensorId out[AS_T_COUNT])
{
    int n = 0;
    const AsRun *r = &d->ref[l];
    const AsRun *g = d->got ? &d->got[l] : NULL;
    for (int i = 0; i < AS_T_COUNT; i++)
        if (r->t[i].data || (g && g->t[i].data))
            out[n++] = (AsTensorId)i;
    return n;
}

void tui_screen_init(TuiScreen *s)
{
    memset(s, 0, sizeof *s);
    tl_init(&s->status);
    for (int i = 0; i < TUI_MAX_PANELS; i++)
        tp_init(&s->panel[i]);
    tp_init(&s->help);
}

void tui_screen_free(TuiScreen *s)
{
    tl_free(&s->status);
    for (int i = 0; i < TUI_MAX_PANELS; i++)
        tp_free(&s->panel[i]);
    tp_free(&s->help);
    tui_screen_init(s);
}

void tui_relayout(TuiScreen *s, TuiView v, int n_layers, int cols, int rows)
{
    tui_layout(v, cols, rows, n_layers, &s->lay);
    for (int i = 0; i < TUI_MAX_PANELS; i++) {
        s->panel[i].used = i < s->lay.n_panels && i < s->n_panels;
        if (s->panel[i].used)
            s->panel[i].r = s->lay.panel[i];
    }
    s->help.r = s->lay.body;
}

/* Segments of the status line: the required ones always, the others where they fit. */
void tui_model_status(const TuiData *d, int width, TuiLine *o)
{
    tl_clear(o);
    TuiLine req;
    tl_init(&req);
    /* two spaces between the segments; one when that does not fit */
    for (int pass = 0; pass < 2; pass++) {
        const char *sp = pass == 0 ? "  " : " ";
        tl_clear(&req);
        char name[512];
        as_text_escape(d->model_name ? d->model_name : "?", name, sizeof name);
        tl_add(&req, TC_NORMAL, " %s", name);
        if (d->precision)
            tl_add(&req, TC_NORMAL, " %s", d->precision);
        if (d->cur.step < 0)
            tl_add(&req, TC_NORMAL, "%sno step yet", sp);
        else
            tl_add(&req, TC_NORMAL, "%sstep %d %s%sstart_pos %d%stokens %d", sp, d->cur.step,
                   d->cur.prefill ? "prefill" : "decode", sp, d->cur.start_pos, sp, d->cur.s);
        tl_add(&req, TC_NORMAL, "%s%s", sp, as_mode_name(d->mode));
        if (d->got_kind == AS_GOT_NONE)
            tl_add(&req, TC_REFONLY, "%sno engine", sp);
        else if (d->got_kind == AS_GOT_TWIN)
            tl_add(&req, TC_WARN, "%sfault %s (twin)", sp, d->inject ? d->inject : "?");
        else if (d->inject)
            tl_add(&req, TC_WARN, "%sengine, fault %s", sp, d->inject);
        else
            tl_add(&req, TC_GOOD, "%sengine", sp);
        if (req.nchars <= width)
            break;
    }
    /* the worst verdict of the step so far */
    TuiLine verdict;
    tl_init(&verdict);
    if (d->cur.step >= 0 && d->got) {
        int wl = -1;
        AsVerdict worst = AS_V_NOT_RUN;
        for (int l = 0; l < d->cfg->n_layers; l++)
            if (d->done[l] && as_verdict_rank(d->diff[l].verdict) > as_verdict_rank(worst))
                worst = d->diff[l].verdict, wl = l;
        if (wl >= 0) {
            AsTensorId wt = d->diff[wl].worst_tensor;
            char what[64] = "";
            if (worst != AS_V_PASS && (unsigned)wt < AS_T_COUNT)
                snprintf(what, sizeof what, " at layer %d %s", wl, as_tensor_desc[wt].name);
            tl_add(&verdict, tui_verdict_color(worst), "  step %s%s", as_verdict_name(worst), what);
        }
    }
    static const char title[] = " attnscope ";
    int used = req.nchars;
    bool with_title = used + (int)sizeof title - 1 <= width;
    if (with_title) {
        tl_put(o, TC_TITLE, title);
        used += (int)sizeof title - 1;
    }
    tl_append(o, &req);
    if (verdict.nchars && used + verdict.nchars <= width) {
        tl_append(o, &verdict);
        used += verdict.nchars;
    }
    if (d->note && used + tui_utf8_len(d->note) + 4 <= width)
        tl_add(o, TC_DIM, "  (%s)", d->note);
    tl_free(&req);
    tl_free(&verdict);
}

void tui_build(const TuiData *d, TuiState *st, const TuiGlyphs *g, int cols, int rows, TuiScreen *s)
{
    tui_state_clamp(st, d);
    tui_layout(st->view, cols, rows, d->cfg->n_layers, &s->lay);
    for (int i = 0; i < TUI_MAX_PANELS; i++) {
        tp_reset(&s->panel[i]);
        s->panel[i].used = i < s->lay.n_panels;
        s->panel[i].r = s->lay.panel[i];
    }
    tp_reset(&s->help);
    s->help.r = s->lay.body;
    s->help.used = st->help;
    s->n_panels = s->lay.n_panels;
    memset(&s->heat, 0, sizeof s->heat);
    tui_model_status(d, cols, &s->status);
    if (s->lay.too_small)
        return;
    switch (st->view) {
    case TV_LAYERS:
        tui_model_layers(d, st, g, &s->panel[0]);
        tui_model_tensors(d, st, g, &s->panel[1]);
        s->panel[0].focused = st->focus == 0;
        s->panel[1].focused = st->focus == 1;
        break;
    case TV_TENSOR:
        tui_model_heatmap(d, st, g, &s->panel[0], &s->panel[1], &s->heat);
        break;
    case TV_RING:
        tui_model_ring(d, st, g, &s->panel[0]);
        break;
    case TV_CACHES:
        tui_model_caches(d, st, g, &s->panel[0]);
        break;
    case TV_CAND:
        tui_model_cand(d, st, g, &s->panel[0], &s->panel[1]);
        break;
    case TV_TOPK:
        tui_model_topk(d, st, g, &s->panel[0], &s->panel[1]);
        break;
    default:
        break;
    }
    if (st->help) {
        tui_model_help(g, &s->help);
        tp_follow(&s->help, &st->help_top);
    }
}

bool tui_scroll_key(TuiState *st, int panel, int key)
{
    enum { PAGE = 10 };
    int *top = &st->top[st->view][panel];
    switch (key) {
    case TUI_KEY_UP: case 'k': *top -= 1; break;
    case TUI_KEY_DOWN: case 'j': *top += 1; break;
    case TUI_KEY_PGUP: *top -= PAGE; break;
    case TUI_KEY_PGDN: *top += PAGE; break;
    case TUI_KEY_HOME: *top = 0; break;
    default: return false;
    }
    if (*top < 0)
        *top = 0;
    return true;
}

bool tui_view_key(const TuiData *d, TuiState *st, const TuiScreen *scr, int key)
{
    switch (st->view) {
    case TV_LAYERS: return tui_layers_key(d, st, key);
    case TV_TENSOR: return tui_tensor_key(d, st, &scr->heat, key);
    default: return tui_scroll_key(st, scr->n_panels > 1 ? 1 : 0, key);
    }
}
