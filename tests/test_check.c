/* `attnscope check`: a dump of a faithful twin replays clean; the same dump with one element of
 * one tensor altered is caught at that step, layer, tensor and coordinate; a wrong model is
 * refused. Partial dumps (absent tensors listed, not judged; --require), a dump without a digest,
 * a planted near-tie in a publisher's selection inherited by the layers that reuse it, tie-order
 * differences under each convention (--tie-order), a TUI-saved decode step (state_in) and a dump
 * that starts mid-run with its inputs from position 0. The dumps come from `run` with the fault
 * "none" (a faithful twin as side "engine"). */
#include <cJSON.h>
#include <hdf5.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "dumps/dump.h"
#include "dumps/schema.h"
#include "ref/candidates.h"
#include "ref/indexer.h"
#include "ref/numerics.h"
#include "tests/lib/cli_util.h"
#include "tests/lib/harness.h"
#include "tui/worker.h"

/* A faithful twin's dump of tiny: steps and layers as given, tensors (NULL: all). */
static void make_dump_with(char *dump, size_t n, const char *name, const char *model, const char *steps,
                           const char *layers, const char *tensors)
{
    setenv("ATTNSCOPE_CACHE", as_test_tmpdir(), 1);
    char script[600];
    snprintf(script, sizeof script, "%s/%s.json", as_test_tmpdir(), name);
    snprintf(dump, n, "%s/%s.h5", as_test_tmpdir(), name);
    FILE *f = fopen(script, "w");
    REQUIRE(f, "writing %s", script);
    fprintf(f, "{\"model\": %s, \"inject\": \"none\", \"steps\": %s, \"dump\": {\"path\": \"%s\", \"layers\": %s, "
               "\"steps\": \"all\"%s%s%s}}", model, steps, dump, layers, tensors ? ", \"tensors\": \"" : "",
            tensors ? tensors : "", tensors ? "\"" : "");
    fclose(f);
    AsCliResult *r = malloc(sizeof *r);
    as_cli_run(r, AS_ARGS("run", "-q", script));
    REQUIRE(r->status == 0, "run with a faithful twin: exit %d %s", r->status, r->err);
    free(r);
}

static void make_dump(char *dump, size_t n)
{
    make_dump_with(dump, n, "twin", "\"tiny\"", "[{\"prefill\": 9}, {\"decode\": 3}]", "[0, 3, 5, 7]", NULL);
}

/* The summary's lines, as notes (what check said, for the record). */
static void note_out(const char *out)
{
    for (const char *p = out; p && *p;) {
        const char *e = strchr(p, '\n');
        int len = e ? (int)(e - p) : (int)strlen(p);
        as_test_note("  %.*s", len, p);
        p = e ? e + 1 : NULL;
    }
}

/* ---- HDF5 edits of a dump (what a user's engine might have written instead) ---- */

static hid_t open_rw(const char *file)
{
    hid_t f = H5Fopen(file, H5F_ACC_RDWR, H5P_DEFAULT);
    REQUIRE(f >= 0, "open %s", file);
    return f;
}

/* The whole dataset at path as float (or int32) values: n elements into a new array. */
static void *read_ds(hid_t f, const char *path, hid_t type, size_t esize, size_t *n)
{
    hid_t d = H5Dopen2(f, path, H5P_DEFAULT);
    REQUIRE(d >= 0, "open %s", path);
    hid_t sp = H5Dget_space(d);
    *n = (size_t)H5Sget_simple_extent_npoints(sp);
    void *v = malloc(esize * (*n ? *n : 1));
    REQUIRE(v && (*n == 0 || H5Dread(d, type, H5S_ALL, H5S_ALL, H5P_DEFAULT, v) >= 0), "read %s", path);
    H5Sclose(sp), H5Dclose(d);
    return v;
}

static void write_ds(hid_t f, const char *path, hid_t type, const void *v)
{
    hid_t d = H5Dopen2(f, path, H5P_DEFAULT);
    REQUIRE(d >= 0 && H5Dwrite(d, type, H5S_ALL, H5S_ALL, H5P_DEFAULT, v) >= 0, "write %s", path);
    H5Dclose(d);
}

/* Adds delta to element `index` of a float dataset. */
static void poke(const char *file, const char *path, size_t index, float delta)
{
    hid_t f = open_rw(file);
    size_t n;
    float *v = read_ds(f, path, H5T_NATIVE_FLOAT, sizeof(float), &n);
    REQUIRE(index < n, "%s has %zu elements", path, n);
    v[index] += delta;
    write_ds(f, path, H5T_NATIVE_FLOAT, v);
    free(v);
    H5Fclose(f);
}

static void copy_file(const char *from, const char *to)
{
    char *data;
    size_t len;
    REQUIRE((data = as_slurp(from, &len)) != NULL, "read %s", from);
    FILE *f = fopen(to, "wb");
    REQUIRE(f && fwrite(data, 1, len, f) == len, "write %s", to);
    fclose(f);
    free(data);
}

TEST(check_replays_a_faithful_dump_clean)
{
    char dump[600];
    make_dump(dump, sizeof dump);
    AsCliResult *r = malloc(sizeof *r);
    /* no --model: the preset is found in the cache by the dump's weights digest */
    as_cli_run(r, AS_ARGS("check", dump));
    CHECK(r->status == 0, "check of a faithful dump: exit %d\n%s%s", r->status, r->out, r->err);
    CHECK(strstr(r->out, "16 layer runs") != NULL, "4 layers x 4 steps compared: %s", r->out);
    CHECK(strstr(r->out, "found by the dump's weights digest in the preset cache"), "the model found by its digest: %s",
          r->out);
    as_cli_run(r, AS_ARGS("check", dump, "--model", "tiny", "-q"));
    CHECK(r->status == 0, "--model tiny (the preset): exit %d %s", r->status, r->err);
    free(r);
}

