/* The dump writer: everything goes into ".NAME.tmp-XXXXXX" beside the requested name (beside the
 * file a symlink names); commit fsyncs and renames it into place, any failure or abort unlinks it.
 * A character device or FIFO target (/dev/stdout, /dev/null) is opened when the dump is created
 * and gets the finished file's bytes at commit, from a temporary in $TMPDIR. A static table of the
 * temporaries lets a signal handler unlink them all (as_dump_abort_all). */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "dumps/dump.h"
#include "dumps/dump_diff.h"
#include "dumps/h5io.h"
#include "model/safetensors.h"
#include "model/version.h"

/* ---- the table of temporaries (async-signal-safe side: atomics and unlink only) -------- */

#define MAX_OPEN 32
enum { SLOT_FREE, SLOT_CLAIMED, SLOT_LIVE };
static atomic_int slot_state[MAX_OPEN];
static char slot_path[MAX_OPEN][PATH_MAX];

static int slot_claim(const char *tmp)
{
    for (int i = 0; i < MAX_OPEN; i++) {
        int expect = SLOT_FREE;
        if (atomic_compare_exchange_strong(&slot_state[i], &expect, SLOT_CLAIMED)) {
            snprintf(slot_path[i], sizeof slot_path[i], "%s", tmp);
            atomic_store(&slot_state[i], SLOT_LIVE);
            return i;
        }
    }
    return -1;
}

static void slot_release(int i)
{
    if (i >= 0)
        atomic_store(&slot_state[i], SLOT_FREE);
}

void as_dump_abort_all(void)
{
    for (int i = 0; i < MAX_OPEN; i++)
        if (atomic_load(&slot_state[i]) == SLOT_LIVE)
            unlink(slot_path[i]);
    as_atomic_abort_all(); /* model files being written (gen, convert, a preset generated on first use) */
}

/* ---- the writer ------------------------------------------------------------------------ */

struct AsDumpWriter {
    hid_t file;
    int slot;
    bool failed;            /* an HDF5 write failed: the file may be inconsistent, commit refuses */
    int stream;             /* a character device or FIFO target, written at commit; -1 for a file */
    char path[PATH_MAX], tmp[PATH_MAX];
    AsConfig cfg;
    int h0_tokens, h0_first;
};

int as_dump_parse_tensor_list(const char *list, uint64_t *mask, AsError *err)
{
    *mask = 0;
    const char *p = list ? list : "";
    while (*p) {
        size_t len = strcspn(p, ",");
        char name[64];
        if (len == 0 || len >= sizeof name)
            return as_err(err, AS_EBADINPUT, "tensor list '%s': empty or overlong name", list);
        memcpy(name, p, len);
        name[len] = '\0';
        if (!strcmp(name, "all"))
            *mask |= AS_DUMP_ALL_TENSORS;
        else if (!strcmp(name, "none"))
            ;
        else if (!strcmp(name, "state"))
            for (int i = AS_T_FIRST_STATE; i < AS_T_COUNT; i++)
                *mask |= AS_DUMP_TENSOR_BIT(i);
        else {
            AsTensorId id = as_tensor_by_name(name);
            if (id == AS_T_COUNT)
                return as_err(err, AS_EBADINPUT, "tensor list: '%s' is not a tensor (see attnscope help tensors)",
                              name);
            *mask |= AS_DUMP_TENSOR_BIT(id);
        }
        p += len;
        if (*p == ',')
            p++;
    }
    return 0;
}

static void drop(AsDumpWriter *w)
{
    if (w->file >= 0)
        H5Fclose(w->file);
    w->file = -1;
    if (w->stream >= 0)
        close(w->stream);
    unlink(w->tmp);
    slot_release(w->slot);
    free(w);
}

/* messages name the dump as asked for, not its temporary */
static AsH5At at_root(const AsDumpWriter *w) { return (AsH5At){w->path, "/"}; }

/* "dir/.name.tmp-XXXXXX" for "dir/name". */
static int temp_name(const char *path, char *tmp, size_t n, AsError *err)
{
    const char *slash = strrchr(path, '/');
    const char *base = slash ? slash + 1 : path;
    if (!*base || !strcmp(base, ".") || !strcmp(base, ".."))
        return as_err(err, AS_EBADINPUT, "dump %s: names a directory, not a file", path);
    int dlen = slash ? (int)(slash - path + 1) : 0;
    if (snprintf(tmp, n, "%.*s.%s.tmp-XXXXXX", dlen, path, base) >= (int)n)
        return as_err(err, AS_EBADINPUT, "dump %s: path too long", path);
    return 0;
}

