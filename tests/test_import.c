/* Imports (dumps/import.h, docs/IMPORT.md): what forward hooks save, as safetensors, .npz (stored
 * and deflated) and .npy files, checked against the reference (docs/IMPORT.md's writing block run as
 * written by tests/import_doc_example.py: pass; one element moved: the one mismatch, where it was
 * moved); every tensor of a run through an import and back bit for bit; .npy files in directories,
 * big-endian, batch and merged-head shapes; hostile files (truncated, huge headers, bad zip offsets,
 * duplicates, unknown layers and steps, a FIFO) refused with one line and exit 2. The .npy and zip
 * files of the hostile cases are written here byte by byte. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include <zlib.h>

#include "dumps/dump.h"
#include "dumps/import.h"
#include "model/config.h"
#include "model/npy.h"
#include "tests/lib/cli_util.h"
#include "tests/lib/harness.h"
#include "tests/lib/python.h"

/* ---- files written by hand ------------------------------------------------------------------ */

static void put(const char *path, const void *data, size_t n)
{
    FILE *f = fopen(path, "wb");
    REQUIRE(f && (!n || fwrite(data, 1, n, f) == n) && fclose(f) == 0, "write %s", path);
}

static char *tmp(const char *name)
{
    static char paths[8][700];
    static int next;
    char *p = paths[next++ % 8];
    snprintf(p, sizeof paths[0], "%s/%s", as_test_tmpdir(), name);
    return p;
}

/* An .npy (version 1.0) of header dict `dict` and data: into buf, returns its length. */
static size_t npy_bytes(uint8_t *buf, size_t cap, const char *dict, const void *data, size_t n)
{
    size_t dl = strlen(dict), hl = dl + 1;
    hl += (64 - (10 + hl) % 64) % 64;
    REQUIRE(10 + hl + n <= cap && hl < 65536, "npy of %zu bytes", n);
    memcpy(buf, "\x93NUMPY\x01\x00", 8);
    buf[8] = (uint8_t)(hl & 0xff), buf[9] = (uint8_t)(hl >> 8);
    memset(buf + 10, ' ', hl);
    memcpy(buf + 10, dict, dl);
    buf[10 + hl - 1] = '\n';
    if (n)
        memcpy(buf + 10 + hl, data, n);
    return 10 + hl + n;
}

static void write_npy(const char *path, const char *descr, const char *shape, const void *data, size_t n)
{
    static uint8_t buf[1 << 20];
    char dict[256];
    snprintf(dict, sizeof dict, "{'descr': '%s', 'fortran_order': False, 'shape': %s, }", descr, shape);
    put(path, buf, npy_bytes(buf, sizeof buf, dict, data, n));
}

/* A zip of members (stored, or deflated), as np.savez writes it; the offsets of its records. */
typedef struct {
    const char *name;
    const uint8_t *data;
    size_t n;
    bool deflate;
} Member;

typedef struct {
    size_t len, cd_off, end_off, local[8], central[8];
} ZipAt;

static void le16(uint8_t *p, unsigned v) { p[0] = (uint8_t)v, p[1] = (uint8_t)(v >> 8); }
static void le32(uint8_t *p, uint32_t v) { le16(p, v & 0xffff), le16(p + 2, v >> 16); }

static size_t deflate_raw(const uint8_t *in, size_t n, uint8_t *out, size_t cap)
{
    z_stream zs;
    memset(&zs, 0, sizeof zs);
    REQUIRE(deflateInit2(&zs, 6, Z_DEFLATED, -MAX_WBITS, 8, Z_DEFAULT_STRATEGY) == Z_OK, "deflateInit2");
    zs.next_in = (Bytef *)in, zs.avail_in = (uInt)n, zs.next_out = out, zs.avail_out = (uInt)cap;
    REQUIRE(deflate(&zs, Z_FINISH) == Z_STREAM_END, "deflate");
    size_t got = zs.total_out;
    deflateEnd(&zs);
    return got;
}

static void le64(uint8_t *p, uint64_t v) { le32(p, (uint32_t)v), le32(p + 4, (uint32_t)(v >> 32)); }

/* zip64: every central entry's sizes in its zip64 extra field, and the zip64 end records */
static bool zip64;

static size_t zip_bytes(uint8_t *buf, size_t cap, const Member *m, int n, ZipAt *at)
{
    size_t off = 0;
    uint32_t crc[8];
    size_t csize[8];
    REQUIRE(n <= 8, "members");
    for (int i = 0; i < n; i++) {
        size_t nl = strlen(m[i].name);
        at->local[i] = off;
        uint8_t *h = buf + off;
        REQUIRE(off + 30 + nl + m[i].n + 64 < cap, "zip buffer");
        memset(h, 0, 30);
        le32(h, 0x04034b50), le16(h + 4, 20), le16(h + 8, m[i].deflate ? 8 : 0);
        crc[i] = (uint32_t)crc32(0, m[i].data, (uInt)m[i].n);
        le32(h + 14, crc[i]), le16(h + 26, (unsigned)nl);
        memcpy(h + 30, m[i].name, nl);
        uint8_t *d = h + 30 + nl;
        csize[i] = m[i].deflate ? deflate_raw(m[i].data, m[i].n, d, cap - off - 30 - nl) : m[i].n;
        if (!m[i].deflate)
            memcpy(d, m[i].data, m[i].n);
        le32(h + 18, (uint32_t)csize[i]), le32(h + 22, (uint32_t)m[i].n);
        off += 30 + nl + csize[i];
    }
    at->cd_off = off;
    for (int i = 0; i < n; i++) {
        size_t nl = strlen(m[i].name);
        at->central[i] = off;
        uint8_t *c = buf + off;
        REQUIRE(off + 46 + nl + 22 < cap, "zip buffer");
        memset(c, 0, 46);
        le32(c, 0x02014b50), le16(c + 4, 20), le16(c + 6, 20), le16(c + 10, m[i].deflate ? 8 : 0);
        le32(c + 16, crc[i]), le32(c + 20, (uint32_t)csize[i]), le32(c + 24, (uint32_t)m[i].n);
        le16(c + 28, (unsigned)nl), le32(c + 42, (uint32_t)at->local[i]);
        memcpy(c + 46, m[i].name, nl);
        off += 46 + nl;
        if (zip64) {
            le32(c + 20, 0xFFFFFFFFu), le32(c + 24, 0xFFFFFFFFu), le16(c + 30, 20);
            le16(buf + off, 1), le16(buf + off + 2, 16), le64(buf + off + 4, m[i].n), le64(buf + off + 12, csize[i]);
            off += 20;
        }
    }
    size_t cd_size = off - at->cd_off;
    if (zip64) {
        uint8_t *r = buf + off;
        memset(r, 0, 76);
        le32(r, 0x06064b50), le64(r + 4, 44), le16(r + 12, 45), le16(r + 14, 45);
        le64(r + 24, (uint64_t)n), le64(r + 32, (uint64_t)n), le64(r + 40, cd_size), le64(r + 48, at->cd_off);
        le32(r + 56, 0x07064b50), le64(r + 64, off), le32(r + 72, 1);
        off += 76;
    }
    at->end_off = off;
    uint8_t *e = buf + off;
    memset(e, 0, 22);
    le32(e, 0x06054b50), le16(e + 8, zip64 ? 0xFFFF : (unsigned)n), le16(e + 10, zip64 ? 0xFFFF : (unsigned)n);
    le32(e + 12, zip64 ? 0xFFFFFFFFu : (uint32_t)cd_size), le32(e + 16, zip64 ? 0xFFFFFFFFu : (uint32_t)at->cd_off);
    at->len = off + 22;
    return at->len;
}

