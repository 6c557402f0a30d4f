/* `attnscope gen`: write a synthetic model (config.json + model.safetensors, or the released
 * layout's shards and index). */
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cli/args.h"
#include "cli/command.h"
#include "cli/signals.h"
#include "model/config.h"
#include "model/gen.h"
#include "model/precision.h"

static int cmd_gen(int argc, char **argv)
{
    const char *preset = NULL, *config = NULL, *out = NULL, *precision = NULL, *layout = NULL;
    uint64_t seed = 0;
    int shards = 0;
    const AsOpt opts[] = {
        {"--preset", NULL, AS_OPT_STR, &preset, 0, 0},
        {"--config", NULL, AS_OPT_STR, &config, 0, 0},
        {"--seed", NULL, AS_OPT_U64, &seed, 0, 0},
        {"--precision", NULL, AS_OPT_STR, &precision, 0, 0},
        {"--layout", NULL, AS_OPT_STR, &layout, 0, 0},
        {"--shards", NULL, AS_OPT_INT, &shards, 2, 99999},
        {"--out", "-o", AS_OPT_STR, &out, 0, 0},
        {0},
    };
    int rc = as_args_parse("gen", argc, argv, opts, NULL, 0, 0, NULL);
    if (rc)
        return rc == AS_ARGS_HELP ? 0 : rc;
    if (!preset == !config)
        return as_cli_usage_error("gen", "give one of --preset NAME or --config FILE");
    if (!out)
        return as_cli_usage_error("gen", "missing -o DIR (the output directory)");
    AsGenOptions o = {.seed = seed, .label = preset ? preset : "config", .progress = isatty(2) != 0};
    if ((rc = as_cli_precision("gen", precision, &o.precision)))
        return rc;
    if (!layout || !strcmp(layout, "single"))
        o.layout = AS_GEN_LAYOUT_SINGLE;
    else if (!strcmp(layout, "released"))
        o.layout = AS_GEN_LAYOUT_RELEASED;
    else
        return as_cli_usage_error("gen", "--layout '%s': single or released", layout);
    if (shards && o.layout != AS_GEN_LAYOUT_RELEASED)
        return as_cli_usage_error("gen", "--shards is for --layout released");
    o.shards = shards;
    AsConfig cfg;
    AsError err = {0};
    if (preset) {
        rc = as_config_preset(preset, &cfg, &err);
        if (!rc && o.precision == AS_PREC_AUTO)
            o.precision = as_config_preset_precision(preset);
    } else if (!(rc = as_config_load(config, &cfg, &err)) && (rc = as_config_validate(&cfg, &err))) {
        as_err_wrap(&err, "%s", config);
    }
    as_cli_install_abort_handlers(NULL); /* Ctrl-C leaves no half-written model.safetensors.tmp-* */
    if (!rc)
        rc = as_gen_model_opts(&cfg, &o, out, &err);
    if (rc)
        return as_cli_fail("gen", &err);
    const char *prec = as_precision_name(as_gen_precision(&cfg, o.precision));
    if (o.layout == AS_GEN_LAYOUT_RELEASED) {
        printf("wrote %s/config.json (text_config), %s/inference/config.json, %s/model.safetensors.index.json and "
               "%d shards, %s, %s, seed %llu\n", out, out, out, o.shards ? o.shards : 4, preset ? preset : config,
               prec, (unsigned long long)seed);
        return 0;
    }
    char path[1100];
    struct stat st;
    snprintf(path, sizeof path, "%s/model.safetensors", out);
    printf("wrote %s/config.json and %s (%.1f MiB), %s, %s, seed %llu\n", out, path,
           stat(path, &st) ? 0.0 : (double)st.st_size / (1 << 20), preset ? preset : config, prec,
           (unsigned long long)seed);
    return 0;
}

AS_COMMAND(gen, cmd_gen, "write a synthetic model with deterministic weights",
           "gen (--preset NAME | --config FILE) [--precision fp8|bf16] [--layout single|released]\n"
           "           [--shards N] [--seed N] -o DIR\n\n"
           "Writes DIR/config.json and DIR/model.safetensors: every attention tensor the layers' roles need,\n"
           "with deterministic synthetic values (the same bytes for the same seed on every machine;\n"
           "docs/MODEL_FILES.md gives the distributions). Files are replaced atomically; DIR is created\n"
           "when missing.\n\n"
           "options:\n"
           "  --preset NAME      a built-in geometry: tiny (10 layers, every role, under 1 MiB), tiny-q (tiny's\n"
           "                     roles at Q2_K-friendly widths) or flash (the released attention, ~6.5 GB in fp8)\n"
           "  --config FILE      a config.json in either spelling (Hugging Face, also nested in text_config,\n"
           "                     or DeepSeek's inference/config.json)\n"
           "  --precision P      fp8: the five fp8 projections (wq_a, wq_b, wkv, wo_b, indexer.wq_b) as\n"
           "                     F8_E4M3 with F8_E8M0 scales per 32x32 block, as released; bf16: as BF16.\n"
           "                     Default: the preset's (flash and tiny fp8, tiny-q bf16), else the config's\n"
           "                     dtype, else fp8. Norm weights are BF16 and sinks F32 in both\n"
           "  --layout L         single (default): config.json (flat) + model.safetensors; released: the\n"
           "                     released repo's files: config.json with text_config, inference/config.json\n"
           "                     (with dtype), shards model-0000k-of-0000N.safetensors and\n"
           "                     model.safetensors.index.json, the shards also holding stand-ins for tensors\n"
           "                     the attention does not read (experts, hyper-connections, embeddings, MTP)\n"
           "  --shards N         released layout: N shard files (default 4): the layers over N-1 of them, the\n"
           "                     last only tensors the attention does not read; 2 .. layers + 1\n"
           "  --seed N           generator seed, 0 .. 2^64-1 (default 0)\n"
           "  -o, --out DIR      output directory\n")
