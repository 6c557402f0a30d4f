/* engine/bench_json.c: bench-engine's --json, every figure and the knobs' flags, written atomically. */
#include <cJSON.h>
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "engine/bench_json.h"
#include "tests/lib/cli_util.h"
#include "tests/lib/harness.h"

static double num(const cJSON *j, const char *key)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(j, key);
    return cJSON_IsNumber(v) ? v->valuedouble : -1e300;
}

/* How many entries of dir have names starting with prefix (-1: dir unreadable). */
static int entries_named(const char *dir, const char *prefix)
{
    DIR *d = opendir(dir);
    if (!d)
        return -1;
    int n = 0;
    for (struct dirent *e; (e = readdir(d));)
        n += !strncmp(e->d_name, prefix, strlen(prefix));
    closedir(d);
    return n;
}

TEST(bench_json_every_figure)
{
    const AsBenchFigures f = {.copy_gbs = 4264.1, .gemm_tflops = 799.2, .decode_ms = 6.8915, .decode_wall_ms = 8.2049,
                              .decode_floor_ms = 2.4221, .decode_graph_ms = 3.8764, .decode_graph_wall_ms = 3.8921,
                              .graph_nodes = 471, .graph_kernels = 436, .graph_host_nodes = 0, .prefill_ms = 146.312,
                              .proj_tflops = 746.3, .proj_alone_tflops = 768.4, .attn_tflops = 404.2,
                              .iscore_tflops = 440.1};
    char path[600];
    snprintf(path, sizeof path, "%s/bench.json", as_test_tmpdir());
    FILE *old = fopen(path, "w"); /* an earlier file is replaced whole */
    REQUIRE(old, "cannot create %s", path);
    fputs("{\"stale\": true, \"padding\": \"..........................................................\"}\n", old);
    fclose(old);
    AsError err = {0};
    REQUIRE(as_bench_json_write(path, &f, "--no-pdl --fusions rope,norm", &err) == 0, "write: %s", err.msg);
    const int left = entries_named(as_test_tmpdir(), "bench.json.tmp");
    CHECK(left == 0, "%d temporary files left behind", left);
    char *text = as_slurp(path, NULL);
    cJSON *j = cJSON_Parse(text);
    REQUIRE(j, "not JSON: %s", text ? text : "(unreadable)");
    free(text);
    CHECK(!cJSON_GetObjectItemCaseSensitive(j, "stale"), "the old file's content survived");
    static const struct {
        const char *key;
        double want;
    } fields[] = {{"copy_gbs", 4264.1},         {"gemm_tflops", 799.2},       {"decode_ms", 6.8915},
                  {"decode_wall_ms", 8.2049},   {"decode_floor_ms", 2.4221},  {"decode_graph_ms", 3.8764},
                  {"decode_graph_wall_ms", 3.8921}, {"graph_nodes", 471},     {"graph_kernels", 436},
                  {"graph_host_nodes", 0},      {"prefill_ms", 146.312},      {"proj_tflops", 746.3},
                  {"proj_alone_tflops", 768.4}, {"attn_tflops", 404.2},       {"iscore_tflops", 440.1}};
    for (size_t i = 0; i < sizeof fields / sizeof fields[0]; i++)
        CHECK(num(j, fields[i].key) == fields[i].want, "%s: %g, want %g", fields[i].key, num(j, fields[i].key),
              fields[i].want);
    CHECK(cJSON_GetArraySize(j) == (int)(sizeof fields / sizeof fields[0]) + 1, "%d keys", cJSON_GetArraySize(j));
    const cJSON *sw = cJSON_GetObjectItemCaseSensitive(j, "knobs");
    CHECK(cJSON_IsString(sw) && !strcmp(sw->valuestring, "--no-pdl --fusions rope,norm"), "knobs");
    cJSON_Delete(j);

    REQUIRE(as_bench_json_write(path, &f, NULL, &err) == 0, "write with the default knobs: %s", err.msg);
    text = as_slurp(path, NULL);
    j = cJSON_Parse(text);
    free(text);
    sw = cJSON_GetObjectItemCaseSensitive(j, "knobs");
    CHECK(cJSON_IsString(sw) && !strcmp(sw->valuestring, ""), "the default knobs: an empty string");
    cJSON_Delete(j);
}

TEST(bench_json_refuses_what_it_cannot_write)
{
    const AsBenchFigures f = {0};
    AsError err = {0};
    char path[600];
    snprintf(path, sizeof path, "%s/no-such-dir/bench.json", as_test_tmpdir());
    CHECK(as_bench_json_write(path, &f, "", &err) == AS_EBADINPUT && strstr(err.msg, "no-such-dir"),
          "a missing folder: '%s'", err.msg);
    char longp[1200];
    memset(longp, 'a', sizeof longp - 1);
    longp[sizeof longp - 1] = '\0';
    CHECK(as_bench_json_write(longp, &f, "", &err) == AS_EBADINPUT, "a path too long: '%s'", err.msg);
    CHECK(as_bench_json_write(NULL, &f, "", &err) == AS_EBADINPUT, "no path");
    /* a folder at the path: refused as a bad path (nothing created beside it), the folder left */
    snprintf(path, sizeof path, "%s/a-folder.json", as_test_tmpdir());
    REQUIRE(mkdir(path, 0700) == 0, "mkdir %s", path);
    CHECK(as_bench_json_write(path, &f, "", &err) == AS_EBADINPUT && strstr(err.msg, "a-folder.json"),
          "a folder at the path: '%s'", err.msg);
    const int left = entries_named(as_test_tmpdir(), "a-folder.json.tmp");
    CHECK(left == 0, "%d temporary files left behind", left);
    struct stat st;
    CHECK(stat(path, &st) == 0 && S_ISDIR(st.st_mode), "the folder is left as it was");
}

/* bench-engine refuses an output path it cannot write before any GPU work (and on a machine without
 * a GPU: the check comes before the device's), one line naming the path, exit 2; a good path is left
 * without a file or a temporary. */
TEST(bench_json_bench_engine_refuses_an_unwritable_output_up_front)
{
    AsCliResult *r = calloc(1, sizeof *r);
    REQUIRE(r, "out of memory");
    char path[600], good[600];
    snprintf(path, sizeof path, "%s/no-such-dir/b.svg", as_test_tmpdir());
    snprintf(good, sizeof good, "%s/b.json", as_test_tmpdir());
    as_cli_run(r, AS_ARGS("bench-engine", "tiny", "--json", good, "--svg", path));
    CHECK(r->status == AS_EBADINPUT && strstr(r->err, "no-such-dir/b.svg") && strchr(r->err, '\n') &&
              !strchr(r->err, '\n')[1],
          "--svg into a missing folder: exit %d, stderr: %s", r->status, r->err);
    CHECK(access(good, F_OK) != 0, "the JSON's path was written to");
    const int left = entries_named(as_test_tmpdir(), "b.json");
    CHECK(left == 0, "%d files beside the JSON's path", left);
    /* --trace's file the same way */
    snprintf(path, sizeof path, "%s/no-such-dir/step.json", as_test_tmpdir());
    as_cli_run(r, AS_ARGS("bench-engine", "tiny", "--prefill", "0", "--trace", path));
    CHECK(r->status == AS_EBADINPUT && strstr(r->err, "no-such-dir/step.json") && strchr(r->err, '\n') &&
              !strchr(r->err, '\n')[1],
          "--trace into a missing folder: exit %d, stderr: %s", r->status, r->err);
    free(r);
}
