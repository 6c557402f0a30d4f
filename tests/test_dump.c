/* dumps/: the writer and reader through their API. A run with every tensor (zero-sized ones
 * included) written and read back bit-equal; the diff group round trip; tensor filters;
 * atomicity (abort, abort-all from a signal handler, unwritable directory); malformed files
 * rejected with the object named. The builders here are shared with test_dump_cli.c. */
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <dirent.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "dumps/dump.h"
#include "dumps/h5guard.h"
#include "dumps/h5io.h"
#include "model/inputs.h"
#include "ref/numerics.h"
#include "ref/stack.h"
#include "tests/lib/harness.h"
#include "tests/lib/model_fixture.h"

/* ---- shared builders (declared again in test_dump_cli.c) -------------------------------- */

void tdump_fill_run(AsRun *r, const AsConfig *c, int layer, int step, int start_pos, int s, unsigned seed);
int tdump_write(const char *path, const AsConfig *cfg, unsigned seed, int plant_q, AsError *err);
int tdump_variant(const char *src, const char *dst, const char *kind);

static const int test_layers[] = {0, 1, 5}; /* ratio 0, ratio 2 (kv + index source), ratio 1 (cand source) */
static const struct {
    const char *kind;
    int start_pos, tokens;
} test_steps[] = {{"prefill", 0, 5}, {"decode", 5, 1}};

static float val(unsigned seed, int64_t i) { return as_bf16(sinf((float)i * 0.37f + (float)seed) * 3.0f); }

/* Every tensor of a layer, shaped as the schema says for its attributes, with varied values:
 * -inf scores, -1 indices, a NaN, a -0, a subnormal, zero-sized tensors at ratio 0. */
void tdump_fill_run(AsRun *r, const AsConfig *c, int layer, int step, int start_pos, int s, unsigned seed)
{
    as_run_init(r);
    int ratio = c->compress_ratios[layer], end = start_pos + s;
    r->layer = layer, r->step = step, r->start_pos = start_pos, r->s = s, r->ratio = ratio;
    r->rows_a_len = start_pos ? c->window : s;
    r->cols = start_pos ? c->window : (s < c->window ? s : c->window);
    r->compress_len = ratio ? end / ratio : 0;
    r->width = r->compress_len;
    r->k = r->width < c->index_topk ? r->width : c->index_topk;
    r->topk = r->cols + r->k;
    r->rows_b_len = r->compress_len;
    r->n_new = ratio ? (start_pos ? (end % ratio == 0) : s / ratio) : 0;
    r->indexer_ran = ratio > 0;
    r->rows_b_from = (AsProvenance){ratio ? 1 : -1, ratio ? step : -1};
    r->keys_from = (AsProvenance){ratio ? 5 : -1, step - 1};
    r->sel_from = (AsProvenance){layer, step};
    r->cand_from = (AsProvenance){ratio == 1 ? 5 : -1, ratio == 1 ? 0 : -1};
    for (int id = 0; id < AS_T_COUNT; id++) {
        int64_t sh[3];
        int nd = as_dump_expected_shape(c, s, r, (AsTensorId)id, sh);
        if (sh[0] < 0)
            sh[0] = r->compress_len; /* cache rows filled */
        void *p = as_run_shape(r, (AsTensorId)id, nd, sh[0], sh[1], sh[2]);
        REQUIRE(p, "allocating %s", as_tensor_desc[id].name);
        int64_t n = as_ht_numel(&r->t[id]);
        for (int64_t i = 0; i < n; i++) {
            unsigned sd = seed + (unsigned)id * 7u;
            switch (as_tensor_desc[id].type) {
            case AS_VT_BF16: ((float *)p)[i] = val(sd, i); break;
            case AS_VT_F32: ((float *)p)[i] = sinf((float)i * 0.11f + (float)sd) / 3.0f; break; /* not bf16 */
            case AS_VT_I32: ((int32_t *)p)[i] = (i % 4 == 3) ? -1 : (int32_t)((i * 5 + sd) % 50); break;
            case AS_VT_U8: ((uint8_t *)p)[i] = (uint8_t)((i / 3 + sd) % 2); break;
            }
        }
        if (id == AS_T_ISCORE || id == AS_T_ST_PART_SC)
            for (int64_t i = 0; i < n; i += 3)
                ((float *)p)[i] = -INFINITY;
    }
    float *o = r->t[AS_T_OUT].data;
    o[1] = NAN, o[2] = -0.0f, o[3] = as_bf16_to_f32(0x0001);
}

static AsDumpMeta test_meta(const AsConfig *cfg)
{
    return (AsDumpMeta){.cfg = cfg, .weights_name = "tiny (generated)", .weights_digest = "sha256:0123abcd",
                        .mode = "teacher", .version = "test-1", .created = "2025-01-02T03:04:05Z"};
}

/* Two steps x three layers, engine and ref sides and a diff; plant_q >= 0 changes one element
 * of the engine's q in step 0, layer 1 (token 1, head 2, channel 3 when plant_q = 1). */
