/* Layer inputs from an HDF5 file written elsewhere. HDF5 follows a damaged file's structures
 * blindly and can crash doing so, so both the look-up and the read run in a child process
 * (dumps/h5guard.h); only links inside the file are followed, and the dataset's storage is
 * checked (dumps/h5io.h) before its data is read. */
#include "driver/inputs_file.h"

#include <hdf5.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dumps/h5guard.h"
#include "dumps/h5io.h"
#include "ref/numerics.h"
#include "model/infile.h"

typedef struct {
    const char *path, *name;
    int dim, max_tokens;
    char ds_name[256];  /* found by the probe */
    hsize_t rows;
    float *data;        /* shared with the child: [rows][dim] */
} Job;

/* H5Literate callback: the first 2-D floating dataset at the root reached by a hard link. */
static herr_t find_2d(hid_t grp, const char *name, const H5L_info_t *info, void *ctx)
{
    Job *j = ctx;
    H5O_info_t oi;
    if (info->type != H5L_TYPE_HARD || strlen(name) >= sizeof j->ds_name ||
        H5Oget_info_by_name2(grp, name, &oi, H5O_INFO_BASIC, H5P_DEFAULT) < 0 || oi.type != H5O_TYPE_DATASET)
        return 0;
    hid_t ds = H5Dopen2(grp, name, H5P_DEFAULT);
    if (ds < 0)
        return 0;
    hid_t sp = H5Dget_space(ds), ty = H5Dget_type(ds);
    int ok = H5Sget_simple_extent_ndims(sp) == 2 && H5Tget_class(ty) == H5T_FLOAT;
    H5Tclose(ty), H5Sclose(sp), H5Dclose(ds);
    if (!ok)
        return 0;
    snprintf(j->ds_name, sizeof j->ds_name, "%s", name);
    return 1;
}

/* Whether every component of path is a hard link (soft and external links could point at
 * other files); 1 yes, 0 a component is missing, -1 a link of another kind. */
static int hard_path(hid_t f, const char *path)
{
    char prefix[256];
    size_t n = strlen(path);
    if (n == 0 || n >= sizeof prefix)
        return 0;
    for (size_t i = 1; i <= n; i++) {
        if (i < n && path[i] != '/')
            continue;
        memcpy(prefix, path, i);
        prefix[i] = '\0';
        if (H5Lexists(f, prefix, H5P_DEFAULT) <= 0)
            return 0;
        H5L_info_t li;
        if (H5Lget_info(f, prefix, &li, H5P_DEFAULT) < 0 || li.type != H5L_TYPE_HARD)
            return -1;
    }
    return 1;
}

static bool ieee_float(hid_t t)
{
    return H5Tequal(t, H5T_IEEE_F32LE) > 0 || H5Tequal(t, H5T_IEEE_F32BE) > 0 || H5Tequal(t, H5T_IEEE_F64LE) > 0 ||
           H5Tequal(t, H5T_IEEE_F64BE) > 0;
}