/* ---- the tiny geometry's tensors ------------------------------------------------------------ */

static const AsConfig *tiny(void)
{
    static AsConfig cfg;
    AsError err = {0};
    REQUIRE(as_config_preset("tiny", &cfg, &err) == 0 && as_config_validate(&cfg, &err) == 0, "tiny: %s", err.msg);
    return &cfg;
}

/* rows x cols float32 values, element i = seed + i / 8 (bf16 values), and their npy data */
static float *values(int n, float seed)
{
    float *v = malloc(sizeof *v * (size_t)n);
    REQUIRE(v, "values");
    for (int i = 0; i < n; i++)
        v[i] = seed + (float)(i % 64) / 8.0f;
    return v;
}

static int import_paths(const char *const *paths, int n, AsImport **imp, AsError *err)
{
    AsImportOptions o = {tiny(), NULL};
    memset(err, 0, sizeof *err);
    return as_import_open(paths, n, &o, imp, err);
}

/* A lone path imported: its status, the message in err. */
static int import_one(const char *path, AsError *err)
{
    AsImport *imp = NULL;
    const char *paths[1] = {path};
    int rc = import_paths(paths, 1, &imp, err);
    as_import_free(imp);
    return rc;
}

static void write_meta(const char *path, const char *json) { put(path, json, strlen(json)); }

TEST(import_npy_files_named_by_their_paths)
{
    const AsConfig *c = tiny();
    char dir[600], sub[700];
    snprintf(dir, sizeof dir, "%s/hooks", as_test_tmpdir());
    snprintf(sub, sizeof sub, "%s/step0", dir);
    REQUIRE(mkdir(dir, 0755) == 0 && mkdir(sub, 0755) == 0, "mkdir");
    snprintf(sub, sizeof sub, "%s/step0/layer3", dir);
    REQUIRE(mkdir(sub, 0755) == 0, "mkdir");
    int s = 5, dim = c->dim, qn = s * c->n_heads * c->head_dim;
    float *x = values(s * dim, 1.0f), *q = values(qn, -2.0f);
    char p[800], shape[64];
    /* x below step0/layer3/, with a batch dimension of 1; q flat by name, its heads merged, big-endian */
    snprintf(p, sizeof p, "%s/x.npy", sub);
    snprintf(shape, sizeof shape, "(1, %d, %d)", s, dim);
    write_npy(p, "<f4", shape, x, sizeof *x * (size_t)(s * dim));
    uint32_t *be = malloc(sizeof *be * (size_t)qn);
    REQUIRE(be, "be");
    for (int i = 0; i < qn; i++) {
        uint32_t u;
        memcpy(&u, &q[i], 4);
        be[i] = __builtin_bswap32(u);
    }
    snprintf(p, sizeof p, "%s/step0_layer3_q.npy", dir);
    snprintf(shape, sizeof shape, "(%d, %d)", s, c->n_heads * c->head_dim);
    write_npy(p, ">f4", shape, be, sizeof *be * (size_t)qn);
    /* idx as int64 with -1 for nothing, as wide as SPEC 3 makes it; the README beside them is passed over */
    AsRun rule;
    as_run_init(&rule);
    as_dump_rule_attrs(c, 3, 0, s, &rule);
    int topk = rule.topk;
    int64_t idx[5 * 64];
    REQUIRE(topk <= 64, "topk %d", topk);
    for (int i = 0; i < s * topk; i++)
        idx[i] = i % topk <= i / topk ? i % topk : -1;
    snprintf(p, sizeof p, "%s/step0.layer3.idx.npy", dir);
    snprintf(shape, sizeof shape, "(%d, %d)", s, topk);
    write_npy(p, "<i8", shape, idx, sizeof *idx * (size_t)(s * topk));
    snprintf(p, sizeof p, "%s/README", dir);
    write_meta(p, "hooks of a test\n");
    snprintf(p, sizeof p, "%s/meta.json", dir);
    write_meta(p, "{\"step0/start_pos\": 0, \"step0.tokens\": 5, \"side\": \"mine\", \"precision\": \"bf16\"}");

    AsImport *imp;
    AsError err;
    const char *paths[1] = {dir};
    REQUIRE(import_paths(paths, 1, &imp, &err) == 0, "import of the directory: %s", err.msg);
    AsDumpInfo info;
    REQUIRE(as_import_info(imp, &info, &err) == 0, "info: %s", err.msg);
    CHECK(info.n_steps == 1 && info.steps[0].tokens == 5 && info.steps[0].n_layers == 1 &&
              info.steps[0].layers[0].layer == 3 && !strcmp(info.steps[0].layers[0].side[0].name, "mine") &&
              info.steps[0].layers[0].side[0].tensors ==
                  (AS_DUMP_TENSOR_BIT(AS_T_X) | AS_DUMP_TENSOR_BIT(AS_T_Q) | AS_DUMP_TENSOR_BIT(AS_T_IDX)) &&
              info.precision && !strcmp(info.precision, "bf16"),
          "the index: %d steps, layer %d, side %s, precision %s", info.n_steps, info.steps[0].layers[0].layer,
          info.steps[0].layers[0].side[0].name, info.precision ? info.precision : "none");
    AsRun run;
    as_run_init(&run);
    REQUIRE(as_import_read_run(imp, 0, 3, &run, &err) == 0, "read: %s", err.msg);
    CHECK(run.t[AS_T_X].ndim == 2 && run.t[AS_T_X].shape[0] == s && !memcmp(run.t[AS_T_X].data, x, sizeof *x * (size_t)(s * dim)),
          "x read back as written, the batch dimension dropped");
    CHECK(run.t[AS_T_Q].ndim == 3 && run.t[AS_T_Q].shape[1] == c->n_heads &&
              !memcmp(run.t[AS_T_Q].data, q, sizeof *q * (size_t)qn),
          "q read back from big-endian, heads split back");
    const int32_t *ri = run.t[AS_T_IDX].data;
    bool same = ri != NULL;
    for (int i = 0; same && i < s * topk; i++)
        same = ri[i] == idx[i];
    CHECK(same, "idx read back from int64 with its -1s");
    as_run_free(&run);
    /* each tensor's data is only read when its layer is: a layer not stored is refused */
    CHECK(as_import_read_run(imp, 0, 4, &run, &err) == 0 && !run.t[AS_T_X].data, "a layer without tensors reads empty");
    as_run_free(&run);
    free(info.path), free(info.config_json), free(info.weights_name), free(info.weights_digest), free(info.version);
    free(info.mode), free(info.created), free(info.precision), free(info.steps[0].layers), free(info.steps);
    as_import_free(imp);
    free(x), free(q), free(be);
}

