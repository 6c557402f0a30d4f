/* safetensors: write -> read round trips, streamed writing, and every kind of broken file refused
 * cleanly (AS_EBADINPUT, a message naming the file and the fault, no out-of-bounds read). */
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "model/safetensors.h"
#include "tests/lib/harness.h"

typedef struct {
    AsWeightFile *f;
    AsWTensor *t;
    int n, cap;
} Opened;

static int open_st(const char *path, Opened *o, AsError *err)
{
    memset(o, 0, sizeof *o);
    return as_st_open(path, &o->f, &o->t, &o->n, &o->cap, err);
}

static void close_st(Opened *o)
{
    as_st_close(o->f);
    free(o->t);
    memset(o, 0, sizeof *o);
}

static const AsWTensor *find(const Opened *o, const char *name)
{
    for (int i = 0; i < o->n; i++)
        if (!strcmp(o->t[i].name, name))
            return &o->t[i];
    return NULL;
}

static void tmp_path(char *buf, size_t n, const char *name) { snprintf(buf, n, "%s/%s", as_test_tmpdir(), name); }

static int count_files(const char *dir)
{
    DIR *d = opendir(dir);
    int n = 0;
    for (struct dirent *e; d && (e = readdir(d));)
        n += e->d_name[0] != '.';
    if (d)
        closedir(d);
    return n;
}

TEST(safetensors_round_trip_every_dtype)
{
    static float f32[15];
    static uint16_t f16[7], bf16[24];
    static uint8_t e4m3[16], e8m0[1] = {127};
    for (int i = 0; i < 15; i++)
        f32[i] = (float)i * 0.25f - 1.0f;
    for (int i = 0; i < 7; i++)
        f16[i] = (uint16_t)(0x3c00 + i);
    for (int i = 0; i < 24; i++)
        bf16[i] = (uint16_t)(0x3f80 + 3 * i);
    for (int i = 0; i < 16; i++)
        e4m3[i] = (uint8_t)(i * 7);
    static const float scalar = 42.0f;
    AsStTensorSpec specs[] = {
        {"z.f32", AS_DT_F32, 2, {3, 5}, f32},
        {"a.f16", AS_DT_F16, 1, {7}, f16},
        {"m.bf16", AS_DT_BF16, 3, {2, 3, 4}, bf16},
        {"b.fp8", AS_DT_F8_E4M3, 2, {4, 4}, e4m3},
        {"b.fp8_scale", AS_DT_F8_E8M0, 2, {1, 1}, e8m0},
        {"empty", AS_DT_BF16, 2, {0, 4}, bf16},
        {"scalar", AS_DT_F32, 0, {0}, &scalar},
    };
    int n = (int)(sizeof specs / sizeof specs[0]);
    const char *meta[] = {"format", "pt", "note", "round trip", NULL};
    AsStWriteOptions opt = {.metadata = meta};
    char path[512];
    tmp_path(path, sizeof path, "rt.safetensors");
    AsError err = {0};
    REQUIRE(as_st_write(path, specs, n, &opt, &err) == AS_OK, "write: %s", err.msg);
    CHECK(count_files(as_test_tmpdir()) == 1, "no temporary file left beside the written one");
    Opened o;
    REQUIRE(open_st(path, &o, &err) == AS_OK, "read back: %s", err.msg);
    CHECK(o.n == n, "%d tensors read back, want %d", o.n, n);
    CHECK((8 + o.f->header_len) % 8 == 0, "data section starts 8-byte aligned (header %llu bytes)",
          (unsigned long long)o.f->header_len);
    for (int i = 0; i < n; i++) {
        const AsWTensor *t = find(&o, specs[i].name);
        if (!t) {
            CHECK(false, "tensor %s read back", specs[i].name);
            continue;
        }
        bool same_shape = t->ndim == specs[i].ndim;
        int64_t count = 1;
        for (int d = 0; d < t->ndim; d++) {
            same_shape = same_shape && t->shape[d] == specs[i].shape[d];
            count *= specs[i].shape[d];
        }
        CHECK(t->dtype == specs[i].dtype && same_shape, "%s: dtype and shape kept", t->name);
        int64_t bytes = as_dtype_bytes(t->dtype, count);
        CHECK(t->nbytes == bytes && !memcmp(t->data, specs[i].data, (size_t)bytes), "%s: %lld bytes identical",
              t->name, (long long)bytes);
        CHECK(t->scale == NULL, "%s: scale left for the loader to wire", t->name);
    }
    /* tensors lie in name order in the data section */
    const AsWTensor *a = find(&o, "a.f16"), *z = find(&o, "z.f32");
    CHECK(a && z && (const uint8_t *)a->data < (const uint8_t *)z->data, "tensors stored sorted by name");
    close_st(&o);
}