int tdump_write(const char *path, const AsConfig *cfg, unsigned seed, int plant_q, AsError *err)
{
    AsDumpMeta meta = test_meta(cfg);
    AsDumpWriter *w;
    int rc = as_dump_create(path, &meta, &w, err);
    if (rc)
        return rc;
    float *h0 = malloc((size_t)6 * (size_t)cfg->dim * sizeof *h0);
    if (!h0) {
        as_dump_abort(w);
        return AS_ERUNTIME;
    }
    for (int i = 0; i < 6 * cfg->dim; i++)
        h0[i] = val(seed + 99, i);
    rc = as_dump_write_inputs(w, h0, 5, 0, err);
    if (!rc)
        rc = as_dump_write_inputs(w, h0 + 5 * cfg->dim, 1, 5, err);
    free(h0);
    for (int st = 0; !rc && st < 2; st++) {
        rc = as_dump_begin_step(w, st, test_steps[st].kind, test_steps[st].start_pos, test_steps[st].tokens, err);
        for (int li = 0; !rc && li < 3; li++) {
            AsRun eng, ref;
            tdump_fill_run(&ref, cfg, test_layers[li], st, test_steps[st].start_pos, test_steps[st].tokens, seed);
            as_run_init(&eng);
            if (as_run_copy(&eng, &ref))
                rc = AS_ERUNTIME;
            if (st == 0 && test_layers[li] == 1 && plant_q >= 0) {
                int64_t at = ((int64_t)plant_q * cfg->n_heads + 2) * cfg->head_dim + 3;
                ((float *)eng.t[AS_T_Q].data)[at] += 1.0f;
            }
            AsLayerDiff *d = malloc(sizeof *d);
            if (!d)
                rc = AS_ERUNTIME;
            if (!rc) {
                AsCompareOptions o;
                as_compare_options_default(&o);
                as_compare_layer(&eng, &ref, &o, d);
                rc = as_dump_write_layer(w, st, test_layers[li], &eng, &ref, d, AS_DUMP_ALL_TENSORS, err);
            }
            free(d);
            as_run_free(&eng);
            as_run_free(&ref);
        }
    }
    if (rc) {
        as_dump_abort(w);
        return rc;
    }
    return as_dump_commit(w, err);
}

static int copy_file(const char *src, const char *dst)
{
    FILE *in = fopen(src, "rb"), *out = in ? fopen(dst, "wb") : NULL;
    int rc = in && out ? 0 : -1;
    char buf[65536];
    size_t n;
    while (!rc && (n = fread(buf, 1, sizeof buf, in)) > 0)
        if (fwrite(buf, 1, n, out) != n)
            rc = -1;
    if (in)
        fclose(in);
    if (out && fclose(out))
        rc = -1;
    return rc;
}

/* A broken copy of a dump: "not-hdf5", "format", "version", "shape", "truncated", "unknown". */
int tdump_variant(const char *src, const char *dst, const char *kind)
{
    if (!strcmp(kind, "not-hdf5")) {
        FILE *f = fopen(dst, "w");
        if (!f)
            return -1;
        fputs("this is a text file, not a dump\n", f);
        return fclose(f);
    }
    if (copy_file(src, dst))
        return -1;
    if (!strcmp(kind, "truncated")) {
        struct stat st;
        return stat(dst, &st) ? -1 : truncate(dst, st.st_size / 2);
    }
    as_h5_init();
    hid_t f = H5Fopen(dst, H5F_ACC_RDWR, H5P_DEFAULT);
    if (f < 0)
        return -1;
    AsH5At at = {dst, "/"};
    int rc = 0;
    if (!strcmp(kind, "format")) {
        rc = H5Adelete(f, "format") < 0 || as_h5_put_str(f, "format", "something-else", at, NULL);
    } else if (!strcmp(kind, "version")) {
        rc = H5Adelete(f, "format_version") < 0 || as_h5_put_i64(f, "format_version", 2, at, NULL);
    } else if (!strcmp(kind, "shape") || !strcmp(kind, "unknown")) {
        bool shape = !strcmp(kind, "shape");
        hid_t g = H5Gopen2(f, "/steps/0000/layers/01/engine", H5P_DEFAULT);
        if (g < 0 || (shape && H5Ldelete(g, "q", H5P_DEFAULT) < 0)) {
            rc = -1;
        } else {
            hsize_t dims[3] = {5, 4, shape ? 63 : 64};
            hid_t sp = H5Screate_simple(3, dims, NULL);
            hid_t ds = H5Dcreate2(g, shape ? "q" : "q_extra", H5T_IEEE_F32LE, sp, H5P_DEFAULT, H5P_DEFAULT,
                                  H5P_DEFAULT);
            rc = ds < 0;
            if (ds >= 0)
                H5Dclose(ds);
            H5Sclose(sp);
        }
        if (g >= 0)
            H5Gclose(g);
    } else {
        rc = -1;
    }
    H5Fclose(f);
    return rc ? -1 : 0;
}

/* ---- helpers --------------------------------------------------------------------------- */

static void tiny(AsConfig *cfg)
{
    AsError err = {0};
    REQUIRE(as_config_preset("tiny", cfg, &err) == 0, "tiny preset: %s", err.msg);
}

