/* `attnscope check DUMP`: replay another engine's dump through the reference and diff it. */
#include <stdio.h>
#include <string.h>

#include "cli/args.h"
#include "cli/command.h"
#include "cli/signals.h"
#include "driver/check.h"

static int cmd_check(int argc, char **argv)
{
    AsCheckOptions o = {0};
    const char *mode = "teacher", *precision = NULL;
    const char *pos[1];
    int n_pos = 0;
    const AsOpt opts[] = {
        {"--model", NULL, AS_OPT_STR, &o.model, 0, 0},
        {"--side", NULL, AS_OPT_STR, &o.side, 0, 0},
        {"--mode", NULL, AS_OPT_STR, &mode, 0, 0},
        {"--ignore-digest", NULL, AS_OPT_FLAG, &o.ignore_digest, 0, 0},
        {"--precision", NULL, AS_OPT_STR, &precision, 0, 0},
        {"--report-json", NULL, AS_OPT_STR, &o.report_json, 0, 0},
        {"--junit", NULL, AS_OPT_STR, &o.report_junit, 0, 0},
        {"--quiet", "-q", AS_OPT_FLAG, &o.quiet, 0, 0},
        {NULL, NULL, 0, NULL, 0, 0},
    };
    int rc = as_args_parse("check", argc, argv, opts, pos, 1, 1, &n_pos);
    if (rc)
        return rc == AS_ARGS_HELP ? 0 : rc;
    if (strcmp(mode, "teacher") && strcmp(mode, "free"))
        return as_cli_usage_error("check", "--mode: teacher or free, not '%s'", mode);
    o.mode = strcmp(mode, "free") ? AS_MODE_TEACHER : AS_MODE_FREE;
    if ((rc = as_cli_precision("check", precision, &o.precision)))
        return rc;
    o.dump = pos[0];
    as_cli_install_abort_handlers(NULL);
    AsError err = {0};
    return as_cli_verdict_exit("check", as_check_dump(&o, &err), &err);
}

AS_COMMAND(check, cmd_check, "replay a dump written by another engine through the reference and diff it",
           "check DUMP.h5 [--model DIR] [--side NAME] [--mode teacher|free] [--ignore-digest]\n"
           "             [--precision fp8|bf16] [--report-json F] [--junit F] [--quiet]\n"
           "  Runs the reference over the dump's inputs and steps (docs/DUMP_FORMAT.md) and compares every\n"
           "  layer the dump stores a side for (default: the first side that is not \"ref\"). In teacher mode\n"
           "  each layer gets the dump's own input x where stored. The model defaults to the dump's weights\n"
           "  name beside the dump; its geometry and digest must match. The reference runs in the dump's\n"
           "  \"precision\" attribute where it has one, else in the model's own (--precision overrides:\n"
           "  bf16 dequantises fp8 weights; fp8 needs fp8 weights). Exit codes as for run.")
