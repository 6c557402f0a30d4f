/* The message log: the last TUI_LOG_N messages of the message line with the time each was
 * said, shown by the log overlay (key L) newest last, each wrapped to the panel. */
#ifndef AS_TUI_MSGLOG_H
#define AS_TUI_MSGLOG_H

#include <time.h>

#include "tui/text.h"

#define TUI_LOG_N 100

typedef struct {
    time_t when;
    TuiColor color;
    char text[800];
} TuiMsg;

typedef struct {
    TuiMsg v[TUI_LOG_N];    /* a ring: the oldest at head once full */
    int n, head;
} TuiMsgLog;

void tui_log_init(TuiMsgLog *log);
void tui_log_add(TuiMsgLog *log, time_t when, TuiColor c, const char *text);
/* The i-th message, oldest first (i < n). */
const TuiMsg *tui_log_at(const TuiMsgLog *log, int i);
/* The overlay: "HH:MM:SS  text", the text wrapped under itself. */
void tui_model_log(const TuiMsgLog *log, TuiPanel *p);

#endif
