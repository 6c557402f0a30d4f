/* .npy arrays and .npz archives (model/npy.h): every offset and size checked against the mapping
 * before it is followed, headers parsed by a grammar of exactly what numpy writes. */
#include "model/npy.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <zlib.h>

#include "model/mapfile.h"

#if !defined(__BYTE_ORDER__) || __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "zip and npy headers are read as little-endian integers: little-endian hosts only"
#endif

#define NPY_MAGIC "\x93NUMPY"
#define ZIP_LOCAL 0x04034b50u
#define ZIP_CENTRAL 0x02014b50u
#define ZIP_END 0x06054b50u
#define ZIP64_END 0x06064b50u
#define ZIP64_LOCATOR 0x07064b50u
#define ZIP_END_LEN 22
#define ZIP_CENTRAL_LEN 46
#define ZIP_LOCAL_LEN 30
/* the largest preamble: magic, version, a 4-byte length and the header */
#define NPY_MAX_PREAMBLE (12 + AS_NPY_MAX_HEADER)
/* zlib counts in uInt: streams are fed and drained in pieces of this */
#define Z_PIECE ((uint64_t)1 << 30)

static const struct {
    const char *name;
    int size;
} elem[AS_EL_COUNT] = {
    [AS_EL_F64] = {"float64", 8}, [AS_EL_F32] = {"float32", 4}, [AS_EL_F16] = {"float16", 2},
    [AS_EL_BF16] = {"bfloat16", 2}, [AS_EL_I64] = {"int64", 8}, [AS_EL_I32] = {"int32", 4},
    [AS_EL_U8] = {"uint8", 1},     [AS_EL_BOOL] = {"bool", 1},
};

int as_elem_size(AsElemType t) { return elem[t].size; }
const char *as_elem_name(AsElemType t) { return elem[t].name; }

static uint16_t rd16(const uint8_t *p)
{
    uint16_t v;
    memcpy(&v, p, 2);
    return v;
}

static uint32_t rd32(const uint8_t *p)
{
    uint32_t v;
    memcpy(&v, p, 4);
    return v;
}

static uint64_t rd64(const uint8_t *p)
{
    uint64_t v;
    memcpy(&v, p, 8);
    return v;
}

/* ---- the .npy header: a Python dict literal --------------------------------------------- */

typedef struct {
    const char *p, *end;
} Cursor;

static void skip_space(Cursor *c)
{
    while (c->p < c->end && (*c->p == ' ' || *c->p == '\t'))
        c->p++;
}

static bool eat(Cursor *c, char ch)
{
    skip_space(c);
    if (c->p < c->end && *c->p == ch) {
        c->p++;
        return true;
    }
    return false;
}

/* A quoted string of printable ASCII without its quote or a backslash (all numpy writes). */
static bool quoted(Cursor *c, char *out, size_t n)
{
    skip_space(c);
    if (c->p >= c->end || (*c->p != '\'' && *c->p != '"'))
        return false;
    char q = *c->p++;
    size_t k = 0;
    while (c->p < c->end && *c->p != q) {
        unsigned char ch = (unsigned char)*c->p++;
        if (ch < 0x20 || ch > 0x7e || ch == '\\' || k + 1 >= n)
            return false;
        out[k++] = (char)ch;
    }
    if (c->p >= c->end)
        return false;
    c->p++;
    out[k] = '\0';
    return true;
}

static bool word(Cursor *c, const char *w)
{
    skip_space(c);
    size_t n = strlen(w);
    if ((size_t)(c->end - c->p) >= n && !memcmp(c->p, w, n)) {
        c->p += n;
        return true;
    }
    return false;
}

/* (d0, d1, ...) with an optional trailing comma: at most AS_NPY_MAX_DIMS integers of at most 15
 * digits whose product stays within 2^60 (so that bytes = product * 8 fits 64 bits). */
