#include "tui/msglog.h"

#include <stdio.h>
#include <string.h>

void tui_log_init(TuiMsgLog *log) { memset(log, 0, sizeof *log); }

void tui_log_add(TuiMsgLog *log, time_t when, TuiColor c, const char *text)
{
    int at = log->n < TUI_LOG_N ? log->n++ : log->head;
    if (log->n == TUI_LOG_N && at == log->head)
        log->head = (log->head + 1) % TUI_LOG_N;
    TuiMsg *m = &log->v[at];
    m->when = when;
    m->color = c;
    snprintf(m->text, sizeof m->text, "%s", text);
}

const TuiMsg *tui_log_at(const TuiMsgLog *log, int i) { return &log->v[(log->head + i) % TUI_LOG_N]; }

void tui_model_log(const TuiMsgLog *log, TuiPanel *p)
{
    snprintf(p->title, sizeof p->title, "messages: the last %d of at most %d (any key closes)", log->n, TUI_LOG_N);
    if (!log->n)
        tls_add(&p->lines, TC_DIM, " nothing said yet");
    for (int i = 0; i < log->n; i++) {
        const TuiMsg *m = tui_log_at(log, i);
        struct tm tm;
        char hms[16] = "--:--:--";
        if (localtime_r(&m->when, &tm))
            strftime(hms, sizeof hms, "%H:%M:%S", &tm);
        TuiLine l;
        tl_init(&l);
        tl_add(&l, TC_DIM, " %s  ", hms);
        tl_put(&l, m->color, m->text);
        tls_add_wrapped_line(&p->lines, &l, tp_inner_w(p), 11);
        tl_free(&l);
    }
    /* open on the newest */
    p->sel = -1;
    p->top = p->lines.n;
}
