#include "tui/term.h"

#include <curses.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "dumps/dump.h"
#include "tui/keys.h"

static SCREEN *term_screen;
static bool have_color;
static volatile sig_atomic_t got_signal;

static const struct {
    short fg, bg;
    attr_t attr;      /* with colours */
    attr_t mono;      /* without */
} scheme[TC_COUNT] = {
    [TC_NORMAL] = {-1, -1, A_NORMAL, A_NORMAL},
    [TC_DIM] = {-1, -1, A_DIM, A_DIM},
    [TC_TITLE] = {COLOR_CYAN, -1, A_BOLD, A_BOLD},
    [TC_HEADER] = {COLOR_BLACK, COLOR_GREEN, A_NORMAL, A_REVERSE},
    [TC_KEY] = {COLOR_BLACK, COLOR_CYAN, A_NORMAL, A_REVERSE},
    [TC_SELECT] = {COLOR_BLACK, COLOR_CYAN, A_NORMAL, A_REVERSE},
    [TC_PASS] = {COLOR_GREEN, -1, A_NORMAL, A_NORMAL},
    [TC_FLIPS] = {COLOR_CYAN, -1, A_NORMAL, A_NORMAL},
    [TC_NEARTIE] = {COLOR_YELLOW, -1, A_BOLD, A_BOLD},
    [TC_MISMATCH] = {COLOR_RED, -1, A_BOLD, A_BOLD | A_UNDERLINE},
    [TC_REFONLY] = {COLOR_BLUE, -1, A_BOLD, A_DIM},
    [TC_GOOD] = {COLOR_GREEN, -1, A_NORMAL, A_NORMAL},
    [TC_WARN] = {COLOR_YELLOW, -1, A_NORMAL, A_BOLD},
    [TC_BAD] = {COLOR_RED, -1, A_NORMAL, A_BOLD},
    [TC_ACCENT] = {COLOR_MAGENTA, -1, A_BOLD, A_BOLD},
    [TC_ONLY_GOT] = {COLOR_RED, -1, A_BOLD | A_REVERSE, A_BOLD | A_REVERSE},
    [TC_ONLY_WANT] = {COLOR_YELLOW, -1, A_BOLD | A_REVERSE, A_UNDERLINE | A_REVERSE},
    [TC_HEAT1] = {COLOR_BLUE, -1, A_NORMAL, A_NORMAL},
    [TC_HEAT2] = {COLOR_GREEN, -1, A_NORMAL, A_NORMAL},
    [TC_HEAT3] = {COLOR_YELLOW, -1, A_NORMAL, A_NORMAL},
    [TC_HEAT4] = {COLOR_RED, -1, A_BOLD, A_BOLD},
    [TC_CURSOR] = {COLOR_BLACK, COLOR_WHITE, A_NORMAL, A_REVERSE},
    [TC_BUSY] = {COLOR_YELLOW, -1, A_BOLD, A_BOLD},
};

static void init_colors(void)
{
    have_color = has_colors();
    if (!have_color)
        return;
    start_color();
    use_default_colors();
    for (int i = 1; i < TC_COUNT; i++)
        init_pair((short)i, scheme[i].fg, scheme[i].bg);
}

unsigned long tui_term_attr(TuiColor c)
{
    if ((unsigned)c >= TC_COUNT)
        c = TC_NORMAL;
    if (!have_color)
        return scheme[c].mono;
    return scheme[c].attr | (c ? COLOR_PAIR(c) : 0);
}

bool tui_term_open(char *why, size_t n)
{
    term_screen = newterm(NULL, stdout, stdin);
    if (!term_screen) {
        const char *t = getenv("TERM");
        snprintf(why, n, "cannot use terminal '%s'", t ? t : "(unset)");
        return false;
    }
    cbreak();
    noecho();
    nonl();
    keypad(stdscr, TRUE);
    curs_set(0);
    set_escdelay(25);
    init_colors();
    return true;
}

void tui_term_close(void)
{
    if (!term_screen)
        return;
    endwin();
    delscreen(term_screen);
    term_screen = NULL;
}

void tui_term_size(int *cols, int *rows) { getmaxyx(stdscr, *rows, *cols); }

int tui_term_key(int timeout_ms)
{
    timeout(timeout_ms);
    int ch = getch();
    switch (ch) {
    case ERR: return TUI_KEY_NONE;
    case KEY_UP: return TUI_KEY_UP;
    case KEY_DOWN: return TUI_KEY_DOWN;
    case KEY_LEFT: return TUI_KEY_LEFT;
    case KEY_RIGHT: return TUI_KEY_RIGHT;
    case KEY_PPAGE: return TUI_KEY_PGUP;
    case KEY_NPAGE: return TUI_KEY_PGDN;
    case KEY_HOME: return TUI_KEY_HOME;
    case KEY_END: return TUI_KEY_END;
    case KEY_BTAB: return TUI_KEY_BTAB;
    case KEY_RESIZE: return TUI_KEY_RESIZE;
    case KEY_ENTER: case '\n': case '\r': return TUI_KEY_ENTER;
    case KEY_BACKSPACE: case 127: case 8: return TUI_KEY_BACKSPACE;
    default: return ch >= 0 && ch < 256 ? ch : TUI_KEY_NONE;
    }
}

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

void tui_term_catch_signals(void)
{
    struct sigaction sa = {0};
    sa.sa_handler = on_signal;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
}

int tui_term_signal(void) { return got_signal; }

void tui_term_die_of_signal(int sig)
{
    tui_term_close();
    as_dump_abort_all();
    fprintf(stderr, "attnscope: %s: the terminal is restored, unfinished dumps removed\n",
            sig == SIGINT ? "interrupted" : "terminated");
    signal(sig, SIG_DFL);
    raise(sig);
    _exit(128 + sig);
}
