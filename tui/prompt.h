/* The prompt on the key line: a label, the text typed (the default selected: typing replaces
 * it), the keys that edit it. No curses: the app feeds it TuiKeys and draws its line. */
#ifndef AS_TUI_PROMPT_H
#define AS_TUI_PROMPT_H

#include <limits.h>
#include <stdbool.h>

#include "tui/text.h"

typedef enum {
    TUI_PK_NONE,
    TUI_PK_PREFILL,
    TUI_PK_DECODE,
    TUI_PK_DIVERGE,
    TUI_PK_LAYER,
    TUI_PK_QUERY,
    TUI_PK_HEAD,
    TUI_PK_TENSOR,
    TUI_PK_SAVE_STEP,
    TUI_PK_SAVE_RUN,
} TuiPromptKind;

typedef struct {
    TuiPromptKind kind;     /* TUI_PK_NONE: no prompt open */
    char label[64];
    char buf[PATH_MAX];
    bool fresh;             /* the default is still untouched: typing replaces it */
} TuiPrompt;

typedef enum { TUI_PROMPT_EDITING, TUI_PROMPT_ACCEPT, TUI_PROMPT_CANCEL } TuiPromptEvent;

void tui_prompt_open(TuiPrompt *p, TuiPromptKind k, const char *label, const char *def);
/* Enter accepts, Esc cancels (both close the prompt), Backspace and ^U edit, the rest types. */
TuiPromptEvent tui_prompt_key(TuiPrompt *p, int key);
/* The prompt as the key line shows it. */
void tui_prompt_line(const TuiPrompt *p, TuiLine *l);

#endif
