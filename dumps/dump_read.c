/* The dump reader. Open validates the whole file against the schema before anything is
 * allocated from its sizes: root attributes, the config geometry, every step, layer and side,
 * every dataset's rank, shape and type. Reading a run then only moves data. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "dumps/dump.h"
#include "dumps/dump_diff.h"
#include "dumps/h5guard.h"
#include "dumps/h5io.h"
#include "dumps/import.h"
#include "model/precision.h"
#include "model/infile.h"

#define MAX_JSON (1 << 20)
#define MAX_STR 4096
/* Entries listed in a layer or side group before each is checked by name (a bound on work). */
#define MAX_ENTRIES 256

struct AsDumpReader {
    hid_t file;         /* -1 for an import */
    bool guard_data;    /* not the checksummed 1.10 format: data reads run in a child */
    AsDumpInfo info;
    AsImport *imp;      /* tensors imported in memory (dumps/import.h) instead of a file */
};

const AsDumpInfo *as_dump_info(const AsDumpReader *r) { return &r->info; }

static void free_info(AsDumpInfo *in)
{
    free(in->path);
    free(in->config_json);
    free(in->weights_name);
    free(in->weights_digest);
    free(in->precision);
    free(in->version);
    free(in->mode);
    free(in->created);
    for (int i = 0; i < in->n_steps; i++)
        free(in->steps[i].layers);
    free(in->steps);
    memset(in, 0, sizeof *in);
}

void as_dump_close(AsDumpReader *r)
{
    if (!r)
        return;
    if (r->file >= 0)
        H5Fclose(r->file);
    as_import_free(r->imp);
    free_info(&r->info);
    free(r);
}

/* "0007" -> 7: decimal digits only, below limit. */
static int parse_index(const char *s, int limit, int *out)
{
    long v = 0;
    if (!*s || strlen(s) > 9)
        return -1;
    for (const char *p = s; *p; p++) {
        if (*p < '0' || *p > '9')
            return -1;
        v = v * 10 + (*p - '0');
    }
    if (v >= limit)
        return -1;
    *out = (int)v;
    return 0;
}

/* Layer attributes of obj into r: all required (layer group), or only those present (a side's
 * own values over the layer's). */
static int get_layer_attrs(hid_t obj, AsRun *r, bool required, AsH5At at, AsError *err)
{
    for (int a = 0; a < AS_LA_COUNT; a++) {
        const char *name = as_dump_layer_attr_name[a];
        if (!required && !as_h5_has_attr(obj, name))
            continue;
        int v;
        int rc = as_h5_get_int(obj, name, -1, (int64_t)1 << 30, &v, at, err);
        if (rc)
            return rc;
        if (a == AS_LA_INDEXER_RAN)
            r->indexer_ran = v != 0;
        else
            *as_dump_layer_attr(r, (AsLayerAttr)a) = v;
    }
    for (int i = 0; i < AS_DUMP_N_PROV; i++) {
        const char *name = as_dump_prov_name[i];
        if (!required && !as_h5_has_attr(obj, name))
            continue;
        int64_t v[2];
        int rc = as_h5_get_i64s(obj, name, v, 2, at, err);
        if (rc)
            return rc;
        if (v[0] < -1 || v[0] > AS_MAX_LAYERS || v[1] < -1 || v[1] > AS_DUMP_MAX_STEPS)
            return as_err(err, AS_EBADINPUT, "dump %s: %s: %s = [%lld, %lld] is not a [layer, step] pair", at.file,
                          at.path, name, (long long)v[0], (long long)v[1]);
        *as_dump_prov(r, i) = (AsProvenance){(int)v[0], (int)v[1]};
    }
    return 0;
}

/* The effective attributes of one side: SPEC 3's values for the layer and step (dumps/schema.h), the
 * layer group's over them, then the side's own over those. */
static int side_attrs(hid_t lg, hid_t sg, const AsConfig *cfg, int layer, int start_pos, int tokens, AsRun *r,
                      AsH5At lat, AsH5At sat, AsError *err)
{
    if (layer >= 0 && layer < cfg->n_layers)
        as_dump_rule_attrs(cfg, layer, start_pos, tokens, r);
    int rc = get_layer_attrs(lg, r, false, lat, err);
    if (!rc && sg >= 0)
        rc = get_layer_attrs(sg, r, false, sat, err);
    char why[256];
    if (!rc && as_dump_check_attrs(cfg, layer, tokens, r, why, sizeof why))
        rc = as_err(err, AS_EBADINPUT, "dump %s: %s: %s", sat.file, sg >= 0 ? sat.path : lat.path, why);
    return rc;
}

static const char *type_name(AsValType t)
{
    return t == AS_VT_I32 ? "int32" : t == AS_VT_U8 ? "uint8" : "float32";
}

