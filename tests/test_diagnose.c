/* `check --diagnose` (driver/diagnose.h) against every convention of the catalogue (ref/convention.h):
 * each planted in a reference twin whose run is the "engine" side of a dump of the tiny preset (prefill of
 * 16 tokens, two decode steps); the diagnosis of the first layer run it calls for names that convention
 * at the tensor the catalogue says, and no diagnosis anywhere names another one. The same from a sparse
 * dump (the few tensors an engine's hooks store: the user's path, where the stages between an absent
 * tensor and the first stored mismatch are re-run). The two fp8 scale-block conventions need weights
 * whose block scales differ where the two readings differ: tiny's scales are rewritten for them. The
 * conventions within SPEC 6's rule by construction are planted too: they must pass the check. Also: a
 * fault that is no convention ("none of the catalogue"), the driver-level diagnosis the TUI calls, `run
 * --diagnose`, the JUnit message, the reference path bit for bit, the cost at tiny, and the table of
 * docs/DIAGNOSE.md against the catalogue. */
#include <cJSON.h>
#include <hdf5.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include "driver/driver.h"
#include "model/safetensors.h"
#include "ref/linear.h"
#include "ref/convention.h"
#include "tests/lib/cli_util.h"
#include "tests/lib/harness.h"
#include "tui/worker.h"

/* What an engine's forward hooks typically store of a layer. */
static const char *const sparse_tensors[] = {"x", "q", "kv", "iq", "csel", "o", "out", NULL};

static void use_test_cache(void)
{
    H5Eset_auto2(H5E_DEFAULT, NULL, NULL); /* a probe for a group that is not there is no error */
    setenv("ATTNSCOPE_CACHE", as_test_tmpdir(), 1);
    setenv("OMP_NUM_THREADS", "1", 1); /* the runs are tiny: no thread start-up per step */
}

/* A driver whose checked side is a reference twin planted with `inject` (the engine off), tiny. */
static AsDriver *open_twin(const char *inject)
{
    AsDriverOptions o;
    as_driver_options_default(&o);
    o.no_engine = true;
    o.quiet = true;
    o.inject = inject;
    AsDriver *d;
    AsError err = {0};
    REQUIRE(as_driver_open(&o, &d, &err) == 0, "open with %s: %s", inject, err.msg);
    return d;
}

/* ---- the runs ---- */

/* A reference twin with `inject` over model (a preset name or a directory) in a precision ("auto": the
 * model's), dumped whole at dump. */
static void plant_in(const char *inject, const char *model, const char *precision, const char *dump)
{
    char script[700];
    snprintf(script, sizeof script, "%s/plant-%s.json", as_test_tmpdir(), inject);
    FILE *f = fopen(script, "w");
    REQUIRE(f, "writing %s", script);
    fprintf(f, "{\"model\": \"%s\", \"inject\": \"%s\", \"engine\": \"off\", \"precision\": \"%s\", \"steps\": "
               "[{\"prefill\": 16}, {\"decode\": 2}], \"dump\": {\"path\": \"%s\", \"layers\": \"all\", \"steps\": "
               "\"all\"}}", model, inject, precision, dump);
    fclose(f);
    AsCliResult *r = malloc(sizeof *r);
    as_cli_run(r, AS_ARGS("run", "-q", script));
    REQUIRE(r->status == 0 || r->status == 1, "run with %s planted: exit %d %s", inject, r->status, r->err);
    free(r);
}

static void plant(const char *inject, const char *model, const char *dump) { plant_in(inject, model, "auto", dump); }

static bool in_list(const char *name, const char *const *list)
{
    for (int i = 0; list[i]; i++)
        if (!strcmp(list[i], name))
            return true;
    return false;
}

/* Every dataset of the engine side that is not in keep deleted: what an engine that stores only those
 * would have written. */
