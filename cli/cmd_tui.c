/* `attnscope tui`: the interactive step debugger (tui/, docs/TUI.md). */
#include <stdio.h>
#include <string.h>

#include "cli/args.h"
#include "cli/command.h"
#include "cli/engine_knobs.h"
#include "ref/convention.h"
#include "tui/tui.h"

int as_cmd_tui(int argc, char **argv);

int as_cmd_tui(int argc, char **argv)
{
    AsTuiOptions o;
    memset(&o, 0, sizeof o);
    as_driver_options_default(&o.drv);
    const char *mode = NULL, *precision = NULL;
    uint64_t seed = 1;
    AsKnobFlags kf = {0};
    const AsOpt opts[] = {
        {"--model", "-m", AS_OPT_STR, &o.drv.model, 0, 0},
        {"--seed", NULL, AS_OPT_U64, &seed, 0, 0},
        {"--inputs", NULL, AS_OPT_STR, &o.drv.inputs_path, 0, 0},
        {"--mode", NULL, AS_OPT_STR, &mode, 0, 0},
        {"--no-engine", NULL, AS_OPT_FLAG, &o.drv.no_engine, 0, 0},
        {"--host-select", NULL, AS_OPT_FLAG, &o.drv.host_select, 0, 0},
        {"--inject", NULL, AS_OPT_STR, &o.drv.inject, 0, 0},
        {"--prefill", NULL, AS_OPT_INT, &o.prefill, 0, AS_LIMIT_MAX_SEQ},
        {"--max-seq", NULL, AS_OPT_INT, &o.drv.max_seq, 0, AS_LIMIT_MAX_SEQ},
        {"--precision", NULL, AS_OPT_STR, &precision, 0, 0},
        AS_KNOB_OPTS(kf),
        {0},
    };
    int n = 0;
    int rc = as_args_parse("tui", argc, argv, opts, NULL, 0, 0, &n);
    if (rc)
        return rc == AS_ARGS_HELP ? 0 : rc;
    o.drv.weight_seed = o.drv.input_seed = seed;
    AsEngineKnobs knobs;
    if ((rc = as_cli_engine_knobs("tui", &kf, &knobs)))
        return rc;
    o.drv.knobs = &knobs;
    if (mode) {
        if (!strcmp(mode, "teacher"))
            o.drv.mode = AS_MODE_TEACHER;
        else if (!strcmp(mode, "free"))
            o.drv.mode = AS_MODE_FREE;
        else
            return as_cli_usage_error("tui", "--mode: '%s' (teacher or free)", mode);
    }
    if ((rc = as_cli_precision("tui", precision, &o.drv.precision)))
        return rc;
    AsFault f;
    AsConvention c;
    if (o.drv.inject && as_inject_parse(o.drv.inject, &f, &c)) {
        char names[512];
        as_inject_names(names, sizeof names);
        return as_cli_usage_error("tui", "--inject: unknown fault '%s' (known: %s)", o.drv.inject, names);
    }
    return as_tui_main(&o);
}

AS_COMMAND(tui, as_cmd_tui, "the interactive step debugger (default command)",
           "tui [--model tiny|flash|DIR] [--seed N] [--inputs FILE] [--mode teacher|free]\n"
           "    [--no-engine] [--host-select] [--inject FAULT] [--prefill N] [--max-seq N]\n"
           "    [--precision fp8|bf16]\n\n"
           "Opens the terminal interface: steps the GPU engine (when a CUDA device is present) and\n"
           "the CPU reference through prefill and decode, layer by layer, and shows where they\n"
           "differ: the layers with their roles and verdicts, each tensor's diff (heatmap and\n"
           "values), the window ring, the compressed caches and whose index keys each layer read,\n"
           "the candidate blocks, the top-k selections side by side. Without a device it runs the\n"
           "reference alone (or, with --inject, a faulty reference twin against it). Press ? in it\n"
           "for every key; docs/TUI.md describes the views.\n\n"
           "options:\n"
           "  --model M       preset (tiny, flash: generated into $ATTNSCOPE_CACHE on first use) or a\n"
           "                  model directory (default tiny)\n"
           "  --seed N        seed of a generated preset's weights and of the synthetic inputs (1)\n"
           "  --inputs FILE   token inputs from an HDF5 file ([tokens][dim]) instead of synthetic\n"
           "  --mode M        teacher (the reference takes the engine's layer inputs; default) or free\n"
           "  --no-engine     reference only, even with a device\n"
           "  --host-select   the engine's top-k on the host (the reference's code), not the device\n"
           "  --inject FAULT  a named engine fault (ring-slot, rope-backwards, sink-ignored, ...)\n"
           "  --prefill N     prefill N tokens at start\n"
           "  --max-seq N     run capacity (default: the config's)\n"
           "  --precision P   fp8 or bf16 instead of the model's own (its config's dtype, else its weights)\n"
           AS_KNOB_USAGE "\n"
           "environment: ATTNSCOPE_TUI_ASCII=1 forces ASCII glyphs; ATTNSCOPE_TUI_HISTORY_MB bounds\n"
           "the run kept for `save run` (default 1024; 0 keeps none)\n")