static int dir_entries(const char *dir, char *first, size_t n)
{
    DIR *d = opendir(dir);
    int count = 0;
    if (!d)
        return -1;
    struct dirent *e;
    while ((e = readdir(d))) {
        if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, ".."))
            continue;
        if (!count && first)
            snprintf(first, n, "%s", e->d_name);
        count++;
    }
    closedir(d);
    return count;
}

static bool runs_equal(const AsRun *a, const AsRun *b, char *why, size_t n)
{
    const int *ia[] = {&a->ratio, &a->rows_a_len, &a->rows_b_len, &a->cols, &a->k, &a->topk, &a->width,
                       &a->compress_len, &a->n_new, &a->layer, &a->step, &a->start_pos, &a->s};
    const int *ib[] = {&b->ratio, &b->rows_a_len, &b->rows_b_len, &b->cols, &b->k, &b->topk, &b->width,
                       &b->compress_len, &b->n_new, &b->layer, &b->step, &b->start_pos, &b->s};
    for (size_t i = 0; i < sizeof ia / sizeof ia[0]; i++)
        if (*ia[i] != *ib[i]) {
            snprintf(why, n, "attribute %zu: %d vs %d", i, *ia[i], *ib[i]);
            return false;
        }
    if (a->indexer_ran != b->indexer_ran || memcmp(&a->rows_b_from, &b->rows_b_from, sizeof a->rows_b_from) ||
        memcmp(&a->keys_from, &b->keys_from, sizeof a->keys_from) || memcmp(&a->sel_from, &b->sel_from, sizeof a->sel_from) ||
        memcmp(&a->cand_from, &b->cand_from, sizeof a->cand_from)) {
        snprintf(why, n, "indexer_ran or provenance differ");
        return false;
    }
    for (int i = 0; i < AS_T_COUNT; i++) {
        const AsHostTensor *x = &a->t[i], *y = &b->t[i];
        if (!x->data != !y->data || x->ndim != y->ndim || memcmp(x->shape, y->shape, sizeof x->shape)) {
            snprintf(why, n, "%s: presence or shape differs", as_tensor_desc[i].name);
            return false;
        }
        size_t bytes = (size_t)as_ht_numel(x) * (x->type == AS_VT_U8 ? 1 : 4);
        if (x->data && memcmp(x->data, y->data, bytes)) {
            snprintf(why, n, "%s: values differ", as_tensor_desc[i].name);
            return false;
        }
    }
    return true;
}

/* ---- tests ----------------------------------------------------------------------------- */

TEST(dump_round_trip)
{
    AsConfig cfg;
    tiny(&cfg);
    char path[512];
    snprintf(path, sizeof path, "%s/run.h5", as_test_tmpdir());
    AsError err = {0};
    REQUIRE(tdump_write(path, &cfg, 3, 1, &err) == 0, "writing: %s", err.msg);
    AsDumpReader *r;
    REQUIRE(as_dump_open(path, &r, &err) == 0, "opening: %s", err.msg);
    const AsDumpInfo *in = as_dump_info(r);
    CHECK(in->format_version == 1 && !strcmp(in->mode, "teacher") && !strcmp(in->weights_digest, "sha256:0123abcd") &&
              !strcmp(in->weights_name, "tiny (generated)") && !strcmp(in->version, "test-1") &&
              !strcmp(in->created, "2025-01-02T03:04:05Z"),
          "root attributes: v%d mode %s digest %s", in->format_version, in->mode, in->weights_digest);
    CHECK(in->cfg.dim == cfg.dim && in->cfg.n_layers == cfg.n_layers && in->cfg.window == cfg.window,
          "config_json round trip");
    CHECK(in->n_steps == 2 && in->steps[0].n_layers == 3 && !strcmp(in->steps[1].kind, "decode") &&
              in->steps[1].start_pos == 5 && in->steps[1].tokens == 1,
          "steps: %d, layers %d", in->n_steps, in->n_steps ? in->steps[0].n_layers : -1);
    int checked = 0;
    for (int st = 0; st < 2; st++) {
        for (int li = 0; li < 3; li++) {
            const AsDumpLayerInfo *l = as_dump_find_layer(as_dump_find_step(r, st), test_layers[li]);
            REQUIRE(l, "step %d layer %d listed", st, test_layers[li]);
            CHECK(l->n_sides == 2 && as_dump_side_index(l, "engine") >= 0 && as_dump_side_index(l, "ref") >= 0,
                  "sides of step %d layer %d", st, l->layer);
            CHECK(l->side[0].tensors == AS_DUMP_ALL_TENSORS, "every tensor stored (mask %llx)",
                  (unsigned long long)l->side[0].tensors);
            AsRun want, got;
            tdump_fill_run(&want, &cfg, test_layers[li], st, test_steps[st].start_pos, test_steps[st].tokens, 3);
            as_run_init(&got);
            REQUIRE(as_dump_read_run(r, st, l->layer, "ref", &got, &err) == 0, "reading: %s", err.msg);
            char why[128] = "";
            CHECK(runs_equal(&got, &want, why, sizeof why), "step %d layer %d ref read back: %s", st, l->layer, why);
            checked++;
            as_run_free(&want);
            as_run_free(&got);
        }
    }
    CHECK(checked == 6, "six layers read back");

    /* the stored diff: step 0, layer 1 has the planted q difference */
    const AsDumpLayerInfo *l1 = as_dump_find_layer(as_dump_find_step(r, 0), 1);
    CHECK(l1 && l1->has_diff && l1->verdict == AS_V_MISMATCH && l1->worst_tensor == AS_T_Q, "indexed verdict %s",
          l1 ? as_verdict_name(l1->verdict) : "?");
    AsLayerDiff *d = malloc(sizeof *d), *want_d = malloc(sizeof *want_d);
    REQUIRE(d && want_d, "memory");
    char gs[64], ws[64];
    REQUIRE(as_dump_read_diff(r, 0, 1, d, gs, ws, &err) == 0, "reading the diff: %s", err.msg);
    AsRun e, f;
    tdump_fill_run(&f, &cfg, 1, 0, 0, 5, 3);
    as_run_init(&e);
    REQUIRE(as_run_copy(&e, &f) == 0, "copy");
    ((float *)e.t[AS_T_Q].data)[(1 * cfg.n_heads + 2) * cfg.head_dim + 3] += 1.0f;
    as_compare_layer(&e, &f, NULL, want_d);
    const AsTensorDiff *q = &d->t[AS_T_Q], *wq = &want_d->t[AS_T_Q];
    CHECK(!strcmp(gs, "engine") && !strcmp(ws, "ref"), "sides compared: %s vs %s", gs, ws);
    CHECK(d->verdict == AS_V_MISMATCH && d->worst_tensor == AS_T_Q && q->verdict == AS_V_MISMATCH, "diff verdicts");
    CHECK(q->max_abs == wq->max_abs && q->tol == wq->tol && q->worst == wq->worst && q->worst_coord[0] == 1 &&
              q->worst_coord[1] == 2 && q->worst_coord[2] == 3 && q->n_bad == 1 && q->worst_ulp == wq->worst_ulp,
          "q diff read back: max_abs %g worst %lld at %lld,%lld,%lld", q->max_abs, (long long)q->worst,
          (long long)q->worst_coord[0], (long long)q->worst_coord[1], (long long)q->worst_coord[2]);
    CHECK(d->t[AS_T_OUT].verdict == AS_V_PASS && d->t[AS_T_IDX].verdict == AS_V_PASS, "other tensors pass");
    as_run_free(&e);
    as_run_free(&f);
    free(d);
    free(want_d);

    float *h0;
    int tokens, first;
    REQUIRE(as_dump_read_inputs(r, &h0, &tokens, &first, &err) == 0, "inputs: %s", err.msg);
    bool same = tokens == 6 && first == 0;
    for (int i = 0; same && i < 6 * cfg.dim; i++)
        same = h0[i] == val(3 + 99, i);
    CHECK(same, "inputs read back: %d tokens from %d", tokens, first);
    free(h0);
    as_dump_close(r);
}