static void keep_only(const char *dump, const char *const *keep)
{
    hid_t f = H5Fopen(dump, H5F_ACC_RDWR, H5P_DEFAULT);
    REQUIRE(f >= 0, "open %s", dump);
    for (int step = 0; step < 16; step++) {
        char path[96], names[64][64];
        snprintf(path, sizeof path, "/steps/%04d", step);
        if (H5Lexists(f, path, H5P_DEFAULT) <= 0)
            continue;
        for (int l = 0; l < 64; l++) {
            snprintf(path, sizeof path, "/steps/%04d/layers/%02d", step, l);
            if (H5Lexists(f, path, H5P_DEFAULT) <= 0)
                continue;
            snprintf(path, sizeof path, "/steps/%04d/layers/%02d/engine", step, l);
            hid_t g = H5Gopen2(f, path, H5P_DEFAULT);
            H5G_info_t gi;
            REQUIRE(g >= 0 && H5Gget_info(g, &gi) >= 0 && gi.nlinks <= 64, "list %s", path);
            for (hsize_t i = 0; i < gi.nlinks; i++)
                REQUIRE(H5Lget_name_by_idx(g, ".", H5_INDEX_NAME, H5_ITER_INC, i, names[i], sizeof names[i],
                                           H5P_DEFAULT) > 0, "name %llu of %s", (unsigned long long)i, path);
            for (hsize_t i = 0; i < gi.nlinks; i++)
                if (!in_list(names[i], keep))
                    REQUIRE(H5Ldelete(g, names[i], H5P_DEFAULT) >= 0, "delete %s/%s", path, names[i]);
            H5Gclose(g);
        }
    }
    H5Fclose(f);
}

static void copy_file(const char *from, const char *to)
{
    size_t len;
    char *data = as_slurp(from, &len);
    REQUIRE(data, "read %s", from);
    FILE *f = fopen(to, "wb");
    REQUIRE(f && fwrite(data, 1, len, f) == len, "write %s", to);
    fclose(f);
    free(data);
}

/* What the diagnoses of a report say. */
typedef struct {
    int runs;                   /* layer runs diagnosed (re-run) */
    int step, layer;            /* the first of them */
    char tensor[32];
    char named[8][32];          /* the conventions it names */
    int n_named;
    bool inherited;
    char text[800];
    char other[32];             /* a convention some diagnosis names besides `want` ("" none) */
    bool mismatch;              /* the report's verdict */
    int mm_step;                /* the first mismatching layer run (-1: none) and its cause */
    char mm_cause[300];
} Diag;

static void read_diagnoses(const char *report, const char *want, Diag *d)
{
    memset(d, 0, sizeof *d);
    d->step = d->layer = d->mm_step = -1;
    char *text = as_slurp(report, NULL);
    REQUIRE(text, "read %s", report);
    cJSON *root = cJSON_Parse(text);
    free(text);
    REQUIRE(root, "%s parses", report);
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(root, "verdict");
    d->mismatch = cJSON_IsString(v) && !strcmp(v->valuestring, "MISMATCH");
    const cJSON *st, *ly;
    cJSON_ArrayForEach(st, cJSON_GetObjectItemCaseSensitive(root, "steps"))
    {
        cJSON_ArrayForEach(ly, cJSON_GetObjectItemCaseSensitive(st, "layers"))
        {
            const cJSON *vd = cJSON_GetObjectItemCaseSensitive(ly, "verdict"), *cause;
            if (d->mm_step < 0 && cJSON_IsString(vd) && !strcmp(vd->valuestring, "MISMATCH")) {
                d->mm_step = (int)cJSON_GetObjectItemCaseSensitive(st, "step")->valuedouble;
                cause = cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(ly, "cause"), "line");
                snprintf(d->mm_cause, sizeof d->mm_cause, "step %d, layer %d: %s", d->mm_step,
                         (int)cJSON_GetObjectItemCaseSensitive(ly, "layer")->valuedouble,
                         cJSON_IsString(cause) ? cause->valuestring : "-");
            }
            const cJSON *dg = cJSON_GetObjectItemCaseSensitive(ly, "diagnosis");
            if (!dg || !cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(dg, "ran")))
                continue;
            bool first = d->runs++ == 0;
            const cJSON *m;
            cJSON_ArrayForEach(m, cJSON_GetObjectItemCaseSensitive(dg, "matches"))
            {
                const char *name = cJSON_GetObjectItemCaseSensitive(m, "convention")->valuestring;
                if (first && d->n_named < 8)
                    snprintf(d->named[d->n_named++], sizeof d->named[0], "%s", name);
                if (strcmp(name, want) && !d->other[0])
                    snprintf(d->other, sizeof d->other, "%s", name);
            }
            if (!first)
                continue;
            d->step = (int)cJSON_GetObjectItemCaseSensitive(st, "step")->valuedouble;
            d->layer = (int)cJSON_GetObjectItemCaseSensitive(ly, "layer")->valuedouble;
            snprintf(d->tensor, sizeof d->tensor, "%s", cJSON_GetObjectItemCaseSensitive(dg, "tensor")->valuestring);
            d->inherited = cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(dg, "inherited"));
            snprintf(d->text, sizeof d->text, "%s", cJSON_GetObjectItemCaseSensitive(dg, "text")->valuestring);
        }
    }
    cJSON_Delete(root);
}