static int shape_tuple(Cursor *c, AsNpyArray *a, const char *what, AsError *err)
{
    if (!eat(c, '('))
        return as_err(err, AS_EBADINPUT, "%s: .npy header: shape is not a tuple", what);
    a->ndim = 0;
    a->numel = 1;
    for (;;) {
        skip_space(c);
        if (eat(c, ')'))
            return 0;
        if (a->ndim == AS_NPY_MAX_DIMS)
            return as_err(err, AS_EBADINPUT, "%s: .npy header: more than %d dimensions", what, AS_NPY_MAX_DIMS);
        int64_t v = 0;
        int digits = 0;
        while (c->p < c->end && *c->p >= '0' && *c->p <= '9') {
            if (++digits > 15)
                return as_err(err, AS_EBADINPUT, "%s: .npy header: a dimension of more than 15 digits", what);
            v = v * 10 + (*c->p++ - '0');
        }
        if (!digits)
            return as_err(err, AS_EBADINPUT, "%s: .npy header: shape holds something other than integers", what);
        if (v && a->numel > ((int64_t)1 << 60) / v)
            return as_err(err, AS_EBADINPUT, "%s: .npy header: shape has more than 2^60 elements", what);
        a->numel *= v;
        a->shape[a->ndim++] = v;
        if (!eat(c, ',')) {
            if (!eat(c, ')'))
                return as_err(err, AS_EBADINPUT, "%s: .npy header: shape tuple not closed", what);
            return 0;
        }
    }
}

/* '<f4', '>i8', '|u1', '|b1', '=f2': byte order and one of the element types read. */
static int parse_descr(const char *d, AsNpyArray *a, const char *what, AsError *err)
{
    static const struct {
        const char *code;
        AsElemType t;
    } codes[] = {{"f8", AS_EL_F64}, {"f4", AS_EL_F32}, {"f2", AS_EL_F16}, {"i8", AS_EL_I64},
                 {"i4", AS_EL_I32}, {"u1", AS_EL_U8},  {"b1", AS_EL_BOOL}};
    char order = d[0];
    const char *code = strchr("<>|=", order) && order ? d + 1 : d;
    for (size_t i = 0; i < sizeof codes / sizeof codes[0]; i++) {
        if (strcmp(code, codes[i].code))
            continue;
        a->type = codes[i].t;
        bool one = elem[a->type].size == 1;
        if (order == '|' && !one)
            break; /* '|' is for types without a byte order */
        a->big_endian = order == '>' && !one;
        return 0;
    }
    return as_err(err, AS_EBADINPUT, "%s: dtype '%s' (read: float64, float32, float16, int64, int32, uint8, bool)",
                  what, d);
}

/* The dict numpy writes: descr, fortran_order and shape, each once, nothing else. */
static int parse_header_dict(const char *text, size_t len, AsNpyArray *a, const char *what, AsError *err)
{
    Cursor c = {text, text + len};
    bool seen[3] = {false, false, false};
    if (!eat(&c, '{'))
        return as_err(err, AS_EBADINPUT, "%s: .npy header is not a dict", what);
    for (;;) {
        if (eat(&c, '}'))
            break;
        char key[32], val[64];
        if (!quoted(&c, key, sizeof key) || !eat(&c, ':'))
            return as_err(err, AS_EBADINPUT, "%s: .npy header: expected 'key': value", what);
        int k = !strcmp(key, "descr") ? 0 : !strcmp(key, "fortran_order") ? 1 : !strcmp(key, "shape") ? 2 : -1;
        if (k < 0)
            return as_err(err, AS_EBADINPUT, "%s: .npy header: unknown key '%s'", what, key);
        if (seen[k])
            return as_err(err, AS_EBADINPUT, "%s: .npy header: key '%s' appears twice", what, key);
        seen[k] = true;
        int rc = 0;
        if (k == 0) {
            skip_space(&c);
            if (c.p < c.end && *c.p == '[')
                return as_err(err, AS_EBADINPUT, "%s: a structured dtype (read: plain arrays only)", what);
            if (!quoted(&c, val, sizeof val))
                return as_err(err, AS_EBADINPUT, "%s: .npy header: descr is not a short string", what);
            rc = parse_descr(val, a, what, err);
        } else if (k == 1) {
            if (word(&c, "True"))
                return as_err(err, AS_EBADINPUT, "%s: fortran_order is True (write C order: np.ascontiguousarray)", what);
            if (!word(&c, "False"))
                return as_err(err, AS_EBADINPUT, "%s: .npy header: fortran_order is not True or False", what);
        } else {
            rc = shape_tuple(&c, a, what, err);
        }
        if (rc)
            return rc;
        if (!eat(&c, ',')) {
            if (!eat(&c, '}'))
                return as_err(err, AS_EBADINPUT, "%s: .npy header: dict not closed", what);
            break;
        }
    }
    while (c.p < c.end && (*c.p == ' ' || *c.p == '\n'))
        c.p++;
    if (c.p != c.end)
        return as_err(err, AS_EBADINPUT, "%s: .npy header: bytes after the dict", what);
    if (!seen[0] || !seen[1] || !seen[2])
        return as_err(err, AS_EBADINPUT, "%s: .npy header lacks '%s'", what,
                      !seen[0] ? "descr" : !seen[1] ? "fortran_order" : "shape");
    return 0;
}

