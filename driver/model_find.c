#include "driver/model_find.h"

#include <dirent.h>
#include <limits.h>
#include <libgen.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "driver/driver.h"
#include "model/config.h"
#include "model/weights.h"

/* Entries of the cache directory looked at, at most (a bound on the work). */
#define MAX_ENTRIES 4096

int as_cache_dir(char *buf, size_t n)
{
    const char *e = getenv("ATTNSCOPE_CACHE");
    if (e && *e)
        return snprintf(buf, n, "%s", e) < (int)n ? 0 : -1;
    const char *x = getenv("XDG_CACHE_HOME");
    if (x && *x)
        return snprintf(buf, n, "%s/attnscope", x) < (int)n ? 0 : -1;
    const char *h = getenv("HOME");
    return snprintf(buf, n, "%s/.cache/attnscope", h && *h ? h : "/tmp") < (int)n ? 0 : -1;
}

static bool is_file(const char *p)
{
    struct stat st;
    return stat(p, &st) == 0 && S_ISREG(st.st_mode);
}

static bool exists(const char *p)
{
    struct stat st;
    return stat(p, &st) == 0;
}

/* The geometry of the model in dir is the dump's (max_seq aside: a run capacity). */
static bool same_geometry(const char *dir, const AsConfig *want)
{
    char path[1200];
    if (snprintf(path, sizeof path, "%s/config.json", dir) >= (int)sizeof path || !is_file(path))
        return false;
    AsConfig c;
    AsError e = {0};
    if (as_config_load(path, &c, &e) || as_config_validate(&c, &e))
        return false;
    AsConfig w = *want;
    w.max_seq = c.max_seq;
    char *a = as_config_to_json(&c), *b = as_config_to_json(&w);
    bool same = a && b && !strcmp(a, b);
    free(a), free(b);
    return same;
}

static bool digest_is(const char *dir, const AsConfig *cfg, const char *digest)
{
    AsModel m;
    AsError e = {0};
    if (as_model_load(dir, cfg->max_seq, &m, &e))
        return false;
    bool same = !strcmp(m.digest, digest);
    as_model_free(&m);
    return same;
}

/* A relative name whose components never climb: no leading '/', no '..' component. */
static bool name_stays_inside(const char *w)
{
    if (w[0] == '/')
        return false;
    for (const char *p = w; *p;) {
        const char *q = strchr(p, '/');
        size_t len = q ? (size_t)(q - p) : strlen(p);
        if (len == 2 && p[0] == '.' && p[1] == '.')
            return false;
        p += len;
        while (*p == '/')
            p++;
    }
    return true;
}

static int cmp_str(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

/* A cache entry with the dump's geometry and digest (entries in name order, the first that fits). */
static bool by_digest(const char *cache, const AsDumpInfo *info, char *dir, size_t n)
{
    DIR *d = opendir(cache);
    if (!d)
        return false;
    char **names = NULL;
    int count = 0, cap = 0;
    struct dirent *e;
    while ((e = readdir(d)) && count < MAX_ENTRIES) {
        if (e->d_name[0] == '.')
            continue;
        if (count == cap) {
            int nc = cap ? cap * 2 : 32;
            char **nn = realloc(names, sizeof *nn * (size_t)nc);
            if (!nn)
                break;
            names = nn, cap = nc;
        }
        if (!(names[count] = strdup(e->d_name)))
            break;
        count++;
    }
    closedir(d);
    if (count > 1) /* an empty cache leaves names NULL: qsort must not see it */
        qsort(names, (size_t)count, sizeof *names, cmp_str);
    bool found = false;
    for (int i = 0; i < count && !found; i++) {
        char cand[1200], w[1300];
        if (snprintf(cand, sizeof cand, "%s/%s", cache, names[i]) >= (int)sizeof cand ||
            snprintf(w, sizeof w, "%s/model.safetensors", cand) >= (int)sizeof w || !is_file(w))
            continue;
        if (same_geometry(cand, &info->cfg) && digest_is(cand, &info->cfg, info->weights_digest) &&
            snprintf(dir, n, "%s", cand) < (int)n)
            found = true;
    }
    for (int i = 0; i < count; i++)
        free(names[i]);
    free(names);
    return found;
}

int as_find_dump_model(const char *dump_path, const AsDumpInfo *info, const char *model, bool quiet, char *dir,
                       size_t n, char *how, size_t how_n, AsError *err)
{
    if (model) {
        snprintf(how, how_n, "--model %s", model);
        return as_resolve_model(model, 1, dir, n, quiet, err);
    }
    char cache[900];
    bool have_cache = as_cache_dir(cache, sizeof cache) == 0;
    if (info->weights_digest[0] && have_cache && by_digest(cache, info, dir, n)) {
        snprintf(how, how_n, "found by the dump's weights digest in the preset cache %s", cache);
        return 0;
    }
    /* the weights name ("tiny-fp8-g2-s1/model.safetensors"): only inside the dump's directory */
    if (info->weights_name[0]) {
        const char *w = info->weights_name;
        if (!name_stays_inside(w))
            return as_err(err, AS_EBADINPUT,
                          "%s: its weights_name '%.200s' leaves the dump's directory (absolute or '..'): give --model",
                          dump_path, w);
        char tmp[1024], rbase[PATH_MAX], rcand[PATH_MAX];
        snprintf(tmp, sizeof tmp, "%s", dump_path);
        const char *base = dirname(tmp);
        if (snprintf(dir, n, "%s/%s", base, w) < (int)n && exists(dir)) {
            size_t bl = realpath(base, rbase) ? strlen(rbase) : 0;
            if (!bl || !realpath(dir, rcand) || strncmp(rcand, rbase, bl) || (rcand[bl] != '/' && bl > 1))
                return as_err(err, AS_EBADINPUT,
                              "%s: its weights_name '%.200s' resolves outside the dump's directory: give --model",
                              dump_path, w);
            snprintf(how, how_n, "the dump's weights name %s, beside the dump", w);
            return 0;
        }
        dir[0] = '\0';
    }
    if (!info->weights_digest[0] && !info->weights_name[0])
        return as_err(err, AS_EBADINPUT, "%s names no weights (no weights_name, no weights_digest): give --model",
                      dump_path);
    return as_err(err, AS_EBADINPUT, "%s: no model with its weights %s%s%s found (beside it, or by digest in the "
                  "preset cache %s): give --model", dump_path, info->weights_name[0] ? "name '" : "",
                  info->weights_name[0] ? info->weights_name : "digest", info->weights_name[0] ? "' or digest" : "",
                  have_cache ? cache : "(none)");
}
