#include "cli/signals.h"

#include <signal.h>
#include <string.h>

#include "dumps/dump.h"

static void (*extra_fn)(void);

static void on_signal(int sig)
{
    if (extra_fn)
        extra_fn();
    as_dump_abort_all();
    signal(sig, SIG_DFL);
    raise(sig);
}

void as_cli_install_abort_handlers(void (*extra)(void))
{
    extra_fn = extra;
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_signal;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
}
