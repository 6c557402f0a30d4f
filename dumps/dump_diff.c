/* AsLayerDiff <-> the `diff` group. Counts and indices are int64 attributes, measures float64,
 * flags int64 0/1, verdicts strings (as_verdict_name), so h5py and h5dump read them plainly. */
#include "dumps/dump_diff.h"

#include "model/config.h"

#include <math.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const struct {
    const char *name;
    size_t off;
} i64_field[] = {
    {"numel", offsetof(AsTensorDiff, numel)},           {"worst", offsetof(AsTensorDiff, worst)},
    {"worst_ulp", offsetof(AsTensorDiff, worst_ulp)},   {"n_bad", offsetof(AsTensorDiff, n_bad)},
    {"n_flips", offsetof(AsTensorDiff, n_flips)},       {"n_rows_differ", offsetof(AsTensorDiff, n_rows_differ)},
    {"n_near_tie", offsetof(AsTensorDiff, n_near_tie)}, {"n_real", offsetof(AsTensorDiff, n_real)},
};
static const struct {
    const char *name;
    size_t off;
} f64_field[] = {
    {"max_abs", offsetof(AsTensorDiff, max_abs)},     {"want_max", offsetof(AsTensorDiff, want_max)},
    {"tol", offsetof(AsTensorDiff, tol)},             {"max_rel", offsetof(AsTensorDiff, max_rel)},
    {"worst_got", offsetof(AsTensorDiff, worst_got)}, {"worst_want", offsetof(AsTensorDiff, worst_want)},
};
static const struct {
    const char *name;
    size_t off;
} flag_field[] = {
    {"shape_differs", offsetof(AsTensorDiff, shape_differs)},
    {"absent_got", offsetof(AsTensorDiff, absent_got)},
    {"absent_want", offsetof(AsTensorDiff, absent_want)},
};
#define N_OF(a) (sizeof(a) / sizeof((a)[0]))

/* One row of the seldiffs dataset. */
typedef struct {
    int64_t query;
    int32_t near_tie;
    int32_t n_only_got, n_only_want;
    int32_t only_got[8], only_want[8];
    double margin;
} SelRow;

static hid_t sel_type(void)
{
    hsize_t eight = 8;
    hid_t arr = H5Tarray_create2(H5T_NATIVE_INT32, 1, &eight);
    hid_t t = H5Tcreate(H5T_COMPOUND, sizeof(SelRow));
    if (arr < 0 || t < 0 || H5Tinsert(t, "query", offsetof(SelRow, query), H5T_NATIVE_INT64) < 0 ||
        H5Tinsert(t, "near_tie", offsetof(SelRow, near_tie), H5T_NATIVE_INT32) < 0 ||
        H5Tinsert(t, "n_only_got", offsetof(SelRow, n_only_got), H5T_NATIVE_INT32) < 0 ||
        H5Tinsert(t, "n_only_want", offsetof(SelRow, n_only_want), H5T_NATIVE_INT32) < 0 ||
        H5Tinsert(t, "only_got", offsetof(SelRow, only_got), arr) < 0 ||
        H5Tinsert(t, "only_want", offsetof(SelRow, only_want), arr) < 0 ||
        H5Tinsert(t, "margin", offsetof(SelRow, margin), H5T_NATIVE_DOUBLE) < 0) {
        if (t >= 0)
            H5Tclose(t);
        t = -1;
    }
    if (arr >= 0)
        H5Tclose(arr);
    return t;
}

AsVerdict as_verdict_by_name(const char *name)
{
    for (int v = 0; v < AS_V_COUNT; v++)
        if (!strcmp(name, as_verdict_name((AsVerdict)v)))
            return (AsVerdict)v;
    return AS_V_COUNT;
}

