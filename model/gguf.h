/* GGUF files (ggml's container; docs/GGUF.md): reading by mmap with every count, length, size
 * and offset checked against the file, the attention geometry from the metadata, the tensor
 * names of both schemes, and writing (model/gguf_write.c, streamed, atomic).
 *
 * Layout (little-endian): "GGUF", u32 version (3; 2 is read the same way), i64 tensor count,
 * i64 metadata count; the metadata (string key, u32 type, value; arrays: u32 element type, u64
 * count, elements; strings: u64 length, bytes); the tensor infos (string name, u32 n_dims,
 * i64 ne[n_dims] with ne[0] the row length, u32 ggml type, u64 offset into the data section);
 * padding to general.alignment (u32, default 32); the data section.
 *
 * Reading refuses, each with one line naming the file and what is wrong (exit 2): a bad magic,
 * a version other than 2 or 3, counts the file cannot hold, strings or arrays running past the
 * end, nested arrays, unknown metadata types, duplicate keys or tensor names, a
 * general.alignment that is not a u32 power of two, tensors of 0 or more than 4 dimensions,
 * negative dims, more than 2^56 elements, unknown ggml types, rows that are not whole blocks,
 * offsets that are not aligned, run past the file or overlap. Tensors of a ggml type attnscope
 * does not read (Q4_K, IQ2_XXS, ...) are checked the same way and skipped, unless they are
 * attention tensors: those are refused with their name and type. */
#ifndef AS_GGUF_H
#define AS_GGUF_H

#include <stdbool.h>
#include <stdint.h>

#include "model/config.h"
#include "model/errors.h"
#include "model/weights.h"

#define AS_GGUF_MAGIC "GGUF"
#define AS_GGUF_VERSION 3
#define AS_GGUF_DEFAULT_ALIGNMENT 32
#define AS_GGUF_MAX_TENSORS (1 << 20)
#define AS_GGUF_MAX_KV (1 << 20)
#define AS_GGUF_MAX_KEY 65535
#define AS_GGUF_ARCH "deepseek4"    /* general.architecture written by attnscope convert */

typedef enum {
    AS_GGUF_U8 = 0, AS_GGUF_I8 = 1, AS_GGUF_U16 = 2, AS_GGUF_I16 = 3, AS_GGUF_U32 = 4, AS_GGUF_I32 = 5,
    AS_GGUF_F32 = 6, AS_GGUF_BOOL = 7, AS_GGUF_STRING = 8, AS_GGUF_ARRAY = 9, AS_GGUF_U64 = 10,
    AS_GGUF_I64 = 11, AS_GGUF_F64 = 12, AS_GGUF_TYPE_COUNT
} AsGgufType;

/* ggml tensor types (ggml.h ids) that attnscope reads, and Q3_K for messages and tests. */
enum { AS_GGML_F32 = 0, AS_GGML_F16 = 1, AS_GGML_Q8_0 = 8, AS_GGML_Q2_K = 10, AS_GGML_Q3_K = 11, AS_GGML_BF16 = 30 };

/* "Q3_K", "IQ2_XXS"... for a ggml type id; NULL when unknown (or removed from ggml). */
const char *as_ggml_type_name(uint32_t type);
/* The ggml type of a dtype attnscope writes (F32, F16, BF16, Q8_0, Q2_K), -1 for others. */
int as_ggml_type_of(AsDType t);

/* One metadata pair; pointers into the mapping (not NUL-terminated). */
typedef struct {
    const char *key;
    uint64_t key_len;
    AsGgufType type;        /* AS_GGUF_ARRAY for arrays */
    AsGgufType elem;        /* arrays: the element type; otherwise == type */
    uint64_t n;             /* arrays: element count; otherwise 1 */
    const uint8_t *val;     /* scalar: its bytes; string: its bytes (no length prefix); array: element 0 */
    uint64_t val_len;       /* string: its length; otherwise the bytes the value spans */
} AsGgufKV;

typedef struct {
    char name[192];         /* as in the file */
    int ndim;
    int64_t ne[4];          /* ggml order: ne[0] is the row length */
    uint32_t type;          /* ggml type id */
    uint64_t offset;        /* into the data section */
    uint64_t nbytes;
} AsGgufTensorInfo;

typedef struct {
    AsWeightFile *file;     /* the mapping (header_len = data offset - 8: the digest hashes the whole header) */
    uint32_t version;
    uint64_t alignment;
    uint64_t data_offset;
    int64_t n_kv;
    AsGgufKV *kv;
    int64_t n_tensors;
    AsGgufTensorInfo *tensors;
    char arch[65];          /* general.architecture ("" when absent) */
} AsGguf;

int as_gguf_open(const char *path, AsGguf **out, AsError *err);
/* Hands the mapping over (to AsModel.files; closed with as_st_close); the rest stays with g. */
AsWeightFile *as_gguf_take_file(AsGguf *g);
void as_gguf_close(AsGguf *g);