/* A fill that produces byte k of tensor i as (k * 31 + i) & 0xff, and fails on request. */
typedef struct {
    int64_t last_done, total;
    int calls, fail_at;
} FillCtx;

static int pattern_fill(void *ctx, int i, int64_t off, void *buf, size_t n, AsError *err)
{
    FillCtx *c = ctx;
    if (++c->calls == c->fail_at)
        return as_err(err, AS_ERUNTIME, "fill failed on purpose");
    uint8_t *b = buf;
    for (size_t k = 0; k < n; k++)
        b[k] = (uint8_t)(((uint64_t)off + k) * 31 + (uint64_t)i);
    return AS_OK;
}

static void note_progress(void *ctx, int64_t done, int64_t total)
{
    FillCtx *c = ctx;
    c->last_done = done;
    c->total = total;
}

TEST(safetensors_streamed_write_in_chunks)
{
    /* 5 MiB + 6 bytes of BF16: more than one write chunk */
    AsStTensorSpec specs[] = {
        {"big", AS_DT_BF16, 2, {1024, 2563}, NULL},
        {"small", AS_DT_F32, 1, {3}, NULL},
    };
    FillCtx ctx = {0};
    AsStWriteOptions opt = {pattern_fill, note_progress, &ctx, NULL};
    char path[512];
    tmp_path(path, sizeof path, "stream.safetensors");
    AsError err = {0};
    REQUIRE(as_st_write(path, specs, 2, &opt, &err) == AS_OK, "streamed write: %s", err.msg);
    CHECK(ctx.calls >= 3, "the big tensor arrived in several chunks (%d fill calls)", ctx.calls);
    CHECK(ctx.last_done == ctx.total && ctx.total == 1024 * 2563 * 2 + 12, "progress reached the total (%lld/%lld)",
          (long long)ctx.last_done, (long long)ctx.total);
    Opened o;
    REQUIRE(open_st(path, &o, &err) == AS_OK, "read back: %s", err.msg);
    for (int i = 0; i < 2; i++) {
        const AsWTensor *t = find(&o, specs[i].name);
        REQUIRE(t, "tensor %s present", specs[i].name);
        const uint8_t *b = t->data;
        int64_t bad = -1;
        for (int64_t k = 0; k < t->nbytes && bad < 0; k++)
            if (b[k] != (uint8_t)((uint64_t)k * 31 + (uint64_t)i))
                bad = k;
        CHECK(bad < 0, "%s: byte %lld is what fill produced at that offset", t->name, (long long)bad);
    }
    close_st(&o);
}