TEST(check_finds_an_altered_element)
{
    char dump[600], json[600];
    make_dump(dump, sizeof dump);
    snprintf(json, sizeof json, "%s/r.json", as_test_tmpdir());
    /* o of step 2, layer 5: token 0, head 2, channel 7 (o is [1][4][64]) */
    poke(dump, "/steps/0002/layers/05/engine/o", (size_t)(0 * 4 + 2) * 64 + 7, 0.5f);
    AsCliResult *r = malloc(sizeof *r);
    as_cli_run(r, AS_ARGS("check", dump, "-q", "--report-json", json));
    CHECK(r->status == 1, "check of an altered dump: exit %d\n%s%s", r->status, r->out, r->err);
    CHECK(strstr(r->out, "step 2 (decode, pos 10) layer 5: o:") && strstr(r->out, "token 0, head 2, channel 7"),
          "the summary names the step, layer, tensor and coordinates: %s", r->out);
    char *rep = as_slurp(json, NULL);
    CHECK(rep && strstr(rep, "\"MISMATCH\"") && strstr(rep, "\"why\":\t\"real\""), "the JSON report carries the mismatch "
          "and its cause");
    free(rep);
    free(r);
}

TEST(check_refuses_a_wrong_model)
{
    char dump[600];
    make_dump(dump, sizeof dump);
    AsCliResult *r = malloc(sizeof *r);
    /* the same geometry generated with another seed: different weights, different digest */
    char other[600];
    snprintf(other, sizeof other, "%s/other", as_test_tmpdir());
    as_cli_run(r, AS_ARGS("gen", "--preset", "tiny", "--seed", "9", "-o", other));
    REQUIRE(r->status == 0, "gen: %s", r->err);
    as_cli_run(r, AS_ARGS("check", dump, "--model", other, "-q"));
    CHECK(r->status == 2 && strstr(r->err, "digest"), "another model's weights: exit %d, %s", r->status, r->err);
    as_cli_run(r, AS_ARGS("check", dump, "--model", other, "-q", "--ignore-digest"));
    CHECK(r->status == 1 && strstr(r->out, "differs from the dump's"), "--ignore-digest runs (and finds the other "
          "weights): exit %d, %s", r->status, r->out);
    as_cli_run(r, AS_ARGS("check", "/no/such/dump.h5"));
    CHECK(r->status == 2 && strstr(r->err, "/no/such/dump.h5"), "a missing dump: exit %d, %s", r->status, r->err);
    as_cli_run(r, AS_ARGS("check", dump, "--tie-order", "random"));
    CHECK(r->status == 2 && strstr(r->err, "--tie-order"), "an unknown tie order: exit %d, %s", r->status, r->err);
    as_cli_run(r, AS_ARGS("check", dump, "--require", "q,nosuch"));
    CHECK(r->status == 2 && strstr(r->err, "nosuch"), "--require of an unknown tensor: exit %d, %s", r->status, r->err);
    free(r);
}

/* A dump that stores a few tensors: those are compared, the rest listed as absent; --require makes one
 * mandatory; a dump without weights_digest is checked with a note. */
TEST(check_partial_dump_absent_required_no_digest)
{
    char dump[600], json[600], junit[600];
    make_dump_with(dump, sizeof dump, "partial", "\"tiny\"", "[{\"prefill\": 9}, {\"decode\": 2}]", "\"all\"",
                   "x,q,idx,o,out");
    snprintf(json, sizeof json, "%s/p.json", as_test_tmpdir());
    snprintf(junit, sizeof junit, "%s/p.xml", as_test_tmpdir());
    AsCliResult *r = malloc(sizeof *r);
    as_cli_run(r, AS_ARGS("check", dump, "-q", "--report-json", json, "--junit", junit));
    CHECK(r->status == 0 && strstr(r->out, "30 layer runs: 30 pass") && strstr(r->out, "compared: x q idx o out") &&
              strstr(r->out, "absent (not stored by the checked side, not judged): qr kv_pre"),
          "a partial dump passes, saying what was compared: exit %d\n%s%s", r->status, r->out, r->err);
    char *rep = as_slurp(json, NULL), *xml = as_slurp(junit, NULL);
    CHECK(rep && strstr(rep, "\"compared\":\t[\"x\", \"q\", \"idx\", \"o\", \"out\"]") && strstr(rep, "\"absent\":\t[\"qr\""),
          "the JSON lists compared and absent per layer");
    CHECK(xml && strstr(xml, "compared: x q idx o out") && strstr(xml, "absent (not stored"), "the JUnit says it too");
    free(rep), free(xml);
    as_cli_run(r, AS_ARGS("check", dump, "-q", "--require", "x,kv"));
    CHECK(r->status == 1 && strstr(r->out, "kv: not stored by the checked side (required)"),
          "a required tensor that is absent is a mismatch: exit %d\n%s", r->status, r->out);
    /* no weights_digest (an outside engine cannot compute attnscope's): checked, with a note */
    hid_t f = open_rw(dump);
    REQUIRE(H5Adelete(f, "weights_digest") >= 0, "delete the digest");
    H5Fclose(f);
    as_cli_run(r, AS_ARGS("check", dump));
    CHECK(r->status == 0 && strstr(r->err, "the dump has no weights_digest") && strstr(r->out, "note: the dump has no "
          "weights_digest"), "no digest: exit %d\n%s%s", r->status, r->out, r->err);
    free(r);
}

