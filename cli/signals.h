/* SIGINT / SIGTERM during a command: unfinished dumps are unlinked (never a partial file under
 * the requested name), then the process dies of the signal as it would have. */
#ifndef AS_CLI_SIGNALS_H
#define AS_CLI_SIGNALS_H

/* extra (may be NULL) runs first, e.g. the TUI's endwin(); it must be async-signal-safe enough. */
void as_cli_install_abort_handlers(void (*extra)(void));

#endif