static int put_seldiffs(hid_t g, const AsTensorDiff *d, AsH5At at, AsError *err)
{
    SelRow rows[AS_MAX_SELDIFFS];
    int n = d->n_seldiffs < AS_MAX_SELDIFFS ? d->n_seldiffs : AS_MAX_SELDIFFS;
    memset(rows, 0, sizeof rows);
    for (int i = 0; i < n; i++) {
        const AsSelDiff *s = &d->seldiff[i];
        rows[i] = (SelRow){.query = s->query, .near_tie = s->near_tie, .n_only_got = s->n_only_got,
                           .n_only_want = s->n_only_want, .margin = s->margin};
        memcpy(rows[i].only_got, s->only_got, sizeof s->only_got);
        memcpy(rows[i].only_want, s->only_want, sizeof s->only_want);
    }
    hid_t mt = sel_type(), ft = mt >= 0 ? H5Tcopy(mt) : -1;
    int rc = 0;
    if (ft < 0 || H5Tpack(ft) < 0) {
        rc = as_h5_fail(err, AS_ERUNTIME, at, "seldiffs: cannot make the compound type");
    } else {
        hsize_t dims = (hsize_t)n;
        hid_t ds = as_h5_new_dataset(g, "seldiffs", ft, 1, &dims, NULL, at, err);
        if (ds < 0)
            rc = AS_ERUNTIME;
        else if (H5Dwrite(ds, mt, H5S_ALL, H5S_ALL, H5P_DEFAULT, rows) < 0)
            rc = as_h5_fail(err, AS_ERUNTIME, at, "seldiffs: cannot write");
        if (ds >= 0)
            H5Dclose(ds);
    }
    if (ft >= 0)
        H5Tclose(ft);
    if (mt >= 0)
        H5Tclose(mt);
    return rc;
}

static int put_tensor(hid_t diff, AsTensorId id, const AsTensorDiff *d, char *path, size_t plen, AsH5At at,
                      AsError *err)
{
    const char *name = as_tensor_desc[id].name;
    size_t base = strlen(path);
    snprintf(path + base, plen - base, "/%s", name);
    hid_t g = as_h5_new_group(diff, name, at, err);
    if (g < 0)
        return AS_ERUNTIME;
    int rc = as_h5_put_str(g, "verdict", as_verdict_name(d->verdict), at, err);
    for (size_t i = 0; !rc && i < N_OF(i64_field); i++)
        rc = as_h5_put_i64(g, i64_field[i].name, *(const int64_t *)((const char *)d + i64_field[i].off), at, err);
    for (size_t i = 0; !rc && i < N_OF(f64_field); i++)
        rc = as_h5_put_f64(g, f64_field[i].name, *(const double *)((const char *)d + f64_field[i].off), at, err);
    for (size_t i = 0; !rc && i < N_OF(flag_field); i++)
        rc = as_h5_put_i64(g, flag_field[i].name, *(const bool *)((const char *)d + flag_field[i].off), at, err);
    int ndim = as_tensor_desc[id].ndim;
    char where[128] = "";
    if (d->worst >= 0)
        as_format_coord(id, d->worst_coord, ndim, where, sizeof where);
    if (!rc && d->n_flips_wide) /* optional: flips whose inputs differed by more than one ulp */
        rc = as_h5_put_i64(g, "n_flips_wide", d->n_flips_wide, at, err);
    if (!rc && d->explained) { /* optional: only where a mismatch was explained (driver/explain.h) */
        rc = as_h5_put_i64(g, "explained", 1, at, err);
        if (!rc)
            rc = as_h5_put_f64(g, "explained_max_abs", d->explained_max_abs, at, err);
    }
    /* optional: why it is not a pass (driver/compare.h AsCause), where it was inherited from, tie-order */
    if (!rc && d->cause != AS_CAUSE_NONE)
        rc = as_h5_put_str(g, "cause", as_cause_name(d->cause), at, err);
    if (!rc && d->cause == AS_CAUSE_INHERITED && d->from.layer >= 0) {
        int64_t from[2] = {d->from.layer, d->from.step};
        rc = as_h5_put_i64s(g, "from", from, 2, at, err);
    }
    if (!rc && d->n_tie_order) {
        rc = as_h5_put_i64(g, "n_tie_order", d->n_tie_order, at, err);
        if (!rc)
            rc = as_h5_put_str(g, "tie_order", as_tie_fit_name(d->tie_fit), at, err);
    }
    if (!rc)
        rc = as_h5_put_i64s(g, "worst_coord", d->worst_coord, ndim, at, err);
    if (!rc)
        rc = as_h5_put_str(g, "worst_at", where, at, err);
    if (!rc && d->n_seldiffs > 0)
        rc = put_seldiffs(g, d, at, err);
    H5Gclose(g);
    path[base] = '\0';
    return rc;
}