/* The preamble at p (n bytes available, of a member of `whole` bytes): the array's type and shape,
 * its header length, and elements * size + header == whole. */
static int parse_npy(const uint8_t *p, uint64_t n, uint64_t whole, AsNpyArray *a, const char *what, AsError *err)
{
    if (n < 10 || memcmp(p, NPY_MAGIC, 6))
        return as_err(err, AS_EBADINPUT, "%s: not an .npy array (no \\x93NUMPY magic)", what);
    int major = p[6], minor = p[7];
    if (major < 1 || major > 3 || minor != 0)
        return as_err(err, AS_EBADINPUT, "%s: .npy format version %d.%d (read: 1.0, 2.0, 3.0)", what, major, minor);
    uint64_t lenbytes = major == 1 ? 2 : 4, hlen;
    if (n < 8 + lenbytes)
        return as_err(err, AS_EBADINPUT, "%s: .npy preamble truncated", what);
    hlen = major == 1 ? rd16(p + 8) : rd32(p + 8);
    if (hlen > AS_NPY_MAX_HEADER)
        return as_err(err, AS_EBADINPUT, "%s: .npy header of %llu bytes (at most %d)", what, (unsigned long long)hlen,
                      AS_NPY_MAX_HEADER);
    uint64_t pre = 8 + lenbytes + hlen;
    if (pre > n)
        return as_err(err, AS_EBADINPUT, "%s: .npy header of %llu bytes runs past the end (%llu bytes)", what,
                      (unsigned long long)hlen, (unsigned long long)whole);
    int rc = parse_header_dict((const char *)p + 8 + lenbytes, (size_t)hlen, a, what, err);
    if (rc)
        return rc;
    a->header = pre;
    uint64_t data = (uint64_t)a->numel * (uint64_t)elem[a->type].size; /* numel <= 2^60, size <= 8 */
    if (whole < pre || whole - pre != data)
        return as_err(err, AS_EBADINPUT, "%s: %s shape needs %llu bytes of data, the file holds %llu", what,
                      elem[a->type].name, (unsigned long long)data, (unsigned long long)(whole < pre ? 0 : whole - pre));
    return 0;
}

/* ---- .npz: the zip records ---------------------------------------------------------------- */

/* The zip64 extra field of a central entry: the values its 32-bit fields left at 0xFFFFFFFF. */
static int zip64_extra(const uint8_t *x, uint32_t xlen, uint64_t *usize, uint64_t *csize, uint64_t *off,
                       const char *what, AsError *err)
{
    bool need_u = *usize == 0xFFFFFFFFu, need_c = *csize == 0xFFFFFFFFu, need_o = *off == 0xFFFFFFFFu;
    if (!need_u && !need_c && !need_o)
        return 0;
    for (uint32_t i = 0; i + 4 <= xlen;) {
        uint16_t id = rd16(x + i), sz = rd16(x + i + 2);
        if ((uint64_t)i + 4 + sz > xlen)
            break;
        if (id == 0x0001) {
            const uint8_t *v = x + i + 4;
            uint32_t k = 0;
            uint64_t *dst[3] = {need_u ? usize : NULL, need_c ? csize : NULL, need_o ? off : NULL};
            for (int j = 0; j < 3; j++) {
                if (!dst[j])
                    continue;
                if (k + 8 > sz)
                    return as_err(err, AS_EBADINPUT, "%s: zip64 extra field too short", what);
                *dst[j] = rd64(v + k);
                k += 8;
            }
            return 0;
        }
        i += 4 + sz;
    }
    return as_err(err, AS_EBADINPUT, "%s: a size or offset of 0xFFFFFFFF without its zip64 extra field", what);
}