/* Opens dataset `name` of a side group and checks it against the schema; returns it open. */
static hid_t open_tensor(hid_t sg, AsTensorId id, const AsConfig *cfg, int tokens, const AsRun *attrs,
                         int64_t shape[3], AsH5At at, AsError *err)
{
    const AsTensorDesc *d = &as_tensor_desc[id];
    char path[320];
    snprintf(path, sizeof path, "%s/%s", at.path, d->name);
    AsH5At dat = {at.file, path};
    hid_t ds = H5Dopen2(sg, d->name, H5P_DEFAULT);
    hid_t sp = ds >= 0 ? H5Dget_space(ds) : -1;
    hid_t t = ds >= 0 ? H5Dget_type(ds) : -1;
    int rc = 0;
    char why[256];
    if (ds < 0 || sp < 0 || t < 0) {
        rc = as_h5_fail(err, AS_EBADINPUT, dat, "cannot open");
        goto done;
    }
    int ndim = H5Sget_simple_extent_type(sp) == H5S_SIMPLE ? H5Sget_simple_extent_ndims(sp) : -1;
    hsize_t dims[3] = {0, 0, 0};
    if (ndim < 1 || ndim > 3 || H5Sget_simple_extent_dims(sp, dims, NULL) < 0) {
        rc = as_err(err, AS_EBADINPUT, "dump %s: %s: rank %d, the schema says %d", at.file, path, ndim, d->ndim);
        goto done;
    }
    for (int i = 0; i < 3; i++)
        shape[i] = i < ndim ? (dims[i] > (hsize_t)INT64_MAX ? INT64_MAX : (int64_t)dims[i]) : 0;
    if (as_dump_check_shape(cfg, tokens, attrs, id, ndim, shape, why, sizeof why)) {
        rc = as_err(err, AS_EBADINPUT, "dump %s: %s: %s", at.file, path, why);
        goto done;
    }
    H5T_class_t cls = H5Tget_class(t);
    size_t size = H5Tget_size(t);
    bool ok = d->type == AS_VT_I32   ? cls == H5T_INTEGER && size == 4 && H5Tget_sign(t) == H5T_SGN_2
              : d->type == AS_VT_U8 ? cls == H5T_INTEGER && size == 1
                                    : cls == H5T_FLOAT && size == 4;
    if (!ok) {
        rc = as_err(err, AS_EBADINPUT, "dump %s: %s: stored as %s of %zu bytes, the schema says %s", at.file, path,
                    cls == H5T_FLOAT ? "float" : cls == H5T_INTEGER ? "integer" : "a non-numeric type", size,
                    type_name(d->type));
        goto done;
    }
    if ((rc = as_h5_check_storage(ds, d->type == AS_VT_U8 ? 1 : 4, dat, err)))
        goto done;
    if (as_h5_has_attr(ds, "dims")) {
        char *s = NULL, want[64];
        as_dump_dims_string(id, want, sizeof want);
        rc = as_h5_get_str(ds, "dims", 64, &s, dat, err);
        if (!rc && strcmp(s, want))
            rc = as_err(err, AS_EBADINPUT, "dump %s: %s: dims '%s', the schema says '%s'", at.file, path, s, want);
        free(s);
    }
    if (!rc && as_h5_has_attr(ds, "bf16") && (d->type == AS_VT_BF16 || d->type == AS_VT_F32)) {
        int v;
        rc = as_h5_get_int(ds, "bf16", 0, 1, &v, dat, err);
        if (!rc && v != (d->type == AS_VT_BF16))
            rc = as_err(err, AS_EBADINPUT, "dump %s: %s: bf16 = %d, the schema says %d", at.file, path, v,
                        d->type == AS_VT_BF16);
    }
done:
    if (t >= 0)
        H5Tclose(t);
    if (sp >= 0)
        H5Sclose(sp);
    if (rc) {
        if (ds >= 0)
            H5Dclose(ds);
        return -1;
    }
    return ds;
}

/* Lists and checks the datasets of a side; fills the tensor mask. */
static int index_side(hid_t sg, const AsConfig *cfg, int tokens, const AsRun *attrs, uint64_t *mask, AsH5At at,
                      AsError *err)
{
    char **names;
    int n;
    int rc = as_h5_list(sg, MAX_ENTRIES, &names, &n, at, err);
    *mask = 0;
    for (int i = 0; !rc && i < n; i++) {
        AsTensorId id = as_tensor_by_name(names[i]);
        if (id == AS_T_COUNT) {
            rc = as_err(err, AS_EBADINPUT, "dump %s: %s/%s: not a tensor of the format (see docs/DUMP_FORMAT.md)",
                        at.file, at.path, names[i]);
            break;
        }
        int has = as_h5_has(sg, names[i], H5O_TYPE_DATASET, at, err);
        if (has < 0) {
            rc = AS_EBADINPUT;
            break;
        }
        int64_t shape[3];
        hid_t ds = open_tensor(sg, id, cfg, tokens, attrs, shape, at, err);
        if (ds < 0) {
            rc = AS_EBADINPUT;
            break;
        }
        H5Dclose(ds);
        *mask |= AS_DUMP_TENSOR_BIT(id);
    }
    as_h5_free_list(names, n);
    return rc;
}

static int index_layer(AsDumpReader *r, hid_t lg, const char *lpath, int start_pos, int tokens, AsDumpLayerInfo *li,
                       AsError *err)
{
    const char *file = r->info.path;
    AsH5At lat = {file, lpath};
    AsRun base;
    as_run_init(&base);
    int rc = side_attrs(lg, -1, &r->info.cfg, li->layer, start_pos, tokens, &base, lat, lat, err);
    if (rc)
        return rc;
    char **names;
    int n;
    rc = as_h5_list(lg, MAX_ENTRIES, &names, &n, lat, err);
    li->verdict = AS_V_NOT_RUN;
    li->worst_tensor = AS_T_COUNT;
    for (int i = 0; !rc && i < n; i++) {
        char path[256];
        snprintf(path, sizeof path, "%s/%s", lpath, names[i]);
        AsH5At at = {file, path};
        int has = as_h5_has(lg, names[i], H5O_TYPE_GROUP, lat, err);
        if (has < 0) {
            rc = AS_EBADINPUT;
            break;
        }
        hid_t g = H5Gopen2(lg, names[i], H5P_DEFAULT);
        if (g < 0) {
            rc = as_h5_fail(err, AS_EBADINPUT, at, "cannot open");
            break;
        }
        if (!strcmp(names[i], "diff")) {
            li->has_diff = true;
            rc = as_dump_diff_peek(g, &li->verdict, &li->worst_tensor, at, err);
        } else if (!as_dump_side_name_ok(names[i])) {
            rc = as_err(err, AS_EBADINPUT, "dump %s: %s: not a side name (1..63 of [A-Za-z0-9_.-])", file, path);
        } else if (li->n_sides >= AS_DUMP_MAX_SIDES) {
            rc = as_err(err, AS_EBADINPUT, "dump %s: %s: more than %d sides", file, lpath, AS_DUMP_MAX_SIDES);
        } else {
            AsRun sa;
            as_run_init(&sa);
            AsDumpSideInfo *si = &li->side[li->n_sides];
            snprintf(si->name, sizeof si->name, "%s", names[i]);
            rc = side_attrs(lg, g, &r->info.cfg, li->layer, start_pos, tokens, &sa, lat, at, err);
            if (!rc)
                rc = index_side(g, &r->info.cfg, tokens, &sa, &si->tensors, at, err);
            if (!rc)
                li->n_sides++;
        }
        H5Gclose(g);
    }
    as_h5_free_list(names, n);
    return rc;
}

static int cmp_step(const void *a, const void *b)
{
    int x = ((const AsDumpStepInfo *)a)->step, y = ((const AsDumpStepInfo *)b)->step;
    return (x > y) - (x < y);
}

