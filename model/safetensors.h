/* The safetensors container: reading (mmap, read-only, every header field checked against the
 * file), the sharded index, and writing (streamed, atomic).
 *
 * Layout: 8-byte little-endian header length N, N bytes of JSON
 *   {"name": {"dtype": "BF16", "shape": [..], "data_offsets": [begin, end]}, "__metadata__": {..}}
 * (padded with spaces), then the data section; offsets are relative to the data section.
 *
 * Reading checks: N within the file and at most AS_ST_MAX_HEADER; the header a JSON object with
 * nothing but spaces after it; each entry a known dtype, a shape of at most 4 non-negative dims
 * whose element count does not overflow, offsets within the data section whose length is
 * exactly elements * dtype size; no two tensors overlapping. Valid safetensors dtypes that
 * attnscope never reads (I64, U8, F8_E5M2, F4...) are checked the same way and then skipped.
 * A tensor's data pointer is only as aligned as the file makes it: read it through memcpy. The
 * file must not shrink while it is mapped (the kernel would raise SIGBUS on the lost pages). */
#ifndef AS_SAFETENSORS_H
#define AS_SAFETENSORS_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "model/errors.h"
#include "model/weights.h"

/* Largest header accepted (the full DeepSeek-V4 checkpoint's headers are a few MiB each). */
#define AS_ST_MAX_HEADER ((uint64_t)100 << 20)
/* Largest model.safetensors.index.json accepted. */
#define AS_ST_MAX_INDEX ((long)64 << 20)

/* One mapped file (also used by the GGUF reader later). */
struct AsWeightFile {
    char path[1024];
    const uint8_t *map;     /* the whole file, PROT_READ */
    uint64_t size;
    uint64_t header_len;    /* N */
    const uint8_t *data;    /* the data section: map + 8 + N */
    uint64_t data_len;
    int n_tensors;          /* tensors appended to the caller's array */
    int n_skipped;          /* tensors of dtypes attnscope does not read */
    int n_unused;           /* tensors the caller does not want (as_st_open_filtered) */
};

/* "[256, 32]": a shape as messages and listings print it (cut to fit n). */
void as_shape_str(const int64_t *shape, int ndim, char *buf, size_t n);

/* The safetensors name of a dtype attnscope reads ("BF16", "F8_E4M3"...), NULL for others. */
const char *as_st_dtype_name(AsDType t);

/* Maps path and appends its tensors to *tensors (grown with realloc, *n and *cap updated); their
 * data points into the mapping and scale is NULL. On error nothing is appended and *out is NULL. */
int as_st_open(const char *path, AsWeightFile **out, AsWTensor **tensors, int *n, int *cap, AsError *err);
/* Which tensors a caller reads: true to keep the tensor named name. */
typedef bool (*AsStWantFn)(void *ctx, const char *name);
/* as_st_open keeping only the tensors want accepts (want NULL: all). A tensor it refuses (the rest
 * of a full checkpoint: experts, hyper-connections, embeddings...) is not appended and its data is
 * never read: its entry must be an object whose data_offsets lie in the data section without
 * overlapping another's (the checks the header's integrity needs); its dtype and shape are not
 * looked at. Counted in n_unused. */
int as_st_open_filtered(const char *path, AsStWantFn want, void *want_ctx, AsWeightFile **out,
                        AsWTensor **tensors, int *n, int *cap, AsError *err);
void as_st_close(AsWeightFile *f);

/* Every tensor of a file whatever its dtype (the checks above; shapes of up to AS_ST_ENTRY_MAX_DIMS
 * dims), and its __metadata__ (an object of strings, else refused): for readers of tensors that are
 * not weights (dumps/import.c). */
#define AS_ST_ENTRY_MAX_DIMS 8
typedef struct {
    char name[192];
    char dtype[12];         /* as the file names it: "BF16", "I64", "BOOL"... */
    int ndim;
    int64_t shape[AS_ST_ENTRY_MAX_DIMS];
    const uint8_t *data;    /* into the mapping, nbytes of it; read through memcpy (no alignment promised) */
    uint64_t nbytes;
} AsStEntry;

