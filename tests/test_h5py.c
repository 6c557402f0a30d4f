/* Dumps written with h5py alone, as another engine's user would write them (docs/DUMP_FORMAT.md),
 * checked by `attnscope check`: tests/h5py_dump.py writes values attnscope computed holding only
 * x, q, idx, o and out (check passes; one element of o moved is a mismatch at exactly that step,
 * layer and element, and nothing else is); tests/h5py_doc_example.py runs the page's "Writing one
 * with h5py" example as written. Needs python3 with h5py and numpy (scripts/deps.sh installs
 * python3-h5py and python3-numpy; $ATTNSCOPE_PYTHON picks the interpreter: tests/lib/python.h). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "tests/lib/cli_util.h"
#include "tests/lib/harness.h"
#include "tests/lib/python.h"

/* Runs `python script args` (stdout and stderr into *out); returns the exit status. */
static int run_py(const char *args, char **out)
{
    char log[600], cmd[2400];
    snprintf(log, sizeof log, "%s/py.log", as_test_tmpdir());
    snprintf(cmd, sizeof cmd, "'%s' %s >'%s' 2>&1", as_test_python(), args, log);
    fflush(NULL);
    int st = system(cmd);
    *out = as_slurp(log, NULL);
    return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

static void need_repo_file(const char *path)
{
    if (access(path, R_OK))
        as_test_skip("%s not found: run the tests from the repository root", path);
}

/* The lines of out as notes (the check's summary, for the record). */
static void note_lines(const char *what, const char *out)
{
    as_test_note("%s:", what);
    const char *p = out;
    while (p && *p) {
        const char *e = strchr(p, '\n');
        int len = e ? (int)(e - p) : (int)strlen(p);
        as_test_note("  %.*s", len, p);
        p = e ? e + 1 : NULL;
    }
}

TEST(h5py_dump_of_x_q_idx_o_out_checks)
{
    as_test_python();
    need_repo_file("tests/h5py_dump.py");
    char src[600], mine[700], moved[700], bare[700], args[2200], *out;
    as_test_faithful_dump(src, sizeof src);
    snprintf(mine, sizeof mine, "%s/mine.h5", as_test_tmpdir());
    snprintf(args, sizeof args, "tests/h5py_dump.py '%s' '%s' --tensors x,q,idx,o,out", src, mine);
    int rc = run_py(args, &out);
    REQUIRE(rc == 0, "h5py_dump.py: exit %d: %s", rc, out ? out : "");
    free(out);
    AsCliResult *r = malloc(sizeof *r);
    /* no --model: the dump names its weights (tiny-...-s1/model.safetensors), found in the cache */
    as_cli_run(r, AS_ARGS("check", mine));
    note_lines("attnscope check mine.h5 (x, q, idx, o, out written by h5py)", r->out);
    CHECK(r->status == 0 && strstr(r->out, "40 layer runs: 40 pass") && strstr(r->out, "compared: x q idx o out") &&
              strstr(r->out, "absent (not stored by the checked side, not judged): qr") &&
              strstr(r->out, "note: the dump has no weights_digest"),
          "the h5py dump checks clean: exit %d\n%s%s", r->status, r->out, r->err);

    /* one element of o moved: step 2, layer 5, token 0, head 2, channel 7 (o is [1][4][64]) */
    snprintf(moved, sizeof moved, "%s/moved.h5", as_test_tmpdir());
    snprintf(args, sizeof args, "tests/h5py_dump.py '%s' '%s' --tensors x,q,idx,o,out --move 2 5 o %d 0.5", src, moved,
             (0 * 4 + 2) * 64 + 7);
    rc = run_py(args, &out);
    REQUIRE(rc == 0, "h5py_dump.py --move: exit %d: %s", rc, out ? out : "");
    free(out);
    as_cli_run(r, AS_ARGS("check", moved, "-q"));
    note_lines("attnscope check moved.h5 (o of step 2, layer 5 moved at one element)", r->out);
    CHECK(r->status == 1 && strstr(r->out, "39 pass, 0 with quantisation flips, 0 near-ties, 0 tie-order, 0 inherited, "
                                          "1 mismatches") &&
              strstr(r->out, "MISMATCH step 2 (decode, pos 10) layer 5: o: max |diff|") &&
              strstr(r->out, "at token 0, head 2, channel 7"),
          "the moved element is the one mismatch: exit %d\n%s%s", r->status, r->out, r->err);

    /* the layer attributes left out: the reader takes SPEC 3's */
    snprintf(bare, sizeof bare, "%s/bare.h5", as_test_tmpdir());
    snprintf(args, sizeof args, "tests/h5py_dump.py '%s' '%s' --no-attrs --tensors x,q,idx,o,out,csel,iscore,kv", src,
             bare);
    rc = run_py(args, &out);
    REQUIRE(rc == 0, "h5py_dump.py --no-attrs: exit %d: %s", rc, out ? out : "");
    free(out);
    as_cli_run(r, AS_ARGS("check", bare, "-q"));
    CHECK(r->status == 0 && strstr(r->out, "40 pass"), "without layer attributes: exit %d\n%s%s", r->status, r->out,
          r->err);
    free(r);
}

TEST(h5py_doc_example_runs_as_written)
{
    as_test_python();
    need_repo_file("tests/h5py_doc_example.py");
    need_repo_file("docs/DUMP_FORMAT.md");
    char src[600], mine[700], args[2200], *out;
    as_test_faithful_dump(src, sizeof src);
    snprintf(args, sizeof args, "tests/h5py_doc_example.py docs/DUMP_FORMAT.md '%s' '%s'", src, as_test_tmpdir());
    int rc = run_py(args, &out);
    CHECK(rc == 0 && out && strstr(out, "ran the example"), "the example: exit %d: %s", rc, out ? out : "");
    free(out);
    snprintf(mine, sizeof mine, "%s/mine.h5", as_test_tmpdir());
    AsCliResult *r = malloc(sizeof *r);
    as_cli_run(r, AS_ARGS("check", mine, "--model", "tiny"));
    note_lines("attnscope check mine.h5 --model tiny (the DUMP_FORMAT.md example)", r->out);
    CHECK(r->status == 0 && strstr(r->out, "40 layer runs: 40 pass") && strstr(r->err, "no weights_digest"),
          "the example's dump checks clean: exit %d\n%s%s", r->status, r->out, r->err);
    as_cli_run(r, AS_ARGS("diff", mine, src, "--side-a", "mine", "--side-b", "ref"));
    CHECK(r->status == 0 && strstr(r->out, "result     all within tolerance") && strstr(r->out, "tensors    x q idx o out"),
          "the example's dump diffs clean against attnscope's: exit %d\n%s%s", r->status, r->out, r->err);
    free(r);
}
