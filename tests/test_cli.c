/* The attnscope binary ($ATTNSCOPE_BIN, else ./build/attnscope): help, exit codes, one-line
 * errors, gen + info on the tiny preset. */
#include <cJSON.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "tests/lib/cli_util.h"
#include "tests/lib/harness.h"

typedef AsCliResult Result;

static int lines(const char *s)
{
    int n = 0;
    for (; *s; s++)
        n += *s == '\n';
    return n;
}

#define ARGS AS_ARGS

TEST(cli_help_and_version_exit_0)
{
    static Result r;
    as_cli_run(&r, ARGS("--help"));
    CHECK(r.status == 0 && strstr(r.out, "gen") && strstr(r.out, "info") && strstr(r.out, "devices"),
          "--help lists the commands, exit 0 (status %d)", r.status);
    as_cli_run(&r, (const char *const[]){NULL});
    CHECK(r.status == 0 && strstr(r.out, "usage: attnscope"), "no command: the help, exit 0 (status %d)", r.status);
    as_cli_run(&r, ARGS("help", "gen"));
    CHECK(r.status == 0 && strstr(r.out, "usage: attnscope gen") && strstr(r.out, "--seed"),
          "help gen: gen's usage, exit 0 (status %d)", r.status);
    as_cli_run(&r, ARGS("info", "--help"));
    CHECK(r.status == 0 && strstr(r.out, "usage: attnscope info") && strstr(r.out, "--max-seq"),
          "info --help: info's usage, exit 0 (status %d)", r.status);
    /* every command's help (the commands --help lists, "  name  summary" lines) ends its last line
     * (bench-engine's, bench-ref's and check's did not) */
    as_cli_run(&r, ARGS("--help"));
    char names[32][32];
    int n = 0;
    const char *line = strstr(r.out, "commands:\n");
    for (line = line ? strchr(line, '\n') + 1 : NULL; line && !strncmp(line, "  ", 2) && n < 32;
         line = strchr(line, '\n') ? strchr(line, '\n') + 1 : NULL) {
        const size_t len = strspn(line + 2, "abcdefghijklmnopqrstuvwxyz-");
        if (len > 0 && len < sizeof names[0])
            snprintf(names[n++], sizeof names[0], "%.*s", (int)len, line + 2);
    }
    CHECK(n >= 10, "--help listed %d commands", n);
    for (int i = 0; i < n; i++) {
        as_cli_run(&r, ARGS(names[i], "--help"));
        const size_t len = strlen(r.out);
        CHECK(r.status == 0 && len > 0 && r.out[len - 1] == '\n', "%s --help: status %d, last character %#x", names[i],
              r.status, len ? (unsigned)(unsigned char)r.out[len - 1] : 0u);
    }
    as_cli_run(&r, ARGS("--version"));
    CHECK(r.status == 0 && !strncmp(r.out, "attnscope ", 10), "--version, exit 0: %s", r.out);
    as_cli_run(&r, ARGS("devices"));
    CHECK(r.status == 0 && r.out[0], "devices: a line either way, exit 0: %s", r.out);
}

static void expect_usage_error(const char *what, const char *const *args, const char *says)
{
    static Result r;
    as_cli_run(&r, args);
    CHECK(r.status == 2 && lines(r.err) == 1 && strstr(r.err, says) && !r.out[0],
          "%s: exit 2 with one line containing \"%s\" (status %d, stderr: %s)", what, says, r.status, r.err);
}

TEST(cli_mistakes_exit_2_with_one_line)
{
    expect_usage_error("unknown command", ARGS("frobnicate"), "attnscope: unknown command 'frobnicate'");
    expect_usage_error("unknown top-level option", ARGS("--frob"), "unknown option '--frob'");
    expect_usage_error("help for an unknown command", ARGS("help", "frob"), "unknown command 'frob'");
    expect_usage_error("unknown option", ARGS("gen", "--foo"),
                       "attnscope gen: unknown option '--foo' (see attnscope gen --help)");
    expect_usage_error("unknown --opt=value", ARGS("gen", "--foo=3"), "unknown option '--foo'");
    expect_usage_error("bad integer", ARGS("gen", "--preset", "tiny", "--seed", "abc", "-o", "x"),
                       "--seed: 'abc' is not");
    expect_usage_error("negative seed", ARGS("gen", "--preset", "tiny", "--seed", "-1", "-o", "x"), "--seed: '-1'");
    expect_usage_error("missing value", ARGS("gen", "--preset", "tiny", "-o"), "-o");
    expect_usage_error("missing value", ARGS("gen", "--seed"), "--seed needs a value");
    expect_usage_error("no preset or config", ARGS("gen", "-o", "x"), "--preset");
    expect_usage_error("both preset and config", ARGS("gen", "--preset", "tiny", "--config", "c.json", "-o", "x"),
                       "one of");
    expect_usage_error("unknown preset", ARGS("gen", "--preset", "huge", "-o", "x"), "unknown preset 'huge'");
    expect_usage_error("info without a model", ARGS("info"), "missing the model");
    expect_usage_error("info --max-seq out of range", ARGS("info", "x", "--max-seq", "0"), "--max-seq: '0'");
    expect_usage_error("info, two models", ARGS("info", "a", "b"), "unexpected argument 'b'");
    expect_usage_error("a flag with a value", ARGS("info", "a", "--json=yes"), "--json takes no value");
}