int as_dump_diff_put(hid_t layer_group, const AsLayerDiff *d, const char *got_side, const char *want_side,
                     AsH5At at0, AsError *err)
{
    char path[512];
    snprintf(path, sizeof path, "%s/diff", at0.path);
    AsH5At at = {at0.file, path};
    hid_t g = as_h5_new_group(layer_group, "diff", at0, err);
    if (g < 0)
        return AS_ERUNTIME;
    int rc = as_h5_put_str(g, "verdict", as_verdict_name(d->verdict), at, err);
    if (!rc)
        rc = as_h5_put_str(g, "worst_tensor",
                           (unsigned)d->worst_tensor < AS_T_COUNT ? as_tensor_desc[d->worst_tensor].name : "", at, err);
    if (!rc)
        rc = as_h5_put_str(g, "got_side", got_side ? got_side : "", at, err);
    if (!rc)
        rc = as_h5_put_str(g, "want_side", want_side ? want_side : "", at, err);
    if (!rc && d->verdict > AS_V_PASS) { /* optional: the first tensor out of rule and why */
        char why[160];
        AsTensorId c = as_layer_cause(d, why, sizeof why);
        if (c != AS_T_COUNT)
            rc = as_h5_put_str(g, "cause_tensor", as_tensor_desc[c].name, at, err);
        if (!rc && c != AS_T_COUNT)
            rc = as_h5_put_str(g, "cause", why, at, err);
    }
    for (int i = 0; !rc && i < AS_T_COUNT; i++)
        if (d->t[i].verdict != AS_V_NOT_RUN && d->t[i].verdict != AS_V_ABSENT)
            rc = put_tensor(g, (AsTensorId)i, &d->t[i], path, sizeof path, at, err);
    H5Gclose(g);
    return rc;
}

/* ---- reading ------------------------------------------------------------------------- */

static int get_verdict(hid_t obj, AsVerdict *v, AsH5At at, AsError *err)
{
    char *s;
    int rc = as_h5_get_str(obj, "verdict", 32, &s, at, err);
    if (rc)
        return rc;
    *v = as_verdict_by_name(s);
    if (*v == AS_V_COUNT)
        rc = as_err(err, AS_EBADINPUT, "dump %s: %s: verdict '%s' is not one of the format's", at.file, at.path, s);
    free(s);
    return rc;
}

int as_dump_diff_peek(hid_t g, AsVerdict *v, AsTensorId *worst, AsH5At at, AsError *err)
{
    int rc = get_verdict(g, v, at, err);
    char *s = NULL;
    if (!rc)
        rc = as_h5_get_str(g, "worst_tensor", 64, &s, at, err);
    if (!rc) {
        *worst = *s ? as_tensor_by_name(s) : AS_T_COUNT;
        if (*s && *worst == AS_T_COUNT)
            rc = as_err(err, AS_EBADINPUT, "dump %s: %s: worst_tensor '%s' is not a tensor of the format", at.file,
                        at.path, s);
    }
    free(s);
    return rc;
}