typedef struct {
    uint64_t cd_off, cd_size, count, end_at; /* end_at: where the end records begin */
} ZipEnd;

static int find_end(const AsNpyFile *f, ZipEnd *z, AsError *err)
{
    const char *path = f->path;
    if (f->size < ZIP_END_LEN)
        return as_err(err, AS_EBADINPUT, "%s: %llu bytes, too short for a zip end record", path,
                      (unsigned long long)f->size);
    uint64_t lo = f->size > ZIP_END_LEN + 65535 ? f->size - ZIP_END_LEN - 65535 : 0;
    uint64_t at = f->size - ZIP_END_LEN + 1;
    bool found = false;
    while (at-- > lo) {
        const uint8_t *e = f->map + at;
        if (rd32(e) == ZIP_END && at + ZIP_END_LEN + rd16(e + 20) == f->size) {
            found = true;
            break;
        }
    }
    if (!found)
        return as_err(err, AS_EBADINPUT, "%s: no zip end record (not an .npz, or truncated)", path);
    const uint8_t *e = f->map + at;
    if (rd16(e + 4) || rd16(e + 6) || rd16(e + 8) != rd16(e + 10))
        return as_err(err, AS_EBADINPUT, "%s: a zip archive of several disks", path);
    z->count = rd16(e + 10);
    z->cd_size = rd32(e + 12);
    z->cd_off = rd32(e + 16);
    z->end_at = at;
    if (z->count == 0xFFFF || z->cd_size == 0xFFFFFFFFu || z->cd_off == 0xFFFFFFFFu) {
        if (at < 20 || rd32(f->map + at - 20) != ZIP64_LOCATOR)
            return as_err(err, AS_EBADINPUT, "%s: zip64 end record locator missing", path);
        uint64_t e64 = rd64(f->map + at - 20 + 8);
        if (e64 > at - 20 || at - 20 - e64 < 56 || rd32(f->map + e64) != ZIP64_END)
            return as_err(err, AS_EBADINPUT, "%s: zip64 end record at offset %llu is not one", path,
                          (unsigned long long)e64);
        const uint8_t *r = f->map + e64;
        if (rd32(r + 16) || rd32(r + 20) || rd64(r + 24) != rd64(r + 32))
            return as_err(err, AS_EBADINPUT, "%s: a zip archive of several disks", path);
        z->count = rd64(r + 32);
        z->cd_size = rd64(r + 40);
        z->cd_off = rd64(r + 48);
        z->end_at = e64;
    }
    if (z->cd_off > z->end_at || z->cd_size > z->end_at - z->cd_off)
        return as_err(err, AS_EBADINPUT, "%s: central directory [%llu, +%llu) runs past its end record at %llu", path,
                      (unsigned long long)z->cd_off, (unsigned long long)z->cd_size, (unsigned long long)z->end_at);
    if (z->count > AS_NPZ_MAX_MEMBERS || z->count > z->cd_size / ZIP_CENTRAL_LEN)
        return as_err(err, AS_EBADINPUT, "%s: %llu members in a central directory of %llu bytes (at most %d)", path,
                      (unsigned long long)z->count, (unsigned long long)z->cd_size, AS_NPZ_MAX_MEMBERS);
    return 0;
}

/* A raw deflate stream read from the mapping in pieces zlib can count. */
typedef struct {
    z_stream zs;
    const uint8_t *in;
    uint64_t in_left;
} Inflater;

static void feed(Inflater *z)
{
    if (z->zs.avail_in || !z->in_left)
        return;
    uInt piece = (uInt)(z->in_left < Z_PIECE ? z->in_left : Z_PIECE);
    z->zs.next_in = (Bytef *)z->in;
    z->zs.avail_in = piece;
    z->in += piece;
    z->in_left -= piece;
}