TEST(dump_selection_diff_round_trip)
{
    AsConfig cfg;
    tiny(&cfg);
    char path[512];
    snprintf(path, sizeof path, "%s/sel.h5", as_test_tmpdir());
    AsRun ref, eng;
    tdump_fill_run(&ref, &cfg, 5, 0, 0, 5, 1);
    as_run_init(&eng);
    REQUIRE(as_run_copy(&eng, &ref) == 0, "copy");
    ((int32_t *)eng.t[AS_T_WIDX].data)[2] = 7; /* a window difference: real */
    AsLayerDiff *d = malloc(sizeof *d), *back = malloc(sizeof *back);
    REQUIRE(d && back, "memory");
    as_compare_layer(&eng, &ref, NULL, d);
    REQUIRE(d->t[AS_T_WIDX].n_seldiffs == 1, "one selection difference");
    AsDumpMeta meta = test_meta(&cfg);
    AsDumpWriter *w;
    AsError err = {0};
    REQUIRE(as_dump_create(path, &meta, &w, &err) == 0, "create: %s", err.msg);
    REQUIRE(as_dump_begin_step(w, 0, "prefill", 0, 5, &err) == 0, "step: %s", err.msg);
    REQUIRE(as_dump_write_side(w, 0, 5, "mine", &eng, AS_DUMP_TENSOR_BIT(AS_T_WIDX), &err) == 0, "side: %s", err.msg);
    REQUIRE(as_dump_write_side(w, 0, 5, "theirs", &ref, AS_DUMP_TENSOR_BIT(AS_T_WIDX), &err) == 0, "side: %s", err.msg);
    REQUIRE(as_dump_write_diff(w, 0, 5, d, "mine", "theirs", &err) == 0, "diff: %s", err.msg);
    REQUIRE(as_dump_commit(w, &err) == 0, "commit: %s", err.msg);
    AsDumpReader *r;
    REQUIRE(as_dump_open(path, &r, &err) == 0, "open: %s", err.msg);
    const AsDumpLayerInfo *l = as_dump_find_layer(as_dump_find_step(r, 0), 5);
    CHECK(l && l->n_sides == 2 && l->side[0].tensors == AS_DUMP_TENSOR_BIT(AS_T_WIDX), "external side names, filter");
    char gs[64], ws[64];
    REQUIRE(as_dump_read_diff(r, 0, 5, back, gs, ws, &err) == 0, "read diff: %s", err.msg);
    const AsTensorDiff *a = &d->t[AS_T_WIDX], *b = &back->t[AS_T_WIDX];
    CHECK(!strcmp(gs, "mine") && !strcmp(ws, "theirs"), "side names %s %s", gs, ws);
    CHECK(b->n_seldiffs == 1 && b->seldiff[0].query == a->seldiff[0].query &&
              b->seldiff[0].n_only_got == a->seldiff[0].n_only_got && b->seldiff[0].only_got[0] == a->seldiff[0].only_got[0] &&
              b->seldiff[0].near_tie == a->seldiff[0].near_tie && b->n_real == 1 && b->verdict == AS_V_MISMATCH,
          "seldiffs read back: %d rows", b->n_seldiffs);
    as_dump_close(r);
    free(d);
    free(back);
    as_run_free(&ref);
    as_run_free(&eng);
}

