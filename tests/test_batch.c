/* The batch mode end to end through the binary: every example script, determinism, the
 * reports, malformed scripts (exit 2 naming the field), faults (exit 1), an interrupted dump. */
#include <cJSON.h>
#include <dirent.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "tests/lib/cli_util.h"
#include "tests/lib/harness.h"

static void use_test_cache(void) { setenv("ATTNSCOPE_CACHE", as_test_tmpdir(), 1); }

static int cmp_str(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

/* examples/0*.json in name order (later ones may read what earlier ones wrote). */
TEST(batch_every_example_passes)
{
    use_test_cache();
    DIR *d = opendir("examples");
    REQUIRE(d, "examples/ not found (run the tests from the repository root)");
    char *names[64];
    int n = 0;
    struct dirent *e;
    while ((e = readdir(d)) && n < 64)
        if (e->d_name[0] == '0' && strstr(e->d_name, ".json"))
            names[n++] = strdup(e->d_name);
    closedir(d);
    qsort(names, (size_t)n, sizeof names[0], cmp_str);
    CHECK(n >= 6, "only %d examples", n);
    for (int i = 0; i < n; i++) {
        char path[300];
        snprintf(path, sizeof path, "examples/%s", names[i]);
        AsCliResult *r = malloc(sizeof *r);
        as_cli_run(r, AS_ARGS("run", "-q", path));
        CHECK(r->status == 0, "%s: exit %d\n%s%s", path, r->status, r->out, r->err);
        const char *v = strstr(r->out, "verdict: ");
        as_test_note("%-40s exit %d, %s", names[i], r->status, v ? v : "(no verdict line)");
        free(r);
        free(names[i]);
    }
}

TEST(batch_same_script_same_report)
{
    use_test_cache();
    char script[600], a[600], b[600];
    snprintf(script, sizeof script, "%s/s.json", as_test_tmpdir());
    snprintf(a, sizeof a, "%s/a.json", as_test_tmpdir());
    snprintf(b, sizeof b, "%s/b.json", as_test_tmpdir());
    FILE *f = fopen(script, "w");
    fputs("{\"model\": \"tiny\", \"inject\": \"fp4-scale\", \"steps\": [{\"prefill\": 9}, {\"decode\": 5}]}", f);
    fclose(f);
    AsCliResult *r = malloc(sizeof *r);
    as_cli_run(r, AS_ARGS("run", "-q", script, "--report-json", a));
    CHECK(r->status == 1, "a planted fault without an expectation exits 1, got %d", r->status);
    as_cli_run(r, AS_ARGS("run", "-q", script, "--report-json", b));
    size_t la, lb;
    char *ta = as_slurp(a, &la), *tb = as_slurp(b, &lb);
    REQUIRE(ta && tb, "reports written");
    CHECK(la == lb && memcmp(ta, tb, la) == 0, "two runs of one script gave different reports");
    cJSON *j = cJSON_Parse(ta);
    REQUIRE(j, "the report is JSON");
    const cJSON *steps = cJSON_GetObjectItem(j, "steps");
    CHECK(cJSON_GetArraySize(steps) == 6, "6 steps reported, got %d", cJSON_GetArraySize(steps));
    const cJSON *s0 = cJSON_GetArrayItem(steps, 0), *layers = cJSON_GetObjectItem(s0, "layers");
    CHECK(cJSON_GetArraySize(layers) == 10, "10 layers per step");
    const cJSON *l1 = cJSON_GetArrayItem(layers, 1);
    CHECK(!strcmp(cJSON_GetObjectItem(l1, "verdict")->valuestring, "MISMATCH"), "layer 1 mismatches");
    const cJSON *lq = cJSON_GetObjectItem(cJSON_GetObjectItem(l1, "tensors"), "latent_q");
    CHECK(lq && cJSON_GetObjectItem(lq, "worst"), "latent_q carries its worst element");
    CHECK(!strcmp(cJSON_GetObjectItem(j, "verdict")->valuestring, "MISMATCH"), "overall verdict");
    cJSON_Delete(j);
    free(ta), free(tb), free(r);
}

TEST(batch_junit_report)
{
    use_test_cache();
    char script[600], x[600];
    snprintf(script, sizeof script, "%s/s.json", as_test_tmpdir());
    snprintf(x, sizeof x, "%s/r.xml", as_test_tmpdir());
    FILE *f = fopen(script, "w");
    fputs("{\"model\": \"tiny\", \"inject\": \"rope-backwards\", \"steps\": [{\"prefill\": 4}]}", f);
    fclose(f);
    AsCliResult *r = malloc(sizeof *r);
    as_cli_run(r, AS_ARGS("run", "-q", script, "--junit", x));
    CHECK(r->status == 1, "exit %d", r->status);
    char *t = as_slurp(x, NULL);
    REQUIRE(t, "junit written");
    int cases = 0, failures = 0;
    for (const char *p = t; (p = strstr(p, "<testcase ")); p++)
        cases++;
    for (const char *p = t; (p = strstr(p, "<failure ")); p++)
        failures++;
    CHECK(cases == 10 && failures == 10, "%d test cases, %d failures (want 10, 10)", cases, failures);
    CHECK(strstr(t, "tests=\"10\" failures=\"10\"") != NULL, "suite counts");
    CHECK(strstr(t, "q: max |diff|") != NULL, "the failure names the tensor and the worst element");
    free(t), free(r);
}

/* Malformed scripts: exit 2 and one line naming what is wrong. */
TEST(batch_malformed_scripts_exit_2)
{
    use_test_cache();
    static const struct {
        const char *text, *says;
    } cases[] = {
        {"{\"model\": \"tiny\", \"steps\": [", "not valid JSON"},
        {"[1, 2]", "JSON object"},
        {"{\"steps\": [{\"prefill\": 4}]}", "model: required"},
        {"{\"model\": \"tiny\"}", "steps: required"},
        {"{\"model\": \"tiny\", \"steps\": [], \"x\": 1}", "unknown field 'x'"},
        {"{\"model\": \"tiny\", \"steps\": [{\"decode\": 3}]}", "decode before any prefill"},
        {"{\"model\": \"tiny\", \"steps\": [{\"prefill\": 0}]}", "steps[0].prefill"},
        {"{\"model\": \"tiny\", \"steps\": [{\"prefill\": 2.5}]}", "steps[0].prefill"},
        {"{\"model\": \"tiny\", \"steps\": [{\"jump\": 2}]}", "unknown step 'jump'"},
        {"{\"model\": \"tiny\", \"steps\": [{\"prefill\": 2}], \"tolerances\": {\"qq\": {\"rel\": 1}}}", "unknown tensor 'qq'"},
        {"{\"model\": \"tiny\", \"steps\": [{\"prefill\": 2}], \"tolerances\": {\"q\": {\"rel\": -1}}}", "tolerances.q"},
        {"{\"model\": \"tiny\", \"steps\": [{\"prefill\": 2}], \"inject\": \"bogus\"}", "unknown fault 'bogus'"},
        {"{\"model\": \"tiny\", \"steps\": [{\"prefill\": 2}], \"mode\": \"lazy\"}", "mode"},
        {"{\"model\": {\"preset\": \"huge\"}, \"steps\": [{\"prefill\": 2}]}", "unknown preset 'huge'"},
        {"{\"model\": \"no/such/dir\", \"steps\": [{\"prefill\": 2}]}", "no such model"},
        {"{\"model\": \"tiny\", \"steps\": [{\"prefill\": 2}], \"dump\": {\"layers\": [1]}}", "dump.path"},
        {"{\"model\": \"tiny\", \"steps\": [{\"prefill\": 2}], \"dump\": {\"path\": \"d.h5\", \"tensors\": \"q,zz\"}}", "dump.tensors"},
        {"{\"model\": \"tiny\", \"steps\": [{\"prefill\": 2}], \"expect\": {\"verdict\": \"maybe\"}}", "expect.verdict"},
        {"{\"model\": \"tiny\", \"steps\": [{\"prefill\": 2}], \"inputs\": {\"file\": \"missing.h5\"}}", "missing.h5"},
        {"{\"model\": \"tiny\", \"max_seq\": 4, \"steps\": [{\"prefill\": 8}]}", "max_seq"},
    };
    char script[600];
    snprintf(script, sizeof script, "%s/bad.json", as_test_tmpdir());
    AsCliResult *r = malloc(sizeof *r);
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        FILE *f = fopen(script, "w");
        fputs(cases[i].text, f);
        fclose(f);
        as_cli_run(r, AS_ARGS("run", "-q", script));
        int nl = 0;
        for (const char *p = r->err; *p; p++)
            nl += *p == '\n';
        CHECK(r->status == 2 && strstr(r->err, cases[i].says) && nl == 1,
              "case %zu (%s): exit %d, stderr '%s' (want exit 2, one line naming '%s')", i, cases[i].text, r->status,
              r->err, cases[i].says);
    }
    as_cli_run(r, AS_ARGS("run", "-q", "/no/such/script.json"));
    CHECK(r->status == 2 && strstr(r->err, "/no/such/script.json"), "a missing script: exit %d '%s'", r->status, r->err);
    free(r);
}

