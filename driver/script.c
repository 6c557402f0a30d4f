#include "driver/script.h"

#include <cJSON.h>
#include <libgen.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dumps/dump.h"
#include "model/precision.h"
#include "model/textfile.h"
#include "model/json_strict.h"

#define MAX_SCRIPT_BYTES (4 << 20)

bool as_intset_has(const AsIntSet *s, int v)
{
    if (s->all)
        return true;
    for (int i = 0; i < s->n; i++)
        if (s->v[i] == v)
            return true;
    return false;
}

/* Resolves a script-relative path into out. */
static int resolve(const AsScript *s, const char *p, char *out, size_t n, const char *field, AsError *err)
{
    int k = p[0] == '/' || !s->dir[0] ? snprintf(out, n, "%s", p) : snprintf(out, n, "%s/%s", s->dir, p);
    if (k < 0 || (size_t)k >= n)
        return as_err(err, AS_EBADINPUT, "%s: path too long", field);
    return 0;
}

static const char *known_top[] = {"name", "model", "max_seq", "inputs", "mode", "engine", "inject", "device",
                                  "threads", "steps", "tolerances", "dump", "report", "expect", "comment",
                                  "bf16_model", "precision", "diagnose", NULL};

static bool in_list(const char *k, const char *const *list)
{
    for (int i = 0; list[i]; i++)
        if (!strcmp(k, list[i]))
            return true;
    return false;
}

/* Rejects unknown keys (a typo must not silently do nothing). */
static int check_keys(const cJSON *obj, const char *const *known, const char *where, AsError *err)
{
    for (const cJSON *c = obj->child; c; c = c->next)
        if (!in_list(c->string, known))
            return as_err(err, AS_EBADINPUT, "%s: unknown field '%s'", where, c->string);
    return 0;
}

static int get_int(const cJSON *v, const char *field, long long min, long long max, long long *out, AsError *err)
{
    if (!cJSON_IsNumber(v) || v->valuedouble != floor(v->valuedouble) || v->valuedouble < (double)min ||
        v->valuedouble > (double)max)
        return as_err(err, AS_EBADINPUT, "%s: must be a whole number in [%lld, %lld]", field, min, max);
    *out = (long long)v->valuedouble;
    return 0;
}

static int get_str(const cJSON *v, const char *field, char *out, size_t n, AsError *err)
{
    if (!cJSON_IsString(v) || !v->valuestring[0])
        return as_err(err, AS_EBADINPUT, "%s: must be a non-empty string", field);
    if (strlen(v->valuestring) >= n)
        return as_err(err, AS_EBADINPUT, "%s: too long", field);
    snprintf(out, n, "%s", v->valuestring);
    return 0;
}

static int parse_model(AsScript *s, const cJSON *m, AsError *err)
{
    if (cJSON_IsString(m))
        return get_str(m, "model", s->model_buf, sizeof s->model_buf, err);
    if (!cJSON_IsObject(m))
        return as_err(err, AS_EBADINPUT, "model: a preset name, a path, or {\"preset\"|\"path\", \"seed\"}");
    static const char *keys[] = {"preset", "path", "seed", NULL};
    int rc = check_keys(m, keys, "model", err);
    if (rc)
        return rc;
    const cJSON *pre = cJSON_GetObjectItemCaseSensitive(m, "preset");
    const cJSON *path = cJSON_GetObjectItemCaseSensitive(m, "path");
    if (!!pre == !!path)
        return as_err(err, AS_EBADINPUT, "model: give exactly one of \"preset\" and \"path\"");
    char tmp[1024];
    if (pre) {
        if ((rc = get_str(pre, "model.preset", tmp, sizeof tmp, err)))
            return rc;
        AsConfig c;
        AsError e2;
        if (as_config_preset(tmp, &c, &e2))
            return as_err(err, AS_EBADINPUT, "model.preset: unknown preset '%s' (tiny, flash)", tmp);
        if (snprintf(s->model_buf, sizeof s->model_buf, "preset:%s", tmp) >= (int)sizeof s->model_buf)
            return as_err(err, AS_EBADINPUT, "model.preset: too long");
    } else {
        if ((rc = get_str(path, "model.path", tmp, sizeof tmp, err)) ||
            (rc = resolve(s, tmp, s->model_buf, sizeof s->model_buf, "model.path", err)))
            return rc;
    }
    const cJSON *seed = cJSON_GetObjectItemCaseSensitive(m, "seed");
    long long v;
    if (seed) {
        if ((rc = get_int(seed, "model.seed", 0, (1LL << 53), &v, err)))
            return rc;
        s->drv.weight_seed = (uint64_t)v;
    }
    return 0;
}