static int get_seldiffs(hid_t g, AsTensorDiff *d, AsH5At at, AsError *err)
{
    int has = as_h5_has(g, "seldiffs", H5O_TYPE_DATASET, at, err);
    if (has <= 0)
        return has < 0 ? AS_EBADINPUT : 0;
    hid_t ds = H5Dopen2(g, "seldiffs", H5P_DEFAULT);
    hid_t sp = ds >= 0 ? H5Dget_space(ds) : -1;
    hid_t ft = ds >= 0 ? H5Dget_type(ds) : -1;
    hid_t mt = sel_type();
    int rc = 0;
    SelRow rows[AS_MAX_SELDIFFS];
    hssize_t n = sp >= 0 ? H5Sget_simple_extent_npoints(sp) : -1;
    if (ds < 0 || sp < 0 || ft < 0 || mt < 0)
        rc = as_h5_fail(err, AS_EBADINPUT, at, "seldiffs: cannot open");
    else if (H5Tget_class(ft) != H5T_COMPOUND || H5Sget_simple_extent_ndims(sp) != 1 || n < 0 ||
             n > AS_MAX_SELDIFFS)
        rc = as_err(err, AS_EBADINPUT, "dump %s: %s/seldiffs: must be a compound array of at most %d rows", at.file,
                    at.path, AS_MAX_SELDIFFS);
    else if (n > 0 && H5Dread(ds, mt, H5S_ALL, H5S_ALL, H5P_DEFAULT, rows) < 0)
        rc = as_h5_fail(err, AS_EBADINPUT, at, "seldiffs: cannot read (fields must match the format)");
    for (hssize_t i = 0; !rc && i < n; i++) {
        const SelRow *r = &rows[i];
        if (r->n_only_got < 0 || r->n_only_want < 0) {
            rc = as_err(err, AS_EBADINPUT, "dump %s: %s/seldiffs: negative count in row %lld", at.file, at.path,
                        (long long)i);
            break;
        }
        AsSelDiff *s = &d->seldiff[i];
        *s = (AsSelDiff){.query = r->query, .near_tie = r->near_tie != 0, .n_only_got = r->n_only_got,
                         .n_only_want = r->n_only_want, .margin = r->margin};
        memcpy(s->only_got, r->only_got, sizeof s->only_got);
        memcpy(s->only_want, r->only_want, sizeof s->only_want);
    }
    if (!rc)
        d->n_seldiffs = (int)n;
    if (mt >= 0)
        H5Tclose(mt);
    if (ft >= 0)
        H5Tclose(ft);
    if (sp >= 0)
        H5Sclose(sp);
    if (ds >= 0)
        H5Dclose(ds);
    return rc;
}