TEST(dump_writer_refuses_bad_runs)
{
    AsConfig cfg;
    tiny(&cfg);
    char path[512];
    snprintf(path, sizeof path, "%s/bad.h5", as_test_tmpdir());
    AsDumpMeta meta = test_meta(&cfg);
    AsDumpWriter *w;
    AsError err = {0};
    meta.mode = "sideways";
    CHECK(as_dump_create(path, &meta, &w, &err) == AS_EBADINPUT && strstr(err.msg, "sideways"), "bad mode: %s", err.msg);
    meta.mode = "free";
    REQUIRE(as_dump_create(path, &meta, &w, &err) == 0, "create: %s", err.msg);
    AsRun r;
    tdump_fill_run(&r, &cfg, 1, 0, 0, 5, 1);
    CHECK(as_dump_write_layer(w, 0, 1, &r, NULL, NULL, AS_DUMP_ALL_TENSORS, &err) == AS_EBADINPUT &&
              strstr(err.msg, "not begun"),
          "layer before its step: %s", err.msg);
    REQUIRE(as_dump_begin_step(w, 0, "prefill", 0, 5, &err) == 0, "step: %s", err.msg);
    CHECK(as_dump_begin_step(w, 0, "prefill", 0, 5, &err) == AS_EBADINPUT, "step twice refused");
    as_run_shape(&r, AS_T_Q, 3, 5, 4, 63);
    CHECK(as_dump_write_layer(w, 0, 1, &r, NULL, NULL, AS_DUMP_ALL_TENSORS, &err) == AS_EBADINPUT &&
              strstr(err.msg, "q: shape [5, 4, 63], the schema says [5, 4, 64]"),
          "wrong q shape: %s", err.msg);
    r.ratio = 1;
    CHECK(as_dump_write_layer(w, 0, 1, &r, NULL, NULL, AS_DUMP_ALL_TENSORS, &err) == AS_EBADINPUT &&
              strstr(err.msg, "ratio"),
          "wrong ratio: %s", err.msg);
    as_run_free(&r);
    tdump_fill_run(&r, &cfg, 1, 0, 0, 5, 1);
    /* a refused call leaves the dump usable */
    CHECK(as_dump_write_layer(w, 0, 1, &r, NULL, NULL, AS_DUMP_ALL_TENSORS, &err) == 0, "good layer: %s", err.msg);
    CHECK(as_dump_write_layer(w, 0, 1, &r, NULL, NULL, AS_DUMP_ALL_TENSORS, &err) == AS_EBADINPUT &&
              strstr(err.msg, "written already"),
          "layer twice: %s", err.msg);
    as_run_free(&r);
    CHECK(as_dump_commit(w, &err) == 0, "commit: %s", err.msg);
    uint64_t mask;
    CHECK(as_dump_parse_tensor_list("q,kv,state", &mask, &err) == 0 &&
              mask == (AS_DUMP_TENSOR_BIT(AS_T_Q) | AS_DUMP_TENSOR_BIT(AS_T_KV) | AS_DUMP_TENSOR_BIT(AS_T_ST_RING) |
                       AS_DUMP_TENSOR_BIT(AS_T_ST_PART_KV) | AS_DUMP_TENSOR_BIT(AS_T_ST_PART_SC) |
                       AS_DUMP_TENSOR_BIT(AS_T_ST_CCACHE) | AS_DUMP_TENSOR_BIT(AS_T_ST_IKCACHE)),
          "tensor list");
    CHECK(as_dump_parse_tensor_list("q,nope", &mask, &err) == AS_EBADINPUT && strstr(err.msg, "nope"), "unknown: %s",
          err.msg);
}