/* In the child: finds the dataset and checks its shape, type and storage. */
static int probe(void *ctx, AsError *err)
{
    Job *j = ctx;
    hid_t f = H5Fopen(j->path, H5F_ACC_RDONLY, H5P_DEFAULT);
    if (f < 0)
        return as_err(err, AS_EBADINPUT, "%s: cannot open as HDF5 (missing, unreadable or not HDF5)", j->path);
    int rc = 0;
    hid_t ds = -1, sp = -1, ty = -1;
    if (j->name) {
        int h = hard_path(f, j->name);
        if (h <= 0) {
            rc = as_err(err, AS_EBADINPUT, h < 0 ? "%s: '%s' is reached through a soft or external link"
                                                 : "%s: no dataset '%s'", j->path, j->name);
            goto out;
        }
        snprintf(j->ds_name, sizeof j->ds_name, "%s", j->name);
    } else if (hard_path(f, "inputs/h0") > 0) {
        snprintf(j->ds_name, sizeof j->ds_name, "inputs/h0");
    } else if (H5Literate(f, H5_INDEX_NAME, H5_ITER_INC, NULL, find_2d, j) <= 0) {
        rc = as_err(err, AS_EBADINPUT, "%s: no inputs/h0 and no 2-D floating dataset at the root", j->path);
        goto out;
    }
    if ((ds = H5Dopen2(f, j->ds_name, H5P_DEFAULT)) < 0) {
        rc = as_err(err, AS_EBADINPUT, "%s: no dataset '%s'", j->path, j->ds_name);
        goto out;
    }
    sp = H5Dget_space(ds);
    ty = H5Dget_type(ds);
    hsize_t dims[2];
    if (sp < 0 || ty < 0 || H5Sget_simple_extent_ndims(sp) != 2 || H5Sget_simple_extent_dims(sp, dims, NULL) != 2) {
        rc = as_err(err, AS_EBADINPUT, "%s: dataset '%s' is not [tokens][dim]", j->path, j->ds_name);
        goto out;
    }
    if (dims[1] != (hsize_t)j->dim || dims[0] < 1 || dims[0] > (hsize_t)j->max_tokens) {
        rc = as_err(err, AS_EBADINPUT, "%s: dataset '%s' is [%llu][%llu]; the model needs [1..%d][%d]", j->path,
                    j->ds_name, (unsigned long long)dims[0], (unsigned long long)dims[1], j->max_tokens, j->dim);
        goto out;
    }
    if (!ieee_float(ty)) {
        rc = as_err(err, AS_EBADINPUT, "%s: dataset '%s' is not IEEE float32 or float64", j->path, j->ds_name);
        goto out;
    }
    char at_path[300];
    snprintf(at_path, sizeof at_path, "/%s", j->ds_name);
    if ((rc = as_h5_check_storage(ds, H5Tget_size(ty), (AsH5At){j->path, at_path}, err)))
        goto out;
    j->rows = dims[0];
out:
    if (ty >= 0)
        H5Tclose(ty);
    if (sp >= 0)
        H5Sclose(sp);
    if (ds >= 0)
        H5Dclose(ds);
    H5Fclose(f);
    return rc;
}

/* In the child: the data, into the shared buffer. */
static int read_data(void *ctx, AsError *err)
{
    Job *j = ctx;
    hid_t f = H5Fopen(j->path, H5F_ACC_RDONLY, H5P_DEFAULT);
    hid_t ds = f >= 0 ? H5Dopen2(f, j->ds_name, H5P_DEFAULT) : -1;
    int rc = 0;
    if (ds < 0 || H5Dread(ds, H5T_NATIVE_FLOAT, H5S_ALL, H5S_ALL, H5P_DEFAULT, j->data) < 0)
        rc = as_err(err, AS_EBADINPUT, "%s: reading '%s' failed (truncated or not numeric)", j->path, j->ds_name);
    if (ds >= 0)
        H5Dclose(ds);
    if (f >= 0)
        H5Fclose(f);
    return rc;
}

int as_inputs_file_load(const char *path, const char *name, int dim, int max_tokens, float **out, int *tokens,
                        AsError *err)
{
    *out = NULL;
    *tokens = 0;
    if (as_check_input(path, err)) /* a FIFO or a device: refused before HDF5 opens it */
        return AS_EBADINPUT;
    as_h5_init();
    Job *j = as_guard_alloc(sizeof *j);
    if (!j)
        return as_err(err, AS_ERUNTIME, "out of memory");
    *j = (Job){.path = path, .name = name, .dim = dim, .max_tokens = max_tokens};
    char what[600];
    snprintf(what, sizeof what, "%s", path);
    int rc = as_guard_run(probe, j, what, err);
    size_t count = (size_t)j->rows * (size_t)dim, bytes = count * sizeof(float);
    float *h = NULL;
    if (!rc && !(j->data = as_guard_alloc(bytes)))
        rc = as_err(err, AS_ERUNTIME, "out of host memory for %llu input rows", (unsigned long long)j->rows);
    if (!rc)
        rc = as_guard_run(read_data, j, what, err);
    if (!rc && !(h = malloc(bytes)))
        rc = as_err(err, AS_ERUNTIME, "out of host memory for %llu input rows", (unsigned long long)j->rows);
    if (!rc) {
        for (size_t i = 0; i < count; i++)
            h[i] = as_bf16(j->data[i]);
        *out = h;
        *tokens = (int)j->rows;
    }
    as_guard_free(j->data, bytes);
    as_guard_free(j, sizeof *j);
    return rc;
}