static int cmp_layer(const void *a, const void *b)
{
    int x = ((const AsDumpLayerInfo *)a)->layer, y = ((const AsDumpLayerInfo *)b)->layer;
    return (x > y) - (x < y);
}

/* A group reached by more than one hard link (a step, its layers, a layer stored once and linked
 * under many names) is refused before it is walked: the structure is a tree, each group once. */
static int single_link(hid_t g, AsH5At at, AsError *err)
{
#if H5_VERSION_GE(1, 12, 0)
    H5O_info2_t oi;
    herr_t e = H5Oget_info3(g, &oi, H5O_INFO_BASIC);
#else
    H5O_info_t oi;
    herr_t e = H5Oget_info2(g, &oi, H5O_INFO_BASIC);
#endif
    if (e < 0)
        return as_h5_fail(err, AS_EBADINPUT, at, "cannot read its object header");
    if (oi.rc != 1)
        return as_err(err, AS_EBADINPUT, "dump %s: %s: a group with %u hard links (a repeated group: each is stored once)",
                      at.file, at.path, (unsigned)oi.rc);
    return 0;
}

static int index_step(AsDumpReader *r, hid_t sg, const char *spath, AsDumpStepInfo *si, AsError *err)
{
    const char *file = r->info.path;
    AsH5At at = {file, spath};
    char *kind = NULL;
    int rc = as_h5_get_str(sg, "kind", 15, &kind, at, err);
    if (!rc && strcmp(kind, "prefill") && strcmp(kind, "decode"))
        rc = as_err(err, AS_EBADINPUT, "dump %s: %s: kind '%s' (prefill or decode)", file, spath, kind);
    if (!rc)
        snprintf(si->kind, sizeof si->kind, "%s", kind);
    free(kind);
    if (!rc)
        rc = as_h5_get_int(sg, "start_pos", 0, AS_LIMIT_MAX_SEQ, &si->start_pos, at, err);
    if (!rc)
        rc = as_h5_get_int(sg, "tokens", 1, AS_LIMIT_MAX_SEQ, &si->tokens, at, err);
    if (rc)
        return rc;
    int has = as_h5_has(sg, "layers", H5O_TYPE_GROUP, at, err);
    if (has <= 0)
        return has < 0 ? AS_EBADINPUT : as_err(err, AS_EBADINPUT, "dump %s: %s: no 'layers' group", file, spath);
    char lpath[128];
    snprintf(lpath, sizeof lpath, "%s/layers", spath);
    AsH5At lat = {file, lpath};
    hid_t lsg = H5Gopen2(sg, "layers", H5P_DEFAULT);
    if (lsg < 0)
        return as_h5_fail(err, AS_EBADINPUT, lat, "cannot open");
    if ((rc = single_link(lsg, lat, err))) {
        H5Gclose(lsg);
        return rc;
    }
    char **names;
    int n;
    rc = as_h5_list(lsg, r->info.cfg.n_layers, &names, &n, lat, err);
    if (!rc && !(si->layers = calloc(n ? (size_t)n : 1, sizeof *si->layers)))
        rc = as_err(err, AS_ERUNTIME, "out of memory");
    for (int i = 0; !rc && i < n; i++) {
        AsDumpLayerInfo *li = &si->layers[i];
        char path[192];
        snprintf(path, sizeof path, "%s/%s", lpath, names[i]);
        snprintf(li->group, sizeof li->group, "%.15s", names[i]);
        if (parse_index(names[i], r->info.cfg.n_layers, &li->layer)) {
            rc = as_err(err, AS_EBADINPUT, "dump %s: %s: not a layer of the model (0..%d)", file, path,
                        r->info.cfg.n_layers - 1);
            break;
        }
        if ((has = as_h5_has(lsg, names[i], H5O_TYPE_GROUP, lat, err)) < 0) {
            rc = AS_EBADINPUT;
            break;
        }
        hid_t lg = H5Gopen2(lsg, names[i], H5P_DEFAULT);
        if (lg < 0) {
            rc = as_h5_fail(err, AS_EBADINPUT, (AsH5At){file, path}, "cannot open");
            break;
        }
        if (!(rc = single_link(lg, (AsH5At){file, path}, err)))
            rc = index_layer(r, lg, path, si->start_pos, si->tokens, li, err);
        H5Gclose(lg);
        si->n_layers++;
    }
    as_h5_free_list(names, n);
    H5Gclose(lsg);
    if (rc)
        return rc;
    qsort(si->layers, (size_t)si->n_layers, sizeof *si->layers, cmp_layer);
    for (int i = 1; i < si->n_layers; i++)
        if (si->layers[i].layer == si->layers[i - 1].layer)
            return as_err(err, AS_EBADINPUT, "dump %s: %s: layer %d appears twice", file, lpath, si->layers[i].layer);
    return 0;
}

static int index_steps(AsDumpReader *r, AsError *err)
{
    const char *file = r->info.path;
    AsH5At root = {file, "/"}, at = {file, "/steps"};
    int has = as_h5_has(r->file, "steps", H5O_TYPE_GROUP, root, err);
    if (has <= 0)
        return has < 0 ? AS_EBADINPUT : as_err(err, AS_EBADINPUT, "dump %s: no /steps group", file);
    hid_t sg = H5Gopen2(r->file, "steps", H5P_DEFAULT);
    if (sg < 0)
        return as_h5_fail(err, AS_EBADINPUT, at, "cannot open");
    char **names;
    int n;
    int rc = as_h5_list(sg, AS_DUMP_MAX_STEPS, &names, &n, at, err);
    if (!rc && !(r->info.steps = calloc(n ? (size_t)n : 1, sizeof *r->info.steps)))
        rc = as_err(err, AS_ERUNTIME, "out of memory");
    for (int i = 0; !rc && i < n; i++) {
        AsDumpStepInfo *si = &r->info.steps[i];
        char path[64];
        snprintf(path, sizeof path, "/steps/%.16s", names[i]);
        snprintf(si->group, sizeof si->group, "%.15s", names[i]);
        if (parse_index(names[i], AS_DUMP_MAX_STEPS, &si->step)) {
            rc = as_err(err, AS_EBADINPUT, "dump %s: /steps/%s: not a step number", file, names[i]);
            break;
        }
        if ((has = as_h5_has(sg, names[i], H5O_TYPE_GROUP, at, err)) < 0) {
            rc = AS_EBADINPUT;
            break;
        }
        hid_t g = H5Gopen2(sg, names[i], H5P_DEFAULT);
        if (g < 0) {
            rc = as_h5_fail(err, AS_EBADINPUT, (AsH5At){file, path}, "cannot open");
            break;
        }
        r->info.n_steps++;
        if (!(rc = single_link(g, (AsH5At){file, path}, err)))
            rc = index_step(r, g, path, si, err);
        H5Gclose(g);
    }
    as_h5_free_list(names, n);
    H5Gclose(sg);
    if (rc)
        return rc;
    qsort(r->info.steps, (size_t)r->info.n_steps, sizeof *r->info.steps, cmp_step);
    for (int i = 1; i < r->info.n_steps; i++)
        if (r->info.steps[i].step == r->info.steps[i - 1].step)
            return as_err(err, AS_EBADINPUT, "dump %s: /steps: step %d appears twice", file, r->info.steps[i].step);
    return 0;
}