static int parse_inputs(AsScript *s, const cJSON *in, AsError *err)
{
    static const char *keys[] = {"seed", "file", "dataset", NULL};
    if (!cJSON_IsObject(in))
        return as_err(err, AS_EBADINPUT, "inputs: an object {\"seed\": N} or {\"file\": PATH, \"dataset\": NAME}");
    int rc = check_keys(in, keys, "inputs", err);
    const cJSON *seed = cJSON_GetObjectItemCaseSensitive(in, "seed");
    const cJSON *file = cJSON_GetObjectItemCaseSensitive(in, "file");
    const cJSON *ds = cJSON_GetObjectItemCaseSensitive(in, "dataset");
    long long v;
    if (!rc && seed && !(rc = get_int(seed, "inputs.seed", 0, (1LL << 53), &v, err)))
        s->drv.input_seed = (uint64_t)v;
    if (!rc && file) {
        char tmp[1024];
        if (!(rc = get_str(file, "inputs.file", tmp, sizeof tmp, err)) &&
            !(rc = resolve(s, tmp, s->inputs_buf, sizeof s->inputs_buf, "inputs.file", err)))
            s->drv.inputs_path = s->inputs_buf;
    }
    if (!rc && ds) {
        if (!file)
            return as_err(err, AS_EBADINPUT, "inputs.dataset: only with inputs.file");
        if (!(rc = get_str(ds, "inputs.dataset", s->dataset_buf, sizeof s->dataset_buf, err)))
            s->drv.inputs_dataset = s->dataset_buf;
    }
    return rc;
}

static int parse_steps(AsScript *s, const cJSON *steps, AsError *err)
{
    if (!cJSON_IsArray(steps) || cJSON_GetArraySize(steps) < 1)
        return as_err(err, AS_EBADINPUT, "steps: a non-empty array of {\"prefill\": N}, {\"decode\": N}, "
                                         "{\"first_divergence\": {...}}");
    int i = 0;
    bool prefilled = false;
    for (const cJSON *st = steps->child; st; st = st->next, i++) {
        char where[64];
        snprintf(where, sizeof where, "steps[%d]", i);
        if (i >= AS_SCRIPT_MAX_STEPS)
            return as_err(err, AS_EBADINPUT, "steps: more than %d entries", AS_SCRIPT_MAX_STEPS);
        if (!cJSON_IsObject(st) || cJSON_GetArraySize(st) != 1)
            return as_err(err, AS_EBADINPUT, "%s: an object with exactly one of prefill, decode, first_divergence",
                          where);
        AsScriptStep *o = &s->steps[i];
        const cJSON *v = st->child;
        long long n;
        int rc;
        char field[96];
        snprintf(field, sizeof field, "%s.%s", where, v->string);
        if (!strcmp(v->string, "prefill")) {
            if ((rc = get_int(v, field, 1, AS_LIMIT_MAX_SEQ, &n, err)))
                return rc;
            *o = (AsScriptStep){AS_SS_PREFILL, (int)n, 0};
            prefilled = true;
        } else if (!strcmp(v->string, "decode")) {
            if ((rc = get_int(v, field, 1, AS_LIMIT_MAX_SEQ, &n, err)))
                return rc;
            if (!prefilled)
                return as_err(err, AS_EBADINPUT, "%s: decode before any prefill", where);
            *o = (AsScriptStep){AS_SS_DECODE, (int)n, 0};
        } else if (!strcmp(v->string, "first_divergence")) {
            static const char *keys[] = {"prefill", "max_decode", NULL};
            if (!cJSON_IsObject(v) || (rc = check_keys(v, keys, field, err)))
                return cJSON_IsObject(v) ? rc
                                         : as_err(err, AS_EBADINPUT, "%s: {\"prefill\": N, \"max_decode\": M}", field);
            long long p = 0, md = 0;
            const cJSON *pv = cJSON_GetObjectItemCaseSensitive(v, "prefill");
            const cJSON *mv = cJSON_GetObjectItemCaseSensitive(v, "max_decode");
            if (pv && (rc = get_int(pv, "first_divergence.prefill", 1, AS_LIMIT_MAX_SEQ, &p, err)))
                return rc;
            if (mv && (rc = get_int(mv, "first_divergence.max_decode", 0, AS_LIMIT_MAX_SEQ, &md, err)))
                return rc;
            if (!pv && !prefilled)
                return as_err(err, AS_EBADINPUT, "%s: needs \"prefill\" when nothing has run before it", field);
            *o = (AsScriptStep){AS_SS_FIRST_DIVERGENCE, (int)md, (int)p};
            prefilled = true;
        } else {
            return as_err(err, AS_EBADINPUT, "%s: unknown step '%s' (prefill, decode, first_divergence)", where,
                          v->string);
        }
    }
    s->n_steps = i;
    return 0;
}

