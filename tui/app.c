/* The interface thread (htop's ScreenManager): the event loop, the keys every view shares, the
 * prompts' effects, the message and progress lines. It never blocks: a key is waited for at
 * most 100 ms (25 ms while the worker runs), the driver's work runs on the worker (tui/worker.h) from the very start (the
 * model is opened there too, so the first frame is drawn at once), and the views are rebuilt
 * from the driver only while the worker is idle. The terminal is tui/term.c's; each view's own
 * keys are beside its model (tui_view_key). */
#include <errno.h>
#include <langinfo.h>
#include <limits.h>
#include <locale.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "dumps/dump.h"
#include "model/text_safe.h"
#include "tui/draw.h"
#include "tui/keys.h"
#include "tui/model.h"
#include "tui/prompt.h"
#include "tui/term.h"
#include "tui/tui.h"
#include "tui/worker.h"

typedef struct {
    const AsTuiOptions *opt;
    AsDriver *d;            /* NULL until the worker has opened it */
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
    TuiMsgLog log;
    unsigned gen;           /* counts the jobs taken: the data may have changed with each */
    bool dirty;             /* rebuild the views (when idle) */
    bool quitting;
    bool built;             /* scr holds a build of the views */
    int last_prefill;
    int exit_rc;            /* the open failed: the status to end with, the message in msgtext */
    TuiPrompt pr;
} App;

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
    tui_log_add(&a->log, time(NULL), c, a->msgtext);
}

static void submit(App *a, TuiJobKind k, int n, int n2, const char *path)
{
    TuiJob j = {.kind = k, .n = n, .n2 = n2};
    if (path)
        snprintf(j.path, sizeof j.path, "%s", path);
    if (!tui_worker_submit(a->w, &j))
        say(a, TC_WARN, "busy: Esc cancels the running work");
}

/* ---- prompts: what each checks as it is typed, what each does when accepted ---------------- */

static bool check_tensor(void *ctx, const char *text, char *msg, size_t n)
{
    (void)ctx;
    AsTensorId id = as_tensor_by_name(text);
    if (id != AS_T_COUNT) {
        snprintf(msg, n, "%s", as_tensor_desc[id].what);
        return true;
    }
    /* the names it could still become */
    size_t len = strlen(text), k = (size_t)snprintf(msg, n, "no tensor '%.32s'; ", text);
    int found = 0;
    for (int i = 0; i < AS_T_COUNT && k < n; i++)
        if (!strncmp(as_tensor_desc[i].name, text, len))
            k += (size_t)snprintf(msg + k, n - k, "%s%s", found++ ? " " : "names: ", as_tensor_desc[i].name);
    if (!found && k < n)
        snprintf(msg + k, n - k, "q, kv, rows_a, idx, o, out, state.ring...");
    return false;
}

static bool check_path(void *ctx, const char *text, char *msg, size_t n)
{
    (void)ctx;
    if (!*text) {
        snprintf(msg, n, "a file name, please");
        return false;
    }
    const char *slash = strrchr(text, '/');
    if (slash && slash > text) {
        char dir[PATH_MAX];
        snprintf(dir, sizeof dir, "%.*s", (int)(slash - text), text);
        struct stat sb;
        if (stat(dir, &sb) || !S_ISDIR(sb.st_mode)) {
            snprintf(msg, n, "no directory %.100s", dir);
            return false;
        }
    }
    snprintf(msg, n, "an HDF5 dump");
    return true;
}

static bool check_goto(void *ctx, const char *text, char *msg, size_t n)
{
    const App *a = ctx;
    int64_t c[3];
    return tui_heat_goto_parse(&a->data, &a->st, text, c, msg, n);
}

static void default_path(App *a, bool run, char *buf, size_t n)
{
    if (run)
        snprintf(buf, n, "attnscope-%s-run.h5", a->label);
    else
        snprintf(buf, n, "attnscope-%s-step%d.h5", a->label, a->data.cur.step < 0 ? 0 : a->data.cur.step);
}

/* Another layer or tensor in the tensor view: it opens anew (the whole tensor, the worst element). */
static void reopen_tensor(TuiState *st)
{
    if (st->view == TV_TENSOR)
        tui_tensor_open(st);
}