TEST(safetensors_failed_write_leaves_nothing)
{
    AsStTensorSpec specs[] = {{"big", AS_DT_BF16, 2, {1024, 4096}, NULL}};
    FillCtx ctx = {.fail_at = 2};
    AsStWriteOptions opt = {pattern_fill, NULL, &ctx, NULL};
    char path[512];
    tmp_path(path, sizeof path, "fail.safetensors");
    AsError err = {0};
    CHECK(as_st_write(path, specs, 1, &opt, &err) == AS_ERUNTIME && strstr(err.msg, "on purpose"),
          "fill's error returned: %s", err.msg);
    CHECK(count_files(as_test_tmpdir()) == 0, "neither the file nor a temporary is left");
    AsStTensorSpec dup[] = {{"x", AS_DT_F32, 1, {1}, &ctx}, {"x", AS_DT_F32, 1, {1}, &ctx}};
    CHECK(as_st_write(path, dup, 2, NULL, &err) == AS_EBADINPUT && strstr(err.msg, "twice"),
          "a tensor given twice refused: %s", err.msg);
    char bad[600];
    snprintf(bad, sizeof bad, "%s/no/such/dir/x.safetensors", as_test_tmpdir());
    CHECK(as_st_write(bad, dup, 1, NULL, &err) == AS_EBADINPUT && strstr(err.msg, bad),
          "unwritable path refused naming it: %s", err.msg);
}

/* Writes a file: the 8-byte length hlen, then header (hlen bytes, or what the string holds), then
 * data_len zero bytes. */
static void write_raw(const char *path, uint64_t hlen, const char *header, size_t data_len)
{
    FILE *f = fopen(path, "wb");
    REQUIRE(f, "create %s", path);
    fwrite(&hlen, 8, 1, f);
    fwrite(header, 1, strlen(header), f);
    for (size_t i = 0; i < data_len; i++)
        fputc(0, f);
    fclose(f);
}

static void expect_refused(const char *what, uint64_t hlen, const char *header, size_t data_len, const char *says)
{
    char path[512];
    tmp_path(path, sizeof path, "bad.safetensors");
    write_raw(path, hlen, header, data_len);
    Opened o;
    AsError err = {0};
    int rc = open_st(path, &o, &err);
    CHECK(rc == AS_EBADINPUT && strstr(err.msg, path) && strstr(err.msg, says) && !strchr(err.msg, '\n'),
          "%s: refused, one line naming the file and '%s' (rc %d: %s)", what, says, rc, err.msg);
    CHECK(o.n == 0 && o.f == NULL, "%s: nothing opened", what);
    close_st(&o);
}

#define H(s) (uint64_t)(sizeof(s) - 1), s