static void now_iso(char *buf, size_t n)
{
    time_t t = time(NULL);
    struct tm tm;
    gmtime_r(&t, &tm);
    strftime(buf, n, "%Y-%m-%dT%H:%M:%SZ", &tm);
}

int as_dump_create(const char *path, const AsDumpMeta *meta, AsDumpWriter **out, AsError *err)
{
    *out = NULL;
    as_h5_init();
    if (!meta || !meta->cfg)
        return as_err(err, AS_EBADINPUT, "dump %s: no model config given", path);
    if (!as_dump_mode_ok(meta->mode))
        return as_err(err, AS_EBADINPUT,
                      "dump %s: mode '%s' (modes: teacher, free, engine-only, reference-only, external)", path,
                      meta->mode ? meta->mode : "");
    AsDumpWriter *w = calloc(1, sizeof *w);
    if (!w)
        return as_err(err, AS_ERUNTIME, "out of memory");
    w->file = -1;
    w->slot = -1;
    w->stream = -1;
    w->cfg = *meta->cfg;
    int rc = as_config_validate(&w->cfg, err);
    if (rc) {
        free(w);
        return as_err_wrap(err, "dump %s: config", path);
    }
    snprintf(w->path, sizeof w->path, "%s", path);
    char real[PATH_MAX];
    rc = as_output_target(path, real, sizeof real, &w->stream, err);
    if (rc) {
        free(w);
        return as_err_wrap(err, "dump");
    }
    if (w->stream >= 0) {
        const char *td = getenv("TMPDIR");
        if (snprintf(real, sizeof real, "%s/attnscope-dump", td && *td ? td : "/tmp") >= (int)sizeof real) {
            close(w->stream);
            free(w);
            return as_err(err, AS_EBADINPUT, "dump %s: TMPDIR too long", path);
        }
    }
    rc = temp_name(real, w->tmp, sizeof w->tmp, err);
    if (rc) {
        if (w->stream >= 0)
            close(w->stream);
        free(w);
        return rc;
    }
    /* register before the file exists, so that no moment has an unregistered temporary */
    w->slot = slot_claim(w->tmp);
    if (w->slot < 0) {
        if (w->stream >= 0)
            close(w->stream);
        free(w);
        return as_err(err, AS_ERUNTIME, "dump %s: too many dumps open at once (%d)", path, MAX_OPEN);
    }
    int fd = mkstemp(slot_path[w->slot]);
    if (fd < 0) { /* a directory that does not exist or a name too long is bad input; one that refuses, I/O */
        int e = errno;
        slot_release(w->slot);
        if (w->stream >= 0)
            close(w->stream);
        free(w);
        return as_err(err, e == ENOENT || e == ENOTDIR || e == ENAMETOOLONG ? AS_EBADINPUT : AS_ERUNTIME,
                      "dump %s: cannot create a file in its directory: %s", path, strerror(e));
    }
    snprintf(w->tmp, sizeof w->tmp, "%s", slot_path[w->slot]);
    mode_t um = umask(0);
    umask(um);
    if (fchmod(fd, 0666 & ~um) < 0 || close(fd) < 0) {
        int e = errno;
        drop(w);
        return as_err(err, AS_ERUNTIME, "dump %s: %s", path, strerror(e));
    }

    char *json = meta->config_json ? NULL : as_config_to_json(&w->cfg);
    const char *config_json = meta->config_json ? meta->config_json : json;
    hid_t fapl = H5Pcreate(H5P_FILE_ACCESS);
    /* the 1.10 file format: checksums on every metadata structure (superblock, object headers,
     * chunk indexes), so damage reads as an error rather than as garbage */
    if (fapl >= 0 && H5Pset_fclose_degree(fapl, H5F_CLOSE_STRONG) >= 0 &&
        H5Pset_libver_bounds(fapl, H5F_LIBVER_V110, H5F_LIBVER_V110) >= 0)
        w->file = H5Fcreate(w->tmp, H5F_ACC_TRUNC, H5P_DEFAULT, fapl);
    if (w->file < 0)
        rc = as_h5_fail(err, AS_ERUNTIME, at_root(w), "cannot create the HDF5 file");
    if (fapl >= 0)
        H5Pclose(fapl);
    if (!rc && !config_json)
        rc = as_err(err, AS_ERUNTIME, "dump %s: cannot write the config as JSON", path);
    char created[32];
    now_iso(created, sizeof created);
    AsH5At at = at_root(w);
    if (!rc)
        rc = as_h5_put_str(w->file, "format", AS_DUMP_FORMAT, at, err);
    if (!rc)
        rc = as_h5_put_i64(w->file, "format_version", AS_DUMP_FORMAT_VERSION, at, err);
    if (!rc)
        rc = as_h5_put_str(w->file, "config_json", config_json, at, err);
    if (!rc)
        rc = as_h5_put_str(w->file, "weights_name", meta->weights_name, at, err);
    if (!rc)
        rc = as_h5_put_str(w->file, "weights_digest", meta->weights_digest, at, err);
    if (!rc && meta->precision)
        rc = as_h5_put_str(w->file, "precision", meta->precision, at, err);
    if (!rc)
        rc = as_h5_put_str(w->file, "attnscope_version", meta->version ? meta->version : as_version(), at, err);
    if (!rc)
        rc = as_h5_put_str(w->file, "mode", meta->mode, at, err);
    if (!rc)
        rc = as_h5_put_str(w->file, "created", meta->created ? meta->created : created, at, err);
    if (!rc) {
        hid_t g = as_h5_new_group(w->file, "steps", at, err);
        rc = g < 0 ? AS_ERUNTIME : 0;
        if (g >= 0)
            H5Gclose(g);
    }
    free(json);
    if (rc) {
        drop(w);
        return rc;
    }
    *out = w;
    return 0;
}

