/* model/gguf.c, the reader: a GGUF file built byte by byte here (every metadata type, every
 * tensor type attnscope reads, both naming schemes, a skipped type), then every way a header can
 * lie, truncation at every byte, random corruption, and the tensor name mapping. */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "model/gguf.h"
#include "model/quants.h"
#include "model/safetensors.h"
#include "ref/numerics.h"
#include "tests/lib/cli_util.h"
#include "tests/lib/harness.h"
#include "tests/lib/quants_inputs.h"

/* ---- building a file ---- */

typedef struct {
    uint8_t *p;
    size_t n, cap;
} Bytes;

static void put(Bytes *b, const void *src, size_t n)
{
    if (b->n + n > b->cap) {
        b->cap = (b->n + n) * 2 + 256;
        b->p = realloc(b->p, b->cap);
        REQUIRE(b->p, "out of memory");
    }
    memcpy(b->p + b->n, src, n);
    b->n += n;
}
static void put_u32(Bytes *b, uint32_t v) { put(b, &v, 4); }
static void put_u64(Bytes *b, uint64_t v) { put(b, &v, 8); }
static void put_str(Bytes *b, const char *s)
{
    put_u64(b, strlen(s));
    put(b, s, strlen(s));
}

/* Where the fields the corruption tests patch lie. */
typedef struct {
    size_t version, n_tensors, n_kv;
    size_t key0_len;          /* length of the first key */
    size_t str_len;           /* length of the t.str value */
    size_t arr_type, arr_n;   /* element type and count of t.arr_u32 */
    size_t type_of_u8;        /* the type field of t.u8 */
    size_t key_u8;            /* first byte of the key "t.u8" */
    size_t align_val;         /* the value of general.alignment */
    size_t t_ndim[6], t_ne[6], t_type[6], t_off[6], t_name[6];
    size_t data;              /* data section start */
    uint64_t t_offset[6], t_bytes[6];
} Layout;

typedef struct {
    uint32_t wq_a_type;       /* ggml type of layers.0.attn.wq_a.weight (Q3_K for the refusal) */
    uint32_t alignment_type;  /* AS_GGUF_U32 normally */
    uint32_t alignment;
} Opts;

#define N_T 6
static const char *const tnames[N_T] = {"layers.0.attn.attn_sink", "layers.0.attn.wq_a.weight",
                                        "layers.0.attn.wkv.weight", "blk.0.attn_q_b.weight",
                                        "blk.0.attn_output_a.weight", "blk.0.ffn_up_x.weight"};

/* Tensor data: a sink [4] F32, wq_a [2][256] BF16 (or 256 values of Q3_K), wkv [2][4] F16,
 * q_b [2][32] Q8_0, output_a [1][256] Q2_K, ffn_up_x [1][256] Q4_K (not attention: skipped). */
static void tensor_bytes(int i, const Opts *o, Bytes *d, uint32_t *type, int *nd, int64_t ne[2])
{
    float v[512];
    for (int k = 0; k < 512; k++)
        v[k] = as_qi_value(0, k);
    switch (i) {
    case 0:
        *type = AS_GGML_F32, *nd = 1, ne[0] = 4;
        put(d, v, 16);
        break;
    case 1:
        if (o->wq_a_type == AS_GGML_Q3_K) {
            *type = AS_GGML_Q3_K, *nd = 2, ne[0] = 256, ne[1] = 1;
            uint8_t z[110] = {0};
            put(d, z, sizeof z);
            break;
        }
        *type = AS_GGML_BF16, *nd = 2, ne[0] = 256, ne[1] = 2;
        for (int k = 0; k < 512; k++) {
            uint16_t b = as_bf16_bits(v[k]);
            put(d, &b, 2);
        }
        break;
    case 2: {
        *type = AS_GGML_F16, *nd = 2, ne[0] = 4, ne[1] = 2;
        for (int k = 0; k < 8; k++) {
            uint16_t h = as_fp32_to_fp16(v[k]);
            put(d, &h, 2);
        }
        break;
    }
    case 3: {
        *type = AS_GGML_Q8_0, *nd = 2, ne[0] = 32, ne[1] = 2;
        AsBlockQ8_0 q[2];
        as_quantize_row_q8_0(v, q, 64);
        put(d, q, sizeof q);
        break;
    }
    case 4: {
        *type = AS_GGML_Q2_K, *nd = 2, ne[0] = 256, ne[1] = 1;
        AsBlockQ2K q;
        as_quantize_row_q2_K(v, &q, 256);
        put(d, &q, sizeof q);
        break;
    }
    default: {
        *type = 12 /* Q4_K */, *nd = 2, ne[0] = 256, ne[1] = 1;
        uint8_t z[144] = {0};
        put(d, z, sizeof z);
        break;
    }
    }
}

