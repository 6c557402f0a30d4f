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

bool tui_layer_dropped(const TuiData *d, int l)
{
    AsTensorId held[AS_T_COUNT];
    return d->cur.step >= 0 && d->done[l] && tui_layer_tensors(d, l, held) == 0;
}

void tui_screen_init(TuiScreen *s)
{
    memset(s, 0, sizeof *s);
    tl_init(&s->status);
    for (int i = 0; i < TUI_MAX_PANELS; i++)
        tp_init(&s->panel[i]);
    tp_init(&s->overlay);
}

void tui_screen_free(TuiScreen *s)
{
    tl_free(&s->status);
    for (int i = 0; i < TUI_MAX_PANELS; i++)
        tp_free(&s->panel[i]);
    tp_free(&s->overlay);
    tui_heat_cache_free(&s->heat_cache);
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
    s->overlay.r = s->lay.body;
}

void tui_run_age(const TuiData *d, int l, char *buf, size_t n)
{
    buf[0] = '\0';
    const AsRun *r = &d->ref[l];
    if (d->cur.step < 0 || d->done[l] || r->s <= 0)
        return;
    if (d->cur.prefill && r->step >= d->cur.step && r->start_pos > 0)
        snprintf(buf, n, " (as of step %d, before this prefill: not run in it yet)", r->step);
    else
        snprintf(buf, n, " (as of step %d: not run in step %d yet)", r->step, d->cur.step);
}

/* ---- the status line ---------------------------------------------------------------------- */

/* How much the status line says: the variants are tried in order, the first that fits is it. */
typedef struct {
    bool title, note, brief, brief_verdict;
    const char *sp;         /* between segments */
    bool terse;             /* no precision, no mode, the step as "s12 dec @40" */
} StatusForm;

/* name_room < 0: the model's name whole; else cut to that many characters. */
static void status_main(const TuiData *d, const StatusForm *f, int name_room, TuiLine *o)
{
    const char *sp = f->sp;
    char name[512];
    as_text_escape(d->model_name ? d->model_name : "?", name, sizeof name);
    TuiLine nl;
    tl_init(&nl);
    tl_add(&nl, TC_NORMAL, " %s", name);
    if (name_room >= 0)
        tl_fit(&nl, name_room > 4 ? name_room : 4, "~");
    tl_append(o, &nl);
    tl_free(&nl);
    if (d->precision && !f->terse)
        tl_add(o, TC_NORMAL, " %s", d->precision);
    if (d->cur.step < 0)
        tl_add(o, TC_NORMAL, "%sno step yet", sp);
    else if (f->terse)
        tl_add(o, TC_NORMAL, "%ss%d %s%s@%d", sp, d->cur.step, d->cur.prefill ? "pre" : "dec", sp, d->cur.start_pos);
    else if (f->brief)
        tl_add(o, TC_NORMAL, "%sstep %d %s%spos %d%s%d tok", sp, d->cur.step, d->cur.prefill ? "prefill" : "decode",
               sp, d->cur.start_pos, sp, d->cur.s);
    else
        tl_add(o, TC_NORMAL, "%sstep %d %s%sstart_pos %d%stokens %d", sp, d->cur.step,
               d->cur.prefill ? "prefill" : "decode", sp, d->cur.start_pos, sp, d->cur.s);
    if (!f->terse)
        tl_add(o, TC_NORMAL, "%s%s", sp, as_mode_name(d->mode));
    if (d->got_kind == AS_GOT_NONE)
        tl_add(o, TC_REFONLY, "%sno engine", sp);
    else if (d->got_kind == AS_GOT_TWIN)
        tl_add(o, TC_WARN, f->brief ? "%stwin %s" : "%sfault %s (twin)", sp, d->inject ? d->inject : "?");
    else if (d->inject)
        tl_add(o, TC_WARN, f->brief ? "%sengine+%s" : "%sengine, fault %s", sp, d->inject);
    else
        tl_add(o, TC_GOOD, "%sengine", sp);
}