typedef struct {
    AsWeightFile *file;
    int n;
    AsStEntry *entries;     /* in the header's order */
    int n_meta;
    char **meta;            /* __metadata__ as key, value, key, value... */
} AsStContents;

int as_st_open_contents(const char *path, AsStContents *c, AsError *err);
void as_st_contents_free(AsStContents *c);

/* model.safetensors.index.json: {"weight_map": {"tensor": "shard file"}}. Shard names are plain
 * file names in the index's directory (no path separators). */
typedef struct {
    int n_shards;
    char **shards;          /* unique, sorted */
    int n_entries;          /* weight_map entries, in the file's order */
    char **names;           /* each entry's tensor name */
    int *shard_of;          /* each entry's shard: an index into shards */
} AsStIndex;

int as_st_read_index(const char *path, AsStIndex *ix, AsError *err);
void as_st_index_free(AsStIndex *ix);

/* One tensor to write. data: the whole tensor in memory, or NULL to have fill produce it. */
typedef struct {
    char name[192];
    AsDType dtype;          /* F32, F16, BF16, F8_E4M3 or F8_E8M0 */
    int ndim;
    int64_t shape[4];
    const void *data;
} AsStTensorSpec;

typedef struct {
    /* Produces bytes [off, off + n) of tensor i (the caller's index) into buf; off and n are
     * multiples of the element size, chunks arrive in order. Returns 0 or an AS_E* code. */
    int (*fill)(void *ctx, int i, int64_t off, void *buf, size_t n, AsError *err);
    void (*progress)(void *ctx, int64_t done, int64_t total);   /* may be NULL */
    void *ctx;
    const char *const *metadata;    /* "__metadata__" pairs: key, value, ..., NULL; may be NULL */
} AsStWriteOptions;

/* Writes path atomically (a temporary file in the same directory, renamed at the end): tensors
 * sorted by name, the header padded with spaces so that the data starts 8-byte aligned. */
int as_st_write(const char *path, const AsStTensorSpec *t, int n, const AsStWriteOptions *opt, AsError *err);

/* Atomic file writing, shared with other writers: create a temporary file beside path, write
 * to it, then commit (flush, fsync, rename over path) or abort (remove it). The target is what
 * as_output_target says: a symlink to a regular file has the file it names replaced; a character
 * device or FIFO (or the process's own stdout/stderr) is written in place, tmp left empty; a
 * directory, socket, block device or dangling link is refused. */
/* The size of a temporary's name buffer (tmp below): the signal handler's table holds names this long, so
 * every caller's buffer is this size. */
#define AS_ATOMIC_TMP_MAX 1100
/* Where an output named path goes: real is the regular file to replace (path, or the file a
 * symlink names); with stream_fd non-NULL a character device or FIFO is opened for writing in
 * place (*stream_fd, blocking; a FIFO with no reader fails at once) and *stream_fd is -1 otherwise;
 * with stream_fd NULL nothing is opened (a check). A directory, socket, block device or dangling
 * link is AS_EBADINPUT. */
int as_output_target(const char *path, char *real, size_t real_size, int *stream_fd, AsError *err);
/* SIGPIPE ignored while a stream target is written (on), restored after (off; nests): a reader
 * that goes away is a write error (EPIPE, exit 3) and the temporaries are still removed. */
void as_output_pipe_guard(bool on);
int as_atomic_create(const char *path, char *tmp, size_t tmp_size, FILE **out, AsError *err);
int as_atomic_commit(FILE *f, const char *tmp, const char *path, AsError *err);
void as_atomic_abort(FILE *f, const char *tmp);
/* Whether path can be written that way (its temporary created beside it, then removed), with
 * as_atomic_create's error: for a command that writes its output after minutes of work. */
int as_atomic_check(const char *path, AsError *err);
/* Unlinks every temporary not yet committed or aborted, and nothing else: safe in a signal
 * handler (a static table of paths, unlink(2) only). as_dump_abort_all calls it. */
void as_atomic_abort_all(void);

#endif
