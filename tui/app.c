/* The interface thread (htop's ScreenManager): the event loop, the keys every view shares, the
 * prompts' effects, the message and progress lines. It never blocks: a key is waited for at
 * most 100 ms, the driver's work runs on the worker (tui/worker.h), and the views are rebuilt
 * from the driver only while the worker is idle. The terminal is tui/term.c's; each view's own
 * keys are beside its model (tui_view_key). */
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

#include "model/text_safe.h"
#include "tui/draw.h"
#include "tui/keys.h"
#include "tui/model.h"
#include "tui/prompt.h"
#include "tui/term.h"
#include "tui/tui.h"
#include "tui/worker.h"

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
}

/* ---- prompts ----------------------------------------------------------------------------- */

static void prompt(App *a, TuiPromptKind k, const char *label, const char *def) { tui_prompt_open(&a->pr, k, label, def); }

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

static void accept_prompt(App *a)
{
    TuiPromptKind k = a->pr.kind;
    a->pr.kind = TUI_PK_NONE;
    const char *s = a->pr.buf;
    long v = 0;
    const AsConfig *cfg = a->data.cfg;
    switch (k) {
    case TUI_PK_PREFILL:
        if (!parse_int(s, 1, cfg->max_seq, &v)) {
            say(a, TC_BAD, "prefill: '%s' is not a token count in 1..%d", s, cfg->max_seq);
            return;
        }
        a->last_prefill = (int)v;
        submit(a, TUI_JOB_PREFILL, (int)v, 0, NULL);
        return;
    case TUI_PK_DECODE:
        if (!parse_int(s, 1, cfg->max_seq, &v)) {
            say(a, TC_BAD, "decode: '%s' is not a step count in 1..%d", s, cfg->max_seq);
            return;
        }
        submit(a, TUI_JOB_DECODE, (int)v, 0, NULL);
        return;
    case TUI_PK_DIVERGE:
        if (!parse_int(s, 0, cfg->max_seq, &v)) {
            say(a, TC_BAD, "first divergence: '%s' is not a decode step count in 0..%d", s, cfg->max_seq);
            return;
        }
        submit(a, TUI_JOB_DIVERGE, (int)v, a->last_prefill, NULL);
        return;
    case TUI_PK_LAYER:
        if (!parse_int(s, 0, cfg->n_layers - 1, &v)) {
            say(a, TC_BAD, "layer: '%s' is not a layer in 0..%d", s, cfg->n_layers - 1);
            return;
        }
        a->st.layer = (int)v;
        break;
    case TUI_PK_QUERY:
        if (!parse_int(s, 0, INT_MAX, &v)) {
            say(a, TC_BAD, "query: '%s' is not a token index", s);
            return;
        }
        a->st.query = (int)v;
        break;
    case TUI_PK_HEAD:
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
    case TUI_PK_TENSOR: {
        AsTensorId id = as_tensor_by_name(s);
        if (id == AS_T_COUNT) {
            say(a, TC_BAD, "tensor: '%s' is not a tensor name (q, kv, rows_a, idx, o, out, state.ring...)", s);
            return;
        }
        a->st.tensor = id;
        tui_tensor_open(&a->data, &a->st);
        break;
    }
    case TUI_PK_SAVE_STEP:
    case TUI_PK_SAVE_RUN:
        if (!*s) {
            say(a, TC_BAD, "save: no path given");
            return;
        }
        submit(a, k == TUI_PK_SAVE_RUN ? TUI_JOB_SAVE_RUN : TUI_JOB_SAVE_STEP, 0, 0, s);
        return;
    default:
        return;
    }
    a->dirty = true;
}

static void prompt_key(App *a, int key)
{
    TuiPromptEvent e = tui_prompt_key(&a->pr, key);
    if (e == TUI_PROMPT_CANCEL)
        say(a, TC_DIM, "cancelled");
    else if (e == TUI_PROMPT_ACCEPT)
        accept_prompt(a);
}

/* ---- keys while idle ---------------------------------------------------------------------- */

