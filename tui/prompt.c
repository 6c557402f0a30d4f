#include "tui/prompt.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tui/keys.h"

/* Whether the text is acceptable, and what it says. */
static void recheck(TuiPrompt *p)
{
    p->said[0] = '\0';
    if (p->number) {
        char *end;
        errno = 0;
        long v = strtol(p->buf, &end, 10);
        p->ok = p->buf[0] && !*end && !errno && v >= p->lo && v <= p->hi;
        if (!p->ok)
            snprintf(p->said, sizeof p->said, "%s: a number in %ld..%ld", p->buf[0] ? "no" : "empty", p->lo, p->hi);
        else
            snprintf(p->said, sizeof p->said, "%ld..%ld", p->lo, p->hi);
        return;
    }
    if (p->check) {
        p->ok = p->check(p->ctx, p->buf, p->said, sizeof p->said);
        return;
    }
    p->ok = p->buf[0] != '\0';
    if (!p->ok)
        snprintf(p->said, sizeof p->said, "empty");
}

static void open_prompt(TuiPrompt *p, TuiPromptKind k, const char *label, const char *def)
{
    p->kind = k;
    snprintf(p->label, sizeof p->label, "%s", label);
    snprintf(p->buf, sizeof p->buf, "%s", def ? def : "");
    p->fresh = true;
}

void tui_prompt_number(TuiPrompt *p, TuiPromptKind k, const char *label, long def, long lo, long hi)
{
    memset(p, 0, sizeof *p);
    char d[32];
    snprintf(d, sizeof d, "%ld", def);
    open_prompt(p, k, label, d);
    p->number = true;
    p->lo = lo;
    p->hi = hi;
    recheck(p);
}

void tui_prompt_text(TuiPrompt *p, TuiPromptKind k, const char *label, const char *def, TuiPromptCheck check,
                     void *ctx)
{
    memset(p, 0, sizeof *p);
    open_prompt(p, k, label, def);
    p->check = check;
    p->ctx = ctx;
    recheck(p);
}

long tui_prompt_value(const TuiPrompt *p) { return strtol(p->buf, NULL, 10); }

TuiPromptEvent tui_prompt_key(TuiPrompt *p, int key)
{
    size_t len = strlen(p->buf);
    switch (key) {
    case TUI_KEY_ESC:
        p->kind = TUI_PK_NONE;
        return TUI_PROMPT_CANCEL;
    case TUI_KEY_ENTER:
        recheck(p);
        return p->ok ? TUI_PROMPT_ACCEPT : TUI_PROMPT_EDITING;
    case TUI_KEY_BACKSPACE:
        if (len)
            p->buf[len - 1] = '\0';
        p->fresh = false;
        recheck(p);
        return TUI_PROMPT_EDITING;
    case TUI_KEY_CTRL('u'):
        p->buf[0] = '\0';
        p->fresh = false;
        recheck(p);
        return TUI_PROMPT_EDITING;
    default:
        break;
    }
    if (key < 32 || key >= 127)
        return TUI_PROMPT_EDITING;
    if (p->number && (key < '0' || key > '9')) {
        /* refused, and said so: the text stays as it was */
        snprintf(p->said, sizeof p->said, "'%c' refused: digits only (%ld..%ld)", key, p->lo, p->hi);
        p->ok = false;
        return TUI_PROMPT_EDITING;
    }
    if (p->fresh) {
        p->buf[0] = '\0';
        len = 0;
    }
    p->fresh = false;
    if (len + 1 < sizeof p->buf) {
        p->buf[len] = (char)key;
        p->buf[len + 1] = '\0';
    }
    recheck(p);
    return TUI_PROMPT_EDITING;
}

void tui_prompt_line(const TuiPrompt *p, int width, TuiLine *l)
{
    tl_clear(l);
    tl_add(l, TC_TITLE, "%s: ", p->label);
    tl_put(l, p->fresh ? TC_SELECT : TC_NORMAL, p->buf);
    tl_put(l, TC_CURSOR, " ");
    if (p->said[0]) {
        tl_put(l, TC_NORMAL, "  ");
        tl_put(l, p->ok ? TC_GOOD : TC_BAD, p->said);
    }
    static const char *const hint[][2] = {{"Enter", " OK "}, {"Esc", " Cancel "}, {"^U", " Clear"}};
    int need = 2;
    for (int i = 0; i < 3; i++)
        need += tui_utf8_len(hint[i][0]) + tui_utf8_len(hint[i][1]);
    if (l->nchars + need <= width) {
        tl_put(l, TC_NORMAL, "  ");
        for (int i = 0; i < 3; i++) {
            tl_put(l, TC_KEY, hint[i][0]);
            tl_put(l, TC_NORMAL, hint[i][1]);
        }
    }
    tl_fit(l, width, "~");
}
