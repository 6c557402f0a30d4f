/* `attnscope check DUMP`: replay another engine's dump through the reference and diff it. */
#include <stdio.h>
#include <string.h>

#include "cli/args.h"
#include "cli/command.h"
#include "cli/signals.h"
#include "driver/check.h"
#include "dumps/dump.h"
#include "model/safetensors.h"

/* Files and directories one check imports. */
#define AS_CHECK_MAX_INPUTS 4096

static int cmd_check(int argc, char **argv)
{
    AsCheckOptions o = {0};
    const char *mode = "teacher", *precision = NULL, *require = NULL, *ties = NULL;
    const char *pos[AS_CHECK_MAX_INPUTS + 1];
    int n_pos = 0;
    const AsOpt opts[] = {
        {"--model", NULL, AS_OPT_STR, &o.model, 0, 0},
        {"--side", NULL, AS_OPT_STR, &o.side, 0, 0},
        {"--mode", NULL, AS_OPT_STR, &mode, 0, 0},
        {"--ignore-digest", NULL, AS_OPT_FLAG, &o.ignore_digest, 0, 0},
        {"--precision", NULL, AS_OPT_STR, &precision, 0, 0},
        {"--require", NULL, AS_OPT_STR, &require, 0, 0},
        {"--tie-order", NULL, AS_OPT_STR, &ties, 0, 0},
        {"--report-json", NULL, AS_OPT_STR, &o.report_json, 0, 0},
        {"--junit", NULL, AS_OPT_STR, &o.report_junit, 0, 0},
        {"--quiet", "-q", AS_OPT_FLAG, &o.quiet, 0, 0},
        {"--diagnose", NULL, AS_OPT_FLAG, &o.diagnose, 0, 0},
        {NULL, NULL, 0, NULL, 0, 0},
    };
    int rc = as_args_parse("check", argc, argv, opts, pos, 1, AS_CHECK_MAX_INPUTS + 1, &n_pos);
    if (rc)
        return rc == AS_ARGS_HELP ? 0 : rc;
    if (strcmp(mode, "teacher") && strcmp(mode, "free"))
        return as_cli_usage_error("check", "--mode: teacher or free, not '%s'", mode);
    o.mode = strcmp(mode, "free") ? AS_MODE_TEACHER : AS_MODE_FREE;
    if ((rc = as_cli_precision("check", precision, &o.precision)))
        return rc;
    if (ties && as_tie_order_parse(ties, &o.ties))
        return as_cli_usage_error("check", "--tie-order: cpu, lowest or highest, not '%s'", ties);
    AsError err = {0};
    if (require) {
        if (as_dump_parse_tensor_list(require, &o.require, &err))
            return as_cli_usage_error("check", "--require: %s", err.msg);
        if (!o.require)
            return as_cli_usage_error("check", "--require: name tensors (x,q,idx...)");
    }
    /* check DUMP, check INPUT... --model M, or check MODEL INPUT... (the inputs' kind decides how they
     * are read: driver/dump_source.h) */
    if (n_pos > 1) {
        int skip = o.model ? 0 : 1;
        if (!o.model)
            o.model = pos[0];
        o.inputs = pos + skip;
        o.n_inputs = n_pos - skip;
    }
    o.dump = o.n_inputs ? o.inputs[0] : pos[0];
    as_cli_install_abort_handlers(NULL);
    /* the report paths checked before the replay: a directory or socket there fails now */
    const char *outs[] = {o.report_json, o.report_junit};
    for (int i = 0; i < 2; i++)
        if (outs[i] && (rc = as_atomic_check(outs[i], &err)))
            return as_cli_fail("check", &err);
    return as_cli_verdict_exit("check", as_check_dump(&o, &err), &err);
}

AS_COMMAND(check, cmd_check, "replay a dump written by another engine through the reference and diff it",
           "check DUMP.h5 [--model DIR] [--side NAME] [--mode teacher|free] [--require T,...]\n"
           "             [--tie-order cpu|lowest|highest] [--ignore-digest] [--precision fp8|bf16]\n"
           "             [--report-json F] [--junit F] [--diagnose] [--quiet]\n"
           "       check MODEL INPUT... [options]      (or check INPUT... --model MODEL)\n"
           "  INPUT: safetensors, .npy or .npz files named step{S}/layer{L}/{tensor} with their metadata, or\n"
           "  directories of them (docs/IMPORT.md): imported in memory against MODEL's geometry, then checked\n"
           "  as a dump. The kind of each input is found from it (an HDF5 dump is checked on its own).\n"
           "  Runs the reference over the dump's inputs and steps (docs/DUMP_FORMAT.md) and compares every\n"
           "  layer the dump stores a side for (default: the first side that is not \"ref\"), tensor by tensor\n"
           "  as the checked side stores them: a tensor it does not store is absent (listed, not judged);\n"
           "  --require makes the named ones mandatory. In teacher mode each layer gets the dump's own input x\n"
           "  where stored. A dump that starts mid-run replays from its state_in group, else from inputs that\n"
           "  begin at position 0. The model: --model, else the preset cache entry with the dump's weights\n"
           "  digest, else the dump's weights name beside it; its geometry must be the dump's and its digest the\n"
           "  dump's (--ignore-digest runs anyway; a dump with no digest is checked with a note). Differences\n"
           "  are explained where they can be (flips, near-ties, tie-order, inherited from an earlier layer's\n"
           "  published selection or mask); --tie-order makes the reference break exact ties lowest or highest\n"
           "  index first instead of torch's CPU order, for an engine that documents its convention. The\n"
           "  reference runs in the dump's \"precision\" attribute where it has one, else in the model's own\n"
           "  (--precision overrides). --diagnose re-runs each layer's first mismatching tensor under the\n"
           "  catalogue of wrong conventions engines get (docs/DIAGNOSE.md) and names each that reproduces it.\n"
           "  Exit codes as for run: 0 within tolerance, 1 a mismatch, 2 bad input, 3 runtime failure.")