/* check --diagnose of dump against model; its diagnoses in d (want: the convention planted). */
static void diagnose(const char *dump, const char *model, const char *want, Diag *d)
{
    char report[600];
    snprintf(report, sizeof report, "%s.json", dump);
    AsCliResult *r = malloc(sizeof *r);
    as_cli_run(r, AS_ARGS("check", dump, "--model", model, "--diagnose", "--report-json", report, "-q"));
    REQUIRE(r->status == 0 || r->status == 1, "check --diagnose of %s: exit %d %s", dump, r->status, r->err);
    free(r);
    read_diagnoses(report, want, d);
}

/* ---- models whose fp8 block scales differ where the two block readings differ ---- */

static AsDType dtype_named(const char *name)
{
    for (int t = 0; t < AS_DT_COUNT; t++)
        if (as_st_dtype_name((AsDType)t) && !strcmp(as_st_dtype_name((AsDType)t), name))
            return (AsDType)t;
    return AS_DT_COUNT;
}

/* tiny rewritten into dir: each fp8 weight's e8m0 scale exponents alternate by four (a factor of 16)
 * between neighbouring blocks, as 32x32 blocks (block128 false) or as one scale per 128x128 block (block128
 * true). (By one, an exponent byte read as a number would change a block's scale by a factor of 1.008
 * against its neighbour's: after the rmsnorm behind wq_a that is within the rule of one common scale,
 * which is what reading 32x32 blocks as 128x128 gives wq_a.) */
static void tiny_variant(const char *dir, bool block128)
{
    char tiny[1024], path[1200], to[1200];
    AsError err = {0};
    REQUIRE(as_resolve_model("tiny", 1, tiny, sizeof tiny, true, &err) == 0, "tiny: %s", err.msg);
    mkdir(dir, 0755);
    snprintf(path, sizeof path, "%s/config.json", tiny);
    snprintf(to, sizeof to, "%s/config.json", dir);
    copy_file(path, to);
    snprintf(path, sizeof path, "%s/model.safetensors", tiny);
    AsStContents c;
    REQUIRE(as_st_open_contents(path, &c, &err) == 0, "%s: %s", path, err.msg);
    AsStTensorSpec *spec = calloc((size_t)c.n, sizeof *spec);
    uint8_t **owned = calloc((size_t)c.n, sizeof *owned);
    REQUIRE(spec && owned, "memory");
    for (int i = 0; i < c.n; i++) {
        const AsStEntry *e = &c.entries[i];
        AsStTensorSpec *t = &spec[i];
        snprintf(t->name, sizeof t->name, "%s", e->name);
        t->dtype = dtype_named(e->dtype);
        REQUIRE(t->dtype != AS_DT_COUNT && e->ndim <= 4, "%s: dtype %s", e->name, e->dtype);
        t->ndim = e->ndim;
        memcpy(t->shape, e->shape, sizeof(int64_t) * (size_t)e->ndim);
        t->data = e->data;
        if (t->dtype != AS_DT_F8_E8M0)
            continue;
        const int64_t R = e->shape[0], C = e->shape[1];
        const int64_t r = block128 ? (R * 32 + 127) / 128 : R, cc = block128 ? (C * 32 + 127) / 128 : C;
        uint8_t *b = owned[i] = malloc((size_t)(r * cc));
        REQUIRE(b, "memory");
        for (int64_t y = 0; y < r; y++)
            for (int64_t x = 0; x < cc; x++) {
                const int64_t sy = block128 ? y * 4 : y, sx = block128 ? x * 4 : x;
                b[y * cc + x] = (uint8_t)(e->data[sy * C + sx] + 4 * ((y + x) & 1));
            }
        t->shape[0] = r;
        t->shape[1] = cc;
        t->data = b;
    }
    snprintf(to, sizeof to, "%s/model.safetensors", dir);
    const char **meta = calloc((size_t)(2 * c.n_meta + 1), sizeof *meta);
    REQUIRE(meta, "memory");
    for (int i = 0; i < 2 * c.n_meta; i++)
        meta[i] = c.meta[i];
    AsStWriteOptions wo = {.metadata = meta};
    REQUIRE(as_st_write(to, spec, c.n, &wo, &err) == 0, "write %s: %s", to, err.msg);
    for (int i = 0; i < c.n; i++)
        free(owned[i]);
    free(owned);
    free(meta);
    free(spec);
    as_st_contents_free(&c);
}