/* /inputs/h0: [tokens][dim] float32 with first_pos; returns it open (or 0 when absent). */
static hid_t open_inputs(AsDumpReader *r, int *tokens, int *first_pos, AsError *err)
{
    const char *file = r->info.path;
    AsH5At root = {file, "/"}, at = {file, "/inputs"}, hat = {file, "/inputs/h0"};
    int has = as_h5_has(r->file, "inputs", H5O_TYPE_GROUP, root, err);
    if (has <= 0)
        return has < 0 ? -1 : 0;
    hid_t g = H5Gopen2(r->file, "inputs", H5P_DEFAULT);
    if (g < 0) {
        as_h5_fail(err, AS_EBADINPUT, at, "cannot open");
        return -1;
    }
    has = as_h5_has(g, "h0", H5O_TYPE_DATASET, at, err);
    hid_t ds = has > 0 ? H5Dopen2(g, "h0", H5P_DEFAULT) : -1;
    H5Gclose(g);
    if (has <= 0) {
        if (has == 0)
            as_err(err, AS_EBADINPUT, "dump %s: /inputs: no h0 dataset", file);
        return -1;
    }
    if (ds < 0) {
        as_h5_fail(err, AS_EBADINPUT, hat, "cannot open");
        return -1;
    }
    hid_t sp = H5Dget_space(ds), t = H5Dget_type(ds);
    hsize_t dims[2] = {0, 0};
    int rc = 0;
    if (sp < 0 || t < 0 || H5Sget_simple_extent_ndims(sp) != 2 || H5Sget_simple_extent_dims(sp, dims, NULL) < 0 ||
        dims[1] != (hsize_t)r->info.cfg.dim || dims[0] > AS_LIMIT_MAX_SEQ)
        rc = as_err(err, AS_EBADINPUT, "dump %s: /inputs/h0: shape must be [tokens <= %d][dim = %d]", file,
                    AS_LIMIT_MAX_SEQ, r->info.cfg.dim);
    else if (H5Tget_class(t) != H5T_FLOAT || H5Tget_size(t) != 4)
        rc = as_err(err, AS_EBADINPUT, "dump %s: /inputs/h0: must be float32", file);
    else if ((int64_t)dims[0] * (int64_t)dims[1] > AS_DUMP_MAX_ELEMS)
        rc = as_err(err, AS_EBADINPUT, "dump %s: /inputs/h0: more than %lld elements", file,
                    (long long)AS_DUMP_MAX_ELEMS);
    else if (!(rc = as_h5_check_storage(ds, 4, hat, err))) {
        *first_pos = 0; /* optional: positions from 0 */
        if (as_h5_has_attr(ds, "first_pos"))
            rc = as_h5_get_int(ds, "first_pos", 0, AS_LIMIT_MAX_SEQ, first_pos, hat, err);
    }
    if (t >= 0)
        H5Tclose(t);
    if (sp >= 0)
        H5Sclose(sp);
    if (rc) {
        H5Dclose(ds);
        return -1;
    }
    *tokens = (int)dims[0];
    return ds;
}

/* ---- the state_in group ------------------------------------------------------------------ */

static int get_prov_attr(hid_t obj, const char *name, AsProvenance *p, AsH5At at, AsError *err)
{
    *p = (AsProvenance){-1, -1};
    if (!as_h5_has_attr(obj, name))
        return 0;
    int64_t v[2];
    int rc = as_h5_get_i64s(obj, name, v, 2, at, err);
    if (rc)
        return rc;
    if (v[0] < -1 || v[0] >= AS_MAX_LAYERS || v[1] < -1 || v[1] > AS_DUMP_MAX_STEPS)
        return as_err(err, AS_EBADINPUT, "dump %s: %s: %s = [%lld, %lld] is not a [layer, step] pair", at.file,
                      at.path, name, (long long)v[0], (long long)v[1]);
    *p = (AsProvenance){(int)v[0], (int)v[1]};
    return 0;
}

/* /state_in: its attributes, and every layer's group holding exactly the state tensors of its role,
 * each of the schema's shape and type. */
