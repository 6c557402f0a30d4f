/* `attnscope gen`: write a synthetic model (config.json + model.safetensors). */
#include <stdio.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cli/args.h"
#include "cli/command.h"
#include "cli/signals.h"
#include "model/config.h"
#include "model/gen.h"

static int cmd_gen(int argc, char **argv)
{
    const char *preset = NULL, *config = NULL, *out = NULL;
    uint64_t seed = 0;
    const AsOpt opts[] = {
        {"--preset", NULL, AS_OPT_STR, &preset, 0, 0},
        {"--config", NULL, AS_OPT_STR, &config, 0, 0},
        {"--seed", NULL, AS_OPT_U64, &seed, 0, 0},
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
    AsConfig cfg;
    AsError err = {0};
    if (preset)
        rc = as_config_preset(preset, &cfg, &err);
    else if (!(rc = as_config_load(config, &cfg, &err)) && (rc = as_config_validate(&cfg, &err)))
        as_err_wrap(&err, "%s", config);
    as_cli_install_abort_handlers(NULL); /* Ctrl-C leaves no half-written model.safetensors.tmp-* */
    if (!rc)
        rc = as_gen_model(&cfg, seed, preset ? preset : "config", out, isatty(2), &err);
    if (rc)
        return as_cli_fail("gen", &err);
    char path[1100];
    struct stat st;
    snprintf(path, sizeof path, "%s/model.safetensors", out);
    printf("wrote %s/config.json and %s (%.1f MiB), %s, seed %llu\n", out, path,
           stat(path, &st) ? 0.0 : (double)st.st_size / (1 << 20), preset ? preset : config,
           (unsigned long long)seed);
    return 0;
}

AS_COMMAND(gen, cmd_gen, "write a synthetic model with deterministic weights",
           "gen (--preset NAME | --config FILE) [--seed N] -o DIR\n\n"
           "Writes DIR/config.json (Hugging Face spelling) and DIR/model.safetensors: every attention\n"
           "tensor the layers' roles need, with deterministic synthetic values (the same bytes for the\n"
           "same seed on every machine; docs/MODEL_FILES.md gives the distributions). Files are\n"
           "replaced atomically; DIR is created when missing.\n\n"
           "options:\n"
           "  --preset NAME   a built-in geometry: tiny (10 layers, every role, under 1 MiB) or\n"
           "                  flash (the released DeepSeek-V4.1-Flash attention, about 10 GB)\n"
           "  --config FILE   a config.json in either spelling (Hugging Face or DeepSeek's)\n"
           "  --seed N        generator seed, 0 .. 2^64-1 (default 0)\n"
           "  -o, --out DIR   output directory\n")
