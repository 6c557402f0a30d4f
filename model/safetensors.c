/* safetensors files: read by mmap with every header field checked against the file, the sharded
 * index, and streamed atomic writing. */
#include "model/safetensors.h"

#include <cJSON.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "model/mapfile.h"
#include "model/textfile.h"
#include "model/json_strict.h"

#if !defined(__BYTE_ORDER__) || __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "safetensors data is little-endian and is read in place: little-endian hosts only"
#endif

#define MAX_DIMS 8                      /* shapes of skipped dtypes may have more than 4 */
#define MAX_ELEMS ((uint64_t)1 << 56)   /* 64 Pi elements: bits * count cannot overflow */
#define WRITE_CHUNK ((size_t)4 << 20)

typedef struct {
    const char *name;
    int bits;
    int dt;     /* AsDType, or -1: a valid safetensors dtype attnscope never reads */
} StDType;

static const StDType st_dtypes[] = {
    {"F32", 32, AS_DT_F32},         {"F16", 16, AS_DT_F16},          {"BF16", 16, AS_DT_BF16},
    {"F8_E4M3", 8, AS_DT_F8_E4M3},  {"F8_E4M3FN", 8, AS_DT_F8_E4M3}, {"F8_E8M0", 8, AS_DT_F8_E8M0},
    {"F64", 64, -1},  {"C64", 64, -1}, {"I64", 64, -1},     {"U64", 64, -1},     {"I32", 32, -1},
    {"U32", 32, -1},  {"I16", 16, -1}, {"U16", 16, -1},     {"I8", 8, -1},       {"U8", 8, -1},
    {"BOOL", 8, -1},  {"F8_E5M2", 8, -1}, {"F6_E2M3", 6, -1}, {"F6_E3M2", 6, -1}, {"F4", 4, -1},
};
#define N_DTYPES (int)(sizeof st_dtypes / sizeof st_dtypes[0])

static const StDType *dtype_by_name(const char *s)
{
    for (int i = 0; i < N_DTYPES; i++)
        if (!strcmp(s, st_dtypes[i].name))
            return &st_dtypes[i];
    return NULL;
}

static const StDType *dtype_of(AsDType t)
{
    for (int i = 0; i < N_DTYPES; i++)
        if (st_dtypes[i].dt == (int)t)
            return &st_dtypes[i];
    return NULL;
}

const char *as_st_dtype_name(AsDType t)
{
    const StDType *d = dtype_of(t);
    return d ? d->name : NULL;
}

/* An integral JSON number in [0, 2^53], the range a double holds exactly. */
static bool json_u53(const cJSON *it, uint64_t *out)
{
    if (!cJSON_IsNumber(it))
        return false;
    double v = it->valuedouble;
    if (!(v >= 0 && v <= 9007199254740992.0) || v != (double)(uint64_t)v)
        return false;
    *out = (uint64_t)v;
    return true;
}

void as_shape_str(const int64_t *shape, int ndim, char *buf, size_t n)
{
    size_t k = (size_t)snprintf(buf, n, "[");
    for (int i = 0; i < ndim && k < n; i++)
        k += (size_t)snprintf(buf + k, n - k, "%s%lld", i ? ", " : "", (long long)shape[i]);
    if (k < n)
        snprintf(buf + k, n - k, "]");
}

/* One header entry as checked, whatever its dtype. */
typedef struct {
    const StDType *d;
    int ndim;
    int64_t dims[MAX_DIMS];
    uint64_t begin, need;
} StEntry;

/* Checks one header entry against the data section: its name, dtype, shape (at most 4 dims for a
 * dtype attnscope reads as weights, else max_other) and offsets; fills es and sp. */
