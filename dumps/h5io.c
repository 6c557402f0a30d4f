/* HDF5 helpers for the dumps. HDF5 clears its error stack at the start of every API call, so a
 * failure's reason is read (as_h5_fail) before any handle is closed. */
#include "dumps/h5io.h"

#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define CHUNK_BYTES (1u << 20) /* chunks up to ~1 MiB */
#define DEFLATE_LEVEL 1        /* fast; shuffle does most of the work on floats */

void as_h5_init(void)
{
    static bool done;
    if (!done) {
        /* no library shut-down at exit: after a failed write (a full disk) HDF5 1.10 keeps the
         * file half closed, and its exit handler then crashed flushing it again (exit 3 became
         * a SIGSEGV). Every file attnscope writes is committed or unlinked explicitly. */
        H5dont_atexit();
        H5Eset_auto2(H5E_DEFAULT, NULL, NULL);
        /* a file naming an unknown filter must not make HDF5 load shared libraries from
         * HDF5_PLUGIN_PATH: attnscope reads the built-in filters only */
        H5PLset_loading_state(0);
        done = true;
    }
}

typedef struct {
    char *buf;
    size_t n;
} Reason;

static herr_t first_reason(unsigned n, const H5E_error2_t *e, void *data)
{
    Reason *r = data;
    if (n == 0 && e->desc)
        snprintf(r->buf, r->n, "%s", e->desc); /* walking upward: 0 is the most specific */
    return 0;
}

void as_h5_reason(char *buf, size_t n)
{
    if (!n)
        return;
    buf[0] = '\0';
    Reason r = {buf, n};
    H5Ewalk2(H5E_DEFAULT, H5E_WALK_UPWARD, first_reason, &r);
}

int as_h5_fail(AsError *err, int code, AsH5At at, const char *what, ...)
{
    char reason[200], text[300];
    as_h5_reason(reason, sizeof reason);
    va_list ap;
    va_start(ap, what);
    vsnprintf(text, sizeof text, what, ap);
    va_end(ap);
    return as_err(err, code, "dump %s: %s: %s%s%s%s", at.file, at.path && *at.path ? at.path : "/", text,
                  reason[0] ? " (" : "", reason, reason[0] ? ")" : "");
}

static void close_all(hid_t a, hid_t s, hid_t t)
{
    if (a >= 0)
        H5Aclose(a);
    if (s >= 0)
        H5Sclose(s);
    if (t >= 0)
        H5Tclose(t);
}

/* ---- writing ------------------------------------------------------------------------- */

static int put_attr(hid_t obj, const char *name, hid_t ftype, hid_t mtype, hid_t space, const void *v, AsH5At at,
                    AsError *err)
{
    if (space < 0)
        return as_h5_fail(err, AS_ERUNTIME, at, "attribute '%s': cannot make its dataspace", name);
    hid_t a = H5Acreate2(obj, name, ftype, space, H5P_DEFAULT, H5P_DEFAULT);
    if (a < 0 || H5Awrite(a, mtype, v) < 0) {
        int rc = as_h5_fail(err, AS_ERUNTIME, at, "attribute '%s': cannot write", name);
        close_all(a, space, -1);
        return rc;
    }
    close_all(a, space, -1);
    return 0;
}

/* Fixed-length UTF-8: the text lies in the (checksummed) object header; variable-length
 * strings would live in the global heap, which has no checksum, and HDF5 1.10 crashes on a
 * damaged one. */
int as_h5_put_str(hid_t obj, const char *name, const char *v, AsH5At at, AsError *err)
{
    const char *s = v ? v : "";
    size_t len = strlen(s);
    hid_t t = H5Tcopy(H5T_C_S1);
    if (t < 0 || H5Tset_size(t, len ? len : 1) < 0 || H5Tset_strpad(t, H5T_STR_NULLPAD) < 0 ||
        H5Tset_cset(t, H5T_CSET_UTF8) < 0) {
        int rc = as_h5_fail(err, AS_ERUNTIME, at, "attribute '%s': cannot make a string type", name);
        close_all(-1, -1, t);
        return rc;
    }
    char nul = '\0';
    int rc = put_attr(obj, name, t, t, H5Screate(H5S_SCALAR), len ? s : &nul, at, err);
    H5Tclose(t);
    return rc;
}