static int parse_tol_obj(const cJSON *t, const char *field, AsTolerance *out, AsError *err)
{
    static const char *keys[] = {"rel", "abs", NULL};
    if (!cJSON_IsObject(t))
        return as_err(err, AS_EBADINPUT, "%s: {\"rel\": R, \"abs\": A}", field);
    int rc = check_keys(t, keys, field, err);
    if (rc)
        return rc;
    const cJSON *rel = cJSON_GetObjectItemCaseSensitive(t, "rel"), *abs_ = cJSON_GetObjectItemCaseSensitive(t, "abs");
    if ((rel && (!cJSON_IsNumber(rel) || rel->valuedouble < 0 || !isfinite(rel->valuedouble))) ||
        (abs_ && (!cJSON_IsNumber(abs_) || abs_->valuedouble < 0 || !isfinite(abs_->valuedouble))))
        return as_err(err, AS_EBADINPUT, "%s: rel and abs must be finite numbers >= 0", field);
    if (rel)
        out->rel = rel->valuedouble;
    if (abs_)
        out->abs = abs_->valuedouble;
    return 0;
}

static int parse_tolerances(AsScript *s, const cJSON *t, AsError *err)
{
    if (!cJSON_IsObject(t))
        return as_err(err, AS_EBADINPUT, "tolerances: an object of {\"default\"|TENSOR: {\"rel\", \"abs\"}}");
    const cJSON *def = cJSON_GetObjectItemCaseSensitive(t, "default");
    if (def) {
        AsTolerance d = AS_TOL_DEFAULT;
        int rc = parse_tol_obj(def, "tolerances.default", &d, err);
        if (rc)
            return rc;
        for (int i = 0; i < AS_T_COUNT; i++)
            s->tol[i] = d;
    }
    for (const cJSON *c = t->child; c; c = c->next) {
        if (!strcmp(c->string, "default"))
            continue;
        AsTensorId id = as_tensor_by_name(c->string);
        if (id == AS_T_COUNT)
            return as_err(err, AS_EBADINPUT, "tolerances: unknown tensor '%s'", c->string);
        char field[96];
        snprintf(field, sizeof field, "tolerances.%s", c->string);
        int rc = parse_tol_obj(c, field, &s->tol[id], err);
        if (rc)
            return rc;
    }
    return 0;
}

static int parse_intset(const cJSON *v, const char *field, int max, AsIntSet *out, AsError *err)
{
    memset(out, 0, sizeof *out);
    if (cJSON_IsString(v) && !strcmp(v->valuestring, "all")) {
        out->all = true;
        return 0;
    }
    if (!cJSON_IsArray(v))
        return as_err(err, AS_EBADINPUT, "%s: \"all\" or an array of numbers", field);
    for (const cJSON *c = v->child; c; c = c->next) {
        long long x;
        int rc = get_int(c, field, 0, max, &x, err);
        if (rc)
            return rc;
        if (out->n >= AS_SCRIPT_MAX_LIST)
            return as_err(err, AS_EBADINPUT, "%s: more than %d entries", field, AS_SCRIPT_MAX_LIST);
        out->v[out->n++] = (int)x;
    }
    return 0;
}