TEST(safetensors_broken_headers_refused_cleanly)
{
    char path[512];
    tmp_path(path, sizeof path, "bad.safetensors");
    for (int size = 0; size <= 5; size += 5) {
        FILE *f = fopen(path, "wb");
        REQUIRE(f, "create");
        fwrite("abcde", 1, (size_t)size, f);
        fclose(f);
        Opened o;
        AsError err = {0};
        CHECK(open_st(path, &o, &err) == AS_EBADINPUT && strstr(err.msg, "too short"), "%d-byte file: %s", size,
              err.msg);
        close_st(&o);
    }
    expect_refused("zero-length header", 0, "", 0, "not valid JSON");

    expect_refused("N larger than the file", 1000, "{}", 0, "runs past the end");
    expect_refused("N absurd", (uint64_t)1 << 62, "{}", 0, "exceeds");
    expect_refused("N one byte short of the JSON", 7, "{\"a\":{}}", 0, "not valid JSON");
    expect_refused("non-JSON header", H("hello world!"), 0, "not valid JSON");
    expect_refused("JSON array header", H("[1,2,3] "), 0, "not a JSON object");
    expect_refused("junk after the JSON", H("{} xyz  "), 0, "bytes after");
    expect_refused("offsets past the end",
                   H("{\"a\":{\"dtype\":\"F32\",\"shape\":[4],\"data_offsets\":[0,16]}}"), 8, "run past the data");
    expect_refused("overlapping tensors",
                   H("{\"a\":{\"dtype\":\"F32\",\"shape\":[4],\"data_offsets\":[0,16]},"
                     "\"b\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[8,16]}}"),
                   16, "overlap");
    expect_refused("wrong size for the dtype",
                   H("{\"a\":{\"dtype\":\"BF16\",\"shape\":[4],\"data_offsets\":[0,16]}}"), 16,
                   "hold 16 bytes but BF16 [4] needs 8");
    expect_refused("huge shape",
                   H("{\"a\":{\"dtype\":\"F32\",\"shape\":[1099511627776,1099511627776],\"data_offsets\":[0,16]}}"),
                   16, "2^56");
    expect_refused("element count overflowing int64",
                   H("{\"a\":{\"dtype\":\"F32\",\"shape\":[4294967296,4294967296,4294967296],"
                     "\"data_offsets\":[0,16]}}"),
                   16, "2^56");
    expect_refused("negative dimension", H("{\"a\":{\"dtype\":\"F32\",\"shape\":[-4],\"data_offsets\":[0,16]}}"),
                   16, "shape[0]");
    expect_refused("fractional dimension", H("{\"a\":{\"dtype\":\"F32\",\"shape\":[2.5],\"data_offsets\":[0,10]}}"),
                   16, "shape[0]");
    expect_refused("unknown dtype", H("{\"a\":{\"dtype\":\"Q9\",\"shape\":[4],\"data_offsets\":[0,4]}}"), 16,
                   "unknown dtype 'Q9'");
    expect_refused("dtype missing", H("{\"a\":{\"shape\":[4],\"data_offsets\":[0,4]}}"), 16, "dtype");
    expect_refused("too many dimensions",
                   H("{\"a\":{\"dtype\":\"BF16\",\"shape\":[1,1,1,1,2],\"data_offsets\":[0,4]}}"), 16, "dimensions");
    expect_refused("begin after end", H("{\"a\":{\"dtype\":\"F32\",\"shape\":[0],\"data_offsets\":[8,4]}}"), 16,
                   "begin <= end");
    expect_refused("three offsets", H("{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4,8]}}"), 16,
                   "data_offsets");
    expect_refused("entry not an object", H("{\"a\":5}"), 16, "not an object");
    expect_refused("metadata not an object", H("{\"__metadata__\":[]}"), 16, "__metadata__");
}

TEST(safetensors_truncated_file_refused)
{
    AsStTensorSpec specs[] = {{"w", AS_DT_F32, 2, {64, 64}, NULL}};
    FillCtx ctx = {0};
    AsStWriteOptions opt = {pattern_fill, NULL, &ctx, NULL};
    char path[512];
    tmp_path(path, sizeof path, "cut.safetensors");
    AsError err = {0};
    REQUIRE(as_st_write(path, specs, 1, &opt, &err) == AS_OK, "write: %s", err.msg);
    FILE *f = fopen(path, "r+b");
    REQUIRE(f && fseek(f, 0, SEEK_END) == 0, "open");
    long size = ftell(f);
    fclose(f);
    REQUIRE(truncate(path, size - 100) == 0, "truncate");
    Opened o;
    CHECK(open_st(path, &o, &err) == AS_EBADINPUT && strstr(err.msg, "run past the data section"),
          "a file cut 100 bytes short is refused: %s", err.msg);
    close_st(&o);
    REQUIRE(truncate(path, 20) == 0, "truncate");
    CHECK(open_st(path, &o, &err) == AS_EBADINPUT && strstr(err.msg, "runs past the end"),
          "a file cut inside the header is refused: %s", err.msg);
    close_st(&o);
}