static int index_state_in(AsDumpReader *r, AsError *err)
{
    const char *file = r->info.path;
    AsH5At root = {file, "/"}, at = {file, "/state_in"};
    int has = as_h5_has(r->file, "state_in", H5O_TYPE_GROUP, root, err);
    if (has <= 0)
        return has < 0 ? AS_EBADINPUT : 0;
    hid_t g = H5Gopen2(r->file, "state_in", H5P_DEFAULT);
    if (g < 0)
        return as_h5_fail(err, AS_EBADINPUT, at, "cannot open");
    const AsConfig *cfg = &r->info.cfg;
    AsDumpStateIn *si = &r->info.state_in;
    memset(si, 0, sizeof *si);
    int rc = as_h5_get_int(g, "step", 1, AS_DUMP_MAX_STEPS - 1, &si->step, at, err);
    if (!rc)
        rc = as_h5_get_int(g, "start_pos", 1, AS_LIMIT_MAX_SEQ, &si->start_pos, at, err);
    if (!rc)
        rc = get_prov_attr(g, "compress_kv_from", &si->compress_kv_from, at, err);
    if (!rc)
        rc = get_prov_attr(g, "index_k_from", &si->index_k_from, at, err);
    if (!rc)
        rc = get_prov_attr(g, "sel_from", &si->sel_from, at, err);
    if (!rc)
        rc = get_prov_attr(g, "cand_from", &si->cand_from, at, err);
    if (!rc && as_h5_has_attr(g, "side")) {
        char *side = NULL;
        rc = as_h5_get_str(g, "side", 63, &side, at, err);
        if (!rc && !as_dump_side_name_ok(side))
            rc = as_err(err, AS_EBADINPUT, "dump %s: /state_in: side is not a side name (1..63 of [A-Za-z0-9_.-])", file);
        if (!rc)
            snprintf(si->side, sizeof si->side, "%s", side);
        free(side);
    }
    const AsProvenance *pv[4] = {&si->compress_kv_from, &si->index_k_from, &si->sel_from, &si->cand_from};
    for (int i = 0; !rc && i < 4; i++)
        if (pv[i]->layer >= cfg->n_layers || pv[i]->step >= si->step)
            rc = as_err(err, AS_EBADINPUT, "dump %s: /state_in: a provenance names layer %d step %d, not a layer of the "
                        "model in an earlier step", file, pv[i]->layer, pv[i]->step);
    hid_t lsg = -1;
    AsH5At lat = {file, "/state_in/layers"};
    if (!rc) {
        has = as_h5_has(g, "layers", H5O_TYPE_GROUP, at, err);
        if (has <= 0)
            rc = has < 0 ? AS_EBADINPUT : as_err(err, AS_EBADINPUT, "dump %s: /state_in: no 'layers' group", file);
    }
    if (!rc && (lsg = H5Gopen2(g, "layers", H5P_DEFAULT)) < 0)
        rc = as_h5_fail(err, AS_EBADINPUT, lat, "cannot open");
    char **names = NULL;
    int n = 0;
    if (!rc)
        rc = as_h5_list(lsg, cfg->n_layers, &names, &n, lat, err);
    bool seen[AS_MAX_LAYERS] = {false};
    for (int i = 0; !rc && i < n; i++) {
        char path[96];
        snprintf(path, sizeof path, "/state_in/layers/%.16s", names[i]);
        AsH5At pat = {file, path};
        int l;
        if (parse_index(names[i], cfg->n_layers, &l) || seen[l]) {
            rc = as_err(err, AS_EBADINPUT, "dump %s: %s: not a layer of the model (0..%d), or a layer twice", file, path,
                        cfg->n_layers - 1);
            break;
        }
        seen[l] = true;
        if ((has = as_h5_has(lsg, names[i], H5O_TYPE_GROUP, lat, err)) < 0) {
            rc = AS_EBADINPUT;
            break;
        }
        hid_t lg = H5Gopen2(lsg, names[i], H5P_DEFAULT);
        if (lg < 0) {
            rc = as_h5_fail(err, AS_EBADINPUT, pat, "cannot open");
            break;
        }
        AsRun attrs;
        as_run_init(&attrs);
        attrs.ratio = cfg->role[l].ratio;
        uint64_t mask = 0, want = as_dump_state_tensors(cfg, l);
        rc = index_side(lg, cfg, 1, &attrs, &mask, pat, err);
        H5Gclose(lg);
        if (!rc && mask != want) {
            uint64_t odd = mask ^ want;
            int id = 0;
            while (!((odd >> id) & 1))
                id++;
            rc = as_err(err, AS_EBADINPUT, "dump %s: %s: %s %s (the layer's role %s it)", file, path,
                        as_tensor_desc[id].name, (mask >> id) & 1 ? "is stored" : "is missing",
                        (mask >> id) & 1 ? "has no" : "has");
        }
    }
    as_h5_free_list(names, n);
    for (int l = 0; !rc && l < cfg->n_layers; l++)
        if (!seen[l])
            rc = as_err(err, AS_EBADINPUT, "dump %s: /state_in/layers: layer %d is missing (a replay needs every layer's "
                        "state)", file, l);
    if (lsg >= 0)
        H5Gclose(lsg);
    H5Gclose(g);
    if (!rc)
        r->info.has_state_in = true;
    return rc;
}

/* Whether s is well-formed UTF-8 (no overlong forms, surrogates or code points past U+10FFFF): the
 * strings of a dump reach reports and terminals. */
static bool utf8_ok(const char *s)
{
    for (const unsigned char *p = (const unsigned char *)s; *p;) {
        unsigned c = *p;
        int n = c < 0x80 ? 1 : c >= 0xc2 && c <= 0xdf ? 2 : c >= 0xe0 && c <= 0xef ? 3 : c >= 0xf0 && c <= 0xf4 ? 4 : 0;
        if (!n)
            return false;
        for (int k = 1; k < n; k++)
            if ((p[k] & 0xc0) != 0x80)
                return false;
        if ((n == 3 && ((c == 0xe0 && p[1] < 0xa0) || (c == 0xed && p[1] >= 0xa0))) ||
            (n == 4 && ((c == 0xf0 && p[1] < 0x90) || (c == 0xf4 && p[1] >= 0x90))))
            return false;
        p += n;
    }
    return true;
}