/* The keys every view shares (a view's own keys went to tui_view_key first). */
static void idle_key(App *a, int ch)
{
    TuiState *st = &a->st;
    const AsConfig *cfg = a->data.cfg;
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
            prompt(a, TUI_PK_PREFILL, "nothing run yet: prefill tokens", buf);
        } else {
            submit(a, TUI_JOB_LAYER, 0, 0, NULL);
        }
        return;
    case 'f':
        submit(a, TUI_JOB_FINISH, 0, 0, NULL);
        return;
    case 'p':
        snprintf(buf, sizeof buf, "%d", a->last_prefill);
        prompt(a, TUI_PK_PREFILL, "prefill tokens (resets every state)", buf);
        return;
    case 'd':
        if (a->data.cur.step < 0) {
            say(a, TC_WARN, "nothing has run yet: p prefills first");
            return;
        }
        prompt(a, TUI_PK_DECODE, "decode steps", "1");
        return;
    case 'r':
        if (a->data.got_kind == AS_GOT_NONE) {
            say(a, TC_WARN, "first divergence needs an engine or --inject FAULT (%s)", a->data.note);
            return;
        }
        prompt(a, TUI_PK_DIVERGE, "run to the first divergence: at most decode steps", "32");
        return;
    case 'g':
        snprintf(buf, sizeof buf, "%d", st->layer);
        prompt(a, TUI_PK_LAYER, "jump to layer", buf);
        return;
    case 'Q':
        snprintf(buf, sizeof buf, "%d", st->query);
        prompt(a, TUI_PK_QUERY, "query token", buf);
        return;
    case 'H':
        snprintf(buf, sizeof buf, "%d", st->head);
        prompt(a, TUI_PK_HEAD, "head", buf);
        return;
    case 'T':
        prompt(a, TUI_PK_TENSOR, "tensor name", as_tensor_desc[st->tensor].name);
        return;
    case 's':
    case 'S':
        if (a->data.cur.step < 0) {
            say(a, TC_WARN, "nothing to save yet: p prefills first");
            return;
        }
        default_path(a, ch == 'S', buf, sizeof buf);
        prompt(a, ch == 'S' ? TUI_PK_SAVE_RUN : TUI_PK_SAVE_STEP, ch == 'S' ? "save the run to" : "save the step to",
               buf);
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
    case TUI_KEY_TAB:
        st->view = (TuiView)((st->view + 1) % TV_COUNT);
        return;
    case TUI_KEY_BTAB:
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
        st->head += ch == '>' ? 1 : -1;
        if (st->head < 0)
            st->head = 0;
        return;
    default:
        a->dirty = false;
        return;
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
    if (a->cols < TUI_MIN_COLS || a->rows < TUI_MIN_ROWS) {
        tui_key_line(&a->keys, a->cols, a->st.view, TUI_KL_SMALL, a->g);
        tui_draw_too_small(a->cols, a->rows, &a->keys);
        return;
    }
    TuiKeyLineMode km = busy ? TUI_KL_BUSY : a->st.help ? TUI_KL_HELP : TUI_KL_IDLE;
    if (a->pr.kind != TUI_PK_NONE)
        tui_prompt_line(&a->pr, &a->keys);
    else
        tui_key_line(&a->keys, a->cols, a->st.view, km, a->g);
    if (busy) {
        busy_line(a, &a->msg);
    } else {
        tl_clear(&a->msg);
        tl_add(&a->msg, a->msgcolor, " %s", a->msgtext);
    }
    if (!a->built)
        return;
    if (a->scr.lay.cols != a->cols || a->scr.lay.rows != a->rows)
        tui_relayout(&a->scr, a->st.view, a->n_layers, a->cols, a->rows);
    a->scr.help.used = a->st.help;
    if (a->st.help && !a->scr.help.lines.n) {
        tui_model_help(a->g, &a->scr.help);
        tp_follow(&a->scr.help, &a->st.help_top);
    }
    tui_draw_screen(&a->scr, &a->msg, &a->keys, a->g);
}

/* While busy only cancel, quit and the help. */
static void busy_key(App *a, int key)
{
    if (key == TUI_KEY_ESC || key == 'c') {
        tui_worker_cancel(a->w);
    } else if (key == 'q') {
        tui_worker_cancel(a->w);
        a->quitting = true;
    } else if (key == '?') {
        a->st.help = !a->st.help;
    } else if (a->st.help) {
        a->st.help = false;
    }
}

static void help_key(App *a, int key)
{
    if (key == TUI_KEY_DOWN || key == 'j' || key == TUI_KEY_PGDN) {
        a->st.help_top += key == TUI_KEY_PGDN ? 10 : 1;
    } else if (key == TUI_KEY_UP || key == 'k' || key == TUI_KEY_PGUP) {
        a->st.help_top -= key == TUI_KEY_PGUP ? 10 : 1;
        if (a->st.help_top < 0)
            a->st.help_top = 0;
    } else if (key == 'q') {
        a->quitting = true;
    } else {
        a->st.help = false;
    }
}

static void key(App *a, int k)
{
    /* a job that ended while we waited for the key: take it and rebuild first, so that the key
     * acts on fresh data */
    take_result(a);
    if (!tui_worker_busy(a->w) && a->dirty && !a->quitting)
        rebuild(a);
    if (tui_worker_busy(a->w))
        return busy_key(a, k);
    a->dirty = true;
    if (a->pr.kind != TUI_PK_NONE)
        return prompt_key(a, k);
    if (a->st.help)
        return help_key(a, k);
    if (a->cols < TUI_MIN_COLS || a->rows < TUI_MIN_ROWS) {
        a->quitting = k == 'q';
        return;
    }
    if (!tui_view_key(&a->data, &a->st, &a->scr, k))
        idle_key(a, k);
}

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
        if (!busy && a->quitting)
            return 0;
        tui_term_size(&a->cols, &a->rows);
        if (!busy && (a->dirty || !a->built))
            rebuild(a);
        draw(a, busy);
        a->spin++;
        int k = tui_term_key();
        if (k == TUI_KEY_RESIZE)
            a->dirty = true;
        else if (k != TUI_KEY_NONE)
            key(a, k);
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

    tui_term_catch_signals();
    char why[128];
    if (!tui_term_open(100, why, sizeof why)) {
        fprintf(stderr, "attnscope tui: %s\n", why);
        as_driver_close(a->d);
        free(a);
        return AS_EBADINPUT;
    }
    if ((rc = tui_worker_start(a->d, &a->w, &err)) == 0) {
        if (o->prefill > 0) {
            TuiJob j = {.kind = TUI_JOB_PREFILL, .n = o->prefill};
            tui_worker_submit(a->w, &j);
        }
        rc = loop(a);
        tui_worker_stop(a->w);
    }
    tui_term_close();
    if (rc && err.msg[0])
        fprintf(stderr, "attnscope tui: %s\n", err.msg);
    tui_screen_free(&a->scr);
    tl_free(&a->msg);
    tl_free(&a->keys);
    as_driver_close(a->d);
    free(a);
    return rc;
}
