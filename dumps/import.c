/* Imports (dumps/import.h, docs/IMPORT.md): the inputs gathered (directories walked in name order),
 * every name parsed by the scheme, metadata merged, then each step, layer and tensor checked against
 * the geometry through the dump schema (dumps/schema.h) before any data is read. */
#include "dumps/import.h"

#include <cJSON.h>
#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "model/infile.h"
#include "model/json_strict.h"
#include "model/npy.h"
#include "model/precision.h"
#include "model/quants.h"
#include "model/safetensors.h"
#include "model/textfile.h"
#include "ref/numerics.h"

#define KEY_MAX 256
#define NO_LAYER (-1)   /* a step's own h0 */
#define WHOLE_H0 (-2)   /* the whole h0: step -1 */

static bool ends_with(const char *s, const char *suffix)
{
    size_t n = strlen(s), m = strlen(suffix);
    return n >= m && !strcmp(s + n - m, suffix);
}

/* A file's kind by its name. */
static AsInputKind kind_by_name(const char *path)
{
    if (ends_with(path, ".safetensors"))
        return AS_INPUT_SAFETENSORS;
    if (ends_with(path, ".npy"))
        return AS_INPUT_NPY;
    if (ends_with(path, ".npz"))
        return AS_INPUT_NPZ;
    if (ends_with(path, ".json"))
        return AS_INPUT_JSON;
    return AS_INPUT_HDF5;
}

/* A regular file's kind by its first bytes: the npy magic, a zip record, a safetensors header length
 * followed by '{'. */
static AsInputKind kind_by_magic(const char *path)
{
    AsError e;
    int fd = as_open_input(path, &e);
    if (fd < 0)
        return AS_INPUT_HDF5;
    uint8_t b[9];
    ssize_t n = read(fd, b, sizeof b);
    struct stat st;
    bool sized = !fstat(fd, &st);
    close(fd);
    uint64_t hlen = 0;
    if (n == 9)
        memcpy(&hlen, b, 8);
    if (n >= 6 && !memcmp(b, "\x93NUMPY", 6))
        return AS_INPUT_NPY;
    if (n >= 4 && (!memcmp(b, "PK\x03\x04", 4) || !memcmp(b, "PK\x05\x06", 4)))
        return AS_INPUT_NPZ;
    if (n == 9 && b[8] == '{' && sized && hlen >= 2 && hlen <= (uint64_t)st.st_size - 8)
        return AS_INPUT_SAFETENSORS;
    return AS_INPUT_HDF5;
}

AsInputKind as_input_kind(const char *path)
{
    struct stat st;
    if (stat(path, &st))
        return AS_INPUT_HDF5;
    if (S_ISDIR(st.st_mode))
        return AS_INPUT_DIR;
    if (ends_with(path, ".h5") || ends_with(path, ".hdf5") || !S_ISREG(st.st_mode))
        return AS_INPUT_HDF5;
    AsInputKind k = kind_by_name(path);
    return k != AS_INPUT_HDF5 ? k : kind_by_magic(path);
}

/* ---- what an import holds ------------------------------------------------------------------ */

typedef struct {
    char path[1024];
    char base[1024];        /* an .npy file's name for the scheme: its path below the directory given */
    AsInputKind kind;
    AsStContents st;
    AsNpyFile *npy;
} InFile;

/* One tensor: where it lies and what it is. */
typedef struct {
    int step, layer;        /* layer NO_LAYER: the step's h0; WHOLE_H0 (step -1): the whole h0 */
    AsTensorId id;          /* AS_T_COUNT for h0 */
    int file, index;        /* its file, and the entry or member in it */
    AsElemType type;
    bool big_endian;
    int ndim;
    int64_t shape[AS_NPY_MAX_DIMS];
    char key[KEY_MAX];      /* the name as its file gives it */
} Entry;

typedef struct {
    char key[KEY_MAX], val[KEY_MAX];
    int file;
} Meta;

typedef struct {
    int step, start_pos, tokens;
    char kind[16];
} Step;

struct AsImport {
    AsConfig cfg;
    char *config_json;
    char side[64];
    char precision[16];     /* "" when the metadata names none */
    char writer[KEY_MAX];
    int first_pos;          /* of the whole h0 (metadata "first_pos"), else 0 */
    int n_files, cap_files;
    InFile *files;
    int n_entries, cap_entries;
    Entry *e;               /* sorted by step, layer, tensor once open */
    int n_meta, cap_meta;
    Meta *meta;
    int n_steps;
    Step *steps;            /* ascending */
};

static void *grow(void *p, int *cap, int need, size_t size)
{
    if (need <= *cap)
        return p;
    int nc = *cap ? *cap * 2 : 64;
    while (nc < need)
        nc *= 2;
    void *q = realloc(p, (size_t)nc * size);
    if (q)
        *cap = nc;
    return q;
}

/* ---- gathering the files ------------------------------------------------------------------- */

static int add_file(AsImport *imp, const char *path, const char *base, AsInputKind kind, AsError *err)
{
    if (imp->n_files >= AS_IMPORT_MAX_FILES)
        return as_err(err, AS_EBADINPUT, "%s: more than %d files to import", path, AS_IMPORT_MAX_FILES);
    InFile *f = grow(imp->files, &imp->cap_files, imp->n_files + 1, sizeof *f);
    if (!f)
        return as_err(err, AS_ERUNTIME, "out of memory");
    imp->files = f;
    f = &imp->files[imp->n_files];
    memset(f, 0, sizeof *f);
    if (snprintf(f->path, sizeof f->path, "%s", path) >= (int)sizeof f->path ||
        snprintf(f->base, sizeof f->base, "%s", base) >= (int)sizeof f->base)
        return as_err(err, AS_EBADINPUT, "%.200s...: path too long", path);
    f->kind = kind;
    imp->n_files++;
    return 0;
}

