/* `attnscope run SCRIPT.json`: the batch mode for CI (docs/BATCH.md). */
#include <stdio.h>
#include <stdlib.h>

#include "cli/args.h"
#include "cli/command.h"
#include "cli/engine_knobs.h"
#include "cli/signals.h"
#include "driver/batch.h"

static int cmd_run(int argc, char **argv)
{
    AsBatchOptions o = {0};
    AsKnobFlags kf = {0};
    const char *pos[1];
    int n_pos = 0;
    const AsOpt opts[] = {
        {"--report-json", NULL, AS_OPT_STR, &o.report_json, 0, 0},
        {"--junit", NULL, AS_OPT_STR, &o.report_junit, 0, 0},
        {"--dump", NULL, AS_OPT_STR, &o.dump_path, 0, 0},
        {"--no-engine", NULL, AS_OPT_FLAG, &o.no_engine, 0, 0},
        {"--host-select", NULL, AS_OPT_FLAG, &o.host_select, 0, 0},
        {"--bf16-model", NULL, AS_OPT_STR, &o.bf16_model, 0, 0},
        {"--diagnose", NULL, AS_OPT_FLAG, &o.diagnose, 0, 0},
        {"--quiet", "-q", AS_OPT_FLAG, &o.quiet, 0, 0},
        AS_KNOB_OPTS(kf),
        {NULL, NULL, 0, NULL, 0, 0},
    };
    int rc = as_args_parse("run", argc, argv, opts, pos, 1, 1, &n_pos);
    if (rc)
        return rc == AS_ARGS_HELP ? 0 : rc;
    AsEngineKnobs knobs;
    if ((rc = as_cli_engine_knobs("run", &kf, &knobs)))
        return rc;
    o.knobs = &knobs;
    AsScript *s = malloc(sizeof *s);
    if (!s)
        return AS_ERUNTIME;
    AsError err = {0};
    as_cli_install_abort_handlers(NULL);
    rc = as_script_load(pos[0], s, &err);
    if (!rc)
        rc = as_batch_run(s, &o, &err);
    free(s);
    return as_cli_verdict_exit("run", rc, &err);
}

AS_COMMAND(run, cmd_run, "run a batch script: steps, tolerances, dumps, JSON/JUnit reports; exit code = verdict",
           "run SCRIPT.json [--report-json F] [--junit F] [--dump F.h5] [--no-engine] [--bf16-model DIR]\n"
           "  [--host-select] [--diagnose] [--quiet]\n"
           "  Runs the script (docs/BATCH.md). Exit 0: within tolerance; 1: a mismatch (or an unmet\n"
           "  expectation); 2: bad input (script, files, options; an output path that is a directory or a\n"
           "  socket and steps past max_seq are refused before the first step); 3: a runtime failure (CUDA,\n"
           "  memory, I/O, a step the model refuses); SIGINT/SIGTERM end it with the signal. An output F may\n"
           "  be /dev/stdout, /dev/null or a FIFO (written in place) or a symlink (the file it names is\n"
           "  replaced). Paths in the script are relative to the script's directory;\n"
           "  paths given here are relative to the current directory. --bf16-model DIR (script field\n"
           "  \"bf16_model\"): the bf16 source of a quantised model: its reference runs beside and the report\n"
           "  gives each layer's quantisation error apart from the engine's diff (docs/GGUF.md).\n"
           "  --host-select: the engine's top-k and candidate blocks on the host with the reference's code\n"
           "  instead of the device kernels (docs/SELECTION.md).\n"
           "  --diagnose (script field \"diagnose\": true): each layer's first mismatching run re-run under the\n"
           "  catalogue of wrong conventions engines get; the report names each that reproduces it\n"
           "  (docs/DIAGNOSE.md).\n" AS_KNOB_USAGE)
