/* The HDF5 plumbing of the dumps: every call checked, automatic error printing off, and each
 * failure turned into one line that names the file, the object and HDF5's innermost reason.
 * Writers return 0 or an AsError code; readers validate class, size and rank before reading. */
#ifndef AS_H5IO_H
#define AS_H5IO_H

#include <hdf5.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "model/errors.h"

/* Where an object lies, for messages: "dump FILE: PATH: ...". */
typedef struct {
    const char *file;
    const char *path;
} AsH5At;

/* Turns HDF5's automatic error printing off (idempotent). */
void as_h5_init(void);
/* HDF5's innermost error message (the most specific), "" when none. */
void as_h5_reason(char *buf, size_t n);
/* err = code, "dump FILE: PATH: what (HDF5 reason)". Returns code. */
int as_h5_fail(AsError *err, int code, AsH5At at, const char *what, ...) __attribute__((format(printf, 4, 5)));

/* ---- writing ------------------------------------------------------------------------- */
int as_h5_put_str(hid_t obj, const char *name, const char *v, AsH5At at, AsError *err);
int as_h5_put_i64(hid_t obj, const char *name, int64_t v, AsH5At at, AsError *err);
int as_h5_put_i64s(hid_t obj, const char *name, const int64_t *v, int n, AsH5At at, AsError *err);
int as_h5_put_f64(hid_t obj, const char *name, double v, AsH5At at, AsError *err);
/* A new group; returns its id or H5I_INVALID_HID with err set. */
hid_t as_h5_new_group(hid_t loc, const char *name, AsH5At at, AsError *err);
/* A dataset of rank <= 3: chunked (chunks up to ~1 MiB) with shuffle + deflate when it has
 * elements, contiguous when empty. maxdims NULL = fixed size. Returns its id or -1. */
hid_t as_h5_new_dataset(hid_t loc, const char *name, hid_t ftype, int rank, const hsize_t *dims,
                        const hsize_t *maxdims, AsH5At at, AsError *err);

/* ---- reading ------------------------------------------------------------------------- */
/* Whether loc has a link `name` that is a hard link to an object of type want (H5O_TYPE_GROUP,
 * H5O_TYPE_DATASET). 1 yes, 0 no such link; a link of another kind is EBADINPUT (negative). */
int as_h5_has(hid_t loc, const char *name, H5O_type_t want, AsH5At at, AsError *err);
bool as_h5_has_attr(hid_t obj, const char *name);
/* Required attributes: EBADINPUT when missing or of the wrong class or size. */
int as_h5_get_str(hid_t obj, const char *name, size_t max_len, char **out, AsH5At at, AsError *err);
int as_h5_get_i64(hid_t obj, const char *name, int64_t *out, AsH5At at, AsError *err);
/* An integer attribute in [lo, hi], as an int. */
int as_h5_get_int(hid_t obj, const char *name, int64_t lo, int64_t hi, int *out, AsH5At at, AsError *err);
int as_h5_get_i64s(hid_t obj, const char *name, int64_t *out, int n, AsH5At at, AsError *err);
int as_h5_get_f64(hid_t obj, const char *name, double *out, AsH5At at, AsError *err);
/* A dataset's storage, checked before its data is read (docs/SECURITY.md): its data lies in this
 * file (no external raw files, no virtual dataset mapping other files), its filters are ones HDF5
 * has built in and attnscope allows (deflate, shuffle, fletcher32; plugins are never loaded),
 * its chunks hold at most AS_H5_MAX_CHUNK bytes, and its elements (esize bytes each) take at
 * most AS_H5_MAX_EXPANSION times the bytes it stores plus AS_H5_EXPANSION_SLACK: a small file
 * cannot make attnscope allocate gigabytes of fill values. */
#define AS_H5_MAX_CHUNK ((uint64_t)64 << 20)
#define AS_H5_MAX_EXPANSION 2048    /* deflate's ratio is at most 1032:1 */
#define AS_H5_EXPANSION_SLACK ((uint64_t)64 << 10)
int as_h5_check_storage(hid_t ds, size_t esize, AsH5At at, AsError *err);
/* Names of the links in a group (sorted by name), at most max; caller frees each and the array. */
int as_h5_list(hid_t group, int max, char ***names, int *n, AsH5At at, AsError *err);
void as_h5_free_list(char **names, int n);

#endif