/* Inflates the first `want` bytes of member a into dst; with whole, the stream must end there, with
 * not one byte more. */
static int inflate_member(const AsNpyFile *f, const AsNpyArray *a, uint8_t *dst, uint64_t want, bool whole,
                          const char *what, AsError *err)
{
    Inflater z;
    memset(&z, 0, sizeof z);
    z.in = f->map + a->off;
    z.in_left = a->csize;
    if (inflateInit2(&z.zs, -MAX_WBITS) != Z_OK)
        return as_err(err, AS_ERUNTIME, "%s: zlib inflateInit2 failed", what);
    uint64_t done = 0;
    int zr = Z_OK;
    bool longer = false;
    for (;;) {
        bool past = done == want;
        if (past && !whole)
            break;
        uint8_t spare;
        uint64_t room = past ? 1 : want - done;
        feed(&z);
        z.zs.next_out = past ? &spare : dst + done;
        z.zs.avail_out = (uInt)(room < Z_PIECE ? room : Z_PIECE);
        uInt before = z.zs.avail_out;
        zr = inflate(&z.zs, Z_NO_FLUSH);
        uInt got = before - z.zs.avail_out;
        if (past && got) {
            longer = true;
            break;
        }
        done += got;
        if (zr == Z_STREAM_END || (zr == Z_BUF_ERROR && !z.zs.avail_in && !z.in_left) ||
            (zr != Z_OK && zr != Z_BUF_ERROR))
            break; /* the end, the input exhausted (truncated), or damage */
    }
    inflateEnd(&z.zs);
    if (longer)
        return as_err(err, AS_EBADINPUT, "%s: deflate stream holds more than the %llu bytes its entry says", what,
                      (unsigned long long)want);
    if (done < want)
        return as_err(err, AS_EBADINPUT, "%s: deflate stream %s after %llu of %llu bytes", what,
                      zr == Z_STREAM_END || zr == Z_BUF_ERROR ? "ends" : "damaged", (unsigned long long)done,
                      (unsigned long long)want);
    if (whole && zr != Z_STREAM_END)
        return as_err(err, AS_EBADINPUT, "%s: deflate stream %s", what,
                      zr == Z_BUF_ERROR ? "does not end where its entry says" : "damaged");
    return 0;
}

static int cmp_name(const void *x, const void *y)
{
    return strcmp((*(const AsNpyArray *const *)x)->name, (*(const AsNpyArray *const *)y)->name);
}