/* The compressed-selection boundary of a query: the k-th largest score a (selected) and an unselected
 * visible position b one bf16 ulp below it. */
static bool find_near_tie(const float *sc, int width, const int32_t *csel, int k, int cl, int off, int *pa, int *pb)
{
    bool sel[4096] = {false};
    if (width > 4096)
        return false;
    for (int j = 0; j < k; j++)
        if (csel[j] >= 0)
            sel[csel[j] - off] = true;
    int a = -1;
    for (int p = 0; p < cl; p++)
        if (sel[p] && (a < 0 || sc[p] < sc[a]))
            a = p;
    if (a < 0 || !isfinite(sc[a]))
        return false;
    for (int p = 0; p < cl; p++)
        if (!sel[p] && as_bf16_ulp_distance(sc[p], sc[a]) == 1 && sc[p] < sc[a]) {
            *pa = a, *pb = p;
            return true;
        }
    return false;
}

static int cmp_i32(const void *x, const void *y)
{
    int32_t a = *(const int32_t *)x, b = *(const int32_t *)y;
    return (a > b) - (a < b);
}

/* Replaces value `from` by `to` in row t of a [s][width] selection (from col c0), re-sorted ascending. */
static void swap_pick(int32_t *v, int t, int width, int c0, int32_t from, int32_t to)
{
    int32_t *row = v + (size_t)t * width + c0;
    int n = width - c0, hit = 0;
    for (int j = 0; j < n; j++)
        if (row[j] == from)
            row[j] = to, hit++;
    REQUIRE(hit == 1, "pick %d in the row", from);
    qsort(row, (size_t)n, sizeof *row, cmp_i32);
}

/* A near-tie planted in a publisher's selection (its scores edited so that the engine keeps the
 * position one ulp below the boundary instead of the boundary's): a near-tie there, and inherited
 * from that layer and step in the layer that reuses its selection. */
TEST(check_planted_near_tie_is_inherited_by_the_reusing_layer)
{
    char dump[600], json[600];
    make_dump_with(dump, sizeof dump, "nt", "\"tiny\"", "[{\"prefill\": 24}, {\"decode\": 6}]", "\"all\"",
                   "x,iscore,csel,idx");
    snprintf(json, sizeof json, "%s/nt.json", as_test_tmpdir());
    AsConfig cfg;
    AsError err = {0};
    REQUIRE(as_config_preset("tiny", &cfg, &err) == 0, "%s", err.msg);
    /* publishers with a reusing layer after them: 1 -> 2, 5 -> 6, 7 -> 8 */
    hid_t f = open_rw(dump);
    int found_step = -1, found_layer = -1, found_t = -1, a = -1, b = -1;
    for (int step = 0; step < 7 && found_step < 0; step++) {
        int start = step == 0 ? 0 : 23 + step, s = step == 0 ? 24 : 1;
        static const int pubs[] = {1, 5, 7};
        for (int pi = 0; pi < 3 && found_step < 0; pi++) {
            int l = pubs[pi];
            AsRun attr;
            as_run_init(&attr);
            as_dump_rule_attrs(&cfg, l, start, s, &attr);
            char p1[128], p2[128];
            snprintf(p1, sizeof p1, "/steps/%04d/layers/%02d/ref/iscore", step, l);
            snprintf(p2, sizeof p2, "/steps/%04d/layers/%02d/ref/csel", step, l);
            size_t ns, nc;
            float *sc = read_ds(f, p1, H5T_NATIVE_FLOAT, 4, &ns);
            int32_t *cs = read_ds(f, p2, H5T_NATIVE_INT32, 4, &nc);
            for (int t = 0; t < s && found_step < 0; t++) {
                int cl = start == 0 ? (t + 1) / attr.ratio : attr.width;
                if (find_near_tie(sc + (size_t)t * attr.width, attr.width, cs + (size_t)t * attr.k, attr.k, cl,
                                  attr.rows_a_len, &a, &b))
                    found_step = step, found_layer = l, found_t = t;
            }
            free(sc), free(cs);
        }
    }
    REQUIRE(found_step >= 0, "no boundary one ulp wide in the publishers' scores");
    int step = found_step, l = found_layer, t = found_t, reuser = l + 1;
    int start = step == 0 ? 0 : 23 + step, s = step == 0 ? 24 : 1;
    AsRun attr;
    as_run_init(&attr);
    as_dump_rule_attrs(&cfg, l, start, s, &attr);
    as_test_note("step %d, layer %d, query %d: positions %d (kept) and %d one ulp below it; layer %d reuses it", step, l,
                 t, a, b, reuser);
    /* the engine's scores swapped at a and b, and its selection (and the reusing layer's) keeping b */
    char path[160];
    size_t n;
    snprintf(path, sizeof path, "/steps/%04d/layers/%02d/engine/iscore", step, l);
    float *sc = read_ds(f, path, H5T_NATIVE_FLOAT, 4, &n);
    float *row = sc + (size_t)t * attr.width, keep = row[a];
    row[a] = row[b], row[b] = keep;
    write_ds(f, path, H5T_NATIVE_FLOAT, sc);
    free(sc);
    int off = attr.rows_a_len;
    for (int who = 0; who < 2; who++) {
        int ll = who ? reuser : l;
        snprintf(path, sizeof path, "/steps/%04d/layers/%02d/engine/csel", step, ll);
        int32_t *cs = read_ds(f, path, H5T_NATIVE_INT32, 4, &n);
        swap_pick(cs, t, attr.k, 0, a + off, b + off);
        write_ds(f, path, H5T_NATIVE_INT32, cs);
        free(cs);
        snprintf(path, sizeof path, "/steps/%04d/layers/%02d/engine/idx", step, ll);
        int32_t *ix = read_ds(f, path, H5T_NATIVE_INT32, 4, &n);
        swap_pick(ix, t, attr.topk, attr.cols, a + off, b + off);
        write_ds(f, path, H5T_NATIVE_INT32, ix);
        free(ix);
    }
    H5Fclose(f);
    AsCliResult *r = malloc(sizeof *r);
    as_cli_run(r, AS_ARGS("check", dump, "-q", "--report-json", json));
    CHECK(r->status == 0, "a near-tie and what inherits it are explained: exit %d\n%s%s", r->status, r->out, r->err);
    char want[200];
    snprintf(want, sizeof want, "near-tie step %d (%s, pos %d) layer %d: csel: near-tie", step,
             step ? "decode" : "prefill", start, l);
    CHECK(strstr(r->out, want), "the publisher's near-tie (%s):\n%s", want, r->out);
    snprintf(want, sizeof want, "inherited step %d (%s, pos %d) layer %d: csel: inherited from layer %d step %d", step,
             step ? "decode" : "prefill", start, reuser, l, step);
    CHECK(strstr(r->out, want), "the reusing layer inherits it (%s):\n%s", want, r->out);
    CHECK(strstr(r->out, "1 near-ties, 0 tie-order, 1 inherited, 0 mismatches"), "nothing else differs:\n%s", r->out);
    note_out(r->out);
    char *rep = as_slurp(json, NULL);
    CHECK(rep && strstr(rep, "\"verdict\":\t\"inherited\"") && strstr(rep, "\"from\":"), "the JSON names the origin");
    free(rep);
    free(r);
}