/* The model a convention is planted on: tiny, or the variant whose scales tell it apart. */
static const char *model_for(AsConvention c, char *buf, size_t n)
{
    if (c != AS_CONV_FP8_SCALE_32_AS_128 && c != AS_CONV_FP8_SCALE_128_AS_32)
        return "tiny";
    bool b128 = c == AS_CONV_FP8_SCALE_128_AS_32;
    snprintf(buf, n, "%s/%s", as_test_tmpdir(), b128 ? "tiny-block128" : "tiny-vary32");
    struct stat sb;
    if (stat(buf, &sb))
        tiny_variant(buf, b128);
    return buf;
}

/* ---- the catalogue, planted ---- */

/* One convention planted, its full and sparse dumps diagnosed. */
static void plant_and_diagnose(AsConvention conv)
{
    const AsConvDesc *c = &as_conv_desc[conv];
    char mbuf[700], full[700], sparse[700];
    const char *model = model_for(conv, mbuf, sizeof mbuf);
    snprintf(full, sizeof full, "%s/%s.h5", as_test_tmpdir(), c->name);
    snprintf(sparse, sizeof sparse, "%s/%s-sparse.h5", as_test_tmpdir(), c->name);
    plant(c->name, model, full);
    copy_file(full, sparse);
    keep_only(sparse, sparse_tensors);
    Diag d, ds;
    diagnose(full, model, c->name, &d);
    diagnose(sparse, model, c->name, &ds);
    if (c->rule) { /* within SPEC 6's rule: no mismatch, nothing diagnosed */
        CHECK(!d.mismatch && !d.runs && !ds.mismatch && !ds.runs,
              "%s (%s) is within the rule, yet: mismatch %d, %d runs diagnosed (sparse: %d, %d)", c->name, c->rule,
              d.mismatch, d.runs, ds.mismatch, ds.runs);
        as_test_note("%-20s within the rule: the check passes, nothing diagnosed", c->name);
        return;
    }
    CHECK(d.runs > 0 && d.n_named == 1 && !strcmp(d.named[0], c->name) && !d.inherited,
          "%s: the first diagnosis (step %d, layer %d, %s) names %d conventions (%s%s): %s; first mismatch %s",
          c->name, d.step, d.layer, d.tensor, d.n_named, d.n_named ? d.named[0] : "-", d.n_named > 1 ? ", ..." : "",
          d.text, d.mm_cause);
    CHECK(!strcmp(d.tensor, as_tensor_desc[c->first].name), "%s: first diagnosed at %s, the catalogue says %s",
          c->name, d.tensor, as_tensor_desc[c->first].name);
    CHECK(!d.other[0], "%s: a diagnosis names %s too", c->name, d.other);
    as_test_note("%-20s step %d, layer %d, %-10s %s", c->name, d.step, d.layer, d.tensor, d.text);
    /* the sparse dump: no other convention is ever named, and each mismatch is diagnosed as this one unless
     * nothing it stores mismatches (a quantiser's own rounding, a scale the selection does not see), or the
     * engine's state has diverged unseen before its first stored mismatch (the dump does not store what
     * showed it at the step the full dump is diagnosed at: the re-run starts from the reference's state) */
    CHECK(!ds.other[0], "%s, sparse dump: a diagnosis names %s too", c->name, ds.other);
    if (!ds.mismatch) {
        CHECK(!ds.n_named || !strcmp(ds.named[0], c->name), "%s, sparse dump: %s", c->name, ds.text);
        as_test_note("%-20s   sparse: nothing stored mismatches%s%s", "", ds.runs ? "; diagnosed: " : "",
                     ds.runs ? ds.text : "");
        return;
    }
    if (ds.mm_step > d.step && !ds.n_named) {
        as_test_note("%-20s   sparse: first stored mismatch at step %d, after the state diverged at step %d: %s",
                     "", ds.mm_step, d.step, ds.text);
        return;
    }
    CHECK(ds.runs > 0 && ds.n_named == 1 && !strcmp(ds.named[0], c->name) && !ds.inherited,
          "%s, sparse dump: the first diagnosis (step %d, layer %d, %s) names %d conventions (%s): %s; first "
          "mismatch %s", c->name, ds.step, ds.layer, ds.tensor, ds.n_named, ds.n_named ? ds.named[0] : "-", ds.text,
          ds.mm_cause);
    as_test_note("%-20s   sparse: step %d, layer %d, %-6s named", "", ds.step, ds.layer, ds.tensor);
}