/* The heatmap's cursor to head h of its token. */
static void cursor_head(App *a, int h)
{
    const TuiHeatGeom *hg = &a->scr.heat;
    if (a->st.view == TV_TENSOR && hg->valid && hg->heads > 0)
        a->st.cur_r = a->st.cur_r / hg->heads * hg->heads + (h < hg->heads ? h : hg->heads - 1);
}

static void accept_prompt(App *a)
{
    TuiPrompt p = a->pr;
    a->pr.kind = TUI_PK_NONE;
    int v = (int)tui_prompt_value(&p);
    switch (p.kind) {
    case TUI_PK_PREFILL:
        a->last_prefill = v;
        return submit(a, TUI_JOB_PREFILL, v, 0, NULL);
    case TUI_PK_DECODE: return submit(a, TUI_JOB_DECODE, v, 0, NULL);
    case TUI_PK_DIVERGE: return submit(a, TUI_JOB_DIVERGE, v, a->last_prefill, NULL);
    case TUI_PK_LAYER:
        a->st.layer = v;
        return reopen_tensor(&a->st);
    case TUI_PK_QUERY: a->st.query = v; return;
    case TUI_PK_HEAD:
        a->st.head = v;
        return cursor_head(a, v);
    case TUI_PK_TENSOR:
        a->st.tensor = as_tensor_by_name(p.buf);
        return tui_tensor_open(&a->st);
    case TUI_PK_GOTO: {
        int64_t c[3];
        char msg[160];
        if (tui_heat_goto_parse(&a->data, &a->st, p.buf, c, msg, sizeof msg)) {
            tui_heat_goto(&a->data, &a->st, c);
            say(a, TC_NORMAL, "%s %s", as_tensor_desc[a->st.tensor].name, msg);
        }
        return;
    }
    case TUI_PK_SAVE_STEP:
    case TUI_PK_SAVE_RUN: return submit(a, p.kind == TUI_PK_SAVE_RUN ? TUI_JOB_SAVE_RUN : TUI_JOB_SAVE_STEP, 0, 0, p.buf);
    default: return;
    }
}

static void prompt_key(App *a, int key)
{
    TuiPromptEvent e = tui_prompt_key(&a->pr, key);
    if (e == TUI_PROMPT_CANCEL)
        say(a, TC_DIM, "cancelled");
    else if (e == TUI_PROMPT_ACCEPT)
        accept_prompt(a);
}

/* The go-to prompt's default: where the cursor is, in the tensor's own words. */
static void goto_default(const App *a, char *buf, size_t n)
{
    const AsTensorDesc *desc = &as_tensor_desc[a->st.tensor];
    const TuiHeatGeom *hg = &a->scr.heat;
    if (desc->ndim == 3 && hg->heads > 0)
        snprintf(buf, n, "%s %d %s %d %s %d", desc->dims[0], a->st.cur_r / hg->heads, desc->dims[1],
                 a->st.cur_r % hg->heads, desc->dims[2], a->st.cur_c);
    else if (desc->ndim == 2)
        snprintf(buf, n, "%s %d %s %d", desc->dims[0], a->st.cur_r, desc->dims[1], a->st.cur_c);
    else
        snprintf(buf, n, "%d", a->st.cur_c);
}

/* ---- keys while idle ---------------------------------------------------------------------- */

static void open_overlay(App *a, TuiOverlay o)
{
    a->st.overlay = o;
    a->st.overlay_top = o == TUI_OV_LOG ? INT_MAX / 2 : 0; /* the log opens on its newest */
    tui_build_overlay(&a->scr, &a->st, &a->log, a->g);
}