static int usable(AsDumpWriter *w, AsError *err)
{
    if (!w)
        return as_err(err, AS_EBADINPUT, "dump: no writer");
    if (w->failed)
        return as_err(err, AS_ERUNTIME, "dump %s: an earlier write failed; the dump is dropped", w->path);
    return 0;
}

/* Marks the writer failed after an I/O error (not after a refused argument). */
static int io_fail(AsDumpWriter *w, int rc)
{
    if (rc == AS_ERUNTIME)
        w->failed = true;
    return rc;
}

int as_dump_write_inputs(AsDumpWriter *w, const float *h0, int tokens, int pos, AsError *err)
{
    int rc = usable(w, err);
    if (rc)
        return rc;
    AsH5At at = {w->path, "/inputs/h0"};
    if (tokens < 1 || pos < 0 || (int64_t)pos + tokens > AS_LIMIT_MAX_SEQ ||
        (int64_t)w->h0_tokens + tokens > AS_LIMIT_MAX_SEQ)
        return as_err(err, AS_EBADINPUT, "dump %s: inputs: %d tokens at position %d are out of range", w->path,
                      tokens, pos);
    if (w->h0_tokens && pos != w->h0_first + w->h0_tokens)
        return as_err(err, AS_EBADINPUT, "dump %s: inputs: position %d does not continue the %d tokens from %d",
                      w->path, pos, w->h0_tokens, w->h0_first);
    hid_t ds;
    if (!w->h0_tokens) {
        hid_t g = as_h5_new_group(w->file, "inputs", (AsH5At){w->path, "/"}, err);
        if (g < 0)
            return io_fail(w, AS_ERUNTIME);
        hsize_t dims[2] = {0, (hsize_t)w->cfg.dim}, maxd[2] = {H5S_UNLIMITED, (hsize_t)w->cfg.dim};
        ds = as_h5_new_dataset(g, "h0", H5T_IEEE_F32LE, 2, dims, maxd, at, err);
        H5Gclose(g);
        if (ds < 0)
            return io_fail(w, AS_ERUNTIME);
        if ((rc = as_h5_put_i64(ds, "bf16", 1, at, err)) || (rc = as_h5_put_i64(ds, "first_pos", pos, at, err)) ||
            (rc = as_h5_put_str(ds, "dims", "token,channel", at, err))) {
            H5Dclose(ds);
            return io_fail(w, rc);
        }
        w->h0_first = pos;
    } else {
        ds = H5Dopen2(w->file, "/inputs/h0", H5P_DEFAULT);
        if (ds < 0)
            return io_fail(w, as_h5_fail(err, AS_ERUNTIME, at, "cannot open"));
    }
    hsize_t size[2] = {(hsize_t)w->h0_tokens + (hsize_t)tokens, (hsize_t)w->cfg.dim};
    hsize_t start[2] = {(hsize_t)w->h0_tokens, 0}, count[2] = {(hsize_t)tokens, (hsize_t)w->cfg.dim};
    hid_t fs = -1, ms = -1;
    if (H5Dset_extent(ds, size) < 0 || (fs = H5Dget_space(ds)) < 0 ||
        H5Sselect_hyperslab(fs, H5S_SELECT_SET, start, NULL, count, NULL) < 0 ||
        (ms = H5Screate_simple(2, count, NULL)) < 0 || H5Dwrite(ds, H5T_NATIVE_FLOAT, ms, fs, H5P_DEFAULT, h0) < 0)
        rc = io_fail(w, as_h5_fail(err, AS_ERUNTIME, at, "cannot append %d tokens", tokens));
    else
        w->h0_tokens += tokens;
    if (ms >= 0)
        H5Sclose(ms);
    if (fs >= 0)
        H5Sclose(fs);
    H5Dclose(ds);
    return rc;
}