TEST(import_input_kinds_found_from_the_inputs)
{
    float v[4] = {0};
    write_npy(tmp("a.npy"), "<f4", "(4,)", v, sizeof v);
    write_npy(tmp("no_extension"), "<f4", "(4,)", v, sizeof v);
    uint8_t zip[4096];
    Member m = {"step0/h0.npy", zip, 0, false};
    ZipAt at;
    size_t n = zip_bytes(zip, sizeof zip, &m, 1, &at);
    put(tmp("zipped"), zip, n);
    put(tmp("st_by_magic"), "\x02\0\0\0\0\0\0\0{}", 10);
    CHECK(as_input_kind(as_test_tmpdir()) == AS_INPUT_DIR, "a directory");
    CHECK(as_input_kind(tmp("a.npy")) == AS_INPUT_NPY, ".npy by name");
    CHECK(as_input_kind(tmp("no_extension")) == AS_INPUT_NPY, ".npy by its magic");
    CHECK(as_input_kind(tmp("zipped")) == AS_INPUT_NPZ, ".npz by its zip record");
    CHECK(as_input_kind(tmp("st_by_magic")) == AS_INPUT_SAFETENSORS, "safetensors by its header length and '{'");
    CHECK(as_input_kind(tmp("x.h5")) == AS_INPUT_HDF5 && as_input_kind(tmp("missing.npy")) == AS_INPUT_HDF5,
          "a missing file goes to the dump reader, which says so");
}

/* ---- hostile inputs: one line, exit 2 ------------------------------------------------------- */

/* A status and a message that names the problem, on one printable line. */
static void refused(const char *what, int rc, const AsError *err, const char *needle)
{
    CHECK(rc == AS_EBADINPUT && strstr(err->msg, needle) && !strchr(err->msg, '\n'),
          "%s: exit %d, '%s' (want 2 and '%s')", what, rc, err->msg, needle);
    if (!as_test_failed())
        as_test_note("%s: %s", what, err->msg);
}