/* The keys every view shares (a view's own keys went to tui_view_key first). */
static void idle_key(App *a, int ch)
{
    TuiState *st = &a->st;
    const AsConfig *cfg = a->data.cfg;
    char buf[PATH_MAX];
    const int rows = st->layer < cfg->n_layers && a->data.ref[st->layer].s > 0 ? a->data.ref[st->layer].s : 1;
    a->dirty = true;
    switch (ch) {
    case 'q': a->quitting = true; return;
    case '?': return open_overlay(a, TUI_OV_HELP);
    case 'L': return open_overlay(a, TUI_OV_LOG);
    case 'v': return open_overlay(a, TUI_OV_FULL);
    case 'n':
        if (a->data.cur.step < 0)
            return say(a, TC_WARN, "nothing has run yet: p prefills first (then n runs one layer at a time)");
        return submit(a, TUI_JOB_LAYER, 0, 0, NULL);
    case 'f': return submit(a, TUI_JOB_FINISH, 0, 0, NULL);
    case 'p':
        return tui_prompt_number(&a->pr, TUI_PK_PREFILL, "prefill tokens (resets every state)", a->last_prefill, 1,
                                 cfg->max_seq);
    case 'd':
        if (a->data.cur.step < 0)
            return say(a, TC_WARN, "nothing has run yet: p prefills first");
        if (a->data.next_pos >= cfg->max_seq)
            return say(a, TC_WARN, "no room left: position %d is max_seq (p prefills again)", a->data.next_pos);
        return tui_prompt_number(&a->pr, TUI_PK_DECODE, "decode steps", 1, 1, cfg->max_seq - a->data.next_pos);
    case 'r':
        if (a->data.got_kind == AS_GOT_NONE)
            return say(a, TC_WARN, "first divergence needs an engine or --inject FAULT (%s)", a->data.note);
        return tui_prompt_number(&a->pr, TUI_PK_DIVERGE, "run to the first divergence: at most decode steps", 32, 0,
                                 cfg->max_seq);
    case 'D':
        if (a->data.got_kind == AS_GOT_NONE)
            return say(a, TC_WARN, "a diagnosis needs an engine or --inject (%s)", a->data.note);
        return submit(a, TUI_JOB_DIAGNOSE, st->layer, 0, NULL);
    case 'g':
        return tui_prompt_number(&a->pr, TUI_PK_LAYER, "jump to layer", st->layer, 0, cfg->n_layers - 1);
    case 'Q': return tui_prompt_number(&a->pr, TUI_PK_QUERY, "query token", st->query, 0, rows - 1);
    case 'H': return tui_prompt_number(&a->pr, TUI_PK_HEAD, "head", st->head, 0, cfg->n_heads - 1);
    case 'T':
        return tui_prompt_text(&a->pr, TUI_PK_TENSOR, "tensor name", as_tensor_desc[st->tensor].name, check_tensor,
                               NULL);
    case 'G':
        if (st->view != TV_TENSOR || !a->scr.heat.valid)
            return say(a, TC_WARN, "G goes to an element of the tensor view (2 opens it)");
        goto_default(a, buf, sizeof buf);
        return tui_prompt_text(&a->pr, TUI_PK_GOTO, "go to", buf, check_goto, a);
    case 's':
    case 'S':
        if (a->data.cur.step < 0)
            return say(a, TC_WARN, "nothing to save yet: p prefills first");
        default_path(a, ch == 'S', buf, sizeof buf);
        return tui_prompt_text(&a->pr, ch == 'S' ? TUI_PK_SAVE_RUN : TUI_PK_SAVE_STEP,
                               ch == 'S' ? "save the run to" : "save the step to", buf, check_path, NULL);
    case 'm': {
        AsMode m = a->d->opt.mode == AS_MODE_TEACHER ? AS_MODE_FREE : AS_MODE_TEACHER;
        as_driver_set_mode(a->d, m);
        return say(a, TC_NORMAL, "comparison mode: %s (%s), from the next layer", as_mode_name(m),
                   m == AS_MODE_TEACHER ? "the reference takes the engine's layer inputs"
                                        : "each side feeds its own outputs forward");
    }
    case '1': case '2': case '3': case '4': case '5': case '6':
        return tui_state_set_view(st, (TuiView)(ch - '1'));
    case TUI_KEY_TAB: return tui_state_set_view(st, (TuiView)((st->view + 1) % TV_COUNT));
    case TUI_KEY_BTAB: return tui_state_set_view(st, (TuiView)((st->view + TV_COUNT - 1) % TV_COUNT));
    case '[':
    case ']':
        st->layer += ch == ']' ? 1 : -1;
        st->layer = st->layer < 0 ? 0 : st->layer >= cfg->n_layers ? cfg->n_layers - 1 : st->layer;
        return reopen_tensor(st);
    case ',': st->query = st->query > 0 ? st->query - 1 : 0; return;
    case '.': st->query++; return;
    case '<':
    case '>':
        st->head += ch == '>' ? 1 : -1;
        st->head = st->head < 0 ? 0 : st->head;
        return;
    default: a->dirty = false; return;
    }
}