static int check_entry(const char *path, const cJSON *e, const AsWeightFile *f, int max_other, StEntry *es,
                       AsSpan *sp, AsError *err)
{
    const char *name = e->string;
    if (!cJSON_IsObject(e))
        return as_err(err, AS_EBADINPUT, "%s: header entry '%.64s' is not an object", path, name);
    if (!name[0] || strlen(name) >= sizeof ((AsWTensor *)0)->name)
        return as_err(err, AS_EBADINPUT, "%s: tensor name '%.64s...' is empty or longer than %zu bytes", path,
                      name, sizeof ((AsWTensor *)0)->name - 1);
    if (as_has_control(name, strlen(name))) /* info lists names: no terminal escapes */
        return as_err(err, AS_EBADINPUT, "%s: tensor name '%.64s' holds a control character", path, name);
    const cJSON *dt = cJSON_GetObjectItemCaseSensitive(e, "dtype");
    const cJSON *shape = cJSON_GetObjectItemCaseSensitive(e, "shape");
    const cJSON *offs = cJSON_GetObjectItemCaseSensitive(e, "data_offsets");
    if (!cJSON_IsString(dt))
        return as_err(err, AS_EBADINPUT, "%s: tensor '%s': dtype missing or not a string", path, name);
    const StDType *d = dtype_by_name(dt->valuestring);
    if (!d)
        return as_err(err, AS_EBADINPUT, "%s: tensor '%s': unknown dtype '%.32s'", path, name, dt->valuestring);
    if (!cJSON_IsArray(shape))
        return as_err(err, AS_EBADINPUT, "%s: tensor '%s': shape missing or not an array", path, name);
    int ndim = cJSON_GetArraySize(shape), max_dims = d->dt >= 0 ? 4 : max_other;
    if (ndim > max_dims)
        return as_err(err, AS_EBADINPUT, "%s: tensor '%s': %d dimensions (at most %d)", path, name, ndim, max_dims);
    memset(es, 0, sizeof *es);
    uint64_t count = 1;
    for (int i = 0; i < ndim; i++) {
        uint64_t v;
        if (!json_u53(cJSON_GetArrayItem(shape, i), &v))
            return as_err(err, AS_EBADINPUT, "%s: tensor '%s': shape[%d] is not a non-negative integer", path,
                          name, i);
        if (v && count > MAX_ELEMS / v)
            return as_err(err, AS_EBADINPUT, "%s: tensor '%s': shape has more than 2^56 elements", path, name);
        es->dims[i] = (int64_t)v;
        count *= v;
    }
    char ss[160];
    as_shape_str(es->dims, ndim, ss, sizeof ss);
    if (count * (uint64_t)d->bits % 8)
        return as_err(err, AS_EBADINPUT, "%s: tensor '%s': %s %s is not a whole number of bytes", path, name,
                      d->name, ss);
    uint64_t need = count * (uint64_t)d->bits / 8, b, en;
    if (!cJSON_IsArray(offs) || cJSON_GetArraySize(offs) != 2 || !json_u53(cJSON_GetArrayItem(offs, 0), &b) ||
        !json_u53(cJSON_GetArrayItem(offs, 1), &en) || b > en)
        return as_err(err, AS_EBADINPUT, "%s: tensor '%s': data_offsets must be [begin, end] with begin <= end",
                      path, name);
    if (en > f->data_len)
        return as_err(err, AS_EBADINPUT,
                      "%s: tensor '%s': data_offsets [%llu, %llu] run past the data section (%llu bytes)", path,
                      name, (unsigned long long)b, (unsigned long long)en, (unsigned long long)f->data_len);
    if (en - b != need)
        return as_err(err, AS_EBADINPUT, "%s: tensor '%s': data_offsets hold %llu bytes but %s %s needs %llu",
                      path, name, (unsigned long long)(en - b), d->name, ss, (unsigned long long)need);
    *sp = (AsSpan){b, en, name};
    es->d = d;
    es->ndim = ndim;
    es->begin = b;
    es->need = need;
    return AS_OK;
}

/* Checks one header entry against the data section; fills t (when its dtype is read) and sp. */
static int parse_entry(const char *path, const cJSON *e, const AsWeightFile *f, AsWTensor *t, bool *keep,
                       AsSpan *sp, AsError *err)
{
    StEntry es;
    int rc = check_entry(path, e, f, MAX_DIMS, &es, sp, err);
    if (rc)
        return rc;
    *keep = es.d->dt >= 0;
    if (*keep) {
        memset(t, 0, sizeof *t);
        snprintf(t->name, sizeof t->name, "%s", e->string);
        t->dtype = (AsDType)es.d->dt;
        t->ndim = es.ndim;
        memcpy(t->shape, es.dims, sizeof t->shape);
        t->data = f->data + es.begin;
        t->nbytes = (int64_t)es.need;
    }
    return AS_OK;
}

/* An entry the caller does not read: only what keeps the header whole (its span, for the overlap
 * check). */
static int parse_unused(const char *path, const cJSON *e, const AsWeightFile *f, AsSpan *sp, AsError *err)
{
    const char *name = e->string;
    if (!cJSON_IsObject(e))
        return as_err(err, AS_EBADINPUT, "%s: header entry '%.64s' is not an object", path, name);
    const cJSON *offs = cJSON_GetObjectItemCaseSensitive(e, "data_offsets");
    uint64_t b, en;
    if (!cJSON_IsArray(offs) || cJSON_GetArraySize(offs) != 2 || !json_u53(cJSON_GetArrayItem(offs, 0), &b) ||
        !json_u53(cJSON_GetArrayItem(offs, 1), &en) || b > en)
        return as_err(err, AS_EBADINPUT, "%s: tensor '%.64s': data_offsets must be [begin, end] with begin <= end",
                      path, name);
    if (en > f->data_len)
        return as_err(err, AS_EBADINPUT,
                      "%s: tensor '%.64s': data_offsets [%llu, %llu] run past the data section (%llu bytes)", path,
                      name, (unsigned long long)b, (unsigned long long)en, (unsigned long long)f->data_len);
    *sp = (AsSpan){b, en, name};
    return AS_OK;
}

