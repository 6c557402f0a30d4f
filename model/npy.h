/* numpy's files: an .npy array (format versions 1.0, 2.0 and 3.0) and an .npz archive of them (a zip
 * of .npy members, stored or deflated, zip64 records included), mapped read-only and read without
 * trusting a size they give:
 *
 * - .npy: the magic, a header of at most AS_NPY_MAX_HEADER bytes holding exactly the Python dict
 *   numpy writes ({'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }: those three keys,
 *   each once, nothing but spaces and a newline after it), a descr among the element types below
 *   (little- or big-endian; big-endian data is handed out as stored, with big_endian set),
 *   fortran_order False, at most AS_NPY_MAX_DIMS dims, and exactly elements * size bytes of data
 *   after the header: a file longer or shorter is refused. Object, string, structured and
 *   unlisted dtypes are refused.
 * - .npz: the end record within the last 64 KiB, one disk, the central directory inside the file
 *   before the end record, at most AS_NPZ_MAX_MEMBERS entries (each at least 46 bytes of it); each
 *   entry unencrypted, stored (sizes equal) or deflated, its name a UTF-8 path without control
 *   characters ending in ".npy" and given once, its local header matching the entry's name, its
 *   data before the central directory and sharing no byte with another member's, a deflated
 *   member's size at most 1032 times its compressed bytes (deflate's limit); each member's .npy
 *   header as above, its elements * size + header exactly the entry's size. The data is
 *   inflated (and every member's CRC-32 checked) only when asked for, into a buffer of the size
 *   the entry states, which the caller has checked by then (as_npy_data). */
#ifndef AS_NPY_H
#define AS_NPY_H

#include <stdbool.h>
#include <stdint.h>

#include "model/errors.h"

#define AS_NPY_MAX_HEADER 65536
#define AS_NPY_MAX_DIMS 8
#define AS_NPZ_MAX_MEMBERS (1 << 20)

/* The element types read (safetensors' and numpy's names in as_elem_name / the readers). */
typedef enum {
    AS_EL_F64, AS_EL_F32, AS_EL_F16, AS_EL_BF16, AS_EL_I64, AS_EL_I32, AS_EL_U8, AS_EL_BOOL, AS_EL_COUNT
} AsElemType;

int as_elem_size(AsElemType t);
/* "float32", "bfloat16", "int64", "bool"... */
const char *as_elem_name(AsElemType t);

typedef struct {
    char name[256];          /* an .npz member's name less ".npy"; "" for an .npy file */
    AsElemType type;         /* never AS_EL_BF16: numpy has no such dtype */
    bool big_endian;         /* the data is stored big-endian (as_npy_data hands it out as stored) */
    int ndim;
    int64_t shape[AS_NPY_MAX_DIMS];
    int64_t numel;
    /* where it lies (the reader's) */
    uint64_t off;            /* the member's (or file's) first byte: its .npy magic, or its deflate stream */
    uint64_t csize, usize;   /* bytes stored and bytes of the whole .npy member (equal unless deflated) */
    uint64_t header;         /* bytes of the .npy preamble: the data starts there */
    uint32_t crc;            /* an .npz member's CRC-32 */
    bool deflated;
} AsNpyArray;

typedef struct {
    char path[1024];
    const uint8_t *map;
    uint64_t size;
    bool npz;
    int n;                   /* 1 for an .npy file */
    AsNpyArray *a;
} AsNpyFile;

/* Maps path and reads its array (an .npy file) or its members' headers (an .npz), told apart by
 * their magic. AS_EBADINPUT with one line naming the file (and the member) for anything above. */
int as_npy_open(const char *path, AsNpyFile **out, AsError *err);
/* Array i's data (numel * size bytes, as stored): into the mapping (an .npy file or a stored
 * member, its CRC checked), else inflated into a new buffer *owned (the caller frees it; NULL
 * otherwise) of the member's stated size. A damaged stream or a CRC that differs is AS_EBADINPUT. */
int as_npy_data(const AsNpyFile *f, int i, const uint8_t **data, void **owned, AsError *err);
void as_npy_close(AsNpyFile *f);

#endif
