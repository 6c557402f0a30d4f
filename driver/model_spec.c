/* A model spec is a directory or file, or the name of a built-in preset, generated once (in the
 * preset's precision) into a cache directory so that `attnscope tui` and batch scripts can name
 * "tiny". */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "driver/driver.h"
#include "driver/model_find.h"
#include "model/gen.h"
#include "model/precision.h"

static bool exists(const char *path)
{
    struct stat st;
    return stat(path, &st) == 0;
}

int as_resolve_model(const char *spec, uint64_t seed, char *dir, size_t n, bool quiet, AsError *err)
{
    if (!spec || !*spec)
        return as_err(err, AS_EBADINPUT, "no model given");
    const char *name = strncmp(spec, "preset:", 7) == 0 ? spec + 7 : spec;
    AsConfig cfg;
    AsError perr;
    bool is_preset = as_config_preset(name, &cfg, &perr) == 0;
    if (!is_preset || (name == spec && exists(spec))) {
        if (!exists(spec))
            return as_err(err, AS_EBADINPUT, "%s: no such model directory or file (presets: tiny, flash)", spec);
        if (snprintf(dir, n, "%s", spec) >= (int)n)
            return as_err(err, AS_EBADINPUT, "model path too long");
        return 0;
    }
    char base[900];
    if (as_cache_dir(base, sizeof base))
        return as_err(err, AS_EBADINPUT, "cache directory path too long");
    /* The precision and the generator's format in the name: a model an older generator (or the
     * other precision) wrote is never taken for this one. */
    const AsPrecision prec = as_config_preset_precision(name);
    if (snprintf(dir, n, "%s/%s-%s-g%d-s%llu", base, name, as_precision_name(prec), AS_GEN_FORMAT,
                 (unsigned long long)seed) >= (int)n)
        return as_err(err, AS_EBADINPUT, "cache directory path too long");
    char cfgp[1100], wp[1100];
    snprintf(cfgp, sizeof cfgp, "%s/config.json", dir);
    snprintf(wp, sizeof wp, "%s/model.safetensors", dir);
    if (exists(cfgp) && exists(wp))
        return 0;
    if (!quiet)
        fprintf(stderr, "attnscope: generating the %s preset (%s, seed %llu) into %s\n", name, as_precision_name(prec),
                (unsigned long long)seed, dir);
    if (as_config_validate(&cfg, err))
        return err->code;
    return as_gen_model(&cfg, prec, seed, name, dir, !quiet && isatty(2), err);
}