static void step_path(char *buf, size_t n, int step) { snprintf(buf, n, "/steps/%04d", step); }

int as_dump_begin_step(AsDumpWriter *w, int step, const char *kind, int start_pos, int tokens, AsError *err)
{
    int rc = usable(w, err);
    if (rc)
        return rc;
    char path[64];
    step_path(path, sizeof path, step);
    AsH5At at = {w->path, path};
    if (step < 0 || step >= AS_DUMP_MAX_STEPS)
        return as_err(err, AS_EBADINPUT, "dump %s: step %d out of range [0, %d)", w->path, step, AS_DUMP_MAX_STEPS);
    if (!kind || (strcmp(kind, "prefill") && strcmp(kind, "decode")))
        return as_err(err, AS_EBADINPUT, "dump %s: step %d: kind '%s' (prefill or decode)", w->path, step,
                      kind ? kind : "");
    if (tokens < 1 || tokens > AS_LIMIT_MAX_SEQ || start_pos < 0 || start_pos > AS_LIMIT_MAX_SEQ)
        return as_err(err, AS_EBADINPUT, "dump %s: step %d: %d tokens at %d out of range", w->path, step, tokens,
                      start_pos);
    if (H5Lexists(w->file, path, H5P_DEFAULT) > 0)
        return as_err(err, AS_EBADINPUT, "dump %s: step %d was begun already", w->path, step);
    hid_t g = as_h5_new_group(w->file, path, (AsH5At){w->path, "/steps"}, err);
    if (g < 0)
        return io_fail(w, AS_ERUNTIME);
    if (!(rc = as_h5_put_str(g, "kind", kind, at, err)) && !(rc = as_h5_put_i64(g, "start_pos", start_pos, at, err)) &&
        !(rc = as_h5_put_i64(g, "tokens", tokens, at, err))) {
        hid_t l = as_h5_new_group(g, "layers", at, err);
        rc = l < 0 ? AS_ERUNTIME : 0;
        if (l >= 0)
            H5Gclose(l);
    }
    H5Gclose(g);
    return io_fail(w, rc);
}

static int put_layer_attrs(hid_t obj, const AsRun *r, AsH5At at, AsError *err)
{
    int rc = 0;
    for (int a = 0; !rc && a < AS_LA_COUNT; a++)
        rc = as_h5_put_i64(obj, as_dump_layer_attr_name[a], as_dump_layer_attr_get(r, (AsLayerAttr)a), at, err);
    for (int i = 0; !rc && i < AS_DUMP_N_PROV; i++) {
        const AsProvenance *p = as_dump_prov((AsRun *)r, i);
        int64_t v[2] = {p->layer, p->step};
        rc = as_h5_put_i64s(obj, as_dump_prov_name[i], v, 2, at, err);
    }
    return rc;
}