/* One central entry at *pos: its member's name and location, checked against the file. */
static int read_member(const AsNpyFile *f, const ZipEnd *z, uint64_t *pos, AsNpyArray *a, AsSpan *span, AsError *err)
{
    const char *path = f->path;
    const uint8_t *c = f->map + *pos;
    uint64_t left = z->cd_off + z->cd_size - *pos;
    if (left < ZIP_CENTRAL_LEN || rd32(c) != ZIP_CENTRAL)
        return as_err(err, AS_EBADINPUT, "%s: central directory entry at %llu is not one", path,
                      (unsigned long long)*pos);
    uint16_t flags = rd16(c + 8), method = rd16(c + 10), nlen = rd16(c + 28), xlen = rd16(c + 30),
             clen = rd16(c + 32);
    uint64_t csize = rd32(c + 20), usize = rd32(c + 24), loff = rd32(c + 42);
    if ((uint64_t)ZIP_CENTRAL_LEN + nlen + xlen + clen > left)
        return as_err(err, AS_EBADINPUT, "%s: central directory entry at %llu runs past the directory", path,
                      (unsigned long long)*pos);
    const char *name = (const char *)c + ZIP_CENTRAL_LEN;
    char shown[300];
    snprintf(shown, sizeof shown, "%.*s", nlen > 255 ? 255 : (int)nlen, name);
    if (!nlen || nlen >= sizeof a->name + 4 || memchr(name, '\0', nlen) || as_has_control(name, nlen))
        return as_err(err, AS_EBADINPUT, "%s: member name '%s' is empty, longer than %zu bytes or holds a control "
                      "character", path, shown, sizeof a->name + 3);
    if (nlen < 5 || memcmp(name + nlen - 4, ".npy", 4))
        return as_err(err, AS_EBADINPUT, "%s: member '%s' is not an .npy array", path, shown);
    snprintf(a->name, sizeof a->name, "%.*s", (int)nlen - 4, name);
    char what[1400];
    snprintf(what, sizeof what, "%s: member '%s'", path, shown);
    if (flags & 1)
        return as_err(err, AS_EBADINPUT, "%s: encrypted", what);
    if (method != 0 && method != 8)
        return as_err(err, AS_EBADINPUT, "%s: compression method %u (read: stored, deflate)", what, method);
    int rc = zip64_extra(c + ZIP_CENTRAL_LEN + nlen, xlen, &usize, &csize, &loff, what, err);
    if (rc)
        return rc;
    *pos += (uint64_t)ZIP_CENTRAL_LEN + nlen + xlen + clen;
    /* the local header: inside the file before the central directory, naming the same member */
    if (loff > z->cd_off || z->cd_off - loff < ZIP_LOCAL_LEN)
        return as_err(err, AS_EBADINPUT, "%s: local header offset %llu is not before the central directory (%llu)",
                      what, (unsigned long long)loff, (unsigned long long)z->cd_off);
    const uint8_t *l = f->map + loff;
    uint64_t lname = rd16(l + 26), lx = rd16(l + 28), data = loff + ZIP_LOCAL_LEN + lname + lx;
    if (rd32(l) != ZIP_LOCAL || data > z->cd_off || lname != nlen || memcmp(l + ZIP_LOCAL_LEN, name, nlen))
        return as_err(err, AS_EBADINPUT, "%s: no local header of that name at offset %llu", what,
                      (unsigned long long)loff);
    if (csize > z->cd_off - data)
        return as_err(err, AS_EBADINPUT, "%s: %llu bytes at offset %llu run into the central directory (%llu)", what,
                      (unsigned long long)csize, (unsigned long long)data, (unsigned long long)z->cd_off);
    /* deflate expands at most 1032:1: a larger claim is a lie, refused before anything is sized by it */
    if (method == 8 && usize / 1032 > csize + 64)
        return as_err(err, AS_EBADINPUT, "%s: %llu deflated bytes cannot hold the %llu its entry says", what,
                      (unsigned long long)csize, (unsigned long long)usize);
    if (method == 0 && csize != usize)
        return as_err(err, AS_EBADINPUT, "%s: stored with %llu bytes but sized %llu", what,
                      (unsigned long long)csize, (unsigned long long)usize);
    a->off = data;
    a->csize = csize;
    a->usize = usize;
    a->crc = rd32(c + 16);
    a->deflated = method == 8;
    *span = (AsSpan){loff, data + csize, a->name};
    return 0;
}

/* A member's .npy preamble: in place, or its first bytes inflated into scratch. */
static int member_header(const AsNpyFile *f, AsNpyArray *a, uint8_t *scratch, AsError *err)
{
    char what[1400];
    snprintf(what, sizeof what, "%s: member '%s.npy'", f->path, a->name);
    if (!a->deflated)
        return parse_npy(f->map + a->off, a->usize, a->usize, a, what, err);
    uint64_t head = a->usize < NPY_MAX_PREAMBLE ? a->usize : NPY_MAX_PREAMBLE;
    int rc = inflate_member(f, a, scratch, head, head == a->usize, what, err);
    return rc ? rc : parse_npy(scratch, head, a->usize, a, what, err);
}