/* The worst verdict of the step so far ("" before one). */
static void status_verdict(const TuiData *d, bool brief, TuiLine *o)
{
    if (d->cur.step < 0 || !d->got)
        return;
    int wl = -1;
    AsVerdict worst = AS_V_NOT_RUN;
    for (int l = 0; l < d->cfg->n_layers; l++)
        if (d->done[l] && as_verdict_rank(d->diff[l].verdict) > as_verdict_rank(worst))
            worst = d->diff[l].verdict, wl = l;
    if (wl < 0)
        return;
    AsTensorId wt = d->diff[wl].worst_tensor;
    char what[64] = "";
    if (worst != AS_V_PASS && (unsigned)wt < AS_T_COUNT)
        snprintf(what, sizeof what, brief ? " L%d %s" : " at layer %d %s", wl, as_tensor_desc[wt].name);
    tl_add(o, tui_verdict_color(worst), brief ? " %s%s" : "  step %s%s", as_verdict_name(worst), what);
}

/* The status line: model, step, mode, checked side and the step's worst verdict always; the
 * title and how the driver runs where they fit; spelled shorter rather than cut. */
void tui_model_status(const TuiData *d, int width, TuiLine *o)
{
    static const StatusForm forms[] = {
        {true, true, false, false, "  ", false},  {true, false, false, false, "  ", false},
        {false, false, false, false, "  ", false}, {false, false, false, false, " ", false},
        {false, false, true, false, " ", false},   {false, false, true, true, " ", false},
        {false, false, true, true, " ", true},
    };
    int nf = (int)(sizeof forms / sizeof forms[0]);
    TuiLine main_part, verdict;
    tl_init(&main_part);
    tl_init(&verdict);
    static const char title[] = " attnscope ";
    for (int i = 0; i < nf; i++) {
        const StatusForm *f = &forms[i];
        tl_clear(o);
        tl_clear(&main_part);
        tl_clear(&verdict);
        status_main(d, f, -1, &main_part);
        status_verdict(d, f->brief_verdict, &verdict);
        if (f->title)
            tl_put(o, TC_TITLE, title);
        tl_append(o, &main_part);
        tl_append(o, &verdict);
        if (f->note && d->note)
            tl_add(o, TC_DIM, "  (%s)", d->note);
        if (o->nchars <= width)
            break;
        if (i == nf - 1) {
            /* still too long: the model's name gives up what is missing */
            int room = tui_utf8_len(d->model_name ? d->model_name : "?") + 1 - (o->nchars - width);
            room = room > 4 ? room : 4;
            tl_clear(o);
            tl_clear(&main_part);
            status_main(d, f, room, &main_part);
            tl_append(o, &main_part);
            tl_append(o, &verdict);
        }
    }
    tl_free(&main_part);
    tl_free(&verdict);
}

/* ---- the overlays ------------------------------------------------------------------------- */

void tui_model_full(const TuiScreen *s, const TuiGlyphs *g, TuiPanel *p)
{
    snprintf(p->title, sizeof p->title, "the whole text of the lines cut to fit (any key closes)");
    int w = tp_inner_w(p), n = 0;
    for (int i = 0; i < s->n_panels; i++) {
        const TuiPanel *q = &s->panel[i];
        if (!q->full.n)
            continue;
        if (n++)
            tls_add(&p->lines, TC_NORMAL, " ");
        /* the panel's title (a title that was cut is the first of its whole lines) */
        size_t tl = strlen(q->title), el = strlen(g->ellipsis);
        if (tl < el || strcmp(q->title + tl - el, g->ellipsis))
            tls_add_wrapped(&p->lines, TC_TITLE, q->title, w, 4);
        for (int k = 0; k < q->full.n; k++)
            tls_add_wrapped_line(&p->lines, &q->full.v[k], w, 4);
    }
    if (!n)
        tls_add(&p->lines, TC_DIM, " every line of this view fits: nothing was cut");
}

void tui_build_overlay(TuiScreen *s, TuiState *st, const TuiMsgLog *log, const TuiGlyphs *g)
{
    tp_reset(&s->overlay);
    s->overlay.r = s->lay.body;
    s->overlay.used = st->overlay != TUI_OV_NONE && !s->lay.too_small;
    switch (st->overlay) {
    case TUI_OV_HELP: tui_model_help(g, &s->overlay); break;
    case TUI_OV_FULL: tui_model_full(s, g, &s->overlay); break;
    case TUI_OV_LOG:
        if (log)
            tui_model_log(log, &s->overlay);
        else
            tls_add(&s->overlay.lines, TC_DIM, " no message log here");
        break;
    default: return;
    }
    tp_fit(&s->overlay, g->ellipsis);
    tp_follow(&s->overlay, &st->overlay_top);
}