TEST(diagnose_each_convention_planted_is_named_alone)
{
    use_test_cache();
    for (int i = 1; i < AS_CONV_COUNT; i++)
        plant_and_diagnose((AsConvention)i);
}

/* A planted fault that is no convention: the diagnosis says so, naming nothing. */
TEST(diagnose_a_fault_outside_the_catalogue_is_none)
{
    use_test_cache();
    char dump[700];
    snprintf(dump, sizeof dump, "%s/fp4-scale.h5", as_test_tmpdir());
    plant("fp4-scale", "tiny", dump);
    Diag d;
    diagnose(dump, "tiny", "-", &d);
    CHECK(d.runs > 0 && d.n_named == 0 && !d.inherited && strstr(d.text, "none of the catalogue reproduces it"),
          "fp4-scale: %s", d.text);
    CHECK(!strcmp(d.tensor, "latent_q") && d.layer == 1 && d.step == 0, "diagnosed at step %d, layer %d, %s", d.step,
          d.layer, d.tensor);
    as_test_note("%s", d.text);
}

/* The words a user reads: the summary and the JUnit failure carry the diagnosis. */
TEST(diagnose_text_and_junit)
{
    use_test_cache();
    char dump[700], junit[760];
    snprintf(dump, sizeof dump, "%s/rope-halves-iq-words.h5", as_test_tmpdir());
    snprintf(junit, sizeof junit, "%s.xml", dump);
    plant("rope-halves-iq", "tiny", dump);
    AsCliResult *r = malloc(sizeof *r);
    as_cli_run(r, AS_ARGS("check", dump, "--diagnose", "--junit", junit, "-q"));
    const char *want = "layer 1 iq_pre: matches the reference with RoPE on halves (NeoX) instead of interleaved pairs "
                       "in the index queries: your indexer rotates the wrong layout";
    CHECK(r->status == 1 && strstr(r->out, want), "exit %d, the summary lacks '%s':\n%s", r->status, want, r->out);
    char *x = as_slurp(junit, NULL);
    REQUIRE(x, "read %s", junit);
    char msg[400];
    snprintf(msg, sizeof msg, "; diagnosis: %s\" type=\"mismatch\"", want);
    CHECK(strstr(x, msg) && strstr(x, "\ndiagnosis: layer 1 iq_pre"), "the JUnit failure message and text carry the "
          "diagnosis");
    free(x);
    free(r);
}