/* Every entry of a parsed header: appended to *tensors only if all are valid. */
static int parse_header(const char *path, const cJSON *root, AsWeightFile *f, AsStWantFn want, void *want_ctx,
                        AsWTensor **tensors, int *n, int *cap, AsError *err)
{
    int n_entries = cJSON_GetArraySize(root);
    AsSpan *spans = malloc(((size_t)n_entries + 1) * sizeof *spans);
    if (!spans)
        return as_err(err, AS_ERUNTIME, "%s: out of memory for %d header entries", path, n_entries);
    int rc = AS_OK, n_spans = 0, base = *n;
    const cJSON *e;
    cJSON_ArrayForEach(e, root) {
        if (!strcmp(e->string, "__metadata__")) {
            if (!cJSON_IsObject(e)) {
                rc = as_err(err, AS_EBADINPUT, "%s: __metadata__ is not an object", path);
                break;
            }
            continue;
        }
        if (want && !want(want_ctx, e->string)) {
            if ((rc = parse_unused(path, e, f, &spans[n_spans], err)))
                break;
            n_spans++;
            f->n_unused++;
            continue;
        }
        if (*n == *cap) {
            int nc = *cap ? *cap * 2 : 256;
            AsWTensor *nt = nc > *cap ? realloc(*tensors, (size_t)nc * sizeof *nt) : NULL;
            if (!nt) {
                rc = as_err(err, AS_ERUNTIME, "%s: out of memory for the tensor list", path);
                break;
            }
            *tensors = nt;
            *cap = nc;
        }
        bool keep = false;
        if ((rc = parse_entry(path, e, f, &(*tensors)[*n], &keep, &spans[n_spans], err)))
            break;
        n_spans++;
        if (keep)
            (*n)++;
        else
            f->n_skipped++;
    }
    if (!rc)
        rc = as_spans_disjoint(path, spans, (size_t)n_spans, err);
    free(spans);
    if (rc)
        *n = base;
    f->n_tensors = *n - base;
    return rc;
}

int as_st_open(const char *path, AsWeightFile **out, AsWTensor **tensors, int *n, int *cap, AsError *err)
{
    return as_st_open_filtered(path, NULL, NULL, out, tensors, n, cap, err);
}

/* Maps path and parses its header: the length within the file and AS_ST_MAX_HEADER, then one JSON
 * object. *root is the caller's to delete. */
static int open_header(const char *path, AsWeightFile **out, cJSON **root, AsError *err)
{
    *out = NULL;
    *root = NULL;
    void *map;
    uint64_t size;
    int rc0 = as_map_file(path, 8, "a safetensors header", &map, &size, err);
    if (rc0)
        return rc0;
    AsWeightFile *f = calloc(1, sizeof *f);
    if (!f) {
        munmap(map, (size_t)size);
        return as_err(err, AS_ERUNTIME, "%s: out of memory", path);
    }
    snprintf(f->path, sizeof f->path, "%s", path);
    f->map = map;
    f->size = size;
    uint64_t hn = 0;
    memcpy(&hn, map, 8); /* little-endian host (checked at compile time) */
    int rc = AS_OK;
    if (hn > AS_ST_MAX_HEADER)
        rc = as_err(err, AS_EBADINPUT, "%s: header length %llu exceeds the %llu MiB limit (not safetensors?)",
                    path, (unsigned long long)hn, (unsigned long long)(AS_ST_MAX_HEADER >> 20));
    else if (hn > size - 8)
        rc = as_err(err, AS_EBADINPUT, "%s: header length %llu runs past the end of the file (%llu bytes)", path,
                    (unsigned long long)hn, (unsigned long long)size);
    if (rc) {
        as_st_close(f);
        return rc;
    }
    f->header_len = hn;
    f->data = f->map + 8 + hn;
    f->data_len = size - 8 - hn;
    const char *text = (const char *)f->map + 8;
    if ((rc = as_json_parse_strict(text, (size_t)hn, root, err))) /* offsets count from the header's start */
        as_err_wrap(err, "%s: header", path);
    else if (!cJSON_IsObject(*root))
        rc = as_err(err, AS_EBADINPUT, "%s: header is not a JSON object", path);
    if (rc) {
        cJSON_Delete(*root);
        *root = NULL;
        as_st_close(f);
        return rc;
    }
    *out = f;
    return AS_OK;
}

int as_st_open_filtered(const char *path, AsStWantFn want, void *want_ctx, AsWeightFile **out,
                        AsWTensor **tensors, int *n, int *cap, AsError *err)
{
    AsWeightFile *f;
    cJSON *root;
    int rc = open_header(path, &f, &root, err);
    if (rc)
        return rc;
    rc = parse_header(path, root, f, want, want_ctx, tensors, n, cap, err);
    cJSON_Delete(root);
    if (rc) {
        as_st_close(f);
        return rc;
    }
    *out = f;
    return AS_OK;
}