/* ---- the loop ------------------------------------------------------------------------------ */

static void rebuild(App *a);

/* The open job's result: the driver is the interface's to read from now on. */
static void opened(App *a, const TuiJobResult *r)
{
    if (r->rc) {
        a->exit_rc = r->rc;
        a->quitting = true;
        say(a, TC_BAD, "%s", r->msg); /* escaped: it is printed once the terminal is back */
        return;
    }
    a->d = tui_worker_driver(a->w);
    a->n_layers = a->d->model.cfg.n_layers;
    say(a, TC_NORMAL, "%s. p prefills, ? lists every key", a->d->note);
    rebuild(a); /* the views before the start-up prefill: it runs with them on the screen */
    if (a->opt->prefill > 0)
        submit(a, TUI_JOB_PREFILL, a->opt->prefill, 0, NULL);
}

static void take_result(App *a)
{
    TuiJobResult r;
    if (!tui_worker_take_result(a->w, &r))
        return;
    if (r.kind != TUI_JOB_SAVE_STEP && r.kind != TUI_JOB_SAVE_RUN)
        a->gen++; /* the driver's data may have changed: the heatmap's cache is out of date */
    a->dirty = true;
    if (r.kind == TUI_JOB_OPEN)
        return opened(a, &r);
    if (r.rc == AS_ECANCELLED)
        say(a, TC_WARN, "%s (%.1f s)", r.msg, r.seconds);
    else if (r.rc)
        say(a, TC_BAD, "%s", r.msg);
    else
        say(a, r.kind == TUI_JOB_DIVERGE && r.layer >= 0 ? TC_MISMATCH : TC_GOOD, "%s (%.2f s)", r.msg, r.seconds);
    if (r.layer >= 0 && r.layer != a->st.layer) {
        a->st.layer = r.layer;
        reopen_tensor(&a->st);
    }
    if (r.tensor != AS_T_COUNT) {
        a->st.tensor = r.tensor;
        a->st.focus = 1;
        reopen_tensor(&a->st);
    }
}

static void busy_line(App *a, TuiLine *l)
{
    TuiProgress p;
    tui_worker_progress(a->w, &p);
    tl_clear(l);
    tl_add(l, TC_BUSY, " busy %s ", a->g->spin[(int)(p.seconds * 10) % a->g->n_spin]);
    tl_add(l, TC_BUSY, "%s", tui_job_name(p.kind));
    if (p.phase[0])
        tl_add(l, TC_NORMAL, ": %s", p.phase);
    if (p.total > 1 || p.kind == TUI_JOB_DECODE)
        tl_add(l, TC_NORMAL, " %d/%d", p.done, p.total);
    if (a->d && p.kind != TUI_JOB_SAVE_STEP && p.kind != TUI_JOB_SAVE_RUN) {
        int layer = atomic_load(&a->d->progress_layer);
        if (p.step >= 0)
            tl_add(l, TC_NORMAL, "  step %d", p.layer + 1 >= a->n_layers ? p.step + 1 : p.step);
        tl_add(l, TC_NORMAL, "  layer %d/%d", layer + 1, a->n_layers);
        if (p.kind != TUI_JOB_OPEN)
            tl_add(l, TC_DIM, " %s", as_driver_phase_name(atomic_load(&a->d->progress_phase)));
        tl_put(l, TC_NORMAL, " ");
        int w = 12, full = a->n_layers ? (layer * w) / a->n_layers : 0;
        for (int i = 0; i < w; i++)
            tl_put(l, i < full ? TC_GOOD : TC_DIM, i < full ? a->g->bar_full : a->g->bar_empty);
    }
    tl_add(l, TC_NORMAL, "  %.1f s", p.seconds);
    if (!a->d)
        tl_put(l, TC_DIM, "  q quits");
    else
        tl_put(l, p.cancelling ? TC_WARN : TC_DIM, p.cancelling ? "  cancelling..." : "  Esc cancels");
    tl_fit(l, a->cols, a->g->ellipsis);
}

