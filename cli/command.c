/* The registry the AS_COMMAND constructors fill before main runs. */
#include "cli/command.h"

#include <stdlib.h>
#include <string.h>

#define MAX_COMMANDS 64

static const AsCommand *commands[MAX_COMMANDS + 1];
static int n_commands;

void as_command_register(const AsCommand *c)
{
    if (n_commands < MAX_COMMANDS)
        commands[n_commands++] = c;
}

const AsCommand *as_command_find(const char *name)
{
    for (int i = 0; i < n_commands; i++)
        if (!strcmp(commands[i]->name, name))
            return commands[i];
    return NULL;
}

static int by_name(const void *a, const void *b)
{
    return strcmp((*(const AsCommand *const *)a)->name, (*(const AsCommand *const *)b)->name);
}

const AsCommand *const *as_command_list(int *n)
{
    qsort(commands, (size_t)n_commands, sizeof commands[0], by_name);
    *n = n_commands;
    return commands;
}
