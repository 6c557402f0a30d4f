/* attnscope: one binary, its subcommands registered from their own files (cli/command.h). */
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "cli/args.h"
#include "cli/command.h"
#include "engine/engine.h"
#include "model/version.h"
#include "ref/blas_core.h"

static void print_help(FILE *f)
{
    fprintf(f, "attnscope %s: a step debugger for the attention of DeepSeek-V4.1 Flash\n\n"
               "usage: attnscope [COMMAND] [OPTIONS]\n\ncommands:\n", as_version());
    int n, width = 0;
    const AsCommand *const *cmds = as_command_list(&n);
    for (int i = 0; i < n; i++)
        if ((int)strlen(cmds[i]->name) > width)
            width = (int)strlen(cmds[i]->name);
    for (int i = 0; i < n; i++)
        fprintf(f, "  %-*s  %s\n", width, cmds[i]->name, cmds[i]->summary);
    fprintf(f, "\n  attnscope help COMMAND, attnscope COMMAND --help: a command's options\n"
               "  attnscope --version: version and build\n"
               "exit status: 0 ok, 1 mismatch, 2 bad input, 3 runtime failure\n");
}

/* What `attnscope` alone does: the TUI on the built-in tiny model (`tui --model tiny`); the
 * help when there is no terminal to draw on. */
static int no_command(void)
{
    const AsCommand *c = as_command_find("tui");
    if (!c || !isatty(STDIN_FILENO) || !isatty(STDOUT_FILENO)) {
        print_help(stdout);
        return 0;
    }
    char *args[] = {"tui", "--model", "tiny", NULL};
    return c->fn(3, args);
}

static int help(int argc, char **argv)
{
    if (argc < 3) {
        print_help(stdout);
        return 0;
    }
    if (!as_command_find(argv[2])) {
        fprintf(stderr, "attnscope help: unknown command '%s' (see attnscope --help)\n", argv[2]);
        return 2;
    }
    as_cli_print_usage(argv[2], stdout);
    return 0;
}

int main(int argc, char **argv)
{
    as_blas_core_check(argv); /* OpenBLAS's AVX2 kernels where it fell back to SSE3 ones */
    if (argc < 2)
        return no_command();
    const char *a = argv[1];
    if (!strcmp(a, "--help") || !strcmp(a, "-h"))
        return help(1, argv);
    if (!strcmp(a, "help"))
        return help(argc, argv);
    if (!strcmp(a, "--version")) {
        printf("attnscope %s (%s)\n", as_version(), as_engine_build_info());
        return 0;
    }
    const AsCommand *c = as_command_find(a);
    if (!c) {
        fprintf(stderr, "attnscope: unknown %s '%s' (see attnscope --help)\n", a[0] == '-' ? "option" : "command", a);
        return 2;
    }
    return c->fn(argc - 1, argv + 1);
}