/* The message line: the last message, cut after a whole word when it does not fit (L shows it
 * whole in the log). */
static void message_line(App *a, TuiLine *l)
{
    tl_clear(l);
    tl_add(l, a->msgcolor, " %s", a->msgtext);
    if (l->nchars <= a->cols)
        return;
    static const char more[] = "  L: all of it";
    tl_fit(l, a->cols - (int)sizeof more + 1, a->g->ellipsis);
    tl_put(l, TC_DIM, more);
}

static void rebuild(App *a)
{
    tui_data_from_driver(a->d, a->label, &a->data);
    a->data.gen = a->gen;
    a->data.log = &a->log;
    tui_build(&a->data, &a->st, a->g, a->cols, a->rows, &a->scr);
    a->built = true;
    a->dirty = false;
}

static void draw(App *a, bool busy)
{
    if (a->cols < TUI_MIN_COLS || a->rows < TUI_MIN_ROWS) {
        tui_key_line(&a->keys, a->cols, a->st.view, TUI_KL_SMALL, a->g);
        tui_draw_too_small(a->cols, a->rows, &a->keys);
        return;
    }
    TuiKeyLineMode km = busy ? TUI_KL_BUSY : a->st.overlay != TUI_OV_NONE ? TUI_KL_HELP : TUI_KL_IDLE;
    if (a->pr.kind != TUI_PK_NONE)
        tui_prompt_line(&a->pr, a->cols, &a->keys);
    else
        tui_key_line(&a->keys, a->cols, a->st.view, km, a->g);
    if (busy)
        busy_line(a, &a->msg);
    else
        message_line(a, &a->msg);
    if (!a->built) {
        TuiProgress p;
        tui_worker_progress(a->w, &p);
        tui_build_opening(&a->scr, a->label, p.phase, a->cols, a->rows, a->g);
    } else if (a->scr.lay.cols != a->cols || a->scr.lay.rows != a->rows) {
        tui_relayout(&a->scr, a->st.view, a->n_layers, a->cols, a->rows);
    }
    if (busy && a->built)
        tui_screen_mark_stale(&a->scr, a->g);
    if (a->scr.overlay.used != (a->st.overlay != TUI_OV_NONE) || a->scr.overlay.r.w != a->scr.lay.body.w ||
        a->scr.overlay.r.h != a->scr.lay.body.h)
        tui_build_overlay(&a->scr, &a->st, &a->log, a->g);
    tui_draw_screen(&a->scr, &a->msg, &a->keys, a->g);
}

/* The overlays' keys: scrolling; q quits; any other closes. */
static void overlay_key(App *a, int key)
{
    int *top = &a->st.overlay_top;
    switch (key) {
    case TUI_KEY_DOWN: case 'j': *top += 1; break;
    case TUI_KEY_UP: case 'k': *top -= 1; break;
    case TUI_KEY_PGDN: *top += 10; break;
    case TUI_KEY_PGUP: *top -= 10; break;
    case TUI_KEY_HOME: *top = 0; break;
    case TUI_KEY_END: *top = INT_MAX / 2; break;
    case 'q': a->quitting = true; return;
    default: a->st.overlay = TUI_OV_NONE; return;
    }
    *top = *top < 0 ? 0 : *top;
    tui_build_overlay(&a->scr, &a->st, &a->log, a->g);
}

/* While busy: cancel, quit, the help and the log. */
static void busy_key(App *a, int key)
{
    if (key == TUI_KEY_ESC || key == 'c') {
        if (!a->d)
            return say(a, TC_WARN, "opening the model cannot be cancelled: q quits");
        tui_worker_cancel(a->w);
    } else if (key == 'q') {
        tui_worker_cancel(a->w);
        a->quitting = true;
    } else if (a->st.overlay != TUI_OV_NONE) {
        overlay_key(a, key);
    } else if (key == '?' || key == 'L') {
        open_overlay(a, key == '?' ? TUI_OV_HELP : TUI_OV_LOG);
    }
}

