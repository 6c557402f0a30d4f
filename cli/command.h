/* The subcommands of the attnscope binary. Each lives in its own cli/cmd_*.c and registers
 * itself with AS_COMMAND, so adding a command never edits main.c. */
#ifndef AS_COMMAND_H
#define AS_COMMAND_H

/* argv[0] is the command's name; returns the process exit status (model/errors.h codes). */
typedef int (*AsCommandFn)(int argc, char **argv);

typedef struct {
    const char *name;
    AsCommandFn fn;
    const char *summary;    /* one line for `attnscope --help` */
    const char *usage;      /* `attnscope help CMD`: text after "usage: attnscope " */
} AsCommand;

void as_command_register(const AsCommand *c);
const AsCommand *as_command_find(const char *name);
/* The registered commands sorted by name; *n gets the count. */
const AsCommand *const *as_command_list(int *n);

/* AS_COMMAND(gen, cmd_gen, "summary", "usage"): the name is also an identifier. */
#define AS_COMMAND(name_, fn_, summary_, usage_) AS_COMMAND_NAMED(name_, #name_, fn_, summary_, usage_)
/* For names that are not identifiers: AS_COMMAND_NAMED(dump_info, "dump-info", ...). */
#define AS_COMMAND_NAMED(id_, name_, fn_, summary_, usage_)                         \
    static const AsCommand as_command_##id_ = {name_, fn_, summary_, usage_};        \
    __attribute__((constructor)) static void as_command_reg_##id_(void)             \
    {                                                                                \
        as_command_register(&as_command_##id_);                                     \
    }

#endif