/* Refuses a run that would make a dump the reader rejects, before anything is written. */
static int check_run(const AsDumpWriter *w, int layer, int tokens, const AsRun *r, uint64_t mask, const char *side,
                     AsError *err)
{
    char why[256];
    if (as_dump_check_attrs(&w->cfg, layer, tokens, r, why, sizeof why))
        return as_err(err, AS_EBADINPUT, "dump %s: layer %d, %s: %s", w->path, layer, side, why);
    for (int i = 0; i < AS_T_COUNT; i++) {
        const AsHostTensor *t = &r->t[i];
        if (!(mask & AS_DUMP_TENSOR_BIT(i)) || !t->data)
            continue;
        if (t->type != as_tensor_desc[i].type ||
            as_dump_check_shape(&w->cfg, tokens, r, (AsTensorId)i, t->ndim, t->shape, why, sizeof why))
            return as_err(err, AS_EBADINPUT, "dump %s: layer %d, %s/%s: %s", w->path, layer, side,
                          as_tensor_desc[i].name, t->type != as_tensor_desc[i].type ? "wrong value type" : why);
    }
    return 0;
}

static int put_tensor(hid_t g, AsTensorId id, const AsHostTensor *t, AsH5At at, AsError *err)
{
    hid_t ftype, mtype;
    switch (t->type) {
    case AS_VT_I32: ftype = H5T_STD_I32LE, mtype = H5T_NATIVE_INT32; break;
    case AS_VT_U8: ftype = H5T_STD_U8LE, mtype = H5T_NATIVE_UINT8; break;
    default: ftype = H5T_IEEE_F32LE, mtype = H5T_NATIVE_FLOAT; break; /* bf16 values and f32 state */
    }
    const char *name = as_tensor_desc[id].name;
    hsize_t dims[3];
    for (int i = 0; i < t->ndim; i++)
        dims[i] = (hsize_t)t->shape[i];
    hid_t ds = as_h5_new_dataset(g, name, ftype, t->ndim, dims, NULL, at, err);
    if (ds < 0)
        return AS_ERUNTIME;
    int rc = 0;
    if (as_ht_numel(t) > 0 && H5Dwrite(ds, mtype, H5S_ALL, H5S_ALL, H5P_DEFAULT, t->data) < 0)
        rc = as_h5_fail(err, AS_ERUNTIME, at, "%s: cannot write", name);
    char dimstr[64];
    as_dump_dims_string(id, dimstr, sizeof dimstr);
    if (!rc)
        rc = as_h5_put_str(ds, "dims", dimstr, at, err);
    if (!rc && (t->type == AS_VT_BF16 || t->type == AS_VT_F32))
        rc = as_h5_put_i64(ds, "bf16", t->type == AS_VT_BF16, at, err);
    H5Dclose(ds);
    return rc;
}

/* The tokens of a begun step. */
static int step_tokens(AsDumpWriter *w, int step, int layer, int *tokens, AsError *err)
{
    char sp[64];
    step_path(sp, sizeof sp, step);
    if (H5Lexists(w->file, sp, H5P_DEFAULT) <= 0)
        return as_err(err, AS_EBADINPUT, "dump %s: layer %d written into step %d, which was not begun", w->path,
                      layer, step);
    hid_t sg = H5Gopen2(w->file, sp, H5P_DEFAULT);
    if (sg < 0)
        return io_fail(w, as_h5_fail(err, AS_ERUNTIME, (AsH5At){w->path, sp}, "cannot open"));
    int rc = as_h5_get_int(sg, "tokens", 1, AS_LIMIT_MAX_SEQ, tokens, (AsH5At){w->path, sp}, err);
    H5Gclose(sg);
    return rc ? io_fail(w, AS_ERUNTIME) : 0;
}

/* Opens /steps/NNNN/layers/LL, creating it with r's attributes when new (r NULL: must exist). */
static hid_t open_layer(AsDumpWriter *w, int step, int layer, const AsRun *r, char *path, size_t n, AsError *err)
{
    snprintf(path, n, "/steps/%04d/layers/%02d", step, layer);
    AsH5At at = {w->path, path};
    if (H5Lexists(w->file, path, H5P_DEFAULT) > 0) {
        hid_t g = H5Gopen2(w->file, path, H5P_DEFAULT);
        if (g < 0)
            io_fail(w, as_h5_fail(err, AS_ERUNTIME, at, "cannot open"));
        return g;
    }
    if (!r) {
        as_err(err, AS_EBADINPUT, "dump %s: %s: a diff for a layer with no side written", w->path, path);
        return -1;
    }
    hid_t g = as_h5_new_group(w->file, path, at, err);
    if (g < 0) {
        io_fail(w, AS_ERUNTIME);
        return -1;
    }
    int rc = put_layer_attrs(g, r, at, err);
    if (rc) {
        H5Gclose(g);
        io_fail(w, rc);
        return -1;
    }
    return g;
}

