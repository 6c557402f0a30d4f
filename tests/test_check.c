/* `attnscope check`: a dump of a faithful twin replays clean; the same dump with one element of
 * one tensor altered is caught at that step, layer, tensor and coordinate; a wrong model is
 * refused. The dumps come from `run` with the fault "none" (a faithful twin as side "engine"). */
#include <hdf5.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tests/cli_util.h"
#include "tests/harness.h"

static void make_dump(char *dump, size_t n)
{
    setenv("ATTNSCOPE_CACHE", as_test_tmpdir(), 1);
    char script[600];
    snprintf(script, sizeof script, "%s/s.json", as_test_tmpdir());
    snprintf(dump, n, "%s/twin.h5", as_test_tmpdir());
    FILE *f = fopen(script, "w");
    fprintf(f, "{\"model\": \"tiny\", \"inject\": \"none\", \"steps\": [{\"prefill\": 9}, {\"decode\": 3}], "
               "\"dump\": {\"path\": \"%s\", \"layers\": [0, 3, 5, 7], \"steps\": \"all\"}}", dump);
    fclose(f);
    AsCliResult *r = malloc(sizeof *r);
    as_cli_run(r, AS_ARGS("run", "-q", script));
    REQUIRE(r->status == 0, "run with a faithful twin: exit %d %s", r->status, r->err);
    free(r);
}

/* Adds delta to element `index` of a float dataset. */
static void poke(const char *file, const char *path, size_t index, float delta)
{
    hid_t f = H5Fopen(file, H5F_ACC_RDWR, H5P_DEFAULT);
    REQUIRE(f >= 0, "open %s", file);
    hid_t d = H5Dopen2(f, path, H5P_DEFAULT);
    REQUIRE(d >= 0, "open %s", path);
    hid_t sp = H5Dget_space(d);
    hssize_t n = H5Sget_simple_extent_npoints(sp);
    float *v = malloc(sizeof(float) * (size_t)n);
    REQUIRE(H5Dread(d, H5T_NATIVE_FLOAT, H5S_ALL, H5S_ALL, H5P_DEFAULT, v) >= 0, "read %s", path);
    v[index] += delta;
    REQUIRE(H5Dwrite(d, H5T_NATIVE_FLOAT, H5S_ALL, H5S_ALL, H5P_DEFAULT, v) >= 0, "write %s", path);
    free(v);
    H5Sclose(sp), H5Dclose(d), H5Fclose(f);
}

TEST(check_replays_a_faithful_dump_clean)
{
    char dump[600], model[600];
    make_dump(dump, sizeof dump);
    snprintf(model, sizeof model, "%s/tiny-s1", as_test_tmpdir());
    AsCliResult *r = malloc(sizeof *r);
    as_cli_run(r, AS_ARGS("check", dump, "--model", model, "-q"));
    CHECK(r->status == 0, "check of a faithful dump: exit %d\n%s%s", r->status, r->out, r->err);
    CHECK(strstr(r->out, "16 layer runs") != NULL, "4 layers x 4 steps compared: %s", r->out);
    free(r);
}

TEST(check_finds_an_altered_element)
{
    char dump[600], model[600], json[600];
    make_dump(dump, sizeof dump);
    snprintf(model, sizeof model, "%s/tiny-s1", as_test_tmpdir());
    snprintf(json, sizeof json, "%s/r.json", as_test_tmpdir());
    /* o of step 2, layer 5: token 0, head 2, channel 7 (o is [1][4][64]) */
    poke(dump, "/steps/0002/layers/05/engine/o", (size_t)(0 * 4 + 2) * 64 + 7, 0.5f);
    AsCliResult *r = malloc(sizeof *r);
    as_cli_run(r, AS_ARGS("check", dump, "--model", model, "-q", "--report-json", json));
    CHECK(r->status == 1, "check of an altered dump: exit %d\n%s%s", r->status, r->out, r->err);
    CHECK(strstr(r->out, "step 2 (decode, pos 10) layer 5: o:") && strstr(r->out, "token 0, head 2, channel 7"),
          "the summary names the step, layer, tensor and coordinates: %s", r->out);
    char *rep = as_slurp(json, NULL);
    CHECK(rep && strstr(rep, "\"MISMATCH\""), "the JSON report carries the mismatch");
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
    as_cli_run(r, AS_ARGS("check", "/no/such/dump.h5"));
    CHECK(r->status == 2 && strstr(r->err, "/no/such/dump.h5"), "a missing dump: exit %d, %s", r->status, r->err);
    free(r);
}