static int parse_dump(AsScript *s, const cJSON *d, AsError *err)
{
    static const char *keys[] = {"path", "layers", "steps", "tensors", NULL};
    if (!cJSON_IsObject(d))
        return as_err(err, AS_EBADINPUT, "dump: {\"path\", \"layers\", \"steps\", \"tensors\"}");
    int rc = check_keys(d, keys, "dump", err);
    const cJSON *p = cJSON_GetObjectItemCaseSensitive(d, "path");
    char tmp[1024];
    if (!rc && !p)
        return as_err(err, AS_EBADINPUT, "dump.path: required");
    if (!rc && !(rc = get_str(p, "dump.path", tmp, sizeof tmp, err)))
        rc = resolve(s, tmp, s->dump_path, sizeof s->dump_path, "dump.path", err);
    const cJSON *l = cJSON_GetObjectItemCaseSensitive(d, "layers"), *st = cJSON_GetObjectItemCaseSensitive(d, "steps");
    const cJSON *t = cJSON_GetObjectItemCaseSensitive(d, "tensors");
    s->dump_layers.all = s->dump_steps.all = true;
    if (!rc && l)
        rc = parse_intset(l, "dump.layers", AS_MAX_LAYERS - 1, &s->dump_layers, err);
    if (!rc && st)
        rc = parse_intset(st, "dump.steps", AS_LIMIT_MAX_SEQ, &s->dump_steps, err);
    if (!rc && t) {
        if (!cJSON_IsString(t))
            return as_err(err, AS_EBADINPUT, "dump.tensors: a comma-separated list, \"all\" or \"state\"");
        if ((rc = as_dump_parse_tensor_list(t->valuestring, &s->dump_tensors, err)))
            return as_err_wrap(err, "dump.tensors");
    }
    return rc;
}

static int parse_report(AsScript *s, const cJSON *r, AsError *err)
{
    static const char *keys[] = {"json", "junit", NULL};
    if (!cJSON_IsObject(r))
        return as_err(err, AS_EBADINPUT, "report: {\"json\": PATH, \"junit\": PATH}");
    int rc = check_keys(r, keys, "report", err);
    char tmp[1024];
    const cJSON *j = cJSON_GetObjectItemCaseSensitive(r, "json"), *x = cJSON_GetObjectItemCaseSensitive(r, "junit");
    if (!rc && j && !(rc = get_str(j, "report.json", tmp, sizeof tmp, err)))
        rc = resolve(s, tmp, s->report_json, sizeof s->report_json, "report.json", err);
    if (!rc && x && !(rc = get_str(x, "report.junit", tmp, sizeof tmp, err)))
        rc = resolve(s, tmp, s->report_junit, sizeof s->report_junit, "report.junit", err);
    return rc;
}

static int parse_expect(AsScript *s, const cJSON *e, AsError *err)
{
    static const char *keys[] = {"verdict", "step", "layer", "tensor", "diagnosis", NULL};
    if (!cJSON_IsObject(e))
        return as_err(err, AS_EBADINPUT, "expect: {\"verdict\": \"mismatch\"|\"pass\", \"step\", \"layer\", \"tensor\"}");
    int rc = check_keys(e, keys, "expect", err);
    if (rc)
        return rc;
    AsExpect *x = &s->expect;
    *x = (AsExpect){true, AS_V_PASS, -1, -1, AS_T_COUNT, AS_CONV_COUNT};
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(e, "verdict");
    if (!v || !cJSON_IsString(v) || (strcmp(v->valuestring, "mismatch") && strcmp(v->valuestring, "pass")))
        return as_err(err, AS_EBADINPUT, "expect.verdict: \"mismatch\" or \"pass\"");
    x->verdict = strcmp(v->valuestring, "mismatch") ? AS_V_PASS : AS_V_MISMATCH;
    long long n;
    const cJSON *st = cJSON_GetObjectItemCaseSensitive(e, "step"), *l = cJSON_GetObjectItemCaseSensitive(e, "layer");
    const cJSON *t = cJSON_GetObjectItemCaseSensitive(e, "tensor");
    if (st && !(rc = get_int(st, "expect.step", 0, AS_LIMIT_MAX_SEQ, &n, err)))
        x->step = (int)n;
    if (!rc && l && !(rc = get_int(l, "expect.layer", 0, AS_MAX_LAYERS - 1, &n, err)))
        x->layer = (int)n;
    if (!rc && t) {
        if (!cJSON_IsString(t) || (x->tensor = as_tensor_by_name(t->valuestring)) == AS_T_COUNT)
            return as_err(err, AS_EBADINPUT, "expect.tensor: unknown tensor");
    }
    const cJSON *dg = cJSON_GetObjectItemCaseSensitive(e, "diagnosis");
    if (!rc && dg) {
        if (!cJSON_IsString(dg) || (x->diagnosis = as_conv_by_name(dg->valuestring)) == AS_CONV_COUNT ||
            x->diagnosis == AS_CONV_NONE)
            return as_err(err, AS_EBADINPUT, "expect.diagnosis: a convention of docs/DIAGNOSE.md");
        s->drv.diagnose = true;
    }
    if (!rc && x->verdict == AS_V_PASS && (st || l || t || dg))
        return as_err(err, AS_EBADINPUT, "expect: step/layer/tensor/diagnosis only with \"mismatch\"");
    return rc;
}

