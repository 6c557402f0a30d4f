#include "driver/inputs_file.h"

#include <hdf5.h>
#include <stdlib.h>
#include <string.h>

#include "ref/numerics.h"

typedef struct {
    char found[256];
} FirstDataset;

/* H5Literate callback: the first 2-D floating dataset at the root. */
static herr_t find_2d(hid_t grp, const char *name, const H5L_info_t *info, void *ctx)
{
    (void)info;
    FirstDataset *f = ctx;
    H5O_info_t oi;
    if (H5Oget_info_by_name(grp, name, &oi, H5P_DEFAULT) < 0 || oi.type != H5O_TYPE_DATASET)
        return 0;
    hid_t ds = H5Dopen2(grp, name, H5P_DEFAULT);
    if (ds < 0)
        return 0;
    hid_t sp = H5Dget_space(ds), ty = H5Dget_type(ds);
    int ok = H5Sget_simple_extent_ndims(sp) == 2 && H5Tget_class(ty) == H5T_FLOAT;
    H5Tclose(ty), H5Sclose(sp), H5Dclose(ds);
    if (!ok)
        return 0;
    snprintf(f->found, sizeof f->found, "%s", name);
    return 1;
}

int as_inputs_file_load(const char *path, const char *name, int dim, int max_tokens, float **out, int *tokens,
                        AsError *err)
{
    *out = NULL;
    *tokens = 0;
    H5Eset_auto2(H5E_DEFAULT, NULL, NULL);
    hid_t f = H5Fopen(path, H5F_ACC_RDONLY, H5P_DEFAULT);
    if (f < 0)
        return as_err(err, AS_EBADINPUT, "%s: cannot open as HDF5 (missing, unreadable or not HDF5)", path);
    FirstDataset fd = {""};
    const char *ds_name = name;
    if (!ds_name) {
        if (H5Lexists(f, "inputs", H5P_DEFAULT) > 0 && H5Lexists(f, "inputs/h0", H5P_DEFAULT) > 0)
            ds_name = "inputs/h0";
        else if (H5Literate(f, H5_INDEX_NAME, H5_ITER_INC, NULL, find_2d, &fd) > 0)
            ds_name = fd.found;
    }
    int rc = 0;
    hid_t ds = -1, sp = -1;
    if (!ds_name) {
        rc = as_err(err, AS_EBADINPUT, "%s: no inputs/h0 and no 2-D floating dataset at the root", path);
        goto out;
    }
    if ((ds = H5Dopen2(f, ds_name, H5P_DEFAULT)) < 0) {
        rc = as_err(err, AS_EBADINPUT, "%s: no dataset '%s'", path, ds_name);
        goto out;
    }
    sp = H5Dget_space(ds);
    hsize_t dims[2];
    if (H5Sget_simple_extent_ndims(sp) != 2 || H5Sget_simple_extent_dims(sp, dims, NULL) != 2) {
        rc = as_err(err, AS_EBADINPUT, "%s: dataset '%s' is not [tokens][dim]", path, ds_name);
        goto out;
    }
    if (dims[1] != (hsize_t)dim || dims[0] < 1 || dims[0] > (hsize_t)max_tokens) {
        rc = as_err(err, AS_EBADINPUT, "%s: dataset '%s' is [%llu][%llu]; the model needs [1..%d][%d]", path, ds_name,
                    (unsigned long long)dims[0], (unsigned long long)dims[1], max_tokens, dim);
        goto out;
    }
    float *h = malloc(sizeof(float) * (size_t)dims[0] * dims[1]);
    if (!h) {
        rc = as_err(err, AS_ERUNTIME, "out of host memory for %llu input rows", (unsigned long long)dims[0]);
        goto out;
    }
    if (H5Dread(ds, H5T_NATIVE_FLOAT, H5S_ALL, H5S_ALL, H5P_DEFAULT, h) < 0) {
        free(h);
        rc = as_err(err, AS_EBADINPUT, "%s: reading '%s' failed (truncated or not numeric)", path, ds_name);
        goto out;
    }
    for (size_t i = 0; i < (size_t)dims[0] * dims[1]; i++)
        h[i] = as_bf16(h[i]);
    *out = h;
    *tokens = (int)dims[0];
out:
    if (sp >= 0)
        H5Sclose(sp);
    if (ds >= 0)
        H5Dclose(ds);
    H5Fclose(f);
    return rc;
}