/* Block maxima of a score row (the pinned newest visible block +inf), as select_candidate_blocks
 * ranks them. */
static void block_max(const float *row, int width, int bs, int cl, float *bm, int *arg)
{
    int nb = (width + bs - 1) / bs, pin = cl >= 1 ? (cl - 1) / bs : -1;
    for (int b = 0; b < nb; b++) {
        bm[b] = -INFINITY, arg[b] = b * bs;
        for (int p = b * bs; p < (b + 1) * bs && p < width; p++)
            if (row[p] > bm[b])
                bm[b] = row[p], arg[b] = p;
        if (b == pin)
            bm[b] = INFINITY;
    }
}

/* The engine side of one step rewritten from the candidate source's scores on: a candidate mask the
 * source's (edited) scores select, the users' scores masked by it (from their stored iq, keys, w),
 * every selection from its scores and every reusing layer's from its publisher. */
static void engine_from_scores(hid_t f, const AsConfig *cfg, int step, int start, int s)
{
    int src = cfg->candidate_source;
    uint8_t *mask = NULL;
    int32_t *pub[AS_MAX_LAYERS] = {NULL};
    for (int l = src; l < cfg->n_layers; l++) {
        const AsLayerRole *role = &cfg->role[l];
        AsRun at;
        as_run_init(&at);
        as_dump_rule_attrs(cfg, l, start, s, &at);
        int cl[128];
        REQUIRE(s <= 128 && role->ratio > 0, "rows");
        for (int t = 0; t < s; t++)
            cl[t] = start == 0 ? (t + 1) / role->ratio : at.width;
        char path[160];
        size_t n;
        int32_t *cs = malloc(sizeof(int32_t) * (size_t)s * (at.k ? at.k : 1));
        REQUIRE(cs, "memory");
        if (role->index_source) {
            snprintf(path, sizeof path, "/steps/%04d/layers/%02d/engine/iscore", step, l);
            float *sc = read_ds(f, path, H5T_NATIVE_FLOAT, 4, &n);
            if (role->candidate_source) {
                mask = malloc((size_t)s * at.width);
                REQUIRE(mask && as_select_candidate_blocks(sc, s, at.width, cl, cfg->candidate_block_size,
                                                           cfg->candidate_topk_blocks, mask) == 0, "mask");
            } else if (role->uses_candidates) {
                char pq[160], pk[160], pw[160];
                snprintf(pq, sizeof pq, "/steps/%04d/layers/%02d/engine/iq", step, l);
                snprintf(pk, sizeof pk, "/steps/%04d/layers/%02d/engine/keys", step, l);
                snprintf(pw, sizeof pw, "/steps/%04d/layers/%02d/engine/w", step, l);
                size_t n1, n2, n3;
                float *iq = read_ds(f, pq, H5T_NATIVE_FLOAT, 4, &n1), *keys = read_ds(f, pk, H5T_NATIVE_FLOAT, 4, &n2),
                      *w = read_ds(f, pw, H5T_NATIVE_FLOAT, 4, &n3);
                REQUIRE(as_index_scores(iq, keys, w, s, cfg->index_n_heads, cfg->index_head_dim, at.width, sc) == 0,
                        "scores");
                as_index_visibility(sc, s, at.width, cl);
                for (size_t i = 0; i < (size_t)s * at.width; i++)
                    if (!mask[i])
                        sc[i] = -INFINITY;
                write_ds(f, path, H5T_NATIVE_FLOAT, sc);
                free(iq), free(keys), free(w);
            }
            REQUIRE(as_index_topk(sc, s, at.width, at.k, cl, at.rows_a_len, cs) == 0, "topk");
            free(sc);
            pub[l] = cs;
        } else {
            REQUIRE(pub[role->select_from], "publisher of layer %d", l);
            memcpy(cs, pub[role->select_from], sizeof(int32_t) * (size_t)s * at.k);
        }
        snprintf(path, sizeof path, "/steps/%04d/layers/%02d/engine/csel", step, l);
        write_ds(f, path, H5T_NATIVE_INT32, cs);
        snprintf(path, sizeof path, "/steps/%04d/layers/%02d/engine/idx", step, l);
        int32_t *ix = read_ds(f, path, H5T_NATIVE_INT32, 4, &n);
        for (int t = 0; t < s; t++)
            memcpy(ix + (size_t)t * at.topk + at.cols, cs + (size_t)t * at.k, sizeof(int32_t) * (size_t)at.k);
        write_ds(f, path, H5T_NATIVE_INT32, ix);
        free(ix);
        if (!role->index_source)
            free(cs);
    }
    for (int l = 0; l < AS_MAX_LAYERS; l++)
        free(pub[l]);
    free(mask);
}

