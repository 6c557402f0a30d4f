/* The attnscope binary ($ATTNSCOPE_BIN, else ./build/attnscope): help, exit codes, one-line
 * errors, gen + info on the tiny preset. */
#include <cJSON.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "tests/harness.h"

static const char *bin(void)
{
    const char *b = getenv("ATTNSCOPE_BIN");
    return b && *b ? b : "./build/attnscope";
}

typedef struct {
    int status;
    char out[1 << 16], err[4096];
} Result;

static void slurp(const char *path, char *buf, size_t n)
{
    FILE *f = fopen(path, "rb");
    size_t k = f ? fread(buf, 1, n - 1, f) : 0;
    buf[k] = '\0';
    if (f)
        fclose(f);
}

/* Runs the binary with args (NULL-terminated); stdout and stderr captured. */
static void run(Result *r, const char *const *args)
{
    char out[600], err[600];
    snprintf(out, sizeof out, "%s/stdout", as_test_tmpdir());
    snprintf(err, sizeof err, "%s/stderr", as_test_tmpdir());
    const char *argv[32] = {bin()};
    int n = 1;
    for (; args[n - 1] && n < 31; n++)
        argv[n] = args[n - 1];
    argv[n] = NULL;
    fflush(stdout);
    pid_t pid = fork();
    REQUIRE(pid >= 0, "fork");
    if (pid == 0) {
        int fo = open(out, O_WRONLY | O_CREAT | O_TRUNC, 0644), fe = open(err, O_WRONLY | O_CREAT | O_TRUNC, 0644);
        if (fo < 0 || fe < 0 || dup2(fo, 1) < 0 || dup2(fe, 2) < 0)
            _exit(127);
        execv(argv[0], (char *const *)argv);
        _exit(127);
    }
    int st = 0;
    REQUIRE(waitpid(pid, &st, 0) == pid, "waitpid");
    r->status = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
    REQUIRE(r->status != 127, "cannot run %s (set ATTNSCOPE_BIN)", argv[0]);
    slurp(out, r->out, sizeof r->out);
    slurp(err, r->err, sizeof r->err);
}

static int lines(const char *s)
{
    int n = 0;
    for (; *s; s++)
        n += *s == '\n';
    return n;
}

#define ARGS(...) ((const char *const[]){__VA_ARGS__, NULL})

TEST(cli_help_and_version_exit_0)
{
    static Result r;
    run(&r, ARGS("--help"));
    CHECK(r.status == 0 && strstr(r.out, "gen") && strstr(r.out, "info") && strstr(r.out, "devices"),
          "--help lists the commands, exit 0 (status %d)", r.status);
    run(&r, (const char *const[]){NULL});
    CHECK(r.status == 0 && strstr(r.out, "usage: attnscope"), "no command: the help, exit 0 (status %d)", r.status);
    run(&r, ARGS("help", "gen"));
    CHECK(r.status == 0 && strstr(r.out, "usage: attnscope gen") && strstr(r.out, "--seed"),
          "help gen: gen's usage, exit 0 (status %d)", r.status);
    run(&r, ARGS("info", "--help"));
    CHECK(r.status == 0 && strstr(r.out, "usage: attnscope info") && strstr(r.out, "--max-seq"),
          "info --help: info's usage, exit 0 (status %d)", r.status);
    run(&r, ARGS("--version"));
    CHECK(r.status == 0 && !strncmp(r.out, "attnscope ", 10), "--version, exit 0: %s", r.out);
    run(&r, ARGS("devices"));
    CHECK(r.status == 0 && r.out[0], "devices: a line either way, exit 0: %s", r.out);
}

static void expect_usage_error(const char *what, const char *const *args, const char *says)
{
    static Result r;
    run(&r, args);
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
    run(&r, ARGS("gen", "--preset", "tiny", "--seed", "3", "-o", dir));
    REQUIRE(r.status == 0, "gen tiny: status %d, %s", r.status, r.err);
    run(&r, ARGS("info", dir));
    CHECK(r.status == 0, "info: status %d, %s", r.status, r.err);
    CHECK(strstr(r.out, "kv idx cand-src") && strstr(r.out, "sel<-5 (reuse)") && strstr(r.out, "idx cand-use") &&
              strstr(r.out, "window only"),
          "info prints each layer's role line");
    CHECK(strstr(r.out, "layers.9.attn.indexer.wq_b.weight") && strstr(r.out, "BF16") && strstr(r.out, "[128, 32]"),
          "info lists the tensors with dtype and shape");
    CHECK(strstr(r.out, "digest") && strstr(r.out, "total "), "info shows the digest and the total size");
    run(&r, ARGS("info", dir, "--json"));
    cJSON *j = cJSON_Parse(r.out);
    CHECK(r.status == 0 && j, "info --json prints JSON (status %d)", r.status);
    const cJSON *roles = cJSON_GetObjectItem(j, "roles"), *tensors = cJSON_GetObjectItem(j, "tensors");
    CHECK(cJSON_GetArraySize(roles) == 10 && cJSON_GetArraySize(tensors) > 90, "--json: 10 roles, %d tensors",
          cJSON_GetArraySize(tensors));
    const cJSON *cfg = cJSON_GetObjectItem(j, "config");
    CHECK(cJSON_GetObjectItem(cfg, "hidden_size") && cJSON_GetObjectItem(cfg, "hidden_size")->valueint == 64,
          "--json: the config in Hugging Face spelling");
    cJSON_Delete(j);
    run(&r, ARGS("info", dir, "--max-seq", "64", "--json"));
    CHECK(r.status == 0 && strstr(r.out, "\"max_seq_len\":\t64"), "--max-seq 64 shows in the config");
}

TEST(cli_bad_models_exit_2_naming_the_path)
{
    static Result r;
    char p[512];
    snprintf(p, sizeof p, "%s/no/such/model", as_test_tmpdir());
    run(&r, ARGS("info", p));
    CHECK(r.status == 2 && lines(r.err) == 1 && strstr(r.err, p), "missing model: exit 2, one line naming %s: %s", p,
          r.err);
    snprintf(p, sizeof p, "%s/tiny", as_test_tmpdir());
    run(&r, ARGS("gen", "--preset", "tiny", "-o", p));
    REQUIRE(r.status == 0, "gen: %s", r.err);
    char file[600];
    snprintf(file, sizeof file, "%s/model.safetensors", p);
    REQUIRE(truncate(file, 1000) == 0, "truncate");
    run(&r, ARGS("info", p));
    CHECK(r.status == 2 && lines(r.err) == 1 && strstr(r.err, file), "truncated weights: exit 2, one line: %s", r.err);
    snprintf(file, sizeof file, "%s/config.json", p);
    FILE *f = fopen(file, "w");
    REQUIRE(f, "config");
    fputs("{\"hidden_size\": \"big\"}", f);
    fclose(f);
    run(&r, ARGS("info", p));
    CHECK(r.status == 2 && lines(r.err) == 1 && strstr(r.err, "hidden_size") && strstr(r.err, file),
          "bad config: exit 2, one line naming the file and field: %s", r.err);
    run(&r, ARGS("gen", "--config", file, "-o", p));
    CHECK(r.status == 2 && lines(r.err) == 1 && strstr(r.err, "hidden_size"), "gen --config with a bad config: %s",
          r.err);
}
