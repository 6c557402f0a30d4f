/* The terminal (htop's CRT): set-up and restore, the colour scheme, the size, the keys as the
 * views see them (tui/keys.h TuiKey), and the signals. The only TUI file besides
 * tui/draw_screen.c that includes curses. */
#ifndef AS_TUI_TERM_H
#define AS_TUI_TERM_H

#include <stdbool.h>

#include "tui/text.h"

/* Takes the terminal: curses on stdin / stdout, keys without echo, the colour pairs when the
 * terminal has colours. false (with the reason in why) when the terminal cannot be used. */
bool tui_term_open(char *why, size_t n);
/* Gives the terminal back (endwin); safe to call twice. */
void tui_term_close(void);
void tui_term_size(int *cols, int *rows);
/* The next key as a TuiKey, waiting at most timeout_ms (TUI_KEY_NONE after it). */
int tui_term_key(int timeout_ms);
/* The curses attribute of a colour role: its pair with colours, bold / underline / reverse /
 * dim without. */
unsigned long tui_term_attr(TuiColor c);

/* SIGINT and SIGTERM: the handler unlinks the temporaries of unfinished outputs and records the
 * signal; a second one before the loop came round restores the terminal and dies at once. */
void tui_term_catch_signals(void);
/* The signal caught (0: none). */
int tui_term_signal(void);
/* Restores the terminal, says so on stderr, and ends the process with the signal's status. */
void tui_term_die_of_signal(int sig);

#endif