const AsGgufKV *as_gguf_find(const AsGguf *g, const char *key);
/* A scalar number of any numeric type (u8 .. f64) as a double; false for other types. */
bool as_gguf_kv_number(const AsGgufKV *kv, double *out);
/* Element i of a numeric array; false when out of range or not numeric. */
bool as_gguf_kv_array_number(const AsGgufKV *kv, uint64_t i, double *out);

/* The tensors of g appended to *tensors (grown with realloc; *n and *cap updated), their names in
 * DeepSeek's spelling (llama.cpp's blk.{l}.* names translated, others kept), data pointing into
 * the mapping. Skipped tensors are counted in g->file->n_skipped. Refuses a tensor of a type
 * attnscope does not read when it is an attention tensor (layers.{l}.attn*). */
int as_gguf_tensors(AsGguf *g, AsWTensor **tensors, int *n, int *cap, AsError *err);

/* The geometry from the metadata (keys in docs/GGUF.md), completed by config_json when that file
 * exists: it supplies the fields the metadata lacks; a field given by both must agree (else an
 * error naming it). The result is parsed by as_config_parse_json; as_config_validate is the
 * caller's (after any max_seq override). */
int as_gguf_config(const AsGguf *g, const char *config_json, AsConfig *cfg, AsError *err);

/* ---- tensor names ---- */

/* "blk.3.attn_q_a.weight" -> "layers.3.attn.wq_a.weight"; false when not a mapped llama.cpp name. */
bool as_gguf_name_from_llama(const char *llama, char *out, size_t n);
/* The reverse; false when not a mapped DeepSeek name. */
bool as_gguf_name_to_llama(const char *deepseek, char *out, size_t n);

/* ---- writing (model/gguf_write.c) ---- */

typedef struct {
    char key[96];
    AsGgufType type;        /* STRING, U32, I32, F32, F64, BOOL, or ARRAY (of I32) */
    char str[256];
    uint32_t u32;
    int32_t i32;
    float f32;
    double f64;
    bool b;
    const int32_t *arr;     /* ARRAY: n int32 values, kept alive by the caller */
    int64_t n;
} AsGgufMeta;

/* The geometry as metadata (the keys as_gguf_config reads) under arch; returns the count (at
 * most cap) or -1 when out of memory. Lists point into cfg. */
int as_gguf_config_meta(const AsConfig *cfg, const char *arch, AsGgufMeta *out, int cap);

typedef struct {
    char name[192];
    AsDType dtype;          /* F32, F16, BF16, Q8_0 or Q2_K */
    int ndim;
    int64_t shape[4];       /* outermost first, as AsWTensor ([out, in] for a projection) */
} AsGgufTensorSpec;

typedef struct {
    /* Produces rows [r0, r0 + nrows) of tensor i (the caller's index) in its dtype into buf (a
     * 1-D tensor is one row). Rows arrive in order. Returns 0 or an AS_E* code. */
    int (*fill)(void *ctx, int i, int64_t r0, int64_t nrows, void *buf, AsError *err);
    void (*progress)(void *ctx, int64_t done, int64_t total);   /* may be NULL */
    void *ctx;
} AsGgufWriteOptions;

/* Writes a GGUF v3 file atomically (a temporary beside path, renamed at the end): the metadata
 * in the given order with general.alignment = 32 first, the tensors in the given order, each
 * at a 32-byte aligned offset. */
int as_gguf_write(const char *path, const AsGgufMeta *meta, int n_meta, const AsGgufTensorSpec *t, int n,
                  const AsGgufWriteOptions *opt, AsError *err);

/* ---- converting a loaded model (attnscope convert) ---- */

typedef enum { AS_GGUF_NAMES_LLAMA, AS_GGUF_NAMES_DEEPSEEK } AsGgufNames;

typedef struct {
    AsDType quant;          /* projections: AS_DT_Q2_K, AS_DT_Q8_0 or AS_DT_BF16 */
    AsGgufNames names;
    const char *source;     /* general.name: what it was converted from (may be NULL) */
    bool progress;          /* a progress line on stderr for files of 64 MiB and more */
} AsGgufConvertOptions;

/* Writes every attention tensor of m's layer roles (as_layer_tensors) to a GGUF file at path,
 * atomically: projections quantised with ggml's algorithms (model/quants.h) or kept BF16; norms,
 * sinks and the ratio-2 compressor's F32 weights as F32; the geometry as metadata (arch
 * AS_GGUF_ARCH). A projection whose rows are not whole blocks of the format (256 values for Q2_K,
 * 32 for Q8_0), or that holds a non-finite value, is refused with its name. */
int as_gguf_convert(const AsModel *m, const AsGgufConvertOptions *o, const char *path, AsError *err);

#endif
