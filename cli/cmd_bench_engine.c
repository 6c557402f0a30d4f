/* `attnscope bench-engine`: the engine against the GPU's measured limits (engine/bench.c). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cli/args.h"
#include "cli/command.h"
#include "cli/engine_knobs.h"
#include "driver/driver.h"
#include "engine/engine.h"
#include "model/precision.h"
#include "model/safetensors.h"
#include "model/version.h"

/* --precision both: the whole benchmark in bf16, then in fp8 precision (each its own engine and limits),
 * then one table of both against their floors. The latency-bound part: the graph's step less its floor. */
static int bench_both(AsModel *m, AsEngineBenchOptions *o, AsError *err)
{
    const AsPrecision precs[2] = {AS_PREC_BF16, AS_PREC_FP8};
    AsBenchSummary S[2] = {{0}};
    for (int i = 0; i < 2; i++) {
        int rc = as_model_set_precision(m, precs[i], err);
        if (rc)
            return rc;
        printf("## %s precision\n\n", as_precision_name(precs[i]));
        o->summary = &S[i];
        if ((rc = as_engine_bench(m, o, stdout, err)))
            return rc;
    }
    printf("## Both precisions\n\n| precision | weights GB | cache GB | copy GB/s | floor ms | graph ms | x floor | "
           "latency-bound ms (graph - floor) | prefill ms | proj ms | fp8 projections vs cuBLASLt fp8 |\n"
           "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |\n");
    for (int i = 0; i < 2; i++) {
        const AsBenchSummary *s = &S[i];
        char fp8[96] = "";
        if (s->fp8_lt_ms > 0)
            snprintf(fp8, sizeof fp8, "%.0f / %.0f TFLOP/s (%.0f%%)", s->fp8_proj_tflops, s->fp8_lt_tflops,
                     100.0 * s->fp8_lt_ms / s->fp8_proj_ms);
        printf("| %s%s | %.2f | %.3f | %.0f | %.3f | %.3f | %.2f | %.3f | %.1f | %.1f | %s |\n",
               as_precision_name(s->precision), s->precision == AS_PREC_FP8 ? (s->fp8_form ? " (e4m3 codes)" : " (bf16 upload)")
                                                                           : "",
               s->weight_gb, s->cache_gb, s->copy_gbs, s->floor_ms, s->graph_ms,
               s->floor_ms > 0 ? s->graph_ms / s->floor_ms : 0.0, s->graph_ms - s->floor_ms, s->prefill_ms, s->proj_ms,
               fp8);
    }
    printf("\nFloor: the weights as each precision reads them (fp8 form: the checkpoint's codes and scales) plus "
           "the cache rows and index keys read, over the copy bandwidth measured in that run.\n");
    return 0;
}