TEST(safetensors_other_dtypes_checked_then_skipped)
{
    char path[512];
    tmp_path(path, sizeof path, "mixed.safetensors");
    write_raw(path,
              H("{\"ids\":{\"dtype\":\"I64\",\"shape\":[2],\"data_offsets\":[0,16]},"
                "\"w\":{\"dtype\":\"F8_E4M3FN\",\"shape\":[2,4],\"data_offsets\":[16,24]},"
                "\"p\":{\"dtype\":\"F4\",\"shape\":[4],\"data_offsets\":[24,26]},"
                "\"e\":{\"dtype\":\"BF16\",\"shape\":[0],\"data_offsets\":[26,26]}}      "),
              26);
    Opened o;
    AsError err = {0};
    REQUIRE(open_st(path, &o, &err) == AS_OK, "mixed dtypes: %s", err.msg);
    CHECK(o.n == 2 && o.f->n_skipped == 2, "I64 and F4 skipped, 2 read (%d read, %d skipped)", o.n, o.f->n_skipped);
    const AsWTensor *w = find(&o, "w");
    CHECK(w && w->dtype == AS_DT_F8_E4M3, "F8_E4M3FN read as F8_E4M3");
    const AsWTensor *e = find(&o, "e");
    CHECK(e && e->nbytes == 0, "an empty tensor at the end of the data section is fine");
    close_st(&o);
}

