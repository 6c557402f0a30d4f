/* `attnscope dump-info` and `attnscope diff` run as a user would ($ATTNSCOPE_BIN): listings,
 * exit statuses 0 / 1 / 2, the planted difference found at its coordinates, malformed dumps
 * refused with a message that names what is wrong. */
#include <cJSON.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <dirent.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "dumps/dump.h"
#include "tests/lib/harness.h"

/* from test_dump.c */
int tdump_write(const char *path, const AsConfig *cfg, unsigned seed, int plant_q, AsError *err);
int tdump_variant(const char *src, const char *dst, const char *kind);
void tdump_fill_run(AsRun *r, const AsConfig *c, int layer, int step, int start_pos, int s, unsigned seed);

static const char *bin(void)
{
    const char *b = getenv("ATTNSCOPE_BIN");
    if (!b || !*b)
        as_test_skip("ATTNSCOPE_BIN is not set (run through make test)");
    return b;
}

/* Runs `$ATTNSCOPE_BIN args` (stdout and stderr together into *out, caller frees); returns
 * the exit status. */
static int run(char **out, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static int run(char **out, const char *fmt, ...)
{
    char args[1500], cmd[2048];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(args, sizeof args, fmt, ap);
    va_end(ap);
    snprintf(cmd, sizeof cmd, "%s %s 2>&1", bin(), args);
    fflush(NULL);
    FILE *p = popen(cmd, "r");
    REQUIRE(p, "popen %s", cmd);
    size_t cap = 1 << 16, n = 0;
    char *buf = malloc(cap);
    REQUIRE(buf, "memory");
    size_t k;
    while ((k = fread(buf + n, 1, cap - n - 1, p)) > 0) {
        n += k;
        if (n + 1 == cap) {
            char *nb = realloc(buf, cap *= 2);
            REQUIRE(nb, "memory");
            buf = nb;
        }
    }
    buf[n] = '\0';
    int st = pclose(p);
    *out = buf;
    return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

static void tiny(AsConfig *cfg)
{
    AsError err = {0};
    REQUIRE(as_config_preset("tiny", cfg, &err) == 0, "tiny preset: %s", err.msg);
}

static void write_dump(char *path, size_t n, const char *name, unsigned seed, int plant)
{
    AsConfig cfg;
    tiny(&cfg);
    snprintf(path, n, "%s/%s", as_test_tmpdir(), name);
    AsError err = {0};
    REQUIRE(tdump_write(path, &cfg, seed, plant, &err) == 0, "writing %s: %s", name, err.msg);
}

TEST(dump_cli_info_lists)
{
    bin();
    char path[512], *out;
    write_dump(path, sizeof path, "info.h5", 4, 1);
    int rc = run(&out, "dump-info '%s'", path);
    CHECK(rc == 0, "dump-info exits %d:\n%s", rc, out);
    const char *want[] = {"attnscope-dump v1", "mode teacher", "sha256:0123abcd", "h0: 6 tokens from position 0",
                          "step 0000  prefill, start_pos 0, 5 tokens, 3 layers", "step 0001  decode", "layer 05",
                          "engine   all 30 tensors", "ref      all 30 tensors", "MISMATCH, worst q",
                          "token 1, head 2, channel 3"};
    for (size_t i = 0; i < sizeof want / sizeof want[0]; i++)
        CHECK(strstr(out, want[i]), "dump-info output lacks '%s':\n%s", want[i], out);
    free(out);
    rc = run(&out, "dump-info --json '%s'", path);
    CHECK(rc == 0, "dump-info --json exits %d", rc);
    cJSON *j = cJSON_Parse(out);
    CHECK(j, "--json is JSON:\n%.400s", out);
    cJSON *steps = cJSON_GetObjectItem(j, "steps");
    CHECK(cJSON_GetArraySize(steps) == 2, "two steps in JSON");
    cJSON *l1 = cJSON_GetArrayItem(cJSON_GetObjectItem(cJSON_GetArrayItem(steps, 0), "layers"), 1);
    cJSON *v = cJSON_GetObjectItem(l1, "verdict");
    CHECK(cJSON_IsString(v) && !strcmp(v->valuestring, "MISMATCH"), "layer 1 verdict in JSON");
    cJSON *cfg = cJSON_GetObjectItem(j, "config");
    CHECK(cJSON_IsObject(cfg), "config embedded as an object");
    cJSON_Delete(j);
    free(out);
}

TEST(dump_cli_diff_self_and_planted)
{
    bin();
    char a[512], b[512], *out;
    write_dump(a, sizeof a, "a.h5", 5, -1);
    int rc = run(&out, "diff '%s' '%s'", a, a);
    CHECK(rc == 0, "diff of a dump with itself exits %d:\n%s", rc, out);
    CHECK(strstr(out, "all within tolerance") && strstr(out, "compared   2 steps, 6 layers"), "summary:\n%s", out);
    free(out);
    /* b: the same run with q of step 0, layer 1 changed at token 1, head 2, channel 3 (engine side) */
    write_dump(b, sizeof b, "b.h5", 5, 1);
    rc = run(&out, "diff '%s' '%s'", b, a);
    CHECK(rc == 1, "planted difference: exit %d:\n%s", rc, out);
    CHECK(strstr(out, "MISMATCH 1") && strstr(out, "worst      step 0000 (prefill), layer 01, q: MISMATCH") &&
              strstr(out, "token 1, head 2, channel 3"),
          "the worst finding names q at its coordinates:\n%s", out);
    free(out);
    /* the ref sides are equal: comparing them passes */
    rc = run(&out, "diff '%s' '%s' --side-a ref --side-b ref", b, a);
    CHECK(rc == 0, "ref against ref exits %d:\n%s", rc, out);
    free(out);
    /* a tolerance wide enough swallows the planted difference */
    rc = run(&out, "diff '%s' '%s' --tol-rel 1 --tol-abs 1", b, a);
    CHECK(rc == 0, "--tol-rel 1 --tol-abs 1 exits %d:\n%s", rc, out);
    free(out);
    rc = run(&out, "diff '%s' '%s' --tol-rel banana", b, a);
    CHECK(rc == 2 && strstr(out, "--tol-rel"), "bad tolerance: exit %d:\n%s", rc, out);
    free(out);
    rc = run(&out, "diff '%s' '%s' --side-a nosuch", b, a);
    CHECK(rc == 2 && strstr(out, "no side 'nosuch'"), "unknown side: exit %d:\n%s", rc, out);
    free(out);
}

TEST(dump_cli_diff_geometry_mismatch)
{
    bin();
    char a[512], b[512], *out;
    write_dump(a, sizeof a, "a.h5", 5, -1);
    AsConfig cfg;
    tiny(&cfg);
    cfg.index_topk = 4; /* another geometry */
    snprintf(b, sizeof b, "%s/other.h5", as_test_tmpdir());
    AsError err = {0};
    REQUIRE(tdump_write(b, &cfg, 5, -1, &err) == 0, "writing: %s", err.msg);
    int rc = run(&out, "diff '%s' '%s'", a, b);
    CHECK(rc == 2 && strstr(out, "different geometries") && strstr(out, "index_topk 8 vs 4"), "exit %d:\n%s", rc, out);
    free(out);
}

TEST(dump_cli_malformed_dumps_exit_2)
{
    bin();
    char good[512], *out;
    write_dump(good, sizeof good, "good.h5", 6, -1);
    static const struct {
        const char *kind, *says;
    } cases[] = {
        {"not-hdf5", "not an HDF5 file"},
        {"format", "not an attnscope dump"},
        {"version", "format_version 2 is not supported"},
        {"shape", "/steps/0000/layers/01/engine/q: shape [5, 4, 63]"},
        {"truncated", "cannot open as HDF5"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char bad[600];
        snprintf(bad, sizeof bad, "%s/bad-%s.h5", as_test_tmpdir(), cases[i].kind);
        REQUIRE(tdump_variant(good, bad, cases[i].kind) == 0, "making the %s variant", cases[i].kind);
        int rc = run(&out, "dump-info '%s'", bad);
        CHECK(rc == 2 && strstr(out, cases[i].says), "dump-info %s: exit %d, output:\n%s", cases[i].kind, rc, out);
        free(out);
        rc = run(&out, "diff '%s' '%s'", good, bad);
        CHECK(rc == 2 && strstr(out, cases[i].says), "diff %s: exit %d, output:\n%s", cases[i].kind, rc, out);
        free(out);
    }
    int rc = run(&out, "dump-info");
    CHECK(rc == 2, "no file: exit %d", rc);
    free(out);
}

/* An external writer's dump: one side "mine" with three tensors of one layer. */
TEST(dump_cli_diff_external_side_partial)
{
    bin();
    char a[512], mine[512], *out;
    write_dump(a, sizeof a, "a.h5", 5, -1);
    AsConfig cfg;
    tiny(&cfg);
    snprintf(mine, sizeof mine, "%s/mine.h5", as_test_tmpdir());
    AsDumpMeta meta = {.cfg = &cfg, .mode = "external", .version = "my-engine 0.1"};
    AsDumpWriter *w;
    AsError err = {0};
    REQUIRE(as_dump_create(mine, &meta, &w, &err) == 0, "create: %s", err.msg);
    AsRun r;
    tdump_fill_run(&r, &cfg, 1, 0, 0, 5, 5); /* what a.h5 holds for step 0, layer 1 */
    uint64_t some = AS_DUMP_TENSOR_BIT(AS_T_Q) | AS_DUMP_TENSOR_BIT(AS_T_IDX) | AS_DUMP_TENSOR_BIT(AS_T_CAND);
    REQUIRE(as_dump_begin_step(w, 0, "prefill", 0, 5, &err) == 0, "step: %s", err.msg);
    REQUIRE(as_dump_write_side(w, 0, 1, "mine", &r, some, &err) == 0, "side: %s", err.msg);
    REQUIRE(as_dump_commit(w, &err) == 0, "commit: %s", err.msg);
    as_run_free(&r);
    /* what the external side stores is compared; the rest is listed as absent, not judged */
    int rc = run(&out, "diff '%s' '%s' --side-a mine --side-b ref", mine, a);
    CHECK(rc == 0 && strstr(out, "compared   1 step, 1 layer, 3 tensors") && strstr(out, "tensors    q cand idx") &&
              strstr(out, "absent      x qr") && strstr(out, "(stored in B only: not judged)"),
          "the external side's tensors compared, the rest absent: exit %d:\n%s", rc, out);
    free(out);
    rc = run(&out, "diff '%s' '%s' --side-a mine --side-b ref --common", mine, a);
    CHECK(rc == 0 && strstr(out, "compared   1 step, 1 layer, 3 tensors"), "--common (the default): exit %d:\n%s", rc,
          out);
    free(out);
    /* a required tensor the external side lacks is a mismatch */
    rc = run(&out, "diff '%s' '%s' --side-a mine --side-b ref --require q,o", mine, a);
    CHECK(rc == 1 && strstr(out, "o: MISMATCH absent in got"), "--require o: exit %d:\n%s", rc, out);
    free(out);
    rc = run(&out, "diff '%s' '%s' --require nosuch", mine, a);
    CHECK(rc == 2 && strstr(out, "nosuch"), "--require of an unknown tensor: exit %d:\n%s", rc, out);
    free(out);
}

static void write_script(const char *path, const char *dump)
{
    FILE *f = fopen(path, "w");
    REQUIRE(f, "writing %s", path);
    fprintf(f, "{\"name\": \"dump cli\", \"model\": \"tiny\", \"steps\": [{\"prefill\": 5}, {\"decode\": 1}],\n"
               " \"dump\": {\"path\": \"%s\"}}\n", dump);
    fclose(f);
}

/* End to end: `attnscope run --no-engine` dumps the reference through the writer; the dump lists
 * and diffs clean; a dump into a directory that cannot be written is exit 3 with nothing left. */
TEST(dump_cli_run_dump_end_to_end)
{
    bin();
    const char *dir = as_test_tmpdir();
    char script[600], dump[800], *out;
    snprintf(script, sizeof script, "%s/s.json", dir);
    snprintf(dump, sizeof dump, "%s/run.h5", dir);
    write_script(script, dump);
    int rc = run(&out, "run '%s' --no-engine --quiet", script);
    CHECK(rc == 0, "run with a dump: exit %d:\n%s", rc, out);
    free(out);
    rc = run(&out, "dump-info '%s'", dump);
    CHECK(rc == 0 && strstr(out, "mode reference-only") && strstr(out, "step 0001  decode") && strstr(out, "layer 09"),
          "dump-info of run's dump: exit %d:\n%.2000s", rc, out);
    free(out);
    rc = run(&out, "diff '%s' '%s'", dump, dump);
    CHECK(rc == 0 && strstr(out, "compared   2 steps, 20 layers"), "diff of run's dump with itself: exit %d:\n%s", rc, out);
    free(out);

    /* unwritable: a read-only directory, or (root ignores modes) a read-only file system */
    char ro[600], probe[700];
    snprintf(ro, sizeof ro, "%s/ro", dir);
    REQUIRE(mkdir(ro, 0555) == 0, "mkdir");
    snprintf(probe, sizeof probe, "%s/probe", ro);
    FILE *p = fopen(probe, "w");
    const char *target = ro;
    if (p) {
        fclose(p);
        unlink(probe);
        if (!(p = fopen("/sys/attnscope-probe", "w"))) {
            target = "/sys";
        } else {
            fclose(p);
            unlink("/sys/attnscope-probe");
            as_test_skip("running as root with no read-only directory to write into");
        }
    }
    snprintf(dump, sizeof dump, "%s/never.h5", target);
    write_script(script, dump);
    rc = run(&out, "run '%s' --no-engine --quiet", script);
    CHECK(rc == 3 && strstr(out, "cannot create a file"), "unwritable dump: exit %d:\n%s", rc, out);
    free(out);
    CHECK(access(dump, F_OK) != 0, "no file under the name");
    DIR *d = target == ro ? opendir(ro) : NULL;
    int left = 0;
    for (struct dirent *e; d && (e = readdir(d));)
        left += strcmp(e->d_name, ".") && strcmp(e->d_name, "..");
    if (d)
        closedir(d);
    CHECK(left == 0, "nothing left in %s", ro);
    chmod(ro, 0755);
}