TEST(import_hostile_npy_refused)
{
    static uint8_t buf[1 << 16];
    float x[5 * 64];
    memset(x, 0, sizeof x);
    AsError err;
    const char *meta = "{\"step0/start_pos\": 0, \"step0/tokens\": 5}";
    write_meta(tmp("meta.json"), meta);
    const struct {
        const char *what, *dict;
        size_t data;
        const char *needle;
    } cases[] = {
        {"truncated data", "{'descr': '<f4', 'fortran_order': False, 'shape': (5, 64), }", sizeof x - 4,
         "needs 1280 bytes of data, the file holds 1276"},
        {"data past the shape", "{'descr': '<f4', 'fortran_order': False, 'shape': (5, 63), }", sizeof x,
         "needs 1260 bytes of data, the file holds 1280"},
        {"huge shape", "{'descr': '<f4', 'fortran_order': False, 'shape': (1099511627776, 1099511627776), }", 0,
         "more than 2^60 elements"},
        {"nine dimensions", "{'descr': '<f4', 'fortran_order': False, 'shape': (1,1,1,1,1,1,1,1,1), }", 4,
         "more than 8 dimensions"},
        {"fortran order", "{'descr': '<f4', 'fortran_order': True, 'shape': (5, 64), }", sizeof x,
         "fortran_order is True"},
        {"object dtype", "{'descr': '|O', 'fortran_order': False, 'shape': (5, 64), }", sizeof x, "dtype '|O'"},
        {"structured dtype", "{'descr': [('a', '<f4')], 'fortran_order': False, 'shape': (5, 64), }", sizeof x,
         "a structured dtype"},
        {"unknown key", "{'descr': '<f4', 'fortran_order': False, 'shape': (5, 64), 'extra': 1, }", sizeof x,
         "unknown key 'extra'"},
        {"key twice", "{'descr': '<f4', 'descr': '<f4', 'fortran_order': False, 'shape': (5, 64), }", sizeof x,
         "key 'descr' appears twice"},
        {"beyond the config", "{'descr': '<f4', 'fortran_order': False, 'shape': (5, 65), }", 5 * 65 * 4,
         "shape [5, 65], the schema says [5, 64]"},
        {"index tensor as floats", "{'descr': '<f4', 'fortran_order': False, 'shape': (5, 64), }", sizeof x,
         "float32, the schema says indices"},
    };
    static float big[5 * 65];
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        const char *name = strstr(cases[i].what, "index") ? "step0.layer3.idx.npy" : "step0.layer3.x.npy";
        size_t n = npy_bytes(buf, sizeof buf, cases[i].dict, big, cases[i].data);
        put(tmp(name), buf, n);
        const char *paths[2] = {tmp(name), tmp("meta.json")};
        AsImport *imp = NULL;
        int rc = import_paths(paths, 2, &imp, &err);
        as_import_free(imp);
        refused(cases[i].what, rc, &err, cases[i].needle);
        unlink(tmp(name));
    }
    /* a header length past the file, and one beyond 64 KiB */
    memcpy(buf, "\x93NUMPY\x01\x00\xff\x00{", 11);
    put(tmp("step0.layer3.x.npy"), buf, 11);
    refused("header past the end", import_one(tmp("step0.layer3.x.npy"), &err), &err, "runs past the end");
    memcpy(buf, "\x93NUMPY\x02\x00\x00\x00\x10\x00{", 13);
    put(tmp("step0.layer3.x.npy"), buf, 13);
    refused("header of 1 MiB", import_one(tmp("step0.layer3.x.npy"), &err), &err, "at most 65536");
    put(tmp("step0.layer3.x.npy"), "\x93NUMPY\x01\x00", 8);
    refused("truncated preamble", import_one(tmp("step0.layer3.x.npy"), &err), &err, "too short");
}

/* A stored npz of one x for layer 3 and one for layer 4, to be damaged. */
static size_t two_member_zip(uint8_t *zip, size_t cap, ZipAt *at, bool deflate, uint8_t *npy, size_t npy_cap)
{
    static float x[5 * 64];
    for (int i = 0; i < 5 * 64; i++)
        x[i] = (float)(i % 7);
    size_t n = npy_bytes(npy, npy_cap, "{'descr': '<f4', 'fortran_order': False, 'shape': (5, 64), }", x, sizeof x);
    Member m[2] = {{"step0/layer3/x.npy", npy, n, deflate}, {"step0/layer4/x.npy", npy, n, deflate}};
    return zip_bytes(zip, cap, m, 2, at);
}

static int import_zip(const uint8_t *zip, size_t n, AsError *err, bool read_data)
{
    put(tmp("hooks.npz"), zip, n);
    write_meta(tmp("meta.json"), "{\"step0/start_pos\": 0, \"step0/tokens\": 5}");
    const char *paths[2] = {tmp("hooks.npz"), tmp("meta.json")};
    AsImport *imp = NULL;
    int rc = import_paths(paths, 2, &imp, err);
    AsRun run;
    as_run_init(&run);
    for (int l = 3; !rc && read_data && l <= 4; l++)
        rc = as_import_read_run(imp, 0, l, &run, err);
    as_run_free(&run);
    as_import_free(imp);
    return rc;
}