/* __metadata__: an object of strings, as key, value pairs. */
static int read_metadata(const char *path, const cJSON *md, AsStContents *c, AsError *err)
{
    if (!cJSON_IsObject(md))
        return as_err(err, AS_EBADINPUT, "%s: __metadata__ is not an object", path);
    int n = cJSON_GetArraySize(md);
    if (!(c->meta = calloc((size_t)n * 2 + 2, sizeof *c->meta)))
        return as_err(err, AS_ERUNTIME, "%s: out of memory for __metadata__", path);
    const cJSON *e;
    cJSON_ArrayForEach(e, md) {
        if (!cJSON_IsString(e))
            return as_err(err, AS_EBADINPUT, "%s: __metadata__ '%.64s' is not a string (safetensors metadata maps "
                          "strings to strings)", path, e->string);
        if (!(c->meta[2 * c->n_meta] = strdup(e->string)) || !(c->meta[2 * c->n_meta + 1] = strdup(e->valuestring)))
            return as_err(err, AS_ERUNTIME, "%s: out of memory for __metadata__", path);
        c->n_meta++;
    }
    return AS_OK;
}

int as_st_open_contents(const char *path, AsStContents *c, AsError *err)
{
    memset(c, 0, sizeof *c);
    cJSON *root;
    int rc = open_header(path, &c->file, &root, err);
    if (rc)
        return rc;
    int n_entries = cJSON_GetArraySize(root);
    AsSpan *spans = malloc(((size_t)n_entries + 1) * sizeof *spans);
    c->entries = calloc((size_t)n_entries + 1, sizeof *c->entries);
    if (!spans || !c->entries)
        rc = as_err(err, AS_ERUNTIME, "%s: out of memory for %d header entries", path, n_entries);
    const cJSON *e;
    cJSON_ArrayForEach(e, root) {
        if (rc)
            break;
        if (!strcmp(e->string, "__metadata__")) {
            rc = read_metadata(path, e, c, err);
            continue;
        }
        StEntry es;
        AsStEntry *t = &c->entries[c->n];
        if ((rc = check_entry(path, e, c->file, AS_ST_ENTRY_MAX_DIMS, &es, &spans[c->n], err)))
            break;
        snprintf(t->name, sizeof t->name, "%s", e->string);
        snprintf(t->dtype, sizeof t->dtype, "%s", es.d->name);
        t->ndim = es.ndim;
        memcpy(t->shape, es.dims, sizeof t->shape);
        t->data = c->file->data + es.begin;
        t->nbytes = es.need;
        spans[c->n].name = t->name;
        c->n++;
    }
    if (!rc)
        rc = as_spans_disjoint(path, spans, (size_t)c->n, err);
    free(spans);
    cJSON_Delete(root);
    if (rc)
        as_st_contents_free(c);
    return rc;
}

void as_st_contents_free(AsStContents *c)
{
    for (int i = 0; c->meta && i < 2 * c->n_meta + 2; i++)
        free(c->meta[i]);
    free(c->meta);
    free(c->entries);
    as_st_close(c->file);
    memset(c, 0, sizeof *c);
}

void as_st_close(AsWeightFile *f)
{
    if (!f)
        return;
    if (f->map)
        munmap((void *)f->map, (size_t)f->size);
    free(f);
}

/* ---- model.safetensors.index.json ---- */

