/* The prompt on the key line: a label, the text typed (the default selected: typing replaces
 * it), the keys that edit it, and what the text says as it is typed (a number prompt takes
 * digits only and names its range; a text prompt asks its check). Enter accepts only what
 * checks. No curses: the app feeds it TuiKeys and draws its line. */
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
    TUI_PK_GOTO,
} TuiPromptKind;

/* A text prompt's check: true when text is acceptable; msg says what it means or what is wrong. */
typedef bool (*TuiPromptCheck)(void *ctx, const char *text, char *msg, size_t n);

typedef struct {
    TuiPromptKind kind;     /* TUI_PK_NONE: no prompt open */
    char label[64];
    char buf[PATH_MAX];
    bool fresh;             /* the default is still untouched: typing replaces it */
    bool number;            /* digits only, within lo..hi */
    long lo, hi;
    TuiPromptCheck check;   /* text prompts (NULL: anything not empty) */
    void *ctx;
    bool ok;                /* the text as it stands can be accepted */
    char said[160];         /* what it means, or what is wrong with it */
} TuiPrompt;

typedef enum { TUI_PROMPT_EDITING, TUI_PROMPT_ACCEPT, TUI_PROMPT_CANCEL } TuiPromptEvent;

/* A number prompt: digits only, accepted within lo..hi. */
void tui_prompt_number(TuiPrompt *p, TuiPromptKind k, const char *label, long def, long lo, long hi);
/* A text prompt with its check (NULL: anything not empty). */
void tui_prompt_text(TuiPrompt *p, TuiPromptKind k, const char *label, const char *def, TuiPromptCheck check,
                     void *ctx);
/* Enter accepts (when the text checks), Esc cancels (the prompt closes), Backspace and ^U edit,
 * the rest types. */
TuiPromptEvent tui_prompt_key(TuiPrompt *p, int key);
/* The number a number prompt holds (after TUI_PROMPT_ACCEPT). */
long tui_prompt_value(const TuiPrompt *p);
/* The prompt as the key line shows it, within width. */
void tui_prompt_line(const TuiPrompt *p, int width, TuiLine *l);

#endif