void tui_screen_mark_stale(TuiScreen *s, const TuiGlyphs *g)
{
    if (s->stale || !s->as_of[0])
        return;
    s->stale = true;
    for (int i = 0; i < s->n_panels; i++) {
        TuiPanel *p = &s->panel[i];
        char t[sizeof p->title];
        snprintf(t, sizeof t, "(%s) %s", s->as_of, p->title);
        memcpy(p->title, t, sizeof t);
        tls_clear(&p->full);
        tp_fit(p, g->ellipsis);
    }
}

void tui_build_opening(TuiScreen *s, const char *name, const char *phase, int cols, int rows, const TuiGlyphs *g)
{
    tui_layout(TV_CACHES, cols, rows, 1, &s->lay);
    for (int i = 0; i < TUI_MAX_PANELS; i++) {
        tp_reset(&s->panel[i]);
        s->panel[i].used = false;
    }
    s->n_panels = s->lay.too_small ? 0 : 1;
    s->as_of[0] = '\0';
    s->overlay.r = s->lay.body;
    char esc[256];
    as_text_escape(name ? name : "?", esc, sizeof esc);
    tl_clear(&s->status);
    tl_add(&s->status, TC_TITLE, " attnscope ");
    tl_add(&s->status, TC_NORMAL, " %s  opening", esc);
    tl_fit(&s->status, cols, g->ellipsis);
    if (!s->n_panels)
        return;
    TuiPanel *p = &s->panel[0];
    p->used = true;
    p->r = s->lay.panel[0];
    snprintf(p->title, sizeof p->title, "opening %.160s", esc);
    int w = tp_inner_w(p);
    char line[320];
    snprintf(line, sizeof line, " %s", phase && *phase ? phase : "starting");
    tls_add_wrapped(&p->lines, TC_BUSY, line, w, 2);
    tls_add(&p->lines, TC_NORMAL, " ");
    tls_add_wrapped(&p->lines, TC_NORMAL, " The model opens on the worker thread: a preset is generated on first use (the flash "
                    "preset takes minutes), then the weights are mapped and the engine starts where there is a CUDA "
                    "device. The views follow as soon as it is open, and a --prefill runs right after.", w, 1);
    tls_add(&p->lines, TC_NORMAL, " ");
    tls_add_wrapped(&p->lines, TC_DIM, " Meanwhile: ? help, L the messages, q quits (a preset half generated is removed).",
                    w, 1);
    tp_fit(p, g->ellipsis);
}

static void as_of_text(const TuiData *d, char *buf, size_t n)
{
    if (d->cur.step < 0)
        buf[0] = '\0'; /* nothing run: the panels say so themselves */
    else if (d->cur.next_layer > 0)
        snprintf(buf, n, "as of step %d, layer %d", d->cur.step, d->cur.next_layer - 1);
    else
        snprintf(buf, n, "as of step %d, before its layer 0", d->cur.step);
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
    s->n_panels = s->lay.n_panels;
    s->stale = false;
    as_of_text(d, s->as_of, sizeof s->as_of);
    memset(&s->heat, 0, sizeof s->heat);
    tui_model_status(d, cols, &s->status);
    if (s->lay.too_small)
        return tui_build_overlay(s, st, d->log, g);
    switch (st->view) {
    case TV_LAYERS:
        tui_model_layers(d, st, g, &s->panel[0]);
        tui_model_tensors(d, st, g, &s->panel[1]);
        s->panel[0].focused = st->focus == 0;
        s->panel[1].focused = st->focus == 1;
        break;
    case TV_TENSOR:
        tui_model_heatmap(d, st, g, &s->panel[0], &s->panel[1], &s->heat, &s->heat_cache);
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
    for (int i = 0; i < s->n_panels; i++)
        tp_fit(&s->panel[i], g->ellipsis);
    tui_build_overlay(s, st, d->log, g);
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
