/* GGUF reading: the file mapped read-only, every field checked against its size before it is
 * used (overflow-safe), the tensors handed to the loader under DeepSeek's names, and the
 * attention geometry rebuilt from the metadata (docs/GGUF.md). */
#include "model/gguf.h"

#include <cJSON.h>
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "model/safetensors.h"
#include "model/mapfile.h"
#include "model/textfile.h"
#include "model/json_strict.h"

#if !defined(__BYTE_ORDER__) || __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "GGUF data is little-endian and is read in place: little-endian hosts only"
#endif
_Static_assert(sizeof(int) == 4, "config lists are written as int32 arrays");

#define MAX_ELEMS ((uint64_t)1 << 56)   /* elements of one tensor */
#define MAX_CONFIG_BYTES (16 << 20)
#define MIN_KV_BYTES 14                 /* key length 8 + 1 byte + type 4 + a 1-byte value */
#define MIN_TENSOR_BYTES 33             /* name 8 + 1 + n_dims 4 + one dim 8 + type 4 + offset 8 */

/* ---- ggml types ---- */

typedef struct {
    const char *name;
    uint32_t blck, size;    /* elements per block, bytes per block */
} GgmlType;

/* ggml.h's ids; removed ids (4, 5, 31-33, 36-38) and unknown ones have no entry. */
static const GgmlType ggml_types[] = {
    [0] = {"F32", 1, 4},         [1] = {"F16", 1, 2},          [2] = {"Q4_0", 32, 18},
    [3] = {"Q4_1", 32, 20},      [6] = {"Q5_0", 32, 22},       [7] = {"Q5_1", 32, 24},
    [8] = {"Q8_0", 32, 34},      [9] = {"Q8_1", 32, 36},       [10] = {"Q2_K", 256, 84},
    [11] = {"Q3_K", 256, 110},   [12] = {"Q4_K", 256, 144},    [13] = {"Q5_K", 256, 176},
    [14] = {"Q6_K", 256, 210},   [15] = {"Q8_K", 256, 292},    [16] = {"IQ2_XXS", 256, 66},
    [17] = {"IQ2_XS", 256, 74},  [18] = {"IQ3_XXS", 256, 98},  [19] = {"IQ1_S", 256, 50},
    [20] = {"IQ4_NL", 32, 18},   [21] = {"IQ3_S", 256, 110},   [22] = {"IQ2_S", 256, 82},
    [23] = {"IQ4_XS", 256, 136}, [24] = {"I8", 1, 1},          [25] = {"I16", 1, 2},
    [26] = {"I32", 1, 4},        [27] = {"I64", 1, 8},         [28] = {"F64", 1, 8},
    [29] = {"IQ1_M", 256, 56},   [30] = {"BF16", 1, 2},        [34] = {"TQ1_0", 256, 54},
    [35] = {"TQ2_0", 256, 66},   [39] = {"MXFP4", 32, 17},
};
#define N_GGML_TYPES (uint32_t)(sizeof ggml_types / sizeof ggml_types[0])

static const GgmlType *ggml_type(uint32_t t) { return t < N_GGML_TYPES && ggml_types[t].name ? &ggml_types[t] : NULL; }

const char *as_ggml_type_name(uint32_t t)
{
    const GgmlType *g = ggml_type(t);
    return g ? g->name : NULL;
}

int as_ggml_type_of(AsDType t)
{
    switch (t) {
    case AS_DT_F32: return AS_GGML_F32;
    case AS_DT_F16: return AS_GGML_F16;
    case AS_DT_BF16: return AS_GGML_BF16;
    case AS_DT_Q8_0: return AS_GGML_Q8_0;
    case AS_DT_Q2_K: return AS_GGML_Q2_K;
    default: return -1;
    }
}

static int dtype_of_ggml(uint32_t t)
{
    switch (t) {
    case AS_GGML_F32: return AS_DT_F32;
    case AS_GGML_F16: return AS_DT_F16;
    case AS_GGML_BF16: return AS_DT_BF16;
    case AS_GGML_Q8_0: return AS_DT_Q8_0;
    case AS_GGML_Q2_K: return AS_DT_Q2_K;
    default: return -1;
    }
}

/* ---- the cursor ---- */

typedef struct {
    const uint8_t *map;
    uint64_t pos, size;
    const char *path;
    AsError *err;
} Cur;

static int truncated(Cur *c, const char *what)
{
    return as_err(c->err, AS_EBADINPUT, "%s: truncated: %s at byte %llu runs past the end of the file (%llu bytes)",
                  c->path, what, (unsigned long long)c->pos, (unsigned long long)c->size);
}

static int need(Cur *c, uint64_t n, const char *what) { return n > c->size - c->pos ? truncated(c, what) : AS_OK; }

static int rd(Cur *c, void *dst, uint64_t n, const char *what)
{
    int rc = need(c, n, what);
    if (rc)
        return rc;
    memcpy(dst, c->map + c->pos, (size_t)n);
    c->pos += n;
    return AS_OK;
}

static int rd_u32(Cur *c, uint32_t *v, const char *what) { return rd(c, v, 4, what); }
static int rd_u64(Cur *c, uint64_t *v, const char *what) { return rd(c, v, 8, what); }