static int read_root(AsDumpReader *r, AsError *err)
{
    AsDumpInfo *in = &r->info;
    AsH5At at = {in->path, "/"};
    char *format = NULL;
    int rc = as_h5_get_str(r->file, "format", 64, &format, at, err);
    if (rc) {
        free(format);
        if (err) { /* say what the file is not, after what is wrong */
            size_t len = strlen(err->msg);
            snprintf(err->msg + len, sizeof err->msg - len, ": not an attnscope dump");
        }
        return rc;
    }
    if (strcmp(format, AS_DUMP_FORMAT)) {
        rc = as_err(err, AS_EBADINPUT, "dump %s: attribute 'format' is '%s', not '%s': not an attnscope dump",
                    in->path, format, AS_DUMP_FORMAT);
        free(format);
        return rc;
    }
    free(format);
    int64_t version;
    if ((rc = as_h5_get_i64(r->file, "format_version", &version, at, err)))
        return rc;
    if (version != AS_DUMP_FORMAT_VERSION)
        return as_err(err, AS_EBADINPUT, "dump %s: format_version %lld is not supported (this attnscope reads %d)",
                      in->path, (long long)version, AS_DUMP_FORMAT_VERSION);
    in->format_version = (int)version;
    if ((rc = as_h5_get_str(r->file, "config_json", MAX_JSON, &in->config_json, at, err)))
        return rc;
    AsError cerr = {0};
    if (as_config_parse_json(in->config_json, strlen(in->config_json), &in->cfg, &cerr) ||
        as_config_validate(&in->cfg, &cerr))
        return as_err(err, AS_EBADINPUT, "dump %s: config_json: %s", in->path, cerr.msg);
    struct {
        const char *name;
        char **out;
    } strs[] = {{"weights_name", &in->weights_name},
                {"weights_digest", &in->weights_digest},
                {"attnscope_version", &in->version},
                {"mode", &in->mode},
                {"created", &in->created}};
    for (size_t i = 0; i < sizeof strs / sizeof strs[0]; i++) {
        /* optional for other writers: "" (mode: "external") */
        if (!as_h5_has_attr(r->file, strs[i].name)) {
            if (!(*strs[i].out = strdup(strs[i].out == &in->mode ? "external" : "")))
                return as_err(err, AS_ERUNTIME, "out of memory");
            continue;
        }
        if ((rc = as_h5_get_str(r->file, strs[i].name, MAX_STR, strs[i].out, at, err)))
            return rc;
        if (as_has_control(*strs[i].out, strlen(*strs[i].out))) /* dump-info prints them */
            return as_err(err, AS_EBADINPUT, "dump %s: attribute '%s' holds a control character", in->path,
                          strs[i].name);
        if (!utf8_ok(*strs[i].out))
            return as_err(err, AS_EBADINPUT, "dump %s: attribute '%s' is not UTF-8", in->path, strs[i].name);
    }
    if (as_h5_has_attr(r->file, "precision")) {
        if ((rc = as_h5_get_str(r->file, "precision", MAX_STR, &in->precision, at, err)))
            return rc;
        AsPrecision p;
        if (as_precision_parse(in->precision, false, &p))
            return as_err(err, AS_EBADINPUT, "dump %s: precision must be \"fp8\" or \"bf16\"", in->path);
    }
    if (!as_dump_mode_ok(in->mode))
        return as_err(err, AS_EBADINPUT,
                      "dump %s: mode '%s' (modes: teacher, free, engine-only, reference-only, external)", in->path,
                      in->mode);
    return 0;
}

static int open_in_process(const char *path, AsDumpReader **out, AsError *err)
{
    htri_t is = H5Fis_hdf5(path);
    if (is <= 0)
        return as_err(err, AS_EBADINPUT, "dump %s: not an HDF5 file", path);
    AsDumpReader *r = calloc(1, sizeof *r);
    if (!r || !(r->info.path = strdup(path))) {
        free(r);
        return as_err(err, AS_ERUNTIME, "out of memory");
    }
    r->info.input_first_pos = -1;
    r->file = H5Fopen(path, H5F_ACC_RDONLY, H5P_DEFAULT);
    int rc = 0;
    if (r->file < 0)
        rc = as_h5_fail(err, AS_EBADINPUT, (AsH5At){path, "/"}, "cannot open as HDF5 (damaged or truncated?)");
    H5F_info2_t fi;
    /* superblock 3 = the 1.10 format attnscope writes: metadata and chunk indexes checksummed */
    r->guard_data = rc || H5Fget_info2(r->file, &fi) < 0 || fi.super.version < 3;
    if (!rc)
        rc = read_root(r, err);
    if (!rc) {
        int tokens = 0, first = -1;
        hid_t ds = open_inputs(r, &tokens, &first, err);
        if (ds < 0)
            rc = AS_EBADINPUT;
        else if (ds > 0) {
            H5Dclose(ds);
            r->info.input_tokens = tokens;
            r->info.input_first_pos = first;
        }
    }
    if (!rc)
        rc = index_steps(r, err);
    if (!rc)
        rc = index_state_in(r, err);
    if (rc) {
        as_dump_close(r);
        return rc;
    }
    *out = r;
    return 0;
}

typedef struct {
    hid_t file;
    const char *path;
    AsH5At at;
    AsLayerDiff *out;
    char *got, *want;
} DiffJob;

static int read_diff_job(void *ctx, AsError *err)
{
    DiffJob *j = ctx;
    hid_t g = H5Gopen2(j->file, j->path, H5P_DEFAULT);
    if (g < 0)
        return as_h5_fail(err, AS_EBADINPUT, j->at, "cannot open");
    int rc = as_dump_diff_get(g, j->out, j->got, j->want, j->at, err);
    H5Gclose(g);
    return rc;
}

/* The whole validating open, and every stored diff read once: the parent later walks in process
 * only what the child got through. A checksummed file is not enough: in the 1.10 format the
 * fractal heap of a group's dense link storage has no checksum, and a damaged one crashed
 * `attnscope diff` (fuzz/regressions/dump/dense-links-diff-double-free.h5). */
static int probe_open(void *ctx, AsError *err)
{
    AsDumpReader *r = NULL;
    int rc = open_in_process(ctx, &r, err);
    for (int i = 0; !rc && i < r->info.n_steps; i++) {
        const AsDumpStepInfo *si = &r->info.steps[i];
        for (int l = 0; !rc && l < si->n_layers; l++) {
            if (!si->layers[l].has_diff)
                continue;
            char path[128];
            snprintf(path, sizeof path, "/steps/%s/layers/%s/diff", si->group, si->layers[l].group);
            AsLayerDiff *d = malloc(sizeof *d);
            char got[64], want[64];
            DiffJob job = {r->file, path, {r->info.path, path}, d, got, want};
            rc = d ? read_diff_job(&job, err) : as_err(err, AS_ERUNTIME, "out of memory");
            free(d);
        }
    }
    as_dump_close(r);
    return rc;
}

int as_dump_open_import(AsImport *imp, AsDumpReader **out, AsError *err)
{
    *out = NULL;
    AsDumpReader *r = calloc(1, sizeof *r);
    if (!r) {
        as_import_free(imp);
        return as_err(err, AS_ERUNTIME, "out of memory");
    }
    r->file = -1;
    r->imp = imp;
    int rc = as_import_info(imp, &r->info, err);
    if (rc) {
        as_dump_close(r);
        return rc;
    }
    *out = r;
    return 0;
}