/* SIGINT during a run that dumps: no file under the requested name, no temporary left. */
TEST(batch_interrupted_dump_leaves_nothing)
{
    use_test_cache();
    char script[600], dump[600];
    snprintf(script, sizeof script, "%s/long.json", as_test_tmpdir());
    snprintf(dump, sizeof dump, "%s/out/run.h5", as_test_tmpdir());
    /* generate the model first so the interrupt lands in the run itself */
    AsCliResult *r = malloc(sizeof *r);
    FILE *f = fopen(script, "w");
    fputs("{\"model\": \"tiny\", \"steps\": [{\"prefill\": 2}]}", f);
    fclose(f);
    as_cli_run(r, AS_ARGS("run", "-q", script));
    f = fopen(script, "w");
    fprintf(f, "{\"model\": \"tiny\", \"steps\": [{\"prefill\": 8}, {\"decode\": 400}], \"dump\": {\"path\": \"%s\"}}", dump);
    fclose(f);
    pid_t pid = as_cli_spawn(AS_ARGS("run", "-q", script));
    usleep(400 * 1000);
    kill(pid, SIGINT);
    int st = as_cli_wait(pid);
    CHECK(st != 0, "the run was interrupted (status %d)", st);
    struct stat sb;
    CHECK(stat(dump, &sb) != 0, "an interrupted run left %s", dump);
    char dir[600];
    snprintf(dir, sizeof dir, "%s/out", as_test_tmpdir());
    DIR *d = opendir(dir);
    int leftovers = 0;
    struct dirent *e;
    while (d && (e = readdir(d)))
        leftovers += e->d_name[0] != '.' || strstr(e->d_name, ".tmp-") != NULL ? (strcmp(e->d_name, ".") && strcmp(e->d_name, "..")) : 0;
    if (d)
        closedir(d);
    CHECK(leftovers == 0, "%d files left in %s", leftovers, dir);
    as_test_note("interrupted run: exit status %d, nothing left under %s", st, dir);
    free(r);
}