static int get_tensor(hid_t diff, AsTensorId id, AsTensorDiff *d, const char *dpath, AsH5At at0, AsError *err)
{
    char path[512];
    snprintf(path, sizeof path, "%s/%s", dpath, as_tensor_desc[id].name);
    AsH5At at = {at0.file, path};
    hid_t g = H5Gopen2(diff, as_tensor_desc[id].name, H5P_DEFAULT);
    if (g < 0)
        return as_h5_fail(err, AS_EBADINPUT, at, "cannot open");
    memset(d, 0, sizeof *d);
    int rc = get_verdict(g, &d->verdict, at, err);
    for (size_t i = 0; !rc && i < N_OF(i64_field); i++)
        rc = as_h5_get_i64(g, i64_field[i].name, (int64_t *)((char *)d + i64_field[i].off), at, err);
    for (size_t i = 0; !rc && i < N_OF(f64_field); i++)
        rc = as_h5_get_f64(g, f64_field[i].name, (double *)((char *)d + f64_field[i].off), at, err);
    for (size_t i = 0; !rc && i < N_OF(flag_field); i++) {
        int64_t v = 0;
        rc = as_h5_get_i64(g, flag_field[i].name, &v, at, err);
        *(bool *)((char *)d + flag_field[i].off) = v != 0;
    }
    if (!rc && as_h5_has_attr(g, "n_flips_wide"))
        rc = as_h5_get_i64(g, "n_flips_wide", &d->n_flips_wide, at, err);
    if (!rc && as_h5_has_attr(g, "explained")) {
        int64_t v = 0;
        rc = as_h5_get_i64(g, "explained", &v, at, err);
        d->explained = v != 0;
        if (!rc)
            rc = as_h5_get_f64(g, "explained_max_abs", &d->explained_max_abs, at, err);
    }
    d->from = (AsProvenance){-1, -1};
    if (!rc && as_h5_has_attr(g, "cause")) {
        char *c = NULL;
        rc = as_h5_get_str(g, "cause", 32, &c, at, err);
        int k = AS_CAUSE_COUNT;
        for (int i = 0; !rc && i < AS_CAUSE_COUNT; i++)
            if (!strcmp(c, as_cause_name((AsCause)i)))
                k = i;
        if (!rc && k == AS_CAUSE_COUNT)
            rc = as_err(err, AS_EBADINPUT, "dump %s: %s: cause '%s' is not one of the format's", at.file, at.path, c);
        d->cause = rc ? AS_CAUSE_NONE : (AsCause)k;
        free(c);
    }
    if (!rc && as_h5_has_attr(g, "from")) {
        int64_t f[2];
        rc = as_h5_get_i64s(g, "from", f, 2, at, err);
        if (!rc && (f[0] < -1 || f[0] >= AS_MAX_LAYERS || f[1] < -1 || f[1] > INT32_MAX))
            rc = as_err(err, AS_EBADINPUT, "dump %s: %s: from = [%lld, %lld] is not a [layer, step] pair", at.file,
                        at.path, (long long)f[0], (long long)f[1]);
        if (!rc)
            d->from = (AsProvenance){(int)f[0], (int)f[1]};
    }
    if (!rc && as_h5_has_attr(g, "n_tie_order")) {
        rc = as_h5_get_i64(g, "n_tie_order", &d->n_tie_order, at, err);
        char *c = NULL;
        if (!rc)
            rc = as_h5_get_str(g, "tie_order", 16, &c, at, err);
        AsTieOrder t = AS_TIES_CPU;
        if (!rc && strcmp(c, "none") && as_tie_order_parse(c, &t))
            rc = as_err(err, AS_EBADINPUT, "dump %s: %s: tie_order '%s' (cpu, lowest, highest or none)", at.file,
                        at.path, c);
        else if (!rc)
            d->tie_fit = strcmp(c, "none") ? (AsTieFit)(1u << t) : 0;
        free(c);
    }
    if (!rc)
        rc = as_h5_get_i64s(g, "worst_coord", d->worst_coord, as_tensor_desc[id].ndim, at, err);
    if (!rc)
        rc = get_seldiffs(g, d, at, err);
    H5Gclose(g);
    return rc;
}

int as_dump_diff_get(hid_t g, AsLayerDiff *d, char got_side[64], char want_side[64], AsH5At at, AsError *err)
{
    memset(d, 0, sizeof *d);
    for (int i = 0; i < AS_T_COUNT; i++)
        d->t[i].verdict = AS_V_ABSENT, d->t[i].worst = -1;
    int rc = as_dump_diff_peek(g, &d->verdict, &d->worst_tensor, at, err);
    const char *side_attr[2] = {"got_side", "want_side"};
    char *side_out[2] = {got_side, want_side};
    for (int i = 0; i < 2 && !rc; i++) {
        char *s = NULL;
        rc = as_h5_get_str(g, side_attr[i], 63, &s, at, err);
        if (!rc && side_out[i])
            snprintf(side_out[i], 64, "%s", s);
        free(s);
    }
    char **names = NULL;
    int n = 0;
    if (!rc)
        rc = as_h5_list(g, 4 * AS_T_COUNT, &names, &n, at, err);
    for (int i = 0; !rc && i < n; i++) {
        AsTensorId id = as_tensor_by_name(names[i]);
        if (id == AS_T_COUNT) {
            rc = as_err(err, AS_EBADINPUT, "dump %s: %s/%s: not a tensor of the format", at.file, at.path, names[i]);
            break;
        }
        int has = as_h5_has(g, names[i], H5O_TYPE_GROUP, at, err);
        rc = has < 0 ? AS_EBADINPUT : get_tensor(g, id, &d->t[id], at.path, at, err);
    }
    as_h5_free_list(names, n);
    return rc;
}