/* A near-tie planted in the candidate source's block selection (the engine's scores put the block
 * one ulp below the weakest kept one above it), with no cand stored (the mask follows from the
 * source's scores): the candidate users, which score, select and attend under that mask, inherit
 * it from the source; the layer reusing a user's selection inherits from that user. */
TEST(check_planted_mask_near_tie_is_inherited_by_the_candidate_users)
{
    AsConfig cfg;
    AsError err = {0};
    REQUIRE(as_config_preset("tiny", &cfg, &err) == 0, "%s", err.msg);
    int src = cfg.candidate_source, bs = cfg.candidate_block_size;
    char dump[600], json[600];
    int found_step = -1, found_t = -1, pk = -1, pd = -1, start = 0, s = 0;
    const int prefill = 40, decodes = 6;
    for (int seed = 1; seed <= 6 && found_step < 0; seed++) {
        char steps[200], name[32];
        snprintf(name, sizeof name, "mask%d", seed);
        snprintf(steps, sizeof steps, "[{\"prefill\": %d}, {\"decode\": %d}]", prefill, decodes);
        /* the inputs' seed varies the scores until a boundary one ulp wide turns up */
        char model[64];
        snprintf(model, sizeof model, "\"tiny\", \"inputs\": {\"seed\": %d}", seed);
        make_dump_with(dump, sizeof dump, name, model, steps, "\"all\"", "x,iq,keys,w,iscore,csel,idx");
        hid_t f = open_rw(dump);
        for (int step = 0; step <= decodes && found_step < 0; step++) {
            start = step == 0 ? 0 : prefill + step - 1, s = step == 0 ? prefill : 1;
            AsRun at;
            as_run_init(&at);
            as_dump_rule_attrs(&cfg, src, start, s, &at);
            char path[128];
            size_t n;
            snprintf(path, sizeof path, "/steps/%04d/layers/%02d/ref/iscore", step, src);
            float *sc = read_ds(f, path, H5T_NATIVE_FLOAT, 4, &n);
            for (int t = 0; t < s && found_step < 0; t++) {
                int cl = start == 0 ? t + 1 : at.width, nb = (at.width + bs - 1) / bs;
                uint8_t m[512];
                float bm[128];
                int arg[128];
                REQUIRE(at.width <= 512 && nb <= 128, "width");
                REQUIRE(as_select_candidate_blocks(sc + (size_t)t * at.width, 1, at.width, &cl, bs,
                                                   cfg.candidate_topk_blocks, m) == 0, "mask");
                block_max(sc + (size_t)t * at.width, at.width, bs, cl, bm, arg);
                int kept = -1, dropped = -1;
                for (int b = 0; b < nb; b++) {
                    if (!isfinite(bm[b]))
                        continue;
                    if (m[b * bs] && (kept < 0 || bm[b] < bm[kept]))
                        kept = b;
                    if (!m[b * bs] && (dropped < 0 || bm[b] > bm[dropped]))
                        dropped = b;
                }
                if (kept >= 0 && dropped >= 0 && as_bf16_ulp_distance(bm[kept], bm[dropped]) == 1) {
                    found_step = step, found_t = t, pk = arg[kept], pd = arg[dropped];
                    /* the engine's scores: the two block maxima swapped */
                    float *row = sc + (size_t)t * at.width;
                    snprintf(path, sizeof path, "/steps/%04d/layers/%02d/engine/iscore", step, src);
                    float *e = read_ds(f, path, H5T_NATIVE_FLOAT, 4, &n);
                    e[(size_t)t * at.width + pk] = row[pd], e[(size_t)t * at.width + pd] = row[pk];
                    write_ds(f, path, H5T_NATIVE_FLOAT, e);
                    free(e);
                    engine_from_scores(f, &cfg, step, start, s);
                }
            }
            free(sc);
        }
        H5Fclose(f);
    }
    REQUIRE(found_step >= 0, "no candidate block boundary one ulp wide in six runs");
    as_test_note("step %d, query %d: the source's blocks of positions %d (kept) and %d (dropped) one ulp apart", found_step,
                 found_t, pk, pd);
    snprintf(json, sizeof json, "%s/mask.json", as_test_tmpdir());
    AsCliResult *r = malloc(sizeof *r);
    as_cli_run(r, AS_ARGS("check", dump, "-q", "--report-json", json));
    CHECK(r->status == 0 && strstr(r->out, " 0 mismatches"), "the mask's difference is explained: exit %d\n%s%s",
          r->status, r->out, r->err);
    note_out(r->out);
    char *text = as_slurp(json, NULL);
    cJSON *rep = text ? cJSON_Parse(text) : NULL;
    free(text);
    REQUIRE(rep, "the JSON report");
    int users = 0;
    cJSON *st;
    cJSON_ArrayForEach(st, cJSON_GetObjectItem(rep, "steps"))
    {
        if (cJSON_GetObjectItem(st, "step")->valueint != found_step)
            continue;
        cJSON *ly;
        cJSON_ArrayForEach(ly, cJSON_GetObjectItem(st, "layers"))
        {
            int l = cJSON_GetObjectItem(ly, "layer")->valueint;
            const char *v = cJSON_GetObjectItem(ly, "verdict")->valuestring;
            cJSON *cause = cJSON_GetObjectItem(ly, "cause");
            const char *why = cause ? cJSON_GetObjectItem(cause, "why")->valuestring : "-";
            if (l > src && cfg.role[l].uses_candidates && cfg.role[l].index_source) {
                char want[64];
                snprintf(want, sizeof want, "inherited from layer %d step %d", src, found_step);
                CHECK(!strcmp(v, "inherited") && !strcmp(why, want), "user layer %d: %s, %s (want %s)", l, v, why, want);
                users++;
            } else if (l == 8) {
                CHECK(strcmp(v, "MISMATCH"), "layer 8 (reuses 7's selection): %s, %s", v, why);
            }
        }
    }
    CHECK(users == 2, "layers 7 and 9 judged: %d", users);
    cJSON_Delete(rep);
    free(r);
}