TEST(safetensors_index_lists_plain_shard_names)
{
    char path[512];
    tmp_path(path, sizeof path, "model.safetensors.index.json");
    FILE *f = fopen(path, "w");
    REQUIRE(f, "create");
    fputs("{\"metadata\": {\"total_size\": 1}, \"weight_map\": {\"a\": \"m-00002.safetensors\", "
          "\"b\": \"m-00001.safetensors\", \"c\": \"m-00002.safetensors\"}}",
          f);
    fclose(f);
    AsStIndex ix;
    AsError err = {0};
    REQUIRE(as_st_read_index(path, &ix, &err) == AS_OK, "index: %s", err.msg);
    CHECK(ix.n_shards == 2 && !strcmp(ix.shards[0], "m-00001.safetensors") &&
              !strcmp(ix.shards[1], "m-00002.safetensors"),
          "two shards, unique and sorted");
    as_st_index_free(&ix);

    static const struct {
        const char *json, *says;
    } bad[] = {
        {"{\"weight_map\": {\"a\": \"../x.safetensors\"}}", "plain file name"},
        {"{\"weight_map\": {\"a\": \"/etc/passwd\"}}", "plain file name"},
        {"{\"weight_map\": {\"a\": 3}}", "plain file name"},
        {"{\"weight_map\": {}}", "empty"},
        {"{\"tensors\": {}}", "weight_map"},
        {"{\"weight_map\": ", "not valid JSON"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        f = fopen(path, "w");
        REQUIRE(f, "create");
        fputs(bad[i].json, f);
        fclose(f);
        CHECK(as_st_read_index(path, &ix, &err) == AS_EBADINPUT && strstr(err.msg, bad[i].says) &&
                  strstr(err.msg, path),
              "index %s refused with '%s': %s", bad[i].json, bad[i].says, err.msg);
    }
}

static bool want_w(void *ctx, const char *name)
{
    (void)ctx;
    return name[0] == 'w';
}

static int open_filtered(const char *path, Opened *o, AsError *err)
{
    memset(o, 0, sizeof *o);
    return as_st_open_filtered(path, want_w, NULL, &o->f, &o->t, &o->n, &o->cap, err);
}

/* Tensors the caller does not want (names not starting with 'w' here): never read, their dtype and
 * shape not looked at, only their span checked; the wanted ones as strictly as ever. */
TEST(safetensors_filtered_open_skips_unwanted_tensors)
{
    char path[512];
    tmp_path(path, sizeof path, "full.safetensors");
    /* x: a dtype attnscope does not know and a size that fits no shape; y: a shape of 9 dims;
     * z: no dtype, no shape at all */
    write_raw(path,
              H("{\"w1\":{\"dtype\":\"BF16\",\"shape\":[2,2],\"data_offsets\":[0,8]},"
                "\"x.experts\":{\"dtype\":\"F4_E2M1FN_X2\",\"shape\":[3],\"data_offsets\":[8,13]},"
                "\"y.hc\":{\"dtype\":\"F32\",\"shape\":[1,1,1,1,1,1,1,1,1],\"data_offsets\":[13,20]},"
                "\"z\":{\"data_offsets\":[20,24]},"
                "\"w2\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[24,28]}}  "),
              28);
    Opened o;
    AsError err = {0};
    REQUIRE(open_filtered(path, &o, &err) == AS_OK, "a header whose unwanted entries are not tensors attnscope "
                                                    "reads: %s", err.msg);
    CHECK(o.n == 2 && find(&o, "w1") && find(&o, "w2") && !find(&o, "x.experts") && o.f->n_unused == 3 &&
              o.f->n_skipped == 0,
          "w1 and w2 kept, 3 unused not listed (%d kept, %d unused)", o.n, o.f->n_unused);
    close_st(&o);
    Opened all;
    CHECK(open_st(path, &all, &err) == AS_EBADINPUT && strstr(err.msg, "unknown dtype"),
          "unfiltered, the same file is refused as before: %s", err.msg);
    close_st(&all);

    static const struct {
        const char *what, *header, *says;
    } bad[] = {
        {"unwanted tensor past the data",
         "{\"w1\":{\"dtype\":\"BF16\",\"shape\":[2],\"data_offsets\":[0,4]},\"x\":{\"data_offsets\":[4,400]}}",
         "run past the data section"},
        {"unwanted tensor overlapping a wanted one",
         "{\"w1\":{\"dtype\":\"BF16\",\"shape\":[2],\"data_offsets\":[0,4]},\"x\":{\"data_offsets\":[2,6]}}",
         "overlap"},
        {"unwanted entry without offsets", "{\"x\":{\"dtype\":\"F32\",\"shape\":[1]}}", "data_offsets"},
        {"unwanted entry not an object", "{\"x\":[0,4]}", "not an object"},
        {"wanted tensor of the wrong size", "{\"w1\":{\"dtype\":\"BF16\",\"shape\":[4],\"data_offsets\":[0,4]}}",
         "hold 4 bytes but BF16 [4] needs 8"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        write_raw(path, strlen(bad[i].header), bad[i].header, 16);
        int rc = open_filtered(path, &o, &err);
        CHECK(rc == AS_EBADINPUT && strstr(err.msg, bad[i].says) && strstr(err.msg, path),
              "%s: refused with '%s' (rc %d: %s)", bad[i].what, bad[i].says, rc, err.msg);
        CHECK(o.n == 0 && !o.f, "%s: nothing opened", bad[i].what);
        close_st(&o);
    }
}

TEST(safetensors_index_maps_each_tensor_to_its_shard)
{
    char path[512];
    tmp_path(path, sizeof path, "model.safetensors.index.json");
    FILE *f = fopen(path, "w");
    REQUIRE(f, "create");
    fputs("{\"metadata\": {\"total_size\": 1}, \"weight_map\": {\"a\": \"m-3.safetensors\", "
          "\"b\": \"m-1.safetensors\", \"c\": \"m-3.safetensors\", \"d\": \"m-2.safetensors\"}}",
          f);
    fclose(f);
    AsStIndex ix;
    AsError err = {0};
    REQUIRE(as_st_read_index(path, &ix, &err) == AS_OK, "index: %s", err.msg);
    static const char *const names[4] = {"a", "b", "c", "d"};
    static const int shard[4] = {2, 0, 2, 1};
    CHECK(ix.n_shards == 3 && ix.n_entries == 4, "3 shards, 4 entries (%d, %d)", ix.n_shards, ix.n_entries);
    for (int i = 0; i < 4 && i < ix.n_entries; i++)
        CHECK(!strcmp(ix.names[i], names[i]) && ix.shard_of[i] == shard[i] &&
                  !strcmp(ix.shards[ix.shard_of[i]], i == 1 ? "m-1.safetensors" : i == 3 ? "m-2.safetensors"
                                                                                          : "m-3.safetensors"),
              "entry %d: %s in shard %d (%s)", i, ix.names[i], ix.shard_of[i], ix.shards[ix.shard_of[i]]);
    as_st_index_free(&ix);
}