static int put_side(AsDumpWriter *w, hid_t lg, const char *lpath, const char *side, const AsRun *r, uint64_t mask,
                    AsError *err)
{
    char path[256];
    snprintf(path, sizeof path, "%s/%s", lpath, side);
    AsH5At at = {w->path, path};
    if (H5Lexists(lg, side, H5P_DEFAULT) > 0)
        return as_err(err, AS_EBADINPUT, "dump %s: %s was written already", w->path, path);
    hid_t g = as_h5_new_group(lg, side, (AsH5At){w->path, lpath}, err);
    if (g < 0)
        return io_fail(w, AS_ERUNTIME);
    int rc = put_layer_attrs(g, r, at, err); /* each side keeps its own attributes and provenance */
    for (int i = 0; !rc && i < AS_T_COUNT; i++)
        if ((mask & AS_DUMP_TENSOR_BIT(i)) && r->t[i].data)
            rc = put_tensor(g, (AsTensorId)i, &r->t[i], at, err);
    H5Gclose(g);
    return io_fail(w, rc);
}

/* Validates every given side, then writes them and the diff. */
static int write_sides(AsDumpWriter *w, int step, int layer, int n, const char *const *names, const AsRun *const *runs,
                       const AsLayerDiff *diff, const char *got_side, const char *want_side, uint64_t mask,
                       AsError *err)
{
    int rc = usable(w, err);
    if (rc)
        return rc;
    for (int i = 0; i < n; i++)
        if (!as_dump_side_name_ok(names[i]))
            return as_err(err, AS_EBADINPUT, "dump %s: side name '%s' (1..63 of [A-Za-z0-9_.-], not 'diff')",
                          w->path, names[i]);
    int tokens = 0;
    char lpath[128];
    if ((rc = step_tokens(w, step, layer, &tokens, err)))
        return rc;
    for (int i = 0; i < n; i++)
        if ((rc = check_run(w, layer, tokens, runs[i], mask, names[i], err)))
            return rc;
    /* refuse a side or diff written twice before anything of this call is written */
    char probe[256];
    for (int i = 0; i <= n; i++) {
        const char *what = i < n ? names[i] : diff ? "diff" : NULL;
        snprintf(probe, sizeof probe, "/steps/%04d/layers/%02d", step, layer);
        if (what && H5Lexists(w->file, probe, H5P_DEFAULT) > 0) {
            snprintf(probe + strlen(probe), sizeof probe - strlen(probe), "/%s", what);
            if (H5Lexists(w->file, probe, H5P_DEFAULT) > 0)
                return as_err(err, AS_EBADINPUT, "dump %s: %s was written already", w->path, probe);
        }
    }
    /* the layer's attributes: the last run given (ref when both sides are) */
    hid_t lg = open_layer(w, step, layer, n ? runs[n - 1] : NULL, lpath, sizeof lpath, err);
    if (lg < 0)
        return err ? err->code : AS_ERUNTIME;
    for (int i = 0; !rc && i < n; i++)
        rc = put_side(w, lg, lpath, names[i], runs[i], mask, err);
    if (!rc && diff) {
        if (H5Lexists(lg, "diff", H5P_DEFAULT) > 0)
            rc = as_err(err, AS_EBADINPUT, "dump %s: %s/diff was written already", w->path, lpath);
        else
            rc = io_fail(w, as_dump_diff_put(lg, diff, got_side, want_side, (AsH5At){w->path, lpath}, err));
    }
    H5Gclose(lg);
    return rc;
}

int as_dump_write_layer(AsDumpWriter *w, int step, int layer, const AsRun *engine, const AsRun *ref,
                        const AsLayerDiff *diff, uint64_t tensors, AsError *err)
{
    const char *names[2];
    const AsRun *runs[2];
    int n = 0;
    if (engine)
        names[n] = "engine", runs[n++] = engine;
    if (ref)
        names[n] = "ref", runs[n++] = ref; /* last: its attributes become the layer's */
    if (!n && !diff)
        return as_err(err, AS_EBADINPUT, "dump: layer %d: nothing to write", layer);
    return write_sides(w, step, layer, n, names, runs, diff, "engine", "ref", tensors, err);
}