static void put_kv_scalar(Bytes *b, const char *key, uint32_t type, const void *v, size_t n)
{
    put_str(b, key);
    put_u32(b, type);
    put(b, v, n);
}

/* A valid file (no padding after the last tensor: every proper prefix is invalid). */
static Bytes build(const Opts *o, Layout *L)
{
    Bytes b = {0};
    memset(L, 0, sizeof *L);
    put(&b, "GGUF", 4);
    L->version = b.n;
    put_u32(&b, 3);
    L->n_tensors = b.n;
    put_u64(&b, N_T);
    L->n_kv = b.n;
    put_u64(&b, 16);
    L->key0_len = b.n;
    put_str(&b, "general.architecture");
    put_u32(&b, AS_GGUF_STRING);
    put_str(&b, "deepseek4");
    put_str(&b, "general.alignment");
    put_u32(&b, o->alignment_type);
    L->align_val = b.n;
    put_u32(&b, o->alignment);
    uint8_t u8 = 200;
    int8_t i8 = -5;
    uint16_t u16 = 60000;
    int16_t i16 = -30000;
    uint32_t u32 = 4000000000u;
    int32_t i32 = -2000000000;
    float f32 = 1.5f;
    uint8_t bo = 1;
    uint64_t u64 = (uint64_t)1 << 40;
    int64_t i64 = -((int64_t)1 << 40);
    double f64 = 0.1;
    L->key_u8 = b.n + 8;
    put_str(&b, "t.u8");
    L->type_of_u8 = b.n;
    put_u32(&b, AS_GGUF_U8);
    put(&b, &u8, 1);
    put_kv_scalar(&b, "t.i8", AS_GGUF_I8, &i8, 1);
    put_kv_scalar(&b, "t.u16", AS_GGUF_U16, &u16, 2);
    put_kv_scalar(&b, "t.i16", AS_GGUF_I16, &i16, 2);
    put_kv_scalar(&b, "t.u32", AS_GGUF_U32, &u32, 4);
    put_kv_scalar(&b, "t.i32", AS_GGUF_I32, &i32, 4);
    put_kv_scalar(&b, "t.f32", AS_GGUF_F32, &f32, 4);
    put_kv_scalar(&b, "t.bool", AS_GGUF_BOOL, &bo, 1);
    put_str(&b, "t.str");
    put_u32(&b, AS_GGUF_STRING);
    L->str_len = b.n;
    put_str(&b, "hello");
    put_kv_scalar(&b, "t.u64", AS_GGUF_U64, &u64, 8);
    put_kv_scalar(&b, "t.i64", AS_GGUF_I64, &i64, 8);
    put_kv_scalar(&b, "t.f64", AS_GGUF_F64, &f64, 8);
    put_str(&b, "t.arr_u32");
    put_u32(&b, AS_GGUF_ARRAY);
    L->arr_type = b.n;
    put_u32(&b, AS_GGUF_U32);
    L->arr_n = b.n;
    put_u64(&b, 3);
    for (uint32_t k = 1; k <= 3; k++)
        put_u32(&b, k);
    put_str(&b, "t.arr_str");
    put_u32(&b, AS_GGUF_ARRAY);
    put_u32(&b, AS_GGUF_STRING);
    put_u64(&b, 2);
    put_str(&b, "a");
    put_str(&b, "bc");
    /* tensor infos, then the data (each tensor 32-aligned) */
    Bytes data[N_T] = {{0}};
    uint64_t off = 0;
    for (int i = 0; i < N_T; i++) {
        uint32_t type;
        int nd;
        int64_t ne[2];
        tensor_bytes(i, o, &data[i], &type, &nd, ne);
        L->t_name[i] = b.n;
        put_str(&b, tnames[i]);
        L->t_ndim[i] = b.n;
        put_u32(&b, (uint32_t)nd);
        L->t_ne[i] = b.n;
        for (int d = 0; d < nd; d++)
            put_u64(&b, (uint64_t)ne[d]);
        L->t_type[i] = b.n;
        put_u32(&b, type);
        L->t_off[i] = b.n;
        put_u64(&b, off);
        L->t_offset[i] = off;
        L->t_bytes[i] = data[i].n;
        off += (data[i].n + 31) / 32 * 32;
    }
    static const uint8_t zeros[32];
    put(&b, zeros, (32 - b.n % 32) % 32);
    L->data = b.n;
    for (int i = 0; i < N_T; i++) {
        put(&b, data[i].p, data[i].n);
        if (i + 1 < N_T)
            put(&b, zeros, (32 - data[i].n % 32) % 32);
        free(data[i].p);
    }
    return b;
}