/* A string: u64 length, bytes; at most max bytes. */
static int rd_str(Cur *c, const char **s, uint64_t *len, uint64_t max, const char *what)
{
    uint64_t start = c->pos;
    int rc = rd_u64(c, len, what);
    if (rc)
        return rc;
    if (*len > max)
        return as_err(c->err, AS_EBADINPUT, "%s: %s at byte %llu has length %llu (at most %llu)", c->path, what,
                      (unsigned long long)start, (unsigned long long)*len, (unsigned long long)max);
    if ((rc = need(c, *len, what)))
        return rc;
    *s = (const char *)c->map + c->pos;
    c->pos += *len;
    return AS_OK;
}

static uint64_t scalar_size(AsGgufType t)
{
    switch (t) {
    case AS_GGUF_U8: case AS_GGUF_I8: case AS_GGUF_BOOL: return 1;
    case AS_GGUF_U16: case AS_GGUF_I16: return 2;
    case AS_GGUF_U32: case AS_GGUF_I32: case AS_GGUF_F32: return 4;
    case AS_GGUF_U64: case AS_GGUF_I64: case AS_GGUF_F64: return 8;
    default: return 0;
    }
}

static const char *type_name(AsGgufType t)
{
    static const char *const names[AS_GGUF_TYPE_COUNT] = {"u8", "i8", "u16", "i16", "u32", "i32", "f32",
                                                          "bool", "string", "array", "u64", "i64", "f64"};
    return (unsigned)t < AS_GGUF_TYPE_COUNT ? names[t] : "?";
}

/* "deepseek4.block_count" (cut) for messages. */
static void key_str(const AsGgufKV *kv, char *buf, size_t n)
{
    snprintf(buf, n, "%.*s", (int)(kv->key_len < 120 ? kv->key_len : 120), kv->key);
}

static int read_kv(Cur *c, int64_t i, AsGgufKV *kv)
{
    int rc;
    uint32_t t;
    char what[64];
    snprintf(what, sizeof what, "metadata key %lld", (long long)i);
    if ((rc = rd_str(c, &kv->key, &kv->key_len, AS_GGUF_MAX_KEY, what)))
        return rc;
    if (kv->key_len == 0)
        return as_err(c->err, AS_EBADINPUT, "%s: metadata key %lld is empty", c->path, (long long)i);
    char ks[128];
    key_str(kv, ks, sizeof ks);
    snprintf(what, sizeof what, "the type of '%.40s'", ks);
    if ((rc = rd_u32(c, &t, what)))
        return rc;
    if (t >= AS_GGUF_TYPE_COUNT)
        return as_err(c->err, AS_EBADINPUT, "%s: metadata '%s' has unknown type %u", c->path, ks, t);
    kv->type = kv->elem = (AsGgufType)t;
    kv->n = 1;
    snprintf(what, sizeof what, "the value of '%.40s'", ks);
    if (t == AS_GGUF_ARRAY) {
        uint32_t et;
        if ((rc = rd_u32(c, &et, what)) || (rc = rd_u64(c, &kv->n, what)))
            return rc;
        if (et == AS_GGUF_ARRAY)
            return as_err(c->err, AS_EBADINPUT, "%s: metadata '%s' is an array of arrays (not supported)", c->path, ks);
        if (et >= AS_GGUF_TYPE_COUNT)
            return as_err(c->err, AS_EBADINPUT, "%s: metadata '%s' is an array of unknown type %u", c->path, ks, et);
        kv->elem = (AsGgufType)et;
        kv->val = c->map + c->pos;
        uint64_t start = c->pos;
        if (et == AS_GGUF_STRING) {
            if (kv->n > (c->size - c->pos) / 8)
                return as_err(c->err, AS_EBADINPUT, "%s: metadata '%s' claims %llu strings, more than the file holds",
                              c->path, ks, (unsigned long long)kv->n);
            for (uint64_t k = 0; k < kv->n; k++) {
                const char *s;
                uint64_t len;
                if ((rc = rd_str(c, &s, &len, UINT64_MAX, what)))
                    return rc;
            }
        } else {
            uint64_t es = scalar_size(kv->elem);
            if (kv->n > (c->size - c->pos) / es)
                return as_err(c->err, AS_EBADINPUT,
                              "%s: metadata '%s' claims %llu elements of %s, more than the file holds", c->path, ks,
                              (unsigned long long)kv->n, type_name(kv->elem));
            c->pos += kv->n * es;
        }
        kv->val_len = c->pos - start;
        return AS_OK;
    }
    if (t == AS_GGUF_STRING) {
        const char *s;
        if ((rc = rd_str(c, &s, &kv->val_len, UINT64_MAX, what)))
            return rc;
        kv->val = (const uint8_t *)s;
        return AS_OK;
    }
    kv->val_len = scalar_size(kv->type);
    kv->val = c->map + c->pos;
    if ((rc = need(c, kv->val_len, what)))
        return rc;
    c->pos += kv->val_len;
    return AS_OK;
}

static bool key_is(const AsGgufKV *kv, const char *key)
{
    size_t n = strlen(key);
    return kv->key_len == n && !memcmp(kv->key, key, n);
}

const AsGgufKV *as_gguf_find(const AsGguf *g, const char *key)
{
    for (int64_t i = 0; i < g->n_kv; i++)
        if (key_is(&g->kv[i], key))
            return &g->kv[i];
    return NULL;
}

