/* `attnscope bench-engine`: the engine against the GPU's measured limits (engine/bench.c). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cli/args.h"
#include "cli/command.h"
#include "driver/driver.h"
#include "engine/engine.h"
#include "engine/switches.h"
#include "model/precision.h"
#include "model/safetensors.h"
#include "model/version.h"

static int cmd_bench_engine(int argc, char **argv)
{
    const char *model = "flash", *json = NULL, *svg = NULL, *trace = NULL;
    bool host_select = false, graph_layers = false;
    int context = 4096, steps = 20, prefill = 4096, max_seq = 0, device = 0;
    const char *precision = NULL;
    const char *pos[1];
    int n_pos = 0;
    const AsOpt opts[] = {
        {"--context", NULL, AS_OPT_INT, &context, 1, 1 << 20},
        {"--steps", NULL, AS_OPT_INT, &steps, 1, 100000},
        {"--prefill", NULL, AS_OPT_INT, &prefill, 0, 1 << 20},
        {"--max-seq", NULL, AS_OPT_INT, &max_seq, 0, 1 << 20},
        {"--device", NULL, AS_OPT_INT, &device, 0, 1023},
        {"--precision", NULL, AS_OPT_STR, &precision, 0, 0},
        {"--json", NULL, AS_OPT_STR, &json, 0, 0},
        {"--svg", NULL, AS_OPT_STR, &svg, 0, 0},
        {"--trace", NULL, AS_OPT_STR, &trace, 0, 0},
        {"--host-select", NULL, AS_OPT_FLAG, &host_select, 0, 0},
        {"--graph-layers", NULL, AS_OPT_FLAG, &graph_layers, 0, 0},
        {NULL, NULL, 0, NULL, 0, 0},
    };
    int rc = as_args_parse("bench-engine", argc, argv, opts, pos, 0, 1, &n_pos);
    if (rc)
        return rc == AS_ARGS_HELP ? 0 : rc;
    if (n_pos)
        model = pos[0];
    const int decode_rows = context + steps + (steps + 2) * (1 + graph_layers + (trace != NULL));
    if (!max_seq)
        max_seq = ((decode_rows > prefill ? decode_rows : prefill) + 64 + 1) / 2 * 2;
    AsError err = {0};
    /* the outputs are written after minutes of GPU work: a path that cannot be written is refused now */
    if ((json && (rc = as_atomic_check(json, &err))) || (svg && (rc = as_atomic_check(svg, &err))) ||
        (trace && (rc = as_atomic_check(trace, &err))))
        return as_cli_fail("bench-engine", &err);
    if (as_engine_device_count() == 0) {
        fprintf(stderr, "attnscope bench-engine: no CUDA device\n");
        return AS_ERUNTIME;
    }
    char dir[1024];
    AsModel m;
    AsPrecision asked;
    if ((rc = as_cli_precision("bench-engine", precision, &asked)))
        return rc;
    if ((rc = as_resolve_model(model, 1, dir, sizeof dir, false, &err)) || (rc = as_model_load(dir, max_seq, &m, &err)))
        return as_cli_fail("bench-engine", &err);
    if (asked != AS_PREC_AUTO && (rc = as_model_set_precision(&m, asked, &err))) {
        as_model_free(&m);
        return as_cli_fail("bench-engine", &err);
    }
    char devs[2048];
    as_engine_describe_devices(devs, sizeof devs);
    time_t now = time(NULL);
    char date[32];
    strftime(date, sizeof date, "%Y-%m-%d %H:%M UTC", gmtime(&now));
    char sw[1024], args[160];
    const int n_sw = as_engine_switches_set(sw, sizeof sw);
    snprintf(args, sizeof args, "--context %d --steps %d --prefill %d%s%s%s", context, steps, prefill,
             host_select ? " --host-select" : "", graph_layers ? " --graph-layers" : "", trace ? " --trace" : "");
    printf("## bench-engine, %s\n\n%sattnscope %s (%s), model %s\n\ncommand: attnscope bench-engine %s %s\n\n"
           "switches: %s\n\n",
           date, devs, as_version(), as_engine_build_info(), m.weights_name, model, args,
           n_sw ? sw : "none set (the defaults)");
    /* the chart's title: date, device and driver (the description's lines joined), version, command */
    char dev1[sizeof devs];
    memcpy(dev1, devs, sizeof dev1);
    for (char *p = dev1; *p; p++)
        if (*p == '\n')
            *p = p[1] ? ';' : '\0';
    char title[3072];
    snprintf(title, sizeof title, "%s; %s; attnscope %s; bench-engine %s %s%s%s", date, dev1, as_version(),
             m.weights_name, args, n_sw ? "; " : "", n_sw ? sw : "");
    AsEngineBenchOptions o = {.device = device, .context = context, .decode_steps = steps, .prefill = prefill,
                              .json_path = json, .svg_path = svg, .title = title, .host_select = host_select,
                              .graph_layers = graph_layers, .trace_path = trace, .switches = sw};
    rc = as_engine_bench(&m, &o, stdout, &err);
    as_model_free(&m);
    return rc ? as_cli_fail("bench-engine", &err) : 0;
}

AS_COMMAND_NAMED(bench_engine, "bench-engine", cmd_bench_engine,
                 "benchmark the GPU engine (decode at a context, prefill) against the device's limits",
                 "bench-engine [MODEL] [--context N] [--steps N] [--prefill N] [--max-seq N] [--device N] [--json F]\n"
                 "  [--svg F] [--host-select] [--graph-layers] [--trace F] [--precision fp8|bf16]\n"
                 "  MODEL: a preset (default flash) or a model directory. Prints a Markdown report: decode per layer\n"
                 "  kind against the HBM floor (N profiled steps), the decode step as one CUDA graph (N + 2 steps: two\n"
                 "  captures, then replays), prefill per layer kind against cuBLAS and the tensor-core rate. --svg F: the\n"
                 "  per-layer chart (decode time against its floor, prefill time by stage). --host-select: the top-k\n"
                 "  on the host with the reference's code instead of the device kernels. --graph-layers: N + 2 more steps\n"
                 "  through a graph with an event node around each layer: the graph's time per layer kind. --trace F: N + 2\n"
                 "  more graph steps recorded by CUPTI: the last one's kernels on the device's timeline, per layer kind and\n"
                 "  kernel by kernel, written to F as a Chrome trace (Perfetto, chrome://tracing).")