static const Opts defaults = {AS_GGML_BF16, AS_GGUF_U32, 32};

static void write_file(const char *path, const void *p, size_t n)
{
    FILE *f = fopen(path, "wb");
    REQUIRE(f && fwrite(p, 1, n, f) == n && fclose(f) == 0, "writing %s", path);
}

static char *tmp_path(const char *name)
{
    static char p[600];
    snprintf(p, sizeof p, "%s/%s", as_test_tmpdir(), name);
    return p;
}

/* Opens bytes as a file; returns the code, the message in err. */
static int open_bytes(const Bytes *b, size_t n, AsGguf **g, AsError *err)
{
    const char *p = tmp_path("t.gguf");
    write_file(p, b->p, n);
    return as_gguf_open(p, g, err);
}

static void patch(Bytes *b, size_t at, const void *v, size_t n) { memcpy(b->p + at, v, n); }
static void patch_u32(Bytes *b, size_t at, uint32_t v) { patch(b, at, &v, 4); }
static void patch_u64(Bytes *b, size_t at, uint64_t v) { patch(b, at, &v, 8); }

/* ---- the tests ---- */

TEST(gguf_parse_every_type)
{
    Layout L;
    Bytes b = build(&defaults, &L);
    for (int version = 3; version >= 2; version--) {
        patch_u32(&b, L.version, (uint32_t)version);
        AsGguf *g;
        AsError err = {0};
        REQUIRE(open_bytes(&b, b.n, &g, &err) == AS_OK, "version %d: %s", version, err.msg);
        CHECK(g->version == (uint32_t)version && g->n_kv == 16 && g->n_tensors == N_T && g->alignment == 32 &&
                  g->data_offset == L.data && !strcmp(g->arch, "deepseek4"),
              "header: version %u, %lld kv, %lld tensors, alignment %llu, data at %llu, arch %s", g->version,
              (long long)g->n_kv, (long long)g->n_tensors, (unsigned long long)g->alignment,
              (unsigned long long)g->data_offset, g->arch);
        const struct {
            const char *key;
            double v;
        } nums[] = {{"t.u8", 200}, {"t.i8", -5}, {"t.u16", 60000}, {"t.i16", -30000}, {"t.u32", 4000000000.0},
                    {"t.i32", -2000000000.0}, {"t.f32", 1.5}, {"t.u64", 1099511627776.0},
                    {"t.i64", -1099511627776.0}, {"t.f64", 0.1}};
        for (size_t i = 0; i < sizeof nums / sizeof nums[0]; i++) {
            const AsGgufKV *kv = as_gguf_find(g, nums[i].key);
            double v = 0;
            CHECK(kv && as_gguf_kv_number(kv, &v) && v == nums[i].v, "%s = %g, want %g", nums[i].key, v, nums[i].v);
        }
        const AsGgufKV *kv = as_gguf_find(g, "t.bool");
        double v;
        CHECK(kv && kv->type == AS_GGUF_BOOL && kv->val[0] == 1 && !as_gguf_kv_number(kv, &v), "bool");
        kv = as_gguf_find(g, "t.str");
        CHECK(kv && kv->type == AS_GGUF_STRING && kv->val_len == 5 && !memcmp(kv->val, "hello", 5), "string");
        kv = as_gguf_find(g, "t.arr_u32");
        CHECK(kv && kv->type == AS_GGUF_ARRAY && kv->elem == AS_GGUF_U32 && kv->n == 3 &&
                  as_gguf_kv_array_number(kv, 2, &v) && v == 3 && !as_gguf_kv_array_number(kv, 3, &v),
              "u32 array");
        kv = as_gguf_find(g, "t.arr_str");
        CHECK(kv && kv->elem == AS_GGUF_STRING && kv->n == 2 && kv->val_len == 8 + 1 + 8 + 2, "string array");
        CHECK(!as_gguf_find(g, "t.missing") && !as_gguf_find(g, "t.u"), "no prefix matches");

        AsWTensor *ts = NULL;
        int n = 0, cap = 0;
        REQUIRE(as_gguf_tensors(g, &ts, &n, &cap, &err) == AS_OK, "tensors: %s", err.msg);
        CHECK(n == N_T - 1 && g->file->n_skipped == 1, "%d tensors read, %d skipped (the Q4_K ffn tensor)", n,
              g->file->n_skipped);
        const struct {
            const char *name;
            AsDType dt;
            int ndim;
            int64_t s0, s1;
        } want[] = {{"layers.0.attn.attn_sink", AS_DT_F32, 1, 4, 0},
                    {"layers.0.attn.wq_a.weight", AS_DT_BF16, 2, 2, 256},
                    {"layers.0.attn.wkv.weight", AS_DT_F16, 2, 2, 4},
                    {"layers.0.attn.wq_b.weight", AS_DT_Q8_0, 2, 2, 32},
                    {"layers.0.attn.wo_a.weight", AS_DT_Q2_K, 2, 1, 256}};
        float vals[512], got[512];
        for (int k = 0; k < 512; k++)
            vals[k] = as_qi_value(0, k);
        for (int i = 0; i < 5 && i < n; i++) {
            const AsWTensor *t = &ts[i];
            CHECK(!strcmp(t->name, want[i].name) && t->dtype == want[i].dt && t->ndim == want[i].ndim &&
                      t->shape[0] == want[i].s0 && (want[i].ndim == 1 || t->shape[1] == want[i].s1),
                  "tensor %d: %s %s ndim %d [%lld, %lld]", i, t->name, as_dtype_name(t->dtype), t->ndim,
                  (long long)t->shape[0], (long long)t->shape[1]);
            CHECK((const uint8_t *)t->data == g->file->data + L.t_offset[i] && t->nbytes == (int64_t)L.t_bytes[i],
                  "%s: data at %lld, %lld bytes", t->name, (long long)((const uint8_t *)t->data - g->file->data),
                  (long long)t->nbytes);
            as_wt_rows_f32(t, 0, as_wt_rows(t), got);
            int64_t cnt = as_wt_rows(t) * as_wt_cols(t);
            float ref[512];
            if (t->dtype == AS_DT_F32)
                memcpy(ref, vals, sizeof ref);
            for (int64_t k = 0; k < cnt; k++) {
                if (t->dtype == AS_DT_BF16)
                    ref[k] = as_bf16(vals[k]);
                else if (t->dtype == AS_DT_F16)
                    ref[k] = as_fp16_to_fp32(as_fp32_to_fp16(vals[k]));
            }
            if (t->dtype == AS_DT_Q8_0) {
                AsBlockQ8_0 q[2];
                as_quantize_row_q8_0(vals, q, 64);
                as_dequantize_row_q8_0(q, ref, 64);
            } else if (t->dtype == AS_DT_Q2_K) {
                AsBlockQ2K q;
                as_quantize_row_q2_K(vals, &q, 256);
                as_dequantize_row_q2_K(&q, ref, 256);
            }
            CHECK(memcmp(got, ref, (size_t)cnt * sizeof *got) == 0, "%s: decoded values differ", t->name);
        }
        free(ts);
        as_gguf_close(g);
    }
    free(b.p);
}

