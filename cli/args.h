/* Option parsing shared by every command, so that all of them read options, report mistakes
 * and answer --help the same way:
 *   attnscope gen: unknown option '--foo' (see attnscope gen --help)   -> exit 2 */
#ifndef AS_ARGS_H
#define AS_ARGS_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "model/config.h"
#include "model/errors.h"

typedef enum {
    AS_OPT_FLAG,    /* bool *: set to true */
    AS_OPT_INT,     /* int *: decimal, within [min, max] */
    AS_OPT_U64,     /* uint64_t *: decimal, 0 .. 2^64-1 */
    AS_OPT_STR,     /* const char **: the argument as given */
} AsOptKind;

typedef struct {
    const char *name;       /* "--seed"; NULL ends the table */
    const char *alias;      /* "-o", or NULL */
    AsOptKind kind;
    void *dst;
    long long min, max;     /* AS_OPT_INT bounds */
} AsOpt;

#define AS_ARGS_HELP (-1)   /* --help was answered: exit 0 */

/* Parses argv[1 .. argc) of command cmd: options from opts ("--name value", "--name=value"; "--"
 * ends the options), the rest positionals into pos (between min_pos and max_pos of them).
 * Returns 0; AS_ARGS_HELP after printing the usage for --help / -h; or AS_EBADINPUT after printing
 * one line naming the mistake. Commands end with: return rc == AS_ARGS_HELP ? 0 : rc. */
int as_args_parse(const char *cmd, int argc, char **argv, const AsOpt *opts, const char **pos, int min_pos,
                  int max_pos, int *n_pos);

/* Whole decimal numbers, nothing else (no sign for u64, no spaces, no trailing characters). */
bool as_parse_int(const char *s, long long min, long long max, long long *out);
bool as_parse_u64(const char *s, uint64_t *out);

/* "attnscope CMD: <message> (see attnscope CMD --help)" on stderr; returns AS_EBADINPUT. */
int as_cli_usage_error(const char *cmd, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* "attnscope CMD: <err's message>" on stderr; returns err's code as an exit status (AS_EREFUSED and
 * AS_ECANCELLED as AS_ERUNTIME). */
int as_cli_fail(const char *cmd, const AsError *err);
/* The exit code of a verdict command (run, check) from its result rc: 0 and AS_EMISMATCH as they
 * are; any other failure is reported (as_cli_fail) with the documented code, a refused step or a
 * cancel counting as a runtime failure. */
int as_cli_verdict_exit(const char *cmd, int rc, const AsError *err);
/* --precision's value (NULL: not given, AS_PREC_AUTO): "auto", "fp8" or "bf16"; else a usage error. */
int as_cli_precision(const char *cmd, const char *value, AsPrecision *out);
/* Prints "usage: attnscope <usage text>" of a registered command. */
void as_cli_print_usage(const char *cmd, FILE *f);

#endif