int as_script_parse(const char *text, size_t len, const char *path, AsScript *s, AsError *err)
{
    memset(s, 0, sizeof *s);
    as_driver_options_default(&s->drv);
    for (int i = 0; i < AS_T_COUNT; i++)
        s->tol[i] = AS_TOL_DEFAULT;
    s->dump_tensors = AS_DUMP_ALL_TENSORS;
    if (path) {
        char tmp[1024];
        snprintf(tmp, sizeof tmp, "%s", path);
        snprintf(s->dir, sizeof s->dir, "%s", dirname(tmp));
        snprintf(tmp, sizeof tmp, "%s", path);
        snprintf(s->name, sizeof s->name, "%s", basename(tmp));
    }
    cJSON *root;
    int rc = as_json_parse_strict(text, len, &root, err);
    if (rc)
        return rc;
    if (!cJSON_IsObject(root)) {
        rc = as_err(err, AS_EBADINPUT, "the script must be a JSON object");
        goto out;
    }
    if ((rc = check_keys(root, known_top, "script", err)))
        goto out;
    const cJSON *v;
    long long n;
    if ((v = cJSON_GetObjectItemCaseSensitive(root, "name")) && (rc = get_str(v, "name", s->name, sizeof s->name, err)))
        goto out;
    if (!(v = cJSON_GetObjectItemCaseSensitive(root, "model"))) {
        rc = as_err(err, AS_EBADINPUT, "model: required (a preset name like \"tiny\", or a path)");
        goto out;
    }
    if ((rc = parse_model(s, v, err)))
        goto out;
    if (s->model_buf[0] && strncmp(s->model_buf, "preset:", 7) && !cJSON_IsObject(v)) {
        /* a bare string: a preset name, else a script-relative path */
        AsConfig c;
        AsError e2;
        if (as_config_preset(s->model_buf, &c, &e2)) {
            char tmp[1024];
            snprintf(tmp, sizeof tmp, "%s", s->model_buf);
            if ((rc = resolve(s, tmp, s->model_buf, sizeof s->model_buf, "model", err)))
                goto out;
        }
    }
    s->drv.model = s->model_buf;
    if ((v = cJSON_GetObjectItemCaseSensitive(root, "bf16_model"))) {
        /* the bf16 source of a quantised model (docs/GGUF.md): a preset name or a path */
        char tmp[1024];
        AsConfig c;
        AsError e2;
        if ((rc = get_str(v, "bf16_model", tmp, sizeof tmp, err)))
            goto out;
        if (as_config_preset(tmp, &c, &e2) == 0)
            snprintf(s->bf16_buf, sizeof s->bf16_buf, "%s", tmp);
        else if ((rc = resolve(s, tmp, s->bf16_buf, sizeof s->bf16_buf, "bf16_model", err)))
            goto out;
        s->drv.bf16_model = s->bf16_buf;
    }
    if ((v = cJSON_GetObjectItemCaseSensitive(root, "max_seq"))) {
        if ((rc = get_int(v, "max_seq", 2, AS_LIMIT_MAX_SEQ, &n, err)))
            goto out;
        s->drv.max_seq = (int)n;
    }
    if ((v = cJSON_GetObjectItemCaseSensitive(root, "inputs")) && (rc = parse_inputs(s, v, err)))
        goto out;
    if ((v = cJSON_GetObjectItemCaseSensitive(root, "mode"))) {
        if (!cJSON_IsString(v) || (strcmp(v->valuestring, "teacher") && strcmp(v->valuestring, "free"))) {
            rc = as_err(err, AS_EBADINPUT, "mode: \"teacher\" or \"free\"");
            goto out;
        }
        s->drv.mode = strcmp(v->valuestring, "free") ? AS_MODE_TEACHER : AS_MODE_FREE;
    }
    if ((v = cJSON_GetObjectItemCaseSensitive(root, "precision"))) {
        if (!cJSON_IsString(v) || as_precision_parse(v->valuestring, true, &s->drv.precision)) {
            rc = as_err(err, AS_EBADINPUT, "precision: \"auto\" (the model's), \"fp8\" or \"bf16\"");
            goto out;
        }
    }
    if ((v = cJSON_GetObjectItemCaseSensitive(root, "engine"))) {
        if (!cJSON_IsString(v) || (strcmp(v->valuestring, "auto") && strcmp(v->valuestring, "off"))) {
            rc = as_err(err, AS_EBADINPUT, "engine: \"auto\" (use a CUDA device when present) or \"off\"");
            goto out;
        }
        s->drv.no_engine = !strcmp(v->valuestring, "off");
    }
    if ((v = cJSON_GetObjectItemCaseSensitive(root, "inject"))) {
        if ((rc = get_str(v, "inject", s->inject_buf, sizeof s->inject_buf, err)))
            goto out;
        AsFault f;
        AsConvention c;
        if (as_inject_parse(s->inject_buf, &f, &c)) {
            char names[512];
            as_inject_names(names, sizeof names);
            rc = as_err(err, AS_EBADINPUT, "inject: unknown fault '%s' (known: %s)", s->inject_buf, names);
            goto out;
        }
        s->drv.inject = s->inject_buf;
    }
    if ((v = cJSON_GetObjectItemCaseSensitive(root, "diagnose"))) {
        if (!cJSON_IsBool(v)) {
            rc = as_err(err, AS_EBADINPUT, "diagnose: true or false");
            goto out;
        }
        s->drv.diagnose = cJSON_IsTrue(v);
    }
    if ((v = cJSON_GetObjectItemCaseSensitive(root, "device"))) {
        if ((rc = get_int(v, "device", 0, 1023, &n, err)))
            goto out;
        s->drv.device = (int)n;
    }
    if ((v = cJSON_GetObjectItemCaseSensitive(root, "threads"))) {
        if ((rc = get_int(v, "threads", 0, 1024, &n, err)))
            goto out;
        s->drv.threads = (int)n;
    }
    if (!(v = cJSON_GetObjectItemCaseSensitive(root, "steps"))) {
        rc = as_err(err, AS_EBADINPUT, "steps: required");
        goto out;
    }
    if ((rc = parse_steps(s, v, err)))
        goto out;
    if ((v = cJSON_GetObjectItemCaseSensitive(root, "tolerances")) && (rc = parse_tolerances(s, v, err)))
        goto out;
    if ((v = cJSON_GetObjectItemCaseSensitive(root, "dump")) && (rc = parse_dump(s, v, err)))
        goto out;
    if ((v = cJSON_GetObjectItemCaseSensitive(root, "report")) && (rc = parse_report(s, v, err)))
        goto out;
    if ((v = cJSON_GetObjectItemCaseSensitive(root, "expect")) && (rc = parse_expect(s, v, err)))
        goto out;
out:
    cJSON_Delete(root);
    return rc;
}

int as_script_load(const char *path, AsScript *s, AsError *err)
{
    char *buf;
    size_t n;
    int rc = as_read_text_file(path, MAX_SCRIPT_BYTES, "script", &buf, &n, err);
    if (rc)
        return rc;
    rc = as_script_parse(buf, n, path, s, err);
    free(buf);
    return rc ? as_err_wrap(err, "%s", path) : 0;
}