/* `run --diagnose` (and the script's "diagnose": true) diagnose as they go. */
TEST(diagnose_run_with_a_planted_convention)
{
    use_test_cache();
    char script[600], report[600];
    snprintf(script, sizeof script, "%s/run-diag.json", as_test_tmpdir());
    snprintf(report, sizeof report, "%s/run-diag-report.json", as_test_tmpdir());
    FILE *f = fopen(script, "w");
    REQUIRE(f, "write %s", script);
    fprintf(f, "{\"model\": \"tiny\", \"inject\": \"ring-slot\", \"engine\": \"off\", \"diagnose\": true, "
               "\"steps\": [{\"prefill\": 9}, {\"decode\": 2}]}");
    fclose(f);
    AsCliResult *r = malloc(sizeof *r);
    as_cli_run(r, AS_ARGS("run", script, "--report-json", report, "-q"));
    CHECK(r->status == 1, "exit %d: %s", r->status, r->err);
    Diag d;
    read_diagnoses(report, "ring-slot", &d);
    CHECK(d.runs > 0 && d.n_named == 1 && !strcmp(d.named[0], "ring-slot") && d.step == 1 && !d.other[0],
          "run --diagnose: step %d, layer %d, %s: %s", d.step, d.layer, d.tensor, d.text);
    as_cli_run(r, AS_ARGS("run", script, "--report-json", report, "--diagnose", "-q"));
    CHECK(r->status == 1, "run --diagnose: exit %d", r->status);
    free(r);
}

/* The driver-level diagnosis the TUI calls on its worker: any layer run of the current step, on demand. */
TEST(diagnose_driver_on_demand)
{
    use_test_cache();
    const int threads = as_ref_threads();
    as_ref_set_threads(1); /* the cost measured is one thread's */
    AsDriver *d = open_twin("sink-unshifted");
    AsError err = {0};
    REQUIRE(as_driver_prefill(d, 12, &err) == 0, "prefill: %s", err.msg);
    for (int l = 0; l < d->model.cfg.n_layers; l++) {
        AsDiagnosis dx;
        struct timespec t0, t1;
        clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t0);
        REQUIRE(as_driver_diagnose(d, l, &dx, &err) == 0, "layer %d: %s", l, err.msg);
        clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t1);
        double secs = (double)(t1.tv_sec - t0.tv_sec) + 1e-9 * (double)(t1.tv_nsec - t0.tv_nsec);
        char text[800];
        as_diagnosis_text(&dx, text, sizeof text);
        CHECK(dx.ran && dx.tensor == AS_T_O && dx.n_match == 1 && dx.match[0].conv == AS_CONV_SINK_UNSHIFTED,
              "layer %d: %s", l, text);
        CHECK(secs < 0.5, "layer %d took %.3f s of CPU to diagnose", l, secs);
        if (l == 0)
            as_test_note("%s (%.1f ms of CPU, %d conventions tried)", text, 1e3 * secs, dx.n_tried);
    }
    AsDiagnosis dx;
    CHECK(as_driver_diagnose(d, 99, &dx, &err) == AS_EBADINPUT, "layer 99 refused");
    as_driver_close(d);

    /* a faithful twin: nothing to diagnose, and said so */
    d = open_twin("none");
    REQUIRE(as_driver_prefill(d, 12, &err) == 0, "prefill: %s", err.msg);
    REQUIRE(as_driver_diagnose(d, 3, &dx, &err) == 0, "%s", err.msg);
    CHECK(!dx.ran && strstr(dx.note, "nothing to diagnose"), "a faithful layer: %s", dx.note);
    as_driver_close(d);
    as_ref_set_threads(threads);
}

/* A convention that changes nothing on a model (128x128 blocks read as 32x32 on weights of 32x32 blocks)
 * leaves the twin the reference bit for bit, through every stage the conventions pass through. */
