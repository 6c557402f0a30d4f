/* Command-line options: one parser and one way of reporting mistakes for every command. */
#include "cli/args.h"

#include <ctype.h>
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/command.h"
#include "model/precision.h"

bool as_parse_int(const char *s, long long min, long long max, long long *out)
{
    const char *p = s;
    if (*p == '-' || *p == '+')
        p++;
    if (!isdigit((unsigned char)*p))
        return false;
    char *end;
    errno = 0;
    long long v = strtoll(s, &end, 10);
    if (errno || *end || v < min || v > max)
        return false;
    *out = v;
    return true;
}

bool as_parse_u64(const char *s, uint64_t *out)
{
    if (!isdigit((unsigned char)*s)) /* strtoull would accept "-1" */
        return false;
    char *end;
    errno = 0;
    unsigned long long v = strtoull(s, &end, 10);
    if (errno || *end)
        return false;
    *out = v;
    return true;
}

int as_cli_usage_error(const char *cmd, const char *fmt, ...)
{
    char msg[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    fprintf(stderr, "attnscope %s: %s (see attnscope %s --help)\n", cmd, msg, cmd);
    return AS_EBADINPUT;
}

int as_cli_fail(const char *cmd, const AsError *err)
{
    fprintf(stderr, "attnscope %s: %s\n", cmd, err->msg);
    /* the exit status is one of the documented table's: a refused step or a cancel is a runtime failure */
    return !err->code || err->code == AS_EREFUSED || err->code == AS_ECANCELLED ? AS_ERUNTIME : err->code;
}

int as_cli_verdict_exit(const char *cmd, int rc, const AsError *err)
{
    if (!rc || rc == AS_EMISMATCH)
        return rc;
    as_cli_fail(cmd, err);
    return rc == AS_EREFUSED || rc == AS_ECANCELLED ? AS_ERUNTIME : rc;
}

void as_cli_print_usage(const char *cmd, FILE *f)
{
    const AsCommand *c = as_command_find(cmd);
    if (c) {
        const size_t n = strlen(c->usage);
        /* a usage text may or may not end its last line: the help always does */
        fprintf(f, "usage: attnscope %s%s", c->usage, n && c->usage[n - 1] == '\n' ? "" : "\n");
    }
}

static const AsOpt *find_opt(const AsOpt *opts, const char *arg, size_t len)
{
    for (const AsOpt *o = opts; o && o->name; o++)
        if ((strlen(o->name) == len && !strncmp(o->name, arg, len)) ||
            (o->alias && strlen(o->alias) == len && !strncmp(o->alias, arg, len)))
            return o;
    return NULL;
}

static int set_value(const char *cmd, const AsOpt *o, const char *v)
{
    long long i;
    switch (o->kind) {
    case AS_OPT_INT:
        if (!as_parse_int(v, o->min, o->max, &i))
            return as_cli_usage_error(cmd, "%s: '%s' is not an integer in [%lld, %lld]", o->name, v, o->min, o->max);
        *(int *)o->dst = (int)i;
        return 0;
    case AS_OPT_U64:
        if (!as_parse_u64(v, o->dst))
            return as_cli_usage_error(cmd, "%s: '%s' is not a non-negative integer below 2^64", o->name, v);
        return 0;
    case AS_OPT_STR:
        *(const char **)o->dst = v;
        return 0;
    case AS_OPT_FLAG:
        break;
    }
    return as_cli_usage_error(cmd, "%s takes no value", o->name);
}

int as_args_parse(const char *cmd, int argc, char **argv, const AsOpt *opts, const char **pos, int min_pos,
                  int max_pos, int *n_pos)
{
    int np = 0;
    bool options = true;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (options && (!strcmp(a, "--help") || !strcmp(a, "-h"))) {
            as_cli_print_usage(cmd, stdout);
            return AS_ARGS_HELP;
        }
        if (options && !strcmp(a, "--")) {
            options = false;
            continue;
        }
        if (options && a[0] == '-' && a[1]) {
            const char *eq = !strncmp(a, "--", 2) ? strchr(a, '=') : NULL;
            const AsOpt *o = find_opt(opts, a, eq ? (size_t)(eq - a) : strlen(a));
            if (!o)
                return as_cli_usage_error(cmd, "unknown option '%.*s'", eq ? (int)(eq - a) : (int)strlen(a), a);
            if (o->kind == AS_OPT_FLAG) {
                if (eq)
                    return as_cli_usage_error(cmd, "%s takes no value", o->name);
                *(bool *)o->dst = true;
                continue;
            }
            const char *v = eq ? eq + 1 : i + 1 < argc ? argv[++i] : NULL;
            if (!v)
                return as_cli_usage_error(cmd, "%s needs a value", o->name);
            int rc = set_value(cmd, o, v);
            if (rc)
                return rc;
            continue;
        }
        if (np >= max_pos)
            return as_cli_usage_error(cmd, "unexpected argument '%s'", a);
        pos[np++] = a;
    }
    if (np < min_pos)
        return as_cli_usage_error(cmd, "missing argument%s", min_pos - np > 1 ? "s" : "");
    if (n_pos)
        *n_pos = np;
    return 0;
}

int as_cli_precision(const char *cmd, const char *value, AsPrecision *out)
{
    *out = AS_PREC_AUTO;
    if (value && as_precision_parse(value, true, out))
        return as_cli_usage_error(cmd, "--precision: fp8, bf16 or auto, not '%s'", value);
    return 0;
}