TEST(cli_gen_then_info_shows_the_role_table)
{
    static Result r;
    char dir[512];
    snprintf(dir, sizeof dir, "%s/tiny", as_test_tmpdir());
    as_cli_run(&r, ARGS("gen", "--preset", "tiny", "--seed", "3", "-o", dir));
    REQUIRE(r.status == 0, "gen tiny: status %d, %s", r.status, r.err);
    as_cli_run(&r, ARGS("info", dir));
    CHECK(r.status == 0, "info: status %d, %s", r.status, r.err);
    CHECK(strstr(r.out, "kv idx cand-src") && strstr(r.out, "sel<-5 (reuse)") && strstr(r.out, "idx cand-use") &&
              strstr(r.out, "window only"),
          "info prints each layer's role line");
    CHECK(strstr(r.out, "layers.9.attn.indexer.wq_b.weight") && strstr(r.out, "BF16") && strstr(r.out, "[128, 32]"),
          "info lists the tensors with dtype and shape");
    CHECK(strstr(r.out, "digest") && strstr(r.out, "total "), "info shows the digest and the total size");
    as_cli_run(&r, ARGS("info", dir, "--json"));
    cJSON *j = cJSON_Parse(r.out);
    CHECK(r.status == 0 && j, "info --json prints JSON (status %d)", r.status);
    const cJSON *roles = cJSON_GetObjectItem(j, "roles"), *tensors = cJSON_GetObjectItem(j, "tensors");
    CHECK(cJSON_GetArraySize(roles) == 10 && cJSON_GetArraySize(tensors) > 90, "--json: 10 roles, %d tensors",
          cJSON_GetArraySize(tensors));
    const cJSON *cfg = cJSON_GetObjectItem(j, "config");
    CHECK(cJSON_GetObjectItem(cfg, "hidden_size") && cJSON_GetObjectItem(cfg, "hidden_size")->valueint == 64,
          "--json: the config in Hugging Face spelling");
    cJSON_Delete(j);
    as_cli_run(&r, ARGS("info", dir, "--max-seq", "64", "--json"));
    CHECK(r.status == 0 && strstr(r.out, "\"max_seq_len\":\t64"), "--max-seq 64 shows in the config");
}

TEST(cli_bad_models_exit_2_naming_the_path)
{
    static Result r;
    char p[512];
    snprintf(p, sizeof p, "%s/no/such/model", as_test_tmpdir());
    as_cli_run(&r, ARGS("info", p));
    CHECK(r.status == 2 && lines(r.err) == 1 && strstr(r.err, p), "missing model: exit 2, one line naming %s: %s", p,
          r.err);
    snprintf(p, sizeof p, "%s/tiny", as_test_tmpdir());
    as_cli_run(&r, ARGS("gen", "--preset", "tiny", "-o", p));
    REQUIRE(r.status == 0, "gen: %s", r.err);
    char file[600];
    snprintf(file, sizeof file, "%s/model.safetensors", p);
    REQUIRE(truncate(file, 1000) == 0, "truncate");
    as_cli_run(&r, ARGS("info", p));
    CHECK(r.status == 2 && lines(r.err) == 1 && strstr(r.err, file), "truncated weights: exit 2, one line: %s", r.err);
    snprintf(file, sizeof file, "%s/config.json", p);
    FILE *f = fopen(file, "w");
    REQUIRE(f, "config");
    fputs("{\"hidden_size\": \"big\"}", f);
    fclose(f);
    as_cli_run(&r, ARGS("info", p));
    CHECK(r.status == 2 && lines(r.err) == 1 && strstr(r.err, "hidden_size") && strstr(r.err, file),
          "bad config: exit 2, one line naming the file and field: %s", r.err);
    as_cli_run(&r, ARGS("gen", "--config", file, "-o", p));
    CHECK(r.status == 2 && lines(r.err) == 1 && strstr(r.err, "hidden_size"), "gen --config with a bad config: %s",
          r.err);
}
