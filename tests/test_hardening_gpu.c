/* Out of GPU memory, forced on any GPU through --gpu-mem-limit (engine/mem_limit.h):
 * at set-up and in the middle of a run, `attnscope run` says what it asked for and what was
 * free, exits 3, and leaves no dump behind. Needs a CUDA device (skipped elsewhere). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "tests/lib/cli_util.h"
#include "tests/lib/harness.h"

static void write_script(const char *path, const char *steps, const char *dump)
{
    FILE *f = fopen(path, "w");
    REQUIRE(f, "create %s", path);
    fprintf(f, "{\"model\": \"tiny\", \"max_seq\": 8192, \"steps\": %s%s%s%s}", steps, dump ? ", \"dump\": {\"path\": \"" : "",
            dump ? dump : "", dump ? "\", \"layers\": [0]}" : "");
    fclose(f);
}

static int run_limited(AsCliResult *r, const char *script, int limit_mb)
{
    char v[32];
    snprintf(v, sizeof v, "%d", limit_mb);
    as_cli_run(r, AS_ARGS("run", "-q", "--gpu-mem-limit", v, script));
    return r->status;
}

GPU_TEST(hardening_gpu_out_of_memory_at_setup_and_mid_run_exit_3)
{
    setenv("ATTNSCOPE_CACHE", as_test_tmpdir(), 1);
    AsCliResult *r = malloc(sizeof *r);
    REQUIRE(r, "memory");
    char one[600], two[600], dump[600];
    snprintf(one, sizeof one, "%s/one.json", as_test_tmpdir());
    snprintf(two, sizeof two, "%s/two.json", as_test_tmpdir());
    snprintf(dump, sizeof dump, "%s/oom.h5", as_test_tmpdir());
    write_script(one, "[{\"prefill\": 1}]", NULL);
    /* a second prefill of 4096 tokens grows the work buffers (engine/work.c) by about 50 MiB:
     * 4096 x 4096 scores (bf16) and candidate flags, and the per-token buffers */
    write_script(two, "[{\"prefill\": 1}, {\"prefill\": 4096}]", dump);

    /* set-up: 1 MiB holds no more than the first few weights */
    int st = run_limited(r, one, 1);
    CHECK(st == 3 && strstr(r->err, "out of GPU memory allocating") && strstr(r->err, "asked") &&
              strstr(r->err, "free of 1.0 MiB"),
          "1 MiB: exit %d (want 3), stderr: %s", st, r->err);
    as_test_note("set-up, 1 MiB: %s", r->err);

    /* the least limit (in MiB) that one prefill token runs in: set-up and a 1-token step fit */
    int lo = 1, hi = 8192;
    REQUIRE(run_limited(r, one, hi) == 0, "prefill 1 within %d MiB: exit %d: %s", hi, r->status, r->err);
    while (hi - lo > 1) {
        int mid = lo + (hi - lo) / 2;
        if (run_limited(r, one, mid) == 0)
            hi = mid;
        else
            lo = mid;
    }
    as_test_note("set-up and a 1-token prefill need %d MiB", hi);

    /* mid-run: the same 1-token prefill passes, then the 4096-token one does not fit */
    st = run_limited(r, two, hi + 16);
    CHECK(st == 3 && strstr(r->err, "out of GPU memory allocating the work buffer") && strstr(r->err, "asked"),
          "%d MiB, prefill 1 then 4096: exit %d (want 3), stderr: %s", hi + 16, st, r->err);
    CHECK(access(dump, F_OK) != 0, "no dump left after the failed run");
    as_test_note("mid-run, %d MiB: %s", hi + 16, r->err);
    free(r);
}