int as_dump_write_side(AsDumpWriter *w, int step, int layer, const char *side, const AsRun *run, uint64_t tensors,
                       AsError *err)
{
    if (!run || !side)
        return as_err(err, AS_EBADINPUT, "dump: layer %d: no run or side name", layer);
    return write_sides(w, step, layer, 1, &side, &run, NULL, NULL, NULL, tensors, err);
}

int as_dump_write_diff(AsDumpWriter *w, int step, int layer, const AsLayerDiff *diff, const char *got_side,
                       const char *want_side, AsError *err)
{
    if (!diff)
        return as_err(err, AS_EBADINPUT, "dump: layer %d: no diff", layer);
    return write_sides(w, step, layer, 0, NULL, NULL, diff, got_side, want_side, 0, err);
}

int as_dump_write_state_in(AsDumpWriter *w, const AsDumpStateIn *si, const AsRun *layers, AsError *err)
{
    int rc = usable(w, err);
    if (rc)
        return rc;
    if (!si || !layers)
        return as_err(err, AS_EBADINPUT, "dump %s: state_in: nothing given", w->path);
    if (si->step < 1 || si->step >= AS_DUMP_MAX_STEPS || si->start_pos < 1 || si->start_pos > AS_LIMIT_MAX_SEQ)
        return as_err(err, AS_EBADINPUT, "dump %s: state_in: step %d at position %d (a state before a decode step)",
                      w->path, si->step, si->start_pos);
    if (si->side[0] && !as_dump_side_name_ok(si->side))
        return as_err(err, AS_EBADINPUT, "dump %s: state_in: side '%s' is not a side name", w->path, si->side);
    if (H5Lexists(w->file, "/state_in", H5P_DEFAULT) > 0)
        return as_err(err, AS_EBADINPUT, "dump %s: /state_in was written already", w->path);
    /* every layer's state, complete, checked before anything is written */
    char why[256];
    for (int l = 0; l < w->cfg.n_layers; l++) {
        uint64_t want = as_dump_state_tensors(&w->cfg, l);
        AsRun attrs = layers[l];
        attrs.ratio = w->cfg.role[l].ratio;
        for (int i = 0; i < AS_T_COUNT; i++) {
            if (!((want >> i) & 1))
                continue;
            const AsHostTensor *t = &layers[l].t[i];
            if (!t->data || t->type != as_tensor_desc[i].type ||
                as_dump_check_shape(&w->cfg, 1, &attrs, (AsTensorId)i, t->ndim, t->shape, why, sizeof why))
                return as_err(err, AS_EBADINPUT, "dump %s: state_in, layer %d: %s: %s", w->path, l,
                              as_tensor_desc[i].name, !t->data ? "missing" : t->type != as_tensor_desc[i].type
                                                                           ? "wrong value type" : why);
        }
    }
    AsH5At at = {w->path, "/state_in"};
    hid_t g = as_h5_new_group(w->file, "state_in", at_root(w), err);
    if (g < 0)
        return io_fail(w, AS_ERUNTIME);
    rc = as_h5_put_i64(g, "step", si->step, at, err);
    if (!rc)
        rc = as_h5_put_i64(g, "start_pos", si->start_pos, at, err);
    const char *pn[4] = {"compress_kv_from", "index_k_from", "sel_from", "cand_from"};
    const AsProvenance *pv[4] = {&si->compress_kv_from, &si->index_k_from, &si->sel_from, &si->cand_from};
    for (int i = 0; !rc && i < 4; i++) {
        int64_t v[2] = {pv[i]->layer, pv[i]->step};
        rc = as_h5_put_i64s(g, pn[i], v, 2, at, err);
    }
    if (!rc && si->side[0])
        rc = as_h5_put_str(g, "side", si->side, at, err);
    hid_t lsg = -1;
    if (!rc && (lsg = as_h5_new_group(g, "layers", at, err)) < 0)
        rc = AS_ERUNTIME;
    for (int l = 0; !rc && l < w->cfg.n_layers; l++) {
        char name[16], path[64];
        snprintf(name, sizeof name, "%02d", l);
        snprintf(path, sizeof path, "/state_in/layers/%02d", l);
        AsH5At lat = {w->path, path};
        hid_t lg = as_h5_new_group(lsg, name, (AsH5At){w->path, "/state_in/layers"}, err);
        if (lg < 0) {
            rc = AS_ERUNTIME;
            break;
        }
        uint64_t want = as_dump_state_tensors(&w->cfg, l);
        for (int i = 0; !rc && i < AS_T_COUNT; i++)
            if ((want >> i) & 1)
                rc = put_tensor(lg, (AsTensorId)i, &layers[l].t[i], lat, err);
        H5Gclose(lg);
    }
    if (lsg >= 0)
        H5Gclose(lsg);
    H5Gclose(g);
    return io_fail(w, rc);
}