static bool number_at(AsGgufType t, const uint8_t *p, double *out)
{
    union {
        uint8_t u8; int8_t i8; uint16_t u16; int16_t i16; uint32_t u32; int32_t i32;
        float f32; uint64_t u64; int64_t i64; double f64;
    } v;
    uint64_t n = scalar_size(t);
    if (!n || t == AS_GGUF_BOOL)
        return false;
    memcpy(&v, p, (size_t)n);
    switch (t) {
    case AS_GGUF_U8: *out = v.u8; break;
    case AS_GGUF_I8: *out = v.i8; break;
    case AS_GGUF_U16: *out = v.u16; break;
    case AS_GGUF_I16: *out = v.i16; break;
    case AS_GGUF_U32: *out = v.u32; break;
    case AS_GGUF_I32: *out = v.i32; break;
    case AS_GGUF_F32: *out = v.f32; break;
    case AS_GGUF_U64: *out = (double)v.u64; break;
    case AS_GGUF_I64: *out = (double)v.i64; break;
    default: *out = v.f64; break;
    }
    return true;
}

bool as_gguf_kv_number(const AsGgufKV *kv, double *out)
{
    return kv->type != AS_GGUF_ARRAY && number_at(kv->type, kv->val, out);
}

bool as_gguf_kv_array_number(const AsGgufKV *kv, uint64_t i, double *out)
{
    if (kv->type != AS_GGUF_ARRAY || i >= kv->n || !scalar_size(kv->elem))
        return false;
    return number_at(kv->elem, kv->val + i * scalar_size(kv->elem), out);
}

/* ---- tensor infos ---- */

static int read_tensor_info(Cur *c, int64_t i, AsGgufTensorInfo *t)
{
    int rc;
    char what[64];
    const char *name;
    uint64_t len;
    snprintf(what, sizeof what, "the name of tensor %lld", (long long)i);
    if ((rc = rd_str(c, &name, &len, UINT64_MAX, what)))
        return rc;
    if (len == 0 || len >= sizeof t->name || memchr(name, '\0', (size_t)len))
        return as_err(c->err, AS_EBADINPUT, "%s: tensor %lld: name of %llu bytes (1 to %zu, no NUL)", c->path,
                      (long long)i, (unsigned long long)len, sizeof t->name - 1);
    if (as_has_control(name, (size_t)len)) /* info lists names: no terminal escapes */
        return as_err(c->err, AS_EBADINPUT, "%s: tensor %lld: the name holds a control character", c->path,
                      (long long)i);
    memcpy(t->name, name, (size_t)len);
    t->name[len] = '\0';
    uint32_t nd;
    snprintf(what, sizeof what, "the shape of '%.40s'", t->name);
    if ((rc = rd_u32(c, &nd, what)))
        return rc;
    if (nd < 1 || nd > 4)
        return as_err(c->err, AS_EBADINPUT, "%s: tensor '%s': %u dimensions (1 to 4)", c->path, t->name, nd);
    t->ndim = (int)nd;
    uint64_t count = 1;
    for (uint32_t d = 0; d < nd; d++) {
        uint64_t v;
        if ((rc = rd_u64(c, &v, what)))
            return rc;
        if (v > (uint64_t)INT64_MAX)
            return as_err(c->err, AS_EBADINPUT, "%s: tensor '%s': ne[%u] is negative", c->path, t->name, d);
        if (v && count > MAX_ELEMS / v)
            return as_err(c->err, AS_EBADINPUT, "%s: tensor '%s': more than 2^56 elements", c->path, t->name);
        t->ne[d] = (int64_t)v;
        count *= v;
    }
    for (uint32_t d = nd; d < 4; d++)
        t->ne[d] = 1;
    snprintf(what, sizeof what, "the type of '%.40s'", t->name);
    if ((rc = rd_u32(c, &t->type, what)))
        return rc;
    const GgmlType *gt = ggml_type(t->type);
    if (!gt)
        return as_err(c->err, AS_EBADINPUT, "%s: tensor '%s': unknown ggml type %u", c->path, t->name, t->type);
    if ((uint64_t)t->ne[0] % gt->blck)
        return as_err(c->err, AS_EBADINPUT, "%s: tensor '%s': rows of %lld elements are not whole %s blocks of %u",
                      c->path, t->name, (long long)t->ne[0], gt->name, gt->blck);
    t->nbytes = count / gt->blck * gt->size; /* count <= 2^56, size <= 292: no overflow */
    snprintf(what, sizeof what, "the offset of '%.40s'", t->name);
    return rd_u64(c, &t->offset, what);
}