static int cmp_str(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

void as_st_index_free(AsStIndex *ix)
{
    for (int i = 0; i < ix->n_shards; i++)
        free(ix->shards[i]);
    for (int i = 0; i < ix->n_entries; i++)
        free(ix->names[i]);
    free(ix->shards);
    free(ix->names);
    free(ix->shard_of);
    memset(ix, 0, sizeof *ix);
}

static int index_from_json(const char *path, const cJSON *root, AsStIndex *ix, AsError *err)
{
    const cJSON *wm = cJSON_IsObject(root) ? cJSON_GetObjectItemCaseSensitive(root, "weight_map") : NULL;
    if (!cJSON_IsObject(wm))
        return as_err(err, AS_EBADINPUT, "%s: no \"weight_map\" object", path);
    int n = cJSON_GetArraySize(wm);
    if (n == 0)
        return as_err(err, AS_EBADINPUT, "%s: weight_map is empty", path);
    if (!(ix->shards = calloc((size_t)n, sizeof *ix->shards)) || !(ix->names = calloc((size_t)n, sizeof *ix->names)) ||
        !(ix->shard_of = calloc((size_t)n, sizeof *ix->shard_of)))
        return as_err(err, AS_ERUNTIME, "%s: out of memory", path);
    const cJSON *e;
    cJSON_ArrayForEach(e, wm) {
        const char *s = cJSON_IsString(e) ? e->valuestring : NULL;
        if (!s || !s[0] || strchr(s, '/') || strchr(s, '\\') || !strcmp(s, ".") || !strcmp(s, ".."))
            return as_err(err, AS_EBADINPUT,
                          "%s: weight_map['%.64s'] must be a plain file name in the same directory", path,
                          e->string);
        if (!(ix->names[ix->n_entries++] = strdup(e->string)))
            return as_err(err, AS_ERUNTIME, "%s: out of memory", path);
    }
    /* the shards: every entry's file name, sorted once and made unique (n log n for any count) */
    const char **all = malloc((size_t)n * sizeof *all);
    if (!all)
        return as_err(err, AS_ERUNTIME, "%s: out of memory", path);
    int k = 0;
    cJSON_ArrayForEach(e, wm) all[k++] = e->valuestring;
    qsort(all, (size_t)k, sizeof *all, cmp_str);
    for (int i = 0; i < k; i++) {
        if (ix->n_shards && !strcmp(ix->shards[ix->n_shards - 1], all[i]))
            continue;
        if (!(ix->shards[ix->n_shards] = strdup(all[i]))) {
            free(all);
            return as_err(err, AS_ERUNTIME, "%s: out of memory", path);
        }
        ix->n_shards++;
    }
    free(all);
    /* each entry's shard, found in the sorted list (sorted so that the tensor list does not depend
     * on the JSON's order) */
    k = 0;
    cJSON_ArrayForEach(e, wm) {
        const char *s = e->valuestring;
        char *const *hit = bsearch(&s, ix->shards, (size_t)ix->n_shards, sizeof *ix->shards, cmp_str);
        ix->shard_of[k++] = hit ? (int)(hit - ix->shards) : 0; /* always found: every name was inserted */
    }
    return AS_OK;
}

int as_st_read_index(const char *path, AsStIndex *ix, AsError *err)
{
    memset(ix, 0, sizeof *ix);
    char *buf;
    size_t len;
    int rc = as_read_text_file(path, (size_t)AS_ST_MAX_INDEX, "safetensors index", &buf, &len, err);
    if (rc)
        return rc;
    cJSON *root;
    if ((rc = as_json_parse_strict(buf, len, &root, err)))
        as_err_wrap(err, "%s", path);
    else
        rc = index_from_json(path, root, ix, err);
    cJSON_Delete(root);
    free(buf);
    if (rc)
        as_st_index_free(ix);
    return rc;
}

/* ---- writing ---- */

/* The temporaries being written, for as_atomic_abort_all in a signal handler (atomics and
 * unlink only); a slot is found again by its path. */
#define MAX_TEMPS 16
enum { TEMP_FREE, TEMP_CLAIMED, TEMP_LIVE };
static atomic_int temp_state[MAX_TEMPS];
static char temp_path[MAX_TEMPS][AS_ATOMIC_TMP_MAX];

static void temp_register(const char *tmp)
{
    for (int i = 0; i < MAX_TEMPS; i++) {
        int expect = TEMP_FREE;
        if (atomic_compare_exchange_strong(&temp_state[i], &expect, TEMP_CLAIMED)) {
            snprintf(temp_path[i], sizeof temp_path[i], "%s", tmp);
            atomic_store(&temp_state[i], TEMP_LIVE);
            return;
        }
    }
}

static void temp_release(const char *tmp)
{
    for (int i = 0; i < MAX_TEMPS; i++)
        if (atomic_load(&temp_state[i]) == TEMP_LIVE && !strcmp(temp_path[i], tmp)) {
            atomic_store(&temp_state[i], TEMP_FREE);
            return;
        }
}

void as_atomic_abort_all(void)
{
    for (int i = 0; i < MAX_TEMPS; i++)
        if (atomic_load(&temp_state[i]) == TEMP_LIVE)
            unlink(temp_path[i]);
}

static int pipe_guard_depth;
static struct sigaction pipe_guard_saved;

void as_output_pipe_guard(bool on)
{
    if (on && pipe_guard_depth++ == 0) {
        struct sigaction ign = {.sa_handler = SIG_IGN};
        sigemptyset(&ign.sa_mask);
        sigaction(SIGPIPE, &ign, &pipe_guard_saved);
    } else if (!on && pipe_guard_depth > 0 && --pipe_guard_depth == 0) {
        sigaction(SIGPIPE, &pipe_guard_saved, NULL);
    }
}

int as_output_target(const char *path, char *real, size_t real_size, int *stream_fd, AsError *err)
{
    if (stream_fd)
        *stream_fd = -1;
    if (snprintf(real, real_size, "%s", path) >= (int)real_size)
        return as_err(err, AS_EBADINPUT, "%s: path too long", path);
    struct stat ls, st;
    if (lstat(path, &ls)) /* absent (or unreachable: creating beside it says why) */
        return AS_OK;
    if (stat(path, &st))
        return as_err(err, AS_EBADINPUT, "%s: a symbolic link to nothing (%s); name the file itself", path,
                      strerror(errno));
    if (S_ISDIR(st.st_mode))
        return as_err(err, AS_EBADINPUT, "%s: is a directory; name a file", path);
    /* the process's own standard output or error (/dev/stdout, /proc/self/fd/2, or the file they are
     * redirected to) is written through that descriptor, in place */
    for (int fd = 1; fd <= 2; fd++) {
        struct stat fs;
        if (!fstat(fd, &fs) && fs.st_dev == st.st_dev && fs.st_ino == st.st_ino &&
            (S_ISREG(st.st_mode) || S_ISCHR(st.st_mode) || S_ISFIFO(st.st_mode))) {
            if (stream_fd && (*stream_fd = fcntl(fd, F_DUPFD_CLOEXEC, 3)) < 0)
                return as_err(err, AS_ERUNTIME, "%s: cannot write (%s)", path, strerror(errno));
            return AS_OK;
        }
    }
    if (S_ISCHR(st.st_mode) || S_ISFIFO(st.st_mode)) {
        if (!stream_fd) /* a check: opening a FIFO would hand its reader an end of file */
            return access(path, W_OK) ? as_err(err, AS_ERUNTIME, "%s: cannot write (%s)", path, strerror(errno))
                                      : AS_OK;
        /* O_NONBLOCK: a FIFO nobody reads fails at once (ENXIO) instead of waiting for a reader */
        int fd = open(path, O_WRONLY | O_NONBLOCK | O_CLOEXEC | O_NOCTTY);
        if (fd < 0) {
            int e = errno;
            return as_err(err, AS_ERUNTIME, e == ENXIO ? "%s: a FIFO with no reader" : "%s: cannot write (%s)", path,
                          strerror(e));
        }
        int fl = fcntl(fd, F_GETFL);
        if (fl < 0 || fcntl(fd, F_SETFL, fl & ~O_NONBLOCK) < 0) {
            int e = errno;
            close(fd);
            return as_err(err, AS_ERUNTIME, "%s: cannot write (%s)", path, strerror(e));
        }
        *stream_fd = fd;
        return AS_OK;
    }
    if (!S_ISREG(st.st_mode))
        return as_err(err, AS_EBADINPUT, "%s: not a regular file, character device or FIFO; refused", path);
    if (S_ISLNK(ls.st_mode)) { /* a link to a regular file: that file is replaced, the link stays */
        char *r = realpath(path, NULL);
        if (!r)
            return as_err(err, AS_ERUNTIME, "%s: cannot resolve the link (%s)", path, strerror(errno));
        const bool fits = snprintf(real, real_size, "%s", r) < (int)real_size;
        free(r);
        if (!fits)
            return as_err(err, AS_EBADINPUT, "%s: the file it links to has too long a path", path);
    }
    return AS_OK;
}

int as_atomic_create(const char *path, char *tmp, size_t tmp_size, FILE **out, AsError *err)
{
    *out = NULL;
    char real[AS_ATOMIC_TMP_MAX];
    int sfd = -1;
    int rc = as_output_target(path, real, sizeof real, &sfd, err);
    if (rc)
        return rc;
    if (sfd >= 0) { /* a stream: written in place, tmp empty, SIGPIPE ignored until commit or abort */
        if (tmp_size)
            tmp[0] = '\0';
        if (!(*out = fdopen(sfd, "wb"))) {
            rc = as_err(err, AS_ERUNTIME, "%s: cannot open (%s)", path, strerror(errno));
            close(sfd);
        } else {
            as_output_pipe_guard(true);
        }
        return rc;
    }
    /* "<target>.tmp-XXXXXX": commit renames it to its name less the suffix */
    if (snprintf(tmp, tmp_size, "%s.tmp-XXXXXX", real) >= (int)tmp_size)
        return as_err(err, AS_EBADINPUT, "%s: path too long", path);
    int fd = mkstemp(tmp);
    if (fd < 0) { /* a path that does not exist is bad input; a directory that refuses is an I/O failure */
        int e = errno;
        return as_err(err, e == ENOENT || e == ENOTDIR || e == ENAMETOOLONG ? AS_EBADINPUT : AS_ERUNTIME,
                      "%s: cannot create a file beside it (%s)", path, strerror(e));
    }
    temp_register(tmp);
    if (fchmod(fd, 0644) || !(*out = fdopen(fd, "wb"))) {
        rc = as_err(err, AS_ERUNTIME, "%s: cannot open (%s)", tmp, strerror(errno));
        close(fd);
        unlink(tmp);
        temp_release(tmp);
        return rc;
    }
    return AS_OK;
}

void as_atomic_abort(FILE *f, const char *tmp)
{
    if (f)
        fclose(f);
    if (!*tmp) {
        as_output_pipe_guard(false);
        return;
    }
    unlink(tmp);
    temp_release(tmp);
}

int as_atomic_check(const char *path, AsError *err)
{
    char real[AS_ATOMIC_TMP_MAX];
    int rc = as_output_target(path, real, sizeof real, NULL, err);
    struct stat st;
    if (rc || (!stat(path, &st) && !S_ISREG(st.st_mode)))
        return rc; /* a stream: nothing to create beside it */
    char tmp[AS_ATOMIC_TMP_MAX];
    FILE *f;
    rc = as_atomic_create(path, tmp, sizeof tmp, &f, err);
    if (!rc)
        as_atomic_abort(f, tmp);
    return rc;
}

int as_atomic_commit(FILE *f, const char *tmp, const char *path, AsError *err)
{
    if (!*tmp) { /* a stream: flushed, nothing to rename (fsync means nothing on a device or a FIFO) */
        bool ok = fflush(f) == 0;
        int e = errno;
        ok = (fclose(f) == 0) && ok;
        as_output_pipe_guard(false);
        return ok ? AS_OK : as_err(err, AS_ERUNTIME, "%s: cannot write (%s)", path, strerror(e ? e : errno));
    }
    bool ok = fflush(f) == 0 && fsync(fileno(f)) == 0;
    int e = errno;
    ok = (fclose(f) == 0) && ok;
    char target[AS_ATOMIC_TMP_MAX];
    const size_t tl = strlen(tmp);
    snprintf(target, sizeof target, "%.*s", (int)(tl > 11 ? tl - 11 : 0), tmp); /* less ".tmp-XXXXXX" */
    struct stat st; /* what became of the target meanwhile: only a regular file (or nothing) is replaced */
    if (ok && !lstat(target, &st) && !S_ISREG(st.st_mode)) {
        unlink(tmp);
        temp_release(tmp);
        return as_err(err, AS_ERUNTIME, "%s: no longer a regular file; nothing written", path);
    }
    if (ok && rename(tmp, target) == 0) {
        temp_release(tmp);
        return AS_OK;
    }
    e = ok ? errno : e;
    unlink(tmp);
    temp_release(tmp);
    return as_err(err, AS_ERUNTIME, "%s: cannot write (%s)", path, strerror(e));
}

static int cmp_spec(const void *a, const void *b)
{
    return strcmp((*(const AsStTensorSpec *const *)a)->name, (*(const AsStTensorSpec *const *)b)->name);
}

/* Bytes of a tensor to write, checked. */
static int spec_bytes(const AsStTensorSpec *t, int64_t *bytes, AsError *err)
{
    const StDType *d = dtype_of(t->dtype);
    if (!t->name[0])
        return as_err(err, AS_EBADINPUT, "writing safetensors: a tensor has no name");
    if (!d)
        return as_err(err, AS_EBADINPUT, "writing safetensors: %s: dtype %d cannot be stored", t->name,
                      (int)t->dtype);
    if (t->ndim < 0 || t->ndim > 4)
        return as_err(err, AS_EBADINPUT, "writing safetensors: %s: %d dimensions", t->name, t->ndim);
    uint64_t count = 1;
    for (int i = 0; i < t->ndim; i++) {
        if (t->shape[i] < 0 || (t->shape[i] && count > MAX_ELEMS / (uint64_t)t->shape[i]))
            return as_err(err, AS_EBADINPUT, "writing safetensors: %s: bad shape", t->name);
        count *= (uint64_t)t->shape[i];
    }
    *bytes = (int64_t)(count * (uint64_t)d->bits / 8);
    return AS_OK;
}

/* The header JSON for the tensors in ord (bytes[k] is ord[k]'s size), padded with spaces to a
 * multiple of 8 bytes so that the data section starts 8-byte aligned. */
static char *build_header(const AsStTensorSpec *const *ord, const int64_t *bytes, int n, const char *const *meta,
                          uint64_t *len)
{
    cJSON *root = cJSON_CreateObject();
    bool ok = root != NULL;
    if (ok && meta && meta[0]) {
        cJSON *m = cJSON_AddObjectToObject(root, "__metadata__");
        ok = m != NULL;
        for (int i = 0; ok && meta[i] && meta[i + 1]; i += 2)
            ok = cJSON_AddStringToObject(m, meta[i], meta[i + 1]) != NULL;
    }
    uint64_t off = 0;
    for (int k = 0; ok && k < n; k++) {
        const AsStTensorSpec *t = ord[k];
        cJSON *e = cJSON_AddObjectToObject(root, t->name);
        cJSON *sh = e ? cJSON_AddArrayToObject(e, "shape") : NULL;
        cJSON *of = e ? cJSON_AddArrayToObject(e, "data_offsets") : NULL;
        ok = e && sh && of && cJSON_AddStringToObject(e, "dtype", as_st_dtype_name(t->dtype));
        for (int i = 0; ok && i < t->ndim; i++)
            ok = cJSON_AddItemToArray(sh, cJSON_CreateNumber((double)t->shape[i]));
        ok = ok && cJSON_AddItemToArray(of, cJSON_CreateNumber((double)off));
        off += (uint64_t)bytes[k];
        ok = ok && cJSON_AddItemToArray(of, cJSON_CreateNumber((double)off));
    }
    char *s = ok ? cJSON_PrintUnformatted(root) : NULL;
    cJSON_Delete(root);
    if (!s)
        return NULL;
    size_t l = strlen(s), padded = (l + 7) / 8 * 8;
    char *p = realloc(s, padded + 1);
    if (!p) {
        free(s);
        return NULL;
    }
    memset(p + l, ' ', padded - l);
    p[padded] = '\0';
    *len = padded;
    return p;
}

/* Streams one tensor's bytes: from memory, or chunk by chunk from fill. */
static int write_tensor(FILE *f, const AsStTensorSpec *t, int i, int64_t bytes, const AsStWriteOptions *opt,
                        void *buf, int64_t *done, int64_t total, const char *path, AsError *err)
{
    for (int64_t off = 0; off < bytes;) {
        size_t n = bytes - off < (int64_t)WRITE_CHUNK ? (size_t)(bytes - off) : WRITE_CHUNK;
        const void *src = t->data ? (const uint8_t *)t->data + off : buf;
        if (!t->data) {
            int rc = opt->fill(opt->ctx, i, off, buf, n, err);
            if (rc)
                return rc;
        }
        if (fwrite(src, 1, n, f) != n)
            return as_err(err, AS_ERUNTIME, "%s: write failed (%s)", path, strerror(errno));
        off += (int64_t)n;
        *done += (int64_t)n;
        if (opt->progress)
            opt->progress(opt->ctx, *done, total);
    }
    return AS_OK;
}

int as_st_write(const char *path, const AsStTensorSpec *t, int n, const AsStWriteOptions *opt, AsError *err)
{
    static const AsStWriteOptions none = {0};
    if (!opt)
        opt = &none;
    if (n < 0)
        return as_err(err, AS_EBADINPUT, "writing safetensors: %d tensors", n);
    const AsStTensorSpec **ord = malloc(((size_t)n + 1) * sizeof *ord);
    int64_t *bytes = malloc(((size_t)n + 1) * sizeof *bytes);
    void *buf = malloc(WRITE_CHUNK);
    char *header = NULL, tmp[AS_ATOMIC_TMP_MAX];
    FILE *f = NULL;
    int rc = AS_OK;
    int64_t total = 0, done = 0;
    uint64_t hlen = 0;
    if (!ord || !bytes || !buf) {
        rc = as_err(err, AS_ERUNTIME, "%s: out of memory", path);
        goto out;
    }
    for (int i = 0; i < n; i++)
        ord[i] = &t[i];
    qsort(ord, (size_t)n, sizeof *ord, cmp_spec);
    for (int k = 0; k < n && !rc; k++) {
        if (k > 0 && !strcmp(ord[k]->name, ord[k - 1]->name))
            rc = as_err(err, AS_EBADINPUT, "writing safetensors: tensor %s given twice", ord[k]->name);
        else if (!ord[k]->data && !opt->fill)
            rc = as_err(err, AS_EBADINPUT, "writing safetensors: %s has no data", ord[k]->name);
        else if (!(rc = spec_bytes(ord[k], &bytes[k], err)))
            total += bytes[k];
    }
    if (rc)
        goto out;
    if (!(header = build_header(ord, bytes, n, opt->metadata, &hlen))) {
        rc = as_err(err, AS_ERUNTIME, "%s: out of memory building the header", path);
        goto out;
    }
    if (hlen > AS_ST_MAX_HEADER) {
        rc = as_err(err, AS_EBADINPUT, "%s: header of %llu bytes exceeds the limit", path, (unsigned long long)hlen);
        goto out;
    }
    if ((rc = as_atomic_create(path, tmp, sizeof tmp, &f, err)))
        goto out;
    if (fwrite(&hlen, 8, 1, f) != 1 || fwrite(header, 1, (size_t)hlen, f) != (size_t)hlen) {
        rc = as_err(err, AS_ERUNTIME, "%s: write failed (%s)", path, strerror(errno));
        goto out;
    }
    for (int k = 0; k < n && !rc; k++)
        rc = write_tensor(f, ord[k], (int)(ord[k] - t), bytes[k], opt, buf, &done, total, path, err);
    if (!rc) {
        rc = as_atomic_commit(f, tmp, path, err);
        f = NULL;
    }
out:
    if (f)
        as_atomic_abort(f, tmp);
    free(ord);
    free(bytes);
    free(buf);
    free(header);
    return rc;
}
