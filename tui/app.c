/* The interface thread (htop's ScreenManager): terminal set-up, signals, the event loop, keys
 * and prompts. It never blocks: getch waits at most 100 ms, the driver's work runs on the
 * worker (tui/worker.h), and the views are rebuilt from the driver only while the worker is
 * idle. */
#include <curses.h>
#include <errno.h>
#include <langinfo.h>
#include <limits.h>
#include <locale.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "dumps/dump.h"
#include "model/text_safe.h"
#include "tui/draw.h"
#include "tui/keys.h"
#include "tui/model.h"
#include "tui/tui.h"
#include "tui/worker.h"

typedef enum {
    PK_NONE,
    PK_PREFILL,
    PK_DECODE,
    PK_DIVERGE,
    PK_LAYER,
    PK_QUERY,
    PK_HEAD,
    PK_TENSOR,
    PK_SAVE_STEP,
    PK_SAVE_RUN,
} PromptKind;

typedef struct {
    AsDriver *d;
    TuiWorker *w;
    TuiState st;
    TuiScreen scr;
    TuiData data;
    const TuiGlyphs *g;
    char label[128];
    int n_layers;
    int cols, rows;
    TuiLine msg, keys;
    char msgtext[800];
    TuiColor msgcolor;
    bool dirty;             /* rebuild the views (when idle) */
    bool quitting;
    bool built;             /* scr holds a build */
    int spin;
    int last_prefill;
    /* prompt */
    PromptKind pk;
    char plabel[64];
    char pbuf[PATH_MAX];
    bool pfresh;            /* the default is still untouched: typing replaces it */
} App;

static volatile sig_atomic_t got_signal;

static void on_signal(int sig)
{
    as_dump_abort_all();
    if (got_signal) {
        /* the loop did not come round: restore what we can and go */
        endwin();
        signal(sig, SIG_DFL);
        raise(sig);
    }
    got_signal = sig;
}