static int name_cmp(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

/* Offsets, bounds, overlaps and duplicate names of every tensor. */
static int check_tensors(const AsGguf *g, const char *path, AsError *err)
{
    const uint64_t data_len = g->file->data_len;
    int64_t n = g->n_tensors;
    AsSpan *sp = malloc(((size_t)n + 1) * sizeof *sp);
    const char **names = malloc(((size_t)n + 1) * sizeof *names);
    int rc = AS_OK;
    if (!sp || !names)
        rc = as_err(err, AS_ERUNTIME, "%s: out of memory for %lld tensors", path, (long long)n);
    for (int64_t i = 0; i < n && !rc; i++) {
        const AsGgufTensorInfo *t = &g->tensors[i];
        if (t->offset % g->alignment)
            rc = as_err(err, AS_EBADINPUT, "%s: tensor '%s': offset %llu is not a multiple of the alignment %llu", path,
                        t->name, (unsigned long long)t->offset, (unsigned long long)g->alignment);
        else if (t->offset > data_len || t->nbytes > data_len - t->offset)
            rc = as_err(err, AS_EBADINPUT,
                        "%s: tensor '%s': %llu bytes at offset %llu run past the data section (%llu bytes)", path,
                        t->name, (unsigned long long)t->nbytes, (unsigned long long)t->offset,
                        (unsigned long long)data_len);
        sp[i] = (AsSpan){t->offset, t->offset + t->nbytes, t->name};
        names[i] = t->name;
    }
    if (!rc) {
        qsort(names, (size_t)n, sizeof *names, name_cmp);
        for (int64_t i = 1; i < n && !rc; i++)
            if (!strcmp(names[i], names[i - 1]))
                rc = as_err(err, AS_EBADINPUT, "%s: tensor '%s' appears twice", path, names[i]);
    }
    if (!rc)
        rc = as_spans_disjoint(path, sp, (size_t)n, err);
    free(sp);
    free(names);
    return rc;
}

/* ---- open ---- */

static int kv_cmp(const void *a, const void *b)
{
    const AsGgufKV *x = *(const AsGgufKV *const *)a, *y = *(const AsGgufKV *const *)b;
    uint64_t n = x->key_len < y->key_len ? x->key_len : y->key_len;
    int c = memcmp(x->key, y->key, (size_t)n);
    return c ? c : (x->key_len > y->key_len) - (x->key_len < y->key_len);
}

/* Duplicate keys (sorted, so that a file of many keys costs n log n). */
static int check_keys(const AsGguf *g, const char *path, AsError *err)
{
    const AsGgufKV **ord = malloc(((size_t)g->n_kv + 1) * sizeof *ord);
    if (!ord)
        return as_err(err, AS_ERUNTIME, "%s: out of memory", path);
    for (int64_t i = 0; i < g->n_kv; i++)
        ord[i] = &g->kv[i];
    qsort(ord, (size_t)g->n_kv, sizeof *ord, kv_cmp);
    int rc = AS_OK;
    for (int64_t i = 1; i < g->n_kv && !rc; i++)
        if (!kv_cmp(&ord[i], &ord[i - 1])) {
            char ks[128];
            key_str(ord[i], ks, sizeof ks);
            rc = as_err(err, AS_EBADINPUT, "%s: metadata key '%s' appears twice", path, ks);
        }
    free(ord);
    return rc;
}

static int parse(AsGguf *g, const char *path, AsError *err)
{
    AsWeightFile *f = g->file;
    Cur c = {f->map, 0, f->size, path, err};
    char magic[4];
    int rc;
    if (f->size < 4 || memcmp(f->map, AS_GGUF_MAGIC, 4))
        return as_err(err, AS_EBADINPUT, "%s: not a GGUF file (the magic is not \"GGUF\")", path);
    if ((rc = rd(&c, magic, 4, "the magic")) || (rc = rd_u32(&c, &g->version, "the version")))
        return rc;
    if ((g->version & 0xffffu) == 0)
        return as_err(err, AS_EBADINPUT, "%s: GGUF version %#x: a big-endian file (attnscope reads little-endian)",
                      path, g->version);
    if (g->version != 2 && g->version != 3)
        return as_err(err, AS_EBADINPUT, "%s: GGUF version %u (attnscope reads versions 2 and 3)", path, g->version);
    uint64_t nt, nkv;
    if ((rc = rd_u64(&c, &nt, "the tensor count")) || (rc = rd_u64(&c, &nkv, "the metadata count")))
        return rc;
    uint64_t left = c.size - c.pos;
    if (nkv > AS_GGUF_MAX_KV || nkv > left / MIN_KV_BYTES)
        return as_err(err, AS_EBADINPUT, "%s: the header claims %llu metadata pairs, more than the file holds", path,
                      (unsigned long long)nkv);
    if (nt > AS_GGUF_MAX_TENSORS || nt > left / MIN_TENSOR_BYTES)
        return as_err(err, AS_EBADINPUT, "%s: the header claims %llu tensors, more than the file holds", path,
                      (unsigned long long)nt);
    g->n_kv = (int64_t)nkv;
    g->n_tensors = (int64_t)nt;
    g->kv = calloc((size_t)nkv + 1, sizeof *g->kv);
    g->tensors = calloc((size_t)nt + 1, sizeof *g->tensors);
    if (!g->kv || !g->tensors)
        return as_err(err, AS_ERUNTIME, "%s: out of memory", path);
    for (int64_t i = 0; i < g->n_kv; i++)
        if ((rc = read_kv(&c, i, &g->kv[i])))
            return rc;
    if ((rc = check_keys(g, path, err)))
        return rc;
    g->alignment = AS_GGUF_DEFAULT_ALIGNMENT;
    const AsGgufKV *al = as_gguf_find(g, "general.alignment");
    if (al) {
        uint32_t a = 0;
        if (al->type != AS_GGUF_U32)
            return as_err(err, AS_EBADINPUT, "%s: general.alignment is a %s (must be u32)", path, type_name(al->type));
        memcpy(&a, al->val, 4);
        if (a == 0 || (a & (a - 1)) || a > (1u << 30))
            return as_err(err, AS_EBADINPUT, "%s: general.alignment = %u is not a power of two (up to 2^30)", path, a);
        g->alignment = a;
    }
    const AsGgufKV *ar = as_gguf_find(g, "general.architecture");
    if (ar) {
        if (ar->type != AS_GGUF_STRING || ar->val_len == 0 || ar->val_len >= sizeof g->arch ||
            memchr(ar->val, '\0', (size_t)ar->val_len))
            return as_err(err, AS_EBADINPUT, "%s: general.architecture must be a string of 1 to %zu bytes", path,
                          sizeof g->arch - 1);
        memcpy(g->arch, ar->val, (size_t)ar->val_len);
        g->arch[ar->val_len] = '\0';
    }
    for (int64_t i = 0; i < g->n_tensors; i++)
        if ((rc = read_tensor_info(&c, i, &g->tensors[i])))
            return rc;
    uint64_t data = c.pos;
    if (g->n_tensors > 0) {
        uint64_t pad = (g->alignment - data % g->alignment) % g->alignment;
        if (pad > c.size - data)
            return as_err(err, AS_EBADINPUT, "%s: truncated: the data section (at byte %llu) starts past the end of "
                                             "the file (%llu bytes)",
                          path, (unsigned long long)(data + pad), (unsigned long long)c.size);
        data += pad;
    }
    g->data_offset = data;
    f->header_len = data - 8;
    f->data = f->map + data;
    f->data_len = f->size - data;
    return check_tensors(g, path, err);
}

int as_gguf_open(const char *path, AsGguf **out, AsError *err)
{
    *out = NULL;
    void *map;
    uint64_t size;
    int rc0 = as_map_file(path, 24, "a GGUF header (24)", &map, &size, err);
    if (rc0)
        return rc0;
    AsGguf *g = calloc(1, sizeof *g);
    AsWeightFile *f = calloc(1, sizeof *f);
    if (!g || !f) {
        munmap(map, (size_t)size);
        free(g);
        free(f);
        return as_err(err, AS_ERUNTIME, "%s: out of memory", path);
    }
    snprintf(f->path, sizeof f->path, "%s", path);
    f->map = map;
    f->size = size;
    g->file = f;
    int rc = parse(g, path, err);
    if (rc) {
        as_gguf_close(g);
        return rc;
    }
    *out = g;
    return AS_OK;
}

AsWeightFile *as_gguf_take_file(AsGguf *g)
{
    AsWeightFile *f = g->file;
    g->file = NULL;
    return f;
}

void as_gguf_close(AsGguf *g)
{
    if (!g)
        return;
    as_st_close(g->file);
    free(g->kv);
    free(g->tensors);
    free(g);
}

/* ---- tensor names ---- */

/* llama.cpp's names for its DeepSeek-4 architecture (gguf-py constants.py, TENSOR_NAMES) after
 * "blk.{l}.", and the official checkpoint's after "layers.{l}.". */
static const struct {
    const char *llama, *deepseek;
} name_map[] = {
    {"attn_norm.weight", "attn_norm.weight"},
    {"attn_q_a.weight", "attn.wq_a.weight"},
    {"attn_q_a_norm.weight", "attn.q_norm.weight"},
    {"attn_q_b.weight", "attn.wq_b.weight"},
    {"attn_kv.weight", "attn.wkv.weight"},
    {"attn_kv_a_norm.weight", "attn.kv_norm.weight"},
    {"attn_output_a.weight", "attn.wo_a.weight"},
    {"attn_output_b.weight", "attn.wo_b.weight"},
    {"attn_sinks.weight", "attn.attn_sink"},
    {"attn_compressor_kv.weight", "attn.compressor.wkv.weight"},
    {"attn_compressor_gate.weight", "attn.compressor.wgate.weight"},
    {"attn_compressor_norm.weight", "attn.compressor.norm.weight"},
    {"indexer.attn_q_b.weight", "attn.indexer.wq_b.weight"},
    {"indexer.proj.weight", "attn.indexer.weights_proj.weight"},
    {"indexer.attn_k.weight", "attn.indexer.wk.weight"},
    {"indexer.k_norm.weight", "attn.indexer.k_norm.weight"},
};
#define N_NAMES (int)(sizeof name_map / sizeof name_map[0])

/* "prefix{l}.rest": the layer (decimal, no sign, no leading zero) and rest; false otherwise. */
static bool split_layer(const char *s, const char *prefix, int *layer, const char **rest)
{
    size_t k = strlen(prefix);
    if (strncmp(s, prefix, k))
        return false;
    s += k;
    int l = 0, digits = 0;
    while (*s >= '0' && *s <= '9' && digits < 6) {
        if (digits == 1 && l == 0)
            return false; /* "07" */
        l = l * 10 + (*s++ - '0');
        digits++;
    }
    if (!digits || *s != '.')
        return false;
    *layer = l;
    *rest = s + 1;
    return true;
}

static bool translate(const char *in, const char *from_prefix, const char *to_prefix, bool to_deepseek, char *out,
                      size_t n)
{
    int l;
    const char *rest;
    if (!split_layer(in, from_prefix, &l, &rest))
        return false;
    for (int i = 0; i < N_NAMES; i++) {
        const char *from = to_deepseek ? name_map[i].llama : name_map[i].deepseek;
        const char *to = to_deepseek ? name_map[i].deepseek : name_map[i].llama;
        if (!strcmp(rest, from))
            return snprintf(out, n, "%s%d.%s", to_prefix, l, to) < (int)n;
    }
    return false;
}

bool as_gguf_name_from_llama(const char *llama, char *out, size_t n)
{
    return translate(llama, "blk.", "layers.", true, out, n);
}

bool as_gguf_name_to_llama(const char *deepseek, char *out, size_t n)
{
    return translate(deepseek, "layers.", "blk.", false, out, n);
}

/* layers.{l}.attn.* or layers.{l}.attn_norm.weight */
static bool is_attention(const char *name)
{
    int l;
    const char *rest;
    return split_layer(name, "layers.", &l, &rest) && (!strncmp(rest, "attn.", 5) || !strcmp(rest, "attn_norm.weight"));
}

int as_gguf_tensors(AsGguf *g, AsWTensor **tensors, int *n, int *cap, AsError *err)
{
    const char *path = g->file->path;
    int base = *n;
    for (int64_t i = 0; i < g->n_tensors; i++) {
        const AsGgufTensorInfo *ti = &g->tensors[i];
        char name[192];
        if (!as_gguf_name_from_llama(ti->name, name, sizeof name))
            snprintf(name, sizeof name, "%s", ti->name);
        int dt = dtype_of_ggml(ti->type);
        if (dt < 0) {
            if (is_attention(name)) {
                *n = base;
                return as_err(err, AS_EBADINPUT,
                              "%s: tensor %s%s%s%s: type %s is not supported for an attention tensor (attnscope reads "
                              "F32, F16, BF16, Q8_0, Q2_K)",
                              path, ti->name, strcmp(name, ti->name) ? " (" : "", strcmp(name, ti->name) ? name : "",
                              strcmp(name, ti->name) ? ")" : "", as_ggml_type_name(ti->type));
            }
            g->file->n_skipped++;
            continue;
        }
        if (*n == *cap) {
            int nc = *cap ? *cap * 2 : 256;
            AsWTensor *nt = nc > *cap ? realloc(*tensors, (size_t)nc * sizeof *nt) : NULL;
            if (!nt) {
                *n = base;
                return as_err(err, AS_ERUNTIME, "%s: out of memory for the tensor list", path);
            }
            *tensors = nt;
            *cap = nc;
        }
        AsWTensor *t = &(*tensors)[(*n)++];
        memset(t, 0, sizeof *t);
        memcpy(t->name, name, sizeof t->name);
        t->dtype = (AsDType)dt;
        t->ndim = ti->ndim;
        for (int d = 0; d < ti->ndim; d++)
            t->shape[d] = ti->ne[ti->ndim - 1 - d]; /* outermost first */
        t->data = g->file->data + ti->offset;
        t->nbytes = (int64_t)ti->nbytes;
    }
    g->file->n_tensors = *n - base;
    return AS_OK;
}

/* ---- the geometry ---- */

typedef enum { K_UINT, K_INT, K_FLOAT, K_LIST } KeyKind;

/* GGUF key (after "{arch}.") <-> config.json field (Hugging Face spelling; "a.b" is member b of
 * object a). Keys marked (attnscope) are this project's: llama.cpp has no such field. */
static const struct {
    const char *gguf, *hf;
    KeyKind kind;
    bool attnscope;
} keys[] = {
    {"embedding_length", "hidden_size", K_UINT, false},
    {"block_count", "num_hidden_layers", K_UINT, false},
    {"attention.head_count", "num_attention_heads", K_UINT, false},
    {"attention.key_length", "head_dim", K_UINT, false},
    {"attention.value_length", "head_dim", K_UINT, false},
    {"rope.dimension_count", "qk_rope_head_dim", K_UINT, false},
    {"attention.q_lora_rank", "q_lora_rank", K_UINT, false},
    {"attention.output_group_count", "o_groups", K_UINT, false},
    {"attention.output_lora_rank", "o_lora_rank", K_UINT, false},
    {"attention.sliding_window", "sliding_window", K_UINT, false},
    {"attention.layer_norm_rms_epsilon", "rms_norm_eps", K_FLOAT, false},
    {"attention.compress_ratios", "compress_ratios", K_LIST, false},
    {"attention.compress_rope_freq_base", "compress_rope_theta", K_FLOAT, false},
    {"attention.kv_source_layers", "kv_source_layer_ids", K_LIST, true},
    {"attention.indexer.head_count", "index_n_heads", K_UINT, false},
    {"attention.indexer.key_length", "index_head_dim", K_UINT, false},
    {"attention.indexer.top_k", "index_topk", K_UINT, false},
    {"attention.indexer.source_layers", "index_source_layer_ids", K_LIST, true},
    {"attention.indexer.candidate_source_layer", "candidate_source_layer_id", K_INT, true},
    {"attention.indexer.candidate_top_k_blocks", "candidate_topk_blocks", K_UINT, true},
    {"attention.indexer.candidate_block_size", "candidate_block_size", K_UINT, true},
    {"rope.freq_base", "rope_theta", K_FLOAT, false},
    {"rope.scaling.factor", "rope_scaling.factor", K_FLOAT, false},
    {"rope.scaling.original_context_length", "rope_scaling.original_max_position_embeddings", K_UINT, false},
    {"rope.scaling.yarn_beta_fast", "rope_scaling.beta_fast", K_FLOAT, false},
    {"rope.scaling.yarn_beta_slow", "rope_scaling.beta_slow", K_FLOAT, false},
    {"attnscope.max_seq_len", "max_seq_len", K_UINT, true},
};
#define N_KEYS (int)(sizeof keys / sizeof keys[0])

/* The JSON number for a metadata number: an f32 as the shortest decimal that reads back as the
 * same float (1e-06, not 9.99999997e-07), so that it equals the config.json it came from. */
static double json_value(AsGgufType t, double v)
{
    if (t != AS_GGUF_F32)
        return v;
    char s[40];
    for (int prec = 1; prec <= 9; prec++) {
        snprintf(s, sizeof s, "%.*g", prec, v);
        if (strtof(s, NULL) == (float)v)
            break;
    }
    return strtod(s, NULL);
}

/* The object holding field hf in root (creating "rope_scaling"), and the member name. */
static cJSON *holder(cJSON *root, const char *hf, const char **member)
{
    const char *dot = strchr(hf, '.');
    if (!dot) {
        *member = hf;
        return root;
    }
    *member = dot + 1;
    char outer[64];
    snprintf(outer, sizeof outer, "%.*s", (int)(dot - hf), hf);
    cJSON *o = cJSON_GetObjectItemCaseSensitive(root, outer);
    if (!o)
        o = cJSON_AddObjectToObject(root, outer);
    return o;
}

/* The metadata's geometry as a config.json object (Hugging Face spelling). */
static int meta_json(const AsGguf *g, cJSON *root, AsError *err)
{
    const char *path = g->file ? g->file->path : "GGUF";
    for (int i = 0; i < N_KEYS; i++) {
        char key[160];
        if (keys[i].attnscope && !strcmp(keys[i].gguf, "attnscope.max_seq_len"))
            snprintf(key, sizeof key, "%s", keys[i].gguf);
        else
            snprintf(key, sizeof key, "%s.%s", g->arch, keys[i].gguf);
        const AsGgufKV *kv = as_gguf_find(g, key);
        if (!kv)
            continue;
        const char *member;
        cJSON *obj = holder(root, keys[i].hf, &member), *item = NULL;
        if (!obj)
            return as_err(err, AS_ERUNTIME, "out of memory");
        if (keys[i].kind == K_LIST) {
            if (kv->type != AS_GGUF_ARRAY || !scalar_size(kv->elem) || kv->elem == AS_GGUF_BOOL)
                return as_err(err, AS_EBADINPUT, "%s: %s must be an array of integers, got %s", path, key,
                              type_name(kv->type == AS_GGUF_ARRAY ? kv->elem : kv->type));
            if (kv->n > AS_MAX_LAYERS * 4)
                return as_err(err, AS_EBADINPUT, "%s: %s has %llu entries (at most %d)", path, key,
                              (unsigned long long)kv->n, AS_MAX_LAYERS * 4);
            item = cJSON_CreateArray();
            for (uint64_t k = 0; item && k < kv->n; k++) {
                double v = 0;
                as_gguf_kv_array_number(kv, k, &v);
                cJSON_AddItemToArray(item, cJSON_CreateNumber(v));
            }
        } else {
            double v;
            if (!as_gguf_kv_number(kv, &v))
                return as_err(err, AS_EBADINPUT, "%s: %s must be a number, got %s", path, key, type_name(kv->type));
            item = cJSON_CreateNumber(json_value(kv->type, v));
        }
        if (!item)
            return as_err(err, AS_ERUNTIME, "out of memory");
        const cJSON *old = cJSON_GetObjectItemCaseSensitive(obj, member);
        if (old) { /* key_length and value_length both give head_dim */
            bool same = cJSON_Compare(old, item, true);
            cJSON_Delete(item);
            if (!same)
                return as_err(err, AS_EBADINPUT, "%s: %s disagrees with another key giving %s", path, key, keys[i].hf);
            continue;
        }
        cJSON_AddItemToObject(obj, member, item);
    }
    return AS_OK;
}

static char *print_value(const cJSON *v)
{
    char *s = cJSON_PrintUnformatted(v);
    if (s && strlen(s) > 60)
        strcpy(s + 57, "...");
    return s;
}

/* config.json members into root: new ones are added; ones the metadata gave must be equal. */
static int merge(cJSON *root, const cJSON *cfg, const char *outer, const char *cfg_path, const char *path,
                 AsError *err)
{
    for (const cJSON *m = cfg->child; m; m = m->next) {
        cJSON *have = cJSON_GetObjectItemCaseSensitive(root, m->string);
        if (!have) {
            cJSON *dup = cJSON_Duplicate(m, true);
            if (!dup)
                return as_err(err, AS_ERUNTIME, "out of memory");
            cJSON_AddItemToObject(root, m->string, dup);
            continue;
        }
        if (!outer && cJSON_IsObject(have) && cJSON_IsObject(m)) {
            int rc = merge(have, m, m->string, cfg_path, path, err);
            if (rc)
                return rc;
            continue;
        }
        if (!cJSON_Compare(have, m, true)) {
            char *a = print_value(m), *b = print_value(have);
            int rc = as_err(err, AS_EBADINPUT, "%s: '%s%s%s' = %s disagrees with the GGUF metadata of %s (%s)",
                            cfg_path, outer ? outer : "", outer ? "." : "", m->string, a ? a : "?", path,
                            b ? b : "?");
            free(a);
            free(b);
            return rc;
        }
    }
    return AS_OK;
}

static bool file_exists(const char *p)
{
    struct stat st;
    return p && stat(p, &st) == 0 && S_ISREG(st.st_mode);
}

static int read_json(const char *path, cJSON **out, AsError *err)
{
    *out = NULL;
    char *buf;
    size_t n;
    int rc = as_read_text_file(path, MAX_CONFIG_BYTES, "config", &buf, &n, err);
    if (rc)
        return rc;
    if ((rc = as_json_parse_strict(buf, n, out, err))) {
        as_err_wrap(err, "%s", path);
    } else if (!cJSON_IsObject(*out)) {
        rc = as_err(err, AS_EBADINPUT, "%s: not a JSON object", path);
        cJSON_Delete(*out);
        *out = NULL;
    }
    free(buf);
    return rc;
}

int as_gguf_config(const AsGguf *g, const char *config_json, AsConfig *cfg, AsError *err)
{
    const char *path = g->file ? g->file->path : "GGUF";
    if (!g->arch[0])
        return as_err(err, AS_EBADINPUT, "%s: no general.architecture in the metadata: the geometry keys cannot be "
                                         "found (docs/GGUF.md)", path);
    cJSON *root = cJSON_CreateObject(), *extra = NULL;
    if (!root)
        return as_err(err, AS_ERUNTIME, "out of memory");
    int rc = meta_json(g, root, err);
    bool with_cfg = !rc && file_exists(config_json);
    if (with_cfg && !(rc = read_json(config_json, &extra, err)))
        rc = merge(root, extra, NULL, config_json, path, err);
    char *text = rc ? NULL : cJSON_PrintUnformatted(root);
    if (!rc && !text)
        rc = as_err(err, AS_ERUNTIME, "out of memory");
    if (!rc && (rc = as_config_parse_json(text, strlen(text), cfg, err)))
        as_err_wrap(err, "%s: the geometry (GGUF metadata under '%s.'%s%s)", path, g->arch,
                    with_cfg ? " completed by " : "", with_cfg ? config_json : "");
    free(text);
    cJSON_Delete(root);
    cJSON_Delete(extra);
    return rc;
}

/* ---- the geometry as metadata (the writer's side) ---- */

int as_gguf_config_meta(const AsConfig *cfg, const char *arch, AsGgufMeta *out, int cap)
{
    char *text = as_config_to_json(cfg);
    cJSON *root = text ? cJSON_Parse(text) : NULL;
    free(text);
    if (!root)
        return -1;
    int n = 0;
    for (int i = 0; i < N_KEYS && n < cap; i++) {
        const char *hf = keys[i].hf, *dot = strchr(hf, '.');
        const cJSON *v = root;
        if (dot) {
            char outer[64];
            snprintf(outer, sizeof outer, "%.*s", (int)(dot - hf), hf);
            v = cJSON_GetObjectItemCaseSensitive(root, outer);
            hf = dot + 1;
        }
        v = v ? cJSON_GetObjectItemCaseSensitive(v, hf) : NULL;
        if (!v)
            continue;
        AsGgufMeta *m = &out[n];
        memset(m, 0, sizeof *m);
        if (!strcmp(keys[i].gguf, "attnscope.max_seq_len"))
            snprintf(m->key, sizeof m->key, "%s", keys[i].gguf);
        else
            snprintf(m->key, sizeof m->key, "%s.%s", arch, keys[i].gguf);
        double d = cJSON_IsNumber(v) ? v->valuedouble : 0;
        switch (keys[i].kind) {
        case K_UINT: m->type = AS_GGUF_U32; m->u32 = (uint32_t)d; break;
        case K_INT: m->type = AS_GGUF_I32; m->i32 = (int32_t)d; break;
        case K_FLOAT:
            /* f32 as llama.cpp writes these keys (norm_eps is an f32 field), f64 where f32 would
             * not hold the value */
            if (!strcmp(keys[i].hf, "rms_norm_eps")) {
                m->type = AS_GGUF_F32;
                m->f32 = cfg->norm_eps;
            } else if ((double)(float)d == d) {
                m->type = AS_GGUF_F32;
                m->f32 = (float)d;
            } else {
                m->type = AS_GGUF_F64;
                m->f64 = d;
            }
            break;
        case K_LIST:
            m->type = AS_GGUF_ARRAY;
            if (!strcmp(keys[i].hf, "compress_ratios")) {
                m->arr = (const int32_t *)cfg->compress_ratios;
                m->n = cfg->n_layers;
            } else if (!strcmp(keys[i].hf, "kv_source_layer_ids")) {
                m->arr = (const int32_t *)cfg->kv_sources;
                m->n = cfg->n_kv_sources;
            } else {
                m->arr = (const int32_t *)cfg->index_sources;
                m->n = cfg->n_index_sources;
            }
            break;
        }
        n++;
    }
    cJSON_Delete(root);
    return n;
}
