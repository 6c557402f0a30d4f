/* bench-engine's --precision both (cli/cmd_bench_engine.c), on any machine: it writes no per-run files
 * (--json, --svg, --trace refused with one line before any work, exit 2), its help names it, and a
 * precision that is neither bf16, fp8, auto nor both is refused. */
#include <string.h>

#include "tests/lib/cli_util.h"
#include "tests/lib/harness.h"

static int lines(const char *s)
{
    int n = 0;
    for (; *s; s++)
        n += *s == '\n';
    return n;
}

static void expect_refused(const char *what, const char *const *args, const char *says)
{
    static AsCliResult r;
    as_cli_run(&r, args);
    CHECK(r.status == 2 && lines(r.err) == 1 && strstr(r.err, says),
          "%s: exit 2 with one line containing \"%s\" (status %d, stderr: %s)", what, says, r.status, r.err);
}

TEST(bench_engine_cli_precision_both)
{
    expect_refused("both with --json", AS_ARGS("bench-engine", "--precision", "both", "--json", "x.json"),
                   "--precision both");
    expect_refused("both with --svg", AS_ARGS("bench-engine", "--precision", "both", "--svg", "x.svg"),
                   "--precision both");
    expect_refused("both with --trace", AS_ARGS("bench-engine", "--precision", "both", "--trace", "x.json"),
                   "--precision both");
    expect_refused("an unknown precision", AS_ARGS("bench-engine", "--precision", "fp16"), "fp16");
    static AsCliResult r;
    as_cli_run(&r, AS_ARGS("bench-engine", "--help"));
    CHECK(r.status == 0 && strstr(r.out, "fp8|bf16|both") && strstr(r.out, "--precision both"),
          "bench-engine --help names --precision both (status %d)", r.status);
}