TEST(dump_abort_leaves_nothing)
{
    AsConfig cfg;
    tiny(&cfg);
    const char *dir = as_test_tmpdir();
    char path[512], left[256] = "";
    snprintf(path, sizeof path, "%s/aborted.h5", dir);
    AsDumpMeta meta = test_meta(&cfg);
    AsDumpWriter *w;
    AsError err = {0};
    REQUIRE(as_dump_create(path, &meta, &w, &err) == 0, "create: %s", err.msg);
    REQUIRE(dir_entries(dir, left, sizeof left) == 1 && left[0] == '.' && strstr(left, ".aborted.h5.tmp-"),
            "one hidden temporary while writing (%s)", left);
    REQUIRE(as_dump_begin_step(w, 0, "prefill", 0, 5, &err) == 0, "step: %s", err.msg);
    as_dump_abort(w);
    CHECK(dir_entries(dir, left, sizeof left) == 0, "abort leaves nothing (found %s)", left);

    /* abort-all (the signal-handler path): temporaries unlinked, commit then fails cleanly */
    AsDumpWriter *w2;
    REQUIRE(as_dump_create(path, &meta, &w, &err) == 0, "create: %s", err.msg);
    snprintf(path, sizeof path, "%s/second.h5", dir);
    REQUIRE(as_dump_create(path, &meta, &w2, &err) == 0, "create: %s", err.msg);
    CHECK(dir_entries(dir, NULL, 0) == 2, "two temporaries");
    as_dump_abort_all();
    CHECK(dir_entries(dir, left, sizeof left) == 0, "abort-all leaves nothing (found %s)", left);
    CHECK(as_dump_commit(w, &err) == AS_ERUNTIME, "commit after abort-all fails: %s", err.msg);
    as_dump_abort(w2);
    CHECK(dir_entries(dir, left, sizeof left) == 0, "still nothing (found %s)", left);
}

static void on_sigint(int sig)
{
    (void)sig;
    as_dump_abort_all();
    _exit(130);
}

TEST(dump_sigint_leaves_nothing)
{
    AsConfig cfg;
    tiny(&cfg);
    const char *dir = as_test_tmpdir();
    char path[512], left[256] = "";
    snprintf(path, sizeof path, "%s/interrupted.h5", dir);
    fflush(NULL);
    pid_t pid = fork();
    REQUIRE(pid >= 0, "fork");
    if (pid == 0) {
        AsDumpMeta meta = test_meta(&cfg);
        AsDumpWriter *w;
        AsRun r;
        if (as_dump_create(path, &meta, &w, NULL) || as_dump_begin_step(w, 0, "prefill", 0, 5, NULL))
            _exit(3);
        tdump_fill_run(&r, &cfg, 5, 0, 0, 5, 2);
        if (as_dump_write_layer(w, 0, 5, &r, NULL, NULL, AS_DUMP_ALL_TENSORS, NULL))
            _exit(3);
        signal(SIGINT, on_sigint);
        raise(SIGINT); /* mid-dump, as a user's Ctrl-C */
        _exit(4);
    }
    int status = 0;
    waitpid(pid, &status, 0);
    CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 130, "child ended through the handler (status %d)", status);
    CHECK(dir_entries(dir, left, sizeof left) == 0, "an interrupted dump leaves nothing (found %s)", left);
}

TEST(dump_unwritable_directory)
{
    AsConfig cfg;
    tiny(&cfg);
    char dir[512], path[600], probe[600], left[256] = "";
    snprintf(dir, sizeof dir, "%s/ro", as_test_tmpdir());
    REQUIRE(mkdir(dir, 0555) == 0, "mkdir");
    chmod(dir, 0555);
    snprintf(probe, sizeof probe, "%s/probe", dir);
    int fd = open(probe, O_CREAT | O_WRONLY, 0600);
    bool honoured = fd < 0;
    if (fd >= 0) {
        close(fd);
        unlink(probe);
    }
    /* root ignores permissions: fall back to a read-only file system when there is one */
    const char *target = dir;
    if (!honoured) {
        if (access("/sys", F_OK) == 0 && open("/sys/attnscope-probe", O_CREAT | O_WRONLY, 0600) < 0)
            target = "/sys";
        else
            as_test_skip("running as root with no read-only directory to write into");
    }
    snprintf(path, sizeof path, "%s/dump.h5", target);
    AsDumpMeta meta = test_meta(&cfg);
    AsDumpWriter *w = NULL;
    AsError err = {0};
    CHECK(as_dump_create(path, &meta, &w, &err) == AS_ERUNTIME && !w, "unwritable %s: code %d, %s", target, err.code,
          err.msg);
    CHECK(strstr(err.msg, path) != NULL, "the message names the dump: %s", err.msg);
    CHECK(access(path, F_OK) != 0, "no file under the name");
    if (target == dir)
        CHECK(dir_entries(dir, left, sizeof left) == 0, "nothing left (found %s)", left);
    chmod(dir, 0755);
}