/* ---- tie order ---- */

/* Rewrites the engine side's selections of every index source (and the layers reusing them) as an
 * engine breaking exact ties by `ties` would make them from its own scores; none_row: at step
 * `none_step`, layer 7 (a candidate user), query 0 takes tied positions by no convention. */
static void engine_with_ties(const char *dump, const AsConfig *cfg, int n_steps, int prefill, AsTieOrder ties,
                             int none_step)
{
    hid_t f = open_rw(dump);
    for (int step = 0; step < n_steps; step++) {
        int start = step == 0 ? 0 : prefill + step - 1, s = step == 0 ? prefill : 1;
        int32_t *pub[AS_MAX_LAYERS] = {NULL};
        for (int l = 0; l < cfg->n_layers; l++) {
            const AsLayerRole *role = &cfg->role[l];
            if (role->ratio == 0)
                continue;
            AsRun at;
            as_run_init(&at);
            as_dump_rule_attrs(cfg, l, start, s, &at);
            if (!at.k)
                continue;
            int32_t *cs = malloc(sizeof(int32_t) * (size_t)s * at.k);
            REQUIRE(cs, "memory");
            char path[160];
            size_t n;
            if (role->index_source) {
                snprintf(path, sizeof path, "/steps/%04d/layers/%02d/engine/iscore", step, l);
                float *sc = read_ds(f, path, H5T_NATIVE_FLOAT, 4, &n);
                int cl[64];
                REQUIRE(s <= 64, "rows");
                for (int t = 0; t < s; t++)
                    cl[t] = start == 0 ? (t + 1) / role->ratio : at.width;
                REQUIRE(as_index_topk_ties(sc, s, at.width, at.k, cl, at.rows_a_len, cs, ties) == 0, "topk");
                if (l == 7 && step == none_step) {
                    /* query 0: the tied (-inf, masked) visible positions, all but the highest of the lowest
                     * picks, then the highest: neither lowest, highest nor (checked below) cpu first */
                    int32_t tied[4096];
                    int nt = 0, fin = 0;
                    for (int p = 0; p < cl[0]; p++) {
                        if (sc[p] == -INFINITY)
                            tied[nt++] = p;
                        else
                            fin++;
                    }
                    int m = at.k - fin;
                    REQUIRE(m >= 2 && nt >= m + 2, "query 0 of layer 7 has %d tied picks among %d", m, nt);
                    int j = 0;
                    for (int p = 0; p < cl[0]; p++)
                        if (sc[p] != -INFINITY)
                            cs[j++] = p + at.rows_a_len;
                    for (int i = 0; i < m - 1; i++)
                        cs[j++] = tied[i] + at.rows_a_len;
                    cs[j++] = tied[nt - 1] + at.rows_a_len;
                    qsort(cs, (size_t)at.k, sizeof *cs, cmp_i32);
                    int32_t cpu[64];
                    REQUIRE(at.k <= 64 && as_index_topk_ties(sc, 1, at.width, at.k, cl, at.rows_a_len, cpu,
                                                              AS_TIES_CPU) == 0, "cpu");
                    qsort(cpu, (size_t)at.k, sizeof *cpu, cmp_i32);
                    REQUIRE(memcmp(cpu, cs, sizeof(int32_t) * (size_t)at.k), "the made-up choice is the cpu's");
                }
                free(sc);
            } else {
                REQUIRE(role->select_from >= 0 && pub[role->select_from], "a publisher before layer %d", l);
                memcpy(cs, pub[role->select_from], sizeof(int32_t) * (size_t)s * at.k);
            }
            snprintf(path, sizeof path, "/steps/%04d/layers/%02d/engine/csel", step, l);
            write_ds(f, path, H5T_NATIVE_INT32, cs);
            snprintf(path, sizeof path, "/steps/%04d/layers/%02d/engine/idx", step, l);
            int32_t *ix = read_ds(f, path, H5T_NATIVE_INT32, 4, &n);
            for (int t = 0; t < s; t++)
                memcpy(ix + (size_t)t * at.topk + at.cols, cs + (size_t)t * at.k, sizeof(int32_t) * (size_t)at.k);
            write_ds(f, path, H5T_NATIVE_INT32, ix);
            free(ix);
            if (role->index_source)
                pub[l] = cs;
            else
                free(cs);
        }
        for (int l = 0; l < AS_MAX_LAYERS; l++)
            free(pub[l]);
    }
    H5Fclose(f);
}

/* Candidate users that keep one block of 4 while index_topk is 8: the top-k takes masked (-inf)
 * positions, which stay valid indices (SPEC 3 quirk), so the tie order decides what is attended.
 * An engine side breaking those ties lowest-first, highest-first, by the CPU's order, or by none of
 * them: classified tie-order with that convention; --tie-order makes the reference break them the
 * same way, and the check is then exact. */
