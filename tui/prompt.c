#include "tui/prompt.h"

#include <stdio.h>
#include <string.h>

#include "tui/keys.h"

void tui_prompt_open(TuiPrompt *p, TuiPromptKind k, const char *label, const char *def)
{
    p->kind = k;
    snprintf(p->label, sizeof p->label, "%s", label);
    snprintf(p->buf, sizeof p->buf, "%s", def ? def : "");
    p->fresh = true;
}

TuiPromptEvent tui_prompt_key(TuiPrompt *p, int key)
{
    size_t len = strlen(p->buf);
    switch (key) {
    case TUI_KEY_ESC:
        p->kind = TUI_PK_NONE;
        return TUI_PROMPT_CANCEL;
    case TUI_KEY_ENTER:
        return TUI_PROMPT_ACCEPT;
    case TUI_KEY_BACKSPACE:
        if (len)
            p->buf[len - 1] = '\0';
        p->fresh = false;
        return TUI_PROMPT_EDITING;
    case TUI_KEY_CTRL('u'):
        p->buf[0] = '\0';
        p->fresh = false;
        return TUI_PROMPT_EDITING;
    default:
        break;
    }
    if (key < 32 || key >= 127)
        return TUI_PROMPT_EDITING;
    if (p->fresh) {
        p->buf[0] = '\0';
        len = 0;
    }
    p->fresh = false;
    if (len + 1 < sizeof p->buf) {
        p->buf[len] = (char)key;
        p->buf[len + 1] = '\0';
    }
    return TUI_PROMPT_EDITING;
}

void tui_prompt_line(const TuiPrompt *p, TuiLine *l)
{
    tl_clear(l);
    tl_add(l, TC_TITLE, "%s: ", p->label);
    tl_put(l, p->fresh ? TC_SELECT : TC_NORMAL, p->buf);
    tl_put(l, TC_CURSOR, " ");
    tl_put(l, TC_NORMAL, "  ");
    tl_put(l, TC_KEY, "Enter");
    tl_put(l, TC_NORMAL, " OK ");
    tl_put(l, TC_KEY, "Esc");
    tl_put(l, TC_NORMAL, " Cancel ");
    tl_put(l, TC_KEY, "^U");
    tl_put(l, TC_NORMAL, " Clear");
}