int as_h5_put_i64(hid_t obj, const char *name, int64_t v, AsH5At at, AsError *err)
{
    return put_attr(obj, name, H5T_STD_I64LE, H5T_NATIVE_INT64, H5Screate(H5S_SCALAR), &v, at, err);
}

int as_h5_put_i64s(hid_t obj, const char *name, const int64_t *v, int n, AsH5At at, AsError *err)
{
    hsize_t d = (hsize_t)n;
    return put_attr(obj, name, H5T_STD_I64LE, H5T_NATIVE_INT64, H5Screate_simple(1, &d, NULL), v, at, err);
}

int as_h5_put_f64(hid_t obj, const char *name, double v, AsH5At at, AsError *err)
{
    return put_attr(obj, name, H5T_IEEE_F64LE, H5T_NATIVE_DOUBLE, H5Screate(H5S_SCALAR), &v, at, err);
}

hid_t as_h5_new_group(hid_t loc, const char *name, AsH5At at, AsError *err)
{
    hid_t g = H5Gcreate2(loc, name, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
    if (g < 0)
        as_h5_fail(err, AS_ERUNTIME, at, "cannot create group '%s'", name);
    return g;
}

/* Chunk shape: the whole tensor, outer dims halved until a chunk fits in CHUNK_BYTES. */
static void chunk_shape(int rank, const hsize_t *dims, size_t esz, hsize_t *chunk)
{
    for (int i = 0; i < rank; i++)
        chunk[i] = dims[i] > 0 ? dims[i] : 1;
    for (int i = 0; i < rank; i++) {
        for (;;) {
            hsize_t bytes = esz;
            for (int j = 0; j < rank; j++)
                bytes *= chunk[j];
            if (bytes <= CHUNK_BYTES || chunk[i] == 1)
                break;
            chunk[i] = (chunk[i] + 1) / 2;
        }
    }
}

hid_t as_h5_new_dataset(hid_t loc, const char *name, hid_t ftype, int rank, const hsize_t *dims,
                        const hsize_t *maxdims, AsH5At at, AsError *err)
{
    hsize_t n = 1;
    for (int i = 0; i < rank; i++)
        n *= dims[i];
    hid_t space = H5Screate_simple(rank, dims, maxdims);
    hid_t dcpl = H5Pcreate(H5P_DATASET_CREATE);
    hid_t d = -1;
    if (space < 0 || dcpl < 0)
        goto fail;
    if (n > 0 || maxdims) {
        hsize_t chunk[3] = {1, 1, 1};
        chunk_shape(rank, dims, H5Tget_size(ftype), chunk);
        if (H5Pset_chunk(dcpl, rank, chunk) < 0)
            goto fail;
        if (H5Zfilter_avail(H5Z_FILTER_DEFLATE) > 0) {
            if (H5Pset_shuffle(dcpl) < 0 || H5Pset_deflate(dcpl, DEFLATE_LEVEL) < 0)
                goto fail;
        }
    }
    d = H5Dcreate2(loc, name, ftype, space, H5P_DEFAULT, dcpl, H5P_DEFAULT);
    if (d < 0)
        goto fail;
    H5Pclose(dcpl);
    H5Sclose(space);
    return d;
fail:
    as_h5_fail(err, AS_ERUNTIME, at, "cannot create dataset '%s'", name);
    if (dcpl >= 0)
        H5Pclose(dcpl);
    if (space >= 0)
        H5Sclose(space);
    return -1;
}

/* ---- reading ------------------------------------------------------------------------- */

int as_h5_has(hid_t loc, const char *name, H5O_type_t want, AsH5At at, AsError *err)
{
    htri_t e = H5Lexists(loc, name, H5P_DEFAULT);
    if (e < 0)
        return -as_h5_fail(err, AS_EBADINPUT, at, "cannot look up '%s'", name);
    if (e == 0)
        return 0;
    H5L_info_t li;
    if (H5Lget_info(loc, name, &li, H5P_DEFAULT) < 0)
        return -as_h5_fail(err, AS_EBADINPUT, at, "cannot read link '%s'", name);
    if (li.type != H5L_TYPE_HARD) /* soft / external links could point anywhere, even other files */
        return -as_err(err, AS_EBADINPUT, "dump %s: %s/%s: is a soft or external link (the format has none)",
                       at.file, at.path, name);
    H5O_info_t oi;
    if (H5Oget_info_by_name2(loc, name, &oi, H5O_INFO_BASIC, H5P_DEFAULT) < 0)
        return -as_h5_fail(err, AS_EBADINPUT, at, "cannot read object '%s'", name);
    if (oi.type != want)
        return -as_err(err, AS_EBADINPUT, "dump %s: %s/%s: is a %s, the format says %s", at.file, at.path, name,
                       oi.type == H5O_TYPE_GROUP ? "group" : oi.type == H5O_TYPE_DATASET ? "dataset" : "named type",
                       want == H5O_TYPE_GROUP ? "group" : "dataset");
    return 1;
}

bool as_h5_has_attr(hid_t obj, const char *name) { return H5Aexists(obj, name) > 0; }

/* Opens attribute name of obj with one element of class cls (n elements for arrays). */
static hid_t open_attr(hid_t obj, const char *name, H5T_class_t cls, hssize_t n, hid_t *type, AsH5At at, AsError *err)
{
    static const char *const cls_name[] = {[H5T_INTEGER] = "an integer", [H5T_FLOAT] = "a float",
                                           [H5T_STRING] = "a string"};
    *type = -1;
    htri_t e = H5Aexists(obj, name);
    if (e <= 0) {
        as_err(err, AS_EBADINPUT, "dump %s: %s: attribute '%s' is missing", at.file, at.path, name);
        return -1;
    }
    hid_t a = H5Aopen(obj, name, H5P_DEFAULT);
    hid_t t = a >= 0 ? H5Aget_type(a) : -1;
    hid_t s = a >= 0 ? H5Aget_space(a) : -1;
    if (a < 0 || t < 0 || s < 0) {
        as_h5_fail(err, AS_EBADINPUT, at, "attribute '%s': cannot open", name);
        close_all(a, s, t);
        return -1;
    }
    hssize_t np = H5Sget_simple_extent_npoints(s);
    int rank = H5Sget_simple_extent_ndims(s);
    if (H5Tget_class(t) != cls || np != n || rank > 1) {
        as_err(err, AS_EBADINPUT, "dump %s: %s: attribute '%s' must be %s%s (%lld element%s)", at.file, at.path,
               name, cls_name[cls], n > 1 ? " array" : "", (long long)n, n > 1 ? "s" : "");
        close_all(a, s, t);
        return -1;
    }
    H5Sclose(s);
    *type = t;
    return a;
}

int as_h5_get_str(hid_t obj, const char *name, size_t max_len, char **out, AsH5At at, AsError *err)
{
    *out = NULL;
    hid_t t;
    hid_t a = open_attr(obj, name, H5T_STRING, 1, &t, at, err);
    if (a < 0)
        return AS_EBADINPUT;
    int rc = 0;
    hid_t mt = H5Tcopy(t);
    htri_t vl = H5Tis_variable_str(t);
    if (mt < 0 || vl < 0) {
        rc = as_h5_fail(err, AS_EBADINPUT, at, "attribute '%s': cannot read its string type", name);
    } else if (vl) {
        char *s = NULL;
        if (H5Aread(a, mt, &s) < 0) {
            rc = as_h5_fail(err, AS_EBADINPUT, at, "attribute '%s': cannot read", name);
        } else {
            size_t len = s ? strlen(s) : 0;
            if (len > max_len)
                rc = as_err(err, AS_EBADINPUT, "dump %s: %s: attribute '%s' is %zu bytes long (limit %zu)", at.file,
                            at.path, name, len, max_len);
            else if (!(*out = strdup(s ? s : "")))
                rc = as_err(err, AS_ERUNTIME, "out of memory");
            H5free_memory(s);
        }
    } else {
        size_t sz = H5Tget_size(t);
        char *buf = sz <= max_len ? calloc(1, sz + 1) : NULL;
        if (sz > max_len)
            rc = as_err(err, AS_EBADINPUT, "dump %s: %s: attribute '%s' is %zu bytes long (limit %zu)", at.file,
                        at.path, name, sz, max_len);
        else if (!buf)
            rc = as_err(err, AS_ERUNTIME, "out of memory");
        else if (H5Aread(a, mt, buf) < 0)
            rc = as_h5_fail(err, AS_EBADINPUT, at, "attribute '%s': cannot read", name);
        if (rc)
            free(buf);
        else
            *out = buf;
    }
    if (mt >= 0)
        H5Tclose(mt);
    close_all(a, -1, t);
    return rc;
}

static int get_numbers(hid_t obj, const char *name, H5T_class_t cls, hid_t mtype, void *out, int n, AsH5At at,
                       AsError *err)
{
    hid_t t;
    hid_t a = open_attr(obj, name, cls, n, &t, at, err);
    if (a < 0)
        return AS_EBADINPUT;
    int rc = 0;
    if (H5Aread(a, mtype, out) < 0)
        rc = as_h5_fail(err, AS_EBADINPUT, at, "attribute '%s': cannot read", name);
    close_all(a, -1, t);
    return rc;
}

int as_h5_get_i64(hid_t obj, const char *name, int64_t *out, AsH5At at, AsError *err)
{
    return get_numbers(obj, name, H5T_INTEGER, H5T_NATIVE_INT64, out, 1, at, err);
}

int as_h5_get_int(hid_t obj, const char *name, int64_t lo, int64_t hi, int *out, AsH5At at, AsError *err)
{
    int64_t v;
    int rc = as_h5_get_i64(obj, name, &v, at, err);
    if (rc)
        return rc;
    if (v < lo || v > hi)
        return as_err(err, AS_EBADINPUT, "dump %s: %s: attribute '%s' = %lld is out of range [%lld, %lld]", at.file,
                      at.path, name, (long long)v, (long long)lo, (long long)hi);
    *out = (int)v;
    return 0;
}

int as_h5_get_i64s(hid_t obj, const char *name, int64_t *out, int n, AsH5At at, AsError *err)
{
    return get_numbers(obj, name, H5T_INTEGER, H5T_NATIVE_INT64, out, n, at, err);
}

int as_h5_get_f64(hid_t obj, const char *name, double *out, AsH5At at, AsError *err)
{
    return get_numbers(obj, name, H5T_FLOAT, H5T_NATIVE_DOUBLE, out, 1, at, err);
}

int as_h5_check_storage(hid_t ds, size_t esize, AsH5At at, AsError *err)
{
    hid_t sp = H5Dget_space(ds), dcpl = H5Dget_create_plist(ds);
    hssize_t n = sp >= 0 ? H5Sget_simple_extent_npoints(sp) : -1;
    int rc = 0;
    if (n < 0 || dcpl < 0) {
        rc = as_h5_fail(err, AS_EBADINPUT, at, "cannot read how the data is stored");
        goto out;
    }
    H5D_layout_t lay = H5Pget_layout(dcpl);
    if (lay != H5D_COMPACT && lay != H5D_CONTIGUOUS && lay != H5D_CHUNKED) {
        rc = as_err(err, AS_EBADINPUT, "dump %s: %s: a virtual dataset (its data would come from other files)",
                    at.file, at.path);
        goto out;
    }
    if (H5Pget_external_count(dcpl) != 0) {
        rc = as_err(err, AS_EBADINPUT, "dump %s: %s: its data lies in external files (the format keeps it in the file)",
                    at.file, at.path);
        goto out;
    }
    int nf = H5Pget_nfilters(dcpl);
    for (int i = 0; i < nf && !rc; i++) {
        unsigned flags = 0, cfg = 0;
        size_t nel = 0;
        char name[64] = "";
        H5Z_filter_t id = H5Pget_filter2(dcpl, (unsigned)i, &flags, &nel, NULL, sizeof name, name, &cfg);
        if (id != H5Z_FILTER_DEFLATE && id != H5Z_FILTER_SHUFFLE && id != H5Z_FILTER_FLETCHER32)
            rc = as_err(err, AS_EBADINPUT,
                        "dump %s: %s: filter %d (%.40s) is not one attnscope reads (deflate, shuffle, fletcher32; "
                        "h5repack -f GZIP=1 rewrites it)", at.file, at.path, (int)id, name[0] ? name : "unknown");
    }
    uint64_t logical = (uint64_t)n * esize;
    if (!rc && lay == H5D_CHUNKED) {
        hsize_t cd[H5S_MAX_RANK];
        int rank = H5Pget_chunk(dcpl, H5S_MAX_RANK, cd);
        uint64_t bytes = esize;
        for (int i = 0; i < rank && bytes <= AS_H5_MAX_CHUNK; i++)
            bytes = cd[i] && bytes > AS_H5_MAX_CHUNK / cd[i] ? AS_H5_MAX_CHUNK + 1 : bytes * cd[i];
        if (rank < 0 || bytes > AS_H5_MAX_CHUNK)
            rc = as_err(err, AS_EBADINPUT, "dump %s: %s: chunks of more than %llu MiB", at.file, at.path,
                        (unsigned long long)(AS_H5_MAX_CHUNK >> 20));
    }
    if (!rc) {
        uint64_t stored = H5Dget_storage_size(ds);
        if (logical > AS_H5_EXPANSION_SLACK && (logical - AS_H5_EXPANSION_SLACK) / AS_H5_MAX_EXPANSION > stored)
            rc = as_err(err, AS_EBADINPUT,
                        "dump %s: %s: %llu bytes of data from %llu stored (more than %d times: missing or forged "
                        "chunks)", at.file, at.path, (unsigned long long)logical, (unsigned long long)stored,
                        AS_H5_MAX_EXPANSION);
    }
out:
    if (dcpl >= 0)
        H5Pclose(dcpl);
    if (sp >= 0)
        H5Sclose(sp);
    return rc;
}

void as_h5_free_list(char **names, int n)
{
    if (!names)
        return;
    for (int i = 0; i < n; i++)
        free(names[i]);
    free(names);
}

/* The names of a group, collected in one pass (by name, increasing): reading entry i by index costs
 * a walk of the group's storage each time in some layouts, n^2 for a group of n links. */
typedef struct {
    char **v;
    hsize_t cap, n;
    bool too_long, no_memory;
} ListCtx;

static herr_t list_one(const char *name, ListCtx *c)
{
    size_t len = strlen(name);
    if (len > 255) {
        c->too_long = true;
        return 1;
    }
    if (c->n >= c->cap || !(c->v[c->n] = malloc(len + 1))) {
        c->no_memory = c->n < c->cap;
        return 1; /* more entries than the group said: stop, refused below */
    }
    memcpy(c->v[c->n++], name, len + 1);
    return 0;
}

#if H5_VERSION_GE(1, 12, 0)
static herr_t list_cb(hid_t g, const char *name, const H5L_info2_t *li, void *ctx)
#else
static herr_t list_cb(hid_t g, const char *name, const H5L_info_t *li, void *ctx)
#endif
{
    (void)g, (void)li;
    return list_one(name, ctx);
}

int as_h5_list(hid_t group, int max, char ***names, int *n, AsH5At at, AsError *err)
{
    *names = NULL;
    *n = 0;
    H5G_info_t gi;
    if (H5Gget_info(group, &gi) < 0)
        return as_h5_fail(err, AS_EBADINPUT, at, "cannot list the group");
    if (gi.nlinks > (hsize_t)max)
        return as_err(err, AS_EBADINPUT, "dump %s: %s: %llu entries, more than the format allows (%d)", at.file,
                      at.path, (unsigned long long)gi.nlinks, max);
    ListCtx c = {.cap = gi.nlinks};
    if (!(c.v = calloc(gi.nlinks ? gi.nlinks : 1, sizeof *c.v)))
        return as_err(err, AS_ERUNTIME, "out of memory");
    hsize_t idx = 0;
#if H5_VERSION_GE(1, 12, 0)
    herr_t e = H5Literate2(group, H5_INDEX_NAME, H5_ITER_INC, &idx, list_cb, &c);
#else
    herr_t e = H5Literate(group, H5_INDEX_NAME, H5_ITER_INC, &idx, list_cb, &c);
#endif
    int rc = 0;
    if (c.no_memory)
        rc = as_err(err, AS_ERUNTIME, "out of memory");
    else if (c.too_long)
        rc = as_err(err, AS_EBADINPUT, "dump %s: %s: an entry name of more than 255 bytes", at.file, at.path);
    else if (e < 0 || c.n != gi.nlinks)
        rc = as_h5_fail(err, AS_EBADINPUT, at, "cannot read its entries (%llu of %llu)", (unsigned long long)c.n,
                        (unsigned long long)gi.nlinks);
    if (rc) {
        as_h5_free_list(c.v, (int)c.n);
        return rc;
    }
    *names = c.v;
    *n = (int)gi.nlinks;
    return 0;
}