/* Truncated at every byte: always refused, never a read past the end (ASan in test-san). */
TEST(gguf_truncated_at_every_byte)
{
    Layout L;
    Bytes b = build(&defaults, &L);
    int ok = 0;
    const char *path = tmp_path("t.gguf");
    write_file(path, b.p, b.n);
    for (size_t n = b.n; n-- > 0;) { /* cut the same file shorter and shorter */
        AsGguf *g = NULL;
        AsError err = {0};
        REQUIRE(truncate(path, (off_t)n) == 0, "truncate");
        int rc = as_gguf_open(path, &g, &err);
        if (rc == AS_OK) {
            CHECK(false, "a prefix of %zu of %zu bytes was accepted", n, b.n);
            as_gguf_close(g);
            break;
        }
        ok += rc == AS_EBADINPUT && strstr(err.msg, "t.gguf") && !strchr(err.msg, '\n');
    }
    CHECK(ok == (int)b.n, "%d of %zu truncations refused with a one-line message naming the file", ok, b.n);
    free(b.p);
}

typedef void (*Corrupt)(Bytes *b, const Layout *L);
static void c_magic(Bytes *b, const Layout *L) { (void)L, b->p[3] = 'X'; }
static void c_v1(Bytes *b, const Layout *L) { patch_u32(b, L->version, 1); }
static void c_v4(Bytes *b, const Layout *L) { patch_u32(b, L->version, 4); }
static void c_big_endian(Bytes *b, const Layout *L) { patch_u32(b, L->version, 0x03000000u); }
static void c_ntensors(Bytes *b, const Layout *L) { patch_u64(b, L->n_tensors, (uint64_t)1 << 40); }
static void c_ntensors_neg(Bytes *b, const Layout *L) { patch_u64(b, L->n_tensors, (uint64_t)-1); }
static void c_nkv(Bytes *b, const Layout *L) { patch_u64(b, L->n_kv, (uint64_t)1 << 40); }
static void c_nkv_more(Bytes *b, const Layout *L) { patch_u64(b, L->n_kv, 17); }
static void c_key_len(Bytes *b, const Layout *L) { patch_u64(b, L->key0_len, (uint64_t)1 << 62); }
static void c_key_len_past(Bytes *b, const Layout *L) { patch_u64(b, L->key0_len, 60000); }
static void c_str_len(Bytes *b, const Layout *L) { patch_u64(b, L->str_len, (uint64_t)-2); }
static void c_arr_n(Bytes *b, const Layout *L) { patch_u64(b, L->arr_n, (uint64_t)1 << 61); }
static void c_nested(Bytes *b, const Layout *L) { patch_u32(b, L->arr_type, AS_GGUF_ARRAY); }
static void c_arr_type(Bytes *b, const Layout *L) { patch_u32(b, L->arr_type, 77); }
static void c_kv_type(Bytes *b, const Layout *L) { patch_u32(b, L->type_of_u8, 13); }
static void c_dup_key(Bytes *b, const Layout *L) { patch(b, L->key_u8, "t.i8", 4); } /* "t.u8" -> "t.i8" */
static void c_ttype_removed(Bytes *b, const Layout *L) { patch_u32(b, L->t_type[2], 4); }
static void c_ttype_unknown(Bytes *b, const Layout *L) { patch_u32(b, L->t_type[2], 200); }
static void c_ndim0(Bytes *b, const Layout *L) { patch_u32(b, L->t_ndim[0], 0); }
static void c_ndim5(Bytes *b, const Layout *L) { patch_u32(b, L->t_ndim[0], 5); }
static void c_neg_dim(Bytes *b, const Layout *L) { patch_u64(b, L->t_ne[2], (uint64_t)-4); }
static void c_overflow(Bytes *b, const Layout *L)
{
    patch_u64(b, L->t_ne[2], (uint64_t)1 << 40);
    patch_u64(b, L->t_ne[2] + 8, (uint64_t)1 << 40);
}
static void c_big_dims(Bytes *b, const Layout *L) { patch_u64(b, L->t_ne[2] + 8, (uint64_t)1 << 30); }
static void c_row_blocks(Bytes *b, const Layout *L) { patch_u64(b, L->t_ne[4], 100); }
static void c_misaligned(Bytes *b, const Layout *L) { patch_u64(b, L->t_off[3], L->t_offset[3] + 2); }
static void c_past_end(Bytes *b, const Layout *L) { patch_u64(b, L->t_off[3], (uint64_t)1 << 62); }
static void c_huge_off(Bytes *b, const Layout *L) { patch_u64(b, L->t_off[4], (uint64_t)-32); }
static void c_overlap(Bytes *b, const Layout *L) { patch_u64(b, L->t_off[3], L->t_offset[2]); }
static void c_dup_name(Bytes *b, const Layout *L) { patch(b, L->t_name[5] + 8, "blk.0.attn_q_b.weight", 21); }
static void c_align(Bytes *b, const Layout *L) { patch_u32(b, L->align_val, 48); }
static void c_align0(Bytes *b, const Layout *L) { patch_u32(b, L->align_val, 0); }