TEST(import_hostile_npz_refused)
{
    static uint8_t zip[1 << 16], npy[1 << 14], bad[1 << 16];
    ZipAt at;
    AsError err;
    for (int d = 0; d < 4; d++) {
        zip64 = d >= 2;
        size_t n = two_member_zip(zip, sizeof zip, &at, d % 2, npy, sizeof npy);
        CHECK(import_zip(zip, n, &err, true) == 0, "the intact %s%s zip imports: %s", d % 2 ? "deflated" : "stored",
              zip64 ? " zip64" : "", err.msg);
    }
    /* zip64 records that lie: the locator's offset, an entry's extra field cut short */
    size_t n64 = two_member_zip(zip, sizeof zip, &at, false, npy, sizeof npy);
    memcpy(bad, zip, n64);
    le64(bad + at.end_off - 20 + 8, n64);
    refused("a zip64 locator past the end", import_zip(bad, n64, &err, false), &err, "zip64 end record at offset");
    memcpy(bad, zip, n64);
    le16(bad + at.central[0] + 46 + 18 + 2, 8);
    refused("a zip64 extra field cut short", import_zip(bad, n64, &err, false), &err, "zip64 extra field too short");
    zip64 = false;
    size_t n = two_member_zip(zip, sizeof zip, &at, false, npy, sizeof npy);
    const struct {
        const char *what;
        size_t at, at2;  /* offsets of the field changed (at2: a second one, 0 for none) */
        int bytes;       /* 2 or 4 */
        uint32_t value;
        const char *needle;
    } cases[] = {
        {"central directory past the end", at.end_off + 16, 0, 4, (uint32_t)n + 100, "central directory"},
        {"central directory size past its end", at.end_off + 12, 0, 4, 100000, "central directory"},
        {"member count beyond the directory", at.end_off + 10, at.end_off + 8, 2, 60000,
         "members in a central directory"},
        {"local header offset in the directory", at.central[1] + 42, 0, 4, (uint32_t)at.cd_off + 2,
         "local header offset"},
        {"local header offset at the other member", at.central[1] + 42, 0, 4, (uint32_t)at.local[0],
         "no local header of that name"},
        {"local header offset into the data", at.central[1] + 42, 0, 4, (uint32_t)at.local[0] + 60,
         "no local header of that name"},
        {"compressed size into the directory", at.central[1] + 20, 0, 4, 1u << 20, "run into the central directory"},
        {"stored sizes that differ", at.central[0] + 24, 0, 4, 100, "stored with"},
        {"encrypted", at.central[0] + 8, 0, 2, 1, "encrypted"},
        {"bzip2", at.central[0] + 10, 0, 2, 12, "compression method 12"},
        {"several disks", at.end_off + 4, 0, 2, 1, "several disks"},
        {"a name that is not .npy", at.central[0] + 46 + 15, 0, 2, 'x' | 'z' << 8, "is not an .npy array"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        memcpy(bad, zip, n);
        for (int k = 0; k < 2; k++) {
            size_t off = k ? cases[i].at2 : cases[i].at;
            if (off && cases[i].bytes == 2)
                le16(bad + off, cases[i].value);
            else if (off)
                le32(bad + off, cases[i].value);
        }
        refused(cases[i].what, import_zip(bad, n, &err, false), &err, cases[i].needle);
    }
    /* two entries for one member: the same bytes claimed twice */
    memcpy(bad, zip, n);
    memcpy(bad + at.central[1] + 46, "step0/layer3/x.npy", 18);
    le32(bad + at.central[1] + 42, (uint32_t)at.local[0]);
    refused("one member's bytes under two entries", import_zip(bad, n, &err, false), &err, "overlap");
    /* the same name twice: the second member renamed in both its headers */
    memcpy(bad, zip, n);
    memcpy(bad + at.central[1] + 46, "step0/layer3/x.npy", 18);
    memcpy(bad + at.local[1] + 30, "step0/layer3/x.npy", 18);
    refused("a member twice", import_zip(bad, n, &err, false), &err, "appears twice");
    /* no end record: truncated */
    refused("truncated archive", import_zip(zip, n - 30, &err, false), &err, "no zip end record");
    /* a data byte changed: the CRC, found when the layer is read */
    memcpy(bad, zip, n);
    bad[at.local[0] + 30 + 18 + 200] ^= 1;
    refused("a flipped data byte", import_zip(bad, n, &err, true), &err, "CRC-32 differs");
    /* deflated: damaged stream, and a stated size deflate cannot reach from its bytes */
    n = two_member_zip(zip, sizeof zip, &at, true, npy, sizeof npy);
    memcpy(bad, zip, n);
    for (size_t k = at.local[0] + 30 + 18 + 8; k < at.central[0] - 40 && k < at.local[1] - 4; k++)
        bad[k] = 0xff;
    refused("a damaged deflate stream", import_zip(bad, n, &err, true), &err, "deflate stream");
    memcpy(bad, zip, n);
    le32(bad + at.central[0] + 24, 0x7fffffff);
    refused("a deflate bomb's stated size", import_zip(bad, n, &err, false), &err, "cannot hold");
}

/* One safetensors file by hand: header JSON (data_offsets for one tensor of n bytes) and zero data. */
static void write_st(const char *path, const char *header, size_t data)
{
    static uint8_t buf[1 << 16];
    size_t hl = strlen(header);
    uint64_t len = hl;
    memcpy(buf, &len, 8);
    memcpy(buf + 8, header, hl);
    memset(buf + 8 + hl, 0, data);
    put(path, buf, 8 + hl + data);
}

TEST(import_hostile_names_and_metadata_refused)
{
    float x[5 * 64];
    memset(x, 0, sizeof x);
    AsError err;
    const char *meta5 = "{\"step0/start_pos\": 0, \"step0/tokens\": 5}";
    const struct {
        const char *what, *file, *meta, *needle;
    } cases[] = {
        {"a layer outside the model", "step0.layer99.x.npy", meta5, "layer 99 is outside the model's 10 layers"},
        {"a step without metadata", "step7.layer3.x.npy", meta5, "step 7: no step7/start_pos in the metadata"},
        {"a tensor the format does not have", "step0.layer3.qq.npy", meta5, "'qq' is not a tensor of the dump format"},
        {"a name off the scheme", "hidden_states.npy", meta5, "is not named step{S}/layer{L}/{tensor}"},
        {"metadata as a tensor", "step0.tokens.npy", meta5, "tokens is metadata, not a tensor"},
        {"an unknown metadata key", "step0.layer3.x.npy", "{\"step0/start_pos\": 0, \"step0/tokens\": 5, \"k\": 1}",
         "metadata key 'k'"},
        {"a bad kind", "step0.layer3.x.npy", "{\"step0/start_pos\": 0, \"step0/tokens\": 5, \"step0/kind\": \"chunk\"}",
         "(prefill or decode)"},
        {"tokens not a number", "step0.layer3.x.npy", "{\"step0/start_pos\": 0, \"step0/tokens\": \"five\"}",
         "is not a whole number"},
        {"a side name with a slash", "step0.layer3.x.npy",
         "{\"step0/start_pos\": 0, \"step0/tokens\": 5, \"side\": \"a/b\"}", "side name 'a/b'"},
        {"a key twice in the JSON", "step0.layer3.x.npy", "{\"step0/start_pos\": 0, \"step0/start_pos\": 0}",
         "appears twice"},
        {"a writer with an escape sequence", "step0.layer3.x.npy",
         "{\"step0/start_pos\": 0, \"step0/tokens\": 5, \"writer\": \"\\u001b[2J\"}", "writer is not printable ASCII"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        write_npy(tmp(cases[i].file), "<f4", "(5, 64)", x, sizeof x);
        write_meta(tmp("meta.json"), cases[i].meta);
        const char *paths[2] = {tmp(cases[i].file), tmp("meta.json")};
        AsImport *imp = NULL;
        int rc = import_paths(paths, 2, &imp, &err);
        as_import_free(imp);
        refused(cases[i].what, rc, &err, cases[i].needle);
        unlink(tmp(cases[i].file));
    }
    /* the same tensor in two files; metadata that disagrees between two files */
    write_npy(tmp("step0.layer3.x.npy"), "<f4", "(5, 64)", x, sizeof x);
    write_st(tmp("more.safetensors"),
             "{\"__metadata__\": {\"step0/start_pos\": \"0\", \"step0/tokens\": \"5\"}, \"step0/layer3/x\": "
             "{\"dtype\": \"F32\", \"shape\": [5, 64], \"data_offsets\": [0, 1280]}}", 1280);
    write_meta(tmp("meta.json"), meta5);
    const char *two[3] = {tmp("step0.layer3.x.npy"), tmp("more.safetensors"), tmp("meta.json")};
    AsImport *imp = NULL;
    int rc = import_paths(two, 3, &imp, &err);
    as_import_free(imp);
    refused("a tensor in two files", rc, &err, "step 0 layer 3 x twice");
    write_meta(tmp("meta.json"), "{\"step0/start_pos\": 0, \"step0/tokens\": 6}");
    imp = NULL;
    rc = import_paths(two + 1, 2, &imp, &err);
    as_import_free(imp);
    refused("metadata that disagrees", rc, &err, "metadata 'step0/tokens' is '5'");
    /* safetensors: a dtype import does not read; an index beyond int32 (found when read) */
    write_st(tmp("fp8.safetensors"),
             "{\"__metadata__\": {\"step0/start_pos\": \"0\", \"step0/tokens\": \"5\"}, \"step0/layer3/x\": "
             "{\"dtype\": \"F8_E4M3\", \"shape\": [5, 64], \"data_offsets\": [0, 320]}}", 320);
    refused("an fp8 tensor", import_one(tmp("fp8.safetensors"), &err), &err, "dtype F8_E4M3");
    int64_t idx[5 * 5];
    for (int i = 0; i < 25; i++)
        idx[i] = i == 7 ? (int64_t)1 << 40 : 0;
    write_npy(tmp("step0.layer0.idx.npy"), "<i8", "(5, 5)", idx, sizeof idx);
    write_meta(tmp("meta.json"), meta5);
    const char *ix[2] = {tmp("step0.layer0.idx.npy"), tmp("meta.json")};
    imp = NULL;
    rc = import_paths(ix, 2, &imp, &err);
    AsRun run;
    as_run_init(&run);
    if (!rc)
        rc = as_import_read_run(imp, 0, 0, &run, &err);
    as_run_free(&run);
    as_import_free(imp);
    refused("an index beyond int32", rc, &err, "element 7 is 1099511627776, beyond int32");
    /* h0 per step that does not follow on */
    float h[64];
    memset(h, 0, sizeof h);
    write_npy(tmp("step1.h0.npy"), "<f4", "(1, 64)", h, sizeof h);
    write_npy(tmp("step0.h0.npy"), "<f4", "(5, 64)", x, sizeof x);
    write_meta(tmp("meta.json"), "{\"step0/start_pos\": 0, \"step0/tokens\": 5, \"step1/start_pos\": 7, "
                                 "\"step1/tokens\": 1}");
    const char *h0s[3] = {tmp("step0.h0.npy"), tmp("step1.h0.npy"), tmp("meta.json")};
    imp = NULL;
    rc = import_paths(h0s, 3, &imp, &err);
    as_import_free(imp);
    refused("h0 with a gap", rc, &err, "the steps' h0 must follow one another");
}

/* ---- through the binary --------------------------------------------------------------------- */

static double now_s(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

/* One line on stderr, nothing after it. */
static bool one_line(const char *s)
{
    const char *nl = strchr(s, '\n');
    return nl && nl[1] == '\0' && nl > s;
}

TEST(import_cli_refusals_are_one_line)
{
    setenv("ATTNSCOPE_CACHE", as_test_tmpdir(), 1);
    AsCliResult *r = malloc(sizeof *r);
    REQUIRE(r, "alloc");
    float x[5 * 64];
    memset(x, 0, sizeof x);
    write_npy(tmp("step0.layer99.x.npy"), "<f4", "(5, 64)", x, sizeof x);
    write_meta(tmp("meta.json"), "{\"step0/start_pos\": 0, \"step0/tokens\": 5}");
    as_cli_run(r, AS_ARGS("check", "tiny", tmp("step0.layer99.x.npy"), tmp("meta.json"), "-q"));
    CHECK(r->status == 2 && one_line(r->err) && strstr(r->err, "layer 99 is outside"), "check of layer 99: exit %d %s",
          r->status, r->err);
    as_cli_run(r, AS_ARGS("import", "tiny", tmp("step0.layer99.x.npy"), tmp("meta.json"), "-o", tmp("out.h5")));
    CHECK(r->status == 2 && one_line(r->err) && access(tmp("out.h5"), F_OK) != 0,
          "import of layer 99: exit %d, no output: %s", r->status, r->err);
    as_cli_run(r, AS_ARGS("check", tmp("meta.json"), "-q"));
    CHECK(r->status == 2 && one_line(r->err) && strstr(r->err, "carry no geometry"), "no model: exit %d %s", r->status,
          r->err);
    as_cli_run(r, AS_ARGS("import", "tiny", tmp("meta.json")));
    CHECK(r->status == 2 && strstr(r->err, "-o OUT.h5"), "import without -o: exit %d %s", r->status, r->err);
    as_cli_run(r, AS_ARGS("import", "tiny", tmp("meta.json"), "-o", as_test_tmpdir()));
    CHECK(r->status == 2 && one_line(r->err) && strstr(r->err, "is a directory"), "import into a directory: exit %d %s",
          r->status, r->err);
    /* a FIFO named as an input, or found in a directory: refused at once, never opened for reading */
    char dir[700];
    snprintf(dir, sizeof dir, "%s/withfifo", as_test_tmpdir());
    REQUIRE(mkdir(dir, 0755) == 0, "mkdir");
    char fifo[800];
    snprintf(fifo, sizeof fifo, "%s/step0.layer3.x.npy", dir);
    REQUIRE(mkfifo(fifo, 0644) == 0, "mkfifo: %s", strerror(errno));
    double t0 = now_s();
    as_cli_run(r, AS_ARGS("check", "tiny", fifo, "-q"));
    CHECK(r->status == 2 && one_line(r->err) && strstr(r->err, "not a regular file"), "a FIFO input: exit %d %s",
          r->status, r->err);
    as_cli_run(r, AS_ARGS("check", "tiny", dir, "-q"));
    CHECK(r->status == 2 && one_line(r->err) && strstr(r->err, "not a regular file (a FIFO)"),
          "a FIFO in a directory: exit %d %s", r->status, r->err);
    CHECK(now_s() - t0 < 60, "FIFOs refused without waiting (%.1f s)", now_s() - t0);
    /* a torch pickle in a directory is refused, not passed over */
    unlink(fifo);
    snprintf(fifo, sizeof fifo, "%s/step0.pt", dir);
    put(fifo, "PK", 2);
    as_cli_run(r, AS_ARGS("check", "tiny", dir, "-q"));
    CHECK(r->status == 2 && strstr(r->err, "torch or pickle file"), "a .pt file: exit %d %s", r->status, r->err);
    free(r);
}

/* ---- the documented example, run as written ------------------------------------------------- */

/* tests/import_doc_example.py with args, in OUTDIR (created); exit status 0 required. */
static void run_example(const char *src, const char *outdir, const char *extra)
{
    if (access("tests/import_doc_example.py", R_OK) || access("docs/IMPORT.md", R_OK))
        as_test_skip("tests/import_doc_example.py or docs/IMPORT.md not found: run from the repository root");
    mkdir(outdir, 0755);
    char cmd[3000], log[700];
    snprintf(log, sizeof log, "%s/py.log", as_test_tmpdir());
    snprintf(cmd, sizeof cmd, "'%s' tests/import_doc_example.py docs/IMPORT.md '%s' '%s' %s >'%s' 2>&1",
             as_test_python(), src, outdir, extra, log);
    fflush(NULL);
    int st = system(cmd);
    char *out = as_slurp(log, NULL);
    REQUIRE(WIFEXITED(st) && WEXITSTATUS(st) == 0 && out && strstr(out, "ran the example"), "the example: %s",
            out ? out : "(no output)");
    as_test_note("%.*s", (int)strcspn(out, "\n"), out);
    free(out);
}

static void note_summary(const char *what, const char *out)
{
    as_test_note("%s:", what);
    for (const char *p = out; p && *p;) {
        const char *e = strchr(p, '\n');
        int len = e ? (int)(e - p) : (int)strlen(p);
        const char *hit = strstr(p, "layer runs:"), *bad = strstr(p, "MISMATCH step");
        if ((hit && hit - p < len) || (bad && bad - p < len))
            as_test_note("  %.*s", len, p);
        p = e ? e + 1 : NULL;
    }
}

TEST(import_doc_example_safetensors_and_npz_check_clean)
{
    as_test_python();
    char src[600], out[700], sub[700], h5[800];
    as_test_faithful_dump(src, sizeof src);
    snprintf(out, sizeof out, "%s/hooks", as_test_tmpdir());
    run_example(src, out, "");
    AsCliResult *r = malloc(sizeof *r);
    char npz[800], json[800], st[800];
    snprintf(npz, sizeof npz, "%s/mine.npz", out);
    snprintf(json, sizeof json, "%s/mine.json", out);
    snprintf(st, sizeof st, "%s/mine.safetensors", out);
    as_cli_run(r, AS_ARGS("check", "tiny", npz, json));
    note_summary("check tiny mine.npz mine.json", r->out);
    CHECK(r->status == 0 && strstr(r->out, "40 layer runs: 40 pass") && strstr(r->out, "compared: x q idx o out") &&
              strstr(r->err, "no weights_digest"),
          "the npz checks clean: exit %d\n%s%s", r->status, r->out, r->err);
    as_cli_run(r, AS_ARGS("check", "tiny", st));
    note_summary("check tiny mine.safetensors", r->out);
    CHECK(r->status == 0 && strstr(r->out, "40 layer runs: 40 pass") && strstr(r->out, "compared: x q idx o out"),
          "the safetensors checks clean: exit %d\n%s%s", r->status, r->out, r->err);
    /* the directory holds both: the same tensors twice is refused; the npz and its JSON alone pass */
    as_cli_run(r, AS_ARGS("check", out, "--model", "tiny", "-q"));
    CHECK(r->status == 2 && strstr(r->err, "twice"), "both files of the example: exit %d %s", r->status, r->err);
    snprintf(sub, sizeof sub, "%s/npz_only", as_test_tmpdir());
    REQUIRE(mkdir(sub, 0755) == 0, "mkdir");
    char a[900], b[900];
    snprintf(a, sizeof a, "%s/mine.npz", sub);
    snprintf(b, sizeof b, "%s/mine.json", sub);
    REQUIRE(link(npz, a) == 0 && link(json, b) == 0, "link");
    as_cli_run(r, AS_ARGS("check", "--model", "tiny", sub, "-q"));
    CHECK(r->status == 0 && strstr(r->out, "40 pass"), "the directory of the npz: exit %d\n%s%s", r->status, r->out,
          r->err);
    /* import writes a dump that check passes and dump-info reads */
    snprintf(h5, sizeof h5, "%s/imported.h5", as_test_tmpdir());
    as_cli_run(r, AS_ARGS("import", "tiny", st, "-o", h5));
    CHECK(r->status == 0 && strstr(r->out, "4 steps, 40 layer runs, 200 tensors (side import)"),
          "import: exit %d\n%s%s", r->status, r->out, r->err);
    as_cli_run(r, AS_ARGS("check", h5, "--model", "tiny", "-q"));
    CHECK(r->status == 0 && strstr(r->out, "40 pass"), "check of the imported dump: exit %d\n%s%s", r->status, r->out,
          r->err);
    as_cli_run(r, AS_ARGS("check", "tiny", h5, "-q")); /* MODEL DUMP: an HDF5 dump with the model first */
    CHECK(r->status == 0 && strstr(r->out, "40 pass"), "check tiny imported.h5: exit %d\n%s%s", r->status, r->out,
          r->err);
    as_cli_run(r, AS_ARGS("dump-info", h5));
    CHECK(r->status == 0 && strstr(r->out, "inputs     h0: 12 tokens from position 0") &&
              strstr(r->out, "import   5 tensors: x q idx o out"),
          "dump-info of the imported dump: exit %d\n%s%s", r->status, r->out, r->err);
    free(r);
}

TEST(import_planted_element_is_the_one_mismatch)
{
    as_test_python();
    char src[600], out[700];
    as_test_faithful_dump(src, sizeof src);
    snprintf(out, sizeof out, "%s/moved", as_test_tmpdir());
    /* o of step 2, layer 5: token 0, head 2, channel 7 (o is [1][4][64]) */
    run_example(src, out, "--move 2 5 o 135 0.5 --compressed");
    AsCliResult *r = malloc(sizeof *r);
    const char *files[2] = {"mine.safetensors", "compressed.npz"};
    for (int i = 0; i < 2; i++) {
        char p[800], json[800];
        snprintf(p, sizeof p, "%s/%s", out, files[i]);
        snprintf(json, sizeof json, "%s/mine.json", out);
        if (i == 0)
            as_cli_run(r, AS_ARGS("check", "tiny", p, "-q"));
        else
            as_cli_run(r, AS_ARGS("check", "tiny", p, json, "-q"));
        note_summary(files[i], r->out);
        CHECK(r->status == 1 && strstr(r->out, "39 pass, 0 with quantisation flips, 0 near-ties, 0 tie-order, 0 "
                                               "inherited, 1 mismatches") &&
                  strstr(r->out, "MISMATCH step 2 (decode, pos 10) layer 5: o: max |diff|") &&
                  strstr(r->out, "at token 0, head 2, channel 7"),
              "%s: the moved element is the one mismatch: exit %d\n%s%s", files[i], r->status, r->out, r->err);
    }
    free(r);
}

/* Every tensor of every layer and step of a dump, through the example's files and an import, read
 * back bit for bit equal (bf16 values through BF16 and float32, indices through int64, the mask). */
TEST(import_every_tensor_round_trips)
{
    as_test_python();
    char src[600], out[700], h5[800], st[800];
    as_test_faithful_dump(src, sizeof src);
    snprintf(out, sizeof out, "%s/all", as_test_tmpdir());
    char names[1200] = "--compressed --tensors ";
    for (int i = 0; i < AS_T_COUNT; i++)
        snprintf(names + strlen(names), sizeof names - strlen(names), "%s%s", i ? "," : "", as_tensor_desc[i].name);
    run_example(src, out, names);
    const char *inputs[2][2] = {{"mine.safetensors", NULL}, {"compressed.npz", "mine.json"}};
    AsCliResult *r = malloc(sizeof *r);
    for (int v = 0; v < 2; v++) {
        char a[800], b[800];
        snprintf(a, sizeof a, "%s/%s", out, inputs[v][0]);
        snprintf(b, sizeof b, "%s/%s", out, inputs[v][1] ? inputs[v][1] : inputs[v][0]);
        snprintf(h5, sizeof h5, "%s/round%d.h5", as_test_tmpdir(), v);
        if (inputs[v][1])
            as_cli_run(r, AS_ARGS("import", "tiny", a, b, "-o", h5, "-q"));
        else
            as_cli_run(r, AS_ARGS("import", "--model", "tiny", a, "-o", h5, "-q"));
        REQUIRE(r->status == 0, "import %s: exit %d %s", a, r->status, r->err);
        AsDumpReader *x, *y;
        AsError err;
        REQUIRE(as_dump_open(src, &x, &err) == 0 && as_dump_open(h5, &y, &err) == 0, "open: %s", err.msg);
        const AsDumpInfo *ix = as_dump_info(x);
        AsRun ra, rb;
        as_run_init(&ra), as_run_init(&rb);
        int compared = 0, differ = 0;
        for (int s = 0; s < ix->n_steps; s++)
            for (int l = 0; l < ix->steps[s].n_layers; l++) {
                int step = ix->steps[s].step, layer = ix->steps[s].layers[l].layer;
                REQUIRE(as_dump_read_run(x, step, layer, "engine", &ra, &err) == 0 &&
                            as_dump_read_run(y, step, layer, "import", &rb, &err) == 0,
                        "read step %d layer %d: %s", step, layer, err.msg);
                for (int t = 0; t < AS_T_COUNT; t++) {
                    const AsHostTensor *p = &ra.t[t], *q = &rb.t[t];
                    if (!p->data)
                        continue;
                    int64_t n = as_ht_numel(p);
                    size_t bytes = (size_t)n * (p->type == AS_VT_U8 ? 1 : 4);
                    bool same = q->data && as_ht_numel(q) == n && p->ndim == q->ndim && (!n || !memcmp(p->data, q->data, bytes));
                    if (!same && differ++ < 3)
                        as_test_note("step %d layer %d %s differs", step, layer, as_tensor_desc[t].name);
                    compared++;
                }
            }
        as_run_free(&ra), as_run_free(&rb);
        float *h0a, *h0b;
        int ta, tb, fa, fb;
        REQUIRE(as_dump_read_inputs(x, &h0a, &ta, &fa, &err) == 0 && as_dump_read_inputs(y, &h0b, &tb, &fb, &err) == 0,
                "inputs: %s", err.msg);
        CHECK(ta == tb && fa == fb && !memcmp(h0a, h0b, sizeof *h0a * (size_t)ta * 64), "h0 round trips");
        free(h0a), free(h0b);
        as_dump_close(x), as_dump_close(y);
        CHECK(differ == 0 && compared > 500, "%s: %d tensors compared, %d differ", inputs[v][0], compared, differ);
        if (!differ)
            as_test_note("%s: %d tensors read back bit for bit", inputs[v][0], compared);
    }
    snprintf(st, sizeof st, "%s/compressed.npz", out);
    char json[800];
    snprintf(json, sizeof json, "%s/mine.json", out);
    as_cli_run(r, AS_ARGS("check", "tiny", st, json, "-q"));
    CHECK(r->status == 0 && strstr(r->out, "40 pass"), "every tensor, deflated: exit %d\n%s%s", r->status, r->out, r->err);
    free(r);
}