static int cmd_bench_engine(int argc, char **argv)
{
    const char *model = "flash", *json = NULL, *svg = NULL, *trace = NULL;
    bool host_select = false, graph_layers = false;
    int context = 4096, steps = 20, prefill = 4096, max_seq = 0, device = 0;
    const char *precision = NULL;
    const char *pos[1];
    int n_pos = 0;
    AsKnobFlags kf = {0};
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
        AS_KNOB_OPTS(kf),
        {NULL, NULL, 0, NULL, 0, 0},
    };
    int rc = as_args_parse("bench-engine", argc, argv, opts, pos, 0, 1, &n_pos);
    if (rc)
        return rc == AS_ARGS_HELP ? 0 : rc;
    if (n_pos)
        model = pos[0];
    AsEngineKnobs knobs;
    if ((rc = as_cli_engine_knobs("bench-engine", &kf, &knobs)))
        return rc;
    const int decode_rows = context + steps + (steps + 2) * (1 + graph_layers + (trace != NULL));
    if (!max_seq)
        max_seq = ((decode_rows > prefill ? decode_rows : prefill) + 64 + 1) / 2 * 2;
    AsError err = {0};
    /* the outputs are written after minutes of GPU work: a path that cannot be written is refused now */
    if ((json && (rc = as_atomic_check(json, &err))) || (svg && (rc = as_atomic_check(svg, &err))) ||
        (trace && (rc = as_atomic_check(trace, &err))))
        return as_cli_fail("bench-engine", &err);
    AsPrecision asked;
    /* both: the same run in bf16, then in fp8 precision, and the two side by side */
    const bool both = precision && !strcmp(precision, "both");
    if (both && (json || svg || trace))
        return as_cli_usage_error("bench-engine", "--precision both writes no --json, --svg or --trace (run each "
                                  "precision on its own for those)");
    if ((rc = as_cli_precision("bench-engine", both ? NULL : precision, &asked)))
        return rc;
    if (as_engine_device_count() == 0) {
        fprintf(stderr, "attnscope bench-engine: no CUDA device\n");
        return AS_ERUNTIME;
    }
    char dir[1024];
    AsModel m;
    if ((rc = as_resolve_model(model, 1, dir, sizeof dir, false, &err)) || (rc = as_model_load(dir, max_seq, &m, &err)))
        return as_cli_fail("bench-engine", &err);
    if (!both && asked != AS_PREC_AUTO && (rc = as_model_set_precision(&m, asked, &err))) {
        as_model_free(&m);
        return as_cli_fail("bench-engine", &err);
    }
    char devs[2048];
    as_engine_describe_devices(devs, sizeof devs);
    time_t now = time(NULL);
    char date[32];
    strftime(date, sizeof date, "%Y-%m-%d %H:%M UTC", gmtime(&now));
    char kflags[256], args[512];
    as_engine_knobs_flags(&knobs, kflags, sizeof kflags);
    snprintf(args, sizeof args, "--context %d --steps %d --prefill %d%s%s%s%s%s", context, steps, prefill,
             host_select ? " --host-select" : "", graph_layers ? " --graph-layers" : "", trace ? " --trace" : "",
             kflags[0] ? " " : "", kflags);
    printf("## bench-engine, %s\n\n%sattnscope %s (%s), model %s\n\ncommand: attnscope bench-engine %s %s\n\n"
           "knobs: %s\n\n",
           date, devs, as_version(), as_engine_build_info(), m.weights_name, model, args,
           kflags[0] ? kflags : "the defaults");
    /* the chart's title: date, device and driver (the description's lines joined), version, command */
    char dev1[sizeof devs];
    memcpy(dev1, devs, sizeof dev1);
    for (char *p = dev1; *p; p++)
        if (*p == '\n')
            *p = p[1] ? ';' : '\0';
    char title[3072];
    snprintf(title, sizeof title, "%s; %s; attnscope %s; bench-engine %s %s", date, dev1, as_version(),
             m.weights_name, args);
    AsEngineBenchOptions o = {.device = device, .context = context, .decode_steps = steps, .prefill = prefill,
                              .json_path = json, .svg_path = svg, .title = title, .host_select = host_select,
                              .graph_layers = graph_layers, .trace_path = trace, .knobs = &knobs,
                              .knob_flags = kflags};
    if (both) {
        rc = bench_both(&m, &o, &err);
    } else {
        rc = as_engine_bench(&m, &o, stdout, &err);
    }
    as_model_free(&m);
    return rc ? as_cli_fail("bench-engine", &err) : 0;
}

AS_COMMAND_NAMED(bench_engine, "bench-engine", cmd_bench_engine,
                 "benchmark the GPU engine (decode at a context, prefill) against the device's limits",
                 "bench-engine [MODEL] [--context N] [--steps N] [--prefill N] [--max-seq N] [--device N] [--json F]\n"
                 "  [--svg F] [--host-select] [--graph-layers] [--trace F] [--precision fp8|bf16|both]\n"
                 "  MODEL: a preset (default flash) or a model directory. Prints a Markdown report: decode per layer\n"
                 "  kind against the HBM floor (N profiled steps), the decode step as one CUDA graph (N + 2 steps: two\n"
                 "  captures, then replays), prefill per layer kind against cuBLAS and the tensor-core rate. --svg F: the\n"
                 "  per-layer chart (decode time against its floor, prefill time by stage). --host-select: the top-k\n"
                 "  on the host with the reference's code instead of the device kernels. --graph-layers: N + 2 more steps\n"
                 "  through a graph with an event node around each layer: the graph's time per layer kind. --trace F: N + 2\n"
                 "  more graph steps recorded by CUPTI: the last one's kernels on the device's timeline, per layer kind and\n"
                 "  kernel by kernel, written to F as a Chrome trace (Perfetto, chrome://tracing). --precision both: the\n"
                 "  whole benchmark in bf16, then in fp8 precision, and both against their floors in one table.\n"
                 AS_KNOB_USAGE)