TEST(gguf_lying_headers_refused)
{
    const struct {
        const char *what;
        Corrupt fn;
        const char *msg;
    } cases[] = {
        {"bad magic", c_magic, "not a GGUF file"},
        {"version 1", c_v1, "version 1 "},
        {"version 4", c_v4, "version 4 "},
        {"big-endian", c_big_endian, "big-endian"},
        {"2^40 tensors", c_ntensors, "claims 1099511627776 tensors"},
        {"-1 tensors", c_ntensors_neg, "more than the file holds"},
        {"2^40 metadata pairs", c_nkv, "claims 1099511627776 metadata"},
        {"one metadata pair too many", c_nkv_more, "t.gguf"},
        {"key length 2^62", c_key_len, "length 4611686018427387904"},
        {"key past the end", c_key_len_past, "truncated"},
        {"string length 2^64-2", c_str_len, "truncated"},
        {"array of 2^61", c_arr_n, "more than the file holds"},
        {"nested array", c_nested, "array of arrays"},
        {"array of type 77", c_arr_type, "unknown type 77"},
        {"metadata type 13", c_kv_type, "unknown type 13"},
        {"duplicate key", c_dup_key, "'t.i8' appears twice"},
        {"removed ggml type 4", c_ttype_removed, "unknown ggml type 4"},
        {"ggml type 200", c_ttype_unknown, "unknown ggml type 200"},
        {"0 dimensions", c_ndim0, "0 dimensions"},
        {"5 dimensions", c_ndim5, "5 dimensions"},
        {"negative dim", c_neg_dim, "is negative"},
        {"2^80 elements", c_overflow, "2^56"},
        {"dims bigger than the data", c_big_dims, "run past the data section"},
        {"Q2_K rows of 100", c_row_blocks, "not whole Q2_K blocks of 256"},
        {"misaligned offset", c_misaligned, "not a multiple of the alignment 32"},
        {"offset 2^62", c_past_end, "run past the data section"},
        {"offset 2^64-32", c_huge_off, "run past the data section"},
        {"overlapping tensors", c_overlap, "overlap"},
        {"duplicate tensor name", c_dup_name, "'blk.0.attn_q_b.weight' appears twice"},
        {"alignment 48", c_align, "not a power of two"},
        {"alignment 0", c_align0, "not a power of two"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        Layout L;
        Bytes b = build(&defaults, &L);
        cases[i].fn(&b, &L);
        AsGguf *g = NULL;
        AsError err = {0};
        int rc = open_bytes(&b, b.n, &g, &err);
        CHECK(rc == AS_EBADINPUT && strstr(err.msg, cases[i].msg) && strstr(err.msg, "t.gguf"),
              "%s: rc %d, message '%s' (want '%s')", cases[i].what, rc, err.msg, cases[i].msg);
        if (rc == AS_OK)
            as_gguf_close(g);
        free(b.p);
    }
    /* general.alignment of the wrong type */
    Opts o = defaults;
    o.alignment_type = AS_GGUF_I32;
    Layout L;
    Bytes b = build(&o, &L);
    AsGguf *g = NULL;
    AsError err = {0};
    CHECK(open_bytes(&b, b.n, &g, &err) == AS_EBADINPUT && strstr(err.msg, "general.alignment is a i32"),
          "i32 alignment: %s", err.msg);
    free(b.p);
    /* a larger alignment is honoured (the data moves to the next multiple of 64) */
    o = defaults;
    o.alignment = 64;
    b = build(&o, &L);
    CHECK(open_bytes(&b, b.n, &g, &err) == AS_EBADINPUT && strstr(err.msg, "alignment 64"),
          "offsets aligned to 32 in a file declaring 64: %s", err.msg);
    free(b.p);
}

/* A Q3_K attention projection is refused by name and type; other tensors of such types are
 * skipped. Also through the CLI: `attnscope info` exits 2 with one line. */
TEST(gguf_q3_k_projection_refused)
{
    Opts o = defaults;
    o.wq_a_type = AS_GGML_Q3_K;
    Layout L;
    Bytes b = build(&o, &L);
    AsGguf *g = NULL;
    AsError err = {0};
    REQUIRE(open_bytes(&b, b.n, &g, &err) == AS_OK, "the container itself is valid: %s", err.msg);
    AsWTensor *ts = NULL;
    int n = 0, cap = 0;
    CHECK(as_gguf_tensors(g, &ts, &n, &cap, &err) == AS_EBADINPUT &&
              strstr(err.msg, "layers.0.attn.wq_a.weight") && strstr(err.msg, "type Q3_K is not supported") && n == 0,
          "Q3_K projection: %s", err.msg);
    free(ts);
    as_gguf_close(g);
    AsCliResult *r = malloc(sizeof *r);
    REQUIRE(r, "out of memory");
    as_cli_run(r, AS_ARGS("info", tmp_path("t.gguf")));
    CHECK(r->status == 2 && strstr(r->err, "Q3_K") && strstr(r->err, "wq_a") && strchr(r->err, '\n') &&
              strchr(r->err, '\n')[1] == '\0',
          "attnscope info on a Q3_K projection: exit %d, stderr '%s'", r->status, r->err);
    /* truncated file through the CLI */
    Bytes v = build(&defaults, &L);
    write_file(tmp_path("cut.gguf"), v.p, L.t_name[2]);
    as_cli_run(r, AS_ARGS("info", tmp_path("cut.gguf")));
    CHECK(r->status == 2 && strstr(r->err, "truncated") && strstr(r->err, "cut.gguf"),
          "attnscope info on a truncated file: exit %d, stderr '%s'", r->status, r->err);
    /* bad magic through the CLI */
    v.p[0] = 'X';
    write_file(tmp_path("magic.gguf"), v.p, v.n);
    as_cli_run(r, AS_ARGS("info", tmp_path("magic.gguf")));
    CHECK(r->status == 2 && strstr(r->err, "not a GGUF file"), "bad magic: exit %d, stderr '%s'", r->status, r->err);
    free(r);
    free(v.p);
    free(b.p);
}

/* Random corruption of the header and data: every outcome is a clean accept or refusal; an
 * accepted file's tensors all decode inside the mapping (ASan in test-san). */
TEST(gguf_random_corruption)
{
    Layout L;
    Bytes b = build(&defaults, &L);
    const char *path = tmp_path("t.gguf");
    write_file(path, b.p, b.n);
    int fd = open(path, O_WRONLY);
    REQUIRE(fd >= 0, "open %s", path);
    int accepted = 0, refused = 0;
    float *buf = malloc(512 * sizeof *buf);
    REQUIRE(buf, "out of memory");
    for (int it = 0; it < 1500; it++) {
        /* flip 1 to 4 bytes in place (mostly in the header), open, then put them back */
        uint64_t h = as_qi_hash((uint64_t)it);
        int flips = 1 + (int)(h % 4);
        size_t at[4];
        for (int f = 0; f < flips; f++) {
            uint64_t hh = as_qi_hash(h + (uint64_t)f + 1);
            at[f] = (size_t)(hh % (it % 3 ? L.data : b.n));
            uint8_t v = (uint8_t)(hh >> 32);
            REQUIRE(pwrite(fd, &v, 1, (off_t)at[f]) == 1, "pwrite");
        }
        AsGguf *g = NULL;
        AsError err = {0};
        int rc = as_gguf_open(path, &g, &err);
        for (int f = flips; f-- > 0;)
            REQUIRE(pwrite(fd, b.p + at[f], 1, (off_t)at[f]) == 1, "pwrite");
        if (rc) {
            refused++;
            CHECK(rc == AS_EBADINPUT || rc == AS_ERUNTIME, "iteration %d: rc %d (%s)", it, rc, err.msg);
            continue;
        }
        accepted++;
        AsWTensor *ts = NULL;
        int n = 0, cap = 0;
        if (as_gguf_tensors(g, &ts, &n, &cap, &err) == AS_OK)
            for (int i = 0; i < n; i++)
                if (as_wt_rows(&ts[i]) * as_wt_cols(&ts[i]) <= 512 && ts[i].ndim <= 2)
                    as_wt_rows_f32(&ts[i], 0, as_wt_rows(&ts[i]), buf);
        AsConfig cfg;
        as_gguf_config(g, NULL, &cfg, &err); /* metadata without geometry: refused, never a crash */
        free(ts);
        as_gguf_close(g);
    }
    as_test_note("1500 corrupted files: %d accepted, %d refused", accepted, refused);
    CHECK(refused > 0, "some corruptions are refused");
    close(fd);
    free(buf);
    free(b.p);
}

TEST(gguf_tensor_names_both_schemes)
{
    const char *pairs[][2] = {
        {"blk.0.attn_norm.weight", "layers.0.attn_norm.weight"},
        {"blk.3.attn_q_a.weight", "layers.3.attn.wq_a.weight"},
        {"blk.3.attn_q_a_norm.weight", "layers.3.attn.q_norm.weight"},
        {"blk.12.attn_q_b.weight", "layers.12.attn.wq_b.weight"},
        {"blk.39.attn_kv.weight", "layers.39.attn.wkv.weight"},
        {"blk.39.attn_kv_a_norm.weight", "layers.39.attn.kv_norm.weight"},
        {"blk.1.attn_output_a.weight", "layers.1.attn.wo_a.weight"},
        {"blk.1.attn_output_b.weight", "layers.1.attn.wo_b.weight"},
        {"blk.2.attn_sinks.weight", "layers.2.attn.attn_sink"},
        {"blk.2.attn_compressor_kv.weight", "layers.2.attn.compressor.wkv.weight"},
        {"blk.2.attn_compressor_gate.weight", "layers.2.attn.compressor.wgate.weight"},
        {"blk.2.attn_compressor_norm.weight", "layers.2.attn.compressor.norm.weight"},
        {"blk.20.indexer.attn_q_b.weight", "layers.20.attn.indexer.wq_b.weight"},
        {"blk.20.indexer.proj.weight", "layers.20.attn.indexer.weights_proj.weight"},
        {"blk.20.indexer.attn_k.weight", "layers.20.attn.indexer.wk.weight"},
        {"blk.20.indexer.k_norm.weight", "layers.20.attn.indexer.k_norm.weight"},
    };
    char out[192];
    for (size_t i = 0; i < sizeof pairs / sizeof pairs[0]; i++) {
        CHECK(as_gguf_name_from_llama(pairs[i][0], out, sizeof out) && !strcmp(out, pairs[i][1]), "%s -> %s",
              pairs[i][0], out);
        CHECK(as_gguf_name_to_llama(pairs[i][1], out, sizeof out) && !strcmp(out, pairs[i][0]), "%s -> %s",
              pairs[i][1], out);
    }
    const char *not_mapped[] = {"blk.07.attn_q_a.weight", "blk.3.attn_q_a", "blk.x.attn_q_a.weight",
                                "token_embd.weight", "blk.3.ffn_up.weight", "layers.3.attn.wq_a.weight",
                                "blk..attn_q_a.weight"};
    for (size_t i = 0; i < sizeof not_mapped / sizeof not_mapped[0]; i++)
        CHECK(!as_gguf_name_from_llama(not_mapped[i], out, sizeof out), "%s is not a mapped llama.cpp name",
              not_mapped[i]);
    CHECK(!as_gguf_name_to_llama("layers.3.ffn.w1.weight", out, sizeof out), "an MoE name is not mapped");
    CHECK(!as_gguf_name_from_llama("blk.3.attn_q_a.weight", out, 10), "a name that does not fit is refused");
    CHECK(!strcmp(as_ggml_type_name(AS_GGML_Q3_K), "Q3_K") && !strcmp(as_ggml_type_name(39), "MXFP4") &&
              !as_ggml_type_name(4) && !as_ggml_type_name(1000),
          "ggml type names");
}