TEST(diagnose_reference_path_unchanged)
{
    use_test_cache();
    AsDriver *d = open_twin("fp8-scale-128-as-32");
    AsError err = {0};
    REQUIRE(as_driver_prefill(d, 16, &err) == 0 && as_driver_decode(d, 2, &err) == 0, "%s", err.msg);
    for (int l = 0; l < d->model.cfg.n_layers; l++)
        for (int t = 0; t < AS_T_COUNT; t++) {
            const AsHostTensor *a = &d->got_run[l].t[t], *b = &d->ref_run[l].t[t];
            size_t bytes = (size_t)as_ht_numel(a) * (a->type == AS_VT_U8 ? 1 : 4);
            CHECK(as_ht_numel(a) == as_ht_numel(b) && (!bytes || !memcmp(a->data, b->data, bytes)),
                  "layer %d %s differs from the reference", l, as_tensor_desc[t].name);
        }
    as_driver_close(d);
}

/* --inject takes the conventions too, and a wrong name lists what it takes. */
TEST(diagnose_inject_names)
{
    use_test_cache();
    AsFault f;
    AsConvention c;
    CHECK(as_inject_parse("sink-ignored", &f, &c) == 0 && f == AS_FAULT_SINK_IGNORED && c == AS_CONV_NONE, "a fault");
    CHECK(as_inject_parse("rope-halves-iq", &f, &c) == 0 && f == AS_FAULT_NONE && c == AS_CONV_ROPE_HALVES_IQ,
          "a convention");
    CHECK(as_inject_parse("rope-halves", &f, &c) == -1, "an unknown name");
    for (int i = 1; i < AS_FAULT_COUNT; i++) {
        AsConvention cv = as_conv_of_fault((AsFault)i);
        CHECK(i == AS_FAULT_FP4_SCALE ? cv == AS_CONV_NONE : !strcmp(as_conv_desc[cv].name, as_fault_desc[i].name),
              "fault %s and its convention share a name", as_fault_desc[i].name);
    }
    AsCliResult *r = malloc(sizeof *r);
    as_cli_run(r, AS_ARGS("tui", "--inject", "rope-halve-iq"));
    CHECK(r->status == 2 && strstr(r->err, "convention") && strstr(r->err, "docs/DIAGNOSE.md") &&
              strchr(r->err, '\n') == strrchr(r->err, '\n'),
          "one line naming the conventions: %s", r->err);
    free(r);
}

/* docs/DIAGNOSE.md's table is the catalogue's, as as_conv_markdown_table prints it. */
TEST(diagnose_docs_table_is_the_catalogue)
{
    char *doc = as_slurp("docs/DIAGNOSE.md", NULL);
    REQUIRE(doc, "read docs/DIAGNOSE.md (run from the repository root)");
    const char *begin = "<!-- catalogue: as_conv_markdown_table, checked by tests/test_diagnose.c -->\n";
    const char *end = "<!-- end of the catalogue -->";
    char *a = strstr(doc, begin), *b = a ? strstr(a, end) : NULL;
    REQUIRE(a && b, "docs/DIAGNOSE.md marks the catalogue with '%.40s...' and '%s'", begin, end);
    a += strlen(begin);
    char *table = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&table, &len);
    REQUIRE(f, "memory");
    as_conv_markdown_table(f);
    fclose(f);
    size_t doc_len = (size_t)(b - a);
    size_t same = 0;
    while (same < len && same < doc_len && table[same] == a[same])
        same++;
    CHECK(doc_len == len && same == len, "docs/DIAGNOSE.md's table differs from the catalogue from byte %zu: "
          "doc '%.80s', catalogue '%.80s' (regenerate it: as_conv_markdown_table)", same, a + same, table + same);
    free(table);
    free(doc);
}