TEST(check_tie_order_by_convention)
{
    setenv("ATTNSCOPE_CACHE", as_test_tmpdir(), 1);
    char model[600], cfgp[700], wsrc[700], wdst[700], gen[600];
    AsCliResult *r = malloc(sizeof *r);
    snprintf(gen, sizeof gen, "%s/tiny-gen", as_test_tmpdir());
    as_cli_run(r, AS_ARGS("gen", "--preset", "tiny", "-o", gen));
    REQUIRE(r->status == 0, "gen: %s", r->err);
    snprintf(model, sizeof model, "%s/tiny-1block", as_test_tmpdir());
    mkdir(model, 0755);
    snprintf(cfgp, sizeof cfgp, "%s/config.json", gen);
    char *cj = as_slurp(cfgp, NULL);
    REQUIRE(cj, "config");
    char *at = strstr(cj, "\"candidate_topk_blocks\":");
    REQUIRE(at, "candidate_topk_blocks in %s", cj);
    at = strchr(at, ':') + 1;
    while (*at == ' ' || *at == '\t')
        at++;
    *at = '1'; /* 3 -> 1 */
    snprintf(cfgp, sizeof cfgp, "%s/config.json", model);
    FILE *cf = fopen(cfgp, "w");
    REQUIRE(cf && fputs(cj, cf) >= 0, "write config");
    fclose(cf);
    free(cj);
    snprintf(wsrc, sizeof wsrc, "%s/model.safetensors", gen);
    snprintf(wdst, sizeof wdst, "%s/model.safetensors", model);
    copy_file(wsrc, wdst);
    AsConfig cfg;
    AsError err = {0};
    REQUIRE(as_config_load(cfgp, &cfg, &err) == 0 && as_config_validate(&cfg, &err) == 0, "%s", err.msg);
    REQUIRE(cfg.candidate_topk_blocks == 1, "edited config");

    char spec[700], base[600];
    snprintf(spec, sizeof spec, "{\"path\": \"%s\"}", model);
    const int prefill = 16, n_steps = 4;
    make_dump_with(base, sizeof base, "ties", spec, "[{\"prefill\": 16}, {\"decode\": 3}]", "\"all\"",
                   "x,iscore,csel,idx");
    static const char *const names[] = {"cpu", "lowest", "highest", "none"};
    char json[700];
    snprintf(json, sizeof json, "%s/ties.json", as_test_tmpdir());
    for (int e = 0; e < 4; e++) { /* the engine's convention: cpu, lowest, highest, none (lowest but one row) */
        char dump[700];
        snprintf(dump, sizeof dump, "%s/ties-%d.h5", as_test_tmpdir(), e);
        copy_file(base, dump);
        if (e > 0)
            engine_with_ties(dump, &cfg, n_steps, prefill, e == 3 ? AS_TIES_LOWEST : (AsTieOrder)e, e == 3 ? 2 : -1);
        for (int rt = 0; rt < 3; rt++) { /* the reference's */
            as_cli_run(r, AS_ARGS("check", dump, "--model", model, "-q", "--tie-order", names[rt], "--report-json",
                                  json));
            CHECK(r->status == 0 && strstr(r->out, " 0 mismatches"), "engine %s, reference %s: exit %d\n%s%s", names[e],
                  names[rt], r->status, r->out, r->err);
            if (e == rt) {
                CHECK(strstr(r->out, "0 near-ties, 0 tie-order, 0 inherited, 0 mismatches"),
                      "engine %s, reference %s: exact:\n%s", names[e], names[rt], r->out);
                continue;
            }
            char *text = as_slurp(json, NULL);
            cJSON *rep = text ? cJSON_Parse(text) : NULL;
            free(text);
            REQUIRE(rep, "the JSON report");
            int tie_steps = 0;
            cJSON *st;
            cJSON_ArrayForEach(st, cJSON_GetObjectItem(rep, "steps"))
            {
                int step = cJSON_GetObjectItem(st, "step")->valueint;
                cJSON *ly, *l7 = NULL, *l8 = NULL;
                cJSON_ArrayForEach(ly, cJSON_GetObjectItem(st, "layers"))
                {
                    int l = cJSON_GetObjectItem(ly, "layer")->valueint;
                    if (l == 7)
                        l7 = cJSON_GetObjectItem(cJSON_GetObjectItem(ly, "tensors"), "csel");
                    if (l == 8)
                        l8 = cJSON_GetObjectItem(cJSON_GetObjectItem(ly, "tensors"), "csel");
                }
                REQUIRE(l7 && l8, "layers 7 and 8 of step %d", step);
                const char *v7 = cJSON_GetObjectItem(l7, "verdict")->valuestring;
                const char *v8 = cJSON_GetObjectItem(l8, "verdict")->valuestring;
                /* the made-up row is the only difference from a lowest-first reference */
                bool differs = !(e == 3 && rt == 1 && step != 2);
                const char *conv = e == 3 && step == 2 ? "none" : e == 3 ? "lowest" : names[e];
                if (!differs) {
                    CHECK(!strcmp(v7, "pass") && !strcmp(v8, "pass"), "engine %s, reference %s, step %d: %s / %s",
                          names[e], names[rt], step, v7, v8);
                    continue;
                }
                cJSON *c = cJSON_GetObjectItem(l7, "tie_convention");
                CHECK(!strcmp(v7, "tie-order") && c && !strcmp(c->valuestring, conv),
                      "engine %s, reference %s, step %d: layer 7 csel %s fitting %s (want tie-order fitting %s)",
                      names[e], names[rt], step, v7, c ? c->valuestring : "-", conv);
                cJSON *from = cJSON_GetObjectItem(l8, "from");
                CHECK(!strcmp(v8, "inherited") && from && cJSON_GetObjectItem(from, "layer")->valueint == 7 &&
                          cJSON_GetObjectItem(from, "step")->valueint == step,
                      "engine %s, reference %s, step %d: layer 8 csel %s (want inherited from layer 7)", names[e],
                      names[rt], step, v8);
                tie_steps++;
            }
            CHECK(tie_steps > 0, "engine %s, reference %s: some step differs", names[e], names[rt]);
            cJSON_Delete(rep);
        }
    }
    free(r);
}