int as_dump_open(const char *path, AsDumpReader **out, AsError *err)
{
    *out = NULL;
    as_h5_init();
    /* regular files only, opened without blocking (HDF5 would call an unreadable file "not HDF5") */
    if (as_check_input(path, err))
        return as_err_wrap(err, "dump");
    /* the whole validating open runs in a child first (dumps/h5guard.h): the parent then only
     * walks structure that the child got through */
    char what[600];
    snprintf(what, sizeof what, "dump %s", path);
    int rc = as_guard_run(probe_open, (void *)path, what, err);
    return rc ? rc : open_in_process(path, out, err);
}

const AsDumpStepInfo *as_dump_find_step(const AsDumpReader *r, int step)
{
    int lo = 0, hi = r->info.n_steps; /* sorted by step once, at open */
    while (lo < hi) {
        int mid = lo + (hi - lo) / 2;
        if (r->info.steps[mid].step < step)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo < r->info.n_steps && r->info.steps[lo].step == step ? &r->info.steps[lo] : NULL;
}

const AsDumpLayerInfo *as_dump_find_layer(const AsDumpStepInfo *s, int layer)
{
    if (!s)
        return NULL;
    int lo = 0, hi = s->n_layers; /* sorted by layer once, at open */
    while (lo < hi) {
        int mid = lo + (hi - lo) / 2;
        if (s->layers[mid].layer < layer)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo < s->n_layers && s->layers[lo].layer == layer ? &s->layers[lo] : NULL;
}

int as_dump_side_index(const AsDumpLayerInfo *l, const char *name)
{
    for (int i = 0; l && i < l->n_sides; i++)
        if (!strcmp(l->side[i].name, name))
            return i;
    return -1;
}

/* Datasets of one group to read into memory, in process or (guard_data) in a child. */
typedef struct {
    hid_t group;
    const char *file, *path;
    int n;
    const char *name[AS_T_COUNT];
    hid_t mtype[AS_T_COUNT];
    void *dst[AS_T_COUNT];
    size_t bytes[AS_T_COUNT];
} DataJob;

static int read_job(void *ctx, AsError *err)
{
    DataJob *j = ctx;
    for (int i = 0; i < j->n; i++) {
        hid_t ds = H5Dopen2(j->group, j->name[i], H5P_DEFAULT);
        if (ds < 0 || H5Dread(ds, j->mtype[i], H5S_ALL, H5S_ALL, H5P_DEFAULT, j->dst[i]) < 0) {
            char path[320];
            snprintf(path, sizeof path, "%s/%s", j->path, j->name[i]);
            int rc = as_h5_fail(err, AS_EBADINPUT, (AsH5At){j->file, path}, "cannot read the data (damaged?)");
            if (ds >= 0)
                H5Dclose(ds);
            return rc;
        }
        H5Dclose(ds);
    }
    return 0;
}

static int run_job(const AsDumpReader *r, DataJob *j, AsError *err)
{
    if (!r->guard_data)
        return read_job(j, err);
    size_t total = 0;
    for (int i = 0; i < j->n; i++)
        total += j->bytes[i];
    if (!total)
        return 0;
    char *shared = as_guard_alloc(total);
    if (!shared)
        return as_err(err, AS_ERUNTIME, "dump %s: %s: out of memory", j->file, j->path);
    void *keep[AS_T_COUNT];
    size_t off = 0;
    for (int i = 0; i < j->n; i++) {
        keep[i] = j->dst[i];
        j->dst[i] = shared + off;
        off += j->bytes[i];
    }
    char what[600];
    snprintf(what, sizeof what, "dump %s: %s", j->file, j->path);
    int rc = as_guard_run(read_job, j, what, err);
    for (int i = 0; i < j->n; i++) {
        if (!rc)
            memcpy(keep[i], j->dst[i], j->bytes[i]);
        j->dst[i] = keep[i];
    }
    as_guard_free(shared, total);
    return rc;
}

/* Validates tensor id of a side group, shapes it in run and queues its data in job. */
static int queue_tensor(hid_t sg, AsTensorId id, const AsConfig *cfg, int tokens, AsRun *run, DataJob *job,
                        AsH5At at, AsError *err)
{
    int64_t shape[3];
    hid_t ds = open_tensor(sg, id, cfg, tokens, run, shape, at, err);
    if (ds < 0)
        return AS_EBADINPUT;
    H5Dclose(ds);
    const AsTensorDesc *d = &as_tensor_desc[id];
    void *buf = as_run_shape(run, id, d->ndim, shape[0], shape[1], shape[2]);
    if (!buf)
        return as_err(err, AS_ERUNTIME, "dump %s: %s/%s: out of memory", at.file, at.path, d->name);
    int64_t n = as_ht_numel(&run->t[id]);
    if (n > 0) {
        job->name[job->n] = d->name;
        job->mtype[job->n] = d->type == AS_VT_I32 ? H5T_NATIVE_INT32 : d->type == AS_VT_U8 ? H5T_NATIVE_UINT8
                                                                                          : H5T_NATIVE_FLOAT;
        job->dst[job->n] = buf;
        job->bytes[job->n] = (size_t)n * (d->type == AS_VT_U8 ? 1 : 4);
        job->n++;
    }
    return 0;
}

int as_dump_read_run(AsDumpReader *r, int step, int layer, const char *side, AsRun *out, AsError *err)
{
    const AsDumpStepInfo *si = as_dump_find_step(r, step);
    const AsDumpLayerInfo *li = as_dump_find_layer(si, layer);
    int s = as_dump_side_index(li, side);
    if (s < 0)
        return as_err(err, AS_EBADINPUT, "dump %s: no side '%s' for step %d, layer %d", r->info.path, side, step,
                      layer);
    if (r->imp)
        return as_import_read_run(r->imp, step, layer, out, err);
    char lpath[128], spath[192];
    snprintf(lpath, sizeof lpath, "/steps/%s/layers/%s", si->group, li->group);
    snprintf(spath, sizeof spath, "%s/%s", lpath, side);
    AsH5At lat = {r->info.path, lpath}, sat = {r->info.path, spath};
    as_run_free(out);
    hid_t lg = H5Gopen2(r->file, lpath, H5P_DEFAULT);
    hid_t sg = lg >= 0 ? H5Gopen2(lg, side, H5P_DEFAULT) : -1;
    int rc = 0;
    if (lg < 0 || sg < 0)
        rc = as_h5_fail(err, AS_EBADINPUT, sat, "cannot open");
    if (!rc)
        rc = side_attrs(lg, sg, &r->info.cfg, layer, si->start_pos, si->tokens, out, lat, sat, err);
    DataJob job = {.group = sg, .file = r->info.path, .path = spath};
    for (int i = 0; !rc && i < AS_T_COUNT; i++)
        if (li->side[s].tensors & AS_DUMP_TENSOR_BIT(i))
            rc = queue_tensor(sg, (AsTensorId)i, &r->info.cfg, si->tokens, out, &job, sat, err);
    if (!rc)
        rc = run_job(r, &job, err);
    if (sg >= 0)
        H5Gclose(sg);
    if (lg >= 0)
        H5Gclose(lg);
    out->layer = layer;
    out->step = step;
    out->start_pos = si->start_pos;
    out->s = si->tokens;
    if (rc) {
        as_run_free(out);
        return rc;
    }
    return 0;
}

int as_dump_read_inputs(AsDumpReader *r, float **h0, int *tokens, int *first_pos, AsError *err)
{
    *h0 = NULL;
    if (r->imp)
        return as_import_read_inputs(r->imp, h0, tokens, first_pos, err);
    int n = 0, first = -1;
    hid_t ds = open_inputs(r, &n, &first, err);
    if (ds <= 0)
        return ds < 0 ? AS_EBADINPUT : as_err(err, AS_EBADINPUT, "dump %s: no /inputs/h0", r->info.path);
    H5Dclose(ds);
    size_t count = (size_t)n * (size_t)r->info.cfg.dim;
    float *buf = malloc(count ? count * sizeof *buf : 1);
    hid_t g = buf ? H5Gopen2(r->file, "inputs", H5P_DEFAULT) : -1;
    int rc = 0;
    if (!buf)
        rc = as_err(err, AS_ERUNTIME, "dump %s: /inputs/h0: out of memory", r->info.path);
    else if (g < 0)
        rc = as_h5_fail(err, AS_EBADINPUT, (AsH5At){r->info.path, "/inputs"}, "cannot open");
    else if (count) {
        DataJob job = {.group = g, .file = r->info.path, .path = "/inputs", .n = 1};
        job.name[0] = "h0", job.mtype[0] = H5T_NATIVE_FLOAT, job.dst[0] = buf, job.bytes[0] = count * sizeof *buf;
        rc = run_job(r, &job, err);
    }
    if (g >= 0)
        H5Gclose(g);
    if (rc) {
        free(buf);
        return rc;
    }
    *h0 = buf;
    *tokens = n;
    *first_pos = first;
    return 0;
}

int as_dump_read_state_in(AsDumpReader *r, AsRun *layers, AsError *err)
{
    if (!r->info.has_state_in)
        return as_err(err, AS_EBADINPUT, "dump %s: no /state_in group", r->info.path);
    const AsConfig *cfg = &r->info.cfg;
    int rc = 0;
    for (int l = 0; !rc && l < cfg->n_layers; l++) {
        char path[64];
        snprintf(path, sizeof path, "/state_in/layers/%02d", l);
        AsH5At at = {r->info.path, path};
        /* the group may be spelled without the zero padding */
        hid_t lg = H5Lexists(r->file, path, H5P_DEFAULT) > 0 ? H5Gopen2(r->file, path, H5P_DEFAULT) : -1;
        if (lg < 0) {
            snprintf(path, sizeof path, "/state_in/layers/%d", l);
            lg = H5Lexists(r->file, path, H5P_DEFAULT) > 0 ? H5Gopen2(r->file, path, H5P_DEFAULT) : -1;
        }
        if (lg < 0) {
            rc = as_h5_fail(err, AS_EBADINPUT, at, "cannot open");
            break;
        }
        as_run_free(&layers[l]);
        layers[l].layer = l;
        layers[l].ratio = cfg->role[l].ratio;
        DataJob job = {.group = lg, .file = r->info.path, .path = path};
        uint64_t mask = as_dump_state_tensors(cfg, l);
        for (int i = 0; !rc && i < AS_T_COUNT; i++)
            if ((mask >> i) & 1)
                rc = queue_tensor(lg, (AsTensorId)i, cfg, 1, &layers[l], &job, at, err);
        if (!rc)
            rc = run_job(r, &job, err);
        H5Gclose(lg);
    }
    return rc;
}

int as_dump_read_diff(AsDumpReader *r, int step, int layer, AsLayerDiff *out, char got_side[64],
                      char want_side[64], AsError *err)
{
    const AsDumpStepInfo *si = as_dump_find_step(r, step);
    const AsDumpLayerInfo *li = as_dump_find_layer(si, layer);
    if (!li || !li->has_diff)
        return as_err(err, AS_EBADINPUT, "dump %s: no diff stored for step %d, layer %d", r->info.path, step, layer);
    char path[128];
    snprintf(path, sizeof path, "/steps/%s/layers/%s/diff", si->group, li->group);
    AsH5At at = {r->info.path, path};
    DiffJob job = {r->file, path, at, out, got_side, want_side};
    int rc;
    if (!r->guard_data) {
        rc = read_diff_job(&job, err);
    } else {
        /* the whole AsLayerDiff (plain data) and the side names come back through shared memory */
        struct Shared {
            AsLayerDiff d;
            char got[64], want[64];
        } *sh = as_guard_alloc(sizeof *sh);
        if (!sh)
            return as_err(err, AS_ERUNTIME, "out of memory");
        job.out = &sh->d, job.got = sh->got, job.want = sh->want;
        char what[600];
        snprintf(what, sizeof what, "dump %s: %s", r->info.path, path);
        rc = as_guard_run(read_diff_job, &job, what, err);
        if (!rc) {
            *out = sh->d;
            if (got_side)
                memcpy(got_side, sh->got, 64);
            if (want_side)
                memcpy(want_side, sh->want, 64);
        }
        as_guard_free(sh, sizeof *sh);
    }
    out->layer = layer;
    out->step = step;
    return rc;
}