/* The TUI's D: the worker runs the driver-level diagnosis off the interface thread; its line says it. */
TEST(diagnose_tui_worker_job)
{
    use_test_cache();
    AsDriver *d = open_twin("rope-halves-q");
    AsError err = {0};
    TuiWorker *w;
    REQUIRE(tui_worker_start(d, &w, &err) == 0, "worker: %s", err.msg);
    TuiJob job = {.kind = TUI_JOB_PREFILL, .n = 12};
    TuiJobResult res;
    REQUIRE(tui_worker_submit(w, &job), "prefill submitted");
    tui_worker_wait(w);
    REQUIRE(tui_worker_take_result(w, &res) && res.rc == 0, "prefill: %s", res.msg);
    job = (TuiJob){.kind = TUI_JOB_DIAGNOSE, .n = 2};
    REQUIRE(tui_worker_submit(w, &job), "diagnosis submitted");
    tui_worker_wait(w);
    REQUIRE(tui_worker_take_result(w, &res), "a result");
    CHECK(res.rc == 0 && res.layer == 2 && res.tensor == AS_T_Q &&
              strstr(res.msg, "layer 2 q: matches the reference with RoPE on halves (NeoX) instead of interleaved "
                              "pairs in the queries"),
          "diagnose job: rc %d, layer %d: %s", res.rc, res.layer, res.msg);
    as_test_note("%s", res.msg);
    tui_worker_stop(w);
    as_driver_close(d);
}

/* A script's "diagnose" and "expect.diagnosis" checked before anything runs: one line, exit 2. */
TEST(diagnose_script_fields_refused)
{
    use_test_cache();
    static const char *const bad[][2] = {
        {"{\"model\": \"tiny\", \"steps\": [{\"prefill\": 2}], \"diagnose\": 1}", "diagnose: true or false"},
        {"{\"model\": \"tiny\", \"steps\": [{\"prefill\": 2}], \"expect\": {\"verdict\": \"mismatch\", \"diagnosis\": "
         "\"rope-halves\"}}", "expect.diagnosis: a convention"},
        {"{\"model\": \"tiny\", \"steps\": [{\"prefill\": 2}], \"expect\": {\"verdict\": \"pass\", \"diagnosis\": "
         "\"sink-ignored\"}}", "only with \"mismatch\""},
    };
    char script[600];
    snprintf(script, sizeof script, "%s/bad-diag.json", as_test_tmpdir());
    AsCliResult *r = malloc(sizeof *r);
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        FILE *f = fopen(script, "w");
        REQUIRE(f, "write %s", script);
        fputs(bad[i][0], f);
        fclose(f);
        as_cli_run(r, AS_ARGS("run", "-q", script));
        CHECK(r->status == 2 && strstr(r->err, bad[i][1]) && strchr(r->err, '\n') == strrchr(r->err, '\n'),
              "%s: exit %d, '%s' (want exit 2, one line naming '%s')", bad[i][0], r->status, r->err, bad[i][1]);
    }
    free(r);
}

/* In bf16 precision (every projection the bf16 linear: the fp8 readings cannot apply, and are not tried),
 * conventions of each part of the layer are named as in fp8; the check follows the dump's precision. */
TEST(diagnose_bf16_precision)
{
    use_test_cache();
    static const AsConvention some[] = {AS_CONV_ROPE_HALVES_Q, AS_CONV_RING_SLOT, AS_CONV_ROPE_HALVES_IQ,
                                        AS_CONV_CAND_MASK_OFF, AS_CONV_NO_INVERSE_ROPE};
    for (size_t i = 0; i < sizeof some / sizeof some[0]; i++) {
        const AsConvDesc *c = &as_conv_desc[some[i]];
        char dump[700];
        snprintf(dump, sizeof dump, "%s/%s-bf16.h5", as_test_tmpdir(), c->name);
        plant_in(c->name, "tiny", "bf16", dump);
        Diag d;
        diagnose(dump, "tiny", c->name, &d);
        CHECK(d.runs > 0 && d.n_named == 1 && !strcmp(d.named[0], c->name) && !d.other[0] &&
                  !strcmp(d.tensor, as_tensor_desc[c->first].name),
              "bf16 %s: step %d, layer %d, %s: %s (first mismatch %s)", c->name, d.step, d.layer, d.tensor, d.text,
              d.mm_cause);
        as_test_note("bf16 %-16s step %d, layer %d, %s", c->name, d.step, d.layer, d.tensor);
    }
}