static void say(App *a, TuiColor c, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static void say(App *a, TuiColor c, const char *fmt, ...)
{
    char raw[sizeof a->msgtext];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(raw, sizeof raw, fmt, ap);
    va_end(ap);
    as_text_escape(raw, a->msgtext, sizeof a->msgtext); /* paths and names typed or read: shown as text */
    a->msgcolor = c;
}

/* ---- prompts ----------------------------------------------------------------------------- */

static void prompt(App *a, PromptKind k, const char *label, const char *def)
{
    a->pk = k;
    snprintf(a->plabel, sizeof a->plabel, "%s", label);
    snprintf(a->pbuf, sizeof a->pbuf, "%s", def ? def : "");
    a->pfresh = true;
}

static bool parse_int(const char *s, long lo, long hi, long *out)
{
    if (!*s)
        return false;
    char *end;
    errno = 0;
    long v = strtol(s, &end, 10);
    if (errno || *end || v < lo || v > hi)
        return false;
    *out = v;
    return true;
}

static void submit(App *a, TuiJobKind k, int n, int n2, const char *path)
{
    TuiJob j = {.kind = k, .n = n, .n2 = n2};
    if (path)
        snprintf(j.path, sizeof j.path, "%s", path);
    if (!tui_worker_submit(a->w, &j))
        say(a, TC_WARN, "busy: Esc cancels the running work");
}

static void default_path(App *a, bool run, char *buf, size_t n)
{
    if (run)
        snprintf(buf, n, "attnscope-%s-run.h5", a->label);
    else
        snprintf(buf, n, "attnscope-%s-step%d.h5", a->label, a->data.cur.step < 0 ? 0 : a->data.cur.step);
}

static void open_tensor(App *a);

static void accept_prompt(App *a)
{
    PromptKind k = a->pk;
    a->pk = PK_NONE;
    const char *s = a->pbuf;
    long v = 0;
    const AsConfig *cfg = a->data.cfg;
    switch (k) {
    case PK_PREFILL:
        if (!parse_int(s, 1, cfg->max_seq, &v)) {
            say(a, TC_BAD, "prefill: '%s' is not a token count in 1..%d", s, cfg->max_seq);
            return;
        }
        a->last_prefill = (int)v;
        submit(a, TUI_JOB_PREFILL, (int)v, 0, NULL);
        return;
    case PK_DECODE:
        if (!parse_int(s, 1, cfg->max_seq, &v)) {
            say(a, TC_BAD, "decode: '%s' is not a step count in 1..%d", s, cfg->max_seq);
            return;
        }
        submit(a, TUI_JOB_DECODE, (int)v, 0, NULL);
        return;
    case PK_DIVERGE:
        if (!parse_int(s, 0, cfg->max_seq, &v)) {
            say(a, TC_BAD, "first divergence: '%s' is not a decode step count in 0..%d", s, cfg->max_seq);
            return;
        }
        submit(a, TUI_JOB_DIVERGE, (int)v, a->last_prefill, NULL);
        return;
    case PK_LAYER:
        if (!parse_int(s, 0, cfg->n_layers - 1, &v)) {
            say(a, TC_BAD, "layer: '%s' is not a layer in 0..%d", s, cfg->n_layers - 1);
            return;
        }
        a->st.layer = (int)v;
        break;
    case PK_QUERY:
        if (!parse_int(s, 0, INT_MAX, &v)) {
            say(a, TC_BAD, "query: '%s' is not a token index", s);
            return;
        }
        a->st.query = (int)v;
        break;
    case PK_HEAD:
        if (!parse_int(s, 0, INT_MAX, &v)) {
            say(a, TC_BAD, "head: '%s' is not a head index", s);
            return;
        }
        a->st.head = (int)v;
        if (a->st.view == TV_TENSOR && a->scr.heat.valid && a->scr.heat.heads > 0) {
            int h = a->scr.heat.heads;
            a->st.cur_r = a->st.cur_r / h * h + (int)(v < h ? v : h - 1);
        }
        break;
    case PK_TENSOR: {
        AsTensorId id = as_tensor_by_name(s);
        if (id == AS_T_COUNT) {
            say(a, TC_BAD, "tensor: '%s' is not a tensor name (q, kv, rows_a, idx, o, out, state.ring...)", s);
            return;
        }
        a->st.tensor = id;
        open_tensor(a);
        break;
    }
    case PK_SAVE_STEP:
    case PK_SAVE_RUN:
        if (!*s) {
            say(a, TC_BAD, "save: no path given");
            return;
        }
        submit(a, k == PK_SAVE_RUN ? TUI_JOB_SAVE_RUN : TUI_JOB_SAVE_STEP, 0, 0, s);
        return;
    default:
        return;
    }
    a->dirty = true;
}

/* true when the key was taken by the prompt */
static void prompt_key(App *a, int ch)
{
    size_t len = strlen(a->pbuf);
    if (ch == 27) {
        a->pk = PK_NONE;
        say(a, TC_DIM, "cancelled");
    } else if (ch == '\n' || ch == '\r' || ch == KEY_ENTER) {
        accept_prompt(a);
    } else if (ch == KEY_BACKSPACE || ch == 127 || ch == 8) {
        if (len)
            a->pbuf[len - 1] = '\0';
        a->pfresh = false;
    } else if (ch == 21) { /* ^U */
        a->pbuf[0] = '\0';
        a->pfresh = false;
    } else if (ch >= 32 && ch < 127) {
        if (a->pfresh) {
            a->pbuf[0] = '\0';
            len = 0;
        }
        a->pfresh = false;
        if (len + 1 < sizeof a->pbuf) {
            a->pbuf[len] = (char)ch;
            a->pbuf[len + 1] = '\0';
        }
    }
}

static void prompt_line(App *a, TuiLine *l)
{
    tl_clear(l);
    tl_add(l, TC_TITLE, "%s: ", a->plabel);
    tl_put(l, a->pfresh ? TC_SELECT : TC_NORMAL, a->pbuf);
    tl_put(l, TC_CURSOR, " ");
    tl_put(l, TC_NORMAL, "  ");
    tl_put(l, TC_KEY, "Enter");
    tl_put(l, TC_NORMAL, " OK ");
    tl_put(l, TC_KEY, "Esc");
    tl_put(l, TC_NORMAL, " Cancel ");
    tl_put(l, TC_KEY, "^U");
    tl_put(l, TC_NORMAL, " Clear");
}

/* ---- keys while idle ---------------------------------------------------------------------- */

static void move_tensor(App *a, int delta)
{
    AsTensorId ids[AS_T_COUNT];
    int n = tui_layer_tensors(&a->data, a->st.layer, ids);
    if (!n)
        return;
    int i = 0;
    for (int k = 0; k < n; k++)
        if (ids[k] == a->st.tensor)
            i = k;
    i += delta;
    i = i < 0 ? 0 : i >= n ? n - 1 : i;
    a->st.tensor = ids[i];
}

static void open_tensor(App *a)
{
    a->st.view = TV_TENSOR;
    int64_t c[3];
    int nd = 0;
    if (tui_tensor_worst(&a->data, a->st.layer, a->st.tensor, c, &nd)) {
        a->st.cur_r = (int)c[0];
        if (nd == 3) {
            /* one heatmap row per token and head */
            const AsHostTensor *t = &a->data.ref[a->st.layer].t[a->st.tensor];
            int64_t heads = t->data ? t->shape[1] : a->data.got[a->st.layer].t[a->st.tensor].shape[1];
            a->st.cur_r = (int)(c[0] * heads + c[1]);
            a->st.head = (int)c[1];
            a->st.cur_c = (int)c[2];
        } else {
            a->st.cur_c = nd > 1 ? (int)c[1] : 0;
        }
    } else {
        a->st.cur_r = a->st.cur_c = 0;
    }
}

static void scroll_view(App *a, int panel, int delta)
{
    int *top = &a->st.top[a->st.view][panel];
    *top += delta;
    if (*top < 0)
        *top = 0;
}

static void idle_key(App *a, int ch)
{
    TuiState *st = &a->st;
    const AsConfig *cfg = a->data.cfg;
    const TuiHeatGeom *hg = &a->scr.heat;
    char buf[PATH_MAX];
    a->dirty = true;
    switch (ch) {
    case 'q':
        a->quitting = true;
        return;
    case '?':
        st->help = true;
        st->help_top = 0;
        return;
    case 'n':
        if (a->data.cur.step < 0) {
            snprintf(buf, sizeof buf, "%d", a->last_prefill);
            prompt(a, PK_PREFILL, "nothing run yet: prefill tokens", buf);
        } else {
            submit(a, TUI_JOB_LAYER, 0, 0, NULL);
        }
        return;
    case 'f':
        submit(a, TUI_JOB_FINISH, 0, 0, NULL);
        return;
    case 'p':
        snprintf(buf, sizeof buf, "%d", a->last_prefill);
        prompt(a, PK_PREFILL, "prefill tokens (resets every state)", buf);
        return;
    case 'd':
        if (a->data.cur.step < 0) {
            say(a, TC_WARN, "nothing has run yet: p prefills first");
            return;
        }
        prompt(a, PK_DECODE, "decode steps", "1");
        return;
    case 'r':
        if (a->data.got_kind == AS_GOT_NONE) {
            say(a, TC_WARN, "first divergence needs an engine or --inject FAULT (%s)", a->data.note);
            return;
        }
        prompt(a, PK_DIVERGE, "run to the first divergence: at most decode steps", "32");
        return;
    case 'g':
        snprintf(buf, sizeof buf, "%d", st->layer);
        prompt(a, PK_LAYER, "jump to layer", buf);
        return;
    case 'Q':
        snprintf(buf, sizeof buf, "%d", st->query);
        prompt(a, PK_QUERY, "query token", buf);
        return;
    case 'H':
        snprintf(buf, sizeof buf, "%d", st->head);
        prompt(a, PK_HEAD, "head", buf);
        return;
    case 'T':
        prompt(a, PK_TENSOR, "tensor name", as_tensor_desc[st->tensor].name);
        return;
    case 's':
    case 'S':
        if (a->data.cur.step < 0) {
            say(a, TC_WARN, "nothing to save yet: p prefills first");
            return;
        }
        default_path(a, ch == 'S', buf, sizeof buf);
        prompt(a, ch == 'S' ? PK_SAVE_RUN : PK_SAVE_STEP, ch == 'S' ? "save the run to" : "save the step to", buf);
        return;
    case 'm': {
        AsMode m = a->d->opt.mode == AS_MODE_TEACHER ? AS_MODE_FREE : AS_MODE_TEACHER;
        as_driver_set_mode(a->d, m);
        say(a, TC_NORMAL, "comparison mode: %s (%s), from the next layer", as_mode_name(m),
            m == AS_MODE_TEACHER ? "the reference takes the engine's layer inputs"
                                 : "each side feeds its own outputs forward");
        return;
    }
    case '1': case '2': case '3': case '4': case '5': case '6':
        st->view = (TuiView)(ch - '1');
        return;
    case '\t':
        if (st->view == TV_LAYERS)
            st->focus = !st->focus;
        else
            st->view = (TuiView)((st->view + 1) % TV_COUNT);
        return;
    case KEY_BTAB:
        st->view = (TuiView)((st->view + TV_COUNT - 1) % TV_COUNT);
        return;
    case '[':
        st->layer = st->layer > 0 ? st->layer - 1 : 0;
        return;
    case ']':
        st->layer = st->layer + 1 < cfg->n_layers ? st->layer + 1 : st->layer;
        return;
    case ',':
        st->query = st->query > 0 ? st->query - 1 : 0;
        return;
    case '.':
        st->query++;
        return;
    case '<':
    case '>':
        /* tensor view: one head up or down (the heatmap has a row per token and head) */
        if (st->view == TV_TENSOR && hg->valid && hg->heads > 0) {
            st->cur_r += ch == '>' ? 1 : -1;
            if (st->cur_r < 0)
                st->cur_r = 0;
        } else {
            st->head += ch == '>' ? 1 : -1;
            if (st->head < 0)
                st->head = 0;
        }
        return;
    case 27:
        if (st->view == TV_TENSOR)
            st->view = TV_LAYERS;
        return;
    case '\n':
    case '\r':
    case KEY_ENTER:
        if (st->view == TV_LAYERS) {
            if (st->focus == 0)
                st->focus = 1;
            else
                open_tensor(a);
        }
        return;
    case 'w':
        if (st->view == TV_TENSOR)
            open_tensor(a);
        return;
    default:
        break;
    }
    /* movement */
    int page = 10;
    if (st->view == TV_TENSOR) {
        int rpc = hg->valid ? hg->rpc : 1, cpc = hg->valid ? hg->cpc : 1;
        switch (ch) {
        case KEY_UP: case 'k': st->cur_r -= rpc; break;
        case KEY_DOWN: case 'j': st->cur_r += rpc; break;
        case KEY_LEFT: case 'h': st->cur_c -= cpc; break;
        case KEY_RIGHT: case 'l': st->cur_c += cpc; break;
        case KEY_PPAGE: st->cur_r -= rpc * page; break;
        case KEY_NPAGE: st->cur_r += rpc * page; break;
        case KEY_HOME: st->cur_r = st->cur_c = 0; break;
        default: a->dirty = false; break;
        }
        if (st->cur_r < 0)
            st->cur_r = 0;
        if (st->cur_c < 0)
            st->cur_c = 0;
        return;
    }
    if (st->view == TV_LAYERS) {
        switch (ch) {
        case KEY_UP: case 'k':
            if (st->focus == 0)
                st->layer = st->layer > 0 ? st->layer - 1 : 0;
            else
                move_tensor(a, -1);
            return;
        case KEY_DOWN: case 'j':
            if (st->focus == 0)
                st->layer = st->layer + 1 < cfg->n_layers ? st->layer + 1 : st->layer;
            else
                move_tensor(a, 1);
            return;
        case KEY_LEFT: st->focus = 0; return;
        case KEY_RIGHT: st->focus = 1; return;
        case KEY_PPAGE:
            if (st->focus == 0)
                st->layer = st->layer > page ? st->layer - page : 0;
            else
                move_tensor(a, -page);
            return;
        case KEY_NPAGE:
            if (st->focus == 0)
                st->layer = st->layer + page < cfg->n_layers ? st->layer + page : cfg->n_layers - 1;
            else
                move_tensor(a, page);
            return;
        case KEY_HOME: if (st->focus == 0) st->layer = 0; else move_tensor(a, -AS_T_COUNT); return;
        case KEY_END: if (st->focus == 0) st->layer = cfg->n_layers - 1; else move_tensor(a, AS_T_COUNT); return;
        default: a->dirty = false; return;
        }
    }
    /* ring, caches, candidates, top-k: scroll the (last) panel */
    int pn = a->scr.n_panels > 1 ? 1 : 0;
    switch (ch) {
    case KEY_UP: case 'k': scroll_view(a, pn, -1); return;
    case KEY_DOWN: case 'j': scroll_view(a, pn, 1); return;
    case KEY_PPAGE: scroll_view(a, pn, -page); return;
    case KEY_NPAGE: scroll_view(a, pn, page); return;
    case KEY_HOME: a->st.top[st->view][pn] = 0; return;
    default: a->dirty = false; return;
    }
}

/* ---- the loop ------------------------------------------------------------------------------ */

static void take_result(App *a)
{
    TuiJobResult r;
    if (!tui_worker_take_result(a->w, &r))
        return;
    a->dirty = true;
    if (r.rc == AS_ECANCELLED)
        say(a, TC_WARN, "%s (%.1f s)", r.msg, r.seconds);
    else if (r.rc)
        say(a, TC_BAD, "%s", r.msg);
    else
        say(a, r.kind == TUI_JOB_DIVERGE && r.layer >= 0 ? TC_MISMATCH : TC_GOOD, "%s (%.2f s)", r.msg, r.seconds);
    if (r.layer >= 0)
        a->st.layer = r.layer;
    if (r.tensor != AS_T_COUNT) {
        a->st.tensor = r.tensor;
        a->st.focus = 1;
    }
}

static void busy_line(App *a, TuiLine *l)
{
    TuiProgress p;
    tui_worker_progress(a->w, &p);
    tl_clear(l);
    int layer = atomic_load(&a->d->progress_layer);
    tl_add(l, TC_BUSY, "busy %s ", a->g->spin[a->spin % a->g->n_spin]);
    tl_add(l, TC_BUSY, "%s", tui_job_name(p.kind));
    if (p.total > 1 || p.kind == TUI_JOB_DECODE)
        tl_add(l, TC_NORMAL, " %d/%d", p.done, p.total);
    if (p.kind != TUI_JOB_SAVE_STEP && p.kind != TUI_JOB_SAVE_RUN) {
        if (p.step >= 0)
            tl_add(l, TC_NORMAL, "  step %d", p.layer + 1 >= a->n_layers ? p.step + 1 : p.step);
        tl_add(l, TC_NORMAL, "  layer %d/%d ", layer + 1, a->n_layers);
        int w = 12, full = a->n_layers ? (layer * w) / a->n_layers : 0;
        for (int i = 0; i < w; i++)
            tl_put(l, i < full ? TC_GOOD : TC_DIM, i < full ? a->g->bar_full : a->g->bar_empty);
    }
    tl_add(l, TC_NORMAL, "  %.1f s", p.seconds);
    tl_put(l, p.cancelling ? TC_WARN : TC_DIM, p.cancelling ? "  cancelling..." : "  Esc cancels");
}

static void rebuild(App *a)
{
    tui_data_from_driver(a->d, a->label, &a->data);
    tui_build(&a->data, &a->st, a->g, a->cols, a->rows, &a->scr);
    a->built = true;
    a->dirty = false;
}

static void draw(App *a, bool busy)
{
    erase();
    TuiKeyLineMode km = busy ? TUI_KL_BUSY : a->st.help ? TUI_KL_HELP : TUI_KL_IDLE;
    if (a->cols < TUI_MIN_COLS || a->rows < TUI_MIN_ROWS) {
        tui_key_line(&a->keys, a->cols, a->st.view, TUI_KL_SMALL, a->g);
        tui_draw_too_small(a->cols, a->rows, &a->keys);
        refresh();
        return;
    }
    if (a->pk != PK_NONE)
        prompt_line(a, &a->keys);
    else
        tui_key_line(&a->keys, a->cols, a->st.view, km, a->g);
    if (busy) {
        busy_line(a, &a->msg);
    } else {
        tl_clear(&a->msg);
        tl_add(&a->msg, a->msgcolor, " %s", a->msgtext);
    }
    if (a->built) {
        if (a->scr.lay.cols != a->cols || a->scr.lay.rows != a->rows)
            tui_relayout(&a->scr, a->st.view, a->n_layers, a->cols, a->rows);
        a->scr.help.used = a->st.help;
        if (a->st.help && !a->scr.help.lines.n) {
            tui_model_help(a->g, &a->scr.help);
            tp_follow(&a->scr.help, &a->st.help_top);
        }
        tui_draw_screen(&a->scr, &a->msg, &a->keys, a->g);
    }
    refresh();
}

static int loop(App *a)
{
    for (;;) {
        if (got_signal) {
            int sig = got_signal;
            tui_worker_cancel(a->w);
            endwin();
            as_dump_abort_all();
            fprintf(stderr, "attnscope: %s: the terminal is restored, unfinished dumps removed\n",
                    sig == SIGINT ? "interrupted" : "terminated");
            signal(sig, SIG_DFL);
            raise(sig);
            return 128 + sig;
        }
        take_result(a);
        bool busy = tui_worker_busy(a->w);
        if (!busy && a->quitting)
            return 0;
        getmaxyx(stdscr, a->rows, a->cols);
        if (!busy && (a->dirty || !a->built))
            rebuild(a);
        draw(a, busy);
        a->spin++;
        int ch = getch();
        if (ch == ERR)
            continue;
        if (ch == KEY_RESIZE) {
            a->dirty = true;
            continue;
        }
        /* a job that ended while we waited for the key: take it and rebuild first, so that the
         * key acts on fresh data */
        take_result(a);
        if (!tui_worker_busy(a->w) && a->dirty && !a->quitting)
            rebuild(a);
        if (tui_worker_busy(a->w)) {
            if (ch == 27 || ch == 'c') {
                tui_worker_cancel(a->w);
            } else if (ch == 'q') {
                tui_worker_cancel(a->w);
                a->quitting = true;
            } else if (ch == '?') {
                a->st.help = !a->st.help;
            } else if (a->st.help) {
                a->st.help = false;
            }
            continue;
        }
        if (a->pk != PK_NONE) {
            prompt_key(a, ch);
            a->dirty = true;
            continue;
        }
        if (a->st.help) {
            if (ch == KEY_DOWN || ch == 'j' || ch == KEY_NPAGE) {
                a->st.help_top += ch == KEY_NPAGE ? 10 : 1;
            } else if (ch == KEY_UP || ch == 'k' || ch == KEY_PPAGE) {
                a->st.help_top -= ch == KEY_PPAGE ? 10 : 1;
                if (a->st.help_top < 0)
                    a->st.help_top = 0;
            } else if (ch == 'q') {
                a->quitting = true;
            } else {
                a->st.help = false;
            }
            a->dirty = true;
            continue;
        }
        if (a->cols < TUI_MIN_COLS || a->rows < TUI_MIN_ROWS) {
            if (ch == 'q')
                a->quitting = true;
            continue;
        }
        idle_key(a, ch);
    }
}

static void make_label(const char *model, char *out, size_t n)
{
    const char *base = model;
    size_t len = strlen(model);
    while (len > 1 && model[len - 1] == '/')
        len--;
    for (size_t i = 0; i < len; i++)
        if (model[i] == '/' && i + 1 < len)
            base = model + i + 1;
    size_t k = 0;
    for (const char *p = base; p < model + len && k + 1 < n; p++) {
        char c = *p;
        bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-' ||
                  c == '_' || c == '.';
        out[k++] = ok ? c : '_';
    }
    out[k] = '\0';
    if (strncmp(out, "preset_", 7) == 0)
        memmove(out, out + 7, strlen(out + 7) + 1);
    if (!k)
        snprintf(out, n, "model");
}

int as_tui_main(const AsTuiOptions *o)
{
    setlocale(LC_ALL, "");
    const char *ascii = getenv("ATTNSCOPE_TUI_ASCII");
    bool utf8 = strcmp(nl_langinfo(CODESET), "UTF-8") == 0 && !(ascii && *ascii && strcmp(ascii, "0"));
    if (!isatty(STDIN_FILENO) || !isatty(STDOUT_FILENO)) {
        fprintf(stderr, "attnscope tui: needs a terminal (stdin and stdout); batch runs: attnscope run\n");
        return AS_EBADINPUT;
    }
    App *a = calloc(1, sizeof *a);
    if (!a) {
        fprintf(stderr, "attnscope tui: out of memory\n");
        return AS_ERUNTIME;
    }
    AsError err = {0};
    AsDriverOptions dopt = o->drv;
    int rc = as_driver_open(&dopt, &a->d, &err);
    if (rc) {
        fprintf(stderr, "attnscope tui: %s\n", err.msg);
        free(a);
        return rc;
    }
    a->d->opt.quiet = true; /* nothing more on stderr while curses owns the terminal */
    a->g = utf8 ? &tui_glyphs_utf8 : &tui_glyphs_ascii;
    make_label(o->label ? o->label : dopt.model, a->label, sizeof a->label);
    a->n_layers = a->d->model.cfg.n_layers;
    a->last_prefill = o->prefill > 0 ? o->prefill : 8;
    tui_state_init(&a->st);
    tui_screen_init(&a->scr);
    tl_init(&a->msg);
    tl_init(&a->keys);
    say(a, TC_NORMAL, "%s. p prefills, ? lists every key", a->d->note);

    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_signal;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);

    SCREEN *scr = newterm(NULL, stdout, stdin);
    if (!scr) {
        fprintf(stderr, "attnscope tui: cannot use terminal '%s'\n", getenv("TERM") ? getenv("TERM") : "(unset)");
        as_driver_close(a->d);
        free(a);
        return AS_EBADINPUT;
    }
    cbreak();
    noecho();
    nonl();
    keypad(stdscr, TRUE);
    curs_set(0);
    set_escdelay(25);
    timeout(100);
    tui_draw_init_colors();

    if ((rc = tui_worker_start(a->d, &a->w, &err)) == 0) {
        if (o->prefill > 0) {
            TuiJob j = {.kind = TUI_JOB_PREFILL, .n = o->prefill};
            tui_worker_submit(a->w, &j);
        }
        rc = loop(a);
        tui_worker_stop(a->w);
    }
    endwin();
    delscreen(scr);
    if (rc && err.msg[0])
        fprintf(stderr, "attnscope tui: %s\n", err.msg);
    tui_screen_free(&a->scr);
    tl_free(&a->msg);
    tl_free(&a->keys);
    as_driver_close(a->d);
    free(a);
    return rc;
}