/* The TUI's `s` on a decode step (and mid-step) writes what a replay needs: check passes on it. */
TEST(check_tui_saved_decode_step)
{
    setenv("ATTNSCOPE_CACHE", as_test_tmpdir(), 1);
    AsDriverOptions o;
    as_driver_options_default(&o);
    o.quiet = true;
    o.no_engine = true;
    o.inject = "none";
    AsDriver *d = NULL;
    AsError err = {0};
    REQUIRE(as_driver_open(&o, &d, &err) == 0, "open tiny: %s", err.msg);
    TuiWorker *w = NULL;
    REQUIRE(tui_worker_start(d, &w, &err) == 0, "worker: %s", err.msg);
    struct {
        TuiJobKind k;
        int n;
    } jobs[] = {{TUI_JOB_PREFILL, 9}, {TUI_JOB_DECODE, 3}, {TUI_JOB_SAVE_STEP, 0}, {TUI_JOB_LAYER, 0},
                {TUI_JOB_LAYER, 0},   {TUI_JOB_LAYER, 0},  {TUI_JOB_SAVE_STEP, 1}};
    char saved[2][600];
    for (size_t i = 0; i < sizeof jobs / sizeof jobs[0]; i++) {
        TuiJob j = {.kind = jobs[i].k, .n = jobs[i].n};
        if (jobs[i].k == TUI_JOB_SAVE_STEP) {
            snprintf(saved[jobs[i].n], sizeof saved[0], "%s/tui-step-%d.h5", as_test_tmpdir(), jobs[i].n);
            snprintf(j.path, sizeof j.path, "%s", saved[jobs[i].n]);
        }
        REQUIRE(tui_worker_submit(w, &j), "job %zu accepted", i);
        tui_worker_wait(w);
        TuiJobResult res;
        REQUIRE(tui_worker_take_result(w, &res) && res.rc == 0, "job %zu: %s", i, res.msg);
        if (jobs[i].k == TUI_JOB_SAVE_STEP)
            CHECK(strstr(res.msg, "with the state before it: attnscope check replays it"), "the save says so: %s",
                  res.msg);
    }
    tui_worker_stop(w);
    as_driver_close(d);
    AsCliResult *r = malloc(sizeof *r);
    as_cli_run(r, AS_ARGS("check", saved[0]));
    CHECK(r->status == 0 && strstr(r->out, "10 layer runs: 10 pass") &&
              strstr(r->out, "the replay starts at step 3 (position 11) from the state_in group"),
          "the saved decode step checks clean: exit %d\n%s%s", r->status, r->out, r->err);
    as_cli_run(r, AS_ARGS("check", saved[1], "-q"));
    CHECK(r->status == 0 && strstr(r->out, "3 layer runs: 3 pass"), "the step saved after 3 layers: exit %d\n%s%s",
          r->status, r->out, r->err);
    as_cli_run(r, AS_ARGS("dump-info", saved[0]));
    CHECK(r->status == 0 && strstr(r->out, "state_in   the state before step 3 (position 11), side ref"), "dump-info: %s",
          r->out);
    /* the same step with one element of the engine's o moved: caught there */
    poke(saved[0], "/steps/0003/layers/04/engine/o", 5, 0.25f);
    as_cli_run(r, AS_ARGS("check", saved[0], "-q"));
    CHECK(r->status == 1 && strstr(r->out, "MISMATCH step 3 (decode, pos 11) layer 4: o:") &&
              strstr(r->out, "1 mismatches"), "a moved element in the saved step: exit %d\n%s", r->status, r->out);
    free(r);
}

/* A dump that holds one decode step (no state_in) and the inputs from position 0: the prefill and
 * the decode steps before it are replayed from the inputs. */
TEST(check_mid_run_dump_from_inputs)
{
    char dump[600];
    setenv("ATTNSCOPE_CACHE", as_test_tmpdir(), 1);
    char script[600];
    snprintf(script, sizeof script, "%s/mid.json", as_test_tmpdir());
    snprintf(dump, sizeof dump, "%s/mid.h5", as_test_tmpdir());
    FILE *f = fopen(script, "w");
    REQUIRE(f, "script");
    fprintf(f, "{\"model\": \"tiny\", \"inject\": \"none\", \"steps\": [{\"prefill\": 7}, {\"decode\": 4}], "
               "\"dump\": {\"path\": \"%s\", \"layers\": \"all\", \"steps\": [3]}}", dump);
    fclose(f);
    AsCliResult *r = malloc(sizeof *r);
    as_cli_run(r, AS_ARGS("run", "-q", script));
    REQUIRE(r->status == 0, "run: %s", r->err);
    as_cli_run(r, AS_ARGS("check", dump));
    CHECK(r->status == 0 && strstr(r->out, "10 layer runs: 10 pass") &&
              strstr(r->err, "the replay runs a prefill of 7 tokens and the decode steps before step 3"),
          "step 3 alone, inputs from 0: exit %d\n%s%s", r->status, r->out, r->err);
    free(r);
}