/* The finished temporary's bytes to the stream target, then the temporary removed. */
static int commit_stream(AsDumpWriter *w, AsError *err)
{
    int rc = 0;
    int fd = open(w->tmp, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        rc = as_err(err, AS_ERUNTIME, "dump %s: cannot reopen its temporary: %s", w->path, strerror(errno));
    char buf[1 << 16];
    as_output_pipe_guard(true);
    for (ssize_t n; !rc && (n = read(fd, buf, sizeof buf)) != 0;) {
        if (n < 0) {
            if (errno != EINTR)
                rc = as_err(err, AS_ERUNTIME, "dump %s: cannot read its temporary: %s", w->path, strerror(errno));
            continue;
        }
        for (ssize_t off = 0; !rc && off < n;) {
            ssize_t k = write(w->stream, buf + off, (size_t)(n - off));
            if (k < 0 && errno != EINTR)
                rc = as_err(err, AS_ERUNTIME, "dump %s: cannot write: %s", w->path, strerror(errno));
            off += k > 0 ? k : 0;
        }
    }
    if (fd >= 0)
        close(fd);
    as_output_pipe_guard(false);
    if (close(w->stream) < 0 && !rc && errno != EINTR)
        rc = as_err(err, AS_ERUNTIME, "dump %s: cannot write: %s", w->path, strerror(errno));
    w->stream = -1;
    drop(w);
    return rc;
}

int as_dump_commit(AsDumpWriter *w, AsError *err)
{
    int rc = usable(w, err);
    if (rc) {
        as_dump_abort(w);
        return rc;
    }
    if (H5Fflush(w->file, H5F_SCOPE_GLOBAL) < 0 || H5Fclose(w->file) < 0) {
        rc = as_h5_fail(err, AS_ERUNTIME, at_root(w), "cannot finish the file");
        w->file = -1;
        drop(w);
        return rc;
    }
    w->file = -1;
    if (w->stream >= 0)
        return commit_stream(w, err);
    /* the data reaches the disk before the name does: fsync the file, rename, fsync the dir */
    char real[PATH_MAX];
    rc = as_output_target(w->path, real, sizeof real, NULL, err);
    if (rc) {
        drop(w);
        return as_err_wrap(err, "dump");
    }
    struct stat st; /* what became of the target meanwhile: only a regular file (or nothing) is replaced */
    if (!lstat(real, &st) && !S_ISREG(st.st_mode)) {
        rc = as_err(err, AS_ERUNTIME, "dump %s: no longer a regular file; nothing written", w->path);
        drop(w);
        return rc;
    }
    int fd = open(w->tmp, O_RDONLY | O_CLOEXEC);
    if (fd < 0 || fsync(fd) < 0 || rename(w->tmp, real) < 0) {
        rc = as_err(err, AS_ERUNTIME, "dump %s: cannot commit: %s", w->path, strerror(errno));
        if (fd >= 0)
            close(fd);
        drop(w);
        return rc;
    }
    close(fd);
    slot_release(w->slot);
    char dir[PATH_MAX];
    const char *slash = strrchr(w->path, '/');
    snprintf(dir, sizeof dir, "%.*s", slash ? (int)(slash - w->path) + (slash == w->path) : 1,
             slash ? w->path : ".");
    int dfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (dfd >= 0) {
        fsync(dfd); /* best effort: some file systems refuse fsync on a directory */
        close(dfd);
    }
    free(w);
    return 0;
}

void as_dump_abort(AsDumpWriter *w)
{
    if (w)
        drop(w);
}