static int open_npz(AsNpyFile *f, AsError *err)
{
    ZipEnd z;
    int rc = find_end(f, &z, err);
    if (rc)
        return rc;
    f->a = calloc(z.count ? (size_t)z.count : 1, sizeof *f->a);
    AsSpan *spans = malloc((z.count ? (size_t)z.count : 1) * sizeof *spans);
    uint8_t *scratch = malloc(NPY_MAX_PREAMBLE);
    AsNpyArray **sorted = malloc((z.count ? (size_t)z.count : 1) * sizeof *sorted);
    if (!f->a || !spans || !scratch || !sorted)
        rc = as_err(err, AS_ERUNTIME, "%s: out of memory for %llu members", f->path, (unsigned long long)z.count);
    uint64_t pos = z.cd_off;
    for (uint64_t i = 0; !rc && i < z.count; i++) {
        rc = read_member(f, &z, &pos, &f->a[i], &spans[i], err);
        f->n = (int)i + (rc ? 0 : 1);
    }
    if (!rc)
        rc = as_spans_disjoint(f->path, spans, (size_t)f->n, err);
    for (int i = 0; !rc && i < f->n; i++)
        sorted[i] = &f->a[i];
    if (!rc)
        qsort(sorted, (size_t)f->n, sizeof *sorted, cmp_name);
    for (int i = 1; !rc && i < f->n; i++)
        if (!strcmp(sorted[i]->name, sorted[i - 1]->name))
            rc = as_err(err, AS_EBADINPUT, "%s: member '%s.npy' appears twice", f->path, sorted[i]->name);
    for (int i = 0; !rc && i < f->n; i++) /* the contents once the structure holds */
        rc = member_header(f, &f->a[i], scratch, err);
    free(spans);
    free(scratch);
    free(sorted);
    return rc;
}

int as_npy_open(const char *path, AsNpyFile **out, AsError *err)
{
    *out = NULL;
    void *map;
    uint64_t size;
    int rc = as_map_file(path, 10, "an .npy or .npz header", &map, &size, err);
    if (rc)
        return rc;
    AsNpyFile *f = calloc(1, sizeof *f);
    if (!f) {
        munmap(map, (size_t)size);
        return as_err(err, AS_ERUNTIME, "%s: out of memory", path);
    }
    snprintf(f->path, sizeof f->path, "%s", path);
    f->map = map;
    f->size = size;
    f->npz = rd32(f->map) == ZIP_LOCAL || rd32(f->map) == ZIP_END;
    if (f->npz) {
        rc = open_npz(f, err);
    } else if (!(f->a = calloc(1, sizeof *f->a))) {
        rc = as_err(err, AS_ERUNTIME, "%s: out of memory", path);
    } else {
        f->n = 1;
        f->a->usize = f->a->csize = size;
        rc = parse_npy(f->map, size, size, f->a, path, err);
    }
    if (rc) {
        as_npy_close(f);
        return rc;
    }
    *out = f;
    return 0;
}

static uint32_t crc_of(const uint8_t *p, uint64_t n)
{
    uLong crc = crc32(0L, Z_NULL, 0);
    while (n) {
        uInt piece = (uInt)(n < Z_PIECE ? n : Z_PIECE);
        crc = crc32(crc, p, piece);
        p += piece;
        n -= piece;
    }
    return (uint32_t)crc;
}

int as_npy_data(const AsNpyFile *f, int i, const uint8_t **data, void **owned, AsError *err)
{
    const AsNpyArray *a = &f->a[i];
    *data = NULL;
    *owned = NULL;
    char what[1400];
    snprintf(what, sizeof what, "%s%s%s%s", f->path, f->npz ? ": member '" : "", f->npz ? a->name : "",
             f->npz ? ".npy'" : "");
    const uint8_t *whole = f->map + a->off;
    if (a->deflated) {
        uint8_t *buf = malloc(a->usize ? (size_t)a->usize : 1);
        if (!buf)
            return as_err(err, AS_ERUNTIME, "%s: out of memory for %llu bytes", what, (unsigned long long)a->usize);
        int rc = inflate_member(f, a, buf, a->usize, true, what, err);
        if (rc) {
            free(buf);
            return rc;
        }
        whole = buf;
        *owned = buf;
    }
    if (f->npz && crc_of(whole, a->usize) != a->crc) {
        free(*owned);
        *owned = NULL;
        return as_err(err, AS_EBADINPUT, "%s: CRC-32 differs from its entry's (damaged)", what);
    }
    *data = whole + a->header;
    return 0;
}

void as_npy_close(AsNpyFile *f)
{
    if (!f)
        return;
    if (f->map)
        munmap((void *)f->map, (size_t)f->size);
    free(f->a);
    free(f);
}