static void key(App *a, int k)
{
    /* a job that ended while we waited for the key: take it and rebuild first, so that the key
     * acts on fresh data */
    take_result(a);
    bool busy = tui_worker_busy(a->w);
    const bool typing = a->pr.kind != TUI_PK_NONE;
    if (!busy && a->d && a->dirty && !a->quitting && !typing)
        rebuild(a);
    if (busy || !a->d)
        return busy_key(a, k);
    if (typing) { /* the prompt line draws from the prompt: the views wait for its end */
        prompt_key(a, k);
        a->dirty = a->dirty || a->pr.kind == TUI_PK_NONE;
        return;
    }
    a->dirty = true;
    if (a->st.overlay != TUI_OV_NONE)
        return overlay_key(a, k);
    if (a->cols < TUI_MIN_COLS || a->rows < TUI_MIN_ROWS) {
        a->quitting = k == 'q';
        return;
    }
    if (!tui_view_key(&a->data, &a->st, &a->scr, k))
        idle_key(a, k);
}

/* q while the model opens: nothing is half written but a preset being generated, whose
 * temporaries go; the worker cannot be stopped inside the generator, so the process ends. */
static void quit_while_opening(void)
{
    tui_term_close();
    as_dump_abort_all();
    fprintf(stderr, "attnscope tui: quit while the model was opening\n");
    _exit(0);
}

enum { KEYS_A_FRAME = 64 }; /* at most between two frames: a stream of keys still shows its progress */

static int loop(App *a)
{
    for (;;) {
        int sig = tui_term_signal();
        if (sig) {
            tui_worker_cancel(a->w);
            tui_term_die_of_signal(sig);
        }
        take_result(a);
        bool busy = tui_worker_busy(a->w);
        if (a->quitting && !a->d && busy)
            quit_while_opening();
        if (!busy && a->quitting)
            return a->exit_rc;
        tui_term_size(&a->cols, &a->rows);
        if (!busy && a->d && (a->dirty || !a->built))
            rebuild(a);
        draw(a, busy);
        /* while busy the loop comes round sooner: a finished job (a cancel) is shown at once; keys that
         * came together (a pasted go-to, a held arrow) are taken before the next frame */
        int k = tui_term_key(busy ? 25 : 100);
        for (int n = 1; k != TUI_KEY_NONE; n++) {
            if (k == TUI_KEY_RESIZE)
                a->dirty = true;
            else
                key(a, k);
            if (n == KEYS_A_FRAME || a->quitting)
                break;
            k = tui_term_key(0);
        }
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
    a->opt = o;
    a->g = utf8 ? &tui_glyphs_utf8 : &tui_glyphs_ascii;
    make_label(o->label ? o->label : o->drv.model, a->label, sizeof a->label);
    a->last_prefill = o->prefill > 0 ? o->prefill : 8;
    tui_state_init(&a->st);
    tui_screen_init(&a->scr);
    tui_log_init(&a->log);
    tl_init(&a->msg);
    tl_init(&a->keys);
    AsError err = {0};
    int rc = tui_worker_start(NULL, &a->w, &err);
    char why[128];
    if (!rc) {
        tui_term_catch_signals();
        if (!tui_term_open(why, sizeof why)) {
            snprintf(err.msg, sizeof err.msg, "%s", why);
            rc = AS_EBADINPUT;
        }
    }
    if (!rc) {
        TuiJob j = {.kind = TUI_JOB_OPEN, .opt = o->drv};
        tui_worker_submit(a->w, &j);
        say(a, TC_NORMAL, "opening %s", o->drv.model);
        rc = loop(a);
    }
    tui_worker_stop(a->w);
    tui_term_close();
    if (rc)
        fprintf(stderr, "attnscope tui: %s\n", a->exit_rc ? a->msgtext : err.msg);
    tui_screen_free(&a->scr);
    tl_free(&a->msg);
    tl_free(&a->keys);
    as_driver_close(a->d);
    free(a);
    return rc;
}