static int cmp_str(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

/* The entries of a directory, sorted, without "." and ".." and hidden names. */
static int list_dir(const char *dir, char ***names, int *n, AsError *err)
{
    *names = NULL;
    *n = 0;
    DIR *d = opendir(dir);
    if (!d)
        return as_err(err, AS_EBADINPUT, "%s: cannot open the directory (%s)", dir, strerror(errno));
    int cap = 0, rc = 0;
    for (struct dirent *e; !rc && (e = readdir(d));) {
        if (e->d_name[0] == '.')
            continue; /* ".", "..", hidden files and attnscope's own temporaries */
        char **nn = grow(*names, &cap, *n + 1, sizeof *nn);
        if (*n >= AS_IMPORT_MAX_FILES)
            rc = as_err(err, AS_EBADINPUT, "%s: more than %d entries", dir, AS_IMPORT_MAX_FILES);
        else if (!nn || !(nn[*n] = strdup(e->d_name)))
            rc = as_err(err, AS_ERUNTIME, "out of memory");
        if (nn)
            *names = nn;
        if (!rc)
            (*n)++;
    }
    closedir(d);
    if (!rc && *n)
        qsort(*names, (size_t)*n, sizeof **names, cmp_str);
    return rc;
}

/* Every file below dir (rel: its path below the directory named), in name order. Files of other
 * kinds are passed over, except torch pickles (never read) and anything that is not a regular file;
 * links to directories are not followed. */
static int walk_dir(AsImport *imp, const char *dir, const char *rel, int depth, AsError *err)
{
    if (depth > AS_IMPORT_MAX_DEPTH)
        return as_err(err, AS_EBADINPUT, "%s: directories nested deeper than %d", dir, AS_IMPORT_MAX_DEPTH);
    char **names;
    int n, rc = list_dir(dir, &names, &n, err);
    for (int i = 0; !rc && i < n; i++) {
        char path[1024], sub[1024];
        if (snprintf(path, sizeof path, "%s/%s", dir, names[i]) >= (int)sizeof path ||
            snprintf(sub, sizeof sub, "%s%s%s", rel, *rel ? "/" : "", names[i]) >= (int)sizeof sub) {
            rc = as_err(err, AS_EBADINPUT, "%.200s/%.200s...: path too long", dir, names[i]);
            break;
        }
        struct stat ls, st;
        if (lstat(path, &ls) || stat(path, &st)) {
            rc = as_err(err, AS_EBADINPUT, "%s: cannot open (%s)", path, strerror(errno));
            break;
        }
        if (S_ISDIR(st.st_mode)) {
            rc = S_ISLNK(ls.st_mode) ? as_err(err, AS_EBADINPUT, "%s: a link to a directory (not followed: name it)", path)
                                     : walk_dir(imp, path, sub, depth + 1, err);
            continue;
        }
        AsInputKind k = kind_by_name(names[i]);
        if (ends_with(names[i], ".pt") || ends_with(names[i], ".pth") || ends_with(names[i], ".pkl") ||
            ends_with(names[i], ".bin")) {
            rc = as_err(err, AS_EBADINPUT, "%s: a torch or pickle file (never read: save .npy, .npz or safetensors)",
                        path);
            break;
        }
        if (k == AS_INPUT_HDF5)
            continue; /* not ours: a README, a log */
        if (!S_ISREG(st.st_mode)) { /* a FIFO, a socket, a device: as_check_input names it, never blocking */
            rc = as_check_input(path, err) ? AS_EBADINPUT : as_err(err, AS_EBADINPUT, "%s: not a regular file", path);
            break;
        }
        char base[1024];
        snprintf(base, sizeof base, "%s", sub);
        rc = add_file(imp, path, base, k, err);
    }
    for (int i = 0; i < n; i++)
        free(names[i]);
    free(names);
    return rc;
}

static int gather(AsImport *imp, const char *const *paths, int n, AsError *err)
{
    for (int i = 0; i < n; i++) {
        AsInputKind k = as_input_kind(paths[i]);
        if (k == AS_INPUT_DIR) {
            int rc = walk_dir(imp, paths[i], "", 0, err);
            if (rc)
                return rc;
            continue;
        }
        if (as_check_input(paths[i], err)) /* missing, unreadable, a FIFO: one line, never blocking */
            return AS_EBADINPUT;
        if (k == AS_INPUT_HDF5)
            return as_err(err, AS_EBADINPUT, "%s: not a safetensors, .npy, .npz or .json file (by its name and first "
                          "bytes); an HDF5 dump is checked on its own", paths[i]);
        int rc = add_file(imp, paths[i], paths[i], k, err);
        if (rc)
            return rc;
    }
    return imp->n_files ? 0 : as_err(err, AS_EBADINPUT, "%s: no safetensors, .npy, .npz or .json file to import", paths[0]);
}

/* ---- names ----------------------------------------------------------------------------------- */

static bool is_sep(char c) { return c == '/' || c == '.' || c == '_' || c == '-'; }

/* "word{N}" then a separator at *p: N (at most 7 digits), *p past the separator. */
static bool numbered(const char **p, const char *word, int *v)
{
    size_t w = strlen(word);
    const char *s = *p;
    if (strncmp(s, word, w))
        return false;
    s += w;
    long n = 0;
    int digits = 0;
    while (*s >= '0' && *s <= '9' && digits < 8)
        n = n * 10 + (*s++ - '0'), digits++;
    if (!digits || digits > 7 || !is_sep(*s))
        return false;
    *v = (int)n;
    *p = s + 1;
    return true;
}

/* The dump format's name of a tensor, or a state tensor spelled with another separator
 * (state/ring, state_ring, state-ring). */
static AsTensorId tensor_named(const char *s)
{
    AsTensorId id = as_tensor_by_name(s);
    if (id == AS_T_COUNT && !strncmp(s, "state", 5) && s[5] && is_sep(s[5])) {
        char b[64];
        snprintf(b, sizeof b, "state.%s", s + 6);
        id = as_tensor_by_name(b);
    }
    return id;
}

typedef enum { NAME_NONE, NAME_TENSOR, NAME_STEP_WORD, NAME_WHOLE_H0, NAME_BAD_TENSOR } NameKind;

/* key by the scheme, at its start or after any '/': step{S}<sep>layer{L}<sep>{tensor}, step{S}<sep>{word}
 * (h0, start_pos, tokens, kind), or h0 / inputs/h0. *rest: the tensor or word. */
static NameKind parse_name(const char *key, int *step, int *layer, AsTensorId *id, const char **rest)
{
    NameKind found = NAME_NONE;
    for (const char *c = key; c; c = strchr(c, '/') ? strchr(c, '/') + 1 : NULL) {
        if (!strcmp(c, "h0") || !strcmp(c, "inputs/h0"))
            return NAME_WHOLE_H0;
        const char *p = c;
        if (!numbered(&p, "step", step))
            continue;
        if (numbered(&p, "layer", layer)) {
            *rest = p;
            if ((*id = tensor_named(p)) != AS_T_COUNT)
                return NAME_TENSOR;
            found = NAME_BAD_TENSOR;
            continue;
        }
        *rest = p;
        *layer = NO_LAYER;
        if (!strcmp(p, "h0") || !strcmp(p, "start_pos") || !strcmp(p, "tokens") || !strcmp(p, "kind"))
            return NAME_STEP_WORD;
    }
    return found;
}

/* ---- metadata -------------------------------------------------------------------------------- */

static bool global_key(const char *k)
{
    return !strcmp(k, "side") || !strcmp(k, "precision") || !strcmp(k, "first_pos") || !strcmp(k, "writer");
}

/* A metadata key of the scheme in its one spelling: a global key as it is, step{S}/{word} for a step's
 * (whatever separator and prefix it was written with); "" for another key: refused when strict (a JSON
 * file of ours), else passed over (other tools' safetensors metadata, "format": "pt"), unless it looks
 * like a step's. */
static int canonical_key(const AsImport *imp, int file, const char *key, bool strict, char *out, size_t n,
                         AsError *err)
{
    int step, layer;
    AsTensorId id;
    const char *rest = "";
    out[0] = '\0';
    if (global_key(key)) {
        snprintf(out, n, "%s", key);
        return 0;
    }
    if (parse_name(key, &step, &layer, &id, &rest) == NAME_STEP_WORD && strcmp(rest, "h0")) {
        snprintf(out, n, "step%d/%s", step, rest);
        return 0;
    }
    if (!strict && strncmp(key, "step", 4))
        return 0;
    return as_err(err, AS_EBADINPUT, "%s: metadata key '%.64s' is not side, precision, first_pos, writer or "
                  "step{S}/start_pos, step{S}/tokens, step{S}/kind (docs/IMPORT.md)", imp->files[file].path, key);
}

/* One key and value from a file's metadata. A key given twice must have the same value. */
static int add_meta(AsImport *imp, int file, const char *key, const char *val, bool strict, AsError *err)
{
    const char *path = imp->files[file].path;
    char k[KEY_MAX + 16];
    if (strlen(key) >= KEY_MAX || strlen(val) >= KEY_MAX)
        return as_err(err, AS_EBADINPUT, "%s: metadata '%.64s': key or value longer than %d bytes", path, key,
                      KEY_MAX - 1);
    int rc = canonical_key(imp, file, key, strict, k, sizeof k, err);
    if (rc || !k[0])
        return rc;
    for (int i = 0; i < imp->n_meta; i++) {
        if (strcmp(imp->meta[i].key, k))
            continue;
        if (strcmp(imp->meta[i].val, val))
            return as_err(err, AS_EBADINPUT, "metadata '%s' is '%.64s' in %s and '%.64s' in %s", k, imp->meta[i].val,
                          imp->files[imp->meta[i].file].path, val, path);
        return 0;
    }
    Meta *m = grow(imp->meta, &imp->cap_meta, imp->n_meta + 1, sizeof *m);
    if (!m)
        return as_err(err, AS_ERUNTIME, "out of memory");
    imp->meta = m;
    m = &imp->meta[imp->n_meta++];
    snprintf(m->key, sizeof m->key, "%s", k);
    snprintf(m->val, sizeof m->val, "%s", val);
    m->file = file;
    return 0;
}

/* A JSON file beside the tensors: one object of the scheme's keys, values whole numbers or strings. */
static int read_json_meta(AsImport *imp, int file, AsError *err)
{
    const char *path = imp->files[file].path;
    char *text;
    size_t len;
    int rc = as_read_text_file(path, AS_IMPORT_MAX_JSON, "import metadata file", &text, &len, err);
    if (rc)
        return rc;
    cJSON *root = NULL;
    if ((rc = as_json_parse_strict(text, len, &root, err)))
        as_err_wrap(err, "%s", path);
    else if (!cJSON_IsObject(root))
        rc = as_err(err, AS_EBADINPUT, "%s: not a JSON object of metadata (docs/IMPORT.md)", path);
    for (const cJSON *e = rc ? NULL : root->child; e && !rc; e = e->next) {
        char num[32];
        double v = cJSON_IsNumber(e) ? e->valuedouble : -1;
        if (cJSON_IsString(e))
            rc = add_meta(imp, file, e->string, e->valuestring, true, err);
        else if (v >= 0 && v <= (double)AS_LIMIT_MAX_SEQ && v == (double)(long long)v)
            snprintf(num, sizeof num, "%lld", (long long)v), rc = add_meta(imp, file, e->string, num, true, err);
        else
            rc = as_err(err, AS_EBADINPUT, "%s: '%.64s' is not a whole number in [0, %d] or a string", path, e->string,
                        AS_LIMIT_MAX_SEQ);
    }
    cJSON_Delete(root);
    free(text);
    return rc;
}

static const Meta *meta_find(const AsImport *imp, const char *key)
{
    for (int i = 0; i < imp->n_meta; i++)
        if (!strcmp(imp->meta[i].key, key))
            return &imp->meta[i];
    return NULL;
}

/* A metadata value as a whole number in [lo, hi]; 1 when the key is absent. */
static int meta_int(const AsImport *imp, const char *key, int lo, int hi, int *out, AsError *err)
{
    const Meta *m = meta_find(imp, key);
    if (!m)
        return 1;
    long long x = 0;
    size_t len = strlen(m->val), i = 0;
    for (; i < len && i < 10 && m->val[i] >= '0' && m->val[i] <= '9'; i++)
        x = x * 10 + (m->val[i] - '0');
    if (!len || i != len || x < lo || x > hi)
        return as_err(err, AS_EBADINPUT, "%s: metadata '%s' = '%.64s' is not a whole number in [%d, %d]",
                      imp->files[m->file].path, key, m->val, lo, hi);
    *out = (int)x;
    return 0;
}

/* ---- tensors --------------------------------------------------------------------------------- */

static int add_entry(AsImport *imp, int file, int index, const char *key, AsElemType type, bool big, int ndim,
                     const int64_t *shape, AsError *err)
{
    const char *path = imp->files[file].path;
    int step = -1, layer = WHOLE_H0;
    AsTensorId id = AS_T_COUNT;
    const char *rest = "";
    NameKind k = parse_name(key, &step, &layer, &id, &rest);
    if (k == NAME_WHOLE_H0)
        step = -1, layer = WHOLE_H0;
    else if (k == NAME_BAD_TENSOR)
        return as_err(err, AS_EBADINPUT, "%s: '%.200s': '%.64s' is not a tensor of the dump format (docs/DUMP_FORMAT.md)",
                      path, key, rest);
    else if (k == NAME_STEP_WORD && strcmp(rest, "h0"))
        return as_err(err, AS_EBADINPUT, "%s: '%.200s': %s is metadata, not a tensor", path, key, rest);
    else if (k == NAME_NONE)
        return as_err(err, AS_EBADINPUT, "%s: '%.200s' is not named step{S}/layer{L}/{tensor}, step{S}/h0 or h0 "
                      "(docs/IMPORT.md)", path, key);
    if (ndim > AS_NPY_MAX_DIMS)
        return as_err(err, AS_EBADINPUT, "%s: '%.200s': %d dimensions", path, key, ndim);
    if (imp->n_entries >= AS_IMPORT_MAX_TENSORS)
        return as_err(err, AS_EBADINPUT, "%s: more than %d tensors to import", path, AS_IMPORT_MAX_TENSORS);
    Entry *e = grow(imp->e, &imp->cap_entries, imp->n_entries + 1, sizeof *e);
    if (!e)
        return as_err(err, AS_ERUNTIME, "out of memory");
    imp->e = e;
    e = &imp->e[imp->n_entries++];
    memset(e, 0, sizeof *e);
    e->step = step, e->layer = layer, e->id = k == NAME_TENSOR ? id : AS_T_COUNT;
    e->file = file, e->index = index, e->type = type, e->big_endian = big, e->ndim = ndim;
    memcpy(e->shape, shape, sizeof(int64_t) * (size_t)ndim);
    snprintf(e->key, sizeof e->key, "%s", key);
    return 0;
}

/* The dtypes a safetensors file may use for what import reads. */
static int st_elem(const char *dtype, AsElemType *t)
{
    static const struct {
        const char *name;
        AsElemType t;
    } map[] = {{"F64", AS_EL_F64}, {"F32", AS_EL_F32}, {"F16", AS_EL_F16}, {"BF16", AS_EL_BF16},
               {"I64", AS_EL_I64}, {"I32", AS_EL_I32}, {"U8", AS_EL_U8},   {"BOOL", AS_EL_BOOL}};
    for (size_t i = 0; i < sizeof map / sizeof map[0]; i++)
        if (!strcmp(dtype, map[i].name)) {
            *t = map[i].t;
            return 0;
        }
    return -1;
}

static int read_safetensors(AsImport *imp, int file, AsError *err)
{
    InFile *f = &imp->files[file];
    int rc = as_st_open_contents(f->path, &f->st, err);
    for (int i = 0; !rc && i < f->st.n_meta; i++)
        rc = add_meta(imp, file, f->st.meta[2 * i], f->st.meta[2 * i + 1], false, err);
    for (int i = 0; !rc && i < f->st.n; i++) {
        const AsStEntry *t = &f->st.entries[i];
        AsElemType type;
        if (st_elem(t->dtype, &type))
            return as_err(err, AS_EBADINPUT, "%s: '%s': dtype %s (read: F64, F32, F16, BF16; I64, I32 for indices; U8, "
                          "BOOL for masks)", f->path, t->name, t->dtype);
        rc = add_entry(imp, file, i, t->name, type, false, t->ndim, t->shape, err);
    }
    return rc;
}

static int read_npy(AsImport *imp, int file, AsError *err)
{
    InFile *f = &imp->files[file];
    int rc = as_npy_open(f->path, &f->npy, err);
    for (int i = 0; !rc && i < f->npy->n; i++) {
        const AsNpyArray *a = &f->npy->a[i];
        char key[KEY_MAX];
        /* an .npy file is named by its path (from its first part that begins with "step", else its
         * file name) less ".npy"; an .npz member by its own name */
        const char *b = f->base, *slash = strrchr(b, '/');
        for (const char *c = b; c; c = strchr(c, '/') ? strchr(c, '/') + 1 : NULL)
            if (!strncmp(c, "step", 4)) {
                b = c, slash = NULL;
                break;
            }
        b = slash ? slash + 1 : b;
        int len = (int)strlen(b) - (ends_with(b, ".npy") ? 4 : 0);
        if (!f->npy->npz && snprintf(key, sizeof key, "%.*s", len, b) >= (int)sizeof key)
            return as_err(err, AS_EBADINPUT, "%s: name longer than %d bytes", f->path, KEY_MAX - 1);
        rc = add_entry(imp, file, i, f->npy->npz ? a->name : key, a->type, a->big_endian, a->ndim, a->shape, err);
    }
    return rc;
}

/* ---- the checks ------------------------------------------------------------------------------ */

static int cmp_entry(const void *x, const void *y)
{
    const Entry *a = x, *b = y;
    if (a->step != b->step)
        return a->step < b->step ? -1 : 1;
    if (a->layer != b->layer)
        return a->layer < b->layer ? -1 : 1;
    return (a->id > b->id) - (a->id < b->id);
}

static const Step *find_step(const AsImport *imp, int step)
{
    for (int lo = 0, hi = imp->n_steps; lo < hi;) {
        int mid = lo + (hi - lo) / 2;
        if (imp->steps[mid].step == step)
            return &imp->steps[mid];
        if (imp->steps[mid].step < step)
            lo = mid + 1;
        else
            hi = mid;
    }
    return NULL;
}

/* "step 3 layer 5 q" / "step 3 h0" / "h0" */
static void entry_what(const Entry *e, char *buf, size_t n)
{
    if (e->layer == WHOLE_H0)
        snprintf(buf, n, "h0");
    else if (e->layer == NO_LAYER)
        snprintf(buf, n, "step %d h0", e->step);
    else
        snprintf(buf, n, "step %d layer %d %s", e->step, e->layer, as_tensor_desc[e->id].name);
}

static int cmp_int(const void *a, const void *b)
{
    int x = *(const int *)a, y = *(const int *)b;
    return (x > y) - (x < y);
}

/* Every step that has a tensor or metadata, with its start_pos and tokens from the metadata (both
 * required) and its kind (step 0 a prefill, later steps decode steps, unless the metadata says). */
static int build_steps(AsImport *imp, AsError *err)
{
    int *nums = malloc(sizeof(int) * (size_t)(imp->n_entries + imp->n_meta + 1)), n = 0, rc = 0;
    if (!nums)
        return as_err(err, AS_ERUNTIME, "out of memory");
    for (int i = 0; i < imp->n_entries; i++)
        if (imp->e[i].step >= 0)
            nums[n++] = imp->e[i].step;
    for (int i = 0; i < imp->n_meta; i++)
        if (!strncmp(imp->meta[i].key, "step", 4))
            nums[n++] = atoi(imp->meta[i].key + 4); /* canonical: step{S}/{word} */
    qsort(nums, (size_t)n, sizeof *nums, cmp_int);
    int u = 0;
    for (int i = 0; i < n; i++)
        if (!u || nums[u - 1] != nums[i])
            nums[u++] = nums[i];
    if (!(imp->steps = calloc(u ? (size_t)u : 1, sizeof *imp->steps)))
        rc = as_err(err, AS_ERUNTIME, "out of memory");
    for (int i = 0; !rc && i < u; i++) {
        Step *st = &imp->steps[imp->n_steps++];
        char k[64];
        st->step = nums[i];
        if (st->step >= AS_DUMP_MAX_STEPS) {
            rc = as_err(err, AS_EBADINPUT, "step %d: beyond the dump format's %d steps", st->step, AS_DUMP_MAX_STEPS);
            break;
        }
        snprintf(k, sizeof k, "step%d/start_pos", st->step);
        int got = meta_int(imp, k, 0, AS_LIMIT_MAX_SEQ, &st->start_pos, err);
        if (got == 0) {
            snprintf(k, sizeof k, "step%d/tokens", st->step);
            got = meta_int(imp, k, 1, AS_LIMIT_MAX_SEQ, &st->tokens, err);
        }
        if (got == 1)
            rc = as_err(err, AS_EBADINPUT, "step %d: no %s in the metadata (each step needs step%d/start_pos and "
                        "step%d/tokens: docs/IMPORT.md)", st->step, k, st->step, st->step);
        else
            rc = got;
        snprintf(k, sizeof k, "step%d/kind", st->step);
        const Meta *kind = meta_find(imp, k);
        snprintf(st->kind, sizeof st->kind, "%.15s", kind ? kind->val : st->step == 0 ? "prefill" : "decode");
        if (!rc && strcmp(st->kind, "prefill") && strcmp(st->kind, "decode"))
            rc = as_err(err, AS_EBADINPUT, "%s: metadata '%s' = '%.64s' (prefill or decode)",
                        imp->files[kind->file].path, k, kind->val);
    }
    free(nums);
    return rc;
}

static bool type_fits(AsValType vt, AsElemType t)
{
    switch (vt) {
    case AS_VT_I32: return t == AS_EL_I32 || t == AS_EL_I64;
    case AS_VT_U8: return t == AS_EL_U8 || t == AS_EL_BOOL;
    default: return t == AS_EL_F64 || t == AS_EL_F32 || t == AS_EL_F16 || t == AS_EL_BF16;
    }
}

static const char *type_class(AsValType vt)
{
    return vt == AS_VT_I32  ? "indices (int32, int64)"
           : vt == AS_VT_U8 ? "a mask (uint8, bool)"
                            : "values (float32, bfloat16, float16, float64)";
}

/* A source's shape as the schema's rank: a leading batch dimension of 1 dropped; a 3-d tensor given
 * with its last two dimensions as one ([s][nh * hd]) split back. Returns the rank. */
static int schema_rank(const int64_t want[3], int wnd, int ndim, int64_t *shape)
{
    if (ndim == wnd + 1 && shape[0] == 1) {
        memmove(shape, shape + 1, sizeof *shape * (size_t)(ndim - 1));
        ndim--;
    }
    if (wnd == 3 && ndim == 2 && want[1] > 0 && shape[0] == want[0] && shape[1] == want[1] * want[2]) {
        shape[1] = want[1], shape[2] = want[2];
        ndim = 3;
    }
    return ndim;
}

static int check_h0(const AsImport *imp, Entry *e, int tokens, AsError *err)
{
    char what[64];
    entry_what(e, what, sizeof what);
    const char *path = imp->files[e->file].path;
    int64_t want[3] = {tokens, imp->cfg.dim, 0};
    e->ndim = schema_rank(want, 2, e->ndim, e->shape);
    if (!type_fits(AS_VT_BF16, e->type))
        return as_err(err, AS_EBADINPUT, "%s: '%s' (%s): %s, the schema says %s", path, e->key, what,
                      as_elem_name(e->type), type_class(AS_VT_BF16));
    bool rows_ok = tokens >= 0 ? e->shape[0] == tokens : e->shape[0] >= 1 && e->shape[0] <= AS_LIMIT_MAX_SEQ;
    if (e->ndim != 2 || !rows_ok || e->shape[1] != imp->cfg.dim) {
        char got[160], rows[32];
        as_shape_str(e->shape, e->ndim, got, sizeof got);
        snprintf(rows, sizeof rows, tokens >= 0 ? "%d" : "tokens <= %d", tokens >= 0 ? tokens : AS_LIMIT_MAX_SEQ);
        return as_err(err, AS_EBADINPUT, "%s: '%s' (%s): shape %s, the schema says [%s, %d]", path, e->key, what, got,
                      rows, imp->cfg.dim);
    }
    return 0;
}

/* A tensor of a layer: its layer, type and shape against the geometry and SPEC 3's attributes. */
static int check_tensor(const AsImport *imp, Entry *e, const Step *st, AsError *err)
{
    char what[96], why[256];
    entry_what(e, what, sizeof what);
    const char *path = imp->files[e->file].path;
    const AsTensorDesc *d = &as_tensor_desc[e->id];
    if (e->layer >= imp->cfg.n_layers)
        return as_err(err, AS_EBADINPUT, "%s: '%s': layer %d is outside the model's %d layers", path, e->key, e->layer,
                      imp->cfg.n_layers);
    if (!type_fits(d->type, e->type))
        return as_err(err, AS_EBADINPUT, "%s: '%s' (%s): %s, the schema says %s", path, e->key, what,
                      as_elem_name(e->type), type_class(d->type));
    AsRun attrs;
    as_run_init(&attrs);
    as_dump_rule_attrs(&imp->cfg, e->layer, st->start_pos, st->tokens, &attrs);
    if (as_dump_check_attrs(&imp->cfg, e->layer, st->tokens, &attrs, why, sizeof why))
        return as_err(err, AS_EBADINPUT, "%s: '%s' (%s): %s", path, e->key, what, why);
    int64_t want[3];
    int wnd = as_dump_expected_shape(&imp->cfg, st->tokens, &attrs, e->id, want);
    e->ndim = schema_rank(want, wnd, e->ndim, e->shape);
    if (as_dump_check_shape(&imp->cfg, st->tokens, &attrs, e->id, e->ndim, e->shape, why, sizeof why))
        return as_err(err, AS_EBADINPUT, "%s: '%s' (%s): %s", path, e->key, what, why);
    return 0;
}

/* The token inputs: one whole h0, or each step's own, each step starting where the one before ended. */
static int check_inputs(AsImport *imp, AsError *err)
{
    const Entry *whole = NULL, *prev = NULL;
    int prev_end = 0;
    for (int i = 0; i < imp->n_entries; i++) {
        Entry *e = &imp->e[i];
        if (e->layer == WHOLE_H0) {
            whole = e;
            continue;
        }
        if (e->layer != NO_LAYER)
            continue;
        const Step *st = find_step(imp, e->step);
        if (whole)
            return as_err(err, AS_EBADINPUT, "%s: '%s' and %s: '%s': a whole h0 and a step's own (give one or the other)",
                          imp->files[whole->file].path, whole->key, imp->files[e->file].path, e->key);
        if (prev && st->start_pos != prev_end)
            return as_err(err, AS_EBADINPUT, "%s: '%s': step %d's h0 starts at position %d, the step before it ended at "
                          "%d (the steps' h0 must follow one another)", imp->files[e->file].path, e->key, e->step,
                          st->start_pos, prev_end);
        prev = e;
        prev_end = st->start_pos + st->tokens;
    }
    return 0;
}

static int check_all(AsImport *imp, AsError *err)
{
    if (imp->n_entries)
        qsort(imp->e, (size_t)imp->n_entries, sizeof *imp->e, cmp_entry);
    for (int i = 1; i < imp->n_entries; i++) {
        const Entry *a = &imp->e[i - 1], *b = &imp->e[i];
        if (!cmp_entry(a, b)) {
            char what[96];
            entry_what(b, what, sizeof what);
            return as_err(err, AS_EBADINPUT, "%s twice: %s: '%s' and %s: '%s'", what, imp->files[a->file].path, a->key,
                          imp->files[b->file].path, b->key);
        }
    }
    int rc = build_steps(imp, err);
    for (int i = 0; !rc && i < imp->n_entries; i++) {
        Entry *e = &imp->e[i];
        const Step *st = e->step >= 0 ? find_step(imp, e->step) : NULL;
        if (e->layer == WHOLE_H0)
            rc = check_h0(imp, e, -1, err);
        else if (e->layer == NO_LAYER)
            rc = check_h0(imp, e, st->tokens, err);
        else
            rc = check_tensor(imp, e, st, err);
    }
    if (!rc)
        rc = check_inputs(imp, err);
    const Meta *m;
    if (!rc && (m = meta_find(imp, "precision"))) {
        AsPrecision p;
        if (as_precision_parse(m->val, false, &p))
            rc = as_err(err, AS_EBADINPUT, "%s: metadata precision '%.64s' (fp8 or bf16)", imp->files[m->file].path,
                        m->val);
        else
            snprintf(imp->precision, sizeof imp->precision, "%.15s", m->val);
    }
    if (!rc && (m = meta_find(imp, "writer"))) {
        for (const char *p = m->val; !rc && *p; p++) /* it becomes a dump attribute, shown by dump-info */
            if (*p < 0x20 || *p > 0x7e)
                rc = as_err(err, AS_EBADINPUT, "%s: metadata writer is not printable ASCII", imp->files[m->file].path);
        snprintf(imp->writer, sizeof imp->writer, "%s", m->val);
    }
    if (!rc && meta_int(imp, "first_pos", 0, AS_LIMIT_MAX_SEQ, &imp->first_pos, err) > 1)
        rc = err->code;
    return rc;
}

/* ---- data ------------------------------------------------------------------------------------ */

static uint64_t load(const uint8_t *p, int size, bool big)
{
    uint64_t v = 0;
    memcpy(&v, p, (size_t)size); /* little-endian host (model/npy.c checks) */
    if (big)
        v = size == 8 ? __builtin_bswap64(v) : size == 4 ? __builtin_bswap32((uint32_t)v)
                                                         : __builtin_bswap16((uint16_t)v);
    return v;
}

/* A float64 narrowed to float32 as IEEE 754 does (beyond the range: an infinity; C leaves it undefined). */
static float narrow(double d)
{
    if (d > 3.4028234663852886e38 || d < -3.4028234663852886e38) {
        float f = (float)3.4028234663852886e38;
        return (float)(d > 0 ? 1 : -1) * f * 2.0f;
    }
    return (float)d;
}

static float elem_f32(const uint8_t *p, AsElemType t, bool big)
{
    uint64_t u = load(p, as_elem_size(t), big);
    uint32_t u32 = (uint32_t)u;
    double d;
    float f;
    switch (t) {
    case AS_EL_F64: memcpy(&d, &u, 8); return narrow(d);
    case AS_EL_F32: memcpy(&f, &u32, 4); return f;
    case AS_EL_F16: return as_fp16_to_fp32((uint16_t)u);
    default: return as_bf16_to_f32((uint16_t)u);
    }
}

/* n elements of e's data at src into dst, as storage type `to`; indices must fit int32. */
static int convert(const AsImport *imp, const Entry *e, const uint8_t *src, int64_t n, AsValType to, void *dst,
                   AsError *err)
{
    int size = as_elem_size(e->type);
    for (int64_t i = 0; i < n; i++) {
        const uint8_t *p = src + i * size;
        if (to == AS_VT_I32) {
            int64_t v = e->type == AS_EL_I64 ? (int64_t)load(p, 8, e->big_endian) : (int32_t)load(p, 4, e->big_endian);
            if (v < INT32_MIN || v > INT32_MAX)
                return as_err(err, AS_EBADINPUT, "%s: '%s': element %lld is %lld, beyond int32",
                              imp->files[e->file].path, e->key, (long long)i, (long long)v);
            ((int32_t *)dst)[i] = (int32_t)v;
        } else if (to == AS_VT_U8) {
            ((uint8_t *)dst)[i] = p[0];
        } else {
            ((float *)dst)[i] = elem_f32(p, e->type, e->big_endian);
        }
    }
    return 0;
}

/* Entry e's elements into dst (n of them, checked at open), as storage type `to`. */
static int read_entry(AsImport *imp, const Entry *e, int64_t n, AsValType to, void *dst, AsError *err)
{
    const InFile *f = &imp->files[e->file];
    const uint8_t *data;
    void *owned = NULL;
    int rc = 0;
    if (f->kind == AS_INPUT_SAFETENSORS)
        data = f->st.entries[e->index].data;
    else
        rc = as_npy_data(f->npy, e->index, &data, &owned, err);
    if (!rc)
        rc = convert(imp, e, data, n, to, dst, err);
    free(owned);
    return rc;
}

/* The first entry of (step, layer) in the sorted list, or n_entries. */
static int first_entry(const AsImport *imp, int step, int layer)
{
    int lo = 0, hi = imp->n_entries;
    while (lo < hi) {
        int mid = lo + (hi - lo) / 2;
        const Entry *e = &imp->e[mid];
        if (e->step < step || (e->step == step && e->layer < layer))
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}

int as_import_read_run(AsImport *imp, int step, int layer, AsRun *out, AsError *err)
{
    const Step *st = find_step(imp, step);
    as_run_free(out);
    if (!st || layer < 0 || layer >= imp->cfg.n_layers)
        return as_err(err, AS_EBADINPUT, "import: no step %d, layer %d", step, layer);
    as_dump_rule_attrs(&imp->cfg, layer, st->start_pos, st->tokens, out);
    int rc = 0;
    for (int i = first_entry(imp, step, layer); !rc && i < imp->n_entries; i++) {
        const Entry *e = &imp->e[i];
        if (e->step != step || e->layer != layer)
            break;
        const AsTensorDesc *d = &as_tensor_desc[e->id];
        void *buf = as_run_shape(out, e->id, d->ndim, e->shape[0], e->shape[1], e->shape[2]);
        rc = buf ? read_entry(imp, e, as_ht_numel(&out->t[e->id]), d->type, buf, err)
                 : as_err(err, AS_ERUNTIME, "%s: '%s': out of memory", imp->files[e->file].path, e->key);
    }
    out->layer = layer;
    out->step = step;
    out->start_pos = st->start_pos;
    out->s = st->tokens;
    if (rc)
        as_run_free(out);
    return rc;
}

int as_import_read_inputs(AsImport *imp, float **h0, int *tokens, int *first_pos, AsError *err)
{
    *h0 = NULL;
    int rows = 0, first = -1, dim = imp->cfg.dim;
    for (int i = 0; i < imp->n_entries; i++) {
        const Entry *e = &imp->e[i];
        if (e->layer == WHOLE_H0 || e->layer == NO_LAYER) {
            if (first < 0)
                first = e->layer == WHOLE_H0 ? imp->first_pos : find_step(imp, e->step)->start_pos;
            rows += (int)e->shape[0];
        }
    }
    if (first < 0)
        return as_err(err, AS_EBADINPUT, "%s: no h0 (the token inputs: h0, or step{S}/h0 for each step)",
                      imp->files[0].path);
    float *buf = malloc((size_t)rows * (size_t)dim * sizeof *buf + 1);
    if (!buf)
        return as_err(err, AS_ERUNTIME, "h0: out of memory for %d rows", rows);
    int rc = 0, at = 0;
    for (int i = 0; !rc && i < imp->n_entries; i++) {
        const Entry *e = &imp->e[i];
        if (e->layer != WHOLE_H0 && e->layer != NO_LAYER)
            continue;
        rc = read_entry(imp, e, e->shape[0] * dim, AS_VT_BF16, buf + (size_t)at * (size_t)dim, err);
        at += (int)e->shape[0];
    }
    if (rc) {
        free(buf);
        return rc;
    }
    *h0 = buf;
    *tokens = rows;
    *first_pos = first;
    return 0;
}

/* ---- the dump's index ------------------------------------------------------------------------ */

static int count_layers(const AsImport *imp, int step)
{
    int n = 0;
    for (int i = first_entry(imp, step, 0); i < imp->n_entries && imp->e[i].step == step; i++)
        if (i == 0 || imp->e[i - 1].step != step || imp->e[i - 1].layer != imp->e[i].layer)
            n += imp->e[i].layer >= 0;
    return n;
}

static char *dup_or_empty(const char *s) { return strdup(s ? s : ""); }

int as_import_info(const AsImport *imp, AsDumpInfo *in, AsError *err)
{
    memset(in, 0, sizeof *in);
    in->format_version = AS_DUMP_FORMAT_VERSION;
    in->cfg = imp->cfg;
    in->input_first_pos = -1;
    if (!(in->path = dup_or_empty(imp->files[0].path)) || !(in->config_json = dup_or_empty(imp->config_json)) ||
        !(in->weights_name = dup_or_empty("")) || !(in->weights_digest = dup_or_empty("")) ||
        !(in->version = dup_or_empty(imp->writer)) || !(in->mode = dup_or_empty("external")) ||
        !(in->created = dup_or_empty("")) || (imp->precision[0] && !(in->precision = strdup(imp->precision))) ||
        !(in->steps = calloc(imp->n_steps ? (size_t)imp->n_steps : 1, sizeof *in->steps)))
        return as_err(err, AS_ERUNTIME, "out of memory");
    for (int i = 0; i < imp->n_entries; i++)
        if (imp->e[i].layer == WHOLE_H0 || imp->e[i].layer == NO_LAYER) {
            if (in->input_first_pos < 0)
                in->input_first_pos = imp->e[i].layer == WHOLE_H0 ? imp->first_pos : find_step(imp, imp->e[i].step)->start_pos;
            in->input_tokens += (int)imp->e[i].shape[0];
        }
    for (int s = 0; s < imp->n_steps; s++) {
        const Step *st = &imp->steps[s];
        AsDumpStepInfo *si = &in->steps[in->n_steps++];
        si->step = st->step;
        snprintf(si->group, sizeof si->group, "%04d", st->step);
        snprintf(si->kind, sizeof si->kind, "%s", st->kind);
        si->start_pos = st->start_pos;
        si->tokens = st->tokens;
        int nl = count_layers(imp, st->step);
        if (!(si->layers = calloc(nl ? (size_t)nl : 1, sizeof *si->layers)))
            return as_err(err, AS_ERUNTIME, "out of memory");
        for (int i = first_entry(imp, st->step, 0); i < imp->n_entries && imp->e[i].step == st->step; i++) {
            const Entry *e = &imp->e[i];
            AsDumpLayerInfo *li = si->n_layers ? &si->layers[si->n_layers - 1] : NULL;
            if (!li || li->layer != e->layer) {
                li = &si->layers[si->n_layers++];
                li->layer = e->layer;
                snprintf(li->group, sizeof li->group, "%02d", e->layer);
                li->n_sides = 1;
                snprintf(li->side[0].name, sizeof li->side[0].name, "%s", imp->side);
                li->verdict = AS_V_NOT_RUN;
                li->worst_tensor = AS_T_COUNT;
            }
            li->side[0].tensors |= AS_DUMP_TENSOR_BIT(e->id);
        }
    }
    return 0;
}

void as_import_counts(const AsImport *imp, int *steps, int *layer_runs, int *tensors)
{
    *steps = imp->n_steps;
    *layer_runs = *tensors = 0;
    for (int s = 0; s < imp->n_steps; s++)
        *layer_runs += count_layers(imp, imp->steps[s].step);
    for (int i = 0; i < imp->n_entries; i++)
        *tensors += imp->e[i].layer >= 0;
}

const char *as_import_side(const AsImport *imp) { return imp->side; }

/* ---- writing --------------------------------------------------------------------------------- */

int as_import_write(AsImport *imp, const char *path, AsError *err)
{
    AsDumpMeta meta = {.cfg = &imp->cfg, .config_json = imp->config_json,
                       .precision = imp->precision[0] ? imp->precision : NULL, .mode = "external",
                       .version = imp->writer[0] ? imp->writer : NULL};
    AsDumpWriter *w;
    int rc = as_dump_create(path, &meta, &w, err);
    if (rc)
        return rc;
    float *h0 = NULL;
    int tokens, first;
    AsError ierr = {0};
    if (!as_import_read_inputs(imp, &h0, &tokens, &first, &ierr))
        rc = as_dump_write_inputs(w, h0, tokens, first, err);
    else if (strstr(ierr.msg, ": no h0 ") == NULL)
        rc = (*err = ierr, ierr.code); /* a damaged h0 fails the import; an absent one is allowed */
    free(h0);
    AsRun run;
    as_run_init(&run);
    for (int s = 0; !rc && s < imp->n_steps; s++) {
        const Step *st = &imp->steps[s];
        rc = as_dump_begin_step(w, st->step, st->kind, st->start_pos, st->tokens, err);
        for (int l = 0; !rc && l < imp->cfg.n_layers; l++) {
            int i = first_entry(imp, st->step, l);
            if (i == imp->n_entries || imp->e[i].step != st->step || imp->e[i].layer != l)
                continue;
            if (!(rc = as_import_read_run(imp, st->step, l, &run, err)))
                rc = as_dump_write_side(w, st->step, l, imp->side, &run, AS_DUMP_ALL_TENSORS, err);
        }
    }
    as_run_free(&run);
    if (rc) {
        as_dump_abort(w);
        return rc;
    }
    return as_dump_commit(w, err);
}

/* ---- open and free --------------------------------------------------------------------------- */

void as_import_free(AsImport *imp)
{
    if (!imp)
        return;
    for (int i = 0; i < imp->n_files; i++) {
        as_st_contents_free(&imp->files[i].st);
        as_npy_close(imp->files[i].npy);
    }
    free(imp->files);
    free(imp->e);
    free(imp->meta);
    free(imp->steps);
    free(imp->config_json);
    free(imp);
}

int as_import_open(const char *const *paths, int n, const AsImportOptions *o, AsImport **out, AsError *err)
{
    *out = NULL;
    AsImport *imp = calloc(1, sizeof *imp);
    if (!imp || !(imp->config_json = as_config_to_json(o->cfg))) {
        free(imp);
        return as_err(err, AS_ERUNTIME, "out of memory");
    }
    imp->cfg = *o->cfg;
    int rc = n > 0 ? gather(imp, paths, n, err) : as_err(err, AS_EBADINPUT, "nothing to import");
    for (int i = 0; !rc && i < imp->n_files; i++) {
        switch (imp->files[i].kind) {
        case AS_INPUT_SAFETENSORS: rc = read_safetensors(imp, i, err); break;
        case AS_INPUT_JSON: rc = read_json_meta(imp, i, err); break;
        default: rc = read_npy(imp, i, err); break;
        }
    }
    if (!rc)
        rc = check_all(imp, err);
    const Meta *m = rc ? NULL : meta_find(imp, "side");
    const char *side = o->side ? o->side : m ? m->val : "import";
    if (!rc && !as_dump_side_name_ok(side))
        rc = as_err(err, AS_EBADINPUT, "side name '%.64s' (1..63 of [A-Za-z0-9_.-], not 'diff')", side);
    snprintf(imp->side, sizeof imp->side, "%.63s", side);
    if (!rc && !imp->n_steps)
        rc = as_err(err, AS_EBADINPUT, "%s: no step to import (no tensor named step{S}/...)", imp->files[0].path);
    if (rc) {
        as_import_free(imp);
        return rc;
    }
    *out = imp;
    return 0;
}