TEST(dump_malformed_rejected)
{
    AsConfig cfg;
    tiny(&cfg);
    const char *dir = as_test_tmpdir();
    char good[512];
    snprintf(good, sizeof good, "%s/good.h5", dir);
    AsError err = {0};
    REQUIRE(tdump_write(good, &cfg, 1, -1, &err) == 0, "writing: %s", err.msg);
    static const struct {
        const char *kind, *says;
    } cases[] = {
        {"not-hdf5", "not an HDF5 file"},
        {"format", "attribute 'format' is 'something-else'"},
        {"version", "format_version 2 is not supported"},
        {"shape", "/steps/0000/layers/01/engine/q: shape [5, 4, 63], the schema says [5, 4, 64]"},
        {"unknown", "/steps/0000/layers/01/engine/q_extra: not a tensor of the format"},
        {"truncated", "cannot open as HDF5"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char bad[600];
        snprintf(bad, sizeof bad, "%s/bad-%s.h5", dir, cases[i].kind);
        REQUIRE(tdump_variant(good, bad, cases[i].kind) == 0, "making the %s variant", cases[i].kind);
        AsDumpReader *r = NULL;
        err = (AsError){0};
        int rc = as_dump_open(bad, &r, &err);
        CHECK(rc == AS_EBADINPUT && !r, "%s: code %d", cases[i].kind, rc);
        CHECK(strstr(err.msg, cases[i].says) && strstr(err.msg, bad), "%s: message '%s' should say '%s' and name the file",
              cases[i].kind, err.msg, cases[i].says);
        CHECK(!strchr(err.msg, '\n'), "%s: one line", cases[i].kind);
        as_dump_close(r);
    }
    AsDumpReader *r = NULL;
    char missing[600];
    snprintf(missing, sizeof missing, "%s/missing.h5", dir);
    CHECK(as_dump_open(missing, &r, &err) == AS_EBADINPUT && strstr(err.msg, "No such file"), "missing: %s", err.msg);
}

TEST(dump_h5dump_reads_it)
{
    if (system("command -v h5dump >/dev/null 2>&1") != 0)
        as_test_skip("h5dump (hdf5-tools) not installed: the check that a stock HDF5 tool reads dumps is skipped");
    AsConfig cfg;
    tiny(&cfg);
    char path[512], cmd[1200];
    snprintf(path, sizeof path, "%s/plain.h5", as_test_tmpdir());
    AsError err = {0};
    REQUIRE(tdump_write(path, &cfg, 2, 1, &err) == 0, "writing: %s", err.msg);
    snprintf(cmd, sizeof cmd, "h5dump -H '%s' > '%s/h5dump.txt' 2>&1", path, as_test_tmpdir());
    int rc = system(cmd);
    CHECK(rc == 0, "h5dump -H exits %d", rc);
    snprintf(cmd, sizeof cmd, "grep -q 'DATASET \"state.ring\"' '%s/h5dump.txt' && grep -q 'ATTRIBUTE \"format\"' '%s/h5dump.txt'",
             as_test_tmpdir(), as_test_tmpdir());
    CHECK(system(cmd) == 0, "h5dump lists the datasets and the format attribute");
    snprintf(cmd, sizeof cmd, "h5dump -a /format '%s' 2>&1 | grep -q '\"attnscope-dump\"'", path);
    CHECK(system(cmd) == 0, "h5dump reads the format attribute's value");
    snprintf(cmd, sizeof cmd, "h5dump -d /steps/0000/layers/05/ref/idx '%s' > /dev/null 2>&1", path);
    CHECK(system(cmd) == 0, "h5dump reads a dataset's data");
}

/* The reference's own runs (tiny preset: the window wraps, ratio-2 groups complete on alternate
 * steps, candidates narrow) fit the schema and come back bit-equal: a prefill of 13 tokens and
 * three decode steps, every layer, every tensor. */
TEST(dump_reference_runs_round_trip)
{
    AsModel *m = as_test_model("tiny", NULL, 11);
    const AsConfig *c = &m->cfg;
    AsRefStack k;
    AsError err = {0};
    REQUIRE(as_ref_stack_init(&k, m, &err) == 0, "stack: %s", err.msg);
    char path[512];
    snprintf(path, sizeof path, "%s/ref.h5", as_test_tmpdir());
    AsDumpMeta meta = test_meta(c);
    meta.mode = "reference-only";
    AsDumpWriter *w;
    REQUIRE(as_dump_create(path, &meta, &w, &err) == 0, "create: %s", err.msg);
    int n_steps = 4, lens[4] = {13, 1, 1, 1}, pos = 0;
    AsRun *runs = calloc((size_t)(n_steps * c->n_layers), sizeof *runs);
    REQUIRE(runs, "memory");
    for (int st = 0; st < n_steps; st++) {
        float *h0 = malloc(sizeof(float) * (size_t)lens[st] * (size_t)c->dim);
        REQUIRE(h0, "memory");
        as_inputs_synthetic(5, pos, lens[st], c->dim, h0);
        REQUIRE(as_dump_write_inputs(w, h0, lens[st], pos, &err) == 0, "inputs: %s", err.msg);
        REQUIRE(as_ref_begin_step(&k, h0, pos, lens[st], &err) == 0, "begin step %d: %s", st, err.msg);
        REQUIRE(as_dump_begin_step(w, st, st ? "decode" : "prefill", pos, lens[st], &err) == 0, "step: %s", err.msg);
        for (int l = 0; l < c->n_layers; l++) {
            AsRun *r = &runs[st * c->n_layers + l];
            as_run_init(r);
            REQUIRE(as_ref_next_layer(&k, NULL, r, &err) == 0, "step %d layer %d: %s", st, l, err.msg);
            int rc = as_dump_write_layer(w, st, l, NULL, r, NULL, AS_DUMP_ALL_TENSORS, &err);
            CHECK(rc == 0, "step %d layer %d: the reference's run does not fit the schema: %s", st, l, err.msg);
        }
        pos += lens[st];
        free(h0);
    }
    REQUIRE(as_dump_commit(w, &err) == 0, "commit: %s", err.msg);
    AsDumpReader *rd;
    REQUIRE(as_dump_open(path, &rd, &err) == 0, "open: %s", err.msg);
    int equal = 0;
    for (int st = 0; st < n_steps; st++) {
        for (int l = 0; l < c->n_layers; l++) {
            AsRun back;
            as_run_init(&back);
            AsRun *want = &runs[st * c->n_layers + l];
            if (as_dump_read_run(rd, st, l, "ref", &back, &err) != 0) {
                CHECK(0, "step %d layer %d: %s", st, l, err.msg);
                continue;
            }
            /* the reference may leave its own bookkeeping fields at other values */
            back.layer = want->layer, back.step = want->step, back.start_pos = want->start_pos, back.s = want->s;
            char why[128] = "";
            bool same = runs_equal(&back, want, why, sizeof why);
            CHECK(same, "step %d layer %d read back: %s", st, l, why);
            equal += same;
            as_run_free(&back);
        }
    }
    CHECK(equal == n_steps * c->n_layers, "%d of %d layer runs bit-equal", equal, n_steps * c->n_layers);
    as_dump_close(rd);
    for (int i = 0; i < n_steps * c->n_layers; i++)
        as_run_free(&runs[i]);
    free(runs);
    as_ref_stack_free(&k);
    as_test_model_free(m);
}

static int guard_writes(void *ctx, AsError *err)
{
    int *shared = ctx;
    shared[0] = 42;
    return as_err(err, AS_EBADINPUT, "child says no");
}

static int guard_crashes(void *ctx, AsError *err)
{
    (void)ctx, (void)err;
    raise(SIGSEGV); /* what HDF5 does on some damaged files */
    return 0;
}

/* The child-process guard around HDF5 reads: the code, the message and the shared memory come
 * back; a crash becomes AS_EBADINPUT naming the object. */
TEST(dump_guard_turns_a_crash_into_an_error)
{
    int *shared = as_guard_alloc(sizeof(int) * 4);
    REQUIRE(shared, "shared memory");
    AsError err = {0};
    int rc = as_guard_run(guard_writes, shared, "dump x.h5", &err);
    CHECK(rc == AS_EBADINPUT && !strcmp(err.msg, "child says no") && shared[0] == 42,
          "code %d, message '%s', shared %d", rc, err.msg, shared[0]);
    as_guard_free(shared, sizeof(int) * 4);
    err = (AsError){0};
    rc = as_guard_run(guard_crashes, NULL, "dump x.h5: /steps/0000", &err);
    CHECK(rc == AS_EBADINPUT && strstr(err.msg, "dump x.h5: /steps/0000: damaged: the HDF5 library crashed"),
          "a crash in the child: code %d, '%s'", rc, err.msg);
}

/* A dump in the oldest HDF5 format (what h5py and most tools write by default: no checksums)
 * takes the guarded path for its data and reads back the same. */
TEST(dump_legacy_format_reads_the_same)
{
    if (system("command -v h5repack >/dev/null 2>&1") != 0)
        as_test_skip("h5repack (hdf5-tools) not installed: no way to make an old-format copy");
    AsConfig cfg;
    tiny(&cfg);
    char path[512], old[600], cmd[1400];
    snprintf(path, sizeof path, "%s/new.h5", as_test_tmpdir());
    snprintf(old, sizeof old, "%s/old.h5", as_test_tmpdir());
    AsError err = {0};
    REQUIRE(tdump_write(path, &cfg, 8, 1, &err) == 0, "writing: %s", err.msg);
    snprintf(cmd, sizeof cmd, "h5repack '%s' '%s' >/dev/null 2>&1", path, old);
    REQUIRE(system(cmd) == 0, "h5repack");
    AsDumpReader *a, *b;
    REQUIRE(as_dump_open(path, &a, &err) == 0, "open new: %s", err.msg);
    REQUIRE(as_dump_open(old, &b, &err) == 0, "open old-format copy: %s", err.msg);
    AsRun x, y;
    as_run_init(&x);
    as_run_init(&y);
    REQUIRE(as_dump_read_run(a, 1, 5, "engine", &x, &err) == 0, "read: %s", err.msg);
    REQUIRE(as_dump_read_run(b, 1, 5, "engine", &y, &err) == 0, "read old: %s", err.msg);
    char why[128] = "";
    CHECK(runs_equal(&x, &y, why, sizeof why), "old-format copy reads the same: %s", why);
    AsLayerDiff *d = malloc(sizeof *d);
    REQUIRE(d, "memory");
    char gs[64] = "";
    CHECK(as_dump_read_diff(b, 0, 1, d, gs, NULL, &err) == 0 && d->verdict == AS_V_MISMATCH && !strcmp(gs, "engine") &&
              d->t[AS_T_Q].worst_coord[1] == 2,
          "old-format diff: %s", err.msg);
    float *h0 = NULL;
    int n = 0, first = -1;
    CHECK(as_dump_read_inputs(b, &h0, &n, &first, &err) == 0 && n == 6, "old-format inputs: %s", err.msg);
    free(h0);
    free(d);
    as_run_free(&x);
    as_run_free(&y);
    as_dump_close(a);
    as_dump_close(b);
}
